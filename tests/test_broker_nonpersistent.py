"""Non-persistent topics through the broker's library API (no client): names, dispatch per
subscription type, drops, the registry, partitioned topics."""

from __future__ import annotations

import pytest

from mledger import InvalidRequestError, ManagedLedgerFactory, NotFoundError
from mledger.broker import (
    Broker,
    Consumer,
    ConsumerBusyError,
    EntryDelivery,
    ManualClock,
    NamespaceNotFoundError,
    NonPersistentTopic,
    SubscriptionBusyError,
    SubscriptionType,
    TopicName,
)
from mledger.codec import EntryMetadata, encode_entry

T = "non-persistent://public/default/t"


@pytest.fixture
def broker() -> Broker:
    return Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))


def publish(topic: NonPersistentTopic, data: bytes, key: str | None = None) -> int:
    return topic.publish(None, encode_entry(data, EntryMetadata(producer_name="p", partition_key=key)), 1, key)


def test_names_keep_their_domain() -> None:
    name = TopicName.parse(T, any_domain=True)
    assert (name.domain, name.is_persistent, str(name)) == ("non-persistent", False, T)
    assert str(name.partition(1)) == f"{T}-partition-1"
    assert str(name.partition(1).partitioned_topic) == T
    assert name.partitioned_metadata_path == "/admin/partitioned-topics/public/default/non-persistent/t"
    with pytest.raises(InvalidRequestError, match="persistent"):
        TopicName.parse(T)  # the persistent machinery never gets one
    with pytest.raises(InvalidRequestError, match="persistent"):
        TopicName.parse(name)
    with pytest.raises(InvalidRequestError):
        TopicName.parse("other://public/default/t", any_domain=True)
    assert TopicName.parse("t", any_domain=True).is_persistent


def test_library_consumer_receives_and_drops_without_room(broker: Broker) -> None:
    topic = broker.open_non_persistent_topic(T)
    consumer = topic.subscribe("s", SubscriptionType.EXCLUSIVE, permits=2)
    assert [publish(topic, f"m{i}".encode()) for i in range(3)] == [1, 1, 0]
    got = consumer.receive(10)
    assert [m.data for m in got] == [b"m0", b"m1"]
    assert {(m.message_id.ledger_id, m.message_id.entry_id) for m in got} == {(0, 0)}
    stats = topic.stats(60_000)
    assert stats.msg_drop_counter == 1 and stats.subscriptions["s"].msg_drop_counter == 1
    assert publish(topic, b"m3") == 1  # receiving gave the permits back
    assert [m.data for m in consumer.receive(10)] == [b"m3"]
    assert broker.factory.list_managed_ledgers() == []


def test_subscription_rules(broker: Broker) -> None:
    topic = broker.open_non_persistent_topic(T)
    first = topic.subscribe("s", "Exclusive")
    with pytest.raises(ConsumerBusyError):
        topic.subscribe("s", "Exclusive")
    with pytest.raises(SubscriptionBusyError):
        topic.subscribe("s", "Shared")
    first.close()
    assert topic.subscriptions == {}  # gone with its last consumer
    assert publish(topic, b"nobody") == 0
    later = topic.subscribe("s", "Shared")
    assert later.receive(10) == []  # not delivered later


def test_shared_round_robin_skips_consumers_without_permits(broker: Broker) -> None:
    topic = broker.open_non_persistent_topic(T)
    a = topic.subscribe("s", "Shared", "a", permits=1)
    b = topic.subscribe("s", "Shared", "b", permits=5)
    for i in range(4):
        publish(topic, f"m{i}".encode())
    assert [m.data for m in a.receive(10)] == [b"m0"]
    assert [m.data for m in b.receive(10)] == [b"m1", b"m2", b"m3"]
    assert topic.stats(60_000).msg_drop_counter == 0


def test_failover_active_consumer_by_partition(broker: Broker) -> None:
    registry = broker.non_persistent
    registry.create_partitioned(T, 2)
    part = broker.open_non_persistent_topic(f"{T}-partition-1")
    consumers = [part.subscribe("s", "Failover", name, permits=10) for name in ("b", "a")]
    sub = part.subscriptions["s"]
    active = sub.active_consumer
    assert active is not None and active.name == "b"  # partition 1 of [a, b]
    publish(part, b"x")
    assert [len(c.receive(10)) for c in consumers] == [1, 0]


def test_key_shared_drops_when_the_key_owner_has_no_permit(broker: Broker) -> None:
    topic = broker.open_non_persistent_topic(T)
    a = topic.subscribe("s", "Key_Shared", "a", permits=1)
    b = topic.subscribe("s", "Key_Shared", "b", permits=1)
    owners = set()
    for _ in range(2):
        publish(topic, b"k", key="same")
    for consumer in (a, b):
        got = consumer.receive(10)
        if got:
            owners.add(consumer.name)
            assert [m.data for m in got] == [b"k"]
    assert len(owners) == 1 and topic.stats(60_000).msg_drop_counter == 1


def test_registry_partitions_and_errors(broker: Broker) -> None:
    registry = broker.non_persistent
    with pytest.raises(NotFoundError):
        broker.open_non_persistent_topic(f"{T}-partition-0")  # no such partitioned topic
    registry.create_partitioned(T, 2)
    assert broker.partitioned_topic_metadata(T) == 2
    assert registry.list_partitioned("public/default") == [T]
    with pytest.raises(InvalidRequestError, match="partitioned"):
        broker.open_non_persistent_topic(T)
    with pytest.raises(NotFoundError):
        broker.open_non_persistent_topic(f"{T}-partition-2")
    broker.open_non_persistent_topic(f"{T}-partition-1")
    assert registry.topic_names("public/default") == [T, f"{T}-partition-1"]
    with pytest.raises(InvalidRequestError, match="not a non-persistent"):
        broker.open_non_persistent_topic("persistent://public/default/t")
    with pytest.raises(NamespaceNotFoundError):
        broker.open_non_persistent_topic("non-persistent://nope/ns/t")
    assert broker.list_topics() == []  # the persistent list does not show them


class RecordingSink:
    """A remote consumer's end that records what the broker tells it."""

    def __init__(self) -> None:
        self.active: list[bool] = []
        self.delivered = 0

    def deliver(self, consumer: Consumer, deliveries: list[EntryDelivery]) -> None:
        self.delivered += sum(d.messages for d in deliveries)

    def active_changed(self, consumer: Consumer, is_active: bool) -> None:
        self.active.append(is_active)

    def disconnected(self, consumer: Consumer) -> None:
        pass

    def held_permits(self) -> int:
        return 0

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        pass


def test_failover_tells_consumers_who_is_active(broker: Broker) -> None:
    topic = broker.open_non_persistent_topic(T)
    sinks = {name: RecordingSink() for name in "ab"}
    a = topic.subscribe("s", "Failover", "a", sink=sinks["a"], permits=5)
    topic.subscribe("s", "Failover", "b", sink=sinks["b"], permits=5)
    assert sinks["a"].active == [True] and sinks["b"].active == [False]  # b joined, a stays active
    publish(topic, b"x")
    assert (sinks["a"].delivered, sinks["b"].delivered) == (1, 0)
    a.close()
    assert sinks["b"].active == [False, True]
    publish(topic, b"y")
    assert sinks["b"].delivered == 1
