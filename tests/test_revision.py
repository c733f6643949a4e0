"""The cursor state revision controller (seeds/002): resets that in-flight reads cannot undo.

Scenario-1 and Scenario-2 of the seed are reproduced step by step with a store that holds a
read's I/O until the test releases it (no sleeping). Scenario-3 (Key_Shared recently joined
consumers) lives with the dispatcher tests in the broker suite.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mledger import (
    ConcurrentResetError,
    CursorModifyingError,
    CursorStateRevisionController,
    InitialPosition,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManualClock,
    MemoryStore,
    Position,
)
from mledger.storage import HeldReadStore

# -- the controller on its own -------------------------------------------------------------------


def test_start_revision_returns_number_and_refuses_reentry() -> None:
    rc = CursorStateRevisionController()
    assert rc.revision_num == 0 and not rc.is_under_revision
    assert rc.start_revision() == 0
    assert rc.is_under_revision
    assert rc.start_revision() == -1  # non-reentrant
    assert rc.stats().refused_revisions == 1


def test_end_revision_increments_runs_editor_and_refuses_without_start() -> None:
    rc = CursorStateRevisionController()
    assert rc.end_revision(lambda: None) == -1
    ran: list[bool] = []
    rc.start_revision()
    assert rc.end_revision(lambda: ran.append(rc.is_under_revision)) == 1
    assert ran == [False]  # the flag is cleared before the editor runs, under the same lock
    assert rc.revision_num == 1 and not rc.is_under_revision
    assert rc.stats().epoch_increase_count == 1


def test_editor_runs_under_the_controller_lock() -> None:
    lock = threading.RLock()
    rc = CursorStateRevisionController(lock)
    seen: list[bool] = []

    def editor() -> None:
        seen.append(lock._is_owned())  # type: ignore[attr-defined]

    rc.start_revision()
    rc.end_revision(editor)
    assert seen == [True]


def test_is_revision_num_outdated() -> None:
    rc = CursorStateRevisionController()
    n = rc.revision_num
    assert not rc.is_revision_num_outdated(n)
    rc.start_revision()
    assert rc.is_revision_num_outdated(n)  # a revision is running
    rc.end_revision()
    assert rc.is_revision_num_outdated(n)  # the number moved on
    assert not rc.is_revision_num_outdated(rc.revision_num)


def test_editor_failure_still_ends_the_revision() -> None:
    rc = CursorStateRevisionController()
    rc.start_revision()

    def boom() -> None:
        raise RuntimeError("editor failed")

    with pytest.raises(RuntimeError):
        rc.end_revision(boom)
    assert not rc.is_under_revision and rc.revision_num == 1


def test_stuck_revision_is_logged_once_with_task_state(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0)
    rc = CursorStateRevisionController(clock=clock, warn_after_ms=1_000, name="t/sub")
    rc.start_revision()
    assert rc.stats().epoch_increase_task_state == 1
    assert not rc.check_stuck()
    clock.advance(1_001)
    with caplog.at_level(logging.WARNING, logger="mledger.managed_ledger._revision"):
        assert rc.check_stuck()
        assert rc.check_stuck()
    assert len([r for r in caplog.records if "stuck" in r.getMessage()]) == 1
    assert rc.stats().open_revision_ms == 1_001
    rc.end_revision()
    assert rc.stats().epoch_increase_task_state == 0


# -- cursor integration -------------------------------------------------------------------------


@pytest.fixture
def held() -> Iterator[tuple[HeldReadStore, ManagedLedger, ManagedCursor, list[Position]]]:
    store = HeldReadStore(MemoryStore(), hold_timeout=10.0)
    factory = ManagedLedgerFactory(store, clock=ManualClock(0))
    ml = factory.open("public/default/persistent/rev", ManagedLedgerConfig())
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    positions = ml.add_entries([b"m%d" % i for i in range(10)])
    yield store, ml, cursor, positions
    store.release()


def test_scenario_1_replay_read_racing_a_reset_delivers_nothing(held) -> None:  # type: ignore[no-untyped-def]
    store, _, cursor, ps = held
    assert [e.position for e in cursor.read_entries(7)] == ps[:7]
    store.hold_reads()
    with ThreadPoolExecutor(1) as pool:
        replay = pool.submit(cursor.replay_entries, [ps[5], ps[6]])  # 1: start replay of [3:5, 3:6]
        store.wait_until_held(1)  # 2: waiting for the response of BK
        cursor.reset_cursor(ps[0])  # 3-4: clear redeliveries, read position to 3:0
        store.release()  # 5: the read completes
        with pytest.raises(CursorModifyingError):
            replay.result(timeout=10)
    assert cursor.read_position == ps[0]
    delivered = [e.position for e in cursor.read_entries(10)]
    assert delivered == ps  # in order from the reset position, nothing out of order
    assert cursor.stats().revision.discarded_reads == 1


def test_scenario_2_sequential_read_racing_a_reset_is_discarded(held) -> None:  # type: ignore[no-untyped-def]
    store, _, cursor, ps = held
    cursor.seek(ps[5])
    store.hold_reads()
    with ThreadPoolExecutor(1) as pool:
        read = pool.submit(cursor.read_entries, 5)  # 1: read {readPosition=3:5, entries=5}
        store.wait_until_held(1)
        cursor.reset_cursor(ps[0])  # 3-4
        store.release()
        with pytest.raises(CursorModifyingError):
            read.result(timeout=10)  # 5: not delivered, read position untouched
    assert cursor.read_position == ps[0]  # not 3:10: nothing is stuck
    assert [e.position for e in cursor.read_entries(10)] == ps


def test_read_entries_async_racing_a_rewind_fails_its_future(held) -> None:  # type: ignore[no-untyped-def]
    store, _, cursor, ps = held
    cursor.read_entries(3)
    store.hold_reads()
    future = cursor.read_entries_async(4)
    store.wait_until_held(1)
    cursor.rewind()
    store.release()
    with pytest.raises(CursorModifyingError):
        future.result(timeout=10)
    assert cursor.read_position == ps[0]


def test_half_in_flight_read_is_detected_before_hand_over(held) -> None:  # type: ignore[no-untyped-def]
    _, _, cursor, ps = held
    pending = cursor.read_entries_held(4)
    entries = pending.fetch().complete()  # read position already advanced
    assert cursor.read_position == ps[4] and len(entries) == 4
    cursor.rewind()  # a reset before the dispatcher hands the entries over
    assert not pending.is_current()  # the dispatcher discards them
    assert cursor.read_position == ps[0]


def test_reads_are_refused_while_a_reset_runs(held) -> None:  # type: ignore[no-untyped-def]
    _, _, cursor, ps = held
    with cursor.position_reset() as reset:
        with pytest.raises(CursorModifyingError):
            cursor.read_entries(1)
        with pytest.raises(CursorModifyingError):
            cursor.replay_entries([ps[1]])
        with pytest.raises(CursorModifyingError):
            cursor.read_entries_async(1)
        with pytest.raises(CursorModifyingError):
            cursor.mark_delete(ps[1])
        reset.seek(ps[3])
    assert cursor.read_position == ps[3]


def test_second_reset_fails_fast_and_is_not_applied(held) -> None:  # type: ignore[no-untyped-def]
    _, _, cursor, ps = held
    cursor.read_entries(5)
    with cursor.position_reset() as reset:
        with pytest.raises(ConcurrentResetError):
            cursor.reset_cursor(ps[8])  # compare apache/pulsar#26304: never silently dropped
        with pytest.raises(ConcurrentResetError):
            cursor.skip_entries(2)
        reset.rewind()
    assert cursor.read_position == ps[0]
    assert cursor.mark_delete_position < ps[0]


def test_composite_reset_changes_caller_state_atomically(held) -> None:  # type: ignore[no-untyped-def]
    """The seed's Key_Shared rewind demo: dispatcher state and cursor change together."""
    _, _, cursor, ps = held
    cursor.read_entries(6)
    dispatcher_state = {"replay": {ps[2], ps[4]}, "recently_joined": {"c2": ps[6]}}
    observed: list[bool] = []
    with cursor.position_reset() as reset:
        dispatcher_state["replay"].clear()
        dispatcher_state["recently_joined"].clear()
        observed.append(cursor.revision.is_under_revision)
        reset.rewind()
    assert observed == [True]
    assert cursor.read_position == ps[0] and not cursor.revision.is_under_revision
    assert cursor.stats().revision.revision_num == 1


def test_failing_block_applies_nothing_but_outdates_reads(held) -> None:  # type: ignore[no-untyped-def]
    _, _, cursor, ps = held
    cursor.read_entries(3)
    pending = cursor.read_entries_held(2)
    with pytest.raises(ValueError), cursor.position_reset() as reset:
        reset.seek(ps[8])
        raise ValueError("caller's own state change failed")
    assert cursor.read_position == ps[3]
    with pytest.raises(CursorModifyingError):
        pending.complete()


@pytest.mark.parametrize("reset", ["reset_cursor", "seek", "rewind", "skip_entries", "clear_backlog"])
def test_every_reset_goes_through_a_revision(held, reset: str) -> None:  # type: ignore[no-untyped-def]
    _, _, cursor, ps = held
    before = cursor.revision.revision_num
    args = {"reset_cursor": (ps[4],), "seek": (ps[4],), "rewind": (), "skip_entries": (3,), "clear_backlog": ()}[reset]
    getattr(cursor, reset)(*args)
    assert cursor.revision.revision_num == before + 1
    assert cursor.stats().revision.epoch_increase_count == before + 1


def test_stress_readers_ackers_resetters_keep_order_and_invariants() -> None:
    factory = ManagedLedgerFactory(clock=ManualClock(0))
    ml = factory.open("public/default/persistent/stress", ManagedLedgerConfig(max_entries_per_ledger=97))
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = ml.add_entries([b"x"] * 2_000)
    resets: dict[int, Position] = {0: cursor.read_position}  # revision number -> read position it set
    reads: list[tuple[int, list[Position]]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            try:
                pending = cursor.read_entries_held(rng.randint(1, 20))
                entries = pending.fetch().complete()
            except CursorModifyingError:
                continue
            with lock:
                reads.append((pending.revision_num, [e.position for e in entries]))

    def replayer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            wanted = sorted(rng.sample(ps, 5))
            try:
                got = cursor.replay_entries(wanted)
            except CursorModifyingError:
                continue
            assert {e.position for e in got} <= set(wanted)

    def acker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            cursor.delete(ps[rng.randrange(len(ps))])

    def resetter(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(100):
            target = ps[rng.randrange(len(ps))]
            try:
                with cursor.position_reset() as r:
                    kind = rng.choice(["seek", "rewind", "reset"])
                    if kind == "seek":
                        r.seek(target)
                    elif kind == "rewind":
                        r.rewind()
                    else:
                        r.reset_to(target)
                    r_num = r.revision_num + 1
                with lock:
                    resets[r_num] = cursor.read_position
            except ConcurrentResetError:
                continue

    def guarded(fn, seed):  # type: ignore[no-untyped-def]
        try:
            fn(seed)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(fn, i)) for i, fn in
               enumerate([reader, replayer, acker, resetter, resetter])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    cursor._check()
    assert reads
    last_seen: dict[int, Position] = {}
    for revision, positions in reads:
        assert revision in resets
        floor = resets[revision]
        # every entry read under a revision is at or after the position its reset set ...
        assert all(p >= floor for p in positions), (revision, floor, positions[:3])
        # ... and sequential reads under one revision never go backwards (no out-of-order delivery)
        assert positions == sorted(positions)
        if positions:
            if revision in last_seen:
                assert positions[0] > last_seen[revision]
            last_seen[revision] = positions[-1]
