"""A persist sized from a range set's runs (``AckRangeSet.range_runs``, ``PositionInfoRanges.size_runs``):
the record a replay's store keeps unbuilt has exactly the bytes of the record built from the
set's range arrays, through successive exports that reuse what did not change."""

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
        if op == "add":
            acked.add(ledger, ids[0])
        elif op == "add_many":
            acked.add_many(ledger, ids)
        elif op == "add_range":
            acked.add_range(ledger, min(ids), max(ids))
        else:
            acked.remove_at_most(ledger, ids[0])
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
        assert len(entry) == len(expected)
        if ids[-1] % 3 == 0:  # built now and then: the set changes after, the entry does not
            assert bytes(entry) == expected
    acked._check()

