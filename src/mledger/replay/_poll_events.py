"""The events a :class:`~mledger.replay.ClusterPoller` hands its sink, one poll at a time.

Each event names its topic-partition (``partition`` -1 when the topic is not partitioned) and
is a row of the replay's raw logs to be (``mledger capture`` writes them through its
:class:`~mledger.replay.Recorder`), or an :class:`Anomaly`: something the poller
could not see. The events of one topic-partition come in the order they happened; those of
different topic-partitions interleave.
"""

from __future__ import annotations

from typing import NamedTuple

from ..broker import AckRecord
from ..core import Position

__all__ = [
    "Acked",
    "Anomaly",
    "CaptureEvent",
    "EntrySeen",
    "ObservedEntry",
    "SubscriptionCreated",
    "SubscriptionDeleted",
    "SubscriptionReset",
    "SubscriptionState",
]


class ObservedEntry(NamedTuple):
    """A ``produced`` row's fields for an entry seen by a reader (None: not known); the last
    three for a chunk of a chunked message."""

    publish_time_ms: int
    batch_size: int = 1
    deliver_at_ms: int | None = None
    producer_name: str | None = None
    sequence_id: int | None = None
    key: str | None = None
    chunk_id: int | None = None
    num_chunks: int | None = None
    uuid: str | None = None


class EntrySeen(NamedTuple):
    """A reader saw the entry at ``position`` (a ``produced`` row); ``entry.key`` is the
    message's own key."""

    topic: str
    partition: int
    position: Position
    entry: ObservedEntry


class SubscriptionCreated(NamedTuple):
    """A durable subscription appeared (or was subscribed again with another type), its
    cursor at ``mark_delete``."""

    topic: str
    partition: int
    subscription: str
    sub_type: str
    mark_delete: Position
    ts_ms: int


class SubscriptionReset(NamedTuple):
    """The cursor was reset: it reads from ``position`` next, everything before it acked and
    nothing after it (Pulsar's resetCursor); the acks that follow restore what is acked above."""

    topic: str
    partition: int
    subscription: str
    position: Position
    ts_ms: int


class SubscriptionDeleted(NamedTuple):
    """The topic stats stopped listing the subscription, or its topic was deleted."""

    topic: str
    partition: int
    subscription: str
    ts_ms: int


class Acked(NamedTuple):
    """Entries the subscription acknowledged since the last poll (whole entries)."""

    topic: str
    partition: int
    subscription: str
    acks: tuple[AckRecord, ...]
    ts_ms: int


class Anomaly(NamedTuple):
    """Something the poller could not see (``kind``: one of ``ANOMALY_KINDS`` of
    :mod:`mledger.replay._poller`); what it concerns keeps its state of the last good poll."""

    kind: str
    topic: str | None
    detail: str
    ts_ms: int


CaptureEvent = EntrySeen | SubscriptionCreated | SubscriptionReset | SubscriptionDeleted | Acked | Anomaly
"""Any event a poll hands its sink."""


class SubscriptionState(NamedTuple):
    """A durable subscription as the last poll saw it: its type (upper case, e.g. ``SHARED``),
    mark-delete position and ``individuallyDeletedMessages`` as the broker printed them
    (``untracked``: its state was over ``max_ranges_per_subscription`` and is not held; the
    first poll that can hold it again restates it as a reset and acks)."""

    sub_type: str
    mark_delete: Position
    individually_deleted: str
    untracked: bool = False
