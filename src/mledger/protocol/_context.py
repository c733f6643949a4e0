"""What every command group of a protocol session is given: its state, its host, and the
checks and replies the groups share.

A :class:`~mledger.protocol._session.Session` is put together from parts, each with one job:
the :class:`~mledger.protocol._session_state.SessionState` owns what the connection has open
and counted; the command groups (:class:`~mledger.protocol._producing.ProducerCommands`,
:class:`~mledger.protocol._consuming.ConsumerCommands`,
:class:`~mledger.protocol._nonpersistent.NonPersistentCommands` and the session's own
handshake and lookup handlers) turn commands into broker calls. Each group is given one
:class:`CommandContext`: the state (read through its public attributes, changed through its
methods), the :class:`~mledger.protocol._handles.SessionHost`, and the helpers below. Loop
thread only.
"""

from __future__ import annotations

from typing import Any

from ..broker import ClientInfo, PartitionedTopic, TenantNotFoundError, Topic, TopicName
from ..codec.proto import PulsarApi_pb2 as api
from ..core import UINT64_MASK, NotAllowedError
from ._handles import SessionHost
from ._session_state import SessionState

__all__ = ["CommandContext", "CommandGroup"]

_T = api.BaseCommand


class CommandContext:
    """One session's state and host, and the checks and replies its command groups share (see
    the module docstring)."""

    __slots__ = ("_session", "connection", "host", "state")

    def __init__(self, host: SessionHost[Any], state: SessionState, session: object) -> None:
        self.host = host
        """The server driving the session."""
        self.state = state
        """The session's state."""
        self.connection = state.connection
        """The state's connection (where every reply is queued)."""
        self._session = session

    @property
    def session(self) -> object:
        """The session the groups serve (what the host's per-session calls take)."""
        return self._session

    def wake(self) -> None:
        """Write what was queued at the end of this loop turn."""
        self.host.flush_soon(self._session)

    # -- checks ----------------------------------------------------------------------------------
    def authorize(self, topic: str, operation: str, subscription: str | None = None) -> None:
        """``PermissionDeniedError`` unless this client's role may do ``operation`` on the
        persistent ``topic`` (``TopicNotFound`` first for an unknown tenant)."""
        auth = self.host.auth
        if auth is not None:
            self._check_tenant(TopicName.parse(topic, any_domain=True))
            auth.authorize(self.state.role, operation, topic, subscription)

    def client_info(self, client_id: int, access_mode: str = "Shared") -> ClientInfo:
        """What the stats report about this connection's producer or consumer ``client_id``."""
        return ClientInfo(self.state.peer or None, self.connection.client_version or None, client_id, access_mode)

    def authorize_topic(self, topic: TopicName, operation: str) -> None:
        """``PermissionDeniedError`` unless this client's role may do ``operation`` on ``topic``
        (a non-persistent topic: no tenant check)."""
        auth = self.host.auth
        if auth is not None:
            auth.authorize(self.state.role, operation, topic)

    def authorize_lookup(self, topic: str) -> None:
        """``PermissionDeniedError`` unless this client's role may look ``topic`` up."""
        auth = self.host.auth
        if auth is not None:
            # any domain: a lookup of a non-persistent topic is checked like a persistent one's
            name = TopicName.parse(topic, any_domain=True)
            self._check_tenant(name)
            auth.authorize_lookup(self.state.role, name)

    def _check_tenant(self, name: TopicName) -> None:
        """Pulsar's authorization reads the topic's tenant first (``validateTenantAdminAccess``):
        an unknown tenant is 404 "Tenant does not exist", which clients get as ``TopicNotFound``,
        before any permission is checked (so a role with no grant there learns no more)."""
        if not self.host.broker.tenants.exists(name.tenant):
            raise TenantNotFoundError(f"Tenant does not exist: {name.tenant}")

    def open_partition(self, topic: str) -> Topic:
        """The persistent topic ``topic``, opened; ``NotAllowedError`` for a partitioned topic's
        parent (clients open its partitions)."""
        found = self.host.broker.open_topic(topic)
        if isinstance(found, PartitionedTopic):
            raise NotAllowedError(
                f"{topic} is a partitioned topic: clients open its partitions ({topic}-partition-<i>)"
            )
        return found

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
        state = self.state
        handle = state.producers.get(producer_id)
        schema_version: bytes | None = None
        if handle is not None and not handle.closed:
            name = handle.name
            schema_version = handle.schema_version
        else:
            np_handle = state.np_producers.get(producer_id)
            if np_handle is None:
                return False
            name = np_handle.producer.name
        TopicName.parse(body.topic, any_domain=True)
        if handle is not None and not handle.ready:
            self.connection.send_error(
                body.request_id, api.ServiceNotReady, "Producer is already present on the connection"
            )
            return True
        self.send_producer_success(body.request_id, name, schema_version=schema_version)
        return True

    def consumer_id_in_use(self, body: api.CommandSubscribe) -> bool:
        """Answer a SUBSCRIBE whose id this connection already uses, on any topic or
        subscription, persistent or not, and return True; False when the id is free.

        Pulsar's ``ServerCnx.handleSubscribe`` keeps one map of consumer futures per connection
        and compares neither topic nor subscription: a consumer already made gets SUCCESS
        ("Consumer with the same id is already created"). A consumer here is made within its
        SUBSCRIBE and a failed one is never kept, so Pulsar's pending (``ServiceNotReady``) and
        failed cases cannot arise. Raises ``InvalidTopicNameError`` for a bad topic name first."""
        consumer_id = body.consumer_id
        if consumer_id not in self.state.consumers and consumer_id not in self.state.np_consumers:
            return False
        TopicName.parse(body.topic, any_domain=True)
        self.send_success(body.request_id)
        return True

    # -- replies ---------------------------------------------------------------------------------
    def send_success(self, request_id: int) -> None:
        """Queue SUCCESS for ``request_id``."""
        self.connection.send(api.BaseCommand(type=_T.SUCCESS, success=api.CommandSuccess(request_id=request_id)))

    def send_error(self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str) -> None:
        """Queue SEND_ERROR for one SEND."""
        self.connection.send(
            api.BaseCommand(
                type=_T.SEND_ERROR,
                send_error=api.CommandSendError(
                    producer_id=producer_id, sequence_id=sequence_id & UINT64_MASK, error=error, message=message
                ),
            )
        )

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


class CommandGroup:
    """A group of a session's command handlers: what each group holds of its session (the
    context, its state and connection) and the ``host`` its handles reach the loop through."""

    __slots__ = ("_connection", "_context", "_state")

    def __init__(self, context: CommandContext) -> None:
        self._context = context
        self._state = context.state
        self._connection = context.connection

    @property
    def host(self) -> SessionHost[Any]:
        """The server driving the session."""
        return self._context.host
