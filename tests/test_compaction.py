"""Topic compaction (mledger.broker._compaction) with the real pulsar-client: the compacted view,
tombstones, read-compacted readers and consumers, the client's TableView, the REST routes, the
threshold policy and a restart over the same SQLite data."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest
from protocol_raw import RawClient

from mledger import ManagedLedgerFactory
from mledger.broker import (
    Broker,
    BrokerConfig,
    CompactionStatus,
    InitialPosition,
    ManualClock,
    _compaction as compaction_module,
)
from mledger.codec import SingleMessage, decode_batch, encode_batch
from mledger.codec._batch import compact_batch
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.core import ManagedLedgerConfig, Position

NS = "persistent://public/default"
TIMEOUT_MS = 10_000


def _compact(broker: Any, topic: str) -> None:
    """Trigger through the REST API (204), wait for the run, check it succeeded."""
    url = f"{broker.admin_url}/admin/v2/{topic.replace('://', '/')}/compaction"
    assert httpx.put(url).status_code == 204
    status = broker.broker.get_topic(topic).compaction.wait(10)
    assert status.status is CompactionStatus.SUCCESS
    assert httpx.get(url).json() == {"status": "SUCCESS", "lastError": ""}


def _read_all(reader: pulsar.Reader) -> list[tuple[str | None, bytes, str]]:
    out = []
    while reader.has_message_available():
        msg = reader.read_next(TIMEOUT_MS)
        out.append((msg.partition_key() or None, msg.data(), str(msg.message_id())))
    return out


def _publish(producer: pulsar.Producer, items: list[tuple[str | None, bytes]]) -> list[str]:
    ids: list[str] = []
    for key, value in items:
        if key is None:
            ids.append(str(producer.send(value)))
        else:
            ids.append(str(producer.send(value, partition_key=key)))
    return ids


def test_compaction_keeps_the_last_message_of_each_key_and_tombstones_remove_keys(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/compacted"
    client = client_for(pulsar_broker)
    producer = client.create_producer(topic, batching_enabled=False)
    items: list[tuple[str | None, bytes]] = [
        ("a", b"a1"), ("b", b"b1"), ("c", b"c1"), (None, b"no key"), ("a", b"a2"), ("b", b""), ("c", b"c2"),
        ("d", b"d1"), ("d", b""), ("d", b"d2"),
    ]  # fmt: skip
    ids = _publish(producer, items)
    url = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/compacted/compaction"
    assert httpx.get(url).json() == {"status": "NOT_RUN", "lastError": ""}
    _compact(pulsar_broker, topic)

    base = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/compacted"
    compaction = httpx.get(f"{base}/stats").json()["compaction"]
    assert compaction["lastCompactionRemovedEventCount"] == 6  # 9 keyed messages read, 3 kept
    assert compaction["lastCompactionSucceedTimestamp"] > 0 and compaction["lastCompactionFailedTimestamp"] == 0
    internal = httpx.get(f"{base}/internalStats").json()
    view = pulsar_broker.broker.get_topic(topic).compaction.view
    assert internal["compactedLedger"]["ledgerId"] == view.ledger_id and internal["compactedLedger"]["entries"] == 3
    assert "__compaction" in internal["cursors"] and "__compaction" not in httpx.get(f"{base}/subscriptions").json()

    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    # the last value of each key, in publish order, with its original message id; b removed
    assert _read_all(reader) == [("a", b"a2", ids[4]), ("c", b"c2", ids[6]), ("d", b"d2", ids[9])]
    # after the horizon the reader reads the ledger: everything, tombstones and keyless included
    later = _publish(producer, [("a", b"a3"), ("a", b""), (None, b"x")])
    assert _read_all(reader) == [("a", b"a3", later[0]), ("a", b"", later[1]), (None, b"x", later[2])]
    # a reader that does not read compacted sees every message
    plain = client.create_reader(topic, pulsar.MessageId.earliest)
    assert len(_read_all(plain)) == len(items) + 3

    # a second compaction builds on the first: a is gone (tombstone), keyless messages never kept
    _compact(pulsar_broker, topic)
    again = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert _read_all(again) == [("c", b"c2", ids[6]), ("d", b"d2", ids[9])]


@pytest.mark.parametrize(
    "compression", [pulsar.CompressionType.NONE, pulsar.CompressionType.ZLib, pulsar.CompressionType.LZ4]
)
def test_batched_messages_are_compacted_per_key_inside_their_batch(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client], compression: pulsar.CompressionType
) -> None:
    topic = f"{NS}/compacted-batches"
    client = client_for(pulsar_broker)
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=4,
        batching_max_publish_delay_ms=60_000,
        compression_type=compression,
    )
    ids: list[str] = []
    for key, value in [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b"b2"), ("c", b"")]:
        producer.send_async(value, lambda _res, mid: ids.append(str(mid)), partition_key=key)
    producer.flush()
    assert len(ids) == 6
    _compact(pulsar_broker, topic)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    # a2 is the 3rd message of the first batch, b2 the 1st of the second: ids keep batch indexes
    assert _read_all(reader) == [("a", b"a2", ids[2]), ("b", b"b2", ids[4])]


def test_read_compacted_consumer_acks_and_only_exclusive_or_failover_may_read_compacted(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/compacted-consumer"
    client = client_for(pulsar_broker)
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("k", b"1"), ("k", b"2"), ("j", b"1"), ("k", b"3")])
    _compact(pulsar_broker, topic)
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Failover,
        is_read_compacted=True,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    got = [consumer.receive(TIMEOUT_MS) for _ in range(2)]
    assert [(m.partition_key(), m.data()) for m in got] == [("j", b"1"), ("k", b"3")]
    consumer.acknowledge_cumulative(got[-1])

    # the real client refuses Shared + read_compacted itself; the broker refuses it too
    raw = RawClient(pulsar_broker.port)
    subscribe = api.CommandSubscribe(
        topic=topic, subscription="shared", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=7,
        read_compacted=True,
    )  # fmt: skip
    raw.send(api.BaseCommand(type=api.BaseCommand.SUBSCRIBE, subscribe=subscribe))
    reply = raw.next_command()
    raw.close()
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.NotAllowedError
    assert reply.error.message == "readCompacted only allowed on failover or exclusive subscriptions"
    assert "shared" not in pulsar_broker.broker.get_topic(topic).subscriptions


def test_table_view_reads_the_compacted_topic_and_follows_updates(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/table"
    client = client_for(pulsar_broker)
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("x", b"1"), ("y", b"1"), ("x", b"2"), ("z", b"1"), ("z", b"")])
    _compact(pulsar_broker, topic)
    _publish(producer, [("y", b"2")])  # after the horizon

    table = client.create_table_view(topic)
    assert (table.get("x"), table.get("y"), table.get("z"), len(table)) == (b"2", b"2", None, 2)

    seen: dict[str, bytes] = {}
    done = threading.Event()

    def listen(key: str, value: bytes) -> None:
        seen[key] = value
        if key == "y" and value == b"":
            done.set()

    table.for_each_and_listen(listen)
    _publish(producer, [("x", b"3"), ("w", b"1"), ("y", b"")])
    assert done.wait(10)
    assert (table.get("x"), table.get("w"), table.get("y"), len(table)) == (b"3", b"1", None, 2)
    table.close()


def test_a_restart_keeps_the_compacted_view(
    tmp_path: Path, pulsar_broker_factory: Callable[..., Any], client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/durable"
    first = pulsar_broker_factory(data_dir=tmp_path / "data")
    client = client_for(first)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = _publish(producer, [("a", b"1"), ("b", b"1"), ("a", b"2"), ("b", b"")])
    _compact(first, topic)
    view = first.broker.get_topic(topic).compaction.view
    assert view is not None
    ledger_id = view.ledger_id
    client.close()
    first.stop()

    second = pulsar_broker_factory(data_dir=tmp_path / "data")
    compaction = second.broker.get_topic(topic).compaction
    assert compaction.view is not None and compaction.view.ledger_id == ledger_id
    reader = client_for(second).create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert _read_all(reader) == [("a", b"2", ids[2])]


def test_compaction_threshold_policy_triggers_the_periodic_check(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/threshold"
    admin = f"{pulsar_broker.admin_url}/admin/v2"
    client = client_for(pulsar_broker)
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("k", b"x" * 100), ("k", b"y" * 100)])
    broker = pulsar_broker.broker
    compaction = broker.get_topic(topic).compaction

    assert httpx.put(f"{admin}/namespaces/public/default/compactionThreshold", json=-1).status_code == 412
    assert httpx.put(f"{admin}/namespaces/public/default/compactionThreshold", json=10_000).status_code == 204
    assert httpx.get(f"{admin}/namespaces/public/default/compactionThreshold").json() == 10_000
    pulsar_broker.clock.advance(60_000)
    broker.run_due_tasks()
    assert compaction.status().status is CompactionStatus.NOT_RUN  # below the namespace's threshold

    threshold_url = f"{admin}/persistent/public/default/threshold/compactionThreshold"
    assert httpx.post(threshold_url, json=100).status_code == 204
    assert httpx.get(threshold_url).json() == 100
    assert httpx.get(threshold_url, params={"applied": "true"}).json() == 100
    broker.run_due_tasks()
    assert compaction.status().status is CompactionStatus.NOT_RUN  # the monitor interval has not passed
    pulsar_broker.clock.advance(60_000)
    broker.run_due_tasks()
    assert compaction.wait(10).status is CompactionStatus.SUCCESS

    assert httpx.delete(threshold_url).status_code == 204
    assert httpx.get(threshold_url).json() is None
    assert httpx.get(threshold_url, params={"applied": "true"}).json() == 10_000


def test_a_second_trigger_while_one_runs_is_409_and_a_failure_is_reported(
    pulsar_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"{NS}/busy"
    url = f"{pulsar_broker.admin_url}/admin/v2/persistent/public/default/busy/compaction"
    broker = pulsar_broker.broker
    broker.create_producer(topic).send(b"v", key="k")
    release = threading.Event()
    original = compaction_module._Compactor.run

    def blocked(self: Any) -> Any:
        assert release.wait(10)
        raise OSError("disk on fire")

    monkeypatch.setattr(compaction_module._Compactor, "run", blocked)
    assert httpx.put(url).status_code == 204
    assert httpx.get(url).json() == {"status": "RUNNING", "lastError": ""}
    second = httpx.put(url)
    assert second.status_code == 409 and "Compaction already in progress" in second.text
    release.set()
    assert broker.get_topic(topic).compaction.wait(10).status is CompactionStatus.ERROR
    assert httpx.get(url).json() == {"status": "ERROR", "lastError": "disk on fire"}

    monkeypatch.setattr(compaction_module._Compactor, "run", original)
    assert httpx.put(url).status_code == 204
    assert broker.get_topic(topic).compaction.wait(10).status is CompactionStatus.SUCCESS


def test_deleting_a_topic_deletes_its_compacted_ledger() -> None:
    factory = ManagedLedgerFactory()
    broker = Broker(factory, clock=ManualClock(1_000))
    topic = f"{NS}/gone"
    broker.create_producer(topic).send(b"v", key="k")
    compaction = broker.get_topic(topic).compaction
    compaction.trigger().result(10)
    assert compaction.view is not None
    ledger_id = compaction.view.ledger_id
    assert factory.store.ledger_exists(ledger_id)
    broker.delete_topic(topic, force=True)
    assert not factory.store.ledger_exists(ledger_id)
    broker.close()


def test_library_consumers_read_compacted_and_batches_keep_their_indexes() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    topic = f"{NS}/library"
    producer = broker.create_producer(topic)
    producer.send_batch([b"1", b"2"], key="a")
    producer.send(b"3", key="b")
    topic_obj = broker.get_topic(topic)
    topic_obj.compaction.trigger().result(10)
    sub = broker.subscribe(topic, "s", "Exclusive", InitialPosition.EARLIEST)
    consumer = sub.add_consumer("c", read_compacted=True)
    got = [(m.key, m.data, m.message_id.batch_index) for m in consumer.receive(10)]
    assert got == [("a", b"2", 1), ("b", b"3", -1)]
    broker.close()


def test_compact_batch_replaces_removed_messages_with_compacted_out_records() -> None:
    data = encode_batch([SingleMessage(b"one", "a"), SingleMessage(b"two", "b"), SingleMessage(b"three", "a")])
    compacted = compact_batch(data, 3, [False, True, True])
    out = decode_batch(compacted, 3)
    assert [(m.compacted_out, m.payload, m.key) for m in out] == [
        (True, b"", None),
        (False, b"two", "b"),
        (False, b"three", "a"),
    ]
    assert compact_batch(data, 3, [True, True, True]) == data


def test_mledger_admin_compacts_a_data_directory_and_a_served_broker(
    tmp_path: Path, pulsar_broker_factory: Callable[..., Any]
) -> None:
    from test_admin_cli import Cli

    topic = f"{NS}/cli"
    cli = Cli(tmp_path / "data")
    cli.produce(topic, "-m", "old", "-k", "a")
    cli.produce(topic, "-m", "new", "-k", "a")
    cli.produce(topic, "-m", "only", "-k", "b")
    assert cli.run("topics", "compact", topic).stdout == f"Topic compaction requested for {topic}\n"
    assert "has not been run" in cli.run("topics", "compaction-status", topic).stdout  # a fresh broker
    cli.run("topics", "set-compaction-threshold", topic, "-t", "10M")
    assert cli.run("topics", "get-compaction-threshold", topic).stdout.strip() == str(10 * 1024 * 1024)
    cli.run("namespaces", "set-compaction-threshold", "public/default", "-t", "1k")
    assert cli.run("namespaces", "get-compaction-threshold", "public/default").stdout.strip() == "1024"
    cli.run("topics", "remove-compaction-threshold", topic)
    assert cli.run("topics", "get-compaction-threshold", topic, "--applied").stdout.strip() == "1024"

    served = pulsar_broker_factory(data_dir=tmp_path / "data")
    view = served.broker.get_topic(topic).compaction.view
    assert view is not None and [e.data for e in view.read(Position(-1, -1), 10)] == [b"new", b"only"]
    remote = ("--admin-url", served.admin_url)
    served.broker.create_producer(topic).send(b"newer", key="a")
    cli.run("topics", "compact", topic, global_args=remote)
    done = cli.run("topics", "compaction-status", topic, "-w", global_args=remote)
    assert done.stdout == "Compaction was a success\n"
    view = served.broker.get_topic(topic).compaction.view
    assert view is not None and [e.data for e in view.read(Position(-1, -1), 10)] == [b"only", b"newer"]


def test_a_reader_from_the_earliest_reads_compacted_entries_whose_ledgers_were_trimmed(
    pulsar_broker_factory: Callable[..., Any], client_for: Callable[[Any], pulsar.Client]
) -> None:
    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=2))
    served = pulsar_broker_factory(broker_config=config)
    topic = f"{NS}/trimmed"
    client = client_for(served)
    subscription = served.broker.subscribe(topic, "all", "Exclusive", InitialPosition.EARLIEST)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = _publish(producer, [("a", b"1"), ("b", b"1"), ("a", b"2"), ("c", b"1"), ("c", b"2"), ("d", b"1")])
    _compact(served, topic)
    subscription.clear_backlog()
    subscription.cursor.flush()  # trimming follows persisted mark-deletes
    ml = served.broker.get_topic(topic).managed_ledger
    assert ml.trim_consumed_ledgers(), "the consumed ledgers below the horizon go"
    view = served.broker.get_topic(topic).compaction.view
    assert view is not None and view.read(Position(-1, -1), 1)[0].position < ml.first_position()

    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert _read_all(reader) == [("b", b"1", ids[1]), ("a", b"2", ids[2]), ("c", b"2", ids[4]), ("d", b"1", ids[5])]


def test_a_reader_of_a_topic_whose_keys_were_all_deleted_has_no_message(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    topic = f"{NS}/all-deleted"
    client = client_for(pulsar_broker)
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("a", b"1"), ("b", b"1"), ("a", b""), ("b", b"")])
    _compact(pulsar_broker, topic)
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert not reader.has_message_available()
    assert len(client.create_table_view(topic)) == 0
