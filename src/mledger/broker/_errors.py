"""Broker conditions that have no class in :mod:`mledger.core`; each subclasses the closest one.

Pulsar's broker exceptions, the HTTP status its admin API maps them to and the ``ServerError``
its binary protocol answers (``BrokerServiceException.getClientErrorCode``):

=========================  ======================================  ====  ====================
class                      Pulsar                                  HTTP  ServerError
=========================  ======================================  ====  ====================
TopicAlreadyExistsError    ``NamingException`` / 409 Conflict      409   ServiceNotReady
TopicBusyError             ``TopicBusyException``                  412   ServiceNotReady
SubscriptionBusyError      ``SubscriptionBusyException``           412   ConsumerBusy
ConsumerBusyError          ``ConsumerBusyException``               409   ConsumerBusy
ProducerBusyError          ``ProducerBusyException`` / naming      409   ProducerBusy
AlreadyClosedError         ``AlreadyClosedException``              412   ServiceNotReady
MessageDupUnknownError     ``MessageDupUnknownException``          409   PersistenceError
TopicFencedError           ``TopicFencedException``                412   ServiceNotReady
PersistenceError           ``PersistenceException``                500   PersistenceError
MetadataStoreError         ``MetadataStoreException``              500   ServiceNotReady
TopicTerminatedError       ``TopicTerminatedException``            412   TopicTerminatedError
ClockNotManualError        (mledger's: the clock over REST)        409   ServiceNotReady
InvalidNameError           ``NamedEntity.checkName`` refusing a    412   NotAllowedError
                           tenant, namespace or cluster name
=========================  ======================================  ====  ====================

A store raises its backend's own errors (``sqlite3.OperationalError`` for a full disk or an I/O
error); :func:`store_failures` turns them into one of these where a broker call meets them, so
that every front end answers them as Pulsar does and no store error escapes as an unexpected one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from ..core import ManagedLedgerTerminatedError, MLedgerError, NotAllowedError, PreconditionFailedError, ServerError

__all__ = [
    "AlreadyClosedError",
    "ClockNotManualError",
    "ConsumerBusyError",
    "InvalidNameError",
    "MessageDupUnknownError",
    "MetadataStoreError",
    "PersistenceError",
    "ProducerBusyError",
    "SubscriptionBusyError",
    "TopicAlreadyExistsError",
    "TopicBusyError",
    "TopicFencedError",
    "TopicTerminatedError",
    "store_failures",
]

log = logging.getLogger(__name__)


class ClockNotManualError(MLedgerError):
    """The broker's clock was asked to advance while it follows the system clock (409 over REST:
    the broker's state, not the request, is what refuses it)."""

    http_status = 409


class InvalidNameError(PreconditionFailedError):
    """A tenant, namespace or cluster name breaks Pulsar's naming rule
    (:func:`~mledger.broker.check_tenant_name` and its siblings): 412 with Pulsar's reason,
    "Tenant name is not valid", "Namespace name is not valid" or "Cluster name is not valid",
    followed by the name and what is wrong with it. The binary protocol answers
    ``NotAllowedError``, as it answered the 400 this error replaced (Pulsar's ``ServerCnx`` has
    no answer: its ``NamespaceName.get`` throws out of the handler)."""

    server_error = ServerError.NotAllowedError


class TopicAlreadyExistsError(MLedgerError):
    """``create_topic`` named a topic that exists (Pulsar: 409 "This topic already exists")."""

    http_status = 409


class TopicBusyError(PreconditionFailedError):
    """The topic has connected producers or consumers and the operation needs it idle."""


class SubscriptionBusyError(PreconditionFailedError):
    """The subscription has connected consumers (delete), or is of a different type (subscribe)."""

    server_error = ServerError.ConsumerBusy


class ConsumerBusyError(NotAllowedError):
    """An exclusive subscription already has its consumer, or the consumer name is taken."""

    http_status = 409
    server_error = ServerError.ConsumerBusy


class ProducerBusyError(NotAllowedError):
    """A producer with this name is already connected to the topic."""

    http_status = 409
    server_error = ServerError.ProducerBusy


class AlreadyClosedError(PreconditionFailedError):
    """The producer, consumer, subscription, topic or broker was closed."""


class MessageDupUnknownError(MLedgerError):
    """Deduplication cannot tell yet whether the message is a duplicate; the publish was refused."""

    http_status = 409
    server_error = ServerError.PersistenceError


class TopicFencedError(PreconditionFailedError):
    """A write of the topic failed; publishes are refused until its pending writes completed
    (Pulsar's ``TopicFencedException``). Retry: the fence lifts by itself."""


class PersistenceError(MLedgerError):
    """The store refuses writes (e.g. a full disk): a write of the topic failed and a probe
    still fails (Pulsar's ``PersistenceException``). Retry: it clears once the store accepts
    writes again."""

    http_status = 500
    server_error = ServerError.PersistenceError


class MetadataStoreError(MLedgerError):
    """A read of the metadata store failed while the broker looked a topic up (Pulsar's
    ``MetadataStoreException``, answered ``ServiceNotReady`` by ``ServerCnx``'s partitioned
    metadata request and by older brokers' lookups). Retry: it clears once the store reads again."""


@contextmanager
def store_failures(error: type[PersistenceError | MetadataStoreError], what: str) -> Iterator[None]:
    """Raise ``error("<what>: <the store's error>")`` from any exception of the block that is
    not an :class:`~mledger.core.MLedgerError` (those pass unchanged): a store raises its
    backend's errors, which the broker's callers cannot know. Logs one warning line, without a
    traceback, per failure (Pulsar's ``Failed to create topic``); the original exception stays
    chained as ``__cause__``. Pulsar's model: ``BrokerService.createPersistentTopic`` completes a
    failed managed-ledger open with a ``PersistenceException``."""
    try:
        yield
    except MLedgerError:
        raise
    except Exception as exc:
        log.warning("%s: %s: %s", what, type(exc).__name__, exc)
        raise error(f"{what}: {exc}") from exc


class TopicTerminatedError(ManagedLedgerTerminatedError):
    """The topic was terminated: no producer may attach and nothing more is published (Pulsar's
    ``TopicTerminatedException``; clients get ``TopicTerminatedError``)."""
