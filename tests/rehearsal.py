"""A client's side of a broker restart, for the restart and preset tests: ten messages on a
Shared subscription, acknowledged and waited for, and what the consumer receives again."""

from __future__ import annotations

import time
from collections.abc import Callable

import pulsar

from mledger.broker import BrokerConfig
from mledger.core import Position
from mledger.standalone import EmbeddedStandalone

TOPIC = "persistent://public/default/restarts"


def throttled(**changes: object) -> BrokerConfig:
    """Pulsar's mark-delete rate (1/s) on the fixture's clock, which stands still: after the
    first persist every acknowledgement is held back until a close or a flush writes it."""
    return BrokerConfig(
        managed_ledger_config=BrokerConfig().ledger_config.with_changes(throttle_mark_delete=1.0, **changes)
    )


class Run:
    """A producer and a Shared consumer on :data:`TOPIC` with ten messages, all received."""

    def __init__(self, broker: EmbeddedStandalone, client: pulsar.Client) -> None:
        self.broker = broker
        self.consumer = client.subscribe(TOPIC, "billing", consumer_type=pulsar.ConsumerType.Shared)
        self.producer = client.create_producer(TOPIC, batching_enabled=False)
        ids = [self.producer.send(b"m%d" % i) for i in range(10)]
        self.positions = [Position(m.ledger_id(), m.entry_id()) for m in ids]
        self.messages = [self.consumer.receive(30_000) for _ in ids]

    def ack(self, *indexes: int) -> None:
        """Acknowledge messages and wait until the broker applied them (the client groups acks
        for 100 ms and asks no receipt)."""
        for i in indexes:
            self.consumer.acknowledge(self.messages[i])
        wait_for(lambda: all(self.cursor().is_message_deleted(self.positions[i]) for i in indexes))

    def cursor(self):  # noqa: ANN201 - the broker's cursor of the subscription
        return self.broker.broker.get_topic(TOPIC).get_subscription("billing").cursor

    def received_again(self) -> list[int]:
        """The messages the consumer receives again: those before a marker sent now (after a
        reconnection the dispatcher reads from the mark-delete on, in order), which is
        acknowledged."""
        self.producer.send(b"marker")
        again = []
        while (message := self.consumer.receive(30_000)).data() != b"marker":
            again.append(int(message.data()[1:]))
        self.consumer.acknowledge(message)
        return sorted(again)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        time.sleep(0.02)
