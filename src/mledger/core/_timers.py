"""One queue for the timers that decide what a broker does with messages, on the broker's clock.

Theory of operation
-------------------
A :class:`TimerQueue` holds *broker-semantic* timers: Pulsar's periodic monitors (message
expiry, inactive-topic deletion, backlog quotas, retention, compaction, deduplication snapshots,
the stats interval, ...) and one-shot timers (a subscription's next delayed message). Each has
a key, a due time in milliseconds on the queue's clock and an action; a periodic one (:meth:`every`)
is re-armed ``interval`` after its due time each time it fires (Java's ``scheduleAtFixedRate``,
which Pulsar's ``BrokerService`` uses for its monitors), a one-shot (:meth:`call_at`) is gone once
it fired. Transport timers (keep-alive pings, handshake and idle timeouts) never go here: they
run on real time, so moving a test's clock cannot close anyone's connection.

Two ways to drive the queue:

* :meth:`run_due` fires every timer due at the clock's current reading, in due-time order (ties:
  the order they were armed). A periodic timer several intervals late fires once and is re-armed
  at its first due time after now: the clock jumped, nobody was there at the missed instants.
  The real-time server calls it when the earliest due time comes (:attr:`on_earlier` tells it
  when that time moves earlier) and the library's ``Broker.run_due_tasks`` calls it.
* :meth:`advance` (a :class:`~mledger.core.ManualClock` only) moves the clock to each due
  time in turn up to ``now + ms`` and fires what is due there: every firing happens at its own due
  time, and a 60 s timer fires ten times when the clock advances ten minutes.

A timer an action arms for a time at or before the current reading fires on the next run (at
the next instant :meth:`advance` steps to), so an action that re-arms itself "now" cannot spin.
Actions run on the caller's thread, outside the queue's lock, one run at a time; an action that
raises is logged and counted and the others still fire. Thread-safe; arming is O(log n).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ._clock import Clock, ManualClock

__all__ = ["TimerQueue", "TimerQueueStats"]

log = logging.getLogger(__name__)

Action = Callable[[], object]


@dataclass(frozen=True)
class TimerQueueStats:
    """A snapshot of a :class:`TimerQueue`: timers armed, firings per timer name, failed actions."""

    armed: int
    fired: dict[str, int]
    failures: int


@dataclass(eq=False)
class _Timer:
    key: Hashable
    name: str
    due_ms: int
    interval_ms: int  # 0: one-shot
    action: Action
    order: int = -1  # ties on the due time fire by this: when the timer was first armed


class TimerQueue:
    """Timers ordered by due time on ``clock`` (see the module docstring)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._firing = threading.RLock()  # one run at a time: firings stay in time order
        self._heap: list[tuple[int, int, int, _Timer]] = []  # (due, order, unique, timer)
        self._armed: dict[Hashable, _Timer] = {}
        self._pending: dict[Hashable, _Timer] = {}  # taken off the heap by a run, not fired yet
        self._seq = itertools.count()
        self._fired: Counter[str] = Counter()
        self._failures = 0
        self.on_earlier: Callable[[int], None] | None = None
        """Called (outside the lock, on the arming thread) with the new earliest due time when a
        timer is armed before every other: a real-time driver re-arms its wake-up."""

    # -- arming --------------------------------------------------------------------------------
    def every(self, name: str, interval_ms: int, action: Action, *, first_due_ms: int | None = None) -> None:
        """Arm the periodic timer ``name`` (replacing one of that name): first due at
        ``first_due_ms`` (default: one interval from now), then every ``interval_ms``.
        ``ValueError`` for an interval <= 0."""
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms <= 0:
            raise ValueError(f"a periodic timer needs an interval > 0 ms, got {interval_ms!r} for {name!r}")
        due = self.clock.now_ms() + interval_ms if first_due_ms is None else first_due_ms
        self._arm(_Timer(name, name, due, interval_ms, action))

    def call_at(self, key: Hashable, due_ms: int, action: Action, name: str) -> bool:
        """Arm a one-shot timer under ``key``, unless one is armed there already at or before
        ``due_ms`` (the earlier stays). ``name`` counts its firings in :meth:`stats`. Returns
        whether this call armed it."""
        with self._lock:
            current = self._armed.get(key)
            if current is not None and current.due_ms <= due_ms:
                return False
        self._arm(_Timer(key, name, due_ms, 0, action))
        return True

    def cancel(self, key: Hashable) -> bool:
        """Disarm the timer under ``key`` (a periodic one's key is its name); whether one was armed."""
        with self._lock:
            pending = self._pending.pop(key, None)
            return self._armed.pop(key, None) is not None or pending is not None

    def clear(self) -> None:
        """Disarm every timer (their owner closed)."""
        with self._lock:
            self._armed.clear()
            self._pending.clear()
            self._heap.clear()

    def _arm(self, timer: _Timer) -> None:
        with self._lock:
            earliest = self._peek()
            timer.order = next(self._seq)
            self._armed[timer.key] = timer
            heapq.heappush(self._heap, (timer.due_ms, timer.order, next(self._seq), timer))
            earlier = earliest is None or timer.due_ms < earliest
        notify = self.on_earlier
        if earlier and notify is not None:
            notify(timer.due_ms)

    # -- reading -------------------------------------------------------------------------------
    def next_due_ms(self) -> int | None:
        """The earliest due time armed, None when nothing is. O(1) amortised."""
        with self._lock:
            return self._peek()

    def _peek(self) -> int | None:
        heap = self._heap
        while heap and self._armed.get(heap[0][3].key) is not heap[0][3]:
            heapq.heappop(heap)  # disarmed or re-armed since
        return heap[0][0] if heap else None

    def _next_after(self, now: int) -> int | None:
        """The earliest due time later than ``now`` (timers re-armed at ``now`` itself wait)."""
        with self._lock:
            first = self._peek()
            if first is None or first > now:
                return first
            later = [due for due, _, _, t in self._heap if due > now and self._armed.get(t.key) is t]
            return min(later, default=None)

    def stats(self) -> TimerQueueStats:
        """Timers armed, firings per name since the queue was made, actions that raised."""
        with self._lock:
            return TimerQueueStats(len(self._armed), dict(self._fired), self._failures)

    # -- driving -------------------------------------------------------------------------------
    def run_due(self) -> int:
        """Fire every timer due at the clock's reading (see the module docstring); returns how
        many fired. Blocks while another run is under way, and while actions run (they may
        block on storage)."""
        with self._firing:
            return self._run_due(self.clock.now_ms())

    def _run_due(self, now: int) -> int:
        due: list[_Timer] = []
        with self._lock:
            heap = self._heap
            while heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[3]
                if self._armed.get(timer.key) is not timer:
                    continue  # disarmed or re-armed since
                due.append(timer)
                self._pending[timer.key] = timer
                if not timer.interval_ms:
                    del self._armed[timer.key]
                    continue
                # re-armed before it fires (its action may cancel it), at its first due time
                # after now: one firing per run however late the run is
                missed = (now - timer.due_ms) // timer.interval_ms
                due_ms = timer.due_ms + (missed + 1) * timer.interval_ms
                again = _Timer(timer.key, timer.name, due_ms, timer.interval_ms, timer.action, timer.order)
                self._armed[timer.key] = again
                heapq.heappush(heap, (again.due_ms, again.order, next(self._seq), again))
        return sum(self._fire(timer) for timer in due)

    def _fire(self, timer: _Timer) -> bool:
        with self._lock:
            if self._pending.get(timer.key) is not timer:
                return False  # cancelled by an action that fired before it in this run
            del self._pending[timer.key]
        try:
            timer.action()
        except Exception:
            log.exception("timer %s failed", timer.name)
            with self._lock:
                self._failures += 1
        finally:
            with self._lock:
                self._fired[timer.name] += 1
        return True

    def advance(self, ms: int) -> int:
        """Move a :class:`~mledger.core.ManualClock` forward by ``ms``, stopping at each
        due time to fire what is due there (module docstring); returns the new time.
        ``TypeError`` for another clock, ``ValueError`` for a negative ``ms``."""
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise TypeError(f"only a ManualClock can be advanced, not {type(clock).__name__}")
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount: {ms}")
        with self._firing:
            now = clock.now_ms()
            target = now + ms
            self._run_due(now)
            while (next_due := self._next_after(now)) is not None and next_due <= target:
                now = clock.catch_up(next_due)
                self._run_due(now)
            if now < target:
                now = clock.catch_up(target)
                self._run_due(now)
            return now
