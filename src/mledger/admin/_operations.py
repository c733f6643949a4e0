"""The admin operation table: each operation of Pulsar's admin REST API v2 that mledger serves,
once, as data.

One :class:`AdminOperation` per endpoint: its pulsar-admin verb, HTTP method, Pulsar's path
template (after ``/admin/v2``), success status, the :class:`~mledger.admin.Admin` call it runs
(``admin.<group>.<call>``), the kinds of its request and response bodies (codecs in
:mod:`mledger.admin._bodies`), its query parameters (:class:`Flag`: boolean flags, and values
such as ``backlogQuotaType``) and the error statuses its documentation names (:class:`ErrorStatus`).

An operation whose call takes its arguments from the path, its flags and its body, and whose
result is its response body, needs nothing but its row: the REST server generates its route
(:mod:`mledger.rest`; a router writes a handler itself only for an operation
with logic of its own), :class:`~mledger.admin.RemoteAdmin` generates the request of a
method declared with :func:`~mledger.admin._remote.restates`, and ``mledger-admin`` maps its verbs
to admin calls with it (:func:`by_verb`). How the call's arguments travel: the path parameters
come first, in the template's order (``{tenant}/{namespace}`` is the call's ``namespace``, the
topic routes' ``{tenant}/{namespace}/{topic}`` its ``topic``, ``{subName}`` its ``subscription``),
then the parsed body; flags go by name. tests/test_admin_operations.py checks that the admin
library, the REST app and ``RemoteAdmin`` agree with the table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..broker import BacklogQuotaType
from ..core import InvalidRequestError

__all__ = [
    "CLOCK_BASE",
    "FAULTS_BASE",
    "NON_PERSISTENT_BASE",
    "OPERATIONS",
    "TOPIC_BASE",
    "AdminOperation",
    "ErrorStatus",
    "Flag",
    "Group",
    "by_verb",
    "operation",
    "operations",
]

Group = Literal["topics", "namespaces", "tenants", "clusters", "non_persistent", "faults", "clock"]

TOPIC_BASE = "/persistent/{tenant}/{namespace}"
"""The namespace part of every topic path; the REST server mounts the rest under v1's and
v2's namespace prefixes."""

NON_PERSISTENT_BASE = "/non-persistent/{tenant}/{namespace}"
"""The namespace part of every ``non_persistent`` operation's path (v2 only)."""

FAULTS_BASE = "/mledger/faults"
"""The base of the ``faults`` operations: an mledger extension, off unless the broker was
started with fault injection (:mod:`mledger.admin._faults`)."""

CLOCK_BASE = "/mledger/clock"
"""The base of the ``clock`` operations: an mledger extension moving a manual clock
(:mod:`mledger.admin._clock`)."""

_BASES = {"topics": TOPIC_BASE, "non_persistent": NON_PERSISTENT_BASE}


@dataclass(frozen=True, slots=True)
class Flag:
    """A query parameter of an operation: the admin call's keyword ``name``, sent as ``alias``
    (default: ``name``); ``default`` when absent, unless ``required``. A boolean flag unless
    ``kind`` says otherwise: ``int``, or an enum whose values are the parameter's texts
    (``BacklogQuotaType``)."""

    name: str
    description: str
    alias: str | None = None
    default: Any = False
    kind: type = bool
    required: bool = False

    @property
    def wire(self) -> str:
        """The query parameter's name on the wire."""
        return self.alias or self.name

    def query_text(self, value: Any) -> str | None:
        """``value`` as the parameter's text, None for the default of an optional parameter (not
        sent); ``InvalidRequestError`` (400) for a value not of the parameter's kind."""
        if self.kind is bool or self.kind is int:
            if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
                raise InvalidRequestError(f"invalid {self.wire} {value!r}: expected {_KIND_NAMES[self.kind]}")
            text = ("true" if value else "false") if self.kind is bool else str(value)
        else:
            parse = getattr(self.kind, "parse", self.kind)
            text = parse(value).value
        return None if not self.required and value == self.default else text


_KIND_NAMES: dict[type, str] = {bool: "a bool", int: "an integer"}


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """An error status the operation's documentation names beside the common ones."""

    status: int
    description: str


@dataclass(frozen=True, slots=True)
class AdminOperation:
    """One admin endpoint; see the module docstring.

    ``name`` is the REST route's name (unique in its group); ``call`` the method of
    ``admin.<group>`` it runs, ``None`` for an endpoint the REST server answers from the broker
    itself (no admin-library method, so no ``RemoteAdmin`` method either); ``request`` and
    ``response`` name the body kinds (``None``: no body; codecs in :mod:`mledger.admin._bodies`);
    ``query`` the flags it takes; ``errors`` the error statuses its documentation names.
    """

    group: Group
    name: str
    verb: str
    method: str
    path: str
    status: int
    call: str | None
    summary: str
    request: str | None = None
    response: str | None = None
    query: tuple[Flag, ...] = ()
    errors: tuple[ErrorStatus, ...] = ()

    def url(self, **params: str) -> str:
        """The request path with ``params`` (already encoded for a path) put in the template."""
        return "/admin/v2" + self.path.format(**params)

    @property
    def topic_suffix(self) -> str:
        """A topic operation's path after its namespace part (:data:`TOPIC_BASE`,
        :data:`NON_PERSISTENT_BASE`): ``/{topic}/stats``."""
        base = _BASES.get(self.group)
        if base is None or not self.path.startswith(base):
            raise ValueError(f"{self.name} is not a topic operation: {self.path}")
        return self.path[len(base) :]

    @property
    def path_parameters(self) -> tuple[str, ...]:
        """The names in the path template, in order (``("tenant", "namespace", "topic")``)."""
        return tuple(_PARAMETER.findall(self.path))


_PARAMETER = re.compile(r"\{(\w+)\}")

# (name, verb, method, path after the group's base, status, call, summary, request, response, *flags and errors)
_Row = tuple[Any, ...]


def _ops(group: Group, base: str, *rows: _Row) -> Iterator[AdminOperation]:
    for name, verb, method, leaf, status, call, summary, request, response, *more in rows:
        query = tuple(m for m in more if isinstance(m, Flag))
        errors = tuple(m for m in more if isinstance(m, ErrorStatus))
        if len(query) + len(errors) != len(more):
            raise TypeError(f"{group} {name}: expected flags and error statuses after the response, got {more}")
        yield AdminOperation(
            group, name, verb, method, base + leaf, status, call, summary, request, response, query, errors
        )


_S = "/{topic}/subscription/{subName}"
_FORCE = Flag("force", "even with connected producers or consumers")
_STATS_FLAGS = (
    Flag("get_precise_backlog", "accepted: mledger's backlog is always precise", alias="getPreciseBacklog"),
    Flag("subscription_backlog_size", "each subscription's backlogSize (false: -1)", "subscriptionBacklogSize", True),
    Flag(
        "get_earliest_time_in_backlog",
        "the publish time of each backlog's first message (one entry read per subscription)",
        alias="getEarliestTimeInBacklog",
    ),
)
_TOPIC_EXISTS = ErrorStatus(409, "the topic exists")
# message TTL, backlog quotas, inactive topics and message expiry (Pulsar's Namespaces and PersistentTopics v2)
_APPLIED = Flag("applied", "the policy in force: the topic's, else the namespace's, else the broker's")
_QUOTA_TYPE = Flag(
    "quota_type",
    "destination_storage (the default: limits the backlog's size) or message_age (its age)",
    alias="backlogQuotaType",
    default=BacklogQuotaType.DESTINATION_STORAGE,
    kind=BacklogQuotaType,
)
_TOPIC_TTL = Flag(
    "seconds", "the TTL in seconds (0: messages never expire)", alias="messageTTL", kind=int, required=True
)
_NOT_ISSUED = ErrorStatus(409, "not issued: the subscription has no backlog, or a connected consumer a small one")
_Q = "/{topic}/backlogQuota"

# fmt: off
# (name, pulsar-admin verb, method, path after the group's base, status, admin call, summary, request, response,
#  then its flags and documented error statuses)
OPERATIONS: tuple[AdminOperation, ...] = (
    *_ops(
        "topics", TOPIC_BASE,
        ("list_topics", "list", "GET", "", 200, "list_topics", "List the namespace's topics", None, "list[str]"),
        ("list_partitioned_topics", "list-partitioned-topics", "GET", "/partitioned", 200, "list_partitioned_topics",
         "List the namespace's partitioned topics", None, "list[str]"),
        ("create_topic", "create", "PUT", "/{topic}", 204, "create_topic", "Create a non-partitioned topic", None, None,
         _TOPIC_EXISTS),
        ("delete_topic", "delete", "DELETE", "/{topic}", 204, "delete_topic", "Delete a topic and its data", None, None,
         _FORCE),
        ("get_partitioned_metadata", "get-partitioned-topic-metadata", "GET", "/{topic}/partitions", 200,
         "partitioned_topic_metadata", "The number of partitions (0: not partitioned)", None,
         "PartitionedTopicMetadata",
         Flag("check_allow_auto_creation", "a missing topic that would be created on first use answers 0, not 404",
              alias="checkAllowAutoCreation")),
        ("create_partitioned_topic", "create-partitioned-topic", "PUT", "/{topic}/partitions", 204, "create_topic",
         "Create a partitioned topic", "int", None, _TOPIC_EXISTS),
        ("delete_partitioned_topic", "delete-partitioned-topic", "DELETE", "/{topic}/partitions", 204, "delete_topic",
         "Delete a partitioned topic", None, None, _FORCE),
        ("get_subscriptions", "subscriptions", "GET", "/{topic}/subscriptions", 200, "list_subscriptions",
         "List the topic's subscriptions", None, "list[str]"),
        ("get_stats", "stats", "GET", "/{topic}/stats", 200, "stats",
         "Stats of a topic or partition: rates, counters, publishers, subscriptions and consumers", None,
         "TopicStatsData", *_STATS_FLAGS, ErrorStatus(405, "a partitioned topic: use partitioned-stats")),
        ("get_partitioned_stats", "partitioned-stats", "GET", "/{topic}/partitioned-stats", 200, "partitioned_stats",
         "Stats of a partitioned topic: the partitions' added up, and each partition's", None,
         "PartitionedTopicStatsData",
         Flag("per_partition", "each partition's stats under partitions", alias="perPartition", default=True),
         *_STATS_FLAGS),
        ("get_internal_stats", "stats-internal", "GET", "/{topic}/internalStats", 200, "internal_stats",
         "Internal stats of a topic or partition (managed ledger and cursors)", None, "PersistentTopicInternalStats",
         ErrorStatus(405, "a partitioned topic: use partitioned-internalStats")),
        ("get_partitioned_internal_stats", "partitioned-stats-internal", "GET", "/{topic}/partitioned-internalStats",
         200, "partitioned_internal_stats", "Internal stats of every partition of a partitioned topic", None,
         "PartitionedTopicInternalStats"),
        ("cancel_delayed_message", "cancel-delayed-message", "POST", "/{topic}/cancelDelayedMessage", 204,
         "cancel_delayed_message", "Cancel a delayed message on subscriptions (PIP-423)", None, None),
        ("create_subscription", "create-subscription", "PUT", _S, 204, "create_subscription",
         "Create a durable subscription (at the latest message unless the body names one)", "ResetCursorData", None,
         ErrorStatus(409, "the subscription exists")),
        ("delete_subscription", "unsubscribe", "DELETE", _S, 204, "delete_subscription", "Delete a subscription",
         None, None),
        ("skip_by_message_ids", "skip-messages", "POST", f"{_S}/skipByMessageIds", 204, "skip_messages",
         "Skip messages by id (PIP-423): base64 MessageIdData or {ledgerId, entryId, batchIndex}",
         "SkipMessageIdsBody", None, ErrorStatus(405, "a cumulative-ack subscription (Exclusive, Failover)")),
        ("skip_all_messages", "clear-backlog", "POST", f"{_S}/skip_all", 204, "clear_backlog",
         "Acknowledge the subscription's whole backlog", None, None),
        ("skip_messages", "skip", "POST", f"{_S}/skip/{{numMessages}}", 204, "skip",
         "Skip the next N unacknowledged messages", None, None),
        ("reset_cursor_to_time", "reset-cursor", "POST", f"{_S}/resetcursor/{{timestamp}}", 204,
         "reset_cursor_by_time", "Reset the subscription to the first message published at or after a time", None,
         None),
        ("reset_cursor_on_position", "reset-cursor", "POST", f"{_S}/resetcursor", 204, "reset_cursor",
         "Reset the subscription to a message id", "ResetCursorData", None),
        ("get_retention", "get-retention", "GET", "/{topic}/retention", 200, "get_retention",
         "The topic's retention policy (null when unset)", None, "RetentionPoliciesData",
         Flag("applied", "the policy in force: the topic's, else the namespace's, else the broker's default")),
        ("set_retention", "set-retention", "POST", "/{topic}/retention", 204, "set_retention",
         "Set the topic's retention policy", "RetentionPoliciesData", None),
        ("remove_retention", "remove-retention", "DELETE", "/{topic}/retention", 204, "remove_retention",
         "Remove the topic's retention policy", None, None),
        ("trigger_compaction", "compact", "PUT", "/{topic}/compaction", 204, "trigger_compaction",
         "Compact the topic in the background", None, None),
        ("compaction_status", "compaction-status", "GET", "/{topic}/compaction", 200, "compaction_status",
         "The status of the topic's last compaction", None, "LongRunningProcessStatus"),
        ("get_compaction_threshold", "get-compaction-threshold", "GET", "/{topic}/compactionThreshold", 200,
         "get_compaction_threshold", "The topic's compaction threshold in bytes (null when unset)", None, "long",
         Flag("applied", "the threshold in force: the topic's, else the namespace's, else the broker's")),
        ("set_compaction_threshold", "set-compaction-threshold", "POST", "/{topic}/compactionThreshold", 204,
         "set_compaction_threshold", "Set the topic's compaction threshold", "long", None),
        ("get_permissions", "permissions", "GET", "/{topic}/permissions", 200, "permissions",
         "Roles' actions on the topic (namespace's and topic's)", None, "dict[str, list[str]]"),
        ("grant_permission", "grant-permission", "POST", "/{topic}/permissions/{role}", 204, "grant_permission",
         "Grant actions on the topic to a role", "list[AuthAction]", None),
        ("revoke_permission", "revoke-permission", "DELETE", "/{topic}/permissions/{role}", 204, "revoke_permission",
         "Revoke a role's actions", None, None),
        ("terminate", "terminate", "POST", "/{topic}/terminate", 200, "terminate",
         "Terminate the topic: the id of its last message", None, "MessageIdImpl"),
        ("terminate_partitioned", "partitioned-terminate", "POST", "/{topic}/terminate/partitions", 200,
         "terminate_partitioned", "Terminate every partition of a partitioned topic: each one's last message id",
         None, "dict[str, MessageIdImpl]"),
        ("get_schema_compatibility_strategy", "get-schema-compatibility-strategy", "GET",
         "/{topic}/schemaCompatibilityStrategy", 200, "get_schema_compatibility_strategy",
         "The topic's schema compatibility strategy (null when unset)", None, "SchemaCompatibilityStrategy",
         Flag("applied", "the strategy in force: the topic's, else the namespace's, else the broker's")),
        ("set_schema_compatibility_strategy", "set-schema-compatibility-strategy", "PUT",
         "/{topic}/schemaCompatibilityStrategy", 204, "set_schema_compatibility_strategy",
         "Set the topic's schema compatibility strategy", "SchemaCompatibilityStrategy", None),
        ("remove_compaction_threshold", "remove-compaction-threshold", "DELETE", "/{topic}/compactionThreshold", 204,
         "remove_compaction_threshold", "Remove the topic's compaction threshold", None, None),
        ("remove_schema_compatibility_strategy", "remove-schema-compatibility-strategy", "DELETE",
         "/{topic}/schemaCompatibilityStrategy", 204, "remove_schema_compatibility_strategy",
         "Remove the topic's schema compatibility strategy", None, None),
        # -- message TTL, backlog quotas, inactive topics, message expiry --
        ("get_message_ttl", "get-message-ttl", "GET", "/{topic}/messageTTL", 200, "get_message_ttl",
         "The topic's message TTL in seconds (null when unset)", None, "seconds", _APPLIED),
        ("set_message_ttl", "set-message-ttl", "POST", "/{topic}/messageTTL", 204, "set_message_ttl",
         "Set the topic's message TTL", None, None, _TOPIC_TTL, ErrorStatus(412, "a negative TTL, or a partition")),
        ("remove_message_ttl", "remove-message-ttl", "DELETE", "/{topic}/messageTTL", 204, "remove_message_ttl",
         "Remove the topic's message TTL", None, None),
        ("get_backlog_quota_map", "get-backlog-quotas", "GET", "/{topic}/backlogQuotaMap", 200,
         "get_backlog_quota_map", "The topic's backlog quotas by type", None,
         "dict[BacklogQuotaType, BacklogQuota]", _APPLIED),
        ("set_backlog_quota", "set-backlog-quota", "POST", _Q, 204, "set_backlog_quota",
         "Set a backlog quota of the topic", "BacklogQuota", None, _QUOTA_TYPE,
         ErrorStatus(412, "the topic's retention does not cover the quota, or a partition")),
        ("remove_backlog_quota", "remove-backlog-quota", "DELETE", _Q, 204, "remove_backlog_quota",
         "Remove a backlog quota of the topic", None, None, _QUOTA_TYPE),
        ("get_inactive_topic_policies", "get-inactive-topic-policies", "GET", "/{topic}/inactiveTopicPolicies", 200,
         "get_inactive_topic_policies", "The topic's inactive-topic policy (null when unset)", None,
         "InactiveTopicPolicies", _APPLIED),
        ("set_inactive_topic_policies", "set-inactive-topic-policies", "POST", "/{topic}/inactiveTopicPolicies", 204,
         "set_inactive_topic_policies", "Set the topic's inactive-topic policy", "InactiveTopicPolicies", None),
        ("remove_inactive_topic_policies", "remove-inactive-topic-policies", "DELETE",
         "/{topic}/inactiveTopicPolicies", 204, "remove_inactive_topic_policies",
         "Remove the topic's inactive-topic policy", None, None),
        ("expire_messages", "expire-messages", "POST", f"{_S}/expireMessages/{{expireTimeInSeconds}}", 204,
         "expire_messages", "Expire the subscription's messages published more than the time ago", None, None,
         _NOT_ISSUED),
        ("expire_messages_by_position", "expire-messages", "POST", f"{_S}/expireMessages", 204,
         "expire_messages_by_position", "Expire the subscription's messages up to a message id", "ExpiryPosition",
         None, ErrorStatus(405, "a partitioned topic: name a partition"),
         ErrorStatus(409, "not issued: a position past the topic's last message")),
        ("expire_messages_all_subscriptions", "expire-messages-all-subscriptions", "POST",
         "/{topic}/all_subscription/expireMessages/{expireTimeInSeconds}", 204,
         "expire_messages_for_all_subscriptions",
         "Expire the messages of every subscription published more than the time ago", None, None, _NOT_ISSUED),
    ),
    *_ops(
        "topics", TOPIC_BASE,
        # unloading (issue 33): the topic's cursors through their close path, reloaded on the next lookup
        ("unload", "unload", "PUT", "/{topic}/unload", 204, "unload",
         "Unload a topic (every partition of a partitioned one): clients reconnect, the next lookup loads it again",
         None, None),
    ),
    *_ops(
        "clusters", "/clusters",
        ("list_clusters", "list", "GET", "", 200, "list", "The clusters (no credentials needed)", None, "list[str]"),
        ("get_cluster", "get", "GET", "/{cluster}", 200, "get", "A cluster's ClusterData", None, "ClusterData"),
        ("create_cluster", "create", "PUT", "/{cluster}", 204, "create", "Create a cluster", "ClusterData", None),
        ("update_cluster", "update", "POST", "/{cluster}", 204, "update", "Update a cluster", "ClusterData", None),
        ("delete_cluster", "delete", "DELETE", "/{cluster}", 204, "delete", "Delete a cluster", None, None),
    ),
    *_ops(
        "tenants", "/tenants",
        ("list_tenants", "list", "GET", "", 200, "list", "The tenants", None, "list[str]"),
        ("get_tenant", "get", "GET", "/{tenant}", 200, "get", "A tenant's TenantInfo", None, "TenantInfo"),
        ("create_tenant", "create", "PUT", "/{tenant}", 204, "create", "Create a tenant", "TenantInfo", None),
        ("update_tenant", "update", "POST", "/{tenant}", 204, "update", "Update a tenant", "TenantInfo", None),
        ("delete_tenant", "delete", "DELETE", "/{tenant}", 204, "delete", "Delete a tenant", None, None),
    ),
    *_ops(
        "namespaces", "/namespaces",
        ("list_namespaces", "list", "GET", "/{tenant}", 200, "list", "The tenant's namespaces", None, "list[str]"),
        ("create_namespace", "create", "PUT", "/{tenant}/{namespace}", 204, "create",
         "Create a namespace (body: its Policies, optional)", "Policies", None),
        ("get_policies", "policies", "GET", "/{tenant}/{namespace}", 200, "policies", "The namespace's Policies", None,
         "Policies"),
        ("delete_namespace", "delete", "DELETE", "/{tenant}/{namespace}", 204, "delete", "Delete a namespace", None,
         None, Flag("force", "delete its topics too")),
        ("get_subscription_permissions", "subscription-permission", "GET",
         "/{tenant}/{namespace}/permissions/subscription", 200, "permissions_on_subscriptions",
         "The roles each restricted subscription admits", None, "dict[str, list[str]]"),
        ("grant_subscription_permission", "grant-subscription-permission", "POST",
         "/{tenant}/{namespace}/permissions/subscription/{subscription}", 204, "grant_permission_on_subscription",
         "Let only these roles consume through the subscription", "list[str]", None),
        ("revoke_subscription_permission", "revoke-subscription-permission", "DELETE",
         "/{tenant}/{namespace}/permissions/{subscription}/{role}", 204, "revoke_permission_on_subscription",
         "Remove a role from a subscription's roles", None, None),
        ("get_permissions", "permissions", "GET", "/{tenant}/{namespace}/permissions", 200, "permissions",
         "Roles' actions on the namespace", None, "dict[str, list[str]]"),
        ("grant_permission", "grant-permission", "POST", "/{tenant}/{namespace}/permissions/{role}", 204,
         "grant_permission", "Grant actions on the namespace to a role", "list[AuthAction]", None),
        ("revoke_permission", "revoke-permission", "DELETE", "/{tenant}/{namespace}/permissions/{role}", 204,
         "revoke_permission", "Revoke a role's actions", None, None),
        ("namespace_topics", "topics", "GET", "/{tenant}/{namespace}/topics", 200, None, "The namespace's topics",
         None, "list[str]"),
        ("get_deduplication", "get-deduplication", "GET", "/{tenant}/{namespace}/deduplication", 200, None,
         "The deduplication policy (null: unset)", None, "bool"),
        ("set_deduplication", "set-deduplication", "POST", "/{tenant}/{namespace}/deduplication", 204, None,
         "Turn deduplication on or off", "bool", None),
        ("remove_deduplication", "remove-deduplication", "DELETE", "/{tenant}/{namespace}/deduplication", 204, None,
         "Back to the broker's setting", None, None),
        ("get_retention", "get-retention", "GET", "/{tenant}/{namespace}/retention", 200, "get_retention",
         "The retention policy (null: unset)", None, "RetentionPoliciesData"),
        ("set_retention", "set-retention", "POST", "/{tenant}/{namespace}/retention", 204, "set_retention",
         "Set the retention policy", "RetentionPoliciesData", None),
        ("remove_retention", "remove-retention", "DELETE", "/{tenant}/{namespace}/retention", 204, "remove_retention",
         "Remove the retention policy", None, None),
        ("get_compaction_threshold", "get-compaction-threshold", "GET", "/{tenant}/{namespace}/compactionThreshold",
         200, "get_compaction_threshold", "The compaction threshold (null: unset)", None, "long"),
        ("set_compaction_threshold", "set-compaction-threshold", "PUT", "/{tenant}/{namespace}/compactionThreshold",
         204, "set_compaction_threshold", "Set the compaction threshold (bytes)", "long", None),
        ("remove_compaction_threshold", "remove-compaction-threshold", "DELETE",
         "/{tenant}/{namespace}/compactionThreshold", 204, "remove_compaction_threshold",
         "Remove the compaction threshold", None, None),
        ("get_schema_compatibility_strategy", "get-schema-compatibility-strategy", "GET",
         "/{tenant}/{namespace}/schemaCompatibilityStrategy", 200, "get_schema_compatibility_strategy",
         "The schema compatibility strategy of the namespace's topics", None, "SchemaCompatibilityStrategy"),
        ("set_schema_compatibility_strategy", "set-schema-compatibility-strategy", "PUT",
         "/{tenant}/{namespace}/schemaCompatibilityStrategy", 204, "set_schema_compatibility_strategy",
         "Set the schema compatibility strategy", "SchemaCompatibilityStrategy", None),
        ("get_schema_auto_update", "get-schema-autoupdate-strategy", "GET",
         "/{tenant}/{namespace}/schemaAutoUpdateCompatibilityStrategy", 200,
         "get_schema_auto_update_compatibility_strategy", "The older schema auto-update policy (null: unset)", None,
         "SchemaAutoUpdateCompatibilityStrategy"),
        ("set_schema_auto_update", "set-schema-autoupdate-strategy", "PUT",
         "/{tenant}/{namespace}/schemaAutoUpdateCompatibilityStrategy", 204,
         "set_schema_auto_update_compatibility_strategy", "Set the older schema auto-update policy",
         "SchemaAutoUpdateCompatibilityStrategy", None),
        ("get_allow_auto_update", "get-is-allow-auto-update-schema", "GET",
         "/{tenant}/{namespace}/isAllowAutoUpdateSchema", 200, "get_is_allow_auto_update_schema",
         "Whether producers may register new schema versions", None, "bool"),
        ("set_allow_auto_update", "set-is-allow-auto-update-schema", "POST",
         "/{tenant}/{namespace}/isAllowAutoUpdateSchema", 204, "set_is_allow_auto_update_schema",
         "Allow or forbid new schema versions", "bool", None),
        # -- message TTL, backlog quotas, inactive topics --
        ("get_message_ttl", "get-message-ttl", "GET", "/{tenant}/{namespace}/messageTTL", 200, "get_message_ttl",
         "The message TTL in seconds (null: unset)", None, "seconds"),
        ("set_message_ttl", "set-message-ttl", "POST", "/{tenant}/{namespace}/messageTTL", 204, "set_message_ttl",
         "Set the message TTL in seconds (0: messages never expire)", "seconds", None,
         ErrorStatus(412, "a negative TTL")),
        ("remove_message_ttl", "remove-message-ttl", "DELETE", "/{tenant}/{namespace}/messageTTL", 204,
         "remove_message_ttl", "Remove the message TTL", None, None),
        ("get_backlog_quota_map", "get-backlog-quotas", "GET", "/{tenant}/{namespace}/backlogQuotaMap", 200,
         "get_backlog_quota_map", "The backlog quotas by type", None, "dict[BacklogQuotaType, BacklogQuota]"),
        ("set_backlog_quota", "set-backlog-quota", "POST", "/{tenant}/{namespace}/backlogQuota", 204,
         "set_backlog_quota", "Set a backlog quota for the namespace's topics", "BacklogQuota", None, _QUOTA_TYPE,
         ErrorStatus(412, "the namespace's retention does not cover the quota")),
        ("remove_backlog_quota", "remove-backlog-quota", "DELETE", "/{tenant}/{namespace}/backlogQuota", 204,
         "remove_backlog_quota", "Remove a backlog quota", None, None, _QUOTA_TYPE),
        ("get_inactive_topic_policies", "get-inactive-topic-policies", "GET",
         "/{tenant}/{namespace}/inactiveTopicPolicies", 200, "get_inactive_topic_policies",
         "The inactive-topic policy (null: unset)", None, "InactiveTopicPolicies"),
        ("set_inactive_topic_policies", "set-inactive-topic-policies", "POST",
         "/{tenant}/{namespace}/inactiveTopicPolicies", 204, "set_inactive_topic_policies",
         "Set the inactive-topic policy of the namespace's topics", "InactiveTopicPolicies", None),
        ("remove_inactive_topic_policies", "remove-inactive-topic-policies", "DELETE",
         "/{tenant}/{namespace}/inactiveTopicPolicies", 204, "remove_inactive_topic_policies",
         "Remove the inactive-topic policy", None, None),
    ),
    # mledger's own extension (not in Pulsar's API, not in /openapi.json): fault injection
    *_ops(
        "faults", FAULTS_BASE,
        ("list_faults", "list", "GET", "", 200, "list", "The faults armed now", None, "list[ArmedFault]"),
        ("arm_fault", "arm", "POST", "", 200, "arm", "Arm a fault (one without a command acts at once): its id",
         "FaultSpec", "FaultId"),
        ("clear_faults", "clear", "DELETE", "", 204, "clear",
         "Disarm every fault, end a pause, heal half-open connections", None, None),
        ("remove_fault", "remove", "DELETE", "/{faultId}", 204, "remove", "Disarm one fault", None, None),
        ("load_fault_scenario", "load", "POST", "/scenario", 200, "load", "Arm a scenario's faults: their ids",
         "FaultScenario", "list[FaultId]"),
        ("fired_faults", "fired", "GET", "/fired", 200, "fired", "The faults that fired, oldest first", None,
         "list[FiredFault]"),
        ("fault_stats", "stats", "GET", "/stats", 200, "stats", "The seed, faults armed, firings by action", None,
         "FaultStats"),
        ("resume", "resume", "POST", "/resume", 204, "resume", "End a pause", None, None),
    ),
    # mledger's own extension too: the broker's manual clock
    *_ops(
        "clock", CLOCK_BASE,
        ("get_clock", "now", "GET", "", 200, "now", "The broker's time (ms) and whether its clock is manual", None,
         "ClockReading"),
        ("advance_clock", "advance", "POST", "/advance", 200, "advance",
         "Advance the manual clock, firing the broker's timers due on the way: the time reached", "milliseconds",
         "ClockReading", ErrorStatus(409, "the broker runs on the system clock")),
    ),
    *_ops(
        "non_persistent", NON_PERSISTENT_BASE,
        ("list_topics", "list", "GET", "", 200, "list_topics", "List the namespace's non-persistent topics loaded now",
         None, "list[str]"),
        ("list_partitioned_topics", "list-partitioned-topics", "GET", "/partitioned", 200, "list_partitioned_topics",
         "List the namespace's partitioned non-persistent topics", None, "list[str]"),
        ("create_topic", "create", "PUT", "/{topic}", 204, "create_topic", "Load a non-persistent topic", None, None,
         _TOPIC_EXISTS),
        ("delete_topic", "delete", "DELETE", "/{topic}", 204, "delete_topic", "Unload a non-persistent topic", None,
         None, _FORCE),
        ("get_partitioned_metadata", "get-partitioned-topic-metadata", "GET", "/{topic}/partitions", 200,
         "partitioned_topic_metadata", "The number of partitions (0: not partitioned)", None,
         "PartitionedTopicMetadata"),
        ("create_partitioned_topic", "create-partitioned-topic", "PUT", "/{topic}/partitions", 204, "create_topic",
         "Create a partitioned non-persistent topic", "int", None, _TOPIC_EXISTS),
        ("delete_partitioned_topic", "delete-partitioned-topic", "DELETE", "/{topic}/partitions", 204,
         "delete_partitioned_topic", "Delete a partitioned non-persistent topic", None, None, _FORCE),
        ("get_stats", "stats", "GET", "/{topic}/stats", 200, "stats",
         "Stats of a loaded non-persistent topic: the persistent topic's plus msgDropRate", None,
         "NonPersistentTopicStatsData"),
    ),
)
# fmt: on

_BY_NAME = {(op.group, op.name): op for op in OPERATIONS}


def operations(group: Group) -> tuple[AdminOperation, ...]:
    """The operations of ``group``, in the table's (the REST routes') order."""
    return tuple(op for op in OPERATIONS if op.group == group)


def operation(group: Group, name: str) -> AdminOperation:
    """The operation ``name`` of ``group``; ``KeyError`` for one the table lacks."""
    return _BY_NAME[(group, name)]


def by_verb(group: Group, verb: str) -> AdminOperation:
    """The one operation of ``group`` that the pulsar-admin verb ``verb`` runs; ``KeyError`` when
    none or several do (``reset-cursor``: by message id or by time)."""
    found = [op for op in OPERATIONS if op.group == group and op.verb == verb]
    if len(found) != 1:
        raise KeyError(f"{group} {verb}: {len(found)} operations")
    return found[0]
