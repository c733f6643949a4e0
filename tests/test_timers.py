"""The broker-semantic timer queue (mledger.core.TimerQueue): time order, each firing at its own
due time under advance(), catch-up under run_due(), one-shots, cancellation, failures."""

from __future__ import annotations

import pytest

from mledger.core import ManualClock, SystemClock, TimerQueue


def recorder(queue: TimerQueue, log: list[tuple[str, int]], name: str):  # noqa: ANN201
    return lambda: log.append((name, queue.clock.now_ms()))


def test_advance_fires_every_timer_in_time_order_at_its_own_due_time() -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []
    queue.every("flush", 60_000, recorder(queue, log, "flush"))
    queue.every("expiry", 300_000, recorder(queue, log, "expiry"))
    queue.call_at("delayed", 90_000, recorder(queue, log, "delayed"), "delayed")
    assert queue.advance(600_000) == 600_000
    flushes = [t for name, t in log if name == "flush"]
    assert flushes == [60_000 * i for i in range(1, 11)]  # ten times, each at its instant
    assert [t for name, t in log if name == "expiry"] == [300_000, 600_000]
    assert ("delayed", 90_000) in log
    assert [t for _, t in log] == sorted(t for _, t in log)  # in time order
    # ties fire in the order the timers were armed
    assert log.index(("flush", 300_000)) < log.index(("expiry", 300_000))
    assert queue.stats().fired == {"flush": 10, "expiry": 2, "delayed": 1}


def test_run_due_after_a_jump_fires_a_late_periodic_timer_once_and_keeps_its_phase() -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []
    queue.every("check", 60_000, recorder(queue, log, "check"))
    clock.advance(59_999)
    assert queue.run_due() == 0
    clock.advance(190_001)  # t=250000: four due times passed
    assert queue.run_due() == 1 and log == [("check", 250_000)]
    assert queue.next_due_ms() == 300_000  # still on the 60 s grid


def test_a_one_shot_keeps_the_earlier_time_and_goes_once_fired() -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []
    assert queue.call_at("sub", 5_000, recorder(queue, log, "a"), "delayed")
    assert not queue.call_at("sub", 9_000, recorder(queue, log, "b"), "delayed")  # later: kept 5 s
    assert queue.call_at("sub", 2_000, recorder(queue, log, "c"), "delayed")  # earlier: replaces
    queue.advance(10_000)
    assert log == [("c", 2_000)] and queue.next_due_ms() is None


def test_a_timer_an_action_arms_for_now_waits_for_the_next_instant() -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []

    def again() -> None:
        log.append(("again", clock.now_ms()))
        queue.call_at("x", clock.now_ms(), again, "again")  # re-arms itself for "now"

    queue.call_at("x", 1_000, again, "again")
    queue.every("tick", 1_000, lambda: None)
    queue.advance(3_000)  # terminates: each re-arm fires at the next instant stepped to
    assert log == [("again", 1_000), ("again", 2_000), ("again", 3_000)]


def test_cancel_and_an_action_that_cancels_a_later_one_in_the_same_run() -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []
    queue.call_at("first", 1_000, lambda: queue.cancel("second"), "first")
    queue.call_at("second", 1_000, recorder(queue, log, "second"), "second")
    queue.every("gone", 500, recorder(queue, log, "gone"))
    assert queue.cancel("gone")
    clock.advance(1_000)
    queue.run_due()
    assert log == [] and queue.stats().armed == 0


def test_a_failing_action_is_counted_and_the_others_still_fire(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0)
    queue = TimerQueue(clock)
    log: list[tuple[str, int]] = []

    def boom() -> None:
        raise RuntimeError("boom")

    queue.every("boom", 1_000, boom)
    queue.every("ok", 1_000, recorder(queue, log, "ok"))
    queue.advance(2_000)
    assert log == [("ok", 1_000), ("ok", 2_000)]
    assert queue.stats().failures == 2 and "timer boom failed" in caplog.text


def test_on_earlier_hears_only_a_new_earliest_time() -> None:
    queue = TimerQueue(ManualClock(0))
    heard: list[int] = []
    queue.on_earlier = heard.append
    queue.every("a", 60_000, lambda: None)
    queue.every("b", 120_000, lambda: None)
    queue.call_at("c", 30_000, lambda: None, "c")
    assert heard == [60_000, 30_000]


def test_advance_needs_a_manual_clock_and_a_non_negative_amount() -> None:
    with pytest.raises(TypeError, match="ManualClock"):
        TimerQueue(SystemClock()).advance(1)
    with pytest.raises(ValueError, match="negative"):
        TimerQueue(ManualClock(0)).advance(-1)
    with pytest.raises(ValueError, match="interval > 0"):
        TimerQueue(ManualClock(0)).every("x", 0, lambda: None)
