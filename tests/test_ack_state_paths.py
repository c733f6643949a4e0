"""The acknowledgement state's shortcuts leave what its general path leaves: a bulk plan's
vectorised checks (``AckState._check_rows``, past ``SCALAR_ROWS`` rows) and the range set's
bulk add (``AckRangeSet.add_sorted``) against the same plan checked and applied position by
position; a plan of one whole entry (through ``AckState.ack_entry``) against the same entry
named twice, position by position. Same state (messages counted included), same outcome, same
refusal."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings, strategies as st

from mledger import (
    InvalidPositionError,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MarkDeletingMarkedPositionError,
    Position,
)
from mledger.managed_ledger import AckOutcome, AckPlan, AckState, InitialPosition, _ack_state
from mledger.storage import MemoryStore

ENTRIES = 30
PER_LEDGER = 7
SIZE = 4


def _ledger(batch_level: bool) -> ManagedLedger:
    """Thirty entries over ledgers of seven (the last one open), every third a batch of three."""
    factory = ManagedLedgerFactory(MemoryStore())
    config = ManagedLedgerConfig(max_entries_per_ledger=PER_LEDGER, deletion_at_batch_index_level_enabled=batch_level)
    ml = factory.open("paths", config)
    ml.open_cursor("keep", InitialPosition.EARLIEST)  # holds the ledgers back from trimming
    ml.add_entries([b"x"] * ENTRIES)
    position = ml.first_position()
    for _ in range(ENTRIES):
        position = ml.next_valid_position(position)
        if position.entry_id % 3 == 0:
            ml.record_entry_messages(position, [3])
    return ml


def _positions(ml: ManagedLedger) -> list[Position]:
    out = [ml.next_valid_position(ml.first_position())]
    while len(out) < ENTRIES:
        out.append(ml.next_valid_position(out[-1]))
    return out


def _rows(ml: ManagedLedger, picks: list[int]) -> np.ndarray:
    """The entries picked, and past them rows no plan may name: beyond the last confirmed
    entry, past a closed ledger's end, entry -1, an entry id past 32 bits, a ledger that is
    not there."""
    positions = _positions(ml)
    closed, lac = positions[-3].ledger_id, ml.last_confirmed_entry  # the last closed ledger
    bad = [(lac.ledger_id, lac.entry_id + 2), (closed, PER_LEDGER), (closed, -1),
           (closed, (1 << 32) + 1), (lac.ledger_id + 50, 0), (1 << 40, 3)]  # fmt: skip
    table = [tuple(p) for p in positions] + bad
    return np.array([table[k] for k in picks], dtype=np.int64).reshape(-1, 2)


pick = st.integers(0, ENTRIES - 1)
bad_pick = st.integers(ENTRIES, ENTRIES + 5)
rare_bad = st.one_of(pick, pick, pick, pick, pick, pick, pick, pick, bad_pick)


@st.composite
def bulk(draw: st.DrawFn) -> list[int]:
    """A plan past ``SCALAR_ROWS`` rows: entries with repeats or without (then one bitmap per
    ledger may hold them all), and none, one or two rows no plan may name, anywhere."""
    unique = draw(st.booleans())
    picks = draw(st.lists(pick, min_size=_ack_state.SCALAR_ROWS + 1, max_size=ENTRIES if unique else 60, unique=unique))
    for bad in draw(st.lists(bad_pick, max_size=2)):
        picks.insert(draw(st.integers(0, len(picks))), bad)
    return picks


step = st.one_of(
    st.tuples(st.just("entries"), st.lists(pick, max_size=8)),
    st.tuples(st.just("entries"), bulk()),
    st.tuples(st.just("ack_set"), pick, st.integers(0, (1 << SIZE) - 1)),
    st.tuples(st.just("mark"), pick, st.sampled_from([None, 0b1100])),
    st.tuples(st.just("weigh")),
)


def _apply(state: AckState, ml: ManagedLedger, s: tuple[Any, ...]) -> None:
    positions = _positions(ml)
    if s[0] == "weigh":  # count the messages: from here on the bulk adds keep the count
        state.acked.extra_messages(ml.entry_messages)
        return
    if s[0] == "entries":
        plan = AckPlan.of(entries=_rows(ml, s[1]))
    elif s[0] == "ack_set":
        plan = AckPlan.of(ack_sets=[(positions[s[1]], s[2], SIZE)])
    else:
        plan = AckPlan.cumulative(positions[s[1]], ack_set=s[2])
    try:
        state.apply(plan)
    except (InvalidPositionError, MarkDeletingMarkedPositionError):  # refused: nothing changed
        pass


def _state_of(state: AckState, ml: ManagedLedger) -> tuple[object, ...]:
    return (
        state.mark_delete,
        str(state.acked),
        state.acked.extra_messages(ml.entry_messages),
        state.batch_states(),
        dict(state.batch_sizes),
        state.ignored_batch_states()[0],
    )


def _view(outcome: AckOutcome) -> dict[str, object]:
    return {
        "mark_delete": (outcome.mark_delete_before, outcome.mark_delete_after),
        "entries_acked": outcome.entries_acked,
        "deleted": outcome.deleted.tolist(),
        "batch_acked": outcome.batch_acked,
        "persist": outcome.persist,
    }


def _outcome_or_refusal(state: AckState, plan: AckPlan) -> dict[str, object] | str:
    try:
        return _view(state.apply(plan))
    except InvalidPositionError as exc:
        return str(exc)


def _two_states(history: list[tuple[Any, ...]], batch_level: bool) -> tuple[ManagedLedger, AckState, AckState]:
    ml = _ledger(batch_level)
    start = ml.previous_position(_positions(ml)[0])
    fast, general = AckState(ml, start), AckState(ml, start)
    for s in history:
        _apply(fast, ml, s)
        with mock.patch.object(_ack_state, "SCALAR_ROWS", 1 << 30):  # every plan position by position
            _apply(general, ml, s)
        fast._check()
    assert _state_of(fast, ml) == _state_of(general, ml)
    return ml, fast, general


@settings(max_examples=200, deadline=None)
@given(
    history=st.lists(step, max_size=10),
    picks=bulk(),
    batch_level=st.booleans(),
)
def test_a_bulk_plan_leaves_what_the_position_by_position_path_leaves(
    history: list[tuple[Any, ...]], picks: list[int], batch_level: bool
) -> None:
    """A plan past ``SCALAR_ROWS`` rows (the vectorised checks, one bitmap per ledger) and the
    same plan position by position leave the same state, return the same outcome and refuse
    with the same error (a refused plan goes position by position: the first bad row)."""
    ml, fast, general = _two_states(history, batch_level)
    plan = AckPlan.of(entries=_rows(ml, picks))
    got = _outcome_or_refusal(fast, plan)
    with mock.patch.object(_ack_state, "SCALAR_ROWS", 1 << 30):
        expected = _outcome_or_refusal(general, plan)
    fast._check()
    assert got == expected
    assert _state_of(fast, ml) == _state_of(general, ml)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(step, max_size=10), one=rare_bad, batch_level=st.booleans())
def test_a_one_entry_plan_leaves_what_the_position_by_position_path_leaves(
    history: list[tuple[Any, ...]], one: int, batch_level: bool
) -> None:
    """A plan of one whole entry (``ack_entry`` and an outcome from its flags) leaves the
    state the position-by-position path leaves for the entry named twice, with the same
    outcome but for the entry listed once, and the same refusal."""
    ml, fast, general = _two_states(history, batch_level)
    got = _outcome_or_refusal(fast, AckPlan.of(entries=_rows(ml, [one])))
    expected = _outcome_or_refusal(general, AckPlan.of(entries=_rows(ml, [one, one])))
    fast._check()
    if isinstance(expected, dict):
        expected["deleted"] = expected["deleted"][:1]  # type: ignore[index]
    assert got == expected
    assert _state_of(fast, ml) == _state_of(general, ml)
