"""The replay at scale: Spark local[2] vs the single process on prepared logs, and the rest of
issue 14's figures. Every comparison runs both sides in one run, alternating, and prints
medians and ratios.

    .venv/bin/python benchmarks/bench_replay.py                        # everything, 10M and 40M events
    .venv/bin/python benchmarks/bench_replay.py --sizes 2000000 --repeat 3 --skip memory,prepare
    .venv/bin/python benchmarks/bench_replay.py --only engine --sizes 10000000 --before /work/main

Parts (``--skip`` takes a comma-separated list of them):

* ``replay``: for each size in ``--sizes`` (8 topics x 4 partitions, prepared logs generated
  once under ``--data``), ``mledger replay --single-process`` and ``mledger replay --master
  local[2]``, each a fresh process, alternating which goes first, ``--repeat`` times. For
  each run: wall time (command start to outputs on disk, Spark session included), the CPU
  time of the whole process tree (driver, JVM, Python workers: sampled from /proc until each
  process ends), the JVM's share of it, the peak RSS of the single process and of the
  largest Spark Python worker;
* ``sweep``: a 3-setting ``--sweep`` of a persistence-only key (one shared replay) and one of
  a key that changes behaviour (one replay per value), against one replay, single process,
  the three rotating;
* ``prepare``: ``mledger prepare`` of the raw logs of the first size on local[2], against a
  replay of the same raw input on local[2] (which prepares them first);
* ``engine``: the replay engine alone on one topic-partition's events already in memory,
  events per CPU-second; with ``--before TREE``, that and the persists per CPU-second of
  10,000-range states against another source tree's (``TREE/src``): the events paired (both
  trees replay each topic-partition back to back, in two long-lived processes), the persists
  alternating; a target set on another machine reads as the ratio to the tree it was set
  against (issue 33's 1.2M: ``--before`` the tree at b884c61, where the figure was 1.39-1.45M);
* ``memory``: one topic-partition of ``--memory-events`` events replayed on local[2], the
  largest Python worker's peak RSS.

The machine's other load skews single runs by 15-30 %; the load average is printed.
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
import threading
import time
from dataclasses import dataclass, field

_TICK = os.sysconf("SC_CLK_TCK")


def _mledger(*args: str) -> list[str]:
    return [sys.executable, "-m", "mledger.cli", *args]


@dataclass
class Run:
    wall: float
    stdout: str
    cpu: float = 0.0
    jvm_cpu: float = 0.0
    peak_worker: int = 0
    peak_process: int = 0
    processes: dict[int, tuple[float, str]] = field(default_factory=dict)


def _stat(pid: int) -> tuple[int, float, str] | None:
    """(parent pid, user+sys CPU seconds, command line) of a process, None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, cmd


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _run(cmd: list[str]) -> Run:
    """Run a command; sample its process tree (CPU per process, worker RSS) until every
    process of it has ended."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    run = Run(0.0, "")
    seen: dict[int, tuple[float, str]] = {}
    peak_worker = peak_process = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_worker, peak_process
        while True:
            children: dict[int, list[int]] = {}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    st = _stat(int(name))
                    if st is not None:
                        children.setdefault(st[0], []).append(int(name))
            todo, tree = [proc.pid], set()
            while todo:
                pid = todo.pop()
                tree.add(pid)
                todo.extend(children.get(pid, []))
            alive = False
            for pid in tree | set(seen):
                st = _stat(pid)
                if st is None:
                    continue
                alive = True
                # a process that has exited shows an empty command line: keep the one seen before
                seen[pid] = (st[1], st[2] or seen.get(pid, (0.0, ""))[1])
                if "pyspark.daemon" in st[2] or "pyspark.worker" in st[2]:
                    peak_worker = max(peak_worker, _rss(pid))
                elif pid == proc.pid:
                    peak_process = max(peak_process, _rss(pid))
            if stop.is_set() and not alive:
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    run.wall = time.perf_counter() - started
    stop.set()
    sampler.join(timeout=30)
    if proc.returncode != 0:
        sys.stderr.write(out + err)
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    run.stdout = out
    run.processes = dict(seen)
    run.cpu = sum(c for c, _ in seen.values())
    run.jvm_cpu = sum(c for c, cmd in seen.values() if "java" in cmd.split(" ", 1)[0])
    run.peak_worker = peak_worker
    run.peak_process = peak_process
    return run


def _events(stdout: str) -> int:
    m = re.search(r"replayed ([0-9,]+) events", stdout)
    return int(m.group(1).replace(",", "")) if m else 0


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _ensure_class_archive() -> None:
    from mledger.replay.spark import _class_archive as class_archive

    if class_archive.prepare({}, write=False) is not None:
        print(f"class archive: present in {class_archive.cache_dir()}")
        return
    run = _run(_mledger("demo", "--quiet", "--events", "20000"))
    state = "written" if class_archive.prepare({}, write=False) is not None else "NOT written (disabled?)"
    print(f"class archive: {state} by a first 20k-event demo run ({run.wall:.1f} s end to end)")


def _generate(path: str, events: int, *extra: str) -> None:
    marker = "_manifest.json" if "--raw" not in extra else "produced"
    if os.path.exists(os.path.join(path, marker)):
        return
    shutil.rmtree(path, ignore_errors=True)
    run = _run(_mledger("generate", path, "--events", str(events), "--topics", "8", "--partitions", "4", "--quiet",
                        *extra))
    print(f"generate: {run.stdout.strip()}")


def _replay_part(args: argparse.Namespace) -> None:
    for size in args.sizes:
        data = os.path.join(args.data, f"prepared-{size}")
        _generate(data, size)
        sides = {"single process": ["--single-process"], "spark local[2]": ["--master", "local[2]"]}
        runs: dict[str, list[Run]] = {k: [] for k in sides}
        for r in range(args.repeat):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                runs[name].append(_run(_mledger("replay", data, os.path.join(args.data, "out"), "--quiet",
                                                *sides[name])))
        events = _events(runs["single process"][0].stdout)
        print(f"\n== replay of {events:,} prepared events (32 topic-partitions), {args.repeat} runs each, alternating; "
              f"{_load()}")
        print(f"{'':16} {'wall (median)':>14} {'runs':>26} {'events/s':>10} {'CPU s':>7} {'JVM CPU':>8} "
              f"{'peak RSS':>9} {'worker peak':>11}")
        for name, rs in runs.items():
            walls = [r.wall for r in rs]
            cpu = _median([r.cpu for r in rs])
            jvm = _median([r.jvm_cpu for r in rs])
            print(f"{name:16} {_median(walls):>13.1f}s {' / '.join(f'{w:.1f}' for w in walls):>26} "
                  f"{events / _median(walls):>10,.0f} {cpu:>7.1f} {jvm:>5.1f} ({jvm / cpu:.0%}) "
                  f"{_median([r.peak_process for r in rs]) / 2**20:>7,.0f}Mi "
                  f"{_median([r.peak_worker for r in rs]) / 2**20:>9,.0f}Mi")
        ratio = _median([r.wall for r in runs["spark local[2]"]]) / _median([r.wall for r in runs["single process"]])
        print(f"spark / single process, wall: {ratio:.2f}x")


def _sweep_part(args: argparse.Namespace) -> None:
    size = args.sizes[0]
    data = os.path.join(args.data, f"prepared-{size}")
    _generate(data, size)
    # persistence-only settings share one replay (replay.mirror); a key that changes what the
    # broker does (when cursors persist) gets one replay per value, sharing the reading only
    sides = {"one replay": [],
             "3-setting sweep": ["--sweep", "max_unacked_ranges_to_persist=100,1000,10000"],
             "3 behaviours": ["--sweep", "throttle_mark_delete=0.5,1,2"]}
    runs: dict[str, list[Run]] = {k: [] for k in sides}
    for r in range(args.repeat):
        names = list(sides)
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
            runs[name].append(_run(_mledger("replay", data, os.path.join(args.data, "out"), "--quiet",
                                            "--single-process", *sides[name])))
    print(f"\n== sweep, single process, {size:,} events; {_load()}")
    for name, rs in runs.items():
        print(f"{name:16} {_median([r.wall for r in rs]):>7.1f}s  ({' / '.join(f'{r.wall:.1f}' for r in rs)}), "
              f"CPU {_median([r.cpu for r in rs]):.1f} s ({' / '.join(f'{r.cpu:.1f}' for r in rs)}), "
              f"peak RSS {_median([r.peak_process for r in rs]) / 2**20:,.0f} MiB")
    for name in list(sides)[1:]:
        wall = _median([r.wall for r in runs[name]]) / _median([r.wall for r in runs["one replay"]])
        cpu = _median([r.cpu for r in runs[name]]) / _median([r.cpu for r in runs["one replay"]])
        print(f"{name} / one replay: wall {wall:.2f}x, CPU {cpu:.2f}x")


def _prepare_part(args: argparse.Namespace) -> None:
    size = args.sizes[0]
    raw = os.path.join(args.data, f"raw-{size}")
    _generate(raw, size, "--raw")
    sides = {"prepare local[2]": ("prepare", raw, os.path.join(args.data, "prep-out"), "--master", "local[2]"),
             "replay raw local[2]": ("replay", raw, os.path.join(args.data, "out"), "--master", "local[2]")}
    runs: dict[str, list[Run]] = {k: [] for k in sides}
    for r in range(args.repeat):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            runs[name].append(_run(_mledger(*sides[name], "--quiet")))
    print(f"\n== prepare of {size:,} raw events on local[2] (one shuffle), and a replay of the raw logs "
          f"(prepare + replay); {_load()}")
    for name, rs in runs.items():
        cpu = _median([r.cpu for r in rs])
        jvm = _median([r.jvm_cpu for r in rs])
        print(f"{name:20} {_median([r.wall for r in rs]):>7.1f}s  ({' / '.join(f'{r.wall:.1f}' for r in rs)}), "
              f"CPU {cpu:.1f} s, JVM {jvm:.1f} s ({jvm / cpu:.0%})")
    shutil.rmtree(os.path.join(args.data, "prep-out"), ignore_errors=True)


def _engine_rates(data: str) -> tuple[list[float], int]:
    """Events per CPU-second of the engine alone on the first four topic-partitions of the log
    at ``data`` (each one's batches read first, then fed), and the events of the last."""
    from mledger.replay import open_prepared
    from mledger.replay._layout import read_partition

    log = open_prepared(data)
    declared = log.subscriptions()
    rates = []
    events = 0
    for part in log.manifest.partitions[:4]:
        batches = list(read_partition(log, part))
        events = sum(b.num_rows for b in batches)
        took, _ = _replay_engine(part, batches, declared)
        rates.append(events / took)
        del batches
    return rates, events


def _engine_worker(data: str) -> None:
    """``--engine-child worker``: one side of ``--before``'s paired comparison. Reads the first
    four topic-partitions' batches, says ``READY``, then for each line ``K`` on stdin replays
    topic-partition ``K`` and answers ``CPU-SECONDS EVENTS``."""
    import gc

    from mledger.replay import open_prepared
    from mledger.replay._layout import read_partition

    log = open_prepared(data)
    declared = log.subscriptions()
    parts = [(part, list(read_partition(log, part))) for part in log.manifest.partitions[:4]]
    print("READY", flush=True)
    for line in sys.stdin:
        part, batches = parts[int(line)]
        gc.collect()  # the last replay's garbage is not this one's
        took, _ = _replay_engine(part, batches, declared)
        print(f"{took} {sum(b.num_rows for b in batches)}", flush=True)


def _engine_child(what: str, data: str) -> None:
    """``--engine-child``: one side of ``--before``'s comparison, in a process of its own."""
    if what == "worker":
        _engine_worker(data)
    else:
        print(f"PERSISTS {_persist_rate(quiet=True):.1f}")


def _paired_rates(args: argparse.Namespace, data: str, sides: dict[str, str]) -> None:
    """Events per CPU-second of both trees' engines, paired: one long-lived worker per tree
    (:func:`_engine_worker`), each topic-partition replayed by both back to back, which first
    alternating, ``--repeat`` rounds over the first four (of the log at ``data``). The machine's load drifts over seconds, so
    two replays back to back see nearly the same machine: the median of the paired ratios is
    steadier than the ratio of two medians, which is printed too."""
    workers = {}
    for name, src in sides.items():
        workers[name] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--engine-child", "worker", "--data", args.data,
             "--sizes", str(args.sizes[0])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": src})
    for name, worker in workers.items():
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "READY":
            raise SystemExit(f"the {name} tree's engine worker did not start")

    def replay(name: str, k: int) -> tuple[float, int]:
        worker = workers[name]
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(f"{k}\n")
        worker.stdin.flush()
        answer = worker.stdout.readline().split()
        if len(answer) != 2:
            raise SystemExit(f"the {name} tree's engine worker stopped (topic-partition {k}): see its output above")
        return float(answer[0]), int(answer[1])

    from mledger.replay import open_prepared

    parts = min(4, len(open_prepared(data).manifest.partitions))  # what each worker holds
    rates: dict[str, list[float]] = {name: [] for name in sides}
    ratios = []
    for r in range(args.repeat):
        for k in range(parts):
            took, events = {}, {}
            for name in (list(sides) if (r + k) % 2 == 0 else list(reversed(sides))):
                took[name], events[name] = replay(name, k)
                rates[name].append(events[name] / took[name])
            if events["before"] != events["after"]:
                raise SystemExit(f"the trees replayed different events of topic-partition {k}: {events}")
            ratios.append(took["before"] / took["after"])
    for worker in workers.values():
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    before, after = _median(rates["before"]), _median(rates["after"])
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"events per CPU-second ({args.repeat} rounds of 4 topic-partitions, each replayed by both back to back): "
          f"before {before:,.0f}, after {after:,.0f} (medians; {after / before:.2f}x); after against before, "
          f"median of {len(ratios)} paired ratios: {_median(ratios):.3f}x (quartiles {quartiles[0]:.3f}, "
          f"{quartiles[2]:.3f})")


def _compare_engine(args: argparse.Namespace, data: str) -> None:
    """``--before TREE``: the engine's figures of TREE's ``src`` against this checkout's:
    events per CPU-second paired (:func:`_paired_rates`); persists per CPU-second each side a
    fresh process, alternating which goes first, ``--repeat`` times; medians, ratios.

    A tree from before the engine observed every persist (issue 33) has no model to measure
    persists with: that figure is then said to be out of its reach, and the events per
    CPU-second are compared alone. That comparison is how an events-per-CPU-second target set
    on another machine reads on this one: the ratio to the tree it was set against."""
    sides = {"before": os.path.join(args.before, "src"),
             "after": os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")}
    print(f"\n== the engine alone, before ({sides['before']}) and after ({sides['after']}); {_load()}")
    _paired_rates(args, data, sides)
    persists: dict[str, list[float]] = {k: [] for k in sides}
    unmeasurable: dict[str, str] = {}  # side -> the last line of its failed child
    for r in range(args.repeat):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            if name in unmeasurable:
                continue
            child = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine-child", "persists",
                                    "--data", args.data, "--sizes", str(args.sizes[0])], text=True,
                                   capture_output=True, env={**os.environ, "PYTHONPATH": sides[name]})
            if child.returncode:
                if name == "after":  # this checkout's own figure: its failure is a failure
                    raise SystemExit(f"the persists child failed:\n{child.stderr}")
                unmeasurable[name] = (child.stderr.strip().splitlines() or ["no output"])[-1]
                continue
            line = next(x for x in child.stdout.splitlines() if x.startswith("PERSISTS"))
            persists[name].append(float(line.split()[1]))
    label = "persists per CPU-second, states of ~10,000 ranges"
    if unmeasurable:
        for name, why in unmeasurable.items():
            print(f"{label}: not measured, the {name} tree cannot run it ({why})")
        return
    before, after = _median(persists["before"]), _median(persists["after"])
    print(f"{label}: before {before:,.0f} ({' / '.join(f'{v:,.0f}' for v in persists['before'])}), "
          f"after {after:,.0f} ({' / '.join(f'{v:,.0f}' for v in persists['after'])}): {after / before:.2f}x; "
          f"{_load()}")


def _engine_part(args: argparse.Namespace) -> None:
    """The engine alone: one topic-partition's batches read first, then fed (CPU time); then
    whether its answers equal steps of one event's, persists per CPU-second on states of
    10,000 ranges, and a sweep over the presets against one setting. With ``--before TREE``:
    the first and third against TREE's, alternating (:func:`_compare_engine`), and nothing else."""
    from mledger.replay import open_prepared
    from mledger.replay._layout import read_partition

    data = os.path.join(args.data, f"prepared-{args.sizes[0]}")
    _generate(data, args.sizes[0])  # the first size's log, generated when none is there
    if args.before:
        _compare_engine(args, data)
        return
    log = open_prepared(data)
    declared = log.subscriptions()
    rates, events = _engine_rates(data)
    print(f"\n== the engine alone, {len(rates)} topic-partitions of ~{events:,} events in memory: "
          f"{_median(rates):,.0f} events per CPU-second (median; {', '.join(f'{r:,.0f}' for r in rates)}); {_load()}")
    part = log.manifest.partitions[0]
    batches = list(read_partition(log, part))
    if args.check_sequential:
        import pyarrow as pa

        first = pa.Table.from_batches(batches).slice(0, args.check_sequential).to_batches(max_chunksize=65_536)
        _, bulk = _replay_engine(part, first, declared)
        took, sequential = _replay_engine(part, first, declared, segment_rows=1)
        print(f"   answers equal to segment_rows=1's on the first {args.check_sequential:,} events of one "
              f"topic-partition: {'yes' if bulk == sequential else 'NO'} (steps of one: "
              f"{args.check_sequential / took:,.0f} events per CPU-second)")
    _persist_rate()
    if args.sweep_events:
        import pyarrow as pa

        from mledger.replay import ReplaySettings

        first = pa.Table.from_batches(batches).slice(0, args.sweep_events).to_batches(max_chunksize=65_536)
        one, _ = _replay_engine(part, first, declared)
        each = []
        for preset in ("pulsar-3.0", "pulsar-4.0", "pulsar-4.1", "pulsar-newest"):
            took, _ = _replay_engine(part, first, declared, ReplaySettings().with_values({"defaults": preset}))
            each.append(f"{preset} {took:.2f} s")
        presets = sum(float(e.split()[1]) for e in each)
        print(f"== a sweep over the four presets (crash and unload figures each): {presets / one:.2f} times one "
              f"setting's CPU ({'; '.join(each)}; the default {one:.2f} s; the first {args.sweep_events:,} events "
              f"of one topic-partition); {_load()}")


def _replay_engine(part, batches, declared, settings=None, segment_rows=None):  # type: ignore[no-untyped-def]
    """CPU seconds of one topic-partition's replay, and its outputs as sorted rows."""
    from mledger.replay import PartitionReplayer, ReplaySettings
    from mledger.replay._tasks import quiet_library_warnings

    s = settings or ReplaySettings()
    if segment_rows is not None:
        s = s.with_changes(segment_rows=segment_rows)
    started = time.process_time()
    with quiet_library_warnings():
        replayer = PartitionReplayer(part.topic, part.partition, s, declared=declared.get(part.topic or "", ()))
        out = [b for batch in batches for b in replayer.feed(batch)]
        out.extend(replayer.finish())
    took = time.process_time() - started
    return took, sorted(map(repr, (row for b in out for row in b.to_pylist())))


def _persist_rate(quiet: bool = False) -> float:
    """Persists per CPU-second of a cursor whose state holds about 10,000 ranges: 9,500 holes
    made within one second (one persist), then one more hole a second, each persisted (the
    rate limit's pace), 1,000 of them; the CPU of the second phase alone, by difference.
    Printed unless ``quiet``; returned."""
    from mledger.replay import BrokerModel, PartitionReplayer, ReplaySettings
    from mledger.replay._events import event_table
    from mledger.replay._local import by_partition
    from mledger.replay._tasks import quiet_library_warnings

    topic, holes, more = "persistent://public/default/ranges", 9_500, 1_000
    produced = [{"log": "produced", "topic": topic, "partition": 0, "ledger_id": 3, "entry_id": i,
                 "publish_time_ms": i // 100} for i in range(2 * (holes + more) + 1)]

    def ack(entry: int, ts: int) -> dict[str, object]:
        return {"log": "acked", "topic": topic, "partition": 0, "subscription": "s", "ledger_id": 3,
                "entry_id": entry, "ts_ms": ts}

    build = [ack(2 * i + 1, 1_000 + i // 20) for i in range(holes)]
    paced = [ack(2 * (holes + i) + 1, 2_000 + 1_000 * i) for i in range(more)]
    runs = []
    for rows in ([*produced, *build], [*produced, *build, *paced]):
        table = event_table(rows)
        models: list[BrokerModel] = []

        def factory(t: str, p: int, s: ReplaySettings, models: list[BrokerModel] = models) -> BrokerModel:
            models.append(BrokerModel(t, p, s))
            return models[-1]

        ((_, _, batches),) = list(by_partition(table))
        started = time.process_time()
        with quiet_library_warnings():
            replayer = PartitionReplayer(topic, 0, ReplaySettings(), model_factory=factory)
            for batch in batches:
                replayer.feed(batch)
            replayer.observe()  # the events fed so far applied
        cursor = models[0].cursor("s")
        assert cursor is not None
        persists = cursor.stats().persistence.persist_count
        runs.append((time.process_time() - started, persists, cursor.stats().individually_deleted_ranges))
    (cpu0, n0, _), (cpu1, n1, ranges) = runs
    rate = (n1 - n0) / max(cpu1 - cpu0, 1e-9)
    if not quiet:
        print(f"== persists per CPU-second, states of ~10,000 ranges ({ranges:,} at the end): {rate:,.0f} "
              f"({n1 - n0:,} persists in {cpu1 - cpu0:.2f} s); {_load()}")
    return rate


def _memory_part(args: argparse.Namespace) -> None:
    one = os.path.join(args.data, f"one-partition-{args.memory_events}")
    if not os.path.exists(os.path.join(one, "_manifest.json")):
        shutil.rmtree(one, ignore_errors=True)
        _run(_mledger("generate", one, "--events", str(args.memory_events), "--topics", "1", "--partitions", "1",
                      "--subscriptions", "3", "--quiet"))
    run = _run(_mledger("replay", one, os.path.join(args.data, "out-one"), "--master", "local[2]", "--quiet"))
    print(f"\n== one topic-partition of {_events(run.stdout):,} events on local[2]: {run.wall:.1f} s, largest Python "
          f"worker peak RSS {run.peak_worker / 2**20:,.0f} MiB; {_load()}")
    single = _run(_mledger("replay", one, os.path.join(args.data, "out-one"), "--single-process", "--quiet"))
    print(f"   the same, single process: {single.wall:.1f} s, peak RSS {single.peak_process / 2**20:,.0f} MiB")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000_000, 40_000_000],
                   help="events of the prepared logs, comma-separated (10000000,40000000)")
    p.add_argument("--memory-events", type=int, default=13_500_000, help="events of the one-partition memory run")
    p.add_argument("--data", default="/tmp/mledger-bench", help="where the logs are generated (kept between runs)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip", default="", help="parts to skip: replay,sweep,prepare,engine,memory")
    p.add_argument("--only", default="", help="parts to run (default all)")
    p.add_argument("--sweep-events", type=int, default=100_000,
                   help="engine: events of one topic-partition replayed under each preset (0: none)")
    p.add_argument("--check-sequential", type=int, default=100_000,
                   help="engine: events of one topic-partition replayed in steps of one too, answers compared (0: none)")
    p.add_argument("--before", default="",
                   help="engine: compare with the source tree at this path (its src/), alternating; e.g. /work/main")
    p.add_argument("--engine-child", choices=("worker", "persists"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.engine_child:
        _engine_child(args.engine_child, os.path.join(args.data, f"prepared-{args.sizes[0]}"))
        return 0
    parts = {"replay": _replay_part, "sweep": _sweep_part, "prepare": _prepare_part, "engine": _engine_part,
             "memory": _memory_part}
    chosen = [x for x in (args.only.split(",") if args.only else parts) if x and x not in args.skip.split(",")]
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; {_load()}")
    os.makedirs(args.data, exist_ok=True)
    if set(chosen) - {"engine"}:  # Spark runs: the engine alone does not need the class archive
        _ensure_class_archive()
    for name in chosen:
        parts[name](args)
    print(f"\n(children's max RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:,.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
