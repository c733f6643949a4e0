"""The capture poller's interval arithmetic against a Python ``set`` of positions (issue 35 item 1).

A poller holds a topic's entries as runs and a subscription's acks as the broker's
``individuallyDeletedMessages`` text, so that its memory does not grow with the topic; the acks
it records are computed on intervals. Each operation here must agree with the same operation
on the positions listed one by one.
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from mledger.core import Position
from mledger.replay._poll_answers import last_entry, ledger_entries
from mledger.replay._poll_ranges import KnownEntries, above, difference, normalised

positions = st.builds(Position, st.integers(0, 3), st.integers(-1, 12))
intervals = st.lists(st.tuples(positions, positions), max_size=6)
entries = st.lists(st.builds(Position, st.integers(0, 3), st.integers(0, 12)), max_size=40, unique=True)


def held(listed: list[Position]) -> set[Position]:
    """The positions a replay fed ``listed`` holds: every entry of a ledger up to its last one
    listed (those between are placeholders)."""
    tops: dict[int, int] = {}
    for ledger, entry in listed:
        tops[ledger] = max(entry, tops.get(ledger, -1))
    return {Position(ledger, e) for ledger, top in tops.items() for e in range(top + 1)}


def within(pairs: list[tuple[Position, Position]], universe: set[Position]) -> set[Position]:
    """The positions of ``universe`` in the open-closed intervals ``pairs``."""
    return {p for p in universe if any(low < p <= high for low, high in pairs)}


def known(listed: list[Position]) -> KnownEntries:
    seen = KnownEntries()
    for p in sorted(listed):
        seen.add(p)
    return seen


@given(intervals, intervals, entries)
def test_interval_operations_agree_with_sets(a: list, b: list, listed: list[Position]) -> None:
    universe = set(listed)
    na, nb = normalised(a), normalised(b)
    assert within(na, universe) == within(a, universe)
    assert all(low < high for low, high in na) and all(na[i][1] < na[i + 1][0] for i in range(len(na) - 1))
    assert within(difference(na, nb), universe) == within(a, universe) - within(b, universe)
    cut = Position(1, 5)
    assert within(above(na, cut), universe) == {p for p in within(a, universe) if p > cut}
    seen = known(listed)
    assert list(seen.held_within(na)) == sorted(within(a, held(listed)))
    assert seen.any_held_within(na) == bool(within(a, held(listed)))


def test_known_entries_cost_one_run_per_ledger_and_gap() -> None:
    seen = known([Position(3, e) for e in range(1000)] + [Position(4, e) for e in (0, 1, 5)])
    assert seen.runs == 3 and seen.first == Position(3, 0) and seen.last == Position(4, 5)
    # 4:2..4:4 are entries a reader never received (markers): the replay holds them as placeholders
    assert list(seen.held_within([(Position(3, 997), Position(4, 9))])) == [
        Position(3, 998), Position(3, 999), *(Position(4, e) for e in range(6))
    ]  # fmt: skip


def test_known_entries_forget_the_runs_of_deleted_ledgers_but_the_last() -> None:
    seen = known([Position(ledger, e) for ledger in (3, 4, 5) for e in range(10)])
    assert seen.forget_before(Position(4, 9)) == 2  # ledgers 3 and 4, wholly at or below the bound
    assert seen.runs == 1 and seen.first == Position(3, 0) and seen.last == Position(5, 9)  # first: ever added
    assert list(seen.held_within([(Position(3, 0), Position(5, 1))])) == [Position(5, 0), Position(5, 1)]
    assert seen.forget_before(Position(9, 0)) == 0 and seen.last == Position(5, 9)  # the last run stays


def test_ledger_entries_say_what_the_internal_stats_name() -> None:
    """A closed ledger's count, the last confirmed entry's ledger up to it (listed or, deleted
    by a trim after a rollover, not), the open ledger above it none; no count, not named."""
    ledgers = [{"ledgerId": 3, "entries": 10}, {"ledgerId": 5}, {"ledgerId": 7, "entries": 0}]
    assert ledger_entries({"lastConfirmedEntry": "7:4", "ledgers": ledgers}) == {3: 10, 7: 5}
    trimmed = {"lastConfirmedEntry": "10:19", "ledgers": [{"ledgerId": 11, "entries": 0}]}
    assert ledger_entries(trimmed) == {10: 20, 11: 0}
    assert ledger_entries({"lastConfirmedEntry": "x", "ledgers": ledgers}) == {}


def test_the_last_entry_of_a_topic_whose_ledger_just_rolled_over() -> None:
    """``lastConfirmedEntry`` ``L:-1`` names no entry: the last one is in the last earlier
    ledger holding entries (a closed ledger's count is final); an answer that cannot say is None."""
    ledgers = [{"ledgerId": 3, "entries": 10}, {"ledgerId": 5, "entries": 0}, {"ledgerId": 7, "entries": 0}]
    assert last_entry({"lastConfirmedEntry": "7:4", "ledgers": ledgers}) == Position(7, 4)
    assert last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers}) == Position(3, 9)
    assert last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers[2:]}) == Position(-1, -1)  # none yet
    assert last_entry({"lastConfirmedEntry": "7:-1", "ledgers": [{"ledgerId": 3}]}) is None
    assert last_entry({}) is None
