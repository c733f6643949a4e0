"""The real Pulsar client (pulsar-client 3.13.0, C++ 4.2.0) against mledger's protocol server.

Every test starts its own in-process broker with the ``pulsar_broker`` fixture (the project's
pytest plugin) and carries a timeout, so a hang fails one test.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator

import httpx
import pulsar
import pytest
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

from mledger import ManagedLedgerConfig, Position
from mledger.broker import BrokerConfig
from mledger.protocol import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)

RECEIVE_MS = 5000
NOTHING_MS = 300


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        pulsar_broker.service_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    yield c
    c.close()


def make_client(broker: EmbeddedBroker, **kwargs: object) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **kwargs,  # type: ignore[arg-type]
    )


def receive_all(consumer: pulsar.Consumer, n: int) -> list[pulsar.Message]:
    return [consumer.receive(RECEIVE_MS) for _ in range(n)]


def assert_nothing(consumer: pulsar.Consumer) -> None:
    with pytest.raises(pulsar.Timeout):
        consumer.receive(NOTHING_MS)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


# -- produce and consume -----------------------------------------------------------------------


def test_sync_produce_and_exclusive_consume(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("orders", "sub")
    producer = client.create_producer("orders")
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    got = receive_all(consumer, 5)
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert [str(m.message_id()) for m in got] == [str(i) for i in ids]
    for m in got:
        consumer.acknowledge(m)
    # Stored as the producer framed it: the broker's topic holds five entries.
    topic = pulsar_broker.broker.get_topic("orders")
    assert topic.stats().entries == 5


def test_async_and_batched_produce_shared_consume(client: pulsar.Client) -> None:
    consumer = client.subscribe("t", "sub", consumer_type=pulsar.ConsumerType.Shared)
    plain = client.create_producer("t")
    batched = client.create_producer("t", batching_enabled=True, batching_max_publish_delay_ms=5)
    receipts: list[object] = []
    for i in range(50):
        plain.send_async(f"a{i}".encode(), lambda res, mid: receipts.append(res))
        batched.send_async(f"b{i}".encode(), lambda res, mid: receipts.append(res))
    plain.flush()
    batched.flush()
    got = receive_all(consumer, 100)
    assert sorted(m.data() for m in got) == sorted([f"a{i}".encode() for i in range(50)] + [f"b{i}".encode() for i in range(50)])
    assert all(r == pulsar.Result.Ok for r in receipts) and len(receipts) == 100
    batch_ids = [m.message_id() for m in got if m.data().startswith(b"b")]
    assert any(mid.batch_index() > 0 for mid in batch_ids)  # really batched
    for m in got:
        consumer.acknowledge(m)
    assert_nothing(consumer)


def test_properties_keys_and_event_time_reach_the_consumer(client: pulsar.Client) -> None:
    consumer = client.subscribe("props", "sub")
    producer = client.create_producer("props")
    producer.send(b"x", properties={"a": "1"}, partition_key="k1", event_timestamp=1234)
    m = consumer.receive(RECEIVE_MS)
    assert m.properties() == {"a": "1"} and m.partition_key() == "k1" and m.event_timestamp() == 1234


def test_compressed_batches_come_back_decompressed(client: pulsar.Client) -> None:
    consumer = client.subscribe("lz4", "sub")
    producer = client.create_producer("lz4", batching_enabled=True, compression_type=pulsar.CompressionType.LZ4)
    for i in range(20):
        producer.send_async(b"payload-%d" % i * 10, None)
    producer.flush()
    assert [m.data() for m in receive_all(consumer, 20)] == [b"payload-%d" % i * 10 for i in range(20)]


def test_cumulative_ack_and_redelivery_after_reconnect(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("cum", "sub")
    producer = client.create_producer("cum")
    for i in range(6):
        producer.send(b"%d" % i)
    got = receive_all(consumer, 6)
    consumer.acknowledge_cumulative(got[2])
    consumer.close()
    again = client.subscribe("cum", "sub")
    assert [m.data() for m in receive_all(again, 3)] == [b"3", b"4", b"5"]


def test_individual_acks_survive_a_reconnect(client: pulsar.Client) -> None:
    consumer = client.subscribe("ind", "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("ind")
    for i in range(6):
        producer.send(b"%d" % i)
    got = receive_all(consumer, 6)
    for m in got[::2]:
        consumer.acknowledge(m)
    consumer.close()
    again = client.subscribe("ind", "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert sorted(m.data() for m in receive_all(again, 3)) == [b"1", b"3", b"5"]
    assert_nothing(again)


def test_batch_index_acks_redeliver_only_the_unacked_messages(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    consumer = client.subscribe(
        "bia", "sub", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True
    )
    producer = client.create_producer("bia", batching_enabled=True, batching_max_publish_delay_ms=50)
    for i in range(10):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    got = receive_all(consumer, 10)
    assert {m.message_id().entry_id() for m in got} == {got[0].message_id().entry_id()}  # one entry
    for m in got[:4]:
        consumer.acknowledge(m)
    # the client groups acks for 100 ms: wait until the broker applied the four batch-index acks
    cursor = pulsar_broker.broker.get_subscription("bia", "sub").cursor
    wait_until(lambda: [cursor.deleted_batch_indexes(p) for p, _ in cursor.batch_deleted_states()] == [[0, 1, 2, 3]])
    consumer.close()
    again = client.subscribe("bia", "sub", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    redelivered = receive_all(again, 6)
    assert [m.data() for m in redelivered] == [b"%d" % i for i in range(4, 10)]
    assert_nothing(again)


def test_negative_ack_redelivers_with_a_redelivery_count(client: pulsar.Client) -> None:
    consumer = client.subscribe(
        "nack", "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
    )
    producer = client.create_producer("nack")
    producer.send(b"retry-me")
    first = consumer.receive(RECEIVE_MS)
    assert first.redelivery_count() == 0
    consumer.negative_acknowledge(first)
    second = consumer.receive(RECEIVE_MS)
    assert second.data() == b"retry-me" and second.redelivery_count() == 1
    consumer.acknowledge(second)


def test_deliver_after_waits_for_the_broker_clock(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("delayed", "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("delayed")
    producer.send(b"later", deliver_after=__import__("datetime").timedelta(seconds=60))
    producer.send(b"now")
    assert consumer.receive(RECEIVE_MS).data() == b"now"
    assert_nothing(consumer)
    pulsar_broker.clock.advance(30_000)
    assert_nothing(consumer)
    pulsar_broker.clock.advance(31_000)
    assert consumer.receive(RECEIVE_MS).data() == b"later"


# -- seek, readers, last message id -----------------------------------------------------------


def test_seek_by_message_id_and_by_time(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("seek", "sub")
    producer = client.create_producer("seek")
    ids = [producer.send(b"%d" % i) for i in range(5)]
    got = receive_all(consumer, 5)
    for m in got:
        consumer.acknowledge(m)
    consumer.seek(ids[2])
    # The client filters the seek target itself: delivery resumes after it.
    assert [m.data() for m in receive_all(consumer, 2)] == [b"3", b"4"]
    consumer.seek(0)  # publish time 0: everything again
    assert [m.data() for m in receive_all(consumer, 5)] == [b"0", b"1", b"2", b"3", b"4"]


def test_a_chunked_message_several_times_the_size_limit_arrives_whole(client: pulsar.Client) -> None:
    """The client cuts it into chunks of exactly ``max_message_size`` payload bytes; with their
    metadata the entries are a little larger: Pulsar bounds them by the frame limit only
    (``maxMessageSize`` + 10 KiB padding, which it gives BookKeeper as its frame limit)."""
    consumer = client.subscribe("chunked", "sub")
    producer = client.create_producer(
        "chunked", chunking_enabled=True, batching_enabled=False, send_timeout_millis=20000
    )
    big = bytes(range(256)) * (11 * 1024 * 1024 // 256)  # 11 MiB: three chunks of at most 5 MiB
    producer.send(big)
    got = consumer.receive(RECEIVE_MS * 4)
    assert got.data() == big
    consumer.acknowledge(got)


def test_readers_from_earliest_latest_and_an_id(client: pulsar.Client) -> None:
    producer = client.create_producer("readme")
    ids = [producer.send(b"%d" % i) for i in range(4)]
    earliest = client.create_reader("readme", pulsar.MessageId.earliest)
    assert [earliest.read_next(RECEIVE_MS).data() for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    latest = client.create_reader("readme", pulsar.MessageId.latest)
    from_id = client.create_reader("readme", ids[1])
    assert [from_id.read_next(RECEIVE_MS).data() for _ in range(2)] == [b"2", b"3"]
    producer.send(b"4")
    assert latest.read_next(RECEIVE_MS).data() == b"4"
    assert earliest.has_message_available()
    assert earliest.read_next(RECEIVE_MS).data() == b"4"
    assert not earliest.has_message_available()
    latest.close()
    earliest.close()
    from_id.close()


def test_an_inclusive_reader_gets_its_start_message(client: pulsar.Client) -> None:
    """Pulsar starts a reader's cursor at its start message (the client drops it for a
    non-inclusive reader): from an id, after a seek, and at ``latest`` (the client seeks to the
    last message when asked whether one is available)."""
    producer = client.create_producer("inclusive")
    ids = [producer.send(b"%d" % i) for i in range(4)]
    reader = client.create_reader("inclusive", ids[1], start_message_id_inclusive=True)
    assert [reader.read_next(RECEIVE_MS).data() for _ in range(3)] == [b"1", b"2", b"3"]
    reader.seek(ids[2])
    assert [reader.read_next(RECEIVE_MS).data() for _ in range(2)] == [b"2", b"3"]
    exclusive = client.create_reader("inclusive", ids[1])
    assert exclusive.read_next(RECEIVE_MS).data() == b"2"
    latest = client.create_reader("inclusive", pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert latest.has_message_available()
    assert latest.read_next(RECEIVE_MS).data() == b"3"
    for r in (reader, exclusive, latest):
        r.close()


def test_a_reader_seek_by_publish_time_survives_the_reconnection(client: pulsar.Client) -> None:
    """The seek disconnects the reader; Pulsar keeps its reset cursor for the reconnection,
    which carries no start id after a seek by time."""
    producer = client.create_producer("seek-time")
    for i in range(3):
        producer.send(b"%d" % i)
    reader = client.create_reader("seek-time", pulsar.MessageId.latest)
    reader.seek(0)  # publish time 0: everything
    assert [reader.read_next(RECEIVE_MS).data() for _ in range(3)] == [b"0", b"1", b"2"]
    reader.close()


def test_reader_subscriptions_are_not_kept(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    producer = client.create_producer("gone")
    producer.send(b"x")
    reader = client.create_reader("gone", pulsar.MessageId.earliest)
    assert reader.read_next(RECEIVE_MS).data() == b"x"
    reader.close()
    wait_until(lambda: pulsar_broker.broker.get_topic("gone").subscription_names() == [])


# -- subscription rules ------------------------------------------------------------------------


def test_second_exclusive_consumer_is_refused_with_consumer_busy(client: pulsar.Client) -> None:
    client.subscribe("busy", "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe("busy", "sub")


def test_unsubscribe_deletes_the_subscription(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("unsub", "sub")
    assert pulsar_broker.broker.get_topic("unsub").subscription_names() == ["sub"]
    consumer.unsubscribe()
    assert pulsar_broker.broker.get_topic("unsub").subscription_names() == []


def test_auto_topic_creation_makes_topics_never_tenants_or_namespaces(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    # Pulsar: a producer, consumer or reader on a namespace that does not exist gets
    # TopicNotFound, and neither the tenant nor the namespace appears.
    admin = f"{pulsar_broker.admin_url}/admin/v2"
    assert httpx.get(f"{admin}/tenants").json() == ["public", "pulsar", "sample"]  # Pulsar standalone's
    topic = "persistent://acme/prod/orders"
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(topic)
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe(topic, "sub")
    with pytest.raises(pulsar.TopicNotFound):
        client.create_reader(topic, pulsar.MessageId.earliest)
    with pytest.raises(pulsar.TopicNotFound):
        client.get_topic_partitions(topic)
    created = httpx.put(f"{admin}/persistent/acme/prod/orders")
    assert created.status_code == 404 and "Namespace does not exist" in created.text
    assert httpx.put(f"{admin}/persistent/acme/prod/orders/partitions", json=2).status_code == 404
    assert httpx.post(f"{admin}/namespaces/acme/prod/deduplication", content=b"true").status_code == 404
    assert httpx.get(f"{admin}/tenants").json() == ["public", "pulsar", "sample"]
    assert httpx.get(f"{admin}/namespaces/acme").status_code == 404  # Pulsar: "Tenant does not exist"
    assert pulsar_broker.broker.list_topics() == []
    assert httpx.put(f"{admin}/namespaces/acme/prod").status_code == 404  # the tenant first, as Pulsar
    assert httpx.put(f"{admin}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code == 204
    assert httpx.put(f"{admin}/namespaces/acme/prod").status_code == 204
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "sub")
    producer.send(b"x")
    assert consumer.receive(RECEIVE_MS).data() == b"x"
    assert pulsar_broker.broker.list_topics() == [topic]


@pytest.mark.parametrize("retain", [False, True])
def test_a_topic_without_subscriptions_keeps_only_what_retention_covers(
    pulsar_broker_factory: Callable[..., EmbeddedBroker], retain: bool
) -> None:
    # Pulsar: with no durable cursor every closed ledger is consumed, readers hold nothing back;
    # retain_without_subscriptions keeps everything (earlier mledger versions).
    config = ManagedLedgerConfig(max_entries_per_ledger=2, retain_without_subscriptions=retain)
    broker = pulsar_broker_factory(broker_config=BrokerConfig(managed_ledger_config=config))
    client = make_client(broker)
    producer = client.create_producer("unsubscribed")
    ids = [producer.send(b"m%d" % i) for i in range(5)]  # ledgers of 2, 2, and the current one
    ml = broker.broker.get_topic("unsubscribed").managed_ledger  # type: ignore[union-attr]
    ml.trim_consumed_ledgers_in_background().result(timeout=10)  # after the rollovers' passes
    kept = ids if retain else ids[4:]
    reader = client.create_reader("unsubscribed", pulsar.MessageId.earliest)
    assert [str(reader.read_next(RECEIVE_MS).message_id()) for _ in kept] == [str(i) for i in kept]
    assert not reader.has_message_available()
    client.close()


def test_partitioned_topic(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    created = httpx.put(f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/parts/partitions", json=3)
    assert created.status_code == 204, created.text
    consumer = client.subscribe("parts", "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("parts")
    for i in range(30):
        producer.send(b"%d" % i, partition_key=f"k{i}")
    got = receive_all(consumer, 30)
    assert sorted(int(m.data()) for m in got) == list(range(30))
    assert {m.message_id().partition() for m in got} == {0, 1, 2}
    for m in got:
        consumer.acknowledge(m)
    assert_nothing(consumer)


def test_regex_subscription(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    for name in ("rx-a", "rx-b", "other"):
        pulsar_broker.broker.create_topic(name)
    consumer = client.subscribe(re.compile("persistent://public/default/rx-.*"), "sub")
    for name in ("rx-a", "rx-b", "other"):
        client.create_producer(name).send(name.encode())
    got = sorted(m.data() for m in receive_all(consumer, 2))
    assert got == [b"rx-a", b"rx-b"]
    assert_nothing(consumer)


def test_key_shared_keeps_each_key_on_one_consumer_in_order(client: pulsar.Client) -> None:
    c1 = client.subscribe("ks", "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="c1")
    c2 = client.subscribe("ks", "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="c2")
    producer = client.create_producer("ks")
    keys = [f"key-{i}" for i in range(8)]
    for n in range(5):
        for k in keys:
            producer.send(f"{k}:{n}".encode(), partition_key=k)
    seen: dict[str, list[int]] = {}
    owner: dict[str, str] = {}
    total = 0
    while total < 40:
        for name, c in (("c1", c1), ("c2", c2)):
            try:
                m = c.receive(200)
            except pulsar.Timeout:
                continue
            key, n = m.data().decode().split(":")
            assert owner.setdefault(key, name) == name
            seen.setdefault(key, []).append(int(n))
            c.acknowledge(m)
            total += 1
    assert all(v == [0, 1, 2, 3, 4] for v in seen.values()) and set(seen) == set(keys)


def test_failover_switches_to_the_other_consumer(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    first = client.subscribe("fo", "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    second = client.subscribe("fo", "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer("fo")
    for i in range(3):
        producer.send(b"%d" % i)
    got = receive_all(first, 3)
    assert_nothing(second)
    first.acknowledge_cumulative(got[0])
    # the client groups acks for 100 ms: wait until the broker moved the mark-delete to it
    cursor = pulsar_broker.broker.get_subscription("fo", "sub").cursor
    acked = got[0].message_id()
    wait_until(lambda: cursor.mark_delete_position == Position(acked.ledger_id(), acked.entry_id()))
    first.close()
    # The standby takes over: everything not acknowledged comes to it.
    assert [m.data() for m in receive_all(second, 2)] == [b"1", b"2"]


# -- schemas, dedup, PIP-423, auth ----------------------------------------------------------------


class UserV1(Record):
    name = String()


class UserV2(Record):
    name = String()
    age = Integer()

    @classmethod
    def schema(cls) -> dict:  # type: ignore[override]
        # The Python client writes no Avro defaults; a field added compatibly needs one.
        definition: dict = super().schema()
        for field in definition["fields"]:
            if field["name"] == "age":
                field["default"] = None
        return definition


class UserV3(Record):
    name = Integer()  # a field that changes its type


def test_schema_compatible_update_and_incompatible_refusal(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    p1 = client.create_producer("users", schema=JsonSchema(UserV1))
    consumer = client.subscribe("users", "sub", schema=JsonSchema(UserV1))
    p1.send(UserV1(name="ann"))
    assert consumer.receive(RECEIVE_MS).value().name == "ann"
    p2 = client.create_producer("users", schema=JsonSchema(UserV2))  # added field has a default: compatible
    p2.send(UserV2(name="bob", age=3))
    assert consumer.receive(RECEIVE_MS).value().name == "bob"
    assert len(pulsar_broker.broker.schemas.versions("users")) == 2
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer("users", schema=JsonSchema(UserV3))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer("users", schema=StringSchema())
    assert len(pulsar_broker.broker.schemas.versions("users")) == 2


def test_dedup_across_a_producer_restart(pulsar_broker: EmbeddedBroker) -> None:
    # Namespace deduplication on, through the REST API (pulsar-admin namespaces set-deduplication).
    on = httpx.post(f"{pulsar_broker.admin_url}/admin/v2/namespaces/public/default/deduplication", content=b"true")
    assert on.status_code == 204, on.text
    client = make_client(pulsar_broker)
    consumer = client.subscribe("dedup", "sub")
    producer = client.create_producer("dedup", producer_name="app-1")
    for seq in range(5):
        producer.send(b"%d" % seq, sequence_id=seq)
    producer.close()
    again = client.create_producer("dedup", producer_name="app-1")
    assert again.last_sequence_id() == 4
    for seq in (3, 4, 5):  # a restarted app resends its last two
        again.send(b"%d" % seq, sequence_id=seq)
    got = [m.data() for m in receive_all(consumer, 6)]
    assert got == [b"0", b"1", b"2", b"3", b"4", b"5"]
    assert_nothing(consumer)
    client.close()


def test_pip423_cancel_and_skip_seen_by_a_connected_consumer(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("pip423", "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("pip423")
    minute = __import__("datetime").timedelta(seconds=60)
    cancelled = producer.send(b"cancelled", deliver_after=minute)
    skipped = producer.send(b"skipped", deliver_after=minute)
    producer.send(b"kept", deliver_after=minute)
    # Through the REST API, as an operator would (pulsar-admin's paths).
    base = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/pip423"
    cancel = httpx.post(
        f"{base}/cancelDelayedMessage",
        params={"ledgerId": cancelled.ledger_id(), "entryId": cancelled.entry_id(), "subscriptionNames": "sub"},
    )
    assert cancel.status_code in (200, 204), cancel.text
    skip = httpx.post(
        f"{base}/subscription/sub/skipByMessageIds",
        json={"type": "messageId", "messageIds": [{"ledgerId": skipped.ledger_id(), "entryId": skipped.entry_id()}]},
    )
    assert skip.status_code == 204, skip.text
    pulsar_broker.clock.advance(61_000)
    assert consumer.receive(RECEIVE_MS).data() == b"kept"
    assert_nothing(consumer)


def test_token_auth_refused_and_accepted(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    from mledger.admin import Authorization, TopicOperation

    auth = Authorization({"app": {"public/default": {TopicOperation.PRODUCE, TopicOperation.CONSUME}}})
    broker = pulsar_broker_factory(tokens={"s3cret": "app", "other": "nobody"}, authorization=auth)
    bad = make_client(broker, authentication=pulsar.AuthenticationToken("wrong"))
    with pytest.raises(pulsar.PulsarException):
        bad.create_producer("secured")
    bad.close()
    nobody = make_client(broker, authentication=pulsar.AuthenticationToken("other"))
    with pytest.raises(pulsar.PulsarException):
        nobody.create_producer("secured")
    nobody.close()
    good = make_client(broker, authentication=pulsar.AuthenticationToken("s3cret"))
    consumer = good.subscribe("secured", "sub")
    good.create_producer("secured").send(b"ok")
    assert consumer.receive(RECEIVE_MS).data() == b"ok"
    good.close()


def test_topic_list_needs_a_namespace_level_permission(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    """Issue 23 item 2 (Pulsar's apache/pulsar#12600): GET_TOPICS_OF_NAMESPACE, which regex
    subscriptions send, and the REST listings are refused to a role with topic-level grants only."""
    from mledger.admin import Authorization

    auth = Authorization(
        {"one": {"persistent://public/default/mine-1": ["consume", "produce"]}, "ns": {"public/default": ["consume"]}},
        super_user_roles=["root"],
    )
    broker = pulsar_broker_factory(tokens={"t-one": "one", "t-ns": "ns", "t-root": "root"}, authorization=auth)
    root = make_client(broker, authentication=pulsar.AuthenticationToken("t-root"))
    for topic in ("mine-1", "secret-payroll"):
        root.create_producer(topic).close()
    pattern = re.compile("persistent://public/default/mine-.*")  # matches only the topic "one" may consume

    one = make_client(broker, authentication=pulsar.AuthenticationToken("t-one"))
    # the server answers AuthorizationError (test_topic_list_refusal_names_no_topic); the C++
    # client reports any failed topic-list request of a regex subscription as LookupError
    with pytest.raises(pulsar.exceptions.LookupError):
        one.subscribe(pattern, "sub")
    one.subscribe("mine-1", "direct").close()  # its own topic, by name, still works
    one.close()

    ns = make_client(broker, authentication=pulsar.AuthenticationToken("t-ns"))
    consumer = ns.subscribe(pattern, "sub", initial_position=pulsar.InitialPosition.Earliest)
    root.create_producer("mine-1").send(b"hello")
    assert consumer.receive(RECEIVE_MS).data() == b"hello"
    ns.close()
    root.close()

    for path in ("/admin/v2/persistent/public/default", "/admin/v2/namespaces/public/default/topics"):
        url = broker.admin_url + path  # type: ignore[attr-defined]
        refused = httpx.get(url, headers={"Authorization": "Bearer t-one"})
        assert refused.status_code == 403, refused.text
        assert "secret-payroll" not in refused.text and "mine-1" not in refused.text
        listed = httpx.get(url, headers={"Authorization": "Bearer t-ns"})
        assert listed.status_code == 200 and "persistent://public/default/secret-payroll" in listed.json()


def test_topic_list_refusal_names_no_topic(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    from protocol_raw import RawClient

    from mledger.admin import Authorization
    from mledger.codec.proto import PulsarApi_pb2 as api

    auth = Authorization({"one": {"persistent://public/default/mine-1": ["consume"]}}, super_user_roles=["root"])
    broker = pulsar_broker_factory(tokens={"t-one": "one", "t-root": "root"}, authorization=auth)
    root = make_client(broker, authentication=pulsar.AuthenticationToken("t-root"))
    root.create_producer("secret-payroll").close()
    root.close()
    raw = RawClient(broker.server.port, connect=False)
    _T = api.BaseCommand
    raw.send(_T(type=_T.CONNECT, connect=api.CommandConnect(
        client_version="raw", protocol_version=20, auth_method_name="token", auth_data=b"t-one")))
    assert raw.next_command().type == _T.CONNECTED
    raw.send(_T(type=_T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=api.CommandGetTopicsOfNamespace(
        request_id=7, namespace="public/default")))
    answer = raw.next_command()
    raw.close()
    assert answer.type == _T.ERROR, answer
    assert answer.error.request_id == 7 and answer.error.error == api.AuthorizationError
    assert "secret-payroll" not in answer.error.message


def test_get_last_message_id_and_consumer_stats(client: pulsar.Client) -> None:
    consumer = client.subscribe("last", "sub")
    producer = client.create_producer("last")
    ids = [producer.send(b"%d" % i) for i in range(3)]
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())


def test_server_stats_count_messages_bytes_and_connections(pulsar_broker: EmbeddedBroker) -> None:
    """``EmbeddedBroker.stats()``: a frozen snapshot; a batch of N messages counts N in and out;
    the counts of a closed connection stay, its producers and consumers go."""
    client = make_client(pulsar_broker)
    consumer = client.subscribe("counted", "sub")
    producer = client.create_producer("counted", batching_enabled=True, batching_max_publish_delay_ms=1000)
    for i in range(10):
        producer.send_async(b"m%d" % i, None)
    producer.flush()  # one SEND: a batch of ten messages
    got = receive_all(consumer, 10)
    for m in got:
        consumer.acknowledge(m)
    stats = pulsar_broker.stats()
    assert pulsar_broker.broker.get_topic("counted").stats().entries == 1
    assert (stats.messages_in, stats.messages_out) == (10, 10)
    assert stats.bytes_in == stats.bytes_out > 10 * 2
    assert (stats.connections, stats.producers, stats.consumers) == (1, 1, 1)
    assert stats.connections_opened >= 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.messages_in = 0  # type: ignore[misc]
    assert pulsar_broker.server.stats() == stats  # the server's own snapshot
    client.close()
    wait_until(lambda: pulsar_broker.stats().connections == 0)
    after = pulsar_broker.stats()
    assert (after.messages_in, after.bytes_in, after.messages_out) == (10, stats.bytes_in, 10)
    assert (after.producers, after.consumers) == (0, 0)


def test_start_to_first_message_is_fast() -> None:
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        client = make_client(broker)
        consumer = client.subscribe("fast", "sub")
        client.create_producer("fast").send(b"first")
        assert consumer.receive(RECEIVE_MS).data() == b"first"
        elapsed = time.perf_counter() - started
        client.close()
    print(f"start to first message: {elapsed * 1000:.0f} ms")


# -- producer access modes, server-initiated closes, keep-alive ---------------------------------


def test_exclusive_producer_fences_others(client: pulsar.Client) -> None:
    exclusive = client.create_producer("excl", access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises(pulsar.PulsarException):
        client.create_producer("excl")  # a shared producer while an exclusive one holds the topic
    with pytest.raises(pulsar.PulsarException):
        client.create_producer("excl", access_mode=pulsar.ProducerAccessMode.Exclusive)
    exclusive.close()
    client.create_producer("excl").send(b"free again")


def test_wait_for_exclusive_producer_gets_the_topic_when_it_frees_up(client: pulsar.Client) -> None:
    import threading

    first = client.create_producer("wfe", access_mode=pulsar.ProducerAccessMode.Exclusive)
    got: list[pulsar.Producer] = []
    waiter = threading.Thread(
        target=lambda: got.append(client.create_producer("wfe", access_mode=pulsar.ProducerAccessMode.WaitForExclusive))
    )
    waiter.start()
    time.sleep(0.5)
    assert not got  # still waiting
    first.close()
    waiter.join(10)
    assert got
    got[0].send(b"mine now")


def test_deleting_the_topic_closes_its_producers_and_consumers(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("doomed", "sub")
    producer = client.create_producer("doomed")
    producer.send(b"x")
    consumer.receive(RECEIVE_MS)
    deleted = httpx.delete(f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/doomed", params={"force": "true"})
    assert deleted.status_code == 204, deleted.text
    deadline = time.time() + 5
    while (producer.is_connected() or consumer.is_connected()) and time.time() < deadline:
        time.sleep(0.05)
    # The server closed both (CLOSE_PRODUCER / CLOSE_CONSUMER); the clients reconnect to a new topic.
    stats = pulsar_broker.stats()
    assert stats.producers + stats.consumers <= 2


def test_server_pings_and_closes_a_silent_connection(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> None:
    from protocol_raw import RawClient

    from mledger.codec.proto import PulsarApi_pb2 as api
    from mledger.protocol import ProtocolConfig

    broker = pulsar_broker_factory(protocol_config=ProtocolConfig(host="127.0.0.1", port=0, keep_alive_interval_seconds=0.2))
    raw = RawClient(broker.port)
    assert raw.next_command().type == api.BaseCommand.PING  # idle: the server asks
    raw.sock.settimeout(30)  # a bound for a loaded machine: the close comes at the next check (0.2 s)
    assert raw.is_closed_by_server()  # no PONG: closed at the next check
    client = make_client(broker)  # the real client answers PINGs and stays
    consumer = client.subscribe("alive", "sub")
    time.sleep(1.0)
    client.create_producer("alive").send(b"still")
    assert consumer.receive(RECEIVE_MS).data() == b"still"
    client.close()
