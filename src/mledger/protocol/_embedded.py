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
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..admin import Authenticator, build_authenticator
from ..broker import (
    STANDALONE_NAMESPACES,
    Broker,
    BrokerConfig,
    BrokerJournal,
    Faults,
    OpenedBroker,
    open_broker,
    open_store,
    preset_configs,
)
from ..core import Clock, ConfigError, ManualClock, SystemClock
from ..storage import MemoryStore, Store
from ._access import ClientAuth
from ._config import ProtocolConfig, ProtocolStats
from ._server import ADVANCE_TIMEOUT_S, ProtocolServer

if TYPE_CHECKING:
    from ..admin import AuthenticationSettings, Authorization
    from ..broker import FaultScenario, FaultSpec

__all__ = ["AsyncBroker", "AsyncBrokerClock", "BrokerClock", "EmbeddedBroker"]

T = TypeVar("T")

log = logging.getLogger(__name__)


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
        timers due on the way and dispatching what came due; returns the new time. Raises
        ``TypeError`` with a system clock, ``ValueError`` for a negative ``ms``."""
        # generous: a month of broker time fires tens of thousands of periodic checks
        return self._embedded.call(self.advancing(ms), timeout=ADVANCE_TIMEOUT_S)

    def advancing(self, ms: int) -> Callable[[], int]:
        """What :meth:`advance` runs on the broker's loop (checked now, counted from now)."""
        if not isinstance(self._clock, ManualClock):
            raise TypeError("the broker runs on the system clock; start it with manual_clock=True to advance time")
        if ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount: {ms}")
        wall = time.time_ns() // 1_000_000 if self._follow_wall else None
        server = self._embedded.server
        return lambda: server.advance_clock(ms, not_before_ms=wall)


class EmbeddedBroker:
    """A broker speaking Pulsar's protocol in a background thread (see the module docstring).

    ``tokens`` (literal ``{"<token>": "<role>"}``) and ``authentication`` (the providers:
    :class:`~mledger.admin.AuthenticationSettings`) turn authentication on;
    ``authorization`` says what each role may do. ``deterministic`` and ``seed``: see the module
    docstring; ``deterministic`` with ``manual_clock=False`` raises ``ConfigError``. Fault
    injection is on: :attr:`faults` arms faults (``faults=`` arms a list of faults, or a
    scenario, its mapping or its file, once started; ``fault_seed`` seeds their random draws,
    by default the broker's ``seed``). ``defaults`` names a Pulsar version (``"pulsar-4.0"``,
    as ``mledger standalone --defaults``) whose cursor settings and rules the broker follows, its
    persist pace included (:func:`~mledger.broker.open_broker`), so a :meth:`restart`
    redelivers what that version would."""

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
        faults: FaultScenario | Mapping[str, Any] | Sequence[FaultSpec | Mapping[str, Any]] | str | Path | None = None,
        fault_seed: int | None = None,
        deterministic: bool = False,
        seed: int | None = None,
        defaults: str | None = None,
    ) -> None:
        if defaults is not None:
            preset_configs(defaults, broker_config)  # ConfigError now for a bad name or config
        self._defaults = defaults
        if deterministic and not manual_clock:
            raise ConfigError(
                "deterministic=True needs the manual clock (manual_clock=True): the wall clock never repeats"
            )
        self.deterministic = deterministic
        self._seed = seed
        self.faults = Faults(seed=fault_seed)
        """The broker's fault registry (:class:`~mledger.broker.Faults`): ``fail_next``,
        ``delay``, ``close_connection``, ``half_open``, ``pause``, ``disk_full``, ... It outlives
        a restart; its ``fired()`` and ``seed`` say what happened."""
        self._initial_faults = faults
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
        self._fault_restart: threading.Thread | None = None
        self.faults.restarter = self._restart_for_fault
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
            faults=self.faults,
            seed=self._seed,
            deterministic=self.deterministic,
            defaults=self._defaults,
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
            if self.broker.clock_is_manual:  # the REST admin's advance does what clock.advance does
                self.broker.clock_driver = self.clock.advance
            self._after_start()
            self._arm_initial_faults()
        except BaseException:
            self.stop()
            raise
        return self

    def _arm_initial_faults(self) -> None:
        """Arm the faults given to the constructor (once: a restart keeps what is armed)."""
        faults, self._initial_faults = self._initial_faults, None
        if faults is None:
            return
        if isinstance(faults, (list, tuple)):
            for fault in faults:
                self.faults.arm(fault)
        else:  # a scenario, its mapping or its file
            self.faults.load(faults)  # type: ignore[arg-type]

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
        """Stop the server (closing every connection), the broker and the store, once a restart
        a fault started has completed. Idempotent."""
        self._await_fault_restart()
        self._stop(crash=False)

    def _await_fault_restart(self) -> None:
        """Wait (60 s at most) for a restart a fault started to complete: until then the server
        and its loop are being replaced. Not from that restart itself, nor from the server's
        loop thread (the restart stops that loop: waiting there would wait for itself)."""
        restarting = self._fault_restart
        current = threading.current_thread()
        if restarting is not None and restarting is not current and current is not self._thread:
            restarting.join(timeout=60)

    def _restart_for_fault(self, crash: bool) -> None:
        """A ``restart`` fault fired (:attr:`Faults.restarter <mledger.broker.Faults.restarter>`):
        :meth:`restart` on a thread of its own, as the caller may be the broker's loop or a REST
        request that the restart stops; one at a time (a second firing meanwhile is ignored)."""
        if self._fault_restart is not None and self._fault_restart.is_alive():
            log.warning("a restart fault fired while a restart is under way: ignored")
            return

        def run() -> None:
            try:
                self.restart(crash=crash)
                self._after_fault_restart()
            except Exception:  # noqa: BLE001 - a thread of its own: logged, the test sees the broker down
                log.exception("the restart a fault started failed")

        self._fault_restart = threading.Thread(target=run, name="mledger-fault-restart", daemon=True)
        self._fault_restart.start()

    def _after_fault_restart(self) -> None:
        """Hook for subclasses: runs after a restart a fault started (the standalone variant
        serves its REST admin again if it did before)."""

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
        """Run ``fn`` on the server's event loop and return its result (thread-safe); during a
        restart a fault started, once it completed (:meth:`submit`)."""
        return self.submit(fn).result(timeout)

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the server's event loop; its result as a future (thread-safe). During a
        restart a fault started, waits for it first (the restarted server's loop runs ``fn``)."""
        self._await_fault_restart()
        loop = self._loop
        if loop is None:
            raise RuntimeError("the embedded broker is not running")

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop)

    def stats(self) -> ProtocolStats:
        """A frozen snapshot of the protocol server's counters
        (:class:`~mledger.protocol.ProtocolStats`), taken on its loop (exact)."""
        return self.call(lambda: self.server.stats())  # the server running then (after a restart: the new one)


class AsyncBrokerClock:
    """:class:`BrokerClock` for asyncio code: :meth:`advance` is awaited."""

    def __init__(self, broker: AsyncBroker) -> None:
        self._broker = broker

    def now_ms(self) -> int:
        """The broker's current time (ms since the epoch)."""
        return self._broker.embedded.clock.now_ms()

    async def advance(self, ms: int) -> int:
        """:meth:`BrokerClock.advance`, awaited: the test's loop runs on meanwhile (the pulsar
        client's asyncio callbacks included)."""
        advancing = self._broker.embedded.clock.advancing(ms)
        return await self._broker.call(advancing, timeout=ADVANCE_TIMEOUT_S)


class AsyncBroker:
    """An :class:`EmbeddedBroker` for asyncio code (the ``async_pulsar_broker`` fixture): what
    waits for the broker's loop is awaited instead of blocking the caller's loop, which the
    ``pulsar.asyncio`` client needs to run its callbacks.

    >>> async with AsyncBroker(EmbeddedBroker()) as broker:        # doctest: +SKIP
    ...     client = pulsar.asyncio.Client(broker.service_url)
    ...     broker.faults.fail_next("SEND", error="TooManyRequests")
    ...     await broker.clock.advance(60_000)

    Arming faults does not wait (``faults`` is the broker's registry); ``start``, ``stop`` and
    ``restart`` run on a worker thread.
    """

    def __init__(self, embedded: EmbeddedBroker) -> None:
        self.embedded = embedded
        """The broker this wraps."""
        self.clock = AsyncBrokerClock(self)
        """The broker's clock: ``await clock.advance(ms)``."""

    @property
    def faults(self) -> Faults:
        """The broker's fault registry (:class:`~mledger.broker.Faults`)."""
        return self.embedded.faults

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>``."""
        return self.embedded.service_url

    @property
    def admin_url(self) -> str | None:
        """The REST admin API's URL (started on first use: that first read blocks briefly)."""
        return self.embedded.admin_url

    @property
    def broker(self) -> Broker:
        """The broker itself."""
        return self.embedded.broker

    async def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn`` on the broker's loop; awaited (``TimeoutError`` after ``timeout`` s)."""
        submitted = await asyncio.to_thread(self.embedded.submit, fn)  # may wait for a restart
        return await asyncio.wait_for(asyncio.wrap_future(submitted), timeout)

    async def stats(self) -> ProtocolStats:
        """The protocol server's counters, taken on its loop."""
        return await self.call(lambda: self.embedded.server.stats())  # the server running then

    async def start(self) -> AsyncBroker:
        """Start the broker (on a worker thread)."""
        await asyncio.to_thread(self.embedded.start)
        return self

    async def stop(self) -> None:
        """Stop the broker (on a worker thread)."""
        await asyncio.to_thread(self.embedded.stop)

    async def restart(self, crash: bool = False) -> AsyncBroker:
        """:meth:`EmbeddedBroker.restart`, awaited (on a worker thread)."""
        await asyncio.to_thread(self.embedded.restart, crash)
        return self

    async def __aenter__(self) -> AsyncBroker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
