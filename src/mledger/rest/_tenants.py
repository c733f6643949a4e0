"""Clusters and tenants over REST (Pulsar's ``ClustersBase`` and ``TenantsBase``, v2 paths).

The routes (``/clusters``, ``/clusters/{c}``, ``/tenants``, ``/tenants/{t}``: list, get, create
with PUT, update with POST, delete) are the ``clusters`` and ``tenants`` operations of the admin
operation table (:data:`mledger.admin.OPERATIONS`), their handlers generated from it
(:func:`~mledger.rest._operation_routes.namespace_handler`) but for ``GET /clusters``, which needs
no role.

``ClusterData`` is Pulsar's JSON (``serviceUrl``, ``serviceUrlTls``, ``brokerServiceUrl``,
``brokerServiceUrlTls``, other fields kept as given); ``TenantInfo`` is ``{"adminRoles": [...],
"allowedClusters": [...]}``. 409 creating one that exists, 404 for an unknown one, 412 for a
tenant without clusters or naming unknown ones and deleting a cluster a tenant allows, 409
deleting a tenant with namespaces; authorization as :mod:`mledger.admin`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..admin import json_bytes
from ._context import context_of
from ._operation_routes import JSON, OperationRoutes, namespace_handler

__all__ = ["tenants_router"]


def tenants_router(prefix: str = "", tag: str | None = None) -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), tagged ``tag``."""
    routes = OperationRoutes("clusters", "tenants")

    @routes.handles("list_clusters")
    async def list_clusters(request: Request) -> Response:
        # no caller role: container tools poll this as the readiness check, before any set-up
        context = context_of(request)
        return Response(json_bytes(await context.run(context.admin.clusters.list)), media_type=JSON)

    router = APIRouter(prefix=prefix, tags=[tag] if tag else None)
    routes.add_to(router, namespace_handler)
    return router
