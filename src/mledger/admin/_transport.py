"""How the remote admin client talks HTTP, blocking or with asyncio (httpx, the ``client`` extra).

One call's rules live here once, for :class:`~mledger.admin.RemoteAdmin` (blocking, the CLI's)
and :class:`AsyncRemoteAdmin` (asyncio, ``mledger capture``'s concurrent polls):

* **deadline**: a call ends within its total deadline (the client's ``deadline``, or the call's
  own if sooner), however slowly the server answers: the body is streamed and the clock
  checked after each piece, and no wait (connect, read, write) is given more than the time
  left when the call began, so a blocking call ends within twice its deadline at worst; an
  asyncio call is also cancelled at its deadline, so it ends within it;
* **size cap**: ``max_response_bytes`` caps what a call reads: a larger body is refused,
  unread, by its ``Content-Length`` or once the cap is passed, so a huge answer costs no more
  memory than the cap;
* **errors**: an error status becomes the :class:`~mledger.core.MLedgerError`
  subclass of that status carrying the server's ``{"reason": ...}`` (:func:`error_for`); a
  server that cannot be reached, a call past its deadline and an answer over the cap are
  :class:`AdminConnectionError` (:class:`AdminResponseTooLargeError` for the cap).

:class:`AsyncRemoteAdmin` (made by :meth:`RemoteAdmin.asynchronous`, same URL, credentials
and limits) adds what concurrency needs: at most ``max_concurrency_per_host`` calls in flight
to each broker (each ``scheme://host:port``: the admin URL's, and each broker a redirect leads
to), over keep-alive connections. A 307 or 308 (Pulsar's redirect to the broker that owns a
topic) is followed, with the same credentials, up to :data:`MAX_REDIRECTS` times within the
call's deadline; a redirect that would leave ``https`` is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ..core import InvalidRequestError, MLedgerError, error_class_for_status

try:
    import httpx
except ImportError:  # pragma: no cover - depends on the installation
    httpx = None  # type: ignore[assignment]

__all__ = [
    "MAX_REDIRECTS",
    "AdminConnectionError",
    "AdminResponseTooLargeError",
    "AsyncRemoteAdmin",
    "RemoteAdminError",
    "TransportOptions",
    "error_for",
]

MAX_REDIRECTS = 3
"""Redirects one asyncio call follows (Pulsar redirects once, to the topic's owner)."""
MAX_HOSTS = 1024
"""Brokers an :class:`AsyncRemoteAdmin` keeps a concurrency bound for; a redirect to one more is refused."""

Answer = tuple[int, Mapping[str, str], bytes]
"""A call's status, headers and body."""


class RemoteAdminError(MLedgerError):
    """An error status with no dedicated class (409, 414, 500, ...); ``http_status`` is the server's."""

    def __init__(self, message: str, http_status: int) -> None:
        super().__init__(message)
        self.http_status = http_status


class AdminConnectionError(MLedgerError):
    """The server could not be reached in time, or its answer was not HTTP (exit status 1)."""

    http_status = 503


class AdminResponseTooLargeError(AdminConnectionError):
    """An answer was larger than the client's ``max_response_bytes`` (it was not read whole)."""


def error_for(status: int, reason: str) -> MLedgerError:
    """The exception for an error response: the class of ``status`` carrying ``reason``
    (:func:`~mledger.core.error_class_for_status`, the table the REST app's statuses
    come from)."""
    cls = error_class_for_status(status)
    return cls(reason) if cls is not None else RemoteAdminError(reason, status)


@dataclass(frozen=True)
class TransportOptions:
    """A remote admin's URL, headers (credentials), limits and TLS, as
    :class:`~mledger.admin.RemoteAdmin` checked them: shared by it and the asyncio client it
    makes (:meth:`RemoteAdmin.asynchronous`)."""

    url: str
    headers: Mapping[str, str]
    timeout: float
    connect_timeout: float
    deadline: float | None
    max_response_bytes: int | None
    max_connections: int
    verify: ssl.SSLContext | bool
    basic: tuple[str, str] | None

    def client_arguments(self) -> dict[str, Any]:
        """The arguments of ``httpx.Client`` and ``httpx.AsyncClient`` but ``limits``."""
        return {
            "base_url": self.url,
            "headers": dict(self.headers),
            "timeout": httpx.Timeout(self.timeout, connect=self.connect_timeout),
            "verify": self.verify,
            "auth": self.basic,  # httpx sends it as HTTP Basic, as Pulsar's AuthenticationBasic does
        }


class Call:
    """One call's limits and body: made when the call starts, given the answer's headers
    (:meth:`begin`) and each piece of its body (:meth:`take`), then :meth:`outcome`. Raises
    :class:`AdminResponseTooLargeError` past the cap and :class:`AdminConnectionError` past
    the deadline; :meth:`errors` maps httpx's exceptions the same way."""

    def __init__(self, options: TransportOptions, path: str, deadline: float | None) -> None:
        self.options = options
        self.path = path
        limits = [t for t in (options.deadline, deadline) if t is not None]
        self.total = min(limits) if limits else None
        self.ends = None if self.total is None else time.monotonic() + self.total
        self.wait = options.timeout if self.total is None else min(options.timeout, self.total)
        self.timeout = httpx.Timeout(self.wait, connect=min(options.connect_timeout, self.wait))
        self._pieces: list[bytes] = []
        self._size = 0

    def left(self) -> float | None:
        """Seconds until the deadline (None: no deadline); 0 once past it."""
        return None if self.ends is None else max(self.ends - time.monotonic(), 0.0)

    def late(self) -> AdminConnectionError:
        return AdminConnectionError(
            f"the admin server at {self.options.url} did not answer {self.path} within {self.total:.3g} s"
        )

    def begin(self, response: Any) -> None:
        """Refuse, unread, an answer whose ``Content-Length`` is over the cap."""
        cap = self.options.max_response_bytes
        declared = response.headers.get("content-length", "")
        if cap is not None and declared.isdigit() and int(declared) > cap:
            raise AdminResponseTooLargeError(
                f"{self.options.url}{self.path} answered {int(declared)} bytes, more than the {cap} allowed"
            )

    def take(self, piece: bytes) -> None:
        """One more piece of the body, within the cap and the deadline."""
        self._size += len(piece)
        cap = self.options.max_response_bytes
        if cap is not None and self._size > cap:
            raise AdminResponseTooLargeError(
                f"{self.options.url}{self.path} answered more than the {cap} bytes allowed"
            )
        if self.ends is not None and time.monotonic() > self.ends:
            raise self.late()
        self._pieces.append(piece)

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """httpx's exceptions (and an asyncio timeout) as :class:`AdminConnectionError`."""
        try:
            yield
        except httpx.TimeoutException as e:
            raise AdminConnectionError(
                f"the admin server at {self.options.url} did not answer within {self.wait:g} s ({type(e).__name__})"
            ) from None
        except httpx.HTTPError as e:  # connect errors, protocol errors, a closed client
            raise AdminConnectionError(f"cannot reach the admin server at {self.options.url}: {e}") from None
        except TimeoutError:  # asyncio.timeout: the whole call passed its deadline
            raise self.late() from None

    def outcome(self, response: Any) -> Answer:
        """(status, headers, body) of a 2xx answer; the mapped error otherwise, carrying the
        response headers as ``response_headers``."""
        content = b"".join(self._pieces)
        if response.is_success:
            return response.status_code, response.headers, content
        error = error_for(response.status_code, _reason(response.status_code, content))
        error.response_headers = response.headers  # type: ignore[attr-defined]
        raise error


def decode_json(options: TransportOptions, path: str, payload: bytes) -> Any:
    """The JSON of a ``get_json`` answer (``AdminConnectionError`` if it is not JSON)."""
    try:
        return json.loads(payload)
    except ValueError:
        raise AdminConnectionError(f"{options.url}{path} did not answer JSON: {payload[:80]!r}") from None


def content_headers(body: bytes | None) -> dict[str, str] | None:
    return {"Content-Type": "application/json"} if body is not None else None


class AsyncRemoteAdmin:
    """The asyncio twin of :class:`~mledger.admin.RemoteAdmin`'s transport, made by
    :meth:`RemoteAdmin.asynchronous`: :meth:`call` and :meth:`get_json` with the same
    deadline, size cap and errors, at most ``max_concurrency_per_host`` calls in flight per
    broker (see the module docstring).

    Use it on one event loop (its connections belong to the loop that first uses them);
    :meth:`aclose` (or ``async with``) closes them.
    """

    def __init__(self, options: TransportOptions, max_concurrency_per_host: int = 8) -> None:
        if isinstance(max_concurrency_per_host, bool) or not (
            isinstance(max_concurrency_per_host, int) and max_concurrency_per_host >= 1
        ):
            raise InvalidRequestError(f"max_concurrency_per_host must be >= 1, got {max_concurrency_per_host!r}")
        self.options = options
        self.url = options.url
        self.max_concurrency_per_host = max_concurrency_per_host
        keep = max(options.max_connections, max_concurrency_per_host)
        self._client = httpx.AsyncClient(
            **options.client_arguments(),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=keep),
        )
        self._scheme = httpx.URL(options.url).scheme
        self._slots: dict[str, asyncio.Semaphore] = {}

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        deadline: float | None = None,
    ) -> Answer:
        """One request, as :meth:`RemoteAdmin.call`; it ends within its deadline. Waiting for
        a free slot of the broker does not count against the deadline."""
        call = Call(self.options, path, deadline)
        target = httpx.URL(self.url + path)  # absolute: parsed once
        params = query
        for hop in range(MAX_REDIRECTS + 1):
            async with self._slot(target):
                with call.errors():
                    async with asyncio.timeout(call.left()):
                        location, response = await self._send(call, method, target, params, body)
            if location is None:
                return call.outcome(response)
            if hop == MAX_REDIRECTS:
                raise AdminConnectionError(f"{self.url}{path}: more than {MAX_REDIRECTS} redirects")
            if location.scheme != self._scheme:
                raise AdminConnectionError(f"{self.url}{path}: refused a redirect to {location} (another scheme)")
            target, params = location, None  # the location carries the query
        raise AssertionError("unreachable")

    async def _send(
        self, call: Call, method: str, target: httpx.URL, params: Mapping[str, str] | None, body: bytes | None
    ) -> tuple[httpx.URL | None, httpx.Response]:
        """Send one hop: the redirect's location, or None with the body read into ``call``."""
        async with self._client.stream(
            method, target, params=params, content=body, headers=content_headers(body), timeout=call.timeout
        ) as response:
            location = response.headers.get("location")
            if response.status_code in (307, 308) and location:
                return response.url.join(location), response
            call.begin(response)
            async for piece in response.aiter_bytes():
                call.take(piece)
            return None, response

    async def get_json(
        self, path: str, query: Mapping[str, str] | None = None, *, deadline: float | None = None
    ) -> Any:
        """GET ``path`` and decode its JSON, as :meth:`RemoteAdmin.get_json`."""
        _, _, payload = await self.call("GET", path, query, deadline=deadline)
        return decode_json(self.options, path, payload)

    def _slot(self, url: httpx.URL) -> asyncio.Semaphore:
        """The bound of ``url``'s broker (``scheme://host:port``)."""
        host = f"{url.scheme}://{url.host}:{url.port}"
        slot = self._slots.get(host)
        if slot is None:
            if len(self._slots) >= MAX_HOSTS:
                raise AdminConnectionError(f"{self.url}: refused a redirect to {host}: {MAX_HOSTS} brokers already")
            slot = self._slots[host] = asyncio.Semaphore(self.max_concurrency_per_host)
        return slot

    async def aclose(self) -> None:
        """Close the pooled connections. Idempotent."""
        await self._client.aclose()

    async def __aenter__(self) -> AsyncRemoteAdmin:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncRemoteAdmin({self.url!r})"


def tls_context(verify: str | bool, cert: tuple[str, str] | None) -> ssl.SSLContext | bool:
    """httpx's ``verify``: a context trusting ``verify`` (a CA file; True: the system's) and
    presenting ``cert`` (certificate file, key file) when given; False verifies nothing."""
    if cert is None and isinstance(verify, bool):
        return verify  # httpx's own default trust store, as before
    context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


def _reason(status: int, content: bytes) -> str:
    """The ``reason`` of Pulsar's error body, else the body's text, else ``HTTP <status>``."""
    try:
        value = json.loads(content)
        if isinstance(value, dict) and isinstance(value.get("reason"), str):
            return str(value["reason"])
    except ValueError:
        pass
    text = content.decode("utf-8", "replace").strip()
    return text or f"HTTP {status}"
