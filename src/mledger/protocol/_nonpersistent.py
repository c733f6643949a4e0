"""The protocol side of ``non-persistent://`` topics: a session's producers and consumers on them.

A :class:`~mledger.protocol._session.Session` hands every command about a non-persistent topic
(PRODUCER, SUBSCRIBE on a ``non-persistent://`` name; SEND, FLOW, ACK, CLOSE_*, UNSUBSCRIBE,
... for the ids opened that way) to its :class:`NonPersistentCommands`, which drives a
:class:`~mledger.broker.NonPersistentTopic` (Pulsar's ``ServerCnx`` does the same
with a ``NonPersistentTopic``):

* SEND -> ``NonPersistentTopic.publish`` at once, then SEND_RECEIPT with message id ``(0, 0)``
  (Pulsar's): the producer never waits for a consumer, what no consumer can take is dropped;
* SUBSCRIBE -> ``NonPersistentTopic.subscribe`` with this module's sink; FLOW grants the
  client's permits straight to the broker consumer (nothing is buffered, so there is no
  window to keep); MESSAGE frames carry the producer's bytes unchanged;
* ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES: accepted, nothing to do; SEEK and
  GET_LAST_MESSAGE_ID: refused (``NotAllowedError``), there is nothing stored to seek in.

The producers and consumers are kept by id in the session's
:class:`~mledger.protocol._session_state.SessionState`, in the id space of the persistent ones
(Pulsar's one map per connection), so PRODUCER and SUBSCRIBE ask the shared
``producer_id_in_use`` / ``consumer_id_in_use`` first.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from ..broker import EntryDelivery, NonPersistentSubscription, SubscriptionType, TopicName
from ..codec.proto import PulsarApi_pb2 as api
from ..core import MLedgerError, NotAllowedError, NotFoundError
from ._codec import message_command, send_receipt_frame
from ._connection import Request
from ._context import CommandGroup
from ._convert import server_error_code
from ._framing import checksummed_entry, payload_frame_parts
from ._handles import NonPersistentConsumerHandle, NonPersistentProducerHandle

__all__ = ["SUB_TYPES", "NonPersistentCommands", "is_non_persistent"]

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


def is_non_persistent(topic: str) -> bool:
    """Whether ``topic`` is a ``non-persistent://`` name."""
    return topic.startswith(_PREFIX)


class NonPersistentCommands(CommandGroup):
    """One session's commands about producers and consumers on non-persistent topics (loop
    thread only); the :class:`~mledger.protocol._handles.NonPersistentConsumerOwner` of their
    consumer handles. Their ids are the session's (see the module docstring)."""

    __slots__ = ()

    # -- producers ---------------------------------------------------------------------------
    def open_producer(self, body: api.CommandProducer) -> None:
        """PRODUCER on a non-persistent topic: PRODUCER_SUCCESS or ERROR."""
        context = self._context
        try:
            name = TopicName.parse(body.topic, any_domain=True)
            context.authorize_topic(name, "PRODUCE")
            if context.producer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            topic = context.host.broker.open_non_persistent_topic(body.topic)
            client = context.client_info(body.producer_id)
            wanted = body.producer_name if body.HasField("producer_name") and body.producer_name else None
            producer = topic.add_producer(wanted, client)
        except MLedgerError as exc:
            context.connection.send_error(body.request_id, server_error_code(exc), str(exc))
            return
        handle = NonPersistentProducerHandle(body.producer_id, topic, producer)
        self._state.add_producer(handle)
        context.send_producer_success(body.request_id, handle.producer.name)

    def send(self, request: Request) -> None:
        """SEND: publish to the connected consumers and answer SEND_RECEIPT ``(0, 0)``."""
        context = self._context
        state = self._state
        send = request.command.send
        handle = state.np_producers[send.producer_id]
        payload = request.payload
        if payload is None:
            context.send_error(send.producer_id, send.sequence_id, api.NotAllowedError, "SEND without a payload")
            return
        entry, metadata_bytes, checksum_ok = payload
        if checksum_ok is False:
            state.count_checksum_error()
            context.send_error(send.producer_id, send.sequence_id, api.ChecksumError, "Checksum failed on the broker")
            return
        try:
            metadata = api.MessageMetadata.FromString(metadata_bytes)
        except DecodeError as exc:
            context.send_error(send.producer_id, send.sequence_id, api.UnknownError, f"invalid message metadata: {exc}")
            return
        key: bytes | str | None = None
        if metadata.HasField("ordering_key"):
            key = metadata.ordering_key
        elif metadata.HasField("partition_key"):
            key = metadata.partition_key
        n = max(send.num_messages, 1) if send.HasField("num_messages") else 1
        handle.topic.publish(handle.producer, entry, n, key)
        state.count_in(n, len(entry))
        highest = max(send.highest_sequence_id, send.sequence_id)
        context.connection.send_frames([send_receipt_frame(send.producer_id, send.sequence_id, highest, 0, 0)])
        context.wake()

    def close_producer(self, producer_id: int) -> None:
        """Detach the producer (CLOSE_PRODUCER or the connection closed)."""
        handle = self._state.remove_np_producer(producer_id)
        if handle is not None:
            handle.topic.remove_producer(handle.producer)

    # -- consumers ---------------------------------------------------------------------------
    def subscribe(self, body: api.CommandSubscribe) -> None:
        """SUBSCRIBE on a non-persistent topic: SUCCESS or ERROR."""
        context = self._context
        try:
            name = TopicName.parse(body.topic, any_domain=True)
            context.authorize_topic(name, "CONSUME")
            if context.consumer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            if body.read_compacted:
                raise NotAllowedError("readCompacted only valid on persistent topics")
            broker = context.host.broker
            if not body.force_topic_creation and not broker.non_persistent.exists(name):
                raise NotFoundError(f"Topic {body.topic} does not exist")
            topic = broker.open_non_persistent_topic(body.topic)
            handle = NonPersistentConsumerHandle(self, body.consumer_id, topic)
            client = context.client_info(body.consumer_id)
            sub_type = SUB_TYPES[body.subType]
            consumer = topic.subscribe(
                body.subscription, sub_type, body.consumer_name or None, sink=handle, client=client
            )
            handle.consumer = consumer
            subscription = consumer.subscription
            assert isinstance(subscription, NonPersistentSubscription)
            handle.subscription = subscription
        except MLedgerError as exc:
            context.connection.send_error(body.request_id, server_error_code(exc), str(exc))
            return
        self._state.add_consumer(handle)
        context.send_success(body.request_id)
        handle.ready = True
        if handle.pending_active is not None:
            self.send_active_change(handle, handle.pending_active)
            handle.pending_active = None

    def flow(self, consumer_id: int, permits: int) -> None:
        """FLOW: the client's permits go to the broker consumer at once."""
        handle = self._state.np_consumers[consumer_id]
        if handle.consumer is not None and handle.consumer.is_connected and permits > 0:
            handle.consumer.flow(permits)

    def write_messages(self, handle: NonPersistentConsumerHandle, deliveries: list[EntryDelivery]) -> None:
        """Queue MESSAGE frames for what the broker delivered to ``handle`` (loop thread)."""
        state = self._state
        if state.closed or state.np_consumers.get(handle.consumer_id) is not handle:
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
        self._connection.send_frames(frames)
        state.count_out(count, size)
        self._context.wake()

    def send_active_change(self, handle: NonPersistentConsumerHandle, is_active: bool) -> None:
        """Queue ACTIVE_CONSUMER_CHANGE for ``handle``."""
        change = api.CommandActiveConsumerChange(consumer_id=handle.consumer_id, is_active=is_active)
        self._connection.send(api.BaseCommand(type=_T.ACTIVE_CONSUMER_CHANGE, active_consumer_change=change))
        self._context.wake()

    def close_consumer(self, consumer_id: int) -> None:
        """Detach the consumer (CLOSE_CONSUMER or the connection closed)."""
        handle = self._state.remove_np_consumer(consumer_id)
        if handle is not None and handle.consumer is not None:
            handle.consumer.close()

    def unsubscribe(self, body: api.CommandUnsubscribe) -> None:
        """UNSUBSCRIBE: refused while other consumers share the subscription, else the consumer
        leaves and the subscription goes with it."""
        handle = self._state.np_consumers[body.consumer_id]
        context = self._context
        if handle.subscription is not None and any(c is not handle.consumer for c in handle.subscription.consumers):
            context.connection.send_error(
                body.request_id, api.ConsumerBusy, "Unconnected or shared consumer attempting to unsubscribe"
            )
            return
        self.close_consumer(body.consumer_id)
        context.send_success(body.request_id)

    def consumer_closed_by_broker(self, handle: NonPersistentConsumerHandle) -> None:
        """The broker removed ``handle``'s consumer: tell the client (CLOSE_CONSUMER)."""
        state = self._state
        if state.np_consumers.get(handle.consumer_id) is not handle or state.closed:
            return
        state.remove_np_consumer(handle.consumer_id)
        close = api.CommandCloseConsumer(consumer_id=handle.consumer_id, request_id=_MASK64)
        self._connection.send(api.BaseCommand(type=_T.CLOSE_CONSUMER, close_consumer=close))
        self._context.wake()

    def consumer_stats(self, body: api.CommandConsumerStats) -> None:
        """CONSUMER_STATS: the consumer's permits; no backlog, nothing unacknowledged."""
        handle = self._state.np_consumers[body.consumer_id]
        response = api.CommandConsumerStatsResponse(request_id=body.request_id)
        consumer = handle.consumer
        assert consumer is not None and handle.subscription is not None
        response.consumerName = consumer.name
        response.availablePermits = max(consumer.permits, 0)
        response.unackedMessages = 0
        response.type = handle.subscription.type.value
        response.msgBacklog = 0
        response.address = self._state.peer
        self._connection.send(api.BaseCommand(type=_T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=response))

    def refuse(self, request_id: int, what: str) -> None:
        """ERROR for a command that needs stored messages (SEEK, GET_LAST_MESSAGE_ID)."""
        self._connection.send_error(request_id, api.NotAllowedError, f"{what} is not allowed on a non-persistent topic")

    def close(self) -> None:
        """The connection is gone: detach every producer and consumer."""
        for producer_id in list(self._state.np_producers):
            self.close_producer(producer_id)
        for consumer_id in list(self._state.np_consumers):
            self.close_consumer(consumer_id)
