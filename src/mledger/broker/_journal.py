"""The broker's journal hook: what changed the stored entries and the cursors, as it happened.

A :class:`BrokerJournal` given to ``Broker(journal=...)`` hears, synchronously and in the
order the broker applied them, every change a replay needs to rebuild the subscriptions'
cursor state (the recorder of :mod:`mledger.replay` implements it and writes the
replay's raw logs):

==============================  ====================================================
call                            when
==============================  ====================================================
``entries_persisted``           entries were stored (on the ledger's writer thread,
                                after deduplication recorded them, before the
                                producers hear)
``acked``                       acknowledgements that changed a cursor: individual,
                                cumulative, batch index; PIP-423 skips (individual
                                acks, as Pulsar applies them); a compaction's new
                                horizon (a cumulative ack of ``__compaction``)
``cancelled``                   a PIP-423 cancel that acknowledged an entry
``subscription_created``        a durable subscription was created, or subscribed
                                to again with another type (which changes it); the
                                ``__compaction`` cursor, when the first compaction
                                opens it (Exclusive, earliest)
``subscription_reset``          its cursor was reset (seek by id or time,
                                ``reset-cursor``, ``clear-backlog``)
``subscription_deleted``        it was unsubscribed
``not_recorded``                what cannot be expressed as the above (``skip -n``,
                                a topic deleted, a topic opened with entries or
                                subscriptions stored earlier): the journal is
                                incomplete
``fault_fired``                 an injected fault fired (:mod:`mledger.broker._faults`):
                                listed with the session, no event of the replay
==============================  ====================================================

Non-durable (reader) subscriptions, negative acks and delayed dispatch change no stored
cursor state and are not reported. Calls come from whichever thread changed the broker,
some under a subscription's or topic's lock: an implementation must be cheap, must not
block and must not call back into the broker. ``topic`` is the topic's name, a partitioned
topic's for its partitions, ``partition`` the partition index (-1: not partitioned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from ..core import Clock, Position
from ._hooks import PublishContext

__all__ = ["AckRecord", "BrokerJournal", "TopicJournal"]


class AckRecord(NamedTuple):
    """One acknowledgement as applied: ``batch_index`` -1 for the whole entry."""

    ledger_id: int
    entry_id: int
    batch_index: int = -1
    cumulative: bool = False


class BrokerJournal(Protocol):
    """Told about every stored entry and cursor change (see the module docstring)."""

    def entries_persisted(
        self, topic: str, partition: int, entries: Sequence[tuple[Position, PublishContext]], now_ms: int
    ) -> None:
        """Entries were stored at these positions, in position order."""
        ...

    def acked(self, topic: str, partition: int, subscription: str, acks: Sequence[AckRecord], now_ms: int) -> None:
        """Acknowledgements changed the subscription's cursor: one call per acknowledgement
        request (a ``CommandAck``: one cursor change, one persist attempt)."""
        ...

    def cancelled(self, topic: str, partition: int, subscription: str, position: Position, now_ms: int) -> None:
        """A PIP-423 cancel acknowledged ``position``."""
        ...

    def subscription_created(
        self,
        topic: str,
        partition: int,
        subscription: str,
        sub_type: str,
        initial_position: str,
        mark_delete: Position,
        now_ms: int,
    ) -> None:
        """A durable subscription was created (``initial_position``: ``earliest`` or
        ``latest``; ``mark_delete``: where its cursor started)."""
        ...

    def subscription_reset(
        self, topic: str, partition: int, subscription: str, position: Position, now_ms: int
    ) -> None:
        """The subscription's cursor was reset to read from ``position``."""
        ...

    def subscription_deleted(self, topic: str, partition: int, subscription: str, now_ms: int) -> None:
        """The subscription was deleted."""
        ...

    def not_recorded(self, what: str, now_ms: int) -> None:
        """A cursor change the journal cannot express happened (``what`` says which)."""
        ...

    def fault_fired(self, fault: Mapping[str, object], now_ms: int) -> None:
        """An injected fault fired (``fault``: :meth:`~mledger.broker.FiredFault.as_dict`)."""
        ...

    def close(self) -> None:
        """The broker closed: nothing more will be reported."""
        ...


class TopicJournal:
    """A :class:`BrokerJournal` bound to one topic (partition) and the broker's clock: what a
    topic and its subscriptions call. Thin: each method adds the topic key and the time."""

    __slots__ = ("_clock", "_journal", "partition", "topic")

    def __init__(self, journal: BrokerJournal, topic: str, partition: int, clock: Clock) -> None:
        self._journal = journal
        self._clock = clock
        self.topic = topic
        self.partition = partition

    def entries_persisted(self, entries: Sequence[tuple[Position, PublishContext]]) -> None:
        """See :meth:`BrokerJournal.entries_persisted`."""
        self._journal.entries_persisted(self.topic, self.partition, entries, self._clock.now_ms())

    def acked(self, subscription: str, acks: Sequence[AckRecord]) -> None:
        """See :meth:`BrokerJournal.acked` (nothing is reported for no acks)."""
        if acks:
            self._journal.acked(self.topic, self.partition, subscription, acks, self._clock.now_ms())

    def cancelled(self, subscription: str, position: Position) -> None:
        """See :meth:`BrokerJournal.cancelled`."""
        self._journal.cancelled(self.topic, self.partition, subscription, position, self._clock.now_ms())

    def subscription_created(
        self, subscription: str, sub_type: str, initial_position: str, mark_delete: Position
    ) -> None:
        """See :meth:`BrokerJournal.subscription_created`."""
        self._journal.subscription_created(
            self.topic, self.partition, subscription, sub_type, initial_position, mark_delete, self._clock.now_ms()
        )

    def subscription_reset(self, subscription: str, position: Position) -> None:
        """See :meth:`BrokerJournal.subscription_reset`."""
        self._journal.subscription_reset(self.topic, self.partition, subscription, position, self._clock.now_ms())

    def subscription_deleted(self, subscription: str) -> None:
        """See :meth:`BrokerJournal.subscription_deleted`."""
        self._journal.subscription_deleted(self.topic, self.partition, subscription, self._clock.now_ms())

    def not_recorded(self, what: str) -> None:
        """See :meth:`BrokerJournal.not_recorded`."""
        self._journal.not_recorded(f"{what} on {self.topic} partition {self.partition}", self._clock.now_ms())
