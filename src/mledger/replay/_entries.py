"""What the log has produced in one topic-partition: positions, batch sizes, deliver times."""

from __future__ import annotations

import bisect

import numpy as np


class _Sparse:
    """Values for a few of the dense indexes ``g``, appended in increasing ``g``; a default
    for the others. O(log n) lookups, amortised O(1) appends, 8 + itemsize bytes per value."""

    def __init__(self, dtype: type, default: int) -> None:
        self._g: np.ndarray = np.empty(256, np.int64)
        self._v: np.ndarray = np.empty(256, dtype)
        self._n = 0
        self._default = default

    def extend(self, g: np.ndarray, values: np.ndarray) -> None:
        need = self._n + len(g)
        if need > len(self._g):
            cap = max(need, 2 * len(self._g))
            self._g = np.resize(self._g, cap)
            self._v = np.resize(self._v, cap)
        self._g[self._n : need] = g
        self._v[self._n : need] = values
        self._n = need

    def forget_before(self, g: int) -> None:
        """Drop the values of indexes below ``g``; the array shrinks to fit what is left (at
        least its first capacity), so memory follows the values held. O(values held)."""
        keys = self._g[: self._n]
        cut = int(np.searchsorted(keys, g))
        if cut == 0:
            return
        left = self._n - cut
        cap = max(256, 2 * left)
        self._g = np.concatenate((keys[cut:], np.empty(cap - left, np.int64)))
        self._v = np.concatenate((self._v[cut : self._n], np.empty(cap - left, self._v.dtype)))
        self._n = left

    def get(self, g: np.ndarray) -> np.ndarray:
        keys = self._g[: self._n]
        out = np.full(len(g), self._default, self._v.dtype)
        if self._n and len(g):
            k = np.minimum(np.searchsorted(keys, g), self._n - 1)
            hit = keys[k] == g
            out[hit] = self._v[k[hit]]
        return out

    @property
    def nbytes(self) -> int:
        return self._g.nbytes + self._v.nbytes


class EntryIndex:
    """Every produced position of a topic-partition, with a dense index ``g`` in append order.

    It keeps the ledger list, and the batch size of batched entries and the deliver time of
    delayed ones (:class:`_Sparse`: plain entries cost nothing, a batched one 12 bytes, a
    delayed one 16). Ledger lookups are binary searches over the ledger list.

    :meth:`forget_ledgers_before` drops the ledgers the cluster deleted (trimmed), and every
    fact of their entries, so a long watch holds the facts of the ledgers that exist only. It
    is exact because nothing can name those entries again: Pulsar trims a ledger only once
    every cursor's mark-delete is past it (``ManagedLedgerImpl.internalTrimLedgers``), and a
    reset to a position in a deleted ledger lands on the first entry that exists
    (``ManagedLedgerImpl.getNextValidPosition``); an entry of a ledger that still exists is
    never forgotten, so a cursor reset below its mark-delete finds every batch size it can
    ack again, even under every cursor's mark-delete. Forgetting by mark-delete instead would
    lose those batch sizes at such a reset (Pulsar's readers can read them again; the replay
    could not), so it is not done. Its caller,
    :meth:`~mledger.replay.PartitionReplayer.forget_ledgers_before`, deletes its model's
    ledgers alike, so that a reset to the earliest position lands on the first ledger kept
    here too.
    """

    def __init__(self) -> None:
        self._ledger_ids: list[int] = []
        self._bases: list[int] = []
        self._counts: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.size = 0
        self._bsize = _Sparse(np.int32, 1)
        self._deliver = _Sparse(np.int64, -1)

    @property
    def last_ledger(self) -> int:
        """The ledger of the last entry, -1 before any."""
        return self._ledger_ids[-1] if self._ledger_ids else -1

    @property
    def next_entry(self) -> int:
        """The entry id the next entry of the last ledger would get."""
        return self._counts[-1] if self._counts else 0

    @property
    def ledgers(self) -> int:
        return len(self._ledger_ids)

    @property
    def nbytes(self) -> int:
        """Memory held for per-entry facts."""
        return self._bsize.nbytes + self._deliver.nbytes

    def append(self, ledger_id: int, batch_sizes: np.ndarray, deliver_at: np.ndarray) -> int:
        """Record ``len(batch_sizes)`` entries at the next positions of ``ledger_id``; returns
        the index of the first."""
        n = len(batch_sizes)
        if not self._ledger_ids or ledger_id != self._ledger_ids[-1]:
            self._ledger_ids.append(ledger_id)
            self._bases.append(self.size)
            self._counts.append(0)
        self._counts[-1] += n
        self._arrays = None
        first = self.size
        batched = np.flatnonzero(batch_sizes != 1)
        if batched.size:
            self._bsize.extend(first + batched, batch_sizes[batched])
        delayed = np.flatnonzero(deliver_at >= 0)
        if delayed.size:
            self._deliver.extend(first + delayed, deliver_at[delayed])
        self.size = first + n
        return first

    def forget_ledgers_before(self, ledger_id: int) -> int:
        """Forget every ledger below ``ledger_id`` and the facts of its entries (the cluster
        deleted them: see the class docstring); their positions look up as -1 from then on,
        the indexes of the others are unchanged. Returns how many entries were forgotten.
        O(ledgers + facts held)."""
        drop = 0
        while drop < len(self._ledger_ids) - 1 and self._ledger_ids[drop] < ledger_id:
            drop += 1  # the last ledger is where entries are appended: always kept
        if drop == 0:
            return 0
        first = self._bases[drop]
        forgotten = first - self._bases[0]
        del self._ledger_ids[:drop], self._bases[:drop], self._counts[:drop]
        self._arrays = None
        self._bsize.forget_before(first)
        self._deliver.forget_before(first)
        return forgotten

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (
                np.array(self._ledger_ids, np.int64),
                np.array(self._bases, np.int64),
                np.array(self._counts, np.int64),
            )
        return self._arrays

    def lookup(self, ledgers: np.ndarray, entries: np.ndarray) -> np.ndarray:
        """The index of each position, -1 where the log has no such entry. O(n log ledgers)."""
        ids, bases, counts = self._tables()
        if len(ids) == 0:
            return np.full(len(ledgers), -1, np.int64)
        k = np.minimum(np.searchsorted(ids, ledgers), len(ids) - 1)
        ok = (ids[k] == ledgers) & (entries >= 0) & (entries < counts[k])
        return np.where(ok, bases[k] + entries, -1)

    def position(self, g: int) -> tuple[int, int]:
        """The ``(ledger_id, entry_id)`` of index ``g`` (``0 <= g < size``). O(log ledgers)."""
        k = bisect.bisect_right(self._bases, g) - 1
        return self._ledger_ids[k], g - self._bases[k]

    def batch_size(self, g: np.ndarray) -> np.ndarray:
        return self._bsize.get(np.asarray(g))

    def deliver_at(self, g: np.ndarray) -> np.ndarray:
        return self._deliver.get(np.asarray(g))
