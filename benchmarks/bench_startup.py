"""Start-up: the pytest fixture's broker and ``mledger standalone`` to their first message.

    python benchmarks/bench_startup.py [--runs 7] [--only fixture,standalone] [--compile] [--floor]
                                       [--before OLD/src | SRC [SRC2]]

Three figures per run, each in a fresh interpreter:

* ``fixture``: what the ``pulsar_broker`` fixture does, in one process: the import of its modules
  (``from mledger.standalone import EmbeddedStandalone``, timed inside the process; the client's
  own ``import pulsar`` comes first and is not counted), the start of the in-process broker
  (memory store, manual clock, free port) and the first message through the real
  ``pulsar-client`` (subscribe, produce, receive).
* ``standalone``: ``python -m mledger.cli standalone --memory`` on free ports (chosen here, so
  the admin URL is known before the process prints anything), from just before the spawn to
  the first 200 of ``GET /admin/v2/clusters`` (the check container tools make), then the idle
  resident set (``VmRSS`` once it stops growing); SIGTERM ends the run. A second spawn is timed
  to the first message: a child process (the client imported before it spawns) waits for the
  standalone's ready line (its URLs) and sends and receives one message.

Both also report CPU seconds (the fixture's process to its import and to the first message;
the standalone's process to the first message): on a shared, loaded machine wall times drift by
a factor of two between runs, CPU time far less.

With ``--before OLD/src`` the runs alternate between OLD and this checkout's ``src`` (A B, B A,
...) so drift on a shared machine hits both alike, and the ratios after / before are printed
(medians). One or two source roots (directories holding ``mledger/``: a checkout's ``src``,
e.g. ``git archive main src | tar -x -C /tmp/base``) may be given instead; none runs the
installed package. Each root is copied to a temporary directory first, so its bytecode caches
are the copy's: by default one uncounted run per root writes them (what an installed package
has), with ``--compile`` every run compiles mledger from source (``PYTHONDONTWRITEBYTECODE=1``,
as environments that set it pay on every start). Prints the medians per root (``<label>:
<number>`` lines, as compare_src.py reads) and the load average.
``--floor`` also times, per root, what no change to the standalone can go below: an empty
interpreter, importing what it needs before listening (the protocol server and uvicorn),
``import fastapi`` alone, and ``python -m mledger.protocol --memory`` to its ``ready`` line.
The harness needs only the standard library; the first-message runs need ``pulsar-client``.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"
"""This checkout's source root: the "after" of ``--before``."""

READY_TIMEOUT_S = 30.0
SETTLE_S = 1.0
"""RSS is read once two reads this far apart agree to 1 %, at most ten reads."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick, released again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clusters_status(port: int) -> int | None:
    """The HTTP status of ``GET /admin/v2/clusters``, None while nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/admin/v2/clusters")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def rss_kib(pid: int) -> int:
    """``VmRSS`` of ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def settled_rss_kib(pid: int) -> int:
    """The resident set once it stopped growing (see :data:`SETTLE_S`)."""
    last = rss_kib(pid)
    for _ in range(10):
        time.sleep(SETTLE_S)
        now = rss_kib(pid)
        if abs(now - last) <= last // 100:
            return now
        last = now
    return last


def standalone_argv() -> tuple[list[str], int]:
    """The command line of a standalone on free ports, and its admin port."""
    admin_port, protocol_port = free_port(), free_port()
    argv = [sys.executable, "-m", "mledger.cli", "standalone", "--memory"]
    argv += ["--bind", f"127.0.0.1:{protocol_port}", "--admin-bind", f"127.0.0.1:{admin_port}"]
    return argv, admin_port


def one_run(src: Path | None, compile_each: bool = False) -> tuple[float, int]:
    """(seconds from spawn to the first 200, settled RSS KiB) of one standalone process."""
    env = _env(src, compile_each)
    argv, admin_port = standalone_argv()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as cwd:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while (status := clusters_status(admin_port)) != 200:
                if proc.poll() is not None:
                    raise RuntimeError(f"standalone exited {proc.returncode}: {proc.stderr.read().decode()}")
                if time.perf_counter() - started > READY_TIMEOUT_S:
                    raise RuntimeError(f"no 200 from /admin/v2/clusters in {READY_TIMEOUT_S} s (last: {status})")
                time.sleep(0.002)
            ready = time.perf_counter() - started
            rss = settled_rss_kib(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return ready, rss


FLOOR_IMPORTS = {
    "python -c pass": "pass",
    "import mledger.protocol, uvicorn": "from mledger.protocol import ProtocolServer; import uvicorn",
    "import fastapi": "import fastapi",
}


def _env(src: Path | None, compile_each: bool = False) -> dict[str, str]:
    """The environment of a run: ``PYTHONPATH`` at ``src``; bytecode caches written and read
    unless ``compile_each``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if compile_each:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve())
    return env


FIRST_MESSAGE = """
import json, os, subprocess, sys, time
import pulsar

def first_message(service_url):
    \"\"\"Subscribe, produce and receive one message; the time it was received.\"\"\"
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    topic = "persistent://public/default/bench-startup"
    consumer = client.subscribe(topic, "bench")
    client.create_producer(topic).send(b"first")
    assert consumer.receive(30_000).data() == b"first"
    received = time.perf_counter()
    client.close()
    return received
"""
"""What both probes start with: the client's own import (not counted) and the first message."""

FIXTURE_PROBE = (
    FIRST_MESSAGE
    + """
cpu, started = time.process_time(), time.perf_counter()
from mledger.standalone import EmbeddedStandalone
cpu_imported, imported = time.process_time(), time.perf_counter()
broker = EmbeddedStandalone().start()
ready = time.perf_counter()
first = first_message(broker.service_url)
cpu_first = time.process_time()
broker.stop()
print(imported - started, ready - imported, first - ready, cpu_imported - cpu, cpu_first - cpu)
"""
)
"""The fixture's start in one process (see the module docstring); prints import, start and
first-message seconds, then the process's CPU seconds to the import and to the first message
(the client's threads included)."""

STANDALONE_PROBE = (
    FIRST_MESSAGE
    + """
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    line = proc.stdout.readline()
    if not line.startswith("{"):
        raise SystemExit(f"standalone printed {line!r}: {proc.stderr.read() if proc.poll() is not None else ''}")
    ready = time.perf_counter()
    first = first_message(json.loads(line)["service_url"])
    with open(f"/proc/{proc.pid}/stat") as stat:  # utime, stime: fields 14 and 15, in clock ticks
        ticks = sum(int(f) for f in stat.read().rsplit(")", 1)[1].split()[11:13])
finally:
    proc.send_signal(15)
    proc.wait(30)
print(ready - started, first - started, ticks / os.sysconf("SC_CLK_TCK"))
"""
)
"""A standalone spawned to its ready line and to the first message, in seconds, and the CPU
seconds the standalone spent until then (Linux: ``/proc/PID/stat``, in clock ticks)."""


def fixture_run(src: Path | None, compile_each: bool = False) -> dict[str, float]:
    """The fixture's import, start and first message (seconds), in one fresh process."""
    out = _probe(FIXTURE_PROBE, [], src, compile_each)
    imported, started, first, cpu_imported, cpu_first = (float(x) for x in out.split())
    return {
        "import": imported,
        "start": started,
        "first message": first,
        "total": imported + started + first,
        "CPU to the import": cpu_imported,
        "CPU to the first message": cpu_first,
    }


def standalone_first_run(src: Path | None, compile_each: bool = False) -> dict[str, float]:
    """A standalone's spawn to its ready line and to the first message (seconds), and its CPU
    seconds until the first message."""
    argv, _ = standalone_argv()
    ready, first, cpu = (float(x) for x in _probe(STANDALONE_PROBE, argv, src, compile_each).split())
    return {"spawn to ready line": ready, "spawn to first message": first, "CPU to the first message": cpu}


def _probe(code: str, args: list[str], src: Path | None, compile_each: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as cwd:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=_env(src, compile_each),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode != 0:
        raise RuntimeError(f"probe exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def floor_run(src: Path | None, compile_each: bool = False) -> dict[str, float]:
    """Seconds of each :data:`FLOOR_IMPORTS` interpreter, and of the protocol server to ``ready``."""
    times = {}
    for label, code in FLOOR_IMPORTS.items():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=_env(src, compile_each), check=True)
        times[label] = time.perf_counter() - started
    argv = [sys.executable, "-m", "mledger.protocol", "--memory", "--bind", "127.0.0.1:0"]
    started = time.perf_counter()
    env = _env(src, compile_each)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        times["python -m mledger.protocol to ready"] = time.perf_counter() - started
        if not line.startswith("ready"):
            raise RuntimeError(f"python -m mledger.protocol printed {line!r}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return times


def copied(root: Path, into: Path) -> Path:
    """A copy of the source root ``root`` under ``into`` (without bytecode caches)."""
    target = into / f"{len(list(into.iterdir()))}-{root.resolve().name}"
    shutil.copytree(root, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per source root (7)")
    parser.add_argument(
        "--only", default="fixture,standalone", help="what to time: fixture, standalone or both (the default)"
    )
    parser.add_argument("--before", type=Path, help="a source root to compare this checkout's src with")
    parser.add_argument("--compile", action="store_true", help="no bytecode caches: every run compiles mledger")
    parser.add_argument("--floor", action="store_true", help="also time the floor (see the module docstring)")
    parser.add_argument("roots", nargs="*", type=Path, help="source roots (directories holding mledger/); at most 2")
    args = parser.parse_args()
    kinds = set(args.only.split(","))
    if not kinds or kinds - {"fixture", "standalone"}:
        parser.error(f"--only takes fixture, standalone or both, not {args.only!r}")
    if args.before is not None and args.roots:
        parser.error("--before compares with this checkout's src: give no other source root")
    given: list[Path] = [args.before, HERE_SRC] if args.before is not None else list(args.roots)
    if len(given) > 2:
        parser.error("at most two source roots")
    labels = ["before", "after"] if args.before is not None else [str(r) for r in given] or ["installed"]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-startup-src-") as tmp:
        roots: list[Path | None] = [copied(r, Path(tmp)) for r in given] or [None]
        figures = measure(roots, labels, kinds, args.runs, args.compile, args.floor)
    report(figures, labels, args, load_before)


def measure(
    roots: list[Path | None], labels: list[str], kinds: set[str], runs: int, compile_each: bool, floor: bool
) -> dict[str, dict[str, list[float]]]:
    """``{label: {figure: [value per run]}}`` of ``runs`` alternating runs per root."""
    figures: dict[str, dict[str, list[float]]] = {label: defaultdict(list) for label in labels}
    for root in roots:  # not counted: writes the bytecode caches of the copy
        if "fixture" in kinds:
            fixture_run(root, compile_each)
        if "standalone" in kinds:
            one_run(root, compile_each)
    for run in range(runs):
        order = list(range(len(roots))) if run % 2 == 0 else list(reversed(range(len(roots))))
        for i in order:
            root, label, got = roots[i], labels[i], figures[labels[i]]
            if "fixture" in kinds:
                for what, value in fixture_run(root, compile_each).items():
                    got[f"fixture {what} (s)"].append(value)
            if "standalone" in kinds:
                ready, rss = one_run(root, compile_each)
                got["standalone start to /admin/v2/clusters 200 (s)"].append(ready)
                got["standalone idle RSS (MiB)"].append(rss / 1024)
                for what, value in standalone_first_run(root, compile_each).items():
                    got[f"standalone {what} (s)"].append(value)
            if floor:
                for what, value in floor_run(root, compile_each).items():
                    got[f"floor {what} (s)"].append(value)
            line = ", ".join(f"{k} {v[-1]:.3f}" for k, v in got.items())
            print(f"# run {run + 1} {label}: {line}", file=sys.stderr)
    return figures


def report(
    figures: dict[str, dict[str, list[float]]],
    labels: list[str],
    args: argparse.Namespace,
    load_before: tuple[float, float, float],
) -> None:
    """The medians per root, and the ratios of the second root to the first."""
    caches = "compiled from source every run" if args.compile else "bytecode caches written by a first, uncounted run"
    loads = " -> ".join(", ".join(f"{x:.2f}" for x in load) for load in (load_before, os.getloadavg()))
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs, load {loads} (1, 5, 15 min: start -> end)")
    print(f"# {args.runs} runs per root, alternating; {caches}")
    for label in labels:
        for what, values in figures[label].items():
            print(f"{label} {what}, median: {statistics.median(values):.3f}")
    if len(labels) == 2:
        first, second = labels
        for what, values in figures[second].items():
            base = statistics.median(figures[first][what])
            print(f"ratio {second} / {first} {what}: {statistics.median(values) / base:.3f}")


if __name__ == "__main__":
    main()
