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
========================  ==================  =========================================

Changes need a superuser role when authorization is on (Pulsar's tenant-admin rule, mledger
having no tenant admin lists); a changed policy applies to the namespace's open topics without
a policy of their own at once. Every method may block on the metadata store.
"""

from __future__ import annotations

from ..broker.names import check_namespace_name
from ..broker.retention import RetentionPolicies
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
