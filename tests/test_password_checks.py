"""Issue 31 item 1: password checks run off the event loop (a bounded pool: threads for bcrypt,
processes for the schemes that hold the GIL), failures are limited per (user, address) and per
address (a throttled CONNECT gets a wrong password's answer, REST 429 with Retry-After), and an
unknown user is checked against the file's costliest hash.

The load figures (a victim's produce p99 with one and four attackers, before and after) are in
``benchmarks/bench_auth.py --victim``; here the stall is made deterministic: the attacker's
verification blocks until the test lets it go, and the victim must be served meanwhile."""

from __future__ import annotations

import base64
import gc
import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest
from passlib.hash import apr_md5_crypt, bcrypt, des_crypt, sha512_crypt
from protocol_raw import RawClient

from mledger.admin import Authorization
from mledger.admin._authentication import AuthenticationError, AuthenticationSettings, Authenticator
from mledger.admin._failure_limiter import FailureLimiter, Outcome, address_key
from mledger.admin._password_pool import StoredHash, costliest
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import ProtocolConfig
from mledger.standalone import EmbeddedStandalone

pytestmark = pytest.mark.timeout(120)

WRONG = "Unable to authenticate: Unknown user or invalid password"
EVERYONE = Authorization({}, super_user_roles=["victim", "bc", "al", "al2"])


def htpasswd(tmp_path: Path, **passwords: str) -> str:
    """An .htpasswd of bcrypt users at cost 4 (fast); returns its path."""
    path = tmp_path / ".htpasswd"
    path.write_text("".join(f"{user}:{bcrypt.using(rounds=4).hash(pw)}\n" for user, pw in passwords.items()))
    return str(path)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def raw_connect(port: int, user: str, password: str, source: str = "127.0.0.1") -> api.BaseCommand:
    """CONNECT with basic credentials over a raw socket from ``source``; the server's reply."""
    raw = RawClient(port, connect=False, source=source, timeout=30)
    try:
        connect = api.CommandConnect(client_version="raw", protocol_version=20)
        connect.auth_method_name, connect.auth_data = "basic", f"{user}:{password}".encode()
        raw.send(api.BaseCommand(type=api.BaseCommand.CONNECT, connect=connect))
        return raw.next_command()
    finally:
        raw.close()


class BlockedVerification:
    """bcrypt's ``verify`` held for one password until :meth:`release` (other passwords pass)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, password: str) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        original = bcrypt.verify

        def verify(secret: str | bytes, hash: str | bytes, **kwargs: Any) -> bool:
            if secret in (password, password.encode()):
                self.entered.set()
                self.released.wait(60)
            return bool(original(secret, hash, **kwargs))

        monkeypatch.setattr(bcrypt, "verify", verify)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedStandalone]:
    settings = AuthenticationSettings(
        basic_auth_conf=htpasswd(tmp_path, victim="pw-victim", bc="pw-bc", al="pw-al", al2="pw-al2"),
        max_concurrent_password_checks=2,
        max_authentication_failures_per_user_per_ip=2,
        max_authentication_failures_per_ip=4,
    )
    config = ProtocolConfig(port=0, keep_alive_interval_seconds=1)
    with EmbeddedStandalone(authentication=settings, authorization=EVERYONE, protocol_config=config) as started:
        yield started


def test_a_password_check_stalls_no_other_client(broker: EmbeddedStandalone, monkeypatch: pytest.MonkeyPatch) -> None:
    """While an attacker's password is being verified, a connected producer is answered and
    a REST call needing no password too (today's main verifies on the loop: both wait); the
    attacker's connection outlives two keep-alive intervals and gets a wrong password's answer."""
    client = pulsar.Client(
        broker.service_url,
        authentication=pulsar.AuthenticationBasic("victim", "pw-victim"),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        producer = client.create_producer("victim", send_timeout_millis=10_000)
        producer.send(b"before")
        blocked = BlockedVerification(monkeypatch, "attack")
        attacker = RawClient(broker.port, connect=False, timeout=60)
        connect = api.CommandConnect(client_version="raw", protocol_version=20)
        connect.auth_method_name, connect.auth_data = "basic", b"bc:attack"
        attacker.send(api.BaseCommand(type=api.BaseCommand.CONNECT, connect=connect))
        try:
            assert blocked.entered.wait(30)
            producer.send(b"during")  # the loop is free: the receipt comes back
            metrics = httpx.get(f"{broker.admin_url}/metrics", timeout=10)
            assert metrics.status_code == 200
            time.sleep(2.5)  # two keep-alive passes: a connection waiting for its check is kept
        finally:
            blocked.release()
        reply = attacker.next_command()
        assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.AuthenticationError
        assert reply.error.message == WRONG
        attacker.close()
    finally:
        client.close()


def test_rest_password_check_stalls_no_other_request(
    broker: EmbeddedStandalone, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = BlockedVerification(monkeypatch, "attack")
    answers: list[int] = []
    base = f"{broker.admin_url}/admin/v2/persistent/public/default"
    attacker = threading.Thread(
        target=lambda: answers.append(
            httpx.get(base, headers={"Authorization": basic("bc", "attack")}, timeout=60).status_code
        )
    )
    attacker.start()
    try:
        assert blocked.entered.wait(30)
        assert httpx.get(f"{broker.admin_url}/metrics", timeout=10).status_code == 200
        assert httpx.get(base, timeout=10).status_code == 401  # no credentials: answered meanwhile
    finally:
        blocked.release()
        attacker.join(30)
    assert answers == [401]
    gc.collect()  # the refusal was read: asyncio has no "Future exception was never retrieved" to log
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_failures_are_limited_per_user_and_address_and_per_address(broker: EmbeddedStandalone) -> None:
    """Two failures of ``bc`` from 127.0.0.1: its right password is then refused there with the
    wrong password's answer, unverified, and REST answers 429 + Retry-After; from 127.0.0.2 the
    user still gets in (never per user alone). Four failures from 127.0.0.1 refuse any user there."""
    authenticator = broker.authenticator
    assert authenticator is not None
    for _ in range(2):
        reply = raw_connect(broker.port, "bc", "wrong")
        assert (reply.type, reply.error.error, reply.error.message) == (
            api.BaseCommand.ERROR,
            api.AuthenticationError,
            WRONG,
        )
    verified = authenticator.stats().verified["bcrypt"]  # type: ignore[union-attr]
    throttled = raw_connect(broker.port, "bc", "pw-bc")
    assert throttled == reply  # the same ERROR, field for field
    stats = authenticator.stats()
    assert stats is not None and stats.verified["bcrypt"] == verified and stats.refused == 1
    answer = httpx.get(f"{broker.admin_url}/admin/v2/tenants", headers={"Authorization": basic("bc", "pw-bc")})
    assert answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1
    assert "Too many failed authentication attempts" in answer.json()["reason"]
    assert raw_connect(broker.port, "bc", "pw-bc", source="127.0.0.2").type == api.BaseCommand.CONNECTED
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    assert (
        other.get(f"{broker.admin_url}/admin/v2/tenants", headers={"Authorization": basic("bc", "pw-bc")}).status_code
        == 200
    )
    # the address: 2 failures so far; another user gets in, then fails twice: 4, the limit
    assert raw_connect(broker.port, "al", "pw-al").type == api.BaseCommand.CONNECTED
    for _ in range(2):
        assert raw_connect(broker.port, "al", "wrong").error.message == WRONG
    assert raw_connect(broker.port, "al2", "pw-al2").error.message == WRONG  # a third user, same address
    assert raw_connect(broker.port, "al2", "pw-al2", source="127.0.0.2").type == api.BaseCommand.CONNECTED


# -- the unknown user's dummy check ---------------------------------------------------------------


def test_an_unknown_user_is_checked_against_the_costliest_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown user and a wrong password both run one verification of the file's costliest
    hash (bcrypt at cost 6 among APR1 and bcrypt 5): a refusal takes as long either way."""
    costly = bcrypt.using(rounds=6).hash("pw-b6")
    path = tmp_path / ".htpasswd"
    path.write_text(f"apr:{apr_md5_crypt.hash('pw-apr')}\nb5:{bcrypt.using(rounds=5).hash('pw-b5')}\nb6:{costly}\n")
    table = Authenticator.from_settings(AuthenticationSettings(basic_auth_conf=str(path)))
    seen: list[str] = []
    original = bcrypt.verify

    def verify(secret: str | bytes, hash: str | bytes, **kwargs: Any) -> bool:
        seen.append(hash.decode() if isinstance(hash, bytes) else hash)
        return bool(original(secret, hash, **kwargs))

    monkeypatch.setattr(bcrypt, "verify", verify)
    try:
        for credentials in (b"nobody:pw-b6", b"b6:wrong"):
            seen.clear()
            with pytest.raises(AuthenticationError, match="^Unknown user or invalid password$"):
                table.authenticate("basic", credentials)
            assert seen == [costly], credentials
        assert table.authenticate("basic", b"b6:pw-b6") == "b6"
    finally:
        table.close()


def test_costliest_hash_ranks_schemes_by_their_cost() -> None:
    parsed = {
        name: StoredHash.parse(text)
        for name, text in {
            "apr1": apr_md5_crypt.hash("x"),
            "des": des_crypt.hash("x"),
            "bcrypt5": bcrypt.using(rounds=5).hash("x"),
            "bcrypt12": "$2b$12$f1ZLFMj.u7tP3XiYYWVqau93RoxzfZdVJSBbrCOXJy2NvRD7C09D.",
            "sha512": sha512_crypt.using(rounds=5000).hash("x"),
            "plain": "not-a-hash",
        }.items()
    }
    assert [parsed[n].scheme for n in ("apr1", "des", "bcrypt5", "sha512", "plain")] == [
        "apr_md5_crypt",
        "des_crypt",
        "bcrypt",
        "sha512_crypt",
        "plaintext",
    ]
    assert costliest(parsed.values()) is parsed["bcrypt12"]
    assert costliest(p for n, p in parsed.items() if n != "bcrypt12") is parsed["sha512"]
    assert costliest([parsed["apr1"], parsed["des"], parsed["bcrypt5"]]) is parsed["bcrypt5"]
    assert costliest([]) is None
    # bcrypt (pyca/bcrypt releases the GIL) and plaintext on threads; passlib's pure Python in processes
    assert not parsed["bcrypt5"].in_process and not parsed["plain"].in_process
    assert parsed["apr1"].in_process and parsed["des"].in_process and parsed["sha512"].in_process


def test_gil_holding_schemes_are_verified_in_a_worker_process(tmp_path: Path) -> None:
    """APR1-MD5 is passlib's pure Python: verified in a spawned process (a thread would hold the
    GIL against the loop); the unknown user's dummy check runs there too. ``close`` returns once
    the worker has exited (the executor's manager thread has reaped it: the test must not join
    it too, for two threads reaping one process race on ``waitpid``)."""
    path = tmp_path / ".htpasswd"
    path.write_text(f"apr:{apr_md5_crypt.hash('pw-apr')}\n")
    table = Authenticator.from_settings(AuthenticationSettings(basic_auth_conf=str(path)))
    before = set(multiprocessing.active_children())
    try:
        assert table.authenticate("basic", b"apr:pw-apr") == "apr"
        for credentials in (b"apr:wrong", b"nobody:pw-apr"):
            with pytest.raises(AuthenticationError):
                table.authenticate("basic", credentials)
        stats = table.stats()
        assert stats is not None and dict(stats.verified) == {"apr_md5_crypt": 3} and stats.pending == 0
        workers = set(multiprocessing.active_children()) - before
        assert workers, "no worker process verified APR1"
    finally:
        table.close()
    assert not [worker for worker in workers if worker.is_alive()], "close() returned before its workers exited"


# -- the limiter, by itself (a clock the test moves) ----------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fail(limiter: FailureLimiter, user: str, address: str | None, times: int = 1) -> None:
    for _ in range(times):
        assert limiter.admit(user, address) == 0
        limiter.finish(user, address, Outcome.FAILED)


def test_limiter_leaks_one_failure_per_window_over_limit() -> None:
    clock = Clock()
    limiter = FailureLimiter(3, 0, 60, clock=clock)
    fail(limiter, "u", "10.0.0.1", 3)
    assert limiter.admit("u", "10.0.0.1") == 20  # one failure leaks every 60 / 3 s
    assert limiter.admit("v", "10.0.0.1") == 0  # per pair only: the address is not limited
    limiter.finish("v", "10.0.0.1", Outcome.SUCCEEDED)
    clock.now += 19.5
    assert limiter.admit("u", "10.0.0.1") == 1
    clock.now += 0.5
    assert limiter.admit("u", "10.0.0.1") == 0  # one more attempt...
    limiter.finish("u", "10.0.0.1", Outcome.FAILED)
    assert limiter.admit("u", "10.0.0.1") == 20  # ...and refused again
    assert limiter.refused == 3
    clock.now += 60
    fail(limiter, "u", "10.0.0.1", 3)  # drained: a full allowance again


def test_limiter_counts_checks_in_flight_and_forgives_a_success_per_pair_only() -> None:
    clock = Clock()
    limiter = FailureLimiter(2, 3, 60, clock=clock)
    assert limiter.admit("u", "10.0.0.1") == 0
    assert limiter.admit("u", "10.0.0.1") == 0
    assert limiter.admit("u", "10.0.0.1") > 0  # two running: a third could be a third failure
    limiter.finish("u", "10.0.0.1", Outcome.ABANDONED)  # neither way
    limiter.finish("u", "10.0.0.1", Outcome.FAILED)
    fail(limiter, "u", "10.0.0.1")
    assert limiter.admit("u", "10.0.0.1") > 0
    assert limiter.admit("w", "10.0.0.1") == 0  # address: 2 failures + this one < 3...
    limiter.finish("w", "10.0.0.1", Outcome.SUCCEEDED)  # ...a success forgives w's pair, not the address
    fail(limiter, "x", "10.0.0.1")
    assert limiter.admit("y", "10.0.0.1") > 0  # 3 failures from the address
    assert limiter.admit("u", "10.0.0.2") == 0  # the user is not locked out elsewhere
    limiter.finish("u", "10.0.0.2", Outcome.SUCCEEDED)
    clock.now += 1000
    assert limiter.admit("u", "10.0.0.1") == 0
    limiter.finish("u", "10.0.0.1", Outcome.SUCCEEDED)
    assert limiter.tracked == 1  # drained buckets are dropped as they are met: x's is left


def test_limiter_keys_ipv6_by_prefix_and_stays_bounded() -> None:
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff:2") == "2001:db8::/64"
    assert address_key("2001:db8:0:1::1") != address_key("2001:db8::1")
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_key(None) == "" and address_key("10.0.0.1") == "10.0.0.1"
    clock = Clock()
    limiter = FailureLimiter(1, 0, 60, clock=clock, max_tracked=10)
    for n in range(50):
        fail(limiter, f"user{n}", "10.0.0.1")
    assert limiter.tracked == 10  # the least recently touched went first
    assert limiter.admit("user49", "10.0.0.1") > 0 and limiter.admit("user0", "10.0.0.1") == 0
    limiter.finish("user0", "10.0.0.1", Outcome.SUCCEEDED)
    fail(limiter, "a", "2001:db8::1")
    assert limiter.admit("a", "2001:db8::2") > 0  # the same /64


def test_settings_are_checked() -> None:
    with pytest.raises(
        ValueError, match="max_concurrent_password_checks must be an integer in \\[1, 2147483647\\], got 0"
    ):
        AuthenticationSettings(max_concurrent_password_checks=0)
    with pytest.raises(ValueError, match="authentication_failure_window_seconds"):
        AuthenticationSettings(authentication_failure_window_seconds=0)
    assert AuthenticationSettings(max_authentication_failures_per_ip=0).max_authentication_failures_per_ip == 0
