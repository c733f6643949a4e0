"""The set-up calls application tests make: namespaces, their policies and permissions (Pulsar's v2 paths).

Clusters and tenants are in :mod:`mledger.rest._tenants`. The routes are the ``namespaces``
operations of the admin operation table; their handlers are generated from it
(:func:`~mledger.rest._operation_routes.namespace_handler`) but for the topic list and the
deduplication policy, which the broker answers itself, written here.

* ``GET /admin/v2/namespaces/{tenant}``, ``GET`` / ``PUT`` / ``DELETE /admin/v2/namespaces/{tenant}/{ns}``
  (``PUT``'s optional body: Pulsar's ``Policies``, ``auth_policies`` among them; 404 when the
  tenant does not exist, 409 when the namespace exists / is not empty; ``?force=true`` deletes
  its topics);
* ``GET /admin/v2/namespaces/{tenant}/{ns}/permissions``, ``POST`` / ``DELETE
  .../permissions/{role}`` (body a JSON array of actions, ``["produce", "consume"]``);
  ``GET .../permissions/subscription``, ``POST .../permissions/subscription/{sub}`` (body the
  roles that alone may consume through it) and ``DELETE .../permissions/{sub}/{role}``;
* ``GET`` / ``POST`` / ``DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication`` (body ``true``
  or ``false``; ``DELETE`` returns to the broker's setting), applied to the open topics at once;
* ``GET`` / ``POST`` / ``DELETE /admin/v2/namespaces/{tenant}/{ns}/retention`` (body Pulsar's
  ``{"retentionTimeInMinutes": M, "retentionSizeInMB": S}``; ``GET`` is ``null`` when unset;
  412 for an invalid policy), applied to the open topics without a policy of their own;
* ``GET`` / ``PUT`` / ``DELETE /admin/v2/namespaces/{tenant}/{ns}/compactionThreshold`` (body a
  long, bytes; ``GET`` is ``null`` when unset; 412 for a negative one);
* ``GET`` / ``PUT /admin/v2/namespaces/{tenant}/{ns}/schemaCompatibilityStrategy`` (body the
  strategy, ``"BACKWARD"``; ``GET`` answers the strategy in force at namespace level),
  ``GET`` / ``PUT .../schemaAutoUpdateCompatibilityStrategy`` (the older policy, ``"Full"``, ...;
  ``GET`` is ``null`` when unset) and ``GET`` / ``POST .../isAllowAutoUpdateSchema`` (body
  ``true`` or ``false``);
* ``GET`` / ``POST`` / ``DELETE .../messageTTL`` (body the seconds; ``GET`` is ``null`` when
  unset; 412 below 0), ``GET .../backlogQuotaMap`` and ``POST`` / ``DELETE .../backlogQuota``
  (``?backlogQuotaType=destination_storage|message_age``, body Pulsar's ``BacklogQuota``; 412 when
  the retention policy does not cover it), ``GET`` / ``POST`` / ``DELETE .../inactiveTopicPolicies``
  (body Pulsar's ``InactiveTopicPolicies``): the broker's timers read them (docs/timers.md).

With authorization on, every route, policy reads included, needs a superuser or a role in the
tenant's ``adminRoles`` (Pulsar's ``allowNamespacePolicyOperationAsync``: ``validateTenantAdminAccess``),
checked before the namespace is looked up (403 whether it exists or not); the namespace's topic
list needs GET_TOPICS there (a namespace-level produce or consume grant, or a superuser, as
Pulsar; 403 otherwise).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..admin import Admin, NamespaceOperation, json_bytes, parse_bool_body
from ..broker import check_namespace_name
from ._context import context_of
from ._operation_routes import JSON, CallerAdmin, Namespace, OperationRoutes, Tenant, decode_segment, namespace_handler

__all__ = ["namespaces_router"]


def _name(tenant: str, namespace: str) -> str:
    """``tenant/namespace`` decoded and checked (412 "Namespace name is not valid", first, as
    Pulsar's ``validateNamespaceName``)."""
    return check_namespace_name(f"{decode_segment(tenant, 'tenant')}/{decode_segment(namespace, 'namespace')}")


def _tenant_admin(admin: Admin, name: str, action: str = "change the namespace's policies") -> str:
    """``name``'s tenant must be administered by the caller (403); returns ``name``."""
    admin.check_tenant_admin(name.split("/", 1)[0], action)
    return name


def namespaces_router(prefix: str = "", tag: str | None = None) -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), tagged ``tag``."""
    routes = OperationRoutes("namespaces")

    @routes.handles("namespace_topics")
    async def namespace_topics(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        name = _name(tenant, namespace)
        admin.check_namespace(NamespaceOperation.GET_TOPICS, name)  # Pulsar's rule: the topic list is not public
        topics = await context_of(request).run(admin.broker.list_topics, name, include_partitions=True)
        return Response(json_bytes(topics), media_type=JSON)

    @routes.handles("get_deduplication")
    async def get_deduplication(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        name = _tenant_admin(admin, _name(tenant, namespace), "read the deduplication policy")
        enabled = await context_of(request).run(admin.broker.namespace_deduplication, name)
        return Response(json_bytes(enabled), media_type=JSON)

    @routes.handles("set_deduplication")
    async def set_deduplication(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        name = _tenant_admin(admin, _name(tenant, namespace))
        enabled = parse_bool_body(await request.body())
        await context_of(request).run(admin.broker.set_namespace_deduplication, name, enabled)
        return Response(status_code=204)

    @routes.handles("remove_deduplication")
    async def remove_deduplication(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        name = _tenant_admin(admin, _name(tenant, namespace))
        await context_of(request).run(admin.broker.set_namespace_deduplication, name, None)
        return Response(status_code=204)

    router = APIRouter(prefix=prefix, tags=[tag] if tag else None)
    routes.add_to(router, namespace_handler)
    return router
