"""Issue 33 item 6: unloading a topic (Pulsar's ``unloadTopic``) through the library, the REST
route, ``RemoteAdmin`` and ``mledger-admin topics unload``: the topic is closed, its cursors
through their close path (``persistPositionWhenClosing`` writes what the mark-delete throttle held
back), and the next lookup loads it again from the store."""

from __future__ import annotations

import pytest

from mledger import NotFoundError, PermissionDeniedError
from mledger.admin import Admin, Authorization, RemoteAdmin, TopicOperation
from mledger.broker import Broker, BrokerConfig, ManualClock, SubscriptionType
from mledger.broker._names import TopicName
from mledger.cli._admin import main as admin_main
from mledger.codec import PersistedCursorState, decode_managed_cursor_info
from mledger.core import Position
from mledger.managed_ledger import InitialPosition, ManagedLedgerFactory
from mledger.managed_ledger._ledger_view import cursor_info_path
from mledger.storage import MemoryStore

TOPIC = "persistent://public/default/orders"
THROTTLED = BrokerConfig(managed_ledger_config=BrokerConfig().ledger_config.with_changes(throttle_mark_delete=1.0))
"""Pulsar's mark-delete rate (1/s): on a clock that stands still, only the first change persists."""


def _broker(store: MemoryStore, journal: object | None = None) -> Broker:
    return Broker(ManagedLedgerFactory(store, clock=ManualClock(0)), THROTTLED, clock=ManualClock(0), journal=journal)  # type: ignore[arg-type]


def _acked_then_held_back(broker: Broker, topic: str) -> list[Position]:
    """Ten messages, the first acknowledged (persisted), then 1, 3, 4 and 5 (held back by the
    throttle: the clock stands still). Returns their positions."""
    sub = broker.subscribe(topic, "billing", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    ids = [broker.create_producer(topic).send(b"m%d" % i) for i in range(10)]
    positions = [Position(m.ledger_id, m.entry_id) for m in ids]
    consumer = sub.add_consumer("c1", permits=100)
    consumer.receive(10)
    consumer.acknowledge(ids[0])
    for i in (1, 3, 4, 5):
        consumer.acknowledge(ids[i])
    cursor = broker.get_topic(topic).get_subscription("billing").cursor  # type: ignore[union-attr]
    assert cursor.persistent_mark_delete_position == positions[0]  # 1, 3, 4, 5 held back
    assert cursor.mark_delete_position == positions[1]
    return positions


def test_unload_closes_the_topic_through_the_close_path_and_the_next_lookup_loads_it() -> None:
    store = MemoryStore()
    broker = _broker(store)
    positions = _acked_then_held_back(broker, TOPIC)
    before = broker.get_topic(TOPIC)
    broker.unload_topic(TOPIC)
    assert before.is_closed and broker.loaded_topics() == []
    # the close path wrote what the throttle held back: a restart now redelivers only the unacked
    reloaded = broker.get_topic(TOPIC)
    assert reloaded is not before
    cursor = reloaded.get_subscription("billing").cursor  # type: ignore[union-attr]
    assert cursor.persistent_mark_delete_position == positions[1]
    assert [p for p in positions if not cursor.is_message_deleted(p)] == [positions[i] for i in (2, 6, 7, 8, 9)]
    broker.close()


def test_unload_of_a_partitioned_topic_closes_every_partition_and_a_partition_alone() -> None:
    broker = _broker(MemoryStore())
    broker.create_topic("parts", partitions=2)
    broker.subscribe("parts", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    partitions = broker.get_topic("parts").partitions  # type: ignore[union-attr]
    broker.unload_topic("parts")
    assert all(p.is_closed for p in partitions) and broker.loaded_topics() == []
    again = broker.get_topic("parts").partitions  # type: ignore[union-attr]
    assert [p.subscription_names() for p in again] == [["s"], ["s"]]
    broker.unload_topic("parts-partition-1")
    assert not again[0].is_closed and again[1].is_closed
    # the partitioned topic's object held the closed partition: it is loaded again
    assert not broker.get_topic("parts").partitions[1].is_closed  # type: ignore[union-attr]
    assert broker.get_topic("parts").partitions[0] is again[0]  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        broker.unload_topic("missing")
    broker.close()


def test_a_topic_not_loaded_is_loaded_and_closed_as_pulsar_does() -> None:
    """``getTopicIfExists`` loads it, then it is closed: a recovered cursor has no writable
    ledger, so its close writes the state to the metadata store (``cursorsLedgerId`` -1)."""
    store = MemoryStore()
    first = _broker(store)
    positions = _acked_then_held_back(first, TOPIC)
    first.get_topic(TOPIC).get_subscription("billing").flush_acks()  # type: ignore[union-attr]
    assert _stored_cursor(store).cursors_ledger_id != -1  # the state is in the cursor ledger
    store = store.reopen()  # a crash: the first broker is never closed
    second = _broker(store)
    second.unload_topic(TOPIC)
    assert second.loaded_topics() == []
    stored = _stored_cursor(store)
    assert stored.cursors_ledger_id == -1  # the close path wrote it to the metadata store
    assert stored.mark_delete == positions[1]
    second.close()


def _stored_cursor(store: MemoryStore) -> PersistedCursorState:
    """The subscription's ``ManagedCursorInfo`` as stored."""
    path = cursor_info_path(TopicName.parse(TOPIC).managed_ledger_name, "billing")
    stored = store.get(path)
    assert stored is not None
    return decode_managed_cursor_info(stored.data)


def test_unload_is_not_recorded_by_the_journal() -> None:
    """The raw logs have no close event: a recording that saw an unload is incomplete from then."""
    seen: list[str] = []

    class Journal:
        def __getattr__(self, name: str) -> object:
            return lambda *args: None

        def not_recorded(self, what: str, now_ms: int) -> None:
            seen.append(what)

    broker = _broker(MemoryStore(), Journal())
    broker.create_topic(TOPIC)
    broker.unload_topic(TOPIC)
    assert seen == [f"unload of topic {TOPIC}"]
    broker.close()


def test_unload_needs_the_unload_permission() -> None:
    broker = _broker(MemoryStore())
    broker.create_topic(TOPIC)
    auth = Authorization({"ops": {TOPIC: {TopicOperation.UNLOAD}}, "app": {TOPIC: {"produce", "consume"}}})
    Admin(broker, auth, role="ops").topics.unload(TOPIC)
    with pytest.raises(PermissionDeniedError):
        Admin(broker, auth, role="app").topics.unload(TOPIC)
    broker.close()


@pytest.mark.timeout(60)
def test_unload_over_rest_remote_admin_and_the_cli(pulsar_broker, capsys: pytest.CaptureFixture[str]) -> None:
    pulsar_broker.broker.create_topic("orders")
    pulsar_broker.broker.create_topic("parts", partitions=2)
    with RemoteAdmin(pulsar_broker.admin_url) as remote:
        first = pulsar_broker.broker.get_topic("orders")
        remote.topics.unload("orders")
        assert first.is_closed
        parts = pulsar_broker.broker.get_topic("parts").partitions
        remote.topics.unload("persistent://public/default/parts")  # every partition
        assert all(p.is_closed for p in parts)
        with pytest.raises(NotFoundError):
            remote.topics.unload("missing")
    second = pulsar_broker.broker.get_topic("orders")
    assert admin_main(["--admin-url", pulsar_broker.admin_url, "topics", "unload", "orders"]) == 0
    assert second.is_closed
    assert admin_main(["--admin-url", pulsar_broker.admin_url, "topics", "unload", "missing"]) == 6  # 404
    assert "not found" in capsys.readouterr().err
