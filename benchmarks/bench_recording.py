"""A recording replays at the speed of a generated log of the same size (issue 25).

    python benchmarks/bench_recording.py [--events 10000000] [--repeat 3] [--data /tmp/mledger-bench-recording]

1. ``mledger generate --raw`` writes raw logs of about ``--events`` events (8 topics x 4
   partitions; no duplicates, lost, unknown or invalid acks and no cancels, so that every row
   is one a broker could have journaled);
2. the same rows go through the recorder's journal API (:class:`mledger.replay._recording.Recorder`,
   what ``mledger standalone --record`` calls): per topic-partition in time order, each
   ``produced`` row an ``entries_persisted`` at its publish time, each ``acked`` row an
   ``acked`` at its time, each declared subscription a ``created`` event at the partition's
   first time. The result is a recording as a broker writes it (parts of at most 100,000
   rows, ``recording.json``);
3. ``mledger replay --single-process`` of each, a fresh process each time, alternating which
   goes first, ``--repeat`` times: wall time, CPU seconds (user+sys of the process) and events
   per wall second, medians, and the ratio recording / generated.

Both inputs are raw logs, so each replay prepares them first (in the process). Both are kept
under ``--data`` between runs. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from mledger.broker import PublishContext
from mledger.broker._journal import AckRecord
from mledger.codec import EntryMetadata
from mledger.core import Position
from mledger.replay import Recorder, RecordSettings

FLUSH_EVERY = 500_000
"""Rows fed between two waits for the recorder's writer (its queue is bounded)."""


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _mledger(*args: str) -> list[str]:
    return [sys.executable, "-m", "mledger.cli", *args]


def generate(path: str, events: int) -> None:
    if os.path.exists(os.path.join(path, "produced")):
        return
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(
        _mledger("generate", path, "--raw", "--events", str(events), "--topics", "8", "--partitions", "4", "--quiet",
                 "--duplicate-fraction", "0", "--lost-ack-fraction", "0", "--unknown-ack-fraction", "0",
                 "--invalid-fraction", "0", "--cancel-fraction", "0"),
        check=True,
    )  # fmt: skip
    print(f"generated {path} in {time.perf_counter() - t0:.1f} s")


def _partition_rows(table: pa.Table, topic: str, partition: int, ts: str) -> Iterator[dict[str, Any]]:
    mask = pc.and_(pc.equal(table["topic"], topic), pc.equal(table["partition"], partition))
    part = table.filter(mask)
    part = part.take(pc.sort_indices(part, [(ts, "ascending")]))
    for batch in part.to_batches(max_chunksize=65_536):
        yield from batch.to_pylist()


def record(generated: str, path: str) -> None:
    """Feed the generated rows through the recorder's journal API into a recording at ``path``."""
    if os.path.exists(os.path.join(path, "recording.json")):
        return
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    produced = ds.dataset(os.path.join(generated, "produced")).to_table()
    acked = ds.dataset(os.path.join(generated, "acked")).to_table()
    declared = ds.dataset(os.path.join(generated, "subscriptions")).to_table().to_pylist()
    keys = sorted({(r["topic"], r["partition"]) for r in produced.select(["topic", "partition"]).to_pylist()})
    recorder = Recorder(path, RecordSettings(flush_interval_s=1.0, max_pending_rows=4 * FLUSH_EVERY))
    fed = 0
    for topic, partition in keys:
        entries = _partition_rows(produced, topic, partition, "publish_time_ms")
        acks = _partition_rows(acked, topic, partition, "ts_ms")
        entry = next(entries, None)
        ack = next(acks, None)
        if entry is not None:
            first = Position(entry["ledger_id"], -1)
            for sub in (s for s in declared if s["topic"] == topic):
                recorder.subscription_created(topic, partition, sub["subscription"], sub["type"], "earliest", first,
                                              entry["publish_time_ms"] - 1)
        while entry is not None or ack is not None:
            if ack is None or (entry is not None and entry["publish_time_ms"] <= ack["ts_ms"]):
                assert entry is not None
                md = EntryMetadata(deliver_at_ms=entry["deliver_at_ms"], partition_key=entry["key"])
                ctx = PublishContext(topic, entry["producer_name"] or "", entry["sequence_id"] or 0,
                                     entry["sequence_id"] or 0, entry["batch_size"], md)
                recorder.entries_persisted(topic, partition, [(Position(entry["ledger_id"], entry["entry_id"]), ctx)],
                                           entry["publish_time_ms"])
                entry = next(entries, None)
            else:
                bi = ack["batch_index"]
                rec = AckRecord(ack["ledger_id"], ack["entry_id"], -1 if bi is None else bi,
                                ack["ack_type"] == "cumulative")
                recorder.acked(topic, partition, ack["subscription"], [rec], ack["ts_ms"])
                ack = next(acks, None)
            fed += 1
            if fed % FLUSH_EVERY == 0:
                recorder.flush(600)
    recorder.close()
    if not recorder.complete:
        raise SystemExit(f"the recording dropped {recorder.dropped_rows} rows")
    parts = sum(len(os.listdir(os.path.join(path, n))) for n in ("produced", "acked"))
    print(f"recorded {fed:,} rows through the journal API into {path} ({parts} parts) in "
          f"{time.perf_counter() - t0:.1f} s")


def replay(source: str, out: str) -> tuple[float, float, int]:
    """(wall s, CPU s, events) of one ``mledger replay --single-process`` in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(_mledger("replay", source, out, "--single-process", "--quiet"), check=True,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"replayed ([0-9,]+) events", done.stdout)
    return wall, cpu, int(m.group(1).replace(",", "")) if m else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=10_000_000, help="about this many events (10000000)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data", default="/tmp/mledger-bench-recording", help="where the inputs are kept between runs")
    args = p.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; {_load()}")
    generated = os.path.join(args.data, f"generated-{args.events}")
    recording = os.path.join(args.data, f"recording-{args.events}")
    generate(generated, args.events)
    record(generated, recording)
    sides = {"generated": generated, "recording": recording}
    results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in sides}
    for r in range(args.repeat):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            wall, cpu, events = replay(sides[name], os.path.join(args.data, "out"))
            results[name].append((wall, cpu, events))
            print(f"  repeat {r + 1} {name:9s} {events:,} events: {wall:.1f} s wall, {cpu:.1f} s CPU, "
                  f"{events / wall:,.0f} events/s; {_load()}", flush=True)

    def med(name: str, i: int) -> float:
        return statistics.median(x[i] for x in results[name])

    print(f"\nmedians of {args.repeat}, mledger replay --single-process of raw logs (prepare included):")
    for name in sides:
        events = results[name][0][2]
        print(f"{name:10s} {events:12,} events  {med(name, 0):7.1f} s wall  {med(name, 1):7.1f} s CPU  "
              f"{events / med(name, 0):12,.0f} events/s")
    g, rec = results["generated"][0][2] / med("generated", 0), results["recording"][0][2] / med("recording", 0)
    print(f"recording / generated events per second: {rec / g:.2f}x; {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
