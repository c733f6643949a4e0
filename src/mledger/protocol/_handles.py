"""The session's host protocol and the handles through which the broker talks back to it.

:class:`SessionHost` is what a :class:`~mledger.protocol._session.Session` needs from the server
driving it (the broker, dispatch scheduling, thread hand-over); the asyncio shell
(:class:`~mledger.protocol.ProtocolServer`) implements it, the session tests fake it.

A :class:`ProducerHandle` is a broker producer's listener and a :class:`ConsumerHandle` a broker
consumer's sink; :class:`NonPersistentProducerHandle` and :class:`NonPersistentConsumerHandle`
are their kin on ``non-persistent://`` topics. The session's state
(:class:`~mledger.protocol._session_state.SessionState`) keeps them by id. The broker may call
them from other threads; they hand over to the host's loop and call their owner's named entry
points (:class:`ProducerOwner`, :class:`ConsumerOwner`, :class:`NonPersistentConsumerOwner`:
the session's command groups). :class:`SendsDone` is the topic's completion callback for a
group of SENDs, handed over the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, TypeVar

from ..broker import (
    Broker,
    Consumer,
    EntryDelivery,
    FramedPublish,
    NonPersistentProducer,
    NonPersistentSubscription,
    NonPersistentTopic,
    Producer,
    PublishResult,
    Subscription,
    Topic,
)
from ._access import ClientAuth, ProducerAccess
from ._config import ProtocolConfig

__all__ = [
    "ConsumerHandle",
    "ConsumerOwner",
    "NonPersistentConsumerHandle",
    "NonPersistentConsumerOwner",
    "NonPersistentProducerHandle",
    "ProducerHandle",
    "ProducerOwner",
    "Send",
    "SendsDone",
    "SessionHost",
]

_S = TypeVar("_S", contravariant=True)


class SessionHost(Protocol[_S]):
    """What a session (of type ``_S``) needs from the server driving it. Called on the host's
    loop thread, except :meth:`run_on_loop` and :meth:`post`, which any thread may call."""

    @property
    def broker(self) -> Broker:
        """The broker the session's commands act on."""
        ...

    @property
    def config(self) -> ProtocolConfig:
        """The server's settings (message size limit, server version)."""
        ...

    @property
    def auth(self) -> ClientAuth | None:
        """Token authentication and authorization; None: every client may do anything."""
        ...

    @property
    def access(self) -> ProducerAccess:
        """The server-wide producer access modes per topic."""
        ...

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` for LOOKUP answers."""
        ...

    @property
    def tls_service_url(self) -> str | None:
        """``pulsar+ssl://host:port`` for LOOKUP answers; None without a TLS port."""
        ...

    def run_on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop: now on the loop thread, soon from any other (thread-safe)."""
        ...

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop after the current callback (thread-safe)."""
        ...

    def next_id(self) -> int:
        """A number unique in the server (consumer-name suffixes)."""
        ...

    def flush_soon(self, session: _S) -> None:
        """Write what ``session`` queued at the end of this loop turn."""
        ...

    def flush_now(self, session: _S) -> None:
        """Write what ``session`` queued right away."""
        ...

    def close_soon(self, session: _S) -> None:
        """Close ``session``'s connection once what it queued is written."""
        ...

    def watch(self, topic: Topic) -> None:
        """Dispatch ``topic``'s subscriptions whenever entries are appended to it."""
        ...

    def dispatch_soon(self, subscription: Subscription) -> None:
        """Dispatch ``subscription`` at the end of this loop turn (coalesced)."""
        ...

    def pump_soon(self, handle: ConsumerHandle) -> None:
        """Call ``handle.pump()`` at the end of this loop turn (coalesced per handle)."""
        ...

    def dispatch(self, subscription: Subscription) -> int:
        """Push what ``subscription`` can deliver now; returns the entries dispatched."""
        ...


class _Loop(Protocol):
    def run_on_loop(self, fn: Callable[[], None]) -> None: ...

    def post(self, fn: Callable[[], None]) -> None: ...


Send = tuple["ProducerHandle", int, int, FramedPublish]
"""A SEND waiting for its receipt: the producer, the sequence id and highest sequence id as the
client sent them, and what was published."""


class ProducerOwner(Protocol):
    """The entry points a producer handle calls (the session's producer commands), always on
    the loop thread."""

    @property
    def host(self) -> _Loop: ...

    def sends_completed(self, sends: list[Send], results: list[PublishResult]) -> None: ...

    def producer_closed_by_broker(self, handle: ProducerHandle) -> None: ...


class _SinkOwner(Protocol):
    """What a consumer handle of either kind calls (the handle passed is of the owner's kind)."""

    @property
    def host(self) -> _Loop: ...

    def write_messages(self, handle: Any, deliveries: list[EntryDelivery]) -> None: ...

    def send_active_change(self, handle: Any, is_active: bool) -> None: ...

    def consumer_closed_by_broker(self, handle: Any) -> None: ...


class ConsumerOwner(Protocol):
    """The entry points a consumer handle calls (the session's consumer commands), always on
    the loop thread."""

    @property
    def host(self) -> _Loop: ...

    def write_messages(self, handle: ConsumerHandle, deliveries: list[EntryDelivery]) -> None: ...

    def send_active_change(self, handle: ConsumerHandle, is_active: bool) -> None: ...

    def consumer_closed_by_broker(self, handle: ConsumerHandle) -> None: ...

    def send_reached_end_of_topic(self, handle: ConsumerHandle) -> None: ...

    def pump(self, handle: ConsumerHandle) -> None: ...


class NonPersistentConsumerOwner(Protocol):
    """The entry points a non-persistent consumer handle calls (the session's non-persistent
    commands), always on the loop thread."""

    @property
    def host(self) -> _Loop: ...

    def write_messages(self, handle: NonPersistentConsumerHandle, deliveries: list[EntryDelivery]) -> None: ...

    def send_active_change(self, handle: NonPersistentConsumerHandle, is_active: bool) -> None: ...

    def consumer_closed_by_broker(self, handle: NonPersistentConsumerHandle) -> None: ...


class SendsDone:
    """The topic's callback for one group of SENDs: hands the results to the producer commands
    on the loop (it runs on the ledger's writer thread, or on the loop itself when the store's
    writes never wait on the disk)."""

    __slots__ = ("owner", "sends")

    def __init__(self, owner: ProducerOwner, sends: list[Send]) -> None:
        self.owner = owner
        self.sends = sends

    def __call__(self, results: list[PublishResult]) -> None:
        owner = self.owner
        owner.host.run_on_loop(partial(owner.sends_completed, self.sends, results))


class ProducerHandle:
    """A client's producer: the broker producer plus what the protocol adds. It is the broker
    producer's listener and the :class:`~mledger.protocol._access.AccessHolder` of its topic."""

    __slots__ = (
        "access_mode",
        "closed",
        "name",
        "owner",
        "producer",
        "producer_id",
        "ready",
        "schema_version",
        "topic",
    )

    def __init__(self, owner: ProducerOwner, producer_id: int, topic: Topic, access_mode: int) -> None:
        self.owner = owner
        self.producer_id = producer_id
        self.topic = topic
        self.producer: Producer = None  # type: ignore[assignment]  # set once the broker made it
        self.name = ""
        self.access_mode = access_mode
        self.schema_version: bytes | None = None
        self.closed = False
        self.ready = True
        """False while a WaitForExclusive producer waits for the topic (Pulsar's producer future
        is still pending then)."""

    def producer_closed(self, producer: Producer) -> None:
        """The broker closed the producer (topic deleted): tell the client (CLOSE_PRODUCER).
        Any thread."""
        owner = self.owner
        owner.host.post(lambda: owner.producer_closed_by_broker(self))

    def fence(self) -> None:
        """An ``ExclusiveWithFencing`` producer took the topic: close this one (loop thread)."""
        self.owner.producer_closed_by_broker(self)


class _ClientConsumer:
    """What both kinds of consumer handle do as their broker consumer's sink: hand each call
    over to the loop and on to their owner (its methods may be called from any thread)."""

    __slots__ = ("consumer", "consumer_id", "owner", "pending_active", "ready")

    def __init__(self, owner: _SinkOwner, consumer_id: int) -> None:
        self.owner = owner
        self.consumer_id = consumer_id
        self.consumer: Consumer | None = None
        self.ready = False
        """The SUBSCRIBE was answered: changes are told to the client from now on."""
        self.pending_active: bool | None = None
        """An active-consumer change that came before the SUBSCRIBE was answered."""

    def deliver(self, consumer: Consumer, deliveries: list[EntryDelivery]) -> None:
        """Write the deliveries as MESSAGE frames, on the loop."""
        owner = self.owner
        owner.host.run_on_loop(lambda: owner.write_messages(self, deliveries))

    def active_changed(self, consumer: Consumer, is_active: bool) -> None:
        """Tell the client (ACTIVE_CONSUMER_CHANGE), once its SUBSCRIBE is answered."""

        def tell() -> None:
            if self.ready:
                self.owner.send_active_change(self, is_active)
            else:
                self.pending_active = is_active

        self.owner.host.run_on_loop(tell)

    def disconnected(self, consumer: Consumer) -> None:
        """The broker removed the consumer (topic deleted or unloaded, a seek): tell the client
        (CLOSE_CONSUMER), on the loop."""
        owner = self.owner
        owner.host.run_on_loop(lambda: owner.consumer_closed_by_broker(self))


class ConsumerHandle(_ClientConsumer):
    """A client's consumer: the broker consumer, the permits not granted yet; the broker
    consumer's sink (its methods may be called from any thread)."""

    __slots__ = ("client_permits", "partition", "pending_end_of_topic", "subscription", "topic")
    owner: ConsumerOwner

    def __init__(self, owner: ConsumerOwner, consumer_id: int, topic: Topic, subscription: Subscription) -> None:
        super().__init__(owner, consumer_id)
        self.topic = topic
        self.subscription = subscription
        self.partition = topic.partition_index
        self.client_permits = 0
        self.pending_end_of_topic = False

    def held_permits(self) -> int:
        """The client's permits not granted to the broker consumer yet (any thread)."""
        return self.client_permits

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """Tell the client (REACHED_END_OF_TOPIC), once its SUBSCRIBE is answered."""

        def tell() -> None:
            if self.ready:
                self.owner.send_reached_end_of_topic(self)
            else:
                self.pending_end_of_topic = True

        self.owner.host.run_on_loop(tell)

    def pump(self) -> None:
        """Grant the broker consumer more of the client's permits (loop thread)."""
        self.owner.pump(self)


class NonPersistentConsumerHandle(_ClientConsumer):
    """A client's consumer on a non-persistent topic; the broker consumer's sink (its methods
    may be called from any thread and hand over to the loop)."""

    __slots__ = ("subscription", "topic")
    owner: NonPersistentConsumerOwner

    def __init__(self, owner: NonPersistentConsumerOwner, consumer_id: int, topic: NonPersistentTopic) -> None:
        super().__init__(owner, consumer_id)
        self.topic = topic
        self.subscription: NonPersistentSubscription | None = None

    def held_permits(self) -> int:
        """Permits are granted as they come: none held back."""
        return 0

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """A non-persistent topic is never terminated."""


class NonPersistentProducerHandle:
    """A client's producer on a non-persistent topic."""

    __slots__ = ("producer", "producer_id", "topic")

    def __init__(self, producer_id: int, topic: NonPersistentTopic, producer: NonPersistentProducer) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.producer = producer
