""":func:`build_report`: read the replay output, draw the charts, write the page and the PNGs."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..core import ManagedLedgerConfig
from ._data import ReportModel, load_model, recorded_limit
from ._figures import report_charts
from ._page import render_page

__all__ = ["DEFAULT_LIMIT", "Report", "build_report"]

DEFAULT_LIMIT = ManagedLedgerConfig().max_unacked_ranges_to_persist
"""``max_unacked_ranges_to_persist`` assumed when none is given and the output records none
(the ledger default)."""

Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: called before each step of :func:`build_report`."""


@dataclass(frozen=True)
class Report:
    """What :func:`build_report` wrote: the page, the PNG files by chart key, and the model."""

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
    progress: Progress | None = None,
) -> Report:
    """Write the report of the replay output ``out_dir`` into ``report_dir`` (default
    ``out_dir/report``, created); returns the paths.

    ``max_unacked_ranges_to_persist``: the limit to draw; ``None`` takes the one the replay
    recorded in ``out_dir/settings.json``, else :data:`DEFAULT_LIMIT`.
    ``top``: bars per subscription chart; ``table_rows``: rows per table; ``progress``: told
    about each step (reading, one per chart, writing). Raises
    :class:`~mledger.report.ReplayReportInputError` when ``out_dir`` is not a replay output,
    :class:`~mledger.core.MissingExtraError` without the ``report`` extra (pyarrow,
    matplotlib), ``ValueError`` for bad numbers, ``OSError`` when the report cannot be written.
    Blocking; not for concurrent calls writing the same ``report_dir``.
    """
    if top < 1 or table_rows < 1:
        raise ValueError(f"top and table_rows must be >= 1, got {top} and {table_rows}")
    from ._render import render_chart  # matplotlib: only when a report is drawn (MissingExtraError)

    source = os.fspath(out_dir)
    limit = max_unacked_ranges_to_persist
    if limit is None:
        recorded = recorded_limit(source)
        limit = DEFAULT_LIMIT if recorded is None else recorded
    tell = progress or (lambda step, done, total: None)
    tell("reading the replay output", 0, 1)
    model = load_model(source, limit)
    from ..replay import REPORT_DIR  # pyarrow: load_model has checked it is there

    target = Path(report_dir) if report_dir is not None else Path(source) / REPORT_DIR
    charts = report_charts(model, top)
    target.mkdir(parents=True, exist_ok=True)
    rendered = []
    paths: dict[str, Path] = {}
    for i, chart in enumerate(charts):
        tell(f"drawing {chart.key}", i, len(charts))
        drawn = render_chart(chart)
        path = target / f"{chart.key}.png"
        path.write_bytes(drawn.png)
        paths[chart.key] = path
        rendered.append((chart, drawn))
    tell("writing index.html", len(charts), len(charts))
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    html_path = target / "index.html"
    html_path.write_text(render_page(model, rendered, when, table_rows), encoding="utf-8")
    return Report(html_path, paths, model)
