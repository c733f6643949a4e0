"""Ack range set (``mledger.core._ranges.AckRangeSet``) operations on random ack holes.

The workload: ``--acks`` random acked entries over a span of twice as many entries, in ledgers
of 50,000 entries (Pulsar's default ``maxEntriesPerLedger``), about half the acks forming
separate ranges. Operations that change the set run on a fresh copy (made untimed); rates
are per item (acks, look-ups) or per call, best of ``--repeat`` runs.

    .venv/bin/python benchmarks/bench_ranges.py [--acks 1000000] [--repeat 3]

The workload builders and operations (``OPERATIONS``) are shared with the pytest-benchmark
twin, ``test_bench_ranges.py``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mledger import AckRangeSet

ENTRIES_PER_LEDGER = 50_000
FIRST_LEDGER = 1_000


@dataclass(frozen=True)
class AckWorkload:
    """Random acks as parallel arrays, grouped by ledger for the bulk form, and a filled set."""

    ledgers: np.ndarray
    entries: np.ndarray
    by_ledger: list[tuple[int, np.ndarray]]
    filled: AckRangeSet
    probes: tuple[np.ndarray, np.ndarray]

    @property
    def size(self) -> int:
        return int(self.ledgers.size)


def ack_workload(acks: int, seed: int = 42) -> AckWorkload:
    """``acks`` distinct random positions over ``2 * acks`` entries, in random order; the set
    holding them; and as many random look-up positions over the same span."""
    rng = np.random.default_rng(seed)
    span = 2 * acks
    flat = rng.choice(span, size=acks, replace=False)
    ledgers = FIRST_LEDGER + flat // ENTRIES_PER_LEDGER
    entries = flat % ENTRIES_PER_LEDGER
    order = np.argsort(ledgers, kind="stable")
    splits = np.flatnonzero(np.diff(ledgers[order])) + 1
    by_ledger = [(int(ledgers[idx[0]]), entries[idx]) for idx in np.split(order, splits) if idx.size]
    filled = AckRangeSet()
    for ledger_id, ids in by_ledger:
        filled.add_many(ledger_id, ids)
    probe = rng.integers(0, span, size=acks)
    probes = (FIRST_LEDGER + probe // ENTRIES_PER_LEDGER, probe % ENTRIES_PER_LEDGER)
    return AckWorkload(ledgers, entries, by_ledger, filled, probes)


def add_each(w: AckWorkload) -> AckRangeSet:
    """``add`` one position per call, in random order."""
    s = AckRangeSet()
    add = s.add
    for ledger_id, entry_id in zip(w.ledgers.tolist(), w.entries.tolist(), strict=True):
        add(ledger_id, entry_id)
    return s


def add_many(w: AckWorkload) -> AckRangeSet:
    """``add_many`` once per ledger (the bulk path of the iterable ack form)."""
    s = AckRangeSet()
    for ledger_id, ids in w.by_ledger:
        s.add_many(ledger_id, ids)
    return s


def contains(w: AckWorkload) -> int:
    """``contains`` for random positions (acked or not); returns how many were acked."""
    has = w.filled.contains
    return sum(has(ledger_id, entry_id) for ledger_id, entry_id in zip(*(a.tolist() for a in w.probes), strict=True))


def uncounted_copy(w: AckWorkload) -> AckRangeSet:
    """A copy of the filled set with no run count cached (as after a burst of acks)."""
    s = w.filled.copy()
    s._runs.clear()
    return s


def count_ranges(s: AckRangeSet) -> int:
    """``size()``: the range count, counted from the bitmaps."""
    return s.size()


def to_range_arrays(w: AckWorkload) -> int:
    """Export every range as arrays (what the range-format codec writes); returns the count."""
    ledgers, _, _, dropped = w.filled.to_range_arrays()
    assert dropped == 0
    return int(ledgers.size)


def to_long_arrays(w: AckWorkload) -> dict[int, np.ndarray]:
    """Every ledger's acked entries as ``BitSet.toLongArray()`` words (the long-array format)."""
    words, dropped = w.filled.to_long_arrays()
    assert dropped == 0
    return words


def from_long_arrays(words: dict[int, np.ndarray]) -> AckRangeSet:
    """The set back from its BitSet words (what recovering a long-array state does)."""
    return AckRangeSet.from_long_arrays(words)


def mark_delete_half(s: AckRangeSet) -> int:
    """``remove_at_most`` up to the middle of the span (the mark-delete moving forward);
    returns how many acks it removed."""
    middle = s.cardinality()  # the span is twice the acks: its middle entry index
    return s.remove_at_most(FIRST_LEDGER + middle // ENTRIES_PER_LEDGER, middle % ENTRIES_PER_LEDGER)


def _same(w: AckWorkload) -> AckWorkload:
    return w


def copy_set(w: AckWorkload) -> AckRangeSet:
    return w.filled.copy()


@dataclass(frozen=True)
class Operation:
    """``run(setup(workload))``, timing ``run`` only (``setup`` makes what it changes)."""

    name: str
    run: Callable[[Any], object]
    setup: Callable[[AckWorkload], Any] = _same
    per_item: bool = False
    """Rates per ack or look-up (True) or per call (False)."""


OPERATIONS = (
    Operation("add, one per call", add_each, per_item=True),
    Operation("add_many, one call per ledger", add_many, per_item=True),
    Operation("contains, random positions", contains, per_item=True),
    Operation("size(): count the ranges", count_ranges, uncounted_copy),
    Operation("to_range_arrays: every range", to_range_arrays),
    Operation("to_long_arrays: BitSet words", to_long_arrays),
    Operation("from_long_arrays: BitSet words", from_long_arrays, to_long_arrays),
    Operation("remove_at_most: half the span", mark_delete_half, copy_set),
    Operation("copy", copy_set),
)


def best(op: Operation, w: AckWorkload, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        arg = op.setup(w)
        start = time.perf_counter()
        op.run(arg)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acks", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}")
    w = ack_workload(args.acks)
    print(f"{w.size:,} random acks over {2 * w.size:,} entries in {len(w.by_ledger)} ledgers: "
          f"{w.filled.size():,} ranges, {w.filled.memory_bytes() / 2**20:.2f} MiB of bitmaps (best of {args.repeat})")
    for op in OPERATIONS:
        seconds = best(op, w, args.repeat)
        rate = f"{w.size / seconds:>14,.0f} /s" if op.per_item else f"{1 / seconds:>14,.1f} calls/s"
        print(f"{op.name:<40} {seconds * 1000:>10.2f} ms {rate}", flush=True)


if __name__ == "__main__":
    main()
