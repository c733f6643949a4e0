"""Non-persistent topics with the real Pulsar client (pulsar-client 3.13.0) against the fixture.

``non-persistent://`` produce and consume with every subscription type, drops when nobody has
a permit (counted, ``msgDropRate``), the namespace's topic list by mode (protocol and REST),
regex subscriptions per mode, partitioned non-persistent topics, nothing stored, a restart
forgetting the topic.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from mledger.admin import Admin, Authorization, TopicOperation
from mledger.broker import Broker, NonPersistentSubscription, SubscriptionType
from mledger.protocol import EmbeddedBroker
from mledger.rest import AdminServer

pytestmark = pytest.mark.timeout(60)

RECEIVE_MS = 5000
NOTHING_MS = 300
T = "non-persistent://public/default/t"


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = make_client(pulsar_broker)
    yield c
    c.close()


def make_client(broker: EmbeddedBroker) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def subscription(broker: Broker, topic: str, name: str) -> NonPersistentSubscription:
    found = broker.non_persistent.get(topic)
    assert found is not None
    return found.subscriptions[name]


def wait_for_permits(broker: Broker, topic: str, name: str, consumers: int) -> None:
    """Until the subscription has ``consumers`` consumers that all got their FLOW."""

    def ready() -> bool:
        found = broker.non_persistent.get(topic)
        sub = found.subscriptions.get(name) if found is not None else None
        return sub is not None and len(sub.consumers) == consumers and all(c.permits > 0 for c in sub.consumers)

    wait_until(ready)


def drain(consumer: pulsar.Consumer) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            out.append(consumer.receive(NOTHING_MS))
        except pulsar.Timeout:
            return out


def test_exclusive_produce_consume_stores_nothing(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe(T, "sub")
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "sub", 1)
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
    # Pulsar's NonPersistentTopic: every message is (0, 0), on publish and on dispatch
    assert {str(i) for i in ids} == {"(0,0,-1,-1)"}
    assert {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got} == {(0, 0)}
    for m in got:
        consumer.acknowledge(m)  # accepted, nothing to do
    broker = pulsar_broker.broker
    assert broker.factory.list_managed_ledgers() == []
    assert not broker.factory.exists("public/default/non-persistent/t")
    assert broker.list_topics() == []


def test_shared_round_robin(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    a = client.subscribe(T, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="a")
    b = client.subscribe(T, "sub", consumer_type=pulsar.ConsumerType.Shared, consumer_name="b")
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "sub", 2)
    for i in range(6):
        producer.send(f"m{i}".encode())
    got_a = [m.data() for m in drain(a)]
    got_b = [m.data() for m in drain(b)]
    assert sorted(got_a + got_b) == [f"m{i}".encode() for i in range(6)]
    # round-robin: every other message to each consumer
    assert {tuple(got_a), tuple(got_b)} == {(b"m0", b"m2", b"m4"), (b"m1", b"m3", b"m5")}


def test_failover_active_consumer_then_the_other(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    a = client.subscribe(T, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    b = client.subscribe(T, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "sub", 2)
    sub = subscription(pulsar_broker.broker, T, "sub")
    assert sub.type is SubscriptionType.FAILOVER
    active = sub.active_consumer
    assert active is not None and active.name == "a"  # the first by name on a non-partitioned topic
    producer.send(b"one")
    assert a.receive(RECEIVE_MS).data() == b"one"
    assert drain(b) == []
    a.close()
    wait_until(lambda: len(sub.consumers) == 1)
    producer.send(b"two")
    assert b.receive(RECEIVE_MS).data() == b"two"


def test_key_shared_keeps_each_key_on_one_consumer(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumers = [
        client.subscribe(T, "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}") for i in range(2)
    ]
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "sub", 2)
    keys = [f"k{i}" for i in range(8)]
    for round_ in range(3):
        for key in keys:
            producer.send(f"{key}-{round_}".encode(), partition_key=key)
    owners: dict[str, set[int]] = {}
    total = 0
    for index, consumer in enumerate(consumers):
        for m in drain(consumer):
            owners.setdefault(m.partition_key(), set()).add(index)
            total += 1
    assert total == 24
    assert set(owners) == set(keys)
    assert all(len(o) == 1 for o in owners.values())
    assert len({next(iter(o)) for o in owners.values()}) == 2  # both consumers got keys


def test_message_without_consumer_is_not_delivered_later(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    producer = client.create_producer(T)
    producer.send(b"lost")  # answered at once: nobody to deliver to
    consumer = client.subscribe(T, "sub", initial_position=pulsar.InitialPosition.Earliest)
    wait_for_permits(pulsar_broker.broker, T, "sub", 1)
    producer.send(b"seen")
    assert [m.data() for m in drain(consumer)] == [b"seen"]


def test_consumer_without_permits_loses_messages_and_drops_are_counted(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    consumer = client.subscribe(T, "sub", receiver_queue_size=5)
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "sub", 1)
    for i in range(20):  # never blocks: the broker answers each send at once
        producer.send(f"m{i}".encode())
    got = [m.data() for m in drain(consumer)]
    assert got == [f"m{i}".encode() for i in range(5)]
    broker = pulsar_broker.broker
    topic = broker.non_persistent.get(T)
    assert topic is not None
    counted = topic.stats(60_000)
    assert counted.msg_drop_counter == 15 and counted.subscriptions["sub"].msg_drop_counter == 15
    # msgDropRate: Pulsar's rate over the last stats interval (60 s)
    pulsar_broker.clock.advance(60_000)
    stats = Admin(broker).non_persistent.stats(T)
    sub_rate = stats.subscriptions["sub"].msg_drop_rate
    assert 0 < sub_rate <= 15 / 60
    assert stats.msg_drop_rate == sub_rate
    assert stats.msg_in_counter == 20 and stats.msg_out_counter == 5
    body = stats.model_dump(by_alias=True)
    assert body["msgDropRate"] == sub_rate and body["subscriptions"]["sub"]["msgDropRate"] == sub_rate
    assert body["publishers"][0]["msgDropRate"] == 0


def test_topics_of_namespace_by_mode_and_regex_subscriptions(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    p_persistent = client.create_producer("persistent://public/default/rx-p")
    p_non = client.create_producer("non-persistent://public/default/rx-n")
    modes = {
        "all": pulsar.RegexSubscriptionMode.AllTopics,
        "persistent": pulsar.RegexSubscriptionMode.PersistentOnly,
        "non": pulsar.RegexSubscriptionMode.NonPersistentOnly,
    }
    consumers = {
        name: client.subscribe(re.compile("public/default/rx-.*"), f"sub-{name}", regex_subscription_mode=mode)
        for name, mode in modes.items()
    }
    broker = pulsar_broker.broker
    for name in ("all", "non"):
        wait_for_permits(broker, "non-persistent://public/default/rx-n", f"sub-{name}", 1)
    p_persistent.send(b"p")
    p_non.send(b"n")
    got = {name: sorted(m.data() for m in drain(c)) for name, c in consumers.items()}
    assert got == {"all": [b"n", b"p"], "persistent": [b"p"], "non": [b"n"]}
    np_topic = broker.non_persistent.get("non-persistent://public/default/rx-n")
    assert np_topic is not None and set(np_topic.subscriptions) == {"sub-all", "sub-non"}


def test_rest_lists_non_persistent_topics_and_partitioned_ones(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    broker = pulsar_broker.broker
    with AdminServer(Admin(broker), port=0) as server:
        base = f"{server.url}/admin/v2/non-persistent/public/default"
        r = httpx.put(f"{base}/parts/partitions", content=b"2", timeout=10)
        assert r.status_code == 204
        assert httpx.get(f"{base}/parts/partitions", timeout=10).json() == {"partitions": 2}
        assert httpx.get(f"{base}/partitioned", timeout=10).json() == ["non-persistent://public/default/parts"]
        consumer = client.subscribe("non-persistent://public/default/parts", "sub")
        producer = client.create_producer("non-persistent://public/default/parts")
        for i in range(2):
            wait_for_permits(broker, f"non-persistent://public/default/parts-partition-{i}", "sub", 1)
        plain = client.create_producer(T)
        plain.send(b"x")
        for i in range(4):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        got = drain(consumer)
        assert sorted(m.data() for m in got) == [b"m0", b"m1", b"m2", b"m3"]
        assert {m.topic_name() for m in got} <= {
            f"non-persistent://public/default/parts-partition-{i}" for i in range(2)
        }
        listed = httpx.get(base, timeout=10).json()
        assert listed == [
            "non-persistent://public/default/parts-partition-0",
            "non-persistent://public/default/parts-partition-1",
            T,
        ]
        # the persistent list does not show them
        assert httpx.get(f"{server.url}/admin/v2/persistent/public/default", timeout=10).json() == []
        stats = httpx.get(f"{base}/t/stats", timeout=10).json()
        assert stats["msgInCounter"] == 1 and stats["msgDropRate"] == 0
        assert httpx.get(f"{base}/t/internalStats", timeout=10).status_code == 405
        assert httpx.put(f"{base}/t", timeout=10).status_code == 409  # loaded already
        assert httpx.put(f"{base}/parts/partitions", content=b"3", timeout=10).status_code == 409
        missing = f"{server.url}/admin/v2/non-persistent/nope/ns"
        assert httpx.put(f"{missing}/x", timeout=10).status_code == 404
        assert httpx.put(f"{base}/fresh", timeout=10).status_code == 204
        assert httpx.delete(f"{base}/parts/partitions", timeout=10).status_code == 412  # clients connected
        for closable in (consumer, producer, plain):
            closable.close()
        wait_until(lambda: all(t is None or t.is_idle for t in map(broker.non_persistent.get, listed)))
        assert httpx.delete(f"{base}/parts/partitions", timeout=10).status_code == 204
        assert httpx.get(f"{base}/partitioned", timeout=10).json() == []
        assert httpx.get(base, timeout=10).json() == ["non-persistent://public/default/fresh", T]


def test_restart_forgets_the_topic(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as first:
        c = make_client(first)
        c.subscribe(T, "sub")
        c.create_producer(T).send(b"x")
        assert first.broker.non_persistent.topic_names() == [T]
        c.close()
    with EmbeddedBroker(data_dir=tmp_path) as second:
        assert second.broker.non_persistent.topic_names() == []
        assert second.broker.list_topics() == []
        assert second.broker.factory.list_managed_ledgers() == []
        c = make_client(second)
        consumer = c.subscribe(T, "sub")
        assert drain(consumer) == []
        c.close()


def test_each_subscription_drops_only_what_it_has_no_permit_for(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    full = client.subscribe(T, "full", receiver_queue_size=2)
    roomy = client.subscribe(T, "roomy")
    producer = client.create_producer(T)
    wait_for_permits(pulsar_broker.broker, T, "full", 1)
    wait_for_permits(pulsar_broker.broker, T, "roomy", 1)
    for i in range(4):
        producer.send(f"m{i}".encode())
    assert [m.data() for m in drain(roomy)] == [b"m0", b"m1", b"m2", b"m3"]
    assert [m.data() for m in drain(full)] == [b"m0", b"m1"]
    broker = pulsar_broker.broker
    topic = broker.non_persistent.get(T)
    assert topic is not None
    subscriptions = topic.stats(60_000).subscriptions
    assert subscriptions["roomy"].msg_drop_counter == 0 and subscriptions["full"].msg_drop_counter == 2


def test_namespace_permissions_apply(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    auth = Authorization({"app": {"public/default": {TopicOperation.PRODUCE, TopicOperation.CONSUME}}})
    broker = pulsar_broker_factory(tokens={"s3cret": "app", "other": "nobody"}, authorization=auth)
    nobody = pulsar.Client(
        broker.service_url,
        authentication=pulsar.AuthenticationToken("other"),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    with pytest.raises(pulsar.PulsarException):
        nobody.create_producer(T)
    nobody.close()
    good = pulsar.Client(
        broker.service_url,
        authentication=pulsar.AuthenticationToken("s3cret"),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    consumer = good.subscribe(T, "sub")
    wait_for_permits(broker.broker, T, "sub", 1)
    good.create_producer(T).send(b"ok")
    assert consumer.receive(RECEIVE_MS).data() == b"ok"
    good.close()


def test_raw_protocol_modes_and_refusals(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    from protocol_raw import RawClient

    from mledger.codec.proto import PulsarApi_pb2 as api

    client.create_producer("persistent://public/default/p").send(b"stored")
    client.create_producer(T)
    raw = RawClient(pulsar_broker.port)
    mode = api.CommandGetTopicsOfNamespace
    listed = {}
    for request_id, wanted in enumerate((mode.PERSISTENT, mode.NON_PERSISTENT, mode.ALL), 1):
        raw.send(
            api.BaseCommand(
                type=api.BaseCommand.GET_TOPICS_OF_NAMESPACE,
                getTopicsOfNamespace=mode(request_id=request_id, namespace="public/default", mode=wanted),
            )
        )
        answer = raw.next_command()
        assert answer.getTopicsOfNamespaceResponse.request_id == request_id
        listed[wanted] = sorted(answer.getTopicsOfNamespaceResponse.topics)
    assert listed == {
        mode.PERSISTENT: ["persistent://public/default/p"],
        mode.NON_PERSISTENT: [T],
        mode.ALL: [T, "persistent://public/default/p"],
    }
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.GET_TOPICS_OF_NAMESPACE,
            getTopicsOfNamespace=mode(request_id=9, namespace="no-slash", mode=mode.NON_PERSISTENT),
        )
    )
    error = raw.next_command()
    assert error.type == api.BaseCommand.ERROR and "Namespace name is not valid" in error.error.message
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic=T, subscription="s", subType=api.CommandSubscribe.Exclusive, consumer_id=1, request_id=10
            ),
        )
    )
    assert raw.next_command().type == api.BaseCommand.SUCCESS
    raw.send(  # a retried SUBSCRIBE gets the same answer
        api.BaseCommand(
            type=api.BaseCommand.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic=T, subscription="s", subType=api.CommandSubscribe.Exclusive, consumer_id=1, request_id=15
            ),
        )
    )
    retried = raw.next_command()
    assert retried.type == api.BaseCommand.SUCCESS and retried.success.request_id == 15
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.SEEK,
            seek=api.CommandSeek(consumer_id=1, request_id=11, message_id=api.MessageIdData(ledgerId=0, entryId=0)),
        )
    )
    error = raw.next_command()
    assert error.type == api.BaseCommand.ERROR and error.error.error == api.NotAllowedError
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.GET_LAST_MESSAGE_ID,
            getLastMessageId=api.CommandGetLastMessageId(consumer_id=1, request_id=12),
        )
    )
    error = raw.next_command()
    assert error.type == api.BaseCommand.ERROR and error.error.request_id == 12
    raw.send(
        api.BaseCommand(
            type=api.BaseCommand.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic=T,
                subscription="c",
                subType=api.CommandSubscribe.Shared,
                consumer_id=2,
                request_id=13,
                read_compacted=True,
            ),
        )
    )
    error = raw.next_command()
    assert error.type == api.BaseCommand.ERROR and "readCompacted" in error.error.message
    raw.close()
