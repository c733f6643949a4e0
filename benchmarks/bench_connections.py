"""Idle connections and pending TLS handshakes against ``mledger standalone`` (issue 31, items 2-3).

    python benchmarks/bench_connections.py [--before OLD/src] [--repeats 3] [--messages 1000]
                                           [--nofile 1024] [--idle 1100] [--handshakes 3000]

Each case starts ``mledger standalone --memory`` with a TLS port (a self-signed certificate made
here) under ``RLIMIT_NOFILE`` = ``--nofile`` (soft and hard: the issue's 1,024), connects a
victim (the official client, one producer, sends without batching, each waited for) and then
starts the case's attackers, separate processes that each hold ``--idle`` connections (1,100: a
few more than the descriptors) that never send a byte and open a new one whenever the server
closes one:

* ``baseline``: no attacker;
* ``idle-1`` / ``idle-4``: one or four attackers on the protocol port;
* ``tls-1`` / ``tls-4``: one or four attackers on the TLS port (each connection a pending
  handshake: no ClientHello ever comes).

Once the attackers made their connections (or filled the server's backlog), the broker's CPU
over ``--settle`` seconds is measured (its threads' run time as a share of one core: what the
attack alone costs it), then one admin REST call is timed and the victim sends ``--messages``
messages; the table shows the victim's produce p50 and p99 (ms), the CPU and the REST call
(``GET /admin/v2/clusters``; -1 when it failed). Then ``memory``: one attacker opens
``--handshakes`` connections to the TLS port of a broker with 8,192 descriptors, and the figure
is the broker's peak RSS over ``--settle`` + 4 seconds minus its RSS before (MB).

``--before SRC`` runs every case against another source tree too (a ``src`` holding
``mledger/``, e.g. ``git archive`` of main before the change), alternating with the current one
in one run; the table then shows both and the ratio. Medians of ``--repeats`` runs. The machine
is shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pulsar
from bench_protocol import self_signed

CASES = {"baseline": (None, 0), "idle-1": ("protocol", 1), "idle-4": ("protocol", 4), "tls-1": ("tls", 1)}
CASES["tls-4"] = ("tls", 4)
LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


# -- the attacker (a process of its own: ``--attack PORT COUNT SECONDS``) ---------------------------


def attack(port: int, count: int, seconds: float) -> None:
    """Hold ``count`` connections to ``port`` that never send a byte for ``seconds``; reopen each
    one the server closes. A connect that does not complete within 0.2 s (the server's backlog
    is full) is tried again later."""
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (count + 256, max(count + 256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    )
    selector = selectors.DefaultSelector()
    deadline = time.monotonic() + seconds
    held = 0
    ready = False
    while time.monotonic() < deadline:
        while held < count and time.monotonic() < deadline:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=0.2)
            except OSError:
                break
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            held += 1
        if not ready:  # every connection made, or the backlog is full
            print(f"ready {held}", flush=True)
            ready = True
        for key, _ in selector.select(timeout=0.2):
            selector.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            held -= 1


# -- the broker ------------------------------------------------------------------------------------


@dataclass
class Broker:
    proc: subprocess.Popen[str]
    urls: dict[str, str]

    def port(self, which: str) -> int:
        return int(self.urls["service_url_tls" if which == "tls" else "service_url"].rsplit(":", 1)[1])

    def cpu(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return t.user + t.system

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 1e6

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(src: Path | None, folder: Path, nofile: int) -> Broker:
    cert, key = self_signed(folder)
    env = dict(os.environ, PYTHONPATH=str(src.resolve())) if src is not None else None
    cmd = [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--bind", "127.0.0.1:0"]
    cmd += ["--admin-bind", "127.0.0.1:0", "--tls-port", "0", "--tls-cert-file", str(cert), "--tls-key-file", str(key)]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, preexec_fn=limit
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the broker exited with {proc.wait()}")
    return Broker(proc, json.loads(line))


def attackers(port: int, n: int, count: int, seconds: float) -> list[subprocess.Popen[str]]:
    """``n`` attacker processes, returned once each has made its connections (or filled the
    server's backlog)."""
    cmd = [sys.executable, __file__, "--attack", str(port), str(count), str(seconds)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready"), "an attacker failed"
    return procs


def end(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait()


# -- one case --------------------------------------------------------------------------------------


def rest_call(broker: Broker) -> float:
    """ms of one ``GET /admin/v2/clusters``; -1 when it failed (within 10 s)."""
    began = time.perf_counter()
    try:
        ok = httpx.get(f"{broker.urls['admin_url']}/admin/v2/clusters", timeout=10).status_code == 200
    except httpx.HTTPError:
        ok = False
    return (time.perf_counter() - began) * 1000 if ok else -1.0


def run_case(case: str, src: Path | None, args: argparse.Namespace) -> dict[str, float]:
    target, n = CASES[case]
    with tempfile.TemporaryDirectory(prefix="bench-conn-") as folder:
        broker = start(src, Path(folder), args.nofile)
        procs: list[subprocess.Popen[str]] = []
        try:
            client = pulsar.Client(broker.urls["service_url"], operation_timeout_seconds=60, logger=LOG)
            producer = client.create_producer("persistent://public/default/victim", batching_enabled=False)
            for _ in range(100):  # warm-up
                producer.send(b"x" * 100)
            if target is not None:
                procs = attackers(broker.port(target), n, args.idle, args.settle + 60)
            cpu0 = broker.cpu()
            time.sleep(args.settle)
            cpu = (broker.cpu() - cpu0) / args.settle
            rest_ms = rest_call(broker)
            latencies = []
            for _ in range(args.messages):
                sent = time.perf_counter()
                producer.send(b"x" * 100)
                latencies.append((time.perf_counter() - sent) * 1000)
            client.close()
        finally:
            end(procs)
            broker.stop()
    latencies.sort()
    return {
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
        "cpu": cpu * 100,
        "rest": rest_ms,
    }


def run_memory(src: Path | None, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-conn-") as folder:
        broker = start(src, Path(folder), 8192)
        procs: list[subprocess.Popen[str]] = []
        try:
            time.sleep(1)
            before = broker.rss_mb()
            procs = attackers(broker.port("tls"), 1, args.handshakes, args.settle + 60)
            peak = before
            deadline = time.monotonic() + args.settle + 4
            while time.monotonic() < deadline:
                peak = max(peak, broker.rss_mb())
                time.sleep(0.1)
        finally:
            end(procs)
            broker.stop()
    return peak - before


# -- main ------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a source tree (src holding mledger/) to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--nofile", type=int, default=1024, help="the broker's RLIMIT_NOFILE (soft and hard)")
    parser.add_argument("--idle", type=int, default=1100, help="connections each attacker holds (more than --nofile)")
    parser.add_argument("--handshakes", type=int, default=3000, help="pending handshakes of the memory figure")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between the attack's start and measuring")
    parser.add_argument("--cases", default=",".join([*CASES, "memory"]))
    parser.add_argument("--attack", nargs=3, metavar=("PORT", "COUNT", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        attack(int(args.attack[0]), int(args.attack[1]), float(args.attack[2]))
        return 0
    sides: list[tuple[str, Path | None]] = [("after", None)]
    if args.before is not None:
        sides.append(("before", args.before))
    cases = args.cases.split(",")
    results: dict[tuple[str, str, str], list[float]] = {}
    for i in range(args.repeats):
        order = sides if i % 2 == 0 else sides[::-1]
        for case in cases:
            for side, src in order:
                if case == "memory":
                    figures = {"rss_mb": run_memory(src, args)}
                else:
                    figures = run_case(case, src, args)
                for name, value in figures.items():
                    results.setdefault((case, name, side), []).append(value)
                print(f"run {i + 1}/{args.repeats} {case} {side}: {figures}", file=sys.stderr, flush=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# mledger standalone under RLIMIT_NOFILE={args.nofile}; attackers hold {args.idle} connections each;")
    print(f"# medians of {args.repeats} runs, sides alternating; load average {load} on {os.cpu_count()} cores")
    header = f"{'figure':<32} {'after':>10}"
    if args.before is not None:
        header += f" {'before':>10} {'after/before':>12}"
    print(header)
    for case in cases:
        for name in ("rss_mb",) if case == "memory" else ("p50", "p99", "cpu", "rest"):
            after = statistics.median(results[(case, name, "after")])
            line = f"{case + ' ' + name + ':':<32} {after:>10.2f}"
            if args.before is not None:
                before = statistics.median(results[(case, name, "before")])
                line += f" {before:>10.2f} {after / before if before > 0 else float('nan'):>12.3f}"
            print(line)
    print(
        "# p50/p99: the victim's produce latency (ms); cpu: the broker's under attack, % of one core; rest: one admin"
    )
    print("# call during the attack (ms, -1: failed); memory rss_mb: peak RSS growth with the pending handshakes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
