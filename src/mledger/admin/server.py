"""The admin REST server: HTTP transport for :class:`~mledger.admin.routes.Router`, stdlib only.

Theory of operation
-------------------
:class:`AdminHttpServer` wraps :class:`http.server.ThreadingHTTPServer`: it reads a request
(method, raw path, query, headers, body), hands it to the router (which calls
:class:`~mledger.admin.Admin`; no admin logic lives here) and writes the router's response.
``mledger-admin serve`` (:func:`serve`) runs one over a data directory.

Concurrency
    One thread per connection; HTTP/1.0, so one request per connection. At most
    ``max_concurrency`` requests run admin code at a time (a semaphore; the others wait their
    turn, they are not refused). The broker is thread-safe: its topic cache, every topic,
    subscription and cursor have their own locks (see :mod:`mledger.broker.broker`), so
    concurrent requests on different subscriptions proceed in parallel and requests on one
    cursor are applied one at a time in some order. A reset that meets another running reset on
    the same cursor gets 409 (``ConcurrentResetError``) rather than waiting. The server adds no
    shared state of its own besides the in-flight counter.
Limits
    A body larger than ``max_body_bytes`` is refused with 413 (it is read and dropped first
    when it is at most 64 MiB, so the client gets the answer; larger ones close the
    connection). Bodies come with ``Content-Length`` or chunked. A connection idle for
    ``request_timeout`` seconds is dropped.
Shutdown
    :meth:`AdminHttpServer.shutdown` stops accepting, then waits up to ``drain_timeout`` seconds
    for requests in flight, so that the broker can be closed (persisting cursor state) after
    the last admin call returned. :func:`serve` does this on SIGINT and SIGTERM.
Logging
    One INFO line per request (``mledger.admin.server``): client, method, path, status, time.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError
from .api import Admin
from .auth import Authorization
from .http_auth import RoleResolver
from .routes import HttpRequest, HttpResponse, Router

__all__ = ["DEFAULT_BIND", "AdminHttpServer", "parse_bind", "serve"]

log = logging.getLogger(__name__)

DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_MAX_BODY_BYTES = 8 << 20
_DRAIN_LIMIT = 64 << 20
"""A refused body up to this size is read and dropped before the 413 goes out."""


class _TooLarge(Exception):
    pass


def _read_chunked(rfile: Any, limit: int) -> bytes:
    """A ``Transfer-Encoding: chunked`` body (RFC 9112 7.1), at most ``limit`` bytes.

    Raises ``ValueError`` for a malformed body and ``_TooLarge`` past the limit, after reading
    the rest of the body away (up to ``_DRAIN_LIMIT``) so that the client gets the answer.
    """
    out = bytearray()
    total = 0
    while True:
        line = rfile.readline(1026)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError(f"bad chunk size {size_text[:20]!r}") from None
        if size < 0:
            raise ValueError("negative chunk size")
        if size == 0:
            while rfile.readline(1026).strip():  # trailer fields, up to the blank line
                pass
            if total > limit:
                raise _TooLarge
            return bytes(out)
        total += size
        if total > _DRAIN_LIMIT:
            raise _TooLarge
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.readline(3).strip():
            raise ValueError("chunk shorter than its size")
        if total <= limit:
            out += chunk


def parse_bind(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6; port 0 picks a free one); ``ConfigError`` if bad."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host:
        raise ConfigError(f"invalid --bind {text!r}: expected host:port, e.g. {DEFAULT_BIND}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"invalid --bind {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"invalid --bind {text!r}: port {number} out of range")
    return host, number


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never blocks process exit; drain is done by AdminHttpServer
    owner: AdminHttpServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away or timed out: one line, not socketserver's traceback on stderr
        log.warning("connection from %s failed: %r", client_address[0], sys.exc_info()[1])


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, asks the owner's router, writes the answer."""

    server: _Server
    server_version = "mledger-admin"
    sys_version = ""

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _handle(self) -> None:
        owner = self.server.owner
        started = time.perf_counter()
        response = self._read_and_route(owner)
        self._write(response)
        log.info(
            '%s "%s %s" %d %.1fms', self.client_address[0], self.command, self.path,
            response.status, (time.perf_counter() - started) * 1000,
        )

    def _read_and_route(self, owner: AdminHttpServer) -> HttpResponse:
        body = self._read_body(owner.max_body_bytes)
        if isinstance(body, HttpResponse):
            return body
        target = urlsplit(self.path)
        request = HttpRequest(
            method=self.command,
            path=target.path,
            query=parse_qs(target.query, keep_blank_values=True),
            headers=self.headers,  # type: ignore[arg-type]  # email.message.Message: case-insensitive get
            body=body,
        )
        return owner._route(request)

    def _read_body(self, limit: int) -> bytes | HttpResponse:
        """The body (``Content-Length`` or chunked), or the error response (400, 413)."""
        if self.headers.get("Transfer-Encoding", "").strip().lower() == "chunked":
            try:
                return _read_chunked(self.rfile, limit)
            except _TooLarge:
                self.close_connection = True
                return HttpResponse.error(413, f"Request body too large (limit {limit} bytes)")
            except ValueError as e:
                self.close_connection = True
                return HttpResponse.error(400, f"Invalid chunked body: {e}")
        length_text = self.headers.get("Content-Length", "0").strip() or "0"
        if not length_text.isdigit():
            self.close_connection = True
            return HttpResponse.error(400, f"Invalid Content-Length {length_text!r}")
        length = int(length_text)
        if length > limit:
            self.close_connection = True
            if length <= _DRAIN_LIMIT:  # read it away, so the client sees the 413 and not a reset
                for _ in range(0, length, 65536):
                    if not self.rfile.read(min(65536, length)):
                        break
            return HttpResponse.error(413, f"Request body too large: {length} bytes (limit {limit})")
        return self.rfile.read(length) if length else b""

    def _write(self, response: HttpResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        if response.status != 204:
            self.send_header("Content-Type", response.content_type or "application/json")
            self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if response.status != 204 and self.command != "HEAD":
            self.wfile.write(response.body)

    def version_string(self) -> str:
        return self.server_version

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _handle logs one line with the duration

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)


class AdminHttpServer:
    """The admin REST API of ``admin`` on ``host:port`` (port 0: a free port, see :attr:`url`).

    ``roles`` resolves callers (tokens, trusted header); ``cluster`` is the cluster v1 paths
    name (default: the broker's ``cluster_name``); ``metrics`` serves ``GET /metrics``.
    Binding happens in the constructor (``OSError`` if the address is taken); nothing is served
    until :meth:`serve_forever` or :meth:`start`.
    """

    def __init__(
        self,
        admin: Admin,
        host: str = "127.0.0.1",
        port: int = 8080,
        roles: RoleResolver | None = None,
        cluster: str | None = None,
        metrics: bool = True,
        max_concurrency: int = 16,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        request_timeout: float = 30.0,
    ) -> None:
        if max_concurrency < 1 or max_body_bytes < 0 or request_timeout <= 0:
            raise ConfigError("max_concurrency >= 1, max_body_bytes >= 0 and request_timeout > 0 are required")
        self.admin = admin
        self.cluster = cluster or admin.broker.config.cluster_name
        self.router = Router(admin, roles, self.cluster, self._render_metrics if metrics else None)
        self.max_body_bytes = max_body_bytes
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._idle = threading.Condition()
        self._in_flight = 0
        handler = type("Handler", (_Handler,), {"timeout": request_timeout})
        self._http = _Server((host, port), handler)
        self._http.owner = self
        self._thread: threading.Thread | None = None
        self._state = threading.Lock()
        self._serving = False
        self._loop_stopped = False
        self._closed = False
        self._drained = True

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        host, port = self._http.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        with self._idle:
            return self._in_flight

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` or :meth:`shutdown` (blocks the calling thread)."""
        with self._state:
            if self._loop_stopped:
                return
            self._serving = True
        self._http.serve_forever(poll_interval=0.2)

    def start(self) -> AdminHttpServer:
        """Serve on a background (daemon) thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, name="mledger-admin-http", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting connections; returns once the serve loop has exited. Requests already
        accepted go on. Idempotent; call it from another thread than the serve loop's."""
        with self._state:
            if self._loop_stopped:
                return
            self._loop_stopped = True
            serving = self._serving
        if serving:
            self._http.shutdown()

    def shutdown(self, drain_timeout: float = 10.0) -> bool:
        """:meth:`stop`, then wait for requests in flight (up to ``drain_timeout`` s) and close
        the socket. Returns whether every request finished. Idempotent."""
        self.stop()
        with self._state:
            if self._closed:
                return self._drained
            self._closed = True
        deadline = time.monotonic() + drain_timeout
        with self._idle:
            while self._in_flight and time.monotonic() < deadline:
                self._idle.wait(max(0.0, deadline - time.monotonic()))
            self._drained = self._in_flight == 0
            left = self._in_flight
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=drain_timeout)
        if left:
            log.warning("admin server stopped with %d request(s) still running", left)
        return self._drained

    def __enter__(self) -> AdminHttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _render_metrics(self) -> str:
        from ..metrics import render_metrics

        return render_metrics(self.admin.broker, cluster=self.cluster)

    def _route(self, request: HttpRequest) -> HttpResponse:
        with self._slots:
            with self._idle:
                self._in_flight += 1
            try:
                return self.router.handle(request)
            finally:
                with self._idle:
                    self._in_flight -= 1
                    self._idle.notify_all()

    def __repr__(self) -> str:
        return f"AdminHttpServer({self.url}, {self.admin!r})"


def serve(
    data_dir: str | Path,
    bind: str = DEFAULT_BIND,
    authorization: Authorization | None = None,
    roles: RoleResolver | None = None,
    cluster: str = "standalone",
    ready: Callable[[AdminHttpServer], None] | None = None,
    install_signal_handlers: bool = True,
    **server_options: Any,
) -> None:
    """Serve the admin API over the SQLite data directory ``data_dir`` until SIGINT/SIGTERM.

    Opens the store (``StoreLockedError`` while another process holds it), a factory, a broker
    (``BrokerConfig(cluster_name=cluster)``) and an :class:`Admin`; calls ``ready(server)`` once
    listening; on a signal drains requests in flight and closes broker and factory, so every
    change is persisted when it returns. ``server_options`` go to :class:`AdminHttpServer`.
    """
    from ..broker import Broker, BrokerConfig
    from ..ledger import ManagedLedgerFactory
    from ..storage import SqliteStore

    host, port = parse_bind(bind)
    factory = ManagedLedgerFactory(SqliteStore(str(data_dir)))
    try:
        broker = Broker(factory, BrokerConfig(cluster_name=cluster))
        try:
            admin = Admin(broker, authorization=authorization)
            server = AdminHttpServer(admin, host, port, roles=roles, cluster=cluster, **server_options)
            previous = _install_stop_handlers(server) if install_signal_handlers else {}
            try:
                if ready is not None:
                    ready(server)
                server.serve_forever()
            finally:
                server.shutdown()
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
        finally:
            broker.close()
    finally:
        factory.close()


def _install_stop_handlers(server: AdminHttpServer) -> dict[int, Any]:
    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        # stop() waits for serve_forever() to return, which runs in this (main) thread; the main
        # thread then drains and closes (serve's finally), before the broker is closed
        threading.Thread(target=server.stop, name="mledger-admin-stop", daemon=True).start()

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, stop)
    return previous
