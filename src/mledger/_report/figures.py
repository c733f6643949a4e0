"""The report's charts, as data: which bars, colors, limits and captions each figure has.

Colors carry one meaning everywhere: blue = fine, amber = at or above 80% of
``max_unacked_ranges_to_persist``, red = over it (ranges truncated: lost on a restart),
purple = state persisted in several chunks (PIP-381).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .charts import PALETTE, Bar, BarChart
from .data import NEAR_LIMIT, ReportModel, SubscriptionState

__all__ = ["Figure", "format_bytes", "format_count", "report_figures"]

FULL_WIDTH = 1080
HALF_WIDTH = 520

_ANOMALY_COLORS = {
    "delivered_before_cancel": "red", "cancel_after_delivery": "amber", "cancel_refused": "amber",
    "cancel_without_subscription": "amber", "cumulative_ack_refused": "amber", "dedup_duplicate": "teal",
}


@dataclass(frozen=True)
class Figure:
    """A chart to draw, the file stem it is saved under, and its caption on the page."""

    key: str
    chart: BarChart
    caption: str


def format_count(value: float) -> str:
    """``12,345`` (fractions only below 10, for axis ticks)."""
    return f"{value:,.1f}" if value != int(value) and abs(value) < 10 else f"{value:,.0f}"


def format_bytes(value: float) -> str:
    """Bytes in B / KiB / MiB."""
    if value < 1024:
        return f"{value:,.0f} B"
    if value < 1024 * 1024:
        return f"{value / 1024:,.1f} KiB"
    return f"{value / (1024 * 1024):,.1f} MiB"


def bytes_unit(largest: float) -> tuple[float, str]:
    """The axis unit for byte values up to ``largest``."""
    if largest >= 1024 * 1024:
        return 1024.0 * 1024, "MiB"
    return (1024.0, "KiB") if largest >= 1024 else (1.0, "B")


def _label(model: ReportModel, sub: SubscriptionState) -> str:
    return f"{model.short(sub.topic_partition)} / {sub.subscription}"


def _hole_color(sub: SubscriptionState, limit: int) -> str:
    if sub.over_limit(limit):
        return "red"
    return "amber" if sub.utilisation(limit) >= NEAR_LIMIT else "blue"


def _holes(model: ReportModel, top: int) -> Figure:
    subs = sorted(model.subscriptions, key=lambda s: (-s.hole_ranges, s.topic_partition, s.subscription))[:top]
    bars = []
    for sub in subs:
        note = f"({100 * sub.utilisation(model.limit):.1f}%)" if model.limit else ""
        if sub.truncated_ranges:
            note += f" truncated {sub.truncated_ranges:,}"
        bars.append(Bar(_label(model, sub), sub.hole_ranges, PALETTE[_hole_color(sub, model.limit)], note.strip()))
    chart = BarChart(
        title=f"Ack-hole ranges per subscription (top {len(bars)} of {len(model.subscriptions):,})",
        subtitle="Individually acknowledged ranges after the mark-delete position, against the persistence limit",
        bars=bars,
        value_format=format_count,
        reference=(model.limit, "max_unacked_ranges_to_persist") if model.limit else None,
        legend=((PALETTE["blue"], "within the limit"), (PALETTE["amber"], f">= {NEAR_LIMIT:.0%} of it"),
                (PALETTE["red"], "over it: ranges truncated")),
        empty_text="No subscriptions in the replay output",
        css_width=FULL_WIDTH,
    )
    return Figure("ack-holes", chart, "Bars past the dashed line keep ranges in memory only: after a restart those "
                  "messages are delivered again.")


def _state_size(model: ReportModel, top: int) -> Figure:
    subs = sorted(model.subscriptions, key=lambda s: (-s.persisted_bytes, s.topic_partition, s.subscription))[:top]
    bars = []
    for sub in subs:
        color = "red" if sub.over_limit(model.limit) else ("purple" if sub.chunks > 1 else "blue")
        stored = "not persisted" if sub.chunks == 0 else f"{sub.chunks} chunk{'s' if sub.chunks != 1 else ''}"
        note = f"{stored}, {sub.hole_ranges:,} ranges"
        bars.append(Bar(_label(model, sub), sub.persisted_bytes, PALETTE[color], note))
    chart = BarChart(
        title=f"Persisted cursor state size (top {len(bars)})",
        subtitle="Bytes of the last PositionInfo written for each subscription",
        bars=bars,
        value_format=format_bytes,
        legend=((PALETTE["blue"], "one entry"), (PALETTE["purple"], "chunked (PIP-381)"),
                (PALETTE["red"], "ranges truncated")),
        empty_text="No persisted cursor state",
        css_width=FULL_WIDTH,
        axis_unit=bytes_unit(max((b.value for b in bars), default=0)),
    )
    return Figure("state-size", chart, "State size grows with the number of ack-hole ranges; large states are split "
                  "into chunks.")


def _chunks(model: ReportModel) -> Figure:
    counts = Counter(s.chunks for s in model.subscriptions)
    bars = [
        Bar("not persisted" if n == 0 else f"{n} chunk{'s' if n != 1 else ''}", count,
            PALETTE["slate" if n == 0 else ("blue" if n == 1 else "purple")])
        for n, count in sorted(counts.items())
    ]
    chart = BarChart(
        title="Subscriptions by state chunks",
        subtitle="How many entries the last persisted state took",
        bars=bars,
        value_format=format_count,
        empty_text="No subscriptions",
        css_width=HALF_WIDTH,
    )
    return Figure("chunks", chart, "More than one chunk means the state exceeded one entry (PIP-381 chunking).")


def _anomalies(model: ReportModel) -> Figure:
    bars = [Bar(kind.reason, kind.count, PALETTE[_ANOMALY_COLORS.get(kind.reason, "slate")])
            for kind in model.anomalies]
    chart = BarChart(
        title="Anomalies by kind",
        subtitle=f"{model.totals.get('anomalies', 0):,} rows in anomalies/",
        bars=bars,
        value_format=format_count,
        empty_text="No anomalies",
        css_width=HALF_WIDTH,
    )
    return Figure("anomalies", chart, "Red: a cancelled delayed message was delivered anyway. Amber: refused or "
                  "late operations. Grey: input problems.")


def report_figures(model: ReportModel, top: int) -> list[Figure]:
    """The four figures of the page, in page order."""
    return [_holes(model, top), _state_size(model, top), _chunks(model), _anomalies(model)]
