"""Unit and property tests of :class:`mledger.core._ranges.AckRangeSet` (Pulsar's OpenLongPairRangeSet).

REFERENCE.md 2.7 is the specification: per-ledger bitsets, open-closed ranges that never cross a
ledger, ``size()`` = number of ranges, inclusive ``cardinality``, closed ``rangeContaining``,
``toRanges(max)`` with the HEAD cardinality cut-off and ``BitSet.toLongArray()`` words.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mledger import AckRangeSet, InvalidPositionError, Position
from mledger.core._ranges import (
    MAX_ENTRY_ID,
    ack_set_to_words,
    bitmap_to_words,
    words_to_ack_set,
    words_to_entries,
)

P = Position


def make(pairs: Iterable[tuple[int, int]]) -> AckRangeSet:
    s = AckRangeSet()
    for ledger_id, entry_id in pairs:
        s.add(ledger_id, entry_id)
    return s


def runs(entries: Iterable[int]) -> list[tuple[int, int]]:
    """Closed runs ``[(first, last), ...]`` of a set of ints (the naive model)."""
    out: list[tuple[int, int]] = []
    for e in sorted(set(entries)):
        if out and out[-1][1] == e - 1:
            out[-1] = (out[-1][0], e)
        else:
            out.append((e, e))
    return out


def model_ranges(model: set[tuple[int, int]]) -> list[tuple[Position, Position]]:
    by_ledger: dict[int, set[int]] = {}
    for ledger_id, entry_id in model:
        by_ledger.setdefault(ledger_id, set()).add(entry_id)
    return [
        (P(ledger_id, first - 1), P(ledger_id, last))
        for ledger_id in sorted(by_ledger)
        for first, last in runs(by_ledger[ledger_id])
    ]


def words_of(entries: Iterable[int]) -> list[int]:
    """``java.util.BitSet.toLongArray()`` computed the slow way, as signed 64-bit words."""
    value = 0
    for e in entries:
        value |= 1 << e
    words: list[int] = []
    while value:
        word = value & ((1 << 64) - 1)
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
        value >>= 64
    return words


# -- adding ---------------------------------------------------------------------------------


def test_add_reports_whether_the_position_was_new() -> None:
    s = AckRangeSet()
    assert s.add(3, 5) is True
    assert s.add(3, 5) is False
    assert s.cardinality() == 1
    assert s.contains(3, 5) and P(3, 5) in s
    assert not s.contains(3, 4) and not s.contains(4, 5)


def test_add_range_is_inclusive_and_counts_only_new_entries() -> None:
    s = AckRangeSet()
    assert s.add_range(1, 5, 7) == 3
    assert s.add_range(1, 6, 9) == 2
    assert s.add_range(1, 9, 8) == 0  # empty range
    assert str(s) == "[(1:4..1:9]]"
    assert s.cardinality() == 5


def test_add_many_adds_one_ledger_in_bulk() -> None:
    s = AckRangeSet()
    assert s.add_many(2, [5, 1, 3, 3, 4]) == 4
    assert s.add_many(2, np.array([1, 2], dtype=np.int64)) == 1
    assert s.add_many(2, []) == 0
    assert str(s) == "[(2:0..2:5]]"
    assert s.ledger_ids() == [2]
    s._check()


def test_add_many_of_nothing_new_does_not_keep_an_empty_ledger() -> None:
    s = AckRangeSet()
    assert s.add_many(7, []) == 0
    assert s.ledger_ids() == []
    s._check()


@pytest.mark.parametrize("entry_id", [-1, MAX_ENTRY_ID + 1])
def test_entry_ids_outside_the_bitmap_range_are_refused(entry_id: int) -> None:
    s = AckRangeSet()
    with pytest.raises(InvalidPositionError):
        s.add(1, entry_id)
    with pytest.raises(InvalidPositionError):
        s.add_many(1, [0, entry_id])
    with pytest.raises(InvalidPositionError):
        s.add_range(1, min(entry_id, 0), max(entry_id, 0))
    assert s.is_empty() and s.cardinality() == 0
    s._check()


def test_add_open_closed_within_one_ledger_adds_lower_plus_one_to_upper() -> None:
    s = AckRangeSet()
    s.add_open_closed(4, -1, 4, 2)
    s.add_open_closed(4, 5, 4, 7)
    s.add_open_closed(4, 9, 4, 9)  # empty (a, a]
    assert str(s) == "[(4:-1..4:2],(4:5..4:7]]"
    assert s.cardinality() == 5


def test_add_open_closed_across_ledgers_never_invents_the_lower_ledger() -> None:
    # Pulsar: (2:10..4:10] sets nothing in ledger 2 (no bitset there) and [4:0..4:10].
    s = AckRangeSet()
    s.add_open_closed(2, 10, 4, 10)
    assert str(s) == "[(4:-1..4:10]]"
    assert s.ledger_ids() == [4]


def test_add_open_closed_across_ledgers_fills_lower_ledger_up_to_its_highest_acked_entry() -> None:
    s = make([(2, 20), (2, 30)])
    s.add_open_closed(2, 10, 4, 3)
    # Ledger 2 filled 11..30 (its highest acked bit), ledger 3 untouched, ledger 4 gets 0..3.
    assert str(s) == "[(2:10..2:30],(4:-1..4:3]]"
    assert s.ledger_ids() == [2, 4]


def test_add_open_closed_across_ledgers_leaves_lower_ledger_whose_acks_are_all_below() -> None:
    s = make([(2, 5)])
    s.add_open_closed(2, 10, 3, 0)
    assert str(s) == "[(2:4..2:5],(3:-1..3:0]]"


# -- removing -------------------------------------------------------------------------------


def test_remove_at_most_drops_everything_up_to_the_position_and_empty_ledgers() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 9)
    s.add_range(2, 0, 9)
    s.add_range(3, 5, 6)
    assert s.remove_at_most(2, 4) == 15
    assert str(s) == "[(2:4..2:9],(3:4..3:6]]"
    assert s.ledger_ids() == [2, 3]
    assert s.remove_at_most(2, 9) == 5
    assert s.ledger_ids() == [3]
    assert s.remove_at_most(3, -1) == 0  # L:-1 removes nothing of ledger L
    assert s.remove_at_most(0, 100) == 0
    assert s.cardinality() == 2
    s._check()


def test_remove_after_drops_everything_beyond_the_position() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 9)
    s.add_range(2, 0, 9)
    assert s.remove_after(1, 4) == 15
    assert str(s) == "[(1:-1..1:4]]"
    assert s.remove_after(1, -1) == 5
    assert s.is_empty()
    s._check()


def test_remove_and_clear() -> None:
    s = make([(1, 1), (1, 2)])
    assert s.remove(1, 1) is True
    assert s.remove(1, 1) is False
    assert s.remove(9, 9) is False
    assert str(s) == "[(1:1..1:2]]"
    assert s.remove(1, 2) is True
    assert s.ledger_ids() == []
    s.add_range(5, 0, 100)
    s.clear()
    assert s.is_empty() and not s and s.cardinality() == 0 and s.size() == 0
    s._check()


# -- queries --------------------------------------------------------------------------------


def test_size_is_the_number_of_ranges_not_entries() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 999)
    assert s.size() == 1 and len(s) == 1
    s.add(1, 2000)
    s.add(2, 0)
    assert s.size() == 3
    s.add_range(1, 1000, 1999)  # joins the two runs of ledger 1
    assert s.size() == 2
    s.remove(1, 500)
    assert s.size() == 3
    s._check()


def test_runs_crossing_roaring_container_boundaries_are_one_range() -> None:
    s = AckRangeSet()
    s.add_range(1, 65530, 65540)
    s.add_range(1, 131_000, 131_100)
    assert s.size() == 2
    assert s.range_containing(1, 65536) == (P(1, 65530), P(1, 65540))
    assert s.next_unacked_entry(1, 65531) == 65541
    assert str(s) == "[(1:65529..1:65540],(1:130999..1:131100]]"


def test_cardinality_between_is_inclusive_on_both_ends() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 9)
    s.add_range(2, 0, 9)
    s.add_range(3, 0, 9)
    assert s.cardinality_between(P(1, 0), P(1, 9)) == 10
    assert s.cardinality_between(P(1, 5), P(1, 5)) == 1
    assert s.cardinality_between(P(1, 5), P(3, 2)) == 5 + 10 + 3
    assert s.cardinality_between(P(1, -1), P(2, -1)) == 10
    assert s.cardinality_between(P(0, 0), P(9, 0)) == 30
    assert s.cardinality_between(P(2, 5), P(2, 4)) == 0
    assert s.cardinality() == 30
    assert s.ledger_cardinality(2) == 10 and s.ledger_cardinality(7) == 0


def test_range_containing_returns_the_closed_run_or_none() -> None:
    s = AckRangeSet()
    s.add_range(3, 5, 7)
    s.add(3, 9)
    assert s.range_containing(3, 6) == (P(3, 5), P(3, 7))
    assert s.range_containing(3, 5) == (P(3, 5), P(3, 7))
    assert s.range_containing(3, 9) == (P(3, 9), P(3, 9))
    assert s.range_containing(3, 8) is None
    assert s.range_containing(4, 6) is None
    assert s.range_containing(3, -1) is None


def test_first_last_range_and_span_are_open_closed() -> None:
    s = AckRangeSet()
    assert s.first_range() is None and s.last_range() is None and s.span() is None
    s.add_range(2, 5, 75)
    s.add_range(2, 98, 105)
    s.add_range(4, 0, 3)
    assert s.first_range() == (P(2, 4), P(2, 75))
    assert s.last_range() == (P(4, -1), P(4, 3))
    assert s.span() == (P(2, 4), P(4, 3))


def test_next_acked_and_next_unacked_entry_within_a_ledger() -> None:
    s = AckRangeSet()
    s.add_range(1, 10, 200)
    s.add(1, 300)
    assert s.next_acked_entry(1, 0) == 10
    assert s.next_acked_entry(1, 150) == 150
    assert s.next_acked_entry(1, 201) == 300
    assert s.next_acked_entry(1, 301) is None
    assert s.next_acked_entry(2, 0) is None
    assert s.next_unacked_entry(1, 5) == 5
    assert s.next_unacked_entry(1, 10) == 201
    assert s.next_unacked_entry(1, 300) == 301
    assert s.next_unacked_entry(2, 7) == 7
    assert s.run_end(1, 50) == 200


def test_str_is_pulsars_form() -> None:
    s = AckRangeSet()
    assert str(s) == "[]"
    s.add_range(0, 6, 75)
    s.add_range(0, 98, 105)
    assert str(s) == "[(0:5..0:75],(0:97..0:105]]"
    assert list(s) == [(P(0, 5), P(0, 75)), (P(0, 97), P(0, 105))]
    assert s.ranges() == list(s)


def test_ranges_never_cross_ledgers() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 4)
    s.add_range(2, 0, 4)
    assert str(s) == "[(1:-1..1:4],(2:-1..2:4]]"
    assert s.size() == 2


# -- export ---------------------------------------------------------------------------------


def test_to_range_arrays_keeps_the_first_ranges_and_counts_the_dropped() -> None:
    s = AckRangeSet()
    for e in range(0, 20, 2):
        s.add(1, e)  # 10 ranges in ledger 1
    s.add_range(2, 0, 4)  # 1 range in ledger 2
    ledgers, lowers, uppers, dropped = s.to_range_arrays()
    assert dropped == 0 and len(ledgers) == 11
    ledgers, lowers, uppers, dropped = s.to_range_arrays(3)
    assert ledgers.tolist() == [1, 1, 1]
    assert lowers.tolist() == [-1, 1, 3]
    assert uppers.tolist() == [0, 2, 4]
    assert dropped == 8
    ledgers, lowers, uppers, dropped = s.to_range_arrays(10)
    assert ledgers.tolist() == [1] * 10 and dropped == 1
    ledgers, _, _, dropped = s.to_range_arrays(0)
    assert len(ledgers) == 0 and dropped == 11
    ledgers, _, _, dropped = s.to_range_arrays(-1)
    assert len(ledgers) == 11 and dropped == 0


def test_long_array_examples_of_reference_2_7() -> None:
    s = AckRangeSet()
    s.add_range(7, 0, 9)
    words, dropped = s.to_long_arrays()
    assert {k: v.tolist() for k, v in words.items()} == {7: [1023]} and dropped == 0
    s = make([(7, 1), (7, 3)])
    words, _ = s.to_long_arrays()
    assert {k: v.tolist() for k, v in words.items()} == {7: [10]}


def test_long_arrays_use_signed_words_and_drop_trailing_zero_words() -> None:
    entries = [0, 63, 64, 130, 200]
    s = AckRangeSet()
    s.add_many(1, entries)
    words, _ = s.to_long_arrays()
    assert words[1].tolist() == words_of(entries)
    assert words[1][0] < 0  # bit 63 set: the word is negative as a Java long
    s.add_range(2, 0, 999)
    words, _ = s.to_long_arrays()
    assert words[2].tolist() == words_of(range(1000))


def test_to_long_arrays_cuts_off_by_running_cardinality_after_adding_the_ledger() -> None:
    # HEAD PositionRangeSet: a ledger is kept while the sum of cardinalities *after* adding it
    # stays <= max; every later ledger is dropped, and its ranges are counted as dropped.
    s = AckRangeSet()
    for ledger_id in (1, 2, 3, 4):
        s.add_range(ledger_id, 0, 9)
    s.add(4, 20)
    words, dropped = s.to_long_arrays(20)
    assert sorted(words) == [1, 2] and dropped == 3
    words, dropped = s.to_long_arrays(19)
    assert sorted(words) == [1] and dropped == 4
    words, dropped = s.to_long_arrays(0)
    assert words == {} and dropped == 5
    words, dropped = s.to_long_arrays(None)
    assert sorted(words) == [1, 2, 3, 4] and dropped == 0


def test_from_long_arrays_round_trips() -> None:
    s = AckRangeSet()
    s.add_many(1, [0, 63, 64, 130, 200])
    s.add_range(2, 5, 4000)
    s.add(9, 0)
    words, _ = s.to_long_arrays()
    back = AckRangeSet.from_long_arrays(words)
    assert back == s
    assert str(back) == str(s)
    assert AckRangeSet.from_long_arrays([(5, np.array([10]))]) == make([(5, 1), (5, 3)])
    assert AckRangeSet.from_long_arrays({3: np.array([], dtype=np.int64)}).is_empty()


def test_word_helpers_agree_with_python_ints() -> None:
    for value in (0, 1, 10, 1 << 63, (1 << 64) - 1, (1 << 130) | 5):
        words = ack_set_to_words(value)
        assert words_to_ack_set(words) == value
        entries = [i for i in range(value.bit_length()) if value >> i & 1]
        assert words.tolist() == words_of(entries)
        assert words_to_entries(words).tolist() == entries
    with pytest.raises(ValueError):
        ack_set_to_words(-1)


def test_bitmap_to_words_long_runs_branch_matches_short_runs_branch() -> None:
    from pyroaring import BitMap

    long_runs = BitMap(range(0, 5000))
    long_runs.update(range(6000, 9000))
    assert bitmap_to_words(long_runs).tolist() == words_of(list(long_runs))
    short_runs = BitMap(range(0, 5000, 3))
    assert bitmap_to_words(short_runs).tolist() == words_of(list(short_runs))


def test_copy_is_independent_and_equality_compares_content() -> None:
    s = AckRangeSet()
    s.add_range(1, 0, 10)
    c = s.copy()
    assert c == s
    c.add(1, 20)
    assert c != s and s.cardinality() == 11 and c.cardinality() == 12
    s._check()
    c._check()


def test_docstring_example() -> None:
    s = AckRangeSet()
    s.add_range(3, 5, 7)
    s.add(3, 10)
    s.add(3, 9)
    assert (str(s), s.size(), s.cardinality()) == ("[(3:4..3:7],(3:8..3:10]]", 2, 5)


# -- property test against a Python set ----------------------------------------------------

LEDGERS = st.integers(min_value=0, max_value=3)
# Entry ids near 0 and around the 65536 roaring container boundary.
ENTRIES = st.one_of(st.integers(min_value=0, max_value=400), st.integers(min_value=65_400, max_value=65_700))


class AckRangeSetMachine(RuleBasedStateMachine):
    """The range set against a Python set of ``(ledger, entry)``; ``_check()`` after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.s = AckRangeSet()
        self.model: set[tuple[int, int]] = set()

    @rule(ledger=LEDGERS, entry=ENTRIES)
    def add(self, ledger: int, entry: int) -> None:
        assert self.s.add(ledger, entry) == ((ledger, entry) not in self.model)
        self.model.add((ledger, entry))

    @rule(ledger=LEDGERS, first=ENTRIES, length=st.integers(min_value=0, max_value=300))
    def add_range(self, ledger: int, first: int, length: int) -> None:
        last = first + length - 1
        new = {(ledger, e) for e in range(first, last + 1)} - self.model
        assert self.s.add_range(ledger, first, last) == len(new)
        self.model |= new

    @rule(ledger=LEDGERS, entries=st.lists(ENTRIES, max_size=80))
    def add_many(self, ledger: int, entries: list[int]) -> None:
        new = {(ledger, e) for e in entries} - self.model
        assert self.s.add_many(ledger, entries) == len(new)
        self.model |= new

    @rule(lower=LEDGERS, lower_entry=st.integers(min_value=-1, max_value=400), upper_ledger_delta=st.integers(0, 2),
          upper_entry=st.integers(min_value=-1, max_value=400))
    def add_open_closed(self, lower: int, lower_entry: int, upper_ledger_delta: int, upper_entry: int) -> None:
        upper = lower + upper_ledger_delta
        self.s.add_open_closed(lower, lower_entry, upper, upper_entry)
        if (lower, lower_entry) >= (upper, upper_entry):
            return
        if lower == upper:
            self.model |= {(lower, e) for e in range(lower_entry + 1, upper_entry + 1)}
            return
        top = max((e for (led, e) in self.model if led == lower), default=None)
        if top is not None and top > lower_entry:
            self.model |= {(lower, e) for e in range(lower_entry + 1, top + 1)}
        self.model |= {(upper, e) for e in range(0, upper_entry + 1)}

    @rule(ledger=LEDGERS, entry=st.integers(min_value=-1, max_value=66_000))
    def remove_at_most(self, ledger: int, entry: int) -> None:
        gone = {p for p in self.model if p <= (ledger, entry)}
        assert self.s.remove_at_most(ledger, entry) == len(gone)
        self.model -= gone

    @rule(ledger=LEDGERS, entry=st.integers(min_value=-1, max_value=66_000))
    def remove_after(self, ledger: int, entry: int) -> None:
        gone = {p for p in self.model if p > (ledger, entry)}
        assert self.s.remove_after(ledger, entry) == len(gone)
        self.model -= gone

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def remove_one(self, data: st.DataObject) -> None:
        ledger, entry = data.draw(st.sampled_from(sorted(self.model)))
        assert self.s.remove(ledger, entry)
        self.model.discard((ledger, entry))

    @rule(ledger=LEDGERS, entry=ENTRIES)
    def point_queries(self, ledger: int, entry: int) -> None:
        s, model = self.s, self.model
        assert s.contains(ledger, entry) == ((ledger, entry) in model)
        acked = sorted(e for (led, e) in model if led == ledger)
        assert s.next_acked_entry(ledger, entry) == next((e for e in acked if e >= entry), None)
        unacked = entry
        while (ledger, unacked) in model:
            unacked += 1
        assert s.next_unacked_entry(ledger, entry) == unacked
        containing = next(((lo, hi) for lo, hi in runs(acked) if lo <= entry <= hi), None)
        expected = None if containing is None else (P(ledger, containing[0]), P(ledger, containing[1]))
        assert s.range_containing(ledger, entry) == expected

    @rule(a=st.tuples(LEDGERS, st.integers(-1, 66_000)), b=st.tuples(LEDGERS, st.integers(-1, 66_000)))
    def cardinality_between(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        lo, hi = min(a, b), max(a, b)
        expected = sum(1 for p in self.model if lo <= p <= hi)
        assert self.s.cardinality_between(P(*lo), P(*hi)) == expected

    @rule(limit=st.integers(min_value=0, max_value=12))
    def exports(self, limit: int) -> None:
        s, model = self.s, self.model
        expected = model_ranges(model)
        ledgers, lowers, uppers, dropped = s.to_range_arrays(limit)
        got = [(P(led, lo), P(led, hi)) for led, lo, hi in zip(ledgers.tolist(), lowers.tolist(), uppers.tolist(), strict=True)]
        assert got == expected[:limit] and dropped == max(len(expected) - limit, 0)
        words, dropped = s.to_long_arrays(limit * 40)
        kept, running = [], 0
        for ledger in sorted({led for led, _ in model}):
            running += sum(1 for led, _ in model if led == ledger)
            if running > limit * 40:
                break
            kept.append(ledger)
        assert sorted(words) == kept
        for ledger in kept:
            assert words[ledger].tolist() == words_of(e for led, e in model if led == ledger)
        assert dropped == sum(1 for lo, _ in expected if lo.ledger_id not in kept)
        full, _ = s.to_long_arrays()
        assert AckRangeSet.from_long_arrays(full) == s
        for ledger in {led for led, _ in model}:  # the first runs, cached or from run bounds
            starts, ends = s.ledger_first_runs(ledger, limit + 1)
            expected_runs = runs(e for led, e in model if led == ledger)[: limit + 1]
            assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == expected_runs

    @invariant()
    def matches_model(self) -> None:
        s, model = self.s, self.model
        s._check()
        expected = model_ranges(model)
        assert list(s) == expected
        assert s.size() == len(expected)
        assert s.cardinality() == len(model)
        assert str(s) == "[" + ",".join(f"({lo}..{hi}]" for lo, hi in expected) + "]"
        assert s.first_range() == (expected[0] if expected else None)
        assert s.last_range() == (expected[-1] if expected else None)
        assert s.span() == ((expected[0][0], expected[-1][1]) if expected else None)
        for ledger in {led for led, _ in model}:
            starts, ends = s.ledger_runs(ledger)
            assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == runs(e for led, e in model if led == ledger)


AckRangeSetMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAckRangeSetAgainstSet = AckRangeSetMachine.TestCase


def test_runs_of_takes_both_branches() -> None:
    """``_runs_of`` vectorises short runs and walks long ones; both must give the same runs."""
    from pyroaring import BitMap

    from mledger.core._ranges import _runs_of

    short = BitMap(range(0, 1000, 2))  # 500 runs of 1: the vectorised branch
    long = BitMap(range(0, 1000))
    long.update(range(2000, 2500))  # 2 runs of >= 500: the run-by-run branch
    for bm in (short, long):
        starts, ends = _runs_of(bm)
        assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == runs(bm)


def test_runs_of_the_last_exported_large_ledger_are_kept_until_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the per-ledger cache limit, the last ledger exported keeps its runs (one such
    ledger at a time); a change to it is seen by the next export."""
    import mledger.core._ranges as ranges_module

    monkeypatch.setattr(ranges_module, "CACHED_RUNS_PER_LEDGER", 2)
    s = make([(1, 1), (1, 3), (1, 5), (2, 1), (2, 3), (2, 5)])
    s.to_range_arrays()
    s._check()  # one large ledger's runs cached at most, none stale
    s.add(2, 7)
    s.add(1, 2)
    assert [a.tolist() for a in s.ledger_first_runs(2, 4)] == [[1, 3, 5, 7], [1, 3, 5, 7]]
    ledgers, lowers, uppers, _ = s.to_range_arrays()
    assert list(zip(ledgers.tolist(), lowers.tolist(), uppers.tolist(), strict=True)) == [
        (1, 0, 3), (1, 4, 5), (2, 0, 1), (2, 2, 3), (2, 4, 5), (2, 6, 7)
    ]
    s._check()


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add_many", "add_many_bulk", "add_range", "remove", "remove_at_most", "record"]),
        st.integers(1, 3),
        st.lists(st.integers(0, 40), min_size=1, max_size=6),
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(ops=_OPS)
@example(ops=[("add", 1, [0]), ("remove", 1, [0])])  # the last entry of a counted ledger removed
@example(ops=[("add", 3, [0]), ("add", 3, [1]), ("record", 3, [2, 4]), ("add", 3, [2])])  # ledger 3 counted late
def test_weighed_extra_messages_follow_every_change(ops: list[tuple[str, int, list[int]]]) -> None:
    """The extra messages a weighed set keeps through adds, runs, mark-delete absorption and
    counts recorded or rewritten (ledger 3 has none at first) equal a count from scratch after
    every change."""
    from mledger.core import EntryMessages

    weights = EntryMessages()
    for ledger in (1, 2):
        weights.record(ledger, 0, [(e * 7) % 5 + 1 for e in range(48)])
    weights.record(3, 0, [1] * 48)  # single messages: no counts kept, until a rewrite gives one
    s = AckRangeSet()
    s.weigh(weights)
    for op, ledger, ids in ops:
        if op == "add":
            s.add(ledger, ids[0])
        elif op == "add_many":
            s.add_many(ledger, ids)
        elif op == "add_many_bulk":  # past SMALL_ADD: the vectorised path
            s.add_many(ledger, np.arange(min(ids), min(ids) + 40))
        elif op == "add_range":
            s.add_range(ledger, min(ids), max(ids))
        elif op == "remove":
            s.remove(ledger, ids[0])
        elif op == "record":
            weights.record(ledger, ids[0], [ids[-1] % 4 + 1])
        else:
            s.remove_at_most(ledger, ids[0])
        fresh = AckRangeSet()
        for lower, upper in s:
            fresh.add_open_closed(lower.ledger_id, lower.entry_id, upper.ledger_id, upper.entry_id)
        assert s.extra_messages(weights) == fresh.extra_messages(weights)
        s._check()


def test_cached_runs_follow_a_bulk_add_then_any_other_change() -> None:
    """A bulk add leaves a ledger's exported runs cached with the entries pending and its run
    count to be counted again; a change after it (here a mark-delete absorbing the first run)
    still drops those runs: the next export is the ledger's."""
    s = AckRangeSet()
    s.add_many(1, [1, 2, 5, 9, 10, 11])
    s.to_range_arrays()  # runs cached
    s.add_many(1, [3, 20])  # pending on the cached runs, run count unknown
    s.remove_at_most(1, 5)
    assert [a.tolist() for a in s.ledger_runs(1)] == [[9, 20], [11, 20]]
    assert s.size() == 2
    s._check()


_FIRST_RUNS_ENTRY = st.one_of(st.integers(0, 300), st.integers(MAX_ENTRY_ID - 200, MAX_ENTRY_ID))


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(_FIRST_RUNS_ENTRY, min_size=1, max_size=60), count=st.integers(1, 12))
def test_the_first_runs_of_a_ledger_not_exported_are_its_first_runs(entries, count) -> None:
    """``ledger_first_runs`` of a ledger whose runs are not cached (from its run bounds as
    bitmaps, the close tracker's boundary) are the first runs of its entries."""
    acked = AckRangeSet()
    acked.add_many(7, entries)
    starts, ends = acked.ledger_first_runs(7, count)
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == runs(entries)[:count]


def test_a_prefix_token_holds_until_a_ledger_up_to_it_changes() -> None:
    """``prefix_token(L)`` stays valid while no ledger up to ``L`` changes, whatever happens
    after ``L``; an add, a removal or a new ledger up to ``L`` ends it."""
    s = make([(1, 1), (1, 3), (3, 0), (5, 2)])
    token = s.prefix_token(3)
    s.add(5, 7)
    s.add_many(6, list(range(40)))
    assert s.prefix_unchanged(token)
    for change in (lambda: s.add(3, 9), lambda: s.remove(1, 3), lambda: s.add(2, 0), lambda: s.remove_at_most(1, 5)):
        token = s.prefix_token(3)
        change()
        assert not s.prefix_unchanged(token)
        s._check()
    assert not s.prefix_unchanged(())


def test_the_range_set_doctests_run() -> None:
    """The examples in ``mledger.core._ranges``' docstrings hold."""
    import doctest

    import mledger.core._ranges as ranges

    result = doctest.testmod(ranges)
    assert result.failed == 0 and result.attempted > 0
