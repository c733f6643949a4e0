"""Issue 33 item 6: a broker under ``--defaults pulsar-X`` (the fixture's ``defaults=``, the
``pulsar_broker`` marker, ``BrokerConfig.for_pulsar``) persists at that Pulsar version's pace and
with its rules, so the real client receives after a restart what that version would redeliver:
Guava's mark-delete limiter (the first change after the cursor's creation is granted, the next
ones wait a second), the 60 s ``flushCursors`` on the broker's timers, ack receipts answered
before persisting (``asyncDelete`` completes its callback when the limiter refuses), ack sets
ignored without ``acknowledgmentAtBatchIndexLevelEnabled`` (3.0, 4.0), and batch indexes the
close path writes to the metadata store read back only on master (#26474)."""

from __future__ import annotations

import pulsar
import pytest
from protocol_raw import RawClient, subscribe_command
from rehearsal import Run, wait_for

from mledger import ConfigError
from mledger.broker import BrokerConfig, ManualClock, open_broker
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.core import ManagedLedgerFactoryConfig, Position
from mledger.standalone import EmbeddedStandalone

pytestmark = [pytest.mark.timeout(120)]

_T = api.BaseCommand


@pytest.mark.pulsar_broker(defaults="pulsar-4.0")
def test_the_limiter_holds_acks_back_until_the_flush(pulsar_broker: EmbeddedStandalone, client_for) -> None:
    """The first ack is granted at once (Guava's first ``tryAcquire``); on a clock standing still
    the next ones are refused and wait for ``flushCursors``, 60 s after the broker started."""
    run = Run(pulsar_broker, client_for(pulsar_broker))
    assert run.cursor().ledger.config.pulsar_rules == "pulsar-4.0"
    run.ack(0)
    wait_for(lambda: run.cursor().persistent_mark_delete_position == run.positions[0])
    run.ack(1, 3)
    pulsar_broker.clock.advance(59_000)
    assert run.cursor().persistent_mark_delete_position == run.positions[0]  # no flush yet
    pulsar_broker.clock.advance(1_000)  # the first flush tick: 60 s after the broker started
    assert run.cursor().persistent_mark_delete_position == run.positions[1]
    # the flush took the permit of a minute idle, and a second one is stored: the ack of 4 is
    # granted back to back, the one of 5 waits a second (SmoothBursty's one second of permits)
    run.ack(4)
    run.ack(5)
    pulsar_broker.restart(crash=True)
    assert run.received_again() == [2, 5, 6, 7, 8, 9]  # 5 was held back when the broker died


def test_receipts_are_answered_before_persisting_under_a_preset(pulsar_broker_factory, client_for) -> None:
    """An ACK with a request id: under mledger's defaults the receipt waits for the cursor state to
    be stored; under pulsar-4.0 it is answered while the limiter holds the state back."""
    persisted = {}
    throttled = BrokerConfig().ledger_config.with_changes(throttle_mark_delete=1.0)  # Pulsar's rate, mledger's rules
    for defaults, config in ((None, BrokerConfig(managed_ledger_config=throttled)), ("pulsar-4.0", None)):
        broker = pulsar_broker_factory(defaults=defaults, broker_config=config)
        raw = RawClient(broker.port)
        raw.send(subscribe_command("persistent://public/default/receipts", "s", 1, 1))
        assert raw.next_command().type == _T.SUCCESS
        ids = [client_for(broker).create_producer("receipts", batching_enabled=False).send(b"m") for _ in range(3)]
        for request_id, mid in enumerate(ids, start=10):
            ack = api.CommandAck(
                consumer_id=1, ack_type=api.CommandAck.Individual, request_id=request_id,
                message_id=[api.MessageIdData(ledgerId=mid.ledger_id(), entryId=mid.entry_id())],
            )  # fmt: skip
            raw.send(_T(type=_T.ACK, ack=ack))
            response = raw.next_command()
            assert (response.type, response.ackResponse.request_id) == (_T.ACK_RESPONSE, request_id)
        cursor = broker.broker.get_topic("receipts").get_subscription("s").cursor
        persisted[defaults] = cursor.persistent_mark_delete_position
        assert cursor.mark_delete_position == Position(ids[2].ledger_id(), ids[2].entry_id())
        raw.close()
    first = Position(ids[0].ledger_id(), ids[0].entry_id())
    assert persisted == {None: Position(first.ledger_id, first.entry_id + 2), "pulsar-4.0": first}


@pytest.mark.parametrize(
    ("defaults", "acked_again"),
    [
        ("pulsar-4.0", [0, 1]),  # acknowledgmentAtBatchIndexLevelEnabled=false: ack sets ignored
        ("pulsar-4.1", [0, 1]),  # written to the metadata store by the close, not read back
        ("pulsar-newest", []),  # read back since apache/pulsar#26474
        (None, []),  # mledger's own rules
    ],
)
def test_a_partly_acknowledged_batch_after_a_clean_restart(
    defaults: str | None, acked_again: list[int], pulsar_broker_factory, client_for
) -> None:
    broker = pulsar_broker_factory(defaults=defaults)
    client = client_for(broker)
    consumer = client.subscribe("batches", "s", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    producer = client.create_producer(
        "batches", batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=60_000
    )
    for i in range(4):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    messages = [consumer.receive(30_000) for _ in range(4)]
    for message in messages[:2]:
        consumer.acknowledge(message)
    consumer.close()  # the grouped acks go first, on the same connection
    broker.restart()
    consumer = client.subscribe("batches", "s", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
    again = []
    client.create_producer("batches").send(b"marker")  # not batched
    while (message := consumer.receive(30_000)).data() != b"marker":
        again.append(int(message.data()))
    assert sorted(again) == sorted([*acked_again, 2, 3])


def test_presets_in_the_library() -> None:
    config = BrokerConfig.for_pulsar("pulsar-4.1", deduplication_enabled=True)
    assert (config.ledger_config.pulsar_rules, config.deduplication_enabled) == ("pulsar-4.1", True)
    assert config.ledger_config.minimum_rollover_time_ms == BrokerConfig().ledger_config.minimum_rollover_time_ms
    with open_broker(
        defaults="pulsar-3.0", broker_config=BrokerConfig(cluster_name="c1"), clock=ManualClock(0)
    ) as opened:
        assert opened.broker.config.cluster_name == "c1"
        assert opened.broker.config.ledger_config.pulsar_rules == "pulsar-3.0"
        assert opened.factory.config == ManagedLedgerFactoryConfig.for_pulsar("pulsar-3.0")
    with pytest.raises(ConfigError, match="pulsar-9"):
        BrokerConfig.for_pulsar("pulsar-9")
    with pytest.raises(ConfigError, match="for_pulsar"):
        open_broker(defaults="pulsar-4.0", broker_config=BrokerConfig.for_pulsar("pulsar-4.1"))
