"""``create_app``: the admin REST API of an :class:`~mledger.admin.Admin` as a FastAPI app.

The app serves Pulsar's topic admin paths (:mod:`mledger.rest._topics`), ``GET /metrics``
(Prometheus text of the broker), the OpenAPI document at ``/openapi.json`` and interactive docs
at ``/docs`` (Swagger UI) and ``/redoc``, whose scripts and styles the app serves itself from
the fastapi-offline package (``/static-offline-docs/...``): the docs work with no internet
access. ``/metrics`` and the documents need no credentials, like Pulsar's default; the broker's
``authenticate_metrics_endpoint`` (Pulsar's ``authenticateMetricsEndpoint``) and
``authenticate_docs_endpoint`` (an mledger extension) make them answer 401 to callers without a
role (:class:`~mledger.rest._middleware.AuthenticatedPaths`).

Every error is Pulsar's JSON body ``{"reason": "..."}`` with Pulsar's status:

* :class:`~mledger.core.MLedgerError`: its ``http_status`` (400, 401, 403, 404, 405, 409, 412;
  429 with ``Retry-After`` for a password check the failure limiter refused);
* no such route: 404 ``HTTP 404 Not Found``; a known route with another method: 405
  ``HTTP 405 Method Not Allowed`` with ``Allow`` (under ``/admin``, after authentication, as
  Pulsar's filter runs first); either one for an endpoint of Pulsar's admin API v2 that mledger
  does not serve (:data:`~mledger.rest._pulsar_api.FAMILIES`): 501 ``{"reason": "<operation>
  (<method> <path>) is not supported by mledger"}``;
* a parameter FastAPI cannot read (``skip/abc``): 400 naming it (412 for cancelDelayedMessage's
  ids, PIP-423), never FastAPI's 422;
* body limit 413, URL limit 414, anything unexpected 500 (:mod:`mledger.rest._middleware`).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline
from prometheus_client import generate_latest
from prometheus_client.registry import Collector
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from ..admin import (
    Admin,
    BacklogQuotaData,
    ErrorBody,
    InactiveTopicPoliciesData,
    MessageIdItem,
    ResetCursorData,
    RetentionPoliciesData,
)
from ..core import ConfigError, MLedgerError
from ..metrics import CONTENT_TYPE, metrics_registry
from ._auth import RoleResolver, check_authentication_setup, check_endpoint_authentication
from ._context import AppContext, context_of
from ._extensions import extensions_router
from ._lookup import LookupSource, lookup_router
from ._middleware import AdminMiddleware, AuthenticatedPaths, InFlight, error_headers
from ._namespaces import namespaces_router
from ._nonpersistent import non_persistent_router
from ._openapi import SkipMessageIdsBody
from ._protocol import DEFAULT_MAX_URL_BYTES
from ._pulsar_api import Family, unsupported_family
from ._tenants import tenants_router
from ._topics import VALIDATION_412_ROUTES, internal_stats_route, topics_router

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DRAIN_LIMIT", "create_app"]

DEFAULT_MAX_BODY_BYTES = 8 << 20
DRAIN_LIMIT = 64 << 20
"""A refused body declared up to this size is read and dropped after the 413 (the connection is
kept); larger ones close the connection."""

_JSON = "application/json"
V2 = "/admin/v2"


def create_app(
    admin: Admin,
    roles: RoleResolver | None = None,
    cluster: str | None = None,
    metrics: bool = True,
    max_concurrency: int = 16,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_url_bytes: int = DEFAULT_MAX_URL_BYTES,
    collectors: Sequence[Collector] = (),
    lookup: LookupSource | None = None,
) -> FastAPI:
    """The admin REST API of ``admin`` as a FastAPI (ASGI) app; see the module docstring.

    ``roles`` resolves callers (bearer tokens, trusted header; default: none);
    ``cluster`` is the cluster v1 paths must name and the ``cluster`` label of the metrics
    (default: the broker's ``cluster_name``); ``metrics`` serves ``GET /metrics``;
    ``max_concurrency`` bounds the admin calls running at once (worker threads);
    ``collectors`` join ``/metrics`` (e.g. the protocol server's, in ``mledger standalone``);
    ``lookup`` (the protocol server's ``lookup_urls``) serves Pulsar's HTTP topic lookup
    (:mod:`mledger.rest._lookup`), so clients given the ``http://`` URL find the broker.

    Raises :class:`~mledger.core.ConfigError` for bad limits, for ``roles`` that name
    callers while ``admin`` has no authorization (every caller could then do everything), and
    for the broker config's ``authenticate_metrics_endpoint`` / ``authenticate_docs_endpoint``
    without ``roles`` that authenticate.
    Run it with :class:`~mledger.rest.AdminServer`, or with any ASGI server.
    """
    if max_concurrency < 1 or max_body_bytes < 0 or max_url_bytes < 256:
        raise ConfigError("max_concurrency >= 1, max_body_bytes >= 0 and max_url_bytes >= 256 are required")
    roles = roles if roles is not None else RoleResolver()
    check_authentication_setup(roles, admin.authorization_enabled)
    check_endpoint_authentication(roles, admin.broker.config)
    cluster = cluster or admin.broker.config.cluster_name
    app = FastAPIOffline(
        title="mledger admin REST API",
        version=_version(),
        description=(
            "Pulsar's admin REST API (PersistentTopics, v2 and v1 paths) over an mledger broker. "
            'Errors are `{"reason": "..."}` with Pulsar\'s status codes.'
        ),
        redirect_slashes=False,
    )
    app.state.mledger = AppContext(admin, roles, cluster, max_concurrency)
    app.state.in_flight = InFlight()  # AdminServer reads it
    protected = _authenticated_paths(app, admin)
    if protected:  # added first: inside AdminMiddleware, which logs and normalises the path
        app.add_middleware(AuthenticatedPaths, paths=protected, roles=roles)
    app.add_middleware(
        AdminMiddleware,
        max_body_bytes=max_body_bytes,
        max_url_bytes=max_url_bytes,
        drain_limit=DRAIN_LIMIT,
        in_flight=app.state.in_flight,
    )
    if metrics:  # first: the router tries routes in order, and scrapes come often
        _add_metrics(app, cluster, tuple(collectors))

    # the non-persistent routes mledger serves, before their 405 twins below
    app.router.routes.extend(non_persistent_router().routes)
    # a poll's per-topic call, before its documented twin below
    app.router.routes.append(internal_stats_route("/admin/v2/persistent/{tenant}/{namespace}"))
    v2, v1 = "/admin/v2/{domain}/{tenant}/{namespace}", "/admin/{domain}/{property}/{cluster}/{namespace}"
    for version, prefix, domain, documented in (
        ("v2", v2, "persistent", True),
        ("v1", v1, "persistent", True),
        # left out of the document: v1 spelled /admin/v1/..., and the non-persistent domain (405)
        ("v1", "/admin/v1/persistent/{property}/{cluster}/{namespace}", None, False),
        ("v2", v2, "non-persistent", False),
        ("v1", v1, "non-persistent", False),
    ):
        path = prefix.replace("{domain}", domain) if domain else prefix
        router = topics_router(
            version,  # type: ignore[arg-type]
            domain or "persistent",
            path,
            include_in_schema=documented,
            tag=version if documented else None,
        )
        app.router.routes.extend(router.routes)  # full paths: one routing pass (include_router adds one)
    app.router.routes.extend(tenants_router(V2, "clusters and tenants").routes)
    app.router.routes.extend(namespaces_router(V2, "namespaces").routes)
    app.router.routes.extend(extensions_router(V2).routes)
    if lookup is not None:
        app.router.routes.extend(lookup_router(lookup).routes)
    _add_error_handlers(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _authenticated_paths(app: FastAPI, admin: Admin) -> frozenset[str]:
    config = admin.broker.config
    paths: set[str | None] = set()
    if config.authenticate_metrics_endpoint:
        paths.add("/metrics")
    if config.authenticate_docs_endpoint:
        # called before any API route is added: the routes there are the documents FastAPIOffline
        # serves (/openapi.json, /docs, /docs/oauth2-redirect, /redoc), the static Mount left out
        paths.update(route.path for route in app.router.routes if isinstance(route, Route))
    return frozenset(p for p in paths if p)


def _add_metrics(app: FastAPI, cluster: str, collectors: tuple[Collector, ...] = ()) -> None:
    context = context_of_app(app)
    registry = metrics_registry(context.admin.broker, cluster, collectors)  # read when scraped

    @app.get(
        "/metrics",
        summary="Prometheus metrics of every subscription (text format 0.0.4)",
        response_class=Response,
        responses={
            200: {
                "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}},
                "description": "Prometheus text",
            }
        },
        tags=["metrics"],
    )
    async def metrics() -> Response:
        return Response(await context.run(generate_latest, registry), media_type=CONTENT_TYPE)


def context_of_app(app: FastAPI) -> AppContext:
    """The :class:`AppContext` of an app made by :func:`create_app`."""
    context: AppContext = app.state.mledger
    return context


# -- errors ------------------------------------------------------------------------------------


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> Response:
    return Response(ErrorBody(reason=reason).model_dump_json(), status_code=status, media_type=_JSON, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MLedgerError)
    async def admin_error(request: Request, exc: MLedgerError) -> Response:
        return _error(exc.http_status, str(exc) or type(exc).__name__, error_headers(exc) or None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code in (404, 405) and request.url.path.startswith("/admin"):
            try:  # authentication comes first, as Pulsar's filter: 401 before 404 / 405
                await context_of(request).admin_for(request.scope)
            except MLedgerError as e:
                return _error(e.http_status, str(e), error_headers(e) or None)
            family = _unsupported(request)
            if family is not None:
                reason = f"{family.operation} ({family.method} /admin/v2{family.path}) is not supported by mledger"
                return _error(501, reason)
        reason = f"HTTP {exc.status_code} {_PHRASES.get(exc.status_code, 'Error')}"
        return _error(exc.status_code, reason, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(request: Request, exc: RequestValidationError) -> Response:
        route = request.scope.get("route")
        status = 412 if getattr(route, "name", None) in VALIDATION_412_ROUTES else 400
        return _error(status, _validation_reason(exc))


def _unsupported(request: Request) -> Family | None:
    """The Pulsar endpoint family of a request no route matched, if any (501 then)."""
    path = request.url.path
    return unsupported_family(request.method, path[len(V2) :]) if path.startswith(V2 + "/") else None


_PHRASES = {404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large", 400: "Bad Request"}


def _validation_reason(exc: RequestValidationError) -> str:
    """``Invalid <name> '<value>': <why>`` for the first parameter FastAPI could not read."""
    errors = exc.errors()
    if not errors:
        return "Invalid request"
    first = errors[0]
    name = str(first.get("loc", ("", "parameter"))[-1])
    kind = str(first.get("type", ""))
    if kind == "missing":
        return f"Missing {name}"
    value = first.get("input")
    if kind in ("less_than_equal", "greater_than_equal", "less_than", "greater_than"):
        why = "out of range"
    elif kind.startswith("int_"):
        why = "expected an integer"
    elif kind.startswith("bool_"):
        why = "expected true or false"
    else:
        why = str(first.get("msg", "invalid"))
    return f"Invalid {name} {value!r}: {why}"


# -- OpenAPI -----------------------------------------------------------------------------------


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request-body models the handlers parse themselves."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for operations in document["paths"].values():  # FastAPI's 422: this app answers 400 (or 412)
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    template = "#/components/schemas/{model}"
    for name, adapter in (
        ("ResetCursorData", TypeAdapter(ResetCursorData)),
        ("MessageIdItem", TypeAdapter(MessageIdItem)),
        ("SkipMessageIdsBody", TypeAdapter(SkipMessageIdsBody)),
        ("RetentionPoliciesData", TypeAdapter(RetentionPoliciesData)),
        ("BacklogQuotaData", TypeAdapter(BacklogQuotaData)),
        ("InactiveTopicPoliciesData", TypeAdapter(InactiveTopicPoliciesData)),
    ):
        schema = adapter.json_schema(by_alias=True, ref_template=template, mode="validation")
        for key, value in schema.pop("$defs", {}).items():
            schemas.setdefault(key, value)
        schemas[name] = schema
    app.openapi_schema = document
    return document


def _version() -> str:
    try:
        return importlib.metadata.version("mledger")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"
