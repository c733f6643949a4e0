"""The ASGI middleware in front of the admin app: raw-path routing, request limits, the access
log line, the in-flight count and a JSON answer for anything that escaped the app.

Theory of operation
-------------------
For each HTTP request, :class:`AdminMiddleware`

1. refuses a request target (path and query) over ``max_url_bytes`` with 414 (uvicorn with
   :class:`~mledger.rest._protocol.AdminHttpProtocol` refuses it earlier still, while it arrives);
2. routes on the *raw* path: ``scope["path"]`` becomes the undecoded path, so that ``%2F`` stays
   inside a topic segment and ``+`` can be read as a space, as Pulsar's JAX-RS resources read
   their ``@Encoded`` topic and subscription parameters (the route handlers decode each segment,
   see :mod:`mledger.rest._topics`); a trailing ``/`` is dropped;
3. enforces the body limit ``max_body_bytes``: a declared ``Content-Length`` over it is answered
   413 at once, before any of the body is read; a ``Content-Length`` that is not a number is 400;
   a body without a length (chunked) is counted as it streams and answered 413 as soon as it
   passes the limit. After a 413 the connection is closed, except for a declared length up to
   ``drain_limit``: then the server reads the rest of the body and throws it away (uvicorn
   does, once the answer is sent), so a client that writes its whole body before reading gets
   the 413 instead of a reset connection, and may reuse the connection;
4. answers 500 ``{"reason": "Internal server error: ..."}`` for an exception nothing handled
   (logged with its traceback), instead of a plain-text page;
5. logs one INFO line per request on ``mledger.rest``: client host:port, method, target, status,
   time.

It holds no lock: the counters are only touched from the event loop's thread.

:func:`caller_role` is how the app learns who calls: the first route or check that needs the
role resolves it (:meth:`~mledger.rest.RoleResolver.check`) and awaits it without blocking
the loop (a password is verified on the authenticator's pool meanwhile); the outcome is kept in
the request's scope (:data:`CALLER_ROLE`), so a request is authenticated at most once, and only
when something needs its role, as before. :class:`AuthenticatedPaths`, inside
:class:`AdminMiddleware`, answers 401 (or 429) for the paths that need a role whatever the route
(``/metrics`` with ``authenticate_metrics_endpoint``, the API documents with
``authenticate_docs_endpoint``) before the route runs.

:class:`RequestLimit`, outside :class:`AdminMiddleware` (the admin server adds it), is Pulsar's
``maxConcurrentHttpRequests``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.datastructures import Headers

from ..core import UnauthenticatedError
from ._auth import RoleResolver, TooManyRequestsError, peer_subject_of
from ._protocol import error_body

__all__ = [
    "CALLER_ROLE",
    "AdminMiddleware",
    "AuthenticatedPaths",
    "BodyTooLargeError",
    "InFlight",
    "RequestLimit",
    "caller_role",
    "error_headers",
]

log = logging.getLogger("mledger.rest")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOGGED_TARGET_CHARS = 300

CALLER_ROLE = "mledger.caller_role"
"""The scope key holding a request's authentication once :func:`caller_role` started it: a future
of the caller's role, or of the 401 / 429 error (:meth:`~mledger.rest.RoleResolver.check`)."""


async def caller_role(roles: RoleResolver, scope: Scope) -> str:
    """The role of the caller of the request of ``scope`` (authorization on), resolved once per
    request: from its headers, TLS certificate and client address, awaited without blocking the
    loop. Raises :class:`~mledger.core.UnauthenticatedError` (401) or
    :class:`~mledger.rest._auth.TooManyRequestsError` (429)."""
    checked = scope.get(CALLER_ROLE)
    if checked is None:
        client = scope.get("client")
        checked = roles.check(Headers(scope=scope), peer_subject_of(scope), client[0] if client else None)
        scope[CALLER_ROLE] = checked
    if not checked.done():  # a password, on the authenticator's pool
        waited = asyncio.wrap_future(checked)
        # the refusal is raised by checked.result() below; reading it here too keeps asyncio from
        # logging "Future exception was never retrieved" (also if this request is cancelled)
        waited.add_done_callback(lambda done: done.cancelled() or done.exception())
        await asyncio.wait([waited])
    role: str = checked.result()
    return role


def error_headers(exc: Exception) -> dict[str, str]:
    """The headers an error's answer carries: ``Retry-After`` for a 429."""
    if isinstance(exc, TooManyRequestsError):
        return {"Retry-After": str(exc.retry_after_seconds)}
    return {}


class BodyTooLargeError(Exception):
    """A streamed body passed the limit (raised from ``receive``; the middleware answers 413)."""


class InFlight:
    """Requests being answered now (``count``), shared by the middleware and its server."""

    def __init__(self) -> None:
        self.count = 0


class AdminMiddleware:
    """See the module docstring; ``in_flight.count`` counts the requests being answered."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        max_url_bytes: int,
        drain_limit: int,
        in_flight: InFlight,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_url_bytes = max_url_bytes
        self.drain_limit = drain_limit
        self.in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
        query: bytes = scope.get("query_string") or b""
        status = 0
        response_started = False

        async def send_tracked(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
            await send(message)

        async def refuse(code: int, reason: str, close: bool) -> None:
            headers = [(b"content-type", b"application/json")]
            if close:
                headers.append((b"connection", b"close"))
            body = error_body(reason)
            headers.append((b"content-length", str(len(body)).encode("ascii")))
            await send_tracked({"type": "http.response.start", "status": code, "headers": headers})
            await send_tracked({"type": "http.response.body", "body": body})

        self.in_flight.count += 1
        try:
            if len(raw_path) + len(query) > self.max_url_bytes:
                await refuse(414, f"URI Too Long: the request target exceeds {self.max_url_bytes} bytes", True)
                return
            declared = _content_length(scope)
            if declared == "invalid":
                await refuse(400, "Invalid Content-Length header: expected a number of bytes", True)
                return
            if isinstance(declared, int) and declared > self.max_body_bytes:
                await refuse(
                    413,
                    f"Request body too large: {declared} bytes (limit {self.max_body_bytes})",
                    close=declared > self.drain_limit,
                )
                return
            path = raw_path.decode("latin-1")
            if len(path) > 1 and path.endswith("/"):
                path = path.rstrip("/") or "/"
            inner = dict(scope)
            inner["path"] = path
            received = 0

            async def receive_counted() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.max_body_bytes:
                        raise BodyTooLargeError
                return message

            try:
                await self.app(inner, receive_counted, send_tracked)
            except BodyTooLargeError:
                if response_started:
                    raise
                await refuse(413, f"Request body too large: over {self.max_body_bytes} bytes", True)
            except Exception as e:
                log.exception("%s %s failed", scope.get("method"), _target(raw_path, query))
                if response_started:
                    raise  # half an answer is out: the server closes the connection
                await refuse(500, f"Internal server error: {type(e).__name__}: {e}", False)
        finally:
            self.in_flight.count -= 1
            if log.isEnabledFor(logging.INFO):
                client = scope.get("client")
                log.info(
                    '%s "%s %s" %d %.1fms',
                    f"{client[0]}:{client[1]}" if client else "-",
                    scope.get("method"),
                    _target(raw_path, query),
                    status,
                    (time.perf_counter() - started) * 1000,
                )


class RequestLimit:
    """Pulsar's ``maxConcurrentHttpRequests`` (Jetty's ``QoSFilter``, ``maxRequests``): at most
    ``limit`` HTTP requests are answered at once; one more waits for a slot, up to ``wait``
    seconds (the filter suspends it, 30 s by default), then gets 503 ``{"reason": ...}``.

    uvicorn's own ``limit_concurrency`` does not fit: it answers 503 whenever the *connections*
    reach the limit too, so that many idle connections would refuse every request. Requests
    wait in arrival order; the semaphore is made on the serving loop's first request."""

    def __init__(self, app: ASGIApp, limit: int, wait: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.wait = wait
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        slots = self._slots
        try:
            if slots.locked():
                await asyncio.wait_for(slots.acquire(), self.wait)
            else:
                await slots.acquire()
        except TimeoutError:
            body = error_body(
                f"Service Unavailable: {self.limit} requests in progress (maxConcurrentHttpRequests)"
                f" and none ended within {self.wait:g} s"
            )
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii"))]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            slots.release()


class AuthenticatedPaths:
    """Requests for one of ``paths`` (exact, after :class:`AdminMiddleware` dropped a trailing
    ``/``) without a role ``roles`` accepts are answered 401 ``{"reason": "Authentication
    required"}`` (429 with ``Retry-After`` for a throttled password check); any role will do
    (authentication, not authorization, as Pulsar's ``authenticateMetricsEndpoint``)."""

    def __init__(self, app: ASGIApp, paths: frozenset[str], roles: RoleResolver) -> None:
        self.app = app
        self.paths = paths
        self.roles = roles

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            try:
                await caller_role(self.roles, scope)
            except UnauthenticatedError as e:
                body = error_body(str(e))
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                headers += [(name.lower().encode(), value.encode()) for name, value in error_headers(e).items()]
                await send({"type": "http.response.start", "status": e.http_status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _content_length(scope: Scope) -> int | str | None:
    """The declared body length: an int, None when absent, ``"invalid"`` when not a number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.strip()
            if not text.isdigit() or len(text) > 19:
                return "invalid" if not text.isdigit() else 1 << 63
            return int(text)
    return None


def _target(raw_path: bytes, query: bytes) -> str:
    text = raw_path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
    return text if len(text) <= _LOGGED_TARGET_CHARS else text[:_LOGGED_TARGET_CHARS] + "...(truncated)"
