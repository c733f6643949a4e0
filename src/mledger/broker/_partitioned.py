"""Partitioned topics: N partition topics behind one name, and the fan-out views over them.

Partition ``i`` of ``persistent://t/ns/orders`` is the topic ``persistent://t/ns/orders-partition-i``
with its own managed ledger; every per-partition object is a plain
:class:`~mledger.broker.Topic` / :class:`~mledger.broker.Subscription` /
:class:`~mledger.broker.Consumer`. The classes here fan calls out to them:

* ``PartitionedSubscription`` is the same-named subscription on every partition. PIP-423 calls
  go to the partition whose ledger holds the id's ledger (ledger ids are unique across the
  store): ``skip_messages`` validates the whole request on every partition involved before
  acknowledging anything; an id whose ledger no partition has is accepted if some partition
  already acknowledged it (its ledger was consumed and trimmed), else refused.
* ``PartitionedConsumer`` is one consumer per partition (Pulsar's multi-topics consumer):
  ``receive`` takes from the partitions in turn; acks are routed by the id's partition.

Thread safety is that of the per-partition objects; these views hold no lock of their own
beyond the consumer's turn counter.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from ..codec import MessageId, as_position
from ..core import EARLIEST, LATEST, InvalidPositionError, InvalidRequestError, NotAllowedError, NotFoundError, Position
from ..managed_ledger import InitialPosition
from ._consumer import Consumer, MessageIdLike, as_message_ids
from ._message import Message
from ._names import TopicName
from ._producer import PartitionedProducer
from ._subscription import Subscription, checked_skip_entries
from ._topic import Topic
from ._types import AckType, SkipEntry, SubscriptionType


class ProducerNames(Protocol):
    """Where a partitioned topic gets a name for an anonymous producer (its broker)."""

    def generate_producer_name(self) -> str: ...


__all__ = ["PartitionedConsumer", "PartitionedSubscription", "PartitionedTopic"]


class PartitionedTopic:
    """A partitioned topic: its name and its partition topics, by index."""

    def __init__(self, broker: ProducerNames, topic_name: TopicName, partitions: list[Topic]) -> None:
        self._broker = broker
        self.topic_name = topic_name
        self._partitions = partitions

    @property
    def name(self) -> str:
        """The partitioned topic name (without a partition suffix)."""
        return str(self.topic_name)

    @property
    def num_partitions(self) -> int:
        """How many partitions the topic has."""
        return len(self._partitions)

    @property
    def partitions(self) -> list[Topic]:
        """The partition topics, by index."""
        return list(self._partitions)

    def partition(self, index: int) -> Topic:
        """Partition ``index``; raises ``NotFoundError``."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self._partitions):
            raise NotFoundError(f"partition {index!r} not found: {self.name} has {len(self._partitions)} partitions")
        return self._partitions[index]

    def subscription_names(self) -> list[str]:
        """Subscriptions present on any partition, sorted."""
        names: set[str] = set()
        for topic in self._partitions:
            names.update(topic.subscription_names())
        return sorted(names)

    def subscribe(
        self,
        name: str,
        sub_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> PartitionedSubscription:
        """Subscribe on every partition (see ``Topic.subscribe``)."""
        subs = [topic.subscribe(name, sub_type, initial_position) for topic in self._partitions]
        return PartitionedSubscription(self, name, subs)

    def get_subscription(self, name: str) -> PartitionedSubscription:
        """The subscription ``name`` on every partition; ``NotFoundError`` if one lacks it."""
        return PartitionedSubscription(self, name, [topic.get_subscription(name) for topic in self._partitions])

    def delete_subscription(self, name: str) -> None:
        """Delete the subscription on every partition that has it (``NotFoundError`` if none)."""
        subs = [t.subscriptions.get(name) for t in self._partitions]
        if not any(subs):
            raise NotFoundError(f"Subscription {name!r} not found on topic {self.name}")
        for topic, sub in zip(self._partitions, subs, strict=True):
            if sub is not None:
                topic.delete_subscription(name)

    def create_producer(
        self, producer_name: str | None = None, initial_sequence_id: int | None = None
    ) -> PartitionedProducer:
        """A producer on every partition under one name (see ``Topic.create_producer``)."""
        name = producer_name if producer_name is not None else self._broker.generate_producer_name()
        producers = []
        try:
            for topic in self._partitions:
                producers.append(topic.create_producer(name, initial_sequence_id))
        except BaseException:
            for p in producers:
                p.close()
            raise
        return PartitionedProducer(self, name, producers)

    def has_connections(self) -> bool:
        """Whether any partition has producers or consumers."""
        return any(t.has_connections() for t in self._partitions)

    def run_due_tasks(self) -> int:
        """Every partition's due tasks; returns the messages dispatched."""
        return sum(t.run_due_tasks() for t in self._partitions)

    def close(self) -> None:
        """Close every partition topic."""
        for topic in self._partitions:
            topic.close()

    def __repr__(self) -> str:
        return f"PartitionedTopic({self.name!r}, partitions={len(self._partitions)})"


class PartitionedSubscription:
    """The same-named subscription on every partition of a partitioned topic."""

    def __init__(self, topic: PartitionedTopic, name: str, subscriptions: list[Subscription]) -> None:
        self._topic = topic
        self.name = name
        self._subs = subscriptions

    @property
    def topic(self) -> str:
        """The partitioned topic name."""
        return self._topic.name

    @property
    def type(self) -> SubscriptionType:
        """The subscription type (the same on every partition)."""
        return self._subs[0].type

    @property
    def partitions(self) -> list[Subscription]:
        """The per-partition subscriptions, by partition index."""
        return list(self._subs)

    @property
    def consumers(self) -> list[Consumer]:
        """Every partition's consumers."""
        return [c for sub in self._subs for c in sub.consumers]

    def backlog(self) -> int:
        """Unacknowledged entries over all partitions."""
        return sum(sub.backlog() for sub in self._subs)

    def add_consumer(self, consumer_name: str | None = None, permits: int | None = None) -> PartitionedConsumer:
        """A consumer on every partition (see ``Subscription.add_consumer``); same name on each."""
        consumers: list[Consumer] = []
        try:
            for sub in self._subs:
                consumers.append(sub.add_consumer(consumer_name, permits))
                consumer_name = consumers[0].name
        except BaseException:
            for c in consumers:
                c.close()
            raise
        return PartitionedConsumer(self, consumers)

    def dispatch(self) -> int:
        """Dispatch on every partition; returns the messages pushed."""
        return sum(sub.dispatch() for sub in self._subs)

    # -- PIP-423 ------------------------------------------------------------------------------
    def cancel_delayed_message(self, ledger_id: int, entry_id: int) -> bool:
        """Cancel on the partition holding ``ledger_id`` (see ``Subscription.cancel_delayed_message``).

        False on cumulative-ack types. Raises ``InvalidPositionError`` when no partition has
        the entry and none has acknowledged it already.
        """
        if self.type.is_cumulative_ack_mode:
            return all(sub.cancel_delayed_message(ledger_id, entry_id) for sub in self._subs)
        owners = self._owners(ledger_id)
        if owners:
            return all(sub.cancel_delayed_message(ledger_id, entry_id) for sub in owners)
        self._check_gone(ledger_id, entry_id)
        return True

    def skip_messages(self, entries: Iterable[SkipEntry]) -> None:
        """Skip messages by id on the partitions holding them (see ``Subscription.skip_messages``).

        The whole request is validated on every partition involved before anything is
        acknowledged.
        """
        items = checked_skip_entries(entries)
        if self.type.is_cumulative_ack_mode:
            raise NotAllowedError("Unsupported subscription type.")
        routed: dict[int, list[SkipEntry]] = defaultdict(list)
        for item in items:
            owners = self._owners(item.ledger_id)
            if owners:
                routed[self._subs.index(owners[0])].append(item)
            else:
                self._check_gone(item.ledger_id, item.entry_id)
        plans = [(self._subs[i], self._subs[i].plan_skip(group)) for i, group in sorted(routed.items())]
        for sub, plan in plans:
            sub.apply_skip(plan)

    # -- admin -------------------------------------------------------------------------------
    def skip(self, num_messages: int) -> None:
        """Skip ``num_messages`` entries on every partition (Pulsar's partitioned ``skip``)."""
        for sub in self._subs:
            sub.skip(num_messages)

    def clear_backlog(self) -> None:
        """Acknowledge everything published so far on every partition."""
        for sub in self._subs:
            sub.clear_backlog()

    def reset_cursor(self, position: Position | MessageId) -> None:
        """``EARLIEST``/``LATEST``: every partition. A ``MessageId`` with a partition: that
        partition. Otherwise the partition holding the position's ledger."""
        target = as_position(position)
        if target in (EARLIEST, LATEST):
            for sub in self._subs:
                sub.reset_cursor(target)
            return
        if isinstance(position, MessageId) and position.partition >= 0:
            if position.partition >= len(self._subs):
                raise InvalidRequestError(f"message id {position} names a partition {self.topic} does not have")
            self._subs[position.partition].reset_cursor(target)
            return
        owners = self._owners(target.ledger_id)
        if not owners:
            raise InvalidPositionError(f"position {target} is in no partition of {self.topic}")
        owners[0].reset_cursor(target)

    def reset_cursor_by_time(self, timestamp_ms: int) -> None:
        """Reset every partition to its first entry published at or after ``timestamp_ms``."""
        for sub in self._subs:
            sub.reset_cursor_by_time(timestamp_ms)

    def unsubscribe(self) -> None:
        """Delete the subscription on every partition."""
        self._topic.delete_subscription(self.name)

    def _owners(self, ledger_id: int) -> list[Subscription]:
        if isinstance(ledger_id, bool) or not isinstance(ledger_id, int):
            raise InvalidRequestError(f"invalid ledgerId {ledger_id!r}: not an integer")
        return [sub for sub in self._subs if sub.cursor.ledger.ledger_entries(ledger_id) is not None]

    def _check_gone(self, ledger_id: int, entry_id: int) -> None:
        if isinstance(entry_id, bool) or not isinstance(entry_id, int):
            raise InvalidRequestError(f"invalid entryId {entry_id!r}: not an integer")
        if ledger_id < 0 or entry_id < 0:
            raise InvalidPositionError(
                f"invalid message id {ledger_id}:{entry_id}: ledgerId, entryId must be non-negative."
            )
        position = Position(ledger_id, entry_id)
        if not any(sub.cursor.is_message_deleted(position) for sub in self._subs):
            raise InvalidPositionError(f"message {position} does not exist in topic {self.topic}")

    def __repr__(self) -> str:
        return f"PartitionedSubscription({self.name!r}, topic={self.topic!r}, partitions={len(self._subs)})"


class PartitionedConsumer:
    """One consumer per partition (Pulsar's multi-topics consumer over a partitioned topic)."""

    def __init__(self, subscription: PartitionedSubscription, consumers: list[Consumer]) -> None:
        self._sub = subscription
        self._consumers = consumers
        self.name = consumers[0].name
        self._turn = 0
        self._lock = threading.Lock()

    @property
    def subscription(self) -> PartitionedSubscription:
        """The partitioned subscription."""
        return self._sub

    @property
    def topic(self) -> str:
        """The partitioned topic name."""
        return self._sub.topic

    @property
    def consumers(self) -> list[Consumer]:
        """The per-partition consumers, by partition index."""
        return list(self._consumers)

    @property
    def permits(self) -> int:
        """Free receive-queue room over all partitions."""
        return sum(c.permits for c in self._consumers)

    @property
    def unacked_messages(self) -> int:
        """Unacknowledged messages over all partitions."""
        return sum(c.unacked_messages for c in self._consumers)

    @property
    def is_connected(self) -> bool:
        """Whether any partition consumer is still open."""
        return any(c.is_connected for c in self._consumers)

    def receive(self, max_messages: int = 100) -> list[Message]:
        """Up to ``max_messages`` messages deliverable now, taking from the partitions in turn."""
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise InvalidRequestError(f"invalid max_messages {max_messages!r}: must be an integer >= 1")
        with self._lock:
            start = self._turn
            self._turn = (start + 1) % len(self._consumers)
        out: list[Message] = []
        n = len(self._consumers)
        for step in range(n):
            if len(out) >= max_messages:
                break
            out.extend(self._consumers[(start + step) % n].receive(max_messages - len(out)))
        return out

    def flow(self, permits: int) -> None:
        """Grant ``permits`` to every partition's consumer."""
        for c in self._consumers:
            c.flow(permits)

    def acknowledge(
        self, message_ids: MessageIdLike | Iterable[MessageIdLike], ack_type: AckType = AckType.INDIVIDUAL
    ) -> None:
        """Acknowledge ids, each on the partition it names; all ids are checked first."""
        if ack_type is AckType.CUMULATIVE:
            self.acknowledge_cumulative(message_ids)
            return
        for index, ids in self._route(as_message_ids(message_ids)).items():
            self._consumers[index].acknowledge(ids)

    def acknowledge_cumulative(self, message_id: MessageIdLike | Iterable[MessageIdLike]) -> None:
        """Cumulative ack on the id's partition (``NotAllowedError`` on Shared/Key_Shared)."""
        ids = as_message_ids(message_id)
        if len(ids) != 1:
            raise InvalidRequestError(f"cumulative acknowledgement takes one message id, got {len(ids)}")
        for index, routed in self._route(ids).items():
            self._consumers[index].acknowledge_cumulative(routed[0])

    def negative_acknowledge(self, message_ids: MessageIdLike | Iterable[MessageIdLike]) -> None:
        """Negative-ack ids, each on the partition it names."""
        for index, ids in self._route(as_message_ids(message_ids)).items():
            self._consumers[index].negative_acknowledge(ids)

    def redeliver_unacknowledged_messages(self) -> None:
        """Redeliver everything unacknowledged on every partition."""
        for c in self._consumers:
            c.redeliver_unacknowledged_messages()

    def close(self) -> None:
        """Close every partition consumer. Idempotent."""
        for c in self._consumers:
            c.close()

    def _route(self, ids: list[MessageId]) -> dict[int, list[MessageId]]:
        routed: dict[int, list[MessageId]] = defaultdict(list)
        for mid in ids:
            if not 0 <= mid.partition < len(self._consumers):
                raise InvalidRequestError(
                    f"message id {mid} names partition {mid.partition}; {self.topic} has"
                    f" partitions 0..{len(self._consumers) - 1}"
                )
            routed[mid.partition].append(mid)
        return routed

    def __repr__(self) -> str:
        return f"PartitionedConsumer({self.name!r}, topic={self.topic!r})"
