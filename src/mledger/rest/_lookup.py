"""Pulsar's HTTP topic lookup: ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``.

What a client given an ``http://`` service URL asks before connecting (the C++ and Python
clients' ``HTTPLookupService``; the partition count comes from the admin path
``GET .../partitions?checkAllowAutoCreation=true``). The answer is Pulsar's ``LookupData``::

    {"brokerUrl": "pulsar://127.0.0.1:6650", "brokerUrlTls": null,
     "httpUrl": "http://127.0.0.1:8080", "httpUrlTls": null, "nativeUrl": "pulsar://127.0.0.1:6650"}

every key present (the C++ client refuses an answer without ``brokerUrlTls``). One broker owns
every topic, so the answer is never a redirect and ``authoritative`` is accepted and ignored.
The broker addresses come from the protocol server (:meth:`ProtocolServer.lookup_urls
<mledger.protocol.ProtocolServer.lookup_urls>`), so the binary LOOKUP and this one agree: the
listener named by ``?listenerName=`` (or the ``X-Pulsar-ListenerName`` header, read when the
parameter is absent or empty), else the internal listener; ``httpUrl`` is that listener's
``http://`` address, else the address this request came to.

Errors, as Pulsar's ``TopicLookupBase``: 401/403 without LOOKUP permission, 404 ``Topic not
found <topic>`` for a topic that neither exists nor would be created on first use, 404 for a
namespace that does not exist, 500 ``the broker do not have <name> listener``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ..admin import ErrorBody
from ..protocol import ListenerUrls
from ._topics import topic_call

__all__ = ["LISTENER_NAME_HEADER", "LookupData", "LookupSource", "lookup_router"]

LISTENER_NAME_HEADER = "X-Pulsar-ListenerName"

LookupSource = Callable[[str | None], ListenerUrls]
"""The broker addresses for a listener name (None: the default), e.g. ``ProtocolServer.lookup_urls``."""


class LookupData(BaseModel):
    """Pulsar's ``LookupData`` as its REST API writes it (nulls included)."""

    model_config = ConfigDict(populate_by_name=True)

    broker_url: str | None = Field(alias="brokerUrl")
    broker_url_tls: str | None = Field(alias="brokerUrlTls")
    http_url: str | None = Field(alias="httpUrl")
    http_url_tls: str | None = Field(alias="httpUrlTls")
    native_url: str | None = Field(alias="nativeUrl", description="brokerUrl again (older clients read it)")


def lookup_router(source: LookupSource) -> APIRouter:
    """The lookup route, answering with the addresses ``source`` gives."""
    router = APIRouter(tags=["lookup"])

    @router.get(
        "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
        name="lookup_topic",
        operation_id="lookup_topic",
        summary="The broker serving a topic (what clients with an http:// service URL ask)",
        response_model=LookupData,
        responses={
            status: {"model": ErrorBody, "description": text}
            for status, text in (
                (400, "invalid name"),
                (401, "authentication required"),
                (403, "the role may not look the topic up"),
                (404, "topic or namespace not found"),
                (500, "no such listener"),
            )
        },
    )
    async def lookup_topic(
        request: Request,
        domain: str,
        tenant: str,
        namespace: str,
        topic: str,
        authoritative: Annotated[bool, Query(description="accepted: one broker owns every topic")] = False,
        listener_name: Annotated[str | None, Query(alias="listenerName", description="an advertised listener")] = None,
        listener_header: Annotated[str | None, Header(alias=LISTENER_NAME_HEADER)] = None,
    ) -> Response:
        call = await topic_call(request, domain, tenant, namespace, topic)
        await call.run(call.admin.topics.lookup, call.topic)
        name = listener_name if listener_name else listener_header
        urls = source(name or None)
        base = f"{request.url.scheme}://{request.url.netloc}"
        http_url = urls.broker_http_url or (base if request.url.scheme == "http" else None)
        https_url = urls.broker_https_url or (base if request.url.scheme == "https" else None)
        data = LookupData(
            broker_url=urls.broker_service_url,
            broker_url_tls=urls.broker_service_url_tls,
            http_url=http_url,
            http_url_tls=https_url,
            native_url=urls.broker_service_url,
        )
        return Response(data.model_dump_json(by_alias=True), media_type="application/json")

    return router
