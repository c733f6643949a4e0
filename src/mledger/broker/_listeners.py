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

Each protocol is defined beside the class it reports on (so the import graph stays acyclic) and
re-exported here: :class:`ConsumerSink` in :mod:`.consumer`, :class:`ProducerListener` in
:mod:`.producer`, :class:`TopicListener` in :mod:`.topic`, :class:`EntryDelivery` in
:mod:`.message`.
"""

from __future__ import annotations

from ..core import UINT64_MASK, as_int64
from ._consumer import ConsumerSink
from ._message import EntryDelivery
from ._producer import ProducerListener
from ._topic import TopicListener

__all__ = ["ConsumerSink", "EntryDelivery", "ProducerListener", "TopicListener", "ack_set_words"]


def ack_set_words(bits: int, batch_size: int) -> list[int]:
    """A bitset as Pulsar's ack-set words: int64 words, lowest batch index first, signed.

    >>> ack_set_words(0b1111110000, 10)
    [1008]
    >>> ack_set_words(1 << 63, 64)
    [-9223372036854775808]
    """
    words = []
    for start in range(0, max(batch_size, 1), 64):
        words.append(as_int64((bits >> start) & UINT64_MASK))
    return words
