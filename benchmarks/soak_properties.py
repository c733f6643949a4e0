"""Run the suite's Hypothesis properties at many more examples than the test run draws.

The test run draws 10 to 200 random examples per property (not derandomized), so each CI run
samples another corner; a defect in a rare corner can wait many runs for its draw (the
restart figures' recovery property under 3.0 and 4.0 did: see the example pinned on it). Run
this before a stop, or after a change to the ack seam or the restart figures:

    .venv/bin/python benchmarks/soak_properties.py                       # the default set, 2,000 examples each
    .venv/bin/python benchmarks/soak_properties.py --examples 500 \\
        test_restart_figures:test_incremental_figures_equal_a_real_recovery_after_every_step

Each property runs with its own strategies and settings, ``max_examples`` raised and no
example database; a property parametrized by pytest runs once per parameter set. Prints one
line per run (``ok`` or ``FAIL`` with Hypothesis's falsifying example) and exits 1 if any
failed. Pin what it finds as an ``@example`` of the property.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from hypothesis import settings

TESTS = Path(__file__).resolve().parent.parent / "tests"

DEFAULT_PROPERTIES = [
    "test_restart_figures:test_incremental_figures_equal_a_real_recovery_after_every_step",
    "test_restart_figures:test_the_close_tracker_follows_single_acks_as_a_fresh_count_does",
    "test_restart_figures:test_the_batch_tally_kept_as_running_totals_equals_a_fresh_count",
    "test_restart_figures:test_throttled_whole_entry_acks_told_by_counts_leave_every_figure_a_snapshot_leaves",
    "test_ack_seam:test_the_single_entry_method_is_the_one_entry_plan",
    "test_ack_seam:test_a_bulk_plan_leaves_what_the_position_by_position_path_leaves",
    "test_ack_seam:test_a_one_entry_plan_leaves_what_the_position_by_position_path_leaves",
    "test_ack_seam:test_the_ignored_ack_sets_are_kept_as_each_change_goes",
    "test_ack_seam:test_a_tally_of_the_ignored_acks_following_their_journal_equals_a_fresh_count",
]


def parameter_sets(test: Any) -> list[dict[str, Any]]:
    """The keyword arguments of each pytest parameter set of ``test`` (one empty set if none)."""
    runs: list[dict[str, Any]] = [{}]
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
        values = [v if len(names) > 1 else (v,) for v in mark.args[1]]
        runs = [{**run, **dict(zip(names, v, strict=True))} for run in runs for v in values]
    return runs


def soak(spec: str, examples: int) -> bool:
    """Run one ``module:test`` property at ``examples`` examples per parameter set; whether all passed."""
    module_name, _, test_name = spec.partition(":")
    test = getattr(importlib.import_module(module_name), test_name)
    test._hypothesis_internal_use_settings = settings(
        test._hypothesis_internal_use_settings, max_examples=examples, database=None
    )
    passed = True
    for kwargs in parameter_sets(test):
        started = time.process_time()
        try:
            test(**kwargs)
        except Exception as exc:  # Hypothesis re-raises the falsifying example's failure
            passed = False
            # Hypothesis attaches the falsifying example as the exception's notes (PEP 678)
            detail = "".join(traceback.format_exception(exc))
            print(f"FAIL {spec} {kwargs}: {exc!r}\n{detail}", flush=True)
        else:
            print(f"ok   {spec} {kwargs} ({time.process_time() - started:.1f} CPU-s)", flush=True)
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", nargs="*", default=DEFAULT_PROPERTIES, help="module:test (of tests/)")
    parser.add_argument("--examples", type=int, default=2000, help="examples per property and parameter set")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(TESTS))
    logging.disable(logging.WARNING)  # the cursors' persistence-limit warnings, one per example
    warnings.simplefilter("ignore")
    results = [soak(spec, args.examples) for spec in args.properties]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
