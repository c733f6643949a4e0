"""Capture what clients send a broker, and feed it to another: runs that repeat exactly.

Determinism is defined at the protocol layer: a deterministic broker
(:class:`~mledger.protocol.EmbeddedBroker` with ``deterministic=True`` and a ``seed``) given the
same sequence of client commands answers with the same sequence of frames and records the same
rows. This module makes that checkable:

* :class:`CapturingProxy` sits between real clients and a broker and keeps, in order, every
  read it takes from each client connection (:class:`ClientRead`; a close is a read of no bytes);
* :func:`replay_reads` feeds those reads, one at a time, into a running broker over in-memory
  connections (the server's own connection code, no sockets), lets the broker finish what each
  read started before the next (its writes, dispatches, hand-overs: ``ProtocolServer.settled``),
  and returns the frames the broker wrote, in order (:class:`BrokerFrame`).

So one session of a real client, captured once, replays into any number of fresh brokers; two
replays into deterministic brokers with one seed give equal frames (and, recorded, equal rows).
The replay knows nothing of time: what the clients stamped (publish times, ``deliver_at``) is
in the captured bytes, and the broker's clock moves only when the caller advances it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from ._framing import FrameDecoder

if TYPE_CHECKING:
    from ._embedded import EmbeddedBroker

__all__ = ["BrokerFrame", "CapturingProxy", "ClientRead", "replay_reads"]

_SETTLE_CALLS = 10_000
"""At most this many loop round trips for the broker to finish what one read started."""


class ClientRead(NamedTuple):
    """Bytes a broker read from a client connection (``connection`` numbers them in the order
    they opened, from 0); ``data`` empty: the client closed the connection."""

    connection: int
    data: bytes


class BrokerFrame(NamedTuple):
    """One frame a broker wrote to a connection: its serialized command and payload (None for a
    frame without one)."""

    connection: int
    command: bytes
    payload: bytes | None


class CapturingProxy:
    """A TCP proxy that keeps every read it takes from each client, in the order it took them.
    Its port is bound at once (:attr:`port`, for the broker to advertise); :meth:`start` points it
    at the broker (host, port) and starts accepting; :meth:`close` ends it (``with`` works too). A broker the clients look topics up on must advertise the
    proxy's URL (``ProtocolConfig.advertised_listeners``), or they bypass it after the lookup.
    Thread-safe; one thread per direction of each connection.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._target: tuple[str, int] = ("", 0)
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        """The port clients connect to."""
        self._lock = threading.Lock()
        self._reads: list[ClientRead] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._connections = 0

    def start(self, target: tuple[str, int]) -> CapturingProxy:
        """Forward connections to ``target`` (host, port) from now on; returns self."""
        self._target = target
        self._spawn(self._accept)
        return self

    def reads(self) -> list[ClientRead]:
        """What the clients sent so far, in order (a copy)."""
        with self._lock:
            return list(self._reads)

    def close(self) -> None:
        """Stop accepting and close every connection; waits for the proxy's threads (5 s each)."""
        for sock in [self._listener, *self._sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> CapturingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name="mledger-capture", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self._target)
            with self._lock:
                index = self._connections
                self._connections += 1
                self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream, index)
            self._spawn(self._pump, upstream, client, None)

    def _pump(self, source: socket.socket, sink: socket.socket, index: int | None) -> None:
        """Copy ``source`` to ``sink``; ``index``: a client's connection, whose reads are kept."""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if index is not None:
                with self._lock:
                    self._reads.append(ClientRead(index, data))
            if not data:
                try:
                    sink.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                sink.sendall(data)
            except OSError:
                return


class _MemoryTransport(asyncio.Transport):
    """One replayed connection's transport: what the broker writes is kept, nothing is sent."""

    def __init__(self, connection: int, protocol: asyncio.Protocol, written: list[tuple[int, bytes]]) -> None:
        super().__init__()
        self._connection = connection
        self.protocol = protocol
        self._written = written
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return ("127.0.0.1", 10_000 + self._connection)  # a fixed peer: it shows in stats answers
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._written.append((self._connection, bytes(data)))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def replay_reads(embedded: EmbeddedBroker, reads: Iterable[ClientRead]) -> list[BrokerFrame]:
    """Feed ``reads`` into ``embedded``'s protocol server over in-memory connections, one read
    at a time, each once the broker finished what the one before started; then close the
    connections still open. Returns the frames the broker wrote, in the order it wrote them.

    Blocks until done. Raises ``RuntimeError`` when the broker does not settle after a read
    (work it keeps scheduling) or is not running. The frames name the broker's advertised URL in
    LOOKUP answers: give every broker compared the same one (``ProtocolConfig.advertised_listeners``).
    """
    server = embedded.server
    written: list[tuple[int, bytes]] = []
    transports: dict[int, _MemoryTransport] = {}

    def feed(read: ClientRead) -> None:
        transport = transports.get(read.connection)
        if transport is None:
            protocol = server.new_connection()
            assert isinstance(protocol, asyncio.Protocol)
            transport = transports[read.connection] = _MemoryTransport(read.connection, protocol, written)
            protocol.connection_made(transport)
        if read.data:
            if not transport.is_closing():
                transport.protocol.data_received(read.data)
        else:
            transport.close()

    def settle() -> None:
        quiet = 0
        for _ in range(_SETTLE_CALLS):
            quiet = quiet + 1 if embedded.call(lambda: server.settled) else 0
            if quiet == 2:  # and one more loop turn: callbacks scheduled by the last ones
                return
        raise RuntimeError(f"the broker kept scheduling work for {_SETTLE_CALLS} loop turns after one read")

    for read in reads:
        embedded.call(partial(feed, read))
        settle()
    for connection in sorted(transports):
        embedded.call(transports[connection].close)
        settle()
    decoders: dict[int, FrameDecoder] = {}
    frames: list[BrokerFrame] = []
    for connection, data in written:
        decoder = decoders.setdefault(connection, FrameDecoder())
        frames += [BrokerFrame(connection, command, payload) for command, payload in decoder.feed(data)]
    return frames
