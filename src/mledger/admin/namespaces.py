"""``admin.namespaces``: namespaces and their policies (retention, compaction threshold), as ``pulsar-admin namespaces``.

========================  ==================  =========================================
method                    authorization       Pulsar endpoint / CLI
========================  ==================  =========================================
create                    superuser           ``namespaces create``
get_retention             authenticated       ``namespaces get-retention``
set_retention             superuser           ``namespaces set-retention``
remove_retention          superuser           ``namespaces remove-retention``
get_compaction_threshold  authenticated       ``namespaces get-compaction-threshold``
set_compaction_threshold  superuser           ``namespaces set-compaction-threshold``
remove_compaction_threshold superuser         ``namespaces remove-compaction-threshold``
get_schema_compatibility_strategy  authenticated  ``namespaces get-schema-compatibility-strategy``
set_schema_compatibility_strategy  superuser      ``namespaces set-schema-compatibility-strategy``
get_is_allow_auto_update_schema    authenticated  ``namespaces get-is-allow-auto-update-schema``
set_is_allow_auto_update_schema    superuser      ``namespaces set-is-allow-auto-update-schema``
========================  ==================  =========================================

Changes need a superuser role when authorization is on (Pulsar's tenant-admin rule, mledger
having no tenant admin lists); a changed policy applies to the namespace's open topics without
a policy of their own at once. Every method may block on the metadata store.
"""

from __future__ import annotations

from ..broker.names import check_namespace_name
from ..broker.retention import RetentionPolicies
from ..broker.schema_compat import SchemaCompatibilityStrategy
from ..core.errors import InvalidRequestError
from .context import AdminContext

__all__ = ["Namespaces"]


class Namespaces:
    """Namespace policies of the admin's broker (``admin.namespaces``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def create(self, namespace: str) -> None:
        """Create ``tenant/namespace`` (``namespaces create``): topics, created explicitly or on
        first use, go in namespaces that exist. Superuser. 400 for a bad name, 409
        (``NamespaceAlreadyExistsError``) when it exists."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"create namespace {name}")
        self._admin.broker.create_namespace(name)

    def get_retention(self, namespace: str) -> RetentionPolicies | None:
        """The namespace's retention policy, None when unset (its topics then follow the
        broker's default). 400 for a bad namespace name."""
        self._admin.authenticate()
        return self._admin.broker.namespace_retention(check_namespace_name(namespace))

    def set_retention(self, namespace: str, policies: RetentionPolicies) -> None:
        """Set the namespace's retention policy (``namespaces set-retention --time 3h --size 10G``).
        Superuser. 400 for a bad name or a value out of its Java type's range (minutes an int, MB
        a long), 412 for an invalid policy (Pulsar's rules: :meth:`RetentionPolicies.validate`)."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"set the retention of namespace {name}")
        if not isinstance(policies, RetentionPolicies):
            raise InvalidRequestError(f"invalid retention policies {policies!r}: expected RetentionPolicies")
        policies.validate()
        self._admin.broker.set_namespace_retention(name, policies)

    def remove_retention(self, namespace: str) -> None:
        """Remove the namespace's retention policy: its topics follow the broker's default.
        Superuser."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"remove the retention of namespace {name}")
        self._admin.broker.set_namespace_retention(name, None)

    def get_compaction_threshold(self, namespace: str) -> int | None:
        """The namespace's ``compaction_threshold`` in bytes, None when unset. 400 for a bad
        namespace name."""
        self._admin.authenticate()
        return self._admin.broker.namespaces.compaction_threshold(check_namespace_name(namespace))

    def set_compaction_threshold(self, namespace: str, threshold: int) -> None:
        """Compact the namespace's topics automatically once ``threshold`` bytes are not
        compacted yet (0: never). Superuser. 412 for a negative threshold."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"set the compaction threshold of namespace {name}")
        self._admin.broker.set_namespace_compaction_threshold(name, threshold)

    def remove_compaction_threshold(self, namespace: str) -> None:
        """Remove the namespace's compaction threshold (the broker's applies). Superuser."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"remove the compaction threshold of namespace {name}")
        self._admin.broker.set_namespace_compaction_threshold(name, None)

    def get_schema_compatibility_strategy(self, namespace: str) -> SchemaCompatibilityStrategy:
        """The strategy the namespace's topics follow unless they set their own: its
        ``schema_compatibility_strategy``, else its mapped ``schema_auto_update_compatibility_strategy``,
        else the broker's (Pulsar answers the mapped older policy for ``UNDEFINED``)."""
        self._admin.authenticate()
        name = check_namespace_name(namespace)
        broker = self._admin.broker
        found = broker.namespaces.schema_compatibility_strategy(name)
        return broker.broker_schema_compatibility_strategy if found is None else found

    def set_schema_compatibility_strategy(self, namespace: str, strategy: SchemaCompatibilityStrategy | str) -> None:
        """Set ``schema_compatibility_strategy`` (``UNDEFINED``: fall back to the older policy,
        then the broker's). Superuser. 400 for an unknown strategy."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"set the schema compatibility strategy of namespace {name}")
        self._admin.broker.namespaces.set_schema_compatibility_strategy(
            name, SchemaCompatibilityStrategy.parse(strategy)
        )

    def get_schema_auto_update_compatibility_strategy(self, namespace: str) -> str | None:
        """The older policy (``Full``, ``Backward``, ..., ``AutoUpdateDisabled``), None when unset."""
        self._admin.authenticate()
        return self._admin.broker.namespaces.schema_auto_update_compatibility_strategy(check_namespace_name(namespace))

    def set_schema_auto_update_compatibility_strategy(self, namespace: str, policy: str) -> None:
        """Set the older policy (deprecated in Pulsar; used when ``schema_compatibility_strategy``
        is unset). Superuser. 400 for an unknown value."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"set the schema auto-update strategy of namespace {name}")
        self._admin.broker.namespaces.set_schema_auto_update_compatibility_strategy(name, policy)

    def get_is_allow_auto_update_schema(self, namespace: str) -> bool:
        """Whether producers may register new schema versions in the namespace (its policy, else
        the broker's ``is_allow_auto_update_schema_enabled``)."""
        self._admin.authenticate()
        name = check_namespace_name(namespace)
        found = self._admin.broker.namespaces.is_allow_auto_update_schema(name)
        return self._admin.broker.config.is_allow_auto_update_schema_enabled if found is None else found

    def set_is_allow_auto_update_schema(self, namespace: str, allowed: bool) -> None:
        """Allow or forbid producers to register new schema versions. Superuser."""
        name = check_namespace_name(namespace)
        self._admin.check_superuser(f"set is_allow_auto_update_schema of namespace {name}")
        if not isinstance(allowed, bool):
            raise InvalidRequestError(f"invalid isAllowAutoUpdateSchema {allowed!r}: expected true or false")
        self._admin.broker.namespaces.set_is_allow_auto_update_schema(name, allowed)
