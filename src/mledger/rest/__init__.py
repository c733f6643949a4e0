"""The admin REST server: Pulsar's admin paths over an :class:`~mledger.admin.Admin`, on FastAPI
and uvicorn (the ``server`` extra), with ``/metrics``, ``/openapi.json`` and offline ``/docs``.

* :func:`create_app` - the FastAPI app of an ``Admin`` (routes, errors, limits, docs);
* :class:`AdminServer` - that app on uvicorn, bound at construction, run on its own thread
  (:meth:`~AdminServer.start` / :meth:`~AdminServer.shutdown`) or in a running event loop
  (``await server.serve()``), with a graceful stop;
* :func:`serve` - ``mledger-admin serve`` over a data directory;
* :class:`RoleResolver` - bearer tokens (and a trusted proxy header) to roles.
"""

from __future__ import annotations

try:
    import fastapi as _fastapi  # noqa: F401
    import uvicorn as _uvicorn  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installation
    from ..core.errors import MissingExtraError

    raise MissingExtraError("the admin REST server needs FastAPI and uvicorn: pip install 'mledger[server]'") from e

from .app import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES, create_app as create_app
from .auth import (
    AUTHENTICATION_REQUIRED as AUTHENTICATION_REQUIRED,
    ROLE_HEADER as ROLE_HEADER,
    RoleResolver as RoleResolver,
)
from .server import DEFAULT_BIND as DEFAULT_BIND, AdminServer as AdminServer, parse_bind as parse_bind, serve as serve

__all__ = [
    "AUTHENTICATION_REQUIRED",
    "DEFAULT_BIND",
    "DEFAULT_MAX_BODY_BYTES",
    "ROLE_HEADER",
    "AdminServer",
    "RoleResolver",
    "create_app",
    "parse_bind",
    "serve",
]
