"""Replay throughput, Spark local[2] vs the single process, and Python worker memory.

    .venv/bin/python benchmarks/bench_replay.py                 # 10M events (defaults)
    .venv/bin/python benchmarks/bench_replay.py --events 2000000 --memory-events 2000000

1. generates ``--events`` events (8 topics x 4 partitions) unless ``--data DIR`` exists;
2. makes sure the Spark driver's class archive exists (a small demo run writes it, as a
   machine's first Spark run does; see mledger.replay.spark.class_archive);
3. replays them end to end with ``mledger replay --single-process`` and with ``mledger
   replay --master local[2]``, each in a fresh process, and prints events per second
   (end to end: from the command's start to its outputs on disk, Spark session included;
   the Spark job alone is printed too);
4. generates one topic-partition with ``--memory-events`` / 10 and then ``--memory-events``
   events and replays each on local[2] while sampling the resident memory of every Python
   worker (``pyspark.daemon`` and its forks); prints the peak of the largest worker.

The machine's other load skews single runs by 15-30 %; repeat with ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _mledger(*args: str) -> list[str]:
    return [sys.executable, "-m", "mledger.cli", *args]


def _run(cmd: list[str], sample_workers: bool = False) -> tuple[float, str, int]:
    """Run a command; (wall seconds, stdout, peak RSS bytes of the largest Python worker)."""
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.1):
            peak = max(peak, _largest_worker_rss())

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.perf_counter()
    if sample_workers:
        sampler.start()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    took = time.perf_counter() - started
    stop.set()
    if sample_workers:
        sampler.join()
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return took, proc.stdout, peak


def _largest_worker_rss() -> int:
    best = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
            if b"pyspark.daemon" not in cmd and b"pyspark.worker" not in cmd:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        best = max(best, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return best


def _job_seconds(stdout: str) -> float:
    m = re.search(r"in ([0-9.]+) s \(", stdout)
    return float(m.group(1)) if m else float("nan")


def _events(stdout: str) -> int:
    m = re.search(r"replayed ([0-9,]+) events", stdout)
    return int(m.group(1).replace(",", "")) if m else 0


def _ensure_class_archive() -> None:
    """Spark runs are timed with the driver JVM's class archive in place (as every run after
    a machine's first): a small demo writes it when missing, and its time is printed."""
    from mledger.replay.spark import class_archive

    if class_archive.prepare({}, write=False) is not None:
        print(f"class archive: present in {class_archive.cache_dir()}")
        return
    took, _, _ = _run(_mledger("demo", "--quiet", "--events", "20000"))
    state = "written" if class_archive.prepare({}, write=False) is not None else "NOT written (disabled?)"
    print(f"class archive: {state} by a first 20k-event demo run ({took:.1f} s end to end)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--memory-events", type=int, default=10_000_000, help="events in the one-partition memory run (0: skip)")
    p.add_argument("--data", default="/tmp/mledger-bench/events", help="events directory (generated if missing)")
    p.add_argument("--out", default="/tmp/mledger-bench/out")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--skip-single", action="store_true")
    p.add_argument("--only-memory", action="store_true", help="just the one-partition memory run")
    args = p.parse_args()

    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    if not args.only_memory and not os.path.isdir(os.path.join(args.data, "produced")):
        took, out, _ = _run(_mledger("generate", args.data, "--events", str(args.events), "--topics", "8",
                                     "--partitions", "4", "--quiet"))
        print(f"generate: {out.strip()}")
    _ensure_class_archive()
    rows = []
    for _ in range(0 if args.only_memory else args.repeat):
        if not args.skip_single:
            took, out, _ = _run(_mledger("replay", args.data, args.out + "-single", "--single-process", "--quiet"))
            rows.append(("single process", _events(out), took, _job_seconds(out)))
        took, out, peak = _run(_mledger("replay", args.data, args.out + "-spark", "--master", "local[2]", "--quiet"),
                               sample_workers=True)
        rows.append(("spark local[2]", _events(out), took, _job_seconds(out)))
    if rows:
        print(f"\n{'replay':16} {'events':>12} {'end to end':>11} {'events/s':>10} {'job only':>9} {'events/s':>10}")
    for name, n, wall, job in rows:
        print(f"{name:16} {n:>12,} {wall:>10.1f}s {n / wall:>10,.0f} {job:>8.1f}s {n / job:>10,.0f}")

    if args.memory_events:
        # Two sizes of one topic-partition: the worker's peak should barely move.
        for events in (args.memory_events // 10, args.memory_events):
            one = os.path.join(os.path.dirname(args.data), "one-partition")
            shutil.rmtree(one, ignore_errors=True)
            _run(_mledger("generate", one, "--events", str(events), "--topics", "1", "--partitions", "1",
                          "--subscriptions", "3", "--quiet"))
            took, out, peak = _run(_mledger("replay", one, args.out + "-one", "--master", "local[2]", "--quiet"),
                                   sample_workers=True)
            print(f"one topic-partition, {_events(out):,} events on local[2]: {took:.1f} s end to end, "
                  f"largest Python worker peak RSS {peak / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
