"""Ack range set operations under pytest-benchmark: the workload and operations of
``bench_ranges.py`` (one benchmark per operation; ``setup`` untimed, a fresh argument a round)."""

from __future__ import annotations

from typing import Any

import pytest
from bench_ranges import OPERATIONS, AckWorkload, Operation, ack_workload

ROUNDS = 5


@pytest.fixture(scope="module")
def workload(bench_entries: int) -> AckWorkload:
    return ack_workload(bench_entries)


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.run.__name__ for op in OPERATIONS])
def test_range_set(benchmark: Any, workload: AckWorkload, op: Operation) -> None:
    result = benchmark.pedantic(op.run, setup=lambda: ((op.setup(workload),), {}), rounds=ROUNDS, warmup_rounds=1)
    assert result is not None
    benchmark.extra_info["acks"] = workload.size
    benchmark.extra_info["ranges"] = workload.filled.size()
    if op.per_item:
        benchmark.extra_info["per_second"] = round(workload.size / benchmark.stats.stats.median)
