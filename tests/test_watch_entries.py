"""The replay's entry index forgets the ledgers the cluster deleted (issue 35: a long watch's
memory): what it holds stays bounded however many batched entries pass, and every fact of an
entry of a ledger that exists (its index, batch size, deliver time) stays exact."""

from __future__ import annotations

import numpy as np

from mledger.replay._entries import EntryIndex

LEDGERS, PER_LEDGER, KEPT = 300, 40, 2


def _produce(forget: bool) -> tuple[EntryIndex, dict[tuple[int, int], tuple[int, int, int]], list[int]]:
    """Batched entries (sizes 2..9, every third one delayed) over ``LEDGERS`` ledgers; with
    ``forget``, each new ledger trims all but the last ``KEPT``, as a cluster with every cursor
    caught up does. Returns the index, the oracle of the entries that exist, and its size after
    each ledger."""
    index, oracle, sizes = EntryIndex(), {}, []
    rng = np.random.default_rng(7)
    for ledger in range(10, 10 + LEDGERS):
        batch = rng.integers(2, 10, PER_LEDGER).astype(np.int32)
        deliver = np.where(np.arange(PER_LEDGER) % 3 == 0, ledger * 1000 + np.arange(PER_LEDGER), -1)
        first = index.append(ledger, batch, deliver)
        for e in range(PER_LEDGER):
            oracle[(ledger, e)] = (first + e, int(batch[e]), int(deliver[e]))
        if forget:
            index.forget_ledgers_before(ledger - KEPT + 1)
            oracle = {k: v for k, v in oracle.items() if k[0] > ledger - KEPT}
        sizes.append(index.nbytes)
    return index, oracle, sizes


def test_forgetting_trimmed_ledgers_bounds_the_index_and_keeps_the_rest_exact() -> None:
    index, oracle, sizes = _produce(forget=True)
    assert max(sizes[LEDGERS // 2 :]) == max(sizes[: LEDGERS // 2])  # flat: the facts of KEPT ledgers
    assert index.ledgers == KEPT
    ledgers = np.array([k[0] for k in oracle], np.int64)
    entries = np.array([k[1] for k in oracle], np.int64)
    g = index.lookup(ledgers, entries)
    assert g.tolist() == [v[0] for v in oracle.values()]  # indexes unchanged by forgetting
    assert index.batch_size(g).tolist() == [v[1] for v in oracle.values()]
    assert index.deliver_at(g).tolist() == [v[2] for v in oracle.values()]
    gone = index.lookup(np.array([10, 10 + LEDGERS - KEPT - 1]), np.array([0, PER_LEDGER - 1]))
    assert gone.tolist() == [-1, -1]  # a deleted ledger's positions are unknown
    index.append(10 + LEDGERS - 1, np.array([3], np.int32), np.array([-1]))  # the last ledger goes on
    assert index.batch_size(index.lookup(np.array([10 + LEDGERS - 1]), np.array([PER_LEDGER])))[0] == 3


def test_without_forgetting_the_index_grows_with_every_batched_entry() -> None:
    _, _, sizes = _produce(forget=False)
    assert sizes[-1] >= 12 * LEDGERS * PER_LEDGER


def test_the_last_ledger_is_never_forgotten() -> None:
    index = EntryIndex()
    index.append(5, np.array([4, 1], np.int32), np.array([-1, -1]))
    assert index.forget_ledgers_before(99) == 0
    assert index.batch_size(index.lookup(np.array([5, 5]), np.array([0, 1]))).tolist() == [4, 1]
