"""The admin API of a remote ``mledger-admin serve``, over HTTP with httpx (the ``client`` extra).

:class:`RemoteAdmin` has the shape of :class:`~mledger.admin.Admin` that the CLI uses:
``RemoteAdmin(url).topics`` offers the methods of :class:`~mledger.admin.Topics` with the same
arguments, return types (the same pydantic models, parsed from Pulsar's JSON) and errors (an
HTTP error status becomes the :class:`~mledger.core.MLedgerError` subclass of that status,
carrying the server's ``{"reason": ...}``), so ``mledger-admin --admin-url URL topics ...`` runs
the CLI's own command code and prints the same output, with the same exit codes, as against a
data directory.

>>> with RemoteAdmin("http://127.0.0.1:8080", token="s3cr3t") as admin:   # doctest: +SKIP
...     admin.topics.internal_stats("orders").cursors["billing"].mark_delete_position

Connections: one ``httpx.Client`` per ``RemoteAdmin``, so consecutive calls reuse a keep-alive
connection (up to ``max_connections`` at once across threads; the object is thread-safe as the
client is). ``timeout`` bounds connecting (``connect_timeout`` when given), each read and each
write (seconds): it is httpx's, a bound on each wait, so a server that drips a byte now and then
could hold a call forever. ``deadline`` bounds a whole call and ``max_response_bytes`` what it
reads (:mod:`mledger.admin._transport`, the rules the asyncio client made by
:meth:`RemoteAdmin.asynchronous` shares). :meth:`close` (or leaving the ``with`` block) closes
the connections.

Most methods are generated from the admin operation table (:mod:`mledger.admin._operations`):
a method declared with :func:`restates` sends its operation's request (path names, flags, body)
and reads its answer as the operation's response kind (:mod:`mledger.admin._bodies`); the few
with logic of their own are written here.

Differences, both from Pulsar's REST API:

* ``list_topics`` / ``list_partitioned_topics`` need a namespace (the REST API lists one
  namespace at a time): 400 without one;
* ``produce`` and ``consume`` (:data:`LOCAL_ONLY_COMMANDS`) have no admin endpoint.

Names are checked before anything is sent, with the library's checkers and errors (a tenant,
namespace or cluster name: :class:`~mledger.broker.InvalidNameError`, 412; a topic name:
:meth:`~mledger.broker.TopicName.parse`), so both modes refuse a bad name alike.

Credentials: ``token`` is sent as ``Authorization: Bearer <token>``; ``role`` as the
``X-Mledger-Role`` header, which a server only honours with ``--trust-role-header``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from ..broker import (
    SchemaCompatibilityStrategy,
    SubscriptionType,
    TopicName,
    check_cluster_name,
    check_namespace_name,
    check_tenant_name,
)
from ..codec import MessageId
from ..core import LATEST, ConfigError, InvalidRequestError, MissingExtraError, Position, PreconditionFailedError
from ._bodies import REQUESTS, RESPONSES, json_bytes
from ._clock import ClockAdmin
from ._faults import FaultsAdmin
from ._namespaces import Namespaces
from ._nonpersistent import NonPersistentTopicsAdmin, non_persistent_name
from ._operations import AdminOperation, Group, operation, operations
from ._requests import ResetCursorData
from ._tenants import Clusters, Tenants
from ._topics import CancelDelayedMessageResult, Topics
from ._transport import (
    AdminConnectionError,
    AdminResponseTooLargeError,
    AsyncRemoteAdmin,
    Call,
    RemoteAdminError,
    TransportOptions,
    content_headers,
    decode_json,
    error_for,
    httpx,
    tls_context,
)
from ._wire import CANCEL_RESULTS_HEADER, ROLE_HEADER, encode_name, encode_segment

__all__ = [
    "LOCAL_ONLY_COMMANDS",
    "AdminConnectionError",
    "AdminResponseTooLargeError",
    "AsyncRemoteAdmin",
    "RemoteAdmin",
    "RemoteAdminError",
    "RemoteClock",
    "RemoteClusters",
    "RemoteFaults",
    "RemoteNamespaces",
    "RemoteNonPersistentTopics",
    "RemoteTenants",
    "RemoteTopics",
    "error_for",
    "restates",
]

LOCAL_ONLY_COMMANDS = frozenset({"produce", "consume"})
"""CLI commands that need ``--data-dir``: Pulsar's admin REST API has no produce or consume."""


class RemoteAdmin:
    """A remote admin at ``url`` (``http://host:port``); see the module docstring.

    Raises :class:`~mledger.core.MissingExtraError` without httpx and
    :class:`~mledger.core.InvalidRequestError` for a URL that is not ``http(s)://``
    or a limit that is not positive.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        role: str | None = None,
        timeout: float = 60.0,
        max_connections: int = 16,
        verify: str | bool = True,
        basic: tuple[str, str] | None = None,
        cert: tuple[str, str] | None = None,
        *,
        connect_timeout: float | None = None,
        deadline: float | None = None,
        max_response_bytes: int | None = None,
    ) -> None:
        if httpx is None:
            raise MissingExtraError("the remote admin client needs httpx: pip install 'mledger[client]'")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequestError(f"invalid admin URL {url!r}: expected http://host:port")
        for name, limit in (("connect_timeout", connect_timeout), ("deadline", deadline)):
            if limit is not None and not limit > 0:
                raise InvalidRequestError(f"{name} must be > 0 seconds, got {limit!r}")
        if max_response_bytes is not None and max_response_bytes < 1:
            raise InvalidRequestError(f"max_response_bytes must be >= 1, got {max_response_bytes!r}")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if role:
            headers[ROLE_HEADER] = role
        options = TransportOptions(
            url=url.rstrip("/"),
            headers=headers,
            timeout=timeout,
            connect_timeout=timeout if connect_timeout is None else connect_timeout,
            deadline=deadline,
            max_response_bytes=max_response_bytes,
            max_connections=max_connections,
            verify=tls_context(verify, cert),
            basic=basic,
        )
        self._options = options
        self.url = options.url
        self.timeout = options.timeout
        self.connect_timeout = options.connect_timeout
        self.deadline = options.deadline
        self.max_response_bytes = options.max_response_bytes
        self._client = httpx.Client(
            **options.client_arguments(),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        self.topics = RemoteTopics(self)
        self.namespaces = RemoteNamespaces(self)
        self.tenants = RemoteTenants(self)
        self.clusters = RemoteClusters(self)
        self.faults = RemoteFaults(self)
        self.clock = RemoteClock(self)
        self.non_persistent = RemoteNonPersistentTopics(self)

    def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        deadline: float | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request; returns (status, headers, body) for 2xx and raises the mapped error
        otherwise (:class:`AdminConnectionError` when the server cannot be reached in time or
        the call passes its deadline: the client's, or ``deadline`` seconds if sooner;
        :class:`AdminResponseTooLargeError` past ``max_response_bytes``). Error exceptions
        carry the response headers as ``response_headers``."""
        call = Call(self._options, path, deadline)
        with call.errors():
            with self._client.stream(
                method, path, params=query, content=body, headers=content_headers(body), timeout=call.timeout
            ) as response:
                call.begin(response)
                for piece in response.iter_bytes():
                    call.take(piece)
        return call.outcome(response)

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *, deadline: float | None = None) -> Any:
        """GET ``path`` (with ``query``) and decode its JSON body (``AdminConnectionError`` if
        it is not JSON); ``deadline`` as for :meth:`call`."""
        _, _, payload = self.call("GET", path, query, deadline=deadline)
        return decode_json(self._options, path, payload)

    def asynchronous(self, max_concurrency_per_host: int = 8) -> AsyncRemoteAdmin:
        """An asyncio client of the same server with the same credentials and limits, and its
        own connections: at most ``max_concurrency_per_host`` calls in flight per broker (see
        :mod:`mledger.admin._transport`). The caller closes it (``await aclose()``)."""
        return AsyncRemoteAdmin(self._options, max_concurrency_per_host)

    def close(self) -> None:
        """Close the pooled connections. Idempotent."""
        self._client.close()

    def __enter__(self) -> RemoteAdmin:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteAdmin({self.url!r})"


# -- path names ------------------------------------------------------------------------------


def _namespace_path(group: Group, namespace: object) -> dict[str, str]:
    """``tenant``/``namespace`` path names of ``<tenant>/<namespace>``, checked here as Pulsar's
    admin client does (``NamespacesImpl``: ``NamespaceName.get``), with the library's checker
    (412 "Namespace name is not valid")."""
    if namespace is None:
        raise InvalidRequestError(
            "listing topics over --admin-url needs <tenant>/<namespace>: the REST API lists one namespace"
        )
    tenant, local = check_namespace_name(namespace).split("/")
    return {"tenant": encode_segment(tenant), "namespace": encode_segment(local)}


def _topic_name(group: Group, topic: str) -> TopicName:
    return non_persistent_name(topic) if group == "non_persistent" else TopicName.parse(topic)


def _topic_path(group: Group, topic: str) -> dict[str, str]:
    """``tenant``/``namespace``/``topic`` path names of a topic (of the group's domain)."""
    name = _topic_name(group, topic)
    return {
        "tenant": encode_segment(name.tenant),
        "namespace": encode_segment(name.namespace),
        "topic": name.encoded_local_name,
    }


def _subscription_path(group: Group, subscription: str) -> dict[str, str]:
    if group == "namespaces":
        return {"subscription": encode_segment(subscription)}
    if not isinstance(subscription, str) or not subscription:
        raise InvalidRequestError(f"invalid subscription name {subscription!r}")
    return {"subName": encode_name(subscription)}


def _segment(name: str, check: Callable[[str], str] | None = None) -> Callable[[Group, str], dict[str, str]]:
    return lambda group, value: {name: encode_segment(value if check is None else check(value))}


def _number(name: str) -> Callable[[Group, int], dict[str, str]]:
    return lambda group, value: {name: str(int(value))}


_PATH_ARGUMENTS: dict[str, Callable[[Group, Any], dict[str, str]]] = {
    "topic": _topic_path,
    "namespace": _namespace_path,
    "subscription": _subscription_path,
    # Pulsar's admin client sends tenant and cluster names unchecked; checking them here with the
    # library's checker answers the same 412 without a round trip, and never sends a . or .. that
    # httpx would resolve into another path.
    "tenant": _segment("tenant", check_tenant_name),
    "cluster": _segment("cluster", check_cluster_name),
    "role": _segment("role"),
    "num_messages": _number("numMessages"),
    "fault_id": _number("faultId"),
    "timestamp_ms": _number("timestamp"),
    "expire_time_seconds": _number("expireTimeInSeconds"),
}
"""An admin call's argument named here goes in the path: its path names, encoded as Pulsar's
clients encode them."""


# -- requests and answers --------------------------------------------------------------------


class _RemoteGroup:
    """What the remote groups share: requests built from the operation table; methods declared
    with :func:`restates` generated from it when the class is made."""

    group: Group

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        for attribute, value in list(vars(cls).items()):
            if isinstance(value, _Restated):
                setattr(cls, attribute, value.method(cls.group, attribute))

    def _send(
        self,
        op: AdminOperation | str,
        params: Mapping[str, str],
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Operation ``op`` of this group with its path ``params`` (encoded); see ``RemoteAdmin.call``."""
        if isinstance(op, str):
            op = operation(self.group, op)
        return self._admin.call(op.method, op.url(**params), query, body)

    def _answer(self, op: AdminOperation, payload: bytes) -> Any:
        """The answer of ``op`` read as its response kind (``AdminConnectionError`` when it is not one)."""
        assert op.response is not None
        try:
            value = json.loads(payload)
        except ValueError:
            raise AdminConnectionError(f"{self._admin.url}: {op.name} did not answer JSON: {payload[:80]!r}") from None
        try:
            return RESPONSES[op.response].read(value)
        except (ValueError, TypeError, KeyError, AttributeError, InvalidRequestError):
            raise AdminConnectionError(f"{self._admin.url}: not a {op.response}: {payload[:80]!r}") from None


P = ParamSpec("P")
R = TypeVar("R")


class _Restated:
    """A remote method declared by :func:`restates`, until its class generates it."""

    def __init__(self, local: Callable[..., Any], operation: str | None) -> None:
        self.local = local
        self.operation = operation

    def method(self, group: Group, attribute: str) -> Callable[..., Any]:
        """The method sending the operation of ``admin.<group>.<local>``; ``ConfigError`` when
        the table has no one operation for it or an argument has no place in its request."""
        call = self.local.__name__
        found = [op for op in operations(group) if op.call == call and self.operation in (None, op.name)]
        if len(found) != 1:
            raise ConfigError(f"{group}.{attribute}: {len(found)} operations run {call}; name one")
        op = found[0]
        signature = inspect.signature(self.local)
        flags = {flag.name: flag for flag in op.query}
        path: list[str] = []
        body: list[str] = []
        for name in list(signature.parameters)[1:]:  # self
            if name in _PATH_ARGUMENTS:
                path.append(name)
            elif op.request is not None and not body and name not in flags:
                body.append(name)
            elif name not in flags:
                raise ConfigError(f"{group}.{attribute}: {name} has no place in the request of {op.name}")
        if op.response is None and signature.return_annotation not in (None, "None"):
            raise ConfigError(f"{group}.{attribute} returns a value; {op.name} answers none")
        sent = [flags[name] for name in signature.parameters if name in flags]

        def restated(self: _RemoteGroup, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            values = bound.arguments
            params: dict[str, str] = {}
            for name in path:
                params.update(_PATH_ARGUMENTS[name](group, values[name]))
            query = {}
            for flag in sent:
                text = flag.query_text(values[flag.name])
                if text is not None:
                    query[flag.wire] = text
            content = REQUESTS[op.request].write(values[body[0]]) if op.request is not None and body else None
            _, _, payload = self._send(op, params, query or None, content)
            return None if op.response is None else self._answer(op, payload)

        restated.__name__ = restated.__qualname__ = attribute
        restated.__signature__ = signature  # type: ignore[attr-defined]
        restated.__doc__ = (
            f"``{op.method} {op.url(**{n: '{' + n + '}' for n in op.path_parameters})}``: as ``Admin.{group}.{call}``."
        )
        return restated


def restates(local: Callable[Concatenate[Any, P], R], operation: str | None = None) -> Callable[Concatenate[Any, P], R]:
    """Declares, in a remote group's class body, the method of ``local``'s name that only
    restates its operation (``operation``: which, when several run ``local``): same parameters,
    same result, generated from the table when the class is made. ``ConfigError`` then for an
    argument that has no place in the operation's request."""
    return cast(Callable[Concatenate[Any, P], R], _Restated(local, operation))


# -- the groups --------------------------------------------------------------------------------


class RemoteNamespaces(_RemoteGroup):
    """``Admin.namespaces`` over HTTP: namespaces, their retention, compaction and schema policies."""

    group = "namespaces"

    create = restates(Namespaces.create)
    list = restates(Namespaces.list)
    delete = restates(Namespaces.delete)
    grant_permission = restates(Namespaces.grant_permission)
    revoke_permission = restates(Namespaces.revoke_permission)
    policies = restates(Namespaces.policies)
    grant_permission_on_subscription = restates(Namespaces.grant_permission_on_subscription)
    revoke_permission_on_subscription = restates(Namespaces.revoke_permission_on_subscription)
    permissions_on_subscriptions = restates(Namespaces.permissions_on_subscriptions)
    permissions = restates(Namespaces.permissions)
    get_retention = restates(Namespaces.get_retention)
    set_retention = restates(Namespaces.set_retention)
    remove_retention = restates(Namespaces.remove_retention)
    get_compaction_threshold = restates(Namespaces.get_compaction_threshold)
    set_compaction_threshold = restates(Namespaces.set_compaction_threshold)
    remove_compaction_threshold = restates(Namespaces.remove_compaction_threshold)
    set_schema_compatibility_strategy = restates(Namespaces.set_schema_compatibility_strategy)
    get_schema_auto_update_compatibility_strategy = restates(Namespaces.get_schema_auto_update_compatibility_strategy)
    set_schema_auto_update_compatibility_strategy = restates(Namespaces.set_schema_auto_update_compatibility_strategy)
    get_is_allow_auto_update_schema = restates(Namespaces.get_is_allow_auto_update_schema)
    set_is_allow_auto_update_schema = restates(Namespaces.set_is_allow_auto_update_schema)
    # message TTL, backlog quotas, inactive topics
    get_message_ttl = restates(Namespaces.get_message_ttl)
    set_message_ttl = restates(Namespaces.set_message_ttl)
    remove_message_ttl = restates(Namespaces.remove_message_ttl)
    get_backlog_quota_map = restates(Namespaces.get_backlog_quota_map)
    set_backlog_quota = restates(Namespaces.set_backlog_quota)
    remove_backlog_quota = restates(Namespaces.remove_backlog_quota)
    get_inactive_topic_policies = restates(Namespaces.get_inactive_topic_policies)
    set_inactive_topic_policies = restates(Namespaces.set_inactive_topic_policies)
    remove_inactive_topic_policies = restates(Namespaces.remove_inactive_topic_policies)

    def get_schema_compatibility_strategy(self, namespace: str) -> SchemaCompatibilityStrategy:
        """As ``Admin.namespaces``: the strategy in force, never null."""
        op = operation(self.group, "get_schema_compatibility_strategy")
        strategy = self._answer(op, self._send(op, _namespace_path(self.group, namespace))[2])
        if strategy is None:
            raise AdminConnectionError("the server answered no schema compatibility strategy")
        return cast(SchemaCompatibilityStrategy, strategy)


class RemoteClusters(_RemoteGroup):
    """``Admin.clusters`` over HTTP."""

    group = "clusters"

    list = restates(Clusters.list)
    get = restates(Clusters.get)
    create = restates(Clusters.create)
    update = restates(Clusters.update)
    delete = restates(Clusters.delete)


class RemoteTenants(_RemoteGroup):
    """``Admin.tenants`` over HTTP."""

    group = "tenants"

    list = restates(Tenants.list)
    get = restates(Tenants.get)
    create = restates(Tenants.create)
    update = restates(Tenants.update)
    delete = restates(Tenants.delete)


class RemoteFaults(_RemoteGroup):
    """``Admin.faults`` over HTTP (``/admin/v2/mledger/faults``: a broker started with fault
    injection, a superuser's credentials under authorization)."""

    group = "faults"

    list = restates(FaultsAdmin.list)
    arm = restates(FaultsAdmin.arm)
    load = restates(FaultsAdmin.load)
    remove = restates(FaultsAdmin.remove)
    clear = restates(FaultsAdmin.clear)
    fired = restates(FaultsAdmin.fired)
    stats = restates(FaultsAdmin.stats)
    resume = restates(FaultsAdmin.resume)


class RemoteClock(_RemoteGroup):
    """``Admin.clock`` over HTTP (``/admin/v2/mledger/clock``: a superuser's credentials under
    authorization; ``advance`` needs a broker on a manual clock)."""

    group = "clock"

    now = restates(ClockAdmin.now)
    advance = restates(ClockAdmin.advance)


class _RemoteTopicGroup(_RemoteGroup):
    def create_topic(self, topic: str, partitions: int = 0) -> str:
        """A non-partitioned topic (``partitions=0``) or a partitioned one; its full name."""
        if partitions:
            self._send("create_partitioned_topic", _topic_path(self.group, topic), body=json_bytes(partitions))
        else:
            self._send("create_topic", _topic_path(self.group, topic))
        return str(_topic_name(self.group, topic))


class RemoteTopics(_RemoteTopicGroup):
    """``Admin.topics`` over HTTP: same methods, arguments, results and errors."""

    group = "topics"

    list_topics = restates(Topics.list_topics)
    list_partitioned_topics = restates(Topics.list_partitioned_topics)
    delete_topic = restates(Topics.delete_topic, "delete_topic")
    grant_permission = restates(Topics.grant_permission)
    revoke_permission = restates(Topics.revoke_permission)
    permissions = restates(Topics.permissions)
    partitioned_topic_metadata = restates(Topics.partitioned_topic_metadata)
    list_subscriptions = restates(Topics.list_subscriptions)
    delete_subscription = restates(Topics.delete_subscription)
    stats = restates(Topics.stats)
    partitioned_stats = restates(Topics.partitioned_stats)
    internal_stats = restates(Topics.internal_stats)
    partitioned_internal_stats = restates(Topics.partitioned_internal_stats)
    reset_cursor = restates(Topics.reset_cursor)
    reset_cursor_by_time = restates(Topics.reset_cursor_by_time)
    clear_backlog = restates(Topics.clear_backlog)
    get_retention = restates(Topics.get_retention)
    set_retention = restates(Topics.set_retention)
    remove_retention = restates(Topics.remove_retention)
    get_compaction_threshold = restates(Topics.get_compaction_threshold)
    set_compaction_threshold = restates(Topics.set_compaction_threshold)
    remove_compaction_threshold = restates(Topics.remove_compaction_threshold)
    compaction_status = restates(Topics.compaction_status)
    get_schema_compatibility_strategy = restates(Topics.get_schema_compatibility_strategy)
    set_schema_compatibility_strategy = restates(Topics.set_schema_compatibility_strategy)
    remove_schema_compatibility_strategy = restates(Topics.remove_schema_compatibility_strategy)
    terminate = restates(Topics.terminate)
    terminate_partitioned = restates(Topics.terminate_partitioned)
    unload = restates(Topics.unload)
    skip_messages = restates(Topics.skip_messages)
    # message TTL, backlog quotas, inactive topics, message expiry
    get_message_ttl = restates(Topics.get_message_ttl)
    set_message_ttl = restates(Topics.set_message_ttl)
    remove_message_ttl = restates(Topics.remove_message_ttl)
    get_backlog_quota_map = restates(Topics.get_backlog_quota_map)
    set_backlog_quota = restates(Topics.set_backlog_quota)
    remove_backlog_quota = restates(Topics.remove_backlog_quota)
    get_inactive_topic_policies = restates(Topics.get_inactive_topic_policies)
    set_inactive_topic_policies = restates(Topics.set_inactive_topic_policies)
    remove_inactive_topic_policies = restates(Topics.remove_inactive_topic_policies)
    expire_messages = restates(Topics.expire_messages)
    expire_messages_by_position = restates(Topics.expire_messages_by_position)
    expire_messages_for_all_subscriptions = restates(Topics.expire_messages_for_all_subscriptions)

    def create_subscription(
        self,
        topic: str,
        subscription: str,
        position: Position | MessageId = LATEST,
        subscription_type: SubscriptionType | str | None = None,
    ) -> None:
        """As ``Admin.topics``: the type travels as ``subscriptionType`` (an mledger extension)."""
        query = None
        if subscription_type is not None:
            query = {"subscriptionType": SubscriptionType.parse(subscription_type).value}
        body = ResetCursorData.of(position).to_body().encode()
        path = {**_topic_path(self.group, topic), **_subscription_path(self.group, subscription)}
        self._send("create_subscription", path, query, body)

    def trigger_compaction(self, topic: str) -> None:
        """``PUT {topic}/compaction``: compact in the background (the server's; nothing to wait for here)."""
        self._send("trigger_compaction", _topic_path(self.group, topic))

    def skip(self, topic: str, subscription: str, num_messages: int) -> None:
        """As ``Admin.topics``, the count checked here first (the library's message)."""
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 0:
            raise InvalidRequestError(f"invalid number of messages to skip {num_messages!r}: must be >= 0")
        path = {**_topic_path(self.group, topic), **_subscription_path(self.group, subscription)}
        self._send("skip_messages", {**path, "numMessages": str(num_messages)})

    def cancel_delayed_message(
        self,
        topic: str,
        ledger_id: int,
        entry_id: int,
        subscription_names: Iterable[str] | str | None = None,
    ) -> CancelDelayedMessageResult:
        """As ``Topics.cancel_delayed_message``: a refusing (cumulative-ack) subscription is a
        False in the result, not an error, although the server answered 412."""
        names = subscription_names.split(",") if isinstance(subscription_names, str) else list(subscription_names or [])
        query = {"ledgerId": str(ledger_id), "entryId": str(entry_id)}
        cleaned = [n.strip() for n in names if n and n.strip()]
        if cleaned:
            query["subscriptionNames"] = ",".join(cleaned)
        try:
            _, headers, _ = self._send("cancel_delayed_message", _topic_path(self.group, topic), query, b"")
        except PreconditionFailedError as e:
            results = getattr(e, "response_headers", {}).get(CANCEL_RESULTS_HEADER)
            if results is None:
                raise
            headers = {CANCEL_RESULTS_HEADER: results}
        results = json.loads(headers.get(CANCEL_RESULTS_HEADER) or "{}")
        return CancelDelayedMessageResult(
            topic=str(TopicName.parse(topic)), ledger_id=ledger_id, entry_id=entry_id, results=results
        )


class RemoteNonPersistentTopics(_RemoteTopicGroup):
    """``Admin.non_persistent`` over HTTP."""

    group = "non_persistent"

    list_topics = restates(NonPersistentTopicsAdmin.list_topics)
    list_partitioned_topics = restates(NonPersistentTopicsAdmin.list_partitioned_topics)
    delete_topic = restates(NonPersistentTopicsAdmin.delete_topic)
    delete_partitioned_topic = restates(NonPersistentTopicsAdmin.delete_partitioned_topic)
    partitioned_topic_metadata = restates(NonPersistentTopicsAdmin.partitioned_topic_metadata)
    stats = restates(NonPersistentTopicsAdmin.stats)
