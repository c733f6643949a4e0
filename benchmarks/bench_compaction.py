"""Topic compaction: time and peak memory of compacting N messages over K keys.

The topic is filled directly through its managed ledger with entries as a Pulsar client batches
them (``--batch-size`` messages per entry, each with its own key; 1: one message per entry),
keys in round-robin order so each key's last message is in the last ``K`` messages, then
compacted once (two phases: read everything, then read again and write the compacted ledger)
and, after ``--more`` new messages, compacted again (the second run reads the first view plus
the new messages). Printed: the messages, entries and kept keys, wall and CPU seconds, the
compacted ledger's entries, and the process's peak RSS growth during each compaction
(``ru_maxrss``; the data is in SQLite on disk, so it is the compactor's own memory: the
key -> last-message-id map and the read chunks; 0 when the fill had peaked higher). With
``--trace-memory`` the compactions run under ``tracemalloc`` and print its peak of Python
allocations instead (slower: the times are then not comparable).

Run: .venv/bin/python benchmarks/bench_compaction.py [--messages 1000000 --keys 100000]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

from mledger.broker import Broker
from mledger.codec import EntryMetadata, SingleMessage, encode_batch, encode_entry
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.storage import SqliteStore

TOPIC = "persistent://public/default/bench-compaction"


def _entries(first: int, count: int, keys: int, batch_size: int, value_size: int) -> list[bytes]:
    """Framed entries holding messages ``first .. first + count - 1`` (message i has key i % keys)."""
    out = []
    filler = b"v" * max(value_size - 12, 0)
    for start in range(first, first + count, batch_size):
        n = min(batch_size, first + count - start)
        if batch_size == 1:
            out.append(encode_entry(b"%012d" % start + filler, EntryMetadata(partition_key=f"key-{start % keys}")))
            continue
        singles = [SingleMessage(b"%012d" % i + filler, f"key-{i % keys}") for i in range(start, start + n)]
        out.append(encode_entry(encode_batch(singles), EntryMetadata(num_messages=n, batched=True)))
    return out


def _fill(broker: Broker, first: int, count: int, args: argparse.Namespace) -> None:
    ml = broker.get_topic(TOPIC).managed_ledger
    step = 100_000
    for chunk in range(first, first + count, step):
        ml.add_entries(
            _entries(chunk, min(step, first + count - chunk), args.keys, args.batch_size, args.value_size), framed=True
        )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _compact(broker: Broker, label: str, trace_memory: bool) -> None:
    topic = broker.get_topic(TOPIC)
    rss_before = _peak_rss_mb()
    if trace_memory:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    topic.compaction.trigger().result()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if trace_memory:
        memory = f"tracemalloc peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MiB"
        tracemalloc.stop()
    else:
        memory = f"peak RSS growth {_peak_rss_mb() - rss_before:.1f} MiB (peak RSS {_peak_rss_mb():.1f} MiB)"
    view = topic.compaction.view
    assert view is not None
    print(f"{label}: {wall:.2f} s wall, {cpu:.2f} s cpu; compacted ledger {len(view)} entries; {memory}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=100, help="messages per entry (1: not batched)")
    parser.add_argument("--value-size", type=int, default=100, help="payload bytes per message")
    parser.add_argument("--more", type=int, default=100_000, help="messages added before the second compaction")
    parser.add_argument("--trace-memory", action="store_true", help="measure with tracemalloc (slower)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(str(Path(tmp) / "bench.db"))
        factory = ManagedLedgerFactory(store)
        broker = Broker(factory)
        broker.create_topic(TOPIC)
        started = time.perf_counter()
        _fill(broker, 0, args.messages, args)
        entries = broker.get_topic(TOPIC).managed_ledger.number_of_entries()
        print(
            f"{args.messages} messages over {args.keys} keys, {entries} entries of {args.batch_size} "
            f"({args.value_size}-byte values), written in {time.perf_counter() - started:.1f} s; "
            f"peak RSS {_peak_rss_mb():.1f} MiB"
        )
        _compact(broker, "first compaction", args.trace_memory)
        if args.more:
            _fill(broker, args.messages, args.more, args)
            _compact(broker, f"second compaction (+{args.more} messages)", args.trace_memory)
        broker.close()
        factory.close()


if __name__ == "__main__":
    main()
