"""REST server benchmark: the old hand-written server (from the git history) against the FastAPI +
uvicorn one, side by side in one run, alternating; and the /metrics scrape time.

1. Throughput: one fixed load script, ``--clients`` (16) concurrent clients with keep-alive
   connections where the server allows it (the old server is HTTP/1.0: a connection per
   request). Each client repeats: GET internalStats, PUT a subscription, POST skipByMessageIds,
   GET internalStats, DELETE that subscription (so the state stays the same size), POST
   skipByMessageIds, GET /metrics. ``--duration`` seconds per run after a warm-up, old and new
   alternating, ``--repeat`` times; prints requests/s and p99 latency per run, the medians and
   the ratio. Target: new >= 3x old.
2. Soak: ``--soak-clients`` (50) clients for ``--soak`` seconds (60) against each server; counts
   every error (connection reset, timeout, a status that is not 2xx). Target: none for the new.
3. Scrape time: GET /metrics on a store with ``--subscriptions`` (1,000) subscriptions with ack
   holes (10 topics); median of 10 scrapes, each server, and the server's CPU time per scrape.
   Target (new): < 100 ms.
4. CPU accounting: the server process's CPU time (user + system, all its threads, ``psutil``)
   per request, by route (``--cpu-requests`` requests of one route from 4 keep-alive clients,
   old and new alternating, ``--repeat`` times, medians); the throughput runs print the CPU per
   request of the mix too. CPU time is steadier than wall time on a shared machine. The load
   generator's CPU per request (its worker processes, ``getrusage``) is printed as well: on a
   small machine it shares the cores with the server, so requests/s is bounded by the server's
   and the client's CPU together. The scrape section also splits the new server's scrape (in
   this process, CPU time) into collecting the figures and prometheus_client's text writer.

The old server is not in ``src/`` any more: the script extracts ``src/`` of the last commit
before the change (``--old-ref``, default: the parent of the commit that replaced the
hand-written ``src/mledger/metrics.py``, the first of the series; it has the http.server server,
the urllib client and the hand-written exposition) with ``git archive`` into a temporary
directory and runs its ``mledger-admin serve`` from there (``PYTHONPATH``). Both servers run as subprocesses over a
fresh copy of the same data directory, on tmpfs (``/dev/shm``) when there is one, so that disk
syncs weigh the same (nothing) for both and the figures compare the HTTP servers. The load
generator runs in ``--workers`` processes of threads with ``http.client`` (the lightest client
the standard library has), on the same machine.

Usage: ``python benchmarks/bench_rest.py [--duration S] [--repeat N] [--quick]``
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
V2 = "/admin/v2/persistent/public/default"
TOPIC = "persistent://public/default/orders"
FIXED_SUBSCRIPTIONS = 2


# -- the load generator (runs in worker processes) ---------------------------------------------


def _client(port: int, index: int, skip_body: bytes, deadline: float, warmup_until: float,
            out: list[float], errors: list[str], answered: list[int]) -> None:
    sub = f"bench-{os.getpid()}-{index}"
    script: list[tuple[str, str, bytes | None]] = [
        ("GET", f"{V2}/orders/internalStats", None),
        ("PUT", f"{V2}/orders/subscription/{sub}?subscriptionType=Shared", b""),
        ("POST", f"{V2}/orders/subscription/shared/skipByMessageIds", skip_body),
        ("GET", f"{V2}/orders/internalStats", None),
        ("DELETE", f"{V2}/orders/subscription/{sub}", None),
        ("POST", f"{V2}/orders/subscription/shared/skipByMessageIds", skip_body),
        ("GET", "/metrics", None),
    ]
    conn: http.client.HTTPConnection | None = None
    step = 0
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        method, path, body = script[step % len(script)]
        step += 1
        started = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            answered[0] += 1
            if not 200 <= response.status < 300:
                errors.append(f"{method} {path}: HTTP {response.status}")
            if response.will_close:
                conn.close()
                conn = None
        except Exception as e:  # noqa: BLE001 - every failure is an error of the run
            errors.append(f"{method} {path}: {e!r}")
            if conn is not None:
                conn.close()
            conn = None
            if method == "PUT":
                step += 3  # skip to the next creation: the subscription may not exist
        if now >= warmup_until:
            out.append(time.perf_counter() - started)
    if conn is not None:
        conn.close()


def worker_main(port: int, threads: int, first: int, duration: float, warmup: float, skip_body: str) -> None:
    """Run ``threads`` clients; print one JSON object with latencies and errors."""
    start = time.monotonic()
    latencies: list[list[float]] = [[] for _ in range(threads)]
    answered = [[0] for _ in range(threads)]
    errors: list[str] = []
    pool = [threading.Thread(target=_client, args=(port, first + i, skip_body.encode(), start + warmup + duration,
                                                   start + warmup, latencies[i], errors, answered[i]))
            for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    print(json.dumps({"latencies": [x for lat in latencies for x in lat], "errors": errors,
                      "answered": sum(a[0] for a in answered)}))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def run_load(port: int, clients: int, workers: int, duration: float, warmup: float, skip_body: str,
             server_pid: int | None = None) -> dict[str, Any]:
    per = [clients // workers + (1 if i < clients % workers else 0) for i in range(workers)]
    cpu_from = cpu_seconds(server_pid) if server_pid is not None else 0.0
    client_from = _children_cpu()
    procs = []
    first = 0
    for count in per:
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(port), str(count), str(first), str(duration), str(warmup),
             skip_body], stdout=subprocess.PIPE, text=True))
        first += count
    latencies: list[float] = []
    errors: list[str] = []
    answered = 0  # warm-up included: the CPU is measured over the whole run
    for proc in procs:
        out, _ = proc.communicate(timeout=duration + warmup + 120)
        result = json.loads(out)
        latencies += result["latencies"]
        errors += result["errors"]
        answered += result["answered"]
    cpu_to = cpu_seconds(server_pid) if server_pid is not None else 0.0
    client_ms = 1000 * (_children_cpu() - client_from) / answered if answered else float("nan")
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else float("nan")
    cpu_ms = 1000 * (cpu_to - cpu_from) / answered if answered and server_pid is not None else float("nan")
    return {"rps": len(latencies) / duration, "p99_ms": p99 * 1000, "requests": len(latencies), "errors": errors,
            "cpu_ms": cpu_ms, "client_ms": client_ms}


def _children_cpu() -> float:
    """User + system CPU time of the waited-for child processes: the load generator's workers
    (a server is waited for only when stopped, after its run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- the servers -------------------------------------------------------------------------------


def old_source(ref: str | None, into: Path) -> tuple[str, Path]:
    """``src/`` of the old server's commit, extracted under ``into``; (commit, src path)."""
    if ref is None:
        deleted = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%H", "--diff-filter=D", "--",
                                  "src/mledger/metrics.py"], capture_output=True, text=True, check=True).stdout.strip()
        if not deleted:
            raise SystemExit("no commit deleting src/mledger/metrics.py: give --old-ref")
        ref = f"{deleted}^"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit, into / "src"


_SERVE_MAIN = """import sys
try:
    from mledger.cli._admin import main
except ImportError:
    from mledger.admin.cli import main
sys.exit(main())"""


class Server:
    """``mledger-admin serve`` as a subprocess, from ``src`` (old) or the installed package (new)."""

    def __init__(self, name: str, data_dir: Path, src: Path | None) -> None:
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = str(src)
        # mledger-admin's main: mledger.cli._admin now, mledger.admin.cli in the old tree
        command = [sys.executable, "-c", _SERVE_MAIN, "serve", "--data-dir", str(data_dir), "--bind", "127.0.0.1:0"]
        self.name = name
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     cwd=str(src.parent) if src is not None else None)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "serving http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"{name} server did not start: {line!r}")
        url = line.split("serving ", 1)[1].split()[0]
        self.port = int(url.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- data ------------------------------------------------------------------------------------


def prepare_data(path: Path, subscriptions_per_topic: int, topics: int, holes: bool) -> str:
    """A data directory: ``orders`` (load) or ``topics`` x ``subscriptions_per_topic`` (scrape).
    Returns the JSON body the load's skipByMessageIds posts."""
    from mledger import ManagedLedgerFactory, SqliteStore
    from mledger.broker import Broker, InitialPosition, SubscriptionType

    factory = ManagedLedgerFactory(SqliteStore(str(path), synchronous="OFF"))
    broker = Broker(factory)
    try:
        body = ""
        for t in range(topics):
            topic = TOPIC if t == 0 else f"{TOPIC}-{t}"
            broker.create_topic(topic)
            producer = broker.create_producer(topic)
            ids = [producer.send(f"m{i}".encode()) for i in range(200)]
            producer.close()
            body = json.dumps([ids[5].to_base64(), ids[7].to_base64()])
            names = ["shared"] + [f"s{i}" for i in range(1, subscriptions_per_topic)]
            for name in names:
                sub = broker.subscribe(topic, name, SubscriptionType.SHARED, InitialPosition.EARLIEST)
                if holes:
                    for mid in ids[1::3]:
                        sub.cursor.delete(mid.position)
    finally:
        broker.close()
        factory.close()
    return body


def copy_data(template: Path, root: Path, name: str) -> Path:
    target = root / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(template, target)
    return target


def scrape_split(data_dir: Path, count: int) -> tuple[float, float]:
    """CPU ms of the new scrape in this process: (collecting the figures, collecting and writing
    the text with ``generate_latest``), medians of ``count``."""
    from prometheus_client import generate_latest

    from mledger import ManagedLedgerFactory, SqliteStore
    from mledger.broker import Broker
    from mledger.metrics import metrics_registry

    factory = ManagedLedgerFactory(SqliteStore(str(data_dir)))
    broker = Broker(factory)
    try:
        registry = metrics_registry(broker, "standalone")
        generate_latest(registry)  # opens every topic
        collect, total = [], []
        for _ in range(count):
            started = time.process_time()
            list(registry.collect())
            collect.append(time.process_time() - started)
            started = time.process_time()
            generate_latest(registry)
            total.append(time.process_time() - started)
    finally:
        broker.close()
        factory.close()
    return statistics.median(collect) * 1000, statistics.median(total) * 1000


def scrape_times(port: int, count: int) -> list[float]:
    times = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for _ in range(count + 1):
        started = time.perf_counter()
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        times.append(time.perf_counter() - started)
        if response.will_close:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.close()
    return times[1:]  # the first scrape opens every topic


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        port, threads, first, duration, warmup, body = sys.argv[2:8]
        worker_main(int(port), int(threads), int(first), float(duration), float(warmup), body)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="load generator processes")
    parser.add_argument("--soak", type=float, default=60.0, help="seconds of the 50-client run (0: skip)")
    parser.add_argument("--soak-clients", type=int, default=50)
    parser.add_argument("--subscriptions", type=int, default=1000, help="for the scrape time (0: skip)")
    parser.add_argument("--cpu-requests", type=int, default=2000, help="per route, for the CPU accounting (0: skip)")
    parser.add_argument("--old-ref", default=None, help="commit of the old server (default: see the docstring)")
    parser.add_argument("--data-root", default=None, help="where data directories go (default: /dev/shm if any)")
    parser.add_argument("--quick", action="store_true", help="short runs, to try the script")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.repeat, args.soak, args.subscriptions, args.cpu_requests = 3.0, 1, 5.0, 100, 200

    base = args.data_root or ("/dev/shm" if Path("/dev/shm").is_dir() else None)
    with tempfile.TemporaryDirectory(prefix="bench-rest-", dir=base) as tmp:
        root = Path(tmp)
        (root / "old").mkdir()
        commit, old_src = old_source(args.old_ref, root / "old")
        print(f"python {platform.python_version()}, {os.cpu_count()} cores, data on {root}; "
              f"old server: {commit[:12]} (git archive), new: {REPO / 'src'}; {_load()}")
        template = root / "template"
        skip_body = prepare_data(template, FIXED_SUBSCRIPTIONS, 1, holes=False)
        sources = {"old": old_src, "new": None}

        def one_run(name: str, clients: int, duration: float) -> dict[str, Any]:
            server = Server(name, copy_data(template, root, f"data-{name}"), sources[name])
            try:
                return run_load(server.port, clients, args.workers, duration, args.warmup, skip_body, server.proc.pid)
            finally:
                server.stop()

        results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
        print(f"\n1. throughput, {args.clients} clients, {args.duration:g} s per run, alternating, "
              f"{args.repeat} repeats (server CPU: ms of CPU time per request answered)")
        for r in range(args.repeat):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                result = one_run(name, args.clients, args.duration)
                results[name].append(result)
                print(f"   run {r + 1} {name}: {result['rps']:8.0f} req/s  p99 {result['p99_ms']:7.1f} ms  "
                      f"server CPU {result['cpu_ms']:.3f} ms/req  client CPU {result['client_ms']:.3f} ms/req  "
                      f"errors {len(result['errors'])}  {_load()}")
        med = {n: {key: statistics.median(x[key] for x in rs) for key in ("rps", "p99_ms", "cpu_ms", "client_ms")}
               for n, rs in results.items()}
        for name in ("old", "new"):
            print(f"   median {name}: {med[name]['rps']:.0f} req/s, p99 {med[name]['p99_ms']:.1f} ms, "
                  f"server CPU {med[name]['cpu_ms']:.3f} ms/req, client CPU {med[name]['client_ms']:.3f} ms/req")
        print(f"   ratio new/old: {med['new']['rps'] / med['old']['rps']:.2f}x requests/s (target >= 3x), "
              f"p99 {med['old']['p99_ms'] / med['new']['p99_ms']:.1f}x lower, "
              f"{med['old']['cpu_ms'] / med['new']['cpu_ms']:.2f}x less CPU per request")

        if args.soak > 0:
            print(f"\n2. soak: {args.soak_clients} clients for {args.soak:g} s")
            for name in ("new", "old"):
                result = one_run(name, args.soak_clients, args.soak)
                kinds: dict[str, int] = {}
                for error in result["errors"]:
                    kind = error.split(": ", 1)[1][:60]
                    kinds[kind] = kinds.get(kind, 0) + 1
                print(f"   {name}: {result['requests']} requests, {result['rps']:.0f} req/s, p99 "
                      f"{result['p99_ms']:.1f} ms, server CPU {result['cpu_ms']:.3f} ms/req, "
                      f"client CPU {result['client_ms']:.3f} ms/req, "
                      f"errors {len(result['errors'])} {dict(list(kinds.items())[:4])}  {_load()}")

        if args.subscriptions > 0:
            per_topic = max(1, args.subscriptions // 10)
            print(f"\n3. /metrics scrape time, {per_topic * 10} subscriptions (10 topics) with ack holes, "
                  f"10 scrapes per server, alternating, {args.repeat} repeats")
            scrape_template = root / "scrape"
            prepare_data(scrape_template, per_topic, 10, holes=True)
            scrapes: dict[str, list[float]] = {"old": [], "new": []}
            scrape_cpu: dict[str, list[float]] = {"old": [], "new": []}
            for r in range(args.repeat):
                for name in (("new", "old") if r % 2 == 0 else ("old", "new")):
                    server = Server(name, copy_data(scrape_template, root, f"scrape-{name}"), sources[name])
                    try:
                        scrape_times(server.port, 1)  # the first scrape opens every topic
                        cpu_from = cpu_seconds(server.proc.pid)
                        times = scrape_times(server.port, 10)
                        scrape_cpu[name].append((cpu_seconds(server.proc.pid) - cpu_from) / 11)
                    finally:
                        server.stop()
                    scrapes[name] += times
                    print(f"   run {r + 1} {name}: median {statistics.median(times) * 1000:.1f} ms, "
                          f"server CPU {scrape_cpu[name][-1] * 1000:.1f} ms/scrape  {_load()}")
            for name in ("new", "old"):
                print(f"   {name}: median {statistics.median(scrapes[name]) * 1000:.1f} ms, "
                      f"min {min(scrapes[name]) * 1000:.1f} ms, server CPU {statistics.median(scrape_cpu[name]) * 1000:.1f}"
                      " ms/scrape" + ("  (target < 100 ms)" if name == "new" else ""))
            collect_ms, total_ms = scrape_split(copy_data(scrape_template, root, "scrape-split"), 5)
            print(f"   new, in this process (CPU, median of 5): collecting the figures {collect_ms:.1f} ms, "
                  f"prometheus_client's text writer {total_ms - collect_ms:.1f} ms, {total_ms:.1f} ms in all")

        if args.cpu_requests > 0:
            print(f"\n4. server CPU per request by route ({FIXED_SUBSCRIPTIONS} subscriptions), "
                  f"{args.cpu_requests} requests from 4 keep-alive clients, alternating, {args.repeat} repeats")
            by_route: dict[str, dict[str, list[float]]] = {}
            for r in range(args.repeat):
                for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    server = Server(name, copy_data(template, root, f"cpu-{name}"), sources[name])
                    try:
                        for route, cost in route_costs(server, args.cpu_requests, skip_body.encode()).items():
                            by_route.setdefault(route, {"old": [], "new": []})[name].append(cost)
                    finally:
                        server.stop()
            for route, costs in by_route.items():
                old_ms, new_ms = (statistics.median(costs[n]) * 1000 for n in ("old", "new"))
                print(f"   {route:30s} old {old_ms:6.3f} ms  new {new_ms:6.3f} ms  ({old_ms / new_ms:.2f}x)")
            print(f"   {_load()}")


def _load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def route_costs(server: Server, requests: int, skip_body: bytes) -> dict[str, float]:
    """CPU seconds of the server process per request, for each route alone."""
    def subscription(i: int, k: int) -> list[tuple[str, str, bytes | None]]:
        path = f"{V2}/orders/subscription/cpu-{i}-{k}"
        return [("PUT", path + "?subscriptionType=Shared", b""), ("DELETE", path, None)]

    routes: dict[str, Any] = {
        "GET internalStats": lambda i, k: [("GET", f"{V2}/orders/internalStats", None)],
        "PUT + DELETE subscription": subscription,
        "POST skipByMessageIds": lambda i, k: [
            ("POST", f"{V2}/orders/subscription/shared/skipByMessageIds", skip_body)],
        "GET /metrics": lambda i, k: [("GET", "/metrics", None)],
        "GET unknown path (404)": lambda i, k: [("GET", "/nothing/here", None)],
    }
    _drive(server.port, routes["GET internalStats"], 100, 4)  # warm up
    costs = {}
    for route, script in routes.items():
        before = cpu_seconds(server.proc.pid)
        answered = _drive(server.port, script, requests, 4)
        costs[route] = (cpu_seconds(server.proc.pid) - before) / answered
    return costs


def _drive(port: int, script: Any, requests: int, clients: int) -> int:
    """``requests`` rounds of ``script(client, round)`` split over ``clients`` threads; returns
    the requests answered. Keep-alive where the server allows it."""
    answered = [0] * clients

    def client(index: int) -> None:
        conn: http.client.HTTPConnection | None = None
        for k in range(requests // clients):
            for method, path, body in script(index, k):
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                headers = {"Content-Type": "application/json"} if body else {}
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                answered[index] += 1
                if response.will_close:
                    conn.close()
                    conn = None
        if conn is not None:
            conn.close()

    pool = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(answered)

if __name__ == "__main__":
    main()
