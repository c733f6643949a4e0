"""Clusters and tenants over REST (Pulsar's ``ClustersBase`` and ``TenantsBase``, v2 paths).

The routes (``/clusters``, ``/clusters/{c}``, ``/tenants``, ``/tenants/{t}``: list, get, create
with PUT, update with POST, delete) are the ``clusters`` and ``tenants`` operations of the admin
operation table (:data:`mledger.admin._operations.OPERATIONS`); ``GET /clusters`` needs no role.

``ClusterData`` is Pulsar's JSON (``serviceUrl``, ``serviceUrlTls``, ``brokerServiceUrl``,
``brokerServiceUrlTls``, other fields kept as given); ``TenantInfo`` is ``{"adminRoles": [...],
"allowedClusters": [...]}``. 409 creating one that exists, 404 for an unknown one, 412 for a
tenant without clusters or naming unknown ones and deleting a cluster a tenant allows, 409
deleting a tenant with namespaces; authorization as :mod:`mledger.admin._tenants`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from ..admin._policies import parse_json_object_body
from ._context import context_of
from ._operation_routes import OperationRoutes
from ._topics import CallerAdmin, decode_segment

__all__ = ["tenants_router"]

ClusterName = Annotated[str, Path(description="cluster")]
TenantName = Annotated[str, Path(description="tenant")]
_OBJECT = {"type": "object", "additionalProperties": True}


def _json(value: Any) -> Response:
    return Response(json.dumps(value), media_type="application/json")


def _body(description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": False,
            "description": description,
            "content": {"application/json": {"schema": _OBJECT}},
        }
    }


def tenants_router(prefix: str = "", tag: str | None = None) -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), tagged ``tag``."""
    routes = OperationRoutes("clusters", "tenants")

    @routes.handles("list_clusters", response_model=list[str])
    async def list_clusters(request: Request) -> Response:
        # no caller role: container tools poll this as the readiness check, before any set-up
        context = context_of(request)
        return _json(await context.run(context.admin.clusters.list))

    @routes.handles("get_cluster")
    async def get_cluster(request: Request, admin: CallerAdmin, cluster: ClusterName) -> Response:
        return _json(await context_of(request).run(admin.clusters.get, decode_segment(cluster, "cluster")))

    @routes.handles("create_cluster", openapi_extra=_body("ClusterData"))
    async def create_cluster(request: Request, admin: CallerAdmin, cluster: ClusterName) -> Response:
        data = parse_json_object_body(await request.body(), "ClusterData")
        await context_of(request).run(admin.clusters.create, decode_segment(cluster, "cluster"), data)
        return Response(status_code=204)

    @routes.handles("update_cluster", openapi_extra=_body("ClusterData"))
    async def update_cluster(request: Request, admin: CallerAdmin, cluster: ClusterName) -> Response:
        data = parse_json_object_body(await request.body(), "ClusterData")
        await context_of(request).run(admin.clusters.update, decode_segment(cluster, "cluster"), data)
        return Response(status_code=204)

    @routes.handles("delete_cluster")
    async def delete_cluster(request: Request, admin: CallerAdmin, cluster: ClusterName) -> Response:
        await context_of(request).run(admin.clusters.delete, decode_segment(cluster, "cluster"))
        return Response(status_code=204)

    @routes.handles("list_tenants", response_model=list[str])
    async def list_tenants(request: Request, admin: CallerAdmin) -> Response:
        return _json(await context_of(request).run(admin.tenants.list))

    @routes.handles("get_tenant")
    async def get_tenant(request: Request, admin: CallerAdmin, tenant: TenantName) -> Response:
        info = await context_of(request).run(admin.tenants.get, decode_segment(tenant, "tenant"))
        return _json(info.to_json())

    @routes.handles("create_tenant", openapi_extra=_body("TenantInfo"))
    async def create_tenant(request: Request, admin: CallerAdmin, tenant: TenantName) -> Response:
        info = parse_json_object_body(await request.body(), "TenantInfo")
        await context_of(request).run(admin.tenants.create, decode_segment(tenant, "tenant"), info)
        return Response(status_code=204)

    @routes.handles("update_tenant", openapi_extra=_body("TenantInfo"))
    async def update_tenant(request: Request, admin: CallerAdmin, tenant: TenantName) -> Response:
        info = parse_json_object_body(await request.body(), "TenantInfo")
        await context_of(request).run(admin.tenants.update, decode_segment(tenant, "tenant"), info)
        return Response(status_code=204)

    @routes.handles("delete_tenant")
    async def delete_tenant(request: Request, admin: CallerAdmin, tenant: TenantName) -> Response:
        await context_of(request).run(admin.tenants.delete, decode_segment(tenant, "tenant"))
        return Response(status_code=204)

    router = APIRouter(prefix=prefix, tags=[tag] if tag else None)
    routes.add_to(router)
    return router
