"""Who is calling: the role of an HTTP request, from a bearer token or a trusted header.

Theory of operation
-------------------
The REST app authenticates, :class:`~mledger.admin.Authorization` authorizes. A request's role
comes from, in this order:

1. ``Authorization: Bearer <token>``: the token is looked up in the token map (a JSON file
   ``{"<token>": "<role>", ...}``, see :meth:`RoleResolver.from_token_file`). Tokens are
   compared in constant time;
2. the ``X-Mledger-Role: <role>`` header, only when the resolver trusts it
   (``--trust-role-header``: a proxy in front of the server that authenticates callers itself,
   like Pulsar's proxy forwarding the original principal; or tests);
3. otherwise no role.

When authorization is on, a request with no role, an unknown token or an ``Authorization``
header that is not ``Bearer`` is refused with 401 ``Authentication required`` (Pulsar's
``AuthenticationFilter``) before any admin code runs. When it is off, credentials are ignored
and every call is allowed, as with an embedded :class:`~mledger.admin.Admin`.

Tokens or a trusted role header without authorization would authenticate callers and then let
every one of them do everything: :func:`check_authentication_setup` refuses that combination
(``ConfigError``), so ``mledger-admin serve --token-file`` without ``--auth-file`` does not start.

Pure functions of the headers and the frozen token map: thread-safe, never blocks.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ..admin.wire import ROLE_HEADER
from ..broker import BrokerConfig
from ..core.errors import ConfigError, UnauthenticatedError

__all__ = [
    "AUTHENTICATION_REQUIRED",
    "ROLE_HEADER",
    "RoleResolver",
    "check_authentication_setup",
    "check_endpoint_authentication",
]

AUTHENTICATION_REQUIRED = "Authentication required"
"""The 401 reason (Pulsar's ``AuthenticationFilter`` text)."""


class RoleResolver:
    """Maps a request's headers to a role.

    ``tokens``: token -> role. ``trust_role_header``: accept ``X-Mledger-Role`` as the role.
    Construction raises :class:`~mledger.core.errors.ConfigError` for empty tokens or roles.
    """

    def __init__(self, tokens: Mapping[str, str] | None = None, trust_role_header: bool = False) -> None:
        checked: dict[bytes, str] = {}
        for token, role in (tokens or {}).items():
            if not isinstance(token, str) or not token.strip():
                raise ConfigError("token file: every token must be a non-empty string")
            if not isinstance(role, str) or not role.strip():
                raise ConfigError(f"token file: the role of a token must be a non-empty string, got {role!r}")
            checked[token.strip().encode()] = role.strip()
        self._tokens = MappingProxyType(checked)
        self.trust_role_header = bool(trust_role_header)

    @classmethod
    def from_token_file(cls, path: str | Path, trust_role_header: bool = False) -> RoleResolver:
        """Read ``{"<token>": "<role>", ...}`` from ``path``; ``ConfigError`` if unusable."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read token file {str(path)!r}: {e}") from None
        except ValueError as e:
            raise ConfigError(f"token file {str(path)!r} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"token file {str(path)!r} must be a JSON object mapping tokens to roles")
        return cls(data, trust_role_header)

    @property
    def token_count(self) -> int:
        """How many tokens are known."""
        return len(self._tokens)

    @property
    def authenticates(self) -> bool:
        """Whether this resolver can name a role at all (tokens, or the trusted header)."""
        return bool(self._tokens) or self.trust_role_header

    def role_for(self, headers: Mapping[str, str], required: bool) -> str | None:
        """The caller's role, or None.

        ``required`` (authorization is on): raise :class:`UnauthenticatedError` (401,
        :data:`AUTHENTICATION_REQUIRED`) instead of returning None, and for an unknown token or a
        non-Bearer ``Authorization`` header. Not required: credentials are ignored (None).
        ``headers`` look-ups must be case-insensitive (Starlette's ``Headers`` are).
        """
        if not required:
            return None
        authorization = headers.get("Authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(" ")
            role = self._lookup(token.strip()) if scheme.lower() == "bearer" else None
            if role is None:
                raise UnauthenticatedError(AUTHENTICATION_REQUIRED)
            return role
        if self.trust_role_header:
            role = (headers.get(ROLE_HEADER) or "").strip()
            if role:
                return role
        raise UnauthenticatedError(AUTHENTICATION_REQUIRED)

    def _lookup(self, token: str) -> str | None:
        found = None
        given = token.encode()
        for known, role in self._tokens.items():
            # compare_digest on every entry: the time taken does not tell which token matched
            if hmac.compare_digest(known, given):
                found = role
        return found

    def __repr__(self) -> str:
        return f"RoleResolver(tokens={len(self._tokens)}, trust_role_header={self.trust_role_header})"


def check_authentication_setup(roles: RoleResolver, authorization_enabled: bool, option: str = "--auth-file") -> None:
    """Refuse credentials without authorization: they would authenticate callers who may then
    do everything (and, beside a protocol server demanding tokens, leave the admin API open
    while the broker looks secured). Raises :class:`~mledger.core.errors.ConfigError` naming
    ``option``, the setting that gives the authorization (``--auth-file`` for ``mledger-admin
    serve``, ``--authorization`` for ``mledger standalone``)."""
    if roles.authenticates and not authorization_enabled:
        what = "tokens" if roles.token_count else "a trusted role header"
        raise ConfigError(
            f"{what} without an authorization file ({option}) would let every caller create, skip, reset and "
            f'delete: give {option} (e.g. {{"superUserRoles": ["admin"]}}) to say what each role may do, or drop '
            "the credentials to run without authentication"
        )


def check_endpoint_authentication(roles: RoleResolver, config: BrokerConfig) -> None:
    """Refuse ``authenticate_metrics_endpoint`` / ``authenticate_docs_endpoint`` when nothing
    authenticates callers (no tokens, no trusted header): no caller could ever get a role, and
    the switch would look like protection. Raises :class:`~mledger.core.errors.ConfigError`."""
    for name in ("authenticate_metrics_endpoint", "authenticate_docs_endpoint"):
        if getattr(config, name) and not roles.authenticates:
            raise ConfigError(
                f"{name} needs authentication: give tokens (--token-file) and an authorization file, or turn it off"
            )
