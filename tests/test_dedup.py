"""Message deduplication (PIP-6, REFERENCE.md section 5): Pulsar's MessageDuplicationTest
behaviours, snapshots and their cadence, the producer cap, the inactivity purge, recovery
(snapshot + replay, missing or lost snapshot), the status machine, and a stateful test against
a naive model. Crash tests with real processes are in test_dedup_crash.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from mledger import (
    EntryMetadata,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MemoryStore,
    Position,
    StateCorruptedError,
)
from mledger.broker import (
    DEDUPLICATION_CURSOR_NAME,
    Broker,
    BrokerConfig,
    DedupStatus,
    DedupVerdict,
    InitialPosition,
    ManualClock,
    MessageDeduplication,
    MessageDupUnknownError,
    MessageId,
    NoDeduplication,
    Producer,
    PublishContext,
    Subscription,
    Topic,
)
from mledger.broker._dedup import DedupEvent, DedupTransitionError, next_status
from mledger.managed_ledger._ledger_view import cursor_info_path
from mledger.storage import FaultInjectingStore, InjectedFault, Store

T = "persistent://public/default/orders"
NOT_DUP, DUP, UNKNOWN = DedupVerdict.NOT_DUPLICATE, DedupVerdict.DUPLICATE, DedupVerdict.UNKNOWN
NO_ID = MessageId(-1, -1)


# -- helpers ----------------------------------------------------------------------------------


def make_broker(store: Store | None = None, clock: ManualClock | None = None, **settings: object) -> Broker:
    """A broker with deduplication on; ``settings`` are BrokerConfig fields."""
    clock = clock if clock is not None else ManualClock(0)
    config = BrokerConfig(deduplication_enabled=True, **settings)  # type: ignore[arg-type]
    return Broker(ManagedLedgerFactory(store if store is not None else MemoryStore(), clock=clock), config, clock=clock)


def restart(store: Store, clock: ManualClock | None = None, **settings: object) -> Broker:
    """A new broker over the same storage; the old one is abandoned, not closed (a crash)."""
    return make_broker(store, clock, **settings)


def topic_of(broker: Broker, name: str = T) -> Topic:
    topic = broker.get_topic(name)
    assert isinstance(topic, Topic)
    return topic


def dedup_of(broker: Broker, name: str = T) -> MessageDeduplication:
    hook = topic_of(broker, name).deduplication
    assert isinstance(hook, MessageDeduplication)
    return hook


def producer(broker: Broker, name: str, topic: str = T) -> Producer:
    p = broker.create_producer(topic, name)
    assert isinstance(p, Producer)
    return p


def hold_data(b: Broker) -> None:
    """A subscription that never acks, so the ledger keeps every entry (the dedup cursor alone
    lets consumed ledgers be trimmed; see test_dedup_cursor_alone_does_not_trim_unread_data)."""
    b.subscribe(T, "hold", initial_position=InitialPosition.EARLIEST)


def stored(ml: ManagedLedger) -> list[tuple[Position, EntryMetadata]]:
    """Every stored entry's position and metadata, in log order."""
    out: list[tuple[Position, EntryMetadata]] = []
    lac = ml.last_confirmed_entry
    for info in ml.ledger_infos():
        if info.entries and info.ledger_id <= lac.ledger_id:
            out.extend((e.position, e.metadata) for e in ml.read_range(info.ledger_id, 0, info.entries - 1))
    return out


def stored_ids(ml: ManagedLedger) -> list[tuple[str, int, int]]:
    """(producer, sequence id, highest sequence id) of every stored entry, in log order."""
    return [
        (md.producer_name, md.sequence_id, md.sequence_id if md.highest_sequence_id is None else md.highest_sequence_id)
        for _, md in stored(ml)
    ]


def expected_maps(ml: ManagedLedger, up_to: Position | None = None) -> dict[str, int]:
    """What the maps must hold: each producer's last stored (last-chunk) entry's highest id."""
    out: dict[str, int] = {}
    for position, md in stored(ml):
        if up_to is not None and position > up_to:
            break
        if md.chunk_id is not None and md.chunk_id != (md.num_chunks or 0) - 1:
            continue
        hi = md.highest_sequence_id
        out[md.producer_name] = max(md.sequence_id, hi if hi is not None else md.sequence_id)
    return out


def ctx(producer_name: str, seq: int, highest: int | None = None, n: int = 1, **md: object) -> PublishContext:
    highest = seq if highest is None else highest
    meta = EntryMetadata(producer_name=producer_name, sequence_id=seq,
                         highest_sequence_id=highest if highest != seq else None, num_messages=n, **md)  # type: ignore[arg-type]
    return PublishContext(T, producer_name, seq, highest, n, meta)


def publish_chunk(topic: Topic, name: str, seq: int, chunk_id: int, num_chunks: int) -> Position | None:
    md = EntryMetadata(producer_name=name, sequence_id=seq, uuid=f"{name}-{seq}", chunk_id=chunk_id,
                       num_chunks=num_chunks, total_chunk_msg_size=num_chunks * 4)
    return topic.publish(name, b"c%d" % chunk_id, md, seq, seq, 1)


class BlockingStore(MemoryStore):
    """A memory store whose next append, once armed, blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.release.wait(10), "the test never released the blocked append"
        return super().append_many(ledger_id, entries)


# -- MessageDuplicationTest: the duplicate check ------------------------------------------------


def test_is_duplicate_pushed_persisted_and_unknown() -> None:
    """Pulsar's testIsDuplicate, on the hook directly: pushed moves on check, persisted on
    record; a sequence id pushed but not persisted is Unknown, persisted is Dup."""
    b = make_broker()
    b.create_topic(T)
    d = dedup_of(b)
    assert d.check(ctx("p1", 0)) is NOT_DUP
    assert d.highest_sequence_pushed() == {"p1": 0} and d.highest_sequence_persisted() == {}
    assert d.check(ctx("p1", 0)) is UNKNOWN  # pushed, not yet persisted
    assert d.check(ctx("p1", 1)) is NOT_DUP
    assert d.check(ctx("p1", 5)) is NOT_DUP  # holes are fine
    assert d.check(ctx("p1", 4)) is UNKNOWN
    assert d.check(ctx("p2", 0)) is NOT_DUP  # producers are independent
    assert d.highest_sequence_pushed() == {"p1": 5, "p2": 0}
    d.record_persisted(ctx("p1", 0), Position(1, 0))
    d.record_persisted(ctx("p1", 1), Position(1, 1))
    assert d.highest_sequence_persisted() == {"p1": 1}
    assert d.check(ctx("p1", 0)) is DUP
    assert d.check(ctx("p1", 1)) is DUP
    assert d.check(ctx("p1", 4)) is UNKNOWN  # 1 < 4 <= 5: may still be in flight
    d.record_persisted(ctx("p1", 5), Position(1, 2))
    assert d.check(ctx("p1", 4)) is DUP
    assert d.check(ctx("p1", 6)) is NOT_DUP
    assert d.last_sequence_id("p1") == 6 and d.last_sequence_id("nobody") == -1
    s = d.stats()
    assert (s.duplicates, s.unknowns) == (3, 3)
    d._check()


def test_duplicates_are_rejected_without_a_write() -> None:
    b = make_broker()
    p = producer(b, "p1")
    ids = [p.send(b"m%d" % i) for i in range(3)]
    assert [m.entry_id for m in ids] == [0, 1, 2]
    for seq in (0, 1, 2):
        assert p.send(b"again", sequence_id=seq) == NO_ID
    ml = topic_of(b).managed_ledger
    assert stored_ids(ml) == [("p1", 0, 0), ("p1", 1, 1), ("p1", 2, 2)]
    assert dedup_of(b).stats().duplicates == 3
    assert p.send(b"next", sequence_id=3).entry_id == 3


def test_out_of_order_sequence_ids_are_duplicates() -> None:
    """Application-set ids with holes: anything at or below the highest stored is a Dup."""
    b = make_broker()
    p = producer(b, "p1")
    assert p.send(b"a", sequence_id=10) != NO_ID
    assert p.send(b"b", sequence_id=20) != NO_ID
    assert p.send(b"c", sequence_id=15) == NO_ID  # below 20: dropped
    assert p.send(b"d", sequence_id=0) == NO_ID
    assert p.send(b"e", sequence_id=21) != NO_ID
    assert [s for _, s, _ in stored_ids(topic_of(b).managed_ledger)] == [10, 20, 21]


def test_batches_use_the_highest_sequence_id() -> None:
    b = make_broker()
    p = producer(b, "p1")
    first = p.send_batch([b"a", b"b", b"c", b"d", b"e"], sequence_id=0)  # ids 0..4
    assert first.position is not None
    d = dedup_of(b)
    assert d.highest_sequence_persisted() == {"p1": 4}
    assert p.send(b"x", sequence_id=3) == NO_ID  # inside the stored batch
    assert list(p.send_batch([b"f", b"g"], sequence_id=4)) == [NO_ID]  # first id 4 <= 4: the whole batch
    assert p.send_batch([b"h", b"i"], sequence_id=5)[1].batch_index == 1
    assert d.highest_sequence_persisted() == {"p1": 6}
    assert stored_ids(topic_of(b).managed_ledger) == [("p1", 0, 4), ("p1", 5, 6)]


def test_unknown_while_a_write_is_pending() -> None:
    """While an append of seq 1 blocks in the store, a check of seq 1 (a retry arriving on
    another connection) is Unknown; once stored, it is a Dup."""
    store = BlockingStore()
    b = make_broker(store)
    p = producer(b, "p1")
    p.send(b"zero", sequence_id=0)
    d = dedup_of(b)
    result: list[MessageId] = []
    store.armed = True
    sender = threading.Thread(target=lambda: result.append(p.send(b"one", sequence_id=1)))
    sender.start()
    try:
        assert store.entered.wait(10)
        assert d.check(ctx("p1", 1)) is UNKNOWN
        assert d.check(ctx("p1", 0)) is DUP
        assert d.highest_sequence_pushed() == {"p1": 1} and d.highest_sequence_persisted() == {"p1": 0}
    finally:
        store.release.set()
        sender.join(10)
    assert result and result[0].entry_id == 1
    assert d.check(ctx("p1", 1)) is DUP
    assert d.stats().unknowns == 1


def test_unknown_is_refused_with_message_dup_unknown_error() -> None:
    """Through the topic: an Unknown publish fails with Pulsar's error and writes nothing."""
    b = make_broker()
    p = producer(b, "p1")
    d = dedup_of(b)
    assert d.check(ctx("p1", 0)) is NOT_DUP  # as if another connection had pushed seq 0
    with pytest.raises(MessageDupUnknownError, match="Cannot determine whether the message is a duplicate"):
        p.send(b"x", sequence_id=0)
    assert stored_ids(topic_of(b).managed_ledger) == []


def test_pushed_map_is_reset_after_a_failed_write() -> None:
    """Pulsar's testIsDuplicateWithFailure: the append of seq 2 fails; pushed goes back to
    persisted, so the producer's retry of seq 2 is accepted (and not Unknown forever)."""
    store = FaultInjectingStore(MemoryStore())
    b = make_broker(store)
    p = producer(b, "p1")
    p.send(b"a", sequence_id=0)
    p.send(b"b", sequence_id=1)
    d = dedup_of(b)
    store.fail_at, store.mode = store.writes, "raise"  # the next write: the append of seq 2
    with pytest.raises(InjectedFault):
        p.send(b"c", sequence_id=2)
    assert store.fault is not None and store.fault.kind == "append_many"
    assert d.highest_sequence_pushed() == d.highest_sequence_persisted() == {"p1": 1}
    assert p.send(b"c", sequence_id=2).entry_id == 2
    assert p.send(b"c", sequence_id=2) == NO_ID
    assert [s for _, s, _ in stored_ids(topic_of(b).managed_ledger)] == [0, 1, 2]
    assert d.stats().failed_writes == 1
    d._check()


def test_reset_after_failure_keeps_other_producers_in_flight_state_safe() -> None:
    """The reset copies persisted for every producer (Pulsar's rule): a producer whose write
    was pushed but not persisted loses it and its retry is accepted, never lost."""
    b = make_broker()
    b.create_topic(T)
    d = dedup_of(b)
    assert d.check(ctx("a", 0)) is NOT_DUP
    d.record_persisted(ctx("a", 0), Position(1, 0))
    assert d.check(ctx("b", 7)) is NOT_DUP  # pushed, in flight
    assert d.check(ctx("a", 1)) is NOT_DUP
    d.record_failed(ctx("a", 1))
    assert d.highest_sequence_pushed() == {"a": 0}
    assert d.check(ctx("a", 1)) is NOT_DUP
    assert d.check(ctx("b", 7)) is NOT_DUP


def test_chunked_messages_are_checked_on_their_last_chunk() -> None:
    b = make_broker()
    topic = topic_of(b) if b.topic_exists(T) else b.create_topic(T)
    assert isinstance(topic, Topic)
    d = dedup_of(b)
    assert publish_chunk(topic, "p", 0, 0, 3) is not None
    assert publish_chunk(topic, "p", 0, 1, 3) is not None
    assert d.highest_sequence_pushed() == {} and d.highest_sequence_persisted() == {}
    assert publish_chunk(topic, "p", 0, 2, 3) is not None
    assert d.highest_sequence_persisted() == {"p": 0}
    # The client resends the whole message: earlier chunks go through, the last is a Dup.
    assert publish_chunk(topic, "p", 0, 0, 3) is not None
    assert publish_chunk(topic, "p", 0, 1, 3) is not None
    assert publish_chunk(topic, "p", 0, 2, 3) is None
    assert d.check(ctx("p", 0, uuid="u", chunk_id=1, num_chunks=3)) is NOT_DUP
    assert d.check(ctx("p", 0, uuid="u", chunk_id=2, num_chunks=3)) is DUP


def test_non_last_chunks_are_skipped_by_the_replay() -> None:
    """A crash between the chunks of message 1: after recovery its retry must be accepted
    whole (Pulsar's replay counts the early chunks and would drop the retry's last chunk)."""
    store = MemoryStore()
    b = make_broker(store)
    topic = b.create_topic(T)
    assert isinstance(topic, Topic)
    for c in range(2):
        publish_chunk(topic, "p", 0, c, 2)
    publish_chunk(topic, "p", 1, 0, 3)
    publish_chunk(topic, "p", 1, 1, 3)  # crash before chunk 2
    b2 = restart(store)
    d = dedup_of(b2)
    assert d.highest_sequence_persisted() == d.highest_sequence_pushed() == {"p": 0}
    topic2 = topic_of(b2)
    assert all(publish_chunk(topic2, "p", 1, c, 3) is not None for c in range(3))
    assert d.highest_sequence_persisted() == {"p": 1}


def test_a_producer_continues_after_its_last_sequence_id_after_a_restart() -> None:
    store = MemoryStore()
    b = make_broker(store)
    p = producer(b, "p1")
    for _ in range(5):
        p.send(b"x")
    b.close()
    b2 = restart(store)
    p2 = producer(b2, "p1")
    assert p2.last_sequence_id == 4
    assert p2.send(b"y").entry_id >= 0
    assert stored_ids(topic_of(b2).managed_ledger)[-1] == ("p1", 5, 5)
    other = producer(b2, "fresh")
    assert other.last_sequence_id == -1
    named = b2.create_producer(T, None)
    assert named.name.startswith("standalone-") and named.last_sequence_id == -1


# -- snapshots ----------------------------------------------------------------------------------


def test_snapshot_every_entries_interval_on_the_dedup_cursor() -> None:
    b = make_broker(deduplication_entries_interval=5)
    p = producer(b, "p1")
    q = producer(b, "p2")
    d = dedup_of(b)
    cursor = d.cursor
    assert cursor is not None and cursor.name == DEDUPLICATION_CURSOR_NAME
    start = cursor.mark_delete_position
    ids = [p.send(b"a"), q.send(b"b"), p.send(b"c"), q.send(b"d")]
    assert cursor.mark_delete_position == start and cursor.properties == {}
    assert p.send(b"x", sequence_id=0) == NO_ID  # a Dup is not persisted: not counted
    ids.append(p.send(b"e"))
    assert cursor.mark_delete_position == ids[-1].position
    assert cursor.properties == {"p1": 2, "p2": 1} == d.highest_sequence_persisted()
    for _ in range(7):
        ids.append(q.send(b"f"))
    assert cursor.mark_delete_position == ids[9].position
    assert cursor.properties == expected_maps(topic_of(b).managed_ledger, ids[9].position) == {"p1": 2, "p2": 6}
    s = d.stats()
    assert (s.snapshots_taken, s.entries_since_snapshot, s.last_snapshot_position) == (2, 2, ids[9].position)


def test_non_last_chunks_count_toward_the_snapshot_interval() -> None:
    b = make_broker(deduplication_entries_interval=3)
    topic = b.create_topic(T)
    assert isinstance(topic, Topic)
    d = dedup_of(b)
    positions = [publish_chunk(topic, "p", 0, c, 3) for c in range(3)]
    assert d.cursor is not None and d.cursor.mark_delete_position == positions[-1]
    assert d.cursor.properties == {"p": 0}


def test_snapshot_is_persisted_and_survives_a_restart() -> None:
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=4)
    p = producer(b, "p1")
    for _ in range(9):
        p.send(b"x")
    md = dedup_of(b).stats().last_snapshot_position
    b2 = restart(store, deduplication_entries_interval=4)
    cursor = topic_of(b2).managed_ledger.get_cursor(DEDUPLICATION_CURSOR_NAME)
    assert cursor.mark_delete_position == md
    d = dedup_of(b2)
    s = d.stats()
    assert (s.last_recovery_entries, s.last_recovery_full) == (1, False)  # the 9th entry
    assert d.highest_sequence_persisted() == {"p1": 8}


def test_timed_snapshot_by_the_broker_clock() -> None:
    clock = ManualClock(0)
    b = make_broker(clock=clock, deduplication_snapshot_interval_seconds=120,
                    deduplication_snapshot_frequency_in_seconds=60)
    p = producer(b, "p1")
    ids = [p.send(b"x") for _ in range(3)]
    d = dedup_of(b)
    assert d.cursor is not None
    start = d.cursor.mark_delete_position
    clock.advance(60_000)
    b.run_due_tasks()  # the scheduler looks, but 120 s have not passed since the epoch
    assert d.cursor.mark_delete_position == start
    clock.advance(60_000)
    b.run_due_tasks()
    assert d.cursor.mark_delete_position == ids[-1].position and d.cursor.properties == {"p1": 2}
    s = d.stats()
    assert (s.snapshots_taken, s.snapshot_age_ms, s.entries_since_snapshot) == (1, 0, 3)  # counter not reset
    clock.advance(240_000)
    b.run_due_tasks()  # nothing new since: no snapshot
    assert d.stats().snapshots_taken == 1 and d.stats().snapshot_age_ms == 240_000
    later = p.send(b"y")
    clock.advance(60_000)
    b.run_due_tasks()
    assert d.cursor.mark_delete_position == later.position and d.stats().snapshots_taken == 2


def test_timed_snapshot_never_claims_an_entry_not_yet_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timed check runs while an append has reached the ledger (the LAC moved) but not
    yet record_persisted: the snapshot must sit at the last entry the maps hold, not the LAC
    (a snapshot at the LAC would let a restart skip that entry and accept its retry)."""
    clock = ManualClock(0)
    b = make_broker(clock=clock, deduplication_snapshot_interval_seconds=1)
    hold_data(b)
    p = producer(b, "p")
    first = p.send(b"x")
    d = dedup_of(b)
    appended, resume = threading.Event(), threading.Event()
    original = MessageDeduplication.record_persisted

    def slow_record(self: MessageDeduplication, ctx: PublishContext, position: Position) -> None:
        appended.set()
        assert resume.wait(10)
        original(self, ctx, position)

    monkeypatch.setattr(MessageDeduplication, "record_persisted", slow_record)
    sender = threading.Thread(target=lambda: p.send(b"y"))
    sender.start()
    try:
        assert appended.wait(10)
        clock.advance(5_000)
        assert d.take_snapshot()
        assert d.cursor is not None and d.cursor.mark_delete_position == first.position
        assert d.cursor.properties == {"p": 0}
    finally:
        resume.set()
        sender.join(10)
    assert d.highest_sequence_persisted() == {"p": 1}


@pytest.mark.parametrize("settings", [
    {"deduplication_snapshot_interval_seconds": 0},
    {"deduplication_snapshot_frequency_in_seconds": 0},
])
def test_timed_snapshot_can_be_turned_off(settings: dict[str, Any]) -> None:
    clock = ManualClock(0)
    b = make_broker(clock=clock, **settings)
    p = producer(b, "p1")
    p.send(b"x")
    clock.advance(3_600_000)
    b.run_due_tasks()
    assert dedup_of(b).stats().snapshots_taken == 0


def test_per_topic_snapshot_interval_override() -> None:
    clock = ManualClock(0)
    b = Broker(ManagedLedgerFactory(clock=clock), BrokerConfig(deduplication_snapshot_frequency_in_seconds=1),
               clock=clock, dedup_factory=lambda t: MessageDeduplication(t, True, snapshot_interval_seconds=5))
    p = producer(b, "p1")
    p.send(b"x")
    clock.advance(5_000)
    b.run_due_tasks()
    assert dedup_of(b).stats().snapshots_taken == 1


def test_producers_over_the_cap_are_counted_logged_once_and_kept_in_memory(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=1, deduplication_max_number_of_producers=3)
    names = ["e", "d", "c", "b", "a"]
    producers = {n: producer(b, n) for n in names}
    d = dedup_of(b)
    with caplog.at_level(logging.INFO, logger="mledger.broker._dedup"):
        for n in names:
            producers[n].send(b"x")
        producers["e"].send(b"y")
    assert d.cursor is not None
    # the three most recently persisted, written sorted by name
    assert list(d.cursor.properties.items()) == [("a", 0), ("b", 0), ("e", 1)]
    assert d.highest_sequence_persisted() == {"e": 1, "d": 0, "c": 0, "b": 0, "a": 0}
    s = d.stats()
    assert (s.producers, s.snapshot_producers, s.producers_over_cap, s.snapshots_over_cap) == (5, 3, 2, 3)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "keeps 3" in warnings[0].getMessage()
    assert producers["d"].send(b"dup", sequence_id=0) == NO_ID  # still deduplicated in memory
    # A restart forgets what no snapshot or replay holds: the price of the cap.
    b2 = restart(store, deduplication_entries_interval=1, deduplication_max_number_of_producers=3)
    d2 = dedup_of(b2)
    assert d2.highest_sequence_persisted() == {"a": 0, "b": 0, "e": 1}


def test_inactive_producers_are_purged_after_the_timeout() -> None:
    clock = ManualClock(0)
    b = make_broker(clock=clock, deduplication_producer_inactivity_timeout_minutes=3)
    gone, stays = producer(b, "gone"), producer(b, "stays")
    gone.send(b"x")
    stays.send(b"y")
    gone.close()
    d = dedup_of(b)
    assert d.inactive_producers() == {"gone": 0}
    clock.advance(180_000)  # exactly the timeout: not yet
    b.run_due_tasks()
    assert d.highest_sequence_persisted() == {"gone": 0, "stays": 0}
    clock.advance(60_000)  # the purge check runs every timeout / 3
    b.run_due_tasks()
    assert d.highest_sequence_persisted() == {"stays": 0} and d.inactive_producers() == {}
    assert d.cursor is not None and d.cursor.properties == {"stays": 0}
    assert d.last_sequence_id("gone") == -1 and d.stats().purged_producers == 1
    again = producer(b, "gone")
    assert again.last_sequence_id == -1 and again.send(b"z", sequence_id=0) != NO_ID


def test_reconnected_producer_is_not_purged() -> None:
    clock = ManualClock(0)
    b = make_broker(clock=clock, deduplication_producer_inactivity_timeout_minutes=1)
    p = producer(b, "p")
    p.send(b"x")
    p.close()
    producer(b, "p")
    clock.advance(600_000)
    b.run_due_tasks()
    assert dedup_of(b).highest_sequence_persisted() == {"p": 0}


# -- recovery --------------------------------------------------------------------------------------


def run_workload(b: Broker, steps: int, seed: int) -> None:
    """Random publishes by a few producers: single, batches, retries, out-of-order ids."""
    import random

    rng = random.Random(seed)
    producers = [producer(b, f"p{i}") for i in range(4)]
    for _ in range(steps):
        p = rng.choice(producers)
        roll = rng.random()
        if roll < 0.2:
            p.send(b"retry", sequence_id=max(p.last_sequence_id - rng.randrange(3), 0))
        elif roll < 0.4:
            p.send_batch([b"b"] * rng.randrange(2, 5), sequence_id=p.last_sequence_id + 1 + rng.randrange(3))
        elif roll < 0.5:
            p.send(b"hole", sequence_id=p.last_sequence_id + rng.randrange(1, 10))
        else:
            p.send(b"m", sequence_id=p.last_sequence_id + 1)


@pytest.mark.parametrize("retained", [True, False], ids=["subscribed", "trimmed"])
@pytest.mark.parametrize("interval", [1, 7, 1000])
def test_recovery_rebuilds_both_maps_exactly(interval: int, retained: bool) -> None:
    """Snapshot + replay gives back the live maps, also when the ledgers before the snapshot
    have been trimmed (no subscription holds them)."""
    store = MemoryStore()
    ml_config = ManagedLedgerConfig(max_entries_per_ledger=13)
    b = make_broker(store, deduplication_entries_interval=interval, managed_ledger_config=ml_config)
    sub = b.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    run_workload(b, 300, seed=interval)
    d = dedup_of(b)
    live_pushed, live_persisted = d.highest_sequence_pushed(), d.highest_sequence_persisted()
    ml = topic_of(b).managed_ledger
    if retained:
        assert live_persisted == expected_maps(ml)
        assert d.cursor is not None and d.cursor.properties == expected_maps(ml, d.cursor.mark_delete_position)
    else:
        # The subscription consumes everything: ledgers go up to the dedup snapshot.
        sub.clear_backlog()
        ml.trim_consumed_ledgers_in_background().result(timeout=10)  # trimming runs in the background
        assert interval == 1000 or ml.ledger_infos()[0].ledger_id > 1, "nothing was trimmed"
    b2 = restart(store, deduplication_entries_interval=interval, managed_ledger_config=ml_config)
    d2 = dedup_of(b2)
    assert d2.highest_sequence_persisted() == live_persisted
    assert d2.highest_sequence_pushed() == live_pushed
    assert d2.status is DedupStatus.ENABLED and not d2.stats().last_recovery_full
    d2._check()
    # Recovered producers are inactive until they reconnect.
    assert set(d2.inactive_producers()) == set(live_persisted)


def test_clean_close_snapshots_so_a_restart_replays_nothing() -> None:
    store = MemoryStore()
    b = make_broker(store)
    hold_data(b)
    run_workload(b, 50, seed=1)
    maps = dedup_of(b).highest_sequence_persisted()
    b.close()
    b2 = restart(store)
    d2 = dedup_of(b2)
    assert d2.stats().last_recovery_entries == 0 and d2.highest_sequence_persisted() == maps
    cursor = d2.cursor
    assert cursor is not None and cursor.properties == maps
    assert cursor.mark_delete_position == topic_of(b2).managed_ledger.last_confirmed_entry


def test_recovery_snapshots_when_it_replayed_an_interval() -> None:
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=1000)
    p = producer(b, "p")
    for _ in range(30):
        p.send(b"x")
    b2 = restart(store, deduplication_entries_interval=10)
    d2 = dedup_of(b2)
    s = d2.stats()
    assert (s.last_recovery_entries, s.snapshots_taken, s.entries_since_snapshot) == (30, 1, 0)
    assert d2.cursor is not None and d2.cursor.properties == {"p": 29}
    assert d2.cursor.mark_delete_position == topic_of(b2).managed_ledger.last_confirmed_entry


def test_missing_dedup_cursor_rebuilds_from_the_whole_ledger() -> None:
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=5)
    hold_data(b)
    run_workload(b, 80, seed=3)
    maps = dedup_of(b).highest_sequence_persisted()
    ml_name = topic_of(b).managed_ledger.name
    b.close()
    plain = ManagedLedgerFactory(store)
    plain.open(ml_name).delete_cursor(DEDUPLICATION_CURSOR_NAME)
    b2 = restart(store, deduplication_entries_interval=5)
    d2 = dedup_of(b2)
    assert d2.stats().last_recovery_full and d2.highest_sequence_persisted() == maps


def test_lost_snapshot_rebuilds_from_the_whole_ledger() -> None:
    """A dedup cursor whose mark-delete has moved but whose properties are gone (what the
    cursor's own recovery yields when its cursor ledger is unreadable) is not trusted."""
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=5)
    hold_data(b)
    run_workload(b, 80, seed=4)
    maps = dedup_of(b).highest_sequence_persisted()
    ml_name = topic_of(b).managed_ledger.name
    b.close()
    plain = ManagedLedgerFactory(store)
    ml = plain.open(ml_name)
    cursor = ml.get_cursor(DEDUPLICATION_CURSOR_NAME)
    cursor.mark_delete(cursor.mark_delete_position, {})  # the snapshot's producers lost
    ml.close()
    b2 = restart(store, deduplication_entries_interval=5)
    d2 = dedup_of(b2)
    assert d2.stats().last_recovery_full and d2.highest_sequence_persisted() == maps
    assert d2.cursor is not None and d2.cursor.properties == maps  # repaired at once


def test_unreadable_cursor_ledger_falls_back_and_still_recovers_exactly() -> None:
    """Corrupt the dedup cursor's ledger for real: the cursor recovers its metadata-store
    copy without properties, dedup notices and rebuilds."""
    clock = ManualClock(0)
    store = MemoryStore()
    b = make_broker(store, clock, deduplication_entries_interval=5, deduplication_snapshot_interval_seconds=0,
                    deduplication_producer_inactivity_timeout_minutes=1)
    hold_data(b)
    ps = [producer(b, "a"), producer(b, "b")]
    for i in range(12):
        ps[i % 2].send(b"x")
    ps[0].close()
    clock.advance(120_000)
    b.run_due_tasks()  # purge of "a": a snapshot at the mark-delete with entries after it
    cursor = dedup_of(b).cursor
    assert cursor is not None and cursor.mark_delete_position < topic_of(b).managed_ledger.last_confirmed_entry
    ledger_id = cursor.stats().persistence.cursor_ledger_id
    assert ledger_id > 0, "the state went to a cursor ledger"
    maps = dedup_of(b).highest_sequence_persisted()
    assert maps == {"b": 5}
    store._ledgers[ledger_id] = [b"\xff\xfe garbage" for _ in store._ledgers[ledger_id]]
    b2 = restart(store, clock, deduplication_entries_interval=5)
    d2 = dedup_of(b2)
    # The rebuild brings the purged producer back: the safe direction.
    assert d2.stats().last_recovery_full and d2.highest_sequence_persisted() == {"a": 5, "b": 5}


def test_unreadable_cursor_node_is_deleted_and_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    """If opening pulsar.dedup raises StateCorruptedError, dedup deletes and rebuilds it."""
    store = MemoryStore()
    b = make_broker(store)
    hold_data(b)
    run_workload(b, 40, seed=5)
    maps = dedup_of(b).highest_sequence_persisted()
    b.close()
    # Load the topic without dedup (the ledger and its stored cursors open normally) ...
    b2 = Broker(ManagedLedgerFactory(store), BrokerConfig(), dedup_factory=lambda t: NoDeduplication())
    topic = topic_of(b2)
    original = ManagedLedger.open_cursor
    calls: list[str] = []

    def failing_once(self: ManagedLedger, name: str, *args: object, **kwargs: object) -> object:
        if name == DEDUPLICATION_CURSOR_NAME and not calls:
            calls.append(name)
            raise StateCorruptedError("injected: unreadable ManagedCursorInfo")
        return original(self, name, *args, **kwargs)  # type: ignore[arg-type]

    # ... then enable it with the dedup cursor reported unreadable.
    monkeypatch.setattr(ManagedLedger, "open_cursor", failing_once)
    d2 = MessageDeduplication(topic, enabled=True)
    assert calls and d2.stats().last_recovery_full and d2.highest_sequence_persisted() == maps


def test_corrupt_dedup_cursor_node_does_not_block_the_topic() -> None:
    # The rebuild replays the ledgers still there: with Pulsar's trimming a topic without
    # subscriptions has lost those its snapshot covered, so keep them for this check.
    store = MemoryStore()
    keep = {"managed_ledger_config": ManagedLedgerConfig(retain_without_subscriptions=True)}
    b = make_broker(store, **keep)
    run_workload(b, 20, seed=6)
    maps = dedup_of(b).highest_sequence_persisted()
    path = cursor_info_path(topic_of(b).managed_ledger.name, DEDUPLICATION_CURSOR_NAME)
    node = store.get(path)
    assert node is not None
    store.put(path, b"\xff not a ManagedCursorInfo", node.version)
    b2 = restart(store, **keep)
    assert dedup_of(b2).highest_sequence_persisted() == maps


@pytest.mark.parametrize("retain", [False, True])
def test_dedup_cursor_alone_trims_what_its_snapshot_covers_unless_retained(retain: bool) -> None:
    # Pulsar: pulsar.dedup is a durable cursor, so without subscriptions it alone decides, and
    # with retention 0 the ledgers below its snapshot go; retain_without_subscriptions keeps them.
    config = ManagedLedgerConfig(max_entries_per_ledger=2, retain_without_subscriptions=retain)
    b = make_broker(deduplication_entries_interval=3, managed_ledger_config=config)
    p = producer(b, "p")
    ids = [p.send(b"x") for _ in range(10)]
    ml = topic_of(b).managed_ledger
    ml.trim_consumed_ledgers_in_background().result(timeout=10)
    snapshot = ml.get_cursor(DEDUPLICATION_CURSOR_NAME).persistent_mark_delete_position
    first = ml.ledger_infos()[0].ledger_id
    if retain:
        assert first == ids[0].ledger_id
    else:
        assert ids[0].ledger_id < first <= snapshot.ledger_id + 1
    sub = b.subscribe(T, "late", initial_position=InitialPosition.EARLIEST)
    got = [m.message_id for m in sub.add_consumer("c").receive(100)]
    assert got == [i for i in ids if i.ledger_id >= first]


def test_dedup_cursor_holds_trimming_back_for_its_replay() -> None:
    """A subscription ahead of the dedup snapshot must not trim entries the replay needs."""
    store = MemoryStore()
    b = make_broker(store, deduplication_entries_interval=1000,
                    managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=2))
    sub = b.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    consumer = sub.add_consumer("c")
    p = producer(b, "p")
    for _ in range(9):
        p.send(b"x")
    for m in consumer.receive(100):
        consumer.acknowledge(m.message_id)
    ml = topic_of(b).managed_ledger
    assert ml.number_of_entries() == 9  # the dedup cursor is still at the start
    b2 = restart(store, deduplication_entries_interval=1000)
    assert dedup_of(b2).highest_sequence_persisted() == {"p": 8}


@pytest.mark.parametrize("meta", [
    EntryMetadata(producer_name="p", sequence_id=7, publish_time_ms=1),
    EntryMetadata(producer_name="p", sequence_id=-1, publish_time_ms=1),  # Java's -1: 2**64-1 on the wire
    EntryMetadata(producer_name="p", sequence_id=3, highest_sequence_id=9, num_messages=7, publish_time_ms=1),
    EntryMetadata(producer_name="p", sequence_id=3, highest_sequence_id=-5, publish_time_ms=1),
    EntryMetadata(producer_name="p", sequence_id=4, uuid="u", chunk_id=1, num_chunks=3, publish_time_ms=1),
    EntryMetadata(producer_name="p", sequence_id=4, uuid="u", chunk_id=2, num_chunks=3, publish_time_ms=1),
    EntryMetadata(producer_name="p", sequence_id=4, chunk_id=0, publish_time_ms=1),  # no num_chunks: not last
    EntryMetadata(producer_name="", sequence_id=0, publish_time_ms=1),
    EntryMetadata(producer_name="ünï", sequence_id=1 << 62, publish_time_ms=1),
])
@pytest.mark.parametrize("framing", ["plain", "checksum", "broker-metadata"])
def test_replay_parser_agrees_with_decode_entry(meta: EntryMetadata, framing: str) -> None:
    import struct

    from mledger.broker._dedup import _replay_fields
    from mledger.codec import decode_entry, encode_entry
    from mledger.codec._entry import crc32c

    raw = encode_entry(b"payload", meta)
    if framing in ("checksum", "broker-metadata"):
        raw = b"\x0e\x01" + struct.pack(">I", crc32c(raw)) + raw
    if framing == "broker-metadata":
        raw = b"\x0e\x02" + struct.pack(">I", 3) + b"\x08\x01\x10" + raw
    md, _ = decode_entry(raw)
    hi = md.highest_sequence_id
    expected = (md.producer_name, md.sequence_id, md.sequence_id if hi is None else hi,
                md.chunk_id is None or md.chunk_id == (md.num_chunks or 0) - 1)
    assert _replay_fields(raw, 1, 2) == expected


def test_corrupt_data_entry_fails_the_recovery_naming_it() -> None:
    store = MemoryStore()
    b = make_broker(store)
    p = producer(b, "p")
    ids = [p.send(b"x") for _ in range(3)]
    store._ledgers[ids[1].ledger_id][ids[1].entry_id] = b"\x00\x00\x00\x05\xff\xff\xff\xff\xff"
    b2 = restart(store)
    with pytest.raises(StateCorruptedError, match=f"entry {ids[1].ledger_id}:{ids[1].entry_id}"):
        b2.get_topic(T)


# -- status machine ----------------------------------------------------------------------------------


def test_disable_deletes_the_cursor_and_clears_the_maps_reenable_rebuilds() -> None:
    b = make_broker(deduplication_entries_interval=3)
    p = producer(b, "p")
    for _ in range(5):
        p.send(b"x")
    d = dedup_of(b)
    ml = topic_of(b).managed_ledger
    assert DEDUPLICATION_CURSOR_NAME in ml.cursor_names()
    d.set_enabled(False)
    assert d.status is DedupStatus.DISABLED and not d.is_enabled and d.cursor is None
    assert DEDUPLICATION_CURSOR_NAME not in ml.cursor_names()
    assert d.highest_sequence_pushed() == d.highest_sequence_persisted() == {} == d.inactive_producers()
    assert d.last_sequence_id("p") == -1
    assert p.send(b"dup", sequence_id=4) != NO_ID  # no dedup: stored again
    d._check()
    d.set_enabled(False)  # idempotent
    d.set_enabled(True)
    assert d.status is DedupStatus.ENABLED and d.stats().last_recovery_full
    assert d.highest_sequence_persisted() == {"p": 4} == expected_maps(ml)
    assert DEDUPLICATION_CURSOR_NAME in ml.cursor_names()
    assert p.send(b"dup", sequence_id=4) == NO_ID
    assert d.stats().recoveries == 2


def test_broker_wide_flag_builds_message_deduplication() -> None:
    b = Broker(ManagedLedgerFactory(), BrokerConfig(deduplication_enabled=True))
    b.create_topic(T)
    assert isinstance(topic_of(b).deduplication, MessageDeduplication)
    assert dedup_of(b).status is DedupStatus.ENABLED


def test_topic_loaded_with_dedup_off_deletes_a_leftover_cursor() -> None:
    store = MemoryStore()
    b = make_broker(store)
    producer(b, "p").send(b"x")
    b.close()
    b2 = Broker(ManagedLedgerFactory(store), BrokerConfig(),
                dedup_factory=lambda t: MessageDeduplication(t, enabled=False))
    d = dedup_of(b2)
    assert d.status is DedupStatus.DISABLED
    assert DEDUPLICATION_CURSOR_NAME not in topic_of(b2).managed_ledger.cursor_names()


def test_failed_enable_refuses_publishes_until_retried() -> None:
    store = FaultInjectingStore(MemoryStore())
    b = Broker(ManagedLedgerFactory(store), BrokerConfig(),
               dedup_factory=lambda t: MessageDeduplication(t, enabled=False))
    p = producer(b, "p")
    p.send(b"before")
    d = dedup_of(b)
    store.fail_at, store.mode = store.writes, "raise"  # creating the dedup cursor
    with pytest.raises(InjectedFault):
        d.set_enabled(True)
    assert d.status is DedupStatus.FAILED
    with pytest.raises(MessageDupUnknownError):
        p.send(b"x")
    d.set_enabled(True)
    assert d.status is DedupStatus.ENABLED and d.highest_sequence_persisted() == {"p": 0}
    assert p.send(b"x", sequence_id=0) == NO_ID


class FailDedupCursorCreation(FaultInjectingStore):
    """Fails the first write of the dedup cursor's metadata node."""

    armed = True

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        if self.armed and path.endswith("/" + DEDUPLICATION_CURSOR_NAME):
            self.armed = False
            raise InjectedFault(f"injected: cannot write {path}")
        return super().put(path, data, expected_version)


def test_failed_enable_at_topic_load_makes_the_topic_unavailable() -> None:
    """A topic whose dedup state cannot be recovered is not served (Pulsar fails the topic
    load); the next load retries."""
    inner = MemoryStore()
    b = Broker(ManagedLedgerFactory(inner), BrokerConfig())  # dedup off: no dedup cursor
    producer(b, "p").send(b"x")
    b.close()
    b2 = restart(FailDedupCursorCreation(inner))
    with pytest.raises(InjectedFault, match="pulsar.dedup"):
        b2.get_topic(T)
    d = dedup_of(b2)
    assert d.status is DedupStatus.ENABLED and d.highest_sequence_persisted() == {"p": 0}


def test_status_values_are_pulsars() -> None:
    assert [s.value for s in DedupStatus] == ["Initialized", "Disabled", "Recovering", "Enabled", "Removing", "Failed"]


def test_transitions_pass_through_recovering_and_removing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[DedupStatus] = []

    class Observed(MessageDeduplication):
        def _replay(self, after: Position) -> tuple[int, Position | None]:
            seen.append(self.status)
            return super()._replay(after)

    b = Broker(ManagedLedgerFactory(), BrokerConfig(deduplication_enabled=True), dedup_factory=Observed)
    producer(b, "p").send(b"x")
    d = dedup_of(b)
    ml = topic_of(b).managed_ledger
    original = ml.delete_cursor

    def observed_delete(name: str) -> None:
        seen.append(d.status)
        original(name)

    monkeypatch.setattr(ml, "delete_cursor", observed_delete)
    d.set_enabled(False)
    d.set_enabled(True)
    assert seen == [DedupStatus.RECOVERING, DedupStatus.REMOVING, DedupStatus.RECOVERING]
    assert d.status is DedupStatus.ENABLED


# The status machine as the module docstring draws it: (status, event) -> next status.
DIAGRAM = {
    ("Initialized", "enable"): "Recovering",
    ("Disabled", "enable"): "Recovering",
    ("Failed", "enable"): "Recovering",
    ("Recovering", "replayed"): "Enabled",
    ("Recovering", "storage error"): "Failed",
    ("Initialized", "disable"): "Removing",
    ("Enabled", "disable"): "Removing",
    ("Failed", "disable"): "Removing",
    ("Removing", "removed"): "Disabled",
    ("Removing", "storage error"): "Failed",
}


@pytest.mark.parametrize("status", list(DedupStatus))
@pytest.mark.parametrize("event", list(DedupEvent))
def test_status_moves_only_by_the_table_and_refuses_the_rest_naming_status_and_event(
    status: DedupStatus, event: DedupEvent
) -> None:
    expected = DIAGRAM.get((status.value, event.value))
    if expected is not None:
        assert next_status(status, event).value == expected
        return
    with pytest.raises(DedupTransitionError) as caught:
        next_status(status, event)
    assert (caught.value.status, caught.value.event) == (status, event)
    assert f"status {status.value} has no transition on {event.value!r}" in str(caught.value)


def test_every_status_but_the_initial_one_is_entered_by_the_table() -> None:
    entered = {DedupStatus(target) for target in DIAGRAM.values()}
    assert entered | {DedupStatus.INITIALIZED} == set(DedupStatus)


def test_a_transition_the_table_lacks_is_refused_and_leaves_the_status() -> None:
    b = make_broker(MemoryStore())
    producer(b, "p").send(b"x")
    d = dedup_of(b)
    assert d.status is DedupStatus.ENABLED
    with pytest.raises(DedupTransitionError, match="status Enabled has no transition on 'replayed'"):
        d._fire(DedupEvent.REPLAYED)
    assert d.status is DedupStatus.ENABLED
    d.set_enabled(True)  # enabling an enabled topic: no transition, a no-op
    assert d.status is DedupStatus.ENABLED and d.stats().recoveries == 1


def test_each_partition_deduplicates_on_its_own() -> None:
    store = MemoryStore()
    b = make_broker(store)
    b.create_topic("pay", partitions=3)
    p = b.create_producer("pay", "pp")
    first = p.send(b"a", key="k1", sequence_id=10)
    assert first.entry_id >= 0
    dup = p.send(b"a", key="k1", sequence_id=10)  # same key, same partition: a duplicate
    assert (dup.ledger_id, dup.entry_id, dup.partition) == (-1, -1, first.partition)
    hooks = [dedup_of(b, f"persistent://public/default/pay-partition-{i}") for i in range(3)]
    assert [h.highest_sequence_persisted() for h in hooks].count({"pp": 10}) == 1
    b.close()
    b2 = restart(store)
    part = f"persistent://public/default/pay-partition-{first.partition}"
    assert dedup_of(b2, part).highest_sequence_persisted() == {"pp": 10}


# -- stateful test against a naive model ---------------------------------------------------------------


class DedupMachine(RuleBasedStateMachine):
    """Publishes (single, batch, retries, holes), failed appends, crashes, clean restarts and
    time passing, against a model: per producer, the highest sequence id stored.

    Oracle: with no write in flight a publish is stored iff its first sequence id is above the
    model's value, and nothing else is ever stored; after any restart the maps equal the model.
    """

    NAMES = ("a", "b", "c")

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0)
        self.store = FaultInjectingStore(MemoryStore())
        self.model: dict[str, int] = {}
        self.expected_log: list[tuple[str, int, int]] = []
        self._open()

    def _open(self) -> None:
        self.broker = make_broker(self.store, self.clock, deduplication_entries_interval=4,
                                  deduplication_snapshot_frequency_in_seconds=30,
                                  deduplication_snapshot_interval_seconds=60,
                                  managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=5))
        hold_data(self.broker)
        hold = self.broker.subscribe(T, "hold", initial_position=InitialPosition.EARLIEST)
        assert isinstance(hold, Subscription)
        self.hold = hold
        self.producers = {n: producer(self.broker, n) for n in self.NAMES}

    @property
    def dedup(self) -> MessageDeduplication:
        return dedup_of(self.broker)

    @rule(name=st.sampled_from(NAMES), back=st.integers(0, 3), ahead=st.integers(0, 3), n=st.integers(1, 3),
          fail=st.booleans())
    def publish(self, name: str, back: int, ahead: int, n: int, fail: bool) -> None:
        p = self.producers[name]
        last = self.model.get(name, -1)
        seq = max(last - back + ahead if back else last + 1 + ahead, 0)
        is_dup = seq <= last
        if fail and not is_dup:
            self.store.fail_at, self.store.mode = self.store.writes, "raise"
        try:
            if n == 1:
                mid = p.send(b"x", sequence_id=seq)
                written = mid != NO_ID
            else:
                ids = p.send_batch([b"x"] * n, sequence_id=seq)
                written = ids[0] != NO_ID
        except InjectedFault:
            assert fail and not is_dup
            written = False
        finally:
            self.store.fail_at = None
        if fail and not is_dup:
            assert not written
            return
        assert written == (not is_dup), f"seq {seq} of {name} with model {last}"
        if written:
            self.model[name] = seq + n - 1
            self.expected_log.append((name, seq, seq + n - 1))

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        if clean:
            self.broker.close()
        self._open()
        assert self.dedup.highest_sequence_persisted() == self.model
        assert self.dedup.highest_sequence_pushed() == self.model
        for name, p in self.producers.items():
            assert p.last_sequence_id == self.model.get(name, -1)

    @rule(seconds=st.integers(1, 90))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds * 1000)
        self.broker.run_due_tasks()

    @invariant()
    def consistent(self) -> None:
        d = self.dedup
        d._check()
        with self.hold._lock:
            self.hold._dispatcher._check()
        assert d.highest_sequence_persisted() == self.model
        ml = topic_of(self.broker).managed_ledger
        ml._check()
        assert stored_ids(ml) == self.expected_log
        if d.cursor is not None:
            assert d.cursor.properties == expected_maps(ml, d.cursor.mark_delete_position)


TestDedupStateful = DedupMachine.TestCase
TestDedupStateful.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
