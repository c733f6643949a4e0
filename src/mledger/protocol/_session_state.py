"""A protocol session's state, with one owner: what one client connection has open, what it
waits for, and what it counted.

Theory of operation
-------------------
:class:`SessionState` holds what Pulsar's ``ServerCnx`` keeps per connection: the handshake's
state machine (its :class:`~mledger.protocol.Connection`, whose states move only
through ``TRANSITIONS``), the role the CONNECT authenticated, the producers and consumers by id
(persistent and non-persistent in one id space, as ``ServerCnx`` keeps one map of each), the
SENDs waiting to be published, and the counters. The session's command groups
(:mod:`~mledger.protocol._producing`, :mod:`~mledger.protocol._consuming`,
:mod:`~mledger.protocol._nonpersistent` and :class:`~mledger.protocol._session.Session` itself)
are each given this object, as h11's ``Connection`` is given its ``ConnectionState``: they
read its public attributes and change it only through its methods; none of them reads another
object's private fields.

The maps by id are read-only views (``Mapping``): ``add_*`` and ``remove_*`` change them. The
counters are private; :meth:`SessionState.stats` returns a frozen :class:`SessionStats`, which
the server sums over its sessions (:class:`SessionCounters` add up with ``+``). Loop thread
only, except :meth:`~SessionState.stats`, which a metrics scrape may call from any thread (a
snapshot of ints, consistent enough).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._connection import Connection, ConnectionState
from ._handles import ConsumerHandle, NonPersistentConsumerHandle, NonPersistentProducerHandle, ProducerHandle, Send

__all__ = ["SessionCounters", "SessionState", "SessionStats"]


@dataclass(frozen=True, slots=True)
class SessionCounters:
    """What a session counted since it opened: the figures of
    :class:`~mledger.protocol.ProtocolStats` of the same names, for one connection (messages
    and entry bytes received from producers and delivered to consumers, SENDs refused with
    ChecksumError, messages its consumers could not validate). Counters of several sessions
    add up with ``+``."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    checksum_errors: int = 0
    validation_errors: int = 0

    def __add__(self, other: SessionCounters) -> SessionCounters:
        return SessionCounters(
            self.messages_in + other.messages_in,
            self.bytes_in + other.bytes_in,
            self.messages_out + other.messages_out,
            self.bytes_out + other.bytes_out,
            self.checksum_errors + other.checksum_errors,
            self.validation_errors + other.validation_errors,
        )


@dataclass(frozen=True, slots=True)
class SessionStats:
    """A snapshot of one session, from :meth:`SessionState.stats`."""

    producers: int
    """Producers open now, persistent and non-persistent."""
    consumers: int
    """Consumers open now, persistent and non-persistent."""
    sends_in_flight: int
    """SENDs received and not answered yet (the server stops reading over
    ``max_pending_sends``)."""
    counters: SessionCounters
    """What the session counted since it opened."""


class SessionState:
    """The state of one client connection (see the module docstring). Loop thread only.

    Every operation is O(1) except :meth:`take_pending_sends` (O(1), hands the batch over),
    :meth:`stats` (O(1)) and :meth:`_check` (O(producers + consumers + pending SENDs))."""

    __slots__ = (
        "_authenticating",
        "_bytes_in",
        "_bytes_out",
        "_checksum_errors",
        "_closed",
        "_consumers",
        "_messages_in",
        "_messages_out",
        "_np_consumers",
        "_np_producers",
        "_pending_sends",
        "_producers",
        "_role",
        "_sends_in_flight",
        "_validation_errors",
        "_writing_paused",
        "address",
        "connection",
        "peer",
        "peer_subject",
    )

    def __init__(
        self, connection: Connection, peer: str = "", peer_subject: Any = None, address: str | None = None
    ) -> None:
        self.connection = connection
        """The handshake's state machine and the frames in and out (sans I/O)."""
        self.peer = peer
        """``host:port`` of the client."""
        self.peer_subject = peer_subject
        """The verified TLS client certificate's subject (``getpeercert()["subject"]``), None
        without one: what the ``tls`` authentication provider takes the role from."""
        self.address = address
        """The client's IP address (failed password checks are counted by it); None unknown."""
        self._role: str | None = None
        self._authenticating = False
        self._writing_paused = False
        self._closed = False
        self._producers: dict[int, ProducerHandle] = {}
        self._consumers: dict[int, ConsumerHandle] = {}
        self._np_producers: dict[int, NonPersistentProducerHandle] = {}
        self._np_consumers: dict[int, NonPersistentConsumerHandle] = {}
        self._pending_sends: dict[int, list[Send]] = {}
        self._sends_in_flight = 0
        self._messages_in = 0
        self._bytes_in = 0
        self._messages_out = 0
        self._bytes_out = 0
        self._checksum_errors = 0
        self._validation_errors = 0

    # -- the connection's life -----------------------------------------------------------------
    @property
    def role(self) -> str | None:
        """The role the CONNECT authenticated; None before (or without authentication)."""
        return self._role

    @property
    def authenticating(self) -> bool:
        """The CONNECT's password is being checked (the keep-alive leaves the connection be)."""
        return self._authenticating

    @property
    def writing_paused(self) -> bool:
        """The socket's write buffer is over its high mark: no permits are granted meanwhile."""
        return self._writing_paused

    @property
    def closed(self) -> bool:
        """The connection is gone."""
        return self._closed

    @property
    def is_connected(self) -> bool:
        """Whether the handshake completed and the connection is open."""
        return self.connection.state is ConnectionState.CONNECTED and not self._closed

    def start_authentication(self) -> None:
        """A pool worker checks the CONNECT's password from now on."""
        self._authenticating = True

    def end_authentication(self) -> None:
        """The CONNECT's password check is over (accepted or not)."""
        self._authenticating = False

    def authenticated(self, role: str) -> None:
        """The CONNECT's credentials were accepted: the client acts as ``role``."""
        self._role = role

    def pause_writing(self, paused: bool) -> None:
        """The socket's write buffer crossed its high (True) or low (False) mark."""
        self._writing_paused = paused

    def close(self) -> bool:
        """Mark the session and its connection closed; False when they already were."""
        if self._closed:
            return False
        self._closed = True
        self.connection.close()
        return True

    # -- producers and consumers by id ---------------------------------------------------------
    @property
    def producers(self) -> Mapping[int, ProducerHandle]:
        """The producers on persistent topics, by producer id (a live read-only view)."""
        return self._producers

    @property
    def consumers(self) -> Mapping[int, ConsumerHandle]:
        """The consumers on persistent topics, by consumer id (a live read-only view)."""
        return self._consumers

    @property
    def np_producers(self) -> Mapping[int, NonPersistentProducerHandle]:
        """The producers on non-persistent topics, by producer id (a live read-only view)."""
        return self._np_producers

    @property
    def np_consumers(self) -> Mapping[int, NonPersistentConsumerHandle]:
        """The consumers on non-persistent topics, by consumer id (a live read-only view)."""
        return self._np_consumers

    def add_producer(self, handle: ProducerHandle | NonPersistentProducerHandle) -> None:
        """Keep ``handle`` under its producer id (a free one: ``producer_id_in_use`` first)."""
        if isinstance(handle, ProducerHandle):
            self._producers[handle.producer_id] = handle
        else:
            self._np_producers[handle.producer_id] = handle

    def add_consumer(self, handle: ConsumerHandle | NonPersistentConsumerHandle) -> None:
        """Keep ``handle`` under its consumer id (a free one: ``consumer_id_in_use`` first)."""
        if isinstance(handle, ConsumerHandle):
            self._consumers[handle.consumer_id] = handle
        else:
            self._np_consumers[handle.consumer_id] = handle

    def remove_producer(self, producer_id: int) -> ProducerHandle | None:
        """Forget the persistent topic's producer ``producer_id``; the handle, None without one."""
        return self._producers.pop(producer_id, None)

    def remove_consumer(self, consumer_id: int) -> ConsumerHandle | None:
        """Forget the persistent topic's consumer ``consumer_id``; the handle, None without one."""
        return self._consumers.pop(consumer_id, None)

    def remove_np_producer(self, producer_id: int) -> NonPersistentProducerHandle | None:
        """Forget the non-persistent topic's producer ``producer_id``; the handle, None without one."""
        return self._np_producers.pop(producer_id, None)

    def remove_np_consumer(self, consumer_id: int) -> NonPersistentConsumerHandle | None:
        """Forget the non-persistent topic's consumer ``consumer_id``; the handle, None without one."""
        return self._np_consumers.pop(consumer_id, None)

    # -- SENDs waiting for their receipts ------------------------------------------------------
    def queue_send(self, topic_key: int, send: Send, messages: int, size: int) -> None:
        """Keep a SEND of ``messages`` messages and ``size`` entry bytes for the topic keyed
        ``topic_key`` until :meth:`take_pending_sends`; it is in flight until :meth:`sends_done`."""
        sends = self._pending_sends.get(topic_key)
        if sends is None:
            sends = self._pending_sends[topic_key] = []
        sends.append(send)
        self._sends_in_flight += 1
        self._messages_in += messages
        self._bytes_in += size

    @property
    def has_pending_sends(self) -> bool:
        """Whether SENDs wait for :meth:`take_pending_sends`."""
        return bool(self._pending_sends)

    def take_pending_sends(self) -> dict[int, list[Send]]:
        """The SENDs queued since the last call, per topic, in arrival order; they stay in flight."""
        batches = self._pending_sends
        self._pending_sends = {}
        return batches

    def sends_done(self, count: int) -> None:
        """``count`` SENDs in flight were answered (stored or refused)."""
        self._sends_in_flight -= count

    @property
    def sends_in_flight(self) -> int:
        """SENDs received and not answered yet."""
        return self._sends_in_flight

    # -- counters ------------------------------------------------------------------------------
    def count_in(self, messages: int, size: int) -> None:
        """Messages received and published at once (a non-persistent topic's SEND)."""
        self._messages_in += messages
        self._bytes_in += size

    def count_out(self, messages: int, size: int) -> None:
        """Messages written to a consumer: ``size`` bytes of entries."""
        self._messages_out += messages
        self._bytes_out += size

    def count_checksum_error(self) -> None:
        """A SEND was refused with ChecksumError."""
        self._checksum_errors += 1

    def count_validation_error(self) -> None:
        """A consumer reported a message it could not validate."""
        self._validation_errors += 1

    def stats(self) -> SessionStats:
        """A frozen snapshot of the session's figures. O(1)."""
        return SessionStats(
            producers=len(self._producers) + len(self._np_producers),
            consumers=len(self._consumers) + len(self._np_consumers),
            sends_in_flight=self._sends_in_flight,
            counters=SessionCounters(
                self._messages_in,
                self._bytes_in,
                self._messages_out,
                self._bytes_out,
                self._checksum_errors,
                self._validation_errors,
            ),
        )

    def _check(self) -> None:
        """Assert the invariants (tests call it after each step)."""
        assert not self._producers.keys() & self._np_producers.keys(), "a producer id of both kinds"
        assert not self._consumers.keys() & self._np_consumers.keys(), "a consumer id of both kinds"
        for producers in (self._producers, self._np_producers):
            assert all(h.producer_id == i for i, h in producers.items()), "a producer kept under another id"
        for consumers in (self._consumers, self._np_consumers):
            assert all(h.consumer_id == i for i, h in consumers.items()), "a consumer kept under another id"
        pending = sum(len(sends) for sends in self._pending_sends.values())
        assert self._sends_in_flight >= pending, (self._sends_in_flight, pending)
        counts = (self._messages_in, self._bytes_in, self._messages_out, self._bytes_out)
        assert min(counts + (self._checksum_errors, self._validation_errors)) >= 0
        assert not self._closed or self.connection.state is ConnectionState.CLOSED
