"""How many messages each entry of a managed ledger holds, where it is more than one.

A batch entry holds ``num_messages`` messages (``MessageMetadata.num_messages_in_batch``); after a
restart Pulsar redelivers an entry whole, so the restart figures count an entry lost to the
limits as its batch's messages (``CursorStateStore``). Pulsar's managed ledger keeps no such
count; mledger keeps one per ledger that has a batch entry, as the number of messages *beyond
one* per entry (so a ledger without batches costs nothing and a message count is the entry
count plus the extras in a span). Fed by whoever appends: ``ManagedLedger.add_entries`` with
metadata records, and :meth:`ManagedLedger.record_entry_messages` for callers that frame their
own entries (the broker's publish path, the replay). Not thread-safe by itself: the managed
ledger calls it under its lock, cursors read it under theirs (a torn read of a count being
recorded for an entry not yet confirmed cannot happen: counts are recorded before the entry
can be acknowledged).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._position import Position

__all__ = ["EntryMessages"]


class EntryMessages:
    """Messages per entry beyond one, per ledger (entries not recorded hold one message).

    ``of`` is O(1); sums over spans are O(1) after a per-ledger prefix sum built on first use
    (O(entries of that ledger), rebuilt after that ledger's counts change).
    """

    __slots__ = ("_ends", "_extra", "_prefix", "_rewrites", "batched", "generation")

    def __init__(self) -> None:
        self._extra: dict[int, np.ndarray] = {}  # ledger id -> int64 (count - 1) per entry id
        self._prefix: dict[int, np.ndarray] = {}  # ledger id -> cumulative sum with a leading 0
        self._rewrites: dict[int, int] = {}  # ledger id -> records that changed entries already counted
        self._ends: dict[int, int] = {}  # ledger id -> the end of the entries recorded so far
        self.batched = False
        """Whether any entry was recorded with more than one message (False: messages ==
        entries everywhere); an attribute, read on the single-ack path."""
        self.generation = 0
        """Grows whenever a sum over entries already recorded may change: a ledger's counts
        rewritten (:meth:`version`), forgotten, or recorded for the first time (``has`` turns
        true); sums kept over acknowledged entries stay valid while it stays."""

    def record(self, ledger_id: int, first_entry: int, counts: Sequence[int] | np.ndarray) -> None:
        """Entries ``first_entry, first_entry + 1, ...`` of ``ledger_id`` hold ``counts``
        messages (a count below 1 is taken as 1). O(len(counts)) amortised."""
        extra = np.maximum(np.asarray(counts, dtype=np.int64) - 1, 0)
        if not extra.any() and ledger_id not in self._extra:
            self._ends[ledger_id] = max(first_entry + len(extra), self._ends.get(ledger_id, 0))
            return
        end = first_entry + len(extra)
        current = self._extra.get(ledger_id)
        if first_entry < self._ends.get(ledger_id, 0):  # not an append: sums over entries change
            self._rewrites[ledger_id] = self._rewrites.get(ledger_id, 0) + 1
            self.generation += 1
        elif current is None:
            self.generation += 1  # has() turns true
        self._ends[ledger_id] = max(end, self._ends.get(ledger_id, 0))
        if current is None:
            current = np.zeros(max(end, 16), dtype=np.int64)
        elif len(current) < end:
            grown = np.zeros(max(end, 2 * len(current)), dtype=np.int64)
            grown[: len(current)] = current
            current = grown
        current[first_entry:end] = extra
        self._extra[ledger_id] = current
        self._prefix.pop(ledger_id, None)
        self.batched = True

    def forget_ledger(self, ledger_id: int) -> None:
        """The ledger was trimmed or deleted: its counts go."""
        self._extra.pop(ledger_id, None)
        self._prefix.pop(ledger_id, None)
        self._rewrites[ledger_id] = self._rewrites.get(ledger_id, 0) + 1
        self.generation += 1
        self.batched = bool(self._extra)

    def has(self, ledger_id: int) -> bool:
        """Whether entries of ``ledger_id`` hold more than one message. O(1)."""
        return ledger_id in self._extra

    def version(self, ledger_id: int) -> int:
        """Changes to counts already recorded for ``ledger_id`` (appending counts for new
        entries is not one): a sum over its entries stays valid while this stays. O(1)."""
        return self._rewrites.get(ledger_id, 0)

    def extra_of(self, ledger_id: int, entry_ids: np.ndarray | list[int]) -> int:
        """Messages beyond one per entry over ``entry_ids`` of one ledger. O(len(entry_ids)):
        a list entry by entry, an array at numpy speed."""
        extra = self._extra.get(ledger_id)
        if extra is None or not len(entry_ids):
            return 0
        if isinstance(entry_ids, list):
            n = len(extra)
            return int(sum([extra[e] for e in entry_ids if 0 <= e < n]))
        ids = np.asarray(entry_ids, dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < len(extra))]
        return int(extra[ids].sum())

    def extra_of_ascending(self, ledger_id: int, entry_ids: np.ndarray, high: int) -> int:
        """:meth:`extra_of` of an ascending ``uint32`` array whose last id is ``high`` (a
        range set's ids: non-negative by their type, so only ``high`` is checked against the
        entries counted). O(len(entry_ids)) at numpy speed."""
        extra = self._extra.get(ledger_id)
        if extra is None or not entry_ids.size:
            return 0
        if high >= len(extra):
            entry_ids = entry_ids[: int(np.searchsorted(entry_ids, len(extra)))]
        return int(np.add.reduce(extra.take(entry_ids)))

    def of(self, ledger_id: int, entry_id: int) -> int:
        """Messages in entry ``ledger_id:entry_id`` (1 unless recorded otherwise). O(1)."""
        extra = self._extra.get(ledger_id)
        if extra is None or entry_id >= len(extra) or entry_id < 0:
            return 1
        return 1 + int(extra[entry_id])

    def _prefix_of(self, ledger_id: int) -> np.ndarray | None:
        prefix = self._prefix.get(ledger_id)
        if prefix is None:
            extra = self._extra.get(ledger_id)
            if extra is None:
                return None
            prefix = np.zeros(len(extra) + 1, dtype=np.int64)
            np.cumsum(extra, out=prefix[1:])
            self._prefix[ledger_id] = prefix
        return prefix

    def extra_in_runs(self, ledger_id: int, starts: np.ndarray, ends: np.ndarray) -> int:
        """Messages beyond one per entry in the closed runs ``[starts[i], ends[i]]`` of one
        ledger. O(runs)."""
        prefix = self._prefix_of(ledger_id)
        if prefix is None or not len(starts):
            return 0
        top = len(prefix) - 1
        lo = np.minimum(np.asarray(starts, dtype=np.int64), top)
        hi = np.minimum(np.asarray(ends, dtype=np.int64) + 1, top)
        return int((prefix[hi] - prefix[lo]).sum())

    def extra_between(self, lower: Position, upper: Position) -> int:
        """Messages beyond one per entry in ``(lower, upper]`` (entry ids only; the caller
        counts the entries). O(1) in numpy for a span within one ledger (its prefix sums), else
        O(ledgers with counts)."""
        if upper <= lower or not self._extra:
            return 0
        if upper.ledger_id == lower.ledger_id:  # no walk over the other ledgers
            return self.extra_in_runs(upper.ledger_id, np.array([lower.entry_id + 1]), np.array([upper.entry_id]))
        total = 0
        for ledger_id in self._extra:
            if not lower.ledger_id <= ledger_id <= upper.ledger_id:
                continue
            first = lower.entry_id + 1 if ledger_id == lower.ledger_id else 0
            last = upper.entry_id if ledger_id == upper.ledger_id else (1 << 62)
            if last >= first:
                total += self.extra_in_runs(ledger_id, np.array([max(first, 0)]), np.array([last]))
        return total
