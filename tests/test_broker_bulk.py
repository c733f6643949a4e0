"""The broker's bulk paths (used by the Spark replay, open to library users) against their
one-at-a-time counterparts: ``MessageDeduplication.check_and_record_many`` vs ``send`` with
sequence ids, ``Consumer.acknowledge_entries`` vs ``Consumer.acknowledge``,
``DelayedDeliveryTracker.peek_due`` vs ``pop_due``, ``Broker.open_partition``, and the batch
sizes a request carries (``AckRequest.batch_sizes``, the replay's) against reading them."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import given, strategies as st

from mledger import (
    Entry,
    InvalidPositionError,
    InvalidRequestError,
    ManagedLedgerFactory,
    MemoryStore,
    Position,
)
from mledger.broker import (
    AckRequest,
    Broker,
    BrokerConfig,
    Consumer,
    DelayedDeliveryTracker,
    InitialPosition,
    ManualClock,
    MessageDeduplication,
    MessageId,
    Producer,
    SkipEntry,
    Subscription,
    SubscriptionType,
    Topic,
)
from mledger.replay._store import ReplayStore

T = "persistent://public/default/bulk"


def make_broker(store: object | None = None, **settings: object) -> Broker:
    clock = ManualClock(0)
    factory = ManagedLedgerFactory(store if store is not None else MemoryStore(), clock=clock)  # type: ignore[arg-type]
    return Broker(factory, BrokerConfig(deduplication_enabled=True, **settings), clock=clock)  # type: ignore[arg-type]


def topic_of(broker: Broker, name: str = T) -> Topic:
    topic = broker.get_topic(name)
    assert isinstance(topic, Topic)
    return topic


def dedup_of(topic: Topic) -> MessageDeduplication:
    hook = topic.deduplication
    assert isinstance(hook, MessageDeduplication)
    return hook


# -- deduplication ------------------------------------------------------------------------------
rows = st.lists(st.tuples(st.integers(-1, 3), st.integers(-1, 12)), max_size=60)


@given(first=rows, second=rows)
def test_check_and_record_many_equals_sequential_sends(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> None:
    """Two runs in bulk give the verdicts and maps of sending every row with its producer,
    one completed publish after the other."""
    names = ["p0", "p1", "", "p3"]  # "" : a row without a producer name
    bulk_broker, ref_broker = make_broker(), make_broker()
    bulk_broker.create_topic(T)
    ref_broker.create_topic(T)
    bulk = dedup_of(topic_of(bulk_broker))
    producers: dict[str, Producer] = {}
    for run in (first, second):
        codes = np.array([c for c, _ in run], dtype=np.int64)
        seqs = np.array([s for _, s in run], dtype=np.int64)
        got = bulk.check_and_record_many(codes, names, seqs).tolist()
        want = []
        for code, seq in run:
            if code < 0 or seq < 0 or not names[code]:
                want.append(False)
                continue
            name = names[code]
            if name not in producers:
                p = ref_broker.create_producer(T, name)
                assert isinstance(p, Producer)
                producers[name] = p
            want.append(producers[name].send(b"x", sequence_id=seq).ledger_id < 0)
        assert got == want
    ref = dedup_of(topic_of(ref_broker))
    assert bulk.highest_sequence_persisted() == ref.highest_sequence_persisted()
    assert bulk.highest_sequence_pushed() == ref.highest_sequence_pushed()
    assert bulk.stats().duplicates == ref.stats().duplicates


def test_check_and_record_many_snapshots_every_interval() -> None:
    broker = make_broker(deduplication_entries_interval=10)
    topic = broker.create_topic(T)
    assert isinstance(topic, Topic)
    dedup = dedup_of(topic)
    topic.managed_ledger.add_entries([b""] * 25)
    verdicts = dedup.check_and_record_many(np.zeros(25, np.int64), ["p"], np.arange(25, dtype=np.int64))
    assert not verdicts.any()
    stats = dedup.stats()
    # One snapshot at the ledger's last entry with the maps of every row.
    assert stats.snapshots_taken == 1
    assert stats.last_snapshot_position == topic.managed_ledger.last_confirmed_entry
    assert dedup.cursor is not None and dedup.cursor.properties == {"p": 24}


def test_check_and_record_many_is_a_no_op_when_disabled() -> None:
    broker = make_broker()
    topic = broker.create_topic(T)
    assert isinstance(topic, Topic)
    dedup = dedup_of(topic)
    dedup.set_enabled(False)
    assert not dedup.check_and_record_many(np.zeros(3, np.int64), ["p"], np.zeros(3, np.int64)).any()
    with pytest.raises(ValueError, match="differ"):
        dedup.check_and_record_many(np.zeros(2, np.int64), ["p"], np.zeros(3, np.int64))


# -- bulk acknowledgements ------------------------------------------------------------------------
def _shared_with_messages(n: int) -> tuple[Broker, Topic]:
    broker = make_broker()
    broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    for i in range(n):
        producer.send(f"m{i}".encode())
    return broker, topic_of(broker)


@given(st.lists(st.integers(0, 39), max_size=80))
def test_acknowledge_entries_equals_individual_acks(picks: list[int]) -> None:
    (_, bulk), (_, ref) = _shared_with_messages(40), _shared_with_messages(40)
    bulk_sub, ref_sub = bulk.get_subscription("s"), ref.get_subscription("s")
    first = bulk.managed_ledger.first_position()
    positions = np.array([[first.ledger_id, e] for e in picks], dtype=np.int64).reshape(-1, 2)
    acked = bulk_sub.add_consumer(permits=0).acknowledge_entries(positions)
    ref_sub.add_consumer(permits=0).acknowledge([MessageId(first.ledger_id, e) for e in picks])
    assert acked == len(set(picks))
    bc, rc = bulk_sub.cursor, ref_sub.cursor
    assert (bc.mark_delete_position, str(bc.individually_deleted_messages()), bc.stats().backlog) == (
        rc.mark_delete_position, str(rc.individually_deleted_messages()), rc.stats().backlog)


def test_acknowledge_entries_validates_everything_first() -> None:
    _, topic = _shared_with_messages(5)
    sub = topic.get_subscription("s")
    consumer = sub.add_consumer(permits=0)
    lid = topic.managed_ledger.first_position().ledger_id
    with pytest.raises(InvalidPositionError):
        consumer.acknowledge_entries(np.array([[lid, 0], [lid, 99]], dtype=np.int64))
    assert sub.cursor.stats().backlog == 5  # nothing acknowledged
    assert consumer.acknowledge_entries([Position(lid, 0), Position(lid, 0), Position(lid, 1)]) == 2
    assert sub.cursor.mark_delete_position == Position(lid, 1)


def test_acknowledge_entries_of_received_messages_releases_them() -> None:
    """Entries in a consumer's hands are forgotten by the dispatcher (permits and unacked
    counts come back) exactly as with ``acknowledge``."""
    _, topic = _shared_with_messages(4)
    sub = topic.get_subscription("s")
    consumer = sub.add_consumer(permits=10)
    received = consumer.receive(10)
    assert len(received) == 4 and consumer.unacked_messages == 4
    lid = received[0].message_id.ledger_id
    consumer.acknowledge_entries(np.array([[lid, 1], [lid, 2]], dtype=np.int64))
    assert consumer.unacked_messages == 2
    consumer.acknowledge([received[0].message_id, received[3].message_id])
    assert consumer.unacked_messages == 0 and sub.cursor.stats().backlog == 0


# -- delayed-delivery tracker ------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 50)), max_size=30), st.integers(-1, 60))
def test_peek_due_is_pop_due_without_removing(items: list[tuple[int, int]], now: int) -> None:
    tracker = DelayedDeliveryTracker(strict=True)
    for entry, at in items:
        tracker.add(Position(1, entry), at)
    peeked = tracker.peek_due(now)
    size = len(tracker)
    assert [p for _, p in peeked] == [p for p, _ in tracker.pop_due(now)]
    assert len(tracker) == size - len(peeked)
    assert all(at <= now for at, _ in peeked) and [at for at, _ in peeked] == sorted(at for at, _ in peeked)


def test_peek_due_follows_the_tick_when_not_strict() -> None:
    tracker = DelayedDeliveryTracker(tick_time_ms=100, strict=False)
    tracker.add(Position(1, 0), 150)
    assert tracker.peek_due(49) == [] and tracker.peek_due(50) == [(150, Position(1, 0))]


# -- one partition on its own ----------------------------------------------------------------------------
def test_open_partition_opens_one_partition_without_its_siblings() -> None:
    broker = make_broker()
    part = broker.open_partition(T, 3)
    assert part.name == f"{T}-partition-3" and part.partition_index == 3
    assert broker.open_partition(T, 3) is part
    assert not broker.factory.exists("public/default/persistent/bulk-partition-0")
    sub = part.subscribe("s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    with pytest.raises(InvalidRequestError, match="partition"):
        sub.add_consumer().acknowledge(MessageId(1, 0, partition=2))
    with pytest.raises(InvalidRequestError, match="names a partition"):
        broker.open_partition(f"{T}-partition-1", 0)
    with pytest.raises(InvalidRequestError):
        broker.open_partition(T, -1)


# -- batch sizes the caller knows (the replay's) ----------------------------------------------------------
def _replay_store_subscription(ledger_id: int, entries: int) -> tuple[ReplayStore, Subscription, Consumer]:
    """A shared subscription (with a consumer that never receives) on a topic whose
    ``entries`` empty entries sit in ledger ``ledger_id`` of a :class:`ReplayStore` (read
    back, each is one message)."""
    store = ReplayStore()
    store.expect_ledger(ledger_id)
    topic = make_broker(store).create_topic(T)
    assert isinstance(topic, Topic)
    topic.managed_ledger.add_entries([b""] * entries)
    sub = topic.subscribe("s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    return store, sub, sub.add_consumer(permits=0)


def test_batch_sizes_in_the_request_spare_reading_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the replay does instead of describing entries in its store: it passes the batch
    sizes it knows (issue 32), and no entry is read for them."""
    store, sub, consumer = _replay_store_subscription(7, 3)
    reads: list[tuple[int, int, int]] = []
    real_read = store.read

    def counting_read(ledger_id: int, first: int, last: int) -> list[bytes]:
        reads.append((ledger_id, first, last))
        return real_read(ledger_id, first, last)

    monkeypatch.setattr(store, "read", counting_read)
    with pytest.raises(InvalidRequestError, match="batch index 2"):  # unknown: read back, 1 message
        consumer.acknowledge(MessageId(7, 1, -1, 2))
    assert reads == [(7, 1, 1)]
    reads.clear()
    sizes = {Position(7, 1): 3}
    outcome = consumer.acknowledge_with_outcome(
        AckRequest(message_ids=[MessageId(7, 1, -1, 0), MessageId(7, 1, -1, 2)], batch_sizes=sizes)
    )
    assert outcome.batch_acked == ((Position(7, 1), 0b101),) and outcome.entries_acked == 0
    assert sub.cursor.batch_ack_set(Position(7, 1)) == 0b010
    assert sub.apply_skip(sub.plan_skip([SkipEntry(7, 1, (1,))], sizes)).entries_acked == 1
    assert sub.cursor.is_message_deleted(Position(7, 1)) and reads == []


def test_unknown_batch_sizes_are_read_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = make_broker()
    sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    assert isinstance(sub, Subscription)
    producer = broker.create_producer(T)
    first, second = producer.send_batch([b"a", b"b", b"c", b"d"]), producer.send_batch([b"e", b"f"])
    consumer = sub.add_consumer(permits=0)  # holds nothing: the sizes are nobody's
    reads: list[list[Position]] = []
    real = sub.cursor.replay_entries

    def counting(positions: Iterable[Position]) -> list[Entry]:
        wanted = list(positions)
        reads.append(wanted)
        return real(wanted)

    monkeypatch.setattr(sub.cursor, "replay_entries", counting)
    consumer.acknowledge([MessageId(first.ledger_id, first.entry_id, -1, i) for i in (0, 1, 3)]
                         + [MessageId(second.ledger_id, second.entry_id, -1, 1)])
    assert reads == [[first.position, second.position]]  # one read for both entries
    assert not sub.cursor.is_message_deleted(first.position)
    consumer.acknowledge(MessageId(first.ledger_id, first.entry_id, -1, 2))
    assert sub.cursor.is_message_deleted(first.position) and len(reads) == 2
    consumer.acknowledge(MessageId(first.ledger_id, first.entry_id, -1, 2))  # acknowledged already:
    assert len(reads) == 3 and sub.cursor.replay_entries([first.position]) == []  # the read finds nothing
