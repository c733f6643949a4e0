"""REST routes registered from the admin operation table (:mod:`mledger.admin`).

One route per operation of a router's groups, in the table's order, with the table's method,
path, success status and summary, its flags as query parameters, its request body documented
and its response model (from the kinds in :mod:`mledger.admin`), and its documented
error statuses. An operation whose call only takes the path's names, its body and its flags
gets a generated handler (:meth:`OperationRoutes.add_to`'s ``generate``, or
:func:`namespace_handler` for the routes under ``/admin/v2/{tenants,clusters,namespaces}``): the
names decoded (400; the admin call checks them, 412), the body parsed (400, Pulsar's messages),
**one** admin call on a worker thread, the result written as the response kind. A router writes a handler itself
(``@routes.handles(name)``) only for an operation with logic of its own.

Path parameters have one description each (:data:`PATH_PARAMETERS`), whichever route they
appear in.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar
from urllib.parse import unquote, unquote_plus

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from ..admin import REQUESTS, RESPONSES, Admin, AdminOperation, ErrorBody, Group, operations
from ..broker import local_name_problem
from ..core import ConfigError, InvalidRequestError
from ._context import context_of

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "INT64_MIN",
    "JSON",
    "PATH_PARAMETERS",
    "CallerAdmin",
    "Namespace",
    "OperationRoutes",
    "PathParameter",
    "Tenant",
    "admin_call",
    "decode_name",
    "decode_segment",
    "endpoint",
    "flag_parameters",
    "flag_values",
    "namespace_handler",
    "parameter",
    "read_body",
    "respond",
]

F = TypeVar("F", bound=Callable[..., Any])
JSON = "application/json"
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1


# -- names in paths ------------------------------------------------------------------------


def _decoded(text: str, what: str, unquoted: Callable[..., str]) -> str:
    try:
        return unquoted(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"Invalid {what} {text!r}: not valid percent-encoded UTF-8") from None


def decode_segment(text: str, what: str) -> str:
    """A tenant, namespace or cluster segment percent-decoded (JAX-RS ``@PathParam``); 400 if
    not UTF-8. The name itself is checked where it is used, with Pulsar's rule, status and
    message (:func:`~mledger.broker.check_namespace_name` and its siblings, 412)."""
    return _decoded(text, what, unquote)


def decode_name(text: str, what: str) -> str:
    """A topic or subscription segment decoded like Java's ``URLDecoder`` (``+`` is a space), as
    Pulsar's ``Codec.decode`` reads its ``@Encoded`` parameters. 400 if not UTF-8, blank, ``.``,
    ``..`` or holding a control character."""
    value = _decoded(text, what, unquote_plus)
    problem = local_name_problem(value)
    if problem:
        raise InvalidRequestError(f"Invalid {what} {value!r}: {problem}")
    return value


@dataclass(frozen=True, slots=True)
class PathParameter:
    """How a handler takes one name of a path template: the Python parameter ``name``, its
    FastAPI annotation, and ``decode`` turning the segment into the admin call's argument."""

    name: str
    annotation: Any
    decode: Callable[[Any], Any]


Tenant = Annotated[str, Path(description="tenant")]
Namespace = Annotated[str, Path(description="namespace")]


def _same(value: Any) -> Any:
    return value


PATH_PARAMETERS: dict[str, PathParameter] = {
    "tenant": PathParameter("tenant", Tenant, lambda text: decode_segment(text, "tenant")),
    "namespace": PathParameter("namespace", Namespace, lambda text: decode_segment(text, "namespace")),
    "cluster": PathParameter(
        "cluster", Annotated[str, Path(description="cluster")], lambda text: decode_segment(text, "cluster")
    ),
    "role": PathParameter("role", Annotated[str, Path(description="role")], unquote),
    "subscription": PathParameter("subscription", Annotated[str, Path(description="subscription")], unquote),
    "numMessages": PathParameter(
        "num_messages",
        Annotated[int, Path(alias="numMessages", ge=0, le=INT32_MAX, description="how many")],
        _same,
    ),
    "timestamp": PathParameter(
        "timestamp", Annotated[int, Path(ge=INT64_MIN, le=INT64_MAX, description="epoch milliseconds")], _same
    ),
    "faultId": PathParameter(
        "fault_id", Annotated[int, Path(alias="faultId", ge=1, le=INT64_MAX, description="a fault's id")], _same
    ),
    "expireTimeInSeconds": PathParameter(
        "expire_time_seconds",
        Annotated[int, Path(alias="expireTimeInSeconds", ge=0, le=INT32_MAX, description="seconds")],
        _same,
    ),
}
"""The path names a handler takes as its own parameters (a topic route's ``{tenant}``,
``{namespace}``, ``{topic}`` and ``{subName}`` come with its dependency, :mod:`mledger.rest._topics`)."""


async def caller_admin(request: Request) -> Admin:
    """Authentication (Pulsar's filter, first of all): the admin acting for the caller's role."""
    return await context_of(request).admin_for(request.scope)


CallerAdmin = Annotated[Admin, Depends(caller_admin)]


# -- generated handlers --------------------------------------------------------------------


def parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """A keyword parameter of a generated handler."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def flag_parameters(op: AdminOperation) -> list[inspect.Parameter]:
    """The operation's flags as query parameters (``force: bool = False``, ...; a required one
    without a default, 400 "Missing <name>" when absent)."""
    return [
        parameter(
            flag.name,
            Annotated[flag.kind, Query(alias=flag.alias, description=flag.description)],
            inspect.Parameter.empty if flag.required else flag.default,
        )
        for flag in op.query
    ]


def endpoint(
    op: AdminOperation, parameters: list[inspect.Parameter], run: Callable[[dict[str, Any]], Awaitable[Response]]
) -> Callable[..., Awaitable[Response]]:
    """A FastAPI endpoint named after ``op`` taking ``parameters`` (by keyword) and answering
    ``run(values)``. No docstring: FastAPI would document it as the operation's description."""

    async def handler(**values: Any) -> Response:
        return await run(values)

    handler.__name__ = handler.__qualname__ = op.name
    handler.__signature__ = inspect.Signature(parameters, return_annotation=Response)  # type: ignore[attr-defined]
    return handler


def admin_call(admin: Admin, op: AdminOperation) -> Callable[..., Any]:
    """``admin.<group>.<call>`` of ``op`` (an operation with a call: :meth:`OperationRoutes.add_to`
    generates no handler for another)."""
    assert op.call is not None, op
    return getattr(getattr(admin, op.group), op.call)


async def read_body(op: AdminOperation, request: Request) -> list[Any]:
    """``[argument]`` parsed from the request body, or ``[]`` for an operation without one."""
    return [REQUESTS[op.request].read(await request.body())] if op.request is not None else []


def flag_values(op: AdminOperation, values: Mapping[str, Any]) -> dict[str, Any]:
    """The flags' values, by the admin call's keyword."""
    return {flag.name: values[flag.name] for flag in op.query}


def respond(op: AdminOperation, result: Any) -> Response:
    """The response of ``op``: no content (204) or the result as its response kind."""
    if op.response is None:
        return Response(status_code=op.status)
    return Response(RESPONSES[op.response].write(result), status_code=op.status, media_type=JSON)


def namespace_handler(op: AdminOperation) -> Callable[..., Awaitable[Response]]:
    """The handler of an operation under ``/admin/v2/{tenants,clusters,namespaces}``: its path
    names as parameters (``{tenant}/{namespace}`` is one argument, the namespace), then its body
    and flags; authentication (the caller's role) before anything else."""
    names = [PATH_PARAMETERS[name] for name in op.path_parameters]
    parameters = [parameter("request", Request), parameter("admin", CallerAdmin)]
    parameters += [parameter(p.name, p.annotation) for p in names]
    parameters += flag_parameters(op)
    joined = op.path_parameters[:2] == ("tenant", "namespace")

    async def run(values: dict[str, Any]) -> Response:
        args = [p.decode(values[p.name]) for p in names]
        if joined:
            args[:2] = [f"{args[0]}/{args[1]}"]
        request: Request = values["request"]
        args += await read_body(op, request)
        call = admin_call(values["admin"], op)
        return respond(op, await context_of(request).run(call, *args, **flag_values(op, values)))

    return endpoint(op, parameters, run)


def _documented(op: AdminOperation) -> dict[str, Any]:
    """What the table says about ``op`` beyond method, path, status and summary: its response
    model, its documented error statuses and its request body."""
    options: dict[str, Any] = {}
    model = RESPONSES[op.response].model if op.response is not None else None
    if model is not None:
        options["response_model"] = model
    if op.errors:
        options["responses"] = {e.status: {"model": ErrorBody, "description": e.description} for e in op.errors}
    if op.request is not None:
        body = REQUESTS[op.request]
        doc: dict[str, Any] = {"required": body.required, "content": {JSON: {"schema": body.schema}}}
        if body.description is not None:
            doc["description"] = body.description
        options["openapi_extra"] = {"requestBody": doc}
    return options


def _no_options(op: AdminOperation) -> dict[str, Any]:
    return {}


class OperationRoutes:
    """The routes of one router for the operations of ``groups``: handlers written by hand for
    some (:meth:`handles`), generated for the others (:meth:`add_to`)."""

    def __init__(self, *groups: Group) -> None:
        self._operations = tuple(op for group in groups for op in operations(group))
        self._names = {op.name for op in self._operations}
        if len(self._names) != len(self._operations):
            raise ConfigError(f"operation names repeat across {groups}")
        self._handlers: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}

    def handles(self, name: str, **options: Any) -> Callable[[F], F]:
        """Decorator: the handler of operation ``name``; ``options`` go to ``add_api_route``
        after the table's (``openapi_extra`` replaces the documented body)."""
        if name not in self._names:
            raise ConfigError(f"no admin operation {name!r} in the table")

        def register(fn: F) -> F:
            self._handlers[name] = (fn, options)
            return fn

        return register

    def add_to(
        self,
        router: APIRouter,
        generate: Callable[[AdminOperation], Callable[..., Any]],
        path: Callable[[AdminOperation], str] = lambda op: op.path,
        options: Callable[[AdminOperation], dict[str, Any]] = _no_options,
    ) -> None:
        """One route per operation, in the table's order, at ``path(op)`` with the table's method,
        status, summary and documentation plus ``options(op)``; the handler written for it, else
        ``generate(op)``. ``ConfigError`` for an operation without an admin call or a handler."""
        without = sorted(op.name for op in self._operations if op.call is None and op.name not in self._handlers)
        if without:
            raise ConfigError(f"admin operations without an admin call need a REST handler: {without}")
        for op in self._operations:
            handler, own = self._handlers.get(op.name) or (generate(op), {})
            router.add_api_route(
                path(op),
                handler,
                methods=[op.method],
                summary=op.summary,
                status_code=op.status,
                **{**_documented(op), **options(op), **own},
            )
