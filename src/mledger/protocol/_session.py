"""One client's session: Pulsar's ``ServerCnx``, commands -> broker calls -> replies.

A :class:`Session` is put together from parts, each with one job (h11's ``Connection``, which
owns a ``ConnectionState`` and looks its readers and writers up in tables):

* :class:`~mledger.protocol._session_state.SessionState`: the one owner of what the client has
  open (the connection's state machine, producers and consumers by id, SENDs waiting for their
  receipts, the role) and of the counters, private and read through ``stats()``;
* the command groups, each given the session's
  :class:`~mledger.protocol._context.CommandContext` (the state, the
  :class:`~mledger.protocol._handles.SessionHost`, shared checks and replies):
  :class:`~mledger.protocol._producing.ProducerCommands` (PRODUCER, SEND, CLOSE_PRODUCER),
  :class:`~mledger.protocol._consuming.ConsumerCommands` (SUBSCRIBE, FLOW, ACK, REDELIVER,
  SEEK, ...) and :class:`~mledger.protocol._nonpersistent.NonPersistentCommands` (the same
  commands on ``non-persistent://`` topics), and this module's handshake, lookups, topic lists
  and schemas;
* :mod:`~mledger.protocol._handles`: the host protocol, and the producer and consumer handles
  through which the broker talks back (from any thread; they hand over to the loop);
* :mod:`~mledger.protocol._convert`: wire <-> domain conversions (message ids, schemas,
  metadata) and error codes. An error's ``ServerError`` is the ``server_error`` it carries
  (:mod:`mledger.core`), never read from its message.

``Session.handle_<command>`` names the handler of every command the command table marks
handled (:mod:`mledger.protocol._commands`): the session's own, or the group's that owns it
(:class:`_Routed`). Each session binds them once into its dispatch table, and
:meth:`Session.data_received` is the one place every command the session handles passes, with
its type; everything the session answers is queued on its
:class:`~mledger.protocol.Connection` and leaves through its ``data_to_send`` (the
two places a fault-injection layer would sit). The session never touches sockets or the event
loop: the server shell feeds it bytes and drains what it queued; its host (in the server,
:class:`~mledger.protocol.ProtocolServer`) provides the broker, dispatch scheduling and
thread hand-over. How the commands map onto the broker: docs/pulsar/behaviour.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, overload

from ..broker import FaultTarget, Subscription, check_namespace_name
from ..codec.proto import PulsarApi_pb2 as api
from ..core import MLedgerError, NotFoundError, UnauthenticatedError
from ._commands import COMMANDS
from ._config import lookup_urls
from ._connection import Connection, Request
from ._consuming import PERMIT_WINDOW as PERMIT_WINDOW, ConsumerCommands
from ._context import CommandContext
from ._convert import schema_info, schema_message, schema_version, schema_version_bytes, server_error_code
from ._handles import (
    ConsumerHandle as ConsumerHandle,
    ProducerHandle as ProducerHandle,
    SessionHost as SessionHost,
)
from ._nonpersistent import NonPersistentCommands
from ._producing import ProducerCommands
from ._session_state import SessionState, SessionStats

if TYPE_CHECKING:  # the fault filter is loaded when a fault first concerns a session
    from ._faulting import FaultFilter

__all__ = ["PERMIT_WINDOW", "ConsumerHandle", "ProducerHandle", "Session", "SessionHost"]

_T = api.BaseCommand
_SEND_CHUNK = 64
"""SENDs handled between two flushes of their receipts within one long read."""

Handler = Callable[[Request], None]
"""A command handler, bound to its session's part."""


class _Routed:
    """``Session.handle_<command>`` for a command a command group handles: on a session, the
    group's bound handler of the same name (a row of the routing table)."""

    __slots__ = ("group", "name")

    def __init__(self, group: str) -> None:
        self.group = group
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, session: None, owner: type | None = None) -> _Routed: ...

    @overload
    def __get__(self, session: Session, owner: type | None = None) -> Handler: ...

    def __get__(self, session: Session | None, owner: type | None = None) -> _Routed | Handler:
        if session is None:
            return self
        handler: Handler = getattr(getattr(session, self.group), self.name)
        return handler


class Session:
    """The server side of one client connection (see the module docstring). Driven by the
    event loop thread only."""

    def __init__(
        self, host: SessionHost[Session], peer: str = "", peer_subject: Any = None, address: str | None = None
    ) -> None:
        self._host = host
        state = self._state = SessionState(Connection(host.config.max_message_size), peer, peer_subject, address)
        context = self._context = CommandContext(host, state, self)
        self._np = NonPersistentCommands(context)
        self._producing = ProducerCommands(context, self._np)
        self._consuming = ConsumerCommands(context, self._np)
        self._plain: dict[int, Handler] = {type_: getattr(self, name) for type_, name in _HANDLER_NAMES.items()}
        self._handlers = self._plain
        self._filter: FaultFilter | None = None
        if host.broker.faults.command_kinds:
            self.faults_changed()

    # -- the routing table: the command groups' handlers -----------------------------------------
    handle_producer = _Routed("_producing")
    handle_send = _Routed("_producing")
    handle_close_producer = _Routed("_producing")
    handle_subscribe = _Routed("_consuming")
    handle_flow = _Routed("_consuming")
    handle_ack = _Routed("_consuming")
    handle_redeliver_unacknowledged_messages = _Routed("_consuming")
    handle_seek = _Routed("_consuming")
    handle_get_last_message_id = _Routed("_consuming")
    handle_unsubscribe = _Routed("_consuming")
    handle_close_consumer = _Routed("_consuming")
    handle_consumer_stats = _Routed("_consuming")

    # -- what the shell reads --------------------------------------------------------------------
    @property
    def connection(self) -> Connection:
        """The connection's sans-I/O protocol state: the shell drains its ``data_to_send``."""
        return self._state.connection

    @property
    def peer(self) -> str:
        """``host:port`` of the client."""
        return self._state.peer

    @property
    def closed(self) -> bool:
        """The connection is gone."""
        return self._state.closed

    @property
    def authenticating(self) -> bool:
        """The CONNECT's password is being checked (the keep-alive leaves the connection be)."""
        return self._state.authenticating

    @property
    def is_connected(self) -> bool:
        """Whether the handshake completed and the connection is open."""
        return self._state.is_connected

    @property
    def inflight_sends(self) -> int:
        """SENDs received and not answered yet (the shell stops reading over
        ``max_pending_sends``)."""
        return self._state.sends_in_flight

    def stats(self) -> SessionStats:
        """A frozen snapshot of the session's figures (its state's). O(1); any thread."""
        return self._state.stats()

    @property
    def producer_count(self) -> int:
        """Producers open now: ``stats().producers``."""
        return self.stats().producers

    @property
    def consumer_count(self) -> int:
        """Consumers open now: ``stats().consumers``."""
        return self.stats().consumers

    @property
    def messages_in(self) -> int:
        """Messages received from producers: ``stats().counters.messages_in``."""
        return self.stats().counters.messages_in

    @property
    def messages_out(self) -> int:
        """Messages delivered to consumers: ``stats().counters.messages_out``."""
        return self.stats().counters.messages_out

    # -- driven by the shell -------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        """Handle everything ``data`` completes. Raises ``RemoteProtocolError`` (close)."""
        handlers = self._handlers
        state = self._state
        requests = state.connection.receive_data(data)
        for i, request in enumerate(requests, 1):
            handlers[request.type](request)  # the one place every handled command passes
            if i % _SEND_CHUNK == 0 and state.has_pending_sends:
                # A long read: answer what is done so far, so the client's pipeline keeps moving.
                self._producing.flush_sends()
                self._host.flush_now(self)
        self._producing.flush_sends()

    # -- injected faults (mledger.protocol._faulting) ------------------------------------------
    def faults_changed(self) -> None:
        """The broker's armed faults changed: dispatch through the fault filter while a command
        fault is armed or the filter holds or drops commands, else through the plain table (no
        cost per command). Loop thread."""
        if self._host.broker.faults.command_kinds or (self._filter is not None and self._filter.busy):
            self._handlers = self._fault_filter().table
        else:
            self._handlers = self._plain

    def _fault_filter(self) -> FaultFilter:
        if self._filter is None:
            from ._faulting import FaultFilter

            self._filter = FaultFilter(self._context, self._plain, self._released, self._pin_filter)
        return self._filter

    def _pin_filter(self) -> None:
        assert self._filter is not None
        self._handlers = self._filter.table

    def _released(self) -> None:
        """Held commands were handled: publish their SENDs, write their answers."""
        self._producing.flush_sends()
        self._host.flush_soon(self)
        self.faults_changed()

    def hold(self) -> None:
        """Hold every command until :meth:`release` (the broker is paused)."""
        self._fault_filter().hold()

    def release(self) -> None:
        """End a :meth:`hold`: handle what was held, in order."""
        if self._filter is not None:
            self._filter.release()

    def drop_input(self) -> None:
        """The connection stopped reading (a half-open fault): drop every command from now."""
        self._fault_filter().drop_input()

    def consumed_subscriptions(self) -> list[Subscription]:
        """The subscriptions this connection's consumers on persistent topics are on (open
        topics only), in consumer-id order: what the server's periodic dispatch sweeps."""
        return [h.subscription for h in self._state.consumers.values() if not h.topic.is_closed]

    def fault_targets(self) -> list[FaultTarget]:
        """What this connection concerns (its producers' and consumers' topics and names), for
        a fault armed without a command."""
        from ._faulting import connection_targets

        return connection_targets(self._state)

    def heal(self) -> None:
        """Faults were cleared: commands are read again."""
        if self._filter is not None:
            self._filter.heal()
            self.faults_changed()

    def writing_paused(self, paused: bool) -> None:
        """The socket's write buffer crossed its high (True) or low (False) mark."""
        self._state.pause_writing(paused)
        if not paused:
            self._consuming.resume()

    def close(self) -> None:
        """The connection is gone: close this client's producers and consumers."""
        if not self._state.close():
            return
        self._producing.close()
        self._consuming.close()
        self._np.close()

    # -- handshake, keep-alive, lookups ---------------------------------------------------------
    def handle_connect(self, request: Request) -> None:
        connect = request.command.connect
        auth = self._host.auth
        state = self._state
        if auth is None:
            state.connection.accept_connect(self._host.config.server_version)
            return
        method = connect.auth_method_name if connect.HasField("auth_method_name") else "none"
        data = connect.auth_data if connect.HasField("auth_data") else b""
        checked = auth.authenticate(method, data, state.peer_subject, state.address)
        if checked.done():  # a token, a certificate, the anonymous role: answered in this turn
            self._connect_checked(checked)
            return
        # a password: a pool worker verifies it; the answer comes back to the loop, which
        # meanwhile serves everyone else (the client sends nothing before it)
        state.start_authentication()
        checked.add_done_callback(lambda done: self._host.run_on_loop(lambda: self._connect_checked(done)))

    def _connect_checked(self, checked: Future[str]) -> None:
        """Answer the CONNECT with the authentication's outcome (on the loop thread)."""
        state = self._state
        state.end_authentication()
        if state.closed:  # the client left while its password was checked
            return
        try:
            role = checked.result()
        except UnauthenticatedError as e:
            # Pulsar answers "Unable to authenticate" and logs the provider's reason; the
            # reason is in the reply here too, so a CI log says which credential failed
            state.connection.refuse_connect(api.AuthenticationError, f"Unable to authenticate: {e}")
            self._host.close_soon(self)
        else:
            state.authenticated(role)
            state.connection.accept_connect(self._host.config.server_version)
        self._host.flush_soon(self)

    def handle_partitioned_metadata(self, request: Request) -> None:
        body = request.command.partitionMetadata
        response = api.CommandPartitionedTopicMetadataResponse(request_id=body.request_id)
        try:
            self._context.authorize_lookup(body.topic)
            broker = self._host.broker
            try:
                partitions = broker.partitioned_topic_metadata(body.topic)
            except NotFoundError:
                if not broker.config.allow_auto_topic_creation:
                    raise
                broker.check_auto_creation(body.topic)  # a namespace that does not exist
                partitions = 0
            response.partitions = partitions
            response.response = api.CommandPartitionedTopicMetadataResponse.Success
        except MLedgerError as exc:
            response.response = api.CommandPartitionedTopicMetadataResponse.Failed
            response.error = server_error_code(exc)
            response.message = str(exc)
        self._state.connection.send(
            api.BaseCommand(type=_T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=response)
        )

    def handle_lookup(self, request: Request) -> None:
        body = request.command.lookupTopic
        response = api.CommandLookupTopicResponse(request_id=body.request_id)
        try:
            self._context.authorize_lookup(body.topic)
            self._host.broker.check_topic_namespace(body.topic)
            listener = body.advertised_listener_name if body.HasField("advertised_listener_name") else None
            urls = lookup_urls(self._host.config, self._host.service_url, listener, self._host.tls_service_url)
            response.response = api.CommandLookupTopicResponse.Connect
            if urls.broker_service_url is not None:
                response.brokerServiceUrl = urls.broker_service_url
            if urls.broker_service_url_tls is not None:
                response.brokerServiceUrlTls = urls.broker_service_url_tls
            response.authoritative = True
        except MLedgerError as exc:
            response.response = api.CommandLookupTopicResponse.Failed
            response.error = server_error_code(exc)
            response.message = str(exc)
        self._state.connection.send(api.BaseCommand(type=_T.LOOKUP_RESPONSE, lookupTopicResponse=response))

    def handle_ping(self, request: Request) -> None:  # pragma: no cover - the connection answers
        pass

    def handle_pong(self, request: Request) -> None:  # pragma: no cover - the connection absorbs it
        pass

    def handle_get_topics_of_namespace(self, request: Request) -> None:
        body = request.command.getTopicsOfNamespace
        try:
            check_namespace_name(body.namespace)  # first, as Pulsar's ServerCnx (NamespaceName.get)
            if self._host.auth is not None:
                self._host.auth.authorize_topic_list(self._state.role, body.namespace)
            broker = self._host.broker
            topics: list[str] = []
            if body.mode != api.CommandGetTopicsOfNamespace.NON_PERSISTENT:
                persistent = broker.list_topics(body.namespace, include_partitions=True)
                partitioned = set(broker.list_partitioned_topics())
                topics = [t for t in persistent if t not in partitioned]
            if body.mode != api.CommandGetTopicsOfNamespace.PERSISTENT:
                # Pulsar lists the non-persistent topics loaded now (partitions, not their parents)
                parents = set(broker.non_persistent.list_partitioned(body.namespace))
                topics += [t for t in broker.non_persistent.topic_names(body.namespace) if t not in parents]
            if body.HasField("topics_pattern"):
                pattern = re.compile(body.topics_pattern)
                topics = [t for t in topics if pattern.fullmatch(t) or pattern.fullmatch(t.split("://", 1)[-1])]
        except (MLedgerError, re.error) as exc:
            self._state.connection.send_error(
                body.request_id, api.InvalidTopicName if isinstance(exc, re.error) else server_error_code(exc), str(exc)
            )
            return
        response = api.CommandGetTopicsOfNamespaceResponse(
            request_id=body.request_id, topics=topics, filtered=body.HasField("topics_pattern"), changed=True
        )
        self._state.connection.send(
            api.BaseCommand(type=_T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=response)
        )

    # -- schemas -----------------------------------------------------------------------------
    def handle_get_schema(self, request: Request) -> None:
        body = request.command.getSchema
        response = api.CommandGetSchemaResponse(request_id=body.request_id)
        version = schema_version(body.schema_version)
        found = self._host.broker.schemas.get(body.topic, version)
        if found is None:
            response.error_code = api.TopicNotFound
            response.error_message = f"No schema found for topic {body.topic}"
        else:
            number, info = found
            response.schema.CopyFrom(schema_message(info))
            response.schema_version = schema_version_bytes(number)
        self._state.connection.send(api.BaseCommand(type=_T.GET_SCHEMA_RESPONSE, getSchemaResponse=response))

    def handle_get_or_create_schema(self, request: Request) -> None:
        body = request.command.getOrCreateSchema
        response = api.CommandGetOrCreateSchemaResponse(request_id=body.request_id)
        try:
            version = self._host.broker.add_schema(body.topic, schema_info(body.schema))
            response.schema_version = schema_version_bytes(version)
        except MLedgerError as exc:
            response.error_code = server_error_code(exc)
            response.error_message = str(exc)
        self._state.connection.send(
            api.BaseCommand(type=_T.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=response)
        )


_HANDLER_NAMES: dict[int, str] = {
    spec.type: spec.handler_name for spec in COMMANDS.values() if hasattr(Session, spec.handler_name)
}
"""Command type -> the name of the session's handler (from the command table)."""
