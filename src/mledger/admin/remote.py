"""The admin API of a remote ``mledger-admin serve``, over HTTP with httpx (the ``client`` extra).

:class:`RemoteAdmin` has the shape of :class:`~mledger.admin.Admin` that the CLI uses:
``RemoteAdmin(url).topics`` offers the methods of :class:`~mledger.admin.Topics` with the same
arguments, return types (the same pydantic models, parsed from Pulsar's JSON) and errors (an
HTTP error status becomes the :class:`~mledger.core.errors.MLedgerError` subclass of that status,
carrying the server's ``{"reason": ...}``), so ``mledger-admin --admin-url URL topics ...`` runs
the CLI's own command code and prints the same output, with the same exit codes, as against a
data directory.

>>> with RemoteAdmin("http://127.0.0.1:8080", token="s3cr3t") as admin:   # doctest: +SKIP
...     admin.topics.internal_stats("orders").cursors["billing"].mark_delete_position

Connections: one ``httpx.Client`` per ``RemoteAdmin``, so consecutive calls reuse a keep-alive
connection (up to ``max_connections`` at once across threads; the object is thread-safe as the
client is). ``timeout`` bounds connecting, each read and each write (seconds);
:meth:`close` (or leaving the ``with`` block) closes the connections.

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
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from ..broker.compaction import CompactionStatus, LongRunningProcessStatus
from ..broker.names import TopicName
from ..broker.retention import RetentionPolicies
from ..broker.schema_compat import SchemaCompatibilityStrategy
from ..broker.tenants import TenantInfo
from ..broker.types import SubscriptionType
from ..codec.messageid import MessageId
from ..core.errors import (
    InvalidRequestError,
    MissingExtraError,
    MLedgerError,
    PreconditionFailedError,
    error_class_for_status,
)
from ..core.position import LATEST, Position
from .requests import ResetCursorData, SkipMessageIdsRequest
from .stats import (
    PartitionedTopicInternalStats,
    PartitionedTopicMetadata,
    PartitionedTopicStatsData,
    PersistentTopicInternalStats,
    TopicStatsData,
)
from .topics import CancelDelayedMessageResult
from .wire import CANCEL_RESULTS_HEADER, ROLE_HEADER, V2_PERSISTENT, encode_name, encode_segment

try:
    import httpx
except ImportError:  # pragma: no cover - depends on the installation
    httpx = None  # type: ignore[assignment]

__all__ = [
    "LOCAL_ONLY_COMMANDS",
    "AdminConnectionError",
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


def error_for(status: int, reason: str) -> MLedgerError:
    """The exception for an error response: the class of ``status`` carrying ``reason``
    (:func:`~mledger.core.errors.error_class_for_status`, the table the REST app's statuses
    come from)."""
    cls = error_class_for_status(status)
    return cls(reason) if cls is not None else RemoteAdminError(reason, status)


class RemoteAdmin:
    """A remote admin at ``url`` (``http://host:port``); see the module docstring.

    Raises :class:`~mledger.core.errors.MissingExtraError` without httpx and
    :class:`~mledger.core.errors.InvalidRequestError` for a URL that is not ``http(s)://``.
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
    ) -> None:
        if httpx is None:
            raise MissingExtraError("the remote admin client needs httpx: pip install 'mledger[client]'")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequestError(f"invalid admin URL {url!r}: expected http://host:port")
        self.url = url.rstrip("/")
        self.timeout = timeout
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if role:
            headers[ROLE_HEADER] = role
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
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
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request; returns (status, headers, body) for 2xx and raises the mapped error
        otherwise (:class:`AdminConnectionError` when the server cannot be reached in time).
        Error exceptions carry the response headers as ``response_headers``."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            response = self._client.request(method, path, params=query, content=body, headers=headers)
        except httpx.TimeoutException as e:
            raise AdminConnectionError(
                f"the admin server at {self.url} did not answer within {self.timeout:g} s ({type(e).__name__})"
            ) from None
        except httpx.HTTPError as e:  # connect errors, protocol errors, a closed client
            raise AdminConnectionError(f"cannot reach the admin server at {self.url}: {e}") from None
        if response.is_success:
            return response.status_code, response.headers, response.content
        error = error_for(response.status_code, _reason(response))
        error.response_headers = response.headers  # type: ignore[attr-defined]
        raise error

    def get_json(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        """GET ``path`` (with ``query``) and decode its JSON body (``AdminConnectionError`` if
        it is not JSON)."""
        _, _, payload = self.call("GET", path, query)
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


def _reason(response: Any) -> str:
    """The ``reason`` of Pulsar's error body, else the body's text, else ``HTTP <status>``."""
    try:
        value = json.loads(response.content)
        if isinstance(value, dict) and isinstance(value.get("reason"), str):
            return str(value["reason"])
    except ValueError:
        pass
    text = response.content.decode("utf-8", "replace").strip()
    return text or f"HTTP {response.status_code}"


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


class RemoteNamespaces:
    """``Admin.namespaces`` over HTTP: namespaces, their retention, compaction and schema policies."""

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    @staticmethod
    def _namespace_path(namespace: str) -> str:
        parts = namespace.split("/") if isinstance(namespace, str) else []
        if len(parts) != 2 or not all(parts):
            raise InvalidRequestError(f"Invalid namespace name {namespace!r}: expected <tenant>/<namespace>")
        return f"/admin/v2/namespaces/{encode_segment(parts[0])}/{encode_segment(parts[1])}"

    @classmethod
    def _path(cls, namespace: str, leaf: str = "retention") -> str:
        return f"{cls._namespace_path(namespace)}/{leaf}"

    def create(self, namespace: str, policies: Mapping[str, object] | None = None) -> None:
        body = json.dumps(dict(policies)).encode() if policies else None
        self._admin.call("PUT", self._namespace_path(namespace), body=body)

    def list(self, tenant: str) -> list[str]:
        return [str(n) for n in self._admin.get_json(f"/admin/v2/namespaces/{encode_segment(tenant)}")]

    def delete(self, namespace: str, force: bool = False) -> None:
        self._admin.call("DELETE", self._namespace_path(namespace), {"force": "true"} if force else None)

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        path = self._path(namespace, f"permissions/{encode_segment(role)}")
        self._admin.call("POST", path, body=json.dumps(sorted(actions)).encode())

    def revoke_permission(self, namespace: str, role: str) -> None:
        self._admin.call("DELETE", self._path(namespace, f"permissions/{encode_segment(role)}"))

    def policies(self, namespace: str) -> dict[str, object]:
        value = self._admin.get_json(self._namespace_path(namespace))
        if not isinstance(value, dict):
            raise AdminConnectionError(f"not namespace policies: {str(value)[:80]!r}")
        return value

    def grant_permission_on_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        path = self._path(namespace, f"permissions/subscription/{encode_segment(subscription)}")
        self._admin.call("POST", path, body=json.dumps(sorted(roles)).encode())

    def revoke_permission_on_subscription(self, namespace: str, subscription: str, role: str) -> None:
        path = self._path(namespace, f"permissions/{encode_segment(subscription)}/{encode_segment(role)}")
        self._admin.call("DELETE", path)

    def permissions_on_subscriptions(self, namespace: str) -> dict[str, builtins.list[str]]:
        return _grants(self._admin.get_json(self._path(namespace, "permissions/subscription")))

    def permissions(self, namespace: str) -> dict[str, builtins.list[str]]:
        return _grants(self._admin.get_json(self._path(namespace, "permissions")))

    def get_retention(self, namespace: str) -> RetentionPolicies | None:
        return _retention(self._admin.call("GET", self._path(namespace))[2])

    def set_retention(self, namespace: str, policies: RetentionPolicies) -> None:
        self._admin.call("POST", self._path(namespace), body=json.dumps(policies.to_json()).encode())

    def remove_retention(self, namespace: str) -> None:
        self._admin.call("DELETE", self._path(namespace))

    def get_compaction_threshold(self, namespace: str) -> int | None:
        return _threshold(self._admin.call("GET", self._path(namespace, "compactionThreshold"))[2])

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        self._admin.call("PUT", self._path(namespace, "compactionThreshold"), body=json.dumps(threshold).encode())

    def remove_compaction_threshold(self, namespace: str) -> None:
        self._admin.call("DELETE", self._path(namespace, "compactionThreshold"))

    def get_schema_compatibility_strategy(self, namespace: str) -> SchemaCompatibilityStrategy:
        path = self._path(namespace, "schemaCompatibilityStrategy")
        strategy = _strategy(self._admin.call("GET", path)[2])
        if strategy is None:
            raise AdminConnectionError("the server answered no schema compatibility strategy")
        return strategy

    def set_schema_compatibility_strategy(self, namespace: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        body = json.dumps(SchemaCompatibilityStrategy.parse(strategy).value).encode()
        self._admin.call("PUT", self._path(namespace, "schemaCompatibilityStrategy"), body=body)

    def get_is_allow_auto_update_schema(self, namespace: str) -> bool:
        return bool(self._admin.get_json(self._path(namespace, "isAllowAutoUpdateSchema")))

    def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        if not isinstance(allowed, bool):
            raise InvalidRequestError(f"invalid isAllowAutoUpdateSchema {allowed!r}: expected true or false")
        body = b"true" if allowed else b"false"
        self._admin.call("POST", self._path(namespace, "isAllowAutoUpdateSchema"), body=body)


def _grants(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise AdminConnectionError(f"not permissions: {str(value)[:80]!r}")
    return {str(role): sorted(str(a) for a in actions) for role, actions in sorted(value.items())}


class RemoteClusters:
    """``Admin.clusters`` over HTTP."""

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    @staticmethod
    def _path(cluster: str) -> str:
        return f"/admin/v2/clusters/{encode_segment(cluster)}"

    def list(self) -> list[str]:
        return [str(c) for c in self._admin.get_json("/admin/v2/clusters")]

    def get(self, cluster: str) -> dict[str, object]:
        return dict(self._admin.get_json(self._path(cluster)))

    def create(self, cluster: str, data: Mapping[str, object] | None = None) -> None:
        self._admin.call("PUT", self._path(cluster), body=json.dumps(dict(data or {})).encode())

    def update(self, cluster: str, data: Mapping[str, object]) -> None:
        self._admin.call("POST", self._path(cluster), body=json.dumps(dict(data)).encode())

    def delete(self, cluster: str) -> None:
        self._admin.call("DELETE", self._path(cluster))


class RemoteTenants:
    """``Admin.tenants`` over HTTP."""

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    @staticmethod
    def _path(tenant: str) -> str:
        return f"/admin/v2/tenants/{encode_segment(tenant)}"

    def list(self) -> list[str]:
        return [str(t) for t in self._admin.get_json("/admin/v2/tenants")]

    def get(self, tenant: str) -> TenantInfo:
        try:
            return TenantInfo.from_json(self._admin.get_json(self._path(tenant)))
        except InvalidRequestError as exc:
            raise AdminConnectionError(f"not a tenant info: {exc}") from None

    def create(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        self._admin.call("PUT", self._path(tenant), body=_tenant_body(info))

    def update(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        self._admin.call("POST", self._path(tenant), body=_tenant_body(info))

    def delete(self, tenant: str) -> None:
        self._admin.call("DELETE", self._path(tenant))


def _tenant_body(info: TenantInfo | Mapping[str, object]) -> bytes:
    return json.dumps(info.to_json() if isinstance(info, TenantInfo) else dict(info)).encode()


class RemoteTopics:
    """``Admin.topics`` over HTTP: same methods, arguments, results and errors."""

    def __init__(self, admin: RemoteAdmin) -> None:
        self._admin = admin

    # -- paths -------------------------------------------------------------------------------
    @staticmethod
    def _namespace_path(namespace: str | None) -> str:
        if namespace is None:
            raise InvalidRequestError(
                "listing topics over --admin-url needs <tenant>/<namespace>: the REST API lists one namespace"
            )
        parts = namespace.split("/") if isinstance(namespace, str) else []
        if len(parts) != 2 or not all(parts):
            raise InvalidRequestError(f"Invalid namespace name {namespace!r}: expected <tenant>/<namespace>")
        return f"{V2_PERSISTENT}/{encode_segment(parts[0])}/{encode_segment(parts[1])}"

    @staticmethod
    def _topic_path(topic: str, *rest: str) -> str:
        name = TopicName.parse(topic)
        path = (
            f"{V2_PERSISTENT}/{encode_segment(name.tenant)}/{encode_segment(name.namespace)}/{name.encoded_local_name}"
        )
        return path + "".join("/" + part for part in rest)

    def _subscription_path(self, topic: str, subscription: str, *rest: str) -> str:
        if not isinstance(subscription, str) or not subscription:
            raise InvalidRequestError(f"invalid subscription name {subscription!r}")
        return self._topic_path(topic, "subscription", encode_name(subscription), *rest)

    # -- topics ------------------------------------------------------------------------------
    def list_topics(self, namespace: str | None = None) -> list[str]:
        return list(self._admin.get_json(self._namespace_path(namespace)))

    def list_partitioned_topics(self, namespace: str | None = None) -> list[str]:
        return list(self._admin.get_json(self._namespace_path(namespace) + "/partitioned"))

    def create_topic(self, topic: str, partitions: int = 0) -> str:
        if partitions:
            self._admin.call("PUT", self._topic_path(topic, "partitions"), body=json.dumps(partitions).encode())
        else:
            self._admin.call("PUT", self._topic_path(topic))
        return str(TopicName.parse(topic))

    def delete_topic(self, topic: str, force: bool = False) -> None:
        self._admin.call("DELETE", self._topic_path(topic), {"force": "true"} if force else None)

    def grant_permission(self, topic: str, role: str, actions: Iterable[str]) -> None:
        path = self._topic_path(topic, "permissions", encode_segment(role))
        self._admin.call("POST", path, body=json.dumps(sorted(actions)).encode())

    def revoke_permission(self, topic: str, role: str) -> None:
        self._admin.call("DELETE", self._topic_path(topic, "permissions", encode_segment(role)))

    def permissions(self, topic: str) -> dict[str, list[str]]:
        return _grants(self._admin.get_json(self._topic_path(topic, "permissions")))

    def partitioned_topic_metadata(self, topic: str) -> PartitionedTopicMetadata:
        return PartitionedTopicMetadata.model_validate(self._admin.get_json(self._topic_path(topic, "partitions")))

    # -- subscriptions -----------------------------------------------------------------------
    def list_subscriptions(self, topic: str) -> list[str]:
        return list(self._admin.get_json(self._topic_path(topic, "subscriptions")))

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
        self._admin.call("PUT", self._subscription_path(topic, subscription), query, body)

    def delete_subscription(self, topic: str, subscription: str) -> None:
        self._admin.call("DELETE", self._subscription_path(topic, subscription))

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
        return TopicStatsData.model_validate(self._admin.get_json(self._topic_path(topic, "stats"), query))

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
        data = self._admin.get_json(self._topic_path(topic, "partitioned-stats"), query)
        return PartitionedTopicStatsData.model_validate(data)

    def internal_stats(self, topic: str) -> PersistentTopicInternalStats:
        data = self._admin.get_json(self._topic_path(topic, "internalStats"))
        return PersistentTopicInternalStats.model_validate(data)

    def partitioned_internal_stats(self, topic: str) -> PartitionedTopicInternalStats:
        data = self._admin.get_json(self._topic_path(topic, "partitioned-internalStats"))
        return PartitionedTopicInternalStats.model_validate(data)

    # -- cursor operations -------------------------------------------------------------------
    def reset_cursor(self, topic: str, subscription: str, position: Position | MessageId) -> None:
        body = ResetCursorData.of(position).to_body().encode()
        self._admin.call("POST", self._subscription_path(topic, subscription, "resetcursor"), body=body)

    def get_retention(self, topic: str, applied: bool = False) -> RetentionPolicies | None:
        """``GET {topic}/retention``: the topic's policy (with ``applied``, the one in force)."""
        query = {"applied": "true"} if applied else None
        return _retention(self._admin.call("GET", self._topic_path(topic, "retention"), query=query)[2])

    def set_retention(self, topic: str, policies: RetentionPolicies) -> None:
        self._admin.call("POST", self._topic_path(topic, "retention"), body=json.dumps(policies.to_json()).encode())

    def remove_retention(self, topic: str) -> None:
        self._admin.call("DELETE", self._topic_path(topic, "retention"))

    def get_compaction_threshold(self, topic: str, applied: bool = False) -> int | None:
        """``GET {topic}/compactionThreshold`` (with ``applied``, the one in force)."""
        query = {"applied": "true"} if applied else None
        return _threshold(self._admin.call("GET", self._topic_path(topic, "compactionThreshold"), query=query)[2])

    def set_compaction_threshold(self, topic: str, threshold: int) -> None:
        self._admin.call("POST", self._topic_path(topic, "compactionThreshold"), body=json.dumps(threshold).encode())

    def remove_compaction_threshold(self, topic: str) -> None:
        self._admin.call("DELETE", self._topic_path(topic, "compactionThreshold"))

    def trigger_compaction(self, topic: str) -> None:
        """``PUT {topic}/compaction``: compact in the background."""
        self._admin.call("PUT", self._topic_path(topic, "compaction"))

    def compaction_status(self, topic: str) -> LongRunningProcessStatus:
        """``GET {topic}/compaction``: the last compaction's status."""
        data = self._admin.get_json(self._topic_path(topic, "compaction"))
        try:
            return LongRunningProcessStatus(CompactionStatus(data["status"]), str(data.get("lastError") or ""))
        except (TypeError, KeyError, ValueError):
            raise AdminConnectionError(f"not a compaction status: {str(data)[:80]!r}") from None

    def get_schema_compatibility_strategy(
        self, topic: str, applied: bool = False
    ) -> SchemaCompatibilityStrategy | None:
        query = {"applied": "true"} if applied else None
        path = self._topic_path(topic, "schemaCompatibilityStrategy")
        return _strategy(self._admin.call("GET", path, query=query)[2])

    def set_schema_compatibility_strategy(self, topic: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        body = json.dumps(SchemaCompatibilityStrategy.parse(strategy).value).encode()
        self._admin.call("PUT", self._topic_path(topic, "schemaCompatibilityStrategy"), body=body)

    def remove_schema_compatibility_strategy(self, topic: str) -> None:
        self._admin.call("DELETE", self._topic_path(topic, "schemaCompatibilityStrategy"))

    def terminate(self, topic: str) -> MessageId:
        """``POST {topic}/terminate``: the last message's id."""
        _, _, payload = self._admin.call("POST", self._topic_path(topic, "terminate"), body=b"")
        return _message_id(json.loads(payload))

    def terminate_partitioned(self, topic: str) -> dict[int, MessageId]:
        """``POST {topic}/terminate/partitions``: each partition's last message id."""
        _, _, payload = self._admin.call("POST", self._topic_path(topic, "terminate", "partitions"), body=b"")
        try:
            return {int(k): _message_id(v) for k, v in json.loads(payload).items()}
        except (ValueError, AttributeError):
            raise AdminConnectionError(f"not a partition -> message id map: {payload[:80]!r}") from None

    def reset_cursor_by_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        """``POST .../resetcursor/{timestamp}``: to the first entry published at or after it."""
        self._admin.call("POST", self._subscription_path(topic, subscription, "resetcursor", str(int(timestamp_ms))))

    def skip(self, topic: str, subscription: str, num_messages: int) -> None:
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 0:
            raise InvalidRequestError(f"invalid number of messages to skip {num_messages!r}: must be >= 0")
        self._admin.call("POST", self._subscription_path(topic, subscription, "skip", str(num_messages)))

    def clear_backlog(self, topic: str, subscription: str) -> None:
        self._admin.call("POST", self._subscription_path(topic, subscription, "skip_all"))

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
        self._admin.call("POST", self._subscription_path(topic, subscription, "skipByMessageIds"), body=body)

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
            _, headers, _ = self._admin.call("POST", self._topic_path(topic, "cancelDelayedMessage"), query, b"")
        except PreconditionFailedError as e:
            results = getattr(e, "response_headers", {}).get(CANCEL_RESULTS_HEADER)
            if results is None:
                raise
            headers = {CANCEL_RESULTS_HEADER: results}
        results = json.loads(headers.get(CANCEL_RESULTS_HEADER) or "{}")
        return CancelDelayedMessageResult(
            topic=str(TopicName.parse(topic)), ledger_id=ledger_id, entry_id=entry_id, results=results
        )
