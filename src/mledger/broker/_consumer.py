"""A consumer of one subscription: permits, a receive queue, acknowledgements.

The consumer models both halves of a Pulsar consumer: the broker-side ``Consumer`` (permits,
pending acks) and the client's receiver queue. The dispatcher *pushes* messages into the queue
of a consumer that has permits, one permit per message; :meth:`Consumer.receive` first lets
the dispatcher deliver what is deliverable now, then pops messages from the queue and gives
their permits back (the client's automatic flow). So ``permits`` is the receiver queue's free
room, and with several consumers the dispatcher spreads messages over all their queues.

A message still in the queue when it gets acknowledged by someone else (PIP-423 skip or
cancel, an admin reset) is dropped at ``receive`` time, never handed out.

Thread safety: every method takes the subscription's lock (see
:mod:`mledger.broker._subscription`); ``receive`` may block on storage reads.

Collaborators: the consumer reaches its subscription through :class:`ConsumerOwner` (the
subscription's ``consumer_*`` entry points) and a remote client through :class:`ConsumerSink`.
Its delivery bookkeeping (permits, queue, entries held, unacked count) belongs to the
dispatcher, which changes it only through the methods under "delivery bookkeeping", under the
subscription lock. Its stats counters are private: those methods and ``record_flow`` /
``record_ack`` count, :meth:`Consumer.stats` reads them as a frozen snapshot.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from ..codec import MessageId
from ..core import InvalidRequestError, Position
from ..managed_ledger import AckOutcome
from ._acks import AckRequest
from ._consumer_stats import ConsumerStats, OutStats
from ._message import EntryDelivery, Message
from ._rates import RateWindow
from ._types import AckType, ClientInfo

__all__ = ["Consumer", "ConsumerOwner", "ConsumerSink", "MessageIdLike", "single_active_choice"]

MessageIdLike = MessageId | Message
"""Acknowledgement methods take message ids or the received messages themselves."""


class ConsumerSink(Protocol):
    """A remote consumer's end of the dispatcher (see :mod:`mledger.broker._listeners`)."""

    def deliver(self, consumer: Consumer, deliveries: list[EntryDelivery]) -> None:
        """Entries for ``consumer``, in dispatch order (called under the subscription lock)."""
        ...

    def active_changed(self, consumer: Consumer, is_active: bool) -> None:
        """Failover: ``consumer`` became (or stopped being) the active consumer."""
        ...

    def disconnected(self, consumer: Consumer) -> None:
        """The broker removed ``consumer``; the client should reconnect (or give up if the
        subscription or topic is gone)."""
        ...

    def held_permits(self) -> int:
        """Permits the client granted that the broker consumer was not given yet (reported
        in the stats' ``availablePermits``; any thread, a racy read is fine)."""
        ...

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """The topic was terminated and ``consumer``'s subscription acknowledged everything
        (Pulsar's ``REACHED_END_OF_TOPIC``); called once, under the subscription lock."""
        ...


class ConsumerOwner(Protocol):
    """The subscription a consumer belongs to, as the consumer sees it: the entry points of
    :class:`~mledger.broker.Subscription` for its consumers."""

    @property
    def name(self) -> str: ...

    @property
    def topic(self) -> str: ...

    def consumer_receive(self, consumer: Consumer, max_messages: int) -> list[Message]: ...

    def consumer_flow(self, consumer: Consumer, permits: int) -> None: ...

    def consumer_acknowledge(self, consumer: Consumer, request: AckRequest) -> AckOutcome: ...

    def consumer_negative_acknowledge(self, consumer: Consumer, message_ids: list[MessageId]) -> None: ...

    def consumer_redeliver_unacknowledged(self, consumer: Consumer) -> None: ...

    def remove_consumer(self, consumer: Consumer) -> None: ...


class Consumer:
    """One consumer attached to a :class:`~mledger.broker.Subscription`.

    Create with ``Subscription.add_consumer``. Raises
    :class:`~mledger.broker.AlreadyClosedError` once closed.
    """

    def __init__(
        self,
        subscription: ConsumerOwner,
        name: str,
        permits: int,
        consumer_id: int,
        sink: ConsumerSink | None = None,
        *,
        client: ClientInfo | None = None,
        connected_since_ms: int = 0,
        read_compacted: bool = False,
        start_earliest: bool = False,
    ) -> None:
        self._sub = subscription
        self.read_compacted = read_compacted
        """Reads the topic's compacted view up to the compaction horizon (Pulsar's ``readCompacted``)."""
        self._compacted_from_earliest = read_compacted and start_earliest
        self.name = name
        self.consumer_id = consumer_id
        self._sink = sink
        self.client = client
        """What a remote client told about this consumer (None for a library consumer)."""
        self.connected_since_ms = connected_since_ms
        # Stats counters (Pulsar's ConsumerStats), changed under the subscription lock through
        # record_delivery / record_flow / record_ack; read through stats().
        self._msg_out = 0
        self._bytes_out = 0
        self._entries_out = 0
        self._last_consumed_ms = 0
        self._last_acked_ms = 0
        self._last_flow_ms = 0
        self._out_rates = RateWindow(connected_since_ms)
        # Dispatcher-owned state, changed only under the subscription lock.
        self._permits = permits
        self._queue: deque[Message] = deque()
        self._pending: set[Position] = set()
        self._unacked = 0
        self._closed = False
        self._reached_end = False

    def take_compacted_from_earliest(self) -> bool:
        """Whether this is a read-compacted reader's first read from the earliest message
        (True once; the dispatcher then reads the whole compacted view)."""
        first = self._compacted_from_earliest
        self._compacted_from_earliest = False
        return first

    # -- views ------------------------------------------------------------------------------
    @property
    def subscription(self) -> ConsumerOwner:
        """The subscription this consumer belongs to."""
        return self._sub

    @property
    def topic(self) -> str:
        """The topic (partition) name."""
        return self._sub.topic

    @property
    def permits(self) -> int:
        """Free room in the receive queue: how many more messages the dispatcher may push."""
        return self._permits

    @property
    def unacked_messages(self) -> int:
        """Messages delivered to this consumer (queued or received) and not yet acknowledged."""
        return self._unacked

    @property
    def queued_messages(self) -> int:
        """Messages pushed to the queue and not yet received."""
        return len(self._queue)

    @property
    def is_remote(self) -> bool:
        """Whether the consumer has a sink (a protocol client): entries are pushed to it and
        nothing is queued here."""
        return self._sink is not None

    @property
    def is_connected(self) -> bool:
        """False once the consumer is closed."""
        return not self._closed

    def update_rates(self, now_ms: int, interval_ms: int) -> None:
        """Close the rates' stats interval at ``now_ms`` (the broker's stats timer). O(1)."""
        self._out_rates.close(now_ms, interval_ms, self._msg_out, self._bytes_out)

    def stats(self, now_ms: int, interval_ms: int, read_position_when_joining: Position | None = None) -> ConsumerStats:
        """A frozen snapshot of this consumer (Pulsar's ``ConsumerStats``): its permits and
        messages held, what it was sent (:class:`OutStats`: counters since it connected,
        rates over the last closed stats interval of ``interval_ms`` at ``now_ms``), its
        last consume, ack and flow times, its client.

        ``read_position_when_joining`` is the dispatcher's (Key_Shared). Consistent when
        the caller holds the subscription's lock, as ``Subscription.stats`` does; a racy
        read otherwise. Reading it may close the rate interval (see
        :class:`~mledger.broker.RateWindow`).
        """
        msg_out, bytes_out = self._msg_out, self._bytes_out
        rate, throughput = self._out_rates.rates(now_ms, interval_ms, msg_out, bytes_out)
        sink = self._sink
        held = sink.held_permits() if sink is not None else 0
        return ConsumerStats(
            self.name,
            self._permits,
            len(self._queue),
            self._unacked,
            available_permits=max(self._permits, 0) + held,
            out=OutStats(msg_out, bytes_out, self._entries_out, rate, throughput),
            connected_since_ms=self.connected_since_ms,
            last_consumed_ms=self._last_consumed_ms,
            last_acked_ms=self._last_acked_ms,
            last_flow_ms=self._last_flow_ms,
            read_position_when_joining=read_position_when_joining,
            client=self.client,
        )

    # -- consuming --------------------------------------------------------------------------
    def receive(self, max_messages: int = 100) -> list[Message]:
        """Up to ``max_messages`` messages deliverable now (possibly none); never waits for new ones.

        Raises ``InvalidRequestError`` for ``max_messages < 1``. May block on storage reads.
        """
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise InvalidRequestError(f"invalid max_messages {max_messages!r}: must be an integer >= 1")
        return self._sub.consumer_receive(self, max_messages)

    def flow(self, permits: int) -> None:
        """Grant ``permits`` more messages of receive-queue room (Pulsar's ``CommandFlow``)."""
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 0:
            raise InvalidRequestError(f"invalid permits {permits!r}: must be an integer >= 0")
        self._sub.consumer_flow(self, permits)

    def acknowledge(
        self, message_ids: MessageIdLike | Iterable[MessageIdLike], ack_type: AckType = AckType.INDIVIDUAL
    ) -> None:
        """Individually acknowledge one message or many (ids with a batch index ack that message).

        Validates everything first (``InvalidRequestError`` for an id of another partition or a
        batch index beyond the batch, ``InvalidPositionError`` for an id not in the topic) and
        then acks; an already acknowledged id is ignored. ``ack_type=AckType.CUMULATIVE`` is
        :meth:`acknowledge_cumulative`.
        """
        if ack_type is AckType.CUMULATIVE:
            self.acknowledge_cumulative(message_ids)
            return
        if ack_type is not AckType.INDIVIDUAL:
            raise InvalidRequestError(f"invalid ack type {ack_type!r}: expected an AckType")
        self.acknowledge_request(AckRequest(message_ids=as_message_ids(message_ids)))

    def acknowledge_request(self, request: AckRequest) -> int:
        """Acknowledge everything ``request`` names, in one pass under the subscription lock
        (the methods below build one; so does the binary protocol for a ``CommandAck``);
        returns how many entries it fully acknowledged (entries a cumulative ack passed
        included; :meth:`acknowledge_with_outcome` says more).

        Raises what those methods raise, before anything is acknowledged.
        """
        return self._sub.consumer_acknowledge(self, request).entries_acked

    def acknowledge_with_outcome(self, request: AckRequest) -> AckOutcome:
        """:meth:`acknowledge_request`, returning what the acknowledgement changed: the
        cursor's :class:`~mledger.managed_ledger.AckOutcome` (the entries and batch indexes
        acknowledged now, the mark-delete position before and after, how many entries became
        acknowledged). A caller that knows the batch sizes of the entries it acknowledges by
        batch index passes them in ``AckRequest.batch_sizes`` (no entry is read for them)."""
        return self._sub.consumer_acknowledge(self, request)

    def acknowledge_entries(self, positions: Iterable[Position] | np.ndarray) -> int:
        """Individually acknowledge whole entries in bulk; returns how many became acknowledged.

        ``positions`` are :class:`~mledger.core.Position` values or an ``(n, 2)`` int64
        array of ``(ledger_id, entry_id)`` rows (a replay or a bulk tool: no per-message
        objects). The same effect as :meth:`acknowledge` with the entries' ids (and as
        PIP-423's cancel of each entry), in one cursor operation: O(n) numpy work plus
        O(ranges touched). Validates everything first: ``InvalidPositionError`` for an entry
        not in the topic, and nothing is acknowledged. Already acknowledged entries are
        ignored.
        """
        if not isinstance(positions, np.ndarray):
            positions = list(positions)
        return self.acknowledge_request(AckRequest(entries=positions))

    def acknowledge_with_ack_sets(self, items: Iterable[tuple[Position, int, int | None]]) -> int:
        """Acknowledge batch indexes given as ack sets: ``(entry, bits still unacknowledged,
        batch size or None)`` per entry (Pulsar's ``ack_set`` of a batch-index ack); returns
        how many entries became fully acknowledged.

        The entry becomes fully acknowledged once no bit is left. Validates like
        :meth:`acknowledge`; already acknowledged entries are ignored. One cursor operation
        for all the entries (the same state as acknowledging them one by one).
        """
        return self.acknowledge_request(AckRequest(ack_sets=list(items)))

    def acknowledge_cumulative(self, message_id: MessageIdLike | Iterable[MessageIdLike]) -> None:
        """Acknowledge every message up to and including ``message_id``.

        Refused with ``NotAllowedError`` on Shared and Key_Shared subscriptions, as Pulsar's
        client refuses it. An id at or before the mark-delete position is a no-op.
        """
        ids = as_message_ids(message_id)
        if len(ids) != 1:
            raise InvalidRequestError(f"cumulative acknowledgement takes one message id, got {len(ids)}")
        self.acknowledge_request(AckRequest(cumulative=ids[0]))

    def negative_acknowledge(self, message_ids: MessageIdLike | Iterable[MessageIdLike]) -> None:
        """Ask for redelivery of messages this consumer holds.

        Shared/Key_Shared: the entries go to the redelivery queue (any consumer may get them,
        redelivery count + 1). Exclusive/Failover: everything unacknowledged is redelivered in
        order (Pulsar rewinds the cursor for single-consumer dispatchers).
        """
        self._sub.consumer_negative_acknowledge(self, as_message_ids(message_ids))

    def redeliver_unacknowledged_messages(self) -> None:
        """Redeliver every message this consumer holds and has not acknowledged."""
        self._sub.consumer_redeliver_unacknowledged(self)

    def close(self) -> None:
        """Detach from the subscription; its unacknowledged messages are redelivered. Idempotent."""
        self._sub.remove_consumer(self)

    def has_reached_end_of_topic(self) -> bool:
        """Whether the topic was terminated and everything in it was acknowledged (the client's
        ``hasReachedEndOfTopic``)."""
        return self._reached_end

    def reached_end_of_topic(self) -> None:
        """The subscription tells its consumers the end of a terminated topic (under its lock):
        remembered, and a remote client is told once."""
        if self._reached_end or self._closed:
            return
        self._reached_end = True
        if self._sink is not None:
            self._sink.reached_end_of_topic(self)

    # -- delivery bookkeeping: the dispatcher's side, called under the subscription lock ------
    @property
    def sink(self) -> ConsumerSink | None:
        """The remote client's end, None for a consumer read with :meth:`receive`."""
        return self._sink

    def holds(self, position: Position) -> bool:
        """Whether the entry at ``position`` was delivered to this consumer and not yet acknowledged."""
        return position in self._pending

    def held_positions(self) -> list[Position]:
        """The entries this consumer holds (delivered, not acknowledged), ascending."""
        return sorted(self._pending)

    def record_delivery(self, position: Position, messages: int, size: int = 0, now_ms: int = 0) -> None:
        """The dispatcher delivered ``messages`` messages of the entry at ``position`` (``size``
        bytes, at ``now_ms``): they spend permits and count as unacknowledged until released,
        and count into the stats' :class:`OutStats`."""
        self._permits -= messages
        self._unacked += messages
        self._pending.add(position)
        self._msg_out += messages
        self._bytes_out += size
        self._entries_out += 1
        self._last_consumed_ms = now_ms

    def record_flow(self, now_ms: int) -> None:
        """The client granted permits at ``now_ms`` (the stats' ``last_flow_ms``)."""
        self._last_flow_ms = now_ms

    def record_ack(self, now_ms: int) -> None:
        """The consumer acknowledged at ``now_ms`` (the stats' ``last_acked_ms``)."""
        self._last_acked_ms = now_ms

    def enqueue(self, messages: list[Message]) -> None:
        """Queue decoded messages for :meth:`receive` (after :meth:`record_delivery`)."""
        self._queue.extend(messages)

    def pop_queued(self) -> Message | None:
        """The oldest queued message, or None when the queue is empty (its permit stays spent
        until :meth:`return_permits`)."""
        return self._queue.popleft() if self._queue else None

    def return_permits(self, permits: int) -> None:
        """Give ``permits`` of receive-queue room back (popped messages, or a client's FLOW)."""
        self._permits += permits

    def drop_queued(self, positions: set[Position] | None = None) -> None:
        """Remove the queued messages of ``positions`` (all of them when None) and give their
        permits back; they are redelivered or were acknowledged meanwhile."""
        queue = self._queue
        if positions is None:
            self._permits += len(queue)
            queue.clear()
            return
        kept = [m for m in queue if m.message_id.position not in positions]
        self._permits += len(queue) - len(kept)
        queue.clear()
        queue.extend(kept)

    def release(self, position: tuple[int, int] | None, messages: int) -> None:
        """``messages`` delivered messages are settled (acknowledged or taken back for
        redelivery); with a ``position`` the consumer no longer holds that entry."""
        if position is not None:
            self._pending.discard(position)
        self._unacked -= messages

    def reset_delivery(self) -> None:
        """Forget every held entry and unacknowledged message (a dispatcher reset)."""
        self._pending.clear()
        self._unacked = 0

    def mark_disconnected(self) -> bool:
        """Mark the consumer closed; True if it was connected (the caller then detaches it)."""
        if self._closed:
            return False
        self._closed = True
        return True

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, subscription={self._sub.name!r}, topic={self._sub.topic!r})"


def as_message_ids(value: MessageIdLike | Iterable[MessageIdLike]) -> list[MessageId]:
    """The message ids of one id or message, or of many; ``InvalidRequestError`` for anything else."""
    if isinstance(value, (MessageId, Message)):
        items: Iterable[object] = (value,)
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidRequestError(f"invalid message id {value!r}: expected a MessageId or a Message")
    else:
        items = value
    out: list[MessageId] = []
    for item in items:
        if isinstance(item, Message):
            out.append(item.message_id)
        elif isinstance(item, MessageId):
            out.append(item)
        else:
            raise InvalidRequestError(f"invalid message id {item!r}: expected a MessageId or a Message")
    return out


def single_active_choice(consumers: Iterable[Consumer], partition_index: int) -> Consumer | None:
    """The consumer an Exclusive or Failover subscription delivers to: of the consumers sorted by
    name, the one at ``partition_index`` modulo their number (the first on a non-partitioned
    topic, ``partition_index`` < 0); None without consumers. O(n log n).

    Pulsar's ``AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer`` (its hash
    ring for non-partitioned topics aside), for persistent and non-persistent subscriptions."""
    ordered = sorted(consumers, key=lambda c: c.name)
    if not ordered:
        return None
    return ordered[max(partition_index, 0) % len(ordered)]
