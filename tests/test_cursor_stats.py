"""ManagedCursor.stats(): one frozen snapshot, the revision and persistence figures nested (not
also flattened), agreeing with the counting methods; what a metrics scrape reads."""

from __future__ import annotations

import dataclasses

import pytest

from mledger import InitialPosition, ManagedCursor, ManagedLedgerFactory, ManualClock
from mledger.managed_ledger import CursorStats, PersistenceStats, RevisionStats
from mledger.storage import MemoryStore


def _agrees_with_counting(cursor: ManagedCursor) -> None:
    stats = cursor.stats()
    assert stats.backlog == cursor.number_of_entries_in_backlog(precise=True)
    assert stats.mark_delete_lag == cursor.number_of_entries_since_first_not_acked()
    assert stats.individually_deleted_ranges == cursor.total_non_contiguous_deleted_messages_range()
    assert stats.entries_to_read == cursor.number_of_entries()
    assert stats.revision == cursor.revision.stats()
    assert cursor.individually_deleted_text() == str(cursor.individually_deleted_messages())


def test_stats_follow_acks_reads_persists_and_revisions() -> None:
    clock = ManualClock(1_000)  # the open revision's age is read twice below: time must not move between
    ml = ManagedLedgerFactory(MemoryStore(), clock=clock).open("stats")
    positions = [ml.add_entry(f"m{i}".encode()) for i in range(12)]
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    _agrees_with_counting(cursor)
    assert cursor.stats().backlog == 12

    for p in positions[2:9:2]:  # four holes
        cursor.delete(p)
    cursor.read_entries(6)  # 0, 1, 3, 5, 7, 9 (the holes are skipped): the read position is now 10
    stats = cursor.stats()
    # the lag counts (mark-delete, read] = entries 0..10, acknowledged ones included (Pulsar's)
    assert (stats.backlog, stats.individually_deleted_ranges, stats.mark_delete_lag) == (8, 4, 11)
    assert stats.persistence.persist_count > 0 and stats.persistence.persisted_state_bytes > 0
    _agrees_with_counting(cursor)

    cursor.mark_delete(positions[4])
    _agrees_with_counting(cursor)
    assert cursor.stats().backlog == 12 - 5 - 2  # up to 4 acknowledged, then 6 and 8

    cursor.revision.start_revision()
    try:
        assert cursor.stats().revision.epoch_increase_task_state == 1
        _agrees_with_counting(cursor)
        clock.advance(250)
        assert cursor.stats().revision.open_revision_ms == 250
        _agrees_with_counting(cursor)
    finally:
        cursor.revision.end_revision()
    assert cursor.stats().revision.epoch_increase_task_state == 0


def test_stats_are_a_frozen_nested_snapshot() -> None:
    ml = ManagedLedgerFactory(MemoryStore()).open("stats")
    ml.add_entry(b"m")
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST, properties={"a": 1})
    stats = cursor.stats()
    assert isinstance(stats.revision, RevisionStats) and isinstance(stats.persistence, PersistenceStats)
    names = {f.name for f in dataclasses.fields(CursorStats)}
    nested = {f.name for f in dataclasses.fields(RevisionStats)} | {
        f.name for f in dataclasses.fields(PersistenceStats)
    }
    assert not names & nested  # each figure in one place
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.backlog = 0  # type: ignore[misc]
    cursor.mark_delete(ml.first_position(), {"a": 2})
    assert stats.properties == {"a": 1} and cursor.stats().properties == {"a": 2}  # a snapshot


def test_a_non_durable_cursor_has_no_persistence_figures() -> None:
    ml = ManagedLedgerFactory(MemoryStore()).open("stats")
    for i in range(3):
        ml.add_entry(f"m{i}".encode())
    reader = ml.open_non_durable_cursor(initial_position=InitialPosition.EARLIEST)
    stats = reader.stats()
    assert stats.persistence == PersistenceStats()
    assert stats.backlog == 3
