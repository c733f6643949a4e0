"""The publish-path hook for message deduplication (PIP-6, docs/dedup.md).

Every topic (each partition of a partitioned topic) owns one :class:`Deduplication` object.
The pipelined publish path of :meth:`Topic.publish_entries
<mledger.broker.Topic.publish_entries>` is (Pulsar's ``PersistentTopic``)::

    under the publish lock (so the hook sees publishes in append order):
        verdict = dedup.check(ctx)              # before the append
        DUPLICATE -> nothing is written; the producer gets MessageId(-1, -1)
        UNKNOWN   -> MessageDupUnknownError, nothing is written
        NOT_DUPLICATE -> queued on the managed ledger (the lock is not held across the write)
    later, on the ledger's writer thread, in append order:
        on success: dedup.record_persisted(ctx, position), then the producer hears
        on failure: the topic is fenced; once its pending writes completed,
                    dedup.record_failed(ctx) for each failed publish, and the fence lifts

Producers report themselves with :meth:`Deduplication.producer_added` / ``producer_removed``;
a new producer without an ``initial_sequence_id`` continues from
:meth:`Deduplication.last_sequence_id` (Pulsar's ``ProducerSuccess.lastSequenceId``).
:meth:`Deduplication.take_snapshot` and :meth:`Deduplication.purge_inactive_producers` are fired
by the broker's timers (:mod:`mledger.broker._monitors`) and :meth:`Deduplication.close` when the
topic closes.

Which object a topic gets: ``Broker(dedup_factory=...)`` if given; else, with
``BrokerConfig.deduplication_enabled``, ``mledger.broker.MessageDeduplication(topic)``;
else :class:`NoDeduplication`.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple, Protocol, runtime_checkable

from ..codec import EntryMetadata
from ..core import Clock, Position, TimerQueue
from ._config import BrokerConfig

__all__ = [
    "DEDUPLICATION_CURSOR_NAME",
    "BrokerSettings",
    "DedupVerdict",
    "Deduplication",
    "MetadataNeeds",
    "NoDeduplication",
    "PublishContext",
]


DEDUPLICATION_CURSOR_NAME = "pulsar.dedup"
"""The deduplication layer's cursor (Pulsar's ``PersistentTopic.DEDUPLICATION_CURSOR_NAME``)."""


class BrokerSettings(Protocol):
    """What a topic's parts read from their broker: its configuration, its clock and the
    queue of its broker-semantic timers (a subscription arms its delayed-delivery timer there)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def timers(self) -> TimerQueue: ...


class DedupVerdict(Enum):
    """Pulsar's ``MessageDupStatus``."""

    NOT_DUPLICATE = "NotDup"
    DUPLICATE = "Dup"
    UNKNOWN = "Unknown"


class PublishContext(NamedTuple):
    """What the hook learns about one publish (one entry: a message or a whole batch).

    ``sequence_id`` is the first message's, ``highest_sequence_id`` the last one's (equal for a
    single message); ``metadata`` is exactly what will be stored. An immutable named tuple
    (one is made per published entry).
    """

    topic: str
    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    metadata: EntryMetadata


class MetadataNeeds(Enum):
    """How much of a publish's ``MessageMetadata`` a deduplication's :meth:`Deduplication.check`
    reads, so a front end that has the metadata as bytes builds no more of
    :class:`~mledger.codec.EntryMetadata` than that (the stored bytes are the producer's
    either way). A hook declares it as its ``metadata_needs`` class attribute; a hook that
    does not is given :attr:`ALL`."""

    NOTHING = "nothing"
    """``check`` reads no metadata (deduplication off)."""
    CHUNK_FIELDS = "chunk fields"
    """``check`` reads ``chunk_id`` and ``num_chunks`` only (None for an unchunked message)."""
    ALL = "all"
    """``check`` may read any field."""


@runtime_checkable
class Deduplication(Protocol):
    """A topic's deduplication state, consulted before every append and told after it."""

    def check(self, ctx: PublishContext) -> DedupVerdict:
        """Decide whether the publish is a duplicate (and record it as pushed if not)."""
        ...

    def record_persisted(self, ctx: PublishContext, position: Position) -> None:
        """The publish was appended at ``position``."""
        ...

    def record_failed(self, ctx: PublishContext) -> None:
        """The append of a publish that ``check`` accepted failed."""
        ...

    def producer_added(self, producer_name: str) -> None:
        """A producer connected to the topic."""
        ...

    def producer_removed(self, producer_name: str) -> None:
        """A producer disconnected."""
        ...

    def last_sequence_id(self, producer_name: str) -> int:
        """The highest persisted sequence id of ``producer_name``, -1 when unknown."""
        ...

    def take_snapshot(self) -> bool:
        """The timed snapshot check (Pulsar's ``checkDeduplicationSnapshot``), fired by the
        broker's ``checkDeduplicationSnapshot`` timer; whether a snapshot was written."""
        ...

    def purge_inactive_producers(self) -> object:
        """Forget producers gone for longer than the inactivity timeout, fired by the broker's
        ``checkMessageDeduplicationInfo`` timer."""
        ...

    def close(self) -> None:
        """The topic is closing."""
        ...


class NoDeduplication:
    """Deduplication off: every publish is new, nothing is remembered."""

    metadata_needs = MetadataNeeds.NOTHING

    def check(self, ctx: PublishContext) -> DedupVerdict:
        return DedupVerdict.NOT_DUPLICATE

    def record_persisted(self, ctx: PublishContext, position: Position) -> None:
        pass

    def record_failed(self, ctx: PublishContext) -> None:
        pass

    def producer_added(self, producer_name: str) -> None:
        pass

    def producer_removed(self, producer_name: str) -> None:
        pass

    def last_sequence_id(self, producer_name: str) -> int:
        return -1

    def take_snapshot(self) -> bool:
        return False

    def purge_inactive_producers(self) -> object:
        return None

    def close(self) -> None:
        pass


def is_deduplication_off(dedup: Deduplication) -> bool:
    """Whether ``dedup`` is deduplication off itself (exactly :class:`NoDeduplication`): its
    per-message calls answer nothing and record nothing, so a publish may skip them. A subclass
    is a hook of its own (tests listen through one) and gets every call."""
    return type(dedup) is NoDeduplication
