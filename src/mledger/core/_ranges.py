"""The ack range set: which positions above the mark-delete have been individually acked.

Theory of operation
-------------------
Pulsar keeps a cursor's individually-acked positions in ``OpenLongPairRangeSet`` (HEAD:
``PositionRangeSet``): a sorted map ``ledgerId -> bitset`` where bit ``e`` means ``L:e`` is
acked. Ranges are *derived* from the bits and reported per ledger as open-closed pairs
``(L:first-1 .. L:last]``; a range never crosses a ledger boundary.

:class:`AckRangeSet` is the same structure with a roaring bitmap (pyroaring) per ledger under a
``SortedDict`` index, so every operation costs what it touches:

* adding or testing one position is O(1) (one bitmap call);
* run boundaries are found with ``contains_range`` in an exponential search, O(log run);
* the number of ranges (``size()``) is derived per ledger as ``card - |B ∩ (B << 1)|`` in
  O(containers) and cached until that ledger changes;
* bulk export (persistence) walks runs with vectorised numpy over the bitmap's values when
  runs are short, and run by run when they are long, so it is O(ranges) either way; the runs
  exported are kept per ledger, and adds merged into them, until the ledger changes otherwise;
* a persist that only needs the size of its record (a replay's) exports
  :class:`RangeRuns`: a frozen copy per ledger, kept until the ledger changes, whose record
  size follows from bitmap ranks of its run bounds (O(containers), no run derived), so a
  persist costs the ledgers changed since the last one;
* the messages of the acked entries (batches) are kept per ledger, and their total, as entries
  are added and runs absorbed (:meth:`AckRangeSet.weigh`).

Entry ids are bitmap indexes and must lie in ``[0, 2**32)`` (as in Pulsar's roaring sets).
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

import numpy as np
from pyroaring import BitMap, FrozenBitMap
from sortedcontainers import SortedDict

from ._entry_messages import EntryMessages
from ._errors import InvalidPositionError
from ._ints import UINT64_MASK
from ._position import Position
from ._pulsar_versions import LongArrayCutoff

MAX_ENTRY_ID = (1 << 32) - 1
"""The largest entry id a range set can hold (roaring bitmaps index 32-bit values)."""

CACHED_RUNS_PER_LEDGER = 4096
"""Ledgers with at most this many ranges keep their exported runs until they change (64 KiB
at most per ledger); of the ledgers with more, only the last exported keeps them (a persist
reads them twice: its record, then what the close record would keep), the others recompute
them, vectorised, on every export."""

PENDING_ADDS = 64
"""Adds (single or bulk) a ledger whose runs are cached takes in before its runs are derived
from its bitmap again: up to this many are merged into the cached runs at the next export, in
one vectorised union (O(runs + entries added), where deriving them costs O(acked entries))."""

SMALL_ADD = 32
"""Bulk adds of at most this many entries are applied one by one (:meth:`AckRangeSet.add_many`)."""

PENDING_BULK = 1024
"""The most entries of one bulk add kept pending (a larger one drops the cached runs)."""

WORDS_PER_STEP = 2048
"""BitSet words :meth:`AckRangeSet.add_words` expands at a time (131,072 entries, ~1 MiB)."""

OpenClosedRange = tuple[Position, Position]
LedgersToken = tuple[tuple[int, FrozenBitMap], ...]
"""What :meth:`AckRangeSet.prefix_token` returns: opaque to callers, compared by identity."""


class AckRangeSet:
    """Acked positions as per-ledger roaring bitmaps, with Pulsar's range semantics.

    Not thread-safe by itself: the owning cursor serialises access under its lock.

    >>> s = AckRangeSet()
    >>> s.add_range(3, 5, 7); s.add(3, 10); s.add(3, 9)
    3
    True
    True
    >>> str(s), s.size(), s.cardinality()
    ('[(3:4..3:7],(3:8..3:10]]', 2, 5)
    """

    __slots__ = (
        "_bitmaps",
        "_runs",
        "_run_total",
        "_run_arrays",
        "_large_runs",
        "_pending",
        "_cardinality",
        "_weights",
        "_extra",
        "_extra_version",
        "_extra_total",
        "_extra_generation",
        "_frozen",
    )

    def __init__(self) -> None:
        self._bitmaps: SortedDict = SortedDict()  # ledger id -> non-empty BitMap
        self._runs: dict[int, int] = {}  # cached run count per ledger; absent = stale
        self._run_total = 0  # the sum of _runs: size() recounts only the stale ledgers
        # cached closed runs (read-only arrays) of ledgers with few runs; dropped with _runs
        self._run_arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._large_runs: int | None = None  # the one ledger of more runs cached in _run_arrays
        self._pending: dict[int, list[int | np.ndarray]] = {}  # adds not in the cached runs yet, per ledger
        self._cardinality = 0
        # messages beyond one of the acked entries, per ledger, kept up to date once counted
        # (see weigh); absent = not counted yet
        self._weights: EntryMessages | None = None
        self._extra: dict[int, int] = {}
        self._extra_version: dict[int, int] = {}
        # the sum of _extra when it holds every ledger with counts, as of the weights' generation
        # (None: count again); kept up to date with _extra
        self._extra_total: int | None = None
        self._extra_generation = -1
        # frozen copies of ledgers' bitmaps made by range_runs, kept with their run count
        self._frozen: dict[int, FrozenBitMap] = {}

    # -- adding -----------------------------------------------------------------------------
    def add(self, ledger_id: int, entry_id: int) -> bool:
        """Mark ``ledger_id:entry_id`` acked; return True if it was not acked before. O(1): one
        bitmap call, and a cache to drop only when that ledger's caches were built."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or not 0 <= entry_id <= MAX_ENTRY_ID:
            return self._add_to_new_ledger(ledger_id, entry_id)
        try:
            bm.add_checked(entry_id)
        except KeyError:
            return False
        # the ledger's caches, inline (this path runs once per single ack): its run count follows
        # from the entry's neighbours, its cached runs take the entry at the next export (_pend)
        count = self._runs.get(ledger_id)
        if count is not None or ledger_id in self._run_arrays:
            self._frozen.pop(ledger_id, None)
            if count is not None:
                grown = 1 - (entry_id > 0 and entry_id - 1 in bm) - (entry_id < MAX_ENTRY_ID and entry_id + 1 in bm)
                self._runs[ledger_id] = count + grown
                self._run_total += grown
            if ledger_id in self._run_arrays:
                self._pend(ledger_id, entry_id)
        self._cardinality += 1
        extra = self._extra
        if extra and ledger_id in extra:
            self._add_extra(ledger_id, self._weights.of(ledger_id, entry_id) - 1)  # type: ignore[union-attr]
        return True

    def _follow_many(self, ledger_id: int, values: np.ndarray) -> None:
        """The caches of one ledger after a bulk add of ``values`` (some perhaps acked before;
        an array the set may keep: nobody changes it): its run count is counted again when
        next asked; its cached runs take them at the next export (:meth:`_pend`) when they are
        few, else they are dropped."""
        count = self._runs.pop(ledger_id, None)
        if count is not None:
            self._run_total -= count
            self._frozen.pop(ledger_id, None)
        if ledger_id not in self._run_arrays:
            return
        if len(values) > PENDING_BULK:
            self._run_arrays.pop(ledger_id)
            self._pending.pop(ledger_id, None)
            return
        self._pend(ledger_id, values)

    def _pend(self, ledger_id: int, entries: int | np.ndarray) -> None:
        """Keep ``entries`` added to a ledger whose runs are cached, for its next export to
        merge (up to :data:`PENDING_ADDS` adds; past them the cached runs are dropped)."""
        pending = self._pending.get(ledger_id)
        if pending is None:
            self._pending[ledger_id] = [entries]
        elif len(pending) < PENDING_ADDS:
            pending.append(entries)
        else:
            del self._pending[ledger_id]
            self._run_arrays.pop(ledger_id)

    def _add_to_new_ledger(self, ledger_id: int, entry_id: int) -> bool:
        """:meth:`add` of the first entry of a ledger (or of a bad entry id, refused)."""
        if not 0 <= entry_id <= MAX_ENTRY_ID:
            _bad_entry(ledger_id, entry_id)
        self._bitmaps[ledger_id] = BitMap((entry_id,))
        self._changed(ledger_id)
        self._extra_total = None  # a ledger with no kept count
        self._cardinality += 1
        return True

    def add_range(self, ledger_id: int, first_entry: int, last_entry: int) -> int:
        """Mark ``[first_entry, last_entry]`` of one ledger acked; return how many were new.

        O(containers spanned).
        """
        if first_entry > last_entry:
            return 0
        if first_entry < 0 or last_entry > MAX_ENTRY_ID:
            _bad_entry(ledger_id, first_entry if first_entry < 0 else last_entry)
        bm = self._bitmap_for(ledger_id)
        before = bm.range_cardinality(first_entry, last_entry + 1)
        bm.add_range(first_entry, last_entry + 1)
        added = (last_entry - first_entry + 1) - before
        if added:
            # a whole new run keeps the ledger's extra messages in O(1); any other change recounts
            self._changed(ledger_id, keep_extra=not before and self._follow_extra(ledger_id, first_entry, last_entry))
            self._cardinality += added
        return added

    def add_many(self, ledger_id: int, entry_ids: np.ndarray | Iterable[int]) -> int:
        """Mark many entries of one ledger acked in one bulk call; return how many were new.

        O(n) in C; the iterable form of individual acks is built on this.
        """
        values = np.asarray(entry_ids if isinstance(entry_ids, np.ndarray) else list(entry_ids))
        if values.size == 0:
            return 0
        if values.size <= SMALL_ADD:
            return self._add_few(ledger_id, values)
        low, high = values.min(), values.max()
        if low < 0 or high > MAX_ENTRY_ID:
            _bad_entry(ledger_id, int(low) if low < 0 else int(high))
        return self._add_bitmap(ledger_id, BitMap(array.array("I", values.astype(np.uint32).tobytes())))

    def add_sorted(self, ledger_id: int, entry_ids: np.ndarray, high: int) -> int:
        """:meth:`add_many` of entry ids the caller checked: an ascending ``uint32`` array
        (repeats allowed) whose last id is ``high``, read-only (the set may keep it: its cached
        runs take it at the next export). Return how many were new.

        The ids become one bitmap, in C; when it holds as many as the array and none was acked
        before (the usual case), they are all new, and their messages are counted over the
        array itself, else over the bitmap's difference with the ledger's. O(n) in C.
        """
        incoming = BitMap(array.array("I", entry_ids.tobytes()), optimize=False)
        distinct = len(incoming) == entry_ids.size
        return self._add_bitmap(ledger_id, incoming, entry_ids if distinct else None, high)

    def _add_bitmap(self, ledger_id: int, incoming: BitMap, entry_ids: np.ndarray | None = None, high: int = 0) -> int:
        """Add the entries of ``incoming`` to one ledger; return how many were new.
        ``entry_ids``: the same entries as an ascending read-only ``uint32`` array whose last
        is ``high`` (else derived from the bitmaps when needed), taken as they are when none
        was acked before. O(entries) in C."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None:  # a new ledger: no messages counted, no runs cached
            if not incoming:
                return 0
            self._bitmaps[ledger_id] = incoming
            self._extra_total = None  # a ledger with no kept count
            self._cardinality += len(incoming)
            return len(incoming)
        fresh = entry_ids
        if fresh is not None and bm.isdisjoint(incoming):
            bm |= incoming
        else:
            new = incoming - bm
            if not new:
                return 0
            bm |= new
            fresh = np.frombuffer(new.to_array(), dtype=np.uint32)
            high = new.max()
        extra = self._extra
        if extra and ledger_id in extra:
            self._add_extra(ledger_id, self._weights.extra_of_ascending(ledger_id, fresh, high))  # type: ignore[union-attr]
        self._follow_many(ledger_id, fresh)
        self._cardinality += fresh.size
        return int(fresh.size)

    def _bitmap_for(self, ledger_id: int) -> BitMap:
        """The ledger's bitmap, created empty if it has none (the caller adds to it, or drops
        it again when nothing was added)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None:
            bm = self._bitmaps[ledger_id] = BitMap()
            self._extra_total = None  # a ledger with no kept count
        return bm

    def _add_few(self, ledger_id: int, values: np.ndarray) -> int:
        """:meth:`add_many` of at most :data:`SMALL_ADD` entries, one by one in Python (the
        bulk path's dozen numpy calls cost more than a few entries)."""
        ids = values.tolist()
        low, high = min(ids), max(ids)
        if low < 0 or high > MAX_ENTRY_ID:
            _bad_entry(ledger_id, low if low < 0 else high)
        bm = self._bitmap_for(ledger_id)
        fresh = [entry_id for entry_id in set(ids) if entry_id not in bm]
        if not fresh:
            if not bm:
                del self._bitmaps[ledger_id]
            return 0
        bm.update(fresh)
        extra = self._extra
        if extra and ledger_id in extra:
            self._add_extra(ledger_id, self._weights.extra_of(ledger_id, fresh))  # type: ignore[union-attr]
        self._follow_many(ledger_id, np.array(fresh, dtype=np.int64))
        self._cardinality += len(fresh)
        return len(fresh)

    def add_words(self, ledger_id: int, words: np.ndarray) -> int:
        """Mark acked the set bits of one ledger's ``BitSet.toLongArray()`` words; return how
        many were new (Pulsar's ``build`` for one ledger).

        Converts :data:`WORDS_PER_STEP` words at a time, so the transient memory is a few MiB
        whatever the number of words (expanding every set bit at once costs 8 bytes per acked
        entry: a 10 MB record of dense words would need gigabytes). O(words * 64).
        """
        words = np.asarray(words, dtype=np.int64)
        if words.size == 0:
            return 0
        nonzero = np.flatnonzero(words)
        if nonzero.size == 0:
            return 0
        last = int(nonzero[-1])
        word = int(words[last])
        top = last * 64 + (63 if word < 0 else word.bit_length() - 1)
        if top > MAX_ENTRY_ID:
            _bad_entry(ledger_id, top)
        added = 0
        for start in range(0, last + 1, WORDS_PER_STEP):
            chunk = words[start : start + WORDS_PER_STEP]
            if not chunk.any():
                continue
            bits = np.flatnonzero(
                np.unpackbits(np.ascontiguousarray(chunk, dtype="<i8").view(np.uint8), bitorder="little")
            )
            added += self.add_many(ledger_id, bits.astype(np.uint32) + np.uint32(start * 64))
        return added

    def add_open_closed(self, lower_ledger: int, lower_entry: int, upper_ledger: int, upper_entry: int) -> None:
        """Add the open-closed range ``(lower..upper]`` with Pulsar's cross-ledger rules.

        Same ledger: entries ``lower_entry+1 .. upper_entry``. Across ledgers (Pulsar's
        ``OpenLongPairRangeSet.addOpenClosed``): the lower ledger is filled up to its highest
        acked entry only if it already has acked entries above ``lower_entry`` (a ledger is
        never invented), the upper ledger gets ``0 .. upper_entry``, ledgers in between are
        not touched. Callers that know the ledger sizes split ranges first (recovery does).
        """
        if (lower_ledger, lower_entry) >= (upper_ledger, upper_entry):
            return
        if lower_ledger == upper_ledger:
            self.add_range(lower_ledger, lower_entry + 1, upper_entry)
            return
        bm = self._bitmaps.get(lower_ledger)
        if bm is not None:
            top = bm.max()
            if top > lower_entry:
                self.add_range(lower_ledger, lower_entry + 1, top)
        self.add_range(upper_ledger, 0, upper_entry)

    # -- removing ---------------------------------------------------------------------------
    def remove_at_most(self, ledger_id: int, entry_id: int) -> int:
        """Remove every position ``<= ledger_id:entry_id``; return how many were removed.

        O(ledgers dropped + containers trimmed).
        """
        removed = 0
        bitmaps = self._bitmaps
        while bitmaps:
            first = bitmaps.peekitem(0)[0]
            if first >= ledger_id:
                break
            removed += len(bitmaps.popitem(0)[1])
            self._changed(first)
        bm = bitmaps.get(ledger_id)
        if bm is not None and entry_id >= 0 and bm.min() <= entry_id:
            before, first = len(bm), bm.min()
            last = min(entry_id, MAX_ENTRY_ID)
            bm.remove_range(0, last + 1)
            gone = before - len(bm)
            removed += gone
            # one run absorbed (the mark-delete's usual move) keeps the extra messages in O(1)
            whole_run = gone == last - first + 1
            self._changed(ledger_id, keep_extra=whole_run and self._follow_extra(ledger_id, first, last, -1))
            if not bm:
                del bitmaps[ledger_id]
                self._drop_extra(ledger_id)
        self._cardinality -= removed
        return removed

    def remove(self, ledger_id: int, entry_id: int) -> bool:
        """Un-ack one position; return True if it was acked. O(1)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or entry_id not in bm:
            return False
        bm.discard(entry_id)
        if self._extra and ledger_id in self._extra:
            self._add_extra(ledger_id, 1 - self._weights.of(ledger_id, entry_id))  # type: ignore[union-attr]
        self._changed(ledger_id, keep_extra=True)
        self._cardinality -= 1
        if not bm:
            del self._bitmaps[ledger_id]
            self._drop_extra(ledger_id)
        return True

    def clear(self) -> None:
        """Remove everything. O(ledgers)."""
        self._bitmaps.clear()
        self._runs.clear()
        self._run_total = 0
        self._run_arrays.clear()
        self._pending.clear()
        self._frozen.clear()
        self._extra.clear()
        self._extra_total = None
        self._cardinality = 0

    # -- queries ----------------------------------------------------------------------------
    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether ``ledger_id:entry_id`` is acked. O(1)."""
        bm = self._bitmaps.get(ledger_id)
        return bm is not None and 0 <= entry_id <= MAX_ENTRY_ID and entry_id in bm

    def __contains__(self, position: object) -> bool:
        ledger_id, entry_id = cast("tuple[int, int]", position)
        return self.contains(ledger_id, entry_id)

    def is_empty(self) -> bool:
        """True when nothing is acked. O(1)."""
        return not self._bitmaps

    def __bool__(self) -> bool:
        return bool(self._bitmaps)

    def cardinality(self) -> int:
        """Number of acked positions. O(1)."""
        return self._cardinality

    def cardinality_between(self, lower: Position, upper: Position) -> int:
        """Acked positions in ``[lower, upper]`` (both inclusive, Pulsar's ``cardinality``).

        O(ledgers in between + containers of the two end ledgers).
        """
        if lower > upper:
            return 0
        total = 0
        for ledger_id in self._bitmaps.irange(lower[0], upper[0]):
            bm = self._bitmaps[ledger_id]
            lo = lower[1] if ledger_id == lower[0] else 0
            hi = upper[1] if ledger_id == upper[0] else MAX_ENTRY_ID
            if hi < 0 or lo > MAX_ENTRY_ID:
                continue
            lo = max(lo, 0)
            total += len(bm) if lo == 0 and hi >= MAX_ENTRY_ID else bm.range_cardinality(lo, min(hi, MAX_ENTRY_ID) + 1)
        return total

    def ledger_cardinality(self, ledger_id: int) -> int:
        """Acked entries of one ledger. O(containers)."""
        bm = self._bitmaps.get(ledger_id)
        return 0 if bm is None else len(bm)

    def ledger_ids(self) -> list[int]:
        """Ledgers holding acked entries, ascending."""
        return list(self._bitmaps.keys())

    def size(self) -> int:
        """Number of open-closed ranges (Pulsar's ``size()``). O(containers of changed ledgers)."""
        runs = self._runs
        if len(runs) != len(self._bitmaps):
            # a walk over the keys: a SortedDict's key view difference builds a SortedSet
            bitmaps = self._bitmaps
            for ledger_id in [ledger_id for ledger_id in bitmaps if ledger_id not in runs]:
                self._note_run_count(ledger_id, _run_count(bitmaps[ledger_id]))
        return self._run_total

    def __len__(self) -> int:
        return self.size()

    def ledger_size(self, ledger_id: int) -> int:
        """Number of ranges within one ledger. O(containers) once, then cached until it changes."""
        bm = self._bitmaps.get(ledger_id)
        return 0 if bm is None else self._ledger_run_count(ledger_id, bm)

    def ledger_words(self, ledger_id: int) -> np.ndarray:
        """``BitSet.toLongArray()`` of one ledger's acked entries (int64; empty if none). O(span / 64)."""
        bm = self._bitmaps.get(ledger_id)
        return np.empty(0, dtype=np.int64) if bm is None else bitmap_to_words(bm)

    def run_end(self, ledger_id: int, entry_id: int) -> int:
        """The last entry of the run containing the acked ``ledger_id:entry_id``. O(log run)."""
        return _run_end(self._bitmaps[ledger_id], entry_id)

    def neighbours(self, ledger_id: int, entry_id: int) -> int:
        """Which neighbours of ``ledger_id:entry_id`` in its ledger are acked: bit 1 the entry
        before, bit 2 the entry after. O(1), one bitmap lookup."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None:
            return 0
        return (entry_id > 0 and (entry_id - 1) in bm) | ((entry_id + 1) in bm) << 1

    def run_start(self, ledger_id: int, entry_id: int) -> int:
        """The first entry of the run containing the acked ``ledger_id:entry_id``. O(log run)."""
        return _run_start(self._bitmaps[ledger_id], entry_id)

    def run_after(self, ledger_id: int, entry_id: int) -> tuple[int, int, int] | None:
        """The closed run ``(ledger, first, last)`` that starts first after ``ledger_id:entry_id``
        (in that ledger or a later one; a run is never taken across ledgers), or None.
        O(log ledgers + log run)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is not None and entry_id < MAX_ENTRY_ID:
            nxt = bm.next_set_bit(max(entry_id + 1, 0)) if bm.max() > entry_id else None
            if nxt is not None:
                return ledger_id, nxt, _run_end(bm, nxt)
        for later in self._bitmaps.irange(minimum=ledger_id, inclusive=(False, True)):
            first = self._bitmaps[later].min()
            return later, first, _run_end(self._bitmaps[later], first)
        return None

    def run_before(self, ledger_id: int, entry_id: int) -> tuple[int, int, int] | None:
        """The closed run ``(ledger, first, last)`` that ends last before ``ledger_id:entry_id``
        (in that ledger or an earlier one), or None. O(log ledgers + log run)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is not None and entry_id > 0:
            below = bm.rank(entry_id - 1)
            if below:
                last = bm[below - 1]
                return ledger_id, _run_start(bm, last), last
        for earlier in self._bitmaps.irange(maximum=ledger_id, inclusive=(True, False), reverse=True):
            last = self._bitmaps[earlier].max()
            return earlier, _run_start(self._bitmaps[earlier], last), last
        return None

    def next_unacked_entry(self, ledger_id: int, entry_id: int) -> int:
        """The first entry id ``>= entry_id`` of the ledger that is not acked. O(log run)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or entry_id not in bm:
            return entry_id
        return _run_end(bm, entry_id) + 1

    def next_acked_entry(self, ledger_id: int, entry_id: int) -> int | None:
        """The first acked entry id ``>= entry_id`` of the ledger, or None. O(1)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or entry_id > MAX_ENTRY_ID:
            return None
        try:
            return bm.next_set_bit(max(entry_id, 0))
        except ValueError:
            return None

    def remove_after(self, ledger_id: int, entry_id: int) -> int:
        """Remove every position ``> ledger_id:entry_id``; return how many were removed."""
        removed = 0
        bitmaps = self._bitmaps
        while bitmaps:
            last = bitmaps.peekitem(-1)[0]
            if last <= ledger_id:
                break
            removed += len(bitmaps.popitem(-1)[1])
            self._changed(last)
        bm = bitmaps.get(ledger_id)
        if bm is not None and bm.max() > entry_id:
            before = len(bm)
            bm.remove_range(max(entry_id + 1, 0), MAX_ENTRY_ID + 1)
            removed += before - len(bm)
            self._changed(ledger_id)
            if not bm:
                del bitmaps[ledger_id]
        self._cardinality -= removed
        return removed

    def range_containing(self, ledger_id: int, entry_id: int) -> tuple[Position, Position] | None:
        """The *closed* range ``[first, last]`` containing the position, or None. O(log run)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or not 0 <= entry_id <= MAX_ENTRY_ID or entry_id not in bm:
            return None
        return Position(ledger_id, _run_start(bm, entry_id)), Position(ledger_id, _run_end(bm, entry_id))

    def first_range(self) -> OpenClosedRange | None:
        """The lowest range as ``(lower, upper]``, or None. O(log run)."""
        if not self._bitmaps:
            return None
        ledger_id, bm = self._bitmaps.peekitem(0)
        start = bm.min()
        return Position(ledger_id, start - 1), Position(ledger_id, _run_end(bm, start))

    def last_range(self) -> OpenClosedRange | None:
        """The highest range as ``(lower, upper]``, or None. O(log run)."""
        if not self._bitmaps:
            return None
        ledger_id, bm = self._bitmaps.peekitem(-1)
        end = bm.max()
        return Position(ledger_id, _run_start(bm, end) - 1), Position(ledger_id, end)

    def span(self) -> OpenClosedRange | None:
        """``(lower of the first range .. upper of the last range]``, or None."""
        first, last = self.first_range(), self.last_range()
        if first is None or last is None:
            return None
        return first[0], last[1]

    # -- iteration and export ---------------------------------------------------------------
    def ledger_runs(self, ledger_id: int) -> tuple[np.ndarray, np.ndarray]:
        """Closed runs ``[starts[i], ends[i]]`` of one ledger as int64 arrays. O(ranges)."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        return self._ledger_run_arrays(ledger_id, bm)

    def ledger_last_entry(self, ledger_id: int) -> int | None:
        """The highest acked entry of one ledger, None when it has none. O(1)."""
        bm = self._bitmaps.get(ledger_id)
        return None if bm is None else int(bm.max())

    def ledger_first_runs(self, ledger_id: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The first ``count`` closed runs of one ledger (all of them when it has fewer), as
        :meth:`ledger_runs` gives them. O(containers + count) for a ledger with more runs than
        that (its runs' first entries and the entries after their last, as bitmaps): the runs
        after are never expanded.

        >>> s = AckRangeSet(); s.add_many(1, [1, 2, 5, 9, 10, 11])
        6
        >>> [a.tolist() for a in s.ledger_first_runs(1, 2)]
        [[1, 5], [2, 5]]
        """
        bm = self._bitmaps.get(ledger_id)
        if bm is None or count <= 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        if self._ledger_run_count(ledger_id, bm) <= count or ledger_id in self._run_arrays:
            starts, ends = self._ledger_run_arrays(ledger_id, bm)
            return starts[:count], ends[:count]
        shifted = bm.shift(1)
        # the first runs are not the top one, whose successor the shift may drop (MAX_ENTRY_ID)
        return _first_values(bm - shifted, count), _first_values(shifted - bm, count) - 1

    def __iter__(self) -> Iterator[OpenClosedRange]:
        """Open-closed ranges ``(lower, upper]`` in ascending order."""
        for ledger_id in list(self._bitmaps.keys()):
            starts, ends = self.ledger_runs(ledger_id)
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                yield Position(ledger_id, start - 1), Position(ledger_id, end)

    def ranges(self) -> list[OpenClosedRange]:
        """All ranges as a list of ``(lower, upper]`` pairs."""
        return list(self)

    def to_range_arrays(self, max_ranges: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The first ``max_ranges`` ranges (nearest the mark-delete) as arrays.

        Returns ``(ledgers, lower_entries, upper_entries, dropped)`` where range i is
        ``(ledgers[i]:lower_entries[i] .. ledgers[i]:upper_entries[i]]`` and ``dropped`` counts
        the ranges beyond the limit. ``None`` or a negative limit means no limit. O(ranges).
        """
        ledger_ids: list[int] = []
        runs: list[tuple[np.ndarray, np.ndarray]] = []
        kept = 0
        dropped = 0
        unlimited = max_ranges is None or max_ranges < 0
        for ledger_id, bm in self._bitmaps.items():
            if not unlimited and kept >= max_ranges:  # type: ignore[operator]
                dropped += self._ledger_run_count(ledger_id, bm)
                continue
            starts, ends = self._ledger_run_arrays(ledger_id, bm)
            if not unlimited and kept + len(starts) > max_ranges:  # type: ignore[operator]
                take = max_ranges - kept  # type: ignore[operator]
                dropped += len(starts) - take
                starts, ends = starts[:take], ends[:take]
            kept += len(starts)
            ledger_ids.append(ledger_id)
            runs.append((starts, ends))
        return (*_range_arrays(ledger_ids, runs), dropped)

    def range_runs(self, max_ranges: int | None = None) -> RangeRuns:
        """The first ``max_ranges`` ranges as :class:`RangeRuns` (what :meth:`to_range_arrays`
        returns, before any run is derived). ``None`` or a negative limit means no limit.
        O(ledgers) plus, per ledger changed since the last export, a bitmap copy and its run
        count (O(containers)); the ledger the limit cuts: O(its runs up to the cut); the ledgers
        after it: nothing."""
        frozen = self._frozen
        if max_ranges is None or max_ranges < 0 or self.size() <= max_ranges:
            bitmaps = self._bitmaps
            every = tuple(bitmaps)  # the keys in C (a SortedDict's items() view iterates in Python)
            if len(frozen) != len(every):
                self.size()  # every run count cached: a frozen copy is kept with it
                for ledger_id in every:
                    if ledger_id not in frozen:
                        frozen[ledger_id] = _frozen_copy(bitmaps[ledger_id])
            return RangeRuns(every, tuple(map(frozen.__getitem__, every)), self._run_total, 0, self._cardinality)
        ledger_ids: list[int] = []
        parts: list[FrozenBitMap | tuple[np.ndarray, np.ndarray]] = []
        kept = entries = 0
        bitmaps, run_counts = self._bitmaps, self._runs  # every run count cached by size() above
        for ledger_id in bitmaps:
            if kept >= max_ranges:
                break  # this ledger and every later one dropped
            bm = bitmaps[ledger_id]
            runs = run_counts[ledger_id]
            ledger_ids.append(ledger_id)
            if kept + runs <= max_ranges:
                part = frozen.get(ledger_id)
                if part is None:
                    part = frozen[ledger_id] = _frozen_copy(bm)  # dropped with the run count
                parts.append(part)
                kept += runs
                entries += len(bm)
            else:
                take = max_ranges - kept
                starts, ends = self.ledger_first_runs(ledger_id, take)
                parts.append((starts, ends))
                kept += take
                entries += int((ends - starts).sum()) + take
        return RangeRuns(tuple(ledger_ids), tuple(parts), kept, self._run_total - kept, entries)

    def prefix_token(self, ledger_id: int) -> LedgersToken:
        """A token for the acknowledged entries of every ledger up to ``ledger_id``:
        :meth:`prefix_unchanged` tells whether they are still exactly those (the set's frozen
        copies of those ledgers, kept until their ledger changes, and the ledgers' ids).
        O(those ledgers), plus a copy of each changed since the last token or export.

        >>> acked = AckRangeSet()
        >>> acked.add(1, 5)
        True
        >>> token = acked.prefix_token(1)
        >>> acked.add(2, 0)  # a later ledger: the prefix holds
        True
        >>> acked.prefix_unchanged(token)
        True
        >>> acked.add(1, 7)
        True
        >>> acked.prefix_unchanged(token)
        False
        """
        bitmaps, frozen = self._bitmaps, self._frozen
        token = []
        for lid in bitmaps.irange(maximum=ledger_id):
            part = frozen.get(lid)
            if part is None:
                bm = bitmaps[lid]
                self._ledger_run_count(lid, bm)  # a frozen copy is kept with its run count
                part = frozen[lid] = _frozen_copy(bm)
            token.append((lid, part))
        return tuple(token)

    def prefix_unchanged(self, token: LedgersToken) -> bool:
        """Whether the ledgers :meth:`prefix_token` gave ``token`` for hold the same acknowledged
        entries, and no ledger was added among them (a copy stays only while its ledger is
        unchanged, and only for a ledger in the set). O(those ledgers)."""
        if not token:
            return False
        frozen = self._frozen
        for lid, part in token:
            if frozen.get(lid) is not part:
                return False
        return self._bitmaps.bisect_right(token[-1][0]) == len(token)

    def to_long_arrays(
        self, max_entries: int | None = None, cutoff: LongArrayCutoff = LongArrayCutoff.ADD_AND_GET
    ) -> tuple[dict[int, np.ndarray], int]:
        """Per-ledger ``BitSet.toLongArray()`` words, with Pulsar's ``toRanges(max)`` cut-off.

        Ledgers are taken in ascending order while the running sum of their *cardinalities*
        (acked entries, not ranges) stays ``<= max_entries``, counting the ledger itself
        (``ADD_AND_GET``: master's ``PositionRangeSet``) or only the ledgers before it
        (``GET_AND_ADD``: every release's ``OpenLongPairRangeSet``, which keeps the first ledger
        whatever its size); every later ledger is dropped. Returns ``(words_by_ledger,
        dropped_ranges)``. ``None`` or a negative limit means no limit. O(span / 64) per ledger.

        >>> s = AckRangeSet(); s.add_range(1, 0, 4)
        5
        >>> len(s.to_long_arrays(3)[0]), len(s.to_long_arrays(3, LongArrayCutoff.GET_AND_ADD)[0])
        (0, 1)
        """
        result: dict[int, np.ndarray] = {}
        dropped = 0
        running = 0
        unlimited = max_entries is None or max_entries < 0
        cut = False
        counts_itself = cutoff is LongArrayCutoff.ADD_AND_GET
        for ledger_id, bm in self._bitmaps.items():
            before = running
            running += len(bm)
            if cut or (not unlimited and (running if counts_itself else before) > max_entries):  # type: ignore[operator]
                cut = True
                dropped += self._ledger_run_count(ledger_id, bm)
                continue
            result[ledger_id] = bitmap_to_words(bm)
        return result, dropped

    @classmethod
    def from_long_arrays(cls, words_by_ledger: dict[int, np.ndarray] | Iterable[tuple[int, np.ndarray]]) -> AckRangeSet:
        """Build a set from per-ledger BitSet words (Pulsar's ``build``). O(span / 64)."""
        result = cls()
        items = words_by_ledger.items() if isinstance(words_by_ledger, dict) else words_by_ledger
        for ledger_id, words in items:
            result.add_words(int(ledger_id), np.asarray(words, dtype=np.int64))
        return result

    def _changed(self, ledger_id: int, keep_extra: bool = False) -> None:
        """Drop what is cached about one ledger: its bitmap changed (its extra messages too,
        unless the caller kept them up to date)."""
        count = self._runs.pop(ledger_id, None)
        if count is not None:
            self._run_total -= count
            self._frozen.pop(ledger_id, None)
        if self._run_arrays.pop(ledger_id, None) is not None:
            self._pending.pop(ledger_id, None)
        if not keep_extra:
            self._drop_extra(ledger_id)

    def _add_extra(self, ledger_id: int, more: int) -> None:
        """A ledger's kept extra messages grew by ``more`` (the caller checked it is kept)."""
        self._extra[ledger_id] += more
        if self._extra_total is not None:
            self._extra_total += more

    def _drop_extra(self, ledger_id: int) -> None:
        """Forget a ledger's kept extra messages (and the total they were part of)."""
        if self._extra.pop(ledger_id, None) is not None:
            self._extra_total = None

    def _follow_extra(self, ledger_id: int, first: int, last: int, sign: int = 1) -> bool:
        """The run ``[first, last]`` of one ledger was all added (``sign`` 1) or all removed
        (-1): its kept extra messages follow, O(1). True (always possible)."""
        extra = self._extra
        if extra and ledger_id in extra:
            runs = np.array([first], dtype=np.int64), np.array([last], dtype=np.int64)
            self._add_extra(ledger_id, sign * self._weights.extra_in_runs(ledger_id, *runs))  # type: ignore[union-attr]
        return True

    # -- messages -----------------------------------------------------------------------------
    def weigh(self, weights: EntryMessages | None) -> None:
        """Count the messages of the acked entries by ``weights`` (a managed ledger's message
        counts): once :meth:`extra_messages` has counted a ledger, single adds and bulk adds
        keep its count up to date (O(1) per entry), so the next call recounts only the ledgers
        changed otherwise (ranges, removals). None stops it."""
        self._weights = weights
        self._extra.clear()
        self._extra_version.clear()
        self._extra_total = None

    def extra_messages(self, weights: EntryMessages) -> int:
        """Messages beyond one per entry over the acked entries, by ``weights``. O(1) when this
        set is weighed by ``weights`` and nothing but adds, whole runs absorbed and single
        removals changed it since the last call (:meth:`weigh`; a ledger gained or emptied, a
        bulk add over acked entries or a rewritten count takes the next call through the
        ledgers); then O(ledgers with counts), else O(their ranges)."""
        if not weights.batched:
            return 0
        if weights is not self._weights:
            return sum(
                self.ledger_extra_messages(ledger_id, weights) for ledger_id in self._bitmaps if weights.has(ledger_id)
            )
        if self._extra_total is not None and self._extra_generation == weights.generation:
            return self._extra_total
        total = 0
        kept, versions = self._extra, self._extra_version
        for ledger_id in self._bitmaps:  # the kept counts inline: this runs on every observed change
            value = kept.get(ledger_id)
            if value is not None and versions[ledger_id] == weights.version(ledger_id):
                total += value
            elif weights.has(ledger_id):
                total += self.ledger_extra_messages(ledger_id, weights)
        # every ledger with counts is kept now, at this generation of the counts
        self._extra_total, self._extra_generation = total, weights.generation
        return total

    def ledger_extra_messages(self, ledger_id: int, weights: EntryMessages) -> int:
        """:meth:`extra_messages` of one ledger."""
        bm = self._bitmaps.get(ledger_id)
        if bm is None or not weights.has(ledger_id):
            return 0
        tracked = weights is self._weights
        version = weights.version(ledger_id)
        if tracked:
            value = self._extra.get(ledger_id)
            if value is not None and self._extra_version.get(ledger_id) == version:
                return value
        starts, ends = self._ledger_run_arrays(ledger_id, bm)
        value = weights.extra_in_runs(ledger_id, starts, ends)
        if tracked:
            self._extra[ledger_id] = value
            self._extra_version[ledger_id] = version
        return value

    def _ledger_run_arrays(self, ledger_id: int, bm: BitMap) -> tuple[np.ndarray, np.ndarray]:
        """Closed runs of one ledger, cached (read-only) until it changes when they are few
        (persisting a state exports every ledger, and most ledgers do not change between two
        persists), and the adds since merged into them (:data:`PENDING_ADDS`)."""
        cached = self._run_arrays.get(ledger_id)
        if cached is not None:
            pending = self._pending.pop(ledger_id, None)
            if pending is None:
                return cached
            starts, ends = _with_entries(*cached, pending)
        else:
            starts, ends = _runs_of(bm, self._runs.get(ledger_id))
            starts.flags.writeable = False
            ends.flags.writeable = False
        self._note_run_count(ledger_id, len(starts))
        if len(starts) > CACHED_RUNS_PER_LEDGER and self._large_runs != ledger_id:
            if self._large_runs is not None:
                self._run_arrays.pop(self._large_runs, None)
                self._pending.pop(self._large_runs, None)
            self._large_runs = ledger_id
        self._run_arrays[ledger_id] = (starts, ends)
        return starts, ends

    def _ledger_run_count(self, ledger_id: int, bm: BitMap) -> int:
        count = self._runs.get(ledger_id)
        if count is None:
            count = _run_count(bm)
            self._note_run_count(ledger_id, count)
        return count

    def _note_run_count(self, ledger_id: int, count: int) -> None:
        """Cache one ledger's run count (keeping :meth:`size`'s total)."""
        self._run_total += count - self._runs.get(ledger_id, 0)
        self._runs[ledger_id] = count

    # -- misc -------------------------------------------------------------------------------
    def copy(self) -> AckRangeSet:
        """An independent copy. O(size of the bitmaps)."""
        other = AckRangeSet()
        for ledger_id, bm in self._bitmaps.items():
            other._bitmaps[ledger_id] = BitMap(bm)
        other._runs = dict(self._runs)
        other._run_total = self._run_total
        other._run_arrays = dict(self._run_arrays)  # read-only arrays: shared
        other._large_runs = self._large_runs
        other._pending = {ledger_id: list(entries) for ledger_id, entries in self._pending.items()}
        other._frozen = dict(self._frozen)  # frozen: shared
        other._cardinality = self._cardinality
        return other

    def memory_bytes(self) -> int:
        """Approximate bytes held by the bitmaps (their serialized size)."""
        return sum(
            bm.get_statistics()["n_bytes_array_containers"]
            + bm.get_statistics()["n_bytes_run_containers"]
            + bm.get_statistics()["n_bytes_bitset_containers"]
            for bm in self._bitmaps.values()
        )

    def run_optimize(self) -> None:
        """Compress long runs into run containers (lower memory after mass acks)."""
        for bm in self._bitmaps.values():
            bm.run_optimize()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AckRangeSet):
            return NotImplemented
        return self._cardinality == other._cardinality and dict(self._bitmaps) == dict(other._bitmaps)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        """``[(L:E..L:E],...]``, Pulsar's text of the ranges. O(ranges), from the run arrays
        (no :class:`Position` per range: the internal stats write it for every cursor)."""
        parts: list[str] = []
        for ledger_id in list(self._bitmaps.keys()):
            starts, ends = self.ledger_runs(ledger_id)
            parts += [
                f"({ledger_id}:{s - 1}..{ledger_id}:{e}]" for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
            ]
        return "[" + ",".join(parts) + "]"

    def __repr__(self) -> str:
        return f"AckRangeSet(ranges={self.size()}, acked={self._cardinality})"

    def _check(self) -> None:
        """Assert the internal invariants (used by stress tests after each step)."""
        total = 0
        for ledger_id, bm in self._bitmaps.items():
            assert len(bm) > 0, f"empty bitmap kept for ledger {ledger_id}"
            total += len(bm)
            cached = self._runs.get(ledger_id)
            assert cached is None or cached == _run_count(bm), f"stale run count for {ledger_id}"
        assert total == self._cardinality, f"cardinality {self._cardinality} != {total}"
        assert set(self._runs) <= set(self._bitmaps), "run counts cached for absent ledgers"
        assert self._run_total == sum(self._runs.values()), "size()'s total differs from the cached counts"
        assert set(self._run_arrays) <= set(self._bitmaps), "runs cached for absent ledgers"
        assert set(self._frozen) <= set(self._runs), "a frozen copy kept without its run count"  # add relies on it
        assert all(self._frozen[ledger_id] == self._bitmaps[ledger_id] for ledger_id in self._frozen), "stale copy"
        assert set(self._pending) <= set(self._run_arrays), "adds pending for runs not cached"
        assert all(len(p) <= PENDING_ADDS for p in self._pending.values()), "too many adds pending"
        large = [ledger_id for ledger_id, runs in self._run_arrays.items() if len(runs[0]) > CACHED_RUNS_PER_LEDGER]
        assert large in ([], [self._large_runs]), f"runs of more than one large ledger cached: {large}"
        for ledger_id in list(self._run_arrays):
            starts, ends = self._ledger_run_arrays(ledger_id, self._bitmaps[ledger_id])  # pending adds applied
            fresh = _runs_of(self._bitmaps[ledger_id])
            assert np.array_equal(starts, fresh[0]) and np.array_equal(ends, fresh[1]), f"stale runs of {ledger_id}"
        weights = self._weights
        if weights is not None and self._extra_total is not None and self._extra_generation == weights.generation:
            fresh_total = sum(
                weights.extra_in_runs(ledger_id, *_runs_of(bm)) for ledger_id, bm in self._bitmaps.items()
            )
            assert self._extra_total == fresh_total, f"extra messages kept {self._extra_total}, counted {fresh_total}"
        for ledger_id, extra in self._extra.items():
            assert weights is not None and ledger_id in self._bitmaps, f"extra messages kept for absent {ledger_id}"
            if self._extra_version.get(ledger_id) == weights.version(ledger_id):
                counted = weights.extra_in_runs(ledger_id, *_runs_of(self._bitmaps[ledger_id]))
                assert extra == counted, f"extra messages of {ledger_id}: kept {extra}, counted {counted}"


class RangeRuns:
    """The first ranges of an :class:`AckRangeSet`, per ledger kept (ascending): a ledger all
    of whose runs are kept as a frozen copy of its acked entries, the ledger the limit cuts as
    the closed runs kept, ``(starts, ends)`` arrays (:meth:`AckRangeSet.range_runs`).

    The frozen copies are the set's own, kept until their ledger changes, so that an export
    of a state whose ledgers mostly did not change costs O(ledgers), and a consumer may keep
    what it derives from one ledger's part while the part stays the same object
    (:class:`~mledger.codec.PositionInfoRanges` keeps their record sizes). ``count`` ranges
    are kept, holding ``entries`` acknowledged entries; ``dropped`` more are beyond the limit.
    Immutable, independent of the set's later changes; the runs themselves are derived only
    when asked (:meth:`runs`, :meth:`arrays`)."""

    __slots__ = ("_arrays", "count", "dropped", "entries", "ledgers", "parts")

    def __init__(
        self,
        ledgers: tuple[int, ...],
        parts: tuple[FrozenBitMap | tuple[np.ndarray, np.ndarray], ...],
        count: int,
        dropped: int,
        entries: int,
    ) -> None:
        self.ledgers, self.parts = ledgers, parts
        self.count, self.dropped, self.entries = count, dropped, entries
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def runs(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The closed runs ``(starts, ends)`` kept of ``ledgers[index]``. O(its runs)."""
        part = self.parts[index]
        return part if isinstance(part, tuple) else _runs_of(part)

    def run_bounds(self, index: int, steps: Sequence[int]) -> tuple[int, list[int], list[int]]:
        """For the runs kept of ``ledgers[index]``: how many, and for each of the ascending
        ``steps`` (non-negative) how many runs have ``first - 1 < step`` and how many have
        ``last < step``. O(containers + steps) for a whole ledger (bitmap ranks, no run
        derived), O(steps log runs) for a cut one."""
        part = self.parts[index]
        if isinstance(part, tuple):
            starts, ends = part
            return (
                len(starts),
                np.searchsorted(starts, steps, side="right").tolist(),
                np.searchsorted(ends, steps).tolist(),
            )
        firsts = part - part.shift(1)  # the first entry of every run
        n = len(firsts)
        top = part.max()
        firsts_below: list[int] = []
        lasts_below: list[int] = []
        for i, step in enumerate(steps):
            if step > top:  # every run below from here: first - 1 < first <= top < step, last <= top
                rest = [n] * (len(steps) - i)
                return n, firsts_below + rest, lasts_below + rest
            if step <= 0:
                firsts_below.append(firsts.rank(0) if step == 0 else 0)
                lasts_below.append(0)
            else:
                firsts_below.append(firsts.rank(step))
                # the runs starting before step end before it, but the one holding step - 1 and step
                lasts_below.append(firsts.rank(step - 1) - (step - 1 in part and step in part))
        return n, firsts_below, lasts_below

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ledgers, lower_entries, upper_entries)``: range i is ``(ledgers[i]:lower_entries[i]
        .. ledgers[i]:upper_entries[i]]`` (:meth:`AckRangeSet.to_range_arrays`). O(ranges) once;
        the arrays are shared by every call."""
        if self._arrays is None:
            self._arrays = _range_arrays(self.ledgers, [self.runs(i) for i in range(len(self.ledgers))])
        return self._arrays


# -- bitmap helpers (module level: they are the hot inner loops) --------------------------------


def _bad_entry(ledger_id: int, entry_id: int) -> None:
    raise InvalidPositionError(f"invalid position {ledger_id}:{entry_id}: entry ids must lie in [0, {MAX_ENTRY_ID}]")


def _frozen_copy(bm: BitMap) -> FrozenBitMap:
    """An immutable copy of ``bm``, container for container: pyroaring's default
    (``optimize=True``) also run-optimizes the copy, which costs several times the copy itself
    (a persist copies every ledger changed since the last one, and reads the copy once if at
    all). O(containers) memory copies."""
    return FrozenBitMap(bm, optimize=False)


def _run_count(bm: BitMap | FrozenBitMap) -> int:
    # Elements whose predecessor is also present continue a run; the rest start one.
    return len(bm) - bm.intersection_cardinality(bm.shift(1))


def _range_arrays(
    ledger_ids: Sequence[int], runs: Sequence[tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ledgers, lower_entries, upper_entries)`` of each ledger's closed runs ``(starts,
    ends)``: open-closed ranges, new arrays (the runs may be cached, read-only). Whole-array
    operations once, not per ledger: a state spans many small ledgers. O(ranges)."""
    if not ledger_ids:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    ledgers = np.repeat(np.array(ledger_ids, dtype=np.int64), [len(starts) for starts, _ in runs])
    lowers = np.concatenate([starts for starts, _ in runs])
    lowers -= 1
    return ledgers, lowers, np.concatenate([ends for _, ends in runs])


def _first_values(bm: BitMap, count: int) -> np.ndarray:
    """The ``count`` lowest values of a bitmap as int64 (all of them when it has fewer)."""
    head = bm if len(bm) <= 4 * count + 1024 else bm[:count]  # a slice costs more than a short array
    return np.frombuffer(head.to_array(), dtype=np.uint32)[:count].astype(np.int64)


def _run_end(bm: BitMap | FrozenBitMap, entry: int) -> int:
    """Last value of the run of ``bm`` that contains ``entry`` (exponential + binary search)."""
    known = entry
    step = 1
    while True:
        probe = known + step
        if probe > MAX_ENTRY_ID or not bm.contains_range(known + 1, probe + 1):
            break
        known = probe
        step <<= 1
    bad = min(known + step, MAX_ENTRY_ID + 1)
    while bad - known > 1:
        mid = (known + bad) // 2
        if bm.contains_range(known + 1, mid + 1):
            known = mid
        else:
            bad = mid
    return known


def _run_start(bm: BitMap, entry: int) -> int:
    """First value of the run of ``bm`` that contains ``entry``."""
    known = entry
    step = 1
    while True:
        probe = known - step
        if probe < 0 or not bm.contains_range(probe, known):
            break
        known = probe
        step <<= 1
    bad = max(known - step, -1)
    while known - bad > 1:
        mid = (known + bad) // 2
        if bm.contains_range(mid, known):
            known = mid
        else:
            bad = mid
    return known


def _runs_of(bm: BitMap | FrozenBitMap, run_count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Closed runs of a bitmap as ``(starts, ends)`` int64 arrays, in O(runs).

    Short runs on average: vectorised over the values (at most 64 values per run). Long runs
    with short gaps: vectorised over the gaps (the complement between the first and last
    value, at most 64 per run). Long runs and long gaps: walked one by one with
    ``next_set_bit`` and the exponential run-end search.
    """
    runs = _run_count(bm) if run_count is None else run_count
    if runs == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    if len(bm) <= 64 * runs:
        values = np.frombuffer(bm.to_array(), dtype=np.uint32).astype(np.int64)
        breaks = np.flatnonzero(np.diff(values) != 1)
        starts = np.empty(len(breaks) + 1, dtype=np.int64)
        ends = np.empty(len(breaks) + 1, dtype=np.int64)
        starts[0] = values[0]
        starts[1:] = values[breaks + 1]
        ends[:-1] = values[breaks]
        ends[-1] = values[-1]
        return starts, ends
    low, high = bm.min(), bm.max()
    if high - low + 1 - len(bm) <= 64 * runs:
        # Long runs and short gaps: the gaps are the complement's runs within [low, high].
        holes = np.frombuffer(bm.flip(low, high + 1).to_array(), dtype=np.uint32).astype(np.int64)
        gap_breaks = np.flatnonzero(np.diff(holes) != 1)
        starts = np.empty(runs, dtype=np.int64)
        ends = np.empty(runs, dtype=np.int64)
        starts[0], ends[-1] = low, high
        starts[1:] = np.append(holes[gap_breaks], holes[-1:]) + 1  # after each gap's last hole
        ends[:-1] = np.append(holes[:1], holes[gap_breaks + 1]) - 1  # before each gap's first hole
        return starts, ends
    starts = np.empty(runs, dtype=np.int64)
    ends = np.empty(runs, dtype=np.int64)
    value = low
    for i in range(runs):
        if i:
            value = bm.next_set_bit(value)
        end = _run_end(bm, value)
        starts[i] = value
        ends[i] = end
        value = end + 1
    return starts, ends


def _with_entries(
    starts: np.ndarray, ends: np.ndarray, entries: Sequence[int | np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Closed runs ``(starts, ends)`` (ascending) after adding ``entries`` (single entries
    and arrays of them, in any order, acked before or not): the union of the runs and the
    entries, in one vectorised pass. O((runs + entries) log); the arrays returned are
    read-only."""
    singles = [e for e in entries if isinstance(e, int)]
    parts = [e for e in entries if not isinstance(e, int)]
    if singles:
        parts.append(np.array(singles, dtype=np.int64))
    added = parts[0] if len(parts) == 1 else np.concatenate(parts)
    lows = np.concatenate((starts, added))
    order = np.argsort(lows, kind="stable")
    lows = lows[order]
    highs = np.maximum.accumulate(np.concatenate((ends, added))[order])
    # a run starts wherever an interval begins past the highest end before it, plus one
    breaks = np.flatnonzero(lows[1:] > highs[:-1] + 1)
    starts = np.concatenate((lows[:1], lows[breaks + 1]))
    ends = np.concatenate((highs[breaks], highs[-1:]))
    starts.flags.writeable = False
    ends.flags.writeable = False
    return starts, ends


def bitmap_to_words(bm: BitMap) -> np.ndarray:
    """``java.util.BitSet.toLongArray()`` of a bitmap: little-endian int64 words, bit i of
    word w is value ``64*w + i``, trailing zero words dropped. O(span / 64)."""
    if not bm:
        return np.empty(0, dtype=np.int64)
    top = bm.max()
    nwords = top // 64 + 1
    bits = np.zeros(nwords * 64, dtype=np.bool_)
    starts, ends = _runs_of(bm)
    if len(starts) * 8 < len(bm):
        # Few long runs: mark run boundaries and take a prefix sum instead of every value.
        delta = np.zeros(nwords * 64 + 1, dtype=np.int8)
        np.add.at(delta, starts, 1)
        np.add.at(delta, ends + 1, -1)
        bits = np.cumsum(delta[:-1], dtype=np.int32).astype(np.bool_)
    else:
        bits[np.frombuffer(bm.to_array(), dtype=np.uint32)] = True
    return np.packbits(bits, bitorder="little").view("<i8").astype(np.int64, copy=False)


def words_to_entries(words: np.ndarray) -> np.ndarray:
    """The set bit indexes of BitSet words, ascending, as int64. O(words * 64)."""
    if words.size == 0:
        return np.empty(0, dtype=np.int64)
    raw = np.ascontiguousarray(words, dtype="<i8").view(np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).astype(np.int64)


def ack_set_to_words(ack_set: int) -> np.ndarray:
    """A Python-int bitset as ``BitSet.toLongArray()`` words (int64, trailing zeros dropped)."""
    if ack_set < 0:
        raise ValueError(f"ack set must be non-negative, got {ack_set}")
    if ack_set == 0:
        return np.empty(0, dtype=np.int64)
    nwords = (ack_set.bit_length() + 63) // 64
    return np.frombuffer(ack_set.to_bytes(nwords * 8, "little"), dtype="<i8").astype(np.int64)


def words_to_ack_set(words: Iterable[int] | np.ndarray) -> int:
    """BitSet words (``java.util.BitSet.toLongArray()``: signed 64-bit, lowest first; a
    protocol ack set, a stored batch deletion) as a Python-int bitset: bit ``i`` of word ``w``
    is bit ``64*w + i``. The one words-to-int conversion of mledger. O(words).

    >>> words_to_ack_set([-1, 1]) == (1 << 65) - 1
    True
    """
    if isinstance(words, np.ndarray):
        return int.from_bytes(words.astype("<i8").tobytes(), "little") if words.size else 0
    bits = 0
    for i, word in enumerate(words):  # a few words at most: cheaper than a numpy round trip
        bits |= (int(word) & UINT64_MASK) << (64 * i)
    return bits
