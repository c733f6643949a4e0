"""Encode + persist + recover large cursor states (issue 3's figures).

For 1M and 10M ack holes (alternating and random), per individual-ack format: the time to
encode the state, append it to the cursor ledger (PIP-381 chunks, no range limit) and recover
it into a new range set, and the bytes written. Pulsar's range-format size is the baseline.

Run: .venv/bin/python benchmarks/bench_persistence.py [--holes 1000000 10000000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mledger import InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory, ManagedLedgerFactoryConfig
from mledger.managed_ledger._cursor_snapshot import CursorSnapshot
from mledger.managed_ledger._cursor_store import CursorStateStore

BASE = ManagedLedgerConfig(
    max_entries_per_ledger=1_000_000,
    persistent_unacked_ranges_with_multiple_entries_enabled=True,
    max_unacked_ranges_to_persist=0,  # no limit
)


def build(holes: int, pattern: str):
    # 10M holes take 171 MiB in Pulsar's range format: above the default state-size limit
    # (64 MiB), which would keep only the ranges nearest the mark-delete.
    factory = ManagedLedgerFactory(config=ManagedLedgerFactoryConfig(max_state_size_in_bytes=1 << 30))
    ml = factory.open("bench", BASE)
    entries = 2 * holes
    for start in range(0, entries, 1_000_000):
        ml.add_entries([b""] * min(1_000_000, entries - start))
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    rows = []
    for li in ml.ledger_infos():
        if li.entries:
            ids = np.arange(li.entries, dtype=np.int64)
            rows.append(np.stack([np.full(li.entries, li.ledger_id, dtype=np.int64), ids], axis=1))
    all_positions = np.concatenate(rows)
    if pattern == "alternating":
        acked = all_positions[1::2]
    else:
        rng = np.random.default_rng(7)
        acked = all_positions[1:][rng.choice(len(all_positions) - 1, size=holes, replace=False)]
    cursor.delete_many(acked)
    return factory, ml, cursor


def measure(ml, cursor, fmt: str) -> tuple[float, float, int, int]:
    config = BASE.with_changes(individual_ack_format=fmt)
    acked = cursor.individually_deleted_messages().as_range_set()
    snapshot = CursorSnapshot(
        cursor.mark_delete_position, acked, tuple(cursor.batch_deleted_states()), cursor.properties, cursor.cursor_properties
    )
    # A store of its own (another cursor's node and ledgers), so the cursor's own state is untouched.
    name = f"{cursor.name}-{fmt}"
    writer = CursorStateStore(ml, name, config)
    start = time.perf_counter()
    writer.persist(snapshot)
    persisted = time.perf_counter()
    recovered = CursorStateStore(ml, name, config).recover()
    done = time.perf_counter()
    assert recovered is not None and recovered.acked == acked, "recovered state differs"
    stats = writer.stats()
    return persisted - start, done - persisted, stats.persisted_state_bytes, stats.last_persist_chunks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--holes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    args = parser.parse_args()
    print(f"{'holes':>11} {'pattern':>11} {'format':>10} {'persist s':>9} {'recover s':>9} "
          f"{'round trip s':>12} {'bytes':>12} {'MiB':>7} {'entries':>7}")
    for holes in args.holes:
        for pattern in ("alternating", "random"):
            factory, ml, cursor = build(holes, pattern)
            ranges = cursor.total_non_contiguous_deleted_messages_range()
            for fmt in ("range", "long_array", "auto"):
                p, r, size, chunks = measure(ml, cursor, fmt)
                print(f"{holes:>11,} {pattern:>11} {fmt:>10} {p:>9.2f} {r:>9.2f} {p + r:>12.2f} "
                      f"{size:>12,} {size / 2**20:>7.2f} {chunks:>7}   ({ranges:,} ranges)")
            factory.close()


if __name__ == "__main__":
    main()
