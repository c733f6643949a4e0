"""Deduplication benchmarks (seeds/004): publish cost of dedup, and recovery time.

1. Publish throughput on one topic with deduplication on vs off (one producer, 100-byte
   messages, single sends and batches of 100), best of ``--repeat`` runs, over the memory store
   (the worst case for the ratio: nothing else costs) and SQLite (synchronous=NORMAL).
   Target: dedup costs under 25%.
2. Recovery time of a topic with ``--entries`` entries (default 1M, 100 producers) after its
   last snapshot: loading the topic replays them all (``Broker.get_topic``, timed end to end).

Usage: ``python benchmarks/bench_dedup.py [--messages N] [--entries N] [--repeat N] [--quick]``
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable

from mledger import EntryMetadata, ManagedLedgerFactory, MemoryStore, SqliteStore
from mledger.broker import (
    DEDUPLICATION_CURSOR_NAME,
    Broker,
    BrokerConfig,
    InitialPosition,
    ManualClock,
    MessageDeduplication,
    Topic,
)
from mledger.storage import Store

TOPIC = "persistent://public/default/bench"
ML_NAME = "public/default/persistent/bench"
PAYLOAD = b"x" * 100


def publish_rate(make_store: Callable[[], Store], dedup: bool, messages: int, batch: int) -> float:
    """Messages per second for one producer sending ``messages`` (in batches of ``batch``)."""
    store = make_store()
    factory = ManagedLedgerFactory(store, clock=ManualClock(0))
    broker = Broker(factory, BrokerConfig(deduplication_enabled=dedup), clock=ManualClock(0))
    broker.subscribe(TOPIC, "hold", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(TOPIC, "bench")
    items = [PAYLOAD] * batch
    start = time.perf_counter()
    if batch == 1:
        send = producer.send
        for _ in range(messages):
            send(PAYLOAD)
    else:
        send_batch = producer.send_batch
        for _ in range(messages // batch):
            send_batch(items)
    elapsed = time.perf_counter() - start
    if dedup:
        topic = broker.get_topic(TOPIC)
        assert isinstance(topic, Topic) and isinstance(topic.deduplication, MessageDeduplication)
        assert topic.deduplication.highest_sequence_persisted() == {"bench": messages - 1}
    broker.close()
    factory.close()
    return messages / elapsed


def bench_publish(messages: int, repeat: int) -> None:
    print(f"== publish throughput, one topic, one producer, {messages:,} messages of {len(PAYLOAD)} bytes"
          f" (best of {repeat})")
    print(f"{'store':<8} {'send':<10} {'dedup off':>14} {'dedup on':>14} {'cost':>7}")
    tmp = tempfile.TemporaryDirectory()
    counter = iter(range(1_000_000))

    def sqlite() -> Store:
        return SqliteStore(f"{tmp.name}/s{next(counter)}", synchronous="NORMAL")

    stores: dict[str, Callable[[], Store]] = {"memory": MemoryStore, "sqlite": sqlite}
    for store_name, make_store in stores.items():
        n = messages if store_name == "memory" else max(messages // 5, 1000)
        for label, batch in (("single", 1), ("batch 100", 100)):
            count = n if batch == 1 else n * 10
            off = on = 0.0
            # Interleave the runs so that machine noise hits both sides alike.
            for _ in range(repeat):
                off = max(off, publish_rate(make_store, False, count, batch))
                on = max(on, publish_rate(make_store, True, count, batch))
            cost = 1 - on / off
            print(f"{store_name:<8} {label:<10} {off:>12,.0f}/s {on:>12,.0f}/s {cost:>6.1%}")
    tmp.cleanup()


def build_backlog(store: Store, entries: int, producers: int) -> None:
    """A topic whose dedup snapshot holds ``producers`` producers, then ``entries`` entries
    after it, appended in bulk (as a broker that crashed before its next snapshot left it)."""
    factory = ManagedLedgerFactory(store, clock=ManualClock(0))
    ml = factory.open(ML_NAME)
    ml.open_cursor("hold", InitialPosition.EARLIEST)
    cursor = ml.open_cursor(DEDUPLICATION_CURSOR_NAME, InitialPosition.EARLIEST)
    names = [f"producer-{i}" for i in range(producers)]
    first = ml.add_entries([PAYLOAD] * producers,
                           [EntryMetadata(producer_name=n, sequence_id=0, publish_time_ms=1) for n in names])
    cursor.mark_delete(first[-1], {n: 0 for n in names})
    chunk = 10_000
    done = 0
    while done < entries:
        k = min(chunk, entries - done)
        metas = [
            EntryMetadata(producer_name=names[i % producers], sequence_id=1 + (done + i) // producers,
                          publish_time_ms=1)
            for i in range(k)
        ]
        ml.add_entries([PAYLOAD] * k, metas)
        done += k
    ml.close()  # the store stays open for the broker that loads the topic


def bench_recovery(entries: int, producers: int) -> None:
    print(f"\n== recovery: {entries:,} entries after the last snapshot, {producers} producers")
    print(f"{'store':<8} {'build':>9} {'topic load':>11} {'entries/s':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for store_name in ("memory", "sqlite"):
            store: Store = MemoryStore() if store_name == "memory" else SqliteStore(tmp, synchronous="NORMAL")
            t0 = time.perf_counter()
            build_backlog(store, entries, producers)
            built = time.perf_counter() - t0
            factory = ManagedLedgerFactory(store, clock=ManualClock(0))
            broker = Broker(factory, BrokerConfig(deduplication_enabled=True), clock=ManualClock(0))
            t1 = time.perf_counter()
            topic = broker.get_topic(TOPIC)
            load = time.perf_counter() - t1
            assert isinstance(topic, Topic) and isinstance(topic.deduplication, MessageDeduplication)
            stats = topic.deduplication.stats()
            assert stats.last_recovery_entries == entries and stats.producers == producers
            broker.close()
            factory.close()
            print(f"{store_name:<8} {built:>8.1f}s {load:>10.2f}s {entries / load:>12,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.entries, args.repeat = 5_000, 20_000, 1
    print(f"Python {platform.python_version()} on {platform.machine()}, {platform.processor() or 'cpu'}")
    bench_publish(args.messages, args.repeat)
    bench_recovery(args.entries, args.producers)


if __name__ == "__main__":
    main()
