"""The set-up calls application tests make: namespaces, their policies and permissions (Pulsar's v2 paths).

Clusters and tenants are in :mod:`mledger.rest._tenants`.

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
  ``true`` or ``false``).

With authorization on, every route, policy reads included, needs a superuser or a role in the
tenant's ``adminRoles`` (Pulsar's ``allowNamespacePolicyOperationAsync``: ``validateTenantAdminAccess``),
checked before the namespace is looked up (403 whether it exists or not); the namespace's topic
list needs GET_TOPICS there (a namespace-level produce or consume grant, or a superuser, as
Pulsar; 403 otherwise).
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Path, Query, Request, Response

from ..admin import Admin, NamespaceOperation
from ..admin._policies import (
    RetentionPoliciesData,
    parse_actions_body,
    parse_compaction_threshold_body,
    parse_enum_body,
    parse_json_object_body,
    parse_strategy_body,
)
from ..core._errors import InvalidRequestError
from ._context import context_of
from ._operation_routes import OperationRoutes
from ._topics import CallerAdmin, decode_segment

__all__ = ["namespaces_router"]

Tenant = Annotated[str, Path(description="tenant")]
Namespace = Annotated[str, Path(description="namespace")]
Role = Annotated[str, Path(description="role")]
Subscription = Annotated[str, Path(description="subscription")]


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value), status_code=status, media_type="application/json")


def _tenant_admin(admin: Admin, tenant: str, action: str = "change the namespace's policies") -> None:
    admin.check_tenant_admin(decode_segment(tenant, "tenant"), action)


def _name(tenant: str, namespace: str) -> str:
    return f"{decode_segment(tenant, 'tenant')}/{decode_segment(namespace, 'namespace')}"


def namespaces_router(prefix: str = "", tag: str | None = None) -> APIRouter:
    """The routes above, under ``prefix`` (``/admin/v2`` in the app), tagged ``tag``."""
    routes = OperationRoutes("namespaces")

    @routes.handles("list_namespaces", response_model=list[str])
    async def list_namespaces(request: Request, admin: CallerAdmin, tenant: Tenant) -> Response:
        return _json(await context_of(request).run(admin.namespaces.list, decode_segment(tenant, "tenant")))

    @routes.handles(
        "create_namespace",
        openapi_extra={
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
            }
        },
    )
    async def create_namespace(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        name = _name(tenant, namespace)
        policies = parse_json_object_body(await request.body(), "namespace's Policies")
        await context_of(request).run(admin.namespaces.create, name, policies)
        return Response(status_code=204)

    @routes.handles("get_policies")
    async def get_policies(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        return _json(await context_of(request).run(admin.namespaces.policies, _name(tenant, namespace)))

    @routes.handles("delete_namespace")
    async def delete_namespace(
        request: Request,
        admin: CallerAdmin,
        tenant: Tenant,
        namespace: Namespace,
        force: Annotated[bool, Query(description="delete its topics too")] = False,
    ) -> Response:
        await context_of(request).run(admin.namespaces.delete, _name(tenant, namespace), force=force)
        return Response(status_code=204)

    @routes.handles("get_subscription_permissions")
    async def get_subscription_permissions(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        name = _name(tenant, namespace)
        return _json(await context_of(request).run(admin.namespaces.permissions_on_subscriptions, name))

    @routes.handles(
        "grant_subscription_permission",
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": 'roles, e.g. ["billing"]',
                "content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}},
            }
        },
    )
    async def grant_subscription_permission(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace, subscription: Subscription
    ) -> Response:
        roles = parse_actions_body(await request.body(), "roles")
        await context_of(request).run(
            admin.namespaces.grant_permission_on_subscription, _name(tenant, namespace), unquote(subscription), roles
        )
        return Response(status_code=204)

    @routes.handles("revoke_subscription_permission")
    async def revoke_subscription_permission(
        request: Request,
        admin: CallerAdmin,
        tenant: Tenant,
        namespace: Namespace,
        subscription: Subscription,
        role: Role,
    ) -> Response:
        await context_of(request).run(
            admin.namespaces.revoke_permission_on_subscription,
            _name(tenant, namespace),
            unquote(subscription),
            unquote(role),
        )
        return Response(status_code=204)

    @routes.handles("get_permissions")
    async def get_permissions(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        return _json(await context_of(request).run(admin.namespaces.permissions, _name(tenant, namespace)))

    @routes.handles(
        "grant_permission",
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": 'actions, e.g. ["produce", "consume"]',
                "content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}},
            }
        },
    )
    async def grant_permission(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace, role: Role
    ) -> Response:
        actions = parse_actions_body(await request.body())
        await context_of(request).run(
            admin.namespaces.grant_permission, _name(tenant, namespace), unquote(role), actions
        )
        return Response(status_code=204)

    @routes.handles("revoke_permission")
    async def revoke_permission(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace, role: Role
    ) -> Response:
        await context_of(request).run(admin.namespaces.revoke_permission, _name(tenant, namespace), unquote(role))
        return Response(status_code=204)

    @routes.handles("namespace_topics", response_model=list[str])
    async def namespace_topics(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        name = _name(tenant, namespace)
        admin.check_namespace(NamespaceOperation.GET_TOPICS, name)  # Pulsar's rule: the topic list is not public
        return _json(await context_of(request).run(admin.broker.list_topics, name, include_partitions=True))

    @routes.handles("get_deduplication")
    async def get_deduplication(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        _tenant_admin(admin, tenant, "read the deduplication policy")
        return _json(await context_of(request).run(admin.broker.namespace_deduplication, _name(tenant, namespace)))

    @routes.handles("set_deduplication")
    async def set_deduplication(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        _tenant_admin(admin, tenant)
        body = (await request.body()).strip().lower()
        if body not in (b"true", b"false"):
            raise InvalidRequestError(f"the body must be true or false, got {body[:20]!r}")
        await context_of(request).run(
            admin.broker.set_namespace_deduplication, _name(tenant, namespace), body == b"true"
        )
        return Response(status_code=204)

    @routes.handles("remove_deduplication")
    async def remove_deduplication(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        _tenant_admin(admin, tenant)
        await context_of(request).run(admin.broker.set_namespace_deduplication, _name(tenant, namespace), None)
        return Response(status_code=204)

    @routes.handles("get_retention", response_model=RetentionPoliciesData | None)
    async def get_retention(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        policies = await context_of(request).run(admin.namespaces.get_retention, _name(tenant, namespace))
        return _json(None if policies is None else policies.to_json())

    @routes.handles(
        "set_retention",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RetentionPoliciesData"}}},
            }
        },
    )
    async def set_retention(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        policies = RetentionPoliciesData.parse_body(await request.body())
        await context_of(request).run(admin.namespaces.set_retention, _name(tenant, namespace), policies)
        return Response(status_code=204)

    @routes.handles("remove_retention")
    async def remove_retention(request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace) -> Response:
        await context_of(request).run(admin.namespaces.remove_retention, _name(tenant, namespace))
        return Response(status_code=204)

    @routes.handles("get_compaction_threshold")
    async def get_compaction_threshold(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        return _json(await context_of(request).run(admin.namespaces.get_compaction_threshold, _name(tenant, namespace)))

    @routes.handles(
        "set_compaction_threshold",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "integer", "format": "int64"}}},
            }
        },
    )
    async def set_compaction_threshold(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        threshold = parse_compaction_threshold_body(await request.body())
        await context_of(request).run(admin.namespaces.set_compaction_threshold, _name(tenant, namespace), threshold)
        return Response(status_code=204)

    @routes.handles("remove_compaction_threshold")
    async def remove_compaction_threshold(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        await context_of(request).run(admin.namespaces.remove_compaction_threshold, _name(tenant, namespace))
        return Response(status_code=204)

    @routes.handles("get_schema_compatibility_strategy")
    async def get_schema_compatibility_strategy(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        strategy = await context_of(request).run(
            admin.namespaces.get_schema_compatibility_strategy, _name(tenant, namespace)
        )
        return _json(strategy.value)

    @routes.handles("set_schema_compatibility_strategy")
    async def set_schema_compatibility_strategy(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        strategy = parse_strategy_body(await request.body())
        await context_of(request).run(
            admin.namespaces.set_schema_compatibility_strategy, _name(tenant, namespace), strategy
        )
        return Response(status_code=204)

    @routes.handles("get_schema_auto_update")
    async def get_schema_auto_update(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        return _json(
            await context_of(request).run(
                admin.namespaces.get_schema_auto_update_compatibility_strategy, _name(tenant, namespace)
            )
        )

    @routes.handles("set_schema_auto_update")
    async def set_schema_auto_update(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        policy = parse_enum_body(await request.body(), "schema auto-update compatibility strategy")
        await context_of(request).run(
            admin.namespaces.set_schema_auto_update_compatibility_strategy, _name(tenant, namespace), policy
        )
        return Response(status_code=204)

    @routes.handles("get_allow_auto_update")
    async def get_allow_auto_update(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        return _json(
            await context_of(request).run(admin.namespaces.get_is_allow_auto_update_schema, _name(tenant, namespace))
        )

    @routes.handles("set_allow_auto_update")
    async def set_allow_auto_update(
        request: Request, admin: CallerAdmin, tenant: Tenant, namespace: Namespace
    ) -> Response:
        body = (await request.body()).strip().lower()
        if body not in (b"true", b"false"):
            raise InvalidRequestError(f"the body must be true or false, got {body[:20]!r}")
        await context_of(request).run(
            admin.namespaces.set_is_allow_auto_update_schema, _name(tenant, namespace), body == b"true"
        )
        return Response(status_code=204)

    router = APIRouter(prefix=prefix, tags=[tag] if tag else None)
    routes.add_to(router)
    return router
