"""Pulsar's ``NonPersistentTopics`` REST resources (v2), mapped onto ``Admin.non_persistent``.

Routes after ``/admin/v2/non-persistent/{tenant}/{namespace}``:

=======  ============================  ==========================  ===
method   path                          admin call                  ok
=======  ============================  ==========================  ===
GET      (none)                        list_topics                 200
GET      ``partitioned``               list_partitioned_topics     200
PUT      ``{topic}``                   create_topic                204
DELETE   ``{topic}`` (``?force``)      delete_topic (unload)       204
GET      ``{topic}/partitions``        partitioned_topic_metadata  200
PUT      ``{topic}/partitions`` (N)    create_topic(partitions=N)  204
DELETE   ``{topic}/partitions``        delete_partitioned_topic    204
GET      ``{topic}/stats``             stats                       200
=======  ============================  ==========================  ===

They are added before the persistent routes' non-persistent twins, which answer 405 for
everything else (``Operation not allowed on non-persistent topic``), as v1 does for every
non-persistent path. Checks run in the order of the persistent routes: authentication, the
names (400), then one admin call on a worker thread.
"""

# No "from __future__ import annotations": FastAPI reads the handlers' annotations.
import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from ..admin import Admin
from ..admin._requests import partitions_from_body
from ..broker._names import NON_PERSISTENT, TopicName
from ._context import context_of
from ._topics import decode_name, decode_segment

__all__ = ["non_persistent_router"]

_JSON = "application/json"

Tenant = Annotated[str, Path(description="tenant")]
Namespace = Annotated[str, Path(description="namespace")]
TopicSegment = Annotated[str, Path(description="the topic's local name, URL-encoded (Java URLEncoder: space is +)")]


async def _admin(request: Request) -> Admin:
    return await context_of(request).admin_for(request.scope)


def _namespace(tenant: str, namespace: str) -> str:
    return f"{decode_segment(tenant, 'tenant')}/{decode_segment(namespace, 'namespace')}"


def _topic(tenant: str, namespace: str, topic: str) -> str:
    local = decode_name(topic, "topic name")
    return str(TopicName.parse(f"{NON_PERSISTENT}://{_namespace(tenant, namespace)}/{local}", any_domain=True))


async def _on_topic(
    request: Request, operation: str, tenant: str, namespace: str, topic: str, *args: Any, **kwargs: Any
) -> Any:
    """Run ``admin.non_persistent.<operation>(topic, ...)`` on the request's worker pool."""
    call = getattr((await _admin(request)).non_persistent, operation)
    return await context_of(request).run(call, _topic(tenant, namespace, topic), *args, **kwargs)


def _json(value: Any) -> Response:
    if hasattr(value, "model_dump_json"):
        return Response(value.model_dump_json(by_alias=True), media_type=_JSON)
    return Response(json.dumps(value, separators=(",", ":")), media_type=_JSON)


def non_persistent_router(prefix: str = "/admin/v2/non-persistent/{tenant}/{namespace}") -> APIRouter:
    """The non-persistent topic routes under ``prefix`` (see the module docstring); left out
    of the OpenAPI document, as the 405 routes they stand before."""
    router = APIRouter(prefix=prefix, include_in_schema=False)

    @router.get("", name="v2_non_persistent_list_topics")
    async def list_topics(request: Request, tenant: Tenant, namespace: Namespace) -> Response:
        admin = await _admin(request)
        ns = _namespace(tenant, namespace)
        return _json(await context_of(request).run(admin.non_persistent.list_topics, ns))

    @router.get("/partitioned", name="v2_non_persistent_list_partitioned_topics")
    async def list_partitioned(request: Request, tenant: Tenant, namespace: Namespace) -> Response:
        admin = await _admin(request)
        ns = _namespace(tenant, namespace)
        return _json(await context_of(request).run(admin.non_persistent.list_partitioned_topics, ns))

    @router.put("/{topic}", name="v2_non_persistent_create_topic", status_code=204)
    async def create_topic(request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment) -> Response:
        await _on_topic(request, "create_topic", tenant, namespace, topic)
        return Response(status_code=204)

    @router.delete("/{topic}", name="v2_non_persistent_delete_topic", status_code=204)
    async def delete_topic(
        request: Request,
        tenant: Tenant,
        namespace: Namespace,
        topic: TopicSegment,
        force: Annotated[bool, Query(description="even with connected producers or consumers")] = False,
    ) -> Response:
        await _on_topic(request, "delete_topic", tenant, namespace, topic, force=force)
        return Response(status_code=204)

    @router.get("/{topic}/partitions", name="v2_non_persistent_get_partitioned_metadata")
    async def get_partitions(request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment) -> Response:
        return _json(await _on_topic(request, "partitioned_topic_metadata", tenant, namespace, topic))

    @router.put("/{topic}/partitions", name="v2_non_persistent_create_partitioned_topic", status_code=204)
    async def create_partitioned(
        request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment
    ) -> Response:
        partitions = partitions_from_body(await request.body())
        await _on_topic(request, "create_topic", tenant, namespace, topic, partitions=partitions)
        return Response(status_code=204)

    @router.delete("/{topic}/partitions", name="v2_non_persistent_delete_partitioned_topic", status_code=204)
    async def delete_partitioned(
        request: Request,
        tenant: Tenant,
        namespace: Namespace,
        topic: TopicSegment,
        force: Annotated[bool, Query(description="even with connected producers or consumers")] = False,
    ) -> Response:
        await _on_topic(request, "delete_partitioned_topic", tenant, namespace, topic, force=force)
        return Response(status_code=204)

    @router.get("/{topic}/stats", name="v2_non_persistent_get_stats")
    async def get_stats(request: Request, tenant: Tenant, namespace: Namespace, topic: TopicSegment) -> Response:
        stats = await _on_topic(request, "stats", tenant, namespace, topic)
        return Response(stats.to_json(indent=None), media_type=_JSON)

    return router
