"""Who is calling: the role of an HTTP request, from its credentials or a trusted header.

Theory of operation
-------------------
The REST app authenticates, :class:`~mledger.admin.Authorization` authorizes. Authentication is
the identity table the protocol server uses too (:mod:`mledger.admin`); a
request's role comes from, in this order:

1. the ``Authorization`` header: ``Bearer <token>`` (literal or JWT tokens, the ``token``
   provider) or ``Basic <base64 user:password>`` (the ``basic`` provider);
2. the ``X-Mledger-Role: <role>`` header, only when the resolver trusts it
   (``--trust-role-header``: a proxy in front of the server that authenticates callers itself,
   like Pulsar's proxy forwarding the original principal; or tests);
3. the TLS client certificate's CN (the ``tls`` provider; ``peer_subject``, for TLS listeners);
4. the anonymous role (``anonymous_user_role``), when set.

When authorization is on, a request with no role or refused credentials is answered 401
``Authentication required`` (Pulsar's ``AuthenticationFilter``) before any admin code runs, and
one whose password check the failure limiter refused 429 with ``Retry-After``
(:class:`TooManyRequestsError`; mledger's own, as the limiter). When it is off, credentials are
ignored and every call is allowed, as with an embedded :class:`~mledger.admin.Admin`.

The app resolves a request's role when something first needs it, once, without blocking its
event loop (:func:`~mledger.rest._middleware.caller_role` awaits :meth:`RoleResolver.check`: a
password is verified on the authenticator's pool); :meth:`RoleResolver.role_for` waits instead.

Credentials or a trusted role header without authorization would authenticate callers and then
let every one of them do everything: :func:`check_authentication_setup` refuses that combination
(``ConfigError``), so ``mledger-admin serve --token-file`` without ``--auth-file`` does not start.

Thread-safe; :meth:`RoleResolver.check` never blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..admin import (
    AuthenticationError,
    AuthenticationSettings,
    AuthenticationThrottledError,
    Authenticator,
    load_token_file,
)
from ..broker import BrokerConfig
from ..core import ConfigError, UnauthenticatedError, chain, settled

if TYPE_CHECKING:
    from ..admin import ROLE_HEADER as ROLE_HEADER

__all__ = [
    "AUTHENTICATION_REQUIRED",
    "ROLE_HEADER",
    "RoleResolver",
    "TooManyRequestsError",
    "check_authentication_setup",
    "check_endpoint_authentication",
    "checked_role_resolver",
    "peer_subject_of",
]

AUTHENTICATION_REQUIRED = "Authentication required"
"""The 401 reason (Pulsar's ``AuthenticationFilter`` text)."""


class TooManyRequestsError(UnauthenticatedError):
    """429: the caller's password check was refused unverified, after too many failures from
    its address (for its user); ``retry_after_seconds`` goes into ``Retry-After``."""

    http_status = 429

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(f"Too many failed authentication attempts: retry after {retry_after_seconds} s")
        self.retry_after_seconds = retry_after_seconds


class RoleResolver:
    """Maps a request's headers (and TLS peer) to a role.

    ``authenticator``: the identity table, or a literal token map ``{"<token>": "<role>"}``
    (None: nobody authenticates). ``trust_role_header``: accept ``X-Mledger-Role`` as the role.
    Construction raises :class:`~mledger.core.ConfigError` for empty tokens or roles.
    """

    def __init__(
        self, authenticator: Authenticator | Mapping[str, str] | None = None, trust_role_header: bool = False
    ) -> None:
        if authenticator is None:
            authenticator = Authenticator()
        elif not isinstance(authenticator, Authenticator):
            authenticator = Authenticator.from_settings(AuthenticationSettings(tokens=authenticator))
        self.authenticator = authenticator
        self.trust_role_header = bool(trust_role_header)

    @classmethod
    def from_token_file(cls, path: str | Path, trust_role_header: bool = False) -> RoleResolver:
        """Read ``{"<token>": "<role>", ...}`` from ``path``; ``ConfigError`` if unusable."""
        return cls(load_token_file(path), trust_role_header)

    @property
    def authenticates(self) -> bool:
        """Whether this resolver can name a role at all (a provider, the anonymous role, or the
        trusted header)."""
        return self.authenticator.authenticates or self.trust_role_header

    def check(self, headers: Mapping[str, str], peer_subject: Any = None, address: str | None = None) -> Future[str]:
        """A future of the caller's role, for an app whose authorization is on: from the
        ``Authorization`` header, the trusted role header, the TLS client certificate's subject
        (``peer_subject``, see :func:`mledger.admin.common_name`) or the
        anonymous role; or of :class:`UnauthenticatedError` (401,
        :data:`AUTHENTICATION_REQUIRED`) for no role or refused credentials, of
        :class:`TooManyRequestsError` (429) for a password check the failure limiter refused.
        ``address``: the client's IP address. ``headers`` look-ups must be case-insensitive
        (Starlette's ``Headers`` are). Never blocks."""
        authorization = headers.get("Authorization")
        if authorization is None and self.trust_role_header:
            from ..admin import ROLE_HEADER  # imported when the app is: pydantic

            role = (headers.get(ROLE_HEADER) or "").strip()
            if role:
                return settled(str, role)
        return chain(self.authenticator.check_http(authorization, peer_subject, address), _answer)

    def role_for(self, headers: Mapping[str, str], required: bool, peer_subject: Any = None) -> str | None:
        """The caller's role, or None; waits for a password check (not for an event loop).

        ``required`` (authorization is on): :meth:`check`'s role, raising its error. Not
        required: credentials are ignored (None).
        """
        if not required:
            return None
        return self.check(headers, peer_subject).result()

    def __repr__(self) -> str:
        return f"RoleResolver({self.authenticator!r}, trust_role_header={self.trust_role_header})"


def _answer(checked: Future[str]) -> str:
    """The REST answer of an authentication: the role, 429 for a throttled password check,
    else 401 without the provider's reason (Pulsar's filter gives none)."""
    try:
        return checked.result()
    except AuthenticationThrottledError as e:
        raise TooManyRequestsError(e.retry_after_seconds) from None
    except AuthenticationError:
        raise UnauthenticatedError(AUTHENTICATION_REQUIRED) from None


def __getattr__(name: str) -> str:
    # ROLE_HEADER, re-exported: read from mledger.admin._wire (pydantic) on first use, so that a
    # server checks its credentials at start-up without importing pydantic
    if name == "ROLE_HEADER":
        from ..admin import ROLE_HEADER

        return ROLE_HEADER
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def peer_subject_of(scope: Mapping[str, Any]) -> str | None:
    """The verified TLS client certificate's subject of a request (the ASGI TLS extension's
    ``client_cert_name``, RFC 4514), None over plain HTTP or without a certificate."""
    tls = (scope.get("extensions") or {}).get("tls") or {}
    name = tls.get("client_cert_name")
    return name if isinstance(name, str) else None


def check_authentication_setup(roles: RoleResolver, authorization_enabled: bool, option: str = "--auth-file") -> None:
    """Refuse credentials without authorization: they would authenticate callers who may then
    do everything (and, beside a protocol server demanding tokens, leave the admin API open
    while the broker looks secured). Raises :class:`~mledger.core.ConfigError` naming
    ``option``, the setting that gives the authorization (``--auth-file`` for ``mledger-admin
    serve``, ``--authorization`` for ``mledger standalone``)."""
    if roles.authenticates and not authorization_enabled:
        what = "credentials" if roles.authenticator.authenticates else "a trusted role header"
        raise ConfigError(
            f"{what} without an authorization file ({option}) would let every caller create, skip, reset and "
            f'delete: give {option} (e.g. {{"superUserRoles": ["admin"]}}) to say what each role may do, or drop '
            "the credentials to run without authentication"
        )


def check_endpoint_authentication(roles: RoleResolver, config: BrokerConfig) -> None:
    """Refuse ``authenticate_metrics_endpoint`` / ``authenticate_docs_endpoint`` when nothing
    authenticates callers (no provider, no anonymous role, no trusted header): no caller could ever get a role, and
    the switch would look like protection. Raises :class:`~mledger.core.ConfigError`."""
    for name in ("authenticate_metrics_endpoint", "authenticate_docs_endpoint"):
        if getattr(config, name) and not roles.authenticates:
            raise ConfigError(
                f"{name} needs authentication: give credentials (--token-file, --token-secret-key, --token-public-key, "
                "--basic-auth-conf) and an authorization file, or turn it off"
            )


def checked_role_resolver(
    authenticator: Authenticator | None,
    authorization_enabled: bool,
    config: BrokerConfig | None = None,
    *,
    option: str = "--auth-file",
    trust_role_header: bool = False,
) -> RoleResolver:
    """The :class:`RoleResolver` of ``authenticator`` (None: nobody authenticates) once a server's
    start-up checks passed: :func:`check_authentication_setup` (naming ``option``) and
    :func:`check_endpoint_authentication` for ``config``'s switches. What ``mledger standalone``,
    the fixture and ``mledger-admin serve`` run before opening anything; ``ConfigError``."""
    roles = RoleResolver(authenticator, trust_role_header)
    check_authentication_setup(roles, authorization_enabled, option)
    check_endpoint_authentication(roles, config or BrokerConfig())
    return roles
