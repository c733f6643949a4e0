"""What consumers receive (:class:`Message`) and what a batch send returns (:class:`BatchMessageIds`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..codec import Entry, MessageId
from ..core import Position

__all__ = ["BatchMessageIds", "EntryDelivery", "Message"]


@dataclass(frozen=True, slots=True)
class EntryDelivery:
    """One entry handed to a remote consumer (a :class:`~mledger.broker.ConsumerSink`).

    ``ack_set`` is None for an entry delivered whole; for a partly acknowledged batch it is the
    bitset of the batch indexes still unacknowledged (bit i = index i; Pulsar's ``ack_set``),
    which the client uses to skip the acknowledged ones. ``messages`` is how many messages the
    delivery counts against the consumer's permits.
    """

    entry: Entry
    redelivery_count: int
    ack_set: int | None
    batch_size: int
    messages: int


@dataclass(frozen=True)
class Message:
    """One message handed to a consumer.

    ``message_id`` carries the partition (-1 on a non-partitioned topic) and, for a message of
    a batch, its ``batch_index`` and ``batch_size``. ``deliver_at_ms`` is None for a message
    that was not delayed. ``redelivery_count`` counts how often the message was handed out again
    after being delivered and not acknowledged (negative ack, consumer closed, redelivery).
    Equality is field-wise; the hash is the message id's.
    """

    message_id: MessageId
    data: bytes
    key: str | None = None
    publish_time_ms: int = 0
    deliver_at_ms: int | None = None
    redelivery_count: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    producer_name: str = ""
    sequence_id: int = 0
    topic: str = ""

    def __hash__(self) -> int:
        return hash(self.message_id)

    @property
    def position(self) -> Position:
        """The entry the message is stored in."""
        return self.message_id.position


class BatchMessageIds(tuple[MessageId, ...]):
    """The ids of the messages of one batch entry, in batch-index order.

    A tuple of :class:`~mledger.codec.MessageId` (each with its ``batch_index``), with the
    entry's ``ledger_id``, ``entry_id``, ``partition`` and ``position`` as attributes. A batch
    that deduplication dropped has one id ``(-1, -1)``.
    """

    __slots__ = ()

    @property
    def ledger_id(self) -> int:
        """The batch entry's ledger id."""
        return self[0].ledger_id

    @property
    def entry_id(self) -> int:
        """The batch entry's entry id."""
        return self[0].entry_id

    @property
    def partition(self) -> int:
        """The partition the batch went to (-1: not partitioned)."""
        return self[0].partition

    @property
    def position(self) -> Position:
        """The batch entry."""
        return self[0].position
