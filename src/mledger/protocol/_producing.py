"""The producer commands of a protocol session: PRODUCER, SEND, CLOSE_PRODUCER.

PRODUCER -> ``Topic.create_producer`` (access modes, schema). SEND -> the pipelined publish
(``Topic.publish_entries``: the producer's bytes from the checksum on, stored unchanged; the
SENDs of one read go to their topic together, and the ledger's writer stores everything queued
in one write, off the loop when the store's writes block) -> SEND_RECEIPT with the stored
position, written as each write completes (the event loop never waits on the store).

The SENDs wait in the session's state (:meth:`~mledger.protocol._session_state.SessionState.queue_send`)
until the session flushes them, once per read (or every 64 SENDs of a long read).
"""

from __future__ import annotations

from ..broker import FramedPublish, PublishResult
from ..codec.proto import PulsarApi_pb2 as api
from ..core import INT64_MAX, UINT64_MASK, MLedgerError, Position, StateCorruptedError, as_int64
from ._codec import send_receipt_frame
from ._connection import Request
from ._context import CommandContext, CommandGroup
from ._convert import (
    ACCESS_MODES,
    metadata_for,
    schema_info,
    schema_version_bytes,
    send_error_code,
    server_error_code,
)
from ._handles import ProducerHandle, Send, SendsDone
from ._nonpersistent import NonPersistentCommands, is_non_persistent

__all__ = ["ProducerCommands"]

_T = api.BaseCommand
_new_tuple = tuple.__new__  # a named tuple without its Python-level __new__ (one per SEND)


class ProducerCommands(CommandGroup):
    """A session's producer handlers (PRODUCER, SEND, CLOSE_PRODUCER), given the session's
    :class:`~mledger.protocol._context.CommandContext`; the
    :class:`~mledger.protocol._handles.ProducerOwner` of its producer handles. Loop thread only."""

    __slots__ = ("_np", "_producers", "_queue_send")

    def __init__(self, context: CommandContext, np: NonPersistentCommands) -> None:
        super().__init__(context)
        self._np = np
        # the hot path's two lookups, bound once: the live view of the producers by id and the queue
        self._producers = context.state.producers
        self._queue_send = context.state.queue_send

    def handle_producer(self, request: Request) -> None:
        body = request.command.producer
        if is_non_persistent(body.topic):
            self._np.open_producer(body)
            return
        context = self._context
        host = context.host
        request_id = body.request_id
        try:
            context.authorize(body.topic, "PRODUCE")
            if context.producer_id_in_use(body):  # on this topic or any other: Pulsar's answer
                return
            topic = context.open_partition(body.topic)
            schema_version = None
            if body.HasField("schema"):
                version = host.broker.add_schema(topic.name, schema_info(body.schema))
                schema_version = schema_version_bytes(version)
            mode = body.producer_access_mode
            wait = host.access.check(topic, mode)
            name = body.producer_name if body.HasField("producer_name") and body.producer_name else None
            handle = ProducerHandle(self, body.producer_id, topic, mode)
            client = context.client_info(body.producer_id, ACCESS_MODES.get(mode, "Shared"))
            producer = topic.create_producer(name, None, listener=handle, client=client)
            handle.producer = producer
            handle.name = producer.name
            handle.schema_version = schema_version
        except MLedgerError as exc:
            self._connection.send_error(request_id, server_error_code(exc), str(exc))
            return
        self._state.add_producer(handle)
        host.watch(topic)
        if wait:
            # WaitForExclusive: answered "not ready" now, PRODUCER_SUCCESS once it is exclusive.
            handle.ready = False
            self._send_producer_success(request_id, handle, ready=False)
            host.access.wait(topic, handle, lambda: self._exclusive_granted(request_id, handle))
            return
        host.access.add(topic, handle)
        self._send_producer_success(request_id, handle)

    def _exclusive_granted(self, request_id: int, handle: ProducerHandle) -> None:
        if handle.closed:
            return
        handle.ready = True
        self._send_producer_success(request_id, handle)
        self._context.wake()

    def _send_producer_success(self, request_id: int, handle: ProducerHandle, ready: bool = True) -> None:
        self._context.send_producer_success(
            request_id, handle.name, handle.producer.last_sequence_id, ready, handle.schema_version
        )

    def handle_send(self, request: Request) -> None:
        send = request[1].send
        producer_id = send.producer_id
        handle = self._producers.get(producer_id)
        payload = request[2]
        sequence_id = send.sequence_id
        if (
            handle is None
            or handle.closed
            or payload is None
            or payload[2] is False
            or send.highest_sequence_id != 0
            or sequence_id > INT64_MAX
        ):
            self._handle_send_in_full(request)
            return
        # The common case: an open producer's SEND, its checksum good (or none sent), no batch
        # range, a sequence id >= 0 (which is then also the highest). A non-persistent producer
        # never gets here: producer ids are unique across both kinds (producer_id_in_use).
        entry = payload[0]
        topic = handle.topic
        try:
            metadata = metadata_for(topic, payload[1])
        except StateCorruptedError as exc:
            self._context.send_error(producer_id, sequence_id, api.UnknownError, str(exc))
            return
        n = send.num_messages  # defaults to 1 in the proto: an unset field reads 1
        item = _new_tuple(FramedPublish, (handle.name, sequence_id, sequence_id, n, metadata, entry))
        self._queue_send(id(topic), (handle, sequence_id, sequence_id, item), n, len(entry))

    def _handle_send_in_full(self, request: Request) -> None:
        """:meth:`handle_send` for every case: a non-persistent topic's producer, an unknown or
        closed one, no payload, a bad checksum, a batch range, a negative sequence id."""
        send = request.command.send
        producer_id = send.producer_id
        if producer_id in self._state.np_producers:
            self._np.send(request)
            return
        context = self._context
        raw_sequence_id = send.sequence_id
        handle = self._producers.get(producer_id)
        if handle is None or handle.closed:
            context.send_error(producer_id, raw_sequence_id, api.NotAllowedError, "Producer is not ready")
            return
        payload = request.payload
        if payload is None:
            context.send_error(producer_id, raw_sequence_id, api.NotAllowedError, "SEND without a payload")
            return
        entry, metadata_bytes, checksum_ok = payload
        if checksum_ok is False:
            self._state.count_checksum_error()
            context.send_error(producer_id, raw_sequence_id, api.ChecksumError, "Checksum failed on the broker")
            return
        topic = handle.topic
        try:
            metadata = metadata_for(topic, metadata_bytes)
        except StateCorruptedError as exc:
            context.send_error(producer_id, raw_sequence_id, api.UnknownError, str(exc))
            return
        raw_highest = send.highest_sequence_id
        if raw_highest == 0 and raw_sequence_id <= INT64_MAX:
            # no batch, a sequence id >= 0: the highest is the sequence id
            sequence_id = highest = raw_highest = raw_sequence_id
        else:
            sequence_id = as_int64(raw_sequence_id)
            highest = as_int64(raw_highest)
            if highest <= sequence_id:
                highest = sequence_id
            raw_highest = highest & UINT64_MASK
        # num_messages defaults to 1 in the proto: an unset field reads 1
        n = send.num_messages
        item = _new_tuple(FramedPublish, (handle.name, sequence_id, highest, n, metadata, entry))
        self._queue_send(id(topic), (handle, raw_sequence_id, raw_highest, item), n, len(entry))

    def flush_sends(self) -> None:
        """Publish the SENDs queued in the state, each topic's in one call (their receipts
        follow as the writes complete)."""
        if not self._state.has_pending_sends:
            return
        for sends in self._state.take_pending_sends().values():
            topic = sends[0][0].topic
            topic.publish_entries([s[3] for s in sends], SendsDone(self, sends))

    def sends_completed(self, sends: list[Send], results: list[PublishResult]) -> None:
        """The topic stored (or refused) ``sends``: SEND_RECEIPT or SEND_ERROR for each, in
        order (loop thread)."""
        state = self._state
        state.sends_done(len(sends))
        if state.closed:
            return
        connection = self._connection
        frames: list[bytes] = []
        receipt = send_receipt_frame
        for (handle, sequence_id, highest, _), result in zip(sends, results, strict=True):
            if isinstance(result, Position):
                frames.append(receipt(handle.producer_id, sequence_id, highest, result[0], result[1]))
            elif result is None:  # a duplicate: Pulsar answers a receipt with id (-1, -1)
                frames.append(receipt(handle.producer_id, sequence_id, highest, UINT64_MASK, UINT64_MASK))
            else:
                assert isinstance(result, BaseException)
                connection.send_frames(frames)
                frames = []
                self._context.send_error(handle.producer_id, sequence_id, send_error_code(result), str(result))
        connection.send_frames(frames)
        self._context.wake()

    def handle_close_producer(self, request: Request) -> None:
        body = request.command.close_producer
        self._np.close_producer(body.producer_id)
        handle = self._producers.get(body.producer_id)
        if handle is not None:
            self._close_producer(handle)
        self._context.send_success(body.request_id)

    def _close_producer(self, handle: ProducerHandle) -> None:
        self._state.remove_producer(handle.producer_id)
        if handle.closed:
            return
        handle.closed = True
        handle.producer.detach_listener()  # our own listener: do not echo the close
        handle.producer.close()
        self._context.host.access.remove(handle.topic, handle)

    def close(self) -> None:
        """The connection is gone: close this client's producers."""
        for handle in list(self._producers.values()):
            self._close_producer(handle)

    def producer_closed_by_broker(self, handle: ProducerHandle) -> None:
        """The broker closed ``handle``'s producer, or another producer fenced it: forget it
        and tell the client (CLOSE_PRODUCER). Loop thread."""
        if handle.closed or self._state.closed:
            return
        self._state.remove_producer(handle.producer_id)
        handle.closed = True
        self._context.host.access.remove(handle.topic, handle)
        self._connection.send(
            api.BaseCommand(
                type=_T.CLOSE_PRODUCER,
                close_producer=api.CommandCloseProducer(producer_id=handle.producer_id, request_id=UINT64_MASK),
            )
        )
        self._context.wake()
