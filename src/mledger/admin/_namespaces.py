"""``admin.namespaces``: namespaces and their policies (retention, compaction threshold, message TTL,
backlog quotas, inactive topics, schemas), as ``pulsar-admin namespaces``.

========================  ==================  =========================================
method                    authorization       Pulsar endpoint / CLI
========================  ==================  =========================================
create                    tenant admin        ``namespaces create``
list / delete             tenant admin        ``namespaces list`` / ``namespaces delete``
policies                  tenant admin        ``namespaces policies``
grant_permission          tenant admin        ``namespaces grant-permission``
revoke_permission         tenant admin        ``namespaces revoke-permission``
permissions               tenant admin        ``namespaces permissions``
*_on_subscription(s)      tenant admin        ``namespaces grant|revoke-subscription-permission``
get_retention             tenant admin        ``namespaces get-retention``
set_retention             tenant admin        ``namespaces set-retention``
remove_retention          tenant admin        ``namespaces remove-retention``
get_compaction_threshold  tenant admin        ``namespaces get-compaction-threshold``
set_compaction_threshold  tenant admin        ``namespaces set-compaction-threshold``
remove_compaction_threshold tenant admin      ``namespaces remove-compaction-threshold``
get_schema_compatibility_strategy  tenant admin   ``namespaces get-schema-compatibility-strategy``
set_schema_compatibility_strategy  tenant admin   ``namespaces set-schema-compatibility-strategy``
get_schema_auto_update_*           tenant admin   ``namespaces get-schema-autoupdate-strategy``
get_is_allow_auto_update_schema    tenant admin   ``namespaces get-is-allow-auto-update-schema``
set_is_allow_auto_update_schema    tenant admin   ``namespaces set-is-allow-auto-update-schema``
get_message_ttl           tenant admin        ``namespaces get-message-ttl``
set_message_ttl           tenant admin        ``namespaces set-message-ttl``
remove_message_ttl        tenant admin        ``namespaces remove-message-ttl``
get_backlog_quota_map     tenant admin        ``namespaces get-backlog-quotas``
set_backlog_quota         tenant admin        ``namespaces set-backlog-quota``
remove_backlog_quota      tenant admin        ``namespaces remove-backlog-quota``
get_inactive_topic_policies    tenant admin   ``namespaces get-inactive-topic-policies``
set_inactive_topic_policies    tenant admin   ``namespaces set-inactive-topic-policies``
remove_inactive_topic_policies tenant admin   ``namespaces remove-inactive-topic-policies``
========================  ==================  =========================================

Every call, reads included, needs a superuser or an admin of the namespace's tenant when
authorization is on (Pulsar's ``PulsarAuthorizationProvider.allowNamespacePolicyOperationAsync``
returns ``validateTenantAdminAccess`` for reads and writes alike): a ``produce`` or ``consume``
grant never lets a role read a policy. The role is checked before the namespace is looked up,
so a refused caller gets the same 403 whether the namespace exists or not (stricter than
Pulsar, whose tenant check answers 404 for a tenant that does not exist); for a tenant admin a
namespace that does not exist is 404. A changed policy applies to the namespace's open topics
without a policy of their own at once. Every method may block on the metadata store.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping

from ..broker import (
    BacklogQuota,
    BacklogQuotaType,
    InactiveTopicPolicies,
    NamespaceNotFoundError,
    RetentionPolicies,
    SchemaCompatibilityStrategy,
    TenantNotFoundError,
    check_namespace_name,
    check_tenant_name,
)
from ..core import InvalidRequestError
from ._context import AdminContext

__all__ = ["Namespaces"]


def _tenant(namespace: str) -> str:
    return namespace.split("/", 1)[0]


class Namespaces:
    """Namespace policies of the admin's broker (``admin.namespaces``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def create(self, namespace: str, policies: Mapping[str, object] | None = None) -> None:
        """Create ``tenant/namespace`` (``namespaces create``) with ``policies`` (Pulsar's
        ``Policies`` JSON: ``auth_policies``, ``retention_policies``, ...): topics, created
        explicitly or on first use, go in namespaces that exist. Tenant admin. 412 "Namespace
        name is not valid" for a bad name (checked first, as every method here does: Pulsar's
        ``AdminResource.validateNamespaceName``), 400 for a bad policy, 404 when the tenant does
        not exist, 409 when the namespace exists."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"create namespace {name}")
        self._admin.broker.create_namespace(name, policies)

    def list(self, tenant: str) -> list[str]:
        """The tenant's namespaces (``namespaces list``). 412 "Tenant name is not valid" for a bad
        name (checked first: Pulsar's ``NamespacesBase.internalGetTenantNamespaces``). Tenant
        admin. 404 "Tenant does not exist" for a tenant that was not created and holds nothing."""
        check_tenant_name(tenant)
        self._admin.check_tenant_admin(tenant, f"list the namespaces of tenant {tenant}")
        names = self._admin.broker.list_namespaces(tenant)
        if not names and not self._admin.broker.tenants.exists(tenant):
            raise TenantNotFoundError("Tenant does not exist")
        return names

    def delete(self, namespace: str, force: bool = False) -> None:
        """Delete a namespace (``namespaces delete``); 409 while it has topics unless ``force``.
        Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"delete namespace {name}")
        self._admin.broker.delete_namespace(name, force=force)

    def policies(self, namespace: str) -> dict[str, object]:
        """The namespace's ``Policies`` as stored (``namespaces policies``): the body it was
        created with and every policy set since, ``auth_policies`` among them. Tenant admin. 404."""
        name = self._read_policy(namespace, "policies")
        return self._admin.broker.namespaces.policies(name)

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``actions`` (``produce``, ``consume``, ...) on the namespace to ``role``
        (``namespaces grant-permission``; replaces the role's earlier actions). Tenant admin. 400
        for an unknown action, 404 for an unknown namespace."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"grant permissions on namespace {name}")
        self._admin.broker.grant_permission(name, role, list(actions))

    def revoke_permission(self, namespace: str, role: str) -> None:
        """Revoke ``role``'s actions on the namespace (``namespaces revoke-permission``). Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"revoke permissions on namespace {name}")
        self._admin.broker.revoke_permission(name, role)

    def grant_permission_on_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Let only ``roles`` consume through ``subscription`` in the namespace (``namespaces
        grant-subscription-permission``; replaces the earlier roles). Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"grant permissions on subscription {subscription}")
        self._admin.broker.set_subscription_roles(name, subscription, list(roles))

    def revoke_permission_on_subscription(self, namespace: str, subscription: str, role: str) -> None:
        """Remove ``role`` from ``subscription``'s roles (``namespaces revoke-subscription-permission``).
        Tenant admin. 412 when it is not among them."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"revoke permissions on subscription {subscription}")
        self._admin.broker.revoke_subscription_role(name, subscription, role)

    def permissions_on_subscriptions(self, namespace: str) -> dict[str, builtins.list[str]]:
        """``{subscription: [roles]}`` of the namespace. Tenant admin."""
        name = self._read_policy(namespace, "subscription permissions")
        roles = self._admin.broker.namespaces.auth_policies(name).subscription_auth_roles
        return {sub: sorted(r) for sub, r in sorted(roles.items())}

    def permissions(self, namespace: str) -> dict[str, builtins.list[str]]:
        """``{role: [actions]}`` granted on the namespace (``namespaces permissions``). Tenant admin."""
        name = self._read_policy(namespace, "permissions")
        grants = self._admin.broker.namespaces.auth_policies(name).namespace_auth
        return {role: sorted(actions) for role, actions in sorted(grants.items())}

    def get_retention(self, namespace: str) -> RetentionPolicies | None:
        """The namespace's retention policy, None when unset (its topics then follow the
        broker's default). Tenant admin. 412 for a bad namespace name, 404."""
        return self._admin.broker.namespace_retention(self._read_policy(namespace, "retention"))

    def set_retention(self, namespace: str, policies: RetentionPolicies) -> None:
        """Set the namespace's retention policy (``namespaces set-retention --time 3h --size 10G``).
        Tenant admin. 412 for a bad name, 400 for a value out of its Java type's range (minutes an
        int, MB a long), 412 for an invalid policy (Pulsar's rules: :meth:`RetentionPolicies.validate`)."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(name.split("/", 1)[0], f"set the retention of namespace {name}")
        if not isinstance(policies, RetentionPolicies):
            raise InvalidRequestError(f"invalid retention policies {policies!r}: expected RetentionPolicies")
        policies.validate()
        self._admin.broker.set_namespace_retention(name, policies)

    def remove_retention(self, namespace: str) -> None:
        """Remove the namespace's retention policy: its topics follow the broker's default.
        Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(name.split("/", 1)[0], f"remove the retention of namespace {name}")
        self._admin.broker.set_namespace_retention(name, None)

    def get_compaction_threshold(self, namespace: str) -> int | None:
        """The namespace's ``compaction_threshold`` in bytes, None when unset. Tenant admin.
        412 for a bad namespace name, 404."""
        name = self._read_policy(namespace, "compaction threshold")
        return self._admin.broker.namespaces.compaction_threshold(name)

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        """Compact the namespace's topics automatically once ``threshold`` bytes are not
        compacted yet (0: never). Tenant admin. 412 for a negative threshold."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(name.split("/", 1)[0], f"set the compaction threshold of namespace {name}")
        self._admin.broker.set_namespace_compaction_threshold(name, threshold)

    def remove_compaction_threshold(self, namespace: str) -> None:
        """Remove the namespace's compaction threshold (the broker's applies). Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(name.split("/", 1)[0], f"remove the compaction threshold of namespace {name}")
        self._admin.broker.set_namespace_compaction_threshold(name, None)

    def get_schema_compatibility_strategy(self, namespace: str) -> SchemaCompatibilityStrategy:
        """The strategy the namespace's topics follow unless they set their own: its
        ``schema_compatibility_strategy``, else its mapped ``schema_auto_update_compatibility_strategy``,
        else the broker's (Pulsar answers the mapped older policy for ``UNDEFINED``). Tenant
        admin. 404."""
        name = self._read_policy(namespace, "schema compatibility strategy")
        broker = self._admin.broker
        found = broker.namespaces.schema_compatibility_strategy(name)
        return broker.broker_schema_compatibility_strategy if found is None else found

    def set_schema_compatibility_strategy(self, namespace: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        """Set ``schema_compatibility_strategy`` (``UNDEFINED``: fall back to the older policy,
        then the broker's). Tenant admin. 400 for an unknown strategy."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(
            name.split("/", 1)[0], f"set the schema compatibility strategy of namespace {name}"
        )
        self._admin.broker.namespaces.set_schema_compatibility_strategy(
            name, SchemaCompatibilityStrategy.parse(strategy)
        )

    def get_schema_auto_update_compatibility_strategy(self, namespace: str) -> str | None:
        """The older policy (``Full``, ``Backward``, ..., ``AutoUpdateDisabled``), None when unset.
        Tenant admin. 404."""
        name = self._read_policy(namespace, "schema auto-update strategy")
        return self._admin.broker.namespaces.schema_auto_update_compatibility_strategy(name)

    def set_schema_auto_update_compatibility_strategy(self, namespace: str, policy: str) -> None:
        """Set the older policy (deprecated in Pulsar; used when ``schema_compatibility_strategy``
        is unset). Tenant admin. 400 for an unknown value."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(
            name.split("/", 1)[0], f"set the schema auto-update strategy of namespace {name}"
        )
        self._admin.broker.namespaces.set_schema_auto_update_compatibility_strategy(name, policy)

    def get_is_allow_auto_update_schema(self, namespace: str) -> bool:
        """Whether producers may register new schema versions in the namespace (its policy, else
        the broker's ``is_allow_auto_update_schema_enabled``). Tenant admin. 404."""
        name = self._read_policy(namespace, "is_allow_auto_update_schema")
        found = self._admin.broker.namespaces.is_allow_auto_update_schema(name)
        return self._admin.broker.config.is_allow_auto_update_schema_enabled if found is None else found

    def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        """Allow or forbid producers to register new schema versions. Tenant admin."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(name.split("/", 1)[0], f"set is_allow_auto_update_schema of namespace {name}")
        if not isinstance(allowed, bool):
            raise InvalidRequestError(f"invalid isAllowAutoUpdateSchema {allowed!r}: expected true or false")
        self._admin.broker.namespaces.set_is_allow_auto_update_schema(name, allowed)

    # -- message TTL, backlog quotas, inactive topics (Pulsar's Namespaces v2) -----------------

    def get_message_ttl(self, namespace: str) -> int | None:
        """The namespace's message TTL in seconds (``messageTTL``), None when unset (its topics then
        follow ``ttl_duration_default_in_seconds``). Tenant admin. 404."""
        name = self._read_policy(namespace, "message TTL")
        return self._admin.broker.namespace_message_ttl(name)

    def set_message_ttl(self, namespace: str, seconds: int) -> None:
        """Expire what the namespace's subscriptions have not acknowledged ``seconds`` after it was
        published (``namespaces set-message-ttl -ttl 1h``; 0: never), at the broker's
        ``checkMessageExpiry``. Tenant admin. 404; 412 "Invalid value for message TTL, message
        TTL must >= 0" for a negative one."""
        name = self._write_policy(namespace, "message TTL")
        self._admin.broker.set_namespace_message_ttl(name, seconds)

    def remove_message_ttl(self, namespace: str) -> None:
        """Remove the namespace's message TTL. Tenant admin. 404."""
        name = self._write_policy(namespace, "message TTL")
        self._admin.broker.set_namespace_message_ttl(name, None)

    def get_backlog_quota_map(self, namespace: str) -> dict[BacklogQuotaType, BacklogQuota]:
        """The namespace's backlog quotas by type (``backlogQuotaMap``; ``{}`` when it has none).
        Tenant admin. 404."""
        name = self._read_policy(namespace, "backlog quotas")
        return self._admin.broker.namespace_backlog_quotas(name)

    def set_backlog_quota(
        self,
        namespace: str,
        quota: BacklogQuota,
        quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE,
    ) -> None:
        """Set the namespace's backlog quota of ``quota_type`` (``namespaces set-backlog-quota``;
        ``destination_storage``, Pulsar's default, limits the backlog's size, ``message_age`` its
        age). Tenant admin. 400 for a bad quota or type, 404; 412 "Backlog Quota exceeds
        configured retention quota for namespace. ..." when the namespace's retention does not
        cover it (Pulsar checks a ``destination_storage`` quota itself, for another type the
        broker's default quota)."""
        name = self._write_policy(namespace, "backlog quota")
        if not isinstance(quota, BacklogQuota):
            raise InvalidRequestError(f"invalid backlog quota {quota!r}: expected a BacklogQuota")
        self._admin.broker.set_namespace_backlog_quota(name, quota, BacklogQuotaType.parse(quota_type))

    def remove_backlog_quota(
        self, namespace: str, quota_type: BacklogQuotaType | str = BacklogQuotaType.DESTINATION_STORAGE
    ) -> None:
        """Remove the namespace's backlog quota of ``quota_type``. Tenant admin. 404."""
        name = self._write_policy(namespace, "backlog quota")
        self._admin.broker.set_namespace_backlog_quota(name, None, BacklogQuotaType.parse(quota_type))

    def get_inactive_topic_policies(self, namespace: str) -> InactiveTopicPolicies | None:
        """The namespace's inactive-topic policy, None when unset (the broker's settings apply).
        Tenant admin. 404."""
        name = self._read_policy(namespace, "inactive topic policies")
        return self._admin.broker.namespace_inactive_topic_policies(name)

    def set_inactive_topic_policies(self, namespace: str, policies: InactiveTopicPolicies) -> None:
        """Set the namespace's inactive-topic policy (``namespaces set-inactive-topic-policies``):
        its topics are deleted by the broker's ``checkGC`` as it says. Tenant admin. 400, 404."""
        name = self._write_policy(namespace, "inactive topic policies")
        if not isinstance(policies, InactiveTopicPolicies):
            raise InvalidRequestError(f"invalid inactive topic policies {policies!r}: expected InactiveTopicPolicies")
        self._admin.broker.set_namespace_inactive_topic_policies(name, policies)

    def remove_inactive_topic_policies(self, namespace: str) -> None:
        """Remove the namespace's inactive-topic policy. Tenant admin. 404."""
        name = self._write_policy(namespace, "inactive topic policies")
        self._admin.broker.set_namespace_inactive_topic_policies(name, None)

    def _write_policy(self, namespace: str, policy: str) -> str:
        """A policy write's checks: the name (412), the role (tenant admin, 403); the broker
        looks the namespace up (404). Returns the checked name."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"change the {policy} of namespace {name}")
        return name

    def _read_policy(self, namespace: str, policy: str) -> str:
        """A policy read's checks, in this order: the name (412), the role (tenant admin: Pulsar's
        ``allowNamespacePolicyOperationAsync``, 403 whether the namespace exists or not), then
        the namespace (404). Returns the checked name."""
        name = check_namespace_name(namespace)
        self._admin.check_tenant_admin(_tenant(name), f"read the {policy} of namespace {name}")
        if not self._admin.broker.namespace_exists(name):
            raise NamespaceNotFoundError(f"Namespace does not exist: {name}")
        return name
