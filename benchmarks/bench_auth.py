"""Connections authenticated per second by each provider of ``mledger standalone``, and what
clients retrying a wrong password cost everyone else (``--victim``).

    python benchmarks/bench_auth.py [--connections 200] [--repeats 3]
    python benchmarks/bench_auth.py --victim [--before OLD/src] [--attackers 0,1,4] [--seconds 5] [--repeats 3]

One ``mledger standalone --memory --config FILE`` (TLS on ``brokerServicePortTls``, the token,
basic and TLS providers, ``anonymousUserRole``; authorization on, as mledger requires with
credentials, though CONNECT checks no permission) serves every case; the client
is a raw protocol loop here (``mledger.protocol._framing``, as ``tests/protocol_raw.py``), so the
figures are the server's cost, not the C++ client's: each connection is TCP (+ TLS handshake)
connect, CONNECT with the case's credentials, the CONNECTED reply checked, close. Cases:

* ``none``: CONNECT without credentials (the anonymous role), the baseline; ``none-tls`` the
  same over TLS, the baseline for the TLS provider;
* ``token-hs256``: a JWT made by ``mledger tokens create`` with an HS256 secret key;
* ``basic-apr1``, ``basic-bcrypt-5``, ``basic-bcrypt-12``: ``user:password`` against an
  ``.htpasswd`` with an APR1-MD5 user and bcrypt users at cost 5 (``htpasswd -B``'s default)
  and 12 (passlib's); bcrypt is slow on purpose, so cost 12 runs a tenth of the connections;
* ``tls-cert``: a client certificate (ECDSA P-256) over TLS, the ``tls`` provider.

Repeats alternate the cases' order; the table shows medians of connections per second and the
server's CPU per connection (its threads' run time, its password-check worker processes' too, see
:meth:`Server.cpu`). The machine is shared: single runs drift.

``--victim`` (issue 31 item 1): one producer (the victim, a raw protocol loop: SEND, wait for
its receipt, again) times each message for ``--seconds`` while 0, 1 or 4 attackers (processes of
their own) send CONNECTs with a wrong password for a bcrypt-12 user, each as soon as the last
one is answered (after ``--attack-pause`` ms); with ``--rest`` the same over REST (``Basic``
against ``GET /admin/v2/tenants``, the victim asking it without credentials: 401 at once). Servers, each
``mledger standalone --memory`` with basic authentication and authorization:

* ``before``: the source tree of ``--before`` (a ``src`` holding ``mledger/``, e.g. ``git
  archive`` of main before the change): the hash verified on the event loop;
* ``after-pool``: this tree with the failure limits off (``maxAuthenticationFailures*=0``), so
  every attempt is verified: the pool alone (``maxConcurrentPasswordChecks``: its default);
* ``after``: this tree with its default limits: attackers are soon refused unverified.

Repeats alternate the servers' order; the table shows the medians of the victim's p50 and p99
latency and each p99's ratio to the same server's without attackers.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import platform
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from passlib.hash import apr_md5_crypt, bcrypt

from mledger import EntryMetadata
from mledger.codec import encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol._codec import decode_command
from mledger.protocol._framing import FrameDecoder, checksummed_entry, encode_frame, encode_payload_frame

PASSWORD = "bench-password"
CONF = """\
brokerServicePort=0
brokerServicePortTls=0
webServicePort=0
bindAddress=127.0.0.1
advertisedAddress=localhost
clusterName=standalone
tlsCertificateFilePath=broker-cert.pem
tlsKeyFilePath=broker-key.pem
tlsTrustCertsFilePath=cacert.pem
anonymousUserRole=anonymous
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderTls,\\
    org.apache.pulsar.broker.authentication.AuthenticationProviderToken,\\
    org.apache.pulsar.broker.authentication.AuthenticationProviderBasic
tokenSecretKey=file://{secret}
authorizationEnabled=true
superUserRoles=bench
"""


# -- credentials ---------------------------------------------------------------------------------


def _certificate(
    cn: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    signer: ec.EllipticCurvePrivateKey,
    ca: bool = False,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if cn == "localhost":
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_credentials(folder: Path) -> str:
    """CA, broker and client (CN ``bench-client``) certificates, a secret key, ``.htpasswd``;
    returns the JWT (subject ``bench``) made by ``mledger tokens``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("bench CA", ca_key, None, ca_key, ca=True)
    (folder / "cacert.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name, cn in (("broker", "localhost"), ("client", "bench-client")):
        key = ec.generate_private_key(ec.SECP256R1())
        (folder / f"{name}-key.pem").write_bytes(_pem_key(key))
        cert = _certificate(cn, key, ca.subject, ca_key)
        (folder / f"{name}-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / ".htpasswd").write_text(
        f"apr1:{apr_md5_crypt.hash(PASSWORD)}\n"
        f"bcrypt5:{bcrypt.using(rounds=5, ident='2y').hash(PASSWORD)}\n"
        f"bcrypt12:{bcrypt.using(rounds=12, ident='2y').hash(PASSWORD)}\n"
    )
    tokens = [sys.executable, "-m", "mledger.cli", "tokens"]
    subprocess.run([*tokens, "create-secret-key", "--output", str(folder / "secret.key")], check=True)
    done = subprocess.run(
        [*tokens, "create", "--subject", "bench", "--secret-key", f"file://{folder / 'secret.key'}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


# -- the server and the connections ----------------------------------------------------------------


def _cpu(pid: int) -> float:
    tasks = Path(f"/proc/{pid}/task")
    if tasks.is_dir():
        total = 0
        for task in tasks.iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended between the listing and the read
        return total / 1e9
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    tls_port: int

    def cpu(self) -> float:
        """Server CPU seconds, its password-check worker processes included: each process's
        threads' run time from ``/proc/PID/task/*/schedstat`` (nanoseconds; the threads live as
        long as the process does) where Linux has it, else ``psutil``'s user + system, whose
        10 ms ticks are coarse for a few hundred connections."""
        server = psutil.Process(self.proc.pid)
        return sum(_cpu(p.pid) for p in [server, *server.children(recursive=True)])

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)


def standalone(folder: Path, conf: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``mledger standalone --memory --config CONF`` in ``folder`` (its stderr in ``CONF.log``),
    once it answers: the process and the URLs it printed."""
    with open(folder / f"{conf}.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mledger.cli", "standalone", "--config", conf, "--memory"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=folder,
            env=env,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise SystemExit((folder / f"{conf}.log").read_text())
    return proc, json.loads(line)


def start(folder: Path) -> Server:
    (folder / "standalone.conf").write_text(CONF.format(secret=folder / "secret.key"))
    env = {**os.environ, "PULSAR_EXTRA_OPTS": f"-Dpulsar.auth.basic.conf={folder / '.htpasswd'}"}
    proc, urls = standalone(folder, "standalone.conf", env)
    port = int(urls["service_url"].rsplit(":", 1)[1])
    tls_port = int(urls["service_url_tls"].rsplit(":", 1)[1])
    return Server(proc, port, tls_port)


@dataclass(frozen=True)
class Case:
    name: str
    method: str | None
    data: bytes
    tls: bool
    certificate: bool = False
    share: int = 1  # run connections // share of them (bcrypt at cost 12)


def connect_once(case: Case, port: int, context: ssl.SSLContext | None) -> None:
    """One connection: connect (+ handshake), CONNECT, CONNECTED, close."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock = context.wrap_socket(raw, server_hostname="localhost") if context is not None else raw
    try:
        connect = api.CommandConnect(client_version="bench", protocol_version=20)
        if case.method is not None:
            connect.auth_method_name, connect.auth_data = case.method, case.data
        sock.sendall(encode_frame(api.BaseCommand(type=api.BaseCommand.CONNECT, connect=connect).SerializeToString()))
        decoder = FrameDecoder()
        frames: list[tuple[bytes, bytes | None]] = []
        while not frames:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError(f"{case.name}: closed by the server")
            frames = decoder.feed(data)
        reply = decode_command(frames[0][0])
        if reply.type != api.BaseCommand.CONNECTED:
            raise AssertionError(f"{case.name}: {reply}")
    finally:
        sock.close()


def context_for(case: Case, folder: Path) -> ssl.SSLContext | None:
    if not case.tls:
        return None
    context = ssl.create_default_context(cafile=str(folder / "cacert.pem"))
    if case.certificate:
        context.load_cert_chain(str(folder / "client-cert.pem"), str(folder / "client-key.pem"))
    return context


def measure(case: Case, server: Server, folder: Path, connections: int) -> tuple[float, float]:
    """(connections per second, server CPU milliseconds per connection)."""
    n = max(connections // case.share, 5)
    context = context_for(case, folder)
    port = server.tls_port if case.tls else server.port
    connect_once(case, port, context)  # warm-up
    cpu, start_time = server.cpu(), time.perf_counter()
    for _ in range(n):
        connect_once(case, port, context)
    wall, used = time.perf_counter() - start_time, server.cpu() - cpu
    return n / wall, used * 1000 / n


# -- --victim: clients retrying a wrong password against everyone else ------------------------------

T = api.BaseCommand

VICTIM_CONF = """\
brokerServicePort=0
webServicePort=0
bindAddress=127.0.0.1
clusterName=standalone
authenticationEnabled=true
authenticationProviders=basic
basicAuthConf={htpasswd}
authorizationEnabled=true
superUserRoles=victim
{limits}"""
NO_LIMITS = "maxAuthenticationFailuresPerUserPerIp=0\nmaxAuthenticationFailuresPerIp=0\n"


def start_victim_server(folder: Path, kind: str, src: Path) -> tuple[subprocess.Popen[str], int, str]:
    """``mledger standalone`` of ``src`` for server ``kind``: (process, protocol port, admin URL)."""
    conf = f"{kind}.conf"
    limits = NO_LIMITS if kind == "after-pool" else ""
    (folder / conf).write_text(VICTIM_CONF.format(htpasswd=folder / ".htpasswd", limits=limits))
    proc, urls = standalone(folder, conf, {**os.environ, "PYTHONPATH": str(src.resolve())})
    import httpx

    # authorization on: no tenant yet (as Pulsar's standalone); the victim, a superuser, makes one
    victim = {"Authorization": "Basic " + base64.b64encode(f"victim:{PASSWORD}".encode()).decode()}
    admin = urls["admin_url"] + "/admin/v2"
    httpx.put(f"{admin}/tenants/public", json={"allowedClusters": ["standalone"]}, headers=victim).raise_for_status()
    httpx.put(f"{admin}/namespaces/public/default", headers=victim).raise_for_status()
    return proc, int(urls["service_url"].rsplit(":", 1)[1]), urls["admin_url"]


_PONG = encode_frame(T(type=T.PONG, pong=api.CommandPong()).SerializeToString())


def _exchange(sock: socket.socket, decoder: FrameDecoder, frame: bytes) -> api.BaseCommand | None:
    """Send ``frame``, return the next command but PING, which is answered (None: the server
    closed the connection)."""
    sock.sendall(frame)
    pending: list[api.BaseCommand] = []
    while True:
        for command in pending:
            if command.type != T.PING:
                return command
            sock.sendall(_PONG)
        data = sock.recv(65536)
        if not data:
            return None
        pending = [decode_command(c) for c, _ in decoder.feed(data)]


def _connect_frame(user: str, password: str) -> bytes:
    connect = api.CommandConnect(client_version="bench", protocol_version=20, auth_method_name="basic")
    connect.auth_data = f"{user}:{password}".encode()
    return encode_frame(T(type=T.CONNECT, connect=connect).SerializeToString())


def attack(port: int, admin_url: str, rest: bool, pause: float, stop: Any, attempts: Any) -> None:
    """An attacker process: a wrong password for ``target`` (bcrypt 12), again as soon as the
    last one is answered (and ``pause`` seconds); counts its answered ``attempts``."""
    import httpx

    header = {"Authorization": "Basic " + base64.b64encode(b"target:wrong").decode()}
    with httpx.Client(timeout=60) as http:
        while not stop.is_set():
            try:
                if rest:
                    http.get(f"{admin_url}/admin/v2/tenants", headers=header)
                else:
                    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                        _exchange(sock, FrameDecoder(), _connect_frame("target", "wrong"))
            except (OSError, httpx.HTTPError):
                pass
            with attempts.get_lock():
                attempts.value += 1
            time.sleep(pause)


def produce_latencies(port: int, seconds: float) -> list[float]:
    """The victim: SEND one message, wait for its receipt, again, for ``seconds``; the latencies."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    reply = _exchange(sock, decoder, _connect_frame("victim", PASSWORD))
    assert reply is not None and reply.type == T.CONNECTED, reply
    producer = api.CommandProducer(topic="victim", producer_id=1, request_id=1, producer_name="victim")
    reply = _exchange(sock, decoder, encode_frame(T(type=T.PRODUCER, producer=producer).SerializeToString()))
    assert reply is not None and reply.type == T.PRODUCER_SUCCESS, reply
    latencies: list[float] = []
    sequence = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        body = encode_entry(b"x" * 100, EntryMetadata(producer_name="victim", sequence_id=sequence, publish_time_ms=1))
        send = T(type=T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence, num_messages=1))
        started = time.perf_counter()
        reply = _exchange(sock, decoder, encode_payload_frame(send.SerializeToString(), checksummed_entry(body)))
        latencies.append(time.perf_counter() - started)
        assert reply is not None and reply.type == T.SEND_RECEIPT, reply
        sequence += 1
    sock.close()
    return latencies


def rest_latencies(admin_url: str, seconds: float) -> list[float]:
    """The REST victim: ``GET /admin/v2/tenants`` without credentials (401, at once), again."""
    import httpx

    latencies: list[float] = []
    with httpx.Client(timeout=60) as http:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            http.get(f"{admin_url}/admin/v2/tenants")
            latencies.append(time.perf_counter() - started)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def victim_case(port: int, admin_url: str, attackers: int, args: argparse.Namespace) -> tuple[float, float, int, int]:
    """One measurement: ``attackers`` processes at it, the victim's (p50 ms, p99 ms, messages,
    attacks answered meanwhile)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    stop, attempts = context.Event(), context.Value("q", 0)
    pause = args.attack_pause / 1000
    processes = [
        context.Process(target=attack, args=(port, admin_url, args.rest, pause, stop, attempts))
        for _ in range(attackers)
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + 60
    while attempts.value < 2 * attackers and time.monotonic() < deadline:
        time.sleep(0.05)  # every attacker is started (spawned: a second or two) and at it
    at_start = attempts.value
    try:
        latencies = rest_latencies(admin_url, args.seconds) if args.rest else produce_latencies(port, args.seconds)
    finally:
        tries = attempts.value - at_start
        stop.set()
        for process in processes:
            process.join(60)
    return percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000, len(latencies), tries


def victim_main(args: argparse.Namespace) -> int:
    src = Path(__file__).resolve().parent.parent / "src"
    kinds = {"after-pool": src, "after": src}
    if args.before is not None:
        kinds = {"before": args.before, **kinds}
    counts = [int(n) for n in args.attackers.split(",")]
    results: dict[tuple[str, int], list[tuple[float, float, int, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / ".htpasswd").write_text(
            f"victim:{bcrypt.using(rounds=4).hash(PASSWORD)}\ntarget:{bcrypt.using(rounds=12).hash(PASSWORD)}\n"
        )
        for repeat in range(args.repeats):
            for kind in list(kinds) if repeat % 2 == 0 else list(reversed(kinds)):
                proc, port, admin_url = start_victim_server(folder, kind, kinds[kind])
                try:
                    for n in counts:
                        row = victim_case(port, admin_url, n, args)
                        results.setdefault((kind, n), []).append(row)
                        print(
                            f"{kind} attackers={n} repeat={repeat + 1}: p50 {row[0]:.2f} ms, p99 {row[1]:.2f} ms, "
                            f"{row[2]} messages, {row[3]} attacks answered, load {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                        )
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.communicate(timeout=60)
    what = "REST GET (401)" if args.rest else "produce"
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, victim's {what} latency, "
        f"{args.seconds:g} s per case x {args.repeats} repeats (medians), attackers retry a bcrypt-12 password "
        f"after {args.attack_pause:g} ms"
    )
    print("| server | attackers | p50 ms | p99 ms | p99 vs no attacker | messages | attacks answered |")
    print("|---|---|---|---|---|---|---|")
    for kind in kinds:
        base = statistics.median(r[1] for r in results[(kind, counts[0])])
        for n in counts:
            rows = results[(kind, n)]
            p50, p99, sent, tries = (statistics.median(r[i] for r in rows) for i in range(4))
            print(f"| {kind} | {n} | {p50:.2f} | {p99:.2f} | {p99 / base:.2f} | {sent:,.0f} | {tries:,.0f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--victim", action="store_true", help="a victim's latency under password-guessing attackers")
    parser.add_argument("--before", type=Path, help="--victim: the source tree (src holding mledger/) of 'before'")
    parser.add_argument("--attackers", default="0,1,4", help="--victim: attacker counts, the first the baseline")
    parser.add_argument("--seconds", type=float, default=5.0, help="--victim: seconds measured per case")
    parser.add_argument("--attack-pause", type=float, default=0.0, help="--victim: ms an attacker waits between tries")
    parser.add_argument("--rest", action="store_true", help="--victim: attack and measure over REST")
    args = parser.parse_args()
    if args.victim:
        return victim_main(args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        token = make_credentials(folder)
        password = PASSWORD.encode()
        cases = [
            Case("none", None, b"", tls=False),
            Case("none-tls", None, b"", tls=True),
            Case("token-hs256", "token", token.encode(), tls=False),
            Case("basic-apr1", "basic", b"apr1:" + password, tls=False),
            Case("basic-bcrypt-5", "basic", b"bcrypt5:" + password, tls=False),
            Case("basic-bcrypt-12", "basic", b"bcrypt12:" + password, tls=False, share=10),
            Case("tls-cert", "tls", b"", tls=True, certificate=True),
        ]
        server = start(folder)
        results: dict[str, list[tuple[float, float]]] = {c.name: [] for c in cases}
        try:
            for repeat in range(args.repeats):
                order = cases if repeat % 2 == 0 else list(reversed(cases))
                for case in order:
                    results[case.name].append(measure(case, server, folder, args.connections))
        finally:
            server.stop()
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"{args.connections} connections x {args.repeats} repeats (medians)"
    )
    base = statistics.median(r for r, _ in results["none"])
    print("| case | connections/s | vs none | server CPU ms/connection |")
    print("|---|---|---|---|")
    for case in cases:
        rate = statistics.median(r for r, _ in results[case.name])
        cpu = statistics.median(c for _, c in results[case.name])
        print(f"| {case.name} | {rate:,.0f} | {rate / base:.2f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
