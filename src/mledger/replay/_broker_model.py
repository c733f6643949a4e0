"""The replay's :class:`~mledger.replay.PartitionModel` on ``mledger.broker``.

One :class:`BrokerModel` per topic-partition: a :class:`~mledger.broker.Broker` with a
``ManualClock`` that follows event time, over a ``ManagedLedgerFactory`` on a
:class:`~mledger.replay._store.ReplayStore`, and in it the very objects library users get:

* **The topic** (``Broker.open_partition`` for a partition, ``Broker.create_topic``
  otherwise) and its managed ledger, whose entries sit at the log's positions.
* **Subscriptions** (``Topic.subscribe`` with the log's type and initial position), each
  with one consumer that never asks for messages (no permits) and acknowledges through the
  broker's one ack seam, ``Consumer.acknowledge_with_outcome``: bulk individual acks of
  whole entries (a whole-entry PIP-423 cancel is the same individual ack), batch-index
  message ids, ack sets, cumulative acks. Cancels the engine applies on their own are
  PIP-423 skips of the entry or of the batch index (``Subscription.plan_skip`` /
  ``apply_skip``). Every request carries the batch sizes the log produced
  (``AckRequest.batch_sizes``), so the broker reads no entry for them, and what an ack did
  is read from the :class:`~mledger.managed_ledger.AckOutcome` it returns. The
  subscription's own rules apply: cumulative acks only on Exclusive / Failover, batch
  indexes checked against the batch size, mark-delete movement, batch-index ack sets.
* **Deduplication**: the topic's ``MessageDeduplication`` (PIP-6, on unless the replay
  setting ``deduplication`` is off), fed with
  ``check_and_record_many``; it keeps its ``pulsar.dedup`` cursor and snapshots as on a
  broker.
* **Delayed delivery**: the broker's own ``DelayedDeliveryTracker`` (the dispatcher's, made
  from the same ``BrokerConfig``: strict, the replay delivers at the deliver time), one per
  topic-partition, fed with event time. Shared and Key_Shared subscriptions honour
  deliver-at times (individual-ack mode), Exclusive and Failover get delayed messages at
  once, as the dispatcher does; a due message reaches a subscription unless its cursor has
  it acknowledged (the dispatcher's "never deliver what is acknowledged" rule).
* **Reads.** At the end each subscription is idle, as on a broker whose consumers have left:
  its cursor is rewound, so its read position is the entry after its mark-delete position, as
  the broker's internal stats show it (``readPosition``). What a connected consumer had read
  is not in any log.
* **The cursor flush.** Under a Pulsar version's rules (a ``--defaults`` preset) the broker's
  one fixed-rate timer of ``ManagedLedgerFactoryImpl.flushCursors`` ticks every
  ``cursor_position_flush_seconds`` of event time from the first event (the broker's start):
  :meth:`BrokerModel.set_time` runs each tick it passes at its own instant
  (``ManagedLedgerFactory.flush_cursors``), so a cursor the mark-delete rate limit left dirty
  persists as Pulsar's would. Without a preset nothing ticks (mledger's own rules, unchanged).

Placing entries: the first produced position opens the topic on exactly the log's ledger
id (``ReplayStore.expect_ledger``); a higher ledger id rolls the ledger over onto it
(:func:`_roll_over_to`, through ``ManagedLedger.roll_over``). Data-ledger rollover by count,
size and time is switched off: the log decides where ledgers end. Ledgers written before the
topic's first subscription are kept (``retain_without_subscriptions``); consumed ledgers are
trimmed under the retention settings as the broker trims them, at once on the replay's thread
(the factory's executor is an ``InlineExecutor``), and the ledgers the log's cluster deleted are
deleted when the engine says so (:meth:`BrokerModel.forget_ledgers_before`, ``mledger watch``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from itertools import compress

import numpy as np

from ..broker import (
    AckRequest,
    Broker,
    BrokerConfig,
    Consumer,
    DelayedDeliveryTracker,
    MessageDeduplication,
    SkipEntry,
    Subscription,
    SubscriptionType,
    Topic,
    TopicName,
)
from ..codec import (
    EntryMetadata,
    MessageId,
    decompress_metadata,
    encode_entry,
    parse_footer,
    reassemble,
    unpack_payload,
)
from ..core import InlineExecutor, InvalidRequestError, ManualClock, Position
from ..managed_ledger import (
    ML_ROOT,
    BulkAckRoom,
    CursorStateStore,
    InitialPosition,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerFactory,
    PersistenceStats,
)
from ._mirror import MirrorView
from ._model import RestartAnswers, SubscriptionResult, SubscriptionSpec
from ._settings import ReplaySettings
from ._store import ReplayStore, add_repeated_entries

_INT32_MAX = (1 << 31) - 1
_NEVER_MS = 1 << 62
_MAX_STATE = 1 << 31
_NO_LEDGER = -1
_FALLBACK_NAMESPACE = "persistent://public/default/"
_FIXED_LEDGER = {
    "max_entries_per_ledger": _INT32_MAX,
    "max_size_per_ledger_mb": _INT32_MAX,
    "minimum_rollover_time_ms": 0,
    "maximum_rollover_time_ms": _NEVER_MS,
    "retain_without_subscriptions": True,
}
"""Data-ledger rollover is off: the log's positions say where ledgers roll over. Ledgers are
kept while the topic has no subscription (Pulsar would trim them, in a background pass whose
timing no log records): a subscription the log mentions later starts at the log's first entry."""
_EMPTY_ENTRY = encode_entry(b"", EntryMetadata())
"""What the replay appends for each produced entry: the log's entries carry no payload."""


def topic_name(topic: str) -> TopicName:
    """The broker's name for a log's topic: the topic itself when Pulsar accepts it, else
    a name in ``public/default`` made of its characters (outputs keep the log's text).

    >>> str(topic_name("orders"))
    'persistent://public/default/orders'
    >>> str(topic_name("not a/valid topic//name"))
    'persistent://public/default/not_a_valid_topic__name'
    """
    try:
        name = TopicName.parse(topic)
        if not name.is_partition:
            return name
    except InvalidRequestError:
        pass
    local = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in topic) or "topic"
    return TopicName.parse(_FALLBACK_NAMESPACE + local.replace("-partition-", "-partition_"))


def cursor_name(subscription: str, reserved: Callable[[str], bool] = lambda _: False) -> str:
    """A subscription name the broker accepts: ``/`` is not allowed in cursor names, and a name
    ``reserved`` for a system cursor (``__compaction``, recorded as a durable cursor) gets its
    first character escaped, so it replays as an ordinary cursor of its own.

    >>> cursor_name("a/b%")
    'a%2Fb%25'
    >>> cursor_name("__compaction", lambda name: name == "__compaction")
    '%5F_compaction'
    """
    name = subscription.replace("%", "%25").replace("/", "%2F")
    return f"%{ord(name[0]):02X}{name[1:]}" if name and reserved(name) else name


class _Subscription:
    __slots__ = (
        "consumer",
        "delivered",
        "individual_ack",
        "live_cursor",
        "mirrors",
        "spec",
        "start",
        "subscription",
        "undelivered",
    )

    def __init__(self, spec: SubscriptionSpec) -> None:
        self.spec = spec
        self.subscription: Subscription | None = None
        self.live_cursor: ManagedCursor | None = None  # the subscription's (None before it exists)
        self.individual_ack = False  # Shared / Key_Shared: deliver-at times apply
        self.consumer: Consumer | None = None
        self.delivered = 0
        self.start: Position | None = None  # mark-delete when the subscription was created
        self.undelivered: set[tuple[int, int]] = set()  # due but acknowledged before
        self.mirrors: list[CursorStateStore] = []  # one per mirrored setting

    @property
    def cursor(self) -> ManagedCursor:
        assert self.live_cursor is not None
        return self.live_cursor

    def attach(self, subscription: Subscription, consumer: Consumer) -> None:
        """The broker's subscription and the replay's consumer on it; its cursor (which never
        changes) and its ack mode are kept as plain attributes, read on every call."""
        self.subscription, self.live_cursor, self.consumer = subscription, subscription.cursor, consumer
        self.individual_ack = subscription.type.is_individual_ack_mode


class BrokerModel:
    """:class:`~mledger.replay.PartitionModel` on a broker topic. See the module docstring.

    Single-threaded. Memory: the cursors' ack state, one small record per data ledger, the
    delayed messages waiting and one sequence id per producer; entries are not kept.
    """

    def __init__(self, topic: str, partition: int, settings: ReplaySettings) -> None:
        self._clock = ManualClock(0)
        self._store = ReplayStore()
        # trimming passes run at once, on the replay's thread (a worker thread would delete
        # ledgers at a time no event decides, and a reset to the earliest entry would race it)
        self._factory = ManagedLedgerFactory(
            self._store, settings.factory, clock=self._clock, executor=InlineExecutor()
        )
        ledger_config = settings.ledger.with_changes(**_FIXED_LEDGER)
        config = BrokerConfig(
            managed_ledger_config=ledger_config,
            deduplication_enabled=settings.deduplication,
            delayed_delivery_deliver_at_time_strict=True,
        )
        self._broker = Broker(self._factory, config, clock=self._clock)
        self._tracker = DelayedDeliveryTracker(
            config.delayed_delivery_tick_time_millis, config.delayed_delivery_deliver_at_time_strict
        )
        self._name = topic_name(topic)
        self._partition = partition
        self._topic: Topic | None = None
        self._dedup: MessageDeduplication | None = None
        self._subs: dict[str, _Subscription] = {}
        self._ledgers = 0
        self._settings = settings
        self._mirrors: list[tuple[ReplaySettings, ReplayStore]] = []
        # the flush timer's period under a Pulsar version's rules (0: none) and its next tick
        self._flush_every_ms = self._factory.cursor_flush_interval_ms if settings.ledger.pulsar_rules else 0
        self._next_flush_ms: int | None = None

    # -- time -------------------------------------------------------------------------------
    def set_time(self, now_ms: int) -> None:
        if now_ms <= self._clock.now_ms():
            return
        if self._flush_every_ms > 0:
            self._flush_ticks_until(now_ms)
        self._clock.set(now_ms)

    def _flush_ticks_until(self, now_ms: int) -> None:
        """Run the flush ticks at or before ``now_ms``, each at its instant; the first tick is
        one period after the first time set (the broker's start). Ticks after one that left no
        cursor dirty would write nothing: skipped in O(1)."""
        every = self._flush_every_ms
        due = self._next_flush_ms
        if due is None:
            self._next_flush_ms = now_ms + every
            return
        while due <= now_ms:
            self._clock.set(due)
            self._factory.flush_cursors()
            due += every
            ml = self._ml
            if due <= now_ms and (ml is None or not any(cursor.is_dirty for cursor in ml.cursors)):
                due += ((now_ms - due) // every + 1) * every  # nothing left to flush
        self._next_flush_ms = due

    def next_flush_ms(self) -> int | None:
        """The event time of the next flush tick (None: no timer, or before the broker's start)."""
        return self._next_flush_ms if self._flush_every_ms > 0 else None

    # -- what a persist depends on ------------------------------------------------------------
    def persist_due_ms(self, subscription: str) -> float:
        """The first event time (ms) at which a change of the subscription's cursor persists at
        once (``ManagedCursor.persist_due_ns`` rounded up to the clock's milliseconds): its
        acknowledgements before it are all throttled. -inf before the cursor exists."""
        sub = self._subs.get(subscription)
        cursor = None if sub is None else sub.live_cursor
        if cursor is None:
            return -math.inf
        due = cursor.persist_due_ns
        return due if math.isinf(due) else float(-(-int(due) // 1_000_000))

    def writes_read_lac(self, subscription: str) -> bool:
        """Whether a persist of the subscription's cursor now depends on the entries produced
        so far (``ManagedCursor.writes_read_lac``; True before the cursor exists)."""
        sub = self._subs.get(subscription)
        return sub is None or sub.subscription is None or sub.cursor.writes_read_lac

    def bulk_ack_room(self, subscription: str, batch_words: int) -> BulkAckRoom:
        """``ManagedCursor.bulk_ack_room`` of the subscription's cursor (none before it exists)."""
        sub = self._subs.get(subscription)
        if sub is None or sub.subscription is None:
            return BulkAckRoom(0, 0, 0)
        return sub.cursor.bulk_ack_room(batch_words)

    def batch_ack_set(self, subscription: str, ledger_id: int, entry_id: int) -> int | None:
        """The remaining (un-acknowledged) indexes of a partially acknowledged entry as the
        restart figures count them (``ManagedCursor.counted_batch_ack_set``), or None."""
        return self._cursor_of(subscription).counted_batch_ack_set(Position(ledger_id, entry_id))

    # -- producing --------------------------------------------------------------------------
    @property
    def _ml(self) -> ManagedLedger | None:
        return None if self._topic is None else self._topic.managed_ledger

    def append(self, ledger_id: int, batch_sizes: np.ndarray) -> None:
        topic = self._topic
        if topic is None:
            topic = self._open(ledger_id)
        ml = topic.managed_ledger
        if ledger_id != ml.current_ledger_id:
            _roll_over_to(ml, self._store, ledger_id)
            self._ledgers += 1
        last = add_repeated_entries(ml, _EMPTY_ENTRY, len(batch_sizes))
        if last is not None and (batch_sizes > 1).any():
            # what a restart redelivers of an entry is its batch: the ledger keeps the sizes
            ml.record_entry_messages(Position(last.ledger_id, last.entry_id - len(batch_sizes) + 1), batch_sizes)

    def _open(self, first_ledger_id: int) -> Topic:
        self._store.expect_ledger(first_ledger_id)
        self._broker.ensure_namespace(self._name.namespace_name)  # the log's topic may be anywhere
        if self._partition >= 0:
            topic = self._broker.open_partition(str(self._name), self._partition)
        else:
            created = self._broker.create_topic(str(self._name))
            assert isinstance(created, Topic)
            topic = created
        dedup = topic.deduplication
        assert isinstance(dedup, MessageDeduplication)
        self._topic, self._dedup = topic, dedup if dedup.is_enabled else None
        self._ledgers = 1
        for sub in self._subs.values():
            self._attach(sub)
        return topic

    def start(self, ledger_id: int) -> None:
        if self._topic is None:
            self._open(ledger_id)

    def deduplicate(self, producers: np.ndarray, names: Sequence[str], sequence_ids: np.ndarray) -> np.ndarray:
        if self._dedup is None:
            raise RuntimeError("deduplicate before start or with deduplication off")
        return self._dedup.check_and_record_many(producers, names, sequence_ids)

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, spec: SubscriptionSpec) -> None:
        if spec.name in self._subs:
            return
        sub = _Subscription(spec)
        self._subs[spec.name] = sub
        if self._topic is not None:
            self._attach(sub)

    def _attach(self, sub: _Subscription) -> None:
        assert self._topic is not None
        initial = InitialPosition.LATEST if sub.spec.initial_position == "latest" else InitialPosition.EARLIEST
        name = cursor_name(sub.spec.name, self._topic.is_system_cursor)
        subscription = self._topic.subscribe(name, SubscriptionType.parse(sub.spec.type), initial)
        sub.attach(subscription, subscription.add_consumer("replay", permits=0))
        sub.start = subscription.cursor.mark_delete_position
        ml = self._topic.managed_ledger
        for settings, store in self._mirrors:
            view = MirrorView(ml, settings.ledger.with_changes(**_FIXED_LEDGER), settings.factory, store)
            mirror = CursorStateStore(view, subscription.cursor.name)
            subscription.cursor.add_state_mirror(mirror)
            sub.mirrors.append(mirror)

    def mirror_persistence(self, settings: Sequence[ReplaySettings]) -> None:
        """Persist every subscription's cursor state under each of ``settings`` too (see
        :mod:`.mirror`), each on a store of its own; call before the first subscription."""
        if self._subs:
            raise RuntimeError("mirror_persistence after a subscription was created")
        self._mirrors.extend((s, ReplayStore()) for s in settings)

    def has_subscription(self, name: str) -> bool:
        return name in self._subs

    def cursor(self, subscription: str) -> ManagedCursor | None:
        """The subscription's cursor (None before the first entry): for tests and tools that
        look at more of the state than the outputs carry."""
        sub = self._subs[subscription]
        return None if sub.subscription is None else sub.cursor

    def change_type(self, subscription: str, sub_type: str) -> None:
        sub = self._subs[subscription]
        if sub.spec.type == sub_type:
            return
        sub.spec = dataclasses.replace(sub.spec, type=sub_type)
        if sub.subscription is not None:
            assert sub.consumer is not None
            sub.consumer.close()  # the type changes only while no consumer is connected
            sub.subscription.change_type(SubscriptionType.parse(sub_type))
            sub.attach(sub.subscription, sub.subscription.add_consumer("replay", permits=0))

    def reset(self, subscription: str, ledger_id: int, entry_id: int) -> None:
        sub = self._subs[subscription]
        if sub.subscription is None:  # no entry yet: the cursor is where a reset would put it
            return
        sub.subscription.reset_cursor(Position(ledger_id, entry_id))

    def unsubscribe(self, subscription: str) -> None:
        sub = self._subs.pop(subscription)
        if sub.subscription is not None:
            assert sub.consumer is not None
            sub.consumer.close()
            sub.subscription.unsubscribe()

    def subscription_specs(self) -> list[SubscriptionSpec]:
        return [s.spec for s in self._subs.values()]

    def _sub(self, name: str) -> _Subscription:
        sub = self._subs[name]
        if sub.subscription is None:
            raise _no_topic_yet(name)
        return sub

    def _cursor_of(self, name: str) -> ManagedCursor:
        """The subscription's cursor (read on every look at its state; raises like :meth:`_sub`)."""
        cursor = self._subs[name].live_cursor
        if cursor is None:
            raise _no_topic_yet(name)
        return cursor

    # -- acknowledgements -------------------------------------------------------------------
    def _acknowledge(self, subscription: str, request: AckRequest) -> int:
        """One request through the broker's ack seam; the entries it acknowledged now."""
        consumer = self._sub(subscription).consumer
        assert consumer is not None
        return consumer.acknowledge_with_outcome(request).entries_acked

    def ack(self, subscription: str, positions: np.ndarray) -> int:
        return self._acknowledge(subscription, AckRequest(entries=positions))

    def ack_batch_indexes(
        self, subscription: str, ledger_id: int, entry_id: int, indexes: Sequence[int], batch_size: int
    ) -> int:
        ids = [MessageId(ledger_id, entry_id, -1, i) for i in indexes]
        return self._acknowledge(
            subscription, AckRequest(message_ids=ids, batch_sizes={Position(ledger_id, entry_id): batch_size})
        )

    def ack_batch_messages(
        self,
        subscription: str,
        positions: np.ndarray,
        batch_indexes: np.ndarray,
        batch_sizes: np.ndarray,
        entries: np.ndarray,
    ) -> int:
        ids = [
            MessageId(lid, eid, -1, i) for (lid, eid), i in zip(positions.tolist(), batch_indexes.tolist(), strict=True)
        ]
        sizes = {
            Position(lid, eid): size for (lid, eid), size in zip(positions.tolist(), batch_sizes.tolist(), strict=True)
        }
        whole = entries if len(entries) else ()
        return self._acknowledge(subscription, AckRequest(entries=whole, message_ids=ids, batch_sizes=sizes))

    def ack_batch_sets(
        self,
        subscription: str,
        positions: np.ndarray,
        ack_sets: Sequence[int],
        batch_sizes: np.ndarray,
        entries: np.ndarray | None = None,
    ) -> int:
        items = [
            (Position(lid, eid), bits, size)
            for (lid, eid), bits, size in zip(positions.tolist(), ack_sets, batch_sizes.tolist(), strict=True)
        ]
        whole = entries if entries is not None and len(entries) else ()
        return self._acknowledge(subscription, AckRequest(entries=whole, ack_sets=items))

    def ack_cumulative(
        self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
    ) -> int:
        mid = MessageId(ledger_id, entry_id, -1, batch_index)
        return self._acknowledge(
            subscription, AckRequest(cumulative=mid, batch_sizes={Position(ledger_id, entry_id): batch_size})
        )

    def cancel(self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int) -> int:
        sub = self._sub(subscription).subscription
        assert sub is not None
        item = SkipEntry(ledger_id, entry_id, None if batch_index < 0 else (batch_index,))
        plan = sub.plan_skip([item], {Position(ledger_id, entry_id): batch_size})
        return sub.apply_skip(plan).entries_acked

    def is_deleted(self, subscription: str, ledger_id: int, entry_id: int) -> bool:
        return self._cursor_of(subscription).is_message_deleted(Position(ledger_id, entry_id))

    def deleted_rows(self, subscription: str, positions: np.ndarray) -> list[bool]:
        return self._cursor_of(subscription).deleted_rows(positions)

    def batch_ack_sets(self, subscription: str, positions: np.ndarray) -> list[int | None]:
        """:meth:`batch_ack_set` of each row of ``positions`` (``counted_batch_ack_sets``)."""
        return self._cursor_of(subscription).counted_batch_ack_sets(positions)

    # -- delayed delivery -------------------------------------------------------------------
    def schedule(self, positions: np.ndarray, deliver_at: np.ndarray) -> None:
        self._tracker.add_many(np.asarray(positions, np.int64), deliver_at)

    def due(self, before_ms: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self._tracker.due_rows(before_ms - 1)
        return rows[:, 1:], rows[:, 0]

    def dispatch(self, before_ms: int) -> None:
        rows = self._tracker.pop_due_rows(before_ms - 1)
        if not len(rows):
            return
        positions = rows[:, 1:]
        items: list[tuple[int, int]] | None = None
        for sub in self._subs.values():
            cursor = sub.live_cursor
            if cursor is None or not sub.individual_ack:
                continue  # Exclusive / Failover ignore deliver-at times
            deleted = cursor.deleted_rows(positions)
            if not any(deleted):  # the common case: none acknowledged before it was due
                sub.delivered += len(deleted)
                continue
            if items is None:
                items = list(map(tuple, positions.tolist()))
            undelivered = list(compress(items, deleted))
            sub.undelivered.update(undelivered)
            sub.delivered += len(items) - len(undelivered)

    def was_delivered(self, subscription: str, ledger_id: int, entry_id: int, deliver_at_ms: int) -> bool:
        sub = self._subs[subscription]
        if sub.start is not None and Position(ledger_id, entry_id) <= sub.start:
            return False  # before the subscription began
        shared = sub.subscription is None or sub.individual_ack
        return deliver_at_ms < 0 or not shared or (ledger_id, entry_id) not in sub.undelivered

    # -- the ledgers the cluster deleted ------------------------------------------------------
    def forget_ledgers_before(self, ledger_id: int) -> list[int]:
        """Delete the topic's ledgers below ``ledger_id`` but the current one
        (``ManagedLedger.delete_ledgers_before``: a reset to the earliest position then lands
        on the first ledger kept, as on the cluster that trimmed them) and forget which of
        their delayed messages were acknowledged before they were due; returns the ledgers
        deleted (none before the topic opens). Raises
        :class:`~mledger.core.LedgerNotConsumedError`, changing nothing, while a
        subscription's persisted mark-delete is below one of their entries; the
        ``pulsar.dedup`` cursor is left where its last snapshot put it. O(ledgers +
        subscriptions + delayed messages acknowledged before they were due)."""
        ml = self._ml
        if ml is None:
            return []
        deleted = ml.delete_ledgers_before(ledger_id)
        if deleted:
            gone = set(deleted)
            for sub in self._subs.values():
                if sub.undelivered:  # no event can name those entries again
                    sub.undelivered = {p for p in sub.undelivered if p[0] not in gone}
        return deleted

    # -- results ----------------------------------------------------------------------------
    def ledger_count(self) -> int:
        return self._ledgers

    def finish(self, end_ms: int, emit_state: bool) -> list[SubscriptionResult]:
        if not self._subs:
            return []
        if self._topic is None:
            self._open(0)  # no entry: an empty ledger 0
        self.set_time(end_ms)
        pending = self._tracker.positions()
        results = []
        for sub in self._subs.values():
            assert sub.subscription is not None
            cursor = sub.cursor
            waiting = 0
            if sub.subscription.type.is_individual_ack_mode and pending:
                deleted = cursor.is_message_deleted
                waiting = sum(1 for p in pending if not deleted(p))
            # The subscription is left idle, as the broker's is once its last consumer left: the
            # dispatcher rewinds the cursor (Pulsar's PersistentDispatcherMultipleConsumers.
            # removeConsumer and the single-active dispatcher's reset), so the read position is
            # the one after the mark-delete, as internal stats show it. The rewind persists
            # nothing (Pulsar's ManagedCursorImpl.rewind): what the limiter held back stays
            # unpersisted, so the end figures are what a crash at the end would redeliver.
            cursor.rewind()
            results.append(self._result(sub, waiting, emit_state, describe=True))
        return results

    def persist_pending(self) -> None:
        for sub in self._subs.values():
            if sub.subscription is not None:
                sub.cursor.persist_pending()

    def observe(self) -> list[SubscriptionResult]:
        return [
            self._result(sub, 0, False, describe=False) for sub in self._subs.values() if sub.subscription is not None
        ]

    def _result(self, sub: _Subscription, waiting: int, emit_state: bool, describe: bool) -> SubscriptionResult:
        """``describe``: the ranges as Pulsar prints them (a string as long as the state)."""
        cursor = sub.cursor
        stats = cursor.stats()
        record, state = (
            self._persisted_state(self._store, cursor, stats.persistence.cursor_ledger_id)
            if emit_state
            else (None, None)
        )
        md, read = stats.mark_delete_position, stats.read_position
        return SubscriptionResult(
            subscription=sub.spec.name,
            subscription_type=sub.spec.type,
            mark_delete=(md.ledger_id, md.entry_id),
            read_position=(read.ledger_id, read.entry_id),
            ack_hole_ranges=stats.individually_deleted_ranges,
            backlog=stats.backlog,
            delayed_delivered=sub.delivered,
            delayed_pending=waiting,
            persisted_state_bytes=stats.persistence.persisted_state_bytes,
            state_chunks=stats.persistence.last_persist_chunks,
            truncated_ranges=stats.persistence.truncated_ranges,
            truncated_batch_indexes=stats.persistence.truncated_batch_indexes,
            answers=restart_answers(stats.persistence),
            state_record=record,
            state=state,
            individually_deleted_messages=cursor.individually_deleted_text() if describe else "",
        )

    def mirror_results(self, own: Sequence[SubscriptionResult], emit_state: bool) -> list[list[SubscriptionResult]]:
        """After :meth:`finish` (which returned ``own``): the results under each mirrored
        setting, in :meth:`mirror_persistence` order; only the persistence figures differ."""
        out: list[list[SubscriptionResult]] = []
        for k, (_, store) in enumerate(self._mirrors):
            rows = []
            for result, sub in zip(own, self._subs.values(), strict=True):
                stats: PersistenceStats = sub.mirrors[k].stats()
                record, state = (
                    self._persisted_state(store, sub.cursor, stats.cursor_ledger_id) if emit_state else (None, None)
                )
                rows.append(
                    dataclasses.replace(
                        result,
                        persisted_state_bytes=stats.persisted_state_bytes,
                        state_chunks=stats.last_persist_chunks,
                        truncated_ranges=stats.truncated_ranges,
                        truncated_batch_indexes=stats.truncated_batch_indexes,
                        state_record=record,
                        state=state,
                        answers=restart_answers(stats),
                    )
                )
            out.append(rows)
        return out

    def _persisted_state(self, store: ReplayStore, cursor: ManagedCursor, ledger_id: int) -> tuple[str, bytes]:
        """The last persisted state in ``store``: a ``PositionInfo`` (reassembled,
        uncompressed) from the cursor ledger, or the ``ManagedCursorInfo`` node when the state
        went there."""
        if ledger_id != _NO_LEDGER:
            entries = store.last_append(ledger_id)
            footer = parse_footer(entries[-1], max_parts=max(len(entries) - 1, 1), max_length=_MAX_STATE)
            payload = entries[-1] if footer is None else reassemble(footer, entries[:-1])
            return "PositionInfo", bytes(unpack_payload(payload, _MAX_STATE))
        assert self._ml is not None
        node = store.get(f"{ML_ROOT}/{self._ml.name}/{cursor.name}")
        assert node is not None
        return "ManagedCursorInfo", bytes(decompress_metadata(node.data, _MAX_STATE))


def restart_answers(stats: PersistenceStats) -> RestartAnswers:
    """The :class:`~.model.RestartAnswers` of a cursor state store's figures."""
    return RestartAnswers(
        redelivered_after_restart=stats.redelivered_after_restart,
        redelivered_after_restart_max=stats.redelivered_after_restart_max,
        redelivered_after_restart_max_at_ms=_at(stats.redelivered_after_restart_max_at_ms),
        state_over_limit_at_ms=_at(stats.state_over_limit_at_ms),
        persist_unacked_ranges_truncated=stats.persist_unacked_ranges_truncated,
        persist_batch_deleted_indexes_truncated=stats.persist_batch_deleted_indexes_truncated,
        persist_long_array_truncated=stats.persist_long_array_truncated,
        redelivered_after_crash=stats.redelivered_after_crash.messages,
        redelivered_after_crash_max=stats.redelivered_after_crash.messages_max,
        redelivered_after_crash_max_at_ms=_at(stats.redelivered_after_crash.messages_max_at_ms),
        redelivered_after_crash_entries=stats.redelivered_after_crash.entries,
        redelivered_after_crash_entries_max=stats.redelivered_after_crash.entries_max,
        redelivered_after_crash_limits=stats.redelivered_after_crash_limits.messages,
        redelivered_after_crash_limits_max=stats.redelivered_after_crash_limits.messages_max,
        redelivered_after_crash_limits_max_at_ms=_at(stats.redelivered_after_crash_limits.messages_max_at_ms),
        redelivered_after_crash_limits_entries=stats.redelivered_after_crash_limits.entries,
        redelivered_after_crash_limits_entries_max=stats.redelivered_after_crash_limits.entries_max,
        redelivered_after_unload=stats.redelivered_after_unload.messages,
        redelivered_after_unload_max=stats.redelivered_after_unload.messages_max,
        redelivered_after_unload_max_at_ms=_at(stats.redelivered_after_unload.messages_max_at_ms),
        redelivered_after_unload_entries=stats.redelivered_after_unload.entries,
        redelivered_after_unload_entries_max=stats.redelivered_after_unload.entries_max,
    )


def _no_topic_yet(subscription: str) -> RuntimeError:
    return RuntimeError(f"subscription {subscription!r}: no topic before the first entry")


def _at(ms: int) -> int | None:
    return ms if ms >= 0 else None


def _roll_over_to(ml: ManagedLedger, store: ReplayStore, ledger_id: int) -> None:
    """Close the current ledger and continue in a new one whose id is ``ledger_id`` (an empty
    current ledger, one a subscription was created on before any entry, is discarded, as
    Pulsar's ``ManagedLedgerImpl.ledgerClosed`` discards it: ``ManagedLedger.roll_over``)."""
    store.expect_ledger(ledger_id)
    rolled = ml.roll_over() == ledger_id
    if not rolled or ml.current_ledger_id != ledger_id:
        raise RuntimeError(f"{ml.name}: could not roll over to ledger {ledger_id}")
