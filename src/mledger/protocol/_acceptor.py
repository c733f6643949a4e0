"""Accepting connections within the process's file descriptors: the listening sockets of the
protocol server and of the admin REST server.

Theory of operation
-------------------
asyncio's servers accept whenever a listening socket is readable. When the process runs out of
file descriptors, ``accept()`` fails with ``EMFILE`` and the loop logs a traceback per attempt
while every port, the admin port included, stays locked out; asyncio has no way to stop
accepting for a while. An :class:`Acceptor` accepts itself instead (``loop.add_reader`` on the
listening socket, then ``loop.connect_accepted_socket`` builds the transport, TLS included) and
stops accepting -- new connections wait in the kernel's backlog meanwhile -- while any of these
holds:

* fewer file descriptors are free than its floor (:class:`Descriptors`, one per process): a
  protocol port keeps the whole reserve (:func:`reserve_for`) free, the admin port half of it,
  so an operator's REST call still gets in when idle clients fill the protocol ports;
* its owner's ``gate`` names a reason (the admin server at ``maxHttpServerConnections``, as
  Jetty's ``ConnectionLimit`` stops accepting at its limit);
* ``max_tls_handshakes`` TLS handshakes are in progress: each holds asyncio's 256 KiB TLS buffer
  until it completes, fails or times out after ``tls_handshake_timeout`` seconds;
* ``accept()`` itself failed for want of resources (``EMFILE``, ``ENFILE``, ``ENOBUFS``,
  ``ENOMEM``).

While stopped for want of descriptors, by its gate or by ``EMFILE``, it checks again every
quarter second; it logs one line when such an episode starts and one when a connection is
accepted again, however long the episode and however often it checked. Reaching the handshake
limit is flow control, not an episode: the next handshake to end resumes accepting. The timers
are the loop's (real time), never a broker's test clock.

:func:`raise_descriptor_limit` raises the soft ``RLIMIT_NOFILE`` to the hard one; the processes
that are a broker (``mledger standalone``, ``python -m mledger.protocol``,
``mledger-admin serve``) call it at start. :func:`fit_to_descriptors` lowers a connection
limit's default (Pulsar's, sized for a JVM with 1M descriptors) to a quarter of what the
limit leaves beside the reserve.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable

from ..core import format_address

try:
    import resource
except ImportError:  # pragma: no cover - Windows: no descriptor limit to read
    resource = None  # type: ignore[assignment]

__all__ = [
    "DESCRIPTORS",
    "Descriptors",
    "Acceptor",
    "fit_to_descriptors",
    "listening_socket",
    "raise_descriptor_limit",
    "reserve_for",
]

log = logging.getLogger(__name__)

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_ACCEPTS_PER_WAKE = 64
_RETRY_SECONDS = 0.25
_RECOUNT_SECONDS = 1.0
_UNLIMITED = 1 << 30
_FD_DIRS = ("/proc/self/fd", "/dev/fd")


def reserve_for(limit: int) -> int:
    """The descriptors kept free under a soft limit of ``limit``: an eighth of it, at least 32
    and at most 1024 (256 -> 32, 1024 -> 128, 65536 and more -> 1024).

    >>> reserve_for(256), reserve_for(1024), reserve_for(1 << 20)
    (32, 128, 1024)
    """
    return max(32, min(1024, limit // 8))


def fit_to_descriptors(pulsar_default: int, limit: int | None = None) -> int:
    """``pulsar_default`` lowered to a quarter of the descriptors the soft limit (``limit``;
    default: the hard limit, which the broker raises the soft one to) leaves beside the reserve,
    and at least 8: Pulsar's ``maxHttpServerConnections`` of 2048 under a 1,024-descriptor limit
    would let idle HTTP connections take every descriptor the protocol ports need.

    >>> fit_to_descriptors(2048, 1024), fit_to_descriptors(2048, 1 << 20)
    (224, 2048)
    """
    if limit is None:
        limit = _hard_limit()
    return min(pulsar_default, max(8, (limit - reserve_for(limit)) // 4))


def _hard_limit() -> int:
    if resource is None:  # pragma: no cover
        return _UNLIMITED
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return _UNLIMITED if hard == resource.RLIM_INFINITY else int(hard)


def raise_descriptor_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (an unlimited hard limit: 2^20); returns
    the soft limit now. Never lowers it; a refusal (macOS caps it below an unlimited hard
    limit) keeps it, logged at INFO."""
    if resource is None:  # pragma: no cover
        return _UNLIMITED
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.info("cannot raise the file descriptor limit from %d to %d: %s", soft, target, exc)
    return _UNLIMITED if soft == resource.RLIM_INFINITY else int(soft)


class Descriptors:
    """The process's file descriptors: the soft limit, the reserve and whether a connection may
    take one more (:meth:`has_free`). Thread-safe (the protocol server's loop and the admin
    server's thread ask the one :data:`DESCRIPTORS`).

    The open descriptors are counted exactly (a listing of ``/proc/self/fd``, O(open
    descriptors)) at most once a second while many are free, and at every check once fewer than
    twice the floor are; in between, each accepted connection counts as one less free. Where
    there is nothing to list, every check answers yes (``EMFILE`` still pauses accepting)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free = 0
        self._taken = 0
        self._counted_at = -_RECOUNT_SECONDS

    @property
    def limit(self) -> int:
        """The soft ``RLIMIT_NOFILE`` now."""
        if resource is None:  # pragma: no cover
            return _UNLIMITED
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return _UNLIMITED if soft == resource.RLIM_INFINITY else int(soft)

    @property
    def reserve(self) -> int:
        """:func:`reserve_for` the soft limit now."""
        return reserve_for(self.limit)

    def free(self) -> int | None:
        """Descriptors free now, counted (None where they cannot be counted)."""
        for folder in _FD_DIRS:
            try:
                return self.limit - len(os.listdir(folder))
            except OSError:
                continue
        return None

    def has_free(self, floor: int) -> bool:
        """Whether one more descriptor can be taken with more than ``floor`` left free."""
        with self._lock:
            now = time.monotonic()
            estimate = self._free - self._taken
            if estimate < 2 * floor or now - self._counted_at > _RECOUNT_SECONDS:
                counted = self.free()
                if counted is None:
                    return True
                self._free, self._taken, self._counted_at = counted, 0, now
                estimate = counted
            return estimate > floor

    def took(self) -> None:
        """Count an accepted connection's descriptor until the next count."""
        with self._lock:
            self._taken += 1


DESCRIPTORS = Descriptors()
"""The one :class:`Descriptors` of the process."""


def listening_socket(host: str, port: int, backlog: int, what: str) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (port 0: a free one), non-blocking.

    Made with ``IPPROTO_TCP`` named: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only
    on sockets whose protocol says TCP, and accepted connections inherit it; without it a
    response written in two parts waits for the client's delayed ACK, about 40 ms on Linux.
    ``OSError`` names ``what`` (the server) and the address when it cannot listen."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:  # the socket's own message names neither the address nor the server
        sock.close()
        why = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
        raise OSError(exc.errno, f"{what}: cannot listen on {format_address(host, port)}: {why}") from exc
    except BaseException:
        sock.close()
        raise
    return sock


class Acceptor:
    """Accepts connections on ``sock`` into protocols made by ``factory`` (see the module
    docstring); call :meth:`start` and :meth:`close` on the loop that serves them.

    ``tls``: the server context of a TLS port; ``tls_handshake_timeout`` (seconds) and
    ``max_tls_handshakes`` bound its handshakes. ``reserve_share``: the part of the descriptor
    reserve this port keeps free (1: all of it; the admin port 0.5). ``gate``: called before
    each accept; a reason (text) stops accepting until it returns None. ``name`` goes into the
    log lines.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.BaseProtocol],
        *,
        name: str,
        tls: ssl.SSLContext | None = None,
        tls_handshake_timeout: float = 5.0,
        max_tls_handshakes: int = 64,
        reserve_share: float = 1.0,
        gate: Callable[[], str | None] | None = None,
    ) -> None:
        self.sock = sock
        self.name = name
        self.handshakes = 0
        """TLS handshakes in progress."""
        self.handshake_failures = 0
        """TLS handshakes that failed or timed out, since the start."""
        self.pauses = 0
        """Times accepting stopped (episodes), since the start."""
        self._factory = factory
        self._tls = tls
        self._tls_options = (
            {"ssl": tls, "ssl_handshake_timeout": tls_handshake_timeout, "ssl_shutdown_timeout": tls_handshake_timeout}
            if tls is not None
            else {}
        )
        self._max_handshakes = max_tls_handshakes
        self._reserve_share = reserve_share
        self._gate = gate
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False
        self._stopped_since: float | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.sock.getsockname()[1])

    @property
    def accepting(self) -> bool:
        """Whether it accepts now (False while an episode lasts)."""
        return self._stopped_since is None and not self._closed

    def start(self) -> None:
        """Start accepting (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._read(True)

    async def close(self) -> None:
        """Stop accepting, close the socket and drop the handshakes in progress. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._read(False)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.sock.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- accepting ---------------------------------------------------------------------------
    def _read(self, on: bool) -> None:
        if on == self._reading or self._loop is None:
            return
        self._reading = on
        if on:
            self._loop.add_reader(self.sock, self._accept)
        else:
            self._loop.remove_reader(self.sock)

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_WAKE):
            if self._tls is not None and self.handshakes >= self._max_handshakes:
                self._read(False)  # flow control, not an episode: the next handshake to end resumes
                return
            why = self._why_not()
            if why is not None:
                self._stop(why)
                return
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                self._accepted_again()
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._stop(f"accept() failed: {os.strerror(exc.errno or 0)}")
                    return
                log.debug("%s: accept() failed: %s", self.name, exc)  # the client left first (ECONNABORTED)
                continue
            DESCRIPTORS.took()
            self._accepted_again()
            self._connect(conn)

    def _why_not(self) -> str | None:
        if self._gate is not None:
            why = self._gate()
            if why is not None:
                return why
        floor = int(DESCRIPTORS.reserve * self._reserve_share)
        if not DESCRIPTORS.has_free(floor):
            return f"{floor} or fewer file descriptors free (limit {DESCRIPTORS.limit})"
        return None

    def _stop(self, why: str) -> None:
        self._read(False)
        if self._stopped_since is None:
            self._stopped_since = time.monotonic()
            self.pauses += 1
            log.warning("%s stops accepting connections: %s; new ones wait in the backlog", self.name, why)
        if self._retry is None and self._loop is not None:
            self._retry = self._loop.call_later(_RETRY_SECONDS, self._try_again)

    def _try_again(self) -> None:
        self._retry = None
        if self._closed:
            return
        why = self._why_not()
        if why is not None:
            self._stop(why)
        else:
            self._read(True)  # the episode ends with the next accept() that does not fail

    def _accepted_again(self) -> None:
        if self._stopped_since is not None:
            log.warning("%s accepts connections again after %.1f s", self.name, time.monotonic() - self._stopped_since)
            self._stopped_since = None

    # -- connecting --------------------------------------------------------------------------
    def _connect(self, conn: socket.socket) -> None:
        assert self._loop is not None
        if self._tls is not None:
            self.handshakes += 1
        task = self._loop.create_task(self._start_transport(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start_transport(self, conn: socket.socket) -> None:
        assert self._loop is not None
        try:
            await self._loop.connect_accepted_socket(self._factory, conn, **self._tls_options)  # type: ignore[arg-type]
        except OSError as exc:  # a failed or timed-out handshake (ssl.SSLError is one), a reset
            if self._tls is not None:
                self.handshake_failures += 1
            log.debug("%s: a connection ended before it started: %r", self.name, exc)
        finally:
            if self._tls is not None:
                self.handshakes -= 1
                if not self._reading and self._retry is None and not self._closed:
                    self._read(True)  # stopped by the handshake limit only
