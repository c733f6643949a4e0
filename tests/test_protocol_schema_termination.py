"""Schema evolution and topic termination as the real ``pulsar-client`` sees them.

Schemas: producers with ``AvroSchema`` / ``JsonSchema`` of record classes that evolve (a field
added with a default, added without one, removed, retyped) under each compatibility strategy;
consumers and readers with an older schema version decoding newer messages. Termination:
``POST .../terminate`` (and ``.../terminate/partitions``), producers refused with Pulsar's
``TopicTerminated``, consumers told ``REACHED_END_OF_TOPIC`` once they acknowledged everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pulsar
import pytest
from protocol_raw import RawClient
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String

from mledger import InitialPosition, ManagedLedgerFactory, ManagedLedgerTerminatedError, SqliteStore
from mledger.broker import SchemaCompatibilityStrategy, TopicTerminatedError
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import EmbeddedBroker

S = SchemaCompatibilityStrategy
_T = api.BaseCommand
RECEIVE_MS = 5000


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        pulsar_broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    yield c
    c.close()


def user_class(**fields: object) -> type[Record]:
    """A record class named ``User`` (a schema's record name is its class's name)."""
    return type("User", (Record,), dict(fields))


Base = user_class(name=String(required=True), email=String(required=True))
EVOLVED = {
    "added_with_default": user_class(
        name=String(required=True),
        email=String(required=True),
        age=Integer(default=0, required=True, required_default=True),
    ),
    "added_without_default": user_class(
        name=String(required=True), email=String(required=True), age=Integer(required=True)
    ),
    "removed": user_class(name=String(required=True)),
    "type_change": user_class(name=String(required=True), email=Integer(required=True)),
}
ACCEPTED = {
    S.ALWAYS_COMPATIBLE: set(EVOLVED),
    S.ALWAYS_INCOMPATIBLE: set(),
    S.BACKWARD: {"added_with_default", "removed"},
    S.FORWARD: {"added_with_default", "added_without_default"},
    S.FULL: {"added_with_default"},
    S.BACKWARD_TRANSITIVE: {"added_with_default", "removed"},
    S.FORWARD_TRANSITIVE: {"added_with_default", "added_without_default"},
    S.FULL_TRANSITIVE: {"added_with_default"},
}


@pytest.mark.parametrize("schema_class", [AvroSchema, JsonSchema], ids=["avro", "json"])
def test_each_strategy_accepts_and_refuses_the_right_producers(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client, schema_class: type
) -> None:
    admin = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default"
    for strategy, accepted in ACCEPTED.items():
        for evolution, cls in EVOLVED.items():
            topic = f"{schema_class.__name__}-{strategy.value}-{evolution}".lower()
            client.create_producer(topic, schema=schema_class(Base)).close()
            put = httpx.put(f"{admin}/{topic}/schemaCompatibilityStrategy", json=strategy.value)
            assert put.status_code == 204, put.text
            if evolution in accepted:
                client.create_producer(topic, schema=schema_class(cls)).close()
                assert len(pulsar_broker.broker.schemas.versions(topic)) == 2, (strategy, evolution)
            else:
                with pytest.raises(pulsar.IncompatibleSchema):
                    client.create_producer(topic, schema=schema_class(cls))
                assert len(pulsar_broker.broker.schemas.versions(topic)) == 1, (strategy, evolution)


def test_transitive_strategy_refuses_what_the_latest_version_accepts(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    # v0 -> v1 drops email (it has a default); v2 brings it back as an int: compatible with v1,
    # not with v0
    v0 = user_class(name=String(required=True), email=String(default="", required=True, required_default=True))
    v1 = user_class(name=String(required=True))
    v2 = user_class(name=String(required=True), email=Integer(default=0, required=True, required_default=True))
    ns = f"{pulsar_broker.admin_url}/admin/v2/namespaces/public/default"
    for plain, transitive in ((S.FULL, S.FULL_TRANSITIVE), (S.BACKWARD, S.BACKWARD_TRANSITIVE)):
        assert httpx.put(f"{ns}/schemaCompatibilityStrategy", json=transitive.value).status_code == 204
        assert httpx.get(f"{ns}/schemaCompatibilityStrategy").json() == transitive.value
        topic = f"transitive-{plain.value}".lower()
        for cls in (v0, v1):
            client.create_producer(topic, schema=AvroSchema(cls)).close()
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(topic, schema=AvroSchema(v2))
        assert httpx.put(f"{ns}/schemaCompatibilityStrategy", json=plain.value).status_code == 204
        client.create_producer(topic, schema=AvroSchema(v2)).close()


@pytest.mark.parametrize("schema_class", [AvroSchema, JsonSchema], ids=["avro", "json"])
def test_older_schema_consumer_and_reader_decode_newer_messages(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client, schema_class: type
) -> None:
    topic = f"evolving-{schema_class.__name__}".lower()
    old = client.create_producer(topic, schema=schema_class(Base))
    consumer = client.subscribe(topic, "old-schema", schema=schema_class(Base))
    reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=schema_class(Base))
    old.send(Base(name="ann", email="ann@x"))
    new = client.create_producer(topic, schema=schema_class(EVOLVED["added_with_default"]))  # FULL: allowed
    new.send(EVOLVED["added_with_default"](name="bob", email="bob@x", age=7))
    for source in (lambda: consumer.receive(RECEIVE_MS), lambda: reader.read_next(RECEIVE_MS)):
        first, second = source(), source()
        assert (first.value().name, first.value().email) == ("ann", "ann@x")
        assert (second.value().name, second.value().email) == ("bob", "bob@x")
        assert first.schema_version() != second.schema_version()  # each as its producer wrote it


def test_older_schema_consumer_refused_when_the_strategy_does_not_allow_it(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    topic = "backward-only"
    client.create_producer(topic, schema=AvroSchema(Base)).close()
    pulsar_broker.broker.set_topic_schema_compatibility_strategy(f"persistent://public/default/{topic}", S.BACKWARD)
    newer = EVOLVED["removed"]  # BACKWARD allows it, but data without email is unreadable for Base
    client.create_producer(topic, schema=AvroSchema(newer)).close()
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "old", schema=AvroSchema(Base))
    client.subscribe(topic, "new", schema=AvroSchema(newer)).close()


def test_auto_update_disabled_keeps_known_versions_only(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    ns = f"{pulsar_broker.admin_url}/admin/v2/namespaces/public/default"
    client.create_producer("frozen", schema=AvroSchema(Base)).close()
    assert httpx.post(f"{ns}/isAllowAutoUpdateSchema", content=b"false").status_code == 204
    assert httpx.get(f"{ns}/isAllowAutoUpdateSchema").json() is False
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer("frozen", schema=AvroSchema(EVOLVED["added_with_default"]))
    client.create_producer("frozen", schema=AvroSchema(Base)).close()


# -- termination ---------------------------------------------------------------------------------


def test_terminate_refuses_producers_and_answers_the_last_message_id(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    consumer = client.subscribe("ending", "sub")
    producer = client.create_producer("ending")
    ids = [producer.send(b"m%d" % i) for i in range(3)]
    url = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/ending"
    response = httpx.post(f"{url}/terminate")
    assert response.status_code == 200, response.text
    last = {"ledgerId": ids[-1].ledger_id(), "entryId": ids[-1].entry_id(), "partitionIndex": -1}
    assert response.json() == last
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"late")
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer("ending")
    got = [consumer.receive(RECEIVE_MS) for _ in range(3)]  # what was published before stays readable
    assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
    assert httpx.post(f"{url}/terminate").json() == last  # idempotent
    assert httpx.get(f"{url}/internalStats").json()["state"] == "Terminated"


def _subscribe(raw: RawClient, consumer_id: int, subscription: str, initial: int) -> None:
    raw.send(
        _T(
            type=_T.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic="persistent://public/default/raw-ending",
                subscription=subscription,
                subType=api.CommandSubscribe.Exclusive,
                consumer_id=consumer_id,
                request_id=consumer_id,
                initialPosition=initial,
            ),
        )
    )
    assert raw.next_command().type == _T.SUCCESS


def _barrier(raw: RawClient) -> api.BaseCommand:
    """The next command, after everything the server queued before answering a PING."""
    raw.send(_T(type=_T.PING, ping=api.CommandPing()))
    return raw.next_command()


def test_consumers_get_reached_end_of_topic_once_they_acknowledged_everything(pulsar_broker: EmbeddedBroker) -> None:
    # The Python client (C++ 3.13.0) has no has_reached_end_of_topic() and treats the command as
    # unknown (it reconnects, as it does against Pulsar), so the frames are checked on the wire.
    topic = pulsar_broker.broker.create_topic("persistent://public/default/raw-ending")
    producer = topic.create_producer()
    raw = RawClient(pulsar_broker.port)
    try:
        _subscribe(raw, 1, "sub", api.CommandSubscribe.Earliest)
        ids = [producer.send(b"m%d" % i) for i in range(2)]
        raw.send(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=10)))
        delivered = [raw.next_command() for _ in range(2)]
        assert [c.type for c in delivered] == [_T.MESSAGE, _T.MESSAGE]
        url = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/raw-ending/terminate"
        assert httpx.post(url).status_code == 200
        assert _barrier(raw).type == _T.PONG  # two messages are not acknowledged yet
        ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual)
        ack.message_id.add(ledgerId=ids[0].ledger_id, entryId=ids[0].entry_id)
        raw.send(_T(type=_T.ACK, ack=ack))
        assert _barrier(raw).type == _T.PONG  # one is left
        ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual)
        ack.message_id.add(ledgerId=ids[1].ledger_id, entryId=ids[1].entry_id)
        raw.send(_T(type=_T.ACK, ack=ack))
        end = raw.next_command()
        assert end.type == _T.REACHED_END_OF_TOPIC and end.reachedEndOfTopic.consumer_id == 1
        assert _barrier(raw).type == _T.PONG  # told once
        # a consumer joining with nothing left to acknowledge is told right after its SUCCESS
        _subscribe(raw, 2, "late", api.CommandSubscribe.Latest)
        end = raw.next_command()
        assert end.type == _T.REACHED_END_OF_TOPIC and end.reachedEndOfTopic.consumer_id == 2
        raw.send(_T(type=_T.PRODUCER, producer=api.CommandProducer(topic=topic.name, producer_id=1, request_id=9)))
        error = raw.next_command()
        assert error.type == _T.ERROR and error.error.error == api.TopicTerminatedError
    finally:
        raw.close()


def test_a_library_consumer_reaches_the_end_of_a_terminated_topic(pulsar_broker: EmbeddedBroker) -> None:
    broker = pulsar_broker.broker
    topic = broker.create_topic("persistent://public/default/lib-ending")
    consumer = topic.subscribe("sub").add_consumer()
    producer = topic.create_producer()
    for _ in range(2):
        producer.send(b"x")
    topic.terminate()
    with pytest.raises(TopicTerminatedError):
        producer.send(b"late")
    messages = consumer.receive(10)
    assert len(messages) == 2 and not consumer.has_reached_end_of_topic()
    consumer.acknowledge(messages)
    assert consumer.has_reached_end_of_topic()
    late = topic.subscribe("late", initial_position=InitialPosition.LATEST).add_consumer()
    assert late.has_reached_end_of_topic()  # nothing left to acknowledge when it joins
    backlogged = topic.subscribe("backlogged", initial_position=InitialPosition.EARLIEST)
    reader = backlogged.add_consumer()
    assert not reader.has_reached_end_of_topic()
    backlogged.clear_backlog()  # pulsar-admin topics clear-backlog acknowledges everything
    assert reader.has_reached_end_of_topic()
    with pytest.raises(TopicTerminatedError):
        topic.create_producer()


def test_terminate_a_partitioned_topic(pulsar_broker: EmbeddedBroker, client: pulsar.Client) -> None:
    base = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/parts"
    assert httpx.put(f"{base}/partitions", json=2).status_code == 204
    producer = client.create_producer("parts", message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    sent = [producer.send(b"%d" % i) for i in range(4)]
    refused = httpx.post(f"{base}/terminate")
    assert refused.status_code == 405, refused.text
    response = httpx.post(f"{base}/terminate/partitions")
    assert response.status_code == 200, response.text
    last = {m.partition(): m for m in sent}  # the last id sent to each partition
    assert response.json() == {
        str(p): {"ledgerId": m.ledger_id(), "entryId": m.entry_id(), "partitionIndex": -1} for p, m in last.items()
    }
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer("parts")
    not_partitioned = httpx.post(
        f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/ending2/terminate/partitions"
    )
    assert not_partitioned.status_code == 404


def test_termination_survives_a_restart(tmp_path: object) -> None:
    factory = ManagedLedgerFactory(SqliteStore(str(tmp_path)))
    ml = factory.open("public/default/persistent/t")
    last = ml.add_entries([b"a", b"b"])[-1]
    assert ml.terminate() == last
    assert ml.terminate() == last  # idempotent
    with pytest.raises(ManagedLedgerTerminatedError):
        ml.add_entry(b"c")
    factory.close()
    factory = ManagedLedgerFactory(SqliteStore(str(tmp_path)))
    ml = factory.open("public/default/persistent/t")
    assert ml.is_terminated and ml.terminated_position == last
    with pytest.raises(ManagedLedgerTerminatedError):
        ml.add_entry(b"c")
    factory.close()
