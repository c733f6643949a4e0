"""Publish throughput over SqliteStore, one topic: ``send`` from 1 and 16 threads, ``send_async``
from 16 threads (issue 17: 16 threads at least 5x one thread).

Every configuration runs on a fresh data directory with the store's default durability
(``synchronous=FULL``), 100-byte messages, one producer per thread, for ``--seconds`` each;
the configurations alternate within each of ``--repeat`` rounds (the machine is shared), and
the table shows the median msgs/s of each with its ratio to one thread's ``send``, plus the
store's mean group-commit size (writes per transaction) and entries per store write.

    python benchmarks/bench_publish.py [--seconds 3] [--repeat 3] [--window 64] [--dedup] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from mledger import ManagedLedgerFactory, SqliteStore
from mledger.broker import Broker, BrokerConfig, MessageId, Producer

PAYLOAD = os.urandom(100)
TOPIC = "persistent://public/default/bench-publish"


@dataclass(frozen=True)
class Run:
    rate: float
    """Messages stored per second."""
    writes_per_transaction: float
    entries_per_write: float


def run(directory: Path, threads: int, use_async: bool, seconds: float, window: int, dedup: bool) -> Run:
    store = SqliteStore(directory)
    broker = Broker(ManagedLedgerFactory(store), BrokerConfig(deduplication_enabled=dedup))
    producers = []
    for i in range(threads):
        p = broker.create_producer(TOPIC, f"bench-{i}")
        assert isinstance(p, Producer)
        producers.append(p)
    producers[0].send(PAYLOAD)  # topic, ledger and store warm
    before = store.stats()
    start_barrier = threading.Barrier(threads + 1)
    counts = [0] * threads
    deadline = 0.0

    def send_loop(i: int) -> None:
        p = producers[i]
        start_barrier.wait()
        n = 0
        while time.perf_counter() < deadline:
            p.send(PAYLOAD)
            n += 1
        counts[i] = n

    def async_loop(i: int) -> None:
        p = producers[i]
        start_barrier.wait()
        inflight: deque[Future[MessageId]] = deque()
        n = 0
        while time.perf_counter() < deadline:
            inflight.append(p.send_async(PAYLOAD))
            if len(inflight) >= window:
                inflight.popleft().result()
                n += 1
        while inflight:
            inflight.popleft().result()
            n += 1
        counts[i] = n

    workers = [threading.Thread(target=async_loop if use_async else send_loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    deadline = time.perf_counter() + seconds + 0.01  # set before the barrier releases the workers
    start = time.perf_counter()
    start_barrier.wait()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    after = store.stats()
    entries = sum(counts)
    appends = after.writes - before.writes
    transactions = max(after.transactions - before.transactions, 1)
    topic_ml = broker.get_topic(TOPIC).managed_ledger  # type: ignore[union-attr]
    stored = topic_ml.number_of_entries()
    broker.close()
    assert stored == entries + 1, f"stored {stored} entries, confirmed {entries + 1}"
    return Run(entries / elapsed, appends / transactions, entries / max(appends, 1))


CONFIGS = [("1 thread, send", 1, False), ("16 threads, send", 16, False), ("16 threads, send_async", 16, True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each runs every configuration)")
    parser.add_argument("--window", type=int, default=64, help="send_async: futures in flight per thread")
    parser.add_argument("--dedup", action="store_true", help="deduplication on (PIP-6)")
    parser.add_argument("--dir", type=Path, default=None, help="parent directory of the test databases")
    args = parser.parse_args()
    print(
        f"publish benchmark: Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, synchronous=FULL, 100 B messages, one topic, "
        f"{args.seconds:g} s per figure, {args.repeat} rounds, dedup {'on' if args.dedup else 'off'}"
    )
    results: dict[str, list[Run]] = {name: [] for name, _, _ in CONFIGS}
    for r in range(args.repeat):
        for name, threads, use_async in CONFIGS:
            parent = tempfile.mkdtemp(prefix="bench-publish-", dir=args.dir)
            try:
                result = run(Path(parent) / "data", threads, use_async, args.seconds, args.window, args.dedup)
            finally:
                shutil.rmtree(parent)
            results[name].append(result)
            print(f"  round {r + 1}: {name:<24} {result.rate:>10,.0f} msgs/s")
    base = statistics.median(x.rate for x in results[CONFIGS[0][0]])
    print(f"\n{'configuration':<24} {'median msgs/s':>14} {'vs 1 thread':>12} {'writes/txn':>11} {'entries/write':>14}")
    for name, _, _ in CONFIGS:
        runs = results[name]
        rate = statistics.median(x.rate for x in runs)
        print(
            f"{name:<24} {rate:>14,.0f} {rate / base:>11.2f}x {statistics.median(x.writes_per_transaction for x in runs):>11.1f}"
            f" {statistics.median(x.entries_per_write for x in runs):>14.1f}"
        )


if __name__ == "__main__":
    main()
