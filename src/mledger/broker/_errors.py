"""Broker conditions that have no class in :mod:`mledger.core._errors`; each subclasses the closest one.

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
TopicTerminatedError       ``TopicTerminatedException``            412   TopicTerminatedError
=========================  ======================================  ====  ====================
"""

from __future__ import annotations

from ..core._errors import (
    ManagedLedgerTerminatedError,
    MLedgerError,
    NotAllowedError,
    PreconditionFailedError,
    ServerError,
)

__all__ = [
    "AlreadyClosedError",
    "ConsumerBusyError",
    "MessageDupUnknownError",
    "PersistenceError",
    "ProducerBusyError",
    "SubscriptionBusyError",
    "TopicAlreadyExistsError",
    "TopicBusyError",
    "TopicFencedError",
    "TopicTerminatedError",
]


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


class TopicTerminatedError(ManagedLedgerTerminatedError):
    """The topic was terminated: no producer may attach and nothing more is published (Pulsar's
    ``TopicTerminatedException``; clients get ``TopicTerminatedError``)."""
