"""The poll's per-topic call, a v2 ``internalStats``, served by a plain Starlette route ahead of
the documented FastAPI one (:func:`mledger.rest._topics.internal_stats_route`, issue 35): every
answer (status, headers that matter, body) is the documented route's, whatever the caller, the
names or the method."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from mledger.admin import Admin, Authorization
from mledger.broker import Broker, ManualClock, SubscriptionType
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.rest import RoleResolver, create_app

pytestmark = pytest.mark.timeout(60)

BASE = "/admin/v2/persistent/public/default"
REQUESTS = [
    ("GET", f"{BASE}/orders/internalStats", "root"),  # a topic with cursors and acks
    ("GET", f"{BASE}/orders/internalStats?authoritative=true", "root"),  # a flag no route names
    ("GET", f"{BASE}/orders/internalStats", None),  # nobody: 401
    ("GET", f"{BASE}/orders/internalStats", "app"),  # a role that may not: 403
    ("GET", f"{BASE}/ghost/internalStats", "root"),  # 404
    ("GET", f"{BASE}/events/internalStats", "root"),  # a partitioned topic: 405
    ("GET", f"{BASE}/events-partition-1/internalStats", "root"),
    ("GET", f"{BASE}/%2E%2E/internalStats", "root"),  # a name Pulsar refuses: 400
    ("GET", "/admin/v2/persistent/public/no%01ns/orders/internalStats", "root"),
    ("GET", f"{BASE}/with+space%2Fslash/internalStats", "root"),  # "/" in a name: 400
    ("HEAD", f"{BASE}/orders/internalStats", "root"),  # FastAPI's GET routes take no HEAD: 405
    ("POST", f"{BASE}/orders/internalStats", "root"),
]


def _app() -> tuple[FastAPI, Broker]:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    auth = Authorization({"app": {}}, super_user_roles=["root"])
    topic = "persistent://public/default/orders"
    broker.create_topic(topic)
    broker.create_topic("persistent://public/default/events", partitions=2)
    subscription = broker.subscribe(topic, "billing", SubscriptionType.SHARED)
    consumer = subscription.add_consumer("c", permits=100)
    producer = broker.create_producer(topic)
    for i in range(6):
        producer.send(f"m{i}".encode())
    for i, message in enumerate(consumer.receive(6)):
        if i % 2:
            consumer.acknowledge(message.message_id)
    return create_app(Admin(broker, authorization=auth), roles=RoleResolver(trust_role_header=True)), broker


def test_the_poll_route_answers_what_the_documented_route_answers() -> None:
    app, broker = _app()
    (lean,) = [r for r in app.router.routes if not isinstance(r, APIRoute) and r.path.endswith("/internalStats")]

    async def answers(app: FastAPI) -> list[tuple[int, str | None, bytes]]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            out = []
            for method, path, role in REQUESTS:
                headers = {"X-Mledger-Role": role} if role else {}
                r = await client.request(method, path, headers=headers)
                out.append((r.status_code, r.headers.get("content-type"), r.content))
            return out

    try:
        got = asyncio.run(answers(app))
        app.router.routes.remove(lean)  # the documented route only
        expected = asyncio.run(answers(app))
    finally:
        broker.close()
    assert [status for status, _, _ in got] == [200, 200, 401, 403, 404, 405, 200, 400, 400, 400, 405, 405]
    assert b'"individuallyDeletedMessages":"[(' in got[0][2]
    assert got == expected
