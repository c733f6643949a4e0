"""Retention of consumed ledgers and background trimming (REFERENCE.md 2.11).

Pulsar's rules (``ManagedLedgerImpl.internalTrimConsumedLedgers``, 3.x): the ledgers strictly
below the slowest durable cursor's persisted mark-delete ledger (the next one when it sits on
the last entry of a closed ledger) are candidates, oldest first; the current ledger never goes;
a candidate goes while it is expired (``now - closed > retention_time_ms``) or over quota (what
stays is still at least ``retention_size_in_mb``); -1 is unlimited, 0 (the default) keeps
nothing consumed. Passes run on the factory's executor, never on the acknowledging thread.
Tests are named after the Pulsar tests they mirror (``ManagedLedgerTest``, ``ManagedCursorTest``,
``NonDurableCursorTest``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import pytest

from mledger import EARLIEST, LATEST, ConfigError, ManualClock
from mledger.core import ManagedLedgerConfig, Position
from mledger.managed_ledger import InitialPosition, ManagedLedger, ManagedLedgerFactory
from mledger.storage import HeldWriteStore, MemoryStore, SqliteStore

MB = 1024 * 1024
HOUR_MS = 3600 * 1000


def open_ml(
    clock: ManualClock | None = None,
    store: MemoryStore | SqliteStore | None = None,
    executor: Executor | None = None,
    **config: Any,
) -> ManagedLedger:
    factory = ManagedLedgerFactory(store if store is not None else MemoryStore(), clock=clock, executor=executor)
    return factory.open("ml", ManagedLedgerConfig(**config))


def settle(ml: ManagedLedger) -> list[int]:
    """Wait for the trimming passes queued so far (they run in the background)."""
    return ml.trim_consumed_ledgers_in_background().result(timeout=10)


def closed_ledgers(ml: ManagedLedger) -> list[int]:
    return [li.ledger_id for li in ml.ledger_infos() if li.ledger_id != ml.current_ledger_id]


class ManualExecutor(Executor):
    """Runs submitted work only when told to: shows what runs off the caller's thread."""

    def __init__(self) -> None:
        self.queue: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.queue.append((lambda: future.set_result(fn(*args, **kwargs)), ()))
        return future

    def run_all(self) -> int:
        ran = 0
        while self.queue:
            task, _ = self.queue.pop(0)
            task()
            ran += 1
        return ran


# -- configuration ------------------------------------------------------------------------


def test_retention_defaults_and_limits_are_pulsars() -> None:
    config = ManagedLedgerConfig()
    assert (config.retention_time_ms, config.retention_size_in_mb) == (0, 0)
    assert config.retain_without_subscriptions is False  # Pulsar's rule, not the embedded one
    ManagedLedgerConfig(retention_time_ms=-1, retention_size_in_mb=-1)  # unlimited
    for bad in ({"retention_time_ms": -2}, {"retention_size_in_mb": -5}):
        with pytest.raises(ConfigError, match="must be >= -1"):
            ManagedLedgerConfig(**bad)


# -- the rules ------------------------------------------------------------------------------


# ManagedLedgerTest.testRetention
def test_retention_keeps_consumed_ledgers_across_a_reopen() -> None:
    store = MemoryStore()
    config = {"retention_size_in_mb": 10, "retention_time_ms": HOUR_MS, "max_entries_per_ledger": 1}
    ml = open_ml(store=store, **config)
    c1 = ml.open_cursor("c1")
    ml.add_entry(b"iamaverylongmessagethatshouldberetained")
    c1.skip_entries(1)
    settle(ml)
    ml.close()
    ml = open_ml(store=store, **config)
    c1 = ml.get_cursor("c1")
    short = ml.add_entry(b"shortmessage")
    c1.skip_entries(1)
    settle(ml)
    assert len(ml.ledger_infos()) > 1
    assert ml.total_size > ml.ledger_infos()[-2].size  # more than the ledger of "shortmessage"
    assert ml.ledger_infos()[-2].ledger_id == short.ledger_id


# ManagedLedgerTest.testNoRetention
def test_without_retention_consumed_ledgers_go() -> None:
    store = MemoryStore()
    config = {"retention_size_in_mb": 0, "max_entries_per_ledger": 1}
    ml = open_ml(store=store, **config)
    c1 = ml.open_cursor("c1noretention")
    ml.add_entry(b"iamaverylongmessagethatshouldnotberetained")
    c1.skip_entries(1)
    settle(ml)
    ml.close()
    ml = open_ml(store=store, **config)
    c1 = ml.get_cursor("c1noretention")
    ml.add_entry(b"shortmessage")
    c1.skip_entries(1)
    settle(ml)
    assert closed_ledgers(ml) == []  # only the (empty) current ledger is left
    assert ml.total_size == 0


# ManagedLedgerTest.testDeletionAfterRetention (with a manual clock instead of a sleep)
def test_time_retention_expires_strictly_after_the_limit() -> None:
    clock = ManualClock(1_000_000)
    ml = open_ml(clock, retention_time_ms=1000, retention_size_in_mb=-1, max_entries_per_ledger=1)
    c1 = ml.open_cursor("c1noretention")
    p = ml.add_entry(b"iamaverylongmessagethatshouldnotberetained")  # closed at t=1_000_000
    c1.skip_entries(1)
    assert settle(ml) == []
    clock.advance(1000)  # now - closed == retention: not yet expired (Pulsar's strict ">")
    assert settle(ml) == [] and closed_ledgers(ml) == [p.ledger_id]
    clock.advance(1)
    assert settle(ml) == [p.ledger_id]
    assert closed_ledgers(ml) == [] and ml.total_size == 0


# ManagedLedgerTest.testDeletionAfterLedgerClosedAndRetention
def test_ledger_consumed_by_every_cursor_goes_once_closed_and_expired() -> None:
    clock = ManualClock(0)
    ml = open_ml(clock, retention_size_in_mb=0, retention_time_ms=1000, max_entries_per_ledger=10)
    c1, c2 = ml.open_cursor("testCursor1"), ml.open_cursor("testCursor2")
    p = ml.add_entry(b"iamaverylongmessagethatshouldnotberetained")
    c1.skip_entries(1)
    c2.skip_entries(1)
    assert settle(ml) == []  # the current ledger is never trimmed
    ml.roll_over()  # the ledger closes: Pulsar's ledgerClosed queues a pass
    clock.advance(1500)
    settle(ml)
    assert p.ledger_id not in [li.ledger_id for li in ml.ledger_infos()]
    assert ml.total_size == 0


# ManagedLedgerTest.testInfiniteRetention
def test_infinite_retention_keeps_everything() -> None:
    store = MemoryStore()
    clock = ManualClock(0)
    config = {"retention_size_in_mb": -1, "retention_time_ms": -1, "max_entries_per_ledger": 1}
    ml = open_ml(clock, store, **config)
    c1 = ml.open_cursor("c1")
    first = ml.add_entry(b"iamaverylongmessagethatshouldberetained")
    c1.skip_entries(1)
    ml.close()
    ml = open_ml(clock, store, **config)
    c1 = ml.get_cursor("c1")
    ml.add_entry(b"shortmessage")
    c1.skip_entries(1)
    clock.advance(10 * 365 * 24 * HOUR_MS)
    settle(ml)
    assert closed_ledgers(ml)[0] == first.ledger_id and len(closed_ledgers(ml)) == 2
    assert ml.total_size == sum(li.size for li in ml.ledger_infos()) > 0


# ManagedLedgerTest.testRetentionSize (the 3.x rule: a ledger goes only if what stays is still
# at least the quota)
def test_size_retention_keeps_the_newest_ledgers_up_to_the_quota() -> None:
    ml = open_ml(retention_size_in_mb=5, retention_time_ms=HOUR_MS, max_entries_per_ledger=1)
    c1 = ml.open_cursor("c1")
    message = b"a" * MB
    positions = [ml.add_entry(message) for _ in range(10)]
    assert len(closed_ledgers(ml)) == 10  # nothing acknowledged: nothing trimmed
    assert len(c1.read_entries(10)) == 10
    c1.mark_delete(positions[-1])
    settle(ml)
    # Each ledger holds a bit more than 1 MiB (the entry's framing): keeping five keeps at
    # least 5 MiB, keeping four would not.
    assert closed_ledgers(ml) == [p.ledger_id for p in positions[5:]]
    assert 5 * MB <= ml.total_size < 6 * MB


def test_either_limit_passed_is_enough_and_a_retained_ledger_stops_the_pass() -> None:
    # Oldest first; the first ledger that is neither expired nor over quota keeps every later one.
    clock = ManualClock(0)
    ml = open_ml(clock, retention_size_in_mb=-1, retention_time_ms=10_000, max_entries_per_ledger=1)
    cursor = ml.open_cursor("c")
    old = ml.add_entry(b"old")  # closed at t=0
    clock.advance(5_000)
    mid = ml.add_entry(b"mid")  # closed at t=5000
    clock.advance(5_000)
    new = ml.add_entry(b"new")  # closed at t=10000
    cursor.mark_delete(new)
    clock.advance(1)  # t=10001: only the first is older than 10 s
    settle(ml)
    assert closed_ledgers(ml) == [mid.ledger_id, new.ledger_id]
    assert old.ledger_id not in [li.ledger_id for li in ml.ledger_infos()]


def test_only_ledgers_below_the_slowest_cursor_are_candidates() -> None:
    clock = ManualClock(0)
    ml = open_ml(clock, retention_time_ms=0, retention_size_in_mb=0, max_entries_per_ledger=2)
    fast, slow = ml.open_cursor("fast"), ml.open_cursor("slow")
    p = ml.add_entries([b"x"] * 6)  # ledgers of 2, 2, 2 and an empty current one
    clock.advance(1)
    fast.mark_delete(p[5])
    slow.mark_delete(p[2])  # inside the second ledger: only the first is consumed by both
    settle(ml)
    assert closed_ledgers(ml) == [p[2].ledger_id, p[4].ledger_id]
    slow.mark_delete(p[3])  # the last entry of the second ledger: it is consumed too
    settle(ml)
    assert closed_ledgers(ml) == [p[4].ledger_id]


# ManagedLedgerTest.testTimestampOnWorkingLedger
def test_a_ledger_timestamp_is_its_close_time_and_zero_while_open() -> None:
    clock = ManualClock(100)
    store = MemoryStore()
    ml = open_ml(clock, store, retention_size_in_mb=10, retention_time_ms=HOUR_MS, max_entries_per_ledger=1)
    ml.open_cursor("c1")
    ml.add_entry(b"msg1")
    clock.advance(50)
    ml.add_entry(b"msg02")
    infos = ml.ledger_infos()
    assert [li.timestamp for li in infos] == [100, 150, 0]  # closed at 100 and 150; current open
    assert ml.stats().last_ledger_created_timestamp == 150
    ml.close()
    clock.advance(50)
    reopened = open_ml(clock, store, max_entries_per_ledger=1)
    # The last ledger (the empty current one) is dropped; the stored ledgers keep their times.
    assert [li.timestamp for li in reopened.ledger_infos()] == [100, 150, 0]


# ManagedLedgerTest.testRetention0WithEmptyLedger
def test_first_position_never_passes_the_last_after_trimming_an_emptied_ml() -> None:
    store = MemoryStore()
    ml = open_ml(store=store, retention_time_ms=0, max_entries_per_ledger=1)
    c1 = ml.open_cursor("c1noretention")
    ml.add_entry(b"message1")
    c1.skip_entries(1)
    ml.close()
    ml = open_ml(store=store, retention_time_ms=0, max_entries_per_ledger=1)
    ml.delete_cursor("c1noretention")
    settle(ml)
    assert ml.first_position().ledger_id <= ml.last_confirmed_entry.ledger_id


# ManagedLedgerTest.testRetention0WithEmptyLedgerWithoutCursors: without durable cursors every
# closed ledger counts as consumed (internalTrimLedgers: slowest reader = current ledger + 1).
def test_without_durable_cursors_a_rollover_trims_every_closed_ledger() -> None:
    executor = ManualExecutor()
    ml = open_ml(executor=executor, max_entries_per_ledger=1)  # retention 0/0, Pulsar's default
    reader = ml.open_non_durable_cursor(EARLIEST)  # readers hold nothing back
    p = ml.add_entries([b"a", b"b"])
    assert closed_ledgers(ml) == [p[0].ledger_id, p[1].ledger_id]  # nothing runs on this thread
    assert executor.run_all() >= 1  # the passes the rollovers queued
    assert closed_ledgers(ml) == []
    assert reader.mark_delete_position == p[1]  # moved past the trimmed ledgers
    assert reader.read_entries(10) == []
    after = ml.add_entry(b"c")
    assert [e.position for e in reader.read_entries(10)] == [after]


def test_without_durable_cursors_retention_alone_decides_what_stays() -> None:
    clock = ManualClock(0)
    ml = open_ml(clock, retention_time_ms=HOUR_MS, retention_size_in_mb=-1, max_entries_per_ledger=1)
    p = ml.add_entries([b"a", b"b"])
    assert settle(ml) == []
    assert closed_ledgers(ml) == [p[0].ledger_id, p[1].ledger_id]
    clock.advance(HOUR_MS + 1)
    assert settle(ml) == [p[0].ledger_id, p[1].ledger_id]  # as the broker's retention check does


def test_a_system_cursor_alone_holds_trimming_at_its_mark_delete() -> None:
    # Pulsar's pulsar.dedup cursor is durable: a topic with only it trims up to its mark-delete.
    ml = open_ml(max_entries_per_ledger=1)
    dedup = ml.open_cursor("pulsar.dedup", InitialPosition.EARLIEST)
    dedup.counts_as_consumer = False
    p = ml.add_entries([b"a", b"b", b"c"])
    assert settle(ml) == []
    dedup.mark_delete(p[0])
    settle(ml)
    assert closed_ledgers(ml) == [p[1].ledger_id, p[2].ledger_id]


def test_retain_without_subscriptions_keeps_what_nobody_subscribed_to() -> None:
    # The embedded setting (earlier mledger versions' behaviour): without a durable consumer
    # cursor (a system cursor does not count) nothing is trimmed, whatever the retention.
    clock = ManualClock(0)
    ml = open_ml(clock, max_entries_per_ledger=1, retain_without_subscriptions=True)
    dedup = ml.open_cursor("pulsar.dedup", InitialPosition.EARLIEST)
    dedup.counts_as_consumer = False
    reader = ml.open_non_durable_cursor(EARLIEST)
    p = ml.add_entries([b"a", b"b"])
    dedup.mark_delete(p[1])
    clock.advance(HOUR_MS)
    assert settle(ml) == []
    assert closed_ledgers(ml) == [p[0].ledger_id, p[1].ledger_id]
    assert [e.position for e in reader.read_entries(10)] == p
    sub = ml.open_cursor("sub", InitialPosition.EARLIEST)  # a subscription: trimming as usual
    sub.mark_delete(p[0])
    settle(ml)
    assert closed_ledgers(ml) == [p[1].ledger_id]


# -- off the acknowledgement path -------------------------------------------------------------


def test_an_acknowledgement_never_trims_on_the_callers_thread() -> None:
    executor = ManualExecutor()
    ml = open_ml(executor=executor, max_entries_per_ledger=2)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 4)  # two full ledgers (each rollover queued a pass)
    executor.run_all()
    cursor.mark_delete(p[1])  # the first ledger is consumed: a pass is queued, not run
    assert [li.ledger_id for li in ml.ledger_infos()][0] == p[0].ledger_id
    assert executor.run_all() == 1
    assert [li.ledger_id for li in ml.ledger_infos()][0] == p[2].ledger_id


def test_acknowledgements_inside_one_ledger_queue_no_pass() -> None:
    # Pulsar's onCursorMarkDeletePositionUpdated: only a slowest cursor changing ledger triggers.
    executor = ManualExecutor()
    ml = open_ml(executor=executor, max_entries_per_ledger=1000)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 100)
    cursor.mark_delete(p[0])
    executor.run_all()
    for position in p[1:]:
        cursor.delete(position)
    cursor.delete([p[50]])
    assert executor.queue == []


def test_requests_while_a_pass_is_queued_share_it() -> None:
    executor = ManualExecutor()
    ml = open_ml(executor=executor)
    first = ml.trim_consumed_ledgers_in_background()
    assert ml.trim_consumed_ledgers_in_background() is first
    executor.run_all()
    assert first.result() == []
    assert ml.trim_consumed_ledgers_in_background() is not first


def test_trimming_follows_the_persisted_mark_delete_not_the_throttled_one() -> None:
    # Pulsar's cursor container holds the position a mark-delete persisted: a crash can never
    # recover a cursor into a ledger that is gone.
    clock = ManualClock(0)
    ml = open_ml(clock, max_entries_per_ledger=2, throttle_mark_delete=1.0)
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = ml.add_entries([b"x"] * 4)
    cursor.mark_delete(p[0])  # persisted (the first persist is never throttled)
    cursor.mark_delete(p[3])  # in memory only, within the second of the rate limit
    assert cursor.persistent_mark_delete_position == p[0]
    settle(ml)
    assert closed_ledgers(ml) == [p[0].ledger_id, p[2].ledger_id]
    clock.advance(1000)
    assert cursor.flush()
    settle(ml)
    assert closed_ledgers(ml) == []


# -- resets and seeks into retained ledgers ---------------------------------------------------


def retained_topic(clock: ManualClock | None = None) -> tuple[ManagedLedger, list[Position]]:
    ml = open_ml(clock, retention_time_ms=-1, retention_size_in_mb=-1, max_entries_per_ledger=3)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    p = [ml.add_entry(b"m%d" % i) for i in range(8)]  # ledgers of 3, 3, 2
    cursor.mark_delete(p[-1])  # everything consumed, everything retained
    settle(ml)
    assert cursor.number_of_entries_in_backlog() == 0
    return ml, p


# ManagedCursorTest.testResetCursor / PersistentSubscription.resetCursor into retained data
def test_reset_cursor_into_retained_ledgers_counts_the_backlog_again() -> None:
    ml, p = retained_topic()
    cursor = ml.get_cursor("sub")
    cursor.reset_cursor(p[4])
    assert cursor.read_position == p[4]
    assert cursor.mark_delete_position == p[3]
    assert cursor.number_of_entries_in_backlog(precise=True) == 4
    assert cursor.number_of_entries_in_backlog(precise=False) == 4
    assert [e.data for e in cursor.read_entries(10)] == [b"m4", b"m5", b"m6", b"m7"]
    cursor.reset_cursor(EARLIEST)
    assert cursor.read_position == p[0]
    assert cursor.mark_delete_position == Position(p[0].ledger_id, -1)
    assert cursor.number_of_entries_in_backlog(precise=True) == 8
    assert cursor.number_of_entries_in_backlog(precise=False) == 8
    cursor._check()
    # A reset moves the slowest cursor back: the retained ledgers stay while it consumes again.
    settle(ml)
    assert [li.ledger_id for li in ml.ledger_infos()] == sorted({q.ledger_id for q in p})


def test_reset_cursor_into_an_expired_ledger_lands_on_the_first_retained_entry() -> None:
    clock = ManualClock(0)
    ml = open_ml(clock, retention_time_ms=1000, retention_size_in_mb=-1, max_entries_per_ledger=3)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    p = [ml.add_entry(b"m%d" % i) for i in range(3)]  # first ledger closed at t=0
    clock.advance(2000)
    p += [ml.add_entry(b"m%d" % i) for i in range(3, 6)]  # second ledger closed at t=2000
    cursor.mark_delete(p[-1])
    settle(ml)
    assert closed_ledgers(ml) == [p[3].ledger_id]  # the first one expired
    cursor.reset_cursor(p[1])  # no longer stored: Pulsar resets to the next valid position
    assert cursor.read_position == p[3]
    assert cursor.number_of_entries_in_backlog() == 3


def test_seek_into_retained_ledgers_follows_pulsars_seek() -> None:
    ml, p = retained_topic()
    cursor = ml.get_cursor("sub")
    cursor.reset_cursor(p[2])
    cursor.seek(p[6])  # forward: the read position only
    assert (cursor.mark_delete_position, cursor.read_position) == (p[1], p[6])
    cursor.seek(p[0])  # at or below the mark-delete: the entry after it
    assert cursor.read_position == p[2]
    assert cursor.number_of_entries_in_backlog() == 6


def test_reset_cursor_by_time_into_retained_ledgers(tmp_path: Any) -> None:
    from mledger.broker import Broker, BrokerConfig

    clock = ManualClock(1_000)
    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"), clock=clock)
    config = ManagedLedgerConfig(max_entries_per_ledger=2, retention_time_ms=-1, retention_size_in_mb=-1)
    broker = Broker(factory, BrokerConfig(managed_ledger_config=config), clock=clock)
    topic = "persistent://public/default/orders"
    sub = broker.subscribe(topic, "billing", initial_position=InitialPosition.EARLIEST)
    consumer = sub.add_consumer("c")
    producer = broker.create_producer(topic)
    ids = []
    for i in range(6):  # published at 1000, 2000, ... 6000
        ids.append(producer.send(b"m%d" % i))
        clock.advance(1_000)
    for message in consumer.receive(10):
        consumer.acknowledge(message.message_id)
    ml = broker.get_topic(topic).managed_ledger  # type: ignore[union-attr]
    settle(ml)
    assert sub.cursor.number_of_entries_in_backlog() == 0
    # PersistentMessageFinder: the newest entry published before 3500 is m2; reset to the next.
    target = sub.reset_cursor_by_time(3_500)
    assert target == ids[3].position
    assert sub.cursor.number_of_entries_in_backlog() == 3
    assert [m.data for m in consumer.receive(10)] == [b"m3", b"m4", b"m5"]
    assert sub.reset_cursor_by_time(0) == ids[0].position  # before everything: the first entry
    assert sub.cursor.number_of_entries_in_backlog() == 6
    assert sub.reset_cursor_by_time(10_000) == LATEST  # after everything: nothing to read
    assert sub.cursor.number_of_entries_in_backlog() == 0
    broker.close()
    factory.close()


# -- non-durable cursors ------------------------------------------------------------------------


# NonDurableCursorTest.testBacklogStatsWhenDroppingData (the durable half)
def test_trimming_moves_non_durable_cursors_past_the_dropped_ledgers() -> None:
    ml = open_ml(max_entries_per_ledger=1)
    c1 = ml.open_cursor("c1")
    reader = ml.open_non_durable_cursor(EARLIEST)
    positions = [ml.add_entry(b"entry-%d" % i) for i in range(10)]
    assert reader.number_of_entries() == 10
    assert reader.number_of_entries_in_backlog(precise=True) == 10
    c1.mark_delete(positions[4])
    assert c1.number_of_entries_in_backlog(precise=True) == 5
    settle(ml)
    assert reader.number_of_entries() == 5
    assert reader.number_of_entries_in_backlog(precise=True) == 5
    assert reader.number_of_entries_in_backlog(precise=False) == 5
    reader._check()


# -- the broker's periodic retention check ---------------------------------------------------------


def test_broker_checks_retention_every_retention_check_interval() -> None:
    # Pulsar's BrokerService.checkConsumedLedgers every retentionCheckIntervalInSeconds: ledgers
    # whose retention time passed go without waiting for another acknowledgement or rollover.
    from mledger.broker import Broker, BrokerConfig

    clock = ManualClock(0)
    executor = ManualExecutor()
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock, executor=executor)
    config = ManagedLedgerConfig(max_entries_per_ledger=2, retention_time_ms=60_000, retention_size_in_mb=-1)
    broker = Broker(
        factory, BrokerConfig(managed_ledger_config=config, retention_check_interval_in_seconds=30), clock=clock
    )
    topic = "persistent://public/default/retained"
    sub = broker.subscribe(topic, "s", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(4)]  # two closed ledgers at t=0
    sub.clear_backlog()
    executor.run_all()
    ml = broker.get_topic(topic).managed_ledger  # type: ignore[union-attr]
    assert closed_ledgers(ml) == [ids[0].ledger_id, ids[2].ledger_id]  # retained
    clock.advance(29_000)
    broker.run_due_tasks()
    assert executor.queue == []  # not 30 s since the broker started
    clock.advance(31_001)  # t=60001: expired, but nothing asked for a pass yet
    assert executor.queue == []
    broker.run_due_tasks()  # a check is due: a pass is queued on every open topic
    assert executor.run_all() == 1
    assert closed_ledgers(ml) == []
    broker.close()


def test_broker_retention_check_trims_a_topic_without_subscriptions() -> None:
    # A topic only produced to: its closed ledgers go once retention no longer covers them.
    from mledger.broker import Broker, BrokerConfig

    clock = ManualClock(0)
    executor = ManualExecutor()
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock, executor=executor)
    config = ManagedLedgerConfig(max_entries_per_ledger=2, retention_time_ms=60_000, retention_size_in_mb=-1)
    broker = Broker(
        factory, BrokerConfig(managed_ledger_config=config, retention_check_interval_in_seconds=30), clock=clock
    )
    topic = "persistent://public/default/unsubscribed"
    producer = broker.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(5)]
    executor.run_all()
    ml = broker.get_topic(topic).managed_ledger  # type: ignore[union-attr]
    assert closed_ledgers(ml) == [ids[0].ledger_id, ids[2].ledger_id]  # retained for 60 s
    clock.advance(60_001)
    broker.run_due_tasks()
    assert executor.run_all() == 1
    assert closed_ledgers(ml) == []
    assert ml.ledger_infos()[0].ledger_id == ids[4].ledger_id
    broker.close()


# -- retention policies on namespaces and topics (pulsar-admin set-retention) ----------------------


def _broker(clock: ManualClock | None = None, **ml_config: Any) -> Any:
    from mledger.broker import Broker, BrokerConfig

    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    config = ManagedLedgerConfig(max_entries_per_ledger=2, **ml_config)
    return Broker(factory, BrokerConfig(managed_ledger_config=config), clock=clock)


def test_retention_policy_in_force_is_the_topics_else_the_namespaces_else_the_brokers() -> None:
    from mledger.broker import RetentionPolicies

    broker = _broker(retention_time_ms=120_000, retention_size_in_mb=5)
    topic = "persistent://public/default/orders"
    broker.create_topic(topic)
    ml = broker.get_topic(topic).managed_ledger
    assert broker.topic_retention(topic) is None
    assert broker.topic_retention(topic, applied=True) == RetentionPolicies(2, 5)
    broker.set_namespace_retention("public/default", RetentionPolicies(180, 10_240))
    assert broker.namespace_retention("public/default") == RetentionPolicies(180, 10_240)
    assert broker.topic_retention(topic, applied=True) == RetentionPolicies(180, 10_240)
    assert (ml.config.retention_time_ms, ml.config.retention_size_in_mb) == (180 * 60_000, 10_240)
    broker.set_topic_retention(topic, RetentionPolicies(-1, -1))
    assert broker.topic_retention(topic) == RetentionPolicies(-1, -1)
    assert (ml.config.retention_time_ms, ml.config.retention_size_in_mb) == (-1, -1)
    broker.set_namespace_retention("public/default", None)  # the topic's own policy still rules
    assert (ml.config.retention_time_ms, ml.config.retention_size_in_mb) == (-1, -1)
    broker.set_topic_retention(topic, None)
    assert (ml.config.retention_time_ms, ml.config.retention_size_in_mb) == (120_000, 5)  # exact default
    broker.close()


def test_topic_retention_policy_survives_a_restart_and_covers_partitions() -> None:
    from mledger.broker import Broker, BrokerConfig, RetentionPolicies

    store = MemoryStore()
    broker = Broker(ManagedLedgerFactory(store))
    broker.create_topic("persistent://public/default/parts", partitions=2)
    broker.set_topic_retention("persistent://public/default/parts", RetentionPolicies(60, -1))
    assert broker.topic_retention("persistent://public/default/parts-partition-1") == RetentionPolicies(60, -1)
    broker.close()
    broker = Broker(ManagedLedgerFactory(store), BrokerConfig())
    partition = broker.get_topic("persistent://public/default/parts-partition-0")
    assert partition.managed_ledger.config.retention_time_ms == 3_600_000  # type: ignore[union-attr]
    broker.delete_topic("persistent://public/default/parts", force=True)
    broker.create_topic("persistent://public/default/parts", partitions=2)
    assert broker.topic_retention("persistent://public/default/parts") is None
    broker.close()


@pytest.mark.parametrize(
    "time_minutes, size_mb, message",
    [
        (-2, 10, "time limit must be >= -1"),
        (10, -2, "size limit must be >= -1"),
        (0, 10, "Setting a single time or size limit to 0 is invalid"),
        (10, 0, "Use the value of -1 instead of 0"),
    ],
)
def test_invalid_retention_policies_are_refused_with_pulsars_message(time_minutes: int, size_mb: int, message: str) -> None:
    from mledger import PreconditionFailedError
    from mledger.broker import RetentionPolicies

    broker = _broker()
    broker.create_topic("persistent://public/default/t")
    for call in (
        lambda: broker.set_topic_retention("persistent://public/default/t", RetentionPolicies(time_minutes, size_mb)),
        lambda: broker.set_namespace_retention("public/default", RetentionPolicies(time_minutes, size_mb)),
    ):
        with pytest.raises(PreconditionFailedError, match=message) as err:
            call()
        assert err.value.http_status == 412
    assert broker.topic_retention("persistent://public/default/t", applied=True) == RetentionPolicies(0, 0)
    broker.close()


def test_retention_of_a_missing_topic_is_not_found() -> None:
    from mledger import NotFoundError
    from mledger.broker import RetentionPolicies

    broker = _broker()
    with pytest.raises(NotFoundError, match="Topic not found"):
        broker.set_topic_retention("persistent://public/default/nope", RetentionPolicies(1, 1))
    with pytest.raises(NotFoundError):
        broker.topic_retention("persistent://public/default/nope")
    broker.close()


def test_a_policy_change_lets_retained_ledgers_go_in_the_background() -> None:
    from mledger.broker import RetentionPolicies

    clock = ManualClock(0)
    broker = _broker(clock, retention_time_ms=-1, retention_size_in_mb=-1)
    topic = "persistent://public/default/kept"
    sub = broker.subscribe(topic, "s", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(4)]
    sub.clear_backlog()
    ml = broker.get_topic(topic).managed_ledger
    settle(ml)
    assert closed_ledgers(ml) == [ids[0].ledger_id, ids[2].ledger_id]
    clock.advance(2 * 60_000)
    broker.set_topic_retention(topic, RetentionPolicies(1, -1))  # one minute: both expired
    settle(ml)
    assert closed_ledgers(ml) == []
    broker.close()


def test_a_reset_back_into_retained_ledgers_holds_trimming_until_it_is_persisted() -> None:
    # Regression (a stress test's replay of a trimmed entry): a reset applies its mark-delete,
    # ends its revision and only then persists; a pass in that window followed the old
    # persisted mark-delete and deleted the ledgers the cursor had just moved back into.
    clock = ManualClock(0)
    store = HeldWriteStore(MemoryStore(), hold_timeout=10)
    executor = ManualExecutor()
    ml = open_ml(clock, store, executor, retention_time_ms=1000, retention_size_in_mb=-1, max_entries_per_ledger=3)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    p = [ml.add_entry(b"m%d" % i) for i in range(7)]  # two closed ledgers, the third current
    cursor.mark_delete(p[5])
    executor.run_all()
    assert ml.trim_consumed_ledgers() == []  # consumed, but retained for 1 s
    clock.advance(2000)  # both closed ledgers expired
    store.hold_writes()
    resetter = threading.Thread(target=cursor.reset_cursor, args=(p[1],))
    resetter.start()
    store.wait_until_held()  # the reset is applied, its state not yet persisted
    assert cursor.mark_delete_position == p[0] and cursor.persistent_mark_delete_position == p[5]
    assert cursor.is_resetting
    assert ml.trim_consumed_ledgers() == []  # the pass gives way
    store.release()
    resetter.join(timeout=10)
    assert not resetter.is_alive() and not cursor.is_resetting
    assert cursor.persistent_mark_delete_position == p[0]
    assert [e.data for e in cursor.replay_entries(p[1:3])] == [b"m1", b"m2"]
    assert [e.data for e in cursor.read_entries(10)] == [b"m%d" % i for i in range(1, 7)]
    executor.run_all()
    assert closed_ledgers(ml) == [p[0].ledger_id, p[3].ledger_id]  # still the slowest cursor's
    cursor._check()
