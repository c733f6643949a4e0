"""Run one benchmark script against two source trees, alternating, and print medians and ratios.

Each tree is a directory holding ``mledger/`` (a checkout's ``src``, e.g. a ``git worktree`` of
main before a change); the script runs in a fresh interpreter with ``PYTHONPATH`` set to it, so
the same script measures both. Every output line of the form ``<label>: <number>...`` is a
figure; the first number after the colon is taken (commas allowed).

Run: .venv/bin/python benchmarks/compare_src.py --before /tmp/before/src --after src \\
        --repeats 3 benchmarks/bench_cursor.py --entries 1000000
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

_FIGURE = re.compile(r"^(?P<label>[^:]+):\s*(?P<value>-?[\d,]+(?:\.\d+)?)")


def run(src: Path, script: list[str]) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src.resolve()))
    out = subprocess.run([sys.executable, *script], env=env, capture_output=True, text=True, check=True).stdout
    figures = {}
    for line in out.splitlines():
        match = _FIGURE.match(line)
        if match:
            figures[match["label"].strip()] = float(match["value"].replace(",", ""))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="src directory of the baseline")
    parser.add_argument("--after", type=Path, required=True, help="src directory of the change")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="benchmark script and its arguments")
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"before": defaultdict(list), "after": defaultdict(list)}
    for i in range(args.repeats):
        for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
            for label, value in run(getattr(args, side), args.script).items():
                results[side][label].append(value)
            print(f"run {i + 1}/{args.repeats} {side}: done", file=sys.stderr)
    print(f"{'figure':<70} {'before':>14} {'after':>14} {'after/before':>12}")
    for label, values in results["before"].items():
        after = results["after"].get(label)
        if not after:
            continue
        b, a = statistics.median(values), statistics.median(after)
        print(f"{label[:70]:<70} {b:>14,.2f} {a:>14,.2f} {a / b if b else float('nan'):>12.3f}")
    print(f"medians of {args.repeats} runs per side, alternating; raw: {dict(results['before'])} / "
          f"{dict(results['after'])}", file=sys.stderr)


if __name__ == "__main__":
    main()
