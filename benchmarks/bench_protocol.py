"""mledger's Pulsar protocol server against pulsar-lite, driven by the real Pulsar client.

    python benchmarks/bench_protocol.py [--messages 100000] [--repeats 3] [--servers memory,sqlite,lite]

One fixed load of ``--messages`` messages of 100 bytes per phase, the same for every server:

1. ``produce``: non-batched ``send_async`` (at most 1000 pending);
2. ``produce-batched``: batched ``send_async`` (10 ms batches);
3. ``consume-ack``: an Exclusive consumer receives phase 1's messages and acks each;
4. ``shared-2``: two Shared consumers (one thread each) receive phase 2's messages and ack them;
5. ``produce+consume``: a producer and a consumer on a fresh topic at the same time.

Each server runs in its own process (mledger: ``python -m mledger.protocol`` with the memory
store or SQLite; pulsar-lite: its binary, installed by the ``bench`` extra); the client runs
here. Repeats alternate the servers' order; the table shows medians of msg/s per phase, the
ratio to pulsar-lite, the server's CPU seconds per phase, its idle and peak RSS, and the time
from spawning the server to the first message received. The in-process fixture's start to
first message is printed too. The machine is shared: single runs drift by 15-30 %.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pulsar

PAYLOAD = b"x" * 100
PHASES = ["produce", "produce-batched", "consume-ack", "shared-2", "produce+consume"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lite_binary() -> str:
    import pulsar_lite

    return str(Path(pulsar_lite.__file__).parent / "bin" / "pulsar-lite")


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[bytes]
    port: int
    data: Path
    spawned: float

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def cpu(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return t.user + t.system

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 1e6

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.data, ignore_errors=True)


def start(kind: str) -> Server:
    data = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    port = free_port()
    spawned = time.perf_counter()
    if kind == "lite":
        cmd = [lite_binary(), "--addr", f"127.0.0.1:{port}", "--db-path", str(data / "lite.db")]
    else:
        cmd = [sys.executable, "-m", "mledger.protocol", "--bind", f"127.0.0.1:{port}"]
        cmd += ["--memory"] if kind == "memory" else ["--data-dir", str(data)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} server exited with {proc.returncode}") from None
            time.sleep(0.002)
    return Server(kind, proc, port, data, spawned)


def client_for(server: Server) -> pulsar.Client:
    return pulsar.Client(server.url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def produce(client: pulsar.Client, topic: str, n: int, batched: bool) -> None:
    producer = client.create_producer(
        topic, batching_enabled=batched, batching_max_publish_delay_ms=10, block_if_queue_full=True,
        max_pending_messages=1000,
    )
    done = threading.Event()
    count = [0]

    def sent(result: pulsar.Result, mid: object) -> None:
        count[0] += 1
        if count[0] == n:
            done.set()

    for _ in range(n):
        producer.send_async(PAYLOAD, sent)
    done.wait()
    producer.close()


def consume(consumer: pulsar.Consumer, n: int) -> None:
    for _ in range(n):
        consumer.acknowledge(consumer.receive(60_000))


@dataclass
class Run:
    kind: str
    rates: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    startup: float = 0.0
    idle_rss: float = 0.0
    peak_rss: float = 0.0


def run_once(kind: str, n: int) -> Run:
    server = start(kind)
    run = Run(kind)
    try:
        client = client_for(server)
        first = client.subscribe("first", "s")
        client.create_producer("first").send(b"hello")
        first.receive(10_000)
        run.startup = time.perf_counter() - server.spawned
        time.sleep(0.5)
        run.idle_rss = server.rss_mb()
        consumer_a = client.subscribe("bench-a", "s")  # exists before phase 1 produces
        shared = [client.subscribe("bench-b", "s", consumer_type=pulsar.ConsumerType.Shared) for _ in range(2)]
        consumer_c = client.subscribe("bench-c", "s")

        def measure(phase: str, work: Callable[[], None]) -> None:
            cpu0 = server.cpu()
            t0 = time.perf_counter()
            work()
            run.rates[phase] = n / (time.perf_counter() - t0)
            run.cpu[phase] = server.cpu() - cpu0
            run.peak_rss = max(run.peak_rss, server.rss_mb())

        measure("produce", lambda: produce(client, "bench-a", n, batched=False))
        measure("produce-batched", lambda: produce(client, "bench-b", n, batched=True))
        measure("consume-ack", lambda: consume(consumer_a, n))

        def two_shared() -> None:
            counts = [0, 0]
            stop = threading.Event()

            def loop(i: int) -> None:
                while not stop.is_set():
                    try:
                        m = shared[i].receive(200)
                    except pulsar.Timeout:
                        continue
                    shared[i].acknowledge(m)
                    counts[i] += 1
                    if sum(counts) >= n:
                        stop.set()

            threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        measure("shared-2", two_shared)

        def both() -> None:
            t = threading.Thread(target=consume, args=(consumer_c, n))
            t.start()
            produce(client, "bench-c", n, batched=False)
            t.join()

        measure("produce+consume", both)
        client.close()
    finally:
        server.stop()
    return run


def fixture_startup() -> float:
    from mledger.protocol import EmbeddedBroker

    t0 = time.perf_counter()
    with EmbeddedBroker() as broker:
        client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        consumer = client.subscribe("first", "s")
        client.create_producer("first").send(b"hello")
        consumer.receive(10_000)
        elapsed = time.perf_counter() - t0
        client.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--servers", default="memory,sqlite,lite")
    args = parser.parse_args()
    kinds = args.servers.split(",")
    runs: dict[str, list[Run]] = {k: [] for k in kinds}
    for r in range(args.repeats):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]  # alternate who goes first
        for kind in order:
            run = run_once(kind, args.messages)
            runs[kind].append(run)
            print(f"  repeat {r + 1} {kind:7s} " + " ".join(f"{p}={run.rates[p]:,.0f}" for p in PHASES), flush=True)

    def med(kind: str, get: Callable[[Run], float]) -> float:
        return statistics.median(get(x) for x in runs[kind])

    print(f"\n{args.messages:,} messages of {len(PAYLOAD)} B per phase, medians of {args.repeats} runs, "
          f"{os.cpu_count()} cores (client and server on one machine)\n")
    header = f"{'phase':18s}" + "".join(f"{k + ' msg/s':>16s}" for k in kinds)
    if "lite" in kinds:
        header += "".join(f"{k + '/lite':>13s}" for k in kinds if k != "lite")
    print(header)
    for phase in PHASES:
        line = f"{phase:18s}" + "".join(f"{med(k, lambda x: x.rates[phase]):16,.0f}" for k in kinds)
        if "lite" in kinds:
            lite = med("lite", lambda x: x.rates[phase])
            line += "".join(f"{med(k, lambda x: x.rates[phase]) / lite:12.2f}x" for k in kinds if k != "lite")
        print(line)
    print("\nserver CPU seconds per phase (median)")
    for phase in PHASES:
        print(f"{phase:18s}" + "".join(f"{med(k, lambda x: x.cpu[phase]):16.2f}" for k in kinds))
    print()
    print(f"{'idle RSS MB':18s}" + "".join(f"{med(k, lambda x: x.idle_rss):16.1f}" for k in kinds))
    print(f"{'peak RSS MB':18s}" + "".join(f"{med(k, lambda x: x.peak_rss):16.1f}" for k in kinds))
    print(f"{'spawn->1st msg s':18s}" + "".join(f"{med(k, lambda x: x.startup):16.3f}" for k in kinds))
    print(f"\nin-process fixture (EmbeddedBroker) start to first message: {fixture_startup() * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
