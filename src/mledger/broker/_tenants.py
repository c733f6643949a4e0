"""Clusters and tenants, where Pulsar keeps them: ``/admin/clusters/<name>``, ``/admin/policies/<tenant>``.

A cluster's node holds Pulsar's ``ClusterData`` JSON (``serviceUrl``, ``serviceUrlTls``,
``brokerServiceUrl``, ``brokerServiceUrlTls`` and whatever else the body carried, kept as
given); a tenant's node holds ``TenantInfo`` (``adminRoles``, ``allowedClusters``). A tenant's
namespaces are the children of its node (:mod:`mledger.broker._namespaces`), so a tenant with
namespaces but no node (data written before mledger stored tenants) still exists, with no admin
roles. Errors are Pulsar's: 409 when creating one that exists, 404 for an unknown one, 412 for a
tenant naming unknown clusters or a cluster a tenant still allows, 409 deleting a tenant that
has namespaces, 412 "Tenant name is not valid" / "Cluster name is not valid" for a name that breaks
Pulsar's rule (:func:`~mledger.broker.check_tenant_name`, :func:`~mledger.broker.check_cluster_name`;
every method checks the name it is given before it reaches the store).

Thread-safe through the metadata store's compare-and-set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ..core import (
    InvalidRequestError,
    MLedgerError,
    NotFoundError,
    PreconditionFailedError,
    StateCorruptedError,
)
from ..storage import NEW_NODE, Store
from ._names import check_cluster_name, check_tenant_name, named_entity_problem
from ._namespaces import POLICIES_ROOT
from ._stored_json import create_object, decode_object

__all__ = [
    "CLUSTERS_ROOT",
    "CLUSTER_URL_FIELDS",
    "ClusterAlreadyExistsError",
    "Clusters",
    "TenantAlreadyExistsError",
    "TenantInfo",
    "TenantNotEmptyError",
    "TenantNotFoundError",
    "Tenants",
]

CLUSTERS_ROOT = "/admin/clusters"
TENANTS_ROOT = POLICIES_ROOT
"""Tenants live where Pulsar keeps them, the namespaces' root: ``/admin/policies/<tenant>``."""
CLUSTER_URL_FIELDS = ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls")
"""The ``ClusterData`` fields a ``GET`` always answers (null when unset)."""


class ClusterAlreadyExistsError(MLedgerError):
    """``PUT`` of a cluster that exists (409 "Cluster already exists")."""

    http_status = 409


class TenantAlreadyExistsError(MLedgerError):
    """``PUT`` of a tenant that exists (409 "Tenant already exists")."""

    http_status = 409


class TenantNotFoundError(NotFoundError):
    """An unknown tenant (404 "Tenant does not exist")."""


class TenantNotEmptyError(MLedgerError):
    """Deleting a tenant that has namespaces (409 "The tenant still has active namespaces")."""

    http_status = 409


def _string_list(value: object, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequestError(f"invalid {field} {value!r}: expected a list of names")
    return tuple(sorted(set(value)))


@dataclass(frozen=True)
class TenantInfo:
    """Pulsar's ``TenantInfo``: the roles that administer the tenant and the clusters it may use."""

    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: object) -> TenantInfo:
        """From ``{"adminRoles": [...], "allowedClusters": [...]}``; ``InvalidRequestError``."""
        if not isinstance(data, Mapping):
            raise InvalidRequestError(f"invalid tenant info {data!r}: expected a JSON object")
        return cls(
            _string_list(data.get("adminRoles"), "adminRoles"),
            _string_list(data.get("allowedClusters"), "allowedClusters"),
        )

    def to_json(self) -> dict[str, list[str]]:
        """Pulsar's JSON form."""
        return {"adminRoles": list(self.admin_roles), "allowedClusters": list(self.allowed_clusters)}


class Clusters:
    """The clusters stored in one metadata store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, name: str, data: Mapping[str, object] | None = None) -> None:
        """Create cluster ``name`` with ``ClusterData`` ``data``; 409 when it exists."""
        if not create_object(self._store, f"{CLUSTERS_ROOT}/{check_cluster_name(name)}", _cluster_data(data)):
            raise ClusterAlreadyExistsError(f"Cluster already exists: {name}")

    def ensure(self, name: str, data: Mapping[str, object] | None = None) -> bool:
        """Create the cluster unless it exists; True when this call did."""
        try:
            self.create(name, data)
        except ClusterAlreadyExistsError:
            return False
        return True

    def get(self, name: str) -> dict[str, object]:
        """The cluster's ``ClusterData`` (the URL fields always present); 404 when unknown."""
        path = f"{CLUSTERS_ROOT}/{check_cluster_name(name)}"
        stored = self._store.get(path)
        if stored is None:
            raise NotFoundError(f"Cluster {name} does not exist")
        return {**dict.fromkeys(CLUSTER_URL_FIELDS), **decode_object(path, stored.data, "data")}

    def update(self, name: str, data: Mapping[str, object]) -> None:
        """Replace the cluster's ``ClusterData``; 404 when unknown."""
        body = _cluster_data(data)
        path = f"{CLUSTERS_ROOT}/{check_cluster_name(name)}"
        stored = self._store.get(path)
        if stored is None:
            raise NotFoundError(f"Cluster {name} does not exist")
        self._store.put(path, json.dumps(body).encode(), stored.version)

    def delete(self, name: str, tenants: Tenants) -> None:
        """Delete the cluster: 404 when unknown, 412 while a tenant allows it."""
        path = f"{CLUSTERS_ROOT}/{check_cluster_name(name)}"
        if self._store.get(path) is None:
            raise NotFoundError(f"Cluster {name} does not exist")
        users = [t for t in tenants.list() if name in tenants.get(t).allowed_clusters]
        if users:
            raise PreconditionFailedError(f"Cluster not empty: tenants {', '.join(users)} use cluster {name}")
        self._store.delete(path)

    def exists(self, name: str) -> bool:
        """Whether the cluster was created."""
        return self._store.get(f"{CLUSTERS_ROOT}/{check_cluster_name(name)}") is not None

    def list(self) -> list[str]:
        """The clusters' names, sorted."""
        return self._store.children(CLUSTERS_ROOT)


class Tenants:
    """The tenants stored in one metadata store (the namespaces live under them)."""

    def __init__(self, store: Store, clusters: Clusters) -> None:
        self._store = store
        self._clusters = clusters

    def create(self, name: str, info: TenantInfo) -> None:
        """Create the tenant: 409 when it exists, 412 when ``allowedClusters`` is empty or names
        a cluster that does not exist (Pulsar's ``validateClusters``)."""
        path = f"{TENANTS_ROOT}/{check_tenant_name(name)}"
        if self.exists(name):
            raise TenantAlreadyExistsError(f"Tenant already exists: {name}")
        self._check_clusters(info)
        if not create_object(self._store, path, info.to_json()):
            raise TenantAlreadyExistsError(f"Tenant already exists: {name}")

    def ensure(self, name: str, info: TenantInfo) -> bool:
        """Create the tenant (without checking its clusters) unless it exists; True when this
        call did. For the namespaces a broker creates itself."""
        if self.exists(name):
            return False
        return create_object(self._store, f"{TENANTS_ROOT}/{check_tenant_name(name)}", info.to_json())

    def update(self, name: str, info: TenantInfo) -> None:
        """Replace the tenant's info: 404 when unknown, 412 for unknown clusters."""
        path = f"{TENANTS_ROOT}/{check_tenant_name(name)}"
        if not self.exists(name):
            raise TenantNotFoundError(f"Tenant {name} does not exist")
        self._check_clusters(info)
        stored = self._store.get(path)
        self._store.put(path, json.dumps(info.to_json()).encode(), NEW_NODE if stored is None else stored.version)

    def get(self, name: str) -> TenantInfo:
        """The tenant's info; 404 when unknown."""
        path = f"{TENANTS_ROOT}/{check_tenant_name(name)}"
        stored = self._store.get(path)
        if stored is None:
            if self._store.children(path):
                return TenantInfo()
            raise TenantNotFoundError(f"Tenant {name} does not exist")
        try:
            return TenantInfo.from_json(decode_object(path, stored.data, "data"))
        except InvalidRequestError as exc:
            raise StateCorruptedError(f"tenant info at {path}: {exc}") from None

    def admin_roles(self, name: str) -> frozenset[str]:
        """The tenant's ``adminRoles``; empty for an unknown tenant (never raises for a name)."""
        if named_entity_problem(name) is not None:
            return frozenset()
        stored = self._store.get(f"{TENANTS_ROOT}/{name}")
        if stored is None:
            return frozenset()
        roles = decode_object(f"{TENANTS_ROOT}/{name}", stored.data, "data").get("adminRoles")
        return frozenset(r for r in roles if isinstance(r, str)) if isinstance(roles, list) else frozenset()

    def exists(self, name: str) -> bool:
        """Whether the tenant was created (or holds namespaces)."""
        path = f"{TENANTS_ROOT}/{check_tenant_name(name)}"
        return self._store.get(path) is not None or bool(self._store.children(path))

    def list(self) -> list[str]:
        """The tenants' names, sorted."""
        return self._store.children(TENANTS_ROOT)

    def delete(self, name: str) -> None:
        """Delete the tenant: 404 when unknown, 409 while it has namespaces."""
        path = f"{TENANTS_ROOT}/{check_tenant_name(name)}"
        if not self.exists(name):
            raise TenantNotFoundError(f"Tenant {name} does not exist")
        if self._store.children(path):
            raise TenantNotEmptyError("The tenant still has active namespaces")
        self._store.delete(path)

    def _check_clusters(self, info: TenantInfo) -> None:
        if not info.allowed_clusters:
            raise PreconditionFailedError("Clusters can not be empty")
        # a name no cluster can have does not exist (Pulsar's validateClusters), rather than a bad name
        missing = [c for c in info.allowed_clusters if named_entity_problem(c) or not self._clusters.exists(c)]
        if missing:
            raise PreconditionFailedError(f"Clusters do not exist: {', '.join(missing)}")


def _cluster_data(data: Mapping[str, object] | None) -> dict[str, object]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidRequestError(f"invalid cluster data {data!r}: expected a JSON object")
    for field in CLUSTER_URL_FIELDS:
        value = data.get(field)
        if value is not None and not isinstance(value, str):
            raise InvalidRequestError(f"invalid {field} {value!r}: expected a URL string")
    return {str(k): v for k, v in data.items()}
