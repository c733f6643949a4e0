"""Bulk acknowledgement paths against their one-at-a-time forms: the cursor's
``delete_with_ack_sets`` vs ``delete_with_ack_set`` per entry, and the consumer's
``acknowledge_with_ack_sets`` vs ``acknowledge`` with one batch-index message id per index."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from mledger import ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore, Position
from mledger.broker import Broker, BrokerConfig, InitialPosition, ManualClock, MessageId, SubscriptionType, Topic
from mledger.managed_ledger import ManagedCursor

SIZE = 6  # batch size of every entry
ENTRIES = 12  # over ledgers of 5 entries

item = st.tuples(st.integers(0, ENTRIES - 1), st.sets(st.integers(0, SIZE - 1), max_size=SIZE))


def cursor_with_entries(batch_level: bool) -> ManagedCursor:
    clock = ManualClock(0)
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    ml = factory.open("t", ManagedLedgerConfig(max_entries_per_ledger=5, throttle_mark_delete=1.0,
                                               deletion_at_batch_index_level_enabled=batch_level))
    cursor = ml.open_cursor("c")
    for _ in range(ENTRIES):
        ml.add_entry(b"x")
    return cursor


def state(cursor: ManagedCursor) -> tuple[Any, ...]:
    cursor._check()
    return (cursor.mark_delete_position, str(cursor.individually_deleted_messages()), cursor.batch_deleted_states(),
            cursor.messages_consumed_counter, cursor.stats().backlog, cursor.read_position)


def ack_set(indexes: set[int]) -> int:
    return ((1 << SIZE) - 1) & ~sum(1 << i for i in indexes)


@settings(max_examples=150)
@given(first=st.lists(item, max_size=25), second=st.lists(item, max_size=25), batch_level=st.booleans())
def test_delete_with_ack_sets_equals_one_entry_at_a_time(first: list[tuple[int, set[int]]],
                                                          second: list[tuple[int, set[int]]], batch_level: bool) -> None:
    bulk, ref = cursor_with_entries(batch_level), cursor_with_entries(batch_level)
    positions = [e.position for e in ref.read_entries(ENTRIES)]
    for run in (first, second):
        items = [(positions[k], ack_set(idx), SIZE) for k, idx in run]
        before = ref.messages_consumed_counter
        for position, bits, size in items:
            ref.delete_with_ack_set(position, bits, batch_size=size)
        assert bulk.delete_with_ack_sets(items) == ref.messages_consumed_counter - before
        assert state(bulk)[:-1] == state(ref)[:-1]
    if batch_level:
        for p in positions:
            assert bulk.deleted_batch_indexes(p) == ref.deleted_batch_indexes(p)


def test_delete_with_ack_sets_validates_everything_first() -> None:
    import pytest

    from mledger import InvalidPositionError

    cursor = cursor_with_entries(True)
    first = cursor.ledger.first_position()
    for bad in ([(first, 1, SIZE), (Position(first.ledger_id + 99, 0), 1, SIZE)], [(first, -1, SIZE)]):
        with pytest.raises(InvalidPositionError):
            cursor.delete_with_ack_sets(bad)
        assert cursor.batch_deleted_states() == [] and cursor.messages_consumed_counter == 0


def batched_topic() -> tuple[Broker, Topic]:
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), BrokerConfig(), clock=clock)
    broker.subscribe("persistent://public/default/b", "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer("persistent://public/default/b")
    for _ in range(ENTRIES):
        producer.send_batch([b"m"] * SIZE)
    topic = broker.get_topic("persistent://public/default/b")
    assert isinstance(topic, Topic)
    return broker, topic


@settings(max_examples=80)
@given(runs=st.lists(st.lists(item, max_size=15), max_size=3), received=st.integers(0, ENTRIES))
def test_acknowledge_with_ack_sets_equals_acknowledging_each_index(runs: list[list[tuple[int, set[int]]]],
                                                                   received: int) -> None:
    """Including entries a consumer holds (the dispatcher forgets an entry whose held indexes
    are all acknowledged)."""
    (_, bulk_topic), (_, ref_topic) = batched_topic(), batched_topic()
    bulk_sub, ref_sub = bulk_topic.get_subscription("s"), ref_topic.get_subscription("s")
    messages = received * SIZE
    bulk_consumer, ref_consumer = bulk_sub.add_consumer("c", permits=messages), ref_sub.add_consumer("c", permits=messages)
    if messages:
        assert len(bulk_consumer.receive(messages)) == len(ref_consumer.receive(messages)) == messages
    positions = [Position(ref_topic.managed_ledger.first_position().ledger_id, e) for e in range(ENTRIES)]
    for run in runs:
        before = ref_sub.cursor.messages_consumed_counter
        ref_consumer.acknowledge([MessageId(p.ledger_id, p.entry_id, -1, i) for k, idx in run for p in [positions[k]]
                                  for i in sorted(idx)])
        # an entry named twice in a run is two ack sets (applied in order), as the ids are two acks
        done = bulk_consumer.acknowledge_with_ack_sets([(positions[k], ack_set(idx), SIZE) for k, idx in run if idx])
        assert done == ref_sub.cursor.messages_consumed_counter - before
        assert state(bulk_sub.cursor) == state(ref_sub.cursor)
        assert bulk_consumer.unacked_messages == ref_consumer.unacked_messages
