"""Exporting runs of the ack range set: the three ways ``_runs_of`` finds runs (over the values,
over the gaps, run by run) against a plain walk, and the per-ledger cache of exported runs
staying true through every kind of change."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st
from pyroaring import BitMap

from mledger.core import AckRangeSet
from mledger.core._ranges import _runs_of


def naive_runs(values: list[int]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    ends: list[int] = []
    for v in sorted(set(values)):
        if ends and v == ends[-1] + 1:
            ends[-1] = v
        else:
            starts.append(v)
            ends.append(v)
    return starts, ends


# runs as (gap before, length): short and long gaps, short and long runs
runs_strategy = st.lists(st.tuples(st.sampled_from([1, 2, 3, 70, 500, 100_000]), st.sampled_from([1, 2, 65, 300, 5000])),
                         min_size=1, max_size=30)


@settings(max_examples=300)
@given(runs=runs_strategy, start=st.integers(0, 1000))
def test_runs_of_equals_a_plain_walk(runs: list[tuple[int, int]], start: int) -> None:
    values: list[int] = []
    at = start
    for gap, length in runs:
        at += gap
        values.extend(range(at, at + length))
        at += length
    starts, ends = _runs_of(BitMap(values))
    assert (starts.tolist(), ends.tolist()) == naive_runs(values)


ops = st.lists(st.tuples(st.sampled_from(["add", "range", "many", "remove", "at_most", "after", "export"]),
                         st.integers(0, 3), st.integers(0, 400), st.integers(0, 60)), max_size=60)


@settings(max_examples=200)
@given(ops=ops)
def test_cached_runs_follow_every_change(ops: list[tuple[str, int, int, int]]) -> None:
    acked = AckRangeSet()
    model: set[tuple[int, int]] = set()
    for op, ledger, entry, n in ops:
        if op == "add":
            acked.add(ledger, entry)
            model.add((ledger, entry))
        elif op == "range":
            acked.add_range(ledger, entry, entry + n)
            model |= {(ledger, e) for e in range(entry, entry + n + 1)}
        elif op == "many":
            picks = np.arange(entry, entry + 3 * n, 3)
            acked.add_many(ledger, picks)
            model |= {(ledger, int(e)) for e in picks}
        elif op == "remove":
            acked.remove(ledger, entry)
            model.discard((ledger, entry))
        elif op == "at_most":
            acked.remove_at_most(ledger, entry)
            model = {p for p in model if p > (ledger, entry)}
        elif op == "after":
            acked.remove_after(ledger, entry)
            model = {p for p in model if p <= (ledger, entry)}
        ledgers, lowers, uppers, _ = acked.to_range_arrays()
        got = list(zip(ledgers.tolist(), (lowers + 1).tolist(), uppers.tolist(), strict=True))
        want = [(lid, s, e) for lid in sorted({lid for lid, _ in model})
                for s, e in zip(*naive_runs([e for l2, e in model if l2 == lid]), strict=True)]
        assert got == want
        acked._check()  # the cached runs equal fresh ones
    copy = acked.copy()
    copy.add(0, 10_000)
    assert acked.to_range_arrays()[2].tolist() != copy.to_range_arrays()[2].tolist() or not acked


def test_exported_runs_are_read_only() -> None:
    acked = AckRangeSet()
    acked.add_range(3, 0, 9)
    starts, _ = acked.ledger_runs(3)
    assert not starts.flags.writeable
