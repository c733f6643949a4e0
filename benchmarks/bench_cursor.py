"""Cursor hot paths: individual acks, hole memory, mark-delete absorption.

Run: .venv/bin/python benchmarks/bench_cursor.py [--entries N]
Prints one line per figure; targets from issues 2 and 27 are shown beside each.

Every figure measures real acknowledgements: the cursor is opened (at the earliest entry)
before the entries are written, so it holds every ledger back from trimming and each of the
``N`` positions acked is a live, unacknowledged entry of the ledger (``make_cursor`` asserts
the backlog is all ``N``). The single-call line times ``N`` calls of ``cursor.delete(position)``
in a random order over ledgers of 50,000 entries (every call acks one entry; the mark-delete
absorbs the holes as they close), under the broker's default persist throttle (1/s); the
iterable-form line the same acks ``100,000`` positions per call. Two more single-call lines
split the regimes of the restart figures (issue 33): within the range limits each ack is a
counter, past the range cap the close tracker follows each one
(:func:`bench_single_acks_by_regime`).
The workloads (``*_workload``) and timed steps (``ack_each``, ``ack_in_chunks``) are shared with
the pytest-benchmark twin, ``test_bench_cursor.py``.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc

from mledger import InitialPosition, ManagedCursor, ManagedLedgerConfig, ManagedLedgerFactory, Position

THROTTLE = 1.0
"""Mark-delete persists per second: Pulsar's broker default (1/s); ``--throttle 0`` persists
every ack (what a ledger with a synchronous consumer does), which exercises the persist path
(and the trimming request it makes) on every call."""


def make_cursor(entries: int, per_ledger: int = 50_000, throttle: float | None = None):
    """A ledger of ``entries`` 1-byte entries and a cursor at the earliest one, every entry
    unacknowledged.

    The cursor is opened before the entries are written: a ledger that rolls over while no
    cursor holds it back is trimmed at once (nothing retains it), and a cursor opened
    afterwards would find those entries already consumed, so acking them would do nothing."""
    factory = ManagedLedgerFactory()
    rate = THROTTLE if throttle is None else throttle
    config = ManagedLedgerConfig(max_entries_per_ledger=per_ledger, throttle_mark_delete=rate)
    ml = factory.open("bench", config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    payloads = [b"x"] * 10_000
    positions: list[Position] = []
    while len(positions) < entries:
        positions.extend(ml.add_entries(payloads[: min(10_000, entries - len(positions))]))
    assert cursor.number_of_entries_in_backlog() == entries, "the entries to ack must all be live"
    return factory, ml, cursor, positions


def ack_workload(entries: int, seed: int) -> tuple[ManagedCursor, list[Position]]:
    """A fresh cursor over ``entries`` entries and every position in a random order."""
    _, _, cursor, positions = make_cursor(entries)
    order = positions[:]
    random.Random(seed).shuffle(order)
    return cursor, order


def ack_each(cursor: ManagedCursor, order: list[Position]) -> ManagedCursor:
    """Individual acks, one call per position."""
    delete = cursor.delete
    for p in order:
        delete(p)
    return cursor


def ack_in_chunks(cursor: ManagedCursor, order: list[Position], chunk: int = 100_000) -> ManagedCursor:
    """Individual acks, the iterable form, ``chunk`` positions per call."""
    for i in range(0, len(order), chunk):
        cursor.delete(order[i : i + chunk])
    return cursor


def absorb_workload(entries: int) -> tuple[ManagedCursor, Position, Position]:
    """A cursor whose only hole is the first entry, with ``entries`` acked behind it:
    ``(cursor, first, last)``; acking ``first`` moves the mark-delete over all of them."""
    _, _, cursor, positions = make_cursor(entries + 1)
    cursor.delete_many(positions[1:])
    return cursor, positions[0], positions[-1]


def bench_single_acks(n: int) -> float:
    """Acks per CPU-second (process time: the figure other work on a shared machine skews least)."""
    cursor, order = ack_workload(n, seed=1)
    start = time.process_time()
    ack_each(cursor, order)
    elapsed = time.process_time() - start
    assert cursor.number_of_entries_in_backlog() == 0
    return n / elapsed


def bench_bulk_acks(n: int, chunk: int = 100_000) -> float:
    """Acks per CPU-second."""
    cursor, order = ack_workload(n, seed=2)
    start = time.process_time()
    ack_in_chunks(cursor, order, chunk)
    elapsed = time.process_time() - start
    assert cursor.number_of_entries_in_backlog() == 0
    return n / elapsed


def bench_hole_memory(backlog: int, holes: int) -> tuple[float, int]:
    _, _, cursor, positions = make_cursor(backlog)
    chosen = random.Random(3).sample(positions[1:], holes)  # entry 0 stays unacked: no absorption
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    cursor.delete_many(chosen)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    traced = sum(s.size_diff for s in after.compare_to(before, "filename"))
    roaring = cursor.individually_deleted_messages().as_range_set().memory_bytes()  # a copy: the same bitmaps
    return max(traced, roaring) / 2**20, cursor.total_non_contiguous_deleted_messages_range()


def bench_absorb(n: int) -> tuple[float, Position]:
    cursor, first, last = absorb_workload(n)
    start = time.perf_counter()
    cursor.delete(first)  # fills the hole: MD absorbs n entries across ledgers
    elapsed = time.perf_counter() - start
    assert cursor.mark_delete_position == last
    return elapsed * 1000, cursor.mark_delete_position


def bench_in_order_acks(n: int) -> float:
    """Acks in publish order, one call each, every mark-delete persisted (no throttle), over
    ledgers of 10,000 entries: the path where a persisted mark-delete asks the ledger whether
    a trimming pass is due (a dictionary lookup, and a queued pass each time the cursor
    crosses into the next ledger; the passes run on the factory's executor)."""
    factory, _, cursor, positions = make_cursor(n, per_ledger=10_000, throttle=0.0)
    start = time.perf_counter()
    ack_each(cursor, positions)
    rate = n / (time.perf_counter() - start)
    factory.close()
    return rate


def bench_single_acks_by_regime(repeats: int = 5) -> tuple[float, float]:
    """Single-call acks per CPU-second in the two regimes of the restart figures, medians of
    ``repeats`` fresh cursors over 100,000 entries: 9,000 random acks (fewer than 10,000 ranges:
    within ``maxUnackedRangesToPersist``, each ack a counter), and 5,000 random acks after
    30,000 others (past the 10,000-range cap: the close tracker follows each ack's move of the
    unload figure, issue 33)."""
    within, past = [], []
    for seed in range(repeats):
        _, _, cursor, positions = make_cursor(100_000)
        order = random.Random(seed).sample(positions, 9_000)
        start = time.process_time()
        ack_each(cursor, order)
        within.append(len(order) / (time.process_time() - start))
        _, _, cursor, positions = make_cursor(100_000)
        order = random.Random(seed).sample(positions[1:], 35_000)  # entry 0 stays: no absorption
        cursor.delete(order[:30_000])
        start = time.process_time()
        ack_each(cursor, order[30_000:])
        past.append(5_000 / (time.process_time() - start))
    return statistics.median(within), statistics.median(past)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--throttle", type=float, default=THROTTLE, help="mark-delete persists per second (0: every ack)")
    args = parser.parse_args()
    globals()["THROTTLE"] = args.throttle
    n = args.entries
    print(f"individual acks, single calls, {n:,} random order: {bench_single_acks(n):,.0f} per CPU-second"
          " (target >= 1,000,000)")
    print(f"individual acks, iterable form, {n:,} random order: {bench_bulk_acks(n):,.0f} per CPU-second"
          " (target >= 2,000,000)")
    mib, ranges = bench_hole_memory(2 * n, n)
    print(f"memory of {n:,} random holes over a {2 * n:,}-entry backlog: {mib:.2f} MiB, {ranges:,} ranges (target <= 16 MiB)")
    k = min(n, 200_000)
    print(f"in-order acks, single calls, each persisted, {k:,} over 10k-entry ledgers: {bench_in_order_acks(k):,.0f}/s")
    within, past = bench_single_acks_by_regime()
    print(f"individual acks, single calls, within the range limits (9,000 random of 100,000): {within:,.0f} per CPU-second")
    print(f"individual acks, single calls, past the 10,000-range cap (5,000 after 30,000): {past:,.0f} per CPU-second")
    ms, md = bench_absorb(n)
    print(f"mark-delete absorbing {n:,} contiguous acked entries: {ms:.2f} ms -> MD {md} (target <= 50 ms)")


if __name__ == "__main__":
    main()
