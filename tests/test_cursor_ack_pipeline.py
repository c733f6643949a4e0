"""The cursor's one ack pipeline (issue 24 item 2, issue 27 item 3): every ack form validates by
the same rules with the same errors, the single-call fast path observes what a restart would
redeliver exactly as a full recomputation does, and the broker's one acknowledge path validates
every part of a request before acknowledging any."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from mledger import InvalidPositionError, ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore, Position
from mledger.broker import AckRequest, Broker, BrokerConfig, InitialPosition, ManualClock, SubscriptionType
from mledger.managed_ledger import ManagedCursor


def _cursor(entries: int = 12, per_ledger: int = 5, throttle: float = 1.0) -> tuple[ManagedCursor, ManualClock]:
    clock = ManualClock(0)
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    ml = factory.open("t", ManagedLedgerConfig(max_entries_per_ledger=per_ledger, throttle_mark_delete=throttle))
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    for _ in range(entries):
        ml.add_entry(b"x")
    return cursor, clock


def _refusal(call: object) -> str:
    with pytest.raises(InvalidPositionError) as info:
        call()  # type: ignore[operator]
    return str(info.value)


def test_every_ack_form_refuses_a_bad_position_with_the_same_error() -> None:
    cursor, _ = _cursor()
    first = cursor.ledger.first_position()
    lac = cursor.ledger.last_confirmed_entry
    bad = [
        Position(lac.ledger_id, lac.entry_id + 1),  # beyond the last confirmed entry
        Position(first.ledger_id, 7),  # above the mark-delete, past the end of its (closed) ledger
        Position(cursor.ledger.next_ledger_id(first.ledger_id) or 0, -1),  # above the mark-delete, entry id -1
    ]
    for p in bad:
        single = _refusal(lambda p=p: cursor.delete(p))
        assert _refusal(lambda p=p: cursor.delete_many([p])) == single
        assert _refusal(lambda p=p: cursor.delete_with_ack_set(p, 0)) == single
        assert _refusal(lambda p=p: cursor.delete_with_ack_sets([(p, 1, 4)])) == single
    assert cursor.messages_consumed_counter == 0 and cursor.number_of_entries_in_backlog() == 12
    cursor._check()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["single", "bulk", "batch", "mark", "tick", "flush"]), st.integers(0, 11)),
        max_size=40,
    )
)
def test_the_single_ack_fast_path_observes_what_a_full_recomputation_does(steps: list[tuple[str, int]]) -> None:
    cursor, clock = _cursor()
    ml = cursor.ledger
    positions = [ml.next_valid_position(cursor.mark_delete_position)]
    while len(positions) < 12:
        positions.append(ml.next_valid_position(positions[-1]))
    store = cursor._store
    assert store is not None
    for kind, k in steps:
        p = positions[k]
        if kind == "single":
            cursor.delete(p)
        elif kind == "bulk":
            cursor.delete_many(positions[k : k + 3])
        elif kind == "batch":
            cursor.delete_batch_indexes(p, [k % 4], 4)
        elif kind == "mark" and p >= cursor.mark_delete_position:
            cursor.mark_delete(p)
        elif kind == "tick":
            clock.advance(400)
        elif kind == "flush":
            cursor.flush()
        cursor._check()
        figures = cursor.stats().persistence  # tells the store what the fast path deferred
        entries, indexes = store._redelivered(cursor._snapshot())
        assert figures.redelivered_after_restart == store.stats().redelivered_after_restart == max(0, entries) + indexes
        assert figures.redelivered_after_restart_max >= figures.redelivered_after_restart


def test_a_whole_entry_ack_of_a_partly_acked_batch_is_observed_exactly() -> None:
    cursor, clock = _cursor()
    first = cursor.ledger.next_valid_position(cursor.mark_delete_position)
    other = cursor.ledger.next_valid_position(first)
    store = cursor._store
    assert store is not None
    cursor.delete(cursor.ledger.next_valid_position(other))  # persisted: the throttle starts now
    cursor.delete_batch_indexes(first, [0, 1, 2], 5)  # throttled: 3 indexes a restart would lose
    assert cursor.stats().persistence.redelivered_after_restart == 3
    cursor.delete(first)  # the whole entry (its batch state goes): 3 indexes become 1 entry
    entries, indexes = store._redelivered(cursor._snapshot())
    assert cursor.stats().persistence.redelivered_after_restart == max(0, entries) + indexes == 1
    clock.advance(1_000)
    cursor.delete(other)  # persisted: nothing to lose
    figures = cursor.stats().persistence
    assert figures.redelivered_after_restart == 0 and figures.redelivered_after_restart_max == 3


def test_a_request_is_validated_whole_before_anything_is_acknowledged() -> None:
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), BrokerConfig(), clock=clock)
    name = "persistent://public/default/acks"
    broker.subscribe(name, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(name)
    positions = [producer.send(f"m{i}".encode()).position for i in range(4)]
    sub = broker.get_subscription(name, "s")
    consumer = sub.add_consumer(permits=0)
    lac = sub.cursor.ledger.last_confirmed_entry
    beyond = Position(lac.ledger_id, lac.entry_id + 5)
    with pytest.raises(InvalidPositionError):
        consumer.acknowledge_request(AckRequest(entries=positions[:2], ack_sets=[(beyond, 0, 1)]))
    assert sub.cursor.number_of_entries_in_backlog() == 4  # the whole entries were not acknowledged either
    assert consumer.acknowledge_request(AckRequest(entries=positions[:2], ack_sets=[(positions[3], 0, 1)])) == 3
    assert sub.cursor.number_of_entries_in_backlog() == 1
