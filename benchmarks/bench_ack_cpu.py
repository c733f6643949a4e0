"""Acknowledgement throughput in CPU time (``time.process_time``), for before/after comparisons
on a busy machine, where wall-clock figures of one run drift by 2-3x.

Two figures: acks in publish order with every mark-delete persisted (no throttle) over ledgers
of 10,000 entries, the path on which a persisted mark-delete asks the ledger whether a trimming
pass is due; and random single acks under Pulsar's default 1/s persist rate.

Run: .venv/bin/python benchmarks/compare_src.py --before <main>/src --after src --repeats 5 \\
        benchmarks/bench_ack_cpu.py
"""

from __future__ import annotations

import random
import time

from mledger import InitialPosition, ManagedLedgerConfig, ManagedLedgerFactory


def acks_per_cpu_second(n: int, throttle: float, shuffle: bool, per_ledger: int) -> float:
    factory = ManagedLedgerFactory()
    ml = factory.open("bench", ManagedLedgerConfig(max_entries_per_ledger=per_ledger, throttle_mark_delete=throttle))
    positions = []
    while len(positions) < n:
        positions.extend(ml.add_entries([b"x"] * min(10_000, n - len(positions))))
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    order = positions[:]
    if shuffle:
        random.Random(1).shuffle(order)
    delete = cursor.delete
    start = time.process_time()
    for p in order:
        delete(p)
    rate = n / (time.process_time() - start)
    factory.close()
    return rate


def main() -> None:
    print(f"in-order acks each persisted (cpu): {acks_per_cpu_second(100_000, 0.0, False, 10_000):.0f}/s")
    print(f"random single acks throttle 1/s (cpu): {acks_per_cpu_second(300_000, 1.0, True, 50_000):.0f}/s")


if __name__ == "__main__":
    main()
