"""The state of a protocol session and the helpers its command handlers share.

:class:`SessionBase` holds what one client connection has open (producers, consumers, SENDs
waiting for their receipts, counters) and the replies and checks every group of handlers
uses; the handlers themselves are in :mod:`~mledger.protocol._producing`,
:mod:`~mledger.protocol._consuming` and :mod:`~mledger.protocol._session`, whose
:class:`~mledger.protocol._session.Session` puts the groups together. Loop thread only.
"""

from __future__ import annotations

from typing import Any

from ..broker import PartitionedTopic, Topic
from ..broker._names import TopicName
from ..broker._tenants import TenantNotFoundError
from ..codec.proto import PulsarApi_pb2 as api
from ..core._errors import NotAllowedError
from ..core._ints import UINT64_MASK
from ._connection import Connection, ConnectionState
from ._convert import server_error_code
from ._handles import ConsumerHandle, ProducerHandle, Send, SessionHost
from ._nonpersistent import NonPersistentEndpoints

__all__ = ["SessionBase"]

_T = api.BaseCommand


class SessionBase:
    """A session's state and shared helpers (see the module docstring)."""

    def __init__(
        self, host: SessionHost[Any], peer: str = "", peer_subject: Any = None, address: str | None = None
    ) -> None:
        self._host = host
        self.peer = peer
        self.peer_subject = peer_subject
        """The verified TLS client certificate's subject (``getpeercert()["subject"]``), None
        without one: what the ``tls`` authentication provider takes the role from."""
        self.address = address
        """The client's IP address (failed password checks are counted by it); None unknown."""
        self.authenticating = False
        """The CONNECT's password is being checked (the keep-alive leaves the connection be)."""
        self.connection = Connection(host.config.max_message_size)
        self.role: str | None = None
        self._producers: dict[int, ProducerHandle] = {}
        self._consumers: dict[int, ConsumerHandle] = {}
        self._pending_sends: dict[int, list[Send]] = {}
        self.paused = False
        self.closed = False
        self.inflight_sends = 0
        self.messages_in = 0
        self.messages_out = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.checksum_errors = 0
        self.validation_errors = 0
        self._np = NonPersistentEndpoints(self)

    @property
    def host(self) -> SessionHost[Any]:
        """The server driving this session."""
        return self._host

    def _wake(self) -> None:
        self._host.flush_soon(self)

    def wake(self) -> None:
        """Write what was queued at the end of this loop turn."""
        self._wake()

    def authorize_topic(self, topic: TopicName, operation: str) -> None:
        """``PermissionDeniedError`` unless this client's role may do ``operation`` on ``topic``."""
        auth = self._host.auth
        if auth is not None:
            auth.authorize(self.role, operation, topic)

    def error_code(self, exc: BaseException) -> api.ServerError.ValueType:
        """The protocol's error code for a broker error (the ``server_error`` it carries)."""
        return server_error_code(exc)

    def send_error(self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str) -> None:
        """Queue SEND_ERROR for one SEND."""
        self._send_error(producer_id, sequence_id, error, message)

    def send_success(self, request_id: int) -> None:
        """Queue SUCCESS for ``request_id``."""
        self._send_success(request_id)

    def producer_id_in_use(self, body: api.CommandProducer) -> bool:
        """Answer a PRODUCER whose id this connection already uses, on any topic, persistent or
        not, and return True; False when the id is free (then nothing was sent).

        Pulsar's ``ServerCnx.handleProducer`` keeps one map of producer futures per connection
        and never compares topics: a producer already made gets PRODUCER_SUCCESS again (its
        name and schema version, last sequence id -1, ready: "Producer with the same id is
        already created"); one still waiting for exclusive access (its future pending) gets
        ``ServiceNotReady`` "Producer is already present on the connection". A failed creation
        is never kept here (each failure is answered and forgotten at once), so Pulsar's third
        case cannot arise. Raises ``InvalidTopicNameError`` for a bad topic name first, as
        Pulsar validates the name before it looks at the id."""
        producer_id = body.producer_id
        handle = self._producers.get(producer_id)
        schema_version: bytes | None = None
        if handle is not None and not handle.closed:
            name = handle.name
            schema_version = handle.schema_version
        else:
            found = self._np.producer_name(producer_id)
            if found is None:
                return False
            name = found
        TopicName.parse(body.topic, any_domain=True)
        if handle is not None and not handle.ready:
            self.connection.send_error(
                body.request_id, api.ServiceNotReady, "Producer is already present on the connection"
            )
            return True
        self.send_producer_success(body.request_id, name, schema_version=schema_version)
        return True

    def send_producer_success(
        self,
        request_id: int,
        name: str,
        last_sequence_id: int = -1,
        ready: bool = True,
        schema_version: bytes | None = None,
    ) -> None:
        """Queue PRODUCER_SUCCESS (the one place it is built, for producers of either kind)."""
        success = api.CommandProducerSuccess(
            request_id=request_id, producer_name=name, last_sequence_id=last_sequence_id, producer_ready=ready
        )
        if schema_version is not None:
            success.schema_version = schema_version
        self.connection.send(api.BaseCommand(type=_T.PRODUCER_SUCCESS, producer_success=success))

    def consumer_id_in_use(self, body: api.CommandSubscribe) -> bool:
        """Answer a SUBSCRIBE whose id this connection already uses, on any topic or
        subscription, persistent or not, and return True; False when the id is free.

        Pulsar's ``ServerCnx.handleSubscribe`` keeps one map of consumer futures per connection
        and compares neither topic nor subscription: a consumer already made gets SUCCESS
        ("Consumer with the same id is already created"). A consumer here is made within its
        SUBSCRIBE and a failed one is never kept, so Pulsar's pending (``ServiceNotReady``) and
        failed cases cannot arise. Raises ``InvalidTopicNameError`` for a bad topic name first."""
        consumer_id = body.consumer_id
        if consumer_id not in self._consumers and not self._np.has_consumer(consumer_id):
            return False
        TopicName.parse(body.topic, any_domain=True)
        self._send_success(body.request_id)
        return True

    # -- helpers -----------------------------------------------------------------------------
    def _send_error(self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str) -> None:
        self.connection.send(
            api.BaseCommand(
                type=_T.SEND_ERROR,
                send_error=api.CommandSendError(
                    producer_id=producer_id, sequence_id=sequence_id & UINT64_MASK, error=error, message=message
                ),
            )
        )

    def _send_success(self, request_id: int) -> None:
        self.connection.send(api.BaseCommand(type=_T.SUCCESS, success=api.CommandSuccess(request_id=request_id)))

    def _open_partition(self, topic: str) -> Topic:
        found = self._host.broker.open_topic(topic)
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError(
                f"{topic} is a partitioned topic: clients open its partitions ({topic}-partition-<i>)"
            )
        return found

    def _authorize(self, topic: str, operation: str, subscription: str | None = None) -> None:
        auth = self._host.auth
        if auth is not None:
            self._check_tenant(TopicName.parse(topic, any_domain=True))
            auth.authorize(self.role, operation, topic, subscription)

    def _authorize_lookup(self, topic: str) -> None:
        auth = self._host.auth
        if auth is not None:
            # any domain: a lookup of a non-persistent topic is checked like a persistent one's
            name = TopicName.parse(topic, any_domain=True)
            self._check_tenant(name)
            auth.authorize_lookup(self.role, name)

    def _check_tenant(self, name: TopicName) -> None:
        """Pulsar's authorization reads the topic's tenant first (``validateTenantAdminAccess``):
        an unknown tenant is 404 "Tenant does not exist", which clients get as ``TopicNotFound``,
        before any permission is checked (so a role with no grant there learns no more)."""
        if not self._host.broker.tenants.exists(name.tenant):
            raise TenantNotFoundError(f"Tenant does not exist: {name.tenant}")

    @property
    def is_connected(self) -> bool:
        """Whether the handshake completed and the connection is open."""
        return self.connection.state is ConnectionState.CONNECTED and not self.closed

    @property
    def producer_count(self) -> int:
        return len(self._producers) + self._np.producer_count

    @property
    def consumer_count(self) -> int:
        return len(self._consumers) + self._np.consumer_count
