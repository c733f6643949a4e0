"""The delayed-delivery tracker against a naive model (a dict ``position -> deliver-at``), for
every operation the dispatcher and the replay use, with ``_check()`` after each step (issue 32:
the replay holds its delayed entries in the broker's tracker)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from mledger.broker import DelayedDeliveryTracker
from mledger.core import Position

position = st.builds(Position, st.integers(1, 3), st.integers(0, 12))
at = st.integers(0, 40)
operation = st.one_of(
    st.tuples(st.just("add"), position, at),
    st.tuples(st.just("add_many"), st.lists(st.tuples(position, at), max_size=8)),
    st.tuples(st.just("remove"), position),
    st.tuples(st.just("remove_at_most"), position),
    st.tuples(st.just("pop_due"), at, st.sampled_from([None, 1, 3])),
    st.tuples(st.just("pop_due_rows"), at),
    st.tuples(st.just("peek"), at),
)


def due(model: dict[Position, int], cutoff: int) -> list[tuple[int, Position]]:
    return sorted((t, p) for p, t in model.items() if t <= cutoff)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=40), st.booleans())
def test_the_tracker_holds_and_hands_out_what_a_dict_would(ops: list[tuple], strict: bool) -> None:
    tracker = DelayedDeliveryTracker(tick_time_ms=5, strict=strict)
    model: dict[Position, int] = {}
    for op in ops:
        kind = op[0]
        if kind == "add":
            tracker.add(op[1], op[2])
            model[op[1]] = op[2]
        elif kind == "add_many":
            items = dict(op[1])  # a position once per call, as the replay adds them
            rows = np.array([list(p) for p in items], np.int64).reshape(-1, 2)
            tracker.add_many(rows, np.array(list(items.values()), np.int64))
            model.update(items)
        elif kind == "remove":
            assert tracker.remove(op[1]) == (model.pop(op[1], None) is not None)
        elif kind == "remove_at_most":
            gone = [p for p in model if p <= op[1]]
            assert tracker.remove_at_most(op[1]) == len(gone)
            for p in gone:
                del model[p]
        else:
            cutoff = tracker.cutoff(op[1])
            expected = due(model, cutoff)
            if kind == "peek":
                assert tracker.peek_due(op[1]) == expected
                assert tracker.due_rows(op[1]).tolist() == [[t, *p] for t, p in expected]
            elif kind == "pop_due_rows":
                assert tracker.pop_due_rows(op[1]).tolist() == [[t, *p] for t, p in expected]
                for _, p in expected:
                    del model[p]
            else:
                limit = op[2]
                taken = expected if limit is None else expected[:limit]
                assert tracker.pop_due(op[1], limit) == [(p, None) for _, p in taken]
                for _, p in taken:
                    del model[p]
        tracker._check()
        assert len(tracker) == len(model) and all(p in tracker for p in model)
        assert tracker.positions() == [p for _, p in sorted((t, p) for p, t in model.items())]
        assert tracker.next_deliver_at() == (min(model.values()) if model else None)


def test_key_hashes_come_back_with_their_positions() -> None:
    tracker = DelayedDeliveryTracker()
    tracker.add(Position(1, 2), 10, key_hash=7)
    tracker.add(Position(1, 1), 10, key_hash=None)
    tracker.add(Position(1, 2), 10, key_hash=8)  # re-added at the same time: the hash follows
    assert tracker.pop_due(10) == [(Position(1, 1), None), (Position(1, 2), 8)]
