"""One request to a REST app in process (``httpx.ASGITransport``), for the tests of its routes."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


def asgi_request(app: Any, method: str, path: str, token: str | None = None, body: Any = None) -> httpx.Response:
    """``method path`` on ``app``, with ``body`` as JSON and ``token`` as a bearer token if given."""

    async def send() -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://mledger") as client:
            return await client.request(method, path, headers=headers, json=body)

    return asyncio.run(send())
