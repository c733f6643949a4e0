"""Which cancel of a step must be applied alone (``PartitionReplayer._isolated_cancel``,
vectorised) against a plain walk over the rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from mledger.replay import PartitionReplayer, SubscriptionSpec
from mledger.replay._columns import Rows
from mledger.replay._schema import KIND_ACKED, KIND_CANCELLED, KIND_PRODUCED

# (kind, subscription code, ledger, entry, batch index)
row = st.tuples(st.sampled_from([KIND_PRODUCED, KIND_ACKED, KIND_CANCELLED]), st.integers(-1, 2),
                st.integers(1, 2), st.integers(0, 4), st.integers(-1, 2))


def plain_walk(replayer: PartitionReplayer, rows: Rows) -> int:
    for i in range(len(rows)):
        if rows.kind[i] != KIND_CANCELLED:
            continue
        if rows.bidx[i] >= 0:
            return i
        code = int(rows.sub[i])
        if code >= 0 and code not in replayer._created and replayer._subs.names[code] in replayer._declared:
            return i
        for j in range(i):
            if (rows.kind[j] != KIND_PRODUCED and rows.bidx[j] >= 0
                    and (rows.ledger[j], rows.entry[j]) == (rows.ledger[i], rows.entry[i])):
                return i
    return -1


@settings(max_examples=400)
@given(st.lists(row, max_size=40))
def test_isolated_cancel_equals_a_plain_walk(events: list[tuple[int, int, int, int, int]]) -> None:
    replayer = PartitionReplayer("t", 0, declared=[SubscriptionSpec("declared-later", type="SHARED")])
    for name in ("a", "b", "declared-later"):
        replayer._subs.code(name)  # codes 0, 1, 2; "a" created, "declared-later" declared, not created
    replayer._created.add(0)
    n = len(events)
    cols = np.array(events, dtype=np.int64).reshape(n, 5)
    rows = Rows(ts=np.arange(n), kind=cols[:, 0].astype(np.int8), seq=np.arange(n), sub=cols[:, 1].astype(np.int32),
                ledger=cols[:, 2], entry=cols[:, 3], bidx=cols[:, 4].astype(np.int32), bsize=np.ones(n, np.int32),
                deliver=np.full(n, -1), ack=np.zeros(n, np.int8), producer=np.full(n, -1, np.int32),
                seqid=np.zeros(n), problem=np.full(n, -1, np.int32))
    assert replayer._isolated_cancel(rows) == plain_walk(replayer, rows)
