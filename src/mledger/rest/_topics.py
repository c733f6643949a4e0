"""Pulsar's ``PersistentTopics`` REST resources, v2 and v1, mapped onto ``Admin.topics``, and
its ``NonPersistentTopics`` ones (v2), mapped onto ``Admin.non_persistent``.

The routes are the ``topics`` operations of the admin operation table
(:data:`mledger.admin.OPERATIONS`: method, path, admin call, success status), in its
order, under ``/admin/v2/persistent/{tenant}/{namespace}`` and v1's
``/admin/persistent/{property}/{cluster}/{namespace}``, and its ``non_persistent`` operations
under ``/admin/v2/non-persistent/{tenant}/{namespace}``; the topic operations under the
non-persistent prefixes answer 405 (``Operation not allowed on non-persistent topic``), as v1 does
for every non-persistent path. Handlers are generated from the table
(:mod:`mledger.rest._operation_routes`) but for the operations with logic of their own, written
here. ``{topic}`` and ``{subName}`` are URL-encoded as Pulsar's clients encode them: ``+`` is a
space and ``%2F`` stays in the name.

``terminate`` answers the last message id as Pulsar's ``MessageIdImpl`` JSON
(``{"ledgerId": L, "entryId": E, "partitionIndex": -1}``), 405 on a partitioned topic;
``terminate/partitions`` answers ``{"0": {...}, "1": {...}}`` per partition.

Each handler runs its dependencies in Pulsar's order: authentication first (401 before
anything else, like Pulsar's ``AuthenticationFilter``), then the v1 cluster (412 ``Cluster <c>
does not exist``) and the domain (``non-persistent``: 405), then the names (a namespace: 412
"Namespace name is not valid"; a topic or subscription: 400), then its own
parameters, then **one** admin call on a worker thread (at most ``max_concurrency`` at once);
all admin logic (authorization, fan-out to partitions, errors) is in :mod:`mledger.admin`.

``cancelDelayedMessage`` follows PIP-423 exactly: the topic name is checked, then
``ledgerId``/``entryId`` (missing, not a Java ``long`` or negative: 412; the v2 text is
"ledgerId, entryId must be positive.", the v1 text "... non-negative."), then the admin call.
A subscription that refuses (a cumulative-ack type) makes it 412 "Failed to cancel delayed
message ..."; the others are cancelled all the same. Both the 204 and that 412 carry the
per-subscription outcome in the header ``X-Mledger-Cancel-Results`` (``{"sub": true, ...}``).
``authoritative`` (Pulsar's redirect flag) is ignored, like any query parameter a route does
not name.

``stats`` and ``partitioned-stats`` take Pulsar's query parameters ``getPreciseBacklog``
(accepted; mledger's backlog is always precise), ``subscriptionBacklogSize`` (default true;
false: each subscription's ``backlogSize`` is -1), ``getEarliestTimeInBacklog`` (default false)
and, for ``partitioned-stats``, ``perPartition`` (default true, as Pulsar's REST API: each
partition's stats under ``partitions``). A partitioned topic's ``stats`` is 405 (use
``partitioned-stats``), a non-partitioned topic's ``partitioned-stats`` 404.

mledger extensions and limits: ``PUT .../subscription/{subName}?subscriptionType=Shared``
stores the subscription's type (Pulsar has no such parameter; default Exclusive); a reset body
with ``isExcluded: true`` is refused (400); ``force`` on subscription deletion is ignored (412
while consumers are connected); a partitioned topic's ``internalStats`` is 405 (use
``partitioned-internalStats``).

A topic's v2 ``internalStats``, the one call a capture or watch poll makes per topic-partition
where nothing changed, is also served by a plain Starlette route ahead of the documented one
(:func:`internal_stats_route`): the same checks in the same order, the same admin call and
answer, without FastAPI's per-request dependency solving (about 100 us of the server's CPU per
call, a tenth of it); the FastAPI route stays for the OpenAPI document and v1.
"""

# No "from __future__ import annotations": FastAPI reads the handlers' annotations, which name
# dependency types local to topics_router().
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.routing import Route

from ..admin import CANCEL_RESULTS_HEADER, Admin, AdminOperation, ErrorBody, Group, ResetCursorData, operations
from ..broker import TopicName, check_namespace_name
from ..codec import MessageId
from ..core import NotAllowedError, PreconditionFailedError
from ._context import AppContext, context_of
from ._operation_routes import (
    INT64_MAX,
    INT64_MIN,
    JSON,
    PATH_PARAMETERS,
    Namespace,
    OperationRoutes,
    Tenant,
    admin_call,
    decode_name,
    decode_segment,
    endpoint,
    flag_parameters,
    flag_values,
    parameter,
    read_body,
    respond,
)

__all__ = ["VALIDATION_412_ROUTES", "Call", "internal_stats_route", "topic_call", "topics_router"]

_NEGATIVE_IDS = {
    "v1": "ledgerId, entryId must be non-negative.",
    "v2": "ledgerId, entryId must be positive.",
}

VALIDATION_412_ROUTES = frozenset({"v1_cancel_delayed_message", "v2_cancel_delayed_message"})
"""Routes whose invalid parameters are 412, not 400 (PIP-423: cancelDelayedMessage)."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "invalid name, parameter or body"),
        (401, "authentication required"),
        (403, "the role may not"),
        (404, "topic or subscription not found"),
        (412, "a precondition failed"),
    )
}
_PERSISTENT = "persistent"
_CALL_NAMES = frozenset({"tenant", "namespace", "topic", "subName"})
"""The path names a topic route's dependency reads (:class:`Call`)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One matched request: the caller's admin view, the API version, the namespace and, for
    topic and subscription routes, the full topic name and the subscription name (decoded and
    checked)."""

    admin: Admin
    context: AppContext
    version: Literal["v1", "v2"]
    tenant: str
    namespace: str
    topic: str = ""
    subscription: str = ""

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def arguments(self) -> list[str]:
        """The admin call's first arguments: the topic (else the namespace), the subscription."""
        return [self.topic or self.namespace_name, *([self.subscription] if self.subscription else [])]

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a worker thread (admin calls may block on storage)."""
        return await self.context.run(fn, *args, **kwargs)


# -- dependencies ------------------------------------------------------------------------------


async def _call(
    request: Request,
    version: Literal["v1", "v2"],
    domain: str,
    tenant: str,
    namespace: str,
    cluster: str | None = None,
    topic: str | None = None,
    subscription: str | None = None,
    served: bool = True,
) -> Call:
    """The checks every topic route runs, in Pulsar's order: authentication (401, as Pulsar's
    filter, first of all), the v1 cluster (412), the domain (405 unless ``served``), then the
    names: a namespace route's ``tenant/namespace`` (412 "Namespace name is not valid", Pulsar's
    ``validateNamespaceName``), a topic route's full topic name (400, its tenant and namespace
    by the same rule: :meth:`TopicName.parse`), the subscription (400)."""
    context = context_of(request)
    admin = await context.admin_for(request.scope)
    if cluster is not None:
        name = decode_segment(cluster, "cluster")
        if name != context.cluster:
            raise PreconditionFailedError(f"Cluster {name} does not exist")
    if not served:
        raise NotAllowedError("Operation not allowed on non-persistent topic")
    tenant = decode_segment(tenant, "property" if version == "v1" else "tenant")
    namespace = decode_segment(namespace, "namespace")
    full_topic = ""
    if topic is None:
        check_namespace_name(f"{tenant}/{namespace}")
    else:
        local = decode_name(topic, "topic name")
        full_topic = str(TopicName.parse(f"{domain}://{tenant}/{namespace}/{local}", any_domain=True))
    sub = decode_name(subscription, "subscription name") if subscription is not None else ""
    return Call(admin, context, version, tenant, namespace, full_topic, sub)


async def topic_call(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> Call:
    """The checks of a v2 persistent topic route (see ``_call``) for routes outside the admin
    paths (the HTTP lookup)."""
    return await _call(request, "v2", domain, tenant, namespace, topic=topic, served=domain == _PERSISTENT)


Property = Annotated[str, Path(description="tenant (v1: property)")]
Cluster = Annotated[str, Path(description="the cluster: must be this server's")]
TopicSegment = Annotated[str, Path(description="the topic's local name, URL-encoded (Java URLEncoder: space is +)")]
SubscriptionSegment = Annotated[str, Path(alias="subName", description="the subscription name, URL-encoded")]


def _dependencies(version: Literal["v1", "v2"], domain: str, served: bool) -> tuple[Any, Any, Any]:
    """The namespace, topic and subscription dependencies of one API version and domain: one
    dependency per request (FastAPI's cost grows with every dependency it solves)."""
    if version == "v2":

        async def v2_call(request: Request, tenant: Tenant, namespace: Namespace) -> Call:
            return await _call(request, "v2", domain, tenant, namespace, served=served)

        async def v2_topic_call(request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment) -> Call:
            return await _call(request, "v2", domain, tenant, namespace, topic=topic, served=served)

        async def v2_subscription_call(
            request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment, sub_name: SubscriptionSegment
        ) -> Call:
            return await _call(
                request, "v2", domain, tenant, namespace, topic=topic, subscription=sub_name, served=served
            )

        return v2_call, v2_topic_call, v2_subscription_call

    async def v1_call(request: Request, property: Property, cluster: Cluster, namespace: Namespace) -> Call:
        return await _call(request, "v1", domain, property, namespace, cluster, served=served)

    async def v1_topic_call(
        request: Request, property: Property, cluster: Cluster, namespace: Namespace, topic: TopicSegment
    ) -> Call:
        return await _call(request, "v1", domain, property, namespace, cluster, topic=topic, served=served)

    async def v1_subscription_call(
        request: Request,
        property: Property,
        cluster: Cluster,
        namespace: Namespace,
        topic: TopicSegment,
        sub_name: SubscriptionSegment,
    ) -> Call:
        return await _call(
            request, "v1", domain, property, namespace, cluster, topic=topic, subscription=sub_name, served=served
        )

    return v1_call, v1_topic_call, v1_subscription_call


# -- the router --------------------------------------------------------------------------------


def _no_content(headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=204, headers=headers)


def topics_router(
    version: Literal["v1", "v2"],
    domain: str,
    prefix: str,
    include_in_schema: bool = True,
    tag: str | None = None,
    group: Group = "topics",
) -> APIRouter:
    """The routes of ``group``'s operations (``topics``, or ``non_persistent`` under the v2
    non-persistent prefix) for one API version and domain under the namespace path ``prefix``;
    the ``topics`` operations refuse a domain other than ``persistent`` (405).

    The routes carry their full paths: add them to the app's router (``routes.extend``) rather
    than ``include_router`` them, which costs a second routing pass per request. Operation ids
    are ``<version>_<operation>`` (``v2_skip_by_message_ids``; ``v2_non_persistent_get_stats``).
    """
    namespace_call, topic_call, subscription_call = _dependencies(
        version, domain, served=group != "topics" or domain == _PERSISTENT
    )
    # the names are checked (400) in the dependency, before the handler's own query parameters
    # are validated: Pulsar's validateTopicName comes first
    CallDep = Annotated[Call, Depends(namespace_call)]
    TopicCallDep = Annotated[Call, Depends(topic_call)]
    SubCallDep = Annotated[Call, Depends(subscription_call)]
    router = APIRouter(
        prefix=prefix, responses=_ERRORS, include_in_schema=include_in_schema, tags=[tag] if tag else None
    )

    def generated(op: AdminOperation) -> Callable[..., Any]:
        """The handler of an operation whose call takes the topic (or the namespace), the
        subscription, the path's other names, the body and the flags."""
        names = [PATH_PARAMETERS[name] for name in op.path_parameters if name not in _CALL_NAMES]
        dependency = SubCallDep if "{subName}" in op.path else TopicCallDep if "{topic}" in op.path else CallDep
        parameters = [parameter("call", dependency), parameter("request", Request)]
        parameters += [parameter(p.name, p.annotation) for p in names] + flag_parameters(op)

        async def run(values: dict[str, Any]) -> Response:
            call: Call = values["call"]
            args = [*call.arguments, *(p.decode(values[p.name]) for p in names)]
            args += await read_body(op, values["request"])
            return respond(op, await call.run(admin_call(call.admin, op), *args, **flag_values(op, values)))

        return endpoint(op, parameters, run)

    routes = OperationRoutes(group)
    if group == "topics":
        _add_handwritten(routes, TopicCallDep, SubCallDep)
    routes.add_to(router, generated, lambda op: op.topic_suffix, lambda op: _route_options(version, op))
    return router


def internal_stats_route(prefix: str) -> Route:
    """``GET {prefix}/{topic}/internalStats`` (``prefix``: the v2 persistent namespace path) as a
    plain Starlette route answering what the table's route answers (see the module docstring):
    add it to the app's routes before that one. GET only (no HEAD, as FastAPI's routes)."""
    (op,) = [op for op in operations("topics") if op.call == "internal_stats"]

    async def internal_stats(request: Request) -> Response:
        names = request.path_params
        call = await _call(request, "v2", _PERSISTENT, names["tenant"], names["namespace"], topic=names["topic"])
        return respond(op, await call.run(admin_call(call.admin, op), *call.arguments))

    route = Route(prefix + op.topic_suffix, internal_stats, methods=[op.method], include_in_schema=False)
    route.methods = {op.method}  # Starlette adds HEAD to a GET route
    return route


def _add_handwritten(routes: OperationRoutes, TopicCallDep: Any, SubCallDep: Any) -> None:
    """The topic operations with logic of their own."""

    @routes.handles("cancel_delayed_message")
    async def cancel_delayed_message(
        call: TopicCallDep,
        ledger_id: Annotated[
            int | None,
            Query(
                alias="ledgerId", ge=INT64_MIN, le=INT64_MAX, description="ledger id of the message (412 if missing)"
            ),
        ] = None,
        entry_id: Annotated[
            int | None,
            Query(alias="entryId", ge=INT64_MIN, le=INT64_MAX, description="entry id of the message (412 if missing)"),
        ] = None,
        subscription_names: Annotated[
            list[str] | None,
            Query(alias="subscriptionNames", description="repeated or comma-separated; default: every subscription"),
        ] = None,
    ) -> Response:
        for field, value in (("ledgerId", ledger_id), ("entryId", entry_id)):
            if value is None:
                raise PreconditionFailedError(f"Failed to cancel delayed message: missing {field}")
        assert ledger_id is not None and entry_id is not None
        if ledger_id < 0 or entry_id < 0:
            raise PreconditionFailedError(_NEGATIVE_IDS[call.version])
        names = [part.strip() for value in subscription_names or () for part in value.split(",") if part.strip()]
        result = await call.run(
            call.admin.topics.cancel_delayed_message,
            call.topic,
            ledger_id,
            entry_id,
            subscription_names=list(dict.fromkeys(names)) or None,
        )
        header = {CANCEL_RESULTS_HEADER: json.dumps(result.results, separators=(",", ":"))}
        if result.refusal is not None:
            return Response(
                ErrorBody(reason=result.refusal).model_dump_json(), status_code=412, media_type=JSON, headers=header
            )
        return _no_content(header)

    @routes.handles(
        "create_subscription",
        openapi_extra={
            "requestBody": {
                "required": False,
                "description": "where it starts (optional)",
                "content": {JSON: {"schema": {"$ref": "#/components/schemas/ResetCursorData"}}},
            }
        },
    )
    async def create_subscription(
        call: SubCallDep,
        request: Request,
        subscription_type: Annotated[
            str | None,
            Query(alias="subscriptionType", description="Exclusive (default), Shared, Failover or Key_Shared"),
        ] = None,
    ) -> Response:
        body = ResetCursorData.parse_body(await request.body(), "create subscription")
        position = MessageId.LATEST if body is None else body.to_message_id()
        await call.run(
            call.admin.topics.create_subscription,
            call.topic,
            call.subscription,
            position=position,
            subscription_type=subscription_type or None,
        )
        return _no_content()

    @routes.handles("delete_subscription")
    async def delete_subscription(
        call: SubCallDep,
        force: Annotated[bool, Query(description="ignored: refused (412) while consumers are connected")] = False,
    ) -> Response:
        await call.run(call.admin.topics.delete_subscription, call.topic, call.subscription)
        return _no_content()


def _route_options(version: str, op: AdminOperation) -> dict[str, Any]:
    """Operation ids ``<version>_<operation>`` (``<version>_non_persistent_<operation>`` for the
    non-persistent ones); no body class for a 204."""
    name = f"{version}_{'' if op.group == 'topics' else op.group + '_'}{op.name}"
    return {"name": name, "operation_id": name, "response_class": Response if op.status == 204 else JSONResponse}
