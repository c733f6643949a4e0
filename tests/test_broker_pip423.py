"""PIP-423 on the broker: cancel a delayed message (seeds/000) and skip messages by id (seeds/001),
on single and partitioned topics, end to end and across a restart with SqliteStore."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mledger import (
    InvalidPositionError,
    InvalidRequestError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    NotAllowedError,
    SqliteStore,
)
from mledger.broker import (
    Broker,
    BrokerConfig,
    InitialPosition,
    ManualClock,
    Message,
    MessageId,
    PartitionedConsumer,
    PartitionedSubscription,
    SkipEntry,
    Subscription,
    SubscriptionType,
)

EXCLUSIVE, SHARED = SubscriptionType.EXCLUSIVE, SubscriptionType.SHARED
FAILOVER, KEY_SHARED = SubscriptionType.FAILOVER, SubscriptionType.KEY_SHARED
EARLIEST = InitialPosition.EARLIEST


def make(
    sub_type: SubscriptionType = SHARED, ml_config: ManagedLedgerConfig | None = None
) -> tuple[Broker, Subscription]:
    broker = Broker(ManagedLedgerFactory(), BrokerConfig(managed_ledger_config=ml_config), clock=ManualClock(0))
    sub = broker.subscribe("orders", "s", sub_type, EARLIEST)
    assert isinstance(sub, Subscription)
    return broker, sub


def data(messages: list[Message]) -> list[str]:
    return [m.data.decode() for m in messages]


# -- cancel_delayed_message ------------------------------------------------------------------------


@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED])
def test_cancelled_delayed_message_is_never_delivered(sub_type: SubscriptionType) -> None:
    broker, sub = make(sub_type)
    p = broker.create_producer("orders")
    keep = p.send(b"keep", deliver_at_ms=1_000, key="a")
    drop = p.send(b"drop", deliver_at_ms=1_000, key="b")
    c1, c2 = sub.add_consumer("c1"), sub.add_consumer("c2")
    assert c1.receive() == [] and c2.receive() == []  # both are in the delayed tracker now
    assert sub.cancel_delayed_message(drop.ledger_id, drop.entry_id) is True
    assert sub.stats().msg_delayed == 1
    broker.clock.advance(10_000)  # type: ignore[attr-defined]
    got = c1.receive() + c2.receive()
    assert data(got) == ["keep"] and got[0].message_id == keep
    assert sub.backlog() == 1


def test_cancel_before_the_message_is_read_and_after_it_is_queued() -> None:
    broker, sub = make()
    p = broker.create_producer("orders")
    early = p.send(b"early", deliver_at_ms=100)
    late = p.send(b"late", deliver_at_ms=100)
    assert sub.cancel_delayed_message(early.ledger_id, early.entry_id)  # not read yet
    c = sub.add_consumer("c")
    broker.clock.advance(100)  # type: ignore[attr-defined]
    sub.dispatch()
    assert c.queued_messages == 1  # "late" is due and pushed to the receive queue
    assert sub.cancel_delayed_message(late.ledger_id, late.entry_id)
    assert c.receive() == [] and c.unacked_messages == 0


def test_cancel_also_applies_to_messages_that_are_not_delayed() -> None:
    broker, sub = make()
    ids = [broker.create_producer("orders").send(b"x") for _ in range(2)]
    assert sub.cancel_delayed_message(ids[0].ledger_id, ids[0].entry_id)
    assert sub.cancel_delayed_message(ids[0].ledger_id, ids[0].entry_id)  # again: already acked
    assert len(sub.add_consumer().receive()) == 1


@pytest.mark.parametrize("sub_type", [EXCLUSIVE, FAILOVER])
def test_cancel_on_cumulative_ack_types_returns_false_and_changes_nothing(
    sub_type: SubscriptionType, caplog: pytest.LogCaptureFixture
) -> None:
    broker, sub = make(sub_type)
    mid = broker.create_producer("orders").send(b"x", deliver_at_ms=5)
    with caplog.at_level(logging.WARNING, logger="mledger.broker._subscription"):
        assert sub.cancel_delayed_message(mid.ledger_id, mid.entry_id) is False
    assert "which uses cumulative ack" in caplog.text
    assert sub.backlog() == 1
    assert data(sub.add_consumer().receive()) == ["x"]


@pytest.mark.parametrize(
    "ledger, entry, error, message",
    [
        (-1, 0, InvalidPositionError, "must be non-negative"),
        (3, -2, InvalidPositionError, "must be non-negative"),
        ("3", 0, InvalidRequestError, "ledgerId '3'"),
        (3, 1.0, InvalidRequestError, "entryId 1.0"),
        (999_999, 0, InvalidPositionError, "999999:0 does not exist"),
        (None, 99, InvalidPositionError, "does not exist"),
    ],
)
def test_cancel_errors(ledger: object, entry: object, error: type, message: str) -> None:
    broker, sub = make()
    mid = broker.create_producer("orders").send(b"x")
    if ledger is None:
        ledger = mid.ledger_id
    with pytest.raises(error, match=message) as info:
        sub.cancel_delayed_message(ledger, entry)  # type: ignore[arg-type]
    assert info.value.http_status == (412 if error is InvalidPositionError else 400)
    assert sub.backlog() == 1


# -- skip_messages ---------------------------------------------------------------------------------


def test_skip_whole_entries_and_batch_indexes() -> None:
    broker, sub = make()
    p = broker.create_producer("orders")
    plain = [p.send(f"m{i}".encode()) for i in range(3)]
    batch = p.send_batch([b"b0", b"b1", b"b2", b"b3"])
    sub.skip_messages([
        SkipEntry(plain[1].ledger_id, plain[1].entry_id),
        SkipEntry(batch.ledger_id, batch.entry_id, [1]),
        SkipEntry(batch.ledger_id, batch.entry_id, [3, 1]),  # merged with the one above
    ])
    assert sub.cursor.batch_ack_set(batch.position) == 0b0101
    assert data(sub.add_consumer().receive()) == ["m0", "m2", "b0", "b2"]
    sub.skip_messages([SkipEntry(batch.ledger_id, batch.entry_id, [0, 2])])
    assert sub.cursor.is_message_deleted(batch.position)  # all indexes acked: the entry is gone


def test_skip_whole_entry_wins_over_batch_indexes_and_repeats_are_harmless() -> None:
    broker, sub = make()
    batch = broker.create_producer("orders").send_batch([b"a", b"b"])
    sub.skip_messages([
        SkipEntry(batch.ledger_id, batch.entry_id, [0]),
        SkipEntry(batch.ledger_id, batch.entry_id),
        SkipEntry(batch.ledger_id, batch.entry_id, [1]),
    ])
    assert sub.cursor.is_message_deleted(batch.position)
    sub.skip_messages([SkipEntry(batch.ledger_id, batch.entry_id, [1]), SkipEntry(batch.ledger_id, batch.entry_id)])
    sub.skip_messages([])
    assert sub.backlog() == 0


def test_skip_batch_index_zero_of_a_plain_message_skips_it() -> None:
    broker, sub = make()
    mid = broker.create_producer("orders").send(b"x")
    with pytest.raises(InvalidRequestError, match=r"Invalid batch index 1 for message .* holds 1 message "):
        sub.skip_messages([SkipEntry(mid.ledger_id, mid.entry_id, [1])])
    sub.skip_messages([SkipEntry(mid.ledger_id, mid.entry_id, [0])])
    assert sub.backlog() == 0


def test_skip_validates_everything_before_acknowledging_anything() -> None:
    broker, sub = make()
    p = broker.create_producer("orders")
    plain = p.send(b"x")
    batch = p.send_batch([b"a", b"b", b"c"])
    for bad, message in (
        ([SkipEntry(plain.ledger_id, plain.entry_id), SkipEntry(batch.ledger_id, batch.entry_id, [3])],
         "Invalid batch index 3"),
        ([SkipEntry(plain.ledger_id, plain.entry_id), SkipEntry(batch.ledger_id, batch.entry_id, [-1])],
         "Invalid batch index -1"),
        ([SkipEntry(plain.ledger_id, plain.entry_id), SkipEntry(batch.ledger_id, 77)], "does not exist"),
        ([SkipEntry(plain.ledger_id, plain.entry_id), (1, 2)], "expected a SkipEntry"),
    ):
        with pytest.raises((InvalidRequestError, InvalidPositionError), match=message):
            sub.skip_messages(bad)  # type: ignore[arg-type]
        assert sub.backlog() == 2 and sub.cursor.batch_ack_set(batch.position) is None
    with pytest.raises(InvalidRequestError, match=r"use skip\(n\)") as info:
        sub.skip_messages(3)  # type: ignore[arg-type]
    assert info.value.http_status == 400
    with pytest.raises(InvalidPositionError, match="non-negative"):
        sub.skip_messages([SkipEntry(-1, 0)])


@pytest.mark.parametrize("sub_type", [EXCLUSIVE, FAILOVER])
def test_skip_on_cumulative_ack_types_is_405(sub_type: SubscriptionType) -> None:
    broker, sub = make(sub_type)
    mid = broker.create_producer("orders").send(b"x")
    with pytest.raises(NotAllowedError) as info:
        sub.skip_messages([SkipEntry(mid.ledger_id, mid.entry_id)])
    assert str(info.value) == "Unsupported subscription type." and info.value.http_status == 405
    assert sub.backlog() == 1


def test_skip_batch_indexes_a_consumer_holds() -> None:
    broker, sub = make()
    batch = broker.create_producer("orders").send_batch([b"a", b"b", b"c"])
    c = sub.add_consumer("c")
    got = c.receive(1)  # "a" handed out, "b" and "c" still queued
    sub.skip_messages([SkipEntry(batch.ledger_id, batch.entry_id, [1])])
    rest = c.receive()
    assert data(got + rest) == ["a", "c"] and c.unacked_messages == 2
    c.acknowledge(got + rest)
    assert sub.cursor.is_message_deleted(batch.position) and c.unacked_messages == 0


def test_skip_batch_indexes_is_ignored_without_batch_index_deletion(caplog: pytest.LogCaptureFixture) -> None:
    broker, sub = make(ml_config=ManagedLedgerConfig(deletion_at_batch_index_level_enabled=False))
    p = broker.create_producer("orders")
    batch = p.send_batch([b"a", b"b"])
    plain = p.send(b"x")
    with caplog.at_level(logging.WARNING, logger="mledger.broker._subscription"):
        sub.skip_messages([SkipEntry(batch.ledger_id, batch.entry_id, [0]), SkipEntry(plain.ledger_id, plain.entry_id)])
    assert "batch-index skips are ignored" in caplog.text
    assert data(sub.add_consumer().receive()) == ["a", "b"]


def test_acks_made_on_the_cursor_directly_are_honoured() -> None:
    """The dispatcher consults the cursor, not only its own memory."""
    broker, sub = make()
    p = broker.create_producer("orders")
    mid = p.send(b"d", deliver_at_ms=50)
    other = p.send(b"e", deliver_at_ms=50)
    c = sub.add_consumer("c")
    assert c.receive() == [] and sub.stats().msg_delayed == 2
    sub.cursor.delete(mid.position)  # behind the subscription's back: the tracker still holds it
    broker.clock.advance(50)  # type: ignore[attr-defined]
    assert [m.message_id for m in c.receive()] == [other]


# -- partitioned topics ---------------------------------------------------------------------------


@pytest.fixture
def partitioned() -> Iterator[tuple[Broker, PartitionedSubscription]]:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(0))
    broker.create_topic("pay", partitions=3)
    sub = broker.subscribe("pay", "s", SHARED, EARLIEST)
    assert isinstance(sub, PartitionedSubscription)
    yield broker, sub
    broker.close()


def test_partitioned_cancel_goes_to_the_partition_holding_the_ledger(partitioned) -> None:  # type: ignore[no-untyped-def]
    broker, sub = partitioned
    p = broker.create_producer("pay")
    ids = [p.send(f"d{i}".encode(), deliver_at_ms=10) for i in range(3)]
    assert {m.partition for m in ids} == {0, 1, 2}
    assert sub.cancel_delayed_message(ids[1].ledger_id, ids[1].entry_id)
    assert [s.backlog() for s in sub.partitions] == [1, 0, 1]
    with pytest.raises(InvalidPositionError, match="does not exist in topic persistent://public/default/pay"):
        sub.cancel_delayed_message(999_999, 0)
    with pytest.raises(InvalidPositionError, match="non-negative"):
        sub.cancel_delayed_message(-5, 0)
    c = sub.add_consumer("c")
    assert isinstance(c, PartitionedConsumer)
    broker.clock.advance(10)
    assert sorted(data(c.receive())) == ["d0", "d2"]


def test_partitioned_cancel_of_an_already_consumed_unknown_ledger_is_accepted(partitioned) -> None:  # type: ignore[no-untyped-def]
    broker, sub = partitioned
    mid = broker.create_producer("pay").send(b"x")
    sub.partitions[mid.partition].skip_messages([SkipEntry(mid.ledger_id, mid.entry_id)])
    assert sub.cancel_delayed_message(mid.ledger_id, mid.entry_id)  # the owner answers: already acked
    # A ledger no partition has (trimmed after being consumed) at or below a partition's
    # mark-delete position counts as consumed.
    assert sub.cancel_delayed_message(0, 0)


def test_partitioned_skip_routes_and_validates_across_partitions(partitioned) -> None:  # type: ignore[no-untyped-def]
    broker, sub = partitioned
    p = broker.create_producer("pay")
    ids = [p.send(f"m{i}".encode()) for i in range(3)]
    batch = p.send_batch([b"a", b"b"])
    good = [SkipEntry(ids[0].ledger_id, ids[0].entry_id), SkipEntry(batch.ledger_id, batch.entry_id, [0])]
    with pytest.raises(InvalidRequestError, match="Invalid batch index 5"):
        sub.skip_messages([*good, SkipEntry(batch.ledger_id, batch.entry_id, [5])])
    with pytest.raises(InvalidPositionError):
        sub.skip_messages([*good, SkipEntry(999_999, 1)])
    assert sub.backlog() == 4  # nothing acknowledged on any partition
    sub.skip_messages(good)
    assert sub.backlog() == 3
    assert sorted(data(sub.add_consumer().receive())) == ["b", "m1", "m2"]


def test_partitioned_cumulative_types(partitioned) -> None:  # type: ignore[no-untyped-def]
    broker, _ = partitioned
    sub = broker.subscribe("pay", "ex", FAILOVER, EARLIEST)
    mid = broker.create_producer("pay").send(b"x")
    assert sub.cancel_delayed_message(mid.ledger_id, mid.entry_id) is False
    with pytest.raises(NotAllowedError, match=r"^Unsupported subscription type\.$"):
        sub.skip_messages([SkipEntry(mid.ledger_id, mid.entry_id)])


def test_partitioned_consumer_routes_acks_by_partition(partitioned) -> None:  # type: ignore[no-untyped-def]
    broker, sub = partitioned
    p = broker.create_producer("pay")
    for i in range(6):
        p.send(f"m{i}".encode())
    c = sub.add_consumer("c", permits=10)
    got = c.receive(4)  # partitions in turn: 0 has m0, m3; 1 has m1, m4; 2 has m2, m5
    assert data(got) == ["m0", "m3", "m1", "m4"] and c.unacked_messages == 4
    c.acknowledge(got[:2])
    c.negative_acknowledge(got[2])
    with pytest.raises(InvalidRequestError, match="names partition -1"):
        c.acknowledge(MessageId(got[0].message_id.ledger_id, 0))
    with pytest.raises(NotAllowedError):
        c.acknowledge_cumulative(got[3])
    rest = c.receive(10)  # the next turn starts at partition 1
    assert data(rest) == ["m1", "m2", "m5"] and rest[0].redelivery_count == 1
    c.acknowledge(rest + got[3:])
    assert sub.backlog() == 0
    c.redeliver_unacknowledged_messages()
    c.flow(1)
    c.close()
    assert not c.is_connected and sub.consumers == []


# -- end to end ---------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """What was published, cancelled and skipped, and so what must be delivered."""

    sent: dict[str, MessageId] = field(default_factory=dict)
    deliver_at: dict[str, int] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def expected(self) -> set[str]:
        return set(self.sent) - self.removed


def publish_and_remove(broker: Broker, sub: PartitionedSubscription) -> Scenario:
    """Publish plain, delayed, batched and delayed-batched messages to 3 partitions; cancel some
    delayed ones and skip others by id (whole entries and batch indexes)."""
    s = Scenario()
    p = broker.create_producer("pay", "p")
    for i in range(12):
        s.sent[f"n{i}"] = p.send(f"n{i}".encode(), key=f"key{i % 5}")
    for i in range(9):
        name = f"d{i}"
        s.deliver_at[name] = 1_000 * (i + 1)
        s.sent[name] = p.send(name.encode(), deliver_at_ms=s.deliver_at[name])
    for j in range(3):
        ids = p.send_batch([f"b{j}.{k}".encode() for k in range(4)])
        for k, mid in enumerate(ids):
            s.sent[f"b{j}.{k}"] = mid
    ids = p.send_batch([f"db.{k}".encode() for k in range(3)], deliver_at_ms=5_500)
    for k, mid in enumerate(ids):
        s.sent[f"db.{k}"] = mid
        s.deliver_at[f"db.{k}"] = 5_500
    assert {m.partition for m in s.sent.values()} == {0, 1, 2}

    for name in ("d0", "d4", "d8"):  # cancel delayed messages
        mid = s.sent[name]
        assert sub.cancel_delayed_message(mid.ledger_id, mid.entry_id) is True
        s.removed.add(name)
    skip = [
        SkipEntry(s.sent["n3"].ledger_id, s.sent["n3"].entry_id),
        SkipEntry(s.sent["d2"].ledger_id, s.sent["d2"].entry_id),  # a delayed one, skipped by id
        SkipEntry(s.sent["b0.1"].ledger_id, s.sent["b0.1"].entry_id, [1, 3]),
        SkipEntry(s.sent["b1.0"].ledger_id, s.sent["b1.0"].entry_id),  # a whole batch
        SkipEntry(s.sent["db.0"].ledger_id, s.sent["db.0"].entry_id, [2]),
    ]
    sub.skip_messages(skip)
    s.removed |= {"n3", "d2", "b0.1", "b0.3", "b1.0", "b1.1", "b1.2", "b1.3", "db.2"}
    return s


def consume(consumers: list[PartitionedConsumer], clock: ManualClock, until_ms: int) -> dict[str, Message]:
    """Receive and ack everything, stepping the clock, checking nothing comes before its time."""
    got: dict[str, Message] = {}
    while True:
        for c in consumers:
            while msgs := c.receive(7):
                for m in msgs:
                    name = m.data.decode()
                    assert name not in got, f"{name} delivered twice"
                    assert m.deliver_at_ms is None or m.deliver_at_ms <= clock.now_ms(), f"{name} early"
                    got[name] = m
                c.acknowledge(msgs)
        if clock.now_ms() >= until_ms:
            return got
        clock.advance(250)


def test_end_to_end_partitioned_cancel_skip_and_consume() -> None:
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(clock=clock), clock=clock)
    broker.create_topic("pay", partitions=3)
    sub = broker.subscribe("pay", "s", SHARED, EARLIEST)
    assert isinstance(sub, PartitionedSubscription)
    s = publish_and_remove(broker, sub)
    consumers = [sub.add_consumer("c1", permits=5), sub.add_consumer("c2", permits=3)]
    got = consume(consumers, clock, until_ms=12_000)
    assert set(got) == s.expected()
    for name, m in got.items():
        assert m.message_id == s.sent[name]
        assert m.deliver_at_ms == s.deliver_at.get(name)
    assert sub.backlog() == 0


@pytest.mark.parametrize("restart", ["after-cancel", "after-consuming-the-ready-ones"])
def test_end_to_end_across_a_restart_with_sqlite(tmp_path: Path, restart: str) -> None:
    clock = ManualClock(0)
    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=4))
    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"), clock=clock)
    broker = Broker(factory, config, clock=clock)
    broker.create_topic("pay", partitions=3)
    sub = broker.subscribe("pay", "s", KEY_SHARED, EARLIEST)
    assert isinstance(sub, PartitionedSubscription)
    early: dict[str, Message] = {}
    if restart == "after-consuming-the-ready-ones":
        # Consume the messages that are ready now first: the delayed ones sit in the
        # dispatchers' trackers (memory only) when they are cancelled and the broker stops.
        pre = Scenario()
        p = broker.create_producer("pay", "p0")
        for i in range(6):
            pre.sent[f"r{i}"] = p.send(f"r{i}".encode())
        late = {i: p.send(f"late{i}".encode(), deliver_at_ms=3_000 + i) for i in range(4)}
        c = sub.add_consumer("early")
        early = consume([c], clock, until_ms=0)
        assert set(early) == set(pre.sent) and sum(s.stats().msg_delayed for s in sub.partitions) == 4
        for i in (1, 2):
            assert sub.cancel_delayed_message(late[i].ledger_id, late[i].entry_id)
        c.close()
    s = publish_and_remove(broker, sub)
    if restart == "after-consuming-the-ready-ones":
        for i, mid in late.items():
            s.sent[f"late{i}"] = mid
            s.deliver_at[f"late{i}"] = 3_000 + i
        s.removed |= {"late1", "late2"}
    broker.close()
    factory.close()

    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"), clock=clock)
    broker = Broker(factory, config, clock=clock)
    sub = broker.get_subscription("pay", "s")
    assert isinstance(sub, PartitionedSubscription) and sub.type is KEY_SHARED
    consumers = [sub.add_consumer("c1"), sub.add_consumer("c2", permits=4)]
    got = consume(consumers, clock, until_ms=12_000)
    assert set(got) == s.expected()
    assert not set(got) & set(early)
    for name, m in got.items():
        assert m.message_id == s.sent[name]
    assert sub.backlog() == 0
    broker.close()
    factory.close()


def test_cancellation_survives_a_restart_without_consumers(tmp_path: Path) -> None:
    clock = ManualClock(0)
    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "d"), clock=clock)
    broker = Broker(factory, clock=clock)
    sub = broker.subscribe("orders", "s", SHARED, EARLIEST)
    p = broker.create_producer("orders")
    ids = [p.send(f"d{i}".encode(), deliver_at_ms=100) for i in range(3)]
    assert sub.cancel_delayed_message(ids[1].ledger_id, ids[1].entry_id)
    broker.close()
    factory.close()
    clock.advance(1_000)
    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "d"), clock=clock)
    broker = Broker(factory, clock=clock)
    sub = broker.get_subscription("orders", "s")
    assert str(sub.cursor.individually_deleted_messages()) == f"[({ids[0].position}..{ids[1].position}]]"  # type: ignore[union-attr]
    assert data(sub.add_consumer().receive()) == ["d0", "d2"]
    broker.close()
    factory.close()
