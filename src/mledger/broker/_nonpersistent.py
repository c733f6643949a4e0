"""Non-persistent topics: messages go to the consumers connected now, nothing is stored.

Pulsar's ``NonPersistentTopic`` (PIP-2). A message published on ``non-persistent://t/ns/x`` is
handed at once to every subscription of the topic; each subscription's dispatcher gives it to
one of its consumers that has a permit (room in its receiver queue) or, when none has, drops
it and counts the drop. The producer is answered at once and never waits for a consumer.
Nothing reaches the managed ledger or the metadata store (a partitioned non-persistent
topic's partition count excepted: Pulsar keeps it with the persistent ones), so a restart
forgets the topic, its subscriptions and its counters.

Dispatch, one entry at a time, per subscription type (Pulsar's dispatchers):

* Exclusive / Failover (``NonPersistentDispatcherSingleActiveConsumer``): the active consumer
  gets the entry if it has a permit, else it is dropped. Failover's active consumer is the one
  at ``partition index % consumers`` of the consumers sorted by name (the first on a
  non-partitioned topic); a consumer that becomes or stops being active is told;
* Shared (``NonPersistentDispatcherMultipleConsumers``): round-robin over the consumers that
  have a permit; dropped when none has;
* Key_Shared (``NonPersistentStickyKeyDispatcherMultipleConsumers``): the consumer owning the
  entry's sticky key hash on the consistent-hash ring (:mod:`.keyshared`), dropped when it has
  no permit.

A subscription lives while it has consumers (Pulsar removes a non-persistent subscription with
its last consumer): a message published while nobody is subscribed reaches no one and is not
delivered later. Consumers are :class:`~.consumer.Consumer` objects, as on persistent topics:
a remote one (with a sink) gets :class:`~.message.EntryDelivery` pushes; a library one queues
decoded messages for ``receive``. Acknowledgements, negative acks and redelivery requests
are accepted and do nothing (there is nothing to acknowledge).

Message ids: every message is ``(0, 0)`` (Pulsar's ``NonPersistentTopic.publishMessage``
creates each dispatched entry at ledger 0, entry 0 and completes the publish with the same
ids), with the partition index on a partition.

Thread safety: each topic has one lock, held while publishing and while consumers join, leave
or get permits; sink callbacks run under it (they must not block).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote_plus

from ..codec import Entry, EntryMetadata, MessageId, decode_entry
from ..core import EARLIEST, InvalidRequestError, NotFoundError, Position
from ..managed_ledger import AckOutcome
from ..storage import NEW_NODE, MetadataStore
from ._acks import AckRequest
from ._consumer import Consumer, ConsumerSink, single_active_choice
from ._errors import (
    ConsumerBusyError,
    ProducerBusyError,
    SubscriptionBusyError,
    TopicAlreadyExistsError,
    TopicBusyError,
)
from ._hashing import sticky_key_hash
from ._keyshared import ConsistentHashRing
from ._message import EntryDelivery, Message
from ._names import (
    NON_PERSISTENT,
    PARTITIONED_TOPICS_ROOT,
    TopicName,
    check_namespace_name,
    decode_partitioned_metadata,
    encode_partitioned_metadata,
)
from ._rates import RateWindow
from ._stats import ConsumerStats, ProducerStats
from ._types import ClientInfo, SubscriptionType

__all__ = [
    "NON_PERSISTENT_POSITION",
    "NonPersistentProducer",
    "NonPersistentSubscription",
    "NonPersistentSubscriptionStats",
    "NonPersistentTopic",
    "NonPersistentTopicStats",
    "NonPersistentTopics",
]

NON_PERSISTENT_POSITION = Position(0, 0)
"""The position every non-persistent message is published and dispatched at (Pulsar's)."""

_SINGLE_ACTIVE = (SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER)


class NonPersistentProducer:
    """A producer of a non-persistent topic. Its counters are private: the topic counts what it
    publishes (:meth:`count_published`), :meth:`stats` reads them (Pulsar's
    ``NonPersistentPublisherStats``, whose ``msgDropRate`` counts messages the broker refused
    to take, which mledger never does). Create through :meth:`NonPersistentTopic.add_producer`."""

    __slots__ = ("_bytes_in", "_in_rates", "_msg_in", "client", "connected_since_ms", "name", "producer_id")

    def __init__(self, name: str, producer_id: int, connected_since_ms: int, client: ClientInfo | None = None) -> None:
        self.name = name
        self.producer_id = producer_id
        self.connected_since_ms = connected_since_ms
        self.client = client
        self._msg_in = 0
        self._bytes_in = 0
        self._in_rates = RateWindow(connected_since_ms)

    def count_published(self, messages: int, size: int) -> None:
        """The topic took an entry of ``messages`` messages, ``size`` bytes, from this producer
        (under the topic lock)."""
        self._msg_in += messages
        self._bytes_in += size

    def stats(self, now_ms: int, interval_ms: int) -> ProducerStats:
        """A frozen snapshot: counters since it connected, rates over the last closed stats
        interval of ``interval_ms`` at ``now_ms``."""
        msg_in, bytes_in = self._msg_in, self._bytes_in
        rate, throughput = self._in_rates.rates(now_ms, interval_ms, msg_in, bytes_in)
        return ProducerStats(
            self.name, self.producer_id, msg_in, bytes_in, rate, throughput, self.connected_since_ms, self.client
        )

    def __repr__(self) -> str:
        return f"NonPersistentProducer({self.name!r}, producer_id={self.producer_id})"


@dataclass(frozen=True)
class NonPersistentSubscriptionStats:
    """One subscription of a non-persistent topic (Pulsar's ``NonPersistentSubscriptionStats``):
    what it delivered, what it dropped (``msg_drop_counter`` since the subscription was made,
    ``msg_drop_rate`` Pulsar's ``msgDropRate`` over the last stats interval)."""

    name: str
    type: SubscriptionType
    consumers: tuple[ConsumerStats, ...]
    active_consumer_name: str | None
    msg_out_counter: int
    bytes_out_counter: int
    msg_rate_out: float
    msg_throughput_out: float
    msg_drop_counter: int
    msg_drop_rate: float


@dataclass(frozen=True)
class NonPersistentTopicStats:
    """A non-persistent topic (Pulsar's ``NonPersistentTopicStats``): what came in, the
    producers, the subscriptions; ``msg_drop_rate`` adds up the subscriptions' and producers'
    drop rates, as Pulsar's does."""

    name: str
    msg_in_counter: int
    bytes_in_counter: int
    msg_rate_in: float
    msg_throughput_in: float
    msg_drop_rate: float
    msg_drop_counter: int
    producers: tuple[ProducerStats, ...]
    subscriptions: dict[str, NonPersistentSubscriptionStats]


class NonPersistentSubscription:
    """One subscription of a :class:`NonPersistentTopic`: its consumers and its dispatcher.

    It is the :class:`~.consumer.ConsumerOwner` of its consumers. Create through
    :meth:`NonPersistentTopic.subscribe`.
    """

    durable = False

    def __init__(self, topic: NonPersistentTopic, name: str, sub_type: SubscriptionType) -> None:
        self._topic = topic
        self._name = name
        self.type = sub_type
        self._consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._next = 0
        self._ring: ConsistentHashRing[Consumer] = ConsistentHashRing()
        # Counters (changed under the topic lock, read through stats()); _msg_drop: messages
        # dropped because no consumer had a permit (Pulsar's ``msgDrop``).
        self._msg_out = 0
        self._bytes_out = 0
        self._msg_drop = 0
        self._drop_rates = RateWindow(topic.clock())
        self._out_rates = RateWindow(topic.clock())

    # -- views ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The subscription name."""
        return self._name

    @property
    def topic(self) -> str:
        """The topic (partition) name."""
        return self._topic.name

    @property
    def consumers(self) -> list[Consumer]:
        """The connected consumers, in join order."""
        return list(self._consumers)

    @property
    def active_consumer(self) -> Consumer | None:
        """Exclusive / Failover: the consumer that gets the messages."""
        return self._active

    # -- consumers joining and leaving (under the topic lock) ------------------------------
    def attach_consumer(self, consumer: Consumer, sub_type: SubscriptionType) -> None:
        """Attach ``consumer``, subscribing as ``sub_type``, under the topic's lock (the topic's
        ``subscribe`` calls it). ``SubscriptionBusyError`` if the subscription is of another
        type, ``ConsumerBusyError`` if an exclusive one already has its consumer."""
        if sub_type is not self.type:
            raise SubscriptionBusyError("Subscription is of different type")
        if self.type is SubscriptionType.EXCLUSIVE and self._consumers:
            raise ConsumerBusyError("Exclusive consumer is already connected")
        self._consumers.append(consumer)
        if self.type is SubscriptionType.KEY_SHARED:
            self._ring.add(consumer.name, consumer)
        if not self._choose_active() and self.type is SubscriptionType.FAILOVER and consumer.sink is not None:
            # Pulsar tells a joining consumer who is active even when that did not change
            consumer.sink.active_changed(consumer, consumer is self._active)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach ``consumer`` (idempotent); the subscription goes with its last consumer."""
        with self._topic.lock:
            if not consumer.mark_disconnected():
                return
            self._consumers = [c for c in self._consumers if c is not consumer]
            self._ring.remove(consumer)
            if self._active is consumer:
                self._active = None
            self._choose_active()
            if not self._consumers:
                self._topic.forget_subscription(self)

    def _choose_active(self) -> bool:
        """Pick the active consumer (Exclusive, Failover); on a change, Failover tells every
        consumer whether it is the active one. Returns whether the active consumer changed."""
        if self.type not in _SINGLE_ACTIVE:
            return False
        previous = self._active
        self._active = single_active_choice(self._consumers, self._topic.topic_name.partition_index)
        if self._active is previous:
            return False
        if self.type is SubscriptionType.FAILOVER:
            for c in self._consumers:
                if c.sink is not None:
                    c.sink.active_changed(c, c is self._active)
        return True

    # -- dispatch (under the topic lock) -----------------------------------------------------
    def send(self, entry: Entry, messages: int, key_hash: int) -> bool:
        """Give ``entry`` (``messages`` messages) to a consumer with a permit; False when it
        was dropped (and counted)."""
        consumer = self._select(key_hash)
        if consumer is None or consumer.permits <= 0:
            self._msg_drop += messages
            return False
        size = len(entry.raw)
        consumer.record_delivery(entry.position, messages, size, self._topic.clock())
        consumer.release(entry.position, messages)  # nothing to acknowledge: settled now
        self._msg_out += messages
        self._bytes_out += size
        sink = consumer.sink
        if sink is not None:
            sink.deliver(consumer, [EntryDelivery(entry, 0, None, messages, messages)])
        else:
            consumer.enqueue(_decoded(entry, self._topic))
        return True

    def _select(self, key_hash: int) -> Consumer | None:
        if self.type in _SINGLE_ACTIVE:
            return self._active
        if self.type is SubscriptionType.KEY_SHARED:
            return self._ring.select(key_hash)
        consumers = self._consumers
        for step in range(len(consumers)):
            i = (self._next + step) % len(consumers)
            if consumers[i].permits > 0:
                self._next = i + 1
                return consumers[i]
        return None

    def stats(self, now_ms: int, interval_ms: int) -> NonPersistentSubscriptionStats:
        """A snapshot; rates over the last stats interval of ``interval_ms``."""
        with self._topic.lock:
            consumers = tuple(c.stats(now_ms, interval_ms) for c in self._consumers)
            rate_out, throughput_out = self._out_rates.rates(now_ms, interval_ms, self._msg_out, self._bytes_out)
            drop_rate, _ = self._drop_rates.rates(now_ms, interval_ms, self._msg_drop, 0)
            return NonPersistentSubscriptionStats(
                self._name,
                self.type,
                consumers,
                self._active.name if self._active is not None else None,
                self._msg_out,
                self._bytes_out,
                rate_out,
                throughput_out,
                self._msg_drop,
                drop_rate,
            )

    # -- ConsumerOwner ----------------------------------------------------------------------
    def consumer_receive(self, consumer: Consumer, max_messages: int) -> list[Message]:
        """Pop up to ``max_messages`` queued messages and give their permits back."""
        with self._topic.lock:
            out: list[Message] = []
            while len(out) < max_messages:
                message = consumer.pop_queued()
                if message is None:
                    break
                out.append(message)
            consumer.return_permits(len(out))
            return out

    def consumer_flow(self, consumer: Consumer, permits: int) -> None:
        """Grant ``permits`` more (a client's FLOW)."""
        with self._topic.lock:
            consumer.return_permits(permits)
            consumer.record_flow(self._topic.clock())

    def consumer_acknowledge(self, consumer: Consumer, request: AckRequest) -> AckOutcome:
        """Nothing to acknowledge on a non-persistent topic: an outcome of no change (no
        mark-delete: ``EARLIEST``)."""
        return AckOutcome(EARLIEST, EARLIEST)

    def consumer_negative_acknowledge(self, consumer: Consumer, message_ids: list[MessageId]) -> None:
        """Nothing is kept to redeliver."""

    def consumer_redeliver_unacknowledged(self, consumer: Consumer) -> None:
        """Nothing is kept to redeliver."""

    def close(self) -> None:
        """Disconnect every consumer (topic deleted or broker closing)."""
        for consumer in self.consumers:
            sink = consumer.sink
            consumer.close()
            if sink is not None:
                sink.disconnected(consumer)


class NonPersistentTopic:
    """A non-persistent topic (or one partition of a partitioned one). Create through
    :meth:`NonPersistentTopics.open`."""

    def __init__(
        self, name: TopicName, clock: Callable[[], int], producer_names: Callable[[], str] | None = None
    ) -> None:
        self.topic_name = name
        self.name = str(name)
        self.clock = clock
        self.lock = threading.RLock()
        self._producer_names = producer_names
        self._producers: dict[str, NonPersistentProducer] = {}
        self._subscriptions: dict[str, NonPersistentSubscription] = {}
        # Counters (changed under the lock, read through stats()); _msg_drop: messages dropped
        # by any subscription since the topic was loaded (one message dropped by two
        # subscriptions counts twice).
        self._msg_in = 0
        self._bytes_in = 0
        self._msg_drop = 0
        self._in_rates = RateWindow(clock())
        self._ids = 0

    @property
    def partition_index(self) -> int:
        """The partition index, -1 when this is not a partition."""
        return self.topic_name.partition_index

    @property
    def producers(self) -> list[NonPersistentProducer]:
        """The connected producers."""
        with self.lock:
            return list(self._producers.values())

    @property
    def subscriptions(self) -> dict[str, NonPersistentSubscription]:
        """The subscriptions that have consumers, by name."""
        with self.lock:
            return dict(self._subscriptions)

    # -- producers ---------------------------------------------------------------------------
    def add_producer(self, name: str | None = None, client: ClientInfo | None = None) -> NonPersistentProducer:
        """Attach a producer (a generated name when None); ``ProducerBusyError`` when one of
        that name is connected."""
        if name is None:
            if self._producer_names is None:
                raise InvalidRequestError("a producer name is needed")
            name = self._producer_names()
        with self.lock:
            if name in self._producers:
                raise ProducerBusyError(f"Producer with name '{name}' is already connected to topic {self.name}")
            self._ids += 1
            producer_id = client.client_id if client is not None and client.client_id is not None else self._ids
            now = self.clock()
            producer = NonPersistentProducer(name, producer_id, now, client)
            self._producers[name] = producer
            return producer

    def remove_producer(self, producer: NonPersistentProducer) -> None:
        """Detach ``producer`` (idempotent)."""
        with self.lock:
            if self._producers.get(producer.name) is producer:
                del self._producers[producer.name]

    def publish(
        self, producer: NonPersistentProducer | None, raw: bytes, messages: int = 1, key: str | bytes | None = None
    ) -> int:
        """Hand one entry (``raw``: Pulsar's entry bytes, checksummed or not; ``messages``
        messages in it, ``key`` its sticky key) to every subscription; returns how many
        subscriptions got it. Never waits: what no consumer can take now is dropped."""
        if isinstance(messages, bool) or not isinstance(messages, int) or messages < 1:
            raise InvalidRequestError(f"invalid message count {messages!r}: must be an integer >= 1")
        entry = Entry(NON_PERSISTENT_POSITION, b"", raw=bytes(raw))
        key_hash = sticky_key_hash(key)
        with self.lock:
            self._msg_in += messages
            self._bytes_in += len(raw)
            if producer is not None:
                producer.count_published(messages, len(raw))
            delivered = 0
            for sub in list(self._subscriptions.values()):
                if sub.send(entry, messages, key_hash):
                    delivered += 1
                else:
                    self._msg_drop += messages
            return delivered

    # -- subscriptions -----------------------------------------------------------------------
    def subscribe(
        self,
        subscription: str,
        sub_type: SubscriptionType | str,
        consumer_name: str | None = None,
        *,
        sink: ConsumerSink | None = None,
        client: ClientInfo | None = None,
        permits: int = 0,
    ) -> Consumer:
        """Add a consumer to ``subscription`` (made on first use). A library consumer (no
        ``sink``) gets ``permits`` of receiver queue, 1000 when 0.

        Raises ``SubscriptionBusyError`` for another type than the subscription's,
        ``ConsumerBusyError`` for a second Exclusive consumer, ``InvalidRequestError`` for a
        bad name."""
        kind = SubscriptionType.parse(sub_type)
        if not isinstance(subscription, str) or not subscription:
            raise InvalidRequestError(f"invalid subscription name {subscription!r}")
        with self.lock:
            sub = self._subscriptions.get(subscription)
            created = sub is None
            if sub is None:
                sub = NonPersistentSubscription(self, subscription, kind)
            self._ids += 1
            name = consumer_name or f"{subscription}-{self._ids}"
            if permits == 0 and sink is None:
                permits = 1000
            consumer = Consumer(sub, name, permits, self._ids, sink, client=client, connected_since_ms=self.clock())
            sub.attach_consumer(consumer, kind)
            if created:
                self._subscriptions[subscription] = sub
            return consumer

    def forget_subscription(self, subscription: NonPersistentSubscription) -> None:
        """``subscription`` lost its last consumer: it is gone (called by it)."""
        with self.lock:
            if self._subscriptions.get(subscription.name) is subscription:
                del self._subscriptions[subscription.name]

    def unsubscribe(self, subscription: str) -> None:
        """Delete ``subscription``; ``NotFoundError`` when it does not exist,
        ``SubscriptionBusyError`` while it has consumers."""
        with self.lock:
            sub = self._subscriptions.get(subscription)
            if sub is None:
                raise NotFoundError(f"Subscription {subscription} not found")
            if sub.consumers:
                raise SubscriptionBusyError(f"Subscription {subscription} has active consumers")
            del self._subscriptions[subscription]

    def stats(self, interval_ms: int) -> NonPersistentTopicStats:
        """A snapshot; rates over the last stats interval of ``interval_ms`` (Pulsar's
        ``statsUpdateFrequencyInSecs``)."""
        now = self.clock()
        with self.lock:
            producers = tuple(p.stats(now, interval_ms) for p in self._producers.values())
            subscriptions = {name: sub.stats(now, interval_ms) for name, sub in self._subscriptions.items()}
            msg_in, bytes_in, msg_drop = self._msg_in, self._bytes_in, self._msg_drop
            rate_in, throughput_in = self._in_rates.rates(now, interval_ms, msg_in, bytes_in)
        return NonPersistentTopicStats(
            self.name,
            msg_in,
            bytes_in,
            rate_in,
            throughput_in,
            sum(s.msg_drop_rate for s in subscriptions.values()),
            msg_drop,
            producers,
            subscriptions,
        )

    @property
    def is_idle(self) -> bool:
        """No producer and no subscription."""
        with self.lock:
            return not self._producers and not self._subscriptions

    def close(self) -> None:
        """Disconnect every consumer (the producers' clients are told by their frontend)."""
        for sub in list(self.subscriptions.values()):
            sub.close()


class NonPersistentTopics:
    """The broker's non-persistent topics (Pulsar keeps them in ``BrokerService.topics`` with
    the persistent ones), in memory; partition counts at Pulsar's metadata path."""

    def __init__(self, store: MetadataStore, clock: Callable[[], int], producer_names: Callable[[], str]) -> None:
        self._store = store
        self._clock = clock
        self._producer_names = producer_names
        self._lock = threading.Lock()
        self._topics: dict[TopicName, NonPersistentTopic] = {}

    @staticmethod
    def name_of(topic: str | TopicName) -> TopicName:
        """``topic`` parsed, ``InvalidRequestError`` unless it is a non-persistent name."""
        name = TopicName.parse(topic, any_domain=True)
        if name.domain != NON_PERSISTENT:
            raise InvalidRequestError(f"{name} is not a non-persistent topic")
        return name

    def open(self, topic: str | TopicName) -> NonPersistentTopic:
        """The topic, loaded on first use. A partitioned topic's own name is refused
        (``InvalidRequestError``): clients open its partitions."""
        name = self.name_of(topic)
        if not name.is_partition and self.partitions(name):
            raise InvalidRequestError(f"{name} is a partitioned topic: clients open its partitions")
        with self._lock:
            found = self._topics.get(name)
            if found is None:
                found = self._topics[name] = NonPersistentTopic(name, self._clock, self._producer_names)
            return found

    def get(self, topic: str | TopicName) -> NonPersistentTopic | None:
        """The loaded topic, None when it is not loaded."""
        with self._lock:
            return self._topics.get(self.name_of(topic))

    def exists(self, topic: str | TopicName) -> bool:
        """Loaded, or a partitioned topic (or one of its partitions)."""
        name = self.name_of(topic)
        if self.get(name) is not None or self.partitions(name):
            return True
        return name.is_partition and name.partition_index < self.partitions(name.partitioned_topic)

    def topic_names(self, namespace: str | None = None, include_partitions: bool = True) -> list[str]:
        """Names of the loaded topics and the partitioned ones (``tenant/ns`` to filter), sorted."""
        with self._lock:
            names = {str(n) for n in self._topics if include_partitions or not n.is_partition}
        names.update(self.list_partitioned(namespace))
        if namespace is not None:
            names = {n for n in names if TopicName.parse(n, any_domain=True).namespace_name == namespace}
        return sorted(names)

    def list_partitioned(self, namespace: str | None = None) -> list[str]:
        """Names of the partitioned non-persistent topics (``tenant/ns`` to filter), sorted."""
        out = []
        root = PARTITIONED_TOPICS_ROOT
        if namespace is not None:
            check_namespace_name(namespace)
        tenants = [namespace.split("/")[0]] if namespace else self._store.children(root)
        for tenant in tenants:
            spaces = [namespace.split("/")[1]] if namespace else self._store.children(f"{root}/{tenant}")
            for ns in spaces:
                for local in self._store.children(f"{root}/{tenant}/{ns}/{NON_PERSISTENT}"):
                    name = f"{NON_PERSISTENT}://{tenant}/{ns}/{unquote_plus(local)}"
                    out.append(str(TopicName.parse(name, any_domain=True)))
        return sorted(out)

    def partitions(self, topic: str | TopicName) -> int:
        """The partition count of a partitioned non-persistent topic, else 0."""
        name = self.name_of(topic)
        stored = self._store.get(name.partitioned_metadata_path)
        return 0 if stored is None else decode_partitioned_metadata(name.partitioned_metadata_path, stored.data)

    def create_partitioned(self, topic: str | TopicName, partitions: int) -> None:
        """Record ``topic`` as partitioned with ``partitions`` partitions (Pulsar's path)."""
        name = self.name_of(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidRequestError(f"invalid partitions {partitions!r}: must be an integer >= 1")
        if name.is_partition:
            raise InvalidRequestError(f"{name} is a partition's name")
        if self.partitions(name) or self.get(name) is not None:
            raise TopicAlreadyExistsError(f"This topic already exists: {name}")
        self._store.put(name.partitioned_metadata_path, encode_partitioned_metadata(partitions), NEW_NODE)

    def delete(self, topic: str | TopicName, force: bool = False) -> None:
        """Unload a topic (its subscriptions' consumers are disconnected when ``force``);
        ``NotFoundError`` when it is not loaded, ``TopicBusyError`` while it has clients."""
        name = self.name_of(topic)
        with self._lock:
            found = self._topics.get(name)
            if found is None:
                raise NotFoundError(f"Topic {name} not found")
            if not force and not found.is_idle:
                raise TopicBusyError(f"Topic {name} has connected producers/consumers")
            del self._topics[name]
        found.close()

    def delete_partitioned(self, topic: str | TopicName, force: bool = False) -> None:
        """Delete a partitioned topic: its partition count and its loaded partitions.
        ``NotFoundError`` when it is not partitioned, ``TopicBusyError`` while a partition has
        clients unless ``force``."""
        name = self.name_of(topic)
        count = self.partitions(name)
        if not count:
            raise NotFoundError(f"Partitioned Topic not found: {name}")
        with self._lock:
            loaded = [self._topics[p] for i in range(count) if (p := name.partition(i)) in self._topics]
            if not force and any(not t.is_idle for t in loaded):
                raise TopicBusyError(f"Topic {name} has connected producers/consumers")
            for t in loaded:
                del self._topics[t.topic_name]
        self._store.delete(name.partitioned_metadata_path)
        for t in loaded:
            t.close()

    def close(self) -> None:
        """Forget every topic (disconnecting their consumers)."""
        with self._lock:
            topics = list(self._topics.values())
            self._topics.clear()
        for topic in topics:
            topic.close()


def _decoded(entry: Entry, topic: NonPersistentTopic) -> list[Message]:
    """The messages of an entry for a library consumer (a batch is given whole, as one)."""
    raw = entry.raw
    if raw[:2] == b"\x0e\x01":
        raw = raw[6:]
    metadata, payload = decode_entry(raw)
    md: EntryMetadata = metadata
    return [
        Message(
            MessageId(0, 0, topic.partition_index),
            payload,
            md.partition_key,
            md.publish_time_ms,
            properties=dict(md.properties),
            producer_name=md.producer_name,
            sequence_id=md.sequence_id,
            topic=topic.name,
        )
    ]
