"""``admin.tenants`` and ``admin.clusters``: Pulsar's ``pulsar-admin tenants`` / ``clusters``.

==================  =====================  ==============================================
method              authorization          Pulsar endpoint / CLI
==================  =====================  ==============================================
clusters.list       none                   ``GET /clusters`` (a readiness check)
clusters.get        superuser              ``GET /clusters/{c}``, ``clusters get``
clusters.create     superuser              ``PUT /clusters/{c}``, ``clusters create``
clusters.update     superuser              ``POST /clusters/{c}``, ``clusters update``
clusters.delete     superuser              ``DELETE /clusters/{c}``, ``clusters delete``
tenants.list        superuser              ``GET /tenants``, ``tenants list``
tenants.get         tenant admin           ``GET /tenants/{t}``, ``tenants get``
tenants.create      superuser              ``PUT /tenants/{t}``, ``tenants create``
tenants.update      superuser              ``POST /tenants/{t}``, ``tenants update``
tenants.delete      superuser              ``DELETE /tenants/{t}``, ``tenants delete``
==================  =====================  ==============================================

Every method may block on the metadata store. Errors as :mod:`mledger.broker`. The role
is checked before the cluster or tenant is looked up: a refused caller gets the same 403 whether
it exists or not. A name that breaks Pulsar's rule is 412 "Tenant name is not valid" / "Cluster
name is not valid" (:class:`~mledger.broker.InvalidNameError`); ``tenants.create`` checks it
before the role, as Pulsar's ``TenantsBase.createTenant`` does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..broker import TenantInfo, check_tenant_name
from ._context import AdminContext

__all__ = ["Clusters", "Tenants"]


class Clusters:
    """Clusters of the admin's broker (``admin.clusters``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def list(self) -> list[str]:
        """The clusters' names."""
        return self._admin.broker.clusters.list()

    def get(self, cluster: str) -> dict[str, object]:
        """The cluster's ``ClusterData`` (``serviceUrl``, ``brokerServiceUrl``, ...). Superuser
        (Pulsar's ``ClustersBase.getCluster``: ``validateSuperUserAccessAsync``). 404."""
        self._admin.check_superuser(f"read cluster {cluster}")
        return self._admin.broker.clusters.get(cluster)

    def create(self, cluster: str, data: Mapping[str, object] | None = None) -> None:
        """Create a cluster with ``ClusterData`` ``data``. Superuser. 409 when it exists, 412 for a
        bad name (Pulsar's ``ClustersBase.createCluster``: after the role)."""
        self._admin.check_superuser(f"create cluster {cluster}")
        self._admin.broker.clusters.create(cluster, data)

    def update(self, cluster: str, data: Mapping[str, object]) -> None:
        """Replace the cluster's ``ClusterData``. Superuser. 404."""
        self._admin.check_superuser(f"update cluster {cluster}")
        self._admin.broker.clusters.update(cluster, data)

    def delete(self, cluster: str) -> None:
        """Delete a cluster. Superuser. 404; 412 while a tenant allows it."""
        self._admin.check_superuser(f"delete cluster {cluster}")
        self._admin.broker.clusters.delete(cluster, self._admin.broker.tenants)


class Tenants:
    """Tenants of the admin's broker (``admin.tenants``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def list(self) -> list[str]:
        """The tenants' names. Superuser."""
        self._admin.check_superuser("list tenants")
        return self._admin.broker.tenants.list()

    def get(self, tenant: str) -> TenantInfo:
        """The tenant's ``adminRoles`` and ``allowedClusters``. Tenant admin. 404."""
        self._admin.check_tenant_admin(tenant, f"read tenant {tenant}")
        return self._admin.broker.tenants.get(tenant)

    def create(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        """Create a tenant. Superuser. 412 for a bad name (checked first), 409 when it exists, 412
        for no or unknown clusters."""
        check_tenant_name(tenant)
        self._admin.check_superuser(f"create tenant {tenant}")
        self._admin.broker.tenants.create(tenant, _info(info))

    def update(self, tenant: str, info: TenantInfo | Mapping[str, object]) -> None:
        """Replace the tenant's info. Superuser. 404; 412 for no or unknown clusters."""
        self._admin.check_superuser(f"update tenant {tenant}")
        self._admin.broker.tenants.update(tenant, _info(info))

    def delete(self, tenant: str) -> None:
        """Delete a tenant. Superuser. 404; 409 while it has namespaces."""
        self._admin.check_superuser(f"delete tenant {tenant}")
        self._admin.broker.tenants.delete(tenant)


def _info(info: TenantInfo | Mapping[str, object]) -> TenantInfo:
    return info if isinstance(info, TenantInfo) else TenantInfo.from_json(info)
