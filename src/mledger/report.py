"""``mledger report OUT_DIR``: the replay output as one HTML page an operator can open.

Theory of operation
-------------------
:func:`build_report` reads the Parquet ``cursors/`` and ``anomalies/`` datasets that
``mledger replay EVENTS OUT_DIR`` wrote (:mod:`mledger._report.data`), draws four bar charts
as PNG with a built-in pure-Python rasteriser (:mod:`mledger._report.png`, no plotting package),
and writes ``REPORT_DIR/index.html`` (default ``OUT_DIR/report``): a self-contained page with
inline CSS and the charts as ``data:`` URIs, plus each chart as ``REPORT_DIR/<name>.png``.

The page shows, per subscription, the ack-hole ranges and the persisted state size against
``max_unacked_ranges_to_persist``: the value the replay recorded in ``OUT_DIR/settings.json``
(an explicit value wins; outputs without that file fall back to the ledger default, 10,000),
how many chunks each state took, the anomalies by kind with examples, and the worst
topic-partitions (truncated ranges first, then the share of the limit, anomalies, backlog).

Needs pyarrow (the ``spark`` extra) to read Parquet; nothing else beyond the standard library.
Blocking: reads and writes files; O(subscriptions + anomaly rows), anomalies streamed.

    python -m mledger.report OUT_DIR [-o REPORT_DIR] [--max-unacked-ranges-to-persist N] [--top 25]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ._report.charts import render_bar_chart
from ._report.data import ReportModel, load_model, recorded_limit
from ._report.figures import report_figures
from ._report.page import render_page
from .config import ManagedLedgerConfig
from .errors import MLedgerError

__all__ = ["DEFAULT_LIMIT", "Report", "add_report_arguments", "build_report", "main", "run_report"]

DEFAULT_LIMIT = ManagedLedgerConfig().max_unacked_ranges_to_persist
"""``max_unacked_ranges_to_persist`` assumed when none is given and the output records none
(the ledger default)."""


@dataclass(frozen=True)
class Report:
    """What :func:`build_report` wrote: the page, the PNG files by chart name, and the model."""

    html_path: Path
    charts: dict[str, Path]
    model: ReportModel


def build_report(
    out_dir: str | os.PathLike[str],
    report_dir: str | os.PathLike[str] | None = None,
    max_unacked_ranges_to_persist: int | None = None,
    top: int = 25,
    table_rows: int = 50,
    generated: datetime | None = None,
) -> Report:
    """Write the report of the replay output ``out_dir`` into ``report_dir`` (default
    ``out_dir/report``, created); returns the paths.

    ``max_unacked_ranges_to_persist``: the limit to draw; ``None`` takes the one the replay
    recorded in ``out_dir/settings.json``, else :data:`DEFAULT_LIMIT`.
    ``top``: bars per subscription chart; ``table_rows``: rows per table. Raises
    :class:`~mledger._report.data.ReplayReportInputError` when ``out_dir`` is not a replay output,
    :class:`~mledger.errors.MissingExtraError` without pyarrow, ``ValueError`` for bad numbers,
    ``OSError`` when the report cannot be written.
    """
    if top < 1 or table_rows < 1:
        raise ValueError(f"top and table_rows must be >= 1, got {top} and {table_rows}")
    source = os.fspath(out_dir)
    target = Path(report_dir) if report_dir is not None else Path(source) / "report"
    limit = max_unacked_ranges_to_persist
    if limit is None:
        recorded = recorded_limit(source)
        limit = DEFAULT_LIMIT if recorded is None else recorded
    model = load_model(source, limit)
    target.mkdir(parents=True, exist_ok=True)
    rendered = []
    charts: dict[str, Path] = {}
    for figure in report_figures(model, top):
        chart = render_bar_chart(figure.chart)
        path = target / f"{figure.key}.png"
        path.write_bytes(chart.png)
        charts[figure.key] = path
        rendered.append((figure, chart, path.name))
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    html_path = target / "index.html"
    html_path.write_text(render_page(model, rendered, when, table_rows), encoding="utf-8")
    return Report(html_path, charts, model)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mledger report`` (for wiring into the ``mledger`` command)."""
    parser.add_argument("out", metavar="OUT_DIR", help="the replay output directory (cursors/, anomalies/)")
    parser.add_argument("-o", "--output", default=None, metavar="REPORT_DIR",
                        help="where to write index.html and the PNG charts (default OUT_DIR/report)")
    parser.add_argument("--max-unacked-ranges-to-persist", dest="limit", type=int, default=None, metavar="N",
                        help="the limit to draw (default: the one OUT_DIR/settings.json records, "
                             f"else {DEFAULT_LIMIT:,})")
    parser.add_argument("--top", type=int, default=25, help="bars in the per-subscription charts (25)")
    parser.add_argument("--rows", type=int, default=50, help="rows per table (50)")


def run_report(args: argparse.Namespace) -> int:
    """Build the report for parsed ``args``; prints where it is. Exit 0, or 2 with one line on
    stderr for bad input."""
    try:
        report = build_report(args.out, args.output, args.limit, args.top, args.rows)
    except (MLedgerError, ValueError, OSError) as e:
        print(f"mledger report: error: {e}", file=sys.stderr)
        return 2
    totals = report.model.totals
    print(f"wrote {report.html_path} ({totals['subscriptions']:,} subscriptions, "
          f"{totals['anomalies']:,} anomalies, {totals['over_limit']:,} over the limit) "
          f"and {len(report.charts)} PNG charts")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mledger.report OUT_DIR ...``."""
    parser = argparse.ArgumentParser(prog="mledger report", description="Render a replay output as an HTML report.")
    add_report_arguments(parser)
    return run_report(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
