"""SqliteStore throughput: appends of 100-byte entries (single and batched) and metadata puts.

Prints one table per ``synchronous`` level (FULL, the default, and NORMAL). Every call is one
transaction, so single appends and puts measure commits per second (an fsync each under FULL);
batches measure how far one commit is amortised.

    python benchmarks/bench_sqlite.py [--seconds 2] [--dir DIR]

``--dir`` chooses where the database lives (default: a temporary directory), because the
figures are those of the disk under it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mledger.storage import SqliteStore

ENTRY = os.urandom(100)


def rate(seconds: float, step: Callable[[], int]) -> float:
    """Run ``step`` (returning how many items it did) for about ``seconds``; items per second."""
    done, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        done += step()
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def bench(directory: Path, synchronous: str, seconds: float) -> list[tuple[str, float]]:
    results = []
    with SqliteStore(directory, synchronous=synchronous) as store:
        ledger = store.create_ledger()

        def single() -> int:
            store.append(ledger, ENTRY)
            return 1

        results.append(("append, 1 entry per call", rate(seconds, single)))
        for size in (100, 1000):
            batch = [ENTRY] * size

            def many(batch: list[bytes] = batch) -> int:
                store.append_many(ledger, batch)
                return len(batch)

            results.append((f"append_many, {size} per call", rate(seconds, many)))

        results.append(("read, 1000 per call", rate(seconds, lambda: len(store.read(ledger, 0, 999)))))

        version = store.put("/bench/cursor", b"x" * 200)

        def put() -> int:
            nonlocal version
            version = store.put("/bench/cursor", b"x" * 200, version)
            return 1

        results.append(("metadata put (CAS), 200 B", rate(seconds, put)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--dir", type=Path, default=None, help="parent directory of the test database")
    args = parser.parse_args()
    print(f"SqliteStore benchmark: Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, {args.seconds:g} s per figure")
    for synchronous in ("FULL", "NORMAL"):
        parent = tempfile.mkdtemp(prefix="bench-sqlite-", dir=args.dir)
        try:
            results = bench(Path(parent) / "data", synchronous, args.seconds)
        finally:
            shutil.rmtree(parent)
        print(f"\nsynchronous={synchronous}")
        for name, per_second in results:
            unit = "puts/s" if "put" in name else "entries/s"
            print(f"  {name:<28} {per_second:>12,.0f} {unit}")


if __name__ == "__main__":
    main()
