"""The asyncio server shell: sockets in, :class:`~mledger.protocol._session.Session` calls out.

Theory of operation
-------------------
:class:`ProtocolServer` listens on a TCP port and runs one :class:`_Shell` (an
``asyncio.Protocol``) per connection; the shell feeds received bytes to its session and writes
what the session queued, once per loop iteration (:meth:`ProtocolServer.flush_soon`). Every
broker call a command makes runs on the event loop thread. SENDs go through the broker's
pipelined publish (``Topic.publish_entries``): when the store's writes never wait on the disk
(the memory store; SQLite with ``synchronous`` NORMAL, what the front ends open) the loop
writes the SENDs of each read itself and answers them in the same turn, with no thread switch;
when they do (SQLite FULL) the ledgers' writer threads store them and report back through
:meth:`ProtocolServer.run_on_loop`. SEND_RECEIPTs go out as each write completes.

The :class:`~mledger.protocol._session.Session` (sans I/O) sees the server only as its
:class:`~mledger.protocol._session.SessionHost`; this module is the only one in the package
that knows asyncio.

The broker pushes through listeners (:mod:`mledger.broker`), possibly from other
threads; they are handed to the loop with :meth:`ProtocolServer.run_on_loop`:

* entries appended to a watched topic -> its subscriptions dispatch (coalesced per loop turn);
* a remote consumer's deliveries -> MESSAGE frames;
* the broker's timers (``Broker.timers``: message TTL, inactive topics, backlog quotas,
  retention, compaction, deduplication snapshots, stats, each subscription's delayed-delivery
  timer; :mod:`mledger.broker`) -> on the broker's system clock, one loop timer for
  the earliest due time, re-armed as timers are armed and fired; on a
  :class:`~mledger.core.ManualClock` nothing fires them but :meth:`ProtocolServer.advance_clock`,
  which the test fixture's clock handle calls;
* once a second the timers due are fired and every watched subscription dispatched (a sweep
  that catches what an event missed);
* every ``keep_alive_interval_seconds`` a connection that sent nothing since the last PING is
  closed and the others are pinged (Pulsar's keep-alive). This and every other transport timer
  run on the loop's real time, never on the broker's clock: advancing a manual clock by hours
  closes no connection.

Accepting: each port is an :class:`~mledger.protocol.Acceptor`, which stops accepting
while few file descriptors are free (or ``accept()`` fails with ``EMFILE``) and bounds the TLS
handshakes in progress and their time. Over ``broker_max_connections`` or
``broker_max_connections_per_ip`` a connection is answered ERROR ``NotAllowedError`` and closed
(Pulsar's ``ServerCnx.channelActive`` with its ``ConnectionController``); one that sends
nothing within ``first_byte_timeout_seconds`` is closed (a loop timer: real time).

Back-pressure: a session with more than ``max_pending_sends`` appends in flight stops reading
its socket until half of them are answered; a socket whose write buffer is over its high mark
gets no more permits granted (``Session.writing_paused``), so memory stays bounded by the
buffers, not by what clients ask for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import itertools
import logging
import signal
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ..broker import Broker, Firing, Subscription, Topic, selects
from ..codec.proto import PulsarApi_pb2 as api
from ..core import ManualClock, MLedgerError, advertised_host, format_address, server_context
from ._acceptor import Acceptor, listening_socket
from ._access import ClientAuth, ProducerAccess
from ._config import ListenerUrls, ProtocolConfig as ProtocolConfig, ProtocolStats as ProtocolStats, lookup_urls
from ._errors import RemoteProtocolError
from ._framing import FRAME_PADDING
from ._session import ConsumerHandle, Session
from ._session_state import SessionCounters

__all__ = ["ProtocolConfig", "ProtocolServer", "ProtocolStats"]

log = logging.getLogger(__name__)

ADVANCE_TIMEOUT_S = 600.0
"""How long an advance of the manual clock may take on the broker's loop: a month of broker
time fires tens of thousands of periodic checks."""

_WRITE_HIGH_WATER = 4 * 1024 * 1024
_WRITE_LOW_WATER = 1024 * 1024
_NO_REQUEST = (1 << 64) - 1
"""The request id of an ERROR that answers no request: Pulsar's ``-1`` as the uint64 it is sent as."""


def _fit_store_to_frames(broker: Broker, frame_limit: int) -> None:
    """Raise the store's entry limit to the largest frame the server accepts, as Pulsar sets
    BookKeeper's ``nettyMaxFrameSizeBytes`` to ``maxMessageSize`` + the frame padding: a chunk
    carries ``max_message_size`` payload bytes plus its metadata, and Pulsar bounds chunks by
    the frame limit only (``Producer.isExceedMaximumMessageSize`` skips them). Never lowered."""
    store = broker.factory.store
    if store.max_entry_size < frame_limit:
        log.info(
            "raising the store's max_entry_size from %d to %d bytes: the protocol's largest frame"
            " (max_message_size + %d bytes of padding)",
            store.max_entry_size,
            frame_limit,
            FRAME_PADDING,
        )
        store.max_entry_size = frame_limit


class _Shell(asyncio.Protocol):
    """One connection's socket end (asyncio callbacks only). ``opened`` tells the server when
    the connection starts (the session exists) and answers whether it is admitted; ``lost``
    when it ends; ``totals`` counts what ends a connection early."""

    def __init__(
        self,
        server: ProtocolServer,
        opened: Callable[[_Shell], bool],
        lost: Callable[[_Shell], None],
        totals: _Totals,
    ) -> None:
        self.server = server
        self.totals = totals
        self.transport: asyncio.Transport | None = None
        self.session: Session | None = None
        self.peer_ip = ""
        self.reading_paused = False
        self.muted = False
        """An injected half-open fault stopped writing: what the session queues is dropped."""
        self.deaf = False
        """An injected half-open fault stopped reading (so did a pause: the server's flag)."""
        self._opened = opened
        self._lost = lost
        self._silence: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(_WRITE_HIGH_WATER, _WRITE_LOW_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover
                pass
        peer = transport.get_extra_info("peername")
        # a TLS connection's verified client certificate (None without one): the tls provider's role
        certificate = transport.get_extra_info("peercert")
        subject = certificate.get("subject") if certificate else None
        self.peer_ip = str(peer[0]) if peer else ""
        self.session = Session(
            self.server,
            f"{peer[0]}:{peer[1]}" if peer else "",
            peer_subject=subject,
            address=self.peer_ip or None,
        )
        if self._opened(self) and not self.server.paused:
            timeout = self.server.config.first_byte_timeout_seconds
            self._silence = asyncio.get_running_loop().call_later(timeout, self._silent, timeout)

    def _silent(self, timeout: float) -> None:
        """Nothing came within the first-byte timeout: close at once (no TLS goodbye to wait for)."""
        self._silence = None
        if self.session is not None and not self.session.closed and self.transport is not None:
            self.totals.connections_timed_out += 1
            log.info("closing connection from %s: nothing received within %g s", self.session.peer, timeout)
            self.transport.abort()
            self.session.close()

    def data_received(self, data: bytes) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        session = self.session
        if session is None or session.closed:
            return
        try:
            session.data_received(data)
        except RemoteProtocolError as exc:
            self.totals.protocol_errors += 1
            log.info("closing connection from %s: %s", session.peer, exc)
            self.abort_after_flush()
            return
        except Exception:
            log.exception("connection from %s: unexpected error; closing it", session.peer)
            self.abort_after_flush()
            return
        if session.connection.has_data_to_send:
            # A read of SENDs alone queues nothing: their receipts come with the write's completion.
            self.server.flush_soon(session)
        if not self.reading_paused and session.inflight_sends > self.server.config.max_pending_sends:
            self.reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()

    def maybe_resume_reading(self) -> None:
        session = self.session
        if (
            self.reading_paused
            and session is not None
            and session.inflight_sends <= self.server.config.max_pending_sends // 2
        ):
            self.reading_paused = False
            self.resume_reading()

    def resume_reading(self) -> None:
        """Read again unless back-pressure, a half-open fault or a pause says not to."""
        transport = self.transport
        if self.reading_paused or self.deaf or self.server.paused or transport is None or transport.is_closing():
            return
        transport.resume_reading()

    def write(self, data: bytes) -> None:
        """Write ``data`` to the socket (dropped while a half-open fault mutes the connection)."""
        if self.muted:
            return
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def abort_after_flush(self) -> None:
        session = self.session
        if session is not None and self.transport is not None and not self.transport.is_closing():
            data = session.connection.data_to_send()
            if data:
                self.write(data)
            self.transport.close()
        if session is not None:
            session.close()

    def drop(self) -> None:
        """Close at once as a killed process does: nothing more is written (the peer sees a
        reset) and the broker never hears of it (the session is left as it is, unclosed: a
        consumer's removal would rewind and persist its cursor)."""
        self.session = None
        if self.transport is not None:
            self.transport.abort()

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.writing_paused(True)

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.writing_paused(False)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        try:
            if self.session is not None:
                self.session.close()
        except Exception:  # e.g. a cursor write the store refuses: the connection is gone all the same
            log.exception("closing the session of %s failed", self.session.peer if self.session else "?")
        finally:
            self._lost(self)


class _Totals:
    """The server's live counters (private; :meth:`ProtocolServer.stats` snapshots them):
    what no session keeps (connections accepted, refused, timed out, protocol errors) and the
    counters of the sessions that ended. Changed on the loop thread only."""

    __slots__ = (
        "connections_opened",
        "connections_refused",
        "connections_timed_out",
        "ended",
        "protocol_errors",
    )

    def __init__(self) -> None:
        self.connections_opened = 0
        self.connections_refused = 0
        self.connections_timed_out = 0
        self.protocol_errors = 0
        self.ended = SessionCounters()
        """The counters of the sessions whose connection ended."""


class _TopicWatcher:
    """The server's :class:`~mledger.broker.TopicListener`: hands each event to the
    loop (``run_on_loop``) and calls ``appended(topic)`` or ``closed(topic)`` there."""

    def __init__(
        self,
        run_on_loop: Callable[[Callable[[], None]], None],
        appended: Callable[[Topic], None],
        closed: Callable[[Topic], None],
    ) -> None:
        self._run_on_loop = run_on_loop
        self._appended = appended
        self._closed = closed

    def entries_added(self, topic: Topic) -> None:
        self._run_on_loop(lambda: self._appended(topic))

    def topic_closed(self, topic: Topic) -> None:
        self._run_on_loop(lambda: self._closed(topic))


class ProtocolServer:
    """Pulsar's binary protocol over a :class:`~mledger.broker.Broker`.

    Start it inside a running event loop with ``await server.start()`` and stop it with
    ``await server.stop()``; or use :class:`~mledger.protocol.EmbeddedBroker` to run
    one in a background thread. ``auth`` turns authentication (and authorization) on. It is the
    :class:`~mledger.protocol._session.SessionHost` of its connections' sessions.
    """

    def __init__(
        self,
        broker: Broker,
        config: ProtocolConfig | None = None,
        auth: ClientAuth | None = None,
    ) -> None:
        self.broker = broker
        self.config = config if config is not None else ProtocolConfig()
        _fit_store_to_frames(broker, self.config.max_message_size + FRAME_PADDING)
        self.auth = auth
        if auth is not None and auth.authorization is not None:
            # decisions read the grants stored in this broker's metadata too (tenants, permissions)
            auth.authorization = auth.authorization.bound_to(broker)
        self._totals = _Totals()
        self.access = ProducerAccess()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Work other threads hand to the loop, run in order by one wake-up per batch.
        self._handed: deque[Callable[[], None]] = deque()
        self._handover_scheduled = False
        self._loop_thread: int | None = None
        self._acceptors: list[Acceptor] = []
        self._shells: dict[Session, _Shell] = {}
        self._per_ip: dict[str, int] = {}
        # Dicts used as insertion-ordered sets: what is flushed and dispatched in one loop turn
        # goes in the order it was asked for, never in hash (memory address) order, so runs repeat.
        self._to_flush: dict[Session, None] = {}
        self._flush_scheduled = False
        self._dirty: dict[Topic, None] = {}
        self._to_dispatch: dict[Subscription, None] = {}
        self._dispatch_scheduled = False
        self._to_pump: dict[int, ConsumerHandle] = {}
        self._watched: dict[Topic, None] = {}
        self._watcher = _TopicWatcher(self.run_on_loop, self._topic_dirty, self._unwatch)
        self._wakeup: asyncio.TimerHandle | None = None  # the broker's earliest timer, on a system clock
        self._wakeup_due: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._paused = False
        self._pause_end: asyncio.TimerHandle | None = None
        self._ids = itertools.count(1)
        self.port = self.config.port
        self.tls_port = self.config.tls_port
        # read the certificate files now: a bad file is a ConfigError before anything listens
        self._ssl = server_context(self.config.tls) if self.config.tls_port is not None and self.config.tls else None

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind and start accepting connections (``port`` is set to the bound port)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        acceptors = [self._acceptor(self.config.port, None)]
        if self._ssl is not None and self.config.tls_port is not None:
            try:
                acceptors.append(self._acceptor(self.config.tls_port, self._ssl))
            except OSError:
                acceptors[0].sock.close()
                raise
            self.tls_port = acceptors[1].port
        self.port = acceptors[0].port
        self._acceptors = acceptors
        for acceptor in acceptors:
            acceptor.start()
        self._tasks = [loop.create_task(self._tick()), loop.create_task(self._keep_alive())]
        self.broker.faults.attach(self)
        if not isinstance(self.broker.clock, ManualClock):
            self.broker.timers.on_earlier = self._timers_earlier
            self._arm_wakeup()
        else:
            self.broker.clock_driver = self.advance_clock_from_any_thread
        log.info(
            "Pulsar protocol server listening on %s",
            " and ".join(filter(None, (self.service_url, self.tls_service_url))),
        )

    def _acceptor(self, port: int, context: ssl.SSLContext | None) -> Acceptor:
        what = "Pulsar protocol server (TLS)" if context is not None else "Pulsar protocol server"
        sock = listening_socket(self.config.host, port, 1024, what)
        return Acceptor(
            sock,
            self.new_connection,
            name=f"{what} on {format_address(self.config.host, sock.getsockname()[1])}",
            tls=context,
            tls_handshake_timeout=self.config.tls_handshake_timeout_seconds,
            max_tls_handshakes=self.config.max_concurrent_tls_handshakes,
        )

    def new_connection(self) -> asyncio.Protocol:
        """The protocol end of a new connection, what the acceptors make for each socket; the
        caller gives it its transport (``connection_made``). The command replay
        (:func:`~mledger.protocol.replay_reads`) serves in-memory transports through it.
        Call on the loop thread."""
        return _Shell(self, self._opened, self._lost, self._totals)

    @property
    def settled(self) -> bool:
        """Whether no work the server scheduled on its loop is waiting (writes, dispatches,
        hand-overs from other threads). Read on the loop thread."""
        return not (self._flush_scheduled or self._dispatch_scheduled or self._handover_scheduled or self._handed)

    async def stop(self, crash: bool = False) -> None:
        """Stop accepting, close every connection, wait for in-flight appends. Idempotent.

        ``crash``: stop as a killed process does: every connection dropped at once without
        writing what it queued (clients see a reset and reconnect), no append waited for
        (:meth:`EmbeddedBroker.restart <mledger.protocol.EmbeddedBroker.restart>`)."""
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self.broker.faults.detach(self)
        if self._pause_end is not None:
            self._pause_end.cancel()
            self._pause_end = None
        self._paused = False
        acceptors, self._acceptors = self._acceptors, []
        for acceptor in acceptors:
            await acceptor.close()
        for shell in list(self._shells.values()):
            if crash:
                shell.drop()
            else:
                shell.abort_after_flush()
        await asyncio.sleep(0)  # the transports' connection_lost callbacks
        if self.broker.timers.on_earlier == self._timers_earlier:
            self.broker.timers.on_earlier = None
        if self.broker.clock_driver == self.advance_clock_from_any_thread:
            self.broker.clock_driver = None
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        topics = list(self._watched)
        for topic in topics:
            topic.remove_listener(self._watcher)
        self._watched.clear()
        if crash:
            return
        # Wait for the appends in flight (off the loop: they complete on writer threads).
        await asyncio.get_running_loop().run_in_executor(None, lambda: [t.wait_for_publishes(30) for t in topics])

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` as clients should use it."""
        return f"pulsar://{format_address(self._advertised_host(), self.port)}"

    @property
    def tls_service_url(self) -> str | None:
        """``pulsar+ssl://host:port`` of the TLS port; None without one."""
        if self.tls_port is None or self._ssl is None:
            return None
        return f"pulsar+ssl://{format_address(self._advertised_host(), self.tls_port)}"

    def _advertised_host(self) -> str:
        return advertised_host(self.config.advertised_address, self.config.host)

    def lookup_urls(self, listener_name: str | None = None) -> ListenerUrls:
        """What a lookup naming ``listener_name`` answers (see
        :func:`~mledger.protocol._config.lookup_urls`): the HTTP lookup of the admin REST API
        asks here, so both answer alike. Any thread; after :meth:`start` for a port-0 server."""
        return lookup_urls(self.config, self.service_url, listener_name, self.tls_service_url)

    def stats(self) -> ProtocolStats:
        """A frozen snapshot of the counters (:class:`ProtocolStats`): the live sessions' plus
        those of the connections that ended. Any thread (a metrics scrape): a consistent enough
        view; exact on the loop thread (``EmbeddedBroker.stats`` reads it there)."""
        t = self._totals
        sessions = [x.stats() for x in list(self._shells)]  # copy the keys first: other threads read too
        acceptors = list(self._acceptors)
        counters = sum((x.counters for x in sessions), t.ended)
        return ProtocolStats(
            connections=len(sessions),
            connections_opened=t.connections_opened,
            producers=sum(x.producers for x in sessions),
            consumers=sum(x.consumers for x in sessions),
            messages_in=counters.messages_in,
            bytes_in=counters.bytes_in,
            messages_out=counters.messages_out,
            bytes_out=counters.bytes_out,
            checksum_errors=counters.checksum_errors,
            validation_errors=counters.validation_errors,
            protocol_errors=t.protocol_errors,
            connections_refused=t.connections_refused,
            connections_timed_out=t.connections_timed_out,
            tls_handshakes_in_progress=sum(x.handshakes for x in acceptors),
            tls_handshakes_failed=sum(x.handshake_failures for x in acceptors),
            accept_pauses=sum(x.pauses for x in acceptors),
        )

    # -- thread hand-over --------------------------------------------------------------------
    def run_on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now if called on the loop thread, else soon on the loop (thread-safe).

        Calls from other threads (ledger writers completing SENDs, deliveries) queue up and
        run in order after one wake-up of the loop per batch, not one each.
        """
        if threading.get_ident() == self._loop_thread:
            fn()
            return
        self._handed.append(fn)
        if not self._handover_scheduled:
            self._handover_scheduled = True
            self.post(self._run_handed)

    def _run_handed(self) -> None:
        # Cleared before draining: a thread that queues after this line wakes the loop again.
        self._handover_scheduled = False
        handed = self._handed
        while handed:
            try:
                handed.popleft()()
            except Exception:  # pragma: no cover - one callback's bug must not strand the others
                log.exception("a callback handed to the event loop failed")

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after the current callback (thread-safe)."""
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(fn)
            except RuntimeError:  # pragma: no cover
                pass

    def next_id(self) -> int:
        """A number unique in this server (consumer-name suffixes)."""
        return next(self._ids)

    # -- writing -----------------------------------------------------------------------------
    def flush_soon(self, session: Session) -> None:
        """Write what ``session`` queued at the end of this loop turn."""
        self._to_flush[session] = None
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._paused:  # nothing is written during a pause: resuming flushes them
            return
        sessions = self._to_flush
        self._to_flush = {}
        for session in sessions:
            shell = self._shells.get(session)
            if shell is None:
                continue
            transport = shell.transport
            if transport is None:
                continue
            data = session.connection.data_to_send()
            # the hot path: shell.write inlined, its half-open check one attribute test
            if data and not shell.muted and not transport.is_closing():
                transport.write(data)
            shell.maybe_resume_reading()

    def flush_now(self, session: Session) -> None:
        """Write what ``session`` queued right away (call on the loop thread)."""
        if self._paused:
            self.flush_soon(session)
            return
        shell = self._shells.get(session)
        if shell is not None and shell.transport is not None and not shell.transport.is_closing():
            data = session.connection.data_to_send()
            if data and not shell.muted:
                shell.transport.write(data)

    def close_soon(self, session: Session) -> None:
        """Close ``session``'s connection once what it queued is written."""
        shell = self._shells.get(session)
        if shell is not None and self._loop is not None:
            self._loop.call_soon(shell.abort_after_flush)

    # -- injected faults: the broker's FaultListener and the sessions' FaultHost -----------------
    @property
    def paused(self) -> bool:
        """Whether an injected pause stops serving every connection."""
        return self._paused

    def faults_changed(self) -> None:
        """The broker's armed faults changed (any thread): each session picks its dispatch."""
        self.run_on_loop(self._faults_changed)

    def _faults_changed(self) -> None:
        for session in list(self._shells):
            session.faults_changed()

    def act_now(self, firing: Firing) -> None:
        """A connection fault armed without a command (any thread): close or half-open every
        connection its filters select, or pause."""
        self.run_on_loop(lambda: self._act_now(firing))

    def _act_now(self, firing: Firing) -> None:
        spec: Any = firing.spec
        if spec.action == "pause":
            self.pause(spec.pause_ms)
            return
        for session in list(self._shells):
            if session.closed or not selects(spec, session.fault_targets()):
                continue
            if spec.action == "half_open":
                self.half_open(session, spec.direction)
            else:
                self.drop(session)

    def resume(self) -> None:
        """End a pause (any thread)."""
        self.run_on_loop(self._resume)

    def heal(self) -> None:
        """Faults were cleared (any thread): half-open connections work again, a pause ends."""
        self.run_on_loop(self._heal)

    def _heal(self) -> None:
        self._resume()
        for session, shell in list(self._shells.items()):
            if shell.deaf or shell.muted:
                shell.deaf = shell.muted = False
                session.connection.received_since_ping = True
                session.heal()
                shell.resume_reading()
                self.flush_soon(session)

    def drop(self, session: object) -> None:
        """Close ``session``'s connection at once, without writing what it queued (an injected
        close: the client sees the connection reset); the broker forgets its producers and
        consumers as for any closed connection. Loop thread."""
        shell = self._shells.get(session)  # type: ignore[call-overload]
        if shell is None:
            return
        log.info("closing connection from %s: an injected fault", shell.session.peer if shell.session else "?")
        if shell.transport is not None:
            shell.transport.abort()
        if shell.session is not None:
            shell.session.close()

    def half_open(self, session: object, direction: str) -> None:
        """Stop reading (``"read"``), writing (``"write"``) or both on ``session``'s socket,
        leaving it open (an injected half-open fault). Loop thread."""
        shell = self._shells.get(session)  # type: ignore[call-overload]
        if shell is None or shell.session is None or shell.transport is None:
            return
        if direction in ("read", "both"):
            shell.deaf = True
            shell.transport.pause_reading()
            shell.session.drop_input()
        if direction in ("write", "both"):
            shell.muted = True
            shell.session.connection.data_to_send()  # dropped: it would never arrive

    def pause(self, ms: int | None) -> None:
        """Stop serving every connection (nothing read or written, sockets open), for ``ms``
        milliseconds of real time (None: until :meth:`resume`). Loop thread."""
        if self._pause_end is not None:
            self._pause_end.cancel()
            self._pause_end = None
        if ms is not None and self._loop is not None:
            self._pause_end = self._loop.call_later(ms / 1000, self._resume)
        if self._paused:
            return
        self._paused = True
        log.warning("broker paused by an injected fault: serving no connection %s", f"for {ms} ms" if ms else "")
        for session, shell in list(self._shells.items()):
            if shell.transport is not None and not shell.transport.is_closing():
                shell.transport.pause_reading()
            session.hold()

    def _resume(self) -> None:
        if self._pause_end is not None:
            self._pause_end.cancel()
            self._pause_end = None
        if not self._paused:
            return
        self._paused = False
        log.warning("broker resumed: serving every connection again")
        for session, shell in list(self._shells.items()):
            session.connection.received_since_ping = True  # the pause was ours, not the client's
            shell.resume_reading()
            session.release()
            self._to_flush[session] = None
        self._flush()

    def call_later(self, seconds: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after ``seconds`` of real time (loop thread)."""
        assert self._loop is not None
        self._loop.call_later(seconds, fn)

    def call_at_broker_time(self, due_ms: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop when the broker's clock reaches ``due_ms`` (a manual clock:
        when the test advances it there)."""
        key = ("injected delay", next(self._ids))
        self.broker.timers.call_at(key, due_ms, lambda: self.run_on_loop(fn), "injected delay")

    # -- dispatching -------------------------------------------------------------------------
    def watch(self, topic: Topic) -> None:
        """Dispatch ``topic``'s subscriptions whenever entries are appended to it."""
        if topic not in self._watched:
            self._watched[topic] = None
            topic.add_listener(self._watcher)

    def _unwatch(self, topic: Topic) -> None:
        self._watched.pop(topic, None)

    def _topic_dirty(self, topic: Topic) -> None:
        self._dirty[topic] = None
        self._schedule_dispatch()

    def dispatch_soon(self, subscription: Subscription) -> None:
        """Dispatch ``subscription`` at the end of this loop turn (coalesced)."""
        self._to_dispatch[subscription] = None
        self._schedule_dispatch()

    def pump_soon(self, handle: ConsumerHandle) -> None:
        """Grant more of a consumer's held permits at the end of this loop turn."""
        self._to_pump[id(handle)] = handle
        self._schedule_dispatch()

    def _schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled and self._loop is not None:
            self._dispatch_scheduled = True
            self._loop.call_soon(self._dispatch_pending)

    def _dispatch_pending(self) -> None:
        self._dispatch_scheduled = False
        topics, self._dirty = self._dirty, {}
        subs, self._to_dispatch = self._to_dispatch, {}
        pumps, self._to_pump = self._to_pump, {}
        for topic in topics:
            if not topic.is_closed:
                subs.update(dict.fromkeys(topic.subscriptions.values()))
        for handle in pumps.values():
            handle.pump()
        for sub in subs:
            self.dispatch(sub)

    def dispatch(self, subscription: Subscription) -> int:
        """Push what ``subscription`` can deliver now (its delayed messages arm its own timer on
        the broker's timer queue); a failure is logged, 0 returned."""
        try:
            return subscription.dispatch()
        except MLedgerError as exc:
            log.info("dispatch of %s/%s failed: %s", subscription.topic, subscription.name, exc)
            return 0
        except Exception:
            log.exception("dispatch of %s/%s failed", subscription.topic, subscription.name)
            return 0

    def run_due_tasks(self) -> int:
        """Fire the broker's timers due by its clock and dispatch every subscription a client
        of this server consumes from (call on the loop thread); returns the messages dispatched
        by the sweep. A subscription without a consumer has nothing to dispatch, so the sweep
        costs O(consumers), not O(subscriptions): 10,000 idle subscriptions cost it nothing."""
        n = self.broker.run_due_tasks()
        swept: dict[Subscription, None] = {}
        for session in list(self._shells):
            swept.update(dict.fromkeys(session.consumed_subscriptions()))
        for sub in swept:
            n += self.dispatch(sub)
        return n

    def advance_clock(self, ms: int, not_before_ms: int | None = None) -> int:
        """Move the broker's :class:`~mledger.core.ManualClock` to ``ms`` past the later of
        its time and ``not_before_ms``, firing each of the broker's timers at its own due time on
        the way (``TimerQueue.advance``), then dispatch every topic; returns the new time. Call
        on the loop thread (the fixture's clock handle does). ``TypeError`` for another clock,
        ``ValueError`` for a negative ``ms``."""
        clock = self.broker.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("the broker runs on the system clock; start it with manual_clock=True to advance time")
        if ms < 0:
            raise ValueError(f"cannot advance a clock by a negative amount: {ms}")
        now = clock.now_ms()
        behind = 0 if not_before_ms is None else max(not_before_ms - now, 0)
        self.broker.timers.advance(behind + ms)
        self.run_due_tasks()
        return clock.now_ms()

    def advance_clock_from_any_thread(self, ms: int, not_before_ms: int | None = None) -> int:
        """:meth:`advance_clock` from any thread (the REST admin's, through
        :meth:`Broker.advance_clock <mledger.broker.Broker.advance_clock>`): run on the loop,
        waited for (:data:`ADVANCE_TIMEOUT_S` at most); returns the new time."""
        if threading.get_ident() == self._loop_thread:
            return self.advance_clock(ms, not_before_ms)
        done: concurrent.futures.Future[int] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(self.advance_clock(ms, not_before_ms))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                done.set_exception(exc)

        self.run_on_loop(run)
        return done.result(ADVANCE_TIMEOUT_S)

    # -- the broker's timers on the wall clock -------------------------------------------------
    def _timers_earlier(self, due_ms: int) -> None:
        """A timer was armed before every other (any thread): re-arm the wake-up."""
        self.run_on_loop(self._arm_wakeup)

    def _arm_wakeup(self) -> None:
        due = self.broker.timers.next_due_ms()
        if due == self._wakeup_due and self._wakeup is not None:
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        self._wakeup_due = due
        if due is None or self._loop is None:
            return
        delay = max(0.0, (due - self.broker.clock.now_ms()) / 1000.0)
        self._wakeup = self._loop.call_later(delay, self._wake)

    def _wake(self) -> None:
        self._wakeup = None
        try:
            self.broker.timers.run_due()
        except Exception:  # pragma: no cover - the queue logs its actions' failures itself
            log.exception("the broker's timers failed")
        self._arm_wakeup()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                self.run_due_tasks()
            except Exception:  # pragma: no cover - keep ticking
                log.exception("periodic broker tasks failed")

    async def _keep_alive(self) -> None:
        interval = self.config.keep_alive_interval_seconds
        while True:
            await asyncio.sleep(interval)
            if self.paused:  # a paused broker serves nobody, pings included
                continue
            for session, shell in list(self._shells.items()):
                if session.closed or session.authenticating:  # silent while a password is checked
                    continue
                if shell.deaf or shell.muted:  # a half-open fault: the broker plays a dead peer
                    continue
                if not session.connection.received_since_ping:
                    log.info("closing connection from %s: no answer to PING", session.peer)
                    shell.abort_after_flush()
                    continue
                if session.is_connected:
                    session.connection.send_ping()
                    self.flush_soon(session)
                else:
                    session.connection.received_since_ping = False

    # -- connections ---------------------------------------------------------------------------
    def _opened(self, shell: _Shell) -> bool:
        """Admit ``shell``'s connection, or answer it ERROR and close it over a connection limit."""
        session = shell.session
        assert session is not None
        refusal = self._refusal(shell.peer_ip, session.peer)
        if refusal is not None:
            self._totals.connections_refused += 1
            log.info("refusing connection from %s: %s", session.peer, refusal)
            session.connection.send_error(_NO_REQUEST, api.NotAllowedError, refusal)
            shell.abort_after_flush()
            return False
        self._shells[session] = shell
        self._per_ip[shell.peer_ip] = self._per_ip.get(shell.peer_ip, 0) + 1
        self._totals.connections_opened += 1
        if self.paused:  # accepted (the kernel did), not served until the pause ends
            assert shell.transport is not None
            shell.transport.pause_reading()
            session.hold()
        return True

    def _refusal(self, ip: str, peer: str) -> str | None:
        """Pulsar's ``ConnectionController.increaseConnection``: the ERROR message when a
        connection from ``ip`` is one too many, else None."""
        config = self.config
        if config.broker_max_connections and len(self._shells) >= config.broker_max_connections:
            return "Reached the maximum number of connections"
        if config.broker_max_connections_per_ip and self._per_ip.get(ip, 0) >= config.broker_max_connections_per_ip:
            return f"Reached the maximum number of connections on address/{peer}"
        return None

    def _lost(self, shell: _Shell) -> None:
        session = shell.session
        if session is not None and self._shells.pop(session, None) is not None:
            self._to_flush.pop(session, None)
            self._totals.ended += session.stats().counters
            left = self._per_ip.pop(shell.peer_ip, 1) - 1
            if left:
                self._per_ip[shell.peer_ip] = left


def freeze_startup_heap() -> None:
    """For a process that is the broker (``mledger standalone``, ``python -m mledger.protocol``),
    called once it listens: collect, then move every object alive after start-up (modules,
    classes, the broker's tables) out of the garbage collector's generations (``gc.freeze``),
    so the collections that per-message garbage triggers no longer walk them (about 10 % less
    server CPU per produced message, measured with ``bench_protocol.py``). Never called by the
    library: an embedding program keeps its own collector settings."""
    gc.collect()
    gc.freeze()


def stop_event_on_signals() -> asyncio.Event:
    """For a process that is the broker, called on its running loop: an event that SIGTERM and
    SIGINT set instead of ending the process, so it can stop its servers cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
