"""Issue 26 item 3: authentication providers chosen by the auth method (token: literal and JWT,
basic: htpasswd, tls: CN, the anonymous role), one identity table for the protocol server and
REST, and ``mledger tokens`` as ``pulsar tokens``."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from passlib.hash import apr_md5_crypt, bcrypt, des_crypt

from mledger import ConfigError
from mledger.admin import Authorization
from mledger.admin._authentication import (
    NO_PROVIDER,
    AuthenticationError,
    AuthenticationSettings,
    Authenticator,
    basic_auth_conf_from_env,
    common_name,
)
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.standalone import EmbeddedStandalone

RECEIVE_MS = 10_000
EVERYONE = Authorization({"app": {"public/default": ["produce", "consume", "lookup"]}}, super_user_roles=["root"])


def tokens_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``mledger tokens ...`` in a subprocess, as a CI set-up script runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mledger.cli", "tokens", *args], capture_output=True, timeout=60, check=False
    )


def created(*args: str) -> str:
    done = tokens_cli("create", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A secret key and RS256 / ES256 key pairs, made by ``mledger tokens``."""
    root = tmp_path_factory.mktemp("keys")
    out = {"secret": root / "secret.key"}
    assert tokens_cli("create-secret-key", "--output", str(out["secret"])).returncode == 0
    for alg in ("RS256", "ES256"):
        private, public = root / f"{alg}.private", root / f"{alg}.public"
        done = tokens_cli(
            "create-key-pair",
            "--signature-algorithm",
            alg,
            "--output-private-key",
            str(private),
            "--output-public-key",
            str(public),
        )
        assert done.returncode == 0, done.stderr
        out[f"{alg}.private"], out[f"{alg}.public"] = private, public
    return out


def roundtrip(broker: EmbeddedStandalone, auth: pulsar.Authentication | None, topic: str) -> None:
    client = pulsar.Client(
        broker.service_url,
        authentication=auth,
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"hello")
        assert consumer.receive(RECEIVE_MS).data() == b"hello"
    finally:
        client.close()


def refused(broker: EmbeddedStandalone, auth: pulsar.Authentication | None) -> None:
    """The client cannot connect (the C++ client retries an AuthenticationError until its
    operation timeout; the reply itself is checked in test_refusals_answer_pulsars_error)."""
    client = pulsar.Client(
        broker.service_url,
        authentication=auth,
        operation_timeout_seconds=2,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("refused")
    finally:
        client.close()


@pytest.fixture
def jwt_broker(keys: dict[str, Path]) -> Iterator[EmbeddedStandalone]:
    settings = AuthenticationSettings(token_secret_key=f"file://{keys['secret']}")
    with EmbeddedStandalone(authentication=settings, authorization=EVERYONE) as broker:
        yield broker


# -- token ---------------------------------------------------------------------------------------


def test_hs256_token_from_mledger_tokens_is_accepted(jwt_broker: EmbeddedStandalone, keys: dict[str, Path]) -> None:
    token = created("--subject", "app", "--secret-key", f"file://{keys['secret']}", "--expiry-time", "1d")
    roundtrip(jwt_broker, pulsar.AuthenticationToken(token), "hs256")


def test_http_lookup_needs_produce_or_consume_only(keys: dict[str, Path]) -> None:
    """A role granted produce and consume (no LOOKUP) looks topics up over HTTP as over the binary
    protocol (Pulsar's canLookup: produce or consume), as pulsar-client-python's test_token_auth
    does with an http:// service URL; the lookup was 403 and the client's subscribe a ConnectError."""
    auth = Authorization({"app": {"public/default": ["produce", "consume"]}})
    settings = AuthenticationSettings(token_secret_key=f"file://{keys['secret']}")
    token = created("--subject", "app", "--secret-key", f"file://{keys['secret']}")
    with EmbeddedStandalone(authentication=settings, authorization=auth) as broker:
        client = pulsar.Client(
            broker.admin_url,
            authentication=pulsar.AuthenticationToken(token),
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            consumer = client.subscribe("http-lookup", "s")
            client.create_producer("http-lookup").send(b"hello")
            assert consumer.receive(RECEIVE_MS).data() == b"hello"
        finally:
            client.close()


def test_an_unknown_tenant_is_topic_not_found_before_any_permission(keys: dict[str, Path]) -> None:
    """Pulsar checks the topic's tenant before the role's grants: a producer or consumer on a
    tenant that does not exist gets TopicNotFound, not AuthorizationError, whatever the role
    (pulsar-client-python's asyncio_test test_create_producer_failure)."""
    auth = Authorization({"app": {"public/default": ["produce", "consume"]}})
    settings = AuthenticationSettings(token_secret_key=f"file://{keys['secret']}")
    token = created("--subject", "app", "--secret-key", f"file://{keys['secret']}")
    with EmbeddedStandalone(authentication=settings, authorization=auth) as broker:
        client = pulsar.Client(
            broker.service_url,
            authentication=pulsar.AuthenticationToken(token),
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            with pytest.raises(pulsar.TopicNotFound):
                client.create_producer("persistent://no-such-tenant/ns/t")
            with pytest.raises(pulsar.TopicNotFound):
                client.subscribe("persistent://no-such-tenant/ns/t", "s")
            with pytest.raises(pulsar.AuthorizationError):  # a tenant that exists: the grants decide
                client.create_producer("persistent://sample/ns1/t")
        finally:
            client.close()


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_public_key_tokens_are_accepted(keys: dict[str, Path], alg: str) -> None:
    public = base64.b64encode(keys[f"{alg}.public"].read_bytes()).decode()
    settings = AuthenticationSettings(token_public_key=f"data:;base64,{public}")
    token = created("--subject", "app", "--private-key", f"file://{keys[f'{alg}.private']}")
    assert jwt.get_unverified_header(token)["alg"] == alg
    with EmbeddedStandalone(authentication=settings, authorization=EVERYONE) as broker:
        roundtrip(broker, pulsar.AuthenticationToken(token), alg.lower())
        refused(broker, pulsar.AuthenticationToken(created("--subject", "app", "--secret-key", str(keys["secret"]))))


def test_expired_and_wrongly_signed_tokens_are_refused(jwt_broker: EmbeddedStandalone, keys: dict[str, Path]) -> None:
    secret = keys["secret"].read_bytes()
    expired = jwt.encode({"sub": "app", "exp": int(time.time()) - 60}, secret, algorithm="HS256")
    forged = jwt.encode({"sub": "app"}, b"another secret of thirty-two bytes!", algorithm="HS256")
    refused(jwt_broker, pulsar.AuthenticationToken(expired))
    refused(jwt_broker, pulsar.AuthenticationToken(forged))
    table = Authenticator.from_settings(AuthenticationSettings(token_secret_key=f"file://{keys['secret']}"))
    with pytest.raises(AuthenticationError, match="^Failed to authentication token: JWT expired at "):
        table.authenticate("token", expired)
    with pytest.raises(AuthenticationError, match="^Failed to authentication token: Signature verification failed"):
        table.authenticate("token", forged)


def test_token_auth_claim_and_literal_tokens_share_the_method(keys: dict[str, Path], tmp_path: Path) -> None:
    token_file = tmp_path / "tokens.json"
    token_file.write_text('{"plain-token": "ops"}')
    table = Authenticator.from_settings(
        AuthenticationSettings(
            token_file=str(token_file),
            token_secret_key=base64.b64encode(keys["secret"].read_bytes()).decode(),
            token_auth_claim="role",
        )
    )
    assert table.authenticate("token", b"plain-token") == "ops"
    assert table.authenticate("token", jwt.encode({"role": "r1"}, keys["secret"].read_bytes())) == "r1"
    with pytest.raises(AuthenticationError, match="no 'role' claim"):
        table.authenticate("token", jwt.encode({"sub": "r1"}, keys["secret"].read_bytes()))


def test_bad_key_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token_secret_key: cannot read"):
        Authenticator.from_settings(AuthenticationSettings(token_secret_key=f"file://{tmp_path}/missing"))
    with pytest.raises(ConfigError, match="token_public_key is not an X.509 public key"):
        Authenticator.from_settings(AuthenticationSettings(token_public_key="data:;base64,AAAA"))
    with pytest.raises(ConfigError, match="unknown authentication provider 'kerberos'"):
        Authenticator.from_settings(AuthenticationSettings(authentication_providers=("kerberos",)))


# -- basic ---------------------------------------------------------------------------------------


def htpasswd(tmp_path: Path) -> Path:
    path = tmp_path / ".htpasswd"
    path.write_text(
        f"apr:{apr_md5_crypt.hash('pw-apr')}\n"
        f"bc:{bcrypt.using(ident='2y').hash('pw-bc')}\n"
        f"des:{des_crypt.hash('pw-des')}\n"
    )
    return path


def test_basic_htpasswd_apr1_bcrypt_crypt(tmp_path: Path, pulsar_broker_factory: Callable[..., Any]) -> None:
    auth = Authorization({role: {"public/default": ["produce", "consume"]} for role in ("apr", "bc", "des")})
    settings = AuthenticationSettings(basic_auth_conf=str(htpasswd(tmp_path)))
    broker = pulsar_broker_factory(authentication=settings, authorization=auth)  # the fixture takes them too
    for user in ("apr", "bc", "des"):
        roundtrip(broker, pulsar.AuthenticationBasic(user, f"pw-{user}"), f"basic-{user}")
    base = f"{broker.admin_url}/admin/v2/persistent/public/default"
    good = base64.b64encode(b"apr:pw-apr").decode()
    bad = base64.b64encode(b"apr:nope").decode()
    assert httpx.get(base, headers={"Authorization": f"Basic {good}"}).status_code == 200
    assert httpx.get(base, headers={"Authorization": f"Basic {bad}"}).status_code == 401
    assert httpx.get(base, headers={"Authorization": "Bearer some-token"}).status_code == 401  # no token provider
    # last: the C++ client retries a refused CONNECT, soon throttled (test_password_checks.py)
    refused(broker, pulsar.AuthenticationBasic("apr", "wrong"))
    refused(broker, pulsar.AuthenticationBasic("nobody", "pw-apr"))


def test_basic_conf_from_pulsar_extra_opts(tmp_path: Path) -> None:
    path = htpasswd(tmp_path)
    environ = {"PULSAR_EXTRA_OPTS": f"-Xmx1g -Dpulsar.auth.basic.conf={path}"}
    assert basic_auth_conf_from_env(environ) == str(path)
    table = Authenticator.from_settings(AuthenticationSettings(environ=environ))
    assert table.methods == {"basic"}
    assert table.authenticate("basic", b"bc:pw-bc") == "bc"
    with pytest.raises(AuthenticationError, match="^Unknown user or invalid password$"):
        table.authenticate("basic", b"bc:pw-apr")


# -- anonymous, unknown method, TLS ----------------------------------------------------------------


def test_anonymous_client_with_and_without_anonymous_user_role(
    jwt_broker: EmbeddedStandalone, keys: dict[str, Path]
) -> None:
    refused(jwt_broker, None)
    assert httpx.get(f"{jwt_broker.admin_url}/admin/v2/persistent/public/default").status_code == 401
    settings = AuthenticationSettings(token_secret_key=f"file://{keys['secret']}", anonymous_user_role="app")
    with EmbeddedStandalone(authentication=settings, authorization=EVERYONE) as broker:
        roundtrip(broker, None, "anonymous")
        # credentials of a configured method are still checked: a bad token is not anonymous
        refused(broker, pulsar.AuthenticationToken("not-a-jwt"))
        base = f"{broker.admin_url}/admin/v2/persistent/public/default"
        assert httpx.get(base).status_code == 200  # the anonymous role "app" may list
        assert httpx.put(f"{base}/anon").status_code == 403  # but not create


@pytest.mark.parametrize("case", ["unknown-method", "expired", "forged", "no-credentials"])
def test_refusals_answer_pulsars_error(keys: dict[str, Path], case: str) -> None:
    """CONNECT refused: ERROR AuthenticationError "Unable to authenticate: <provider's reason>",
    then the connection closes (Pulsar's ServerCnx; its AuthenticationService for a method no
    provider answers)."""
    from test_protocol_session import Host, frame, replies

    from mledger.protocol import ClientAuth
    from mledger.protocol._session import Session

    secret = keys["secret"].read_bytes()
    method, data, reason = {
        "unknown-method": ("kerberos", b"x", NO_PROVIDER),
        "no-credentials": (None, None, NO_PROVIDER),
        "expired": (
            "token",
            jwt.encode({"sub": "a", "exp": 1}, secret).encode(),
            "Failed to authentication token: JWT expired at 1970-01-01T00:00:01Z",
        ),
        "forged": (
            "token",
            jwt.encode({"sub": "a"}, b"y" * 32).encode(),
            "Failed to authentication token: Signature verification failed",
        ),
    }[case]
    table = Authenticator.from_settings(AuthenticationSettings(token_secret_key=f"file://{keys['secret']}"))
    host = Host()
    host.auth = ClientAuth(table)  # type: ignore[assignment]
    session = Session(host, "test:1")
    connect = api.CommandConnect(client_version="t", protocol_version=20)
    if method is not None:
        connect.auth_method_name, connect.auth_data = method, data
    session.data_received(frame(api.BaseCommand(type=api.BaseCommand.CONNECT, connect=connect)))
    [(reply, _)] = replies(session)
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.AuthenticationError
    assert reply.error.message.startswith(f"Unable to authenticate: {reason}")
    assert host.closing == [session]


def test_tls_hook_takes_the_certificate_cn() -> None:
    table = Authenticator.from_settings(AuthenticationSettings(authentication_providers=("tls",)))
    peer = ((("countryName", "US"),), (("commonName", "client-app"),))
    assert common_name("CN=client-app,O=acme") == "client-app"
    assert table.authenticate_tls(peer) == "client-app"
    assert table.authenticate_http(None, "CN=client-app,O=acme") == "client-app"
    with pytest.raises(AuthenticationError, match="TLS"):
        table.authenticate_tls("O=acme")


# -- REST ----------------------------------------------------------------------------------------


def test_rest_bearer_jwt(jwt_broker: EmbeddedStandalone, keys: dict[str, Path]) -> None:
    base = f"{jwt_broker.admin_url}/admin/v2/persistent/public/default"
    root = created("--subject", "root", "--secret-key", f"file://{keys['secret']}")
    assert httpx.put(f"{base}/rest-jwt", headers={"Authorization": f"Bearer {root}"}).status_code == 204
    forged = jwt.encode({"sub": "root"}, b"x" * 32, algorithm="HS256")
    answer = httpx.get(base, headers={"Authorization": f"Bearer {forged}"})
    assert answer.status_code == 401 and answer.json() == {"reason": "Authentication required"}
    assert httpx.get(base).status_code == 401


# -- mledger tokens ------------------------------------------------------------------------------


def test_tokens_secret_key_raw_and_base64(tmp_path: Path) -> None:
    raw, text = tmp_path / "raw.key", tmp_path / "b64.key"
    assert tokens_cli("create-secret-key", "--output", str(raw)).returncode == 0
    assert tokens_cli("create-secret-key", "--output", str(text), "--base64").returncode == 0
    assert len(raw.read_bytes()) == 32
    assert len(base64.b64decode(text.read_bytes(), validate=True)) == 32


def test_tokens_key_pair_is_der(keys: dict[str, Path]) -> None:
    for alg in ("RS256", "ES256"):
        serialization.load_der_private_key(keys[f"{alg}.private"].read_bytes(), password=None)
        serialization.load_der_public_key(keys[f"{alg}.public"].read_bytes())


def test_tokens_create_show_validate(keys: dict[str, Path], tmp_path: Path) -> None:
    before = int(time.time())  # the CLI's own reading lies between these two
    token = created("--subject", "alice", "--secret-key", f"file://{keys['secret']}", "--expiry-time", "2h")
    after = time.time()
    shown = tokens_cli("show", token)
    assert shown.returncode == 0
    assert b'"alg": "HS256"' in shown.stdout and b'"sub": "alice"' in shown.stdout
    body = jwt.decode(token, options={"verify_signature": False})
    assert before + 7200 <= body["exp"] <= after + 7200  # two hours after it was created
    ok = tokens_cli("validate", token, "--secret-key", f"file://{keys['secret']}")
    assert ok.returncode == 0 and b'"sub": "alice"' in ok.stdout
    (tmp_path / "token").write_text(token)
    wrong = tokens_cli("validate", "--token-file", str(tmp_path / "token"), "--public-key", str(keys["RS256.public"]))
    assert wrong.returncode == 1 and b"Failed to authentication token" in wrong.stderr
    bad_time = tokens_cli("create", "--subject", "a", "--secret-key", str(keys["secret"]), "--expiry-time", "soon")
    assert bad_time.returncode == 2 and b"invalid relative time 'soon'" in bad_time.stderr


# -- the server flags ----------------------------------------------------------------------------


def test_standalone_flags_token_secret_key_basic_from_pulsar_extra_opts(keys: dict[str, Path], tmp_path: Path) -> None:
    """``mledger standalone --token-secret-key file://... --authorization F`` with basic auth from
    ``PULSAR_EXTRA_OPTS``, as a CI job that replaced the Pulsar container starts it."""
    authorization = tmp_path / "auth.json"
    authorization.write_text(json.dumps({"superUserRoles": ["root", "bc"]}))
    env = {**os.environ, "PULSAR_EXTRA_OPTS": f"-Dpulsar.auth.basic.conf={htpasswd(tmp_path)}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mledger.cli",
            "standalone",
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
            "--memory",
            "--token-secret-key",
            f"file://{keys['secret']}",
            "--authorization",
            str(authorization),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        urls = json.loads(proc.stdout.readline())
        root = created("--subject", "root", "--secret-key", f"file://{keys['secret']}")
        # with authorization on, only the cluster is pre-created (issue 26 item 4): set up as CI does
        admin, as_root = urls["admin_url"] + "/admin/v2", {"Authorization": f"Bearer {root}"}
        tenant = {"adminRoles": [], "allowedClusters": ["standalone"]}
        assert httpx.put(f"{admin}/tenants/public", json=tenant, headers=as_root).status_code == 204
        assert httpx.put(f"{admin}/namespaces/public/default", headers=as_root).status_code == 204
        for auth in (pulsar.AuthenticationToken(root), pulsar.AuthenticationBasic("bc", "pw-bc")):
            client = pulsar.Client(
                urls["service_url"],
                authentication=auth,
                operation_timeout_seconds=10,
                logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            )
            consumer = client.subscribe("flags", "s")
            client.create_producer("flags").send(b"x")
            assert consumer.receive(RECEIVE_MS).data() == b"x"
            client.close()
        base = f"{urls['admin_url']}/admin/v2/persistent/public/default"
        assert httpx.get(base, headers={"Authorization": f"Bearer {root}"}).status_code == 200
        assert httpx.get(base).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_standalone_refuses_authorization_without_authentication(tmp_path: Path) -> None:
    authorization = tmp_path / "auth.json"
    authorization.write_text('{"superUserRoles": ["root"]}')
    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--authorization", str(authorization)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PULSAR_EXTRA_OPTS"},
    )
    assert done.returncode == 2 and "--authorization needs authentication" in done.stderr


def test_admin_serve_basic_auth_conf(tmp_path: Path) -> None:
    """``mledger-admin serve --basic-auth-conf F --auth-file A``: REST Basic through the same table;
    without ``--auth-file`` it refuses to start (exit 2)."""
    admin = [sys.executable, "-m", "mledger.cli._admin", "serve", "--data-dir", str(tmp_path / "data")]
    conf = str(htpasswd(tmp_path))
    done = subprocess.run(
        [*admin, "--bind", "127.0.0.1:0", "--basic-auth-conf", conf], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "without an authorization file (--auth-file)" in done.stderr
    auth_file = tmp_path / "auth.json"
    auth_file.write_text('{"superUserRoles": ["des"]}')
    proc = subprocess.Popen(
        [*admin, "--bind", "127.0.0.1:0", "--basic-auth-conf", conf, "--auth-file", str(auth_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[2]
        topics = f"{url}/admin/v2/persistent/public/default/served"
        des = "Basic " + base64.b64encode(b"des:pw-des").decode()
        apr = "Basic " + base64.b64encode(b"apr:pw-apr").decode()
        assert httpx.put(topics, headers={"Authorization": des}).status_code == 204
        assert httpx.put(topics + "-2", headers={"Authorization": apr}).status_code == 403
        assert httpx.put(topics + "-3").status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_token_audience(keys: dict[str, Path]) -> None:
    secret = keys["secret"].read_bytes()
    table = Authenticator.from_settings(
        AuthenticationSettings(token_secret_key=f"file://{keys['secret']}", token_audience="broker")
    )
    assert table.authenticate("token", jwt.encode({"sub": "a", "aud": ["x", "broker"]}, secret)) == "a"
    with pytest.raises(AuthenticationError, match="'aud' claim does not contain 'broker'"):
        table.authenticate("token", jwt.encode({"sub": "a", "aud": "other"}, secret))
