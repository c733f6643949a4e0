"""Pulsar's admin API v2 endpoint families for topics, namespaces, tenants, clusters and schemas.

Data, not code: :data:`FAMILIES` lists each endpoint of Pulsar's ``PersistentTopics``,
``Namespaces``, ``Tenants``, ``Clusters`` and ``SchemasResource`` (v2 paths, after
``/admin/v2``, path parameters in braces) with Pulsar's operation name. The app answers a
request that matches a family but no route of its own with 501 ``{"reason": "<operation> ...
is not supported by mledger"}`` at once (:func:`unsupported_family`), so a set-up script learns
what mledger lacks instead of a bare 404; ``scripts/gen_protocol_coverage.py`` marks each
family supported or not from the app's routes (docs/protocol-coverage.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

__all__ = ["FAMILIES", "Family", "unsupported_family"]


@dataclass(frozen=True)
class Family:
    """One Pulsar endpoint: ``method`` and ``path`` (under ``/admin/v2``) and its operation."""

    group: str
    method: str
    path: str
    operation: str

    @property
    def pattern(self) -> re.Pattern[str]:
        """The path as a regular expression: each ``{param}`` is one path segment."""
        return _compile(self.path)


_T = "/persistent/{tenant}/{namespace}/{topic}"
_S = f"{_T}/subscription/{{subName}}"
_N = "/namespaces/{tenant}/{namespace}"
_SC = "/schemas/{tenant}/{namespace}/{topic}"


def _policy(group: str, base: str, leaf: str, name: str, set_method: str = "POST") -> list[Family]:
    """A policy's get / set / remove triple (``getX``, ``setX``, ``removeX``)."""
    return [
        Family(group, "GET", f"{base}/{leaf}", f"get{name}"),
        Family(group, set_method, f"{base}/{leaf}", f"set{name}"),
        Family(group, "DELETE", f"{base}/{leaf}", f"remove{name}"),
    ]


_TOPIC_POLICIES = [
    ("messageTTL", "MessageTTL", "POST"),
    ("deduplicationEnabled", "DeduplicationStatus", "POST"),
    ("retention", "Retention", "POST"),
    ("persistence", "Persistence", "POST"),
    ("maxProducers", "MaxProducers", "POST"),
    ("maxConsumers", "MaxConsumers", "POST"),
    ("maxUnackedMessagesOnConsumer", "MaxUnackedMessagesOnConsumer", "POST"),
    ("maxUnackedMessagesOnSubscription", "MaxUnackedMessagesOnSubscription", "POST"),
    ("delayedDelivery", "DelayedDeliveryPolicies", "POST"),
    ("dispatchRate", "DispatchRate", "POST"),
    ("subscriptionDispatchRate", "SubscriptionDispatchRate", "POST"),
    ("publishRate", "PublishRate", "POST"),
    ("compactionThreshold", "CompactionThreshold", "POST"),
    ("inactiveTopicPolicies", "InactiveTopicPolicies", "POST"),
    ("offloadPolicies", "OffloadPolicies", "POST"),
    ("subscriptionTypesEnabled", "SubscriptionTypesEnabled", "POST"),
    ("schemaCompatibilityStrategy", "SchemaCompatibilityStrategy", "PUT"),
    ("autoSubscriptionCreation", "AutoSubscriptionCreation", "POST"),
    ("replicationClusters", "ReplicationClusters", "POST"),
    ("properties", "Properties", "PUT"),
]

_NAMESPACE_POLICIES = [
    ("messageTTL", "NamespaceMessageTTL", "POST"),
    ("subscriptionExpirationTime", "SubscriptionExpirationTime", "POST"),
    ("deduplication", "Deduplication", "POST"),
    ("autoTopicCreation", "AutoTopicCreation", "POST"),
    ("autoSubscriptionCreation", "AutoSubscriptionCreation", "POST"),
    ("subscriptionTypesEnabled", "SubscriptionTypesEnabled", "POST"),
    ("dispatchRate", "DispatchRate", "POST"),
    ("subscriptionDispatchRate", "SubscriptionDispatchRate", "POST"),
    ("publishRate", "PublishRate", "POST"),
    ("replicatorDispatchRate", "ReplicatorDispatchRate", "POST"),
    ("retention", "Retention", "POST"),
    ("persistence", "Persistence", "POST"),
    ("maxProducersPerTopic", "MaxProducersPerTopic", "POST"),
    ("maxConsumersPerTopic", "MaxConsumersPerTopic", "POST"),
    ("maxConsumersPerSubscription", "MaxConsumersPerSubscription", "POST"),
    ("maxUnackedMessagesPerConsumer", "MaxUnackedMessagesPerConsumer", "POST"),
    ("maxUnackedMessagesPerSubscription", "MaxUnackedMessagesPerSubscription", "POST"),
    ("compactionThreshold", "CompactionThreshold", "PUT"),
    ("offloadThreshold", "OffloadThreshold", "PUT"),
    ("offloadPolicies", "OffloadPolicies", "POST"),
    ("delayedDelivery", "DelayedDeliveryPolicies", "POST"),
    ("inactiveTopicPolicies", "InactiveTopicPolicies", "POST"),
    ("antiAffinity", "NamespaceAntiAffinityGroup", "POST"),
    ("properties", "Properties", "PUT"),
]

FAMILIES: tuple[Family, ...] = (
    # -- topics (PersistentTopics) -----------------------------------------------------------
    Family("topics", "GET", "/persistent/{tenant}/{namespace}", "getList"),
    Family("topics", "GET", "/persistent/{tenant}/{namespace}/partitioned", "getPartitionedTopicList"),
    Family("topics", "PUT", _T, "createNonPartitionedTopic"),
    Family("topics", "DELETE", _T, "deleteTopic"),
    Family("topics", "PUT", f"{_T}/partitions", "createPartitionedTopic"),
    Family("topics", "POST", f"{_T}/partitions", "updatePartitionedTopic"),
    Family("topics", "GET", f"{_T}/partitions", "getPartitionedMetadata"),
    Family("topics", "DELETE", f"{_T}/partitions", "deletePartitionedTopic"),
    Family("topics", "POST", f"{_T}/createMissedPartitions", "createMissedPartitions"),
    Family("topics", "GET", f"{_T}/permissions", "getPermissionsOnTopic"),
    Family("topics", "POST", f"{_T}/permissions/{{role}}", "grantPermissionsOnTopic"),
    Family("topics", "DELETE", f"{_T}/permissions/{{role}}", "revokePermissionsOnTopic"),
    Family("topics", "PUT", f"{_T}/unload", "unloadTopic"),
    Family("topics", "GET", f"{_T}/subscriptions", "getSubscriptions"),
    Family("topics", "GET", f"{_T}/stats", "getStats"),
    Family("topics", "GET", f"{_T}/internalStats", "getInternalStats"),
    Family("topics", "GET", f"{_T}/internal-info", "getManagedLedgerInfo"),
    Family("topics", "GET", f"{_T}/partitioned-stats", "getPartitionedStats"),
    Family("topics", "GET", f"{_T}/partitioned-internalStats", "getPartitionedStatsInternal"),
    Family("topics", "PUT", _S, "createSubscription"),
    Family("topics", "DELETE", _S, "deleteSubscription"),
    Family("topics", "POST", f"{_S}/skip_all", "skipAllMessages"),
    Family("topics", "POST", f"{_S}/skip/{{numMessages}}", "skipMessages"),
    Family("topics", "POST", f"{_S}/skipByMessageIds", "skipByMessageIds"),
    Family("topics", "POST", f"{_S}/expireMessages/{{expireTimeInSeconds}}", "expireTopicMessages"),
    Family("topics", "POST", f"{_S}/expireMessages", "expireTopicMessages (by position)"),
    Family(
        "topics",
        "POST",
        f"{_T}/all_subscription/expireMessages/{{expireTimeInSeconds}}",
        "expireMessagesForAllSubscriptions",
    ),
    Family("topics", "POST", f"{_S}/resetcursor/{{timestamp}}", "resetCursor"),
    Family("topics", "POST", f"{_S}/resetcursor", "resetCursorOnPosition"),
    Family("topics", "GET", f"{_S}/position/{{messagePosition}}", "peekNthMessage"),
    Family("topics", "GET", f"{_S}/properties", "getSubscriptionProperties"),
    Family("topics", "PUT", f"{_S}/properties", "updateSubscriptionProperties"),
    Family("topics", "GET", f"{_S}/replicatedSubscriptionStatus", "getReplicatedSubscriptionStatus"),
    Family("topics", "POST", f"{_S}/replicatedSubscriptionStatus", "setReplicatedSubscriptionStatus"),
    Family("topics", "GET", f"{_T}/examinemessage", "examineMessage"),
    Family("topics", "GET", f"{_T}/ledger/{{ledgerId}}/entry/{{entryId}}", "getMessageById"),
    Family("topics", "GET", f"{_T}/messageid/{{timestamp}}", "getMessageIdByTimestamp"),
    Family("topics", "GET", f"{_T}/lastMessageId", "getLastMessageId"),
    Family("topics", "GET", f"{_T}/backlog", "getBacklog"),
    Family("topics", "GET", f"{_T}/backlogQuotaMap", "getBacklogQuotaMap"),
    Family("topics", "POST", f"{_T}/backlogQuota", "setBacklogQuota"),
    Family("topics", "DELETE", f"{_T}/backlogQuota", "removeBacklogQuota"),
    *[f for leaf, name, method in _TOPIC_POLICIES for f in _policy("topics", _T, leaf, name, method)],
    Family("topics", "PUT", f"{_T}/compaction", "compact"),
    Family("topics", "GET", f"{_T}/compaction", "compactionStatus"),
    Family("topics", "PUT", f"{_T}/offload", "triggerOffload"),
    Family("topics", "GET", f"{_T}/offload", "offloadStatus"),
    Family("topics", "POST", f"{_T}/terminate", "terminate"),
    Family("topics", "POST", f"{_T}/terminate/partitions", "terminatePartitionedTopic"),
    Family("topics", "DELETE", f"{_T}/truncate", "truncateTopic"),
    Family("topics", "POST", f"{_T}/trim", "trimTopic"),
    Family("topics", "POST", f"{_T}/cancelDelayedMessage", "cancelDelayedMessage (PIP-423)"),
    # -- namespaces (Namespaces) -------------------------------------------------------------
    Family("namespaces", "GET", "/namespaces/{tenant}", "getTenantNamespaces"),
    Family("namespaces", "GET", _N, "getPolicies"),
    Family("namespaces", "PUT", _N, "createNamespace"),
    Family("namespaces", "DELETE", _N, "deleteNamespace"),
    Family("namespaces", "GET", f"{_N}/topics", "getTopics"),
    Family("namespaces", "GET", f"{_N}/permissions", "getPermissions"),
    Family("namespaces", "POST", f"{_N}/permissions/{{role}}", "grantPermissionOnNamespace"),
    Family("namespaces", "DELETE", f"{_N}/permissions/{{role}}", "revokePermissionsOnNamespace"),
    Family("namespaces", "GET", f"{_N}/permissions/subscription", "getPermissionOnSubscription"),
    Family("namespaces", "POST", f"{_N}/permissions/subscription/{{subscription}}", "grantPermissionOnSubscription"),
    Family("namespaces", "DELETE", f"{_N}/permissions/{{subscription}}/{{role}}", "revokePermissionOnSubscription"),
    Family("namespaces", "GET", f"{_N}/replication", "getNamespaceReplicationClusters"),
    Family("namespaces", "POST", f"{_N}/replication", "setNamespaceReplicationClusters"),
    *[f for leaf, name, method in _NAMESPACE_POLICIES for f in _policy("namespaces", _N, leaf, name, method)],
    Family("namespaces", "GET", f"{_N}/backlogQuotaMap", "getBacklogQuotaMap"),
    Family("namespaces", "POST", f"{_N}/backlogQuota", "setBacklogQuota"),
    Family("namespaces", "DELETE", f"{_N}/backlogQuota", "removeBacklogQuota"),
    Family("namespaces", "GET", f"{_N}/schemaCompatibilityStrategy", "getSchemaCompatibilityStrategy"),
    Family("namespaces", "PUT", f"{_N}/schemaCompatibilityStrategy", "setSchemaCompatibilityStrategy"),
    Family(
        "namespaces", "GET", f"{_N}/schemaAutoUpdateCompatibilityStrategy", "getSchemaAutoUpdateCompatibilityStrategy"
    ),
    Family(
        "namespaces", "PUT", f"{_N}/schemaAutoUpdateCompatibilityStrategy", "setSchemaAutoUpdateCompatibilityStrategy"
    ),
    Family("namespaces", "GET", f"{_N}/isAllowAutoUpdateSchema", "getIsAllowAutoUpdateSchema"),
    Family("namespaces", "POST", f"{_N}/isAllowAutoUpdateSchema", "setIsAllowAutoUpdateSchema"),
    Family("namespaces", "GET", f"{_N}/schemaValidationEnforced", "getSchemaValidtionEnforced"),
    Family("namespaces", "POST", f"{_N}/schemaValidationEnforced", "setSchemaValidationEnforced"),
    Family("namespaces", "GET", f"{_N}/encryptionRequired", "getEncryptionRequired"),
    Family("namespaces", "POST", f"{_N}/encryptionRequired", "modifyEncryptionRequired"),
    Family("namespaces", "GET", f"{_N}/bundles", "getBundlesData"),
    Family("namespaces", "PUT", f"{_N}/unload", "unloadNamespace"),
    Family("namespaces", "PUT", f"{_N}/{{bundle}}/unload", "unloadNamespaceBundle"),
    Family("namespaces", "PUT", f"{_N}/{{bundle}}/split", "splitNamespaceBundle"),
    Family("namespaces", "DELETE", f"{_N}/{{bundle}}", "deleteNamespaceBundle"),
    Family("namespaces", "POST", f"{_N}/clearBacklog", "clearNamespaceBacklog"),
    Family("namespaces", "POST", f"{_N}/clearBacklog/{{subscription}}", "clearNamespaceBacklogForSubscription"),
    Family("namespaces", "POST", f"{_N}/unsubscribe/{{subscription}}", "unsubscribeNamespace"),
    # -- tenants (Tenants) -------------------------------------------------------------------
    Family("tenants", "GET", "/tenants", "getTenants"),
    Family("tenants", "GET", "/tenants/{tenant}", "getTenantAdmin"),
    Family("tenants", "PUT", "/tenants/{tenant}", "createTenant"),
    Family("tenants", "POST", "/tenants/{tenant}", "updateTenant"),
    Family("tenants", "DELETE", "/tenants/{tenant}", "deleteTenant"),
    # -- clusters (Clusters) -----------------------------------------------------------------
    Family("clusters", "GET", "/clusters", "getClusters"),
    Family("clusters", "GET", "/clusters/{cluster}", "getCluster"),
    Family("clusters", "PUT", "/clusters/{cluster}", "createCluster"),
    Family("clusters", "POST", "/clusters/{cluster}", "updateCluster"),
    Family("clusters", "DELETE", "/clusters/{cluster}", "deleteCluster"),
    Family("clusters", "GET", "/clusters/{cluster}/peers", "getPeerClusterNames"),
    Family("clusters", "POST", "/clusters/{cluster}/peers", "setPeerClusterNames"),
    Family("clusters", "POST", "/clusters/{cluster}/migrate", "updateClusterMigration"),
    Family("clusters", "GET", "/clusters/{cluster}/namespaceIsolationPolicies", "getNamespaceIsolationPolicies"),
    Family(
        "clusters", "GET", "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}", "getNamespaceIsolationPolicy"
    ),
    Family(
        "clusters", "POST", "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}", "setNamespaceIsolationPolicy"
    ),
    Family(
        "clusters",
        "DELETE",
        "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}",
        "deleteNamespaceIsolationPolicy",
    ),
    Family("clusters", "GET", "/clusters/{cluster}/failureDomains", "getFailureDomains"),
    Family("clusters", "GET", "/clusters/{cluster}/failureDomains/{domainName}", "getDomain"),
    Family("clusters", "POST", "/clusters/{cluster}/failureDomains/{domainName}", "setFailureDomain"),
    Family("clusters", "DELETE", "/clusters/{cluster}/failureDomains/{domainName}", "deleteFailureDomain"),
    # -- schemas (SchemasResource) -----------------------------------------------------------
    Family("schemas", "GET", f"{_SC}/schema", "getSchema"),
    Family("schemas", "POST", f"{_SC}/schema", "postSchema"),
    Family("schemas", "DELETE", f"{_SC}/schema", "deleteSchema"),
    Family("schemas", "GET", f"{_SC}/schema/{{version}}", "getSchema (version)"),
    Family("schemas", "GET", f"{_SC}/schemas", "getAllSchemas"),
    Family("schemas", "GET", f"{_SC}/metadata", "getSchemaMetadata"),
    Family("schemas", "POST", f"{_SC}/compatibility", "testCompatibility"),
    Family("schemas", "POST", f"{_SC}/version", "getVersionBySchema"),
)
"""Every family, in Pulsar's resource order."""


@cache
def _compile(path: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")


def _specificity(family: Family) -> int:
    # a literal segment beats a parameter: DELETE .../messageTTL is not deleteNamespaceBundle
    return -sum(1 for segment in family.path.split("/") if segment and not segment.startswith("{"))


_BY_SPECIFICITY = tuple(sorted(FAMILIES, key=_specificity))


def unsupported_family(method: str, path: str) -> Family | None:
    """The family a request for ``method path`` (``path`` after ``/admin/v2``) belongs to, or
    None. Called only for requests no route of the app matched, so a match is unsupported."""
    for family in _BY_SPECIFICITY:
        if family.method == method and family.pattern.match(path):
            return family
    return None
