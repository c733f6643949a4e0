"""``mledger report`` / ``python -m mledger.report``: options, the run, the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..core import MLedgerError
from ._build import DEFAULT_LIMIT, Progress, build_report

__all__ = ["add_report_arguments", "main", "run_report"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mledger report`` (for wiring into the ``mledger`` command)."""
    parser.add_argument("out", metavar="OUT_DIR", help="the replay output directory (cursors/, anomalies/)")
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="REPORT_DIR",
        help="where to write index.html and the PNG charts (default OUT_DIR/report)",
    )
    parser.add_argument(
        "--max-unacked-ranges-to-persist",
        dest="limit",
        type=int,
        default=None,
        metavar="N",
        help=f"the limit to draw (default: the one OUT_DIR/settings.json records, else {DEFAULT_LIMIT:,})",
    )
    parser.add_argument("--top", type=int, default=25, help="bars in the per-subscription charts (25)")
    parser.add_argument("--rows", type=int, default=50, help="rows per table (50)")


@contextmanager
def _progress() -> Iterator[Progress | None]:
    """A transient rich progress bar on stderr, or ``None`` when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

    with RichProgress(
        TextColumn("mledger report: {task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=None)

        def tell(step: str, done: int, total: int) -> None:
            bar.update(task, description=step, completed=done, total=total)

        yield tell


def run_report(args: argparse.Namespace) -> int:
    """Build the report for parsed ``args``; prints where it is. Exit 0, or 2 with one line on
    stderr for bad input."""
    try:
        with _progress() as progress:
            report = build_report(args.out, args.output, args.limit, args.top, args.rows, progress=progress)
    except (MLedgerError, ValueError, OSError) as e:
        print(f"mledger report: error: {e}", file=sys.stderr)
        return 2
    totals = report.model.totals
    print(
        f"wrote {report.html_path} ({totals['subscriptions']:,} subscriptions, "
        f"{totals['anomalies']:,} anomalies, {totals['over_limit']:,} over the limit) "
        f"and {len(report.charts)} PNG charts"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mledger.report OUT_DIR ...``."""
    parser = argparse.ArgumentParser(prog="mledger report", description="Render a replay output as an HTML report.")
    add_report_arguments(parser)
    return run_report(parser.parse_args(argv))
