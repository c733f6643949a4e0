"""The replay engine's bulk shortcuts against plain walks (issue 27 item 4): the forward walk
over a step's cancels applied alone, and lazy row selections. (The replay's delayed entries are
the broker's own ``DelayedDeliveryTracker`` since issue 32: there is no second queue to compare.)"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st
from test_replay_isolated_cancel import plain_walk, row

from mledger.replay import PartitionReplayer, SubscriptionSpec
from mledger.replay._columns import Rows
from mledger.replay._schema import KIND_CANCELLED


def rows_of(events: list[tuple[int, int, int, int, int]]) -> Rows:
    n = len(events)
    cols = np.array(events, dtype=np.int64).reshape(n, 5)
    return Rows(ts=np.arange(n), kind=cols[:, 0].astype(np.int8), seq=np.arange(n), sub=cols[:, 1].astype(np.int32),
                ledger=cols[:, 2], entry=cols[:, 3], bidx=cols[:, 4].astype(np.int32), bsize=np.ones(n, np.int32),
                deliver=np.full(n, -1), ack=np.zeros(n, np.int8), producer=np.full(n, -1, np.int32),
                seqid=np.zeros(n), problem=np.full(n, -1, np.int32))  # fmt: skip


@settings(max_examples=300)
@given(st.lists(row, min_size=1, max_size=40), st.data())
def test_the_walk_from_any_row_equals_a_plain_walk_of_the_rest(events: list, data: st.DataObject) -> None:
    replayer = PartitionReplayer("t", 0, declared=[SubscriptionSpec("declared-later", type="SHARED")])
    for name in ("a", "b", "declared-later"):
        replayer._subs.code(name)
    replayer._created.add(0)
    rows = rows_of(events)
    cancels = np.flatnonzero(rows.kind == KIND_CANCELLED)
    if cancels.size == 0:
        return
    barriers = replayer._barriers(rows, cancels)
    s = data.draw(st.integers(0, len(rows) - 1))
    expected = plain_walk(replayer, rows.take(slice(s, None)))
    assert replayer._next_isolated(barriers, s) == (expected + s if expected >= 0 else -1)


def test_a_lazy_selection_reads_its_source_once_and_takes_assigned_columns() -> None:
    rows = rows_of([(0, -1, 1, k, -1) for k in range(6)])
    even = rows.take(rows.entry % 2 == 0)
    tail = even.take(slice(1, None))
    assert len(even) == 3 and len(tail) == 2
    assert tail.entry.tolist() == [2, 4] and even.entry.tolist() == [0, 2, 4]
    even.assign(sub=np.array([7, 8, 9], np.int32))
    assert even.take([2]).sub.tolist() == [9] and rows.sub.tolist() == [-1] * 6
    assert Rows.concat([even, tail]).entry.tolist() == [0, 2, 4, 2, 4]
