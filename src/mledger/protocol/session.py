"""One client's session: Pulsar's ``ServerCnx``, commands -> broker calls -> replies.

A :class:`Session` owns a :class:`~mledger.protocol.connection.Connection` and the producers
and consumers its client opened. It has one ``handle_<command>`` method per client command the
command table marks handled (:mod:`mledger.protocol.commands`). It never touches sockets or the
event loop: the server shell feeds it bytes and drains what it queued; its
:class:`SessionHost` (in the server, :class:`~mledger.protocol.server.ProtocolServer`; this
module only knows the protocol it defines) provides the broker, dispatch scheduling and
thread hand-over.

The broker talks back through the handles: a :class:`ProducerHandle` is the broker producer's
listener and a :class:`ConsumerHandle` the broker consumer's sink. They may be called from
other threads, hand over to the host's loop and call the session's named entry points
(:meth:`Session.write_messages`, :meth:`Session.producer_closed_by_broker`, ...).

Mapping onto the broker (DESIGN.md "Binary protocol"):

* PRODUCER -> ``Topic.create_producer`` (access modes, schema); SEND -> the pipelined publish
  (``Topic.publish_entries``: the producer's bytes from the checksum on, stored unchanged; the
  SENDs of one read go to their topic together, and the ledger's writer stores everything
  queued in one write, off the loop when the store's writes block) -> SEND_RECEIPT with the
  stored position, written as each write completes (the event loop never waits on the store);
* SUBSCRIBE -> ``Topic.subscribe`` (durable) or ``Topic.open_non_durable_subscription``
  (readers), then ``Subscription.add_consumer(sink=...)`` with no permits; FLOW grants permits
  and dispatches; the dispatcher pushes whole entries to the sink, which writes MESSAGE frames;
* ACK -> ``acknowledge_entries`` / ``acknowledge_with_ack_sets`` / ``acknowledge_cumulative``;
  with a request id the ACK_RESPONSE follows the cursor's persist (the cursor persists every
  change before the call returns unless ``throttle_mark_delete`` is set, in which case the
  session flushes it first);
* REDELIVER -> negative acks; SEEK -> ``reset_cursor`` (which disconnects the subscription's
  remote consumers: CLOSE_CONSUMER before SUCCESS, as Pulsar does).

Flow control: a FLOW's permits are kept here and granted to the broker consumer at most
:data:`PERMIT_WINDOW` at a time, and only while the socket's write buffer is below its high
mark, so a FLOW of 2**31 permits cannot make the server buffer the whole topic.
"""

from __future__ import annotations

import logging
import re
import struct
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol

from google.protobuf.message import DecodeError

from ..broker import (
    AlreadyClosedError,
    Broker,
    ClientInfo,
    ConsumerBusyError,
    FramedPublish,
    MessageDupUnknownError,
    PartitionedTopic,
    PersistenceError,
    ProducerBusyError,
    PublishResult,
    SubscriptionBusyError,
    Topic,
    TopicFencedError,
)
from ..broker.consumer import AckRequest, Consumer
from ..broker.dedup import MessageDeduplication
from ..broker.hooks import NoDeduplication
from ..broker.listeners import EntryDelivery, ack_set_words
from ..broker.names import TopicName
from ..broker.producer import Producer
from ..broker.schemas import IncompatibleSchemaError, SchemaInfo
from ..broker.subscription import Subscription, check_read_compacted
from ..broker.tenants import TenantNotFoundError
from ..codec.entry import EntryMetadata, encode_entry
from ..codec.messageid import MessageId
from ..codec.proto import PulsarApi_pb2 as api
from ..core.errors import (
    EntryTooLargeError,
    InvalidRequestError,
    ManagedLedgerTerminatedError,
    MLedgerError,
    NotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    StateCorruptedError,
    UnauthenticatedError,
)
from ..core.position import EARLIEST, LATEST, Position
from ..managed_ledger import InitialPosition
from .access import ClientAuth, ProducerAccess, ProducerFencedError
from .codec import message_command, send_receipt_frame
from .commands import COMMANDS
from .config import ProtocolConfig, lookup_urls
from .connection import Connection, ConnectionState, Request
from .framing import checksummed_entry, payload_frame_parts
from .nonpersistent import SUB_TYPES, NonPersistentEndpoints, is_non_persistent

__all__ = ["PERMIT_WINDOW", "ConsumerHandle", "ProducerHandle", "Session", "SessionHost"]

log = logging.getLogger(__name__)

PERMIT_WINDOW = 1000
"""Most permits a broker consumer holds at once; the rest of a FLOW waits in the session."""
_SEND_CHUNK = 64

_T = api.BaseCommand
_MASK64 = (1 << 64) - 1
_INT64_MAX = (1 << 63) - 1
_SCHEMA_VERSION = struct.Struct(">q")
_ACCESS_MODES = {
    api.Shared: "Shared",
    api.Exclusive: "Exclusive",
    api.WaitForExclusive: "WaitForExclusive",
    api.ExclusiveWithFencing: "ExclusiveWithFencing",
}
"""Pulsar's ``ProducerAccessMode`` names, for the stats' ``accessMode``."""


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def server_error(exc: BaseException) -> api.ServerError.ValueType:
    """Pulsar's ``ServerError`` for a broker exception (``BrokerServiceException.getClientErrorCode``)."""
    if isinstance(exc, (ConsumerBusyError, SubscriptionBusyError)):
        return api.ConsumerBusy
    if isinstance(exc, ProducerBusyError):
        return api.ProducerBusy
    if isinstance(exc, ProducerFencedError):
        return api.ProducerFenced
    if isinstance(exc, PermissionDeniedError):
        return api.AuthorizationError
    if isinstance(exc, IncompatibleSchemaError):
        return api.IncompatibleSchema
    if isinstance(exc, ManagedLedgerTerminatedError):  # TopicTerminatedError is one
        return api.TopicTerminatedError
    if isinstance(exc, NotFoundError):
        return api.TopicNotFound
    if isinstance(exc, InvalidRequestError):
        return api.InvalidTopicName if "topic name" in str(exc) else api.NotAllowedError
    if isinstance(exc, (NotAllowedError, EntryTooLargeError)):
        return api.NotAllowedError
    if isinstance(exc, (MessageDupUnknownError, StateCorruptedError, PersistenceError)):
        return api.PersistenceError
    if isinstance(exc, MLedgerError):
        return api.ServiceNotReady
    return api.UnknownError


_PUBLISH_REFUSALS = (
    MessageDupUnknownError,
    EntryTooLargeError,
    TopicFencedError,
    AlreadyClosedError,
    ManagedLedgerTerminatedError,
)
"""What ``Topic.publish_entries`` refuses a SEND with before writing it; any other error in
its results is the store's, from a failed write."""


def _send_error_code(exc: BaseException) -> api.ServerError.ValueType:
    """The SEND_ERROR code for a refused SEND: a failed write is Pulsar's ``PersistenceError``
    (``PersistentTopic.addFailed``), whatever the store raised (logged by the ledger, once per
    failure episode)."""
    return server_error(exc) if isinstance(exc, _PUBLISH_REFUSALS) else api.PersistenceError


class SessionHost(Protocol):
    """What a :class:`Session` needs from the server driving it. Called on the host's loop
    thread, except :meth:`run_on_loop` and :meth:`post`, which any thread may call."""

    @property
    def broker(self) -> Broker:
        """The broker the session's commands act on."""
        ...

    @property
    def config(self) -> ProtocolConfig:
        """The server's settings (message size limit, server version)."""
        ...

    @property
    def auth(self) -> ClientAuth | None:
        """Token authentication and authorization; None: every client may do anything."""
        ...

    @property
    def access(self) -> ProducerAccess:
        """The server-wide producer access modes per topic."""
        ...

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` for LOOKUP answers."""
        ...

    @property
    def tls_service_url(self) -> str | None:
        """``pulsar+ssl://host:port`` for LOOKUP answers; None without a TLS port."""
        ...

    def run_on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop: now on the loop thread, soon from any other (thread-safe)."""
        ...

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after the current callback (thread-safe)."""
        ...

    def next_id(self) -> int:
        """A number unique in the server (consumer-name suffixes)."""
        ...

    def flush_soon(self, session: Session) -> None:
        """Write what ``session`` queued at the end of this loop turn."""
        ...

    def flush_now(self, session: Session) -> None:
        """Write what ``session`` queued right away."""
        ...

    def close_soon(self, session: Session) -> None:
        """Close ``session``'s connection once what it queued is written."""
        ...

    def watch(self, topic: Topic) -> None:
        """Dispatch ``topic``'s subscriptions whenever entries are appended to it."""
        ...

    def dispatch_soon(self, subscription: Subscription) -> None:
        """Dispatch ``subscription`` at the end of this loop turn (coalesced)."""
        ...

    def pump_soon(self, handle: ConsumerHandle) -> None:
        """Call ``handle.pump()`` at the end of this loop turn (coalesced per handle)."""
        ...

    def dispatch(self, subscription: Subscription) -> int:
        """Push what ``subscription`` can deliver now; returns the entries dispatched."""
        ...


_Send = tuple["ProducerHandle", int, int, FramedPublish]
"""A SEND waiting for its receipt: the producer, the sequence id and highest sequence id as the
client sent them, and what was published."""


class _SendsDone:
    """The topic's callback for one group of SENDs: hands the results to the session on the
    loop (it runs on the ledger's writer thread, or on the loop itself for the memory store)."""

    __slots__ = ("sends", "session")

    def __init__(self, session: Session, sends: list[_Send]) -> None:
        self.session = session
        self.sends = sends

    def __call__(self, results: list[PublishResult]) -> None:
        session = self.session
        session.host.run_on_loop(partial(session.sends_completed, self.sends, results))


class ProducerHandle:
    """A client's producer: the broker producer plus what the protocol adds. It is the broker
    producer's listener and the :class:`~mledger.protocol.access.AccessHolder` of its topic."""

    __slots__ = ("access_mode", "closed", "name", "producer", "producer_id", "schema_version", "session", "topic")

    def __init__(self, session: Session, producer_id: int, topic: Topic, access_mode: int) -> None:
        self.session = session
        self.producer_id = producer_id
        self.topic = topic
        self.producer: Producer = None  # type: ignore[assignment]  # set once the broker made it
        self.name = ""
        self.access_mode = access_mode
        self.schema_version: bytes | None = None
        self.closed = False

    def producer_closed(self, producer: Producer) -> None:
        """The broker closed the producer (topic deleted): tell the client (CLOSE_PRODUCER).
        Any thread."""
        session = self.session
        session.host.post(lambda: session.producer_closed_by_broker(self))

    def fence(self) -> None:
        """An ``ExclusiveWithFencing`` producer took the topic: close this one (loop thread)."""
        self.session.producer_closed_by_broker(self)


class ConsumerHandle:
    """A client's consumer: the broker consumer, the permits not granted yet; the broker
    consumer's sink (its methods may be called from any thread)."""

    __slots__ = (
        "client_permits",
        "consumer",
        "consumer_id",
        "partition",
        "pending_active",
        "pending_end_of_topic",
        "ready",
        "session",
        "subscription",
        "topic",
    )

    def __init__(self, session: Session, consumer_id: int, topic: Topic, subscription: Subscription) -> None:
        self.session = session
        self.consumer_id = consumer_id
        self.topic = topic
        self.subscription = subscription
        self.partition = topic.partition_index
        self.consumer: Consumer | None = None
        self.client_permits = 0
        self.ready = False
        self.pending_active: bool | None = None
        self.pending_end_of_topic = False

    # ConsumerSink -------------------------------------------------------------------------
    def deliver(self, consumer: Consumer, deliveries: list[EntryDelivery]) -> None:
        """Write the deliveries as MESSAGE frames, on the loop."""
        session = self.session
        session.host.run_on_loop(lambda: session.write_messages(self, deliveries))

    def active_changed(self, consumer: Consumer, is_active: bool) -> None:
        """Tell the client (ACTIVE_CONSUMER_CHANGE), once its SUBSCRIBE is answered."""

        def tell() -> None:
            if self.ready:
                self.session.send_active_change(self, is_active)
            else:
                self.pending_active = is_active

        self.session.host.run_on_loop(tell)

    def disconnected(self, consumer: Consumer) -> None:
        """The broker removed the consumer: tell the client (CLOSE_CONSUMER), on the loop."""
        session = self.session
        session.host.run_on_loop(lambda: session.consumer_closed_by_broker(self))

    def held_permits(self) -> int:
        """The client's permits not granted to the broker consumer yet (any thread)."""
        return self.client_permits

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """Tell the client (REACHED_END_OF_TOPIC), once its SUBSCRIBE is answered."""

        def tell() -> None:
            if self.ready:
                self.session.send_reached_end_of_topic(self)
            else:
                self.pending_end_of_topic = True

        self.session.host.run_on_loop(tell)

    def pump(self) -> None:
        """Grant the broker consumer more of the client's permits (loop thread)."""
        self.session.pump(self)


class Session:
    """The server side of one client connection (see the module docstring). Driven by the
    event loop thread only."""

    def __init__(self, host: SessionHost, peer: str = "", peer_subject: Any = None) -> None:
        self._host = host
        self.peer = peer
        self.peer_subject = peer_subject
        """The verified TLS client certificate's subject (``getpeercert()["subject"]``), None
        without one: what the ``tls`` authentication provider takes the role from."""
        self.connection = Connection(host.config.max_message_size)
        self.role: str | None = None
        self._producers: dict[int, ProducerHandle] = {}
        self._consumers: dict[int, ConsumerHandle] = {}
        self._pending_sends: dict[int, list[_Send]] = {}
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

    @property
    def host(self) -> SessionHost:
        """The server driving this session."""
        return self._host

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
        """The protocol's error code for a broker error."""
        return server_error(exc)

    def send_error(self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str) -> None:
        """Queue SEND_ERROR for one SEND."""
        self._send_error(producer_id, sequence_id, error, message)

    def send_success(self, request_id: int) -> None:
        """Queue SUCCESS for ``request_id``."""
        self._send_success(request_id)

    # -- handshake, keep-alive, lookups ---------------------------------------------------------
    def handle_connect(self, request: Request) -> None:
        connect = request.command.connect
        auth = self._host.auth
        if auth is not None:
            method = connect.auth_method_name if connect.HasField("auth_method_name") else "none"
            data = connect.auth_data if connect.HasField("auth_data") else b""
            try:
                self.role = auth.authenticate(method, data, self.peer_subject)
            except UnauthenticatedError as e:
                # Pulsar answers "Unable to authenticate" and logs the provider's reason; the
                # reason is in the reply here too, so a CI log says which credential failed
                self.connection.refuse_connect(api.AuthenticationError, f"Unable to authenticate: {e}")
                self._host.close_soon(self)
                return
        self.connection.accept_connect(self._host.config.server_version)

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
            response.error = server_error(exc)
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
            response.error = server_error(exc)
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
                body.request_id, api.InvalidTopicName if isinstance(exc, re.error) else server_error(exc), str(exc)
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
        version = _SCHEMA_VERSION.unpack(body.schema_version)[0] if len(body.schema_version) == 8 else None
        found = self._host.broker.schemas.get(body.topic, version)
        if found is None:
            response.error_code = api.TopicNotFound
            response.error_message = f"No schema found for topic {body.topic}"
        else:
            number, info = found
            response.schema.CopyFrom(_schema_message(info))
            response.schema_version = _SCHEMA_VERSION.pack(number)
        self.connection.send(api.BaseCommand(type=_T.GET_SCHEMA_RESPONSE, getSchemaResponse=response))

    def handle_get_or_create_schema(self, request: Request) -> None:
        body = request.command.getOrCreateSchema
        response = api.CommandGetOrCreateSchemaResponse(request_id=body.request_id)
        try:
            version = self._host.broker.add_schema(body.topic, _schema_info(body.schema))
            response.schema_version = _SCHEMA_VERSION.pack(version)
        except MLedgerError as exc:
            response.error_code = server_error(exc)
            response.error_message = str(exc)
        self.connection.send(api.BaseCommand(type=_T.GET_OR_CREATE_SCHEMA_RESPONSE, getOrCreateSchemaResponse=response))

    # -- producers ---------------------------------------------------------------------------
    def handle_producer(self, request: Request) -> None:
        body = request.command.producer
        if is_non_persistent(body.topic):
            self._np.open_producer(body)
            return
        request_id = body.request_id
        existing = self._producers.get(body.producer_id)
        if existing is not None and existing.topic.name == body.topic and not existing.closed:
            self._send_producer_success(request_id, existing)  # a retried request: same answer
            return
        try:
            self._authorize(body.topic, "PRODUCE")
            topic = self._open_partition(body.topic)
            schema_version = None
            if body.HasField("schema"):
                version = self._host.broker.add_schema(topic.name, _schema_info(body.schema))
                schema_version = _SCHEMA_VERSION.pack(version)
            mode = body.producer_access_mode
            wait = self._host.access.check(topic, mode)
            name = body.producer_name if body.HasField("producer_name") and body.producer_name else None
            handle = ProducerHandle(self, body.producer_id, topic, mode)
            client = ClientInfo(
                self.peer or None,
                self.connection.client_version or None,
                body.producer_id,
                _ACCESS_MODES.get(mode, "Shared"),
            )
            producer = topic.create_producer(name, None, listener=handle, client=client)
            handle.producer = producer
            handle.name = producer.name
            handle.schema_version = schema_version
        except MLedgerError as exc:
            self.connection.send_error(request_id, server_error(exc), str(exc))
            return
        self._producers[body.producer_id] = handle
        self._host.watch(topic)
        if wait:
            # WaitForExclusive: answered "not ready" now, PRODUCER_SUCCESS once it is exclusive.
            self._send_producer_success(request_id, handle, ready=False)
            self._host.access.wait(topic, handle, lambda: self._exclusive_granted(request_id, handle))
            return
        self._host.access.add(topic, handle)
        self._send_producer_success(request_id, handle)

    def _exclusive_granted(self, request_id: int, handle: ProducerHandle) -> None:
        if handle.closed:
            return
        self._send_producer_success(request_id, handle)
        self._wake()

    def _send_producer_success(self, request_id: int, handle: ProducerHandle, ready: bool = True) -> None:
        success = api.CommandProducerSuccess(
            request_id=request_id,
            producer_name=handle.name,
            last_sequence_id=handle.producer.last_sequence_id,
            producer_ready=ready,
        )
        if handle.schema_version is not None:
            success.schema_version = handle.schema_version
        self.connection.send(api.BaseCommand(type=_T.PRODUCER_SUCCESS, producer_success=success))

    def handle_send(self, request: Request) -> None:
        send = request.command.send
        producer_id = send.producer_id
        if self._np.has_producer(producer_id):
            self._np.send(request)
            return
        raw_sequence_id = send.sequence_id
        handle = self._producers.get(producer_id)
        if handle is None or handle.closed:
            self._send_error(producer_id, raw_sequence_id, api.NotAllowedError, "Producer is not ready")
            return
        payload = request.payload
        if payload is None:
            self._send_error(producer_id, raw_sequence_id, api.NotAllowedError, "SEND without a payload")
            return
        entry, metadata_bytes, checksum_ok = payload
        if checksum_ok is False:
            self.checksum_errors += 1
            self._send_error(producer_id, raw_sequence_id, api.ChecksumError, "Checksum failed on the broker")
            return
        topic = handle.topic
        try:
            metadata = _metadata_for(topic, metadata_bytes)
        except StateCorruptedError as exc:
            self._send_error(producer_id, raw_sequence_id, api.UnknownError, str(exc))
            return
        sequence_id = raw_sequence_id - (1 << 64) if raw_sequence_id >> 63 else raw_sequence_id
        raw_highest = send.highest_sequence_id
        highest = raw_highest - (1 << 64) if raw_highest >> 63 else raw_highest
        if highest <= sequence_id:
            highest = sequence_id
        n = send.num_messages if send.HasField("num_messages") else 1
        item = FramedPublish(handle.name, sequence_id, highest, n, metadata, entry)
        sends = self._pending_sends.get(id(topic))
        if sends is None:
            sends = self._pending_sends[id(topic)] = []
        sends.append((handle, raw_sequence_id, highest & _MASK64, item))
        self.inflight_sends += 1
        self.messages_in += n
        self.bytes_in += len(entry)

    def _flush_sends(self) -> None:
        if not self._pending_sends:
            return
        batches = self._pending_sends
        self._pending_sends = {}
        for sends in batches.values():
            topic = sends[0][0].topic
            topic.publish_entries([s[3] for s in sends], _SendsDone(self, sends))

    def sends_completed(self, sends: list[_Send], results: list[PublishResult]) -> None:
        """The topic stored (or refused) ``sends``: SEND_RECEIPT or SEND_ERROR for each, in
        order (loop thread)."""
        self.inflight_sends -= len(sends)
        if self.closed:
            return
        frames: list[bytes] = []
        receipt = send_receipt_frame
        for (handle, sequence_id, highest, _), result in zip(sends, results, strict=True):
            if isinstance(result, Position):
                frames.append(receipt(handle.producer_id, sequence_id, highest, result[0], result[1]))
            elif result is None:  # a duplicate: Pulsar answers a receipt with id (-1, -1)
                frames.append(receipt(handle.producer_id, sequence_id, highest, _MASK64, _MASK64))
            else:
                assert isinstance(result, BaseException)
                self.connection.send_frames(frames)
                frames = []
                self._send_error(handle.producer_id, sequence_id, _send_error_code(result), str(result))
        self.connection.send_frames(frames)
        self._wake()

    def _send_error(self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str) -> None:
        self.connection.send(
            api.BaseCommand(
                type=_T.SEND_ERROR,
                send_error=api.CommandSendError(
                    producer_id=producer_id, sequence_id=sequence_id & _MASK64, error=error, message=message
                ),
            )
        )

    def handle_close_producer(self, request: Request) -> None:
        body = request.command.close_producer
        self._np.close_producer(body.producer_id)
        handle = self._producers.get(body.producer_id)
        if handle is not None:
            self._close_producer(handle)
        self._send_success(body.request_id)

    def _close_producer(self, handle: ProducerHandle) -> None:
        self._producers.pop(handle.producer_id, None)
        if handle.closed:
            return
        handle.closed = True
        handle.producer.detach_listener()  # our own listener: do not echo the close
        handle.producer.close()
        self._host.access.remove(handle.topic, handle)

    def producer_closed_by_broker(self, handle: ProducerHandle) -> None:
        """The broker closed ``handle``'s producer, or another producer fenced it: forget it
        and tell the client (CLOSE_PRODUCER). Loop thread."""
        if handle.closed or self.closed:
            return
        self._producers.pop(handle.producer_id, None)
        handle.closed = True
        self._host.access.remove(handle.topic, handle)
        self.connection.send(
            api.BaseCommand(
                type=_T.CLOSE_PRODUCER,
                close_producer=api.CommandCloseProducer(producer_id=handle.producer_id, request_id=_MASK64),
            )
        )
        self._wake()

    # -- consumers -----------------------------------------------------------------------------
    def handle_subscribe(self, request: Request) -> None:
        body = request.command.subscribe
        if is_non_persistent(body.topic) and body.consumer_id not in self._consumers:
            self._np.subscribe(body)
            return
        request_id = body.request_id
        existing = self._consumers.get(body.consumer_id)
        if existing is not None:
            if existing.topic.name == body.topic and existing.subscription.name == body.subscription:
                self._send_success(request_id)
                return
            self.connection.send_error(request_id, api.ConsumerBusy, f"consumer id {body.consumer_id} is in use")
            return
        try:
            self._authorize(body.topic, "CONSUME", body.subscription)
            broker = self._host.broker
            if not body.force_topic_creation and not broker.topic_exists(body.topic):
                raise NotFoundError(f"Topic {body.topic} does not exist")
            topic = self._open_partition(body.topic)
            if body.HasField("schema"):
                broker.add_schema_if_idle_or_check_compatible(topic, _schema_info(body.schema))
            sub_type = SUB_TYPES[body.subType]
            if body.read_compacted:
                check_read_compacted(sub_type)
            initial = (
                InitialPosition.EARLIEST
                if body.initialPosition == api.CommandSubscribe.Earliest
                else InitialPosition.LATEST
            )
            if body.durable:
                subscription = topic.subscribe(body.subscription, sub_type, initial)
            else:
                start = _start_position(body.start_message_id) if body.HasField("start_message_id") else None
                subscription = topic.open_non_durable_subscription(body.subscription, sub_type, start, initial)
            handle = ConsumerHandle(self, body.consumer_id, topic, subscription)
            name = body.consumer_name or None
            if name is not None and any(c.name == name for c in subscription.consumers):
                name = f"{name}#{self._host.next_id()}"
            client = ClientInfo(self.peer or None, self.connection.client_version or None, body.consumer_id)
            handle.consumer = subscription.add_consumer(
                name,
                permits=0,
                sink=handle,
                client=client,
                read_compacted=body.read_compacted,
                start_earliest=_reads_from_earliest(body),
            )
        except MLedgerError as exc:
            self.connection.send_error(request_id, server_error(exc), str(exc))
            return
        self._consumers[body.consumer_id] = handle
        self._host.watch(topic)
        self._send_success(request_id)
        handle.ready = True
        if handle.pending_active is not None:
            self.send_active_change(handle, handle.pending_active)
            handle.pending_active = None
        if handle.pending_end_of_topic:
            self.send_reached_end_of_topic(handle)
            handle.pending_end_of_topic = False

    def handle_flow(self, request: Request) -> None:
        body = request.command.flow
        if self._np.has_consumer(body.consumer_id):
            self._np.flow(body.consumer_id, body.messagePermits)
            return
        handle = self._consumers.get(body.consumer_id)
        if handle is None:
            return
        handle.client_permits += body.messagePermits
        self.pump(handle)

    def pump(self, handle: ConsumerHandle) -> None:
        """Grant ``handle``'s held permits to the broker consumer (within
        :data:`PERMIT_WINDOW`) and dispatch. Does nothing while writing is paused."""
        consumer = handle.consumer
        if self.closed or consumer is None or not consumer.is_connected or self.paused:
            return
        room = PERMIT_WINDOW - consumer.permits
        if room > 0 and handle.client_permits > 0:
            grant = min(room, handle.client_permits)
            handle.client_permits -= grant
            try:
                consumer.flow(grant)
            except MLedgerError:
                return
        self._host.dispatch(handle.subscription)

    def write_messages(self, handle: ConsumerHandle, deliveries: list[EntryDelivery]) -> None:
        """Queue MESSAGE frames for what the broker delivered to ``handle`` (loop thread)."""
        if self.closed or handle.consumer is None or not handle.consumer.is_connected:
            return  # the broker redelivers what this consumer held when it is removed
        consumer_id = handle.consumer_id
        partition = handle.partition
        count = 0
        size = 0
        frames: list[bytes] = []
        for d in deliveries:
            entry = d.entry
            position = entry.position
            ack_set = ack_set_words(d.ack_set, d.batch_size) if d.ack_set is not None else None
            raw = entry.raw
            body = checksummed_entry(raw) if raw else _plain_entry(d)
            command = message_command(consumer_id, position[0], position[1], partition, d.redelivery_count, ack_set)
            frames += payload_frame_parts(command, body)
            count += d.messages
            size += len(body)
        self.connection.send_frames(frames)
        self.messages_out += count
        self.bytes_out += size
        self._wake()
        if handle.client_permits > 0 and handle.consumer.permits < PERMIT_WINDOW // 2:
            self._host.pump_soon(handle)

    def send_active_change(self, handle: ConsumerHandle, is_active: bool) -> None:
        """Queue ACTIVE_CONSUMER_CHANGE for ``handle`` (loop thread)."""
        self.connection.send(
            api.BaseCommand(
                type=_T.ACTIVE_CONSUMER_CHANGE,
                active_consumer_change=api.CommandActiveConsumerChange(
                    consumer_id=handle.consumer_id, is_active=is_active
                ),
            )
        )
        self._wake()

    def send_reached_end_of_topic(self, handle: ConsumerHandle) -> None:
        """Queue REACHED_END_OF_TOPIC for ``handle`` (loop thread); as Pulsar's
        ``Consumer.reachedEndOfTopic``, only to a client that speaks protocol v9 or later."""
        if handle.consumer_id not in self._consumers or self.closed or self.connection.protocol_version < 9:
            return
        self.connection.send(
            api.BaseCommand(
                type=_T.REACHED_END_OF_TOPIC,
                reachedEndOfTopic=api.CommandReachedEndOfTopic(consumer_id=handle.consumer_id),
            )
        )
        self._wake()

    def handle_ack(self, request: Request) -> None:
        body = request.command.ack
        handle = self._consumers.get(body.consumer_id)
        error: BaseException | None = None
        if self._np.has_consumer(body.consumer_id):
            pass  # nothing to acknowledge on a non-persistent topic
        elif handle is None or handle.consumer is None:
            error = NotFoundError(f"Consumer {body.consumer_id} not found")
        else:
            if body.HasField("validation_error"):
                self.validation_errors += 1
                log.warning(
                    "%s: consumer %s dropped a message it could not validate (%s)",
                    handle.topic.name,
                    handle.consumer.name,
                    api.CommandAck.ValidationError.Name(body.validation_error),
                )
            try:
                if body.ack_type == api.CommandAck.Cumulative:
                    self._ack_cumulative(handle, body.message_id)
                else:
                    self._ack_individual(handle, body.message_id)
                if body.HasField("request_id"):
                    handle.subscription.cursor.flush()
            except MLedgerError as exc:
                error = exc
                log.info("%s: ack from consumer %s refused: %s", handle.topic.name, handle.consumer.name, exc)
            self._host.dispatch_soon(handle.subscription)
        if body.HasField("request_id"):
            response = api.CommandAckResponse(consumer_id=body.consumer_id, request_id=body.request_id)
            if error is not None:
                response.error = server_error(error)
                response.message = str(error)
            self.connection.send(api.BaseCommand(type=_T.ACK_RESPONSE, ackResponse=response))

    def _ack_individual(self, handle: ConsumerHandle, ids: Sequence[api.MessageIdData]) -> None:
        consumer = handle.consumer
        assert consumer is not None
        whole: list[Position] = []
        ack_sets: list[tuple[Position, int, int | None]] = []
        indexed: list[MessageId] = []
        for mid in ids:  # one pass: each id goes to the part of the request its form names
            position = Position(_signed(mid.ledgerId), _signed(mid.entryId))
            if mid.ack_set:
                bits = 0
                for i, word in enumerate(mid.ack_set):
                    bits |= (word & _MASK64) << (64 * i)
                ack_sets.append((position, bits, mid.batch_size if mid.batch_size > 0 else None))
            elif mid.batch_index >= 0 and mid.HasField("batch_index"):
                indexed.append(
                    MessageId(position.ledger_id, position.entry_id, -1, mid.batch_index, max(mid.batch_size, 0))
                )
            else:  # the common case: a whole entry
                whole.append(position)
        if whole or ack_sets or indexed:
            consumer.acknowledge_request(AckRequest(entries=whole, ack_sets=ack_sets, message_ids=indexed))

    def _ack_cumulative(self, handle: ConsumerHandle, ids: Sequence[api.MessageIdData]) -> None:
        consumer = handle.consumer
        assert consumer is not None
        if len(ids) != 1:
            raise InvalidRequestError(f"a cumulative ack carries one message id, got {len(ids)}")
        mid = ids[0]
        position = Position(_signed(mid.ledgerId), _signed(mid.entryId))
        batch_index = mid.batch_index if mid.HasField("batch_index") else -1
        if mid.ack_set:
            bits = 0
            for i, word in enumerate(mid.ack_set):
                bits |= (word & _MASK64) << (64 * i)
            first_unacked = (bits & -bits).bit_length() - 1 if bits else -1
            if first_unacked == 0:  # nothing of this entry: up to the previous entry
                previous = handle.topic.managed_ledger.previous_position(position)
                if previous.entry_id < 0:
                    return
                consumer.acknowledge_cumulative(MessageId(previous.ledger_id, previous.entry_id))
                return
            batch_index = first_unacked - 1 if bits else -1
        consumer.acknowledge_cumulative(MessageId(position.ledger_id, position.entry_id, -1, batch_index))

    def handle_redeliver_unacknowledged_messages(self, request: Request) -> None:
        body = request.command.redeliverUnacknowledgedMessages
        handle = self._consumers.get(body.consumer_id)  # None on a non-persistent topic: nothing kept
        if handle is None or handle.consumer is None:
            return
        try:
            if body.message_ids and handle.subscription.type.is_individual_ack_mode:
                ids = [MessageId(_signed(m.ledgerId), _signed(m.entryId)) for m in body.message_ids]
                handle.consumer.negative_acknowledge(ids)
            else:
                handle.consumer.redeliver_unacknowledged_messages()
        except MLedgerError as exc:
            log.info("%s: redelivery request refused: %s", handle.topic.name, exc)
        self._host.dispatch_soon(handle.subscription)

    def handle_seek(self, request: Request) -> None:
        body = request.command.seek
        handle = self._consumers.get(body.consumer_id)
        if self._np.has_consumer(body.consumer_id):
            self._np.refuse(body.request_id, "Seek")
            return
        if handle is None:
            self.connection.send_error(body.request_id, api.ConsumerNotFound, f"Consumer {body.consumer_id} not found")
            return
        try:
            if body.HasField("message_publish_time"):
                handle.subscription.reset_cursor_by_time(_signed(body.message_publish_time))
            elif body.HasField("message_id"):
                handle.subscription.reset_cursor(_seek_target(body.message_id))
            else:
                raise InvalidRequestError("SEEK needs a message id or a publish time")
        except MLedgerError as exc:
            self.connection.send_error(body.request_id, server_error(exc), str(exc))
            return
        # reset_cursor disconnected the consumers (CLOSE_CONSUMER is queued); then SUCCESS.
        self._send_success(body.request_id)

    def handle_get_last_message_id(self, request: Request) -> None:
        body = request.command.getLastMessageId
        handle = self._consumers.get(body.consumer_id)
        if self._np.has_consumer(body.consumer_id):
            self._np.refuse(body.request_id, "GetLastMessageId")
            return
        if handle is None:
            self.connection.send_error(body.request_id, api.ConsumerNotFound, f"Consumer {body.consumer_id} not found")
            return
        ml = handle.topic.managed_ledger
        last = ml.last_confirmed_entry
        reads_compacted = handle.consumer is not None and handle.consumer.read_compacted
        compacted = handle.topic.compaction.last_message_id(last) if reads_compacted else None
        if compacted is not None:
            last = compacted[0]
        last_id = api.MessageIdData(ledgerId=last.ledger_id & _MASK64, entryId=last.entry_id & _MASK64)
        if handle.partition >= 0:
            last_id.partition = handle.partition
        if compacted is not None:
            if compacted[1] >= 0:
                last_id.batch_index = compacted[1]
        elif last.entry_id >= 0:
            try:
                entry = ml.read_entry(last)
                if entry.metadata.batched or entry.metadata.num_messages > 1:
                    last_id.batch_index = max(entry.metadata.num_messages, 1) - 1
            except MLedgerError:
                pass
        md = handle.subscription.cursor.mark_delete_position
        response = api.CommandGetLastMessageIdResponse(
            request_id=body.request_id,
            last_message_id=last_id,
            consumer_mark_delete_position=api.MessageIdData(
                ledgerId=md.ledger_id & _MASK64, entryId=md.entry_id & _MASK64
            ),
        )
        self.connection.send(api.BaseCommand(type=_T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response))

    def handle_unsubscribe(self, request: Request) -> None:
        body = request.command.unsubscribe
        if self._np.has_consumer(body.consumer_id):
            self._np.unsubscribe(body)
            return
        handle = self._consumers.get(body.consumer_id)
        if handle is None:
            self.connection.send_error(body.request_id, api.ConsumerNotFound, f"Consumer {body.consumer_id} not found")
            return
        others = [c for c in handle.subscription.consumers if c is not handle.consumer]
        if others:
            self.connection.send_error(
                body.request_id, api.ConsumerBusy, "Unconnected or shared consumer attempting to unsubscribe"
            )
            return
        self._close_consumer(handle)
        try:
            if handle.subscription.durable:
                handle.topic.delete_subscription(handle.subscription.name)
        except MLedgerError as exc:
            self.connection.send_error(body.request_id, server_error(exc), str(exc))
            return
        self._send_success(body.request_id)

    def handle_close_consumer(self, request: Request) -> None:
        body = request.command.close_consumer
        self._np.close_consumer(body.consumer_id)
        handle = self._consumers.get(body.consumer_id)
        if handle is not None:
            self._close_consumer(handle)
        self._send_success(body.request_id)

    def _close_consumer(self, handle: ConsumerHandle) -> None:
        self._consumers.pop(handle.consumer_id, None)
        consumer = handle.consumer
        if consumer is not None and consumer.is_connected:
            consumer.close()
            self._host.dispatch_soon(handle.subscription)  # others get what it held

    def consumer_closed_by_broker(self, handle: ConsumerHandle) -> None:
        """The broker removed ``handle``'s consumer: forget it and tell the client
        (CLOSE_CONSUMER). Loop thread."""
        if self._consumers.get(handle.consumer_id) is not handle or self.closed:
            return
        del self._consumers[handle.consumer_id]
        self.connection.send(
            api.BaseCommand(
                type=_T.CLOSE_CONSUMER,
                close_consumer=api.CommandCloseConsumer(consumer_id=handle.consumer_id, request_id=_MASK64),
            )
        )
        self._wake()

    def handle_consumer_stats(self, request: Request) -> None:
        body = request.command.consumerStats
        if self._np.has_consumer(body.consumer_id):
            self._np.consumer_stats(body)
            return
        handle = self._consumers.get(body.consumer_id)
        response = api.CommandConsumerStatsResponse(request_id=body.request_id)
        if handle is None or handle.consumer is None:
            response.error_code = api.ConsumerNotFound
            response.error_message = f"Consumer {body.consumer_id} not found"
        else:
            consumer = handle.consumer
            response.consumerName = consumer.name
            response.availablePermits = max(consumer.permits, 0) + handle.client_permits
            response.unackedMessages = max(consumer.unacked_messages, 0)
            response.type = handle.subscription.type.value
            response.msgBacklog = handle.subscription.backlog()
            response.address = self.peer
        self.connection.send(api.BaseCommand(type=_T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=response))

    # -- helpers -----------------------------------------------------------------------------
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


_HANDLERS: dict[int, Callable[[Session, Request], None]] = {
    spec.type: getattr(Session, spec.handler_name) for spec in COMMANDS.values() if hasattr(Session, spec.handler_name)
}
"""Command type -> the session method handling it (from the command table)."""


_UNCHUNKED = EntryMetadata()
_MessageMetadata = api.MessageMetadata


def _metadata_for(topic: Topic, data: bytes) -> EntryMetadata:
    """The metadata a SEND's deduplication check needs, after checking that ``data`` is a
    valid ``MessageMetadata`` (nothing unparseable is ever stored).

    The built-in deduplication reads only the chunk fields of the metadata: an unchunked
    message gets a shared empty record and a chunk a record of its chunk fields, which saves
    building a full one per message (the stored bytes are the producer's either way). Any other
    hook, and a topic being recorded (the recorder writes each entry's deliver-at time and
    key), gets the full record.
    """
    try:
        msg = _MessageMetadata.FromString(data)
    except DecodeError as exc:
        raise StateCorruptedError(f"invalid message metadata: {exc}") from None
    if not msg.IsInitialized():
        # FindInitializationErrors: on every message class at run time, missing from the stubs
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise StateCorruptedError(f"invalid message metadata: missing {missing}")
    if topic.journal is not None:  # a recording keeps each entry's deliver-at time and key
        return EntryMetadata.from_bytes(data)
    dedup = topic.deduplication
    if type(dedup) is NoDeduplication:
        return _UNCHUNKED
    if type(dedup) is MessageDeduplication:
        if not msg.HasField("chunk_id"):
            return _UNCHUNKED
        return EntryMetadata(chunk_id=msg.chunk_id, num_chunks=msg.num_chunks_from_msg)
    return EntryMetadata.from_bytes(data)


def _plain_entry(d: EntryDelivery) -> bytes:  # pragma: no cover - entries read from a store carry raw bytes
    return checksummed_entry(encode_entry(d.entry.data, d.entry.metadata))


def _reads_from_earliest(body: api.CommandSubscribe) -> bool:
    """Whether a reader starts at the earliest message (its first compacted read covers the
    whole compacted view, Pulsar's ``MessageId.earliest`` start id)."""
    return not body.durable and body.HasField("start_message_id") and _signed(body.start_message_id.ledgerId) < 0


def _start_position(mid: api.MessageIdData) -> Position:
    """Where a reader's non-durable cursor starts (exclusive): one entry before the id, so the
    start message itself is delivered. Pulsar takes every start id as a batch message id
    (``ServerCnx.handleSubscribe``) and steps back one entry (``getNonDurableSubscription``):
    a batch may be partly unread, and an inclusive reader wants the start message; the client
    drops what it should not see (the start message of a non-inclusive reader)."""
    ledger, entry = _signed(mid.ledgerId), _signed(mid.entryId)
    if ledger < 0:
        return EARLIEST
    if ledger >= _INT64_MAX:
        return LATEST
    if entry >= 0:
        entry -= 1
    return Position(ledger, entry)


def _seek_target(mid: api.MessageIdData) -> Position:
    ledger, entry = _signed(mid.ledgerId), _signed(mid.entryId)
    if ledger < 0:
        return EARLIEST
    if ledger >= _INT64_MAX:
        return LATEST
    return Position(ledger, entry)


def _schema_info(schema: api.Schema) -> SchemaInfo:
    return SchemaInfo(
        int(schema.type), bytes(schema.schema_data), schema.name, tuple((kv.key, kv.value) for kv in schema.properties)
    )


def _schema_message(info: SchemaInfo) -> api.Schema:
    return api.Schema(
        name=info.name,
        schema_data=info.data,
        type=info.type,  # type: ignore[arg-type]
        properties=[api.KeyValue(key=k, value=v) for k, v in info.properties],
    )
