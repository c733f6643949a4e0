"""``mledger watch`` over a long run with churn: its memory stays flat (issue 35 item 4).

    python benchmarks/soak_watch.py [--minutes 10] [--topics 20] [--interval 2s] [--no-readers]

``mledger standalone --memory`` runs in its own process, and ``mledger watch --namespace
public/default`` (``--defaults pulsar-4.0``, serving ``/metrics``) in another, polling every
``--interval``. Meanwhile this process churns the namespace, one step a second:

* ``--topics`` topics live at a time; every step the oldest goes (its clients closed, then
  ``DELETE ...?force=true``) and a new one comes, with two Shared subscriptions;
* every step each live topic gets a batch of messages from a batched producer (batches of 5)
  and each subscription acks every other message it received, leaving holes; every tenth step
  one subscription of a live topic is deleted (``DELETE .../subscription/NAME``);
* two topics live for the whole soak and take the same traffic (their entries never stop
  growing: the models kept for them must not grow with them beyond their history bound).

Every minute the watch's RSS (``/proc/PID/status`` VmRSS) is printed with the subscriptions of
its last round, its last poll's wall time and the load average (the machine is shared). After
``--warmup`` minutes the samples must lie within 10 % of each other: the verdict is the last line
(exit status 1 when not flat). The watch is stopped with SIGTERM at the end, which must end it
within a second.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import httpx
import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' standalone process
from standalone_process import running_standalone  # noqa: E402

NAMESPACE = "public/default"
PREFIX = f"persistent://{NAMESPACE}/soak-"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Topic:
    """A live topic: its batched producer and two Shared subscriptions' consumers."""

    def __init__(self, client: pulsar.Client, name: str) -> None:
        self.name = name
        self.consumers = {
            sub: client.subscribe(name, sub, consumer_type=pulsar.ConsumerType.Shared) for sub in ("a", "b")
        }
        self.producer = client.create_producer(
            name, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=1000
        )

    def step(self, messages: int) -> None:
        for i in range(messages):
            self.producer.send_async(b"soak-%d" % i, None)
        self.producer.flush()
        for consumer in self.consumers.values():
            for i in range(messages):
                try:
                    message = consumer.receive(2000)
                except pulsar.Timeout:
                    break
                if i % 2:
                    consumer.acknowledge(message)

    def close(self) -> None:
        self.producer.close()
        for consumer in self.consumers.values():
            consumer.close()


def start_watch(urls: dict[str, str], args: argparse.Namespace) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """The watch process, and the latest line it printed (a thread keeps it current)."""
    command = [sys.executable, "-m", "mledger.cli", "watch", "--admin-url", urls["admin_url"],
               "--namespace", NAMESPACE, "--defaults", "pulsar-4.0", "--interval", args.interval,
               "--discovery-interval", args.interval, "--metrics-bind", "127.0.0.1:0"]  # fmt: skip
    command += ["--no-readers"] if args.no_readers else ["--service-url", urls["service_url"]]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    last: dict[str, Any] = {}

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            last.update(json.loads(line))

    threading.Thread(target=follow, daemon=True).start()
    return proc, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes before the flatness check")
    parser.add_argument("--topics", type=int, default=20, help="churned topics live at a time")
    parser.add_argument("--messages", type=int, default=10, help="messages per topic per step")
    parser.add_argument("--interval", default="2s", help="the watch's poll interval")
    parser.add_argument("--no-readers", action="store_true", help="soak mledger watch --no-readers")
    args = parser.parse_args()

    with running_standalone() as urls:
        return soak(urls, args)


def soak(urls: dict[str, str], args: argparse.Namespace) -> int:
    """The soak against the standalone at ``urls``; 0 when the RSS stayed flat."""
    client = pulsar.Client(urls["service_url"], logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"))
    admin = httpx.Client(base_url=f"{urls['admin_url']}/admin/v2/persistent/{NAMESPACE}", timeout=30)
    watcher = None
    try:
        names = itertools.count()
        steady = [Topic(client, f"{PREFIX}steady-{i}") for i in range(2)]
        live: deque[Topic] = deque(Topic(client, f"{PREFIX}{next(names)}") for _ in range(args.topics))
        watcher, last = start_watch(urls, args)
        started = time.monotonic()
        samples: list[tuple[float, float]] = []
        print(f"soak: {args.minutes:g} min, {args.topics} churned topics + 2 steady, watch --interval "
              f"{args.interval}{' --no-readers' if args.no_readers else ''}; load average {load()}", flush=True)  # fmt: skip
        print("minute  rss_mb  subscriptions  poll_s  topics_made  topics_listed  load_average", flush=True)
        made, step, next_sample = args.topics + 2, 0, 0.0
        while True:
            elapsed = (time.monotonic() - started) / 60
            if elapsed >= next_sample:
                if watcher.poll() is not None:
                    raise RuntimeError(f"the watch ended with status {watcher.returncode}")
                rss = rss_mb(watcher.pid)
                samples.append((elapsed, rss))
                counts = last.get("counts", {})
                poll = last.get("poll_s", float("nan"))
                listed = len(admin.get("").raise_for_status().json())  # those deleted and not created again
                print(f"{elapsed:6.1f}  {rss:6.1f}  {sum(counts.values()):13d}  {poll:6.2f}  {made:11d}  {listed:13d}  "
                      f"{load()}", flush=True)  # fmt: skip
                next_sample += 1.0
            if elapsed >= args.minutes:
                break
            begun = time.monotonic()
            step += 1
            old = live.popleft()
            old.close()
            admin.delete(f"/{old.name.rsplit('/', 1)[1]}", params={"force": "true"}).raise_for_status()
            live.append(Topic(client, f"{PREFIX}{next(names)}"))
            made += 1
            for topic in (*steady, *live):
                topic.step(args.messages)
            if step % 10 == 0:
                victim = live[len(live) // 2]
                victim.consumers.pop("b").close()
                admin.delete(f"/{victim.name.rsplit('/', 1)[1]}/subscription/b").raise_for_status()
            time.sleep(max(0.0, 1.0 - (time.monotonic() - begun)))
        stop_at = time.monotonic()
        watcher.send_signal(signal.SIGTERM)
        code = watcher.wait(timeout=30)
        print(f"SIGTERM to exit: {time.monotonic() - stop_at:.2f} s (status {code})")
        kept = [rss for at, rss in samples if at >= args.warmup]
        spread = (max(kept) - min(kept)) / min(kept) if kept else float("nan")
        flat = bool(kept) and spread <= 0.10
        print(f"after {args.warmup:g} min warm-up: RSS {min(kept):.1f}..{max(kept):.1f} MB, spread {spread:.1%}: "
              f"{'flat' if flat else 'NOT flat'} (within 10 %); load average {load()}")  # fmt: skip
        return 0 if flat else 1
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        client.close()
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
