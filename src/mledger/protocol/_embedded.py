"""An in-process broker for tests and scripts: :class:`EmbeddedBroker`, a context manager.

::

    with EmbeddedBroker() as pulsar_broker:            # memory store, free port, manual clock
        client = pulsar.Client(pulsar_broker.service_url)
        ...
        pulsar_broker.clock.advance(60_000)             # deliver_after(60 s) without sleeping

It runs a :class:`~mledger.protocol.ProtocolServer` on its own event loop in a daemon
thread; the ``with`` block gets it started (tens of milliseconds) and stopped.
:class:`mledger.standalone.EmbeddedStandalone` adds the admin REST API beside it
(``admin_url``); the pytest fixture uses that one. ``data_dir``
uses a :class:`~mledger.storage.SqliteStore` there instead of memory. ``manual_clock`` (the
default) gives the broker a :class:`~mledger.core.ManualClock` starting at the wall clock's
current time, so messages sent with ``deliver_after`` are held until the test advances it, and so
is every other timer that decides what the broker does with messages (:class:`BrokerClock`:
``advance(d)`` counts from the wall clock when the broker's time is behind it, so it makes a
message sent with ``deliver_after=d`` due, and fires each timer at its own due time).

``deterministic=True`` (with ``seed``) makes runs repeat: the manual clock starts at
:data:`~mledger.broker.DETERMINISTIC_START_MS` and moves by exactly what the test advances (no wall clock), the
managed ledgers' background work (trimming) runs at once on the thread that asks for it
(:class:`~mledger.core.InlineExecutor`), not on worker threads, and ``seed`` seeds the broker's random source (:attr:`Broker.random <mledger.broker.Broker.random>`),
so the same seed and the same client commands give the same broker frames and recorded rows
(docs/pulsar/deterministic.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..admin import Authenticator, build_authenticator
from ..broker import STANDALONE_NAMESPACES, Broker, BrokerConfig, BrokerJournal, OpenedBroker, open_broker, open_store
from ..core import Clock, ConfigError, ManualClock, SystemClock
from ..storage import MemoryStore, Store
from ._access import ClientAuth
from ._config import ProtocolConfig, ProtocolStats
from ._server import ProtocolServer

if TYPE_CHECKING:
    from ..admin import AuthenticationSettings, Authorization

__all__ = ["BrokerClock", "EmbeddedBroker"]

T = TypeVar("T")


class BrokerClock:
    """The handle tests use to move the broker's time (a manual clock only).

    The clock starts at the wall clock's time when the broker starts and stands still between
    calls. :meth:`advance` moves it by ``ms`` past the later of its own time and the wall clock,
    firing every broker-semantic timer at its own due time on the way (delayed delivery, message
    TTL, inactive-topic deletion, backlog quotas, retention and compaction checks, deduplication
    snapshots, the stats interval: :mod:`mledger.broker`), so advancing ten minutes
    runs a 60 s check ten times; the messages that came due are dispatched before it returns.
    Transport timers (keep-alive pings, handshake and idle timeouts) stay on real time: no
    advance closes a connection. A client stamps ``deliver_after`` from its own (wall) clock a
    moment after the broker started, so ``advance(d)`` after ``send(..., deliver_after=d)``
    always makes that message due.
    """

    def __init__(self, embedded: EmbeddedBroker, clock: Clock, follow_wall: bool = True) -> None:
        self._embedded = embedded
        self._clock = clock
        self._follow_wall = follow_wall

    def now_ms(self) -> int:
        """The broker's current time (ms since the epoch)."""
        return self._clock.now_ms()

    def advance(self, ms: int) -> int:
        """Move the broker's clock to ``ms`` past the later of its own time and the wall clock
        (a deterministic broker's: ``ms`` past its own time, the wall clock ignored), firing the
        timers due on the way and dispatching what came due; returns the new time. Raises ``TypeError`` with a system clock, ``ValueError`` for a negative ``ms``."""
        if not isinstance(self._clock, ManualClock):
            raise TypeError("the broker runs on the system clock; start it with manual_clock=True to advance time")
        if ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount: {ms}")
        wall = time.time_ns() // 1_000_000 if self._follow_wall else None
        server = self._embedded.server
        # generous: a month of broker time fires tens of thousands of periodic checks
        return self._embedded.call(lambda: server.advance_clock(ms, not_before_ms=wall), timeout=600)


class EmbeddedBroker:
    """A broker speaking Pulsar's protocol in a background thread (see the module docstring).

    ``tokens`` (literal ``{"<token>": "<role>"}``) and ``authentication`` (the providers:
    :class:`~mledger.admin.AuthenticationSettings`) turn authentication on;
    ``authorization`` says what each role may do. ``deterministic`` and ``seed``: see the module
    docstring; ``deterministic`` with ``manual_clock=False`` raises ``ConfigError``."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        broker_config: BrokerConfig | None = None,
        manual_clock: bool = True,
        tokens: Mapping[str, str] | None = None,
        authorization: Authorization | None = None,
        protocol_config: ProtocolConfig | None = None,
        authentication: AuthenticationSettings | None = None,
        deterministic: bool = False,
        seed: int | None = None,
    ) -> None:
        if deterministic and not manual_clock:
            raise ConfigError(
                "deterministic=True needs the manual clock (manual_clock=True): the wall clock never repeats"
            )
        self.deterministic = deterministic
        self._seed = seed
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._host = host
        self._port = port
        self._broker_config = broker_config
        self._manual = manual_clock
        self._authenticator = build_authenticator(tokens, authentication)
        self._auth = ClientAuth(self._authenticator, authorization) if self._authenticator is not None else None
        self._protocol_config = protocol_config
        self._authorization = authorization
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server: ProtocolServer
        self.broker: Broker
        self.clock: BrokerClock
        self._opened: OpenedBroker | None = None
        self._memory: MemoryStore | None = None  # without data_dir: the data, kept across restarts
        self._time: Clock | None = None  # the broker's clock, kept across restarts
        self._crashing = False
        self._check_options()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> EmbeddedBroker:
        """Start the store, broker and server; returns once clients can connect."""
        if self._time is None and not self.deterministic:  # a deterministic broker's: open_broker's
            self._time = ManualClock(int(time.time() * 1000)) if self._manual else SystemClock()
        # the namespaces mledger standalone (and Pulsar's) creates
        self._opened = open_broker(
            store=self._open_store(),
            broker_config=self._broker_config,
            clock=self._time,
            journal=self._make_journal(),
            namespaces=STANDALONE_NAMESPACES,
            seed=self._seed,
            deterministic=self.deterministic,
        )
        self.broker = self._opened.broker
        self._time = self.broker.clock
        self._seed = self.broker.seed  # a restart draws from the same seed, with or without seed=
        config = self._protocol_config or ProtocolConfig(host=self._host, port=self._port)
        if getattr(self, "server", None) is not None:  # a restart: the ports the clients know
            config = replace(config, port=self.server.port, tls_port=self.server.tls_port)
        self.server = ProtocolServer(self.broker, config, auth=self._auth)
        if getattr(self, "clock", None) is None:
            self.clock = BrokerClock(self, self._time, follow_wall=not self.deterministic)
        self._crashing = False
        started: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self.server.stop(crash=self._crashing))
            loop.close()

        self._thread = threading.Thread(target=run, name="mledger-embedded-broker", daemon=True)
        self._thread.start()
        try:
            started.result(timeout=30)
            self._after_start()
        except BaseException:
            self.stop()
            raise
        return self

    def _open_store(self) -> Store:
        """Hook for subclasses (tests wrap the store to inject faults): the store to serve,
        closed once by :meth:`stop` or a crash: :func:`~mledger.broker.open_store` of
        ``data_dir``, or without one the memory store this object keeps across restarts
        (:meth:`~mledger.storage.MemoryStore.reopen`: it holds what the last run wrote)."""
        if self.data_dir is not None or self._memory is None:
            store = open_store(self.data_dir)
        else:
            store = self._memory.reopen()
        if isinstance(store, MemoryStore):
            self._memory = store
        return store

    def _check_options(self) -> None:
        """Hook for subclasses: runs at the end of the constructor and raises ``ConfigError`` for
        options the subclass refuses (the standalone variant: tokens without authorization)."""

    def _make_journal(self) -> BrokerJournal | None:
        """Hook for subclasses: what hears the broker's changes (the standalone variant's
        recorder, with ``record=``); the broker closes it."""
        return None

    def _after_start(self) -> None:
        """Hook for subclasses: runs once the server accepts connections (the standalone
        variant starts the REST admin here)."""

    def _before_stop(self) -> None:
        """Hook for subclasses: runs first in :meth:`stop`."""

    def stop(self) -> None:
        """Stop the server (closing every connection), the broker and the store. Idempotent."""
        self._stop(crash=False)

    def restart(self, crash: bool = False) -> EmbeddedBroker:
        """Stop and start again over the same data, on the same ports and URLs, so clients
        reconnect by themselves and a consumer receives again what the broker redelivers; the
        clock goes on from where it was. Returns once clients can connect.

        ``crash=False``, a clean restart (:meth:`stop`, then :meth:`start`): connections
        closed, then every topic closed, each cursor through its close path (Pulsar's
        ``persistPositionWhenClosing``: what the mark-delete throttle held back is written,
        within that path's limits). ``crash=True``, what a SIGKILL does: connections dropped
        without a word, nothing written any more; the store keeps exactly what it confirmed,
        and the cursor state the mark-delete throttle had not persisted yet is lost. The data
        is the data directory's, or without one the memory store this object keeps (reopened).
        :attr:`broker` and :attr:`server` are new objects afterwards; :attr:`clock` stays.
        Raises ``RuntimeError`` when not running."""
        if self._thread is None:
            raise RuntimeError("the embedded broker is not running")
        self._stop(crash=crash)
        return self.start()

    def _stop(self, crash: bool) -> None:
        if self._thread is None:
            return
        self._before_stop()
        self._crashing = crash
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        if self._authenticator is not None:
            self._authenticator.close()  # the password checks' workers (a restart starts new ones)
        if self._opened is not None:
            if crash:
                self._opened.crash()
            else:
                self._opened.close()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views -------------------------------------------------------------------------------
    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>`` for ``pulsar.Client``."""
        return self.server.service_url

    @property
    def admin_url(self) -> str | None:
        """The REST admin API's URL when one runs beside the protocol server (see
        :class:`mledger.standalone.EmbeddedStandalone`), else None."""
        return None

    @property
    def port(self) -> int:
        """The protocol port."""
        return self.server.port

    @property
    def authenticator(self) -> Authenticator | None:
        """The identity table the servers share (its ``stats()``: the password checks); None
        without authentication."""
        return self._authenticator

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn`` on the server's event loop and return its result (thread-safe)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the embedded broker is not running")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def stats(self) -> ProtocolStats:
        """A frozen snapshot of the protocol server's counters
        (:class:`~mledger.protocol.ProtocolStats`), taken on its loop (exact)."""
        return self.call(self.server.stats)
