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
    InitialPosition,
    ManualClock,
    Producer,
    ProducerStats,
    Subscription,
    SubscriptionType,
    Topic,
)


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
