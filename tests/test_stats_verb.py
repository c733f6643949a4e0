"""One stats verb: every broker object with figures answers ``stats()`` with a frozen snapshot,
nested rather than flattened, and keeps its live counters private."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mledger import ManagedLedgerFactory, MemoryStore
from mledger.broker import (
    Broker,
    BrokerConfig,
    CompactionRecord,
    CompactionStats,
    CompactionStatus,
    ConsumerStats,
    InitialPosition,
    ManualClock,
    OutStats,
    Producer,
    ProducerStats,
    Subscription,
    SubscriptionType,
    Topic,
)
from mledger.codec import EntryMetadata, encode_entry


def _broker() -> tuple[Broker, Topic, Subscription, Producer]:
    clock = ManualClock(0)
    broker = Broker(
        ManagedLedgerFactory(MemoryStore(), clock=clock), BrokerConfig(deduplication_enabled=True), clock=clock
    )
    sub = broker.subscribe("orders", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    assert isinstance(sub, Subscription)
    producer = broker.create_producer("orders", "p")
    topic = broker.get_topic("orders")
    assert isinstance(topic, Topic)
    return broker, topic, sub, producer


def _is_frozen_snapshot(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]


OBJECTS = {
    "topic": lambda b, t, s, p: t,
    "subscription": lambda b, t, s, p: s,
    "dispatcher": lambda b, t, s, p: s._dispatcher,
    "deduplication": lambda b, t, s, p: t.deduplication,
    "compaction": lambda b, t, s, p: t.compaction,
}


@pytest.mark.parametrize("what", sorted(OBJECTS))
def test_every_object_with_figures_answers_stats_with_a_frozen_snapshot_and_no_other_verb(what: str) -> None:
    broker, topic, sub, producer = _broker()
    producer.send(b"x")
    obj = OBJECTS[what](broker, topic, sub, producer)
    with sub._lock:
        snapshot = obj.stats()
    assert _is_frozen_snapshot(snapshot), type(snapshot)
    for other in ("figures", "snapshot_stats", "record", "statistics"):
        assert not hasattr(obj, other), f"{what}.{other}"


def test_producer_stats_is_a_frozen_snapshot_and_its_counters_are_private() -> None:
    broker, topic, _, producer = _broker()
    producer.send(b"abc")
    producer.send_batch([b"a", b"b", b"c"])
    snapshot = producer.stats(broker.clock.now_ms(), 60_000)
    assert isinstance(snapshot, ProducerStats) and _is_frozen_snapshot(snapshot)
    assert (snapshot.name, snapshot.msg_in_counter) == ("p", 4)
    assert snapshot.bytes_in_counter > 0
    assert topic.stats().publishers == (snapshot,)
    for live in ("msg_in_counter", "bytes_in_counter", "in_rates"):
        assert not hasattr(producer, live), live
    producer.send(b"more")
    assert snapshot.msg_in_counter == 4  # a snapshot, not a view
    assert producer.stats(broker.clock.now_ms(), 60_000).msg_in_counter == 5


def test_compaction_stats_nest_the_status_and_the_record() -> None:
    _, topic, _, producer = _broker()
    before = topic.compaction.stats()
    assert before == CompactionStats(topic.compaction.status(), CompactionRecord(), None, False)
    assert before.status.status is CompactionStatus.NOT_RUN
    producer.send(b"v1", key="k")
    producer.send(b"v2", key="k")
    topic.compaction.trigger().result(timeout=30)
    after = topic.compaction.stats()
    assert after.status.status is CompactionStatus.SUCCESS
    assert after.record.last_removed_event_count == 1
    assert after.horizon == topic.compaction.horizon is not None
    assert before.status.status is CompactionStatus.NOT_RUN  # frozen: the old snapshot is unchanged


CONSUMER_LIVE = (
    "msg_out_counter",
    "bytes_out_counter",
    "entries_out_counter",
    "last_consumed_ms",
    "last_acked_ms",
    "last_flow_ms",
    "out_rates",
)


def test_consumer_stats_is_a_frozen_snapshot_nesting_what_it_was_sent_and_its_counters_are_private() -> None:
    broker, _, sub, producer = _broker()
    consumer = sub.add_consumer("c", permits=10)
    producer.send(b"abc")
    producer.send_batch([b"a", b"b", b"c"])
    consumer.flow(0)
    got = consumer.receive(10)
    consumer.acknowledge(got[0])
    now = broker.clock.now_ms()
    with sub._lock:
        snapshot = consumer.stats(now, 60_000)
    assert isinstance(snapshot, ConsumerStats) and _is_frozen_snapshot(snapshot)
    assert isinstance(snapshot.out, OutStats) and _is_frozen_snapshot(snapshot.out)
    assert (snapshot.out.msg_counter, snapshot.out.entries_counter) == (4, 2)
    assert snapshot.out.bytes_counter > 0 and (snapshot.out.msg_rate, snapshot.out.msg_throughput) == (0.0, 0.0)
    assert snapshot.unacked_messages == 3 and snapshot.last_consumed_ms == snapshot.last_acked_ms == now
    assert sub.stats().consumers == (snapshot,)
    for live in (*CONSUMER_LIVE, "figures", "snapshot_stats", "statistics"):
        assert not hasattr(consumer, live), live
    producer.send(b"more")
    consumer.receive(10)
    assert snapshot.out.msg_counter == 4  # a snapshot, not a view
    assert consumer.stats(now, 60_000).out.msg_counter == 5


def test_subscription_answers_only_stats_and_keeps_a_gone_consumers_counts() -> None:
    _, topic, sub, producer = _broker()
    consumer = sub.add_consumer("c", permits=10)
    producer.send(b"abc")
    consumer.receive(10)
    assert not hasattr(sub, "out_counters")
    consumer.close()
    stats = sub.stats()
    assert _is_frozen_snapshot(stats) and stats.consumers == ()
    assert (stats.msg_out_counter, stats.bytes_out_counter) == (1, consumer.stats(0, 60_000).out.bytes_counter)
    topic.delete_subscription("s")
    assert topic.stats().msg_out_counter == 1  # the topic keeps a deleted subscription's counts


def test_non_persistent_objects_answer_stats_and_their_counters_are_private() -> None:
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), clock=clock)
    topic = broker.open_non_persistent_topic("non-persistent://public/default/np")
    consumer = topic.subscribe("s", SubscriptionType.EXCLUSIVE, permits=1)
    producer = topic.add_producer("p")
    raw = encode_entry(b"x", EntryMetadata(producer_name="p"))
    assert topic.publish(producer, raw) == 1
    assert topic.publish(producer, raw) == 0  # no permit left: dropped
    sub = topic.subscriptions["s"]
    stats = topic.stats(60_000)
    assert _is_frozen_snapshot(stats)
    assert (stats.msg_in_counter, stats.msg_drop_counter) == (2, 1)
    assert stats.producers == (producer.stats(0, 60_000),) and stats.producers[0].msg_in_counter == 2
    assert stats.subscriptions["s"] == sub.stats(0, 60_000)
    assert stats.subscriptions["s"].consumers == (consumer.stats(0, 60_000),)
    assert stats.subscriptions["s"].consumers[0].out.msg_counter == 1
    for obj, live in (
        (topic, ("msg_in_counter", "bytes_in_counter", "msg_drop_counter", "in_rates")),
        (sub, ("msg_out_counter", "bytes_out_counter", "msg_drop_counter", "out_rates", "drop_rates")),
        (producer, ("msg_in_counter", "bytes_in_counter", "msg_drop_counter", "in_rates")),
        (consumer, CONSUMER_LIVE),
    ):
        for name in live:
            assert not hasattr(obj, name), f"{type(obj).__name__}.{name}"
