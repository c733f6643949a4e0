"""What a chart shows, as plain data: categories, bars, colors, units, a limit line, a legend.

The report's charts are all horizontal bar charts: one row per category (a subscription, a
chunk count, an anomaly kind, a replay setting), one bar per :class:`Series` in each row, and
one or more :class:`Panel` side by side sharing the rows (small multiples: one panel per
measure, each with its own axis and unit). :mod:`._figures` builds these from the report's
model; :mod:`._render` is the one renderer that draws any of them with matplotlib. Nothing
here imports matplotlib.

Colors are names in :data:`PALETTE`; each keeps one meaning across the report (see
:mod:`._figures`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COUNT",
    "PALETTE",
    "Chart",
    "LegendItem",
    "Panel",
    "Reference",
    "RenderedChart",
    "Series",
    "Unit",
    "bytes_unit",
    "format_bytes",
    "format_count",
]

PALETTE: dict[str, str] = {
    "ink": "#111827",
    "muted": "#6b7280",
    "grid": "#e5e7eb",
    "axis": "#9ca3af",
    "background": "#ffffff",
    "blue": "#3b82f6",
    "amber": "#f59e0b",
    "red": "#ef4444",
    "purple": "#8b5cf6",
    "teal": "#14b8a6",
    "slate": "#64748b",
    "indigo": "#6366f1",
}
"""Color name -> ``#rrggbb``; the page's CSS uses the same values."""


def format_count(value: float) -> str:
    """``12,345`` (fractions only below 10)."""
    return f"{value:,.1f}" if value != int(value) and abs(value) < 10 else f"{value:,.0f}"


def format_bytes(value: float) -> str:
    """Bytes in B / KiB / MiB."""
    if value < 1024:
        return f"{value:,.0f} B"
    if value < 1024 * 1024:
        return f"{value / 1024:,.1f} KiB"
    return f"{value / (1024 * 1024):,.1f} MiB"


@dataclass(frozen=True)
class Unit:
    """The unit of an axis: values are divided by ``divisor`` and the axis label names ``name``."""

    divisor: float = 1.0
    name: str = ""


COUNT = Unit()
"""Plain counts."""


def bytes_unit(largest: float) -> Unit:
    """The axis unit for byte values up to ``largest``: B, KiB or MiB."""
    if largest >= 1024 * 1024:
        return Unit(1024.0 * 1024, "MiB")
    return Unit(1024.0, "KiB") if largest >= 1024 else Unit(1.0, "B")


@dataclass(frozen=True)
class Series:
    """One bar per category. ``colors`` holds one palette name for every bar, or one per bar
    (the color then says something about that bar, e.g. over the limit). ``notes`` (optional,
    one per bar) are printed after the bar's value. ``name`` is the legend entry when a panel
    has several series (e.g. one per replay setting)."""

    values: tuple[float, ...]
    colors: tuple[str, ...]
    name: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.colors) not in (1, len(self.values)):
            raise ValueError(f"series {self.name!r}: {len(self.colors)} colors for {len(self.values)} bars")
        if self.notes and len(self.notes) != len(self.values):
            raise ValueError(f"series {self.name!r}: {len(self.notes)} notes for {len(self.values)} bars")
        unknown = set(self.colors) - PALETTE.keys()
        if unknown:
            raise ValueError(f"series {self.name!r}: colors not in the palette: {sorted(unknown)}")

    def color(self, i: int) -> str:
        """The palette name of bar ``i``."""
        return self.colors[0] if len(self.colors) == 1 else self.colors[i]


@dataclass(frozen=True)
class Reference:
    """A dashed vertical line at ``value`` (a limit), named ``label`` in the legend. When it is
    more than 4x beyond every bar the axis follows the data and the legend says the line is off
    the scale, so the bars stay comparable."""

    value: float
    label: str


@dataclass(frozen=True)
class LegendItem:
    """A legend entry: a palette color and what it means."""

    color: str
    text: str


@dataclass(frozen=True)
class Panel:
    """One axes of a chart: its series (bars), the x axis label and unit, an optional limit."""

    series: tuple[Series, ...]
    axis_label: str
    value_format: Callable[[float], str] = format_count
    """Formats each bar's value label (in the data's own unit, e.g. bytes)."""
    unit: Unit = COUNT
    reference: Reference | None = None
    title: str = ""
    """Shown above the panel when a chart has several."""


@dataclass(frozen=True)
class Chart:
    """One figure of the report: drawn by :func:`._render.render_chart`, saved as
    ``<key>.png``, inlined in the page as SVG.

    ``categories`` label the rows, top to bottom; every series of every panel has one value per
    category. ``legend`` explains colors; a panel's reference line and, without explicit
    items, the series names are added to it. ``width``: ``"full"`` charts get a card of their
    own under ``heading`` and ``lede``; consecutive ``"half"`` charts share a row. ``notes``:
    paragraphs the page lists under the chart (how to read it), not drawn in the image.
    """

    key: str
    title: str
    subtitle: str
    categories: tuple[str, ...]
    panels: tuple[Panel, ...]
    caption: str = ""
    legend: tuple[LegendItem, ...] = ()
    empty_text: str = "Nothing to show"
    width: Literal["full", "half"] = "full"
    heading: str = ""
    lede: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.key or not all(c.isalnum() or c in "-_" for c in self.key):
            raise ValueError(f"chart key must be a non-empty file stem of letters, digits, - and _: {self.key!r}")
        if not self.panels:
            raise ValueError(f"chart {self.key!r} has no panel")
        for panel in self.panels:
            for series in panel.series:
                if len(series.values) != len(self.categories):
                    raise ValueError(
                        f"chart {self.key!r}: series {series.name!r} has {len(series.values)} "
                        f"values for {len(self.categories)} categories"
                    )

    @property
    def empty(self) -> bool:
        """Nothing to draw: no categories (the renderer shows ``empty_text``)."""
        return not self.categories

    def describe(self, limit: int = 40) -> str:
        """A text summary of the bars (the chart's accessible label), at most ``limit`` rows."""
        if self.empty:
            return f"{self.title}: {self.empty_text}"
        rows = []
        for i, category in enumerate(self.categories[:limit]):
            values = [
                f"{s.name + ' ' if s.name else ''}{p.value_format(s.values[i])}" for p in self.panels for s in p.series
            ]
            rows.append(f"{category} {', '.join(values)}")
        return f"{self.title}: " + "; ".join(rows)


@dataclass(frozen=True)
class RenderedChart:
    """A chart drawn both ways: ``svg`` markup to inline in HTML (no XML prolog; ids prefixed
    with the key) and ``png`` bytes; ``width`` x ``height`` in CSS pixels."""

    key: str
    svg: str
    png: bytes
    width: int
    height: int
