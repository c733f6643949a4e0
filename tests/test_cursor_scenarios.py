"""Pulsar's own cursor scenarios (ManagedCursorTest, NonDurableCursorTest), same numbers.

Each test reproduces one Java test of apache/pulsar ``managed-ledger/src/test/java/org/apache/
bookkeeper/mledger/impl/`` whose name is in the comment above it. Ledger ids differ (Pulsar's mock
BookKeeper starts at 3, our MemoryStore at 1), so expected positions are built from the ids the
managed ledger actually uses. Where our API differs the mapping is noted:

* ``readEntries(n)`` -> ``read_entries(n)``; ``asyncReadEntries(.., maxPosition)`` ->
  ``read_entries(n, max_position=...)``;
* an ack set on a position (``AckSetStateUtil.createPositionWithAckSet``) -> ``delete_with_ack_set``
  / ``delete_batch_indexes`` / ``mark_delete(p, ack_set=...)``;
* ``getNumberOfEntriesInBacklog(false)`` -> ``number_of_entries_in_backlog(precise=False)``;
* a reopen "with a new factory" shares the MemoryStore between two factories.
"""

from __future__ import annotations

import random

import pytest

from mledger import (
    EARLIEST,
    LATEST,
    CursorAlreadyClosedError,
    Entry,
    IndividualDeletedEntries,
    InitialPosition,
    InvalidPositionError,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MarkDeletingMarkedPositionError,
    Position,
)
from mledger.storage import MemoryStore

P = Position
Include = IndividualDeletedEntries.INCLUDE
Exclude = IndividualDeletedEntries.EXCLUDE


def open_ml(name: str = "my_test_ledger", max_entries: int | None = None, store: MemoryStore | None = None,
            **config: object) -> ManagedLedger:
    if max_entries is not None:
        config["max_entries_per_ledger"] = max_entries
    factory = ManagedLedgerFactory(store if store is not None else MemoryStore())
    return factory.open(name, ManagedLedgerConfig(**config))  # type: ignore[arg-type]


def reopen(ml: ManagedLedger, **config: object) -> ManagedLedger:
    """Open the same managed ledger from a second factory over the same store."""
    return ManagedLedgerFactory(ml.store).open(ml.name, ManagedLedgerConfig(**config))  # type: ignore[arg-type]


def add(ml: ManagedLedger, *payloads: str) -> list[Position]:
    return [ml.add_entry(p.encode()) for p in payloads]


def datas(entries: list[Entry]) -> list[str]:
    return [e.data.decode() for e in entries]


def acked_index_ranges(cursor: ManagedCursor, position: Position) -> list[tuple[int, int]] | None:
    """Pulsar's ``getAckedIndexRange(getDeletedBatchIndexesAsLongArray(p))`` as closed ranges."""
    acked = cursor.deleted_batch_indexes(position)
    if acked is None:
        return None
    out: list[tuple[int, int]] = []
    for i in acked:
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


# -- reads ----------------------------------------------------------------------------------


# ManagedCursorTest.readFromEmptyLedger
def test_read_from_empty_ledger_then_string_form() -> None:
    ml = open_ml()
    ledger_id = ml.current_ledger_id
    c1 = ml.open_cursor("c1")
    assert c1.read_entries(10) == []
    ml.add_entry(b"test")
    assert len(c1.read_entries(10)) == 1
    assert c1.read_entries(10) == []
    assert str(c1) == f"ManagedCursorImpl{{ledger=my_test_ledger, name=c1, ackPos={ledger_id}:-1, readPos={ledger_id}:1}}"


# ManagedCursorTest.readTwice
def test_two_cursors_read_independently_across_ledgers() -> None:
    ml = open_ml(max_entries=1)
    c1 = ml.open_cursor("c1")
    c2 = ml.open_cursor("c2")
    add(ml, "entry-1", "entry-2")
    assert datas(c1.read_entries(2)) == ["entry-1", "entry-2"]
    assert c1.read_entries(2) == []
    assert len(c2.read_entries(2)) == 2
    assert c2.read_entries(2) == []


# ManagedCursorTest.readFromClosedLedger and NonDurableCursorTest.readFromClosedLedger
def test_reads_fail_once_the_managed_ledger_is_closed() -> None:
    ml = open_ml(max_entries=1)
    durable = ml.open_cursor("c1")
    non_durable = ml.open_non_durable_cursor(LATEST)
    ml.add_entry(b"entry-1")
    ml.close()
    for cursor in (durable, non_durable):
        with pytest.raises(CursorAlreadyClosedError):
            cursor.read_entries(2)


# ManagedCursorTest.testFilteringReadEntries
def test_reads_skip_individually_deleted_entries_and_counts_follow() -> None:
    ml = open_ml(max_entries=3)
    cursor = ml.open_cursor("c1")
    p = add(ml, *(f"entry{i}" for i in range(1, 7)))
    assert cursor.number_of_entries() == 6
    assert cursor.number_of_entries_in_backlog(precise=False) == 6
    assert len(cursor.read_entries(3)) == 3
    assert cursor.number_of_entries() == 3
    assert cursor.number_of_entries_in_backlog(precise=False) == 6
    cursor.delete(p[4])
    assert cursor.number_of_entries() == 2
    assert cursor.number_of_entries_in_backlog(precise=False) == 5
    assert len(cursor.read_entries(3)) == 2
    assert cursor.number_of_entries() == 0
    assert cursor.number_of_entries_in_backlog(precise=False) == 5


# ManagedCursorTest.testReadingAllFilteredEntries
def test_read_skips_a_run_of_deleted_entries_across_a_ledger_boundary() -> None:
    ml = open_ml(max_entries=3)
    ml.open_cursor("c1")
    c2 = ml.open_cursor("c2")
    p = add(ml, "entry1", "entry2", "entry3", "entry4", "entry5")
    assert len(c2.read_entries(1)) == 1
    c2.delete(p[1])
    c2.delete(p[2])
    assert [e.position for e in c2.read_entries(2)] == [p[3], p[4]]


# ManagedCursorTest.testReadEntriesWithSkipDeletedEntries
def test_read_entries_with_skip_deleted_entries() -> None:
    ml = open_ml("testReadEntriesWithSkipDeletedEntries")
    cursor = ml.open_cursor("c")
    p = ml.add_entries([bytes(1024)] * 20)
    read_ids: list[int] = []
    real_read_range = ml.read_range

    def spy(ledger_id: int, first: int, last: int) -> list[Entry]:
        read_ids.extend(range(first, last + 1))
        return real_read_range(ledger_id, first, last)

    ml.read_range = spy  # type: ignore[method-assign]
    deleted = {p[i] for i in (1, 4, 5, 8, 9, 10, 15, 17, 19)}
    cursor.delete(deleted)
    max_read = p[-1].next()
    got = []
    for n in (5, 5, 100):
        got += cursor.read_entries(n, max_position=max_read)
    assert cursor.read_position == p[-1].next()
    # Storage reads were issued only for the entries that were not deleted.
    assert len(got) == len(read_ids) == 20 - len(deleted)
    assert sorted(e.entry_id for e in got) == read_ids


# ManagedCursorTest.testReplayEntries
def test_replay_entries_skips_deleted_and_refuses_missing_positions() -> None:
    ml = open_ml()
    c1 = ml.open_cursor("c1")
    p1, p2, p3, _ = add(ml, "entry1", "entry2", "entry3", "entry4")
    assert c1.replay_entries([]) == []
    assert sorted(datas(c1.replay_entries({p1, p3}))) == ["entry1", "entry3"]
    with pytest.raises(InvalidPositionError):
        c1.replay_entries({p1, p3, P(100, 100)})
    c1.mark_delete(p2)
    assert datas(c1.replay_entries({p1, p3})) == ["entry3"]


# -- counting -------------------------------------------------------------------------------


# ManagedCursorTest.testNumberOfEntries
def test_has_more_entries() -> None:
    ml = open_ml(max_entries=2)
    c0 = ml.open_cursor("c0")
    assert c0.number_of_entries() == 0
    assert not c0.has_more_entries()
    c1 = ml.open_cursor("c1")
    ml.add_entry(b"dummy-entry-1")
    c2 = ml.open_cursor("c2")
    ml.add_entry(b"dummy-entry-2")
    c3 = ml.open_cursor("c3")
    ml.add_entry(b"dummy-entry-3")
    c4 = ml.open_cursor("c4")
    ml.add_entry(b"dummy-entry-4")
    c5 = ml.open_cursor("c5")
    for cursor, expected in ((c1, 4), (c2, 3), (c3, 2), (c4, 1), (c5, 0)):
        assert cursor.number_of_entries() == expected
        assert cursor.has_more_entries() == (expected > 0)
    entries = c1.read_entries(2)
    assert len(entries) == 2
    c1.mark_delete(entries[1].position)
    assert c1.number_of_entries() == 2


# ManagedCursorTest.testNumberOfEntriesInBacklog
def test_number_of_entries_in_backlog_precise_and_counter() -> None:
    ml = open_ml(max_entries=2)
    c1 = ml.open_cursor("c1")
    p1 = ml.add_entry(b"dummy-entry-1")
    c2 = ml.open_cursor("c2")
    ml.add_entry(b"dummy-entry-2")
    c3 = ml.open_cursor("c3")
    p3 = ml.add_entry(b"dummy-entry-3")
    c4 = ml.open_cursor("c4")
    p4 = ml.add_entry(b"dummy-entry-4")
    c5 = ml.open_cursor("c5")
    for cursor, expected in ((c1, 4), (c2, 3), (c3, 2), (c4, 1), (c5, 0)):
        assert cursor.number_of_entries_in_backlog(precise=False) == expected
        assert cursor.number_of_entries_in_backlog(precise=True) == expected
    assert len(c1.read_entries(2)) == 2
    assert c1.number_of_entries() == 2
    assert c1.number_of_entries_in_backlog(precise=False) == 4
    c1.mark_delete(p1)
    assert c1.number_of_entries() == 2
    assert c1.number_of_entries_in_backlog(precise=False) == 3
    c1.delete(p3)
    assert c1.number_of_entries() == 1
    assert c1.number_of_entries_in_backlog(precise=False) == 2
    assert c1.number_of_entries_in_backlog(precise=True) == 2
    c1.mark_delete(p4)
    assert c1.number_of_entries() == 0
    assert c1.number_of_entries_in_backlog(precise=False) == 0


# ManagedCursorTest.testNumberOfEntriesInBacklogWithFallback
def test_counter_backlog_falls_back_to_precise_when_negative() -> None:
    ml = open_ml(max_entries=2)
    cursors = []
    for i in range(1, 5):
        cursors.append(ml.open_cursor(f"c{i}"))
        ml.add_entry(b"dummy-entry-%d" % i)
    cursors.append(ml.open_cursor("c5"))
    for cursor in cursors:
        cursor._consumed = ml.entries_added_counter + 1  # corrupt the counter, as the Java test does
    assert [c.number_of_entries_in_backlog(precise=False) for c in cursors] == [4, 3, 2, 1, 0]


# ManagedCursorTest.testNumberOfEntriesWithReopen
def test_number_of_entries_after_reopen() -> None:
    ml = open_ml(max_entries=1)
    ml.open_cursor("c1")
    ml.add_entry(b"dummy-entry-1")
    ml.open_cursor("c2")
    ml.add_entry(b"dummy-entry-2")
    ml.open_cursor("c3")
    ml2 = reopen(ml, max_entries_per_ledger=1)
    c1, c2, c3 = (ml2.open_cursor(n) for n in ("c1", "c2", "c3"))
    assert (c1.number_of_entries(), c1.has_more_entries()) == (2, True)
    assert (c2.number_of_entries(), c2.has_more_entries()) == (1, True)
    assert (c3.number_of_entries(), c3.has_more_entries()) == (0, False)


# ManagedCursorTest.testCountingWithDeletedEntries
def test_counting_with_deleted_entries() -> None:
    ml = open_ml(max_entries=2)
    cursor = ml.open_cursor("c1")
    p = add(ml, *(f"entry{i}" for i in range(1, 9)))
    assert (cursor.number_of_entries(), cursor.number_of_entries_in_backlog(precise=False)) == (8, 8)
    cursor.delete(p[7])
    assert (cursor.number_of_entries(), cursor.number_of_entries_in_backlog(precise=False)) == (7, 7)
    cursor.delete(p[0])
    assert (cursor.number_of_entries(), cursor.number_of_entries_in_backlog(precise=False)) == (6, 6)
    cursor.delete(p[6])
    cursor.delete(p[5])
    cursor.delete(p[4])
    assert (cursor.number_of_entries(), cursor.number_of_entries_in_backlog(precise=False)) == (3, 3)


# ManagedCursorTest.outOfOrderAcks and randomOrderAcks
def test_out_of_order_and_random_order_acks_keep_the_counter_backlog() -> None:
    ml = open_ml("outOfOrderAcks")
    c1 = ml.open_cursor("c1")
    p = add(ml, *["entry"] * 10)
    assert c1.number_of_entries_in_backlog(precise=False) == 10
    for k, i in enumerate((3, 2, 1, 0), start=1):
        c1.delete(p[i])
        assert c1.number_of_entries_in_backlog(precise=False) == 10 - k
    c2 = ml.open_cursor("c2", InitialPosition.EARLIEST)
    shuffled = list(p)
    random.Random(7).shuffle(shuffled)
    for remaining, position in zip(range(10, 0, -1), shuffled, strict=True):
        assert c2.number_of_entries_in_backlog(precise=False) == remaining
        c2.delete(position)
        assert c2.number_of_entries_in_backlog(precise=False) == remaining - 1
    assert c2.mark_delete_position == p[-1]


# ManagedCursorTest.deleteMessagesCheckhMarkDelete
def test_deleting_every_third_then_the_first_half_moves_mark_delete() -> None:
    ml = open_ml()
    c1 = ml.open_cursor("c1")
    positions = ml.add_entries([b"entry-%d" % i for i in range(1000)])
    assert c1.number_of_entries() == 1000
    deleted = 0
    for i in range(0, 1000, 3):
        c1.delete(positions[i])
        deleted += 1
    assert c1.number_of_entries_in_backlog(precise=False) == 1000 - deleted
    assert c1.number_of_entries() == 1000 - deleted
    assert c1.mark_delete_position == positions[0]
    assert c1.read_position == positions[1]
    for i in range(500):
        if i % 3:
            c1.delete(positions[i])
            deleted += 1
    assert c1.number_of_entries_in_backlog(precise=False) == 1000 - deleted
    assert c1.number_of_entries() == 1000 - deleted
    assert c1.mark_delete_position == positions[499]
    assert c1.read_position == positions[500]


# -- mark-delete ------------------------------------------------------------------------------


# ManagedCursorTest.markDeleteSkippingMessage
def test_mark_delete_skipping_messages_moves_the_read_position() -> None:
    ml = open_ml(max_entries=10)
    cursor = ml.open_cursor("c1")
    p1, p2, _, p4 = add(ml, "dummy-entry-1", "dummy-entry-2", "dummy-entry-3", "dummy-entry-4")
    assert cursor.number_of_entries() == 4
    cursor.mark_delete(p1)
    assert cursor.has_more_entries()
    assert cursor.number_of_entries() == 3
    assert cursor.read_position == p2
    assert datas(cursor.read_entries(1)) == ["dummy-entry-2"]
    cursor.mark_delete(p4)
    assert not cursor.has_more_entries()
    assert cursor.number_of_entries() == 0
    assert cursor.read_position == P(p4.ledger_id, p4.entry_id + 1)


# ManagedCursorTest.unorderedMarkDelete
def test_mark_deleting_marked_position() -> None:
    ml = open_ml()
    c1 = ml.open_cursor("c1")
    p1, p2 = add(ml, "entry-1", "entry-2")
    c1.mark_delete(p2, properties={"k": 1})
    with pytest.raises(MarkDeletingMarkedPositionError):
        c1.mark_delete(p1)
    assert c1.mark_delete_position == p2
    assert c1.properties == {"k": 1}


# ManagedCursorTest.testMarkDeleteTwice
def test_mark_delete_twice_at_the_same_position() -> None:
    ml = open_ml(max_entries=2)
    cursor = ml.open_cursor("c1")
    p1 = ml.add_entry(b"entry1")
    cursor.mark_delete(p1)
    cursor.mark_delete(p1)
    assert cursor.mark_delete_position == p1


# ManagedCursorTest.testInvalidMarkDelete
def test_mark_delete_beyond_lac_is_invalid() -> None:
    ml = open_ml()
    cursor = ml.open_cursor("c1")
    read, md = cursor.read_position, cursor.mark_delete_position
    add(ml, *(f"dummy-entry-{i}" for i in range(20)))
    with pytest.raises(InvalidPositionError):
        cursor.mark_delete(P(100, 100))
    assert (cursor.read_position, cursor.mark_delete_position) == (read, md)
    with pytest.raises(InvalidPositionError):
        cursor.delete(P(100, 100))
    assert (cursor.read_position, cursor.mark_delete_position) == (read, md)
    assert cursor.number_of_entries_in_backlog() == 20


# ManagedCursorImpl.asyncMarkDelete "shouldCursorMoveForward" (REFERENCE 2.3, step 4)
def test_mark_delete_into_the_empty_next_ledger_only_from_a_ledger_end() -> None:
    ml = open_ml(max_entries=2)
    at_end = ml.open_cursor("at_end", InitialPosition.EARLIEST)
    inside = ml.open_cursor("inside", InitialPosition.EARLIEST)
    p = add(ml, "a", "b")  # fills the ledger; the current ledger is empty
    next_ledger = ml.current_ledger_id
    inside.mark_delete(p[0])
    with pytest.raises(InvalidPositionError):
        inside.mark_delete(P(next_ledger, -1))
    at_end.mark_delete(p[1])
    at_end.mark_delete(P(next_ledger, -1))
    assert at_end.mark_delete_position == P(next_ledger, -1)
    assert at_end.read_position == P(next_ledger, 0)
    q = ml.add_entry(b"c")
    assert [e.position for e in at_end.read_entries(5)] == [q]
    at_end._check()


# ManagedCursorTest.testSingleDelete
def test_mark_delete_absorbs_individually_deleted_across_ledgers() -> None:
    ml = open_ml(max_entries=3)
    cursor = ml.open_cursor("c1")
    p1, p2, p3, p4, p5, p6 = add(ml, *(f"entry{i}" for i in range(1, 7)))
    p0 = cursor.mark_delete_position
    cursor.delete(p4)
    assert cursor.mark_delete_position == p0
    cursor.delete(p1)
    assert cursor.mark_delete_position == p1
    cursor.delete(p3)
    cursor.delete(p3)  # silently succeeds
    assert cursor.mark_delete_position == p1
    cursor.delete(p2)  # p3 ends ledger 1 and p4 starts ledger 2: both absorbed
    assert p3.ledger_id != p4.ledger_id
    assert cursor.mark_delete_position == p4
    cursor.delete(p5)
    assert cursor.mark_delete_position == p5
    cursor.close()
    with pytest.raises(CursorAlreadyClosedError):
        cursor.delete(p6)


# ManagedCursorTest.markDeleteAcrossLedgers
def test_delete_after_reopen_moves_mark_delete_from_the_old_empty_ledger() -> None:
    ml1 = open_ml()
    mc1 = ml1.open_cursor("c1")
    old_md = mc1.mark_delete_position
    ml1.close()
    ml2 = reopen(ml1)
    mc2 = ml2.open_cursor("c1")
    pos = ml2.add_entry(b"dummy-entry-1")
    assert pos.ledger_id > old_md.ledger_id
    assert datas(mc2.read_entries(1)) == ["dummy-entry-1"]
    mc2.delete(pos)
    assert mc2.mark_delete_position == pos
    assert mc2.mark_delete_position.next() == mc2.read_position


# ManagedCursorTest.deleteSingleMessageTwice
def test_delete_single_message_twice_has_no_effect() -> None:
    ml = open_ml()
    c1 = ml.open_cursor("c1")
    p = add(ml, "entry-1", "entry-2", "entry-3", "entry-4")
    assert (c1.number_of_entries_in_backlog(precise=False), c1.number_of_entries()) == (4, 4)
    for i, position in enumerate(p):
        for _ in range(2):
            c1.delete(position)
            assert c1.number_of_entries_in_backlog(precise=False) == 3 - i
            assert c1.number_of_entries() == 3 - i
            assert c1.mark_delete_position == position
            assert c1.read_position == (p[i + 1] if i < 3 else p[3].next())


# ManagedCursorTest.testIndividuallyDeletedMessages, ...1, ...2 and ...3
@pytest.mark.parametrize(
    "deletes, mark_delete, expected_md",
    [([1, 2], 3, 3), ([1], 3, 3), ([1, 2, 0], None, 2), ([1, 2], 0, 2)],
    ids=["delete-1-2-md-3", "delete-1-md-3", "delete-1-2-0", "delete-1-2-md-0"],
)
def test_individually_deleted_messages_are_emptied_by_mark_delete(
    deletes: list[int], mark_delete: int | None, expected_md: int
) -> None:
    ml = open_ml("testIndividuallyDeletedMessages")
    c1 = ml.open_cursor("c1")
    add(ml, *(f"entry-{i}" for i in range(5)))
    entries = c1.read_entries(4)
    for i in deletes:
        c1.delete(entries[i].position)
    if mark_delete is not None:
        c1.mark_delete(entries[mark_delete].position)
    assert len(c1.individually_deleted_messages()) == 0
    assert c1.mark_delete_position == entries[expected_md].position


# ManagedCursorTest.testGetLastIndividualDeletedRange
def test_last_individual_deleted_range() -> None:
    ml = open_ml("test_last_individual_deleted")
    c1 = ml.open_cursor("c1")
    md = c1.mark_delete_position
    add(ml, *(f"entry{i}" for i in range(10)))
    p1, p2, p3, p4 = (P(md.ledger_id, md.entry_id + k) for k in (1, 2, 5, 6))
    c1.delete([p1, p2, p3, p4])
    last = c1.individually_deleted_messages().as_range_set().last_range()
    assert last == (P(p3.ledger_id, p3.entry_id - 1), p4)
    p5 = P(md.ledger_id, md.entry_id + 8)
    c1.delete(p5)
    last = c1.individually_deleted_messages().as_range_set().last_range()
    assert last == (P(p5.ledger_id, p5.entry_id - 1), p5)


# ManagedCursorTest.testAsyncDeleteNeverLoseMarkDeleteProperties (REFERENCE 2.3, "Properties")
def test_async_delete_never_loses_mark_delete_properties() -> None:
    ml = open_ml()
    cursor = ml.open_cursor("c1")
    p1, p2, p3, p4 = add(ml, "a", "b", "c", "d")
    cursor.mark_delete(p1, properties={"key": 1})
    cursor.delete(p3)
    cursor.delete(p2)  # absorbs p3: the mark-delete moves without new properties
    assert cursor.mark_delete_position == p3
    assert cursor.properties == {"key": 1}
    cursor.delete([p4])
    assert cursor.properties == {"key": 1}
    cursor.mark_delete(p4)  # a plain mark-delete has empty properties
    assert cursor.properties == {}


# -- batch-index acks -------------------------------------------------------------------------


# ManagedCursorTest.testBatchIndexMarkdelete
def test_batch_index_mark_delete_keeps_the_most_acked_state() -> None:
    ml = open_ml("test_batch_index_delete")
    cursor = ml.open_cursor("c1")
    positions = ml.add_entries([b"entry-%d" % i for i in range(100)])
    assert cursor.number_of_entries() == 100

    def mark_delete_batch_index(batch_index: int) -> None:
        remaining = ((1 << 10) - 1) & ~((1 << (batch_index + 1)) - 1)  # set(0,10) clear(0..index)
        cursor.mark_delete(positions[0], ack_set=remaining)

    mark_delete_batch_index(3)
    assert acked_index_ranges(cursor, positions[0]) == [(0, 3)]
    mark_delete_batch_index(4)
    assert acked_index_ranges(cursor, positions[0]) == [(0, 4)]
    mark_delete_batch_index(2)  # less acked than the stored state: ignored
    assert acked_index_ranges(cursor, positions[0]) == [(0, 4)]
    assert cursor.mark_delete_position < positions[0]


# ManagedCursorTest.testBatchIndexDelete
def test_batch_index_ack_and_semantics() -> None:
    ml = open_ml("test_batch_index_delete")
    cursor = ml.open_cursor("c1")
    positions = ml.add_entries([b"entry-%d" % i for i in range(100)])

    def delete_batch_index(position: Position, start: int, end: int) -> None:
        cursor.delete_batch_indexes(position, range(start, end + 1), batch_size=10)

    delete_batch_index(positions[0], 2, 4)
    assert acked_index_ranges(cursor, positions[0]) == [(2, 4)]
    delete_batch_index(positions[0], 3, 8)
    assert acked_index_ranges(cursor, positions[0]) == [(2, 8)]
    delete_batch_index(positions[0], 0, 0)
    assert acked_index_ranges(cursor, positions[0]) == [(0, 0), (2, 8)]
    delete_batch_index(positions[0], 1, 1)
    delete_batch_index(positions[0], 9, 9)
    assert acked_index_ranges(cursor, positions[0]) is None  # fully acked: an individual delete
    assert cursor.mark_delete_position == positions[0]

    delete_batch_index(positions[1], 0, 5)
    cursor.delete(positions[1])
    delete_batch_index(positions[1], 6, 8)
    assert acked_index_ranges(cursor, positions[1]) is None

    delete_batch_index(positions[2], 0, 5)
    cursor.mark_delete(positions[3])
    assert acked_index_ranges(cursor, positions[2]) is None

    delete_batch_index(positions[4], 0, 5)
    assert acked_index_ranges(cursor, positions[4]) == [(0, 5)]
    cursor.reset_cursor(positions[0])
    assert acked_index_ranges(cursor, positions[4]) is None
    assert cursor.batch_deleted_states() == []


# ManagedCursorTest.testDeleteBatchedMessageWithEmptyAckSet
def test_empty_ack_set_deletes_the_whole_entry_even_without_batch_deletion() -> None:
    ml = open_ml("testDeleteBatchedMessageWithEmptyAckSet", deletion_at_batch_index_level_enabled=False)
    cursor = ml.open_cursor("c1")
    position = ml.add_entry(b"\x01")
    cursor.delete_with_ack_set(position, 0)
    assert cursor.mark_delete_position == position


# -- seek, rewind, reset ---------------------------------------------------------------------


# ManagedCursorTest.seekPosition3 and seekPosition4
def test_seek_position() -> None:
    ml = open_ml(max_entries=2)
    cursor = ml.open_cursor("c1")
    _, _, _, seek_position, entry5, entry6 = add(ml, *(f"dummy-entry-{i}" for i in range(1, 7)))
    cursor.seek(seek_position)
    assert cursor.read_position == seek_position
    assert datas(cursor.read_entries(1)) == ["dummy-entry-4"]
    cursor.seek(entry5.next())
    assert cursor.read_position == entry6
    assert datas(cursor.read_entries(1)) == ["dummy-entry-6"]

    ml = open_ml()
    cursor = ml.open_cursor("c1")
    p1, p2, *_ = add(ml, *(f"dummy-entry-{i}" for i in range(1, 7)))
    cursor.mark_delete(p1)
    assert (cursor.mark_delete_position, cursor.read_position) == (p1, p2)
    cursor.read_entries(2)
    cursor.seek(p2)
    assert (cursor.mark_delete_position, cursor.read_position) == (p1, p2)
    cursor.seek(p1)  # at or below the mark-delete: the entry after it
    assert (cursor.mark_delete_position, cursor.read_position) == (p1, p2)


# ManagedCursorTest.rewind
def test_rewind() -> None:
    ml = open_ml(max_entries=2)
    c1 = ml.open_cursor("c1")
    p1, p2, _, p4 = add(ml, *(f"dummy-entry-{i}" for i in range(1, 5)))

    def counts() -> tuple[int, int]:
        return c1.number_of_entries(), c1.number_of_entries_in_backlog(precise=False)

    assert counts() == (4, 4)
    c1.mark_delete(p1)
    assert counts() == (3, 3)
    assert len(c1.read_entries(10)) == 3
    assert counts() == (0, 3)
    c1.rewind()
    assert counts() == (3, 3)
    c1.mark_delete(p2)
    assert counts() == (2, 2)
    assert len(c1.read_entries(10)) == 2
    assert counts() == (0, 2)
    c1.rewind()
    assert c1.number_of_entries() == 2
    c1.mark_delete(p4)
    assert counts() == (0, 0)
    c1.rewind()
    assert c1.number_of_entries() == 0
    ml.add_entry(b"dummy-entry-5")
    assert c1.number_of_entries() == 1
    ml.add_entry(b"dummy-entry-6")
    assert c1.number_of_entries() == 2


# ManagedCursorTest.testResetCursor
def test_reset_cursor_moves_the_read_position_back() -> None:
    ml = open_ml("my_test_move_cursor_ledger", max_entries=10)
    cursor = ml.open_cursor("trc1")
    *_, last = add(ml, "dummy-entry-1", "dummy-entry-2", "dummy-entry-3", "dummy-entry-4")
    reset_position = P(last.ledger_id, last.entry_id - 2)
    cursor.reset_cursor(reset_position)
    assert cursor.read_position == reset_position
    assert cursor.mark_delete_position == P(last.ledger_id, last.entry_id - 3)
    assert cursor.number_of_entries_in_backlog() == 3


# ManagedCursorTest.testResetCursor1
def test_reset_cursor_to_earliest() -> None:
    ml = open_ml("my_test_move_cursor_ledger", max_entries=2)
    cursor = ml.open_cursor("trc1")
    p = add(ml, *(f"dummy-entry-{i}" for i in range(1, 11)))
    actual_earliest, last_in_prev, first_in_next, last = p[0], p[3], p[4], p[9]

    cursor.reset_cursor(EARLIEST)
    # Pulsar reports the read position as (first ledger, -1), equal to the mark-delete; we keep
    # read > mark-delete and point at the first entry, which reads the same entries.
    assert cursor.mark_delete_position == P(actual_earliest.ledger_id, -1)
    assert cursor.read_position == actual_earliest
    assert cursor.number_of_entries_in_backlog() == 10

    cursor.reset_cursor(P(last_in_prev.ledger_id, last_in_prev.entry_id + 1))
    assert cursor.read_position == first_in_next

    next_write = P(ml.current_ledger_id, 0)  # the empty current ledger after 5 full ones
    cursor.reset_cursor(P(ml.current_ledger_id + 1, 0))  # a non-existent larger ledger
    assert cursor.read_position == next_write
    assert cursor.mark_delete_position == last

    cursor.reset_cursor(LATEST)
    assert cursor.read_position == next_write
    assert cursor.number_of_entries_in_backlog() == 0


# ManagedCursorTest.testRecoverCursorAfterResetToLatestForMultipleEntries (the reset part)
def test_reset_cursor_to_latest() -> None:
    ml = open_ml("testRecoverCursorAfterResetToLatestForMultipleEntries")
    c = ml.open_cursor("sub", InitialPosition.LATEST)
    assert (c.mark_delete_position.entry_id, c.read_position.entry_id, ml.last_confirmed_entry.entry_id) == (-1, 0, -1)
    c.reset_cursor(LATEST)
    assert (c.mark_delete_position.entry_id, c.read_position.entry_id, ml.last_confirmed_entry.entry_id) == (-1, 0, -1)
    add(ml, "a", "b", "c", "d")
    c.reset_cursor(LATEST)
    assert (c.mark_delete_position.entry_id, c.read_position.entry_id, ml.last_confirmed_entry.entry_id) == (3, 4, 3)
    add(ml, "e", "f")
    assert c.number_of_entries() == 2


# -- skip and clear-backlog -------------------------------------------------------------------


# ManagedCursorTest.testSkipEntries
def test_skip_entries_across_ledgers() -> None:
    ml = open_ml(max_entries=2)
    c1 = ml.open_cursor("c1")
    pos = c1.read_position
    c1.skip_entries(1, Exclude)  # skip on an empty ledger
    assert c1.read_position == pos
    pos = add(ml, "dummy-entry-1", "dummy-entry-2")[-1]
    c1.skip_entries(1, Exclude)
    assert c1.number_of_entries() == 1
    c1.skip_entries(1, Exclude)  # up to the end of the ledger
    assert c1.number_of_entries() == 0
    assert c1.read_position == P(ml.current_ledger_id, 0)
    assert c1.mark_delete_position == pos
    pos = add(ml, *["dummy-entry"] * 6)[-1]
    c1.skip_entries(5, Exclude)
    assert c1.number_of_entries() == 1
    c1.skip_entries(10, Exclude)  # more than there is
    assert c1.number_of_entries() == 0
    assert not c1.has_more_entries()
    assert c1.read_position.entry_id == 0
    assert c1.mark_delete_position == pos


# ManagedCursorTest.testSkipEntriesWithIndividualDeletedMessages
def test_skip_entries_excluding_and_including_deleted() -> None:
    ml = open_ml("testSkipEntriesWithIndividualDeletedMessages", max_entries=5)
    c1 = ml.open_cursor("c1")
    pos1, pos2, pos3, pos4, pos5 = add(ml, *(f"dummy-entry-{i}" for i in range(1, 6)))
    assert ml.current_ledger_id > pos5.ledger_id
    c1.delete(pos2)
    c1.delete(pos4)
    c1.skip_entries(3, Exclude)  # pos1, pos3, pos5: the deleted ones do not count
    assert c1.number_of_entries() == 0
    assert c1.read_position == P(ml.current_ledger_id, 0)
    assert c1.mark_delete_position == pos5

    pos6, pos7, pos8, pos9, pos10 = add(ml, *(f"dummy-entry-{i}" for i in range(1, 6)))
    c1.delete(pos7)
    c1.delete(pos9)
    c1.skip_entries(4, Include)  # pos6..pos9, deleted ones included
    assert c1.number_of_entries() == 1
    assert c1.read_position == pos10
    assert c1.mark_delete_position == pos9


# ManagedCursorTest.testClearBacklog
def test_clear_backlog() -> None:
    ml = open_ml(max_entries=1)
    c1 = ml.open_cursor("c1")
    ml.add_entry(b"dummy-entry-1")
    c2 = ml.open_cursor("c2")
    ml.add_entry(b"dummy-entry-2")
    c3 = ml.open_cursor("c3")
    ml.add_entry(b"dummy-entry-3")

    def state(c: ManagedCursor) -> tuple[int, int, bool]:
        return c.number_of_entries_in_backlog(precise=False), c.number_of_entries(), c.has_more_entries()

    assert state(c1) == (3, 3, True)
    c1.clear_backlog()
    c3.clear_backlog()
    assert state(c1) == (0, 0, False)
    assert state(c2) == (2, 2, True)
    assert state(c3) == (0, 0, False)
    # The Java test reopens after a crash; cursor persistence is another module's concern, so
    # the managed ledger is closed first and the reopen checks what was kept.
    ml.close()
    ml2 = reopen(ml, max_entries_per_ledger=1)
    c1, c2, c3 = (ml2.open_cursor(n) for n in ("c1", "c2", "c3"))
    assert state(c1) == (0, 0, False)
    assert state(c2) == (2, 2, True)
    assert state(c3) == (0, 0, False)


# -- opening and recovery ----------------------------------------------------------------------


# ManagedCursorTest.testOpenCursorWithNullInitialPosition
def test_new_cursor_starts_at_the_last_confirmed_entry_by_default() -> None:
    ml = open_ml("testOpenCursorWithNullInitialPosition")
    add(ml, *"12345")
    cursor = ml.open_cursor("c_testOpenCursorWithNullInitialPosition")
    assert cursor.mark_delete_position == ml.last_confirmed_entry
    earliest = ml.open_cursor("from_start", InitialPosition.EARLIEST)
    assert earliest.number_of_entries_in_backlog() == 5
    assert earliest.number_of_entries_in_backlog(precise=False) == 5


# ManagedLedgerTest.testCursorRecoveryForEmptyLedgers and
# ManagedCursorTest.testLazyCursorLedgerCreationForSubscriptionCreation
def test_cursor_recovery_keeps_the_mark_delete_position() -> None:
    ml = open_ml("testCursorRecoveryForEmptyLedgers")
    c1 = ml.open_cursor("c1")
    assert c1.mark_delete_position == ml.last_confirmed_entry
    ml.close()
    ml = reopen(ml)
    c1 = ml.open_cursor("c1")
    assert c1.mark_delete_position == ml.last_confirmed_entry

    ml = open_ml("testLazyCursorLedgerCreation")
    p1 = ml.add_entry(b"test")
    cursor = ml.open_cursor("test")
    assert cursor.mark_delete_position == p1
    ml2 = reopen(ml)
    assert [c.name for c in ml2.cursors] == ["test"]
    assert ml2.open_cursor("test").mark_delete_position == p1


# ManagedCursorTest.testOutOfOrderDeletePersistenceWithClose
def test_out_of_order_deletes_survive_close_and_reopen() -> None:
    ml = open_ml()
    c1 = ml.open_cursor("c1")
    added = add(ml, *(f"dummy-entry-{i}" for i in range(20)))
    for i in (2, 5, 7, 8, 9):
        c1.delete(added[i])
    assert c1.number_of_entries_in_backlog(precise=False) == 15
    ml.close()
    ml = reopen(ml)
    c1 = ml.open_cursor("c1")
    assert c1.number_of_entries_in_backlog(precise=False) == 15
    entries = datas(c1.read_entries(20))
    assert len(entries) == 15
    assert entries[:5] == ["dummy-entry-0", "dummy-entry-1", "dummy-entry-3", "dummy-entry-4", "dummy-entry-6"]
    assert not c1.has_more_entries()


# NonDurableCursorTest.readFromEmptyLedger, testOpenNonDurableCursorAtNonExistentMessageId,
# markDeleteGreaterThanLastConfirmedEntry (and REFERENCE 2.10 for the other start positions)
def test_non_durable_cursor_start_positions() -> None:
    ml = open_ml()
    ledger_id = ml.current_ledger_id
    at_non_existent = ml.open_non_durable_cursor(P(ledger_id, -2))
    assert at_non_existent.read_position == P(ledger_id, 0)
    c1 = ml.open_non_durable_cursor(EARLIEST, name="c1")
    assert c1.read_entries(10) == []
    ml.add_entry(b"test")
    assert len(c1.read_entries(10)) == 1
    assert c1.read_entries(10) == []
    assert str(c1) == f"NonDurableCursorImpl{{ledger=my_test_ledger, cursor=c1, ackPos={ledger_id}:-1, readPos={ledger_id}:1}}"

    beyond = ml.open_non_durable_cursor(P((1 << 63) - 2, (1 << 63) - 2))
    assert beyond.mark_delete_position == ml.last_confirmed_entry

    p = add(ml, "a", "b", "c")  # entries 1..3 of the ledger
    at = ml.open_non_durable_cursor(p[0])  # resumes after the given position
    assert (at.mark_delete_position, at.read_position) == (p[0], p[1])
    assert at.number_of_entries_in_backlog(precise=False) == 2
    earliest = ml.open_non_durable_cursor(EARLIEST)
    assert earliest.mark_delete_position == P(ledger_id, -1)
    assert earliest.number_of_entries_in_backlog(precise=False) == 4
    latest = ml.open_non_durable_cursor(None)
    assert latest.mark_delete_position == p[-1] and latest.number_of_entries_in_backlog(precise=False) == 0
    from_start = ml.open_non_durable_cursor(None, initial_position=InitialPosition.EARLIEST)
    assert from_start.number_of_entries_in_backlog(precise=False) == 4
    for cursor in (at_non_existent, c1, beyond, at, earliest, latest, from_start):
        cursor._check()
    # Not stored: a reopen knows no non-durable cursor.
    ml.close()
    assert reopen(ml).cursors == []
