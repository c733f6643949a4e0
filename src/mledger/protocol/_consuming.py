"""The consumer commands of a protocol session: SUBSCRIBE, FLOW, ACK, SEEK and the rest.

SUBSCRIBE -> ``Topic.subscribe`` (durable) or ``Topic.open_non_durable_subscription``
(readers), then ``Subscription.add_consumer(sink=...)`` with no permits; FLOW grants permits
and dispatches; the dispatcher pushes whole entries to the sink, which writes MESSAGE frames.
ACK -> ``acknowledge_request`` (one request per CommandAck) / ``acknowledge_cumulative``;
with a request id the ACK_RESPONSE follows the cursor's persist (the cursor persists every
change before the call returns unless ``throttle_mark_delete`` is set, in which case the
session flushes the subscription's acks first). REDELIVER -> negative acks; SEEK ->
``reset_cursor`` (which disconnects the subscription's remote consumers: CLOSE_CONSUMER before
SUCCESS, as Pulsar does).

Flow control: a FLOW's permits are kept in the consumer's handle and granted to the broker
consumer at most :data:`PERMIT_WINDOW` at a time, and only while the socket's write buffer is
below its high mark, so a FLOW of 2**31 permits cannot make the server buffer the whole topic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..broker import (
    MESSAGE,
    AckRequest,
    EntryDelivery,
    FaultTarget,
    ack_set_words,
    check_read_compacted,
)
from ..codec import MessageId, encode_entry
from ..codec.proto import PulsarApi_pb2 as api
from ..core import UINT64_MASK, InvalidRequestError, MLedgerError, NotFoundError, Position, as_int64, words_to_ack_set
from ..managed_ledger import InitialPosition
from ._codec import message_command
from ._connection import Request
from ._context import CommandContext, CommandGroup
from ._convert import (
    message_id_data,
    position_of,
    reads_from_earliest,
    schema_info,
    seek_target,
    server_error_code,
    start_position,
)
from ._framing import checksummed_entry, payload_frame_parts
from ._handles import ConsumerHandle
from ._nonpersistent import SUB_TYPES, NonPersistentCommands, is_non_persistent

__all__ = ["PERMIT_WINDOW", "ConsumerCommands"]

log = logging.getLogger(__name__)

PERMIT_WINDOW = 1000
"""Most permits a broker consumer holds at once; the rest of a FLOW waits in the session."""

_T = api.BaseCommand


class ConsumerCommands(CommandGroup):
    """A session's consumer handlers (SUBSCRIBE, FLOW, ACK, ...), given the session's
    :class:`~mledger.protocol._context.CommandContext`; the
    :class:`~mledger.protocol._handles.ConsumerOwner` of its consumer handles. Loop thread only."""

    __slots__ = ("_consumers", "_faults", "_np", "_np_consumers")

    def __init__(self, context: CommandContext, np: NonPersistentCommands) -> None:
        super().__init__(context)
        self._np = np
        self._faults = context.host.broker.faults
        # live read-only views of the consumers by id (FLOW and ACK look them up)
        self._consumers = context.state.consumers
        self._np_consumers = context.state.np_consumers

    def handle_subscribe(self, request: Request) -> None:
        body = request.command.subscribe
        if is_non_persistent(body.topic):
            self._np.subscribe(body)
            return
        request_id = body.request_id
        try:
            self._context.authorize(body.topic, "CONSUME", body.subscription)
            if self._context.consumer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            broker = self._context.host.broker
            if not body.force_topic_creation and not broker.topic_exists(body.topic):
                raise NotFoundError(f"Topic {body.topic} does not exist")
            topic = self._context.open_partition(body.topic)
            if body.HasField("schema"):
                broker.add_schema_if_idle_or_check_compatible(topic, schema_info(body.schema))
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
                start = start_position(body.start_message_id) if body.HasField("start_message_id") else None
                subscription = topic.open_non_durable_subscription(body.subscription, sub_type, start, initial)
            handle = ConsumerHandle(self, body.consumer_id, topic, subscription)
            name = body.consumer_name or None
            if name is not None and any(c.name == name for c in subscription.consumers):
                name = f"{name}#{self._context.host.next_id()}"
            client = self._context.client_info(body.consumer_id)
            handle.consumer = subscription.add_consumer(
                name,
                permits=0,
                sink=handle,
                client=client,
                read_compacted=body.read_compacted,
                start_earliest=reads_from_earliest(body),
            )
        except MLedgerError as exc:
            self._connection.send_error(request_id, server_error_code(exc), str(exc))
            return
        self._state.add_consumer(handle)
        self._context.host.watch(topic)
        self._context.send_success(request_id)
        handle.ready = True
        if handle.pending_active is not None:
            self.send_active_change(handle, handle.pending_active)
            handle.pending_active = None
        if handle.pending_end_of_topic:
            self.send_reached_end_of_topic(handle)
            handle.pending_end_of_topic = False

    def handle_flow(self, request: Request) -> None:
        body = request.command.flow
        if body.consumer_id in self._np_consumers:
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
        state = self._state
        if state.closed or consumer is None or not consumer.is_connected or state.writing_paused:
            return
        room = PERMIT_WINDOW - consumer.permits
        if room > 0 and handle.client_permits > 0:
            grant = min(room, handle.client_permits)
            handle.client_permits -= grant
            try:
                consumer.flow(grant)
            except MLedgerError:
                return
        self._context.host.dispatch(handle.subscription)

    def write_messages(self, handle: ConsumerHandle, deliveries: list[EntryDelivery]) -> None:
        """Queue MESSAGE frames for what the broker delivered to ``handle`` (loop thread)."""
        if self._state.closed or handle.consumer is None or not handle.consumer.is_connected:
            return  # the broker redelivers what this consumer held when it is removed
        consumer_id = handle.consumer_id
        partition = handle.partition
        faulty = self._faults.messages_armed  # an injected duplicate or redelivery (nothing armed: one check)
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
            parts = payload_frame_parts(command, body)
            frames += parts
            if faulty:
                self._message_fault(handle, position, parts, frames)
            count += d.messages
            size += len(body)
        self._connection.send_frames(frames)
        self._state.count_out(count, size)
        self._context.wake()
        if handle.client_permits > 0 and handle.consumer.permits < PERMIT_WINDOW // 2:
            self._context.host.pump_soon(handle)

    def _message_fault(
        self, handle: ConsumerHandle, position: Position, parts: Sequence[bytes], frames: list[bytes]
    ) -> None:
        """Apply a MESSAGE fault that fires on ``position``'s frame (``parts``, queued in
        ``frames``): send it twice, or redeliver the message once written (after this turn:
        the dispatcher is delivering now)."""
        consumer = handle.consumer
        assert consumer is not None
        names = (consumer.name, *(n for n in (self._state.role, self._state.peer) if n))
        target = FaultTarget(handle.topic.name, handle.subscription.name, names, f"{position[0]}:{position[1]}")
        firing = self._faults.take(MESSAGE, lambda: target)
        if firing is None:
            return
        if firing.spec.action == "duplicate":
            frames += parts
            return

        def redeliver() -> None:
            if consumer.is_connected and consumer.holds(position):
                try:
                    consumer.negative_acknowledge([MessageId(position.ledger_id, position.entry_id)])
                except MLedgerError as exc:
                    log.info("%s: injected redelivery refused: %s", handle.topic.name, exc)
                self._context.host.dispatch_soon(handle.subscription)

        self._context.host.post(redeliver)

    def send_active_change(self, handle: ConsumerHandle, is_active: bool) -> None:
        """Queue ACTIVE_CONSUMER_CHANGE for ``handle`` (loop thread)."""
        self._connection.send(
            api.BaseCommand(
                type=_T.ACTIVE_CONSUMER_CHANGE,
                active_consumer_change=api.CommandActiveConsumerChange(
                    consumer_id=handle.consumer_id, is_active=is_active
                ),
            )
        )
        self._context.wake()

    def send_reached_end_of_topic(self, handle: ConsumerHandle) -> None:
        """Queue REACHED_END_OF_TOPIC for ``handle`` (loop thread); as Pulsar's
        ``Consumer.reachedEndOfTopic``, only to a client that speaks protocol v9 or later."""
        if handle.consumer_id not in self._consumers or self._state.closed or self._connection.protocol_version < 9:
            return
        self._connection.send(
            api.BaseCommand(
                type=_T.REACHED_END_OF_TOPIC,
                reachedEndOfTopic=api.CommandReachedEndOfTopic(consumer_id=handle.consumer_id),
            )
        )
        self._context.wake()

    def handle_ack(self, request: Request) -> None:
        body = request.command.ack
        handle = self._consumers.get(body.consumer_id)
        error: BaseException | None = None
        if body.consumer_id in self._np_consumers:
            pass  # nothing to acknowledge on a non-persistent topic
        elif handle is None or handle.consumer is None:
            error = NotFoundError(f"Consumer {body.consumer_id} not found")
        else:
            if body.HasField("validation_error"):
                self._state.count_validation_error()
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
                    handle.subscription.flush_acks()
            except MLedgerError as exc:
                error = exc
                log.info("%s: ack from consumer %s refused: %s", handle.topic.name, handle.consumer.name, exc)
            self._context.host.dispatch_soon(handle.subscription)
        if body.HasField("request_id"):
            response = api.CommandAckResponse(consumer_id=body.consumer_id, request_id=body.request_id)
            if error is not None:
                response.error = server_error_code(error)
                response.message = str(error)
            self._connection.send(api.BaseCommand(type=_T.ACK_RESPONSE, ackResponse=response))

    def _ack_individual(self, handle: ConsumerHandle, ids: Sequence[api.MessageIdData]) -> None:
        consumer = handle.consumer
        assert consumer is not None
        whole: list[Position] = []
        ack_sets: list[tuple[Position, int, int | None]] = []
        indexed: list[MessageId] = []
        for mid in ids:  # one pass: each id goes to the part of the request its form names
            position = position_of(mid)
            if mid.ack_set:
                bits = words_to_ack_set(mid.ack_set)
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
        position = position_of(mid)
        batch_index = mid.batch_index if mid.HasField("batch_index") else -1
        if mid.ack_set:
            bits = words_to_ack_set(mid.ack_set)
            first_unacked = (bits & -bits).bit_length() - 1 if bits else -1
            if first_unacked == 0:  # nothing of this entry: up to the previous entry
                previous = handle.topic.previous_position(position)
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
                ids = [MessageId(as_int64(m.ledgerId), as_int64(m.entryId)) for m in body.message_ids]
                handle.consumer.negative_acknowledge(ids)
            else:
                handle.consumer.redeliver_unacknowledged_messages()
        except MLedgerError as exc:
            log.info("%s: redelivery request refused: %s", handle.topic.name, exc)
        self._context.host.dispatch_soon(handle.subscription)

    def handle_seek(self, request: Request) -> None:
        body = request.command.seek
        handle = self._stored_consumer(body.consumer_id, body.request_id, "Seek")
        if handle is None:
            return
        try:
            if body.HasField("message_publish_time"):
                handle.subscription.reset_cursor_by_time(as_int64(body.message_publish_time))
            elif body.HasField("message_id"):
                handle.subscription.reset_cursor(seek_target(body.message_id))
            else:
                raise InvalidRequestError("SEEK needs a message id or a publish time")
        except MLedgerError as exc:
            self._connection.send_error(body.request_id, server_error_code(exc), str(exc))
            return
        # reset_cursor disconnected the consumers (CLOSE_CONSUMER is queued); then SUCCESS.
        self._context.send_success(body.request_id)

    def handle_get_last_message_id(self, request: Request) -> None:
        body = request.command.getLastMessageId
        handle = self._stored_consumer(body.consumer_id, body.request_id, "GetLastMessageId")
        if handle is None:
            return
        reads_compacted = handle.consumer is not None and handle.consumer.read_compacted
        last, batch_index = handle.topic.last_message_id(reads_compacted)
        response = api.CommandGetLastMessageIdResponse(
            request_id=body.request_id,
            last_message_id=message_id_data(last, handle.partition, batch_index),
            consumer_mark_delete_position=message_id_data(handle.subscription.mark_delete_position),
        )
        self._connection.send(api.BaseCommand(type=_T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response))

    def handle_unsubscribe(self, request: Request) -> None:
        body = request.command.unsubscribe
        if body.consumer_id in self._np_consumers:
            self._np.unsubscribe(body)
            return
        handle = self._consumer(body.consumer_id, body.request_id)
        if handle is None:
            return
        others = [c for c in handle.subscription.consumers if c is not handle.consumer]
        if others:
            self._connection.send_error(
                body.request_id, api.ConsumerBusy, "Unconnected or shared consumer attempting to unsubscribe"
            )
            return
        self._close_consumer(handle)
        try:
            if handle.subscription.durable:
                handle.topic.delete_subscription(handle.subscription.name)
        except MLedgerError as exc:
            self._connection.send_error(body.request_id, server_error_code(exc), str(exc))
            return
        self._context.send_success(body.request_id)

    def _stored_consumer(self, consumer_id: int, request_id: int, command: str) -> ConsumerHandle | None:
        """The consumer of a command that needs stored messages; None once answered with ERROR
        (``NotAllowedError`` on a non-persistent topic, ``ConsumerNotFound``)."""
        if consumer_id in self._np_consumers:
            self._np.refuse(request_id, command)
            return None
        return self._consumer(consumer_id, request_id)

    def _consumer(self, consumer_id: int, request_id: int) -> ConsumerHandle | None:
        """The consumer ``consumer_id``; None once answered with ERROR ``ConsumerNotFound``."""
        handle = self._consumers.get(consumer_id)
        if handle is None:
            self._connection.send_error(request_id, api.ConsumerNotFound, f"Consumer {consumer_id} not found")
        return handle

    def handle_close_consumer(self, request: Request) -> None:
        body = request.command.close_consumer
        self._np.close_consumer(body.consumer_id)
        handle = self._consumers.get(body.consumer_id)
        if handle is not None:
            self._close_consumer(handle)
        self._context.send_success(body.request_id)

    def _close_consumer(self, handle: ConsumerHandle) -> None:
        self._state.remove_consumer(handle.consumer_id)
        consumer = handle.consumer
        if consumer is not None and consumer.is_connected:
            consumer.close()
            self._context.host.dispatch_soon(handle.subscription)  # others get what it held

    def close(self) -> None:
        """The connection is gone: close this client's consumers (each, whatever one raises:
        the last consumer's removal persists its rewound cursor, which a full disk refuses)."""
        for handle in list(self._consumers.values()):
            try:
                self._close_consumer(handle)
            except Exception:
                log.exception("%s: closing consumer %s failed", handle.topic.name, handle.consumer_id)

    def resume(self) -> None:
        """The socket's write buffer fell below its low mark: grant permits again."""
        for handle in list(self._consumers.values()):
            self.pump(handle)

    def consumer_closed_by_broker(self, handle: ConsumerHandle) -> None:
        """The broker removed ``handle``'s consumer: forget it and tell the client
        (CLOSE_CONSUMER). Loop thread."""
        if self._consumers.get(handle.consumer_id) is not handle or self._state.closed:
            return
        self._state.remove_consumer(handle.consumer_id)
        self._connection.send(
            api.BaseCommand(
                type=_T.CLOSE_CONSUMER,
                close_consumer=api.CommandCloseConsumer(consumer_id=handle.consumer_id, request_id=UINT64_MASK),
            )
        )
        self._context.wake()

    def handle_consumer_stats(self, request: Request) -> None:
        body = request.command.consumerStats
        if body.consumer_id in self._np_consumers:
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
            response.address = self._state.peer
        self._connection.send(api.BaseCommand(type=_T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=response))


def _plain_entry(d: EntryDelivery) -> bytes:  # pragma: no cover - entries read from a store carry raw bytes
    return checksummed_entry(encode_entry(d.entry.data, d.entry.metadata))
