"""mledger's Pulsar protocol server against pulsar-lite, driven by the real Pulsar client.

    python benchmarks/bench_protocol.py [--messages 100000] [--repeats 3] [--servers memory,sqlite,lite]
    python benchmarks/bench_protocol.py --tls [--messages 20000]      # memory,memory-tls
    python benchmarks/bench_protocol.py --record [--messages 50000]   # standalone,standalone-record,lite
    python benchmarks/bench_protocol.py --defaults pulsar-4.0         # standalone,standalone-pulsar-4.0
    python benchmarks/bench_protocol.py --before OLD/src --servers sqlite-before,sqlite,lite  # a change
    python benchmarks/bench_protocol.py --fixture-startup 7           # the in-process fixture only

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

``--tls`` compares TLS with plaintext: the ``memory-tls`` (``sqlite-tls``) server is
``mledger standalone`` with ``--tls-port`` and a self-signed certificate made here, and the
client connects with ``pulsar+ssl://``, the certificate as trust file and hostname validation;
the table then shows each TLS server's ratio to its plaintext kind.

``--before SRC`` adds the ``-before`` kinds (``sqlite-before``, ``memory-before``): the same
server run from another source tree (a ``src`` holding ``mledger/``, e.g. ``git archive`` of the
commit before a change), alternating with the others in one run; the table then shows each
kind's ratio to its ``-before`` twin, msg/s and server CPU per phase.

``--fixture-startup N`` times N starts of the in-process fixture (``EmbeddedStandalone``, what
the pytest fixture starts) to the first message received and prints the first (the imports included) and the median of the others as
figure lines (``compare_src.py`` compares two trees
with it).

``--record`` measures the cost of recording (issue 25): ``standalone`` is ``mledger standalone
--memory`` and ``standalone-record`` the same with ``--record DIR`` (a directory under the
server's data folder), alternating with pulsar-lite; the table then shows the recording
server's ratio to the plain one per phase, and the recording's size and rows.

``--defaults PRESET`` measures a broker under a Pulsar version's cursor rules (issue 33):
``standalone`` is ``mledger standalone --memory`` and ``standalone-PRESET`` the same with
``--defaults PRESET`` (Guava's mark-delete limiter, the 60 s flush, receipts before persisting),
alternating; the table then shows the preset's ratio to mledger's defaults per phase.
``--sqlite`` runs both over a data directory instead of memory.
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


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key (PEM files in ``folder``)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[bytes]
    port: int
    data: Path
    spawned: float
    trust: Path | None = None

    @property
    def url(self) -> str:
        scheme = "pulsar+ssl" if self.trust is not None else "pulsar"
        return f"{scheme}://127.0.0.1:{self.port}"

    def cpu(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return t.user + t.system

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 1e6

    def stop(self) -> tuple[int, int]:
        """Stop the server, remove its data; the recording's (bytes, produced+acked rows) when it recorded."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        recorded = recording_size(self.data / "recording")
        shutil.rmtree(self.data, ignore_errors=True)
        return recorded


def recording_size(directory: Path) -> tuple[int, int]:
    """A recording's bytes on disk and its rows (every log), (0, 0) when there is none."""
    if not directory.is_dir():
        return 0, 0
    import pyarrow.parquet as pq

    files = list(directory.rglob("part-*.parquet"))
    return sum(f.stat().st_size for f in files), sum(pq.ParquetFile(f).metadata.num_rows for f in files)


BEFORE_SRC: Path | None = None
"""``--before``: the source tree (a ``src`` holding ``mledger/``) the ``-before`` kinds run."""
SQLITE = False
"""``--sqlite``: the ``standalone`` kinds serve a data directory instead of memory."""


def start(kind: str) -> Server:
    env = None
    if kind.endswith("-before"):
        assert BEFORE_SRC is not None, "the -before kinds need --before"
        env = dict(os.environ, PYTHONPATH=str(BEFORE_SRC.resolve()))
        kind = kind.removesuffix("-before")
    data = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    port = free_port()
    spawned = time.perf_counter()
    trust = None
    if kind == "lite":
        cmd = [lite_binary(), "--addr", f"127.0.0.1:{port}", "--db-path", str(data / "lite.db")]
    elif kind.endswith("-tls"):
        trust, key = self_signed(data)
        cmd = [sys.executable, "-m", "mledger.cli", "standalone", "--bind", f"127.0.0.1:{free_port()}"]
        cmd += ["--admin-bind", "127.0.0.1:0", "--tls-port", str(port), "--tls-cert-file", str(trust)]
        cmd += ["--tls-key-file", str(key)]
        cmd += ["--memory"] if kind == "memory-tls" else ["--data-dir", str(data / "data")]
    elif kind.startswith("standalone"):
        where = ["--data-dir", str(data / "data")] if SQLITE else ["--memory"]
        cmd = [sys.executable, "-m", "mledger.cli", "standalone", *where, "--bind", f"127.0.0.1:{port}"]
        cmd += ["--admin-bind", "127.0.0.1:0"]
        cmd += ["--record", str(data / "recording")] if kind == "standalone-record" else []
        preset = kind.removeprefix("standalone-")
        cmd += ["--defaults", preset] if preset.startswith("pulsar-") else []
    else:
        cmd = [sys.executable, "-m", "mledger.protocol", "--bind", f"127.0.0.1:{port}"]
        cmd += ["--memory"] if kind == "memory" else ["--data-dir", str(data)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} server exited with {proc.returncode}") from None
            time.sleep(0.002)
    return Server(kind, proc, port, data, spawned, trust)


def client_for(server: Server) -> pulsar.Client:
    tls: dict[str, object] = {}
    if server.trust is not None:
        tls = {"tls_trust_certs_file_path": str(server.trust), "tls_validate_hostname": True}
    return pulsar.Client(
        server.url, operation_timeout_seconds=60, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **tls
    )


def produce(client: pulsar.Client, topic: str, n: int, batched: bool) -> None:
    producer = client.create_producer(
        topic,
        batching_enabled=batched,
        batching_max_publish_delay_ms=10,
        block_if_queue_full=True,
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
    recorded: tuple[int, int] = (0, 0)


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
        run.recorded = server.stop()
    return run


def fixture_startup() -> float:
    """Seconds from importing the fixture's broker (a no-op after the first call) to the first
    message received."""
    t0 = time.perf_counter()
    from mledger.standalone import EmbeddedStandalone

    with EmbeddedStandalone() as broker:
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
    parser.add_argument("--servers", default=None, help="memory,sqlite,lite (with --tls: memory,memory-tls)")
    parser.add_argument("--tls", action="store_true", help="compare pulsar+ssl:// with pulsar:// (adds -tls kinds)")
    parser.add_argument(
        "--fixture-startup", type=int, default=0, metavar="N", help="only time N in-process fixture starts"
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="compare mledger standalone with and without --record (standalone,standalone-record,lite)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a source tree (src holding mledger/) to run as the -before kinds, e.g. sqlite-before",
    )
    parser.add_argument(
        "--defaults",
        metavar="PRESET",
        default=None,
        help="compare mledger standalone with and without --defaults PRESET (standalone,standalone-PRESET)",
    )
    parser.add_argument("--sqlite", action="store_true", help="the standalone kinds serve a data directory")
    args = parser.parse_args()
    global BEFORE_SRC, SQLITE
    BEFORE_SRC = args.before
    if args.fixture_startup:
        starts = [fixture_startup() for _ in range(args.fixture_startup)]
        print(f"fixture first start to first message, imports included, ms: {starts[0] * 1000:.1f}")
        print(f"fixture start to first message ms: {statistics.median(starts[1:] or starts) * 1000:.1f}")
        print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        return 0
    SQLITE = args.sqlite
    default = "memory,memory-tls" if args.tls else "standalone,standalone-record,lite" if args.record else None
    if args.defaults:
        default = f"standalone,standalone-{args.defaults}"
    kinds = (args.servers or default or "memory,sqlite,lite").split(",")
    runs: dict[str, list[Run]] = {k: [] for k in kinds}
    for r in range(args.repeats):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]  # alternate who goes first
        for kind in order:
            run = run_once(kind, args.messages)
            runs[kind].append(run)
            print(f"  repeat {r + 1} {kind:7s} " + " ".join(f"{p}={run.rates[p]:,.0f}" for p in PHASES), flush=True)

    def med(kind: str, get: Callable[[Run], float]) -> float:
        return statistics.median(get(x) for x in runs[kind])

    def rate(kind: str, phase: str) -> float:
        return statistics.median(x.rates[phase] for x in runs[kind])

    def cpu(kind: str, phase: str) -> float:
        return statistics.median(x.cpu[phase] for x in runs[kind])

    print(
        f"\n{args.messages:,} messages of {len(PAYLOAD)} B per phase, medians of {args.repeats} runs, "
        f"{os.cpu_count()} cores (client and server on one machine)\n"
    )
    header = f"{'phase':18s}" + "".join(f"{k + ' msg/s':>18s}" for k in kinds)
    if "lite" in kinds:
        header += "".join(f"{k + '/lite':>13s}" for k in kinds if k != "lite")
    print(header)
    for phase in PHASES:
        line = f"{phase:18s}" + "".join(f"{rate(k, phase):18,.0f}" for k in kinds)
        if "lite" in kinds:
            lite = rate("lite", phase)
            line += "".join(f"{rate(k, phase) / lite:12.2f}x" for k in kinds if k != "lite")
        print(line)
    tls_pairs = [(k, k.removesuffix("-tls")) for k in kinds if k.endswith("-tls") and k.removesuffix("-tls") in kinds]
    if tls_pairs:
        print("\nTLS / plaintext (median msg/s ratio)")
        for phase in PHASES:
            print(f"{phase:18s}" + "".join(f"{rate(t, phase) / rate(p, phase):15.2f}x" for t, p in tls_pairs))
    if "standalone" in kinds and "standalone-record" in kinds:
        print("\nrecording / not recording (median msg/s ratio; per repeat in brackets)")
        for phase in PHASES:
            each = [
                r.rates[phase] / p.rates[phase]
                for r, p in zip(runs["standalone-record"], runs["standalone"], strict=True)
            ]
            print(
                f"{phase:18s}{rate('standalone-record', phase) / rate('standalone', phase):15.2f}x   ["
                + ", ".join(f"{x:.2f}" for x in each)
                + "]"
            )
        size, rows = runs["standalone-record"][-1].recorded
        print(f"recording of one run: {rows:,} rows, {size / 1e6:,.1f} MB")
    preset = f"standalone-{args.defaults}"
    if args.defaults and "standalone" in kinds and preset in kinds:
        print(f"\n--defaults {args.defaults} / mledger's defaults (median msg/s ratio; per repeat in brackets)")
        for phase in PHASES:
            each = [r.rates[phase] / p.rates[phase] for r, p in zip(runs[preset], runs["standalone"], strict=True)]
            print(
                f"{phase:18s}{rate(preset, phase) / rate('standalone', phase):15.2f}x   ["
                + ", ".join(f"{x:.2f}" for x in each)
                + "]"
            )
    print("\nserver CPU seconds per phase (median)")
    for phase in PHASES:
        print(f"{phase:18s}" + "".join(f"{cpu(k, phase):18.2f}" for k in kinds))
    print()
    print(f"{'idle RSS MB':18s}" + "".join(f"{med(k, lambda x: x.idle_rss):18.1f}" for k in kinds))
    print(f"{'peak RSS MB':18s}" + "".join(f"{med(k, lambda x: x.peak_rss):18.1f}" for k in kinds))
    print(f"{'spawn->1st msg s':18s}" + "".join(f"{med(k, lambda x: x.startup):18.3f}" for k in kinds))
    pairs = [(k, k + "-before") for k in kinds if k + "-before" in kinds]
    if pairs:
        print("\nafter / before (median msg/s ratio; server CPU ratio)")
        for phase in PHASES:
            print(
                f"{phase:18s}"
                + "".join(
                    f"{rate(a, phase) / rate(b, phase):10.3f}x rate {cpu(a, phase) / cpu(b, phase):8.3f}x CPU"
                    for a, b in pairs
                )
            )
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"\nin-process fixture (EmbeddedStandalone) start to first message: {fixture_startup() * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
