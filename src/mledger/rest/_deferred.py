"""``DeferredApp``: an ASGI app that answers the readiness route at once and builds the admin app
on the first other request.

Importing FastAPI and pydantic and building the admin app (its routes, their models and
dependencies) takes longer than starting the broker and the protocol server together, and holds
more memory than the broker does while idle. ``mledger standalone`` serves this wrapper instead:
``GET /admin/v2/clusters``, the check container tools poll, is answered as soon as the port
listens (the same ``["<cluster>"]`` the app's route answers, which needs no credentials either);
the first other request builds the app on a worker thread (once, whichever server asks first),
and from then on every request, that route included, goes to the app.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["READINESS_PATH", "DeferredApp"]

READINESS_PATH = "/admin/v2/clusters"
"""The route answered before the app is built (Pulsar's clusters list: the readiness check)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class DeferredApp:
    """An ASGI app built by ``build`` on first need (see the module docstring).

    ``clusters`` answers the readiness route until then (a JSON list of names, read on a worker
    thread: the broker's ``clusters.list``, what the app's route reads). ``build`` runs once, on a worker thread; an exception
    it raises fails that request (a 500 from the server) and the next request tries again.
    """

    def __init__(self, build: Callable[[], Any], clusters: Callable[[], list[str]]) -> None:
        self._build = build
        self._clusters = clusters
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def built(self) -> Any:
        """The app once built, else None."""
        return self._app

    def app(self) -> Any:
        """The app, built now if it was not (blocking: call it off the event loop)."""
        with self._lock:
            if self._app is None:
                self._app = self._build()
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            if _is_readiness(scope):
                await self._answer_readiness(send)
                return
            app = await asyncio.to_thread(self.app)
        await app(scope, receive, send)

    async def _answer_readiness(self, send: Send) -> None:
        body = json.dumps(await asyncio.to_thread(self._clusters)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _is_readiness(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] == "GET"
        and scope["path"] == READINESS_PATH
        and not scope.get("query_string")
    )
