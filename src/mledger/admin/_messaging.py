"""``admin.messaging``: one-shot produce and consume, for trying things out (the CLI's
``produce`` / ``consume``, like ``pulsar-client``).

Both go through the broker exactly as an application would (a producer; a subscription and a
consumer), with authorization: PRODUCE on the topic for ``produce``, CONSUME for ``consume``
(Pulsar's ``canConsume`` covers subscribing). Each call opens and closes its own producer or
consumer, so it leaves no connection behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..broker import InitialPosition, Message, SubscriptionType
from ..codec import MessageId
from ..core import InvalidRequestError
from ._auth import TopicOperation
from ._context import AdminContext

__all__ = ["Messaging"]

_RECEIVE_CHUNK = 1000


class Messaging:
    """Produce and consume through an :class:`~mledger.admin.Admin` (``admin.messaging``)."""

    def __init__(self, admin: AdminContext) -> None:
        self._admin = admin

    def produce(
        self,
        topic: str,
        payloads: Sequence[bytes],
        key: str | None = None,
        deliver_after_ms: int | None = None,
        rounds: int = 1,
        batch: bool = False,
    ) -> list[MessageId]:
        """Publish ``payloads`` ``rounds`` times; returns the message ids in order.

        ``deliver_after_ms`` delays delivery by that much from the broker clock's now (honoured
        by Shared and Key_Shared subscriptions). With ``batch`` each round is one batched entry
        (its messages get batch indexes). The topic is created when missing if the broker
        allows auto-creation (else 404). PRODUCE (403). 400 for bad arguments.
        """
        name = self._admin.check_topic(TopicOperation.PRODUCE, topic)
        if isinstance(payloads, (bytes, str)) or not payloads:
            raise InvalidRequestError("produce needs a non-empty list of payloads")
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise InvalidRequestError(f"invalid number of rounds {rounds!r}: must be an integer >= 1")
        deliver_at_ms = None
        if deliver_after_ms is not None:
            if isinstance(deliver_after_ms, bool) or not isinstance(deliver_after_ms, int) or deliver_after_ms < 0:
                raise InvalidRequestError(f"invalid deliver_after_ms {deliver_after_ms!r}: must be an integer >= 0")
            deliver_at_ms = self._admin.broker.clock.now_ms() + deliver_after_ms
        producer = self._admin.broker.create_producer(str(name))
        ids: list[MessageId] = []
        try:
            for _ in range(rounds):
                if batch:
                    ids.extend(producer.send_batch(list(payloads), key=key, deliver_at_ms=deliver_at_ms))
                else:
                    for payload in payloads:
                        ids.append(producer.send(payload, key=key, deliver_at_ms=deliver_at_ms))
        finally:
            producer.close()
        return ids

    def consume(
        self,
        topic: str,
        subscription: str,
        subscription_type: SubscriptionType | str = SubscriptionType.EXCLUSIVE,
        max_messages: int = 1,
        initial_position: InitialPosition | str = InitialPosition.LATEST,
        acknowledge: bool = True,
    ) -> list[Message]:
        """Receive up to ``max_messages`` messages deliverable now (0: all of them), acknowledge
        them individually (unless ``acknowledge`` is False: they are then redelivered later),
        and detach. Creates the subscription (at ``initial_position``, Pulsar's default
        Latest) if missing; switches an idle subscription to ``subscription_type``.
        CONSUME (403). 400 for bad arguments; 409 when an Exclusive subscription already has a
        consumer; 412 when the subscription has consumers of another type.
        """
        name = self._admin.check_topic(TopicOperation.CONSUME, topic)
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 0:
            raise InvalidRequestError(f"invalid max_messages {max_messages!r}: must be an integer >= 0")
        position = _initial_position(initial_position)
        sub = self._admin.broker.subscribe(str(name), subscription, SubscriptionType.parse(subscription_type), position)
        consumer = sub.add_consumer()
        received: list[Message] = []
        try:
            while max_messages == 0 or len(received) < max_messages:
                want = _RECEIVE_CHUNK if max_messages == 0 else max_messages - len(received)
                got = consumer.receive(want)
                if not got:
                    break
                if acknowledge:
                    consumer.acknowledge(got)
                received.extend(got)
        finally:
            consumer.close()
        return received


def _initial_position(value: InitialPosition | str) -> InitialPosition:
    if isinstance(value, InitialPosition):
        return value
    if isinstance(value, str):
        for member in InitialPosition:
            if member.value == value.strip().lower():
                return member
    raise InvalidRequestError(f"invalid initial position {value!r}: expected Earliest or Latest")
