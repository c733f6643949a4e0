"""Positions as intervals, so that a poller's memory does not grow with a topic's entries.

:class:`KnownEntries` is the set of entries a topic-partition's reader has seen, held as runs
of consecutive entries of one ledger (a reader sees a ledger's entries in order, so a topic
costs one run per ledger, plus one per gap). A subscription's acked positions are intervals
too: the internal stats' ``individuallyDeletedMessages``, open-closed ``(lower, upper]`` pairs
ordered as positions are. The set operations here work on sorted, disjoint interval lists in
O(intervals); only the entries an ack names are ever listed one by one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

from ..core import Position

__all__ = ["Interval", "KnownEntries", "above", "difference", "normalised"]

Interval = tuple[Position, Position]
"""An open-closed interval ``(lower, upper]`` of positions."""


def normalised(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same positions (touching ones merged), empty
    ones dropped. O(n log n)."""
    out: list[Interval] = []
    for low, high in sorted(i for i in intervals if i[0] < i[1]):
        if out and low <= out[-1][1]:
            if high > out[-1][1]:
                out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def difference(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The positions of ``a`` not in ``b`` (both sorted and disjoint). O(len(a) + len(b))."""
    out: list[Interval] = []
    j = 0
    for low, high in a:
        while j < len(b) and b[j][1] <= low:
            j += 1
        cursor = low
        k = j
        while k < len(b) and b[k][0] < high:
            b_low, b_high = b[k]
            if b_low > cursor:
                out.append((cursor, b_low))
            cursor = max(cursor, b_high)
            if cursor >= high:
                break
            k += 1
        if cursor < high:
            out.append((cursor, high))
    return out


class KnownEntries:
    """The entries seen so far, as runs of consecutive entries of one ledger.

    :meth:`add` takes positions in increasing order; :meth:`forget_before` drops the runs of
    the ledgers the cluster deleted, so that what it holds follows the ledgers that exist.
    Memory O(runs); :meth:`held_within` O(log runs + runs and entries listed)."""

    __slots__ = ("_first", "_firsts", "_lasts")

    def __init__(self) -> None:
        self._first: Position | None = None
        self._firsts: list[Position] = []
        self._lasts: list[Position] = []

    def add(self, position: Position) -> None:
        """Another entry, above every entry added before."""
        if self._first is None:
            self._first = position
        if self._lasts:
            last = self._lasts[-1]
            if position[0] == last[0] and position[1] == last[1] + 1:
                self._lasts[-1] = position
                return
        self._firsts.append(position)
        self._lasts.append(position)

    def __bool__(self) -> bool:
        return bool(self._firsts)

    @property
    def first(self) -> Position | None:
        """The first entry ever added (forgetting does not move it)."""
        return self._first

    @property
    def last(self) -> Position | None:
        return self._lasts[-1] if self._lasts else None

    @property
    def runs(self) -> int:
        return len(self._firsts)

    def forget_before(self, bound: Position) -> int:
        """Forget the runs whose every entry is at or below ``bound``, but the last run (its
        last entry is :attr:`last`); returns how many. O(runs)."""
        drop = bisect.bisect_right(self._lasts, bound, hi=max(len(self._lasts) - 1, 0))
        del self._firsts[:drop], self._lasts[:drop]
        return drop

    def held_within(self, intervals: Iterable[Interval]) -> Iterator[Position]:
        """The positions in ``intervals`` (sorted and disjoint) that a replay fed these entries
        holds, in order: in each ledger with a known entry, every entry up to its last known
        one. The entries between (and before) the known ones are those a reader never
        receives, server-only markers and aborted transactions' entries, which the broker
        acknowledges for every subscription itself (Pulsar's
        ``AbstractBaseDispatcher.filterEntriesForConsumer``); the replay holds them as
        placeholder entries, which only such acks move its mark-delete past. O(log runs +
        runs in ``intervals`` + positions listed)."""
        lasts = self._lasts
        for low, high in intervals:
            i = bisect.bisect_right(lasts, low)  # the first run ending above low
            while i < len(lasts):
                ledger, last = lasts[i]
                after = lasts[i - 1][1] + 1 if i and lasts[i - 1][0] == ledger else 0  # the span this run ends
                if Position(ledger, after) > high:
                    break
                start = max(after, low[1] + 1) if low[0] == ledger else after
                stop = min(last, high[1]) if high[0] == ledger else last
                for entry in range(start, stop + 1):
                    yield Position(ledger, entry)
                i += 1

    def any_held_within(self, intervals: Iterable[Interval]) -> bool:
        """Whether a position :meth:`held_within` lies in ``intervals``."""
        return any(True for _ in self.held_within(intervals))


def above(intervals: Sequence[Interval], position: Position) -> list[Interval]:
    """The positions of ``intervals`` (sorted and disjoint) above ``position``. O(n)."""
    return [(max(low, position), high) for low, high in intervals if high > position]
