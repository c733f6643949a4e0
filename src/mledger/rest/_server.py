"""``AdminServer``: the admin REST app on uvicorn (HTTP/1.1, keep-alive), embeddable.

Embedding (e.g. beside a protocol server over the same broker)::

    app = create_app(Admin(broker), cluster="standalone")     # or pass the Admin directly
    server = AdminServer(app, "127.0.0.1", 0)                  # binds now: server.url, server.address
    server.start()                                             # own thread and event loop
    ...
    server.shutdown(drain_timeout=10)                          # stop, drain, close; then close the broker

or, inside an event loop you already run::

    task = asyncio.create_task(server.serve())                 # until server.stop()
    ...
    server.stop(); await task

Binding and listening happen in the constructor (``OSError`` when the address is taken; port 0
picks a free port), so the URL is known, and connections wait in the backlog, before anything is
served. An :class:`~mledger.protocol.Acceptor` accepts for uvicorn (which starts with no socket of
its own): it stops accepting at ``maxHttpServerConnections`` (as Jetty's ``ConnectionLimit``),
while few file descriptors are free and on ``EMFILE``, and bounds the TLS handshakes;
:class:`~mledger.rest._middleware.RequestLimit` is ``maxConcurrentHttpRequests``; a connection
that sends nothing within ``first_byte_timeout`` seconds is closed. Stopping is graceful: the listening
socket closes, idle keep-alive connections close, requests in flight finish (up to the drain
timeout, then they are cancelled), and only then does :meth:`shutdown` or :meth:`serve`
return, so the broker can be closed after the last admin call returned. When :meth:`serve` or
:meth:`run` runs in the main thread, uvicorn handles SIGINT and SIGTERM itself (graceful stop)
and re-raises them to the handlers that were installed before, once stopped.

:func:`serve` is ``mledger-admin serve``: a data directory, the app, SIGINT/SIGTERM, and the
store closed when the last request finished.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

from ..core import ConfigError, TlsSettings, advertised_host, format_address, parse_bind, server_context
from ..protocol import Acceptor, fit_to_descriptors, listening_socket, raise_descriptor_limit
from ._auth import RoleResolver
from ._deferred import DeferredApp
from ._middleware import RequestLimit
from ._protocol import DEFAULT_FIRST_BYTE_TIMEOUT, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_URL_BYTES, protocol_class

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..admin import Admin, Authorization

__all__ = ["DEFAULT_BIND", "AdminServer", "parse_bind", "serve"]

log = logging.getLogger("mledger.rest")

DEFAULT_BIND = "127.0.0.1:8080"

PULSAR_MAX_HTTP_SERVER_CONNECTIONS = 2048
"""Pulsar's ``maxHttpServerConnections`` default (lowered to fit the descriptor limit, see
:func:`~mledger.protocol.fit_to_descriptors`)."""
PULSAR_MAX_CONCURRENT_HTTP_REQUESTS = 1024
"""Pulsar's ``maxConcurrentHttpRequests`` default (likewise lowered)."""


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # the server extra has it where it builds (not on Windows)
    except ImportError:  # pragma: no cover - depends on the platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class AdminServer:
    """The app (or an :class:`~mledger.admin.Admin`, for which :func:`create_app` builds one with
    ``app_options``) served by uvicorn on ``host:port``; see the module docstring. A
    :class:`~mledger.rest.DeferredApp` answers the readiness route while it builds the app on the
    first other request.

    ``drain_timeout``: seconds requests in flight get to finish when stopping.
    ``keep_alive_timeout``: seconds an idle keep-alive connection is kept.
    ``max_url_bytes`` / ``max_header_bytes``: the protocol's limits (414 / 431).
    ``max_connections``: connections open at most; at the limit the server stops accepting and
    new ones wait in the backlog (Pulsar's ``maxHttpServerConnections``; 0: no limit; None:
    Pulsar's 2048 lowered to fit the descriptor limit, :func:`~mledger.protocol.fit_to_descriptors`).
    ``max_concurrent_requests``: requests answered at once; more wait, then 503
    (``maxConcurrentHttpRequests``; 0: no limit; None: Pulsar's 1024, likewise lowered).
    ``first_byte_timeout``: seconds a new connection has to send something before it is closed.
    ``tls_handshake_timeout`` / ``max_tls_handshakes``: the TLS handshakes' time and number.
    ``tls``: serve ``https://`` with these certificate, key and trust files (one context shared with
    the protocol server's TLS port, :func:`mledger.core.server_context`); a verified client
    certificate's subject reaches the app as the ASGI TLS extension's ``client_cert_name``.
    """

    def __init__(
        self,
        app: FastAPI | DeferredApp | Admin,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        drain_timeout: float = 10.0,
        keep_alive_timeout: float = 5.0,
        max_url_bytes: int = DEFAULT_MAX_URL_BYTES,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        backlog: int = 2048,
        tls: TlsSettings | None = None,
        max_connections: int | None = None,
        max_concurrent_requests: int | None = None,
        first_byte_timeout: float = DEFAULT_FIRST_BYTE_TIMEOUT,
        tls_handshake_timeout: float = 5.0,
        max_tls_handshakes: int = 64,
        **app_options: Any,
    ) -> None:
        if not callable(app):  # an Admin (imported only then: the ASGI apps are callables)
            from ._app import create_app

            app = create_app(app, max_url_bytes=max_url_bytes, **app_options)
        elif app_options:
            raise ConfigError(f"options {sorted(app_options)} need an Admin, not a ready app")
        if drain_timeout < 0 or keep_alive_timeout <= 0:
            raise ConfigError("drain_timeout >= 0 and keep_alive_timeout > 0 are required")
        if max_connections is None:
            max_connections = fit_to_descriptors(PULSAR_MAX_HTTP_SERVER_CONNECTIONS)
        if max_concurrent_requests is None:
            max_concurrent_requests = fit_to_descriptors(PULSAR_MAX_CONCURRENT_HTTP_REQUESTS)
        if max_connections < 0 or max_concurrent_requests < 0:
            raise ConfigError("max_connections >= 0 and max_concurrent_requests >= 0 are required (0: no limit)")
        self.app = app
        self.drain_timeout = drain_timeout
        self.max_connections = max_connections
        self.max_concurrent_requests = max_concurrent_requests
        self._socket = listening_socket(host, port, backlog, "admin REST server")
        bound = self._socket.getsockname()
        self._address = (str(bound[0]), int(bound[1]))
        self.tls = tls
        try:
            # read the files now: a bad certificate is a ConfigError before the thread starts
            context = server_context(tls) if tls is not None else None
        except BaseException:
            self._socket.close()
            raise
        served: Any = RequestLimit(app, max_concurrent_requests) if max_concurrent_requests else app
        self._config = uvicorn.Config(
            served,
            http=protocol_class(max_url_bytes, max_header_bytes, first_byte_timeout),
            lifespan="off",
            log_config=None,
            access_log=False,  # the app's middleware logs one line per request
            server_header=False,
            proxy_headers=False,  # no proxy is trusted by default: X-Forwarded-For is not the client
            timeout_keep_alive=int(max(1, keep_alive_timeout)),
            timeout_graceful_shutdown=int(max(1, drain_timeout)) if drain_timeout else None,
            backlog=backlog,
        )
        what = "admin REST server (TLS)" if context is not None else "admin REST server"
        self._server = _ListenedServer(
            self._config,
            self._socket,
            name=f"{what} on {format_address(*self._address)}",
            tls=context,
            tls_handshake_timeout=tls_handshake_timeout,
            max_tls_handshakes=max_tls_handshakes,
            max_connections=max_connections,
        )
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._state = threading.Lock()
        self._closed = False
        self._drained = True

    # -- where -----------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        return self._address

    @property
    def url(self) -> str:
        """``http://host:port`` (``https://`` with ``tls``)."""
        return self.advertised_url(self.address[0])

    def advertised_url(self, advertised_address: str | None) -> str:
        """:attr:`url` with the host clients are told (:func:`~mledger.core.advertised_host`:
        Pulsar's ``advertisedAddress``, else the bound host, loopback for a wildcard bind)."""
        host, port = self.address
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{format_address(advertised_host(advertised_address, host), port)}"

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        app = self._built_app()
        return int(app.state.in_flight.count) if app is not None else 0

    def _built_app(self) -> FastAPI | None:
        """The FastAPI app, None while a :class:`DeferredApp` has not built it."""
        return self.app.built if isinstance(self.app, DeferredApp) else self.app

    @property
    def started(self) -> bool:
        """Whether the server accepts connections."""
        return bool(self._server.started) and not self._server.should_exit

    # -- running ---------------------------------------------------------------------------

    async def serve(self) -> None:
        """Serve in the running event loop until :meth:`stop` (see the module docstring)."""
        await self._server.serve()

    def run(self) -> None:
        """Serve in this thread (a new event loop) until :meth:`stop` or SIGINT/SIGTERM."""
        _run_loop(self.serve())

    def start(self, timeout: float = 30.0) -> AdminServer:
        """Serve on a background (daemon) thread; returns self once listening (``RuntimeError``
        if it could not start within ``timeout`` seconds)."""
        with self._state:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run_in_thread, name="mledger-rest", daemon=True)
                self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._failure is not None or not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the admin server did not start: {self._failure!r}") from self._failure
            time.sleep(0.01)
        return self

    def _run_in_thread(self) -> None:
        try:
            _run_loop(self.serve())
        except BaseException as e:  # reported by start(); the thread just ends
            self._failure = e
            log.exception("the admin server stopped with an error")

    def stop(self) -> None:
        """Ask the server to stop (graceful: see :meth:`shutdown`); returns at once. Thread-safe."""
        self._server.should_exit = True

    def shutdown(self, drain_timeout: float | None = None) -> bool:
        """:meth:`stop`, wait for the requests in flight (up to ``drain_timeout`` seconds, default
        the constructor's) and close the socket. Returns whether every request finished.
        Idempotent; for a server run with :meth:`start`."""
        with self._state:
            if self._closed:
                return self._drained
            self._closed = True
        limit = self.drain_timeout if drain_timeout is None else drain_timeout
        self._config.timeout_graceful_shutdown = int(max(1, limit)) if limit else None
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout=limit + 5)
        self._drained = self.in_flight == 0 and (self._thread is None or not self._thread.is_alive())
        self._socket.close()
        app = self._built_app()
        if app is not None:
            app.state.mledger.close()
        if not self._drained:
            log.warning("admin server stopped with %d request(s) still running", self.in_flight)
        return self._drained

    def __enter__(self) -> AdminServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"AdminServer({self.url})"


class _ListenedServer(uvicorn.Server):
    """uvicorn's server with a :class:`~mledger.protocol.Acceptor` accepting on ``sock`` for it:
    uvicorn starts with no socket of its own (``sockets=[]``), then the acceptor hands each
    connection it accepts to uvicorn's HTTP protocol, made as uvicorn's ``startup`` makes it (its
    config, server state and lifespan state), so uvicorn's shutdown closes them as its own. At
    ``max_connections`` (0: no limit) connections and handshakes, the acceptor stops accepting."""

    def __init__(
        self,
        config: uvicorn.Config,
        sock: Any,
        *,
        name: str,
        tls: Any,
        tls_handshake_timeout: float,
        max_tls_handshakes: int,
        max_connections: int,
    ) -> None:
        super().__init__(config)
        self.acceptor = Acceptor(
            sock,
            self._new_protocol,
            name=name,
            tls=tls,
            tls_handshake_timeout=tls_handshake_timeout,
            max_tls_handshakes=max_tls_handshakes,
            reserve_share=0.5,
            gate=self._at_limit if max_connections else None,
        )
        self._max_connections = max_connections

    def _new_protocol(self) -> asyncio.Protocol:
        protocol: asyncio.Protocol = self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state
        )
        return protocol

    def _at_limit(self) -> str | None:
        if len(self.server_state.connections) + self.acceptor.handshakes < self._max_connections:
            return None
        return f"{self._max_connections} connections open (maxHttpServerConnections)"

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets=[])
        if self.started:
            self.acceptor.start()

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        await self.acceptor.close()
        await super().shutdown()


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=_new_loop) as runner:
        runner.run(main)


def serve(
    data_dir: str | Path,
    bind: str = DEFAULT_BIND,
    authorization: Authorization | None = None,
    roles: RoleResolver | None = None,
    cluster: str = "standalone",
    ready: Callable[[AdminServer], None] | None = None,
    authenticate_metrics_endpoint: bool = False,
    authenticate_docs_endpoint: bool = False,
    **app_options: Any,
) -> None:
    """Serve the admin API over the SQLite data directory ``data_dir`` until SIGINT/SIGTERM.
    Raises the soft file descriptor limit to the hard one first
    (:func:`~mledger.protocol.raise_descriptor_limit`).

    Opens the store (``StoreLockedError`` while another process holds it), a factory and a broker
    with :func:`~mledger.broker.open_broker` (``BrokerConfig(cluster_name=cluster)`` with the two
    ``authenticate_*`` switches) and an :class:`Admin`; calls ``ready(server)`` once
    bound; on a signal drains requests in flight and closes broker and factory, so every change
    is persisted when it returns (normally, not by the signal). ``app_options`` go to
    :func:`create_app`. Call it from the main thread.
    """
    from ..admin import Admin
    from ..broker import BrokerConfig, open_broker
    from ._app import create_app

    host, port = parse_bind(bind, 8080)
    raise_descriptor_limit()
    roles = roles if roles is not None else RoleResolver()
    config = BrokerConfig(
        cluster_name=cluster,
        authenticate_metrics_endpoint=authenticate_metrics_endpoint,
        authenticate_docs_endpoint=authenticate_docs_endpoint,
    )
    with open_broker(data_dir, broker_config=config) as opened:
        admin = Admin(opened.broker, authorization=authorization)
        app = create_app(admin, roles=roles, cluster=cluster, **app_options)
        server = AdminServer(app, host, port)

        def stop(signum: int, frame: FrameType | None) -> None:
            # before uvicorn takes the signals over, and after it hands them back: stop, no exit
            log.info("signal %d: shutting down", signum)
            server.stop()

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            if ready is not None:
                ready(server)
            server.run()
        finally:
            app.state.mledger.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
