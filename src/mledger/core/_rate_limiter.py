"""Guava's ``RateLimiter.create(rate)`` as Pulsar's cursors use it: the mark-delete rate limiter.

Pulsar creates one limiter per cursor in the ``ManagedCursorImpl`` constructor
(``RateLimiter.create(config.getThrottleMarkDelete())`` when the rate is above 0) and asks it with
``tryAcquire()`` in ``asyncMarkDelete`` and ``asyncDelete`` (and so in ``flush``, which calls
``asyncMarkDelete``); ``setThrottleMarkDelete`` calls ``setRate``. ``RateLimiter.create`` builds a
``SmoothRateLimiter.SmoothBursty`` with ``maxBurstSeconds = 1.0``. Its state, in microseconds of a
stopwatch started with the limiter:

* ``nextFreeTicketMicros`` (N): the earliest time a request is granted;
* ``storedPermits`` (s), at most ``maxPermits = rate`` (one second's worth);
* ``stableIntervalMicros`` (I) ``= 1e6 / rate``.

``tryAcquire()`` (``RateLimiter.tryAcquire(1, 0, MICROSECONDS)``) at time t:

* **refused** iff ``N > t`` (``canAcquire``: ``queryEarliestAvailable(now) - timeout <= now``);
  a refusal changes nothing (no ``resync``);
* **granted** otherwise, by ``reserveEarliestAvailable(1, t)``: ``resync(t)`` (``s = min(max, s +
  (t - N) / I)``, ``N = t`` when ``t > N``), then ``spend = min(1, s)``, ``N += (long) ((1 -
  spend) * I)``, ``s -= spend``.

At creation ``setRate`` runs ``resync`` while ``maxPermits`` is still 0 and then
``SmoothBursty.doSetRate`` leaves ``storedPermits = 0`` ("initial state"): N is the creation
time, so the first request is always granted. For rate 1 the state reduces to N alone: *grant
iff t >= N, then N = max(t, N + 1 s)*: after a second or more without a grant two requests can
be granted back to back, and after a partial idle the next wait is shortened (the schedule keeps
to the grid of N). ``setRate(r')`` resyncs, then rescales ``s = s * max' / max`` (N unchanged).

Checked against Guava 31.1 run with a fake stopwatch (tests/test_rate_limiter.py); Pulsar 3.0 to
4.1 ship Guava 32 to 33, where ``RateLimiter`` and ``SmoothRateLimiter`` are unchanged.
"""

from __future__ import annotations

__all__ = ["SmoothBurstyLimiter"]

_MICROS_PER_SECOND = 1_000_000
_LONG_MAX = (1 << 63) - 1
_MAX_BURST_SECONDS = 1.0  # RateLimiter.create(permitsPerSecond): new SmoothBursty(stopwatch, 1.0)


class SmoothBurstyLimiter:
    """One mark-delete rate limiter: Guava's ``SmoothBursty`` (see the module docstring).

    Time comes in as clock readings in nanoseconds; the stopwatch is the one Guava starts with
    the limiter (microseconds elapsed, truncated, as ``Stopwatch.elapsed(MICROSECONDS)``).
    :attr:`next_free_ns` is the earliest reading a request is granted at, so a caller can test
    ``now_ns >= limiter.next_free_ns`` without a call and call :meth:`try_acquire` only then.
    Not thread-safe (the owning cursor calls it under its lock). O(1), no allocation.

    >>> limiter = SmoothBurstyLimiter(1.0, now_ns=0)
    >>> [limiter.try_acquire(t * 1_000_000) for t in (10_000, 10_001, 10_500, 11_000)]
    [True, True, False, True]
    """

    __slots__ = ("_interval_us", "_max_permits", "_next_free_us", "_rate", "_start_ns", "_stored", "next_free_ns")

    def __init__(self, rate: float, now_ns: int) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0 (Pulsar creates no limiter for 0), got {rate!r}")
        self._start_ns = now_ns
        self._stored = 0.0
        self._max_permits = 0.0
        self._next_free_us = 0
        self._interval_us = 0.0
        self._rate = 0.0
        self.next_free_ns = now_ns
        self.set_rate(rate, now_ns)

    @property
    def rate(self) -> float:
        """Permits per second (``getRate``)."""
        return self._rate

    @property
    def stored_permits(self) -> float:
        """``storedPermits`` as of the last grant or rate change (not resynced to now)."""
        return self._stored

    def _micros(self, now_ns: int) -> int:
        return (now_ns - self._start_ns) // 1000

    def _resync(self, now_us: int) -> None:
        if now_us > self._next_free_us:
            new_permits = (now_us - self._next_free_us) / self._interval_us
            self._stored = min(self._max_permits, self._stored + new_permits)
            self._next_free_us = now_us

    def set_rate(self, rate: float, now_ns: int) -> None:
        """Guava's ``setRate`` (``SmoothRateLimiter.doSetRate`` then ``SmoothBursty.doSetRate``):
        resync, new interval, stored permits rescaled to the new maximum. Raises ``ValueError``
        for a rate not above 0."""
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate!r}")
        self._resync(self._micros(now_ns))
        self._interval_us = _MICROS_PER_SECOND / rate
        old_max = self._max_permits
        self._max_permits = _MAX_BURST_SECONDS * rate
        self._stored = 0.0 if old_max == 0.0 else self._stored * self._max_permits / old_max
        self._rate = rate
        self._update_deadline()

    def try_acquire(self, now_ns: int) -> bool:
        """``tryAcquire()``: take one permit if one is free now; a refusal changes nothing."""
        now_us = self._micros(now_ns)
        if self._next_free_us > now_us:
            return False
        self._resync(now_us)
        spend = min(1.0, self._stored)
        wait_us = int((1.0 - spend) * self._interval_us)  # Java's (long) cast truncates
        self._next_free_us = min(self._next_free_us + wait_us, _LONG_MAX)
        self._stored -= spend
        self._update_deadline()
        return True

    def _update_deadline(self) -> None:
        self.next_free_ns = self._start_ns + self._next_free_us * 1000

    def __repr__(self) -> str:
        return f"SmoothBurstyLimiter(rate={self._rate}, stored={self._stored:.6f}, next_free_us={self._next_free_us})"
