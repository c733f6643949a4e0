"""The delayed-delivery tracker: positions held until their deliver-at time.

Pulsar's ``InMemoryDelayedDeliveryTracker``, per dispatcher; the replay holds its delayed
entries in one too (one per topic-partition, fed with event time), so delayed delivery is
modelled once. An entry read with a deliver-at time in the future is added here instead of
being dispatched; once the broker clock reaches that time it is handed back (:meth:`pop_due`)
and the dispatcher replays it. The tracker keeps positions only, never payloads, and keeps no
state of its own across restarts: after a restart (or a dispatcher reset) the cursor reads the
entries again and they are re-added. Whether a held message was acknowledged meanwhile
(cancelled, PIP-423) is decided by the cursor when the message is replayed, so the tracker
never needs to be told; :meth:`remove` only keeps its counts exact.

"Due" follows Pulsar's cutoff: ``deliver_at <= now`` when strict, else
``deliver_at <= now + tick`` (``isDelayedDeliveryDeliverAtTimeStrict`` false); due messages
come out earliest deliver-at time first, then by position.

Storage: a dictionary of what is held (the truth) beside the queue of ``(deliver_at,
ledger_id, entry_id)`` items, in three parts: a binary heap of the items added one by one
(``heapq``: adds and pops run in C), a heap of sorted runs of the items added together
(:meth:`add_many`, the replay's: a run is an int64 array, taken from by binary search), and, in
order, the items a look at the due messages has already taken off them, as the rows of an int64
array (so that looking again, as the replay does at every step, is a slice, and
:meth:`due_rows` hands it out without an object per message). A removed or re-timed position
leaves its item behind, counted as stale and skipped when it surfaces; the queue is rebuilt
from the dictionary once stale items outnumber the held ones. Not thread-safe: the dispatcher
calls it under its lock. Adds, removes and pops are O(log n) amortised (a run of k, O(k log k));
a look at the due messages O(log n + due).
"""

from __future__ import annotations

import heapq
from collections import deque
from itertools import repeat

import numpy as np

from ..core import Position

__all__ = ["DelayedDeliveryTracker"]

_STALE_SLACK = 64
"""Stale items tolerated beyond the number held before the queue is rebuilt."""

_Item = tuple[int, int, int]  # (deliver_at_ms, ledger_id, entry_id)

_NO_ROWS = np.empty((0, 3), np.int64)
_NO_ROWS.flags.writeable = False


class DelayedDeliveryTracker:
    """Positions waiting for their deliver-at time, earliest first."""

    def __init__(self, tick_time_ms: int = 1000, strict: bool = True) -> None:
        self._tick = tick_time_ms
        self._strict = strict
        self._held: dict[tuple[int, int], tuple[int, int | None]] = {}  # position -> (deliver_at, key hash)
        self._heap: list[_Item] = []  # items added one by one
        self._runs: list[tuple[int, int, int, int, np.ndarray]] = []  # (first item, sequence, sorted rows)
        self._sequence = 0
        self._ready = _NO_ROWS  # rows [_head:] are queued, sorted, <= every item of the heap and runs
        self._head = 0
        self._stale = 0  # queued items whose position is not held at their time

    def cutoff(self, now_ms: int) -> int:
        """Messages with a deliver-at time at or before this are due."""
        return now_ms if self._strict else now_ms + self._tick

    def is_due(self, deliver_at_ms: int, now_ms: int) -> bool:
        """Whether a message with this deliver-at time may be delivered at ``now_ms``."""
        return deliver_at_ms <= self.cutoff(now_ms)

    # -- adding and removing ----------------------------------------------------------------
    def add(self, position: Position, deliver_at_ms: int, key_hash: int | None = None) -> None:
        """Hold ``position`` (with its sticky-key hash) until ``deliver_at_ms``; re-adding moves it."""
        held = self._held.get(position)
        self._held[position] = (deliver_at_ms, key_hash)
        if held is not None:
            if held[0] == deliver_at_ms:
                return
            self._stale += 1
        self._queue((deliver_at_ms, position[0], position[1]))
        self._compact_if_stale()

    def add_many(self, positions: np.ndarray, deliver_at_ms: np.ndarray) -> None:
        """:meth:`add` of many positions (an ``(n, 2)`` int64 array of ``(ledger_id,
        entry_id)`` rows; no sticky-key hashes) at their deliver-at times. O(n log(n + held))."""
        if not len(positions):
            return
        rows = np.column_stack((np.asarray(deliver_at_ms, np.int64), positions))
        rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]
        times = rows[:, 0].tolist()
        keys = list(zip(rows[:, 1].tolist(), rows[:, 2].tolist(), strict=True))
        first = (times[0], *keys[0])
        if (
            len(set(keys)) < len(keys)
            or not self._held.keys().isdisjoint(keys)
            or (self._ready_rows() and first <= self._last_ready())
        ):
            for at, (lid, eid) in zip(times, keys, strict=True):
                self.add(Position(lid, eid), at)
            return
        self._held.update(zip(keys, zip(times, repeat(None)), strict=False))
        self._push_run(rows)

    def remove(self, position: tuple[int, int]) -> bool:
        """Stop holding ``position``; True if it was held."""
        if self._held.pop(position, None) is None:
            return False
        self._stale += 1
        self._compact_if_stale()
        return True

    def remove_at_most(self, position: Position) -> int:
        """Stop holding every position at or before ``position`` (they were acknowledged). O(held)."""
        gone = [p for p in self._held if p <= position]
        for p in gone:
            del self._held[p]
        self._stale += len(gone)
        self._compact_if_stale()
        return len(gone)

    def clear(self) -> None:
        """Forget everything (dispatcher reset)."""
        self._held.clear()
        self._heap.clear()
        self._runs.clear()
        self._ready = _NO_ROWS
        self._head = 0
        self._stale = 0

    # -- due messages -----------------------------------------------------------------------
    def due_rows(self, now_ms: int) -> np.ndarray:
        """The messages due at ``now_ms``, without removing them, as an ``(n, 3)`` int64 array
        of ``(deliver_at, ledger_id, entry_id)`` rows, earliest first (read only; valid until
        the tracker next changes). O(log n + due): no object per message."""
        rows = self._due(self.cutoff(now_ms))
        return rows if not self._stale else rows[self._live(rows)]

    def peek_due(self, now_ms: int) -> list[tuple[int, Position]]:
        """``(deliver_at, position)`` of the messages due at ``now_ms``, earliest first,
        without removing them. O(log n + due)."""
        return [(at, Position(lid, eid)) for at, lid, eid in self.due_rows(now_ms).tolist()]

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[tuple[Position, int | None]]:
        """Remove and return ``(position, key hash)`` of the messages due at ``now_ms``,
        earliest deliver-at time first (at most ``limit``). O(log n + due)."""
        rows = self._due(self.cutoff(now_ms))
        if not len(rows):
            return []
        held = self._held
        if not self._stale and limit is None:  # every item is held: no item to skip
            self._head += len(rows)
            return [(p, held.pop(p)[1]) for p in Position.from_rows(rows[:, 1:])]
        out: list[tuple[Position, int | None]] = []
        taken = 0
        for at, lid, eid in rows.tolist():
            if limit is not None and len(out) >= limit:
                break
            taken += 1
            entry = held.get((lid, eid))
            if entry is not None and entry[0] == at:
                del held[(lid, eid)]
                out.append((Position(lid, eid), entry[1]))
            else:
                self._stale -= 1
        self._head += taken
        return out

    def pop_due_rows(self, now_ms: int) -> np.ndarray:
        """:meth:`pop_due` as rows: the messages due at ``now_ms``, removed, as an ``(n, 3)``
        int64 array of ``(deliver_at, ledger_id, entry_id)`` rows, earliest first (sticky-key
        hashes are not returned). O(log n + due), no object per message but the dictionary's."""
        rows = self._due(self.cutoff(now_ms))
        if not len(rows):
            return rows
        self._head += len(rows)
        if self._stale:
            live = self._live(rows)
            self._stale -= len(rows) - int(live.sum())
            rows = rows[live]
        deque(map(self._held.__delitem__, zip(rows[:, 1].tolist(), rows[:, 2].tolist(), strict=True)), maxlen=0)
        return rows

    def next_deliver_at(self) -> int | None:
        """The earliest deliver-at time held, None when empty. O(1) amortised (stale items at
        the front of the queue are dropped on the way)."""
        if not self._held:
            return None
        if self._stale:
            self._drop_stale_fronts()
        times = [item[0] for item in (self._heap[:1] + self._runs[:1])]
        if self._ready_rows():
            times.append(int(self._ready[self._head, 0]))
        return min(times)

    def next_due_ms(self) -> int | None:
        """When the earliest message held becomes due (its deliver-at time, one tick earlier
        when not strict), None when empty: when its dispatcher's timer should fire."""
        at = self.next_deliver_at()
        if at is None:
            return None
        return at if self._strict else at - self._tick

    def positions(self) -> list[Position]:
        """The positions held, earliest deliver-at time first. O(n log n)."""
        return [Position(lid, eid) for _, lid, eid in sorted((at, *p) for p, (at, _) in self._held.items())]

    # -- internals --------------------------------------------------------------------------
    def _ready_rows(self) -> int:
        return len(self._ready) - self._head

    def _last_ready(self) -> _Item:
        at, lid, eid = self._ready[-1].tolist()
        return at, lid, eid

    def _queue(self, item: _Item) -> None:
        """Queue one item: on the heap, unless it sorts before what is ready already."""
        if self._ready_rows() and item <= self._last_ready():
            rows = np.concatenate((self._ready[self._head :], np.array([item], np.int64)))
            self._ready = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]
            self._head = 0
        else:
            heapq.heappush(self._heap, item)

    def _is_live(self, at: int, lid: int, eid: int) -> bool:
        held = self._held.get((lid, eid))
        return held is not None and held[0] == at

    def _drop_stale_fronts(self) -> None:
        """Drop the stale items at the front of the ready rows, the heap and the runs, so that
        each front is a held message (or empty)."""
        ready = self._ready
        while self._head < len(ready) and not self._is_live(*ready[self._head].tolist()):
            self._head += 1
            self._stale -= 1
        heap, runs = self._heap, self._runs
        while heap and not self._is_live(*heap[0]):
            heapq.heappop(heap)
            self._stale -= 1
        while runs and not self._is_live(*runs[0][:3]):
            rows = heapq.heappop(runs)[-1]
            self._stale -= 1
            if len(rows) > 1:
                self._push_run(rows[1:])

    def _push_run(self, rows: np.ndarray) -> None:
        at, lid, eid = rows[0].tolist()
        heapq.heappush(self._runs, (at, lid, eid, self._sequence, rows))
        self._sequence += 1

    def _due(self, cutoff: int) -> np.ndarray:
        """Take the items due at ``cutoff`` off the heap and the runs (onto the ready rows, in
        order); the ready rows due (stale ones included), a view."""
        heap, runs = self._heap, self._runs
        chunks = []
        if heap and heap[0][0] <= cutoff:
            taken = []
            while heap and heap[0][0] <= cutoff:
                taken.append(heapq.heappop(heap))
            chunks.append(np.array(taken, np.int64))
        if runs and runs[0][0] <= cutoff:
            if len(runs) > 1:
                self._merge_runs()
            rows = runs.pop()[-1]
            due = int(np.searchsorted(rows[:, 0], cutoff, side="right"))
            chunks.append(rows[:due])
            if due < len(rows):
                self._push_run(rows[due:])
        if chunks:
            taken_rows = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            if len(chunks) > 1:
                taken_rows = taken_rows[np.lexsort((taken_rows[:, 2], taken_rows[:, 1], taken_rows[:, 0]))]
            self._ready = np.concatenate((self._ready[self._head :], taken_rows))
            self._head = 0
        elif self._head == len(self._ready):
            return _NO_ROWS  # nothing ready: the dispatcher's every round, with no numpy work
        ready = self._ready[self._head :]
        return ready[: int(np.searchsorted(ready[:, 0], cutoff, side="right"))]

    def _merge_runs(self) -> None:
        """Merge every run into one (one concatenation and one sort in numpy), so that taking
        the due items off the runs costs one binary search, not one per run (the replay adds a
        run per step, and a step may find many of them due, as its old array queue did)."""
        rows = np.concatenate([run[-1] for run in self._runs])
        self._runs.clear()
        self._push_run(rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))])

    def _live(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` (queued items, in order) are held at their time, each once."""
        held = self._held
        live = np.zeros(len(rows), bool)
        previous = None
        for i, (at, lid, eid) in enumerate(rows.tolist()):
            entry = held.get((lid, eid))
            if entry is not None and entry[0] == at and (at, lid, eid) != previous:
                live[i] = True
                previous = (at, lid, eid)
        return live

    def _compact_if_stale(self) -> None:
        """Rebuild the queue from what is held once stale items outnumber the held ones."""
        if self._stale > len(self._held) + _STALE_SLACK:
            self._heap = [(at, lid, eid) for (lid, eid), (at, _) in self._held.items()]
            heapq.heapify(self._heap)
            self._runs.clear()
            self._ready = _NO_ROWS
            self._head = 0
            self._stale = 0

    def _check(self) -> None:
        """Assert the queue's order, that every held position is queued at its time, and the
        stale count. O(n log n)."""
        heap = self._heap
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2] <= heap[i], f"heap order broken at {i}"
        runs = self._runs
        for i in range(1, len(runs)):
            assert runs[(i - 1) // 2][:4] <= runs[i][:4], f"run heap order broken at {i}"
        in_runs: list[_Item] = []
        for at, lid, eid, _, rows in runs:
            items = [tuple(row) for row in rows.tolist()]
            assert items and items == sorted(items) and items[0] == (at, lid, eid), "a run out of order"
            in_runs.extend(items)
        ready = [tuple(row) for row in self._ready[self._head :].tolist()]
        assert ready == sorted(ready), "ready items out of order"
        assert not ready or all(ready[-1] <= item for item in heap + in_runs), "a ready item after a queued one"
        queued = heap + in_runs + ready
        live = {(at, lid, eid) for (lid, eid), (at, _) in self._held.items()}
        assert live <= set(queued), f"held but not queued: {sorted(live - set(queued))[:3]}"
        assert self._stale == len(queued) - len(live), f"stale count {self._stale}, {len(queued) - len(live)} stale"

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, position: object) -> bool:
        return position in self._held
