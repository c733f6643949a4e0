"""pytest-benchmark twins of the benchmark scripts (``test_bench_*.py``), for saved, comparable runs.

Not part of ``make test`` (``testpaths = ["tests"]``). Run them with ``make bench-pytest``
(``BENCH_ARGS="--benchmark-save=NAME"`` to save, ``"--benchmark-compare"`` to compare with the
last saved run) or ``.venv/bin/python -m pytest benchmarks [--bench-entries N] [--bench-holes N]``.
The workloads come from the scripts beside this file (``bench_cursor.py``, ``bench_ranges.py``,
``bench_codecs.py``), so a script and its twin measure the same thing. Every benchmark records
its workload size in ``extra_info``, saved with the run.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mledger benchmarks")
    group.addoption("--bench-entries", type=int, default=200_000, metavar="N",
                    help="entries acked by the cursor and range set benchmarks (200,000)")
    group.addoption("--bench-holes", type=int, default=1_000_000, metavar="N",
                    help="ack holes in the cursor states the codec benchmarks encode (1,000,000)")


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("benchmark"):
        raise pytest.UsageError("benchmarks/ needs pytest-benchmark: pip install 'mledger[bench]' "
                                "(`make bench-pytest` installs it)")


@pytest.fixture(scope="session")
def bench_entries(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--bench-entries"))


@pytest.fixture(scope="session")
def bench_holes(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--bench-holes"))
