"""One client's session: Pulsar's ``ServerCnx``, commands -> broker calls -> replies.

A :class:`Session` owns a :class:`~mledger.protocol._connection.Connection` and the producers
and consumers its client opened. It has one ``handle_<command>`` method per client command the
command table marks handled (:mod:`mledger.protocol._commands`), looked up in :data:`_HANDLERS`.
It never touches sockets or the event loop: the server shell feeds it bytes and drains what it
queued; its :class:`SessionHost` (in the server,
:class:`~mledger.protocol._server.ProtocolServer`) provides the broker, dispatch scheduling and
thread hand-over.

The session is split by job (how it maps onto the broker: docs/pulsar/behaviour.md):

* this module: the connection's life (bytes in, writing paused, close), the handshake, lookups,
  topic lists and schemas, and the handler table;
* :mod:`~mledger.protocol._producing`: PRODUCER, SEND (the pipelined publish), CLOSE_PRODUCER;
* :mod:`~mledger.protocol._consuming`: SUBSCRIBE, FLOW, ACK, REDELIVER, SEEK,
  GET_LAST_MESSAGE_ID, UNSUBSCRIBE, CLOSE_CONSUMER, CONSUMER_STATS, and flow control;
* :mod:`~mledger.protocol._base`: the state and the helpers the handlers share;
* :mod:`~mledger.protocol._handles`: the host protocol, and the producer and consumer handles
  through which the broker talks back (from any thread; they hand over to the loop);
* :mod:`~mledger.protocol._convert`: wire <-> domain conversions (message ids, schemas,
  metadata) and error codes. An error's ``ServerError`` is the ``server_error`` it carries
  (:mod:`mledger.core._errors`), never read from its message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..codec.proto import PulsarApi_pb2 as api
from ..core._errors import MLedgerError, NotFoundError, UnauthenticatedError
from ._commands import COMMANDS
from ._config import lookup_urls
from ._connection import Request
from ._consuming import PERMIT_WINDOW as PERMIT_WINDOW, ConsumerCommands
from ._convert import schema_info, schema_message, schema_version, schema_version_bytes, server_error_code
from ._handles import (
    ConsumerHandle as ConsumerHandle,
    ProducerHandle as ProducerHandle,
    SessionHost as SessionHost,
)
from ._producing import ProducerCommands

__all__ = ["PERMIT_WINDOW", "ConsumerHandle", "ProducerHandle", "Session", "SessionHost"]

_T = api.BaseCommand
_SEND_CHUNK = 64
"""SENDs handled between two flushes of their receipts within one long read."""


class Session(ProducerCommands, ConsumerCommands):
    """The server side of one client connection (see the module docstring). Driven by the
    event loop thread only."""

    def __init__(
        self, host: SessionHost[Session], peer: str = "", peer_subject: Any = None, address: str | None = None
    ) -> None:
        super().__init__(host, peer, peer_subject, address)

    # -- driven by the shell -------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        """Handle everything ``data`` completes. Raises ``RemoteProtocolError`` (close)."""
        handlers = _HANDLERS
        requests = self.connection.receive_data(data)
        for i, request in enumerate(requests, 1):
            handlers[request.type](self, request)
            if i % _SEND_CHUNK == 0 and self._pending_sends:
                # A long read: answer what is done so far, so the client's pipeline keeps moving.
                self._flush_sends()
                self._host.flush_now(self)
        self._flush_sends()

    def writing_paused(self, paused: bool) -> None:
        """The socket's write buffer crossed its high (True) or low (False) mark."""
        self.paused = paused
        if not paused:
            for handle in list(self._consumers.values()):
                self.pump(handle)

    def close(self) -> None:
        """The connection is gone: close this client's producers and consumers."""
        if self.closed:
            return
        self.closed = True
        self.connection.close()
        for producer in list(self._producers.values()):
            self._close_producer(producer)
        for consumer in list(self._consumers.values()):
            self._close_consumer(consumer)
        self._np.close()

    # -- handshake, keep-alive, lookups ---------------------------------------------------------
    def handle_connect(self, request: Request) -> None:
        connect = request.command.connect
        auth = self._host.auth
        if auth is None:
            self.connection.accept_connect(self._host.config.server_version)
            return
        method = connect.auth_method_name if connect.HasField("auth_method_name") else "none"
        data = connect.auth_data if connect.HasField("auth_data") else b""
        checked = auth.authenticate(method, data, self.peer_subject, self.address)
        if checked.done():  # a token, a certificate, the anonymous role: answered in this turn
            self._connect_checked(checked)
            return
        # a password: a pool worker verifies it; the answer comes back to the loop, which
        # meanwhile serves everyone else (the client sends nothing before it)
        self.authenticating = True
        checked.add_done_callback(lambda done: self._host.run_on_loop(lambda: self._connect_checked(done)))

    def _connect_checked(self, checked: Future[str]) -> None:
        """Answer the CONNECT with the authentication's outcome (on the loop thread)."""
        self.authenticating = False
        if self.closed:  # the client left while its password was checked
            return
        try:
            self.role = checked.result()
        except UnauthenticatedError as e:
            # Pulsar answers "Unable to authenticate" and logs the provider's reason; the
            # reason is in the reply here too, so a CI log says which credential failed
            self.connection.refuse_connect(api.AuthenticationError, f"Unable to authenticate: {e}")
            self._host.close_soon(self)
        else:
            self.connection.accept_connect(self._host.config.server_version)
        self._host.flush_soon(self)

    def handle_partitioned_metadata(self, request: Request) -> None:
        body = request.command.partitionMetadata
        response = api.CommandPartitionedTopicMetadataResponse(request_id=body.request_id)
        try:
            self._authorize_lookup(body.topic)
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
        self.connection.send(api.BaseCommand(type=_T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=response))

    def handle_lookup(self, request: Request) -> None:
        body = request.command.lookupTopic
        response = api.CommandLookupTopicResponse(request_id=body.request_id)
        try:
            self._authorize_lookup(body.topic)
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
        self.connection.send(api.BaseCommand(type=_T.LOOKUP_RESPONSE, lookupTopicResponse=response))

    def handle_ping(self, request: Request) -> None:  # pragma: no cover - the connection answers
        pass

    def handle_pong(self, request: Request) -> None:  # pragma: no cover - the connection absorbs it
        pass

    def handle_get_topics_of_namespace(self, request: Request) -> None:
        body = request.command.getTopicsOfNamespace
        try:
            if self._host.auth is not None:
                self._host.auth.authorize_topic_list(self.role, body.namespace)
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
            self.connection.send_error(
                body.request_id, api.InvalidTopicName if isinstance(exc, re.error) else server_error_code(exc), str(exc)
            )
            return
        response = api.CommandGetTopicsOfNamespaceResponse(
            request_id=body.request_id, topics=topics, filtered=body.HasField("topics_pattern"), changed=True
        )
        self.connection.send(
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
        self.connection.send(api.BaseCommand(type=_T.GET_SCHEMA_RESPONSE, getSchemaResponse=response))

    def handle_get_or_create_schema(self, request: Request) -> None:
        body = request.command.getOrCreateSchema
        response = api.CommandGetOrCreateSchemaResponse(request_id=body.request_id)
        try:
            version = self._host.broker.add_schema(body.topic, schema_info(body.schema))
            response.schema_version = schema_version_bytes(version)
        except MLedgerError as exc:
            response.error_code = server_error_code(exc)
            response.error_message = str(exc)
        self.connection.send(api.BaseCommand(type=_T.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=response))


_HANDLERS: dict[int, Callable[[Session, Request], None]] = {
    spec.type: getattr(Session, spec.handler_name) for spec in COMMANDS.values() if hasattr(Session, spec.handler_name)
}
"""Command type -> the session method handling it (from the command table)."""
