"""A managed ledger's writes to its current ledger and its rollovers: the rollover bookkeeping,
in one place.

Pulsar's rules (``ManagedLedgerImpl.currentLedgerIsFull``): after ``max_entries_per_ledger``
entries, or once the ledger holds ``max_size_per_ledger_mb`` (the entry that reaches it is the
ledger's last), or after ``maximum_rollover_time_ms``, the current ledger is sealed and a new
one created at once, but never before ``minimum_rollover_time_ms`` (which gates every rollover).
A batch that reaches a limit is written chunk by chunk, each chunk in one store call.

A write holds the ledger's *append lock* (only one writer, and rollovers take it too); the
store write runs without the ledger lock, so readers and position arithmetic never wait for
it: the entries become visible when the last confirmed entry moves, under the ledger lock.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from typing import Protocol

from ..core import ManagedLedgerConfig, Position
from ._ledger_state import LedgerState
from ._ledger_view import LedgerInfo

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_new = tuple.__new__


class AppendedLedger(Protocol):
    """What the appender reads of its managed ledger besides the state: its settings, which
    :meth:`ManagedLedger.set_config <mledger.managed_ledger.ManagedLedger.set_config>` replaces."""

    @property
    def config(self) -> ManagedLedgerConfig: ...


class Appender:
    """Writes framed entries to the current ledger(s) of one managed ledger (module doc).

    Given the ledger's :class:`~mledger.managed_ledger._ledger_state.LedgerState` (what it
    reads and moves), the ledger for its settings, and ``ledger_closed``, called (both locks
    held) after each rollover sealed a ledger, which trimming may now delete."""

    def __init__(self, state: LedgerState, ledger: AppendedLedger, ledger_closed: Callable[[], None]) -> None:
        self._state = state
        self._ledger = ledger
        self._ledger_closed = ledger_closed
        self._store = state.store
        self._clock = state.clock
        self.roll_over_failed = False
        """A rollover after an add failed: the next write retries it first."""

    def write(self, raw: Sequence[bytes]) -> tuple[list[Position], BaseException | None]:
        """Append ``raw`` in order under the append lock, rolling over as needed. Returns the
        positions written and the error that stopped it, if any (``ManagedLedgerClosedError``
        included; the entries written before it stay written)."""
        state = self._state
        lock = state.lock
        positions: list[Position] = []
        n = len(raw)
        cumulative: list[int] | None = None  # prefix sums of the entry sizes, once a limit cuts
        done = 0
        with state.append_lock:
            try:
                if not n:
                    state.check_open()
                while done < n:
                    with lock:
                        current = self._writable()
                        cfg = self._ledger.config
                        if done == 0 and cumulative is None:
                            size = sum(map(len, raw))
                            end = n
                            if (
                                current.entries + n >= cfg.max_entries_per_ledger
                                or current.size + size >= cfg.max_size_per_ledger_mb * _MB
                            ) and self.may_roll_over():
                                end, size, cumulative = self._chunk(raw, done, current, None)
                        else:
                            end, size, cumulative = self._chunk(raw, done, current, cumulative)
                    k = end - done
                    ledger_id = current.ledger_id
                    first = self._store.append_many(ledger_id, raw if k == n else raw[done:end])
                    if k == 1:
                        positions.append(Position(ledger_id, first))
                    else:
                        # tuple.__new__ over pairs: half the cost of calling Position k times
                        positions += map(
                            _new, repeat(Position, k), zip(repeat(ledger_id, k), range(first, first + k), strict=True)
                        )
                    self._confirm(current, positions[-1], k, size)
                    done = end
            except BaseException as exc:
                return positions, exc
        return positions, None

    def write_repeated(self, raw: bytes, count: int) -> Position | None:
        """Append ``count`` copies of the framed entry ``raw`` under the append lock, as
        :meth:`write` would write ``[raw] * count`` (the same chunks and rollovers), and
        return the last position (None for 0). O(ledgers touched): no object per entry, for
        the replay's bulk adds. Raises what stopped it (the entries written before stay)."""
        state = self._state
        size = len(raw)
        last: Position | None = None
        done = 0
        with state.append_lock:
            while done < count:
                with state.lock:
                    current = self._writable()
                    k = count - done
                    if self.may_roll_over():
                        cfg = self._ledger.config
                        k = min(k, max(cfg.max_entries_per_ledger - current.entries, 1))
                        if size:  # the entry that brings the ledger to its size limit ends the chunk
                            room = cfg.max_size_per_ledger_mb * _MB - current.size
                            k = min(k, max(-(-room // size), 1))
                first = self._store.append_many(current.ledger_id, [raw] * k)
                last = Position(current.ledger_id, first + k - 1)
                self._confirm(current, last, k, k * size)
                done += k
        return last

    def _writable(self) -> LedgerInfo:
        """The current ledger, for the next chunk of a write (the caller holds both locks):
        raises once the managed ledger is closed, retries a rollover an earlier add could not
        do."""
        state = self._state
        state.check_open()
        if self.roll_over_failed:
            self.roll_over()
            self.roll_over_failed = False
        current = state.current
        assert current is not None
        return current

    def _confirm(self, current: LedgerInfo, last: Position, k: int, size: int) -> None:
        """``k`` entries (``size`` bytes) up to ``last`` are stored in ``current``: make them
        visible, then roll over if the ledger is full (the caller holds the append lock)."""
        state = self._state
        with state.lock:
            state.confirm(current, last, k, size)
            if self.ledger_is_full(current):
                try:
                    self.roll_over()
                except Exception as exc:
                    # The entries are stored: they succeed; the next add rolls over first.
                    self.roll_over_failed = True
                    log.warning("managed ledger %s: rollover after an add failed: %s", state.name, exc)

    def _chunk(
        self, raw: Sequence[bytes], done: int, current: LedgerInfo, cumulative: list[int] | None
    ) -> tuple[int, int, list[int]]:
        """Where the chunk starting at ``raw[done]`` ends (exclusive), its bytes, and the prefix
        sums of the entry sizes (computed once, handed back for the next chunk), when a limit
        of ``current`` may cut ``raw``: the entry that reaches the size limit ends a chunk."""
        n = len(raw)
        cfg = self._ledger.config
        rolls = self.may_roll_over()
        end = min(done + max(cfg.max_entries_per_ledger - current.entries, 1), n) if rolls else n
        if cumulative is None:
            cumulative = list(accumulate(map(len, raw)))
        base = cumulative[done - 1] if done else 0
        if rolls:
            room = cfg.max_size_per_ledger_mb * _MB - current.size
            end = min(end, bisect_left(cumulative, base + room, done, end) + 1)
        return end, cumulative[end - 1] - base, cumulative

    def ledger_is_full(self, li: LedgerInfo) -> bool:
        """Pulsar's ``currentLedgerIsFull``: the entry or size limit, or the maximum age, is
        reached, and the ledger is older than ``minimum_rollover_time_ms``."""
        cfg = self._ledger.config
        age = self._clock.now_ms() - self._state.current_created_ms
        reached = (
            li.entries >= cfg.max_entries_per_ledger
            or li.size >= cfg.max_size_per_ledger_mb * _MB
            or (li.entries > 0 and age >= cfg.maximum_rollover_time_ms)
        )
        return reached and self.may_roll_over(age)

    def may_roll_over(self, age_ms: int | None = None) -> bool:
        """Whether the current ledger is old enough to roll over (``minimum_rollover_time_ms``)."""
        minimum = self._ledger.config.minimum_rollover_time_ms
        if minimum <= 0:
            return True
        if age_ms is None:
            age_ms = self._clock.now_ms() - self._state.current_created_ms
        return age_ms > minimum

    def roll_over(self) -> None:
        """Seal the current ledger and create the next (the caller holds both locks)."""
        self._state.roll_over()
        self._ledger_closed()
