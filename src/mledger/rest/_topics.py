"""Pulsar's ``PersistentTopics`` REST resources, v2 and v1, mapped onto ``Admin.topics``.

The routes are the ``topics`` operations of the admin operation table
(:data:`mledger.admin._operations.OPERATIONS`: method, path, admin call, success status), in its
order, under ``/admin/v2/persistent/{tenant}/{namespace}`` and v1's
``/admin/persistent/{property}/{cluster}/{namespace}``; each handler here is registered under its
operation's name. ``{topic}`` and ``{subName}`` are URL-encoded as Pulsar's clients encode them:
``+`` is a space and ``%2F`` stays in the name.

``terminate`` answers the last message id as Pulsar's ``MessageIdImpl`` JSON
(``{"ledgerId": L, "entryId": E, "partitionIndex": -1}``), 405 on a partitioned topic;
``terminate/partitions`` answers ``{"0": {...}, "1": {...}}`` per partition.

Each handler runs its dependencies in Pulsar's order: authentication first (401 before
anything else, like Pulsar's ``AuthenticationFilter``), then the v1 cluster (412 ``Cluster <c>
does not exist``) and the domain (``non-persistent``: 405), then the names (400), then its own
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
"""

# No "from __future__ import annotations": FastAPI reads the handlers' annotations, which name
# dependency types local to topics_router().
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import unquote, unquote_plus

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from ..admin import Admin
from ..admin._operations import AdminOperation
from ..admin._policies import (
    RetentionPoliciesData,
    parse_actions_body,
    parse_compaction_threshold_body,
    parse_strategy_body,
)
from ..admin._requests import ResetCursorData, SkipMessageIdsRequest, partitions_from_body
from ..admin._stats import (
    PartitionedTopicInternalStats,
    PartitionedTopicMetadata,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
)
from ..admin._wire import CANCEL_RESULTS_HEADER, ErrorBody
from ..broker._names import TopicName, local_name_problem, named_entity_problem
from ..codec._messageid import MessageId
from ..core._errors import InvalidRequestError, NotAllowedError, PreconditionFailedError
from ._context import AppContext, context_of
from ._operation_routes import OperationRoutes

__all__ = [
    "VALIDATION_412_ROUTES",
    "Call",
    "CallerAdmin",
    "decode_name",
    "decode_segment",
    "topic_call",
    "topics_router",
]

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

_NEGATIVE_IDS = {
    "v1": "ledgerId, entryId must be non-negative.",
    "v2": "ledgerId, entryId must be positive.",
}

VALIDATION_412_ROUTES = frozenset({"v1_cancel_delayed_message", "v2_cancel_delayed_message"})
"""Routes whose invalid parameters are 412, not 400 (PIP-423: cancelDelayedMessage)."""

JSON = "application/json"
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


# -- names in paths ------------------------------------------------------------------------


def decode_segment(text: str, what: str) -> str:
    """A tenant, namespace or cluster segment: percent-decoded (JAX-RS ``@PathParam``) and checked
    with Pulsar's naming rule. 400 naming the problem."""
    try:
        value = unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"Invalid {what} {text!r}: not valid percent-encoded UTF-8") from None
    problem = named_entity_problem(value)
    if problem:
        raise InvalidRequestError(f"Invalid {what} {value!r}: {problem}")
    return value


def decode_name(text: str, what: str) -> str:
    """A topic or subscription segment decoded like Java's ``URLDecoder`` (``+`` is a space), as
    Pulsar's ``Codec.decode`` reads its ``@Encoded`` parameters. 400 if not UTF-8, blank, ``.``,
    ``..`` or holding a control character."""
    try:
        value = unquote_plus(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"Invalid {what} {text!r}: not valid percent-encoded UTF-8") from None
    problem = local_name_problem(value)
    if problem:
        raise InvalidRequestError(f"Invalid {what} {value!r}: {problem}")
    return value


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

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a worker thread (admin calls may block on storage)."""
        return await self.context.run(fn, *args, **kwargs)


# -- dependencies ------------------------------------------------------------------------------


async def caller_admin(request: Request) -> Admin:
    """Authentication (Pulsar's filter, first of all): the admin acting for the caller's role.
    The namespace dependencies of the topic routes do the same themselves (one dependency less
    per request)."""
    return await context_of(request).admin_for(request.scope)


CallerAdmin = Annotated[Admin, Depends(caller_admin)]


def _refuse_non_persistent(domain: str) -> None:
    if domain == "non-persistent":
        raise NotAllowedError("Operation not allowed on non-persistent topic")


async def _call(
    request: Request,
    version: Literal["v1", "v2"],
    domain: str,
    tenant: str,
    namespace: str,
    cluster: str | None = None,
    topic: str | None = None,
    subscription: str | None = None,
) -> Call:
    """The checks every topic route runs, in Pulsar's order: authentication (401, as Pulsar's
    filter, first of all), the v1 cluster (412), the domain (405), then the names (400):
    tenant, namespace, topic, subscription."""
    context = context_of(request)
    admin = await context.admin_for(request.scope)
    if cluster is not None:
        name = decode_segment(cluster, "cluster")
        if name != context.cluster:
            raise PreconditionFailedError(f"Cluster {name} does not exist")
    _refuse_non_persistent(domain)
    tenant = decode_segment(tenant, "property" if version == "v1" else "tenant")
    namespace = decode_segment(namespace, "namespace")
    full_topic = ""
    if topic is not None:
        local = decode_name(topic, "topic name")
        full_topic = str(TopicName.parse(f"persistent://{tenant}/{namespace}/{local}"))
    sub = decode_name(subscription, "subscription name") if subscription is not None else ""
    return Call(admin, context, version, tenant, namespace, full_topic, sub)


async def topic_call(request: Request, domain: str, tenant: str, namespace: str, topic: str) -> Call:
    """The checks of a v2 topic route (see ``_call``) for routes outside the admin paths (the
    HTTP lookup)."""
    return await _call(request, "v2", domain, tenant, namespace, topic=topic)


Tenant = Annotated[str, Path(description="tenant")]
Property = Annotated[str, Path(description="tenant (v1: property)")]
Cluster = Annotated[str, Path(description="the cluster: must be this server's")]
Namespace = Annotated[str, Path(description="namespace")]
TopicSegment = Annotated[str, Path(description="the topic's local name, URL-encoded (Java URLEncoder: space is +)")]
SubscriptionSegment = Annotated[str, Path(alias="subName", description="the subscription name, URL-encoded")]


def _dependencies(version: Literal["v1", "v2"], domain: str) -> tuple[Any, Any, Any]:
    """The namespace, topic and subscription dependencies of one API version and domain: one
    dependency per request (FastAPI's cost grows with every dependency it solves)."""
    if version == "v2":

        async def v2_call(request: Request, tenant: Tenant, namespace: Namespace) -> Call:
            return await _call(request, "v2", domain, tenant, namespace)

        async def v2_topic_call(request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment) -> Call:
            return await _call(request, "v2", domain, tenant, namespace, topic=topic)

        async def v2_subscription_call(
            request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment, sub_name: SubscriptionSegment
        ) -> Call:
            return await _call(request, "v2", domain, tenant, namespace, topic=topic, subscription=sub_name)

        return v2_call, v2_topic_call, v2_subscription_call

    async def v1_call(request: Request, property: Property, cluster: Cluster, namespace: Namespace) -> Call:
        return await _call(request, "v1", domain, property, namespace, cluster)

    async def v1_topic_call(
        request: Request, property: Property, cluster: Cluster, namespace: Namespace, topic: TopicSegment
    ) -> Call:
        return await _call(request, "v1", domain, property, namespace, cluster, topic=topic)

    async def v1_subscription_call(
        request: Request,
        property: Property,
        cluster: Cluster,
        namespace: Namespace,
        topic: TopicSegment,
        sub_name: SubscriptionSegment,
    ) -> Call:
        return await _call(request, "v1", domain, property, namespace, cluster, topic=topic, subscription=sub_name)

    return v1_call, v1_topic_call, v1_subscription_call


# -- responses ---------------------------------------------------------------------------------


def _json(value: Any) -> Response:
    if hasattr(value, "model_dump_json"):
        return Response(value.model_dump_json(by_alias=True), media_type=JSON)
    return Response(json.dumps(value, separators=(",", ":")), media_type=JSON)


def _message_id_json(mid: MessageId) -> dict[str, int]:
    """Pulsar's ``MessageIdImpl`` as its REST API writes it."""
    return {"ledgerId": mid.ledger_id, "entryId": mid.entry_id, "partitionIndex": mid.partition}


def _no_content(headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=204, headers=headers)


def _body(schema: dict[str, Any], description: str, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON request body (the handler parses the raw body itself,
    with the admin library's Pulsar-compatible parser and its error messages)."""
    return {"requestBody": {"required": required, "description": description, "content": {JSON: {"schema": schema}}}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


# -- the router --------------------------------------------------------------------------------


def topics_router(
    version: Literal["v1", "v2"], domain: str, prefix: str, include_in_schema: bool = True, tag: str | None = None
) -> APIRouter:
    """The topic routes for one API version and domain under the namespace path ``prefix``.

    The routes carry their full paths: add them to the app's router (``routes.extend``) rather
    than ``include_router`` them, which costs a second routing pass per request. Operation ids
    are ``<version>_<operation>`` (``v2_skip_by_message_ids``).
    """
    namespace_call, topic_call, subscription_call = _dependencies(version, domain)
    # the names are checked (400) in the dependency, before the handler's own query parameters
    # are validated: Pulsar's validateTopicName comes first
    CallDep = Annotated[Call, Depends(namespace_call)]
    TopicCallDep = Annotated[Call, Depends(topic_call)]
    SubCallDep = Annotated[Call, Depends(subscription_call)]
    router = APIRouter(
        prefix=prefix, responses=_ERRORS, include_in_schema=include_in_schema, tags=[tag] if tag else None
    )

    routes = OperationRoutes("topics")

    @routes.handles("list_topics", response_model=list[str])
    async def list_topics(call: CallDep) -> Response:
        return _json(await call.run(call.admin.topics.list_topics, call.namespace_name))

    @routes.handles("list_partitioned_topics", response_model=list[str])
    async def list_partitioned_topics(call: CallDep) -> Response:
        return _json(await call.run(call.admin.topics.list_partitioned_topics, call.namespace_name))

    @routes.handles("create_topic", responses={409: {"model": ErrorBody, "description": "the topic exists"}})
    async def create_topic(call: TopicCallDep) -> Response:
        await call.run(call.admin.topics.create_topic, call.topic)
        return _no_content()

    @routes.handles("delete_topic")
    async def delete_topic(
        call: TopicCallDep,
        force: Annotated[bool, Query(description="even with connected producers or consumers")] = False,
    ) -> Response:
        await call.run(call.admin.topics.delete_topic, call.topic, force=force)
        return _no_content()

    @routes.handles("get_partitioned_metadata", response_model=PartitionedTopicMetadata)
    async def get_partitioned_metadata(
        call: TopicCallDep,
        check_allow_auto_creation: Annotated[
            bool,
            Query(
                alias="checkAllowAutoCreation",
                description="a missing topic that would be created on first use answers 0, not 404",
            ),
        ] = False,
    ) -> Response:
        metadata = call.admin.topics.partitioned_topic_metadata
        return _json(await call.run(metadata, call.topic, check_allow_auto_creation))

    @routes.handles(
        "create_partitioned_topic",
        openapi_extra=_body({"type": "integer", "minimum": 1}, "the number of partitions"),
        responses={409: {"model": ErrorBody, "description": "the topic exists"}},
    )
    async def create_partitioned_topic(call: TopicCallDep, request: Request) -> Response:
        partitions = partitions_from_body(await request.body())
        await call.run(call.admin.topics.create_topic, call.topic, partitions=partitions)
        return _no_content()

    @routes.handles("delete_partitioned_topic")
    async def delete_partitioned_topic(
        call: TopicCallDep,
        force: Annotated[bool, Query(description="even with connected producers or consumers")] = False,
    ) -> Response:
        await call.run(call.admin.topics.delete_topic, call.topic, force=force)
        return _no_content()

    @routes.handles("get_subscriptions", response_model=list[str])
    async def get_subscriptions(call: TopicCallDep) -> Response:
        return _json(await call.run(call.admin.topics.list_subscriptions, call.topic))

    PreciseBacklog = Annotated[
        bool, Query(alias="getPreciseBacklog", description="accepted: mledger's backlog is always precise")
    ]
    BacklogSize = Annotated[
        bool,
        Query(alias="subscriptionBacklogSize", description="each subscription's backlogSize (false: -1)"),
    ]
    EarliestTime = Annotated[
        bool,
        Query(
            alias="getEarliestTimeInBacklog",
            description="the publish time of each backlog's first message (one entry read per subscription)",
        ),
    ]

    @routes.handles(
        "get_stats",
        response_model=TopicStatsData,
        responses={405: {"model": ErrorBody, "description": "a partitioned topic: use partitioned-stats"}},
    )
    async def get_stats(
        call: TopicCallDep,
        get_precise_backlog: PreciseBacklog = False,
        subscription_backlog_size: BacklogSize = True,
        get_earliest_time_in_backlog: EarliestTime = False,
    ) -> Response:
        stats = await call.run(
            call.admin.topics.stats,
            call.topic,
            get_precise_backlog=get_precise_backlog,
            subscription_backlog_size=subscription_backlog_size,
            get_earliest_time_in_backlog=get_earliest_time_in_backlog,
        )
        return Response(stats.to_json(indent=None), media_type=JSON)

    @routes.handles("get_partitioned_stats", response_model=PartitionedTopicStatsData)
    async def get_partitioned_stats(
        call: TopicCallDep,
        per_partition: Annotated[
            bool, Query(alias="perPartition", description="each partition's stats under partitions")
        ] = True,
        get_precise_backlog: PreciseBacklog = False,
        subscription_backlog_size: BacklogSize = True,
        get_earliest_time_in_backlog: EarliestTime = False,
    ) -> Response:
        stats = await call.run(
            call.admin.topics.partitioned_stats,
            call.topic,
            per_partition=per_partition,
            get_precise_backlog=get_precise_backlog,
            subscription_backlog_size=subscription_backlog_size,
            get_earliest_time_in_backlog=get_earliest_time_in_backlog,
        )
        return Response(stats.to_json(indent=None), media_type=JSON)

    @routes.handles(
        "get_internal_stats",
        response_model=PersistentTopicInternalStats,
        responses={405: {"model": ErrorBody, "description": "a partitioned topic: use partitioned-internalStats"}},
    )
    async def get_internal_stats(call: TopicCallDep) -> Response:
        return _json(await call.run(call.admin.topics.internal_stats, call.topic))

    @routes.handles("get_partitioned_internal_stats", response_model=PartitionedTopicInternalStats)
    async def get_partitioned_internal_stats(call: TopicCallDep) -> Response:
        return _json(await call.run(call.admin.topics.partitioned_internal_stats, call.topic))

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
        openapi_extra=_body(_ref("ResetCursorData"), "where it starts (optional)", required=False),
        responses={409: {"model": ErrorBody, "description": "the subscription exists"}},
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

    @routes.handles(
        "skip_by_message_ids",
        openapi_extra=_body(_ref("SkipMessageIdsBody"), "the messages to skip"),
        responses={405: {"model": ErrorBody, "description": "a cumulative-ack subscription (Exclusive, Failover)"}},
    )
    async def skip_by_message_ids(call: SubCallDep, request: Request) -> Response:
        parsed = SkipMessageIdsRequest.parse_body(await request.body())
        await call.run(call.admin.topics.skip_messages, call.topic, call.subscription, parsed)
        return _no_content()

    @routes.handles("skip_all_messages")
    async def skip_all_messages(call: SubCallDep) -> Response:
        await call.run(call.admin.topics.clear_backlog, call.topic, call.subscription)
        return _no_content()

    @routes.handles("skip_messages")
    async def skip_messages(
        call: SubCallDep,
        num_messages: Annotated[int, Path(alias="numMessages", ge=0, le=INT32_MAX, description="how many")],
    ) -> Response:
        await call.run(call.admin.topics.skip, call.topic, call.subscription, num_messages)
        return _no_content()

    @routes.handles("reset_cursor_to_time")
    async def reset_cursor_to_time(
        call: SubCallDep,
        timestamp: Annotated[int, Path(ge=INT64_MIN, le=INT64_MAX, description="epoch milliseconds")],
    ) -> Response:
        await call.run(call.admin.topics.reset_cursor_by_time, call.topic, call.subscription, timestamp)
        return _no_content()

    @routes.handles(
        "reset_cursor_on_position", openapi_extra=_body(_ref("ResetCursorData"), "the message id to reset to")
    )
    async def reset_cursor_on_position(
        call: SubCallDep,
        request: Request,
    ) -> Response:
        body = ResetCursorData.parse_body(await request.body(), "reset cursor")
        if body is None:
            raise InvalidRequestError('Invalid reset cursor body: empty (expected {"ledgerId": L, "entryId": E})')
        await call.run(call.admin.topics.reset_cursor, call.topic, call.subscription, body.to_message_id())
        return _no_content()

    @routes.handles("get_retention", response_model=RetentionPoliciesData | None)
    async def get_retention(
        call: TopicCallDep,
        applied: Annotated[
            bool, Query(description="the policy in force: the topic's, else the namespace's, else the broker's default")
        ] = False,
    ) -> Response:
        policies = await call.run(call.admin.topics.get_retention, call.topic, applied=applied)
        return _json(None if policies is None else policies.to_json())

    @routes.handles(
        "set_retention",
        openapi_extra=_body(_ref("RetentionPoliciesData"), "retentionTimeInMinutes and retentionSizeInMB"),
    )
    async def set_retention(call: TopicCallDep, request: Request) -> Response:
        policies = RetentionPoliciesData.parse_body(await request.body())
        await call.run(call.admin.topics.set_retention, call.topic, policies)
        return _no_content()

    @routes.handles("remove_retention")
    async def remove_retention(call: TopicCallDep) -> Response:
        await call.run(call.admin.topics.remove_retention, call.topic)
        return _no_content()

    @routes.handles("trigger_compaction")
    async def trigger_compaction(call: TopicCallDep) -> Response:
        await call.run(call.admin.topics.trigger_compaction, call.topic)
        return _no_content()

    @routes.handles("compaction_status")
    async def compaction_status(call: TopicCallDep) -> Response:
        status = await call.run(call.admin.topics.compaction_status, call.topic)
        return _json(status.to_json())

    @routes.handles("get_compaction_threshold")
    async def get_compaction_threshold(
        call: TopicCallDep,
        applied: Annotated[
            bool, Query(description="the threshold in force: the topic's, else the namespace's, else the broker's")
        ] = False,
    ) -> Response:
        return _json(await call.run(call.admin.topics.get_compaction_threshold, call.topic, applied=applied))

    @routes.handles(
        "set_compaction_threshold",
        openapi_extra=_body({"type": "integer", "format": "int64"}, "bytes not compacted yet that trigger compaction"),
    )
    async def set_compaction_threshold(call: TopicCallDep, request: Request) -> Response:
        threshold = parse_compaction_threshold_body(await request.body())
        await call.run(call.admin.topics.set_compaction_threshold, call.topic, threshold)
        return _no_content()

    @routes.handles("get_permissions")
    async def get_permissions(call: TopicCallDep) -> Response:
        return _json(await call.run(call.admin.topics.permissions, call.topic))

    @routes.handles(
        "grant_permission",
        openapi_extra=_body({"type": "array", "items": {"type": "string"}}, 'actions, e.g. ["produce", "consume"]'),
    )
    async def grant_permission(call: TopicCallDep, request: Request, role: Annotated[str, Path()]) -> Response:
        actions = parse_actions_body(await request.body())
        await call.run(call.admin.topics.grant_permission, call.topic, unquote(role), actions)
        return _no_content()

    @routes.handles("revoke_permission")
    async def revoke_permission(call: TopicCallDep, role: Annotated[str, Path()]) -> Response:
        await call.run(call.admin.topics.revoke_permission, call.topic, unquote(role))
        return _no_content()

    @routes.handles("terminate")
    async def terminate(call: TopicCallDep) -> Response:
        return _json(_message_id_json(await call.run(call.admin.topics.terminate, call.topic)))

    @routes.handles("terminate_partitioned")
    async def terminate_partitioned(call: TopicCallDep) -> Response:
        ids = await call.run(call.admin.topics.terminate_partitioned, call.topic)
        return _json({str(index): _message_id_json(mid) for index, mid in ids.items()})

    @routes.handles("get_schema_compatibility_strategy")
    async def get_schema_compatibility_strategy(
        call: TopicCallDep,
        applied: Annotated[
            bool, Query(description="the strategy in force: the topic's, else the namespace's, else the broker's")
        ] = False,
    ) -> Response:
        strategy = await call.run(call.admin.topics.get_schema_compatibility_strategy, call.topic, applied=applied)
        return _json(None if strategy is None else strategy.value)

    @routes.handles(
        "set_schema_compatibility_strategy", openapi_extra=_body({"type": "string"}, 'the strategy, e.g. "BACKWARD"')
    )
    async def set_schema_compatibility_strategy(call: TopicCallDep, request: Request) -> Response:
        strategy = parse_strategy_body(await request.body())
        await call.run(call.admin.topics.set_schema_compatibility_strategy, call.topic, strategy)
        return _no_content()

    @routes.handles("remove_compaction_threshold")
    async def remove_compaction_threshold(call: TopicCallDep) -> Response:
        await call.run(call.admin.topics.remove_compaction_threshold, call.topic)
        return _no_content()

    @routes.handles("remove_schema_compatibility_strategy")
    async def remove_schema_compatibility_strategy(call: TopicCallDep) -> Response:
        await call.run(call.admin.topics.remove_schema_compatibility_strategy, call.topic)
        return _no_content()

    routes.add_to(router, lambda op: op.topic_suffix, lambda op: _route_options(version, op))
    return router


def _route_options(version: str, op: AdminOperation) -> dict[str, Any]:
    """Operation ids ``<version>_<operation>``; no body class for a 204."""
    name = f"{version}_{op.name}"
    return {"name": name, "operation_id": name, "response_class": Response if op.status == 204 else JSONResponse}
