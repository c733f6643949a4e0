"""``mledger standalone --config`` with TLS: ``pulsar+ssl://`` on ``brokerServicePortTls`` and
``https://`` on ``webServicePortTls``, the real client (``use_tls``, ``tls_trust_certs_file_path``,
``tls_validate_hostname``), client certificates verified against the trust file and taken as
the role by the ``tls`` provider. The configuration is the shape of pulsar-client-python's
``tests/test-conf/standalone-ssl.conf``; certificates are made here (no network)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pulsar
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mledger import ConfigError
from mledger.admin._authentication import common_name
from mledger.core import TlsSettings
from mledger.core._tls import parse_subject_name, server_context, subject_name

pytestmark = pytest.mark.timeout(180)

LOG = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


# -- certificates --------------------------------------------------------------------------------


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
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
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(signer, hashes.SHA256())


@dataclass
class Pki:
    ca: Path
    other_ca: Path
    client_cert: Path
    client_key: Path
    untrusted_cert: Path
    untrusted_key: Path


def make_pki(folder: Path) -> Pki:
    """A CA, the broker's certificate (localhost, 127.0.0.1) and key as ``broker-cert.pem`` /
    ``broker-key.pem``, a client certificate with CN ``admin``, and a second CA with a client of
    its own that the broker does not trust."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca = _cert("mledger test CA", ca_key, None, ca_key, ca=True)
    other = _cert("another CA", other_key, None, other_key, ca=True)
    (folder / "cacert.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "other-ca.pem").write_bytes(other.public_bytes(serialization.Encoding.PEM))
    for name, cn, issuer, signer, server in (
        ("broker", "localhost", ca, ca_key, True),
        ("client", "admin", ca, ca_key, False),
        ("untrusted", "admin", other, other_key, False),
    ):
        key = _key()
        _write_key(key, folder / f"{name}-key.pem")
        cert = _cert(cn, key, issuer.subject, signer, server=server)
        (folder / f"{name}-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Pki(
        folder / "cacert.pem",
        folder / "other-ca.pem",
        folder / "client-cert.pem",
        folder / "client-key.pem",
        folder / "untrusted-cert.pem",
        folder / "untrusted-key.pem",
    )


# -- the broker ----------------------------------------------------------------------------------


def ssl_conf(require_client_cert: bool) -> str:
    """standalone-ssl.conf's keys (relative file paths, as in the client's test set-up), ports 0."""
    return f"""\
zookeeperServers=
configurationStoreServers=
brokerServicePort=0
brokerServicePortTls=0
webServicePort=0
webServicePortTls=0
bindAddress=127.0.0.1
advertisedAddress=localhost
clusterName=standalone
brokerDeleteInactiveTopicsEnabled=true
brokerDeleteInactiveTopicsFrequencySeconds=60
tlsEnabled=true
tlsCertificateFilePath=test-conf/broker-cert.pem
tlsKeyFilePath=test-conf/broker-key.pem
tlsTrustCertsFilePath=test-conf/cacert.pem
tlsAllowInsecureConnection=false
tlsRequireTrustedClientCertOnConnect={str(require_client_cert).lower()}
anonymousUserRole=anonymous
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderTls,\\
    org.apache.pulsar.broker.authentication.AuthenticationProviderToken
authorizationEnabled=true
tokenSecretKey=file://test-conf/secret.key
superUserRoles=localhost,superUser,admin
maxMessageSize=1024000
loadBalancerEnabled=false
"""


@dataclass
class Broker:
    urls: dict[str, str]
    pki: Pki
    proc: subprocess.Popen[str]


def start(tmp_path: Path, require_client_cert: bool = False) -> Broker:
    pki = make_pki(tmp_path / "test-conf")
    (tmp_path / "test-conf" / "secret.key").write_bytes(b"s" * 32)
    (tmp_path / "standalone-ssl.conf").write_text(ssl_conf(require_client_cert))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--config", "standalone-ssl.conf", "--memory"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(proc.communicate(timeout=30)[1])
    broker = Broker(json.loads(line), pki, proc)
    set_up_namespace(broker)
    return broker


def set_up_namespace(broker: Broker) -> None:
    """What a CI set-up script does once the broker answers: with authorization on, Pulsar's
    standalone creates only its cluster, so the superuser (the client certificate's CN) creates
    the tenant and the namespace over https."""
    context = ssl.create_default_context(cafile=str(broker.pki.ca))
    context.load_cert_chain(str(broker.pki.client_cert), str(broker.pki.client_key))
    admin = f"{broker.urls['admin_url_tls']}/admin/v2"
    with httpx.Client(verify=context, timeout=10) as http:
        assert http.put(f"{admin}/tenants/public", json={"allowedClusters": ["standalone"]}).status_code == 204
        assert http.put(f"{admin}/namespaces/public/default").status_code == 204


def stop(broker: Broker) -> str:
    """Stop the broker; its stderr."""
    broker.proc.send_signal(signal.SIGTERM)
    _, err = broker.proc.communicate(timeout=30)
    assert broker.proc.returncode == 0, err
    return err


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[Broker]:
    broker = start(tmp_path)
    yield broker
    stop(broker)


def client(broker: Broker, trust: Path, certificate: bool, **options: object) -> pulsar.Client:
    auth = pulsar.AuthenticationTLS(str(broker.pki.client_cert), str(broker.pki.client_key)) if certificate else None
    return pulsar.Client(
        broker.urls["service_url_tls"],
        authentication=auth,
        use_tls=True,
        tls_trust_certs_file_path=str(trust),
        tls_validate_hostname=True,
        operation_timeout_seconds=5,
        logger=LOG,
        **options,  # type: ignore[arg-type]
    )


# -- tests ---------------------------------------------------------------------------------------


def test_tls_client_produces_and_consumes_as_its_certificates_cn(tls_broker: Broker) -> None:
    assert tls_broker.urls["service_url_tls"].startswith("pulsar+ssl://localhost:")
    # advertisedAddress=localhost: the https URL printed at start is the one the certificate verifies
    assert tls_broker.urls["admin_url_tls"].startswith("https://localhost:")
    c = client(tls_broker, tls_broker.pki.ca, certificate=True)
    try:
        consumer = c.subscribe("persistent://public/default/tls", "s")
        producer = c.create_producer("persistent://public/default/tls")
        for i in range(5):
            producer.send(b"%d" % i)
        assert [consumer.receive(5000).data() for _ in range(5)] == [b"%d" % i for i in range(5)]
    finally:
        c.close()


def test_tls_client_without_a_certificate_is_the_anonymous_role(tls_broker: Broker) -> None:
    """Certificates are optional here: a client without one connects, as ``anonymous``, which is
    no superuser: the certificate's CN (``admin``) is what made the other client one."""
    c = client(tls_broker, tls_broker.pki.ca, certificate=False)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer("persistent://public/default/tls-anonymous")
    finally:
        c.close()


def test_a_bad_trust_file_fails_the_handshake(tls_broker: Broker) -> None:
    c = client(tls_broker, tls_broker.pki.other_ca, certificate=True)
    try:
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
            c.create_producer("persistent://public/default/tls-untrusted")
    finally:
        c.close()


def test_https_admin_with_the_ca_and_client_certificate(tls_broker: Broker) -> None:
    pki = tls_broker.pki
    base = f"{tls_broker.urls['admin_url_tls']}/admin/v2/persistent/public/default"
    with httpx.Client(verify=ssl.create_default_context(cafile=str(pki.ca)), timeout=10) as anonymous:
        assert anonymous.get(f"{tls_broker.urls['admin_url_tls']}/admin/v2/clusters").json() == ["standalone"]
        assert anonymous.get(base).status_code in (401, 403)
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    with httpx.Client(verify=context, timeout=10) as admin:
        assert admin.get(base).status_code == 200  # the certificate's CN, admin, is a superuser
    with httpx.Client(verify=ssl.create_default_context(cafile=str(pki.other_ca)), timeout=10) as wrong:
        with pytest.raises(httpx.ConnectError):
            wrong.get(base)
    # plain pulsar:// and http:// still answer beside the TLS ports
    assert httpx.get(f"{tls_broker.urls['admin_url']}/admin/v2/clusters").json() == ["standalone"]


def test_required_client_certificates(tmp_path: Path) -> None:
    broker = start(tmp_path, require_client_cert=True)
    pki = broker.pki
    try:
        refused = client(broker, pki.ca, certificate=False)
        try:
            with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
                refused.create_producer("persistent://public/default/tls-required")
        finally:
            refused.close()
        accepted = client(broker, pki.ca, certificate=True)
        try:
            accepted.create_producer("persistent://public/default/tls-required").send(b"x")
        finally:
            accepted.close()
        with httpx.Client(verify=ssl.create_default_context(cafile=str(pki.ca)), timeout=10) as no_cert:
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                no_cert.get(f"{broker.urls['admin_url_tls']}/admin/v2/clusters")
        untrusted = ssl.create_default_context(cafile=str(pki.ca))
        untrusted.load_cert_chain(str(pki.untrusted_cert), str(pki.untrusted_key))
        with httpx.Client(verify=untrusted, timeout=10) as other:
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                other.get(f"{broker.urls['admin_url_tls']}/admin/v2/clusters")
    finally:
        err = stop(broker)
    # the keys mledger does not model are listed once, at start-up
    listed = [line for line in err.splitlines() if "not modeled by mledger (ignored)" in line]
    assert len(listed) == 1
    # zookeeperServers is empty (nothing to ignore); brokerDeleteInactiveTopicsEnabled is modelled
    for key, count in (
        ("zookeeperServers", 0),
        ("brokerDeleteInactiveTopicsEnabled", 0),
        ("tlsEnabled", 1),
        ("loadBalancerEnabled", 1),
    ):
        assert listed[0].count(key) == count, key


# -- the pieces ----------------------------------------------------------------------------------


def test_subject_names_round_trip_with_escapes() -> None:
    subject = ((("countryName", "NL"),), (("organizationName", "Acme, Inc."),), (("commonName", "svc+1"),))
    name = subject_name(subject)
    assert name == "CN=svc\\+1,O=Acme\\, Inc.,C=NL"
    assert parse_subject_name(name) == [("CN", "svc+1"), ("O", "Acme, Inc."), ("C", "NL")]
    assert common_name(name) == common_name(subject) == "svc+1"
    assert subject_name(None) is None and subject_name(()) is None


def test_tls_settings_are_checked_before_anything_listens(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    with pytest.raises(ConfigError, match="tlsTrustCertsFilePath to verify clients"):
        TlsSettings("c.pem", "k.pem", require_trusted_client_cert_on_connect=True)
    with pytest.raises(ConfigError, match="tlsProtocols: unsupported TLSv1"):
        TlsSettings("c.pem", "k.pem", protocols=("TLSv1",))
    with pytest.raises(ConfigError, match="no file 'missing.pem'"):
        server_context(TlsSettings("missing.pem", str(tmp_path / "broker-key.pem")))
    with pytest.raises(ConfigError, match="tlsTrustCertsFilePath: cannot use"):
        server_context(
            TlsSettings(
                str(tmp_path / "broker-cert.pem"),
                str(tmp_path / "broker-key.pem"),
                trust_certs_file_path=str(tmp_path / "broker-key.pem"),
            )
        )
    with pytest.raises(ConfigError, match="tlsCertificateFilePath/tlsKeyFilePath: cannot use"):
        server_context(TlsSettings(str(tmp_path / "broker-cert.pem"), str(pki.client_key)))  # not its key
    context = server_context(
        TlsSettings(
            str(tmp_path / "broker-cert.pem"),
            str(tmp_path / "broker-key.pem"),
            trust_certs_file_path=str(pki.ca),
            protocols=("TLSv1.3",),
        )
    )
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
