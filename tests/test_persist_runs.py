"""A persist sized from a range set's runs (``AckRangeSet.range_runs``, ``PositionInfoRanges.size_runs``):
the record a replay's store keeps unbuilt has exactly the bytes of the record built from the
set's range arrays, through successive exports that reuse what did not change; its bound
(``PositionInfoEntry.bound``) is never below that size, and a limit it reaches has the record
sized exactly (``PositionInfoEntry.fits``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from mledger.codec import PersistedCursorState, PositionInfoEntry, PositionInfoRanges, RangeArrays, encode_position_info
from mledger.core import MAX_ENTRY_ID, AckRangeSet, Position

_ENTRY = st.one_of(st.integers(0, 300), st.integers(16_300, 16_500), st.integers(MAX_ENTRY_ID - 200, MAX_ENTRY_ID))
_LEDGER = st.sampled_from([3, 200, 1 << 40])
_STEP = st.tuples(
    st.sampled_from(["add", "add_many", "add_range", "remove_at_most"]),
    _LEDGER,
    st.lists(_ENTRY, min_size=1, max_size=8),
)


def _apply(acked: AckRangeSet, op: str, ledger: int, ids: list[int]) -> None:
    if op == "add":
        acked.add(ledger, ids[0])
    elif op == "add_many":
        acked.add_many(ledger, ids)
    elif op == "add_range":
        acked.add_range(ledger, min(ids), max(ids))
    else:
        acked.remove_at_most(ledger, ids[0])


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=10),
    limit=st.sampled_from([None, 0, 1, 3, 10]),
    counted=st.booleans(),
)
def test_a_record_sized_from_runs_has_the_bytes_of_the_record_built_from_arrays(steps, limit, counted) -> None:
    """``counted``: the set's run counts given (``run_count``): a ledger below 16,384 entries
    is sized from them and what its entries 0 .. 128 decide, kept while they stay."""
    acked = AckRangeSet()
    ranges, encoder = PositionInfoRanges(), PositionInfoRanges()
    for op, ledger, ids in steps:
        _apply(acked, op, ledger, ids)
        runs = acked.range_runs(limit)
        ledgers, lowers, uppers, dropped = acked.to_range_arrays(limit)
        assert (runs.dropped, runs.count) == (dropped, len(ledgers))
        assert runs.entries == int((uppers - lowers).sum())
        batch = [(Position(ledger, 7), np.array([5], dtype=np.int64))]
        state = PersistedCursorState(Position(ledger, 1), {"k": 2}, batch_deleted=batch)
        entry = PositionInfoEntry(state, ranges, runs, acked.ledger_size if counted else None)
        full = PersistedCursorState(
            Position(ledger, 1), {"k": 2}, RangeArrays(ledgers, lowers, ledgers.copy(), uppers), batch_deleted=batch
        )
        expected = encode_position_info(full, ranges_bytes=encoder.encode(full.ranges))
        assert expected == encode_position_info(full)
        if counted:  # sized through fits(), which reads the run counts: the limit below the size
            assert not entry.fits(len(expected) - 1)
        assert len(entry) == len(expected)
        if ids[-1] % 3 == 0:  # built now and then: the set changes after, the entry does not
            assert bytes(entry) == expected
    acked._check()


class _CountingRanges(PositionInfoRanges):
    """Counts the records sized from runs."""

    __slots__ = ("sized",)

    def __init__(self) -> None:
        super().__init__()
        self.sized = 0

    def size_runs(self, runs, run_count=None):  # type: ignore[no-untyped-def]
        self.sized += 1
        return super().size_runs(runs, run_count)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=10),
    limit=st.sampled_from([None, 0, 1, 3, 10]),
    slack=st.integers(-60, 60),
    counted=st.booleans(),
    words=st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), max_size=3),
    properties=st.sampled_from([{}, {"k": -1}]),
)
def test_the_bound_is_never_below_the_size_and_a_limit_it_reaches_is_checked_exactly(
    steps, limit, slack, counted, words, properties
) -> None:
    """On random range sets: ``bound() >= len()``; ``fits(n)`` is ``len() <= n`` for limits
    around the size and the bound, sizing the record (``size_runs``) exactly when the bound
    is above ``n`` and never when it is within it."""
    acked = AckRangeSet()
    ranges = _CountingRanges()
    for op, ledger, ids in steps:
        _apply(acked, op, ledger, ids)
        runs = acked.range_runs(limit)
        batch = [(Position(-1 - i, -1), np.array(w, dtype=np.int64)) for i, w in enumerate(words)]  # 10-byte ids
        state = PersistedCursorState(Position(-1, -1), properties, batch_deleted=batch)
        size = len(encode_position_info(_with_ranges(state, runs)))
        for cut in (size + slack, PositionInfoEntry(state, ranges, runs).bound() + slack):
            entry = PositionInfoEntry(state, ranges, runs, acked.ledger_size if counted else None)
            bound, before = entry.bound(), ranges.sized
            assert bound >= size
            assert entry.fits(cut) == (size <= cut)
            assert ranges.sized == before + (bound > cut)
            assert len(entry) == size


def _with_ranges(state: PersistedCursorState, runs) -> PersistedCursorState:  # type: ignore[no-untyped-def]
    ledgers, lowers, uppers = runs.arrays()
    arrays = RangeArrays(ledgers, lowers, ledgers.copy(), uppers)
    return PersistedCursorState(state.mark_delete, state.properties, arrays, batch_deleted=state.batch_deleted)


def test_the_bound_of_the_other_fields_is_their_size_at_their_largest() -> None:
    """No ranges, every id and word a ten-byte varint, no properties: the bound is the exact
    size (it takes each field at its largest, and no more: every body here below 128 bytes)."""
    acked = AckRangeSet()
    batch = [(Position(-1, -1), np.full(n, -1, dtype=np.int64)) for n in (1, 9)]
    state = PersistedCursorState(Position(-1, -1), {}, batch_deleted=batch)
    runs = acked.range_runs(None)
    entry = PositionInfoEntry(state, PositionInfoRanges(), runs)
    assert entry.bound() == len(encode_position_info(_with_ranges(state, runs))) == len(entry)
