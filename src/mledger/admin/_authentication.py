"""Authentication: who a client is, from the credentials it sends (Pulsar's ``AuthenticationService``).

Theory of operation
-------------------
One identity table serves both servers. :class:`AuthenticationSettings` is the frozen
configuration (Pulsar's ``broker.conf`` names in snake_case, so a ``standalone.conf`` reader can
fill it); :meth:`Authenticator.from_settings` loads and validates it once (key files, the token
file, the ``.htpasswd`` file) and raises :class:`~mledger.core.ConfigError` naming the bad
value. Each provider answers one Pulsar auth method name behind :class:`AuthenticationProvider`:

* ``token``: literal tokens (the token file ``{"<token>": "<role>"}``, compared in constant time
  with :func:`hmac.compare_digest`) and JWTs (PyJWT): HS256/384/512 with ``token_secret_key``,
  RS*/PS*/ES* with ``token_public_key`` (the family follows the key, ``token_public_alg`` pins
  one). Keys are given as ``file://path``, ``data:;base64,<b64>`` or bare base64 (Pulsar's
  ``AuthTokenUtils.readKeyFromUrl``); public keys are X.509 DER (PEM is accepted too). The role
  is the ``token_auth_claim`` claim (``sub``); ``exp`` is honoured, ``token_audience`` checks the
  ``token_audience_claim`` (``aud``) claim;
* ``basic``: an ``.htpasswd`` file (``basic_auth_conf``, or ``-Dpulsar.auth.basic.conf=`` in
  ``PULSAR_EXTRA_OPTS``) with the APR1-MD5, bcrypt and crypt hashes ``htpasswd`` writes, read by
  passlib's ``HtpasswdFile``. Pulsar accepts APR1 and crypt only; bcrypt is an mledger extension.
  Hashes are verified on a bounded pool (:mod:`mledger.admin._password_pool`,
  ``max_concurrent_password_checks`` workers), never on the caller's thread; failures are limited
  per (user, address) and per address (:mod:`mledger.admin._failure_limiter`): a refused attempt
  raises :class:`AuthenticationThrottledError`, whose message is the wrong password's. An unknown
  user is checked against the file's costliest hash, and refused whatever the result, so the
  answer takes as long as a wrong password's;
* ``tls``: the role is the client certificate's CN (:meth:`Authenticator.authenticate_tls`, the
  hook a TLS listener calls with the peer certificate's subject).

A method no provider answers (``none`` from a client without credentials, or an unknown name)
gets ``anonymous_user_role`` when set and is refused otherwise with Pulsar's "No anonymous role,
and no authentication provider configured". A failed check raises :class:`AuthenticationError`
(401) carrying the provider's message. Authorization is elsewhere (:mod:`mledger.admin._auth`).

Servers call :meth:`Authenticator.check` / :meth:`Authenticator.check_http`, which never block:
they return a :class:`~concurrent.futures.Future` of the role, settled at once for tokens, TLS
and the anonymous role (microseconds: they stay on the caller's thread), completed by a pool
worker for a password. :meth:`Authenticator.authenticate` and its siblings wait for it (a
library caller, a test). The providers are frozen after construction; the pool and the limiter
are thread-safe. :meth:`Authenticator.close` stops the pool's workers.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import hmac
import json
import logging
import os
import shlex
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from ..core import INT32_MAX, ConfigError, UnauthenticatedError, chain, parse_subject_name, settled
from ._failure_limiter import FailureLimiter, Outcome
from ._files import read_setting_file
from ._password_pool import (
    PasswordCheckStats,
    PasswordPool,
    StoredHash,
    costliest,
    default_password_check_workers,
)

__all__ = [
    "METHODS",
    "AuthenticationError",
    "AuthenticationProvider",
    "AuthenticationSettings",
    "AuthenticationThrottledError",
    "Authenticator",
    "Credentials",
    "PasswordCheckStats",
    "add_authentication_arguments",
    "basic_auth_conf_from_env",
    "build_authenticator",
    "common_name",
    "load_token_file",
    "read_key",
    "settings_from_args",
]

log = logging.getLogger("mledger.admin")

METHODS = ("token", "basic", "tls")
"""The auth method names of the providers (Pulsar's ``getAuthMethodName``)."""

_PROVIDER_CLASSES = {
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken": "token",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": "basic",
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls": "tls",
}
"""Pulsar's ``authenticationProviders`` class names, accepted for the method names."""

NO_PROVIDER = "No anonymous role, and no authentication provider configured"
"""Pulsar's refusal of a method that no provider answers, without an anonymous role."""

BASIC_CONF_PROPERTY = "pulsar.auth.basic.conf"
"""The Java system property Pulsar reads the ``.htpasswd`` location from (``PULSAR_EXTRA_OPTS``)."""


WRONG_PASSWORD = "Unknown user or invalid password"
"""The ``basic`` provider's refusal (Pulsar's ``AuthenticationProviderBasic``), a throttled
attempt's too."""


class AuthenticationError(UnauthenticatedError):
    """Credentials were refused; the message is the provider's (Pulsar's ``AuthenticationException``)."""


class AuthenticationThrottledError(AuthenticationError):
    """A password check refused without verifying: too many failures from this address (for this
    user) lately. Its message is a wrong password's, so a protocol client cannot tell the two
    apart; REST answers 429 with ``Retry-After: retry_after_seconds``."""

    http_status = 429

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(WRONG_PASSWORD)
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class Credentials:
    """What a client presented: ``data`` (CONNECT's ``auth_data``, or the payload of the HTTP
    ``Authorization`` header: the bearer token, or ``user:password`` for basic),
    ``peer_subject`` (the TLS client certificate's subject, see :func:`common_name`) and
    ``address`` (the client's IP address, what failed password checks are counted by; None
    for an in-process caller)."""

    data: str = ""
    peer_subject: str | Sequence[Any] | None = None
    address: str | None = None


class AuthenticationProvider(Protocol):
    """One authentication method (Pulsar's ``AuthenticationProvider``)."""

    method: str
    """The auth method name clients send (``token``, ``basic``, ``tls``)."""

    def check(self, credentials: Credentials) -> Future[str]:
        """A future of the role of ``credentials``, or of :class:`AuthenticationError` with the
        reason. Never blocks: work that takes long runs on a worker."""
        ...


@dataclass(frozen=True)
class AuthenticationSettings:
    """Pulsar's authentication settings, snake_case (``tokenSecretKey`` -> ``token_secret_key``).

    ``authentication_providers``: the methods to run (``token``, ``basic``, ``tls``, or Pulsar's
    provider class names); empty: those whose settings are given (``tls`` must be named).
    ``tokens`` / ``token_file``: literal tokens (``{"<token>": "<role>"}``), the ``token``
    method too. Key values: ``file://path``, ``data:;base64,<b64>`` or bare base64.
    """

    authentication_providers: tuple[str, ...] = ()
    tokens: Mapping[str, str] | None = None
    token_file: str | None = None
    token_secret_key: str | None = None
    token_public_key: str | None = None
    token_public_alg: str | None = None
    token_auth_claim: str = "sub"
    token_audience_claim: str = "aud"
    token_audience: str | None = None
    basic_auth_conf: str | None = None
    anonymous_user_role: str | None = None
    max_concurrent_password_checks: int = field(default_factory=default_password_check_workers)
    """Password hashes verified at once (workers of the pool; default half the cores, at least
    one); more wait their turn. mledger's own: Pulsar verifies on its I/O threads."""
    max_authentication_failures_per_user_per_ip: int = 5
    """Failed password checks of one user from one address per window; then refused unverified
    (0: no limit). mledger's own, as the two below: Pulsar has no such limiter."""
    max_authentication_failures_per_ip: int = 30
    """Failed password checks from one address per window, whatever the user (0: no limit)."""
    authentication_failure_window_seconds: int = 60
    """The window of the two limits: a failure is forgotten after ``window / limit`` seconds."""
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False, compare=False)
    """Where ``PULSAR_EXTRA_OPTS`` is read from (the process environment by default)."""

    def __post_init__(self) -> None:
        for name, low in (
            ("max_concurrent_password_checks", 1),
            ("max_authentication_failures_per_user_per_ip", 0),
            ("max_authentication_failures_per_ip", 0),
            ("authentication_failure_window_seconds", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= INT32_MAX:
                raise ConfigError(f"{name} must be an integer in [{low}, {INT32_MAX}], got {value!r}")


class Authenticator:
    """The identity table: providers by method name and the anonymous role.

    Build it with :meth:`from_settings` (or from literal tokens: ``Authenticator.from_settings(
    AuthenticationSettings(tokens=...))``). Servers call :meth:`check` for CONNECT and
    :meth:`check_http` for REST requests (futures: they never block); :meth:`authenticate`,
    :meth:`authenticate_http` and :meth:`authenticate_tls` wait for the answer.
    """

    def __init__(self, providers: Iterable[AuthenticationProvider] = (), anonymous_user_role: str | None = None):
        by_method: dict[str, AuthenticationProvider] = {}
        for provider in providers:
            if provider.method in by_method:
                raise ConfigError(f"two authentication providers for method {provider.method!r}")
            by_method[provider.method] = provider
        if anonymous_user_role is not None and not anonymous_user_role.strip():
            raise ConfigError("anonymous_user_role must be a non-empty role")
        self._providers = MappingProxyType(by_method)
        self.anonymous_user_role = anonymous_user_role.strip() if anonymous_user_role else None

    @classmethod
    def from_settings(cls, settings: AuthenticationSettings) -> Authenticator:
        """Load and validate ``settings``; :class:`ConfigError` naming the bad value."""
        methods = _methods(settings)
        providers: list[AuthenticationProvider] = []
        if "token" in methods:
            providers.append(TokenProvider.from_settings(settings))
        if "basic" in methods:
            providers.append(BasicProvider.from_settings(settings))
        if "tls" in methods:
            providers.append(TlsProvider())
        return cls(providers, settings.anonymous_user_role)

    @property
    def methods(self) -> frozenset[str]:
        """The method names a provider answers."""
        return frozenset(self._providers)

    @property
    def authenticates(self) -> bool:
        """Whether any caller can get a role (a provider, or the anonymous role)."""
        return bool(self._providers) or self.anonymous_user_role is not None

    def check(
        self, method: str | None, data: bytes | str = b"", peer_subject: Any = None, address: str | None = None
    ) -> Future[str]:
        """A future of the role of a CONNECT's ``auth_method_name`` / ``auth_data`` (and, over
        TLS, the peer certificate's subject) from the client at ``address``, or of
        :class:`AuthenticationError`. Never blocks (see the module docstring)."""
        provider = self._providers.get(method or "none")
        if provider is None:
            return settled(self._anonymous)
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return provider.check(Credentials(text, peer_subject, address))

    def check_http(
        self, authorization: str | None, peer_subject: Any = None, address: str | None = None
    ) -> Future[str]:
        """A future of the role of a REST request from ``address``: ``Authorization: Bearer
        <token>`` (``token``), ``Basic <base64 user:password>`` (``basic``), else the TLS peer
        certificate (``tls``), else the anonymous role; or of :class:`AuthenticationError`.
        Never blocks."""
        if authorization is not None and authorization.strip():
            scheme, _, payload = authorization.strip().partition(" ")
            payload = payload.strip()
            if scheme.lower() == "bearer":
                return self._check_with("token", Credentials(payload, peer_subject, address))
            if scheme.lower() == "basic":
                try:
                    decoded = base64.b64decode(payload, validate=True).decode("utf-8")
                except (binascii.Error, ValueError) as e:
                    return settled(_refuse, f"Base64 decoding is failure: {e}")
                return self._check_with("basic", Credentials(decoded, peer_subject, address))
            return settled(_refuse, f"Unsupported authentication scheme {scheme!r}")
        if peer_subject is not None and "tls" in self._providers:
            return self._providers["tls"].check(Credentials("", peer_subject, address))
        return self.check("none")

    def authenticate(self, method: str | None, data: bytes | str = b"", peer_subject: Any = None) -> str:
        """The role of :meth:`check`'s credentials, waiting for a password check (may block:
        not for an event loop). Raises :class:`AuthenticationError`."""
        return self.check(method, data, peer_subject).result()

    def authenticate_http(self, authorization: str | None, peer_subject: Any = None) -> str:
        """The role of :meth:`check_http`'s request, waiting for a password check (may block:
        not for an event loop). Raises :class:`AuthenticationError`."""
        return self.check_http(authorization, peer_subject).result()

    def authenticate_tls(self, peer_subject: Any) -> str:
        """The role of a TLS client certificate's subject (the hook for TLS listeners)."""
        return self.authenticate("tls", b"", peer_subject)

    def stats(self) -> PasswordCheckStats | None:
        """A snapshot of the password checks (the ``basic`` provider's); None without one."""
        basic = self._providers.get("basic")
        return basic.stats() if isinstance(basic, BasicProvider) else None

    def close(self) -> None:
        """Stop the password checks' workers (idempotent; a later check starts new ones)."""
        basic = self._providers.get("basic")
        if isinstance(basic, BasicProvider):
            basic.close()

    def _anonymous(self) -> str:
        if self.anonymous_user_role is not None:
            return self.anonymous_user_role
        raise AuthenticationError(NO_PROVIDER)

    def _check_with(self, method: str, credentials: Credentials) -> Future[str]:
        provider = self._providers.get(method)
        if provider is None:
            # credentials of a method nobody checks are refused, not taken as anonymous
            return settled(_refuse, f"No authentication provider configured for method {method}")
        return provider.check(credentials)

    def __repr__(self) -> str:
        return f"Authenticator(methods={sorted(self._providers)}, anonymous_user_role={self.anonymous_user_role!r})"


def _refuse(reason: str) -> str:
    raise AuthenticationError(reason)


def _methods(settings: AuthenticationSettings) -> frozenset[str]:
    if settings.authentication_providers:
        methods = set()
        for name in settings.authentication_providers:
            method = _PROVIDER_CLASSES.get(name.strip(), name.strip().lower())
            if method not in METHODS:
                raise ConfigError(f"unknown authentication provider {name!r}; known: {', '.join(METHODS)}")
            methods.add(method)
        return frozenset(methods)
    inferred = set()
    if settings.tokens or settings.token_file or settings.token_secret_key or settings.token_public_key:
        inferred.add("token")
    if settings.basic_auth_conf or basic_auth_conf_from_env(settings.environ):
        inferred.add("basic")
    return frozenset(inferred)


def build_authenticator(
    tokens: Mapping[str, str] | None, authentication: AuthenticationSettings | None
) -> Authenticator | None:
    """The identity table of literal ``tokens`` and the providers of ``authentication``; None
    when neither is given (authentication off). ``ConfigError`` for unusable settings."""
    if tokens is None and authentication is None:
        return None
    settings = authentication or AuthenticationSettings()
    if tokens is not None:
        settings = replace(settings, tokens={**(settings.tokens or {}), **tokens})
    return Authenticator.from_settings(settings)


# -- token -------------------------------------------------------------------------------------


def load_token_file(path: str | Path) -> dict[str, str]:
    """Read a literal token file ``{"<token>": "<role>", ...}``; :class:`ConfigError` if unusable."""
    try:
        data = json.loads(read_setting_file(path, "token file").decode("utf-8"))
    except ValueError as e:
        raise ConfigError(f"token file {str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"token file {str(path)!r} must be a JSON object mapping tokens to roles")
    return data


def read_key(value: str, setting: str) -> bytes:
    """The bytes of a key setting: ``file://path`` / ``file:path``, ``data:;base64,<b64>`` (or
    ``data:,<text>``), else bare base64 (Pulsar's ``AuthTokenUtils.readKeyFromUrl``)."""
    text = value.strip()
    if text.startswith("file:"):
        parsed = urllib.parse.urlparse(text)
        return read_setting_file(urllib.parse.unquote(parsed.netloc + parsed.path), setting)
    if text.startswith("data:"):
        meta, sep, payload = text[len("data:") :].partition(",")
        if not sep:
            raise ConfigError(f"{setting}: {text[:40]!r} is not a data: URL (data:;base64,<key>)")
        if meta.endswith(";base64"):
            return _b64(payload, setting)
        return urllib.parse.unquote_to_bytes(payload)
    return _b64(text, setting)


def _b64(text: str, setting: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{setting}: {text[:40]!r} is neither file://, data:;base64, nor base64 key material"
        ) from None


class TokenProvider:
    """``token``: literal tokens in constant time, then JWTs signed with the configured key."""

    method = "token"

    def __init__(
        self,
        tokens: Mapping[str, str] | None = None,
        *,
        key: Any = None,
        algorithms: Sequence[str] = (),
        auth_claim: str = "sub",
        audience_claim: str = "aud",
        audience: str | None = None,
    ) -> None:
        checked: dict[bytes, str] = {}
        for token, role in (tokens or {}).items():
            if not isinstance(token, str) or not token.strip():
                raise ConfigError("token file: every token must be a non-empty string")
            if not isinstance(role, str) or not role.strip():
                raise ConfigError(f"token file: the role of a token must be a non-empty string, got {role!r}")
            checked[token.strip().encode()] = role.strip()
        self._tokens = MappingProxyType(checked)
        self._key = key
        self._algorithms = list(algorithms)
        self._auth_claim = auth_claim
        self._audience_claim = audience_claim
        self._audience = audience

    @classmethod
    def from_settings(cls, settings: AuthenticationSettings) -> TokenProvider:
        """The provider of ``settings``: literal tokens and/or a JWT key; at least one is needed."""
        tokens = dict(settings.tokens or {})
        if settings.token_file:
            tokens.update(load_token_file(settings.token_file))
        key, algorithms = _validation_key(settings)
        if key is None and not tokens:
            raise ConfigError("the token provider needs token_secret_key, token_public_key or a token file")
        return cls(
            tokens,
            key=key,
            algorithms=algorithms,
            auth_claim=settings.token_auth_claim,
            audience_claim=settings.token_audience_claim,
            audience=settings.token_audience,
        )

    def check(self, credentials: Credentials) -> Future[str]:
        """:meth:`authenticate`, settled now: a JWT costs the server about 0.06 ms of CPU per
        CONNECT (``benchmarks/bench_auth.py``: 0.18 ms against 0.12 without credentials), less
        than handing it to a worker would."""
        return settled(self.authenticate, credentials)

    def authenticate(self, credentials: Credentials) -> str:
        """The role of a literal token or a JWT; raises :class:`AuthenticationError`."""
        token = credentials.data.strip()
        if not token:
            raise AuthenticationError("No token credentials passed")
        found = None
        given = token.encode()
        for known, role in self._tokens.items():
            # compare_digest on every entry: the time taken does not tell which token matched
            if hmac.compare_digest(known, given):
                found = role
        if found is not None:
            return found
        if self._key is None:
            raise AuthenticationError("invalid token")
        return self._jwt_role(token)

    def _jwt_role(self, token: str) -> str:
        import jwt

        try:
            claims = jwt.decode(
                token, self._key, algorithms=self._algorithms, options={"verify_aud": False, "require": []}
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError(f"Failed to authentication token: {_expired(token)}") from None
        except jwt.InvalidTokenError as e:
            raise AuthenticationError(f"Failed to authentication token: {e}") from None
        if self._audience is not None:
            audiences = claims.get(self._audience_claim)
            if isinstance(audiences, str):
                audiences = [audiences]
            if not isinstance(audiences, list) or self._audience not in audiences:
                raise AuthenticationError(
                    f"Failed to authentication token: the {self._audience_claim!r} claim does not contain "
                    f"{self._audience!r}"
                )
        role = claims.get(self._auth_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationError(f"Failed to authentication token: no {self._auth_claim!r} claim in the token")
        return role


def _expired(token: str) -> str:
    """jjwt's wording: ``JWT expired at <when>. Current time: <now>``."""
    import jwt

    exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    when = datetime.datetime.fromtimestamp(int(exp), datetime.UTC) if isinstance(exp, (int, float)) else None
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else str(exp)
    return f"JWT expired at {stamp}. Current time: {now.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _validation_key(settings: AuthenticationSettings) -> tuple[Any, list[str]]:
    if settings.token_secret_key is None and settings.token_public_key is None:
        return None, []
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
    except ImportError:
        raise ConfigError("JWT tokens need PyJWT and cryptography: pip install 'mledger[server]'") from None
    if settings.token_secret_key is not None:
        secret = read_key(settings.token_secret_key, "token_secret_key")
        if not secret:
            raise ConfigError("token_secret_key is empty")
        hmac_family = ["HS256", "HS384", "HS512"]
        alg = settings.token_public_alg
        return secret, [alg] if alg in hmac_family else hmac_family
    assert settings.token_public_key is not None
    raw = read_key(settings.token_public_key, "token_public_key")
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            key: Any = serialization.load_pem_public_key(raw)
        else:
            key = serialization.load_der_public_key(raw)
    except ValueError as e:
        raise ConfigError(f"token_public_key is not an X.509 public key: {e}") from None
    if isinstance(key, rsa.RSAPublicKey):
        family = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
    elif isinstance(key, ec.EllipticCurvePublicKey):
        family = ["ES256", "ES384", "ES512"]
    else:
        raise ConfigError(f"token_public_key: unsupported key type {type(key).__name__} (RSA or EC)")
    alg = settings.token_public_alg
    if alg is not None and alg not in family:
        raise ConfigError(f"token_public_alg {alg!r} does not fit the public key (one of {', '.join(family)})")
    return key, [alg] if alg else family


# -- basic -------------------------------------------------------------------------------------


def basic_auth_conf_from_env(environ: Mapping[str, str]) -> str | None:
    """The ``-Dpulsar.auth.basic.conf=<value>`` of ``PULSAR_EXTRA_OPTS``, None when absent."""
    prefix = f"-D{BASIC_CONF_PROPERTY}="
    for option in shlex.split(environ.get("PULSAR_EXTRA_OPTS", "")):
        if option.startswith(prefix):
            return option[len(prefix) :]
    return None


class BasicProvider:
    """``basic``: ``user:password`` checked against an ``.htpasswd`` file (APR1-MD5, bcrypt,
    crypt) on a bounded pool, failures limited per (user, address) and per address (see the
    module docstring).

    ``hashes``: user -> hash text, as the file has them; ``pool`` verifies; ``limiter`` counts
    failures (None: no limit).
    """

    method = "basic"

    def __init__(self, hashes: Mapping[str, str], pool: PasswordPool, limiter: FailureLimiter | None = None) -> None:
        self._hashes = MappingProxyType({user: StoredHash.parse(text) for user, text in hashes.items()})
        self._dummy = costliest(self._hashes.values())
        """What an unknown user is checked against: the file's costliest hash (its result is
        ignored), so refusing an unknown user takes as long as refusing a wrong password."""
        self._pool = pool
        self._limiter = limiter

    @classmethod
    def from_settings(cls, settings: AuthenticationSettings) -> BasicProvider:
        """Read the file of ``basic_auth_conf`` (or ``PULSAR_EXTRA_OPTS``): ``file://``, ``data:``,
        a path, or base64 content, as Pulsar's ``AuthenticationProviderBasic.readData``."""
        source = settings.basic_auth_conf or basic_auth_conf_from_env(settings.environ)
        if not source:
            raise ConfigError(
                f"No basic authentication config provided (basic_auth_conf, or -D{BASIC_CONF_PROPERTY}= in "
                "PULSAR_EXTRA_OPTS)"
            )
        if source.startswith(("file:", "data:")) or not Path(source).exists():
            content = read_key(source, "basic_auth_conf")
        else:
            content = read_setting_file(source, "basic_auth_conf")
        try:
            from passlib.apache import HtpasswdFile
        except ImportError:
            raise ConfigError("basic authentication needs libpass and bcrypt: pip install 'mledger[server]'") from None
        text = content.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and len(line.split(":")) != 2:
                raise ConfigError(f"basic_auth_conf line {number}: expected <user>:<hash>")
        try:
            htpasswd = HtpasswdFile.from_string(text)
        except ValueError as e:
            raise ConfigError(f"basic_auth_conf {source!r}: {e}") from None
        hashes = {user: _text(htpasswd.get_hash(user)) for user in htpasswd.users()}
        limiter = FailureLimiter(
            settings.max_authentication_failures_per_user_per_ip,
            settings.max_authentication_failures_per_ip,
            settings.authentication_failure_window_seconds,
        )
        return cls(hashes, PasswordPool(settings.max_concurrent_password_checks), limiter)

    def check(self, credentials: Credentials) -> Future[str]:
        """A future of the user, once a pool worker verified the password (see the class
        docstring); :class:`AuthenticationThrottledError` at once when the limiter refuses."""
        parts = credentials.data.split(":")
        if len(parts) != 2:
            return settled(_refuse, "Base64 decoded params are invalid")
        user, password = parts
        stored = self._hashes.get(user)
        target = stored or self._dummy
        if target is None:  # an empty file: nothing to verify against
            return settled(_refuse, WRONG_PASSWORD)
        address = credentials.address
        limiter = self._limiter
        if limiter is not None:
            retry_after = limiter.admit(user, address)
            if retry_after:
                return settled(_throttled, retry_after)

        def verified(done: Future[bool]) -> str:
            try:
                ok = done.result() and stored is not None
            except Exception as e:  # the pool stopped (close) or broke: counted neither way
                if limiter is not None:
                    limiter.finish(user, address, Outcome.ABANDONED)
                log.warning("password check of user %r abandoned: %s: %s", user, type(e).__name__, e)
                raise AuthenticationError(f"password check abandoned: {type(e).__name__}") from e
            if limiter is not None:
                limiter.finish(user, address, Outcome.SUCCEEDED if ok else Outcome.FAILED)
            if not ok:
                raise AuthenticationError(WRONG_PASSWORD)
            return user

        return chain(self._pool.verify(target, password), verified)

    def stats(self) -> PasswordCheckStats:
        """A snapshot of the pool's counters and the limiter's refusals."""
        pool = self._pool.stats()
        return replace(pool, refused=self._limiter.refused if self._limiter is not None else 0)

    def close(self) -> None:
        """Stop the pool's workers (a later check starts new ones)."""
        self._pool.close()


def _throttled(retry_after_seconds: int) -> str:
    raise AuthenticationThrottledError(retry_after_seconds)


def _text(value: str | bytes | None) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else (value or "")


# -- tls ---------------------------------------------------------------------------------------


def common_name(subject: str | Sequence[Any] | None) -> str | None:
    """The CN of a certificate subject: an RFC 4514 string (``CN=client,O=acme``) or the
    ``subject`` of :meth:`ssl.SSLSocket.getpeercert` (``((('commonName', 'client'),), ...)``)."""
    if subject is None:
        return None
    if isinstance(subject, str):
        for name, value in parse_subject_name(subject):
            if name.upper() == "CN" and value:
                return value
        return None
    for rdn in subject:
        for pair in rdn:
            if len(pair) == 2 and pair[0] in ("commonName", "CN") and pair[1]:
                return str(pair[1])
    return None


class TlsProvider:
    """``tls``: the role is the client certificate's CN (Pulsar's ``AuthenticationProviderTls``)."""

    method = "tls"

    def check(self, credentials: Credentials) -> Future[str]:
        """:meth:`authenticate`, settled now."""
        return settled(self.authenticate, credentials)

    def authenticate(self, credentials: Credentials) -> str:
        """The CN of the peer certificate; raises :class:`AuthenticationError`."""
        if credentials.peer_subject is None:
            raise AuthenticationError("Failed to get TLS certificates from client")
        cn = common_name(credentials.peer_subject)
        if cn is None:
            raise AuthenticationError("Client unable to authenticate with TLS certificate")
        return cn


# -- command lines -----------------------------------------------------------------------------


def add_authentication_arguments(parser: argparse.ArgumentParser) -> None:
    """The provider options of the servers (``--token-file`` stays with each server's parser)."""
    parser.add_argument(
        "--token-secret-key",
        help="HS256 JWTs: the secret key (file://F, data:;base64,<b64> or base64; Pulsar's tokenSecretKey)",
    )
    parser.add_argument(
        "--token-public-key",
        help="RS256/ES256 JWTs: the X.509 public key (file://F, data:;base64,<b64>; Pulsar's tokenPublicKey)",
    )
    parser.add_argument("--token-auth-claim", help="the JWT claim naming the role (sub)")
    parser.add_argument(
        "--basic-auth-conf",
        help="basic authentication: an .htpasswd file (APR1-MD5, bcrypt, crypt); default: "
        f"-D{BASIC_CONF_PROPERTY}= in $PULSAR_EXTRA_OPTS",
    )
    parser.add_argument(
        "--anonymous-user-role", help="the role of clients without credentials (Pulsar's anonymousUserRole)"
    )
    parser.add_argument(
        "--authentication-providers",
        help="comma-separated methods to run (token, basic, tls); default: those whose options are given",
    )


def settings_from_args(args: argparse.Namespace) -> AuthenticationSettings | None:
    """The settings of :func:`add_authentication_arguments`' options and ``--token-file``; None
    when no option turns authentication on."""
    providers = tuple(p for p in (getattr(args, "authentication_providers", None) or "").split(",") if p.strip())
    settings = AuthenticationSettings(
        authentication_providers=providers,
        token_file=str(args.token_file) if getattr(args, "token_file", None) else None,
        token_secret_key=getattr(args, "token_secret_key", None),
        token_public_key=getattr(args, "token_public_key", None),
        token_auth_claim=getattr(args, "token_auth_claim", None) or "sub",
        basic_auth_conf=getattr(args, "basic_auth_conf", None),
        anonymous_user_role=getattr(args, "anonymous_user_role", None),
    )
    if not _methods(settings) and settings.anonymous_user_role is None:
        return None
    return settings
