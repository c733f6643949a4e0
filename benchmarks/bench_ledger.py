"""The managed ledger's own paths in CPU time (``time.process_time``), over the memory store, for
before/after comparisons of the ledger's internals (its state owner, the add pipeline, the
appender, the position queries) on a busy machine.

Figures: single-entry adds in each of the three forms (blocking ``add_entries``, a callback,
``add_entries_async``), 100-entry blocking adds, all with a rollover every 10,000 entries; and
the position queries a cursor calls most (``is_valid_position``, ``next_valid_position``,
``last_confirmed_entry``) over a ledger of 100 ledgers.

Run: .venv/bin/python benchmarks/compare_src.py --before <main>/src --after src --repeats 5 \\
        benchmarks/bench_ledger.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from mledger import ManagedLedger, ManagedLedgerConfig, ManagedLedgerFactory, Position

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=10_000)


def per_cpu_second(n: int, run: Callable[[ManagedLedger], None]) -> float:
    """``n`` operations by ``run`` on a fresh ledger, per CPU-second."""
    factory = ManagedLedgerFactory()
    ml = factory.open("bench", CONFIG)
    start = time.process_time()
    run(ml)
    rate = n / (time.process_time() - start)
    factory.close()
    return rate


def blocking_adds(n: int, batch: int) -> Callable[[ManagedLedger], None]:
    payloads = [b"x" * 100] * batch

    def run(ml: ManagedLedger) -> None:
        add = ml.add_entries
        for _ in range(n // batch):
            add(payloads)

    return run


def callback_adds(n: int) -> Callable[[ManagedLedger], None]:
    payload = [b"x" * 100]

    def done(positions: list[Position] | None, error: BaseException | None) -> None:
        assert error is None

    def run(ml: ManagedLedger) -> None:
        add = ml.add_entries_with_callback
        for _ in range(n):
            add(payload, done)
        ml.wait_for_adds()

    return run


def async_adds(n: int) -> Callable[[ManagedLedger], None]:
    payload = [b"x" * 100]

    def run(ml: ManagedLedger) -> None:
        add = ml.add_entries_async
        futures = [add(payload) for _ in range(n)]
        futures[-1].result()

    return run


def queries(n: int) -> dict[str, float]:
    """Rates of the three queries over 100 ledgers of 1,000 entries."""
    factory = ManagedLedgerFactory()
    ml = factory.open("bench", ManagedLedgerConfig(max_entries_per_ledger=1_000))
    positions: list[Position] = []
    for _ in range(100):
        positions += ml.add_entries([b"x"] * 1_000)
    probes = (positions * (n // len(positions) + 1))[:n]
    rates = {}
    for name, call in (
        ("is_valid_position", ml.is_valid_position),
        ("next_valid_position", ml.next_valid_position),
    ):
        start = time.process_time()
        for p in probes:
            call(p)
        rates[name] = n / (time.process_time() - start)
    start = time.process_time()
    for _ in range(n):
        ml.last_confirmed_entry  # noqa: B018 (the property read is what is measured)
    rates["last_confirmed_entry"] = n / (time.process_time() - start)
    factory.close()
    return rates


def main() -> None:
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"add_entries 1 entry, blocking (cpu): {per_cpu_second(100_000, blocking_adds(100_000, 1)):.0f}/s")
    print(f"add_entries 100 entries, blocking (cpu): {per_cpu_second(1_000_000, blocking_adds(1_000_000, 100)):.0f}/s")
    print(f"add_entries_with_callback 1 entry (cpu): {per_cpu_second(100_000, callback_adds(100_000)):.0f}/s")
    print(f"add_entries_async 1 entry (cpu): {per_cpu_second(100_000, async_adds(100_000)):.0f}/s")
    for name, rate in queries(1_000_000).items():
        print(f"{name} (cpu): {rate:.0f}/s")


if __name__ == "__main__":
    main()
