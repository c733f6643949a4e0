"""Listener protocols through which the broker tells a frontend what happened.

The broker knows nothing about sockets or event loops; a frontend that serves remote clients
(the Pulsar protocol server, :mod:`mledger.protocol`) plugs in through these protocols:

* :class:`TopicListener` (``Topic.add_listener``): entries were appended, whoever published
  them, so consumers waiting for data get it pushed;
* :class:`ConsumerSink` (``Subscription.add_consumer(sink=...)``): a *remote* consumer. The
  dispatcher hands it whole entries (:class:`EntryDelivery`) instead of queueing decoded
  messages: the entry's stored bytes go to the client unchanged, the consumer's permits drop by
  the number of messages delivered and come back only through ``Consumer.flow`` (Pulsar's
  FLOW). The sink also hears when its consumer becomes the active one (Failover) and when the
  broker disconnects it (subscription reset, topic or subscription deleted);
* :class:`ProducerListener` (``Topic.create_producer(listener=...)``): the broker closed the
  producer (topic deleted).

Callbacks may run on any thread that changed the broker, and some run under a subscription's
lock: they must not block and must not call back into the broker synchronously.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..entry import Entry

if TYPE_CHECKING:
    from .consumer import Consumer
    from .producer import Producer
    from .topic import Topic

__all__ = ["ConsumerSink", "EntryDelivery", "ProducerListener", "TopicListener", "ack_set_words"]


@dataclass(frozen=True, slots=True)
class EntryDelivery:
    """One entry handed to a remote consumer.

    ``ack_set`` is None for an entry delivered whole; for a partly acknowledged batch it is the
    bitset of the batch indexes still unacknowledged (bit i = index i; Pulsar's ``ack_set``),
    which the client uses to skip the acknowledged ones. ``messages`` is how many messages the
    delivery counts against the consumer's permits.
    """

    entry: Entry
    redelivery_count: int
    ack_set: int | None
    batch_size: int
    messages: int


class TopicListener(Protocol):
    """Told about a topic's appends and its closing."""

    def entries_added(self, topic: Topic) -> None:
        """Entries were appended to ``topic`` (called after the append returned)."""
        ...

    def topic_closed(self, topic: Topic) -> None:
        """``topic`` closed (deleted, or the broker is closing)."""
        ...


class ConsumerSink(Protocol):
    """A remote consumer's end of the dispatcher."""

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


class ProducerListener(Protocol):
    """Told when the broker closes a producer."""

    def producer_closed(self, producer: Producer) -> None:
        """The broker closed ``producer`` (its topic was deleted or closed)."""
        ...


def ack_set_words(bits: int, batch_size: int) -> list[int]:
    """A bitset as Pulsar's ack-set words: int64 words, lowest batch index first, signed.

    >>> ack_set_words(0b1111110000, 10)
    [1008]
    >>> ack_set_words(1 << 63, 64)
    [-9223372036854775808]
    """
    words = []
    for start in range(0, max(batch_size, 1), 64):
        word = (bits >> start) & 0xFFFFFFFFFFFFFFFF
        words.append(word - (1 << 64) if word >> 63 else word)
    return words
