"""A durable subscription: a named cursor, its dispatcher, its consumers, and PIP-423.

Theory of operation
-------------------
A subscription is a durable cursor of the topic's managed ledger (its name is the cursor's
name) whose type is stored as the cursor property ``mledger.subscriptionType`` (Pulsar's type
name, e.g. ``Key_Shared``), so topics re-opened after a restart find their subscriptions with
their types. Everything a consumer or an admin does ends as a cursor operation:

====================================  ===============================================
operation                             cursor
====================================  ===============================================
acknowledge (individual)              ``delete`` / ``delete_batch_indexes``
acknowledge_cumulative                ``mark_delete`` (``ack_set`` for a batch index)
cancel_delayed_message (PIP-423)      ``delete`` (an individual ack of the entry)
skip_messages (PIP-423)               ``delete_many`` / ``delete_with_ack_set``
skip / clear_backlog                  ``skip_entries`` / ``clear_backlog``
reset_cursor                          ``position_reset`` with the dispatcher's reset
====================================  ===============================================

so acknowledgement state is persisted by the cursor and survives restarts; the dispatcher then
never delivers what the cursor says is acknowledged.

PIP-423 as Pulsar has it: ``cancel_delayed_message`` returns False on a cumulative-ack type
(Exclusive, Failover) and otherwise acknowledges the entry and returns True;
``skip_messages`` refuses cumulative-ack types with ``NotAllowedError("Unsupported subscription
type.")`` (HTTP 405), acknowledges whole entries directly, and for batch indexes first reads the
entries (``cursor.replay_entries``) to learn their batch size, validates every index against
it (``InvalidRequestError``, 400, naming the index) and acknowledges with an ack set (set bit =
still unacknowledged). Nothing is acknowledged unless every item is valid. A position that is not
in the topic's ledger and not already acknowledged is refused with ``InvalidPositionError``
(412); an already acknowledged one is accepted and changes nothing.

Locking
-------
One re-entrant lock per subscription guards the subscription, its dispatcher and its consumers'
queues. Acknowledgements, PIP-423 operations and resets hold it while they persist the cursor
(storage I/O); PIP-423 batch-index skips and batch acks without a known batch size also read
entries under it. ``receive`` holds it only around the dispatcher's state changes; a dispatch
round's entry reads run outside it (see :mod:`mledger.broker._dispatcher`). Lock order:
dispatcher round lock, subscription lock, cursor lock, managed-ledger lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..codec._entry import Entry
from ..codec._messageid import MessageId, as_position
from ..core._errors import (
    CursorModifyingError,
    InvalidPositionError,
    InvalidRequestError,
    MarkDeletingMarkedPositionError,
    MLedgerError,
    NotAllowedError,
)
from ..core._position import EARLIEST, LATEST, Position
from ..managed_ledger._cursor import ManagedCursor
from ..managed_ledger._cursor_args import AckPlan
from ..managed_ledger._ledger_view import LedgerView
from ._consumer import AckRequest, Consumer, ConsumerSink
from ._dispatcher import Dispatcher
from ._errors import AlreadyClosedError, ConsumerBusyError, SubscriptionBusyError
from ._hooks import BrokerSettings
from ._journal import AckRecord, TopicJournal
from ._message import Message
from ._stats import SubscriptionStats
from ._types import ClientInfo, SkipEntry, SubscriptionType


class SubscriptionOwner(Protocol):
    """The topic (partition) a subscription belongs to, as the subscription sees it."""

    @property
    def name(self) -> str: ...

    @property
    def partition_index(self) -> int: ...

    @property
    def broker(self) -> BrokerSettings: ...

    journal: TopicJournal | None
    """Where cursor changes are reported (:mod:`mledger.broker._journal`), None: nowhere."""

    def delete_subscription(self, name: str) -> None: ...

    def remove_non_durable_subscription(self, sub: Subscription, keep_cursor: bool = False) -> None: ...


__all__ = ["SUBSCRIPTION_TYPE_PROPERTY", "SkipPlan", "Subscription"]

_MINIMUM_BACKLOG_FOR_EXPIRY_CHECK = 1000
_MESSAGE_EXPIRY_THRESHOLD = 1.5
"""Pulsar's ``PersistentSubscription``/``PersistentTopic`` constants: a connected subscription
with a smaller backlog expires only once its oldest entry is 1.5 TTLs old."""

_DELAYED_DELIVERY = "delayedDelivery"
"""The name of the subscriptions' one-shot timers on the broker's timer queue."""

log = logging.getLogger(__name__)

SUBSCRIPTION_TYPE_PROPERTY = "mledger.subscriptionType"
"""Cursor property holding the subscription type (Pulsar's type name)."""

_READ_ATTEMPTS = 3


@dataclass
class SkipPlan:
    """A validated ``skip_messages`` request: whole entries, and ``(position, ack set, batch
    size, indexes)`` for partial batches."""

    whole: list[Position]
    batches: list[tuple[Position, int, int, frozenset[int]]]


class Subscription:
    """One durable subscription of one topic (or partition). Thread-safe.

    Obtain with ``Broker.subscribe`` / ``Topic.subscribe``. Raises
    :class:`~mledger.broker._errors.AlreadyClosedError` once its topic is closed.
    """

    def __init__(
        self,
        topic: SubscriptionOwner,
        name: str,
        cursor: ManagedCursor,
        sub_type: SubscriptionType,
        durable: bool = True,
    ) -> None:
        self._topic = topic
        self.name = name
        self.durable = durable
        """False for a reader's subscription: an in-memory cursor, removed with its last consumer."""
        self._cursor = cursor
        self._ml = cursor.ledger
        self._type = sub_type
        self._lock = threading.RLock()
        self._consumers: dict[str, Consumer] = {}
        self._next_consumer_id = 0
        self._closed = False
        self._dispatcher = self._new_dispatcher()
        self._warned_batch_index_disabled = False
        # what consumers gone were sent (Pulsar's msgOutFromRemovedConsumer / bytesOut...)
        self._removed_msg_out = 0
        self._removed_bytes_out = 0
        self._last_md_advanced_ms = 0
        self._msg_expired = 0  # entries acknowledged by message expiry (Pulsar's totalMsgExpired)
        self._last_expire_ms = 0
        self._journal = topic.journal if durable else None

    def _new_dispatcher(self) -> Dispatcher:
        broker = self._topic.broker
        return Dispatcher(
            self._cursor,
            self._type,
            self._lock,
            broker.config,
            broker.clock,
            self._topic.partition_index,
            self._topic.name,
            getattr(self._topic, "compaction", None),
            self._arm_delayed_delivery,
        )

    # -- views ------------------------------------------------------------------------------
    @property
    def topic(self) -> str:
        """The topic (partition) name."""
        return self._topic.name

    @property
    def type(self) -> SubscriptionType:
        """The subscription type."""
        return self._type

    @property
    def cursor(self) -> ManagedCursor:
        """The subscription's durable cursor."""
        return self._cursor

    @property
    def mark_delete_position(self) -> Position:
        """Every entry at or before this position is acknowledged (the cursor's)."""
        return self._cursor.mark_delete_position

    def flush_acks(self) -> None:
        """Persist the acknowledgements the cursor holds back (``throttle_mark_delete``) now,
        so a caller that answers an ack only once it is stored can answer (a no-op when the
        cursor persists every change itself). Blocks on storage."""
        self._cursor.flush()

    @property
    def consumers(self) -> list[Consumer]:
        """Connected consumers, in join order."""
        with self._lock:
            return self._dispatcher.consumers

    @property
    def active_consumer(self) -> Consumer | None:
        """Exclusive/Failover: the consumer receiving messages."""
        with self._lock:
            return self._dispatcher.active_consumer

    @property
    def is_closed(self) -> bool:
        """Whether the subscription's topic was closed (or it was unsubscribed)."""
        return self._closed

    def next_delayed_delivery_ms(self) -> int | None:
        """The earliest deliver-at time of the delayed messages held, None when none is."""
        with self._lock:
            return self._dispatcher.next_delayed_delivery_ms()

    def _arm_delayed_delivery(self) -> None:
        """Arm this subscription's ``delayedDelivery`` timer on the broker's timer queue for
        when its earliest held message becomes due (the queue keeps the earlier of two), so
        that a driven queue dispatches it at that time (the dispatcher's tick in Pulsar). Only
        for a time after now: what is due already waits for a consumer or permits, and their
        arrival dispatches it."""
        due = self._dispatcher.next_delayed_due_ms()
        timers = self._topic.broker.timers
        if due is not None and due > timers.clock.now_ms():
            timers.call_at((_DELAYED_DELIVERY, self), due, self._delayed_delivery_due, _DELAYED_DELIVERY)

    def _delayed_delivery_due(self) -> None:
        if self._closed:
            return
        try:
            self.dispatch()
        except MLedgerError as exc:  # a store failure: the next read, or the sweep, retries
            log.info("delayed dispatch of %s/%s failed: %s", self.topic, self.name, exc)
        with self._lock:
            self._arm_delayed_delivery()

    def backlog(self) -> int:
        """Unacknowledged entries (a batch counts once)."""
        return self._cursor.number_of_entries_in_backlog(precise=True)

    def number_of_delayed_messages(self) -> int:
        """Messages held by the delayed-delivery tracker (Pulsar's ``msgDelayed``). O(1): unlike
        :meth:`stats`, renders no ack-range string (the metrics scrape reads this)."""
        with self._lock:
            return self._dispatcher.delayed_messages

    def stats(self) -> SubscriptionStats:
        """A consistent snapshot of the cursor, the dispatcher and the consumers, with the
        consumers' counters and rates (see :mod:`mledger.broker._stats`)."""
        now, interval_ms = self._now_ms(), self._stats_interval_ms()
        with self._lock:
            cursor = self._cursor
            dispatcher = self._dispatcher
            consumers = tuple(
                c.stats(now, interval_ms, dispatcher.recently_joined_position(c)) for c in dispatcher.consumers
            )
            return SubscriptionStats(
                name=self.name,
                topic=self.topic,
                type=self._type,
                msg_backlog=cursor.number_of_entries_in_backlog(precise=True),
                mark_delete_position=cursor.mark_delete_position,
                read_position=cursor.read_position,
                individually_deleted_messages=cursor.individually_deleted_text(),
                consumers=consumers,
                dispatcher=dispatcher.stats(),
                durable=self.durable,
                msg_out_counter=self._removed_msg_out + sum(c.out.msg_counter for c in consumers),
                bytes_out_counter=self._removed_bytes_out + sum(c.out.bytes_counter for c in consumers),
                non_contiguous_deleted_ranges=cursor.total_non_contiguous_deleted_messages_range(),
                last_mark_delete_advanced_ms=self._last_md_advanced_ms,
                total_msg_expired=self._msg_expired,
                last_expire_ms=self._last_expire_ms,
            )

    def update_rates(self, now_ms: int, interval_ms: int) -> None:
        """Close the consumers' rates' stats interval at ``now_ms`` (the broker's stats timer)."""
        with self._lock:
            consumers = self._dispatcher.consumers
        for consumer in consumers:
            consumer.update_rates(now_ms, interval_ms)

    def _now_ms(self) -> int:
        return self._topic.broker.clock.now_ms()

    def _stats_interval_ms(self) -> int:
        return self._topic.broker.config.stats_update_frequency_in_secs * 1000

    # -- consumers --------------------------------------------------------------------------
    def add_consumer(
        self,
        consumer_name: str | None = None,
        permits: int | None = None,
        sink: ConsumerSink | None = None,
        client: ClientInfo | None = None,
        *,
        read_compacted: bool = False,
        start_earliest: bool = False,
    ) -> Consumer:
        """Attach a consumer with ``permits`` of receive-queue room (default
        ``BrokerConfig.receiver_queue_size``); a name is generated when None. With a ``sink``
        the consumer is remote (:mod:`mledger.broker._listeners`): entries are pushed to the
        sink as they become deliverable, and permits come back only through ``flow``;
        ``client`` is what its client told about it (reported in the stats). A
        ``read_compacted`` consumer reads the compacted view up to the compaction horizon
        (the whole view on its first read when ``start_earliest``: a reader from the earliest
        message).

        Raises ``ConsumerBusyError`` when the name is taken or an Exclusive subscription already
        has its consumer, ``InvalidRequestError`` for a bad name or permits, ``NotAllowedError``
        for ``read_compacted`` on a Shared or Key_Shared subscription.
        """
        if permits is None:
            permits = self._topic.broker.config.receiver_queue_size
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 0:
            raise InvalidRequestError(f"invalid permits {permits!r}: must be an integer >= 0")
        if consumer_name is not None and (not isinstance(consumer_name, str) or not consumer_name):
            raise InvalidRequestError(f"invalid consumer name {consumer_name!r}")
        if read_compacted:
            check_read_compacted(self._type)
        with self._lock:
            self._check_open()
            consumer_id = self._next_consumer_id
            self._next_consumer_id += 1
            name = consumer_name if consumer_name is not None else f"{self.name}-consumer-{consumer_id}"
            if name in self._consumers:
                raise ConsumerBusyError(
                    f"consumer name {name!r} is already connected to subscription {self.name!r} on {self.topic}"
                )
            if self._type is SubscriptionType.EXCLUSIVE and self._consumers:
                raise ConsumerBusyError(f"Exclusive consumer is already connected to subscription {self.name!r}")
            consumer = Consumer(
                self,
                name,
                permits,
                consumer_id,
                sink,
                client=client,
                connected_since_ms=self._now_ms(),
                read_compacted=read_compacted,
                start_earliest=start_earliest,
            )
            self._consumers[name] = consumer
            self._dispatcher.add_consumer(consumer)
            self.check_end_of_topic()
            return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer`` (its ``close`` calls this); its unacknowledged messages are
        redelivered. A non-durable subscription goes away with its last consumer. Idempotent."""
        with self._lock:
            if not consumer.mark_disconnected():
                return
            self._count_removed(consumer)
            self._consumers.pop(consumer.name, None)
            self._dispatcher.remove_consumer(consumer)
            last = not self._consumers
        if last and not self.durable:
            self._topic.remove_non_durable_subscription(self)

    def _disconnect_remote_consumers(self, reset: bool = False) -> None:
        """Remove every remote consumer and tell its sink (Pulsar disconnects the consumers of
        a subscription whose cursor was reset, or that is going away; clients reconnect).

        A non-durable subscription left without consumers goes away; after a ``reset`` its
        cursor stays open in the ledger, so the reader reconnecting under the same name gets
        the reset cursor back, not a new one at its original start id (Pulsar's
        ``removeConsumer(consumer, isResetCursor)``)."""
        with self._lock:
            remote = [c for c in self._consumers.values() if c.sink is not None]
            for consumer in remote:
                consumer.mark_disconnected()
                self._count_removed(consumer)
                self._consumers.pop(consumer.name, None)
                self._dispatcher.remove_consumer(consumer)
        for consumer in remote:
            consumer.sink.disconnected(consumer)  # type: ignore[union-attr]
        if remote and not self.durable and not self._consumers:
            self._topic.remove_non_durable_subscription(self, keep_cursor=reset)

    def change_type(self, sub_type: SubscriptionType) -> None:
        """Change the type (only while no consumer is connected); persisted in the cursor.

        ``Topic.subscribe`` calls this when a subscriber asks for another type. Raises
        ``SubscriptionBusyError`` while consumers are connected."""
        with self._lock:
            if sub_type is self._type:
                return
            if self._consumers:
                raise SubscriptionBusyError(
                    f"Subscription {self.name!r} on {self.topic} is of different type:"
                    f" {self._type.value}, requested {sub_type.value}"
                )
            self._cursor.set_cursor_property(SUBSCRIPTION_TYPE_PROPERTY, sub_type.value)
            old = self._dispatcher
            self._type = sub_type
            self._dispatcher = self._new_dispatcher()
            if old.rewind_pending:
                self._dispatcher.defer_rewind()
            old.close()

    # -- consuming: the consumer_* entry points of ConsumerOwner, called by Consumer -------------
    def dispatch(self) -> int:
        """Push what is deliverable now into the consumers' queues; return how many messages."""
        return self._dispatcher.dispatch()

    def consumer_receive(self, consumer: Consumer, max_messages: int) -> list[Message]:
        """``Consumer.receive``: dispatch what is deliverable now, then pop from its queue."""
        out: list[Message] = []
        while len(out) < max_messages:
            self._check_consumer(consumer)
            self._dispatcher.dispatch()
            with self._lock:
                self._check_consumer(consumer)
                got, popped = self._dispatcher.take(consumer, max_messages - len(out))
            out.extend(got)
            if popped == 0:
                break
        return out

    def consumer_flow(self, consumer: Consumer, permits: int) -> None:
        """``Consumer.flow``: ``permits`` more messages of receive-queue room."""
        with self._lock:
            self._check_consumer(consumer)
            consumer.record_flow(self._now_ms())
            consumer.return_permits(permits)

    def consumer_acknowledge(self, consumer: Consumer, request: AckRequest) -> int:
        """``Consumer.acknowledge_request`` (every ack method of the consumer builds one): in one
        pass under the lock, validate every part (nothing is acknowledged if one is invalid),
        then acknowledge the whole entries and ack sets in one cursor operation and the
        message ids one by one; returns the entries the first two parts fully acknowledged."""
        with self._lock:
            self._check_consumer(consumer)
            consumer.record_ack(self._now_ms())
            if request.cumulative is not None:
                self._acknowledge_cumulative(request.cumulative)
                return 0
            sizes: dict[Position, int | None] = {}  # one read per entry, however many of its ids
            steps = [self._plan_individual_ack(mid, sizes) for mid in request.message_ids]
            ack_sets = self._plan_ack_sets(request.ack_sets)
            entries = request.entries
            cursor = self._cursor
            md = cursor.mark_delete_position
            done = cursor.acknowledge(AckPlan.of(entries=entries, ack_sets=ack_sets)) if len(entries) or ack_sets else 0
            journal = self._journal
            applied: list[AckRecord] = []
            if len(entries) and done:
                self._dispatcher.on_deleted(entries)
                if journal is not None:
                    rows = entries.tolist() if isinstance(entries, np.ndarray) else entries
                    applied.extend(AckRecord(int(lid), int(eid)) for lid, eid in rows)
            if ack_sets:
                done += self._settle_ack_sets(ack_sets, applied if journal is not None else None)
            for step in steps:
                if step is not None:
                    self._apply_individual_ack(*step)
                    if journal is not None:
                        self._applied_ack(step[0], (step[1],) if step[1] >= 0 else None, applied)
            if journal is not None:
                journal.acked(self.name, applied)
            self._after_acks(md)
            return done

    def _plan_individual_ack(
        self, mid: MessageId, sizes: dict[Position, int | None]
    ) -> tuple[Position, int, int] | None:
        """``(position, batch index or -1, batch size)``; None when already acknowledged.
        ``sizes`` caches the batch sizes read during one call."""
        self._check_partition(mid)
        position = mid.position
        if not self._is_live(position):
            return None
        if mid.batch_index < 0:
            return position, -1, 0
        if position in sizes:
            size = sizes[position]
        else:
            size = sizes[position] = self._batch_size_of(position)
        if size is None:
            return None
        self._check_batch_index(position, mid.batch_index, size)
        return position, mid.batch_index, size

    def _apply_individual_ack(self, position: Position, batch_index: int, batch_size: int) -> None:
        cursor = self._cursor
        if batch_index < 0:
            cursor.delete(position)
            self._dispatcher.on_deleted((position,))
            return
        cursor.delete_batch_indexes(position, (batch_index,), batch_size)
        if cursor.is_message_deleted(position):
            self._dispatcher.on_deleted((position,))
        elif self._dispatcher.on_batch_acked(position, (batch_index,)):
            # Every index its consumer held is acked: the entry is done even when the ledger
            # does not track batch indexes (the client-side batch acker's rule).
            cursor.delete(position)
            self._dispatcher.on_deleted((position,))

    def _plan_ack_sets(self, items: Iterable[tuple[Position, int, int | None]]) -> list[tuple[Position, int, int]]:
        """The ack sets still to apply, each cut to its entry's batch size (the dispatcher's,
        the caller's, else read from the entry); already acknowledged entries are left out."""
        plan: list[tuple[Position, int, int]] = []
        for position, ack_set, batch_size in items:
            if not self._is_live(position):
                continue
            size = self._dispatcher.pending_batch_size(position) or batch_size or self._batch_size_of(position)
            if size is None:
                continue
            plan.append((position, ack_set & ((1 << size) - 1), size))
        return plan

    def _settle_ack_sets(self, plan: list[tuple[Position, int, int]], applied: list[AckRecord] | None) -> int:
        """Tell the dispatcher which ack-set entries are done after the cursor applied them; an
        entry whose held indexes are all acked is acknowledged whole (the client-side batch
        acker's rule). Returns how many entries that acknowledged."""
        cursor = self._cursor
        deleted, held = [], []
        for position, ack_set, size in plan:
            if cursor.is_message_deleted(position):
                deleted.append(position)
            elif self._dispatcher.on_batch_acked(position, _acked_indexes(ack_set, size)):
                held.append(position)  # every index its consumer held is acked: the entry is done
        done = cursor.delete_many(held) if held else 0
        self._dispatcher.on_deleted(deleted + held)
        if applied is not None:
            for position, ack_set, size in plan:
                self._applied_ack(position, _acked_indexes(ack_set, size), applied)
        return done

    def _acknowledge_cumulative(self, mid: MessageId) -> None:
        """A cumulative ack (refused on Shared and Key_Shared); the caller holds the lock."""
        if self._type.is_individual_ack_mode:
            raise NotAllowedError(
                "Cannot use cumulative acks on a non-exclusive/non-failover subscription"
                f" ({self.name!r} is {self._type.value})"
            )
        self._check_partition(mid)
        position = mid.position
        cursor = self._cursor
        if position <= cursor.mark_delete_position:
            return  # Pulsar ignores a cumulative ack behind the mark-delete position
        if not self._ml.is_valid_position(position):
            raise InvalidPositionError(f"message {mid} does not exist in topic {self.topic}")
        md = cursor.mark_delete_position
        ack_set = None
        if mid.batch_index >= 0:
            size = self._batch_size_of(position)
            if size is not None:
                self._check_batch_index(position, mid.batch_index, size)
                if mid.batch_index < size - 1:
                    ack_set = ((1 << size) - 1) & ~((1 << (mid.batch_index + 1)) - 1)
        try:
            cursor.mark_delete(position, ack_set=ack_set)
        except MarkDeletingMarkedPositionError:
            return
        if ack_set is not None:
            self._dispatcher.on_batch_acked(position, range(mid.batch_index + 1))
        if self._journal is not None:
            index = mid.batch_index if ack_set is not None else -1
            self._journal.acked(self.name, [AckRecord(position.ledger_id, position.entry_id, index, True)])
        self._after_acks(md, force=True)

    def consumer_negative_acknowledge(self, consumer: Consumer, message_ids: list[MessageId]) -> None:
        """``Consumer.negative_acknowledge``: redeliver entries the consumer holds."""
        with self._lock:
            self._check_consumer(consumer)
            for mid in message_ids:
                self._check_partition(mid)
            self._dispatcher.negative_ack(consumer, [mid.position for mid in message_ids])

    def consumer_redeliver_unacknowledged(self, consumer: Consumer) -> None:
        """``Consumer.redeliver_unacknowledged_messages``."""
        with self._lock:
            self._check_consumer(consumer)
            self._dispatcher.redeliver(consumer)

    # -- PIP-423 ------------------------------------------------------------------------------
    def cancel_delayed_message(self, ledger_id: int, entry_id: int) -> bool:
        """Cancel a (delayed) message by acknowledging its entry individually (PIP-423).

        Returns False, changing nothing, on Exclusive and Failover subscriptions (cumulative-ack
        types); otherwise acknowledges ``ledger_id:entry_id`` and returns True, also when it was
        already acknowledged. The message is then never delivered to any consumer of this
        subscription, even after its deliver-at time and across restarts (the cursor persists
        the ack). Raises ``InvalidRequestError`` for ids that are not int64,
        ``InvalidPositionError`` for negative ids or an entry that is not in the topic.
        """
        position = _position(ledger_id, entry_id)
        if self._type.is_cumulative_ack_mode:
            log.warning(
                "Cannot cancel delayed message on subscription %s of type %s which uses cumulative ack.",
                self.name,
                self._type.value,
            )
            return False
        with self._lock:
            self._check_open()
            md = self._cursor.mark_delete_position
            if self._is_live(position):
                self._cursor.delete(position)
                if self._journal is not None:
                    self._journal.cancelled(self.name, position)
            self._dispatcher.on_deleted((position,))
            self._after_acks(md)
        return True

    def skip_messages(self, entries: Iterable[SkipEntry]) -> None:
        """Skip messages by id: acknowledge whole entries or some of their batch indexes (PIP-423).

        Raises ``NotAllowedError("Unsupported subscription type.")`` (405) on Exclusive and
        Failover; ``InvalidRequestError`` (400) for an item that is not a ``SkipEntry`` or a batch
        index outside ``[0, batch size)``; ``InvalidPositionError`` (412) for negative ids or an
        entry not in the topic. Validates everything before acknowledging anything. Batch
        indexes are ignored (logged once) when the ledger's
        ``deletion_at_batch_index_level_enabled`` is off, as in Pulsar.
        """
        items = checked_skip_entries(entries)
        with self._lock:
            self.apply_skip(self.plan_skip(items))

    def plan_skip(self, items: list[SkipEntry]) -> SkipPlan:
        """Validate a PIP-423 skip without changing anything (a partitioned subscription plans every
        partition before applying any); raises what ``skip_messages`` raises."""
        """Validate ``items`` (reading batch entries) without acknowledging anything."""
        if self._type.is_cumulative_ack_mode:
            raise NotAllowedError("Unsupported subscription type.")
        whole: set[Position] = set()
        partial: dict[Position, set[int]] = {}
        for item in items:
            position = _position(item.ledger_id, item.entry_id)
            if item.batch_indexes is None:
                whole.add(position)
                partial.pop(position, None)
            elif position not in whole:
                partial.setdefault(position, set()).update(item.batch_indexes)
        with self._lock:
            self._check_open()
            plan = SkipPlan([p for p in sorted(whole) if self._is_live(p)], [])
            for entry in self._read_entries([p for p in sorted(partial) if self._is_live(p)]):
                size = max(entry.metadata.num_messages, 1)
                indexes = partial[entry.position]
                for i in sorted(indexes):
                    self._check_batch_index(entry.position, i, size)
                ack_set = (1 << size) - 1
                for i in indexes:
                    ack_set &= ~(1 << i)
                plan.batches.append((entry.position, ack_set, size, frozenset(indexes)))
            return plan

    def apply_skip(self, plan: SkipPlan) -> None:
        """Apply a skip planned by :meth:`plan_skip`."""
        """Acknowledge a validated plan (entries acknowledged meanwhile are left alone)."""
        with self._lock:
            self._check_open()
            cursor = self._cursor
            md = cursor.mark_delete_position
            if plan.whole:
                cursor.delete_many(plan.whole)
                self._dispatcher.on_deleted(plan.whole)
            by_index = self._ml.config.deletion_at_batch_index_level_enabled
            if plan.batches and not by_index and not self._warned_batch_index_disabled:
                self._warned_batch_index_disabled = True
                log.warning(
                    "%s/%s: batch-index skips are ignored, deletion_at_batch_index_level_enabled is off",
                    self.topic,
                    self.name,
                )
            for position, ack_set, size, indexes in plan.batches:
                cursor.delete_with_ack_set(position, ack_set, batch_size=size)
                if cursor.is_message_deleted(position):
                    self._dispatcher.on_deleted((position,))
                elif by_index and self._dispatcher.on_batch_acked(position, indexes):
                    cursor.delete(position)
                    self._dispatcher.on_deleted((position,))
            if self._journal is not None:  # a skip is individual acks, as Pulsar applies it
                applied = [AckRecord(p.ledger_id, p.entry_id) for p in plan.whole]
                for position, _, _, indexes in plan.batches:
                    self._applied_ack(position, sorted(indexes), applied)
                self._journal.acked(self.name, applied)
            self._after_acks(md)

    # -- admin: skip, clear, reset -----------------------------------------------------------
    def skip(self, num_messages: int) -> None:
        """Skip the next ``num_messages`` unacknowledged entries (Pulsar's ``skip -n``)."""
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 0:
            raise InvalidRequestError(f"invalid number of messages to skip {num_messages!r}: must be >= 0")
        with self._lock:
            self._check_open()
            self._cursor.skip_entries(num_messages)
            self._dispatcher.on_mark_delete_moved()
            if self._journal is not None:
                self._journal.not_recorded(f"skip of {num_messages} messages on subscription {self.name!r}")
            self.check_end_of_topic()

    def clear_backlog(self) -> None:
        """Acknowledge everything published so far (Pulsar's ``clear-backlog``)."""
        with self._lock:
            self._check_open()
            self._cursor.clear_backlog()
            self._dispatcher.on_mark_delete_moved()
            self._journal_reset()
            self.check_end_of_topic()

    def reset_cursor(self, position: Position | MessageId) -> None:
        """Re-consume from ``position`` (``EARLIEST``/``LATEST`` allowed): acks after it are
        forgotten, and the dispatcher is reset in the same cursor revision (queues, replay,
        delayed and recently-joined state cleared). Raises ``ConcurrentResetError`` (409) if
        another reset holds the cursor."""
        target = as_position(position)
        with self._lock:
            self._check_open()
            self._dispatcher.reset(lambda reset: reset.reset_to(target), count_redeliveries=False)
            self._dispatcher.on_mark_delete_moved()
            self._journal_reset()
        self._disconnect_remote_consumers(reset=True)

    def reset_cursor_by_time(self, timestamp_ms: int) -> Position:
        """Reset to the first entry published at or after ``timestamp_ms``; returns it.

        Binary search over the ledger (publish times are non-decreasing); O(log n) reads.
        """
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
            raise InvalidRequestError(f"invalid timestamp {timestamp_ms!r}: not an integer")
        target = _first_published_at_or_after(self._ml, timestamp_ms)
        self.reset_cursor(target)
        return target

    # -- message expiry (Pulsar's PersistentSubscription.expireMessages) ---------------------------
    def expire_messages(self, expire_time_seconds: int) -> bool:
        """Acknowledge every message published more than ``expire_time_seconds`` ago by the
        broker's clock, as Pulsar's message TTL does (``PersistentSubscription.expireMessages``
        and ``PersistentMessageExpiryMonitor``): the mark-delete position moves to the last such
        entry, or past the last closed ledger closed that long ago, whichever is further
        (``checkExpiryByLedgerClosureTime``). Like Pulsar, a subscription with a connected
        consumer and fewer than 1,000 entries of backlog is left alone until its oldest
        unacknowledged entry is 1.5 times that old. Recorded as a cumulative ack.

        Returns whether the expiry ran, Pulsar's answer (the admin API's 409 when False): False
        for a subscription without backlog or left alone by that rule, True otherwise, whether or
        not anything was old enough. O(log n) entry reads; blocks on storage."""
        if isinstance(expire_time_seconds, bool) or not isinstance(expire_time_seconds, int) or expire_time_seconds < 0:
            raise InvalidRequestError(f"invalid expire time {expire_time_seconds!r}: expected seconds >= 0")
        now = self._now_ms()
        ttl_ms = expire_time_seconds * 1000
        with self._lock:
            self._check_open()
            cursor = self._cursor
            backlog = cursor.number_of_entries_in_backlog(precise=True)
            if backlog == 0:
                return False
            md = cursor.mark_delete_position
            if self._dispatcher.consumers and backlog < _MINIMUM_BACKLOG_FOR_EXPIRY_CHECK:
                oldest = self._ml.read_entry(self._ml.next_valid_position(md)).metadata.publish_time_ms
                if now <= oldest + int(ttl_ms * _MESSAGE_EXPIRY_THRESHOLD):
                    return False
            self._last_expire_ms = now
            target = self._expire(now, ttl_ms, by_publish_time=True)
        if target is not None:
            log.info("%s/%s: expired messages up to %s (TTL %d s)", self.topic, self.name, target, expire_time_seconds)
        return True

    def expire_messages_up_to(self, position: Position) -> bool:
        """Acknowledge every entry up to ``position`` included: the mark-delete position moves to
        the newest entry at or before it (Pulsar's ``PersistentMessageExpiryMonitor
        .expireMessages(Position)``). Returns whether the expiry ran: False, and nothing changes,
        for a position past the topic's last entry. Recorded as a cumulative ack. Blocks on storage."""
        with self._lock:
            self._check_open()
            ml = self._ml
            if position > ml.last_confirmed_entry:
                return False
            self._last_expire_ms = self._now_ms()
            newest = (
                position if ml.is_valid_position(position) else ml.previous_position(ml.next_valid_position(position))
            )
            target = self._expire_to(newest)
        if target is not None:
            log.info("%s/%s: expired messages up to %s", self.topic, self.name, target)
        return True

    def drop_backlog_older_than(self, seconds: int, precise: bool) -> bool:
        """Backlog-quota eviction by time (Pulsar's ``dropBacklogForTimeLimit``): acknowledge
        what is older than ``seconds``: with ``precise``, by publish time and ledger close time
        (the expiry monitor, without :meth:`expire_messages`' guard); otherwise whole closed
        ledgers only. Returns whether the mark-delete moved. Blocks on storage."""
        with self._lock:
            self._check_open()
            target = self._expire(self._now_ms(), seconds * 1000, by_publish_time=precise)
        if target is not None:
            log.info("%s/%s: backlog older than %d s dropped up to %s", self.topic, self.name, seconds, target)
        return target is not None

    def _expire(self, now: int, ttl_ms: int, by_publish_time: bool) -> Position | None:
        """Mark-delete up to what is older than ``ttl_ms`` (lock held); the new mark-delete
        position, None when it did not move."""
        target = _last_expired_by_ledger_closure(self._ml, now, ttl_ms)
        if by_publish_time:
            target = max(target, self._last_published_before(now - ttl_ms))
        return self._expire_to(target)

    def _expire_to(self, target: Position) -> Position | None:
        """Mark-delete at ``target`` as an expiry (lock held): counted in ``msgExpired``,
        recorded as a cumulative ack; None when ``target`` is not past the mark-delete."""
        cursor = self._cursor
        md = cursor.mark_delete_position
        if target <= md:
            return None
        backlog = cursor.number_of_entries_in_backlog(precise=True)
        cursor.mark_delete(target)
        self._msg_expired += backlog - cursor.number_of_entries_in_backlog(precise=True)
        if self._journal is not None:
            self._journal.acked(self.name, [AckRecord(target.ledger_id, target.entry_id, -1, True)])
        self._after_acks(md, force=True)
        return target

    def _last_published_before(self, horizon_ms: int) -> Position:
        """The last entry published before ``horizon_ms`` (Pulsar's ``isEntryExpired``: publish
        time + TTL < now), or a position before every entry."""
        first_kept = _first_published_at_or_after(self._ml, horizon_ms)
        if first_kept == LATEST:
            return self._ml.last_confirmed_entry
        return self._ml.previous_position(first_kept)

    # -- lifecycle ------------------------------------------------------------------------------
    def unsubscribe(self) -> None:
        """Delete the subscription and its cursor; ``SubscriptionBusyError`` if consumers are connected."""
        self._topic.delete_subscription(self.name)

    def close(self) -> None:
        """Stop the subscription (its topic calls this when it closes or deletes it): consumers
        are disconnected, remote ones told; the cursor is left as it is. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            remote = [c for c in self._consumers.values() if c.sink is not None]
            self._dispatcher.close()
            self._consumers.clear()
        self._topic.broker.timers.cancel((_DELAYED_DELIVERY, self))
        for consumer in remote:
            consumer.sink.disconnected(consumer)  # type: ignore[union-attr]

    # -- helpers ------------------------------------------------------------------------------
    def _count_removed(self, consumer: Consumer) -> None:
        """Keep what a leaving consumer was sent in the subscription's counters (lock held)."""
        out = consumer.stats(self._now_ms(), self._stats_interval_ms()).out
        self._removed_msg_out += out.msg_counter
        self._removed_bytes_out += out.bytes_counter

    def _applied_ack(self, position: Position, indexes: Iterable[int] | None, out: list[AckRecord]) -> None:
        """The journal's rows for an ack of ``position`` just applied (``indexes`` None: the whole
        entry): the whole entry once the cursor has it deleted, else the batch indexes when
        the ledger tracks them (otherwise the cursor did not change)."""
        if indexes is None or self._cursor.is_message_deleted(position):
            out.append(AckRecord(position.ledger_id, position.entry_id))
        elif self._ml.config.deletion_at_batch_index_level_enabled:
            out.extend(AckRecord(position.ledger_id, position.entry_id, i) for i in indexes)

    def _journal_reset(self) -> None:
        """Report a reset (caller holds the lock): as the position after the new mark-delete,
        which a reset to it reproduces whatever the target was (EARLIEST, LATEST, a gap)."""
        if self._journal is not None:
            self._journal.subscription_reset(self.name, self._cursor.mark_delete_position.next())

    def _after_acks(self, md_before: Position, force: bool = False) -> None:
        md = self._cursor.mark_delete_position
        if md > md_before:
            self._last_md_advanced_ms = self._now_ms()
        if force or md != md_before:
            self._dispatcher.on_mark_delete_moved()
            self.check_end_of_topic()

    def check_end_of_topic(self) -> None:
        """Pulsar's dispatcher on ``NoMoreEntriesToReadException``: on a terminated topic whose
        entries are all acknowledged, tell every consumer it reached the end of the topic (the
        topic's ``terminate``, a consumer joining and every ack that moves the mark-delete call
        this, and so do skip and clear-backlog). Takes the lock."""
        if not self._ml.is_terminated:
            return
        with self._lock:
            if self._cursor.number_of_entries_in_backlog() == 0:
                for consumer in list(self._consumers.values()):
                    consumer.reached_end_of_topic()

    def _is_live(self, position: Position) -> bool:
        """True for an entry to acknowledge, False if already acknowledged; raises if not in the topic."""
        if self._cursor.is_message_deleted(position):
            return False
        if not self._ml.is_valid_position(position):
            raise InvalidPositionError(f"message {position} does not exist in topic {self.topic}")
        return True

    def _batch_size_of(self, position: Position) -> int | None:
        """The entry's batch size, from the dispatcher if it handed the entry out, else read
        from the entry (a message id's own ``batch_size`` is not trusted); None if acked."""
        known = self._dispatcher.pending_batch_size(position)
        if known is not None:
            return known
        entries = self._read_entries([position])
        return max(entries[0].metadata.num_messages, 1) if entries else None

    def _read_entries(self, positions: list[Position]) -> list[Entry]:
        if not positions:
            return []
        for _ in range(_READ_ATTEMPTS - 1):
            try:
                return self._cursor.replay_entries(positions)
            except CursorModifyingError:
                continue
        return self._cursor.replay_entries(positions)

    def _check_batch_index(self, position: Position, index: int, size: int) -> None:
        if not 0 <= index < size:
            raise InvalidRequestError(
                f"Invalid batch index {index} for message {position}: the entry holds {size}"
                f" message{'s' if size != 1 else ''} (valid indexes 0..{size - 1})"
            )

    def _check_partition(self, mid: MessageId) -> None:
        if not isinstance(mid, MessageId):
            raise InvalidRequestError(f"invalid message id {mid!r}")
        own = self._topic.partition_index
        if mid.partition not in (-1, own):
            raise InvalidRequestError(f"message id {mid} is of partition {mid.partition}, not of {self.topic}")

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"subscription {self.name!r} on {self.topic} is closed")

    def _check_consumer(self, consumer: Consumer) -> None:
        if not consumer.is_connected:
            raise AlreadyClosedError(f"consumer {consumer.name!r} of subscription {self.name!r} is closed")

    def __repr__(self) -> str:
        return f"Subscription({self.name!r}, topic={self.topic!r}, type={self._type.value})"


def check_read_compacted(sub_type: SubscriptionType) -> None:
    """Refuse ``readCompacted`` on a Shared or Key_Shared subscription (``NotAllowedError``,
    Pulsar's message)."""
    if not sub_type.is_cumulative_ack_mode:
        raise NotAllowedError("readCompacted only allowed on failover or exclusive subscriptions")


def _position(ledger_id: int, entry_id: int) -> Position:
    for name, value in (("ledgerId", ledger_id), ("entryId", entry_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequestError(f"invalid {name} {value!r}: not an integer")
    if ledger_id < 0 or entry_id < 0:
        raise InvalidPositionError(
            f"invalid message id {ledger_id}:{entry_id}: ledgerId, entryId must be non-negative."
        )
    return Position.of(ledger_id, entry_id)


def checked_skip_entries(entries: Iterable[SkipEntry]) -> list[SkipEntry]:
    """``skip_messages``'s argument as a list of :class:`SkipEntry`; ``InvalidRequestError`` otherwise."""
    if isinstance(entries, (int, str, bytes, SkipEntry)) or not isinstance(entries, Iterable):
        raise InvalidRequestError(
            f"skip_messages takes a list of SkipEntry, got {entries!r} (use skip(n) to skip a number of messages)"
        )
    items = list(entries)
    for item in items:
        if not isinstance(item, SkipEntry):
            raise InvalidRequestError(f"invalid skip entry {item!r}: expected a SkipEntry")
    return items


def _first_published_at_or_after(ml: LedgerView, timestamp_ms: int) -> Position:
    positions: list[tuple[int, int]] = []  # (ledger id, entries) with entries > 0
    for info in ml.ledger_infos():
        if info.entries > 0:
            positions.append((info.ledger_id, info.entries))
    total = sum(n for _, n in positions)

    def at(index: int) -> Position:
        for ledger_id, n in positions:
            if index < n:
                return Position(ledger_id, index)
            index -= n
        raise IndexError(index)

    lo, hi = 0, total
    while lo < hi:
        mid = (lo + hi) // 2
        if ml.read_entry(at(mid)).metadata.publish_time_ms >= timestamp_ms:
            hi = mid
        else:
            lo = mid + 1
    return at(lo) if lo < total else LATEST


def _last_expired_by_ledger_closure(ml: LedgerView, now_ms: int, ttl_ms: int) -> Position:
    """The last entry of the last closed ledger closed more than ``ttl_ms`` before ``now_ms``
    (Pulsar's ``checkExpiryByLedgerClosureTime``; the current ledger never counts), or a
    position before every entry."""
    infos = ml.ledger_infos()
    found = EARLIEST
    for info in infos[:-1]:
        if info.timestamp <= 0 or now_ms - info.timestamp <= ttl_ms:
            break
        if info.entries > 0:
            found = Position(info.ledger_id, info.entries - 1)
    return found


def _acked_indexes(ack_set: int, size: int | None) -> range | list[int]:
    """The indexes an ack set acknowledges (its clear bits below ``size``)."""
    if size is None:
        return range(0)
    return [i for i in range(size) if not (ack_set >> i) & 1]
