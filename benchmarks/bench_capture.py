"""The cost of one ``mledger capture`` poll of ``internalStats`` for 1,000 subscriptions (issue 25).

    python benchmarks/bench_capture.py [--topics 100] [--subscriptions 10] [--messages 20] [--polls 7]

``mledger standalone --memory`` runs in its own process; here ``--topics`` topics get
``--subscriptions`` durable subscriptions each (Exclusive consumers, closed afterwards) and
``--messages`` messages, of which each subscription acks every other one (so that every
cursor has individually deleted ranges). A :class:`mledger.replay._capture.Capture` of the
topics then polls: the first poll (readers created, every entry read, every subscription
``created``) is shown apart; the next ``--polls`` polls (nothing changed: the steady state of a
capture) are timed one by one, wall time and CPU seconds of this process (the capture) and of
the server, medians. A poll with changes is timed too: before each of ``--polls`` more polls,
one more message is acked on every subscription of every tenth topic.

The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pulsar

from mledger.admin import RemoteAdmin
from mledger.replay import Capture, CaptureSettings


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


def _populate(
    client: pulsar.Client, topics: list[str], subscriptions: int, messages: int
) -> dict[str, list[pulsar.Consumer]]:
    """Subscriptions first (they start at the end), then messages; each subscription acks
    every other message. The consumers stay open (to ack more later)."""
    consumers = {t: [client.subscribe(t, f"sub-{j}") for j in range(subscriptions)] for t in topics}
    for t in topics:
        producer = client.create_producer(t, batching_enabled=False)
        for i in range(messages):
            producer.send(f"m{i}".encode())
        producer.close()
    for t in topics:
        for consumer in consumers[t]:
            for i in range(messages):
                msg = consumer.receive(30_000)
                if i % 2 == 1:
                    consumer.acknowledge(msg)
    return consumers


class _Timer:
    """Wall, own CPU and server CPU seconds of one call."""

    def __init__(self, server: psutil.Process) -> None:
        self.server = server
        self.samples: list[tuple[float, float, float]] = []

    def _server_cpu(self) -> float:
        t = self.server.cpu_times()
        return t.user + t.system

    def time(self, work: Callable[[], None]) -> tuple[float, float, float]:
        s0, c0, w0 = self._server_cpu(), time.process_time(), time.perf_counter()
        work()
        sample = (time.perf_counter() - w0, time.process_time() - c0, self._server_cpu() - s0)
        self.samples.append(sample)
        return sample

    def medians(self) -> tuple[float, float, float]:
        return tuple(statistics.median(s[i] for s in self.samples) for i in range(3))  # type: ignore[return-value]


def _line(what: str, wall: float, own: float, server: float, subs: int) -> str:
    return (f"{what:34s} wall {wall * 1000:9.1f} ms   capture CPU {own * 1000:8.1f} ms   "
            f"server CPU {server * 1000:8.1f} ms   ({wall / subs * 1e6:,.0f} us wall per subscription)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--subscriptions", type=int, default=10, help="per topic")
    p.add_argument("--messages", type=int, default=20, help="per topic")
    p.add_argument("--polls", type=int, default=7)
    args = p.parse_args()
    subs = args.topics * args.subscriptions
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; {_load()}")
    proc, urls = _start()
    client = pulsar.Client(urls["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    admin = RemoteAdmin(urls["admin_url"])
    try:
        topics = [f"persistent://public/default/capture-bench-{i}" for i in range(args.topics)]
        t0 = time.perf_counter()
        consumers = _populate(client, topics, args.subscriptions, args.messages)
        print(f"{args.topics} topics x {args.subscriptions} subscriptions = {subs:,} subscriptions, "
              f"{args.messages} messages per topic, every other one acked: set up in {time.perf_counter() - t0:.1f} s")
        with tempfile.TemporaryDirectory(prefix="bench-capture-") as out:
            capture = Capture(Path(out) / "cap", client, admin, CaptureSettings(topics=tuple(topics), interval_s=3600))
            timer = _Timer(psutil.Process(proc.pid))
            try:
                first = timer.time(capture.poll)
                timer.samples.clear()
                for _ in range(args.polls):
                    timer.time(capture.poll)
                steady = timer.medians()
                timer.samples.clear()
                changed = [c for t in topics[::10] for c in consumers[t]]
                for _ in range(args.polls):
                    for consumer in changed:  # redelivery of an unacked message: ack it
                        consumer.redeliver_unacknowledged_messages()
                    for consumer in changed:
                        consumer.acknowledge(consumer.receive(30_000))
                    timer.time(capture.poll)
                moving = timer.medians()
            finally:
                capture.close()
        print(_line("first poll (readers, created)", *first, subs))
        print(_line(f"poll, nothing changed (median {args.polls})", *steady, subs))
        print(_line(f"poll, {len(changed)} subs acked one (median)", *moving, subs))
        print(f"(two admin GETs per topic-partition per poll: stats and internalStats); {_load()}")
    finally:
        client.close()
        admin.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
