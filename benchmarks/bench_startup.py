"""Start-up of ``mledger standalone --memory``: process start to the first answer, and idle memory.

    python benchmarks/bench_startup.py [--runs 7] [--floor] [SRC [SRC2]]

Each run starts ``python -m mledger.cli standalone --memory`` on free ports (chosen here, so the
admin URL is known before the process prints anything), polls ``GET /admin/v2/clusters`` until
it answers 200 (the check container tools make) and takes the time from just before the
process was spawned; it then waits until the process's resident set stops growing (idle: no
request after the first) and reads ``VmRSS`` from ``/proc/PID/status``. SIGTERM ends the run.

With one or two source roots (directories holding ``mledger/``: a checkout's ``src``, e.g.
``git archive main src | tar -x -C /tmp/base``), each run starts the process with ``PYTHONPATH``
set to that root; with two, they alternate (A B, B A, ...) so drift on a shared machine hits both
alike. One uncounted run per root first writes its bytecode caches. Prints the medians per root (``<label>: <number>`` lines, as compare_src.py reads).
``--floor`` also times, per root, what no change to the standalone can go below: an empty
interpreter, importing what it needs before listening (the protocol server and uvicorn),
``import fastapi`` alone, and ``python -m mledger.protocol --memory`` to its ``ready`` line.
Needs only the standard library.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def one_run(src: Path | None) -> tuple[float, int]:
    """(seconds from spawn to the first 200, settled RSS KiB) of one standalone process."""
    env = _env(src)
    admin_port, protocol_port = free_port(), free_port()
    argv = [sys.executable, "-m", "mledger.cli", "standalone", "--memory"]
    argv += ["--bind", f"127.0.0.1:{protocol_port}", "--admin-bind", f"127.0.0.1:{admin_port}"]
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


def _env(src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src.resolve())
    return env


def floor_run(src: Path | None) -> dict[str, float]:
    """Seconds of each :data:`FLOOR_IMPORTS` interpreter, and of the protocol server to ``ready``."""
    times = {}
    for label, code in FLOOR_IMPORTS.items():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=_env(src), check=True)
        times[label] = time.perf_counter() - started
    argv = [sys.executable, "-m", "mledger.protocol", "--memory", "--bind", "127.0.0.1:0"]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=_env(src), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per source root (7)")
    parser.add_argument("--floor", action="store_true", help="also time the floor (see the module docstring)")
    parser.add_argument("roots", nargs="*", type=Path, help="source roots (directories holding mledger/); at most 2")
    args = parser.parse_args()
    if len(args.roots) > 2:
        parser.error("at most two source roots")
    roots: list[Path | None] = list(args.roots) or [None]
    results: dict[int, list[tuple[float, int]]] = {i: [] for i in range(len(roots))}
    floors: dict[int, list[dict[str, float]]] = {i: [] for i in range(len(roots))}
    for root in roots:  # not counted: writes the bytecode caches of a fresh tree
        one_run(root)
    for run in range(args.runs):
        order = range(len(roots)) if run % 2 == 0 else reversed(range(len(roots)))
        for i in order:
            results[i].append(one_run(roots[i]))
            if args.floor:
                floors[i].append(floor_run(roots[i]))
            ready, rss = results[i][-1]
            print(f"# run {run + 1} {roots[i] or 'installed'}: {ready:.3f} s, {rss / 1024:.1f} MiB", file=sys.stderr)
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs, load {os.getloadavg()}, {args.runs} runs per root")
    for i, root in enumerate(roots):
        label = root or "installed"
        readies = [r for r, _ in results[i]]
        rsses = [m / 1024 for _, m in results[i]]
        print(f"{label} start to /admin/v2/clusters 200 (s, median): {statistics.median(readies):.3f}")
        print(f"{label} idle RSS (MiB, median): {statistics.median(rsses):.1f}")
        for what in floors[i][0] if floors[i] else ():
            print(f"{label} floor {what} (s, median): {statistics.median(f[what] for f in floors[i]):.3f}")
    if len(roots) == 2:
        base = statistics.median(r for r, _ in results[0])
        print(f"start-up ratio {roots[1]} / {roots[0]}: {statistics.median(r for r, _ in results[1]) / base:.3f}")


if __name__ == "__main__":
    main()
