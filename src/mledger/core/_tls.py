"""TLS for the servers' TLS ports: Pulsar's ``tls*`` settings and the one server context both use.

:class:`TlsSettings` is the frozen form of ``tlsCertificateFilePath``, ``tlsKeyFilePath``,
``tlsTrustCertsFilePath``, ``tlsRequireTrustedClientCertOnConnect``, ``tlsProtocols`` and
``tlsCiphers``. :func:`server_context` turns them into an :class:`ssl.SSLContext` the protocol
server (``brokerServicePortTls``) and the REST server (``webServicePortTls``) share, so both
ports verify clients the same way, as Pulsar's brokers do:

* with a trust file, a client certificate is requested and verified against it; a client
  without one is let in (the certificate is optional) unless
  ``require_trusted_client_cert_on_connect``, and a certificate the trust file does not vouch
  for fails the handshake either way;
* without a trust file no client certificate is requested (there is nothing to verify it with).

:func:`subject_name` / :func:`parse_subject_name` write and read the peer certificate's subject
as an RFC 4514 string (what the ASGI TLS extension's ``client_cert_name`` carries).
Only :func:`server_context` reads files (when called); the rest are pure functions.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import ConfigError

__all__ = ["TLS_PROTOCOLS", "TlsSettings", "parse_subject_name", "server_context", "subject_name"]

TLS_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
"""The ``tlsProtocols`` names accepted (Python's ``ssl`` offers no older protocol by default)."""


@dataclass(frozen=True)
class TlsSettings:
    """Pulsar's broker TLS settings, snake_case (``tlsCertificateFilePath`` -> ``certificate_file_path``)."""

    certificate_file_path: str
    """The server's certificate chain, PEM (``tlsCertificateFilePath``)."""
    key_file_path: str
    """Its private key, PEM (``tlsKeyFilePath``)."""
    trust_certs_file_path: str | None = None
    """CA certificates client certificates are verified against (``tlsTrustCertsFilePath``)."""
    require_trusted_client_cert_on_connect: bool = False
    """Refuse clients without a trusted certificate (``tlsRequireTrustedClientCertOnConnect``)."""
    protocols: tuple[str, ...] = ()
    """Allowed protocol versions, e.g. ``("TLSv1.3",)``; empty: TLSv1.2 and later (``tlsProtocols``)."""
    ciphers: tuple[str, ...] = ()
    """OpenSSL cipher names for TLSv1.2; empty: Python's defaults (``tlsCiphers``)."""

    def __post_init__(self) -> None:
        if not self.certificate_file_path or not self.key_file_path:
            raise ConfigError("TLS needs tlsCertificateFilePath and tlsKeyFilePath")
        unknown = [p for p in self.protocols if p not in TLS_PROTOCOLS]
        if unknown:
            raise ConfigError(f"tlsProtocols: unsupported {', '.join(unknown)} (known: {', '.join(TLS_PROTOCOLS)})")
        if self.require_trusted_client_cert_on_connect and not self.trust_certs_file_path:
            raise ConfigError("tlsRequireTrustedClientCertOnConnect needs tlsTrustCertsFilePath to verify clients with")


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A server :class:`ssl.SSLContext` of ``settings`` (see the module docstring). Reads the
    files now; raises :class:`~mledger.core.ConfigError` naming the file that cannot be
    used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.protocols:
        versions = sorted(TLS_PROTOCOLS[p] for p in settings.protocols)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load(
        "tlsCertificateFilePath/tlsKeyFilePath",
        settings.certificate_file_path,
        lambda: context.load_cert_chain(settings.certificate_file_path, settings.key_file_path),
    )
    if settings.trust_certs_file_path:
        trust = settings.trust_certs_file_path
        _load("tlsTrustCertsFilePath", trust, lambda: context.load_verify_locations(cafile=trust))
        context.verify_mode = (
            ssl.CERT_REQUIRED if settings.require_trusted_client_cert_on_connect else ssl.CERT_OPTIONAL
        )
    if settings.ciphers:
        try:
            context.set_ciphers(":".join(settings.ciphers))
        except ssl.SSLError as exc:
            raise ConfigError(f"tlsCiphers {','.join(settings.ciphers)!r}: {exc}") from None
    return context


def _load(setting: str, path: str, load: Any) -> None:
    if not Path(path).is_file():
        raise ConfigError(f"{setting}: no file {path!r}")
    try:
        load()
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"{setting}: cannot use {path!r}: {exc}") from None


_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_SPECIAL = set(',+"\\<>;=')


def subject_name(subject: Sequence[Sequence[tuple[str, str]]] | None) -> str | None:
    """The RFC 4514 string of a subject as :meth:`ssl.SSLSocket.getpeercert` gives it
    (``((('commonName', 'c'),), (('organizationName', 'o'),))`` -> ``O=o,CN=c``: last RDN first);
    special characters are backslash-escaped. None for None or an empty subject."""
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _SPECIAL else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def parse_subject_name(name: str) -> list[tuple[str, str]]:
    """The ``(attribute, value)`` pairs of an RFC 4514 string, in its order, escapes undone
    (``CN=a\\,b,O=x`` -> ``[("CN", "a,b"), ("O", "x")]``); multi-valued RDNs are flattened."""
    pairs: list[tuple[str, str]] = []
    current: list[str] = []
    escaped = False
    parts: list[str] = []
    for c in name:
        if escaped:
            current.append("\\" + c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",+":
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    for part in parts:
        attribute, sep, value = part.partition("=")
        if sep:
            pairs.append((attribute.strip(), _unescape(value)))
    return pairs


def _unescape(value: str) -> str:
    out = []
    i = 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)
