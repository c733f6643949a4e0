"""``RateWindow``: Pulsar's per-interval message and byte rates over growing counters.

Pulsar refreshes its topic stats every ``statsUpdateFrequencyInSecs`` (60 s) and reports, as
``msgRateIn`` / ``msgThroughputIn`` / ``msgRateOut`` / ..., the averages over the last interval.
The broker's ``updateRates`` timer (:mod:`mledger.broker._monitors`) closes every window at each
interval (:meth:`RateWindow.close`). Where nothing drives the broker's timers (a library broker
whose ``run_due_tasks`` is not called), a window also closes its interval when it is read at
least one interval after it opened, so after a quiet period the first read averages over the
whole time since the previous one (Pulsar would show only the last interval).
"""

from __future__ import annotations

import threading

__all__ = ["RateWindow"]


class RateWindow:
    """Rates of two growing counters (messages, bytes) over Pulsar's stats interval.

    :meth:`rates` returns the averages over the last closed interval; it closes the open one
    when called at least ``interval_ms`` after it opened. Thread-safe; the counters are the
    caller's (nothing is recorded here, so the hot paths only add to their own integers).
    """

    __slots__ = ("_lock", "_rate", "_start_bytes", "_start_count", "_start_ms", "_throughput")

    def __init__(self, now_ms: int, count: int = 0, size: int = 0) -> None:
        self._lock = threading.Lock()
        self._start_ms = now_ms
        self._start_count = count
        self._start_bytes = size
        self._rate = 0.0
        self._throughput = 0.0

    def rates(self, now_ms: int, interval_ms: int, count: int, size: int) -> tuple[float, float]:
        """``(messages/s, bytes/s)`` over the last closed interval, given the counters now."""
        with self._lock:
            if now_ms - self._start_ms >= interval_ms:
                self._close(now_ms, count, size)
            return self._rate, self._throughput

    def close(self, now_ms: int, interval_ms: int, count: int, size: int) -> None:
        """Close the open interval at ``now_ms`` with the counters then (the stats timer), unless
        it opened less than half an interval ago: a read just closed it (a timer a few ms late),
        and a rate over those few ms would stand for a whole interval."""
        with self._lock:
            if now_ms - self._start_ms >= interval_ms // 2:
                self._close(now_ms, count, size)

    def _close(self, now_ms: int, count: int, size: int) -> None:
        elapsed = now_ms - self._start_ms
        if elapsed > 0:
            self._rate = (count - self._start_count) * 1000.0 / elapsed
            self._throughput = (size - self._start_bytes) * 1000.0 / elapsed
            self._start_ms, self._start_count, self._start_bytes = now_ms, count, size
