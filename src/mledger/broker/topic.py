"""A persistent topic (or one partition of a partitioned topic) over its managed ledger.

The topic owns its managed ledger (named by :attr:`TopicName.managed_ledger_name
<mledger.broker.names.TopicName.managed_ledger_name>`), its producers, its subscriptions (one
durable cursor each; opening the topic re-opens every stored subscription with its type) and
its deduplication hook (:mod:`mledger.broker.hooks`). Cursors named ``pulsar.dedup`` or starting
with the replicator prefix are system cursors, never subscriptions.

Locking: one re-entrant lock guards the producer and subscription maps; a separate publish lock
serialises the publish path (dedup check, append, dedup record), which blocks on the append.

A topic sees its broker as a :class:`TopicOwner` (settings, the deduplication hook it builds,
producer names); frontends that serve remote clients hear about it through
:class:`TopicListener`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..codec.entry import EntryMetadata
from ..core.clock import Clock
from ..core.errors import EntryTooLargeError, InvalidRequestError, NotFoundError
from ..core.ints import INT64_MAX
from ..core.position import Position
from ..managed_ledger.ledger import ManagedLedger
from ..managed_ledger.ledger_view import InitialPosition
from .config import BrokerConfig
from .errors import AlreadyClosedError, MessageDupUnknownError, ProducerBusyError, SubscriptionBusyError
from .hooks import DEDUPLICATION_CURSOR_NAME, Deduplication, DedupVerdict, PublishContext
from .names import TopicName
from .producer import Producer, ProducerListener
from .stats import TopicStats
from .subscription import SUBSCRIPTION_TYPE_PROPERTY, Subscription
from .types import SubscriptionType

__all__ = ["DEDUPLICATION_CURSOR_NAME", "FramedPublish", "Topic", "TopicListener", "TopicOwner"]

log = logging.getLogger(__name__)


class TopicListener(Protocol):
    """Told about a topic's appends and its closing (see :mod:`mledger.broker.listeners`)."""

    def entries_added(self, topic: Topic) -> None:
        """Entries were appended to ``topic`` (called after the append returned)."""
        ...

    def topic_closed(self, topic: Topic) -> None:
        """``topic`` closed (deleted, or the broker is closing)."""
        ...


class TopicOwner(Protocol):
    """The broker serving a topic, as the topic sees it."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    def make_deduplication(self, topic: Topic) -> Deduplication:
        """The deduplication hook for ``topic`` (by the broker's policy and factory)."""
        ...

    def generate_producer_name(self) -> str:
        """A producer name unique within the broker."""
        ...


@dataclass(frozen=True, slots=True)
class FramedPublish:
    """One entry for :meth:`Topic.publish_framed`: the producer's framed bytes and what the
    deduplication hook needs (``metadata`` parsed from those bytes)."""

    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    metadata: EntryMetadata
    framed: bytes


class Topic:
    """One persistent topic or partition. Obtain with ``Broker.get_topic`` / ``create_topic``."""

    def __init__(self, broker: TopicOwner, topic_name: TopicName, ml: ManagedLedger) -> None:
        self._broker = broker
        self.topic_name = topic_name
        self._ml = ml
        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        self._producers: dict[str, Producer] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._listeners: list[TopicListener] = []
        self._closed = False
        for cursor in ml.cursors:
            if self.is_system_cursor(cursor.name):
                continue
            stored = cursor.cursor_properties.get(SUBSCRIPTION_TYPE_PROPERTY)
            try:
                sub_type = SubscriptionType.parse(stored) if stored else SubscriptionType.EXCLUSIVE
            except InvalidRequestError:
                log.warning("%s: subscription %s has unknown type %r; using Exclusive", self.name, cursor.name, stored)
                sub_type = SubscriptionType.EXCLUSIVE
            self._subscriptions[cursor.name] = Subscription(self, cursor.name, cursor, sub_type)
        self._dedup: Deduplication = broker.make_deduplication(self)

    # -- views ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The full topic name, ``persistent://tenant/ns/local``."""
        return str(self.topic_name)

    @property
    def partition_index(self) -> int:
        """This partition's index, -1 for a non-partitioned topic."""
        return self.topic_name.partition_index

    @property
    def broker(self) -> TopicOwner:
        """The broker serving this topic."""
        return self._broker

    @property
    def managed_ledger(self) -> ManagedLedger:
        """The topic's managed ledger."""
        return self._ml

    @property
    def deduplication(self) -> Deduplication:
        """The topic's deduplication hook."""
        return self._dedup

    @property
    def producers(self) -> list[Producer]:
        """Connected producers."""
        with self._lock:
            return list(self._producers.values())

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        """Subscriptions by name (a copy)."""
        with self._lock:
            return dict(self._subscriptions)

    def subscription_names(self) -> list[str]:
        """Sorted subscription names."""
        with self._lock:
            return sorted(self._subscriptions)

    def get_subscription(self, name: str) -> Subscription:
        """The subscription ``name``; raises ``NotFoundError`` (404)."""
        with self._lock:
            sub = self._subscriptions.get(name)
        if sub is None:
            raise NotFoundError(f"Subscription {name!r} not found on topic {self.name}")
        return sub

    def has_connections(self) -> bool:
        """Whether producers or consumers are connected."""
        with self._lock:
            return bool(self._producers) or any(s.consumers for s in self._subscriptions.values())

    def is_system_cursor(self, name: str) -> bool:
        """Whether a cursor of this name is internal (dedup, replication), not a subscription."""
        return name == DEDUPLICATION_CURSOR_NAME or name.startswith(self._broker.config.replicator_prefix)

    def stats(self) -> TopicStats:
        """Counters of the ledger, producer names and each subscription's stats."""
        with self._lock:
            subs = dict(self._subscriptions)
            producers = tuple(sorted(self._producers))
        ml_stats = self._ml.stats()
        return TopicStats(
            name=self.name,
            entries=ml_stats.number_of_entries,
            last_confirmed_entry=ml_stats.last_confirmed_entry,
            producers=producers,
            subscriptions={name: sub.stats() for name, sub in sorted(subs.items())},
        )

    # -- subscriptions -------------------------------------------------------------------------
    def subscribe(
        self,
        name: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> Subscription:
        """Create the subscription ``name`` (cursor at ``initial_position``, Pulsar's default
        LATEST) or return the existing one, switching its type if no consumer is connected.

        Raises ``InvalidRequestError`` for a bad or reserved name or type,
        ``SubscriptionBusyError`` when the type differs and consumers are connected.
        """
        sub_type = SubscriptionType.parse(sub_type)
        if not isinstance(name, str) or not name or "/" in name:
            raise InvalidRequestError(f"invalid subscription name {name!r}")
        if self.is_system_cursor(name):
            raise InvalidRequestError(f"invalid subscription name {name!r}: reserved for a system cursor")
        if not isinstance(initial_position, InitialPosition):
            raise InvalidRequestError(f"invalid initial position {initial_position!r}: expected an InitialPosition")
        with self._lock:
            self._check_open()
            sub = self._subscriptions.get(name)
            if sub is None:
                cursor = self._ml.open_cursor(
                    name, initial_position, cursor_properties={SUBSCRIPTION_TYPE_PROPERTY: sub_type.value}
                )
                sub = Subscription(self, name, cursor, sub_type)
                self._subscriptions[name] = sub
                return sub
        sub.change_type(sub_type)
        return sub

    def open_non_durable_subscription(
        self,
        name: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        start_position: Position | None = None,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> Subscription:
        """A reader's subscription: an in-memory cursor starting after ``start_position``
        (``initial_position`` when None or past the last entry; ledger -1 means earliest),
        nothing persisted, removed when its last consumer leaves (Pulsar's non-durable
        subscription). An existing subscription of that name is returned as it is.

        Raises ``InvalidRequestError`` for a bad or reserved name.
        """
        sub_type = SubscriptionType.parse(sub_type)
        if not isinstance(name, str) or not name or "/" in name or self.is_system_cursor(name):
            raise InvalidRequestError(f"invalid subscription name {name!r}")
        with self._lock:
            self._check_open()
            sub = self._subscriptions.get(name)
            if sub is not None:
                return sub
            cursor = self._ml.open_non_durable_cursor(start_position, name, initial_position)
            sub = Subscription(self, name, cursor, sub_type, durable=False)
            self._subscriptions[name] = sub
            return sub

    def remove_non_durable_subscription(self, sub: Subscription) -> None:
        """Drop a non-durable subscription whose last consumer left (the subscription calls this)."""
        with self._lock:
            if self._subscriptions.get(sub.name) is not sub or sub.consumers:
                return
            del self._subscriptions[sub.name]
        sub.close()
        sub.cursor.close()

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription and its cursor. ``NotFoundError``; ``SubscriptionBusyError``
        ("Subscription has active connected consumers") while consumers are connected."""
        with self._lock:
            self._check_open()
            sub = self.get_subscription(name)
            if sub.consumers:
                raise SubscriptionBusyError(f"Subscription {name!r} on {self.name} has active connected consumers")
            sub.close()
            del self._subscriptions[name]
            if sub.durable:
                self._ml.delete_cursor(name)
            else:
                sub.cursor.close()

    # -- producers -----------------------------------------------------------------------------
    def create_producer(
        self,
        producer_name: str | None = None,
        initial_sequence_id: int | None = None,
        listener: ProducerListener | None = None,
    ) -> Producer:
        """Attach a producer; a broker-unique name is generated when None. ``listener`` hears
        when the broker closes the producer (a remote producer; see
        :mod:`mledger.broker.listeners`).

        Raises ``ProducerBusyError`` when a producer of that name is connected here,
        ``InvalidRequestError`` for a bad name or initial sequence id.
        """
        _check_producer_args(producer_name, initial_sequence_id)
        name = producer_name if producer_name is not None else self._broker.generate_producer_name()
        with self._lock:
            self._check_open()
            if name in self._producers:
                raise ProducerBusyError(f"Producer with name '{name}' is already connected to topic {self.name}")
            producer = Producer(self, name, initial_sequence_id, listener)
            self._producers[name] = producer
            self._dedup.producer_added(name)
            return producer

    def remove_producer(self, producer: Producer) -> None:
        """``producer`` closed: forget it (its ``close`` calls this)."""
        with self._lock:
            if self._producers.get(producer.name) is producer:
                del self._producers[producer.name]
                self._dedup.producer_removed(producer.name)

    def publish(
        self,
        producer_name: str,
        payload: bytes,
        metadata: EntryMetadata,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
    ) -> Position | None:
        """Append one entry through the deduplication hook; None when it was a duplicate.

        Raises ``MessageDupUnknownError`` (nothing written) and whatever the append raises.
        """
        with self._publish_lock:
            self._check_open()
            ctx = PublishContext(self.name, producer_name, sequence_id, highest_sequence_id, num_messages, metadata)
            verdict = self._dedup.check(ctx)
            if verdict is DedupVerdict.DUPLICATE:
                return None
            if verdict is DedupVerdict.UNKNOWN:
                raise MessageDupUnknownError(
                    f"Cannot determine whether the message is a duplicate at this time"
                    f" (producer {producer_name!r}, sequence id {sequence_id}, topic {self.name})"
                )
            try:
                position = self._ml.add_entry(payload, metadata)
            except BaseException:
                self._dedup.record_failed(ctx)
                raise
            self._dedup.record_persisted(ctx, position)
        self._notify_entries_added()
        return position

    def publish_framed(self, items: Sequence[FramedPublish]) -> list[Position | None | BaseException]:
        """Append entries already framed by their producers (the bytes a Pulsar client sent,
        stored unchanged), through the deduplication hook, in one store transaction.

        Returns one result per item, in order: its position, None when deduplication dropped
        it, or the exception that refused it (``MessageDupUnknownError``,
        ``EntryTooLargeError``, or the append's error for every item of a failed append).
        Blocks on the append; the publish lock keeps appends in call order.
        """
        results: list[Position | None | BaseException] = [None] * len(items)
        limit = self._ml.store.max_entry_size
        with self._publish_lock:
            self._check_open()
            accepted: list[tuple[int, PublishContext]] = []
            for i, item in enumerate(items):
                if len(item.framed) > limit:
                    results[i] = EntryTooLargeError(
                        f"entry of {len(item.framed)} bytes exceeds the maximum entry size {limit}"
                    )
                    continue
                ctx = PublishContext(
                    self.name, item.producer_name, item.sequence_id, item.highest_sequence_id,
                    item.num_messages, item.metadata,
                )
                verdict = self._dedup.check(ctx)
                if verdict is DedupVerdict.DUPLICATE:
                    continue
                if verdict is DedupVerdict.UNKNOWN:
                    results[i] = MessageDupUnknownError(
                        f"Cannot determine whether the message is a duplicate at this time (producer"
                        f" {item.producer_name!r}, sequence id {item.sequence_id}, topic {self.name})"
                    )
                    continue
                accepted.append((i, ctx))
            if not accepted:
                return results
            try:
                positions = self._ml.add_framed_entries([items[i].framed for i, _ in accepted])
            except Exception as exc:
                for i, ctx in accepted:
                    self._dedup.record_failed(ctx)
                    results[i] = exc
                return results
            for (i, ctx), position in zip(accepted, positions, strict=True):
                self._dedup.record_persisted(ctx, position)
                results[i] = position
        self._notify_entries_added()
        return results

    # -- listeners -------------------------------------------------------------------------------
    def add_listener(self, listener: TopicListener) -> None:
        """Tell ``listener`` about appends and the topic's closing (see
        :mod:`mledger.broker.listeners`). Idempotent."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: TopicListener) -> None:
        """Stop telling ``listener``. Idempotent."""
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    def _notify_entries_added(self) -> None:
        for listener in self._listeners:
            listener.entries_added(self)

    # -- lifecycle -------------------------------------------------------------------------------
    def run_due_tasks(self) -> int:
        """Deduplication tasks, then dispatch what is due on every subscription."""
        if self._closed:
            return 0
        self._dedup.run_due_tasks()
        return sum(sub.dispatch() for sub in self.subscriptions.values())

    def close(self) -> None:
        """Disconnect producers and consumers and close the ledger (cursors persist). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subs = list(self._subscriptions.values())
            producers = list(self._producers.values())
            self._producers.clear()
        for producer in producers:
            producer.closed_by_broker()
        for sub in subs:
            sub.close()
        self._dedup.close()
        self._ml.close()
        for listener in self._listeners:
            listener.topic_closed(self)

    @property
    def is_closed(self) -> bool:
        """Whether the topic was closed."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"topic {self.name} is closed")

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"


def _check_producer_args(producer_name: object, initial_sequence_id: object) -> None:
    if producer_name is not None and (not isinstance(producer_name, str) or not producer_name):
        raise InvalidRequestError(f"invalid producer name {producer_name!r}")
    if initial_sequence_id is not None and (
        isinstance(initial_sequence_id, bool)
        or not isinstance(initial_sequence_id, int)
        or not -1 <= initial_sequence_id <= INT64_MAX
    ):
        raise InvalidRequestError(f"invalid initial_sequence_id {initial_sequence_id!r}: expected an int >= -1")
