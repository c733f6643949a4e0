"""Connections authenticated per second by each provider of ``mledger standalone``.

    python benchmarks/bench_auth.py [--connections 200] [--repeats 3]

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
server's CPU per connection (its threads' run time, see :meth:`Server.cpu`). The machine is shared: single runs drift.
"""

from __future__ import annotations

import argparse
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

import psutil
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from passlib.hash import apr_md5_crypt, bcrypt

from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol._codec import decode_command
from mledger.protocol._framing import FrameDecoder, encode_frame

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


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    tls_port: int

    def cpu(self) -> float:
        """Server CPU seconds: the threads' run time from ``/proc/PID/task/*/schedstat``
        (nanoseconds; the server's threads live as long as it does) where Linux has it, else
        ``psutil``'s user + system, whose 10 ms ticks are coarse for a few hundred connections."""
        tasks = Path(f"/proc/{self.proc.pid}/task")
        if tasks.is_dir():
            total = 0
            for task in tasks.iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0])
                except (FileNotFoundError, ProcessLookupError):
                    continue  # a thread that ended between the listing and the read
            return total / 1e9
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=30)


def start(folder: Path) -> Server:
    (folder / "standalone.conf").write_text(CONF.format(secret=folder / "secret.key"))
    env = {**os.environ, "PULSAR_EXTRA_OPTS": f"-Dpulsar.auth.basic.conf={folder / '.htpasswd'}"}
    with open(folder / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mledger.cli", "standalone", "--config", "standalone.conf", "--memory"],
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
        raise SystemExit((folder / "server.log").read_text())
    urls = json.loads(line)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
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
