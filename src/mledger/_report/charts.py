"""Horizontal bar charts as PNG, drawn on :class:`~mledger._report.png.Canvas`.

One chart kind serves the whole report: labelled horizontal bars, an x axis with "nice" ticks,
value labels, an optional legend and an optional dashed reference line (a limit). When the
limit is far beyond every bar (more than 4x the largest), the axis follows the data and the
limit is named in a note instead, so the bars stay comparable. Layout is in CSS pixels and
drawn at ``scale`` device pixels per CSS pixel (2: sharp on high-density screens; the page
shows the image at ``css_width``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .png import Canvas, Color, hex_color

__all__ = ["PALETTE", "Bar", "BarChart", "RenderedChart", "nice_ticks", "render_bar_chart"]

PALETTE: dict[str, Color] = {
    name: hex_color(value)
    for name, value in {
        "ink": "#111827", "muted": "#6b7280", "grid": "#e5e7eb", "axis": "#9ca3af", "background": "#ffffff",
        "blue": "#3b82f6", "amber": "#f59e0b", "red": "#ef4444", "purple": "#8b5cf6", "teal": "#14b8a6",
        "slate": "#64748b", "indigo": "#6366f1",
    }.items()
}


@dataclass(frozen=True)
class Bar:
    """One bar: its label, value, color and an optional note printed after the value."""

    label: str
    value: float
    color: Color
    note: str = ""


@dataclass(frozen=True)
class BarChart:
    """What to draw. ``reference`` is ``(value, label)`` for a dashed vertical limit line."""

    title: str
    subtitle: str
    bars: Sequence[Bar]
    value_format: Callable[[float], str] = lambda v: f"{v:,.0f}"
    reference: tuple[float, str] | None = None
    legend: Sequence[tuple[Color, str]] = field(default_factory=tuple)
    empty_text: str = "Nothing to show"
    css_width: int = 960
    axis_unit: tuple[float, str] | None = None
    """``(divisor, name)``: axis ticks are nice numbers of this unit (e.g. ``(1024, "KiB")``)."""


@dataclass(frozen=True)
class RenderedChart:
    """A chart's PNG bytes and its size in CSS pixels."""

    png: bytes
    css_width: int
    css_height: int


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Ticks 0, s, 2s, ... up to at least ``maximum`` with s in {1, 2, 5} x 10^k."""
    if maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    top = math.ceil(maximum / step - 1e-9) * step
    return [i * step for i in range(int(round(top / step)) + 1)]


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 3)] + "..."


def render_bar_chart(chart: BarChart, scale: int = 2) -> RenderedChart:
    """Draw ``chart``; O(bars + pixels)."""
    s = scale
    ink, muted, grid, axis = PALETTE["ink"], PALETTE["muted"], PALETTE["grid"], PALETTE["axis"]
    title_dot, text_dot = 2 * s, (3 * s) // 2  # glyph pixel sizes in device pixels
    pad, row_h, bar_h = 20 * s, 26 * s, 16 * s
    text_h = Canvas.text_height(text_dot)
    width = chart.css_width * s

    labels = [_shorten(b.label, 44) for b in chart.bars]
    label_w = min(int(width * 0.42), max((Canvas.text_width(t, text_dot) for t in labels), default=0))
    while labels and max(Canvas.text_width(t, text_dot) for t in labels) > label_w:
        labels = [_shorten(t, len(t) - 1) for t in labels]
    values = [b.value for b in chart.bars]
    top_value = max(values, default=0.0)

    reference = chart.reference
    reference_off_scale = reference is not None and top_value > 0 and reference[0] > 4 * top_value
    scale_max = top_value if (reference is None or reference_off_scale) else max(top_value, reference[0])
    unit, unit_name = chart.axis_unit or (1.0, "")
    ticks = [t * unit for t in nice_ticks((scale_max * 1.02 if scale_max else 1.0) / unit)]
    axis_max = ticks[-1]

    def tick_label(value: float) -> str:
        if not unit_name:
            return chart.value_format(value)
        number = value / unit
        return f"{number:,.{0 if number == int(number) else 1}f} {unit_name}"

    notes = [f"{chart.value_format(b.value)}{'  ' + b.note if b.note else ''}" for b in chart.bars]
    value_w = max((Canvas.text_width(t, text_dot) for t in notes), default=0) + 12 * s
    plot_x0 = pad + label_w + 14 * s
    plot_x1 = width - pad - min(value_w, int(width * 0.25))

    y = pad
    header = Canvas.text_height(title_dot) + 8 * s
    header += text_h + 6 * s if chart.subtitle else 0
    header += (text_h + 10 * s) if chart.legend else 0
    ref_band = (text_h + 8 * s) if reference is not None else 0
    rows_h = max(1, len(chart.bars)) * row_h
    height = pad + header + ref_band + rows_h + 8 * s + text_h + pad
    height += -height % s  # a whole number of CSS pixels
    canvas = Canvas(width, height, PALETTE["background"])

    canvas.text(pad, y, chart.title, ink, title_dot, bold=True)
    y += Canvas.text_height(title_dot) + 8 * s
    if chart.subtitle:
        canvas.text(pad, y, chart.subtitle, muted, text_dot)
        y += text_h + 6 * s
    if chart.legend:
        x = pad
        for color, text in chart.legend:
            canvas.fill_rect(x, y + s, 12 * s, 12 * s, color)
            x += 12 * s + 6 * s
            x += canvas.text(x, y, text, muted, text_dot) + 18 * s
        y += text_h + 10 * s

    if reference is not None:
        ref_value, ref_label = reference
        if reference_off_scale:
            share = 100 * top_value / ref_value if ref_value else 0
            note = f"{ref_label} = {chart.value_format(ref_value)} (off scale; highest bar {share:.1f}% of it) >"
            canvas.text(max(plot_x0, plot_x1 - canvas.text_width(note, text_dot)), y, note, PALETTE["red"], text_dot)
        else:
            note = f"{ref_label} = {chart.value_format(ref_value)}"
            rx = plot_x0 + int((plot_x1 - plot_x0) * ref_value / axis_max)
            note_w = canvas.text_width(note, text_dot)
            tx = min(max(plot_x0, rx - note_w // 2), width - pad - note_w)
            canvas.text(tx, y, note, PALETTE["red"], text_dot)
        y += ref_band

    plot_y0, plot_y1 = y, y + rows_h
    for tick in ticks:  # gridlines first, bars over them
        tx = plot_x0 + int((plot_x1 - plot_x0) * tick / axis_max)
        canvas.vline(tx, plot_y0, plot_y1, grid, s)
        label = tick_label(tick)
        canvas.text(tx - canvas.text_width(label, text_dot) // 2, plot_y1 + 8 * s, label, muted, text_dot)
    canvas.vline(plot_x0, plot_y0, plot_y1, axis, s)

    if not chart.bars:
        canvas.text(plot_x0 + 12 * s, plot_y0 + (row_h - text_h) // 2, chart.empty_text, muted, text_dot)
    placed = []
    for i, (bar, label) in enumerate(zip(chart.bars, labels, strict=True)):
        row_y = plot_y0 + i * row_h
        label_x = plot_x0 - 14 * s - canvas.text_width(label, text_dot)
        canvas.text(label_x, row_y + (row_h - text_h) // 2 + s, label, ink, text_dot)
        bar_w = int((plot_x1 - plot_x0) * min(bar.value, axis_max) / axis_max)
        if bar.value > 0:
            bar_w = max(bar_w, 2 * s)
        canvas.fill_rect(plot_x0 + s, row_y + (row_h - bar_h) // 2, bar_w, bar_h, bar.color)
        placed.append((row_y, bar_w))

    if reference is not None and not reference_off_scale:  # over the bars, under the value labels
        rx = plot_x0 + int((plot_x1 - plot_x0) * reference[0] / axis_max)
        canvas.vline(rx, plot_y0 - 4 * s, plot_y1, PALETTE["red"], 2 * s, dash=5 * s)

    for (row_y, bar_w), note in zip(placed, notes, strict=True):
        note_w = canvas.text_width(note, text_dot)
        ny = row_y + (row_h - text_h) // 2 + s
        nx = plot_x0 + s + bar_w + 6 * s
        if nx + note_w > width - pad // 2 and bar_w > note_w + 12 * s:  # no room right of it: inside
            canvas.text(plot_x0 + bar_w - note_w - 4 * s, ny, note, PALETTE["background"], text_dot)
        else:
            canvas.fill_rect(nx - 3 * s, ny - s, note_w + 6 * s, text_h, PALETTE["background"])
            canvas.text(nx, ny, note, ink, text_dot)

    return RenderedChart(canvas.to_png(), chart.css_width, height // s)
