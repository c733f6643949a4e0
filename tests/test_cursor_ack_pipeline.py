"""The cursor's one ack pipeline (issue 24 item 2, issue 27 item 3): every ack form validates by
the same rules with the same errors, the single-call fast path observes what a restart would
redeliver exactly as a full recomputation does, and the broker's one acknowledge path validates
every part of a request before acknowledging any."""

from __future__ import annotations

from typing import Any

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
        messages, entries = _recomputed(store, cursor)
        assert figures.redelivered_after_restart == store.stats().redelivered_after_restart == messages
        assert figures.redelivered_after_crash.entries == entries
        assert figures.redelivered_after_restart_max >= figures.redelivered_after_restart


def _recomputed(store: Any, cursor: Any) -> tuple[int, int]:
    """The crash figure from scratch: the snapshot against what the store's last record holds."""
    from mledger.managed_ledger._restart_figures import redelivered

    return redelivered(cursor._snapshot(), store._figures.held, cursor.ledger)


def test_a_whole_entry_ack_of_a_partly_acked_batch_is_observed_exactly() -> None:
    cursor, clock = _cursor()
    first = cursor.ledger.next_valid_position(cursor.mark_delete_position)
    other = cursor.ledger.next_valid_position(first)
    store = cursor._store
    assert store is not None
    cursor.delete(cursor.ledger.next_valid_position(other))  # persisted: the throttle starts now
    cursor.delete_batch_indexes(first, [0, 1, 2], 5)  # throttled: 3 indexes a restart would lose
    assert cursor.stats().persistence.redelivered_after_restart == 3
    cursor.delete(first)  # the whole entry (its batch state goes): redelivered whole, 5 messages
    assert cursor.stats().persistence.redelivered_after_restart == _recomputed(store, cursor)[0] == 5
    assert cursor.stats().persistence.redelivered_after_crash.entries == 1
    clock.advance(1_000)
    cursor.delete(other)  # persisted: nothing to lose
    figures = cursor.stats().persistence
    assert figures.redelivered_after_restart == 0 and figures.redelivered_after_restart_max == 5


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


def _run_with_optional_mirror(steps: list[tuple[str, int, int]], mirrored: bool) -> list[tuple[int, ...]]:
    """Run ``steps`` on a fresh cursor; the persistence figures at each ``check`` step and at
    the end. A mirror makes the cursor tell its state stores about every ack as it happens."""
    from mledger.managed_ledger._cursor_store import CursorStateStore
    from mledger.replay._mirror import MirrorView

    cursor, clock = _cursor(entries=30, per_ledger=7)
    ml = cursor.ledger
    if mirrored:
        cursor.add_state_mirror(CursorStateStore(MirrorView(ml, ml.config, ml.factory_config, MemoryStore()), "c"))
    positions = [ml.next_valid_position(cursor.mark_delete_position)]
    while len(positions) < 30:
        positions.append(ml.next_valid_position(positions[-1]))
    seen: list[tuple[int, ...]] = []
    for kind, k, ms in steps:
        clock.advance(ms)
        p = positions[k]
        if kind == "single":
            cursor.delete(p)
        elif kind == "batch":
            cursor.delete_batch_indexes(p, [k % 4], 4)
        elif kind == "mark" and p >= cursor.mark_delete_position:
            cursor.mark_delete(p)
        elif kind == "flush":
            cursor.flush()
        elif kind == "check":
            f = cursor.stats().persistence
            seen.append(
                (
                    f.redelivered_after_restart,
                    f.redelivered_after_restart_max,
                    f.redelivered_after_restart_max_at_ms,
                    f.persist_count,
                )
            )
    f = cursor.stats().persistence
    seen.append(
        (
            f.redelivered_after_restart,
            f.redelivered_after_restart_max,
            f.redelivered_after_restart_max_at_ms,
            f.persist_count,
            cursor.messages_consumed_counter,
        )
    )
    cursor._check()
    return seen


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["single"] * 6 + ["batch", "mark", "flush", "check", "check"]),
            st.integers(0, 29),
            st.sampled_from([0, 0, 0, 1, 7, 333, 999]),
        ),
        max_size=60,
    )
)
def test_the_fast_path_tells_the_store_at_once_what_it_tells_it_per_ack(steps: list[tuple[str, int, int]]) -> None:
    """The single-call fast path tells the cursor's own store its whole-entry acks in one call
    per run (when the figures are read or anything else uses the store): the figures, their
    maximum and when it was reached are those of a cursor whose state mirror makes it tell
    every ack at once (the mirror path is the per-ack one)."""
    assert _run_with_optional_mirror(steps, mirrored=False) == _run_with_optional_mirror(steps, mirrored=True)


def test_a_run_of_fast_acks_stamps_its_maximum_at_its_last_ack() -> None:
    cursor, clock = _cursor(entries=20, per_ledger=5)
    ml = cursor.ledger
    first = ml.next_valid_position(cursor.mark_delete_position)
    cursor.delete(first)  # persisted at 0: the throttle starts
    p = first
    for t in (10, 20, 30):
        clock.advance(10)
        p = ml.next_valid_position(ml.next_valid_position(p))  # leave holes: nothing absorbs
        cursor.delete(p)
        assert cursor.stats().persistence.redelivered_after_restart_max_at_ms == t
    for _ in range(3):
        clock.advance(100)
        p = ml.next_valid_position(ml.next_valid_position(p))
        cursor.delete(p)  # three acks, nobody reads the figures in between
    figures = cursor.stats().persistence
    assert figures.redelivered_after_restart == figures.redelivered_after_restart_max == 6
    assert figures.redelivered_after_restart_max_at_ms == 330 and figures.persist_count == 1  # the first ack


@settings(max_examples=120, deadline=None)
@given(
    rate=st.sampled_from([1.0, 3.0, 0.7, 7.0, 1000.0, 3000.0, 0.0]),
    steps=st.lists(
        st.tuples(
            st.one_of(st.sampled_from([0, 1, 142, 143, 333, 334, 999, 1000, 1428, 1429]), st.integers(0, 1500)),
            st.sampled_from(["ack", "ack", "ack", "again", "rate"]),
            st.sampled_from([0.0, 0.5, 1.0, 3.0, 1000.0]),
        ),
        max_size=40,
    ),
)
def test_the_persist_throttle_persists_when_the_rate_reading_the_clock_would(
    rate: float, steps: list[tuple[int, str, float]]
) -> None:
    """The throttle is a deadline re-armed at each persist (and by ``set_config``); a change
    persists exactly when ``now_ms - last_persist_ms < 1000 / throttle_mark_delete`` fails, the
    rule read from the clock and the ledger's current settings on every change."""
    cursor, clock = _cursor(entries=50, per_ledger=9, throttle=rate)
    ml = cursor.ledger
    position = cursor.mark_delete_position
    persists = cursor.stats().persistence.persist_count
    last: int | None = None
    for advance, kind, new_rate in steps:
        now = clock.advance(advance)
        if kind == "rate":
            ml.set_config(ml.config.with_changes(throttle_mark_delete=new_rate))
            continue
        if kind == "ack":
            nxt = ml.next_valid_position(position)
            if nxt > ml.last_confirmed_entry:
                break
            position = nxt
        cursor.delete(position)  # "again": the same position, already acknowledged
        throttle = ml.config.throttle_mark_delete
        expected = not (throttle > 0 and last is not None and now - last < 1000.0 / throttle)
        count = cursor.stats().persistence.persist_count
        assert count == persists + expected, (now, last, throttle)
        persists = count
        if expected:
            last = now
        assert cursor.is_dirty is not expected


def test_an_ack_in_a_ledger_trimmed_under_the_cursor_is_refused() -> None:
    """A cursor the trimming pass did not see (opened while it ran) can have its mark-delete
    below ledgers that are gone: an ack there is refused, by the fast path too."""
    clock = ManualClock(0)
    factory = ManagedLedgerFactory(MemoryStore(), clock=clock)
    ml = factory.open("t", ManagedLedgerConfig(max_entries_per_ledger=3))
    owner = ml.open_cursor("owner", InitialPosition.EARLIEST)
    positions = [ml.add_entry(b"x") for _ in range(9)]
    unseen = ManagedCursor.open_non_durable(ml, "unseen", None, InitialPosition.EARLIEST)  # not listed: never advanced
    owner.mark_delete(positions[5])
    ml.trim_consumed_ledgers_in_background().result(timeout=10)
    assert ml.ledger_entries(positions[0].ledger_id) is None and unseen.mark_delete_position < positions[0]
    for p in (positions[0], positions[4]):
        assert "no such entry" in _refusal(lambda p=p: unseen.delete(p))
        assert "no such entry" in _refusal(lambda p=p: unseen.delete_many([p]))
    unseen.delete(positions[7])
    assert unseen.is_message_deleted(positions[7]) and not unseen.is_message_deleted(positions[6])


def test_seek_moves_the_read_position_alone_and_persists_nothing() -> None:
    """Pulsar's ``ManagedCursorImpl.seek(Position, boolean)`` sets ``readPosition`` under the
    write lock and writes nothing (as ``rewind``): an ack the rate limiter held back stays
    unpersisted, so a crash after a seek still redelivers it; ``resetCursor`` goes through
    ``internalResetCursor`` -> ``internalAsyncMarkDelete`` and persists at once."""
    cursor, clock = _cursor(entries=8, per_ledger=4, throttle=1.0)
    ml = cursor.ledger
    first = ml.next_valid_position(cursor.mark_delete_position)
    cursor.delete(first)  # the first persist
    clock.advance(10)
    held = ml.next_valid_position(ml.next_valid_position(first))
    cursor.delete(held)  # throttled: in memory only
    persisted = cursor.stats().persistence
    assert cursor.is_dirty and persisted.redelivered_after_crash.messages == 1
    target = ml.next_valid_position(held)
    cursor.seek(target)
    after = cursor.stats().persistence
    assert cursor.read_position == target
    assert (after.persist_count, cursor.is_dirty, after.redelivered_after_crash.messages) == (
        persisted.persist_count, True, 1)
    cursor.reset_cursor(target)  # a reset persists
    assert cursor.stats().persistence.persist_count == persisted.persist_count + 1 and not cursor.is_dirty
