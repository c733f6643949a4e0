"""Injectable clocks: the core never reads the system time directly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time in milliseconds."""

    def now_ms(self) -> int:
        """Milliseconds since the epoch (or since any fixed origin, for a manual clock)."""
        ...


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    now_ns = staticmethod(time.time_ns)
    """Nanoseconds since the epoch: the builtin itself, so a reading is one C call (``now_ms``
    is this reading floored to milliseconds)."""


class ManualClock:
    """A clock that moves only when told to: deterministic tests and event-log replay.

    Thread-safe. ``advance`` and ``set`` never move time backwards.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = int(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        return self._now

    def now_ns(self) -> int:
        """``now_ms`` in nanoseconds (a manual clock moves in whole milliseconds)."""
        return self._now * 1_000_000

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount: {ms}")
        with self._lock:
            self._now += int(ms)
            return self._now

    def catch_up(self, floor_ms: int) -> int:
        """Move forward to ``floor_ms`` if the clock is behind it (never backwards); returns the
        time. What a test's clock handle does with the wall clock before it advances, so the
        clock never falls behind a client that stamps its own wall-clock times."""
        with self._lock:
            self._now = max(self._now, int(floor_ms))
            return self._now

    def set(self, now_ms: int) -> int:
        """Jump to ``now_ms``; raises ValueError if that is in the past."""
        with self._lock:
            if now_ms < self._now:
                raise ValueError(f"cannot move a clock backwards from {self._now} to {now_ms}")
            self._now = int(now_ms)
            return self._now


def nanosecond_reader(clock: Clock) -> Callable[[], int]:
    """A function reading ``clock`` in nanoseconds whose reading floored to milliseconds is
    exactly ``clock.now_ms()``: the clock's own ``now_ns`` when it has one (the system clock's
    is the C builtin ``time.time_ns``, the cheapest reading there is), else ``now_ms() *
    1_000_000``. For hot paths that compare the time against a deadline (the cursor's persist
    throttle) and need no division for it."""
    now_ns = getattr(clock, "now_ns", None)
    if callable(now_ns):
        return cast("Callable[[], int]", now_ns)
    now_ms = clock.now_ms
    return lambda: now_ms() * 1_000_000
