"""Cursor hot paths under pytest-benchmark: the workloads of ``bench_cursor.py``.

Acks change the cursor, so each round gets a fresh cursor from an untimed setup
(``benchmark.pedantic``); the figure of interest is entries / round time, saved as
``extra_info["per_second"]`` (median round).
"""

from __future__ import annotations

from typing import Any

import pytest
from bench_cursor import absorb_workload, ack_each, ack_in_chunks, ack_workload

ROUNDS = 5


def _per_second(benchmark: Any, items: int) -> None:
    benchmark.extra_info["items"] = items
    benchmark.extra_info["per_second"] = round(items / benchmark.stats.stats.median)


def test_individual_acks_single_calls(benchmark: Any, bench_entries: int) -> None:
    cursor = benchmark.pedantic(ack_each, setup=lambda: (ack_workload(bench_entries, seed=1), {}), rounds=ROUNDS)
    assert cursor.number_of_entries_in_backlog() == 0
    _per_second(benchmark, bench_entries)


@pytest.mark.parametrize("chunk", [1_000, 100_000])
def test_individual_acks_iterable_form(benchmark: Any, bench_entries: int, chunk: int) -> None:
    cursor = benchmark.pedantic(lambda c, order: ack_in_chunks(c, order, chunk),
                                setup=lambda: (ack_workload(bench_entries, seed=2), {}), rounds=ROUNDS)
    assert cursor.number_of_entries_in_backlog() == 0
    _per_second(benchmark, bench_entries)


def test_mark_delete_absorbs_contiguous_acks(benchmark: Any, bench_entries: int) -> None:
    last = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        cursor, first, end = absorb_workload(bench_entries)
        last.append(end)
        return (cursor, first), {}

    def fill_the_hole(cursor: Any, first: Any) -> Any:
        cursor.delete(first)
        return cursor

    cursor = benchmark.pedantic(fill_the_hole, setup=setup, rounds=ROUNDS)
    assert cursor.mark_delete_position == last[-1]
    benchmark.extra_info["absorbed"] = bench_entries


def test_the_ack_workloads_ack_live_entries_only() -> None:
    """Every position a cursor workload acks is a live, unacknowledged entry: the cursor exists
    before the entries are written, so no ledger is trimmed as consumed under it (issue 27)."""
    cursor, order = ack_workload(120_000, seed=1)
    assert len(order) == 120_000 == cursor.number_of_entries_in_backlog()
    assert len(cursor.ledger.ledger_infos()) >= 3  # ledgers of 50,000 entries, all kept
    ack_each(cursor, order)
    assert cursor.messages_consumed_counter == 120_000 and cursor.number_of_entries_in_backlog() == 0
