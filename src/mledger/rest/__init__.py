"""The admin REST server: Pulsar's admin paths over an :class:`~mledger.admin.Admin`, on FastAPI
and uvicorn (the ``server`` extra), with ``/metrics``, ``/openapi.json`` and offline ``/docs``.

* :func:`create_app` - the FastAPI app of an ``Admin`` (routes, errors, limits, docs);
* :class:`AdminServer` - that app on uvicorn, bound at construction, run on its own thread
  (:meth:`~AdminServer.start` / :meth:`~AdminServer.shutdown`) or in a running event loop
  (``await server.serve()``), with a graceful stop;
* :func:`serve` - ``mledger-admin serve`` over a data directory;
* :class:`DeferredApp` - answers the readiness route at once, builds the app on first use;
* :class:`RoleResolver` - bearer tokens (and a trusted proxy header) to roles.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from ..core import lazy_getattr

if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:  # pragma: no cover
    from ..core import MissingExtraError

    raise MissingExtraError("the admin REST server needs FastAPI and uvicorn: pip install 'mledger[server]'")

if TYPE_CHECKING:
    from ._app import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES, create_app as create_app
    from ._auth import (
        AUTHENTICATION_REQUIRED as AUTHENTICATION_REQUIRED,
        ROLE_HEADER as ROLE_HEADER,
        RoleResolver as RoleResolver,
        checked_role_resolver as checked_role_resolver,
    )
    from ._cli import run_serve as run_serve
    from ._deferred import DeferredApp as DeferredApp
    from ._server import (
        DEFAULT_BIND as DEFAULT_BIND,
        PULSAR_MAX_CONCURRENT_HTTP_REQUESTS as PULSAR_MAX_CONCURRENT_HTTP_REQUESTS,
        PULSAR_MAX_HTTP_SERVER_CONNECTIONS as PULSAR_MAX_HTTP_SERVER_CONNECTIONS,
        AdminServer as AdminServer,
        parse_bind as parse_bind,
        serve as serve,
    )

# imported on first use (PEP 562): a server answers its readiness route before FastAPI, pydantic
# and the routes are imported (see mledger.rest._server.DeferredApp)
_LAZY = {
    "._app": ("DEFAULT_MAX_BODY_BYTES", "create_app"),
    "._auth": ("AUTHENTICATION_REQUIRED", "ROLE_HEADER", "RoleResolver", "checked_role_resolver"),
    "._cli": ("run_serve",),
    "._deferred": ("DeferredApp",),
    "._server": (
        "DEFAULT_BIND",
        "PULSAR_MAX_CONCURRENT_HTTP_REQUESTS",
        "PULSAR_MAX_HTTP_SERVER_CONNECTIONS",
        "AdminServer",
        "parse_bind",
        "serve",
    ),
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "AUTHENTICATION_REQUIRED",
    "DEFAULT_BIND",
    "DEFAULT_MAX_BODY_BYTES",
    "ROLE_HEADER",
    "AdminServer",
    "DeferredApp",
    "RoleResolver",
    "create_app",
    "parse_bind",
    "serve",
]
