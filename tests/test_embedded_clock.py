"""The test fixture's manual clock against a client that stamps ``deliver_after`` from its own
(wall) clock: ``advance(d)`` makes a message sent with ``deliver_after=d`` due (the README's
pytest example; the clock used to start behind the client and stop short)."""

from __future__ import annotations

import datetime

import pulsar
import pytest

from mledger.core import ManualClock
from mledger.protocol import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)


def test_catch_up_moves_forward_only() -> None:
    clock = ManualClock(1_000)
    assert clock.catch_up(500) == 1_000
    assert clock.catch_up(2_000) == 2_000
    assert clock.now_ms() == 2_000


def test_advance_by_exactly_the_delay_delivers_a_message_the_client_stamped() -> None:
    with EmbeddedBroker() as broker:
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            consumer = client.subscribe("delayed", "sub", consumer_type=pulsar.ConsumerType.Shared)
            client.create_producer("delayed").send(b"pay", deliver_after=datetime.timedelta(minutes=5))
            with pytest.raises(pulsar.Timeout):
                consumer.receive(200)  # held: the broker's time stands still
            before = broker.clock.now_ms()
            assert broker.clock.advance(5 * 60_000) >= before + 5 * 60_000
            assert consumer.receive(5000).data() == b"pay"
        finally:
            client.close()


def test_advance_refuses_a_negative_amount() -> None:
    with EmbeddedBroker() as broker, pytest.raises(ValueError, match="negative"):
        broker.clock.advance(-1)
