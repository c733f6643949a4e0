"""The protocol side of ``non-persistent://`` topics: a session's producers and consumers on them.

A :class:`~mledger.protocol._session.Session` hands every command about a non-persistent topic
(PRODUCER, SUBSCRIBE on a ``non-persistent://`` name; SEND, FLOW, ACK, CLOSE_*, UNSUBSCRIBE,
... for the ids opened that way) to its :class:`NonPersistentEndpoints`, which drives a
:class:`~mledger.broker._nonpersistent.NonPersistentTopic` (Pulsar's ``ServerCnx`` does the same
with a ``NonPersistentTopic``):

* SEND -> ``NonPersistentTopic.publish`` at once, then SEND_RECEIPT with message id ``(0, 0)``
  (Pulsar's): the producer never waits for a consumer, what no consumer can take is dropped;
* SUBSCRIBE -> ``NonPersistentTopic.subscribe`` with this module's sink; FLOW grants the
  client's permits straight to the broker consumer (nothing is buffered, so there is no
  window to keep); MESSAGE frames carry the producer's bytes unchanged;
* ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES: accepted, nothing to do; SEEK and
  GET_LAST_MESSAGE_ID: refused (``NotAllowedError``), there is nothing stored to seek in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from google.protobuf.message import DecodeError

from ..broker import Broker, Consumer, EntryDelivery, SubscriptionType
from ..broker._names import TopicName
from ..broker._nonpersistent import NonPersistentProducer, NonPersistentSubscription, NonPersistentTopic
from ..broker._types import ClientInfo
from ..codec.proto import PulsarApi_pb2 as api
from ..core._errors import MLedgerError, NotAllowedError, NotFoundError
from ._codec import message_command, send_receipt_frame
from ._connection import Connection, Request
from ._framing import checksummed_entry, payload_frame_parts

__all__ = ["SUB_TYPES", "NonPersistentConsumerHandle", "NonPersistentEndpoints", "is_non_persistent"]

_T = api.BaseCommand
_MASK64 = (1 << 64) - 1
_PREFIX = "non-persistent://"

SUB_TYPES = {
    api.CommandSubscribe.Exclusive: SubscriptionType.EXCLUSIVE,
    api.CommandSubscribe.Shared: SubscriptionType.SHARED,
    api.CommandSubscribe.Failover: SubscriptionType.FAILOVER,
    api.CommandSubscribe.Key_Shared: SubscriptionType.KEY_SHARED,
}
"""SUBSCRIBE's ``subType`` -> the broker's subscription type."""


class _Host(Protocol):
    @property
    def broker(self) -> Broker: ...

    def run_on_loop(self, fn: Callable[[], None]) -> None: ...


class SessionSide(Protocol):
    """What the endpoints need of their :class:`~mledger.protocol._session.Session`."""

    connection: Connection
    peer: str
    closed: bool
    checksum_errors: int
    messages_in: int
    bytes_in: int
    messages_out: int
    bytes_out: int

    @property
    def host(self) -> _Host: ...

    def authorize_topic(self, topic: TopicName, operation: str) -> None: ...

    def error_code(self, exc: BaseException) -> api.ServerError.ValueType: ...

    def send_error(
        self, producer_id: int, sequence_id: int, error: api.ServerError.ValueType, message: str
    ) -> None: ...

    def send_success(self, request_id: int) -> None: ...

    def producer_id_in_use(self, body: api.CommandProducer) -> bool: ...

    def send_producer_success(self, request_id: int, name: str) -> None: ...

    def consumer_id_in_use(self, body: api.CommandSubscribe) -> bool: ...

    def wake(self) -> None: ...


def is_non_persistent(topic: str) -> bool:
    """Whether ``topic`` is a ``non-persistent://`` name."""
    return topic.startswith(_PREFIX)


class NonPersistentConsumerHandle:
    """A client's consumer on a non-persistent topic; the broker consumer's sink (its methods
    may be called from any thread and hand over to the loop)."""

    __slots__ = ("consumer", "consumer_id", "endpoints", "pending_active", "ready", "subscription", "topic")

    def __init__(self, endpoints: NonPersistentEndpoints, consumer_id: int, topic: NonPersistentTopic) -> None:
        self.endpoints = endpoints
        self.consumer_id = consumer_id
        self.topic = topic
        self.consumer: Consumer | None = None
        self.subscription: NonPersistentSubscription | None = None
        self.ready = False
        self.pending_active: bool | None = None

    def deliver(self, consumer: Consumer, deliveries: list[EntryDelivery]) -> None:
        """Write the deliveries as MESSAGE frames, on the loop."""
        endpoints = self.endpoints
        endpoints.session.host.run_on_loop(lambda: endpoints.write_messages(self, deliveries))

    def active_changed(self, consumer: Consumer, is_active: bool) -> None:
        """Failover: tell the client (ACTIVE_CONSUMER_CHANGE) once its SUBSCRIBE is answered."""

        def tell() -> None:
            if self.ready:
                self.endpoints.send_active_change(self, is_active)
            else:
                self.pending_active = is_active

        self.endpoints.session.host.run_on_loop(tell)

    def disconnected(self, consumer: Consumer) -> None:
        """The broker removed the consumer (topic unloaded): tell the client, on the loop."""
        endpoints = self.endpoints
        endpoints.session.host.run_on_loop(lambda: endpoints.consumer_closed_by_broker(self))

    def held_permits(self) -> int:
        """Permits are granted as they come: none held back."""
        return 0

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """A non-persistent topic is never terminated."""


class _ProducerHandle:
    __slots__ = ("producer", "producer_id", "topic")

    def __init__(self, producer_id: int, topic: NonPersistentTopic, producer: NonPersistentProducer) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.producer = producer


class NonPersistentEndpoints:
    """One session's producers and consumers on non-persistent topics (loop thread only).

    Their ids are the session's: an id names one producer (consumer) of either kind, as in
    Pulsar's one map per connection, so PRODUCER and SUBSCRIBE ask the session first
    (``producer_id_in_use`` / ``consumer_id_in_use``)."""

    def __init__(self, session: SessionSide) -> None:
        self.session = session
        self._producers: dict[int, _ProducerHandle] = {}
        self._consumers: dict[int, NonPersistentConsumerHandle] = {}

    def has_producer(self, producer_id: int) -> bool:
        """Whether ``producer_id`` is a producer on a non-persistent topic."""
        return producer_id in self._producers

    def producer_name(self, producer_id: int) -> str | None:
        """The name of producer ``producer_id`` on a non-persistent topic, None without one."""
        handle = self._producers.get(producer_id)
        return None if handle is None else handle.producer.name

    def has_consumer(self, consumer_id: int) -> bool:
        """Whether ``consumer_id`` is a consumer on a non-persistent topic."""
        return consumer_id in self._consumers

    @property
    def producer_count(self) -> int:
        return len(self._producers)

    @property
    def consumer_count(self) -> int:
        return len(self._consumers)

    # -- producers ---------------------------------------------------------------------------
    def open_producer(self, body: api.CommandProducer) -> None:
        """PRODUCER on a non-persistent topic: PRODUCER_SUCCESS or ERROR."""
        session = self.session
        connection = session.connection
        try:
            name = TopicName.parse(body.topic, any_domain=True)
            session.authorize_topic(name, "PRODUCE")
            if session.producer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            topic = session.host.broker.open_non_persistent_topic(body.topic)
            client = ClientInfo(session.peer or None, connection.client_version or None, body.producer_id)
            wanted = body.producer_name if body.HasField("producer_name") and body.producer_name else None
            producer = topic.add_producer(wanted, client)
        except MLedgerError as exc:
            connection.send_error(body.request_id, session.error_code(exc), str(exc))
            return
        handle = self._producers[body.producer_id] = _ProducerHandle(body.producer_id, topic, producer)
        session.send_producer_success(body.request_id, handle.producer.name)

    def send(self, request: Request) -> None:
        """SEND: publish to the connected consumers and answer SEND_RECEIPT ``(0, 0)``."""
        session = self.session
        send = request.command.send
        handle = self._producers[send.producer_id]
        payload = request.payload
        if payload is None:
            session.send_error(send.producer_id, send.sequence_id, api.NotAllowedError, "SEND without a payload")
            return
        entry, metadata_bytes, checksum_ok = payload
        if checksum_ok is False:
            session.checksum_errors += 1
            session.send_error(send.producer_id, send.sequence_id, api.ChecksumError, "Checksum failed on the broker")
            return
        try:
            metadata = api.MessageMetadata.FromString(metadata_bytes)
        except DecodeError as exc:
            session.send_error(send.producer_id, send.sequence_id, api.UnknownError, f"invalid message metadata: {exc}")
            return
        key: bytes | str | None = None
        if metadata.HasField("ordering_key"):
            key = metadata.ordering_key
        elif metadata.HasField("partition_key"):
            key = metadata.partition_key
        n = max(send.num_messages, 1) if send.HasField("num_messages") else 1
        handle.topic.publish(handle.producer, entry, n, key)
        session.messages_in += n
        session.bytes_in += len(entry)
        highest = max(send.highest_sequence_id, send.sequence_id)
        session.connection.send_frames([send_receipt_frame(send.producer_id, send.sequence_id, highest, 0, 0)])
        session.wake()

    def close_producer(self, producer_id: int) -> None:
        """Detach the producer (CLOSE_PRODUCER or the connection closed)."""
        handle = self._producers.pop(producer_id, None)
        if handle is not None:
            handle.topic.remove_producer(handle.producer)

    # -- consumers ---------------------------------------------------------------------------
    def subscribe(self, body: api.CommandSubscribe) -> None:
        """SUBSCRIBE on a non-persistent topic: SUCCESS or ERROR."""
        session = self.session
        connection = session.connection
        try:
            name = TopicName.parse(body.topic, any_domain=True)
            session.authorize_topic(name, "CONSUME")
            if session.consumer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            if body.read_compacted:
                raise NotAllowedError("readCompacted only valid on persistent topics")
            broker = session.host.broker
            if not body.force_topic_creation and not broker.non_persistent.exists(name):
                raise NotFoundError(f"Topic {body.topic} does not exist")
            topic = broker.open_non_persistent_topic(body.topic)
            handle = NonPersistentConsumerHandle(self, body.consumer_id, topic)
            client = ClientInfo(session.peer or None, connection.client_version or None, body.consumer_id)
            sub_type = SUB_TYPES[body.subType]
            consumer = topic.subscribe(
                body.subscription, sub_type, body.consumer_name or None, sink=handle, client=client
            )
            handle.consumer = consumer
            subscription = consumer.subscription
            assert isinstance(subscription, NonPersistentSubscription)
            handle.subscription = subscription
        except MLedgerError as exc:
            connection.send_error(body.request_id, session.error_code(exc), str(exc))
            return
        self._consumers[body.consumer_id] = handle
        session.send_success(body.request_id)
        handle.ready = True
        if handle.pending_active is not None:
            self.send_active_change(handle, handle.pending_active)
            handle.pending_active = None

    def flow(self, consumer_id: int, permits: int) -> None:
        """FLOW: the client's permits go to the broker consumer at once."""
        handle = self._consumers[consumer_id]
        if handle.consumer is not None and handle.consumer.is_connected and permits > 0:
            handle.consumer.flow(permits)

    def write_messages(self, handle: NonPersistentConsumerHandle, deliveries: list[EntryDelivery]) -> None:
        """Queue MESSAGE frames for what the broker delivered to ``handle`` (loop thread)."""
        session = self.session
        if session.closed or self._consumers.get(handle.consumer_id) is not handle:
            return
        partition = handle.topic.partition_index
        frames: list[bytes] = []
        size = 0
        count = 0
        for d in deliveries:
            body = checksummed_entry(d.entry.raw)
            command = message_command(handle.consumer_id, 0, 0, partition, 0, None)
            frames += payload_frame_parts(command, body)
            size += len(body)
            count += d.messages
        session.connection.send_frames(frames)
        session.messages_out += count
        session.bytes_out += size
        session.wake()

    def send_active_change(self, handle: NonPersistentConsumerHandle, is_active: bool) -> None:
        """Queue ACTIVE_CONSUMER_CHANGE for ``handle``."""
        change = api.CommandActiveConsumerChange(consumer_id=handle.consumer_id, is_active=is_active)
        self.session.connection.send(api.BaseCommand(type=_T.ACTIVE_CONSUMER_CHANGE, active_consumer_change=change))
        self.session.wake()

    def close_consumer(self, consumer_id: int) -> None:
        """Detach the consumer (CLOSE_CONSUMER or the connection closed)."""
        handle = self._consumers.pop(consumer_id, None)
        if handle is not None and handle.consumer is not None:
            handle.consumer.close()

    def unsubscribe(self, body: api.CommandUnsubscribe) -> None:
        """UNSUBSCRIBE: refused while other consumers share the subscription, else the consumer
        leaves and the subscription goes with it."""
        handle = self._consumers[body.consumer_id]
        session = self.session
        if handle.subscription is not None and any(c is not handle.consumer for c in handle.subscription.consumers):
            session.connection.send_error(
                body.request_id, api.ConsumerBusy, "Unconnected or shared consumer attempting to unsubscribe"
            )
            return
        self.close_consumer(body.consumer_id)
        session.send_success(body.request_id)

    def consumer_closed_by_broker(self, handle: NonPersistentConsumerHandle) -> None:
        """The broker removed ``handle``'s consumer: tell the client (CLOSE_CONSUMER)."""
        session = self.session
        if self._consumers.get(handle.consumer_id) is not handle or session.closed:
            return
        del self._consumers[handle.consumer_id]
        close = api.CommandCloseConsumer(consumer_id=handle.consumer_id, request_id=_MASK64)
        session.connection.send(api.BaseCommand(type=_T.CLOSE_CONSUMER, close_consumer=close))
        session.wake()

    def consumer_stats(self, body: api.CommandConsumerStats) -> None:
        """CONSUMER_STATS: the consumer's permits; no backlog, nothing unacknowledged."""
        handle = self._consumers[body.consumer_id]
        response = api.CommandConsumerStatsResponse(request_id=body.request_id)
        consumer = handle.consumer
        assert consumer is not None and handle.subscription is not None
        response.consumerName = consumer.name
        response.availablePermits = max(consumer.permits, 0)
        response.unackedMessages = 0
        response.type = handle.subscription.type.value
        response.msgBacklog = 0
        response.address = self.session.peer
        self.session.connection.send(api.BaseCommand(type=_T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=response))

    def refuse(self, request_id: int, what: str) -> None:
        """ERROR for a command that needs stored messages (SEEK, GET_LAST_MESSAGE_ID)."""
        self.session.connection.send_error(
            request_id, api.NotAllowedError, f"{what} is not allowed on a non-persistent topic"
        )

    def close(self) -> None:
        """The connection is gone: detach every producer and consumer."""
        for producer_id in list(self._producers):
            self.close_producer(producer_id)
        for consumer_id in list(self._consumers):
            self.close_consumer(consumer_id)
