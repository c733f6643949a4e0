"""The replay against the broker driven by hand: the same logs, once through the replay engine
(bulk, vectorised) and once message by message through ``mledger.broker``'s public API
(``Topic.publish`` with sequence ids, real consumers receiving at event time,
``Consumer.acknowledge`` / ``acknowledge_cumulative``, ``Subscription.cancel_delayed_message``
/ ``skip_messages``). Every subscription's mark-delete position, ack holes, backlog and
delayed deliveries, and the deduplicated rows, must agree."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mledger import EntryMetadata, ManagedLedgerFactory, MemoryStore, NotAllowedError, Position
from mledger.broker import (
    Broker,
    BrokerConfig,
    InitialPosition,
    ManualClock,
    MessageId,
    SkipEntry,
    Subscription,
    SubscriptionType,
    Topic,
)
from mledger.codec import SingleMessage, encode_batch
from mledger.replay._events import replay_rows

T = "persistent://public/default/reference"
SUBS = {"shared": "SHARED", "keyed": "KEY_SHARED", "excl": "EXCLUSIVE", "fail": "FAILOVER"}
KIND = {"produced": 0, "cancelled": 1, "acked": 2}


def generate(seed: int, n: int = 400) -> list[dict[str, Any]]:
    """A valid log: contiguous positions over a few ledgers, batches, delayed messages, two
    producers with retried sequence ids, acks of every kind, cancels; ties in time allowed."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = [
        {"log": "subscriptions", "topic": T, "subscription": s, "type": t, "initial_position": "earliest"}
        for s, t in SUBS.items()
    ]
    ledger, entry, ts = 3, 0, 0
    produced: list[tuple[int, int, int]] = []  # (ledger, entry, batch size)
    next_seq = {"a": 0, "b": 0}
    for _ in range(n):
        ts += rng.choice((0, 1, 1, 2, 5))
        roll = rng.random()
        if roll < 0.45 or not produced:
            if produced and rng.random() < 0.05:
                ledger, entry = ledger + rng.randint(1, 3), 0
            producer = rng.choice(("a", "b", None))
            seq = None
            if producer is not None:
                retry = next_seq[producer] > 0 and rng.random() < 0.15
                seq = rng.randint(0, next_seq[producer] - 1) if retry else next_seq[producer]
                next_seq[producer] = max(next_seq[producer], seq + 1)
            size = rng.choice((1, 1, 1, 3, 5))
            delayed = rng.random() < 0.3
            rows.append({"log": "produced", "topic": T, "partition": 0, "ledger_id": ledger, "entry_id": entry,
                         "batch_size": size, "publish_time_ms": ts,
                         "deliver_at_ms": ts + rng.randint(1, 40) if delayed else None,
                         "producer_name": producer, "sequence_id": seq})
            if seq is None or not retry:
                produced.append((ledger, entry, size))
                entry += 1
            continue
        lid, eid, size = rng.choice(produced)
        if roll < 0.85:
            sub = rng.choice(list(SUBS))
            cumulative = SUBS[sub] in ("EXCLUSIVE", "FAILOVER") and rng.random() < 0.4
            index = rng.randrange(size) if size > 1 and rng.random() < 0.6 else None
            rows.append({"log": "acked", "topic": T, "partition": 0, "subscription": sub, "ledger_id": lid,
                         "entry_id": eid, "batch_index": index,
                         "ack_type": "cumulative" if cumulative else "individual", "ts_ms": ts})
        else:
            sub = rng.choice((None, "shared", "keyed", "excl"))
            index = rng.randrange(size) if size > 1 and rng.random() < 0.3 else None
            rows.append({"log": "cancelled", "topic": T, "partition": 0, "subscription": sub, "ledger_id": lid,
                         "entry_id": eid, "batch_index": index, "ts_ms": ts})
    return rows


class Reference:
    """The log replayed message by message through the broker's public API."""

    def __init__(self) -> None:
        self.clock = ManualClock(0)
        broker = Broker(ManagedLedgerFactory(MemoryStore(), clock=self.clock),
                        BrokerConfig(deduplication_enabled=True), clock=self.clock)
        self.subs: dict[str, Subscription] = {
            s: broker.subscribe(T, s, SubscriptionType.parse(t), InitialPosition.EARLIEST) for s, t in SUBS.items()
        }
        topic = broker.get_topic(T)
        assert isinstance(topic, Topic)
        self.topic = topic
        self.consumers = {s: sub.add_consumer(permits=1 << 30) for s, sub in self.subs.items()}
        self.log_ledger: int | None = None
        self.to_log: dict[int, int] = {}  # broker ledger id -> log ledger id
        self.to_broker: dict[int, int] = {}
        self.delayed: set[Position] = set()
        self.delivered: dict[str, set[Position]] = {s: set() for s in SUBS}
        self.duplicates = 0

    def receive(self) -> None:
        for name, consumer in self.consumers.items():
            while messages := consumer.receive(10_000):
                for m in messages:
                    p = m.message_id.position
                    if p in self.delayed and SUBS[name] in ("SHARED", "KEY_SHARED"):
                        self.delivered[name].add(p)

    def apply(self, row: dict[str, Any]) -> None:
        log = row["log"]
        lid, eid = row["ledger_id"], row["entry_id"]
        if log == "produced":
            self.produce(row)
            return
        mid = MessageId(self.to_broker[lid], eid, -1, -1 if row["batch_index"] is None else row["batch_index"])
        if log == "acked":
            consumer = self.consumers[row["subscription"]]
            if row["ack_type"] == "cumulative":
                consumer.acknowledge_cumulative(mid)
            else:
                consumer.acknowledge(mid)
            return
        targets = list(SUBS) if row["subscription"] is None else [row["subscription"]]
        for name in targets:
            sub = self.subs[name]
            if mid.batch_index < 0:
                sub.cancel_delayed_message(mid.ledger_id, mid.entry_id)
            else:
                try:
                    sub.skip_messages([SkipEntry(mid.ledger_id, mid.entry_id, (mid.batch_index,))])
                except NotAllowedError:
                    pass  # Exclusive / Failover refuse PIP-423 cancels

    def produce(self, row: dict[str, Any]) -> None:
        ml = self.topic.managed_ledger
        if self.log_ledger is not None and row["ledger_id"] != self.log_ledger:
            ml.roll_over()
        size = row["batch_size"]
        name = row["producer_name"] or ""
        seq = row["sequence_id"] if row["sequence_id"] is not None else 0
        body = encode_batch([SingleMessage(b"m") for _ in range(size)]) if size > 1 else b"m"
        meta = EntryMetadata(producer_name=name, sequence_id=seq, publish_time_ms=self.clock.now_ms(),
                             num_messages=size, deliver_at_ms=row["deliver_at_ms"])
        position = self.topic.publish(name, body, meta, seq, seq, size)
        if position is None:
            self.duplicates += 1
            return
        self.log_ledger = row["ledger_id"]
        self.to_log[position.ledger_id] = row["ledger_id"]
        self.to_broker[row["ledger_id"]] = position.ledger_id
        assert position.entry_id == row["entry_id"]
        if row["deliver_at_ms"] is not None:
            self.delayed.add(position)

    def run(self, rows: list[dict[str, Any]]) -> None:
        logs: dict[str, list[dict[str, Any]]] = {"produced": [], "acked": [], "cancelled": []}
        for row in rows:
            if row["log"] in logs:
                logs[row["log"]].append(row)
        ordered = sorted(((r["publish_time_ms"] if log == "produced" else r["ts_ms"], KIND[log], i, r)
                          for log, items in logs.items() for i, r in enumerate(items)), key=lambda x: x[:3])
        last_ts = None
        for ts, _, _, row in ordered:
            if ts != last_ts:
                # Deliveries due before ts happen before its events; those due at ts after them.
                if ts > self.clock.now_ms() + 1:
                    self.clock.set(ts - 1)
                self.receive()
                self.clock.set(ts)
                last_ts = ts
            self.apply(row)
        self.receive()

    def cursor_row(self, name: str) -> dict[str, Any]:
        cursor = self.subs[name].cursor
        md = cursor.mark_delete_position
        return {
            "mark_delete": (self.to_log.get(md.ledger_id, md.ledger_id), md.entry_id),
            "ack_hole_ranges": cursor.stats().individually_deleted_ranges,
            "backlog": cursor.stats().backlog,
            "delayed_delivered": len(self.delivered[name]),
        }


@pytest.mark.parametrize("seed", range(8))
def test_replay_equals_the_broker_driven_message_by_message(seed: int) -> None:
    rows = generate(seed)
    reference = Reference()
    reference.run(rows)
    for feed_rows in (7, 10_000):  # small and large batches: bulk steps of any size
        out = replay_rows(rows, feed_rows=feed_rows)
        anomalies = out["anomalies"].to_pylist()
        assert [a["reason"] for a in anomalies if a["reason"] not in
                ("dedup_duplicate", "cancel_refused", "delivered_before_cancel", "cancel_after_delivery")] == []
        assert sum(a["reason"] == "dedup_duplicate" for a in anomalies) == reference.duplicates
        for row in out["cursors"].to_pylist():
            got = {
                "mark_delete": (row["mark_delete_ledger_id"], row["mark_delete_entry_id"]),
                "ack_hole_ranges": row["ack_hole_ranges"],
                "backlog": row["backlog"],
                "delayed_delivered": row["delayed_delivered"],
            }
            assert got == reference.cursor_row(row["subscription"]), (seed, feed_rows, row["subscription"])
