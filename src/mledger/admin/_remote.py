"""The admin API of a remote ``mledger-admin serve``, over HTTP with httpx (the ``client`` extra).

:class:`RemoteAdmin` has the shape of :class:`~mledger.admin.Admin` that the CLI uses:
``RemoteAdmin(url).topics`` offers the methods of :class:`~mledger.admin.Topics` with the same
arguments, return types (the same pydantic models, parsed from Pulsar's JSON) and errors (an
HTTP error status becomes the :class:`~mledger.core._errors.MLedgerError` subclass of that status,
carrying the server's ``{"reason": ...}``), so ``mledger-admin --admin-url URL topics ...`` runs
the CLI's own command code and prints the same output, with the same exit codes, as against a
data directory.

>>> with RemoteAdmin("http://127.0.0.1:8080", token="s3cr3t") as admin:   # doctest: +SKIP
...     admin.topics.internal_stats("orders").cursors["billing"].mark_delete_position

Connections: one ``httpx.Client`` per ``RemoteAdmin``, so consecutive calls reuse a keep-alive
connection (up to ``max_connections`` at once across threads; the object is thread-safe as the
client is). ``timeout`` bounds connecting (``connect_timeout`` when given), each read and each
write (seconds): it is httpx's, a bound on each wait, so a server that drips a byte now and then
could hold a call forever. ``deadline`` bounds a whole call: the body is streamed, the clock
checked after each piece, and no wait is given more than the time left when the call began, so
a call ends within twice its deadline at worst (usually within it).
``max_response_bytes`` caps what a call reads (a larger body is refused, unread, by its
``Content-Length`` or once the cap is passed), so a huge answer costs no more memory than the
cap. :meth:`close` (or leaving the ``with`` block) closes the connections.

Differences, both from Pulsar's REST API:

* ``list_topics`` / ``list_partitioned_topics`` need a namespace (the REST API lists one
  namespace at a time): 400 without one;
* ``produce`` and ``consume`` (:data:`LOCAL_ONLY_COMMANDS`) have no admin endpoint.

Credentials: ``token`` is sent as ``Authorization: Bearer <token>``; ``role`` as the
``X-Mledger-Role`` header, which a server only honours with ``--trust-role-header``.
"""

from __future__ import annotations

import builtins
import json
import ssl
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from ..broker._compaction import CompactionStatus, LongRunningProcessStatus
from ..broker._names import TopicName
from ..broker._retention import RetentionPolicies
from ..broker._schema_compat import SchemaCompatibilityStrategy
from ..broker._tenants import TenantInfo
from ..broker._types import SubscriptionType
from ..codec._messageid import MessageId
from ..core._errors import (
    InvalidRequestError,
    MissingExtraError,
    MLedgerError,
    PreconditionFailedError,
    error_class_for_status,
)
from ..core._position import LATEST, Position
from ._operations import Group, operation
from ._requests import ResetCursorData, SkipMessageIdsRequest
from ._stats import (
    PartitionedTopicInternalStats,
    PartitionedTopicMetadata,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
)
from ._topics import CancelDelayedMessageResult
from ._wire import CANCEL_RESULTS_HEADER, ROLE_HEADER, encode_name, encode_segment

try:
    import httpx
except ImportError:  # pragma: no cover - depends on the installation
    httpx = None  # type: ignore[assignment]

__all__ = [
    "LOCAL_ONLY_COMMANDS",
    "AdminConnectionError",
    "AdminResponseTooLargeError",
    "RemoteAdmin",
    "RemoteAdminError",
    "RemoteClusters",
    "RemoteNamespaces",
    "RemoteTenants",
    "RemoteTopics",
]

LOCAL_ONLY_COMMANDS = frozenset({"produce", "consume"})
"""CLI commands that need ``--data-dir``: Pulsar's admin REST API has no produce or consume."""


class RemoteAdminError(MLedgerError):
    """An error status with no dedicated class (409, 414, 500, ...); ``http_status`` is the server's."""

    def __init__(self, message: str, http_status: int) -> None:
        super().__init__(message)
        self.http_status = http_status


class AdminConnectionError(MLedgerError):
    """The server could not be reached in time, or its answer was not HTTP (exit status 1)."""

    http_status = 503


class AdminResponseTooLargeError(AdminConnectionError):
    """An answer was larger than the client's ``max_response_bytes`` (it was not read whole)."""


def error_for(status: int, reason: str) -> MLedgerError:
    """The exception for an error response: the class of ``status`` carrying ``reason``
    (:func:`~mledger.core._errors.error_class_for_status`, the table the REST app's statuses
    come from)."""
    cls = error_class_for_status(status)
    return cls(reason) if cls is not None else RemoteAdminError(reason, status)


class RemoteAdmin:
    """A remote admin at ``url`` (``http://host:port``); see the module docstring.

    Raises :class:`~mledger.core._errors.MissingExtraError` without httpx and
    :class:`~mledger.core._errors.InvalidRequestError` for a URL that is not ``http(s)://``
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
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self.deadline = deadline
        self.max_response_bytes = max_response_bytes
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if role:
            headers[ROLE_HEADER] = role
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=self.connect_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            verify=_tls_context(verify, cert),
            auth=basic,  # httpx sends it as HTTP Basic, as Pulsar's AuthenticationBasic does
        )
        self.topics = RemoteTopics(self)
        self.namespaces = RemoteNamespaces(self)
        self.tenants = RemoteTenants(self)
        self.clusters = RemoteClusters(self)

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
        headers = {"Content-Type": "application/json"} if body is not None else None
        limits = [t for t in (self.deadline, deadline) if t is not None]
        total = min(limits) if limits else None
        ends = None if total is None else time.monotonic() + total
        wait = self.timeout if total is None else min(self.timeout, total)  # no wait outlives the deadline
        timeout = httpx.Timeout(wait, connect=min(self.connect_timeout, wait))
        try:
            with self._client.stream(
                method, path, params=query, content=body, headers=headers, timeout=timeout
            ) as response:
                content = self._read(response, path, ends, total)
        except httpx.TimeoutException as e:
            raise AdminConnectionError(
                f"the admin server at {self.url} did not answer within {wait:g} s ({type(e).__name__})"
            ) from None
        except httpx.HTTPError as e:  # connect errors, protocol errors, a closed client
            raise AdminConnectionError(f"cannot reach the admin server at {self.url}: {e}") from None
        if response.is_success:
            return response.status_code, response.headers, content
        error = error_for(response.status_code, _reason(response.status_code, content))
        error.response_headers = response.headers  # type: ignore[attr-defined]
        raise error

    def _read(self, response: Any, path: str, ends: float | None, total: float | None) -> bytes:
        """The body of ``response``, read piece by piece within the deadline and the size cap."""
        cap = self.max_response_bytes
        declared = response.headers.get("content-length", "")
        if cap is not None and declared.isdigit() and int(declared) > cap:
            raise AdminResponseTooLargeError(
                f"{self.url}{path} answered {int(declared)} bytes, more than the {cap} allowed"
            )
        pieces: list[bytes] = []
        size = 0
        for piece in response.iter_bytes():
            size += len(piece)
            if cap is not None and size > cap:
                raise AdminResponseTooLargeError(f"{self.url}{path} answered more than the {cap} bytes allowed")
            if ends is not None and time.monotonic() > ends:
                raise AdminConnectionError(f"the admin server at {self.url} did not answer {path} within {total:.3g} s")
            pieces.append(piece)
        return b"".join(pieces)

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *, deadline: float | None = None) -> Any:
        """GET ``path`` (with ``query``) and decode its JSON body (``AdminConnectionError`` if
        it is not JSON); ``deadline`` as for :meth:`call`."""
        _, _, payload = self.call("GET", path, query, deadline=deadline)
        try:
            return json.loads(payload)
        except ValueError:
            raise AdminConnectionError(f"{self.url}{path} did not answer JSON: {payload[:80]!r}") from None

    def close(self) -> None:
        """Close the pooled connections. Idempotent."""
        self._client.close()

    def __enter__(self) -> RemoteAdmin:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteAdmin({self.url!r})"


def _tls_context(verify: str | bool, cert: tuple[str, str] | None) -> ssl.SSLContext | bool:
    """httpx's ``verify``: a context trusting ``verify`` (a CA file; True: the system's) and
    presenting ``cert`` (certificate file, key file) when given; False verifies nothing."""
    if cert is None and isinstance(verify, bool):
        return verify  # httpx's own default trust store, as before
    context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


def _reason(status: int, content: bytes) -> str:
    """The ``reason`` of Pulsar's error body, else the body's text, else ``HTTP <status>``."""
    try:
        value = json.loads(content)
        if isinstance(value, dict) and isinstance(value.get("reason"), str):
            return str(value["reason"])
    except ValueError:
        pass
    text = content.decode("utf-8", "replace").strip()
    return text or f"HTTP {status}"


def _retention(payload: bytes) -> RetentionPolicies | None:
    try:
        value = json.loads(payload)
        return None if value is None else RetentionPolicies.from_json(value)
    except (ValueError, InvalidRequestError):
        raise AdminConnectionError(f"not retention policies: {payload[:80]!r}") from None


def _stats_query(**options: bool) -> dict[str, str]:
    """Pulsar's stats query parameters (``true``/``false``); 400 for one that is not a bool."""
    for option, value in options.items():
        if not isinstance(value, bool):
            raise InvalidRequestError(f"invalid {option} {value!r}: expected a bool")
    return {option: "true" if value else "false" for option, value in options.items()}


def _threshold(payload: bytes) -> int | None:
    try:
        value = json.loads(payload)
    except ValueError:
        value = "?"
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise AdminConnectionError(f"not a compaction threshold: {payload[:80]!r}")
    return value


def _strategy(payload: bytes) -> SchemaCompatibilityStrategy | None:
    try:
        value = json.loads(payload) if payload.strip() else None
        return None if value is None else SchemaCompatibilityStrategy.parse(value)
    except (ValueError, InvalidRequestError):
        raise AdminConnectionError(f"not a schema compatibility strategy: {payload[:80]!r}") from None


def _message_id(value: Any) -> MessageId:
    try:
        return MessageId(int(value["ledgerId"]), int(value["entryId"]), int(value.get("partitionIndex", -1)))
    except (TypeError, KeyError, ValueError):
        raise AdminConnectionError(f"not a message id: {str(value)[:80]!r}") from None


class _RemoteGroup:
    """What the remote groups share: requests built from the operation table."""

    group: Group

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    def _send(
        self,
        name: str,
        params: Mapping[str, str],
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Operation ``name`` of this group with its path ``params`` (encoded); see ``RemoteAdmin.call``."""
        op = operation(self.group, name)
        return self._admin.call(op.method, op.url(**params), query, body)

    def _get(self, name: str, params: Mapping[str, str], query: Mapping[str, str] | None = None) -> Any:
        """Operation ``name`` (a GET) and its decoded JSON body."""
        return self._admin.get_json(operation(self.group, name).url(**params), query)

    def _payload(self, name: str, params: Mapping[str, str], query: Mapping[str, str] | None = None) -> bytes:
        """Operation ``name`` and its raw body."""
        return self._send(name, params, query)[2]


def _json_body(value: Any) -> bytes:
    return json.dumps(value).encode()


def _force(force: bool) -> dict[str, str] | None:
    return {"force": "true"} if force else None


def _applied(applied: bool) -> dict[str, str] | None:
    return {"applied": "true"} if applied else None


def _namespace_params(namespace: object) -> dict[str, str]:
    """``tenant``/``namespace`` path parameters of ``<tenant>/<namespace>`` (400 for another shape)."""
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) != 2 or not all(parts):
        raise InvalidRequestError(f"Invalid namespace name {namespace!r}: expected <tenant>/<namespace>")
    return {"tenant": encode_segment(parts[0]), "namespace": encode_segment(parts[1])}


class RemoteNamespaces(_RemoteGroup):
    """``Admin.namespaces`` over HTTP: namespaces, their retention, compaction and schema policies."""

    group = "namespaces"

    def create(self, namespace: str, policies: Mapping[str, object] | None = None) -> None:
        self._send(
            "create_namespace", _namespace_params(namespace), body=_json_body(dict(policies)) if policies else None
        )

    def list(self, tenant: str) -> list[str]:
        return [str(n) for n in self._get("list_namespaces", {"tenant": encode_segment(tenant)})]

    def delete(self, namespace: str, force: bool = False) -> None:
        self._send("delete_namespace", _namespace_params(namespace), _force(force))

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        params = {**_namespace_params(namespace), "role": encode_segment(role)}
        self._send("grant_permission", params, body=_json_body(sorted(actions)))

    def revoke_permission(self, namespace: str, role: str) -> None:
        self._send("revoke_permission", {**_namespace_params(namespace), "role": encode_segment(role)})

    def policies(self, namespace: str) -> dict[str, object]:
        value = self._get("get_policies", _namespace_params(namespace))
        if not isinstance(value, dict):
            raise AdminConnectionError(f"not namespace policies: {str(value)[:80]!r}")
        return value

    def grant_permission_on_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        params = {**_namespace_params(namespace), "subscription": encode_segment(subscription)}
        self._send("grant_subscription_permission", params, body=_json_body(sorted(roles)))

    def revoke_permission_on_subscription(self, namespace: str, subscription: str, role: str) -> None:
        params = {
            **_namespace_params(namespace),
            "subscription": encode_segment(subscription),
            "role": encode_segment(role),
        }
        self._send("revoke_subscription_permission", params)

    def permissions_on_subscriptions(self, namespace: str) -> dict[str, builtins.list[str]]:
        return _grants(self._get("get_subscription_permissions", _namespace_params(namespace)))

    def permissions(self, namespace: str) -> dict[str, builtins.list[str]]:
        return _grants(self._get("get_permissions", _namespace_params(namespace)))

    def get_retention(self, namespace: str) -> RetentionPolicies | None:
        return _retention(self._payload("get_retention", _namespace_params(namespace)))

    def set_retention(self, namespace: str, policies: RetentionPolicies) -> None:
        self._send("set_retention", _namespace_params(namespace), body=_json_body(policies.to_json()))

    def remove_retention(self, namespace: str) -> None:
        self._send("remove_retention", _namespace_params(namespace))

    def get_compaction_threshold(self, namespace: str) -> int | None:
        return _threshold(self._payload("get_compaction_threshold", _namespace_params(namespace)))

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        self._send("set_compaction_threshold", _namespace_params(namespace), body=_json_body(threshold))

    def remove_compaction_threshold(self, namespace: str) -> None:
        self._send("remove_compaction_threshold", _namespace_params(namespace))

    def get_schema_compatibility_strategy(self, namespace: str) -> SchemaCompatibilityStrategy:
        strategy = _strategy(self._payload("get_schema_compatibility_strategy", _namespace_params(namespace)))
        if strategy is None:
            raise AdminConnectionError("the server answered no schema compatibility strategy")
        return strategy

    def set_schema_compatibility_strategy(self, namespace: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        body = _json_body(SchemaCompatibilityStrategy.parse(strategy).value)
        self._send("set_schema_compatibility_strategy", _namespace_params(namespace), body=body)

    def get_schema_auto_update_compatibility_strategy(self, namespace: str) -> str | None:
        value = self._get("get_schema_auto_update", _namespace_params(namespace))
        if value is not None and not isinstance(value, str):
            raise AdminConnectionError(f"not a schema auto-update strategy: {str(value)[:80]!r}")
        return value

    def set_schema_auto_update_compatibility_strategy(self, namespace: str, policy: str) -> None:
        self._send("set_schema_auto_update", _namespace_params(namespace), body=_json_body(policy))

    def get_is_allow_auto_update_schema(self, namespace: str) -> bool:
        return bool(self._get("get_allow_auto_update", _namespace_params(namespace)))

    def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        if not isinstance(allowed, bool):
            raise InvalidRequestError(f"invalid isAllowAutoUpdateSchema {allowed!r}: expected true or false")
        body = b"true" if allowed else b"false"
        self._send("set_allow_auto_update", _namespace_params(namespace), body=body)


def _grants(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise AdminConnectionError(f"not permissions: {str(value)[:80]!r}")
    return {str(role): sorted(str(a) for a in actions) for role, actions in sorted(value.items())}


class RemoteClusters(_RemoteGroup):
    """``Admin.clusters`` over HTTP."""

    group = "clusters"

    def list(self) -> list[str]:
        return [str(c) for c in self._get("list_clusters", {})]

    def get(self, cluster: str) -> dict[str, object]:
        return dict(self._get("get_cluster", {"cluster": encode_segment(cluster)}))

    def create(self, cluster: str, data: Mapping[str, object] | None = None) -> None:
        self._send("create_cluster", {"cluster": encode_segment(cluster)}, body=_json_body(dict(data or {})))

    def update(self, cluster: str, data: Mapping[str, object]) -> None:
        self._send("update_cluster", {"cluster": encode_segment(cluster)}, body=_json_body(dict(data)))

    def delete(self, cluster: str) -> None:
        self._send("delete_cluster", {"cluster": encode_segment(cluster)})


class RemoteTenants(_RemoteGroup):
    """``Admin.tenants`` over HTTP."""

    group = "tenants"

    def list(self) -> list[str]:
        return [str(t) for t in self._get("list_tenants", {})]

    def get(self, tenant: str) -> TenantInfo:
        try:
            return TenantInfo.from_json(self._get("get_tenant", {"tenant": encode_segment(tenant)}))
        except InvalidRequestError as exc:
            raise AdminConnectionError(f"not a tenant info: {exc}") from None

    def create(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        self._send("create_tenant", {"tenant": encode_segment(tenant)}, body=_tenant_body(info))

    def update(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        self._send("update_tenant", {"tenant": encode_segment(tenant)}, body=_tenant_body(info))

    def delete(self, tenant: str) -> None:
        self._send("delete_tenant", {"tenant": encode_segment(tenant)})


def _tenant_body(info: TenantInfo | Mapping[str, object]) -> bytes:
    return _json_body(info.to_json() if isinstance(info, TenantInfo) else dict(info))


class RemoteTopics(_RemoteGroup):
    """``Admin.topics`` over HTTP: same methods, arguments, results and errors."""

    group = "topics"

    # -- path parameters ---------------------------------------------------------------------
    @staticmethod
    def _namespace(namespace: str | None) -> dict[str, str]:
        if namespace is None:
            raise InvalidRequestError(
                "listing topics over --admin-url needs <tenant>/<namespace>: the REST API lists one namespace"
            )
        return _namespace_params(namespace)

    @staticmethod
    def _topic(topic: str, **more: str) -> dict[str, str]:
        name = TopicName.parse(topic)
        tenant, namespace = encode_segment(name.tenant), encode_segment(name.namespace)
        return {"tenant": tenant, "namespace": namespace, "topic": name.encoded_local_name, **more}

    def _subscription(self, topic: str, subscription: str, **more: str) -> dict[str, str]:
        if not isinstance(subscription, str) or not subscription:
            raise InvalidRequestError(f"invalid subscription name {subscription!r}")
        return self._topic(topic, subName=encode_name(subscription), **more)

    # -- topics ------------------------------------------------------------------------------
    def list_topics(self, namespace: str | None = None) -> list[str]:
        return list(self._get("list_topics", self._namespace(namespace)))

    def list_partitioned_topics(self, namespace: str | None = None) -> list[str]:
        return list(self._get("list_partitioned_topics", self._namespace(namespace)))

    def create_topic(self, topic: str, partitions: int = 0) -> str:
        if partitions:
            self._send("create_partitioned_topic", self._topic(topic), body=_json_body(partitions))
        else:
            self._send("create_topic", self._topic(topic))
        return str(TopicName.parse(topic))

    def delete_topic(self, topic: str, force: bool = False) -> None:
        self._send("delete_topic", self._topic(topic), _force(force))

    def grant_permission(self, topic: str, role: str, actions: Iterable[str]) -> None:
        self._send("grant_permission", self._topic(topic, role=encode_segment(role)), body=_json_body(sorted(actions)))

    def revoke_permission(self, topic: str, role: str) -> None:
        self._send("revoke_permission", self._topic(topic, role=encode_segment(role)))

    def permissions(self, topic: str) -> dict[str, list[str]]:
        return _grants(self._get("get_permissions", self._topic(topic)))

    def partitioned_topic_metadata(self, topic: str) -> PartitionedTopicMetadata:
        return PartitionedTopicMetadata.model_validate(self._get("get_partitioned_metadata", self._topic(topic)))

    # -- subscriptions -----------------------------------------------------------------------
    def list_subscriptions(self, topic: str) -> list[str]:
        return list(self._get("get_subscriptions", self._topic(topic)))

    def create_subscription(
        self,
        topic: str,
        subscription: str,
        position: Position | MessageId = LATEST,
        subscription_type: SubscriptionType | str | None = None,
    ) -> None:
        query = None
        if subscription_type is not None:
            query = {"subscriptionType": SubscriptionType.parse(subscription_type).value}
        body = ResetCursorData.of(position).to_body().encode()
        self._send("create_subscription", self._subscription(topic, subscription), query, body)

    def delete_subscription(self, topic: str, subscription: str) -> None:
        self._send("delete_subscription", self._subscription(topic, subscription))

    # -- stats -------------------------------------------------------------------------------
    def stats(
        self,
        topic: str,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> TopicStatsData:
        query = _stats_query(
            getPreciseBacklog=get_precise_backlog,
            subscriptionBacklogSize=subscription_backlog_size,
            getEarliestTimeInBacklog=get_earliest_time_in_backlog,
        )
        return TopicStatsData.model_validate(self._get("get_stats", self._topic(topic), query))

    def partitioned_stats(
        self,
        topic: str,
        per_partition: bool = True,
        get_precise_backlog: bool = False,
        subscription_backlog_size: bool = True,
        get_earliest_time_in_backlog: bool = False,
    ) -> PartitionedTopicStatsData:
        query = _stats_query(
            perPartition=per_partition,
            getPreciseBacklog=get_precise_backlog,
            subscriptionBacklogSize=subscription_backlog_size,
            getEarliestTimeInBacklog=get_earliest_time_in_backlog,
        )
        return PartitionedTopicStatsData.model_validate(self._get("get_partitioned_stats", self._topic(topic), query))

    def internal_stats(self, topic: str) -> PersistentTopicInternalStats:
        return PersistentTopicInternalStats.model_validate(self._get("get_internal_stats", self._topic(topic)))

    def partitioned_internal_stats(self, topic: str) -> PartitionedTopicInternalStats:
        data = self._get("get_partitioned_internal_stats", self._topic(topic))
        return PartitionedTopicInternalStats.model_validate(data)

    # -- cursor operations -------------------------------------------------------------------
    def reset_cursor(self, topic: str, subscription: str, position: Position | MessageId) -> None:
        body = ResetCursorData.of(position).to_body().encode()
        self._send("reset_cursor_on_position", self._subscription(topic, subscription), body=body)

    def get_retention(self, topic: str, applied: bool = False) -> RetentionPolicies | None:
        """``GET {topic}/retention``: the topic's policy (with ``applied``, the one in force)."""
        return _retention(self._payload("get_retention", self._topic(topic), _applied(applied)))

    def set_retention(self, topic: str, policies: RetentionPolicies) -> None:
        self._send("set_retention", self._topic(topic), body=_json_body(policies.to_json()))

    def remove_retention(self, topic: str) -> None:
        self._send("remove_retention", self._topic(topic))

    def get_compaction_threshold(self, topic: str, applied: bool = False) -> int | None:
        """``GET {topic}/compactionThreshold`` (with ``applied``, the one in force)."""
        return _threshold(self._payload("get_compaction_threshold", self._topic(topic), _applied(applied)))

    def set_compaction_threshold(self, topic: str, threshold: int) -> None:
        self._send("set_compaction_threshold", self._topic(topic), body=_json_body(threshold))

    def remove_compaction_threshold(self, topic: str) -> None:
        self._send("remove_compaction_threshold", self._topic(topic))

    def trigger_compaction(self, topic: str) -> None:
        """``PUT {topic}/compaction``: compact in the background."""
        self._send("trigger_compaction", self._topic(topic))

    def compaction_status(self, topic: str) -> LongRunningProcessStatus:
        """``GET {topic}/compaction``: the last compaction's status."""
        data = self._get("compaction_status", self._topic(topic))
        try:
            return LongRunningProcessStatus(CompactionStatus(data["status"]), str(data.get("lastError") or ""))
        except (TypeError, KeyError, ValueError):
            raise AdminConnectionError(f"not a compaction status: {str(data)[:80]!r}") from None

    def get_schema_compatibility_strategy(
        self, topic: str, applied: bool = False
    ) -> SchemaCompatibilityStrategy | None:
        return _strategy(self._payload("get_schema_compatibility_strategy", self._topic(topic), _applied(applied)))

    def set_schema_compatibility_strategy(self, topic: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        body = _json_body(SchemaCompatibilityStrategy.parse(strategy).value)
        self._send("set_schema_compatibility_strategy", self._topic(topic), body=body)

    def remove_schema_compatibility_strategy(self, topic: str) -> None:
        self._send("remove_schema_compatibility_strategy", self._topic(topic))

    def terminate(self, topic: str) -> MessageId:
        """``POST {topic}/terminate``: the last message's id."""
        _, _, payload = self._send("terminate", self._topic(topic), body=b"")
        return _message_id(json.loads(payload))

    def terminate_partitioned(self, topic: str) -> dict[int, MessageId]:
        """``POST {topic}/terminate/partitions``: each partition's last message id."""
        _, _, payload = self._send("terminate_partitioned", self._topic(topic), body=b"")
        try:
            return {int(k): _message_id(v) for k, v in json.loads(payload).items()}
        except (ValueError, AttributeError):
            raise AdminConnectionError(f"not a partition -> message id map: {payload[:80]!r}") from None

    def reset_cursor_by_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        """``POST .../resetcursor/{timestamp}``: to the first entry published at or after it."""
        self._send("reset_cursor_to_time", self._subscription(topic, subscription, timestamp=str(int(timestamp_ms))))

    def skip(self, topic: str, subscription: str, num_messages: int) -> None:
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 0:
            raise InvalidRequestError(f"invalid number of messages to skip {num_messages!r}: must be >= 0")
        self._send("skip_messages", self._subscription(topic, subscription, numMessages=str(num_messages)))

    def clear_backlog(self, topic: str, subscription: str) -> None:
        self._send("skip_all_messages", self._subscription(topic, subscription))

    # -- PIP-423 -----------------------------------------------------------------------------
    def skip_messages(self, topic: str, subscription: str, request: SkipMessageIdsRequest | bytes | str) -> None:
        if isinstance(request, SkipMessageIdsRequest):
            body = request.to_body("messageId").encode()
        elif isinstance(request, str):
            body = request.encode("utf-8")
        elif isinstance(request, (bytes, bytearray)):
            body = bytes(request)
        else:
            raise InvalidRequestError(
                f"invalid skip request {request!r}: expected a SkipMessageIdsRequest or a JSON body"
            )
        self._send("skip_by_message_ids", self._subscription(topic, subscription), body=body)

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
            _, headers, _ = self._send("cancel_delayed_message", self._topic(topic), query, b"")
        except PreconditionFailedError as e:
            results = getattr(e, "response_headers", {}).get(CANCEL_RESULTS_HEADER)
            if results is None:
                raise
            headers = {CANCEL_RESULTS_HEADER: results}
        results = json.loads(headers.get(CANCEL_RESULTS_HEADER) or "{}")
        return CancelDelayedMessageResult(
            topic=str(TopicName.parse(topic)), ledger_id=ledger_id, entry_id=entry_id, results=results
        )
