"""``mledger report OUT_DIR``: the replay output as one HTML page an operator can open.

Theory of operation
-------------------
:func:`build_report` reads the Parquet ``cursors/`` and ``anomalies/`` datasets that
``mledger replay EVENTS OUT_DIR`` wrote (:mod:`._data`, pyarrow) into a :class:`ReportModel`,
turns it into charts described as plain data (:mod:`._figures` builds
:class:`~._chart.Chart` objects), draws each with matplotlib on the Agg backend
(:mod:`._render`, the one renderer), and writes ``REPORT_DIR/index.html`` (default
``OUT_DIR/report``): a self-contained page (:mod:`._page`: inline CSS, each chart as an inline
SVG element, no scripts, nothing fetched), plus each chart as ``REPORT_DIR/<key>.png``.

The page shows, per subscription, the ack-hole ranges and the persisted state size against
``max_unacked_ranges_to_persist``: the value the replay recorded in ``OUT_DIR/settings.json``
(an explicit value wins; outputs without that file fall back to the ledger default, 10,000),
how many chunks each state took, the anomalies by kind with examples, and the worst
topic-partitions (truncated ranges first, then the share of the limit, anomalies, backlog).

Needs the ``report`` extra (pyarrow, matplotlib, rich). Importing this package does not import
them: the ``mledger`` command line loads it to list its options. Blocking: reads and writes
files; O(subscriptions + anomaly rows), anomalies streamed.

    python -m mledger.report OUT_DIR [-o REPORT_DIR] [--max-unacked-ranges-to-persist N] [--top 25]

Adding a chart
--------------
1. In :mod:`._figures`, write a function ``(model: ReportModel, top: int) -> Chart | None``
   that describes the chart as data: ``key`` (the PNG's file stem), ``title``, ``subtitle``,
   ``categories`` (the rows, top to bottom), one or more :class:`~._chart.Panel` (one axes
   each, side by side, sharing the rows; each with its x axis label, :class:`~._chart.Unit`,
   value format and optional :class:`~._chart.Reference` limit line) holding one or more
   :class:`~._chart.Series` (one bar per row; several series make grouped bars, named in the
   legend), colors by their names in :data:`~._chart.PALETTE` with the meanings listed in
   :mod:`._figures`, a caption, and ``width`` (``"full"`` with a ``heading`` and ``lede``,
   or ``"half"``: two share a row). Return ``None`` when the output has nothing for it.
2. Add the function to :data:`._figures.FIGURES` at its place in the page.
3. If it needs data the model lacks, add it to :class:`ReportModel` in :mod:`._data` (read with
   pyarrow, streamed when it can be large).

The renderer, the page layout, the PNG files and the accessible label come for free. For
example, a sweep comparison (one log replayed under several settings) is one chart whose
categories are the settings and whose three panels show truncated ranges, persisted state
bytes (``unit=bytes_unit(...)``, ``value_format=format_bytes``) and chunks; or one panel with
a series per setting and the subscriptions as categories.
"""

from ._build import DEFAULT_LIMIT as DEFAULT_LIMIT, Report as Report, build_report as build_report
from ._command import add_report_arguments as add_report_arguments, main as main, run_report as run_report
from ._data import ReplayReportInputError as ReplayReportInputError, ReportModel as ReportModel

__all__ = [
    "DEFAULT_LIMIT",
    "Report",
    "ReplayReportInputError",
    "ReportModel",
    "add_report_arguments",
    "build_report",
    "main",
    "run_report",
]
