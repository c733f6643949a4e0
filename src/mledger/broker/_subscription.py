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
acknowledge (individual, cumulative)  ``acknowledge(plan)``: one plan per request
cancel_delayed_message (PIP-423)      ``acknowledge(plan)`` (an individual ack)
skip_messages (PIP-423)               ``acknowledge(plan)`` (individual acks)
skip / clear_backlog                  ``skip_entries`` / ``clear_backlog``
reset_cursor                          ``position_reset`` with the dispatcher's reset
====================================  ===============================================

Every acknowledgement takes the same trip (docs/architecture.md, "The trip of an ACK"):
:class:`~mledger.broker._acks.AckResolver` resolves it into one
:class:`~mledger.managed_ledger.AckPlan` (partitions, batch sizes, batch indexes, the client
batch-acker rule; at most one question to the dispatcher), the cursor applies the plan at once
(one mutation, one validation of the positions) and returns one
:class:`~mledger.managed_ledger.AckOutcome`, the dispatcher hears the plan and the outcome
once (``Dispatcher.on_acked``), the journal once, and a mark-delete that moved is followed.
So acknowledgement state is persisted by the cursor and survives restarts; the dispatcher then
never delivers what the cursor says is acknowledged.

PIP-423 as Pulsar has it: ``cancel_delayed_message`` returns False on a cumulative-ack type
(Exclusive, Failover) and otherwise acknowledges the entry and returns True;
``skip_messages`` refuses cumulative-ack types with ``NotAllowedError("Unsupported subscription
type.")`` (HTTP 405), acknowledges whole entries directly, and for batch indexes learns the
entries' batch size (from the caller, the dispatcher, else by reading the entries), validates
every index against it (``InvalidRequestError``, 400, naming the index) and acknowledges with an
ack set (set bit = still unacknowledged). Nothing is acknowledged unless every item is valid. A
position that is not in the topic's ledger and not already acknowledged is refused with
``InvalidPositionError`` (412); an already acknowledged one is accepted and changes nothing.

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
from collections.abc import Iterable, Mapping
from typing import Protocol

from ..codec import MessageId, as_position
from ..core import (
    EARLIEST,
    LATEST,
    InvalidPositionError,
    InvalidRequestError,
    MarkDeletingMarkedPositionError,
    MLedgerError,
    NotAllowedError,
    Position,
    rules_for,
)
from ..managed_ledger import AckOutcome, AckPlan, LedgerView, ManagedCursor
from ._acks import AckRequest, AckResolver, check_partition, message_position
from ._consumer import Consumer, ConsumerSink
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


__all__ = ["SUBSCRIPTION_TYPE_PROPERTY", "Subscription"]

_MINIMUM_BACKLOG_FOR_EXPIRY_CHECK = 1000
_MESSAGE_EXPIRY_THRESHOLD = 1.5
"""Pulsar's ``PersistentSubscription``/``PersistentTopic`` constants: a connected subscription
with a smaller backlog expires only once its oldest entry is 1.5 TTLs old."""

_DELAYED_DELIVERY = "delayedDelivery"
"""The name of the subscriptions' one-shot timers on the broker's timer queue."""

log = logging.getLogger(__name__)

SUBSCRIPTION_TYPE_PROPERTY = "mledger.subscriptionType"
"""Cursor property holding the subscription type (Pulsar's type name)."""


class Subscription:
    """One durable subscription of one topic (or partition). Thread-safe.

    Obtain with ``Broker.subscribe`` / ``Topic.subscribe``. Raises
    :class:`~mledger.broker.AlreadyClosedError` once its topic is closed.
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
        self._resolver = AckResolver(cursor, topic.name, topic.partition_index)
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
        """Before answering an acknowledgement's receipt: under mledger's own rules, persist
        what the cursor holds back (``throttle_mark_delete``), so an answered ack survives a
        crash (a no-op when the cursor persists every change itself); under a Pulsar version's
        rules nothing, as Pulsar answers before persisting
        (:attr:`~mledger.core.CursorBehaviour.receipt_after_persist`). Blocks on storage."""
        if rules_for(self._cursor.ledger.config.pulsar_rules).behaviour.receipt_after_persist:
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

    def consumer_acknowledge(self, consumer: Consumer, request: AckRequest) -> AckOutcome:
        """``Consumer.acknowledge_request`` (every ack method of the consumer builds one): the
        request resolved into one plan, applied by the cursor at once (nothing is acknowledged
        if any part is invalid); returns what it changed. Raises ``NotAllowedError`` for a
        cumulative ack on Shared and Key_Shared, and what resolving and the cursor raise."""
        with self._lock:
            self._check_consumer(consumer)
            consumer.record_ack(self._now_ms())
            held_batches = self._dispatcher.held_batches
            try:
                if request.cumulative is None:
                    return self._acknowledge(self._resolver.individual(request, held_batches))
                if self._type.is_individual_ack_mode:
                    raise NotAllowedError(
                        "Cannot use cumulative acks on a non-exclusive/non-failover subscription"
                        f" ({self.name!r} is {self._type.value})"
                    )
                plan = self._resolver.cumulative(request.cumulative, request.batch_sizes, held_batches)
                return self._unchanged() if plan is None else self._acknowledge(plan)
            except InvalidPositionError as exc:
                raise self._in_topic_terms(exc) from exc

    def _acknowledge(self, plan: AckPlan, cancel: bool = False) -> AckOutcome:
        """The one trip of every acknowledgement, for a resolved ``plan`` (caller holds the
        lock): the cursor applies it (one mutation, one validation), the dispatcher hears the
        plan and the outcome once, the journal once, then the mark-delete's follow-ups. A
        cumulative plan the mark-delete has passed meanwhile changes nothing."""
        try:
            outcome = self._cursor.acknowledge(plan)
        except MarkDeletingMarkedPositionError:
            return self._unchanged()
        self._dispatcher.on_acked(plan, outcome)
        if self._journal is not None:
            self._report(plan, outcome, cancel)
        moved = outcome.mark_delete_moved
        if moved and outcome.mark_delete_after > outcome.mark_delete_before:
            self._last_md_advanced_ms = self._now_ms()
        if moved or plan.mark_delete is not None:
            self.check_end_of_topic()
        return outcome

    def _report(self, plan: AckPlan, outcome: AckOutcome, cancel: bool) -> None:
        """Tell the journal what an acknowledgement changed: a cumulative ack as itself, a
        cancel that acknowledged its entry as a cancel, anything else as the entries and batch
        indexes it acknowledged (a PIP-423 skip is individual acks, as Pulsar applies it); the
        entries only when at least one of them was not acknowledged before."""
        assert self._journal is not None
        if plan.mark_delete is not None:
            position, ack_set = plan.mark_delete, plan.mark_delete_ack_set
            index = -1 if ack_set is None else (ack_set & -ack_set).bit_length() - 2  # the last index acked
            self._journal.acked(self.name, [AckRecord(position.ledger_id, position.entry_id, index, True)])
            return
        entries = outcome.deleted.tolist() if outcome.entries_acked else []
        if cancel:
            for lid, eid in entries:
                self._journal.cancelled(self.name, Position(lid, eid))
        else:
            records = [AckRecord(lid, eid) for lid, eid in entries]
            for position, bits in outcome.batch_acked:
                records.extend(
                    AckRecord(position.ledger_id, position.entry_id, i)
                    for i in range(bits.bit_length())
                    if (bits >> i) & 1
                )
            self._journal.acked(self.name, records)

    def _unchanged(self) -> AckOutcome:
        md = self._cursor.mark_delete_position
        return AckOutcome(md, md)

    def _in_topic_terms(self, exc: InvalidPositionError) -> InvalidPositionError:
        """The cursor's refusal of a position, as the broker words it (the topic, not the ledger)."""
        if exc.position is None:
            return exc
        position = Position(*exc.position)
        return InvalidPositionError(f"message {position} does not exist in topic {self.topic}", position=position)

    def consumer_negative_acknowledge(self, consumer: Consumer, message_ids: list[MessageId]) -> None:
        """``Consumer.negative_acknowledge``: redeliver entries the consumer holds."""
        with self._lock:
            self._check_consumer(consumer)
            for mid in message_ids:
                check_partition(mid, self._topic.partition_index, self.topic)
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
        position = message_position(ledger_id, entry_id)
        if self._type.is_cumulative_ack_mode:
            log.warning(
                "Cannot cancel delayed message on subscription %s of type %s which uses cumulative ack.",
                self.name,
                self._type.value,
            )
            return False
        with self._lock:
            self._check_open()
            try:
                self._acknowledge(self._resolver.cancel(position), cancel=True)
            except InvalidPositionError as exc:
                raise self._in_topic_terms(exc) from exc
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

    def plan_skip(self, items: list[SkipEntry], batch_sizes: Mapping[Position, int] | None = None) -> AckPlan:
        """Resolve a PIP-423 skip into its plan without changing anything (a partitioned
        subscription plans every partition before applying any); raises what ``skip_messages``
        raises. ``batch_sizes``: the batch sizes the caller knows, which spare reading those
        entries (the replay's)."""
        if self._type.is_cumulative_ack_mode:
            raise NotAllowedError("Unsupported subscription type.")
        with self._lock:
            self._check_open()
            plan, ignored = self._resolver.skip(items, batch_sizes or {}, self._dispatcher.held_batches)
            if ignored and not self._warned_batch_index_disabled:
                self._warned_batch_index_disabled = True
                log.warning(
                    "%s/%s: batch-index skips are ignored, deletion_at_batch_index_level_enabled is off",
                    self.topic,
                    self.name,
                )
            return plan

    def apply_skip(self, plan: AckPlan) -> AckOutcome:
        """Apply a skip planned by :meth:`plan_skip` (entries acknowledged meanwhile are left
        alone); returns what it changed."""
        with self._lock:
            self._check_open()
            return self._acknowledge(plan)

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
        if target <= self._cursor.mark_delete_position:
            return None
        self._msg_expired += self._acknowledge(AckPlan.cumulative(target)).entries_acked
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

    def _journal_reset(self) -> None:
        """Report a reset (caller holds the lock): as the position after the new mark-delete,
        which a reset to it reproduces whatever the target was (EARLIEST, LATEST, a gap)."""
        if self._journal is not None:
            self._journal.subscription_reset(self.name, self._cursor.mark_delete_position.next())

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
