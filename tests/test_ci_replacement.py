"""Issue 26, the integrated check: ``mledger standalone`` replaces the Pulsar container in a
client's CI. One broker started from a config file that turns on TLS (both ports), the token,
basic and TLS providers and authorization; set up over REST as a CI script does (cluster,
tenant, a namespace whose ``auth_policies`` grant the roles); then a JWT client, an
``.htpasswd`` user, a TLS-certificate client and an anonymous client produce and consume, or are
refused, exactly as their grants say, over ``pulsar://``, ``pulsar+ssl://``, ``http://`` and
``https://`` service URLs. Tokens come from ``mledger tokens``; expired or wrongly signed ones
are refused."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from passlib.hash import apr_md5_crypt
from protocol_raw import RawClient
from test_authentication import created, tokens_cli
from test_standalone_tls import _cert, _key, _write_key

from mledger.codec.proto import PulsarApi_pb2 as api

pytestmark = pytest.mark.timeout(180)

LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
TOPIC = "persistent://ci/app/matrix"
SEED = b"seeded by the set-up"
JWT_ROLE, BASIC_USER, BASIC_PASSWORD, TLS_CN = "jwt-app", "reader", "reader-pw", "tls-writer"

# role -> (may produce, may consume) on TOPIC, from the auth_policies the set-up sends
GRANTS = {"jwt": (True, True), "basic": (False, True), "tls": (True, False), "anonymous": (False, False)}
PLAIN = ("pulsar", "http")
URLS = {"pulsar": "service_url", "pulsar+ssl": "service_url_tls", "http": "admin_url", "https": "admin_url_tls"}

CONF = """\
brokerServicePort=0
brokerServicePortTls=0
webServicePort=0
webServicePortTls=0
bindAddress=127.0.0.1
advertisedAddress=localhost
clusterName=standalone
tlsCertificateFilePath=conf/broker-cert.pem
tlsKeyFilePath=conf/broker-key.pem
tlsTrustCertsFilePath=conf/cacert.pem
anonymousUserRole=anonymous
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderTls,\\
    org.apache.pulsar.broker.authentication.AuthenticationProviderToken,\\
    org.apache.pulsar.broker.authentication.AuthenticationProviderBasic
authorizationEnabled=true
tokenSecretKey=file://{secret}
superUserRoles=superUser
allowAutoTopicCreation=true
"""


@dataclass
class Ci:
    """The running broker and the credentials a CI job holds."""

    urls: dict[str, str]
    conf: Path
    secret: Path
    jwt_token: str
    super_token: str
    proc: subprocess.Popen[str]


def _pki(conf: Path) -> None:
    """A CA, the broker's certificate (localhost, 127.0.0.1) and a client certificate whose CN,
    ``tls-writer``, is an ordinary role (not a superuser)."""
    ca_key = _key()
    ca = _cert("ci CA", ca_key, None, ca_key, ca=True)
    (conf / "cacert.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name, cn, server in (("broker", "localhost", True), ("client", TLS_CN, False)):
        key = _key()
        _write_key(key, conf / f"{name}-key.pem")
        cert = _cert(cn, key, ca.subject, ca_key, server=server)
        (conf / f"{name}-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _set_up(ci: Ci) -> None:
    """The CI script's calls, as the superuser over http: the cluster (409, it exists), the
    tenant, the namespace with its grants; then one message for the consumers to read."""
    admin = f"{ci.urls['admin_url']}/admin/v2"
    with httpx.Client(headers={"Authorization": f"Bearer {ci.super_token}"}, timeout=10) as http:
        cluster = {"serviceUrl": ci.urls["admin_url"], "brokerServiceUrl": ci.urls["service_url"]}
        assert http.put(f"{admin}/clusters/standalone", json=cluster).status_code == 409
        tenant = {"adminRoles": [], "allowedClusters": ["standalone"]}
        assert http.put(f"{admin}/tenants/ci", json=tenant).status_code == 204
        policies = {
            "auth_policies": {
                "namespace_auth": {JWT_ROLE: ["produce", "consume"], TLS_CN: ["produce"]},
                "destination_auth": {TOPIC: {BASIC_USER: ["consume"]}},
            },
            "replication_clusters": ["standalone"],
        }
        done = http.put(f"{admin}/namespaces/ci/app", json=policies)
        assert done.status_code == 204, done.text
        assert http.get(f"{admin}/namespaces/ci").json() == ["ci/app"]
    root = pulsar.Client(ci.urls["service_url"], authentication=pulsar.AuthenticationToken(ci.super_token), logger=LOG)
    try:
        root.create_producer(TOPIC).send(SEED)
    finally:
        root.close()


@pytest.fixture(scope="module")
def ci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ci]:
    root = tmp_path_factory.mktemp("ci")
    conf = root / "conf"
    conf.mkdir()
    _pki(conf)
    secret = root / "secret.key"
    assert tokens_cli("create-secret-key", "--output", str(secret)).returncode == 0
    jwt_token = created("--subject", JWT_ROLE, "--secret-key", f"file://{secret}")
    super_token = created("--subject", "superUser", "--secret-key", f"file://{secret}")
    (conf / ".htpasswd").write_text(f"{BASIC_USER}:{apr_md5_crypt.hash(BASIC_PASSWORD)}\n")
    (root / "standalone.conf").write_text(CONF.format(secret=secret))
    env = {**os.environ, "PULSAR_EXTRA_OPTS": "-Dpulsar.auth.basic.conf=conf/.htpasswd"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--config", "standalone.conf", "--memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(proc.communicate(timeout=30)[1])
    ci = Ci(json.loads(line), conf, secret, jwt_token, super_token, proc)
    try:
        _set_up(ci)
        yield ci
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err


def _auth(ci: Ci, identity: str) -> pulsar.Authentication | None:
    if identity == "jwt":
        return pulsar.AuthenticationToken(ci.jwt_token)
    if identity == "basic":
        return pulsar.AuthenticationBasic(BASIC_USER, BASIC_PASSWORD)
    if identity == "tls":
        return pulsar.AuthenticationTLS(str(ci.conf / "client-cert.pem"), str(ci.conf / "client-key.pem"))
    return None


def _client(ci: Ci, scheme: str, auth: pulsar.Authentication | None, timeout: int = 30) -> pulsar.Client:
    return pulsar.Client(
        ci.urls[URLS[scheme]],
        authentication=auth,
        tls_trust_certs_file_path=str(ci.conf / "cacert.pem"),
        tls_validate_hostname=True,
        operation_timeout_seconds=timeout,
        logger=LOG,
    )


def _refusal(identity: str, scheme: str) -> type[Exception]:
    """What the client raises for a refused operation. Over a plain URL the certificate client
    has no certificate to show: the binary protocol's CONNECT fails authentication (the C++
    client retries that until its operation timeout), and over ``http://`` it looks the topic up
    as ``anonymous``. A role with neither produce nor consume may not look the topic up, and the
    C++ client turns any HTTP lookup error into ConnectError; otherwise the broker answers the
    PRODUCER / SUBSCRIBE command with AuthorizationError."""
    if identity == "tls" and scheme == "pulsar":
        return pulsar.Timeout
    no_lookup = identity == "anonymous" or (identity == "tls" and scheme == "http")
    if no_lookup and scheme in ("http", "https"):
        return pulsar.ConnectError
    return pulsar.AuthorizationError


def _granted(identity: str, scheme: str) -> tuple[bool, bool]:
    """(may produce, may consume): the grants, where the client authenticates as its role."""
    if identity == "tls" and scheme in PLAIN:
        return False, False
    return GRANTS[identity]


@pytest.mark.parametrize("scheme", list(URLS))
@pytest.mark.parametrize("identity", list(GRANTS))
def test_each_identity_produces_and_consumes_as_granted(ci: Ci, identity: str, scheme: str) -> None:
    may_produce, may_consume = _granted(identity, scheme)
    refusal = _refusal(identity, scheme)
    # an expected Timeout needs a short operation timeout; anything else is answered at once and
    # gets a bound a loaded machine cannot reach (a slow answer must not turn into a Timeout)
    client = _client(ci, scheme, _auth(ci, identity), timeout=2 if refusal is pulsar.Timeout else 30)
    try:
        if may_produce:
            client.create_producer(TOPIC).send(f"{identity} over {scheme}".encode())
        else:
            with pytest.raises(refusal):
                client.create_producer(TOPIC)
        subscription = f"{identity}-{scheme}"
        if may_consume:
            consumer = client.subscribe(TOPIC, subscription, initial_position=pulsar.InitialPosition.Earliest)
            assert consumer.receive(30_000).data() == SEED
        else:
            with pytest.raises(refusal):
                client.subscribe(TOPIC, subscription)
    finally:
        client.close()


def _refused_token(ci: Ci, token: str, reason: str) -> None:
    """A token the broker cannot authenticate: CONNECT is answered ERROR AuthenticationError
    naming the reason, so the client over ``pulsar://`` (which retries that until its operation
    timeout) times out; over ``https://`` the HTTP lookup is 401, the client's ConnectError."""
    port = int(ci.urls["service_url"].rsplit(":", 1)[1])
    raw = RawClient(port, connect=False)
    try:
        connect = api.CommandConnect(client_version="ci", protocol_version=20)
        connect.auth_method_name, connect.auth_data = "token", token.encode()
        raw.send(api.BaseCommand(type=api.BaseCommand.CONNECT, connect=connect))
        reply = raw.next_command()
    finally:
        raw.close()
    assert reply.type == api.BaseCommand.ERROR and reply.error.error == api.AuthenticationError
    assert reason in reply.error.message
    for scheme, refusal in (("pulsar", pulsar.Timeout), ("https", pulsar.ConnectError)):
        client = _client(ci, scheme, pulsar.AuthenticationToken(token), timeout=2 if refusal is pulsar.Timeout else 30)
        try:
            with pytest.raises(refusal):
                client.create_producer(TOPIC)
        finally:
            client.close()
    reply = httpx.get(f"{ci.urls['admin_url']}/admin/v2/namespaces/ci", headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 401


def test_an_expired_token_is_refused(ci: Ci) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    token = jwt.encode({"sub": JWT_ROLE, "exp": past}, ci.secret.read_bytes(), algorithm="HS256")
    _refused_token(ci, token, "JWT expired at ")


def test_a_token_signed_with_another_key_is_refused(ci: Ci, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    assert tokens_cli("create-secret-key", "--output", str(other)).returncode == 0
    token = created("--subject", JWT_ROLE, "--secret-key", f"file://{other}")
    _refused_token(ci, token, "Signature verification failed")


def test_topic_grants_stay_on_their_topic(ci: Ci) -> None:
    """The basic user's consume is granted on one topic (``destination_auth``); the certificate
    client's produce on the namespace, so on any of its topics."""
    other = "persistent://ci/app/other"
    basic = _client(ci, "pulsar", _auth(ci, "basic"))
    try:
        with pytest.raises(pulsar.AuthorizationError):
            basic.subscribe(other, "s")
    finally:
        basic.close()
    tls = _client(ci, "pulsar+ssl", _auth(ci, "tls"))
    try:
        tls.create_producer(other).send(b"namespace grant")
    finally:
        tls.close()
