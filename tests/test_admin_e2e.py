"""End to end through the admin API (issue 5): a partitioned topic with delayed, plain and batched
messages; some cancelled, some skipped by id in both body formats (base64 from the real
pulsar-client); the clock advanced; exactly the right messages delivered, also after a restart
over a SqliteStore."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pulsar  # pulsar-client, the [test] extra, writes the base64 ids

from mledger import ManagedLedgerFactory, SqliteStore
from mledger.admin import Admin, SkipMessageIdsRequest
from mledger.broker import Broker, InitialPosition, ManualClock, MessageId, SubscriptionType

P = "persistent://public/default/orders"
MINUTE = 60_000


def real_base64(mid: MessageId) -> str:
    real = pulsar.MessageId(mid.partition, mid.ledger_id, mid.entry_id, mid.batch_index)
    return base64.b64encode(real.serialize()).decode()


def drain(broker: Broker, sub: str, sub_type: SubscriptionType) -> list[bytes]:
    consumer = broker.subscribe(P, sub, sub_type).add_consumer()
    out: list[bytes] = []
    while got := consumer.receive(100):
        consumer.acknowledge(got)
        out.extend(m.data for m in got)
    consumer.close()
    return sorted(out)


class Scenario:
    """The messages, and what each subscription must receive once everything is due."""

    def __init__(self, admin: Admin, broker: Broker) -> None:
        for sub, kind in (("shared", SubscriptionType.SHARED), ("keyed", SubscriptionType.KEY_SHARED),
                          ("excl", SubscriptionType.EXCLUSIVE)):
            broker.subscribe(P, sub, kind, InitialPosition.EARLIEST)
        producer = broker.create_producer(P)
        now = broker.clock.now_ms()
        self.delayed = [producer.send(f"d{i}".encode(), key=f"k{i}", deliver_at_ms=now + MINUTE) for i in range(6)]
        self.plain = [producer.send(f"p{i}".encode(), key=f"k{i}") for i in range(6)]
        self.batch = producer.send_batch([b"b0", b"b1", b"b2", b"b3"], key="kb")
        self.delayed_batch = producer.send_batch([b"db0", b"db1", b"db2"], key="kd", deliver_at_ms=now + MINUTE)
        assert {m.partition for m in self.delayed} == {0, 1, 2}
        producer.close()

        # cancel d0 on every subscription, d1 on shared only, d2 on keyed only
        r = admin.topics.cancel_delayed_message(P, self.delayed[0].ledger_id, self.delayed[0].entry_id)
        assert r.results == {"excl": False, "keyed": True, "shared": True}
        admin.topics.cancel_delayed_message(P, self.delayed[1].ledger_id, self.delayed[1].entry_id, ["shared"])
        admin.topics.cancel_delayed_message(P, self.delayed[2].ledger_id, self.delayed[2].entry_id, "keyed")
        # skip by id, structured body: p0, b1 and db2 (batch indexes) on shared
        structured = {
            "type": "messageId",
            "messageIds": [
                {"ledgerId": self.plain[0].ledger_id, "entryId": self.plain[0].entry_id},
                {"ledgerId": str(self.batch.ledger_id), "entryId": str(self.batch.entry_id), "batchIndex": 1},
                {"ledgerId": self.delayed_batch.ledger_id, "entryId": self.delayed_batch.entry_id, "batchIndex": "2"},
            ],
        }
        admin.topics.skip_messages(P, "shared", json.dumps(structured))
        # skip by id, base64 body from the real client: p1, b3, d3 (a delayed one: cancelled too)
        admin.topics.skip_messages(
            P, "shared", json.dumps([real_base64(m) for m in (self.plain[1], self.batch[3], self.delayed[3])])
        )
        # keyed: the whole batch entry plus, redundantly, one of its indexes; the Java form of p2
        java_p2 = base64.b64encode(MessageId(self.plain[2].ledger_id, self.plain[2].entry_id).to_bytes() + b"\x30\x00")
        admin.topics.skip_messages(
            P, "keyed",
            SkipMessageIdsRequest.of([(self.batch.ledger_id, self.batch.entry_id), self.batch[2]]).merged(
                SkipMessageIdsRequest.from_base64([java_p2.decode()])
            ),
        )
        self.expected = {
            "shared": sorted([b"d2", b"d4", b"d5", b"p2", b"p3", b"p4", b"p5", b"b0", b"b2", b"db0", b"db1"]),
            "keyed": sorted([b"d1", b"d3", b"d4", b"d5", b"p0", b"p1", b"p3", b"p4", b"p5",
                             b"db0", b"db1", b"db2"]),
            "excl": sorted([*(f"d{i}".encode() for i in range(6)), *(f"p{i}".encode() for i in range(6)),
                            b"b0", b"b1", b"b2", b"b3", b"db0", b"db1", b"db2"]),
        }
        self.before_due = {
            "shared": sorted([b"p2", b"p3", b"p4", b"p5", b"b0", b"b2"]),
            "keyed": sorted([b"p0", b"p1", b"p3", b"p4", b"p5"]),
        }


def test_cancel_and_skip_then_consume_everything() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000_000))
    broker.create_topic(P, partitions=3)
    admin = Admin(broker)
    s = Scenario(admin, broker)
    broker.clock.advance(MINUTE)  # type: ignore[attr-defined]
    broker.run_due_tasks()
    for sub, kind in (("shared", SubscriptionType.SHARED), ("keyed", SubscriptionType.KEY_SHARED),
                      ("excl", SubscriptionType.EXCLUSIVE)):
        assert drain(broker, sub, kind) == s.expected[sub], sub
    broker.close()


def test_same_across_a_restart_over_sqlite(tmp_path: Path) -> None:
    def open_broker(now: int) -> tuple[ManagedLedgerFactory, Broker]:
        factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"))
        return factory, Broker(factory, clock=ManualClock(now))

    factory, broker = open_broker(1_000_000)
    broker.create_topic(P, partitions=3)
    s = Scenario(Admin(broker), broker)
    # what is deliverable before the delay expires, then a restart before it does
    assert drain(broker, "shared", SubscriptionType.SHARED) == s.before_due["shared"]
    assert drain(broker, "keyed", SubscriptionType.KEY_SHARED) == s.before_due["keyed"]
    broker.close()
    factory.close()

    factory, broker = open_broker(1_000_000 + MINUTE)
    admin = Admin(broker)
    stats = admin.topics.partitioned_internal_stats(P)
    assert stats.metadata.partitions == 3
    assert set(stats.partitions[f"{P}-partition-0"].cursors) == {"shared", "keyed", "excl"}
    broker.run_due_tasks()
    due_shared = sorted(set(s.expected["shared"]) - set(s.before_due["shared"]))
    due_keyed = sorted(set(s.expected["keyed"]) - set(s.before_due["keyed"]))
    assert drain(broker, "shared", SubscriptionType.SHARED) == due_shared
    assert drain(broker, "keyed", SubscriptionType.KEY_SHARED) == due_keyed
    assert drain(broker, "excl", SubscriptionType.EXCLUSIVE) == s.expected["excl"]
    for name in ("shared", "keyed", "excl"):
        assert broker.get_subscription(P, name).backlog() == 0
    broker.close()
    factory.close()
