"""The replay reads what the recorder writes (issue 25 item 2): timed subscription events
(created, reset, deleted) in the subscriptions log, with Pulsar's semantics, in the engine,
``prepare`` and the single process; bad rows and bad files give anomalies or a clear error.

The differential tests here drive the library's broker on a manual clock through a seeded
random workload with a recorder attached, replay the recording and compare every
subscription's mark-delete position, individually deleted ranges, backlog and batch-deleted
indexes with the live cursors. (``test_record_differential.py`` does the same through the
real ``pulsar-client`` and ``mledger standalone --record``.)
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mledger import InitialPosition, ManagedLedgerFactory, MemoryStore
from mledger.broker import Broker, Consumer, ManualClock, SkipEntry, Subscription, SubscriptionType
from mledger.core import EARLIEST, LATEST
from mledger.replay import (
    BrokerModel,
    InputSchemaError,
    Recorder,
    ReplaySettings,
    prepare_in_process,
    run_single_process,
)
from mledger.replay._inputs import plan_inputs

TOPIC = "persistent://public/default/t"


def write_raw(root: Path, **logs: dict[str, list[Any]]) -> str:
    for name, columns in logs.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), root / name / "part-0.parquet")
    return str(root)


def cursors(out: Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    rows = pq.read_table(out / "cursors").to_pylist()
    return {(r["topic"], r["partition"], r["subscription"]): r for r in rows}


def anomalies(out: Path) -> list[tuple[str | None, str, str, str]]:
    rows = pq.read_table(out / "anomalies").to_pylist()
    return sorted((r["subscription"], r["event"], r["reason"], r["detail"]) for r in rows)


def hand_written(root: Path) -> str:
    """Five entries; ``s`` created, acked, reset back over two acks, acked again; ``gone`` and
    ``nope`` named by events although they never existed."""
    return write_raw(
        root,
        produced={
            "topic": [TOPIC] * 5,
            "partition": [-1] * 5,
            "ledger_id": [3] * 5,
            "entry_id": list(range(5)),
            "publish_time_ms": [10, 11, 12, 13, 14],
        },
        acked={
            "topic": [TOPIC] * 4,
            "partition": [-1] * 4,
            "subscription": ["s", "s", "s", "late"],
            "ledger_id": [3] * 4,
            "entry_id": [0, 1, 3, 0],
            "ts_ms": [20, 20, 21, 40],
        },
        subscriptions={
            "topic": [TOPIC] * 6,
            "subscription": ["s", "s", "gone", "nope", "late", "late"],
            "type": ["SHARED", None, "SHARED", None, "EXCLUSIVE", None],
            "initial_position": ["earliest", None, "earliest", None, "latest", None],
            "partition": [-1, -1, -1, -1, -1, -1],
            "event": ["created", "reset", "deleted", "reset", "created", "deleted"],
            "ts_ms": [5, 20, 30, 30, 12, 35],
            "ledger_id": [None, 3, None, 3, None, None],
            "entry_id": [None, 1, None, 0, None, None],
        },
    )


def test_created_reset_and_deleted_events_replay_with_pulsars_semantics(tmp_path: Path) -> None:
    raw = hand_written(tmp_path / "raw")
    run_single_process(raw, str(tmp_path / "out"))
    got = cursors(tmp_path / "out")
    # acks of 3:0 and 3:1 at 20, then the reset at 20 (after them): reads from 3:1 again, so
    # the mark-delete is 3:0 and the ack of 3:1 is forgotten; the ack of 3:3 at 21 is a hole
    s = got[(TOPIC, -1, "s")]
    assert (s["mark_delete_ledger_id"], s["mark_delete_entry_id"], s["backlog"]) == (3, 0, 3)
    assert s["individually_deleted_messages"] == "[(3:2..3:3]]"
    # "late" was created (latest, after 3:2) and deleted at 35: the ack at 40 creates a new
    # subscription of the default type from the start
    late = got[(TOPIC, -1, "late")]
    assert late["subscription_type"] == "SHARED" and late["backlog"] == 4
    assert anomalies(tmp_path / "out") == [
        ("gone", "subscriptions", "unknown_subscription", "deleted: subscription 'gone' does not exist"),
        ("nope", "subscriptions", "unknown_subscription", "reset: subscription 'nope' does not exist"),
    ]


def test_a_deleted_subscription_has_no_cursor_row(tmp_path: Path) -> None:
    raw = write_raw(
        tmp_path / "raw",
        produced={"topic": [TOPIC], "partition": [-1], "ledger_id": [1], "entry_id": [0], "publish_time_ms": [1]},
        acked={
            "topic": [TOPIC],
            "partition": [-1],
            "subscription": ["keep"],
            "ledger_id": [1],
            "entry_id": [0],
            "ts_ms": [2],
        },
        subscriptions={
            "topic": [TOPIC] * 2,
            "subscription": ["drop", "drop"],
            "partition": [-1, -1],
            "event": ["created", "deleted"],
            "ts_ms": [0, 3],
        },
    )
    run_single_process(raw, str(tmp_path / "out"))
    assert set(cursors(tmp_path / "out")) == {(TOPIC, -1, "keep")}


def test_prepare_and_segment_size_do_not_change_the_results(tmp_path: Path) -> None:
    raw = hand_written(tmp_path / "raw")
    run_single_process(raw, str(tmp_path / "bulk"))
    prepared = str(tmp_path / "prepared")
    prepare_in_process(plan_inputs(raw), prepared)
    run_single_process(prepared, str(tmp_path / "sequential"), ReplaySettings(segment_rows=1))
    assert cursors(tmp_path / "bulk") == cursors(tmp_path / "sequential")
    assert anomalies(tmp_path / "bulk") == anomalies(tmp_path / "sequential")


def test_bad_subscription_rows_are_anomalies(tmp_path: Path) -> None:
    raw = write_raw(
        tmp_path / "raw",
        produced={"topic": [TOPIC], "partition": [-1], "ledger_id": [1], "entry_id": [0], "publish_time_ms": [1]},
        acked={
            "topic": [TOPIC],
            "partition": [-1],
            "subscription": ["s"],
            "ledger_id": [1],
            "entry_id": [0],
            "ts_ms": [2],
        },
        subscriptions={
            "topic": [TOPIC] * 4,
            "subscription": ["s"] * 4,
            "partition": [-1, -1, -1, -7],
            "event": ["reset", "deleted", "renamed", "created"],
            "ts_ms": [5, None, 5, 5],
            "ledger_id": [None, None, None, None],
            "entry_id": [None, None, None, None],
        },
    )
    run_single_process(raw, str(tmp_path / "out"))
    details = [d for _, _, reason, d in anomalies(tmp_path / "out") if reason == "invalid_row"]
    assert sorted(d.rsplit(" (", 1)[0] for d in details) == [
        "a reset needs ledger_id and entry_id (the position it reads from next)",
        "partition -7 is out of range",
        "ts_ms is missing (a deleted event needs its time)",
        "unknown event 'renamed'; expected one of created, reset, deleted",
    ]
    assert cursors(tmp_path / "out")[(TOPIC, -1, "s")]["backlog"] == 0


def test_a_part_truncated_by_hand_is_a_clear_error(tmp_path: Path) -> None:
    raw = hand_written(tmp_path / "raw")
    part = tmp_path / "raw" / "acked" / "part-0.parquet"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputSchemaError, match="part-0.parquet"):
        run_single_process(raw, str(tmp_path / "out"))


def test_a_subscription_on_a_partition_without_entries_has_its_cursor_row(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=Recorder(record))
    broker.create_topic("persistent://public/default/p", partitions=2)
    broker.subscribe("persistent://public/default/p", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    broker.create_producer("persistent://public/default/p-partition-1").send(b"only here")
    live = {}
    for i in range(2):
        sub = broker.get_subscription(f"persistent://public/default/p-partition-{i}", "s")
        md = sub.cursor.mark_delete_position
        live[("persistent://public/default/p", i, "s")] = (md.ledger_id, md.entry_id, "[]", sub.backlog())
    broker.close()
    run_single_process(str(record), str(tmp_path / "out"))
    assert replayed_state(tmp_path / "out") == live


def test_subscribing_again_with_another_type_changes_it_in_the_replay_too(tmp_path: Path) -> None:
    record = tmp_path / "rec"
    broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=Recorder(record))
    sub = broker.subscribe(TOPIC, "s", SubscriptionType.EXCLUSIVE, InitialPosition.EARLIEST)
    assert isinstance(sub, Subscription)
    ids = [broker.create_producer(TOPIC).send(b"x") for _ in range(4)]
    sub.add_consumer("c").acknowledge_cumulative(ids[0])
    sub.consumers[0].close()
    broker.subscribe(TOPIC, "s", SubscriptionType.SHARED)
    consumer = sub.add_consumer("c")
    consumer.acknowledge(ids[2])  # a hole: Shared takes individual acks
    assert sub.cancel_delayed_message(ids[3].ledger_id, ids[3].entry_id)  # refused on Exclusive
    md = sub.cursor.mark_delete_position
    live = {(TOPIC, -1, "s"): (md.ledger_id, md.entry_id, str(sub.cursor.individually_deleted_messages()), 1)}
    broker.close()
    run_single_process(str(record), str(tmp_path / "out"))
    assert replayed_state(tmp_path / "out") == live
    assert cursors(tmp_path / "out")[(TOPIC, -1, "s")]["subscription_type"] == "SHARED"


# -- the library's broker, recorded and replayed ---------------------------------------------------
TYPES = list(SubscriptionType)


class Workload:
    """A seeded random workload on a broker with a recorder (manual clock)."""

    def __init__(self, broker: Broker, rng: random.Random) -> None:
        self.broker = broker
        self.rng = rng
        broker.create_topic("persistent://public/default/p", partitions=2)
        self.topics = ["persistent://public/default/a", "persistent://public/default/p-partition-0",
                       "persistent://public/default/p-partition-1"]  # fmt: skip
        self.producers = [broker.create_producer(t) for t in self.topics]
        self.subs: dict[tuple[int, str], tuple[Subscription, Consumer]] = {}
        self.sent: dict[int, list[Any]] = {i: [] for i in range(len(self.topics))}

    def step(self) -> None:
        rng, broker = self.rng, self.broker
        t = rng.randrange(len(self.topics))
        op = rng.random()
        if op < 0.3:
            producer = self.producers[t]
            deliver = broker.clock.now_ms() + rng.randrange(1, 50) if rng.random() < 0.2 else None
            if rng.random() < 0.4:
                ids = producer.send_batch([b"b"] * rng.randrange(2, 6), deliver_at_ms=deliver)
                self.sent[t].extend(ids)
            else:
                self.sent[t].append(producer.send(b"m", deliver_at_ms=deliver))
        elif op < 0.4 and len([k for k in self.subs if k[0] == t]) < 3:
            name = f"s{rng.randrange(4)}"
            if (t, name) not in self.subs:
                initial = rng.choice([InitialPosition.EARLIEST, InitialPosition.LATEST])
                sub = broker.subscribe(self.topics[t], name, rng.choice(TYPES), initial)
                assert isinstance(sub, Subscription)
                self.subs[(t, name)] = (sub, sub.add_consumer())
        elif op < 0.8 and self.subs:
            sub, consumer = self.subs[rng.choice(sorted(self.subs))]
            self.consume(sub, consumer)
        elif op < 0.87 and self.subs:
            key = rng.choice(sorted(self.subs))
            sub, _ = self.subs[key]
            sent = self.sent[key[0]]
            target = rng.choice([EARLIEST, LATEST, *(m.position for m in sent[-20:])])
            if rng.random() < 0.2:
                sub.reset_cursor_by_time(broker.clock.now_ms() - rng.randrange(0, 30))
            elif rng.random() < 0.1:
                sub.clear_backlog()
            else:
                sub.reset_cursor(target)
        elif op < 0.92 and self.subs:
            key = rng.choice(sorted(self.subs))
            sub, consumer = self.subs.pop(key)
            consumer.close()
            broker.unsubscribe(self.topics[key[0]], key[1])
        elif self.subs:
            sub, _ = self.subs[rng.choice(sorted(self.subs))]
            sent = self.sent[[k for k, v in self.subs.items() if v[0] is sub][0][0]]
            if sub.type.is_individual_ack_mode and sent:
                m = rng.choice(sent[-30:])
                if rng.random() < 0.5:
                    sub.cancel_delayed_message(m.ledger_id, m.entry_id)
                else:
                    index = [m.batch_index] if m.batch_index >= 0 else None
                    sub.skip_messages([SkipEntry(m.ledger_id, m.entry_id, index)])
        broker.clock.advance(rng.randrange(0, 3))

    def consume(self, sub: Subscription, consumer: Consumer) -> None:
        rng = self.rng
        messages = consumer.receive(rng.randrange(1, 8))
        for m in messages:
            r = rng.random()
            if r < 0.15:
                consumer.negative_acknowledge(m.message_id)
            elif r < 0.3:
                continue  # left unacked
            elif sub.type.is_cumulative_ack_mode and r < 0.6:
                consumer.acknowledge_cumulative(m.message_id)
            else:
                consumer.acknowledge(m.message_id)

    def live_state(self) -> dict[tuple[str, int, str], tuple[Any, ...]]:
        out = {}
        for (t, name), (sub, _) in self.subs.items():
            topic = self.broker.get_topic(self.topics[t])
            partition = topic.partition_index  # type: ignore[union-attr]
            base = "persistent://public/default/" + ("a" if partition < 0 else "p")
            stats = sub.stats()
            md = stats.mark_delete_position
            batches = sorted(sub.cursor.batch_deleted_states())
            out[(base, partition, name)] = (md.ledger_id, md.entry_id, stats.individually_deleted_messages,
                                            stats.msg_backlog, batches)  # fmt: skip
        return out


def replayed_state(out: Path) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    return {
        k: (r["mark_delete_ledger_id"], r["mark_delete_entry_id"], r["individually_deleted_messages"], r["backlog"])
        for k, r in cursors(out).items()
    }


class Captured:
    """A model factory keeping every :class:`BrokerModel` the replay builds."""

    def __init__(self) -> None:
        self.models: dict[tuple[str, int], BrokerModel] = {}

    def __call__(self, topic: str, partition: int, settings: ReplaySettings) -> BrokerModel:
        model = self.models[(topic, partition)] = BrokerModel(topic, partition, settings)
        return model

    def batch_states(self, key: tuple[str, int, str]) -> list[Any]:
        cursor = self.models[key[:2]].cursor(key[2])
        return [] if cursor is None else sorted(cursor.batch_deleted_states())


def test_a_recorded_library_broker_replays_to_its_own_cursors(tmp_path: Path) -> None:
    kinds: set[tuple[str, Any]] = set()
    for seed in (1, 2, 3):
        record = tmp_path / f"rec{seed}"
        broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=Recorder(record))
        work = Workload(broker, random.Random(seed))
        for _ in range(400):
            work.step()
        live = work.live_state()
        broker.close()
        captured = Captured()
        out = tmp_path / f"out{seed}"
        run_single_process(str(record), str(out), model_factory=captured)
        assert {k: v[:4] for k, v in live.items()} == replayed_state(out), f"seed {seed}"
        assert {k: v[4] for k, v in live.items()} == {k: captured.batch_states(k) for k in live}, f"seed {seed}"
        assert not [a for a in anomalies(out) if a[2] not in ("cancel_after_delivery", "delivered_before_cancel")]
        acked = pq.read_table(record / "acked").to_pylist()
        kinds |= {("ack", (r["ack_type"], r["batch_index"] is not None)) for r in acked}
        kinds |= {("subscription", r["event"]) for r in pq.read_table(record / "subscriptions").to_pylist()}
        kinds |= {("holes", v[2] != "[]") for v in live.values()} | {("batches", bool(v[4])) for v in live.values()}
    assert {
        ("ack", ("individual", False)),
        ("ack", ("individual", True)),
        ("ack", ("cumulative", False)),
        ("subscription", "created"),
        ("subscription", "reset"),
        ("subscription", "deleted"),
        ("holes", True),
        ("batches", True),
    } <= kinds


@pytest.mark.spark
def test_spark_prepare_and_replay_read_the_subscription_events(spark: Any, tmp_path: Path) -> None:
    from mledger.replay import open_prepared
    from mledger.replay.spark._job import run_replay
    from mledger.replay.spark._prepare import prepare_on_spark

    record = tmp_path / "rec"
    broker = Broker(ManagedLedgerFactory(MemoryStore()), clock=ManualClock(1_000), journal=Recorder(record))
    work = Workload(broker, random.Random(1))
    for _ in range(300):
        work.step()
    broker.create_topic("persistent://public/default/empty", partitions=2)  # subscription events only
    broker.subscribe("persistent://public/default/empty", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    broker.close()
    run_single_process(str(record), str(tmp_path / "local"))
    prepared = str(tmp_path / "prepared")
    prepare_on_spark(spark, plan_inputs(str(record)), prepared, partitions=2)
    local_prepared = str(tmp_path / "local-prepared")
    prepare_in_process(plan_inputs(str(record)), local_prepared)
    assert open_prepared(prepared).subscriptions() == open_prepared(local_prepared).subscriptions()
    run_replay(spark, prepared, str(tmp_path / "spark"))
    assert cursors(tmp_path / "spark") == cursors(tmp_path / "local")
    assert {("persistent://public/default/empty", i, "s") for i in range(2)} <= set(cursors(tmp_path / "spark"))
    assert anomalies(tmp_path / "spark") == anomalies(tmp_path / "local")
