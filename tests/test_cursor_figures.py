"""ManagedCursor.figures(), the cheap snapshot a metrics scrape reads, agrees with stats() and the
counting methods; PersistenceStats.as_dict() is asdict without the deep copy."""

from __future__ import annotations

from dataclasses import asdict

from mledger import InitialPosition, ManagedCursor, ManagedLedgerFactory
from mledger.managed_ledger._cursor_stats import PersistenceStats
from mledger.storage import MemoryStore


def _agrees_with_stats(cursor: ManagedCursor) -> None:
    figures = cursor.figures()
    stats = cursor.stats()
    assert figures.backlog == stats.backlog == cursor.number_of_entries_in_backlog(precise=True)
    assert figures.mark_delete_lag == cursor.number_of_entries_since_first_not_acked()
    assert figures.individually_deleted_ranges == stats.individually_deleted_ranges
    assert figures.revision == stats.revision
    persisted = asdict(figures.persistence)
    assert persisted == {name: getattr(stats, name) for name in persisted}


def test_figures_follow_acks_reads_persists_and_revisions() -> None:
    ml = ManagedLedgerFactory(MemoryStore()).open("figures")
    positions = [ml.add_entry(f"m{i}".encode()) for i in range(12)]
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    _agrees_with_stats(cursor)
    assert cursor.figures().backlog == 12

    for p in positions[2:9:2]:  # four holes
        cursor.delete(p)
    cursor.read_entries(6)  # 0, 1, 3, 5, 7, 9 (the holes are skipped): the read position is now 10
    figures = cursor.figures()
    # the lag counts (mark-delete, read] = entries 0..10, acknowledged ones included (Pulsar's)
    assert (figures.backlog, figures.individually_deleted_ranges, figures.mark_delete_lag) == (8, 4, 11)
    assert figures.persistence.persist_count > 0 and figures.persistence.persisted_state_bytes > 0
    _agrees_with_stats(cursor)

    cursor.mark_delete(positions[4])
    _agrees_with_stats(cursor)
    assert cursor.figures().backlog == 12 - 5 - 2  # up to 4 acknowledged, then 6 and 8

    cursor.revision.start_revision()
    try:
        assert cursor.figures().revision.epoch_increase_task_state == 1
        _agrees_with_stats(cursor)
    finally:
        cursor.revision.end_revision()
    assert cursor.figures().revision.epoch_increase_task_state == 0


def test_a_non_durable_cursor_has_no_persistence_figures() -> None:
    ml = ManagedLedgerFactory(MemoryStore()).open("figures")
    for i in range(3):
        ml.add_entry(f"m{i}".encode())
    reader = ml.open_non_durable_cursor(initial_position=InitialPosition.EARLIEST)
    figures = reader.figures()
    assert figures.persistence == PersistenceStats()
    assert figures.backlog == reader.stats().backlog == 3


def test_persistence_as_dict_is_asdict() -> None:
    stats = PersistenceStats(persisted_state_bytes=14, persist_count=3, last_persist_chunks=2, truncated_ranges=1,
                             truncated_ranges_total=5, cursor_ledger_id=9)
    assert stats.as_dict() == asdict(stats)
    assert PersistenceStats().as_dict() == asdict(PersistenceStats())
