"""The dispatcher: moves entries from a subscription's cursor into its consumers' queues.

Theory of operation
-------------------
One dispatcher per subscription, shaped by the subscription type:

* **Exclusive / Failover** (single active consumer, Pulsar's
  ``PersistentDispatcherSingleActiveConsumer``): every entry goes to the active consumer, in
  order. Exclusive has one consumer; Failover picks the active one from the consumers sorted by
  name (partition ``i`` of a partitioned topic: index ``i % n``; otherwise the first). A
  negative ack, ``redeliver_unacknowledged_messages`` or a change of active consumer redelivers
  everything unacknowledged in order, by rewinding the cursor. Deliver-at times are ignored.
* **Shared** (``PersistentDispatcherMultipleConsumers``): entries go round-robin to consumers
  with permits; negative acks and closed consumers send entries to the *redelivery queue*, which is
  served before new entries.
* **Key_Shared** (``PersistentStickyKeyDispatcherMultipleConsumers``): an entry goes to the
  consumer that owns its key on the hash ring (:mod:`mledger.broker._keyshared`), subject to the
  recently-joined-consumers rule; an entry its consumer cannot take now waits in the redelivery
  queue, and newer entries of the same key wait behind it, so each key stays in order.

**Remote consumers** (a :class:`~mledger.broker.ConsumerSink`, i.e. a protocol
client) get whole entries instead of decoded messages: the dispatcher never decodes their
batches, counts the messages of each entry (minus the acknowledged indexes of a partly
acknowledged batch) against the consumer's permits and hands the entries to the sink at the
end of the round, under the lock, in order. Failover tells remote consumers when the active
consumer changes.

Shared and Key_Shared honour deliver-at times: an entry whose time has not come goes to the
*delayed-delivery tracker* instead of a consumer, and is replayed once the broker clock reaches
its time (``receive`` checks; the subscription's ``delayedDelivery`` timer on the broker's timer
queue dispatches it then).

**Reads.** A dispatch round reads either the redelivery queue (``cursor.replay_entries``) or the
next entries (``cursor.read_entries_held``), never more than the consumers have permits for.
The storage I/O runs outside the state lock; the result is used only if no cursor position
reset happened meanwhile (the cursor's revision number is unchanged), otherwise it is discarded
and read again (docs/library.md, "Safe cursor resets": the half in-flight read). Only one
round runs at a time per dispatcher.

**Read compacted** (Exclusive / Failover whose active consumer asked for ``read_compacted``):
while the cursor's read position is at or below the topic's compaction horizon, a round reads
the compacted view (:mod:`mledger.broker._compaction`) from that position instead of the
ledger and moves the cursor past the last entry it got (past the horizon when none is left),
as Pulsar's ``CompactedTopicUtils.asyncReadCompactedEntries``. A reader starting at the
earliest message reads the whole view on its first pass, even entries below a mark-delete
position that trimming moved (the dispatcher keeps that pass's position itself).

**Never deliver what is acknowledged.** The cursor's reads skip acknowledged entries; before an
entry is pushed the dispatcher checks the cursor again under the lock (an ack may have landed
during the I/O), drops the acknowledged indexes of a partially acknowledged batch
(``cursor.batch_ack_set``), and ``receive`` checks once more when it pops a queued message. The
cursor is the only source of truth, so cancelled (PIP-423) messages stay undelivered after a
restart, when the tracker is rebuilt by reading the entries again.

**Resets.** Every dispatcher reset (the last consumer leaves; redeliver everything; an admin
reset-cursor) runs inside ``cursor.position_reset()``: the redelivery queue, the delayed tracker, the
recently-joined consumers and the consumers' queues and pending acks are cleared while the
cursor's revision is open, and the cursor change is applied when it closes (docs/library.md, "Safe cursor resets").
If another reset holds the cursor, the dispatcher state is cleared at once and the rewind is
retried before the next read (Pulsar's ``shouldRewindBeforeReadingOrReplaying``).

**Locking.** State is guarded by the subscription's lock, shared with
:class:`~mledger.broker.Subscription` and its consumers; ``dispatch`` additionally
holds the dispatcher's round lock across a round's storage I/O (acquired first). Callers of
the underscore-free mutators below hold the subscription lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass

from sortedcontainers import SortedDict

from ..codec import Entry, MessageId, decode_batch
from ..core import (
    EARLIEST,
    Clock,
    ConcurrentResetError,
    CursorAlreadyClosedError,
    CursorModifyingError,
    Position,
    renamed_attribute,
)
from ..managed_ledger import AckOutcome, AckPlan, ManagedCursor, PendingRead, PositionReset
from ._compaction import CompactedLedger, CompactedTopic, kept_messages_mask
from ._config import BrokerConfig
from ._consumer import Consumer, single_active_choice
from ._delayed import DelayedDeliveryTracker
from ._hashing import sticky_key_hash
from ._keyshared import ConsistentHashRing, RecentlyJoinedConsumers
from ._message import EntryDelivery, Message
from ._redelivery import RedeliveryQueue
from ._types import SubscriptionType

__all__ = ["Dispatcher", "DispatcherStats"]

log = logging.getLogger(__name__)

_MAX_DISCARDED_ROUNDS = 3
"""Consecutive discarded reads after which ``dispatch`` gives up until the next call."""


@dataclass(frozen=True)
class DispatcherStats:
    """A snapshot of one dispatcher's state and counters."""

    type: SubscriptionType
    consumers: int
    active_consumer: str | None
    redelivery_queue_size: int
    delayed_messages: int
    next_deliver_at_ms: int | None
    pending_entries: int
    unacked_messages: int
    recently_joined_consumers: int
    messages_dispatched: int
    resets: int
    discarded_reads: int
    rewind_pending: bool

    replay_queue_size = renamed_attribute("redelivery_queue_size")
    """Deprecated name of :attr:`redelivery_queue_size` (kept for one release; warns)."""


class _Pending:
    """An entry in a consumer's hands: which batch indexes are outstanding."""

    __slots__ = ("batch_size", "consumer", "indexes", "key_hash")

    def __init__(self, consumer: Consumer, indexes: set[int] | None, batch_size: int, key_hash: int | None) -> None:
        self.consumer = consumer
        self.indexes = indexes  # None: a non-batched entry
        self.batch_size = batch_size
        self.key_hash = key_hash

    @property
    def count(self) -> int:
        return 1 if self.indexes is None else len(self.indexes)


@dataclass
class _Round:
    delivered: int = 0
    progressed: bool = False
    discarded: bool = False


class Dispatcher:
    """Dispatches one subscription's entries to its consumers (see the module docstring)."""

    def __init__(
        self,
        cursor: ManagedCursor,
        sub_type: SubscriptionType,
        lock: threading.RLock,
        config: BrokerConfig,
        clock: Clock,
        partition_index: int,
        topic: str,
        compaction: CompactedTopic | None = None,
        on_delayed: Callable[[], None] | None = None,
    ) -> None:
        self._cursor = cursor
        self._on_delayed = on_delayed  # told once a read held messages for later delivery
        self._compaction = compaction
        # A read-compacted reader's first pass from the earliest message, while it is below
        # the cursor's mark-delete position (which the cursor's reads never go under).
        self._compacted_from: Position | None = None
        self._ml = cursor.ledger
        self._type = sub_type
        self._lock = lock
        self._round_lock = threading.Lock()
        self._config = config
        self._clock = clock
        self._partition = partition_index
        self._topic = topic
        self._single_active = sub_type.is_cumulative_ack_mode
        self._key_shared = sub_type is SubscriptionType.KEY_SHARED
        self._delays = config.delayed_delivery_enabled and not self._single_active
        self._consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._ring: ConsistentHashRing[Consumer] = ConsistentHashRing(
            config.subscription_key_shared_consistent_hashing_replica_points
        )
        self._recent: RecentlyJoinedConsumers[Consumer] = RecentlyJoinedConsumers()
        self._redelivery = RedeliveryQueue()
        self._delayed = DelayedDeliveryTracker(
            config.delayed_delivery_tick_time_millis, config.delayed_delivery_deliver_at_time_strict
        )
        self._pending: SortedDict = SortedDict()  # Position -> _Pending
        self._redeliveries: SortedDict = SortedDict()  # Position -> count
        self._rr = 0
        self._told_active: dict[Consumer, bool] = {}
        self._avg_messages_per_entry = 1.0  # moving average over the entries dispatched
        self._rewind_pending = False
        self._closed = False
        self._dispatched = 0
        self._resets = 0
        self._discarded = 0

    # -- views ------------------------------------------------------------------------------
    @property
    def type(self) -> SubscriptionType:
        """The subscription type this dispatcher was built for."""
        return self._type

    @property
    def consumers(self) -> list[Consumer]:
        """Connected consumers in join order (a copy)."""
        return list(self._consumers)

    @property
    def active_consumer(self) -> Consumer | None:
        """Exclusive/Failover: the consumer receiving messages; None otherwise."""
        return self._active

    @property
    def delayed_messages(self) -> int:
        """Messages held by the delayed-delivery tracker (caller holds the subscription lock)."""
        return len(self._delayed)

    def stats(self) -> DispatcherStats:
        """A consistent snapshot (caller holds the subscription lock)."""
        return DispatcherStats(
            type=self._type,
            consumers=len(self._consumers),
            active_consumer=self._active.name if self._active is not None else None,
            redelivery_queue_size=len(self._redelivery),
            delayed_messages=len(self._delayed),
            next_deliver_at_ms=self._delayed.next_deliver_at(),
            pending_entries=len(self._pending),
            unacked_messages=sum(c.unacked_messages for c in self._consumers),
            recently_joined_consumers=len(self._recent),
            messages_dispatched=self._dispatched,
            resets=self._resets,
            discarded_reads=self._discarded,
            rewind_pending=self._rewind_pending,
        )

    def next_delayed_delivery_ms(self) -> int | None:
        """The earliest deliver-at time in the delayed-delivery tracker, None when empty."""
        return self._delayed.next_deliver_at()

    def next_delayed_due_ms(self) -> int | None:
        """When the earliest held message becomes due (one tick before its deliver-at time
        when not strict), None when none is held: when the delayed-delivery timer fires."""
        return self._delayed.next_due_ms()

    @property
    def rewind_pending(self) -> bool:
        """Whether a rewind is owed: a reset found the cursor held by another reset, and the
        rewind runs before the next read (Pulsar's ``shouldRewindBeforeReadingOrReplaying``)."""
        return self._rewind_pending

    def defer_rewind(self) -> None:
        """Owe a rewind before the next read (a new dispatcher inherits its predecessor's)."""
        self._rewind_pending = True

    def recently_joined_position(self, consumer: Consumer) -> Position | None:
        """Key_Shared: the read position ``consumer`` joined at while it is restricted."""
        return self._recent.max_read_position(consumer)

    # -- consumers --------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        """Attach ``consumer`` (caller checked the type's rules)."""
        if self._key_shared:
            self._ring.add(consumer.name, consumer)
            if self._consumers and self._cursor.number_of_entries_since_first_not_acked() > 1:
                self._recent.add(consumer, self._cursor.read_position)
        self._consumers.append(consumer)
        if self._single_active:
            self._choose_active()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer``; its unacknowledged messages are redelivered."""
        if consumer not in self._consumers:
            return
        self._consumers.remove(consumer)
        self._told_active.pop(consumer, None)
        self._ring.remove(consumer)
        self._recent.remove(consumer)
        self._drop_queue(consumer)
        if not self._consumers:
            self._active = None
            self._reset_internal(count_redeliveries=True)  # a dispatcher reset (docs/library.md)
            return
        if self._single_active:
            self._choose_active()
            return
        self._to_redelivery(consumer, consumer.held_positions())
        self._release_recently_joined()

    def _choose_active(self) -> None:
        previous = self._active
        self._active = single_active_choice(self._consumers, self._partition)
        if self._active is None:
            return
        if previous is not None and previous is not self._active:
            # The new active consumer must get everything unacknowledged, in order.
            self._reset_internal(count_redeliveries=True)
        if self._type is SubscriptionType.FAILOVER:
            self._tell_active()

    def _tell_active(self) -> None:
        """Failover: tell each remote consumer whose role changed whether it is active
        (Pulsar's ACTIVE_CONSUMER_CHANGE; a new consumer is always told)."""
        for consumer in self._consumers:
            sink = consumer.sink
            if sink is None:
                continue
            is_active = consumer is self._active
            if self._told_active.get(consumer) is not is_active:
                self._told_active[consumer] = is_active
                sink.active_changed(consumer, is_active)

    # -- dispatching ------------------------------------------------------------------------
    def dispatch(self) -> int:
        """Push what is deliverable now into consumers' queues; return the number of messages.

        Takes the round lock, then the subscription lock around (not during) storage I/O.
        """
        total = 0
        with self._round_lock:
            discarded = 0
            while True:
                outcome = self._round()
                total += outcome.delivered
                if outcome.discarded:
                    discarded += 1
                    if discarded > _MAX_DISCARDED_ROUNDS:
                        break
                    continue
                if not outcome.progressed:
                    break
        return total

    def _round(self) -> _Round:
        with self._lock:
            if self._closed or not self._consumers:
                return _Round()
            if self._rewind_pending and not self._retry_rewind():
                return _Round()
            self._release_recently_joined()
            for position, key_hash in self._delayed.pop_due(self._clock.now_ms()):
                self._redelivery.add(position, key_hash)
            budget = self._budget()
            if budget <= 0:
                return _Round()
            # Permits count messages, reads count entries: a batch entry spends many permits,
            # so read about permits / (messages per entry) entries (Pulsar's avgBatchSizePerMsg),
            # not entries that no consumer could take and that would go to the redelivery queue.
            limit = min(max(1, int(budget / self._avg_messages_per_entry)), self._config.dispatcher_max_read_batch_size)
            redeliver = self._redeliverable(limit)
            revision = self._cursor.revision.revision_num
            read: PendingRead | None = None
            compacted = None if redeliver else self._compacted_start()
            if not redeliver and compacted is None:
                if not self._may_read_more():
                    return _Round()
                try:
                    read = self._cursor.read_entries_held(limit)
                except CursorModifyingError:
                    self._discarded += 1
                    return _Round(discarded=True)
                if not read.plan:
                    return _Round()
        if compacted is not None:
            return self._compacted_round(compacted[0], compacted[1], limit, revision)
        try:
            if read is None:
                entries = self._cursor.replay_entries(redeliver)
            else:
                self._fetch(read)
        except CursorModifyingError:
            with self._lock:
                self._discarded += 1
            return _Round(discarded=True)
        with self._lock:
            if self._closed:
                return _Round()
            if read is None:
                if self._cursor.revision.is_revision_num_outdated(revision):
                    self._discarded += 1
                    return _Round(discarded=True)
                for p in redeliver:
                    self._redelivery.remove(p)
                delivered = self._dispatch_entries(entries, replayed=True)
                left = sum(1 for p in redeliver if p in self._redelivery)
                return _Round(delivered, progressed=delivered > 0 or left < len(redeliver))
            try:
                entries = read.complete()
            except CursorModifyingError:
                self._discarded += 1
                return _Round(discarded=True)
            except CursorAlreadyClosedError:
                return _Round()
            return _Round(self._dispatch_entries(entries, replayed=False), progressed=True)

    def _compacted_start(self) -> tuple[CompactedLedger, Position] | None:
        """The compacted view and where to read it from, when the active consumer reads
        compacted and its position is at or below the horizon; None to read the ledger."""
        consumer = self._active
        if self._compaction is None or consumer is None or not consumer.read_compacted:
            return None
        view = self._compaction.view
        if view is None:
            return None
        if consumer.take_compacted_from_earliest():
            self._compacted_from = EARLIEST  # Pulsar's isFirstRead with an earliest start id
        start = self._compacted_from if self._compacted_from is not None else self._cursor.read_position
        return (view, start) if start <= view.horizon else None

    def _compacted_round(self, view: CompactedLedger, start: Position, limit: int, revision: int) -> _Round:
        """Read the compacted view (storage I/O outside the lock), move the cursor past what
        was read, and dispatch it."""
        entries = view.read(start, limit)
        with self._lock:
            if self._closed:
                return _Round()
            if self._cursor.revision.is_revision_num_outdated(revision) or self._compaction_view() is not view:
                self._discarded += 1
                return _Round(discarded=True)
            md = self._cursor.mark_delete_position
            after = entries[-1].position.next() if entries else self._ml.next_valid_position(view.horizon)
            if entries and after <= md:
                self._compacted_from = after
            else:
                self._compacted_from = None
                try:
                    self._cursor.seek(after, force=True)
                except (ConcurrentResetError, CursorModifyingError):
                    self._discarded += 1
                    return _Round(discarded=True)
            return _Round(self._dispatch_entries(entries, replayed=False, compacted_md=md), progressed=True)

    def _compaction_view(self) -> CompactedLedger | None:
        return self._compaction.view if self._compaction is not None else None

    def _fetch(self, read: PendingRead) -> None:
        """The storage I/O of a sequential read (a seam for tests that race a reset with it)."""
        read.fetch()

    def _budget(self) -> int:
        if self._single_active:
            return self._active.permits if self._active is not None else 0
        return sum(max(c.permits, 0) for c in self._consumers if self._can_take(c))

    def _can_take(self, consumer: Consumer) -> bool:
        if consumer.permits <= 0:
            return False
        limit = self._config.max_unacked_messages_per_consumer
        return not (limit and not self._single_active and consumer.unacked_messages >= limit)

    def _may_read_more(self) -> bool:
        limit = self._config.max_unacked_messages_per_subscription
        if not limit or self._single_active:
            return True
        return sum(c.unacked_messages for c in self._consumers) + len(self._redelivery) < limit

    def _redeliverable(self, limit: int) -> list[Position]:
        """Replay positions a consumer can take now, in order, at most ``limit``."""
        if not self._redelivery:
            return []
        if not self._key_shared:
            return self._redelivery.first(limit)
        out: list[Position] = []
        blocked: set[int | None] = set()
        for position in self._redelivery:
            key_hash = self._redelivery.key_hash(position)
            if key_hash in blocked:
                continue
            consumer = self._ring.select(key_hash) if key_hash is not None else None
            if consumer is None or not self._can_take(consumer) or not self._recent.allows(consumer, position):
                blocked.add(key_hash)
                continue
            out.append(position)
            if len(out) >= limit:
                break
        return out

    def _dispatch_entries(self, entries: Iterable[Entry], replayed: bool, compacted_md: Position | None = None) -> int:
        """Dispatch ``entries``; compacted ones (``compacted_md`` set) at or below that
        mark-delete position are delivered too (a reader's first pass over the view)."""
        now = self._clock.now_ms()
        delivered = 0
        held = False
        blocked: set[int | None] = set()
        remote: dict[Consumer, list[EntryDelivery]] = {}
        for entry in entries:
            position = entry.position
            if (compacted_md is None or position > compacted_md) and self._cursor.is_message_deleted(position):
                self._forget(position)
                continue
            if position in self._pending:
                continue
            meta = entry.metadata
            key_hash = sticky_key_hash(meta.partition_key) if self._key_shared else None
            if self._delays and meta.deliver_at_ms is not None and not self._delayed.is_due(meta.deliver_at_ms, now):
                self._delayed.add(position, meta.deliver_at_ms, key_hash)
                held = True
                continue
            n = meta.num_messages
            self._avg_messages_per_entry = 0.9 * self._avg_messages_per_entry + 0.1 * max(n, 1)
            remaining = self._cursor.batch_ack_set(position) if n > 1 else None
            if compacted_md is not None and meta.batched:
                kept = kept_messages_mask(entry)  # compacted-out placeholders are not delivered
                if kept is not None:
                    remaining = kept if remaining is None else remaining & kept
            if remaining is not None and not remaining & ((1 << n) - 1):
                continue  # every message of the batch is acknowledged
            consumer = self._select(position, key_hash, replayed, blocked)
            if consumer is None:
                blocked.add(key_hash)
                self._redelivery.add(position, key_hash)
                continue
            if consumer.sink is not None:
                delivery = self._send_entry(consumer, entry, remaining, key_hash, now)
                remote.setdefault(consumer, []).append(delivery)
                delivered += delivery.messages
                continue
            messages = self._messages_of(entry)
            if not messages:
                continue
            self._send(consumer, entry, messages, key_hash, now)
            delivered += len(messages)
        self._dispatched += delivered
        if held and self._on_delayed is not None:
            self._on_delayed()
        for consumer, deliveries in remote.items():
            consumer.sink.deliver(consumer, deliveries)  # type: ignore[union-attr]
        return delivered

    def _send_entry(
        self, consumer: Consumer, entry: Entry, remaining: int | None, key_hash: int | None, now: int
    ) -> EntryDelivery:
        """Hand a whole entry to a remote consumer: no payload decoding, permits by message."""
        position = entry.position
        n = entry.metadata.num_messages
        if n > 1 or entry.metadata.batched:
            size = max(n, 1)
            indexes = {i for i in range(size) if remaining is None or (remaining >> i) & 1}
            count = len(indexes)
        else:
            size, indexes, count = 1, None, 1
        consumer.record_delivery(position, count, len(entry.raw) or len(entry.data), now)
        self._pending[position] = _Pending(consumer, indexes, size, key_hash)
        return EntryDelivery(entry, self._redeliveries.get(position, 0), remaining, size, count)

    def _select(
        self, position: Position, key_hash: int | None, replayed: bool, blocked: set[int | None]
    ) -> Consumer | None:
        if self._single_active:
            return self._active  # single consumer: its permits may go negative, never re-queued
        if not self._key_shared:
            n = len(self._consumers)
            for step in range(n):
                consumer = self._consumers[(self._rr + step) % n]
                if self._can_take(consumer):
                    self._rr = (self._rr + step + 1) % n
                    return consumer
            return None
        if key_hash in blocked or (not replayed and key_hash is not None and self._redelivery.contains_hash(key_hash)):
            return None
        owner = self._ring.select(key_hash) if key_hash is not None else None
        if owner is None or not self._can_take(owner) or not self._recent.allows(owner, position):
            return None
        return owner

    def _messages_of(self, entry: Entry) -> list[Message]:
        meta = entry.metadata
        position = entry.position
        count = self._redeliveries.get(position, 0)
        common = dict(
            publish_time_ms=meta.publish_time_ms,
            deliver_at_ms=meta.deliver_at_ms,
            redelivery_count=count,
            producer_name=meta.producer_name,
            topic=self._topic,
        )
        n = meta.num_messages
        if n <= 1:
            mid = MessageId(position.ledger_id, position.entry_id, self._partition)
            return [
                Message(
                    mid,
                    entry.data,
                    meta.partition_key,
                    properties=dict(meta.properties),
                    sequence_id=meta.sequence_id,
                    **common,
                )
            ]
        remaining = self._cursor.batch_ack_set(position)
        out = []
        for i, single in enumerate(decode_batch(entry.data, n)):
            if single.compacted_out or (remaining is not None and not (remaining >> i) & 1):
                continue
            mid = MessageId(position.ledger_id, position.entry_id, self._partition, i, n)
            out.append(
                Message(
                    mid,
                    single.payload,
                    single.key if single.key is not None else meta.partition_key,
                    properties=dict(single.properties),
                    sequence_id=single.sequence_id if single.sequence_id is not None else meta.sequence_id + i,
                    **common,
                )
            )
        return out

    def _send(self, consumer: Consumer, entry: Entry, messages: list[Message], key_hash: int | None, now: int) -> None:
        position = entry.position
        consumer.record_delivery(position, len(messages), len(entry.raw) or len(entry.data), now)
        consumer.enqueue(messages)
        first = messages[0].message_id
        indexes = {m.message_id.batch_index for m in messages} if first.batch_index >= 0 else None
        self._pending[position] = _Pending(consumer, indexes, max(first.batch_size, 1), key_hash)

    # -- receiving --------------------------------------------------------------------------
    def take(self, consumer: Consumer, max_messages: int) -> tuple[list[Message], int]:
        """Pop up to ``max_messages`` still-unacknowledged messages; return them and how many
        queue slots were freed (their permits are given back)."""
        out: list[Message] = []
        popped = 0
        while len(out) < max_messages:
            message = consumer.pop_queued()
            if message is None:
                break
            popped += 1
            if self._is_acknowledged(message):
                self._forget_message(message)
            else:
                out.append(message)
        consumer.return_permits(popped)
        return out, popped

    def _is_acknowledged(self, message: Message) -> bool:
        mid = message.message_id
        position = mid.position
        if self._cursor.is_message_deleted(position):
            return True
        if mid.batch_index >= 0:
            remaining = self._cursor.batch_ack_set(position)
            return remaining is not None and not (remaining >> mid.batch_index) & 1
        return False

    def _forget_message(self, message: Message) -> None:
        mid = message.message_id
        if self._cursor.is_message_deleted(mid.position):
            self._forget(mid.position)
        else:
            self._release_indexes(mid.position, (mid.batch_index,))

    def _drop_queue(self, consumer: Consumer, positions: set[Position] | None = None) -> None:
        """Remove queued messages (of ``positions``, or all) and give their permits back."""
        consumer.drop_queued(positions)

    # -- acknowledgement: one query before, one notification after ---------------------------
    def held_batches(self, positions: Iterable[Position]) -> dict[Position, tuple[int, Set[int] | None]]:
        """For the entries of ``positions`` in a consumer's hands: their batch size (read from
        their metadata) and the indexes the consumer still holds (None for an entry that is
        not a batch; the set is the dispatcher's own, lent while the caller holds the lock).
        An acknowledgement's one question to the dispatcher (``AckResolver``). O(positions)."""
        pending = self._pending
        if not pending:
            return {}
        held = {}
        for position in positions:
            entry = pending.get(position)
            if entry is not None:
                held[position] = (entry.batch_size, entry.indexes)
        return held

    def on_acked(self, plan: AckPlan, outcome: AckOutcome) -> None:
        """The cursor applied ``plan`` and it changed what ``outcome`` says: forget the entries
        it acknowledged, settle the batch indexes acknowledged (what the plan names, whether or
        not the ledger keeps batch-index state: the consumer acknowledged them), and drop what
        a mark-delete that moved (or any cumulative acknowledgement) passed. An
        acknowledgement's one notification. O(entries of the plan) when anything is held."""
        if self._pending or len(self._redelivery) or len(self._delayed) or self._redeliveries:
            rows = outcome.deleted
            self._forget_many(zip(rows[:, 0].tolist(), rows[:, 1].tolist(), strict=True))
            for position, ack_set, size in plan.ack_sets:
                self._release_acked(position, ack_set, size)
            if plan.mark_delete is not None and plan.mark_delete_ack_set is not None:
                self._release_acked(plan.mark_delete, plan.mark_delete_ack_set, None)
        if outcome.mark_delete_moved or plan.mark_delete is not None:
            self.on_mark_delete_moved()

    def _release_acked(self, position: Position, ack_set: int, size: int | None) -> None:
        """Settle the held indexes of ``position`` whose bit in ``ack_set`` is clear (below
        ``size`` when given)."""
        pending = self._pending.get(position)
        if pending is None or pending.indexes is None:
            return
        limit = size if size is not None else pending.batch_size
        self._release_indexes(position, [i for i in pending.indexes if i < limit and not (ack_set >> i) & 1])

    def _release_indexes(self, position: Position, indexes: Iterable[int]) -> None:
        """Some batch indexes of an entry were acknowledged: its consumer holds them no more
        (nor the entry, once it holds no index of it)."""
        pending = self._pending.get(position)
        if pending is None or pending.indexes is None:
            return
        gone = pending.indexes.intersection(indexes)
        pending.indexes -= gone
        pending.consumer.release(None, len(gone))
        if not pending.indexes:
            del self._pending[position]
            pending.consumer.release(position, 0)

    def on_mark_delete_moved(self) -> None:
        """Drop bookkeeping at or before the mark-delete position; release joined consumers.
        O(1) when the dispatcher holds nothing (a consumer without permits, as the replay's)."""
        if not (
            self._pending or len(self._redelivery) or len(self._delayed) or self._redeliveries or len(self._recent)
        ):
            return  # nothing held, nothing joined: nothing to drop or release
        md = self._cursor.mark_delete_position
        self._forget_many(list(self._pending.irange(maximum=md)))
        self._redelivery.remove_at_most(md)
        self._delayed.remove_at_most(md)
        for position in list(self._redeliveries.irange(maximum=md)):
            del self._redeliveries[position]
        self._release_recently_joined()

    def _forget(self, position: Position) -> None:
        self._forget_many((position,))

    def _forget_many(self, positions: Iterable[tuple[int, int]]) -> None:
        """Drop every trace of ``positions`` (acknowledged, or passed by the mark-delete): a
        consumer's hold, the redelivery queue, the delayed tracker, the redelivery counts. The
        structures are looked at once, and an empty one not at all. Positions, or plain
        ``(ledger_id, entry_id)`` pairs (equal keys: no object is built per position).
        O(positions)."""
        pending, redelivery, delayed, counts = self._pending, self._redelivery, self._delayed, self._redeliveries
        queued, held_back = len(redelivery) > 0, len(delayed) > 0
        for position in positions:
            held = pending.pop(position, None) if pending else None
            if held is not None:
                held.consumer.release(position, held.count)
            if queued:
                redelivery.remove(position)
            if held_back:
                delayed.remove(position)
            if counts:
                counts.pop(position, None)

    def _release_recently_joined(self) -> None:
        if len(self._recent):
            self._recent.release(self._ml.next_valid_position(self._cursor.mark_delete_position))

    # -- redelivery ---------------------------------------------------------------------------
    def negative_ack(self, consumer: Consumer, positions: Iterable[Position]) -> None:
        """Redeliver the given entries ``consumer`` holds (single-active: everything)."""
        if self._single_active:
            if consumer is self._active and consumer.held_positions():
                self._reset_internal(count_redeliveries=True)
            return
        mine = sorted({p for p in positions if consumer.holds(p)})
        self._to_redelivery(consumer, mine)

    def redeliver(self, consumer: Consumer) -> None:
        """Redeliver everything ``consumer`` holds unacknowledged."""
        if self._single_active:
            if consumer is self._active:
                self._reset_internal(count_redeliveries=True)
            return
        self._to_redelivery(consumer, consumer.held_positions())

    def _to_redelivery(self, consumer: Consumer, positions: list[Position]) -> None:
        self._drop_queue(consumer, set(positions))
        for position in positions:
            pending = self._pending.pop(position, None)
            if pending is None:
                continue
            consumer.release(position, pending.count)
            self._redeliveries[position] = self._redeliveries.get(position, 0) + 1
            self._redelivery.add(position, pending.key_hash)

    # -- resets -------------------------------------------------------------------------------
    def reset(self, choose: Callable[[PositionReset], None] | None = None, *, count_redeliveries: bool = True) -> None:
        """Clear the dispatcher and change the cursor in one revision (docs/library.md).

        ``choose(reset)`` picks the cursor change (when None a rewind, which writes nothing: see
        ``PositionReset.rewind``); it runs first, so a change that fails validation leaves
        everything as it was. Raises ``ConcurrentResetError`` if another reset holds the cursor.
        """
        with self._cursor.position_reset() as revision:
            if choose is None:
                revision.rewind()  # writes nothing, as Pulsar's dispatchers
            else:
                choose(revision)
            self._clear(count_redeliveries)
        self._rewind_pending = False

    def _reset_internal(self, count_redeliveries: bool) -> None:
        try:
            self.reset(None, count_redeliveries=count_redeliveries)
        except ConcurrentResetError:
            log.info("%s: a cursor reset is running; the dispatcher rewind is deferred", self._topic)
            self._clear(count_redeliveries)
            self._rewind_pending = True

    def _retry_rewind(self) -> bool:
        try:
            self.reset(None, count_redeliveries=False)
        except ConcurrentResetError:
            return False
        return True

    def _clear(self, count_redeliveries: bool) -> None:
        if count_redeliveries:
            for position in self._pending:
                self._redeliveries[position] = self._redeliveries.get(position, 0) + 1
        for consumer in self._consumers:
            self._drop_queue(consumer)
            consumer.reset_delivery()
        self._pending.clear()
        self._redelivery.clear()
        self._delayed.clear()
        self._recent.clear()
        self._compacted_from = None
        self._resets += 1

    def _check(self) -> None:
        """Assert the dispatcher's invariants (tests call this after each step; caller holds the
        subscription lock). O(held + queued + delayed entries, each looked up in the cursor).

        Every entry the dispatcher keeps (in a consumer's hands, in the redelivery queue, in
        the delayed tracker) lies in the cursor's range (after its mark-delete position, at or
        before the last confirmed entry), is not acknowledged, and is in exactly one of them;
        every consumer it refers to is registered; each consumer holds exactly the entries
        pending for it and counts their outstanding messages as unacknowledged; a consumer's
        permits go negative only by a batch still queued (a batch may overdraw, as Pulsar's)."""
        cursor = self._cursor
        md = cursor.mark_delete_position
        lac = self._ml.last_confirmed_entry
        consumers = self._consumers
        registered = set(consumers)
        assert len(registered) == len(consumers), f"a consumer registered twice: {consumers}"
        if self._single_active:
            assert (self._active is None) == (not consumers), f"active {self._active} of {consumers}"
        assert self._active is None or self._active in registered, f"active {self._active} not registered"
        assert set(self._told_active) <= registered, "told a consumer that left whether it is active"
        assert sum(c in self._recent for c in consumers) == len(self._recent), "a recently joined consumer left"
        if self._key_shared:
            assert bool(len(self._ring)) == bool(consumers), "hash ring and consumers disagree"
        self._redelivery._check()
        self._delayed._check()

        def kept(position: Position, where: str) -> None:
            assert md < position <= lac, f"{where} {position} outside ({md}, {lac}]"
            assert not cursor.is_message_deleted(position), f"{where} {position} is acknowledged"

        held: dict[Consumer, set[Position]] = {c: set() for c in consumers}
        unacked = dict.fromkeys(consumers, 0)
        for position, pending in self._pending.items():
            kept(position, "pending entry")
            assert pending.consumer in registered, f"entry {position} held by {pending.consumer}, not registered"
            assert pending.indexes is None or pending.indexes, f"entry {position} held with no index left"
            held[pending.consumer].add(position)
            unacked[pending.consumer] += pending.count
        for position in self._redelivery:
            kept(position, "redelivery entry")
            assert position not in self._pending, f"entry {position} both held and queued for redelivery"
        for position in self._delayed.positions():
            kept(position, "delayed entry")
            assert position not in self._pending, f"entry {position} both held and delayed"
            assert position not in self._redelivery, f"entry {position} both delayed and queued for redelivery"
        for position in self._redeliveries:
            assert position > md, f"redelivery count kept for {position} at or before {md}"
        for consumer in consumers:
            assert set(consumer.held_positions()) == held[consumer], f"{consumer} holds other entries"
            assert consumer.unacked_messages == unacked[consumer], (
                f"{consumer}: {consumer.unacked_messages} unacknowledged, {unacked[consumer]} pending"
            )
            assert consumer.permits >= 0 or consumer.queued_messages > 0 or consumer.is_remote, (
                f"{consumer}: permits {consumer.permits} with nothing queued"
            )

    def close(self) -> None:
        """Stop dispatching (topic or broker closing); the cursor is left as it is."""
        self._closed = True
        for consumer in self._consumers:
            consumer.mark_disconnected()
            self._drop_queue(consumer)
        self._consumers.clear()
        self._active = None
