"""Injected faults at a session's two seams: the commands it handles and the frames it sends.

Theory of operation
-------------------
A :class:`~mledger.protocol._session.Session` dispatches every command it handles through one
table (``Session.data_received``). While nothing is armed on the broker's
:class:`~mledger.broker.Faults` that table is the plain one and faults cost nothing. While a
command fault is armed, or the session holds or drops commands, the session dispatches through
a :class:`FaultFilter`'s table instead, which for each command:

* drops it once the connection is closed or half-open for reading (it was never read);
* queues it behind held commands while the session holds (a delay or a pause), so answers keep
  their order;
* asks the registry (:meth:`~mledger.broker.Faults.take`, only for the kinds armed) whether a
  fault fires, and applies it: answer the error Pulsar's broker sends for that command
  (:func:`answer_error`), hold it for the delay, close the connection, make it half-open, pause
  the broker, stop serving for a restart (which the registry started), or (a broker action:
  terminate, unload, delete a subscription, done by the registry) handle it as usual.

What a fault does to the connection itself (closing it, muting its writes, stopping its reads,
pausing every connection) is the server's (:class:`FaultHost`, implemented by
:class:`~mledger.protocol.ProtocolServer`); MESSAGE faults (duplicate, redeliver) are
applied where the consumer commands write MESSAGE frames. Loop thread only.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..broker import FaultTarget, Firing
from ..codec.proto import PulsarApi_pb2 as api
from ..core import ServerError
from ._connection import Request

if TYPE_CHECKING:
    from ._context import CommandContext
    from ._session_state import SessionState

__all__ = ["FaultFilter", "FaultHost", "answer_error", "connection_targets", "fault_target"]

log = logging.getLogger(__name__)

_T = api.BaseCommand
_NAMES: dict[int, str] = {value: name for name, value in _T.Type.items()}
Handler = Callable[[Request], None]


class FaultHost(Protocol):
    """What a session's faults need from the server driving it (loop thread)."""

    def drop(self, session: object) -> None:
        """Close the session's connection at once, dropping what it queued (no goodbye)."""
        ...

    def half_open(self, session: object, direction: str) -> None:
        """Stop reading (``"read"``), writing (``"write"``) or both on the session's socket."""
        ...

    def pause(self, ms: int | None) -> None:
        """Stop serving every connection, for ``ms`` (None: until resumed)."""
        ...

    def call_later(self, seconds: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after ``seconds`` of real time."""
        ...

    def call_at_broker_time(self, due_ms: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop when the broker's clock reaches ``due_ms``."""
        ...

    def flush_soon(self, session: object) -> None:
        """Write what the session queued at the end of this loop turn."""
        ...


def fault_target(request: Request, state: SessionState) -> FaultTarget:
    """What ``request`` concerns: its topic (named, or its producer's or consumer's), its
    subscription, and the names its client goes by (producer or consumer name, role,
    ``host:port``)."""
    command = request.command
    type_ = request.type
    extra = tuple(n for n in (state.role, state.peer) if n)
    if type_ == _T.PRODUCER:
        producer = command.producer
        named = (producer.producer_name,) if producer.producer_name else ()
        return FaultTarget(producer.topic, None, (*named, *extra))
    if type_ == _T.SUBSCRIBE:
        subscribe = command.subscribe
        named = (subscribe.consumer_name,) if subscribe.consumer_name else ()
        return FaultTarget(subscribe.topic, subscribe.subscription, (*named, *extra))
    if type_ in (_T.LOOKUP, _T.PARTITIONED_METADATA, _T.GET_SCHEMA, _T.GET_OR_CREATE_SCHEMA):
        return FaultTarget(getattr(command, _FIELDS[type_]).topic, None, extra)
    if type_ in (_T.SEND, _T.CLOSE_PRODUCER):
        producer_id = getattr(command, _FIELDS[type_]).producer_id
        handle = state.producers.get(producer_id)
        if handle is not None:
            return FaultTarget(handle.topic.name, None, (handle.name, *extra))
        np_handle = state.np_producers.get(producer_id)
        if np_handle is not None:
            return FaultTarget(np_handle.topic.name, None, (np_handle.producer.name, *extra))
        return FaultTarget(None, None, extra)
    field = _FIELDS.get(type_)
    body = getattr(command, field) if field is not None else None
    consumer_id = getattr(body, "consumer_id", None) if body is not None else None
    if consumer_id is not None:
        consumer = state.consumers.get(consumer_id)
        if consumer is not None:
            name = consumer.consumer.name if consumer.consumer is not None else None
            return FaultTarget(consumer.topic.name, consumer.subscription.name, (*((name,) if name else ()), *extra))
        np_consumer = state.np_consumers.get(consumer_id)
        if np_consumer is not None:
            sub = np_consumer.subscription.name if np_consumer.subscription is not None else None
            return FaultTarget(np_consumer.topic.name, sub, extra)
    return FaultTarget(None, None, extra)


_FIELDS: dict[int, str] = {
    _T.LOOKUP: "lookupTopic",
    _T.PARTITIONED_METADATA: "partitionMetadata",
    _T.GET_SCHEMA: "getSchema",
    _T.GET_OR_CREATE_SCHEMA: "getOrCreateSchema",
    _T.SEND: "send",
    _T.CLOSE_PRODUCER: "close_producer",
    _T.FLOW: "flow",
    _T.ACK: "ack",
    _T.SEEK: "seek",
    _T.UNSUBSCRIBE: "unsubscribe",
    _T.CLOSE_CONSUMER: "close_consumer",
    _T.GET_LAST_MESSAGE_ID: "getLastMessageId",
    _T.CONSUMER_STATS: "consumerStats",
    _T.REDELIVER_UNACKNOWLEDGED_MESSAGES: "redeliverUnacknowledgedMessages",
}
"""The ``BaseCommand`` field of each command whose target is looked up by id or topic."""


def connection_targets(state: SessionState) -> list[FaultTarget]:
    """What a connection concerns, for a fault armed without a command: one target per
    producer and consumer it has open, or the connection's own names when it has none."""
    extra = tuple(n for n in (state.role, state.peer) if n)
    targets = [FaultTarget(h.topic.name, None, (h.name, *extra)) for h in state.producers.values()]
    targets += [FaultTarget(h.topic.name, None, (h.producer.name, *extra)) for h in state.np_producers.values()]
    for c in state.consumers.values():
        names = (c.consumer.name, *extra) if c.consumer is not None else extra
        targets.append(FaultTarget(c.topic.name, c.subscription.name, names))
    for n in state.np_consumers.values():
        targets.append(FaultTarget(n.topic.name, n.subscription.name if n.subscription is not None else None, extra))
    return targets or [FaultTarget(None, None, extra)]


def answer_error(context: CommandContext, request: Request, error: ServerError, message: str) -> None:
    """Queue the answer Pulsar's broker gives ``request`` for ``error`` (``ServerCnx``):
    SEND_ERROR for SEND, a Failed LOOKUP_RESPONSE / PARTITIONED_METADATA_RESPONSE, an
    ACK_RESPONSE or schema / stats response carrying the error, ERROR with the request id for
    the rest (request id 0 for CONNECT, which is then refused: the connection closes)."""
    code = api.ServerError.ValueType(int(error))
    connection = context.connection
    command = request.command
    type_ = request.type
    if type_ == _T.CONNECT:
        connection.refuse_connect(code, message)
        context.host.close_soon(context.session)
    elif type_ == _T.SEND:
        send = command.send
        context.send_error(send.producer_id, send.sequence_id, code, message)
    elif type_ == _T.ACK:
        ack = command.ack
        ack_response = api.CommandAckResponse(
            consumer_id=ack.consumer_id, request_id=ack.request_id, error=code, message=message
        )
        connection.send(api.BaseCommand(type=_T.ACK_RESPONSE, ackResponse=ack_response))
    elif type_ in _RESPONSES:
        field, answer_type, answer_field, response_class = _RESPONSES[type_]
        request_id = getattr(command, field).request_id
        if type_ in _FAILED_RESPONSES:
            answer = response_class(request_id=request_id, response=response_class.Failed, error=code, message=message)
        else:
            answer = response_class(request_id=request_id, error_code=code, error_message=message)
        connection.send(api.BaseCommand(type=answer_type, **{answer_field: answer}))
    else:
        connection.send_error(getattr(command, _ERROR_FIELDS[type_]).request_id, code, message)


_RESPONSES: dict[int, tuple[str, api.BaseCommand.Type.ValueType, str, type[Any]]] = {
    _T.LOOKUP: ("lookupTopic", _T.LOOKUP_RESPONSE, "lookupTopicResponse", api.CommandLookupTopicResponse),
    _T.PARTITIONED_METADATA: (
        "partitionMetadata",
        _T.PARTITIONED_METADATA_RESPONSE,
        "partitionMetadataResponse",
        api.CommandPartitionedTopicMetadataResponse,
    ),
    _T.GET_SCHEMA: ("getSchema", _T.GET_SCHEMA_RESPONSE, "getSchemaResponse", api.CommandGetSchemaResponse),
    _T.GET_OR_CREATE_SCHEMA: (
        "getOrCreateSchema",
        _T.GET_OR_CREATE_SCHEMA_RESPONSE,
        "getOrCreateSchemaResponse",
        api.CommandGetOrCreateSchemaResponse,
    ),
    _T.CONSUMER_STATS: (
        "consumerStats",
        _T.CONSUMER_STATS_RESPONSE,
        "consumerStatsResponse",
        api.CommandConsumerStatsResponse,
    ),
}
"""The commands whose own response carries an error: the request's field, the response's type,
field and message class. A lookup's response is ``Failed`` with ``error`` and ``message``
(:data:`_FAILED_RESPONSES`), the others carry ``error_code`` and ``error_message``."""

_FAILED_RESPONSES = frozenset({_T.LOOKUP, _T.PARTITIONED_METADATA})

_ERROR_FIELDS: dict[int, str] = {
    _T.PRODUCER: "producer",
    _T.SUBSCRIBE: "subscribe",
    _T.GET_TOPICS_OF_NAMESPACE: "getTopicsOfNamespace",
    _T.SEEK: "seek",
    _T.UNSUBSCRIBE: "unsubscribe",
    _T.CLOSE_PRODUCER: "close_producer",
    _T.CLOSE_CONSUMER: "close_consumer",
    _T.GET_LAST_MESSAGE_ID: "getLastMessageId",
}
"""The commands answered ERROR with their request id, and the field holding it."""


class FaultFilter:
    """A session's dispatch while faults are armed (see the module docstring): the session's
    handlers wrapped, a queue of held commands, and the session's half-open state. ``pin`` makes
    the session dispatch through :attr:`table` (called when the filter starts holding or
    dropping); ``after_release`` runs once held commands were handled. Loop thread only; O(1)
    per command plus the registry's :meth:`~mledger.broker.Faults.take`."""

    __slots__ = ("_after_release", "_context", "_held", "_holds", "_pin", "dropping", "table")

    def __init__(
        self,
        context: CommandContext,
        handlers: dict[int, Handler],
        after_release: Callable[[], None],
        pin: Callable[[], None],
    ) -> None:
        self._context = context
        self._after_release = after_release
        self._pin = pin
        self._held: deque[tuple[Handler, Request, bool]] = deque()
        self._holds = 0
        self.dropping = False
        """The connection stopped reading (half-open): commands still parsed are dropped."""
        self.table: dict[int, Handler] = {
            type_: partial(self._handle, _NAMES.get(type_, ""), handler) for type_, handler in handlers.items()
        }
        """The session's handlers, each behind this filter."""

    @property
    def busy(self) -> bool:
        """Whether the session must keep dispatching through the filter (commands held, a hold
        in force, or its input dropped) even with nothing armed."""
        return bool(self._held) or self._holds > 0 or self.dropping

    # -- holding -------------------------------------------------------------------------------
    def hold(self) -> None:
        """Hold every command from now until as many :meth:`release` calls (a delay, a pause)."""
        self._holds += 1
        self._pin()

    def release(self) -> None:
        """End one hold; at the last, handle what was held, in order (faults apply to each but
        the one a delay held, which it already delayed)."""
        if self._holds == 0:
            return
        self._holds -= 1
        if self._holds:
            return
        held, self._held = self._held, deque()
        while held:
            handler, request, delayed = held.popleft()
            if self._holds:  # a fault of a released command holds again: the rest waits behind it
                self._held.extend([(handler, request, delayed), *held])
                break
            if delayed:
                handler(request)
            else:
                self._handle(_NAMES.get(request.type, ""), handler, request)
        self._after_release()

    # -- the filter ------------------------------------------------------------------------------
    def _handle(self, kind: str, handler: Handler, request: Request) -> None:
        context = self._context
        state = context.state
        if self.dropping or state.closed:
            return
        if self._holds:
            self._held.append((handler, request, False))
            return
        faults = context.host.broker.faults
        if kind in faults.command_kinds:
            firing = faults.take(kind, lambda: fault_target(request, state))
            if firing is not None and self._apply(firing, handler, request):
                return
        handler(request)

    def _apply(self, firing: Firing, handler: Handler, request: Request) -> bool:
        """Do what ``firing`` does to ``request``; True when the request was consumed (answered,
        held, lost), False to handle it as usual."""
        spec: Any = firing.spec
        action = spec.action
        context = self._context
        host: FaultHost = context.host  # type: ignore[assignment]
        session = context.session
        if action == "error":
            message = spec.message or f"{spec.error} (a fault injected by mledger, #{firing.fault_id})"
            answer_error(context, request, ServerError[spec.error], message)
            context.wake()
            return True
        if action == "delay":
            self.hold()
            self._held.append((handler, request, True))
            if spec.clock == "broker":
                now = context.host.broker.clock.now_ms()
                host.call_at_broker_time(now + round(firing.delay_s * 1000), self.release)
            else:
                host.call_later(firing.delay_s, self.release)
            return True
        if action == "close":
            host.drop(session)
            return True
        if action == "half_open":
            host.half_open(session, spec.direction)
            return bool(spec.direction != "write")
        if action == "pause":
            host.pause(spec.pause_ms)
            self._held.append((handler, request, True))  # the pause held the session: first in line, fired
            return True
        if action == "restart":  # the registry started it: serve nothing more, this command included
            host.pause(None)
            return True
        return False  # a broker action (done by the registry): handled as usual

    def drop_input(self) -> None:
        """The connection stopped reading (half-open): drop what is held and what still comes."""
        self.dropping = True
        self._held.clear()
        self._pin()

    def heal(self) -> None:
        """Faults were cleared: commands are read again."""
        self.dropping = False
