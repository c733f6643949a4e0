"""The report's charts, as data: which rows, bars, colors, limits and captions each one has.

Colors carry one meaning everywhere: blue = fine, amber = at or above 80% of
``max_unacked_ranges_to_persist`` (or a refused / late operation, or acks a restart would
redeliver), red = over it (ranges truncated: lost on a restart; a state over the store's
limit; or a cancelled message delivered anyway), purple = state
persisted in several chunks (PIP-381), slate = not persisted / input problems, teal = dedup.

Each figure is a function ``(model, top) -> Chart | None`` listed in :data:`FIGURES` in page
order; ``None`` leaves the chart out (for charts that only some outputs can fill).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from ..core import unacked_ranges_limit_notes
from ._chart import Chart, LegendItem, Panel, Reference, Series, bytes_unit, format_bytes, format_count
from ._data import NEAR_LIMIT, ReportModel, SubscriptionState, SweepSetting

__all__ = ["FIGURES", "FigureBuilder", "report_charts"]

_ANOMALY_COLORS = {
    "delivered_before_cancel": "red",
    "cancel_after_delivery": "amber",
    "cancel_refused": "amber",
    "cancel_without_subscription": "amber",
    "cumulative_ack_refused": "amber",
    "dedup_duplicate": "teal",
}

FigureBuilder = Callable[[ReportModel, int], Chart | None]
"""Builds one chart from the model and the number of rows to show (``top``)."""


def _label(model: ReportModel, sub: SubscriptionState) -> str:
    return f"{model.short(sub.topic_partition)} / {sub.subscription}"


def _hole_color(sub: SubscriptionState, limit: int) -> str:
    if sub.over_limit(limit):
        return "red"
    return "amber" if sub.utilisation(limit) >= NEAR_LIMIT else "blue"


def ack_holes(model: ReportModel, top: int) -> Chart:
    """Ack-hole ranges per subscription (most first) against ``max_unacked_ranges_to_persist``."""
    subs = sorted(model.subscriptions, key=lambda s: (-s.hole_ranges, s.topic_partition, s.subscription))[:top]
    notes = []
    for sub in subs:
        note = f"({sub.utilisation(model.limit):.1%})" if model.limit else ""
        if sub.truncated_ranges:
            note += f" truncated {sub.truncated_ranges:,}"
        notes.append(note.strip())
    series = Series(
        tuple(float(s.hole_ranges) for s in subs),
        tuple(_hole_color(s, model.limit) for s in subs) or ("blue",),
        notes=tuple(notes),
    )
    reference = Reference(model.limit, f"max_unacked_ranges_to_persist = {model.limit:,}") if model.limit else None
    return Chart(
        key="ack-holes",
        title=f"Ack-hole ranges per subscription (top {len(subs)} of {len(model.subscriptions):,})",
        subtitle="Individually acknowledged ranges after the mark-delete position, against the persistence limit",
        categories=tuple(_label(model, s) for s in subs),
        panels=(
            Panel((series,), "ack-hole ranges (individually acknowledged ranges)", format_count, reference=reference),
        ),
        legend=(
            LegendItem("blue", "within the limit"),
            LegendItem("amber", f">= {NEAR_LIMIT:.0%} of it"),
            LegendItem("red", "over it: ranges truncated"),
        ),
        caption="Bars past the dashed line keep ranges in memory only: after a restart those messages are "
        "delivered again.",
        empty_text="No subscriptions in the replay output",
        heading="Ack holes against the persistence limit",
        lede="Each subscription's individually acknowledged ranges at the end of the replay, against "
        f"max_unacked_ranges_to_persist = {model.limit:,}.",
    )


def state_size(model: ReportModel, top: int) -> Chart:
    """The size of each subscription's last persisted state (largest first), by how it was stored."""
    subs = sorted(model.subscriptions, key=lambda s: (-s.persisted_bytes, s.topic_partition, s.subscription))[:top]
    colors, notes = [], []
    for sub in subs:
        colors.append("red" if sub.over_limit(model.limit) else ("purple" if sub.chunks > 1 else "blue"))
        stored = "not persisted" if sub.chunks == 0 else f"{sub.chunks} chunk{'s' if sub.chunks != 1 else ''}"
        notes.append(f"{stored}, {sub.hole_ranges:,} ranges")
    values = tuple(float(s.persisted_bytes) for s in subs)
    unit = bytes_unit(max(values, default=0.0))
    series = Series(values, tuple(colors) or ("blue",), notes=tuple(notes))
    return Chart(
        key="state-size",
        title=f"Persisted cursor state size (top {len(subs)})",
        subtitle="Bytes of the last PositionInfo written for each subscription",
        categories=tuple(_label(model, s) for s in subs),
        panels=(Panel((series,), f"persisted state ({unit.name})", format_bytes, unit),),
        legend=(
            LegendItem("blue", "one entry"),
            LegendItem("purple", "chunked (PIP-381)"),
            LegendItem("red", "ranges truncated"),
        ),
        caption="State size grows with the number of ack-hole ranges; large states are split into chunks.",
        empty_text="No persisted cursor state",
        heading="Persisted cursor state",
        lede="The size of the state each cursor last persisted, and how many chunks it took.",
    )


def chunks(model: ReportModel, top: int) -> Chart:
    """How many subscriptions' last state took 0 (not persisted), 1, 2, ... entries."""
    counts = sorted(Counter(s.chunks for s in model.subscriptions).items())
    series = Series(
        tuple(float(c) for _, c in counts),
        tuple("slate" if n == 0 else ("blue" if n == 1 else "purple") for n, _ in counts) or ("blue",),
    )
    return Chart(
        key="chunks",
        title="Subscriptions by state chunks",
        subtitle="How many entries the last persisted state took",
        categories=tuple("not persisted" if n == 0 else f"{n} chunk{'s' if n != 1 else ''}" for n, _ in counts),
        panels=(Panel((series,), "subscriptions"),),
        caption="More than one chunk means the state exceeded one entry (PIP-381 chunking).",
        empty_text="No subscriptions",
        width="half",
    )


def anomalies(model: ReportModel, top: int) -> Chart:
    """Anomaly rows by kind (most first)."""
    kinds = model.anomalies
    series = Series(
        tuple(float(k.count) for k in kinds), tuple(_ANOMALY_COLORS.get(k.reason, "slate") for k in kinds) or ("blue",)
    )
    return Chart(
        key="anomalies",
        title="Anomalies by kind",
        subtitle=f"{model.totals.get('anomalies', 0):,} rows in anomalies/",
        categories=tuple(k.reason for k in kinds),
        panels=(Panel((series,), "rows"),),
        caption="Red: a cancelled delayed message was delivered anyway. Amber: refused or late operations. "
        "Grey: input problems.",
        empty_text="No anomalies",
        width="half",
    )


def _sweep_rows(settings: Sequence[SweepSetting]) -> tuple[tuple[str, ...], list[str], list[str]]:
    """(row labels, the keys that label them, ``key=value`` of the keys every row shares): rows
    are named by the values that differ only, so labels stay short and are never cut."""
    keys = [k for k, _ in settings[0].values]
    differ = [i for i in range(len(keys)) if len({repr(s.values[i][1]) for s in settings}) > 1]
    shared = [f"{k}={v}" for i, (k, v) in enumerate(settings[0].values) if i not in differ]
    labels = tuple(" · ".join(str(s.values[i][1]) for i in differ) or s.label for s in settings)
    return labels, [keys[i] for i in differ], shared


def sweep_comparison(model: ReportModel, top: int) -> Chart | None:
    """A sweep's settings side by side: truncated ranges, persisted state bytes, chunks; rows
    labelled by the swept values that differ (the keys in the subtitle), with how each
    individual-ack format applies ``max_unacked_ranges_to_persist`` when the sweep compares it."""
    if not model.sweep:
        return None
    settings = model.sweep
    labels, named, shared = _sweep_rows(settings)
    subtitle = f"Rows: {' · '.join(named)}" if named else "One combination"
    if shared:
        subtitle += f" (every row: {', '.join(shared)})"
    subtitle += "; each replayed the same events"
    colors = tuple("red" if s.truncated_ranges else ("purple" if s.max_chunks > 1 else "blue") for s in settings)
    truncated = Series(
        tuple(float(s.truncated_ranges) for s in settings),
        colors,
        notes=tuple(f"{s.over_limit:,} subs over" if s.over_limit else "" for s in settings),
    )
    total = tuple(float(s.persisted_bytes) for s in settings)
    unit = bytes_unit(max(total, default=0.0))
    state = Series(total, colors, notes=tuple(f"largest {format_bytes(s.max_persisted_bytes)}" for s in settings))
    chunk = Series(tuple(float(s.max_chunks) for s in settings), colors)
    restart = Series(
        tuple(float(s.redelivered_after_crash_limits_max) for s in settings),
        tuple(
            "red"
            if s.state_over_store_limit
            else ("amber" if s.redelivered_after_crash_limits_max or s.redelivered_after_unload_max else "blue")
            for s in settings
        ),
        notes=tuple(_restart_note(s) for s in settings),
    )
    return Chart(
        key="sweep",
        title=f"The sweep: {len(settings)} settings side by side",
        subtitle=subtitle,
        categories=labels,
        panels=(
            Panel((truncated,), "ranges, all subscriptions", format_count, title="Truncated ack ranges"),
            Panel((state,), f"all states ({unit.name})", format_bytes, unit, title="Persisted state bytes"),
            Panel((chunk,), "chunks", format_count, title="Largest state, chunks"),
            Panel(
                (restart,),
                "messages, all subscriptions",
                format_count,
                title="Lost to the limits on a crash, worst",
            ),
        ),
        legend=(
            LegendItem("blue", "nothing truncated, one entry per state"),
            LegendItem("purple", "states chunked (PIP-381)"),
            LegendItem("red", "ranges truncated (or a state over the limit)"),
            LegendItem("amber", "acks lost to the limits"),
        ),
        caption="Truncated ranges are kept in memory only: after a restart those messages are delivered again. "
        "Lost to the limits on a crash: the acknowledged messages a crash redelivers because a persisted state "
        "was truncated (the ranges cap, the long-array cut-off, batch-index caps, the frame limit), summed over "
        "each subscription's worst moment: what sizing a limit changes. Beside each bar the unload figure (a clean "
        "close) at its worst, and the crash total at its worst, which adds the last second of acknowledgements "
        "the rate limiter has not persisted yet, the same under every limit. "
        f"The charts below show the first setting ({model.shown}).",
        heading="Settings compared",
        lede="One replay of the log under every combination of the swept settings, read once.",
        notes=tuple(unacked_ranges_limit_notes([k for k, _ in settings[0].values], (s.ack_format for s in settings))),
    )


def _restart_note(s: SweepSetting) -> str:
    note = f"unload {s.redelivered_after_unload_max:,}; crash total {s.redelivered_after_crash_max:,}"
    if s.state_over_store_limit:
        note += f"; {s.state_over_store_limit:,} subs over the store's limit"
    return note


def worst_moments(model: ReportModel, top: int) -> Chart | None:
    """The worst moment of each subscription a limit hurts, in the order it came: the crash's
    limits part and the unload figure at their maximum, beside their value at the end. Rows are
    the ``top`` subscriptions with the largest worst moment, ordered by when it was first reached
    (the ``_max_at_ms`` columns: the outputs hold one worst instant per figure and subscription,
    not a time series). None when no limit makes any subscription redeliver at any moment."""
    hurt = [s for s in model.subscriptions if s.worst]
    if not hurt:
        return None
    from ..replay import format_event_time

    def moment(s: SubscriptionState) -> int:
        figures = (
            (s.redelivered_after_crash_limits_max_at_ms, s.redelivered_after_crash_limits_max),
            (s.redelivered_after_unload_max_at_ms, s.redelivered_after_unload_max),
        )
        return min((t for t, v in figures if t is not None and v), default=0)

    chosen = sorted(hurt, key=lambda s: (-s.worst, s.topic_partition, s.subscription))[:top]
    chosen.sort(key=lambda s: (moment(s), s.topic_partition, s.subscription))

    def pair(worst: list[int], end: list[int], at: list[int | None]) -> tuple[Series, Series]:
        # a figure whose worst moment is not its row's says when it was
        notes = tuple(
            f"at {format_event_time(t)}" if w and t is not None and t != moment(s) else ""
            for w, t, s in zip(worst, at, chosen, strict=True)
        )
        return (
            Series(tuple(float(v) for v in worst), ("amber",), "worst moment", notes),
            Series(tuple(float(v) for v in end), ("blue",), "at the end"),
        )

    limits = pair(
        [s.redelivered_after_crash_limits_max for s in chosen],
        [s.redelivered_after_crash_limits for s in chosen],
        [s.redelivered_after_crash_limits_max_at_ms for s in chosen],
    )
    unload = pair(
        [s.redelivered_after_unload_max for s in chosen],
        [s.redelivered_after_unload for s in chosen],
        [s.redelivered_after_unload_max_at_ms for s in chosen],
    )
    crash_total = sum(s.redelivered_after_crash_max for s in chosen)
    return Chart(
        key="worst-moments",
        title="The worst moment over time",
        subtitle=f"Rows: the {len(chosen)} subscriptions the limits hurt most, by when their worst moment came",
        categories=tuple(f"{format_event_time(moment(s))} · {_label(model, s)}" for s in chosen),
        panels=(
            Panel(limits, "acknowledged messages", format_count, title="Crash: lost to the limits"),
            Panel(unload, "acknowledged messages", format_count, title="Unload (clean close)"),
        ),
        legend=(LegendItem("amber", "at the worst moment"), LegendItem("blue", "at the end of the replay")),
        caption="Each row is one subscription's worst moment: the instant a stop would have redelivered the most "
        "acknowledged messages because of the limits (amber), beside the same figure at the end (blue); a "
        "figure whose worst moment came at another time says when. Times are event times (UTC for a recording, "
        "milliseconds of the log's clock otherwise). A crash also redelivers the acknowledgements the rate limiter "
        f"had not persisted yet, the same under every limit: with them, {crash_total:,} at these subscriptions' "
        "worst moments.",
        heading="When a stop hurts most",
        lede="A stop can come at any moment, not only at the end: the replay keeps each figure's maximum "
        "and when it was first reached.",
    )


FIGURES: tuple[FigureBuilder, ...] = (sweep_comparison, worst_moments, ack_holes, state_size, chunks, anomalies)
"""The report's charts in page order."""


def report_charts(model: ReportModel, top: int, figures: tuple[FigureBuilder, ...] = FIGURES) -> list[Chart]:
    """The charts ``figures`` build from ``model``, in order, leaving out those that return ``None``."""
    return [chart for build in figures if (chart := build(model, top)) is not None]
