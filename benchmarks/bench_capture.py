"""One ``mledger capture`` poll at cluster scale, before and after a change, in one run (issues 25 and 35).

    python benchmarks/bench_capture.py --before OLD/src [--sizes 100x10,1000x10] [--messages 20]
        [--polls 5] [--repeats 3] [--concurrency 8]
    python benchmarks/bench_capture.py --routes [--calls 1500] [--repeats 6]

``OLD/src`` is a source tree holding ``mledger/`` (a ``git worktree`` of the commit before the
change: ``git worktree add /tmp/before <commit>``); without ``--before`` only this tree runs.
For each size ``TxS``, ``mledger standalone --memory`` runs in its own process with ``T``
topics of ``S`` durable subscriptions each (Exclusive, their consumers closed) and
``--messages`` messages, of which each subscription acked every other one (so that every
cursor has individually deleted ranges). Then, ``--repeats`` times, alternating which goes
first, each tree's :class:`mledger.replay.Capture` of the ``T`` topics runs in a fresh process
(``PYTHONPATH`` set to the tree) against the same server and times its polls:

* the first poll (readers opened, every entry read, every subscription ``created``);
* after ``--warmup`` more, ``--polls`` polls with nothing changed (the steady state of a
  capture), one by one (the topics are listed again every 10 s, in the poll under way then:
  the median is a poll's cost, the mean includes those listings);
* ``--polls`` polls after a change: before each, one message is produced to every tenth topic
  and every subscription of those topics acks one more message.

The server is this tree's, for both captures: the comparison is of the captures. ``--routes``
compares the server's side instead: one ``mledger standalone`` of this tree with 20 topics x 10
subscriptions, and the server's CPU per ``internalStats`` GET (``--calls`` of them, 4 at a time,
``--repeats`` times alternating) through the route a poll uses (the v2 path, a plain Starlette
route) and through the documented FastAPI route (the same call on the v1 path).

Each poll: wall time, CPU seconds of the capture's process (its threads included: the pulsar
client's too) and of the server's, and their sum (less sensitive to the machine's load than
the wall time), medians; the capture's RSS at the end. The figures printed
are the medians over the repeats, and the ratio before/after. The machine is shared: the load
average is printed beside them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pulsar

PREFIX = "persistent://public/default/capture-bench-"
SIDES = ("before", "after")


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _start() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--bind", "127.0.0.1:0",
         "--admin-bind", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"mledger standalone exited with {proc.wait(30)}")
    return proc, json.loads(line)


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=120, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def _populate(url: str, topics: list[str], subscriptions: int, messages: int) -> None:
    """Subscriptions first (they start at the end), then messages; each subscription acks
    every other message; then every consumer is closed."""
    client = _client(url)
    try:
        consumers = [client.subscribe(t, f"sub-{j}") for t in topics for j in range(subscriptions)]
        for t in topics:
            producer = client.create_producer(t, batching_enabled=False)
            for i in range(messages):
                producer.send_async(f"m{i}".encode(), None)
            producer.flush()
            producer.close()
        for consumer in consumers:
            for i in range(messages):
                msg = consumer.receive(60_000)
                if i % 2 == 1:
                    consumer.acknowledge(msg)
        for consumer in consumers:
            consumer.close()
    finally:
        client.close()


# -- the child: one tree's capture --------------------------------------------------------------
class _Timer:
    """Wall, own CPU and server CPU seconds of one call."""

    def __init__(self, server: psutil.Process) -> None:
        self.server = server

    def _server_cpu(self) -> float:
        t = self.server.cpu_times()
        return t.user + t.system

    def time(self, work: Callable[[], Any]) -> list[float]:
        s0, c0, w0 = self._server_cpu(), time.process_time(), time.perf_counter()
        work()
        return [time.perf_counter() - w0, time.process_time() - c0, self._server_cpu() - s0]


def _child(args: argparse.Namespace) -> None:
    """Time one tree's capture (the tree on ``PYTHONPATH``); print its figures as one JSON line."""
    from mledger.admin import RemoteAdmin
    from mledger.replay import Capture, CaptureSettings

    topics = [f"{PREFIX}{i}" for i in range(args.topics)]
    options: dict[str, Any] = {"topics": tuple(topics), "interval_s": 3600}
    if "concurrency" in {f.name for f in dataclasses.fields(CaptureSettings)}:  # the new engine
        options["concurrency"] = args.concurrency
    client = _client(args.service_url)
    admin = RemoteAdmin(args.admin_url)
    timer = _Timer(psutil.Process(args.server_pid))
    figures: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-capture-") as out:
            capture = Capture(Path(out) / "cap", client, admin, CaptureSettings(**options))
            try:
                figures["first"] = timer.time(capture.poll)
                for _ in range(args.warmup):
                    capture.poll()
                figures["steady"] = [timer.time(capture.poll) for _ in range(args.polls)]
                changed = topics[::10]
                producers = [client.create_producer(t, batching_enabled=False) for t in changed]
                consumers = [client.subscribe(t, f"sub-{j}") for t in changed for j in range(args.subscriptions)]
                figures["changed"] = []
                for _ in range(args.polls):
                    for producer in producers:
                        producer.send(b"more")
                    for consumer in consumers:
                        consumer.acknowledge(consumer.receive(60_000))
                    figures["changed"].append(timer.time(capture.poll))
                for c in (*producers, *consumers):
                    c.close()
                figures["rss_mb"] = psutil.Process().memory_info().rss / 2**20
                figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            finally:
                capture.close()
    finally:
        client.close()
        admin.close()
    print(json.dumps(figures), flush=True)


# -- the server's two internalStats routes -------------------------------------------------------
def _routes(args: argparse.Namespace) -> None:
    import asyncio

    import httpx

    proc, urls = _start()
    try:
        _populate(urls["service_url"], [f"{PREFIX}{i}" for i in range(20)], 10, args.messages)
        paths = {
            "poll route (v2)": [
                f"/admin/v2/persistent/public/default/capture-bench-{i}/internalStats" for i in range(20)
            ],
            "documented route (v1)": [
                f"/admin/persistent/public/standalone/default/capture-bench-{i}/internalStats" for i in range(20)
            ],
        }
        timer = _Timer(psutil.Process(proc.pid))

        async def calls(route: list[str], n: int) -> None:
            async with httpx.AsyncClient(base_url=urls["admin_url"]) as client:
                slots = asyncio.Semaphore(4)

                async def one(path: str) -> None:
                    async with slots:
                        (await client.get(path)).raise_for_status()

                await asyncio.gather(*(one(route[i % len(route)]) for i in range(n)))

        figures: dict[str, list[float]] = {name: [] for name in paths}
        for route in paths.values():
            asyncio.run(calls(route, 200))  # warm up
        for r in range(args.repeats):
            for name in list(paths) if r % 2 == 0 else list(paths)[::-1]:
                cost = timer.time(functools.partial(asyncio.run, calls(paths[name], args.calls)))[2]
                figures[name].append(cost / args.calls * 1e6)
        for name, values in figures.items():
            print(f"{name:24} server CPU per internalStats GET: median {statistics.median(values):,.0f} us "
                  f"({', '.join(f'{v:,.0f}' for v in values)})")  # fmt: skip
        poll, documented = (statistics.median(v) for v in figures.values())
        print(f"poll route / documented route: {poll / documented:.2f}; {_load()}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


# -- the parent: both trees, alternating -------------------------------------------------------
def _run_child(src: Path, urls: dict[str, str], server_pid: int, args: argparse.Namespace, topics: int,
               subscriptions: int) -> dict[str, Any]:  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    cmd = [sys.executable, __file__, "--child", "--service-url", urls["service_url"], "--admin-url",
           urls["admin_url"], "--server-pid", str(server_pid), "--topics", str(topics), "--subscriptions",
           str(subscriptions), "--polls", str(args.polls), "--warmup", str(args.warmup), "--concurrency",
           str(args.concurrency)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the capture of {src} failed:\n{out.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _median(runs: list[dict[str, Any]], key: str, index: int, of_run: Callable[..., float] = statistics.median) -> float:
    """The median over the runs of each run's median poll (``of_run``: its mean), a single
    figure for ``first``."""
    values = []
    for run in runs:
        polls = run[key] if key != "first" else [run[key]]
        values.append(of_run([p[1] + p[2] if index == 3 else p[index] for p in polls]))  # 3: both CPUs
    return statistics.median(values)


def _report(results: dict[str, list[dict[str, Any]]], subs: int) -> None:
    sides = [s for s in SIDES if results[s]]
    head = "".join(f"{s:>16}" for s in sides) + ("    before/after" if len(sides) == 2 else "")
    print(f"{'':44}{head}")
    rows = [("first poll", "first"), ("poll, nothing changed", "steady"), ("poll, 1 in 10 topics changed", "changed")]
    figures = (("wall", 0, "ms", 1e3, statistics.median), ("wall, mean", 0, "ms", 1e3, statistics.fmean),
               ("capture CPU per subscription", 1, "us", 1e6, statistics.median),
               ("server CPU", 2, "ms", 1e3, statistics.median),
               ("CPU, capture + server", 3, "ms", 1e3, statistics.median))  # fmt: skip
    for title, key in rows:
        for what, index, unit, scale, of_run in (figures[0], *figures[2:]) if key == "first" else figures:
            values = [_median(results[s], key, index, of_run) * (scale / subs if index == 1 else scale) for s in sides]
            line = "".join(f"{v:>13,.1f} {unit}" for v in values)
            ratio = f"{values[0] / values[1]:>15.2f}x" if len(values) == 2 and values[1] else ""
            print(f"{title + ': ' + what:44}{line}{ratio}")
    for what, key in (("capture RSS at the end", "rss_mb"), ("capture peak RSS", "peak_rss_mb")):
        values = [statistics.median(r[key] for r in results[s]) for s in sides]
        print(f"{what:44}" + "".join(f"{v:>12,.0f} MiB" for v in values))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, help="src directory of the tree before the change")
    p.add_argument("--sizes", default="100x10,1000x10", help="topics x subscriptions, comma-separated")
    p.add_argument("--messages", type=int, default=20, help="per topic")
    p.add_argument("--polls", type=int, default=5, help="timed polls of each kind per run")
    p.add_argument("--warmup", type=int, default=2, help="polls after the first, before the timed ones")
    p.add_argument("--repeats", type=int, default=3, help="runs per tree and size, alternating")
    p.add_argument("--concurrency", type=int, default=4, help="the new engine's concurrency")
    p.add_argument("--routes", action="store_true", help="the server's two internalStats routes, A/B")
    p.add_argument("--calls", type=int, default=1500, help="--routes: GETs per measure")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--service-url", "--admin-url"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    for hidden in ("--server-pid", "--topics", "--subscriptions"):
        p.add_argument(hidden, type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return 0
    if args.routes:
        print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; {_load()}")
        _routes(args)
        return 0
    trees = {"after": Path(__file__).resolve().parent.parent / "src"}
    if args.before is not None:
        trees["before"] = args.before
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; {_load()}")
    print(f"trees: {', '.join(f'{side} {src}' for side, src in trees.items())}; concurrency {args.concurrency}")
    for size in args.sizes.split(","):
        topics, subscriptions = (int(x) for x in size.lower().split("x"))
        subs = topics * subscriptions
        proc, urls = _start()
        try:
            t0 = time.perf_counter()
            _populate(urls["service_url"], [f"{PREFIX}{i}" for i in range(topics)], subscriptions, args.messages)
            print(f"\n{topics:,} topics x {subscriptions} subscriptions = {subs:,} subscriptions, {args.messages} "
                  f"messages per topic, every other one acked: set up in {time.perf_counter() - t0:.1f} s")  # fmt: skip
            results: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
            for r in range(args.repeats):
                for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                    if side in trees:
                        results[side].append(_run_child(trees[side], urls, proc.pid, args, topics, subscriptions))
                        print(f"  run {r + 1}/{args.repeats} {side}: done; {_load()}", file=sys.stderr, flush=True)
            _report(results, subs)
            print(f"(medians of {args.repeats} runs per tree, each the median of {args.polls} polls; {_load()})")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
