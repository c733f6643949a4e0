"""Producers: turn ``send`` calls into entries with Pulsar's metadata.

A single message becomes one entry whose ``MessageMetadata`` (:class:`~mledger.entry.EntryMetadata`)
carries the producer name, the sequence id, the publish time from the broker clock, the key
(``partition_key``), the deliver-at time and the properties. ``send_batch`` writes one entry in
Pulsar's batch format (:mod:`mledger.broker.batch`) with ``num_messages`` = batch size,
``sequence_id`` = the first message's and ``highest_sequence_id`` = the last one's; each message
gets an id with its ``batch_index``. A one-message batch is written as a plain message, because
``EntryMetadata`` cannot tell ``num_messages_in_batch = 1`` from "not batched".

Sequence ids follow Pulsar's client: without ``initial_sequence_id`` a producer continues from
the last sequence id the topic's deduplication knows for its name (else starts at 0); a
``sequence_id`` given to ``send`` is used as is and does not move the generator;
``last_sequence_id`` is the highest sequence id published.

Thread-safe: one lock per producer serialises its sends, so its entries are appended in
sequence-id order; a send blocks on the managed ledger's append (storage I/O).

A producer sees its topic as a :class:`PublishTarget` (and a partitioned producer its topic as
a :class:`PartitionedTarget`); the broker tells a remote producer's client through a
:class:`ProducerListener` when it closes the producer.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..codec.batch import SingleMessage, encode_batch
from ..codec.entry import EntryMetadata
from ..codec.messageid import MessageId
from ..core.clock import Clock
from ..core.errors import InvalidRequestError
from ..core.ints import INT64_MAX
from ..core.position import Position
from .errors import AlreadyClosedError
from .message import BatchMessageIds
from .routing import RoundRobinPartitionRouter

__all__ = ["PartitionedProducer", "PartitionedTarget", "Producer", "ProducerListener", "PublishTarget"]


class ProducerListener(Protocol):
    """Told when the broker closes a producer (see :mod:`mledger.broker.listeners`)."""

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

    def publish(
        self,
        producer_name: str,
        payload: bytes,
        metadata: EntryMetadata,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
    ) -> Position | None: ...

    def remove_producer(self, producer: Producer) -> None:
        """``producer`` closed: forget it."""
        ...


class PartitionedTarget(Protocol):
    """The partitioned topic a :class:`PartitionedProducer` publishes to."""

    @property
    def name(self) -> str: ...


class Producer:
    """A producer on one topic (or one partition). Create with ``Broker.create_producer``."""

    def __init__(
        self,
        topic: PublishTarget,
        name: str,
        initial_sequence_id: int | None,
        listener: ProducerListener | None = None,
    ) -> None:
        self._topic = topic
        self.name = name
        self._lock = threading.Lock()
        self._closed = False
        self._listener = listener
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
        ``EntryTooLargeError``, ``AlreadyClosedError``. Blocks on the append.
        """
        payload = _payload(data)
        _check_args(key, deliver_at_ms, sequence_id)
        with self._lock:
            self._check_open()
            seq = self._take_sequence(sequence_id, 1)
            meta = EntryMetadata(
                producer_name=self.name,
                sequence_id=seq,
                publish_time_ms=self._topic.broker.clock.now_ms(),
                partition_key=key,
                deliver_at_ms=deliver_at_ms,
                properties=_properties(properties),
            )
            position = self._topic.publish(self.name, payload, meta, seq, seq, 1)
            partition = self._topic.partition_index
            if position is None:
                return MessageId(-1, -1, partition)
            self._last = max(self._last, seq)
            return MessageId(position.ledger_id, position.entry_id, partition)

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
        if isinstance(items, (bytes, bytearray, memoryview, str)) or not isinstance(items, Sequence):
            raise InvalidRequestError(f"send_batch takes a list of payloads, got {type(items).__name__}")
        if not items:
            raise InvalidRequestError("send_batch needs at least one message, got an empty batch")
        payloads = [_payload(item) for item in items]
        if len(payloads) == 1:
            return BatchMessageIds((self.send(payloads[0], key, deliver_at_ms, sequence_id, properties),))
        _check_args(key, deliver_at_ms, sequence_id)
        n = len(payloads)
        props = EntryMetadata(properties=_properties(properties)).properties
        with self._lock:
            self._check_open()
            first = self._take_sequence(sequence_id, n)
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
            position = self._topic.publish(self.name, body, meta, first, last, n)
            partition = self._topic.partition_index
            if position is None:
                return BatchMessageIds((MessageId(-1, -1, partition),))
            self._last = max(self._last, last)
            return BatchMessageIds(
                MessageId(position.ledger_id, position.entry_id, partition, i, n) for i in range(n)
            )

    def close(self) -> None:
        """Disconnect from the topic. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._topic.remove_producer(self)

    def detach_listener(self) -> None:
        """Stop telling the listener (a frontend closing the producer itself: no echo)."""
        self._listener = None

    def closed_by_broker(self) -> None:
        """The topic is closing: mark the producer closed and tell its listener (if any)."""
        self._closed = True
        if self._listener is not None:
            self._listener.producer_closed(self)

    def _take_sequence(self, sequence_id: int | None, n: int) -> int:
        if sequence_id is not None:
            return sequence_id
        seq = self._next
        self._next += n
        return seq

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"producer {self.name!r} on {self.topic} is closed")

    def __repr__(self) -> str:
        return f"Producer({self.name!r}, topic={self.topic!r})"


class PartitionedProducer:
    """A producer on a partitioned topic: one :class:`Producer` per partition, same name.

    Routing is Pulsar's default (:mod:`mledger.broker.routing`): by key hash when the message
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

    def send(
        self,
        data: bytes,
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> MessageId:
        """Route and publish one message (see :meth:`Producer.send`)."""
        _check_args(key, deliver_at_ms, sequence_id)
        return self._producers[self._router.choose(key)].send(data, key, deliver_at_ms, sequence_id, properties)

    def send_batch(
        self,
        items: Sequence[bytes],
        key: str | None = None,
        deliver_at_ms: int | None = None,
        sequence_id: int | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> BatchMessageIds:
        """Route and publish one batch (see :meth:`Producer.send_batch`)."""
        _check_args(key, deliver_at_ms, sequence_id)
        return self._producers[self._router.choose(key)].send_batch(items, key, deliver_at_ms, sequence_id, properties)

    def close(self) -> None:
        """Close every partition's producer. Idempotent."""
        for p in self._producers:
            p.close()

    def __repr__(self) -> str:
        return f"PartitionedProducer({self.name!r}, topic={self.topic!r})"


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
