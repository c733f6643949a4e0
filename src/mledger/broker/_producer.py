"""Producers: turn ``send`` calls into entries with Pulsar's metadata.

A single message becomes one entry whose ``MessageMetadata`` (:class:`~mledger.codec.EntryMetadata`)
carries the producer name, the sequence id, the publish time from the broker clock, the key
(``partition_key``), the deliver-at time and the properties. ``send_batch`` writes one entry in
Pulsar's batch format (:mod:`mledger.codec`) with ``num_messages`` = batch size,
``sequence_id`` = the first message's and ``highest_sequence_id`` = the last one's; each message
gets an id with its ``batch_index``. A one-message batch is written as a plain message, because
``EntryMetadata`` cannot tell ``num_messages_in_batch = 1`` from "not batched".

Sequence ids follow Pulsar's client: without ``initial_sequence_id`` a producer continues from
the last sequence id the topic's deduplication knows for its name (else starts at 0); a
``sequence_id`` given to ``send`` is used as is and does not move the generator;
``last_sequence_id`` is the highest sequence id published.

Publishing is pipelined: :meth:`Producer.send_async` and :meth:`Producer.send_batch_async`
return ``concurrent.futures.Future`` objects that complete, in order per topic, once the entry
is stored; ``send`` and ``send_batch`` wait for them. Thread-safe: one lock per producer
serialises taking a sequence id and queueing the entry (never a store write), so its entries
are appended in sequence-id order.

A producer sees its topic as a :class:`PublishTarget` (and a partitioned producer its topic as
a :class:`PartitionedTarget`); the broker tells a remote producer's client through a
:class:`ProducerListener` when it closes the producer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from ..codec import EntryMetadata, MessageId, SingleMessage, encode_batch, encode_entry
from ..core import INT64_MAX, Clock, InvalidRequestError
from ._errors import AlreadyClosedError
from ._message import BatchMessageIds
from ._publishing import FramedPublish, PublishCallback, PublishResult
from ._rates import RateWindow
from ._routing import RoundRobinPartitionRouter
from ._stats import ProducerStats
from ._types import ClientInfo

__all__ = ["PartitionedProducer", "PartitionedTarget", "Producer", "ProducerListener", "PublishTarget"]


class ProducerListener(Protocol):
    """Told when the broker closes a producer (see :mod:`mledger.broker._listeners`)."""

    def producer_closed(self, producer: Producer) -> None:
        """The broker closed ``producer`` (its topic was deleted or closed)."""
        ...


class _ClockOwner(Protocol):
    @property
    def clock(self) -> Clock: ...


class _SequenceSource(Protocol):
    def last_sequence_id(self, producer_name: str) -> int: ...


class PublishTarget(Protocol):
    """The topic (partition) a :class:`Producer` publishes to, as the producer sees it."""

    @property
    def name(self) -> str: ...

    @property
    def partition_index(self) -> int: ...

    @property
    def broker(self) -> _ClockOwner: ...

    @property
    def deduplication(self) -> _SequenceSource: ...

    def publish_entries(
        self, items: Sequence[FramedPublish], callback: PublishCallback, *, start_writing: bool = True
    ) -> None:
        """Queue ``items`` (dedup-checked now); ``callback(results)`` once stored, in order."""
        ...

    def start_writing(self, inline: bool = False) -> None:
        """Start writing what was queued (on this thread if ``inline`` and no write is under way)."""
        ...

    def wait_for_publishes(self, timeout: float | None = None) -> bool:
        """Block until every queued publish completed."""
        ...

    def remove_producer(self, producer: Producer) -> None:
        """``producer`` closed: forget it."""
        ...


class PartitionedTarget(Protocol):
    """The partitioned topic a :class:`PartitionedProducer` publishes to."""

    @property
    def name(self) -> str: ...


_R = TypeVar("_R")
_Sink = Callable[[_R | BaseException], None]
"""Where a send's outcome goes: its ids, or the exception that refused it."""


class _ProducerBase:
    """The send verbs both producers offer, written once (Pulsar's client ``ProducerBase``:
    ``send`` and ``sendAsync`` over ``internalSendAsync``, which a partitioned producer routes
    to a partition's producer). ``_producer_for`` is the :class:`Producer` a message with these
    arguments goes to: the producer itself, or its partition's; ``InvalidRequestError`` for an
    argument that cannot be routed. A message routed to another producer goes through that
    one's verb of the same name (which checks the arguments again); only a :class:`Producer`
    itself reaches its ``_send`` / ``_send_batch``."""

    _producer_for: Callable[[str | None, int | None, int | None], Producer]

    def send(
        self,
        data: bytes,
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> MessageId:
        """Publish one message; returns its id (``(-1, -1)`` when deduplication dropped it).

        Raises ``InvalidRequestError`` naming a bad argument, ``MessageDupUnknownError``,
        ``EntryTooLargeError``, ``AlreadyClosedError``, ``TopicFencedError``. Blocks until the
        message is stored (after everything sent to the topic before it); when no write is
        under way, the calling thread writes it. On a partitioned topic the message is routed
        first (:class:`PartitionedProducer`) and its id carries the partition.
        """
        producer = self._producer_for(key, deliver_at_ms, sequence_id)
        if producer is not self:
            return producer.send(data, key, deliver_at_ms, sequence_id, properties)
        assert isinstance(self, Producer)  # a message routed to the producer itself
        waiter: _Waiter[MessageId] = _Waiter()
        self._send(data, key, deliver_at_ms, sequence_id, properties, waiter, inline=True)
        return waiter.wait()

    def send_async(
        self,
        data: bytes,
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Future[MessageId]:
        """Publish one message without waiting: a ``concurrent.futures.Future`` of its id.

        The message gets its sequence id now; the future completes once it is stored (or
        refused), after the futures of everything sent to the topic (partition) before it
        (Pulsar's ``sendAsync``); a duplicate or ``MessageDupUnknownError`` answer completes at
        once. Every error :meth:`send` raises is delivered through the future. Never waits on
        the store. The future's callbacks run on the thread that wrote the message and must not
        wait for a later send of this topic. After a failed write the futures of the sends
        queued behind it fail too: resend from the first failed one, in order.
        """
        producer = self._routed(key, deliver_at_ms, sequence_id)
        if isinstance(producer, Future):
            return producer
        if producer is not self:
            return producer.send_async(data, key, deliver_at_ms, sequence_id, properties)
        assert isinstance(self, Producer)
        future: Future[MessageId] = Future()
        self._send(data, key, deliver_at_ms, sequence_id, properties, _FutureSink(future), inline=False)
        return future

    def send_batch(
        self,
        items: Sequence[bytes],
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> BatchMessageIds:
        """Publish ``items`` as one batch entry (all with ``key``, ``deliver_at_ms`` and
        ``properties``); message ``i`` gets sequence id ``sequence_id + i`` and batch index ``i``.

        Returns the messages' ids. Raises like :meth:`send`, and ``InvalidRequestError`` for an
        empty batch.
        """
        producer = self._producer_for(key, deliver_at_ms, sequence_id)
        if producer is not self:
            return producer.send_batch(items, key, deliver_at_ms, sequence_id, properties)
        assert isinstance(self, Producer)
        waiter: _Waiter[BatchMessageIds] = _Waiter()
        self._send_batch(items, key, deliver_at_ms, sequence_id, properties, waiter, inline=True)
        return waiter.wait()

    def send_batch_async(
        self,
        items: Sequence[bytes],
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Future[BatchMessageIds]:
        """:meth:`send_batch` without waiting: a future of the messages' ids (see :meth:`send_async`)."""
        producer = self._routed(key, deliver_at_ms, sequence_id)
        if isinstance(producer, Future):
            return producer
        if producer is not self:
            return producer.send_batch_async(items, key, deliver_at_ms, sequence_id, properties)
        assert isinstance(self, Producer)
        future: Future[BatchMessageIds] = Future()
        self._send_batch(items, key, deliver_at_ms, sequence_id, properties, _FutureSink(future), inline=False)
        return future

    def _routed(self, key: str | None, deliver_at_ms: int | None, sequence_id: int | None) -> Producer | Future[Any]:
        """:meth:`_producer_for` for an asynchronous send: a future failed with the
        ``InvalidRequestError`` when the message cannot be routed."""
        try:
            return self._producer_for(key, deliver_at_ms, sequence_id)
        except InvalidRequestError as exc:
            failed: Future[Any] = Future()
            failed.set_exception(exc)
            return failed


class Producer(_ProducerBase):
    """A producer on one topic (or one partition). Create with ``Broker.create_producer``."""

    def __init__(
        self,
        topic: PublishTarget,
        name: str,
        initial_sequence_id: int | None,
        listener: ProducerListener | None = None,
        *,
        producer_id: int = 0,
        client: ClientInfo | None = None,
    ) -> None:
        self._topic = topic
        self.name = name
        self._lock = threading.Lock()
        self._closed = False
        self._listener = listener
        self.producer_id = producer_id
        """The client's id of this producer on its connection (Pulsar's ``producerId``); for a
        library producer, its number on the topic."""
        self.client = client
        """What a remote client told about this producer (None for a library producer)."""
        self.connected_since_ms = topic.broker.clock.now_ms()
        # Live counters (read through stats()): what was stored, counted by the topic's write
        # completions (one at a time).
        self._msg_in = 0
        self._bytes_in = 0
        self._in_rates = RateWindow(self.connected_since_ms)
        if initial_sequence_id is not None:
            self._last = initial_sequence_id
        else:
            self._last = topic.deduplication.last_sequence_id(name)
        self._next = self._last + 1

    @property
    def topic(self) -> str:
        """The topic (partition) name."""
        return self._topic.name

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id published by this producer (-1 before the first)."""
        return self._last

    @property
    def is_closed(self) -> bool:
        """Whether the producer was closed."""
        return self._closed

    def _producer_for(self, key: str | None, deliver_at_ms: int | None, sequence_id: int | None) -> Producer:
        """This producer: it routes nowhere (its ``_send`` checks the arguments)."""
        return self

    def _send(
        self,
        data: bytes,
        key: str | None,
        deliver_at_ms: int | None,
        sequence_id: int | None,
        properties: Mapping[str, str] | None,
        sink: _Sink[MessageId],
        inline: bool,
    ) -> None:
        try:
            payload = _payload(data)
            _check_args(key, deliver_at_ms, sequence_id)
            props = _properties(properties) if properties is not None else ()
        except InvalidRequestError as exc:
            sink(exc)
            return

        def frame(seq: int) -> FramedPublish:
            meta = EntryMetadata(
                producer_name=self.name,
                sequence_id=seq,
                publish_time_ms=self._topic.broker.clock.now_ms(),
                partition_key=key,
                deliver_at_ms=deliver_at_ms,
                properties=props,
            )
            return FramedPublish(self.name, seq, seq, 1, meta, encode_entry(payload, meta))

        self._publish(sequence_id, 0, frame, sink, inline)

    def _send_batch(
        self,
        items: Sequence[bytes],
        key: str | None,
        deliver_at_ms: int | None,
        sequence_id: int | None,
        properties: Mapping[str, str] | None,
        sink: _Sink[BatchMessageIds],
        inline: bool,
    ) -> None:
        try:
            if isinstance(items, (bytes, bytearray, memoryview, str)) or not isinstance(items, Sequence):
                raise InvalidRequestError(f"send_batch takes a list of payloads, got {type(items).__name__}")
            if not items:
                raise InvalidRequestError("send_batch needs at least one message, got an empty batch")
            payloads = [_payload(item) for item in items]
            _check_args(key, deliver_at_ms, sequence_id)
            props = EntryMetadata(properties=_properties(properties)).properties
        except InvalidRequestError as exc:
            sink(exc)
            return
        if len(payloads) == 1:
            # A one-message batch is written as a plain message (see the module doc).
            self._send(payloads[0], key, deliver_at_ms, sequence_id, properties, _BatchOfOne(sink), inline)
            return
        n = len(payloads)

        def frame(first: int) -> FramedPublish:
            last = first + n - 1
            body = encode_batch([SingleMessage(p, key, props, first + i) for i, p in enumerate(payloads)])
            meta = EntryMetadata(
                producer_name=self.name,
                sequence_id=first,
                highest_sequence_id=last,
                publish_time_ms=self._topic.broker.clock.now_ms(),
                num_messages=n,
                partition_key=key,
                deliver_at_ms=deliver_at_ms,
            )
            return FramedPublish(self.name, first, last, n, meta, encode_entry(body, meta))

        self._publish(sequence_id, n, frame, sink, inline)

    def _publish(
        self,
        sequence_id: int | None,
        batch_size: int,
        frame: Callable[[int], FramedPublish],
        sink: _Sink[Any],
        inline: bool,
    ) -> None:
        """Under the producer lock: refuse if closed, take the sequence ids (``sequence_id`` as
        given, else the generator's next; ``batch_size`` 0 is one message), ``frame`` the entry
        from its first sequence id and queue it; then start the topic's write (on this thread
        when ``inline`` and no write is under way). The outcome goes to ``sink``."""
        topic = self._topic
        with self._lock:
            if self._closed:
                sink(self._closed_error())
                return
            item = frame(self._take_sequence(sequence_id, batch_size or 1))
            topic.publish_entries(
                [item], partial(self._send_done, item.highest_sequence_id, batch_size, sink), start_writing=False
            )
        topic.start_writing(inline)

    def close(self, wait: bool = True) -> None:
        """Disconnect from the topic; later sends fail with ``AlreadyClosedError``. Idempotent.

        With ``wait`` (Pulsar's client ``close``), blocks until what was sent is stored or
        failed (not when called from a send's callback, on the writer thread).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._topic.remove_producer(self)
        if wait:
            self._topic.wait_for_publishes()

    def detach_listener(self) -> None:
        """Stop telling the listener (a frontend closing the producer itself: no echo)."""
        self._listener = None

    def disconnect(self) -> bool:
        """Pulsar's ``Producer.disconnect`` after a failed write: a remote producer (one with
        a listener) is closed and removed from the topic and its client told, so that it
        reconnects; an in-process producer has no connection to drop and stays attached.
        Returns whether it was disconnected."""
        if self._listener is None:
            return False
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        self._topic.remove_producer(self)
        self.closed_by_broker()
        return True

    def closed_by_broker(self) -> None:
        """The topic is closing: mark the producer closed and tell its listener (if any)."""
        self._closed = True
        if self._listener is not None:
            self._listener.producer_closed(self)

    def count_stored(self, messages: int, size: int) -> None:
        """The topic stored an entry of this producer's (``messages`` messages, ``size`` bytes).
        Called by the topic's write completions, one at a time. O(1)."""
        self._msg_in += messages
        self._bytes_in += size

    def update_rates(self, now_ms: int, interval_ms: int) -> None:
        """Close the rates' stats interval at ``now_ms`` (the broker's stats timer). O(1)."""
        self._in_rates.close(now_ms, interval_ms, self._msg_in, self._bytes_in)

    def stats(self, now_ms: int, interval_ms: int) -> ProducerStats:
        """A frozen snapshot: what this producer published, with its rates over the last stats
        interval of ``interval_ms`` (see :mod:`mledger.broker._stats`) read at ``now_ms``. O(1)."""
        msg_in, bytes_in = self._msg_in, self._bytes_in
        rate, throughput = self._in_rates.rates(now_ms, interval_ms, msg_in, bytes_in)
        return ProducerStats(
            name=self.name,
            producer_id=self.producer_id,
            msg_in_counter=msg_in,
            bytes_in_counter=bytes_in,
            msg_rate_in=rate,
            msg_throughput_in=throughput,
            connected_since_ms=self.connected_since_ms,
            client=self.client,
        )

    def _take_sequence(self, sequence_id: int | None, n: int) -> int:
        if sequence_id is not None:
            return sequence_id
        seq = self._next
        self._next += n
        return seq

    def _closed_error(self) -> AlreadyClosedError:
        return AlreadyClosedError(f"producer {self.name!r} on {self.topic} is closed")

    def __repr__(self) -> str:
        return f"Producer({self.name!r}, topic={self.topic!r})"

    def _send_done(self, highest: int, batch_size: int, sink: _Sink[Any], results: list[PublishResult]) -> None:
        """The topic's callback for one send (bound with :func:`functools.partial`): the stored
        position becomes message ids. ``batch_size`` 0 is a single message (a
        :class:`MessageId`), else a batch of that many (:class:`BatchMessageIds`); ``highest`` is
        its highest sequence id."""
        result = results[0]
        partition = self._topic.partition_index
        if isinstance(result, BaseException):
            sink(result)
            return
        if result is None:  # a duplicate
            mid = MessageId(-1, -1, partition)
            sink(BatchMessageIds((mid,)) if batch_size else mid)
            return
        if highest > self._last:
            self._last = highest  # completions of a topic run one at a time, in order
        ledger_id, entry_id = result
        if batch_size:
            sink(BatchMessageIds(MessageId(ledger_id, entry_id, partition, i, batch_size) for i in range(batch_size)))
        else:
            sink(MessageId(ledger_id, entry_id, partition))


class PartitionedProducer(_ProducerBase):
    """A producer on a partitioned topic: one :class:`Producer` per partition, same name.

    Routing is Pulsar's default (:mod:`mledger.broker._routing`): by key hash when the message
    has a key, round-robin otherwise; a batch goes to one partition. Ids carry the partition.
    """

    def __init__(self, topic: PartitionedTarget, name: str, producers: list[Producer]) -> None:
        self._topic = topic
        self.name = name
        self._producers = producers
        self._router = RoundRobinPartitionRouter(len(producers))

    @property
    def topic(self) -> str:
        """The partitioned topic name."""
        return self._topic.name

    @property
    def producers(self) -> list[Producer]:
        """The per-partition producers, by partition index."""
        return list(self._producers)

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id published on any partition (the Java client's rule)."""
        return max(p.last_sequence_id for p in self._producers)

    @property
    def is_closed(self) -> bool:
        """Whether the producer was closed."""
        return all(p.is_closed for p in self._producers)

    def close(self, wait: bool = True) -> None:
        """Close every partition's producer (see :meth:`Producer.close`). Idempotent."""
        for p in self._producers:
            p.close(wait)

    def _producer_for(self, key: str | None, deliver_at_ms: int | None, sequence_id: int | None) -> Producer:
        """The partition's producer for a message with these arguments, which are checked first:
        a refused message does not move the round-robin. ``InvalidRequestError``."""
        _check_args(key, deliver_at_ms, sequence_id)
        return self._producers[self._router.choose(key)]

    def __repr__(self) -> str:
        return f"PartitionedProducer({self.name!r}, topic={self.topic!r})"


class _Waiter(Generic[_R]):
    """The sink of a blocking send: records the outcome and wakes the sending thread."""

    __slots__ = ("lock", "outcome")

    def __init__(self) -> None:
        self.outcome: _R | BaseException | None = None
        self.lock = threading.Lock()
        self.lock.acquire()

    def __call__(self, outcome: _R | BaseException) -> None:
        self.outcome = outcome
        self.lock.release()

    def wait(self) -> _R:
        self.lock.acquire()
        outcome = self.outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]


class _FutureSink(Generic[_R]):
    """The sink of an asynchronous send: completes its future."""

    __slots__ = ("future",)

    def __init__(self, future: Future[_R]) -> None:
        self.future = future

    def __call__(self, outcome: _R | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self.future.set_exception(outcome)
        else:
            self.future.set_result(outcome)


class _BatchOfOne:
    """A one-message batch sent as a plain message: its id as a one-id batch."""

    __slots__ = ("sink",)

    def __init__(self, sink: _Sink[BatchMessageIds]) -> None:
        self.sink = sink

    def __call__(self, outcome: MessageId | BaseException) -> None:
        self.sink(outcome if isinstance(outcome, BaseException) else BatchMessageIds((outcome,)))


def _payload(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise InvalidRequestError(f"invalid message payload of type {type(data).__name__}: expected bytes")


def _properties(properties: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    if properties is None:
        return ()
    if not isinstance(properties, Mapping):
        raise InvalidRequestError(f"invalid properties {properties!r}: expected a mapping of str to str")
    return tuple(properties.items())


def _check_args(key: object, deliver_at_ms: object, sequence_id: object) -> None:
    if key is not None and not isinstance(key, str):
        raise InvalidRequestError(f"invalid key {key!r}: expected a str or None")
    if deliver_at_ms is not None and (isinstance(deliver_at_ms, bool) or not isinstance(deliver_at_ms, int)):
        raise InvalidRequestError(f"invalid deliver_at_ms {deliver_at_ms!r}: expected an int (ms) or None")
    if sequence_id is not None and (
        isinstance(sequence_id, bool) or not isinstance(sequence_id, int) or not 0 <= sequence_id <= INT64_MAX
    ):
        raise InvalidRequestError(f"invalid sequence_id {sequence_id!r}: expected an int in [0, 2**63)")
