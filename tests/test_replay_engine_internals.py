"""The replay engine's bulk shortcuts against plain walks (issue 27 item 4): the forward walk
over a step's cancels applied alone, lazy row selections, and integer columns read from their
Arrow buffers. (The replay's delayed entries are the broker's own ``DelayedDeliveryTracker``
since issue 32: there is no second queue to compare.)"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings, strategies as st
from test_replay_isolated_cancel import plain_walk, row

from mledger.replay import PartitionReplayer, SubscriptionSpec
from mledger.replay._columns import Rows, int_values
from mledger.replay._engine import _BatchRuns
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


def _selector(data: st.DataObject, n: int) -> object:
    """A slice (any step), a boolean mask or an index array (repeats, any order, negatives) of ``n`` rows."""
    kind = data.draw(st.sampled_from(["slice", "mask", "index"]))
    if kind == "slice":
        bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
        return slice(data.draw(bound), data.draw(bound), data.draw(st.sampled_from([None, 1, 2, 3, -1, -2])))
    if kind == "mask":
        return np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    if n == 0:
        return np.array([], np.int64)
    return np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=2 * n)), np.int64)


class _Eager:
    """One selection of the model: its parent, the index it took, and the columns it holds."""

    def __init__(self, parent: _Eager | None, index: object, held: dict[str, np.ndarray]) -> None:
        self.parent, self.index, self.held = parent, index, held

    def peek(self, name: str) -> np.ndarray:
        """The column as the selection would read it now, holding nothing new."""
        if name in self.held:
            return self.held[name]
        assert self.parent is not None
        return self.parent.peek(name)[self.index]

    def read(self, name: str) -> np.ndarray:
        """The column, then held here and by every selection up the chain it was read through."""
        if name not in self.held:
            assert self.parent is not None
            self.held[name] = self.parent.read(name)[self.index]
        return self.held[name]


@settings(max_examples=200)
@given(st.integers(0, 30), st.data())
def test_a_chain_of_lazy_selections_reads_what_selecting_eagerly_would(n: int, data: st.DataObject) -> None:
    """Lazily gathered columns equal selecting eagerly step by step, with columns assigned
    anywhere along the chain before or after the selections below were taken: a selection that
    has not read a column reads it from its source (which then holds it too), so a column
    assigned to a selection reaches the selections taken from it that have not read it."""
    root = rows_of([(0, -1, 1, k, -1) for k in range(n)])
    chain = [root]
    model = [_Eager(None, None, {"entry": root.entry.copy(), "sub": root.sub.copy()})]
    for _ in range(data.draw(st.integers(1, 10))):
        at = data.draw(st.integers(0, len(chain) - 1))
        rows = chain[at]
        action = data.draw(st.sampled_from(["take", "take", "assign", "read"]))
        name = data.draw(st.sampled_from(["entry", "sub"]))
        if action == "assign":
            values = np.array(data.draw(st.lists(st.integers(0, 99), min_size=len(rows), max_size=len(rows))), np.int32)
            rows.assign(**{name: values})
            model[at].held[name] = values
        elif action == "read":
            assert getattr(rows, name).tolist() == model[at].read(name).tolist()
        else:
            index = _selector(data, len(rows))
            chain.append(rows.take(index))
            model.append(_Eager(model[at], index, {}))
    for rows, eager in reversed(list(zip(chain, model, strict=True))):  # the deepest first
        assert len(rows) == len(eager.peek("entry"))
        for name in ("entry", "sub"):
            assert getattr(rows, name).tolist() == eager.read(name).tolist()


@settings(max_examples=200)
@given(
    st.sampled_from([pa.int8(), pa.int32(), pa.int64()]),
    st.lists(st.one_of(st.none(), st.integers(-128, 127)), min_size=1, max_size=200),
    st.data(),
)
def test_an_integer_column_with_nulls_reads_as_arrow_fills_it_however_the_batch_is_sliced(
    kind: pa.DataType, values: list[int | None], data: st.DataObject
) -> None:
    """``int_values`` reads a column's buffers as they are (an offset into shared buffers, whatever
    a null's slot holds): the values and the present mask are Arrow's own fill_null and is_valid."""
    start = data.draw(st.integers(0, len(values) - 1))
    column = pa.array(values, type=kind).slice(start, data.draw(st.integers(0, len(values) - start)))
    got, present = int_values(column)
    expected = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False))
    assert got.dtype == expected.dtype
    assert got.tolist() == expected.tolist()
    assert present.tolist() == column.is_valid().to_pylist()


def per_row_entries(
    rows: list[int], g: list[int], bidx: list[int], size: list[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """A call's batch-index acks grouped row by row (what ``_BatchRuns.entries`` answers from
    runs): the first row of each entry every index of which is acked, then the first row, the
    ack set and the batch size of the others, by entry."""
    acked: dict[int, int] = {}
    first: dict[int, tuple[int, int]] = {}
    for r, e, b, n in zip(rows, g, bidx, size, strict=True):
        acked[e] = acked.get(e, 0) | (1 << b)
        first.setdefault(e, (r, n))
    complete, partial, ack_sets, sizes = [], [], [], []
    for e in sorted(acked):
        (r, n), bits = first[e], acked[e]
        if bits == (1 << n) - 1:
            complete.append(r)
        else:
            partial.append(r)
            ack_sets.append(((1 << n) - 1) & ~bits)
            sizes.append(n)
    return complete, partial, ack_sets, sizes


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 69)), min_size=1, max_size=40),
    st.sampled_from([4, 70]),  # batch sizes within one int64, and beyond
    st.data(),
)
def test_a_calls_batch_index_acks_read_as_runs_equal_them_grouped_row_by_row(
    acks: list[tuple[int, int]], largest: int, data: st.DataObject
) -> None:
    """A step's batch-index acks cut once into runs of one entry (``_BatchRuns``): any call's
    bounds give the complete and partial entries, ack sets and sizes that grouping its rows one
    by one gives, for batches within one int64 and beyond."""
    g = [e for e, _ in acks]
    size = [largest if e % 2 else 3 for e in g]
    bidx = [b % n for (_, b), n in zip(acks, size, strict=True)]
    rows = sorted(data.draw(st.sets(st.integers(0, 200), min_size=len(g), max_size=len(g))))
    runs = _BatchRuns(np.array(rows), np.array(g), np.array(bidx, np.int32), np.array(size, np.int32))
    bounds = sorted(data.draw(st.sets(st.integers(1, len(g) - 1), max_size=4))) if len(g) > 1 else []
    for i, j in zip([0, *bounds], [*bounds, len(g)], strict=True):  # the calls of a step, in order
        assert runs.entries(i, j) == per_row_entries(rows[i:j], g[i:j], bidx[i:j], size[i:j])


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"]))), max_size=30),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=3),
)
def test_names_encoded_once_get_the_codes_of_each_kind_encoded_apart(
    rows: list[tuple[bool, str | None]], known: list[str]
) -> None:
    """A batch's names dictionary-encoded once give subscriptions and producers the codes that
    encoding each kind's rows apart gives (new names in the order they first appear)."""
    produced = np.array([p for p, _ in rows], bool)
    names = pa.array([n for _, n in rows], pa.string())
    replayer = PartitionReplayer("t", 0)
    apart = PartitionReplayer("t", 0)
    for name in known:  # codes given before the batch
        for r in (replayer, apart):
            r._subs.code(name)
            r._producers.code(name[::-1])
    sub, producer = replayer._encode_apart(names, produced)
    null = pa.scalar(None, pa.string())
    mask = pa.array(produced, pa.bool_())
    assert sub.tolist() == apart._subs.encode(pc.if_else(mask, null, names)).tolist()
    assert producer.tolist() == apart._producers.encode(pc.if_else(mask, names, null)).tolist()
    assert (replayer._subs.names, replayer._producers.names) == (apart._subs.names, apart._producers.names)
