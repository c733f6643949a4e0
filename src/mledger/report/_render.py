"""Draws a :class:`~._chart.Chart` with matplotlib (Agg): SVG for the page, PNG for the file.

One renderer for every chart: horizontal bars, one row per category (top to bottom), one
bar per series in each row, one axes per panel (sharing the rows), the value and note after
each bar, the x axis labelled in the panel's unit, a title, a subtitle and a legend in a
header band above the axes. The figure is a plain :class:`matplotlib.figure.Figure` on an Agg
canvas, never pyplot: no global figure registry, no GUI backend, nothing left open.

Sizes are in inches at 100 CSS pixels per inch: a full-width chart is 10.8 in (the page's
card is about 1,080 px wide), a half-width one 5.2 in. The PNG is written at 200 dpi (sharp
on high-density screens); the SVG draws text as paths (matplotlib's bundled DejaVu Sans), so
the page looks the same on every machine, and its element ids are prefixed with the chart's
key so several charts can share one HTML page.
"""

from __future__ import annotations

import io
import re
from html import escape

from ..core import MissingExtraError
from ._chart import PALETTE, Chart, Panel, RenderedChart

try:
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text
    from matplotlib.ticker import FuncFormatter, MaxNLocator
except ImportError as e:  # the report extra is not installed
    raise MissingExtraError("mledger report draws its charts with matplotlib: pip install 'mledger[report]'") from e

__all__ = ["draw_chart", "render_chart"]

WIDTHS = {"full": 10.8, "half": 5.2}
"""Figure width in inches per :attr:`Chart.width`."""
PNG_DPI = 200
LABEL_CHARS = 44
"""Longer category labels are shortened in the middle (the end names the subscription)."""

_FONT = "DejaVu Sans"
_TITLE_PT, _SUBTITLE_PT, _TEXT_PT, _VALUE_PT = 13.0, 10.0, 10.0, 9.0
_ROW_IN = 0.27  # one category with one series
_EXTRA_SERIES_IN = 0.16  # each further series in a row


def _shorten(text: str, limit: int = LABEL_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = limit - 3
    return text[: keep - keep // 2] + "..." + text[len(text) - keep // 2 :]


def _header_inches(chart: Chart) -> float:
    height = 0.16 + _TITLE_PT / 72 + 0.08
    if chart.subtitle:
        height += _SUBTITLE_PT / 72 + 0.08
    if _legend_items(chart):
        height += 0.32
    return height


def _legend_items(chart: Chart) -> list[tuple[str, str, bool]]:
    """(color, text, is_line) entries: the chart's colors, series names, reference lines."""
    items = [(PALETTE[i.color], i.text, False) for i in chart.legend]
    if not chart.legend:
        for panel in chart.panels:
            items += [(PALETTE[s.colors[0]], s.name, False) for s in panel.series if s.name and len(panel.series) > 1]
    for panel in chart.panels:
        ref = panel.reference
        if ref is not None and not chart.empty:
            off = _reference_off_scale(panel)
            items.append(
                (PALETTE["ink"], ref.label + (" (beyond every bar: not drawn to scale)" if off else ""), not off)
            )
    return items


def _reference_off_scale(panel: Panel) -> bool:
    top = max((v for s in panel.series for v in s.values), default=0.0)
    return panel.reference is not None and top > 0 and panel.reference.value > 4 * top


def _figure(chart: Chart) -> tuple[Figure, float]:
    rows = max(1, len(chart.categories))
    per_row = _ROW_IN + _EXTRA_SERIES_IN * (max(len(p.series) for p in chart.panels) - 1)
    header = _header_inches(chart)
    titled_panels = 0.3 if len(chart.panels) > 1 and any(p.title for p in chart.panels) else 0.0
    body = (1.2 if chart.empty else rows * per_row) + 0.75 + titled_panels  # + the x axis, its label
    height = header + body
    layout = ConstrainedLayoutEngine(rect=(0.0, 0.0, 1.0, 1.0 - header / height), h_pad=0.04, w_pad=0.06)
    fig = Figure(figsize=(WIDTHS[chart.width], height), facecolor=PALETTE["background"], layout=layout)
    FigureCanvasAgg(fig)
    return fig, header


def _draw_header(fig: Figure, chart: Chart, header: float) -> None:
    height = fig.get_figheight()
    x = 0.12 / fig.get_figwidth()
    y = 1.0 - 0.16 / height
    fig.text(
        x,
        y,
        chart.title,
        ha="left",
        va="top",
        fontsize=_TITLE_PT,
        fontweight="bold",
        color=PALETTE["ink"],
        family=_FONT,
    )
    y -= (_TITLE_PT / 72 + 0.08) / height
    if chart.subtitle:
        fig.text(x, y, chart.subtitle, ha="left", va="top", fontsize=_SUBTITLE_PT, color=PALETTE["muted"], family=_FONT)
        y -= (_SUBTITLE_PT / 72 + 0.08) / height
    items = _legend_items(chart)
    if items:
        handles = [
            Line2D([], [], color=c, linestyle="--", linewidth=1.4) if line else Patch(facecolor=c, edgecolor="none")
            for c, _, line in items
        ]
        fig.legend(
            handles,
            [t for _, t, _ in items],
            loc="upper left",
            bbox_to_anchor=(x, y + 0.02 / height),
            ncols=len(items),
            frameon=False,
            fontsize=_TEXT_PT - 0.5,
            handlelength=1.0,
            handleheight=0.9,
            handletextpad=0.4,
            columnspacing=1.2,
            borderaxespad=0.0,
            borderpad=0.0,
            prop={"family": _FONT, "size": _TEXT_PT - 0.5},
        )


def _style_axes(ax: Axes) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.spines["left"].set_color(PALETTE["axis"])
    ax.spines["bottom"].set_color(PALETTE["axis"])
    ax.tick_params(colors=PALETTE["ink"], labelsize=_TEXT_PT, length=3)
    ax.tick_params(axis="y", length=0, pad=6)
    ax.grid(axis="x", color=PALETTE["grid"], linewidth=0.8)
    ax.set_axisbelow(True)
    for label in (*ax.get_xticklabels(), *ax.get_yticklabels()):
        label.set_fontfamily(_FONT)


def _draw_panel(ax: Axes, chart: Chart, panel: Panel) -> list[Text]:
    """Bars, value labels, axis and limit line of one panel; returns the value labels, so the x
    range can be widened until every one fits."""
    rows = len(chart.categories)
    count = len(panel.series)
    height = 0.8 / count
    divisor = panel.unit.divisor
    labels: list[Text] = []
    top = 0.0
    for j, series in enumerate(panel.series):
        offsets = [i - 0.4 + height * (j + 0.5) for i in range(rows)]
        widths = [v / divisor for v in series.values]
        colors = [PALETTE[series.color(i)] for i in range(rows)]
        bars = ax.barh(offsets, widths, height=height * 0.86, color=colors, linewidth=0)
        texts = [
            panel.value_format(v) + (f"  {series.notes[i]}" if series.notes and series.notes[i] else "")
            for i, v in enumerate(series.values)
        ]
        made = ax.bar_label(
            bars,
            texts,
            padding=4,
            fontsize=_VALUE_PT,
            color=PALETTE["ink"],
            family=_FONT,
            zorder=4,
            bbox={"facecolor": PALETTE["background"], "edgecolor": "none", "pad": 0.8},
        )
        labels += made
        widest = max(widths, default=0.0)
        top = max(top, widest)
    ref = panel.reference
    scale_max = top
    if ref is not None and not _reference_off_scale(panel):
        scale_max = max(top, ref.value / divisor)
        ax.axvline(ref.value / divisor, color=PALETTE["ink"], linestyle="--", linewidth=1.4, zorder=3)
    ax.set_xlim(0, scale_max * 1.02 if scale_max > 0 else 1.0)
    ax.set_ylim(rows - 0.5, -0.5)  # first category on top
    ax.set_yticks(range(rows), [_shorten(c) for c in chart.categories])
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10], integer=divisor == 1.0 or None))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"))
    ax.set_xlabel(panel.axis_label, fontsize=_TEXT_PT, color=PALETTE["muted"], family=_FONT)
    if panel.title and len(chart.panels) > 1:
        ax.set_title(panel.title, loc="left", fontsize=_TEXT_PT, fontweight="bold", color=PALETTE["ink"], family=_FONT)
    _style_axes(ax)
    return labels


def _fit_labels(fig: Figure, ax: Axes, labels: list[Text]) -> None:
    """Widen the x range so each value label ends inside the axes (labels keep their size)."""
    for _ in range(3):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        box = ax.get_window_extent(renderer)
        left, right = ax.get_xlim()
        per_px = (right - left) / max(box.width, 1.0)
        needed = right
        for label in labels:
            extent = label.get_window_extent(renderer)
            needed = max(needed, left + (extent.x1 - box.x0 + 4) * per_px)
        if needed <= right * 1.001:
            return
        ax.set_xlim(left, needed)


def draw_chart(chart: Chart) -> Figure:
    """``chart`` as a matplotlib figure on an Agg canvas (for callers who want other formats)."""
    fig, header = _figure(chart)
    _draw_header(fig, chart, header)
    if chart.empty:
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            chart.empty_text,
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=_TEXT_PT + 1,
            color=PALETTE["muted"],
            family=_FONT,
        )
        return fig
    axes = fig.subplots(1, len(chart.panels), sharey=True, squeeze=False)[0]
    drawn = [(ax, _draw_panel(ax, chart, panel)) for ax, panel in zip(axes, chart.panels, strict=True)]
    for ax in axes[1:]:
        ax.tick_params(axis="y", labelleft=False)
    for ax, labels in drawn:
        _fit_labels(fig, ax, labels)
    return fig


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def _inline_svg(svg: str, key: str, label: str) -> str:
    """matplotlib's SVG document as an element for an HTML page: no prolog, doctype or
    metadata; ids prefixed with ``key``; sized by CSS; labelled for screen readers."""
    start = svg.index("<svg")
    svg = svg[start:]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = _ID.sub(lambda m: f'id="{key}-{m.group(1)}"', svg)
    svg = _REF.sub(lambda m: f"{m.group(1)}{key}-{m.group(2)}", svg)
    opening_end = svg.index(">")
    opening = svg[:opening_end]
    opening = re.sub(r'\s(width|height)="[^"]*"', "", opening)
    attributes = f' class="chart" role="img" aria-label="{escape(label)}" data-chart="{escape(key)}"'
    return opening + attributes + svg[opening_end:]


def render_chart(chart: Chart) -> RenderedChart:
    """Draw ``chart`` once and save it as SVG (for the page) and PNG (for the file)."""
    fig = draw_chart(chart)
    svg_out, png_out = io.StringIO(), io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": f"mledger-{chart.key}", "svg.fonttype": "path"}):
        fig.savefig(svg_out, format="svg", metadata={"Date": None})
    fig.savefig(png_out, format="png", dpi=PNG_DPI, metadata={"Software": None})
    width, height = fig.get_size_inches()
    return RenderedChart(
        chart.key,
        _inline_svg(svg_out.getvalue(), chart.key, chart.describe()),
        png_out.getvalue(),
        round(width * 100),
        round(height * 100),
    )
