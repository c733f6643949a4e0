"""The summary tables a replay prints, computed from its outputs (rich tables as text)."""

from __future__ import annotations

import io
import posixpath
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich import box
from rich.console import Console
from rich.table import Table

from ..core import unacked_ranges_limit_notes
from ._inputs import filesystem_for


@dataclass(frozen=True)
class ReplaySummary:
    """Figures of one replay run."""

    events: int
    topic_partitions: int
    entries: int
    placeholder_entries: int
    ledgers: int
    subscriptions: int
    backlog: int
    ack_hole_ranges: int
    acked: int
    cancelled: int
    anomalies: dict[str, int] = field(default_factory=dict)
    truncated_ranges: int = 0
    truncated_batch_indexes: int = 0
    persisted_state_bytes: int = 0
    max_persisted_state_bytes: int = 0
    max_state_chunks: int = 0
    delayed_delivered: int = 0
    redelivered_after_restart: int = 0
    """Acknowledged messages a restart at the end would redeliver, all cursors."""
    redelivered_after_restart_max: int = 0
    """The sum of each cursor's maximum over the replay (each at its own worst moment)."""
    redelivered_after_crash: int = 0
    """Acknowledged messages a crash at the end would redeliver, all cursors (the total)."""
    redelivered_after_crash_entries: int = 0
    redelivered_after_crash_max: int = 0
    """The sum of each cursor's maximum of the crash total (each at its own worst moment)."""
    redelivered_after_crash_entries_max: int = 0
    redelivered_after_crash_limits: int = 0
    """The part of the crash total lost to the limits at the end: what sizing a limit changes."""
    redelivered_after_crash_limits_entries: int = 0
    redelivered_after_crash_limits_max: int = 0
    redelivered_after_crash_limits_entries_max: int = 0
    redelivered_after_unload: int = 0
    """Acknowledged messages an unload (or clean restart) at the end would redeliver."""
    redelivered_after_unload_entries: int = 0
    redelivered_after_unload_max: int = 0
    redelivered_after_unload_entries_max: int = 0
    persist_unacked_ranges_truncated: int = 0
    persist_batch_deleted_indexes_truncated: int = 0
    persist_long_array_truncated: int = 0
    cursors_over_limit: int = 0
    """Cursors whose state exceeded the frame limit or ``jute.maxbuffer`` at some point."""
    top_redelivered: list[dict[str, object]] = field(default_factory=list)
    """The cursors a stop hurts most (up to five with a figure > 0): by the crash total's
    limits part at its worst, then the unload figure's, then the crash total's."""
    by_type: list[dict[str, object]] = field(default_factory=list)
    top_backlog: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    engine: str = ""
    out_dir: str = ""

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    @property
    def anomaly_total(self) -> int:
        return sum(self.anomalies.values())


def _sum(table: pa.Table, column: str) -> int:
    if table.num_rows == 0:
        return 0
    value = pc.sum(table[column]).as_py()
    return int(value or 0)


def _count_set(table: pa.Table, column: str) -> int:
    if table.num_rows == 0:
        return 0
    return table.num_rows - table[column].null_count


_WORST_ORDER = ("redelivered_after_crash_limits_max", "redelivered_after_unload_max", "redelivered_after_crash_max")


def _top_redelivered(cursors: pa.Table) -> list[dict[str, object]]:
    if cursors.num_rows == 0:
        return []
    hurt = pc.greater(cursors[_WORST_ORDER[0]], 0)
    for column in _WORST_ORDER[1:]:
        hurt = pc.or_(hurt, pc.greater(cursors[column], 0))
    worst = cursors.filter(hurt)
    order = [
        *((column, "descending") for column in _WORST_ORDER),
        ("topic", "ascending"),
        ("partition", "ascending"),
        ("subscription", "ascending"),
    ]
    return worst.sort_by(order).slice(0, 5).to_pylist()


_STOP_FIGURES = tuple(
    f"redelivered_after_{stop}{part}"
    for stop in ("crash", "crash_limits", "unload")
    for part in ("", "_entries", "_max", "_entries_max")
)
"""The crash total, its limits part and the unload figure, at the end and at each cursor's worst
moment, in messages and entries: summed over the cursors (``cursors`` columns)."""


def _max(table: pa.Table, column: str) -> int:
    if table.num_rows == 0:
        return 0
    return int(pc.max(table[column]).as_py() or 0)


def summarize(
    cursors: pa.Table,
    partitions: pa.Table,
    anomaly_counts: dict[str, int],
    seconds: float = 0.0,
    engine: str = "",
    out_dir: str = "",
    unkeyed_events: int = 0,
) -> ReplaySummary:
    """Aggregate the ``cursors`` and ``partitions`` outputs and the anomaly counts by reason.

    ``unkeyed_events``: events of keys that cannot be replayed (a null topic or partition),
    which have no ``partitions`` row (:func:`~.engine.replayable`)."""
    by_type = []
    if cursors.num_rows:
        grouped = (
            cursors.group_by("subscription_type")
            .aggregate(
                [
                    ("subscription", "count"),
                    ("backlog", "sum"),
                    ("ack_hole_ranges", "sum"),
                    ("acked", "sum"),
                    ("cancelled", "sum"),
                    ("delayed_delivered", "sum"),
                    ("persisted_state_bytes", "max"),
                    ("state_chunks", "max"),
                    ("truncated_ranges", "sum"),
                ]
            )
            .sort_by("subscription_type")
        )
        by_type = grouped.to_pylist()
    top = []
    if cursors.num_rows:
        top = (
            cursors.sort_by(
                [
                    ("backlog", "descending"),
                    ("topic", "ascending"),
                    ("partition", "ascending"),
                    ("subscription", "ascending"),
                ]
            )
            .slice(0, 5)
            .to_pylist()
        )
    return ReplaySummary(
        events=_sum(partitions, "events") + unkeyed_events,
        topic_partitions=partitions.num_rows,
        entries=_sum(partitions, "entries"),
        placeholder_entries=_sum(partitions, "placeholder_entries"),
        ledgers=_sum(partitions, "ledgers"),
        subscriptions=cursors.num_rows,
        backlog=_sum(cursors, "backlog"),
        ack_hole_ranges=_sum(cursors, "ack_hole_ranges"),
        acked=_sum(cursors, "acked"),
        cancelled=_sum(cursors, "cancelled"),
        truncated_ranges=_sum(cursors, "truncated_ranges"),
        truncated_batch_indexes=_sum(cursors, "truncated_batch_indexes"),
        persisted_state_bytes=_sum(cursors, "persisted_state_bytes"),
        max_persisted_state_bytes=_max(cursors, "persisted_state_bytes"),
        max_state_chunks=_max(cursors, "state_chunks"),
        delayed_delivered=_sum(cursors, "delayed_delivered"),
        redelivered_after_restart=_sum(cursors, "redelivered_after_restart"),
        redelivered_after_restart_max=_sum(cursors, "redelivered_after_restart_max"),
        **{name: _sum(cursors, name) for name in _STOP_FIGURES},
        persist_unacked_ranges_truncated=_sum(cursors, "persist_unacked_ranges_truncated"),
        persist_batch_deleted_indexes_truncated=_sum(cursors, "persist_batch_deleted_indexes_truncated"),
        persist_long_array_truncated=_sum(cursors, "persist_long_array_truncated"),
        cursors_over_limit=_count_set(cursors, "state_over_limit_at_ms"),
        top_redelivered=_top_redelivered(cursors),
        anomalies=dict(sorted(anomaly_counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_type=by_type,
        top_backlog=top,
        seconds=seconds,
        engine=engine,
        out_dir=out_dir,
    )


def _render(*tables: Table | str) -> list[str]:
    console = Console(file=io.StringIO(), width=250, color_system=None, force_terminal=False, highlight=False)
    for t in tables:
        console.print(t)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return [line.rstrip() for line in text.rstrip("\n").split("\n")]


def table_lines(headers: list[str], rows: list[list[object]], title: str | None = None, text: int = 1) -> list[str]:
    """Rows under ``headers``: the first column and the last ``text - 1`` ones (text) left-justified,
    the others (figures) right-justified."""
    table = Table(*headers, box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False)
    for i, column in enumerate(table.columns):
        column.justify = "left" if i == 0 or i >= len(headers) - (text - 1) else "right"
    for row in rows:
        table.add_row(*[f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in row])
    return _render(table)


def format_summary(s: ReplaySummary, planted: Mapping[str, str] | None = None) -> str:
    """The human-readable summary tables. ``planted``: for generated logs, the anomalies the
    generator plants on purpose (reason -> how); the anomalies table then says so per reason."""
    lines = [
        f"replayed {s.events:,} events of {s.topic_partitions:,} topic-partitions"
        + (f" in {s.seconds:.1f} s ({s.events_per_second:,.0f} events/s, {s.engine})" if s.seconds else ""),
        (
            f"entries {s.entries:,} in {s.ledgers:,} ledgers ({s.placeholder_entries:,} placeholders); "
            f"{s.subscriptions:,} cursors; backlog {s.backlog:,}; ack-hole ranges {s.ack_hole_ranges:,}"
        ),
        "",
        "cursors by subscription type:",
    ]
    lines += table_lines(
        [
            "type",
            "cursors",
            "backlog",
            "hole ranges",
            "acked",
            "cancelled",
            "delayed delivered",
            "max state bytes",
            "max chunks",
            "truncated ranges",
        ],
        [
            [
                r["subscription_type"],
                r["subscription_count"],
                r["backlog_sum"],
                r["ack_hole_ranges_sum"],
                r["acked_sum"],
                r["cancelled_sum"],
                r["delayed_delivered_sum"],
                r["persisted_state_bytes_max"],
                r["state_chunks_max"],
                r["truncated_ranges_sum"],
            ]
            for r in s.by_type
        ],
    )
    if s.top_backlog:
        lines += ["", "largest backlogs:"]
        lines += table_lines(
            ["topic", "partition", "subscription", "mark-delete", "backlog", "hole ranges", "state bytes"],
            [
                [
                    r["topic"],
                    r["partition"],
                    r["subscription"],
                    f"{r['mark_delete_ledger_id']}:{r['mark_delete_entry_id']}",
                    r["backlog"],
                    r["ack_hole_ranges"],
                    r["persisted_state_bytes"],
                ]
                for r in s.top_backlog
            ],
        )
    lines += _restart_lines(s)
    lines += ["", f"anomalies: {s.anomaly_total:,}" + _planted_note(s, planted)]
    if s.anomalies and planted is not None:
        lines += table_lines(
            ["reason", "count", "planted by the generator as"],
            [[k, v, planted.get(k, "not planted by the generator")] for k, v in s.anomalies.items()],
            text=2,
        )
    elif s.anomalies:
        lines += table_lines(["reason", "count"], [[k, v] for k, v in s.anomalies.items()])
    if s.out_dir:
        lines += ["", _outputs_line(s.out_dir, "(Parquet)")]
    return "\n".join(lines)


def _outputs_line(out_dir: str, note: str) -> str:
    """The summary's last line: the output directories under ``out_dir`` (as given, with or
    without a trailing slash: ``out/`` names ``out/cursors``, not ``out//cursors``)."""
    root = out_dir.rstrip("/") or out_dir
    return f"outputs: {root}/cursors, {root}/anomalies, {root}/partitions {note}"


def format_event_time(ms: object) -> str:
    """An event time of the outputs as an operator reads it: ISO 8601 in UTC to the millisecond
    for wall-clock times (a recording's or a capture's, after 2001), else plain milliseconds
    from the log's clock (generated and hand-made logs start near 0); ``-`` for none."""
    if ms is None or not isinstance(ms, int) or ms < 0:
        return "-"
    if ms >= 1_000_000_000_000:
        stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return f"{ms} ms"


def _pair(messages: int, entries: int) -> str:
    return f"{messages:,} ({entries:,})"


def _restart_lines(s: ReplaySummary) -> list[str]:
    """What a crash and an unload would redeliver, what the limits truncated, state that cannot
    be stored; the cursors a stop hurts most under a titled table."""
    lines = [
        "",
        "what a broker stop would redeliver, acknowledged messages (entries), all cursors:",
        (
            f"  crash (after the last persist): {_pair(s.redelivered_after_crash, s.redelivered_after_crash_entries)}"
            f" at the end, {_pair(s.redelivered_after_crash_max, s.redelivered_after_crash_entries_max)}"
            " at each cursor's worst moment"
        ),
        (
            "    of which lost to the limits (what a limit's size changes): "
            f"{_pair(s.redelivered_after_crash_limits, s.redelivered_after_crash_limits_entries)} at the end, "
            f"{_pair(s.redelivered_after_crash_limits_max, s.redelivered_after_crash_limits_entries_max)} at worst"
        ),
        (
            "  unload or clean restart (the close path): "
            f"{_pair(s.redelivered_after_unload, s.redelivered_after_unload_entries)} at the end, "
            f"{_pair(s.redelivered_after_unload_max, s.redelivered_after_unload_entries_max)} at worst"
        ),
        (
            f"persists that truncated: {s.persist_unacked_ranges_truncated:,} (ack ranges), "
            f"{s.persist_batch_deleted_indexes_truncated:,} (batch indexes), "
            f"{s.persist_long_array_truncated:,} (long-array cut-off); cursors whose state exceeded the "
            f"frame limit or jute.maxbuffer: {s.cursors_over_limit:,}"
        ),
    ]
    if s.top_redelivered:
        lines += [""]
        lines += table_lines(
            [
                "topic",
                "partition",
                "subscription",
                "crash end",
                "crash max",
                "crash max at",
                "limits end",
                "limits max",
                "limits max at",
                "unload end",
                "unload max",
                "unload max at",
                "over limit at",
            ],
            [
                [
                    r["topic"],
                    r["partition"],
                    r["subscription"],
                    r["redelivered_after_crash"],
                    r["redelivered_after_crash_max"],
                    format_event_time(r["redelivered_after_crash_max_at_ms"]),
                    r["redelivered_after_crash_limits"],
                    r["redelivered_after_crash_limits_max"],
                    format_event_time(r["redelivered_after_crash_limits_max_at_ms"]),
                    r["redelivered_after_unload"],
                    r["redelivered_after_unload_max"],
                    format_event_time(r["redelivered_after_unload_max_at_ms"]),
                    format_event_time(r["state_over_limit_at_ms"]),
                ]
                for r in s.top_redelivered
            ],
            title="cursors a stop hurts most (acknowledged messages redelivered; times of the worst moment)",
        )
    return lines


def _planted_note(s: ReplaySummary, planted: Mapping[str, str] | None) -> str:
    if planted is None or not s.anomalies:
        return ""
    on_purpose = sum(v for k, v in s.anomalies.items() if k in planted)
    share = "all" if on_purpose == s.anomaly_total else f"{on_purpose:,}"
    return f", {share} planted on purpose by the generator (so that the replay has each kind to find)"


@dataclass(frozen=True)
class SweepSummary:
    """A sweep's figures: one :class:`ReplaySummary` per combination of settings."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    summaries: tuple[ReplaySummary, ...]
    seconds: float = 0.0
    engine: str = ""
    out_dir: str = ""
    formats: tuple[str, ...] = ()
    """The individual-ack format in force per combination (``range``, ``long_array``, ``auto``)."""

    @property
    def events(self) -> int:
        """Events read (each was replayed once per combination)."""
        return self.summaries[0].events if self.summaries else 0

    def summary_for(self, **values: Any) -> ReplaySummary:
        """The summary of the combination with these values."""
        for vals, summary in zip(self.values, self.summaries, strict=False):
            if dict(zip(self.keys, vals, strict=False)) == values:
                return summary
        raise KeyError(values)


SWEEP_COLUMNS = (
    ("cursors", "subscriptions"),
    ("backlog", "backlog"),
    ("hole ranges", "ack_hole_ranges"),
    ("truncated ranges", "truncated_ranges"),
    ("truncated batch idx", "truncated_batch_indexes"),
    ("state bytes", "persisted_state_bytes"),
    ("max state bytes", "max_persisted_state_bytes"),
    ("max chunks", "max_state_chunks"),
    ("delayed delivered", "delayed_delivered"),
    ("crash", "redelivered_after_crash"),
    ("crash max", "redelivered_after_crash_max"),
    ("limits", "redelivered_after_crash_limits"),
    ("limits max", "redelivered_after_crash_limits_max"),
    ("unload", "redelivered_after_unload"),
    ("unload max", "redelivered_after_unload_max"),
    ("truncating persists", "persist_unacked_ranges_truncated"),
    ("over-limit cursors", "cursors_over_limit"),
    ("anomalies", "anomaly_total"),
)
"""The figures the sweep table compares: (header, :class:`ReplaySummary` attribute)."""


def format_sweep(s: SweepSummary) -> str:
    """The sweep's comparison table: one row per combination of settings."""
    events = s.events
    took = (
        f" in {s.seconds:.1f} s ({events * len(s.summaries) / s.seconds:,.0f} event replays/s, {s.engine})"
        if s.seconds
        else ""
    )
    lines = [f"replayed {events:,} events under {len(s.summaries)} settings{took}", ""]
    rows = [
        [*(str(v) for v in vals), *(getattr(summary, attr) for _, attr in SWEEP_COLUMNS)]
        for vals, summary in zip(s.values, s.summaries, strict=False)
    ]
    lines += table_lines([*s.keys, *(h for h, _ in SWEEP_COLUMNS)], rows, title=None)
    lines += [
        "",
        "crash / unload: acknowledged messages a crash (after the last persist) or an unload would redeliver,",
        "at the end and at each cursor's worst moment (max), all cursors; limits: the part of the crash figure",
        "lost to the limits, what sizing a limit changes (the rest is the last second of acks not yet persisted)",
    ]
    notes = unacked_ranges_limit_notes(s.keys, s.formats)
    if notes:
        lines += ["", "how max_unacked_ranges_to_persist applies in each individual-ack format of this sweep:"]
        lines += [textwrap.fill(note, 110, initial_indent="  - ", subsequent_indent="    ") for note in notes]
    reasons = sorted({r for summary in s.summaries for r in summary.anomalies})
    if reasons:
        lines += ["", "anomalies by reason:"]
        lines += table_lines(
            [*s.keys, *reasons],
            [
                [*(str(v) for v in vals), *(summary.anomalies.get(r, 0) for r in reasons)]
                for vals, summary in zip(s.values, s.summaries, strict=False)
            ],
        )
    if s.out_dir:
        lines += [
            "",
            _outputs_line(s.out_dir, f"(Parquet; columns {', '.join(s.keys)} say which settings)"),
        ]
    return "\n".join(lines)


def read_summaries(
    out_dir: str,
    keys: Sequence[str],
    values: Sequence[tuple[Any, ...]],
    seconds: float,
    engine: str,
    unkeyed_events: int = 0,
) -> list[ReplaySummary]:
    """One summary per combination of ``values`` of the swept ``keys`` (one without a sweep),
    from the written outputs (the small columns only)."""
    from ._schema import CURSOR_SCHEMA

    fs, root = filesystem_for(out_dir)
    wanted = [c for c in CURSOR_SCHEMA.names if c not in ("state", "state_record")] + list(keys)
    cursors = pq.read_table(posixpath.join(root, "cursors"), columns=wanted, filesystem=fs)
    partitions = pq.read_table(posixpath.join(root, "partitions"), filesystem=fs)
    anomalies = pq.read_table(posixpath.join(root, "anomalies"), columns=["reason", *keys], filesystem=fs)
    out = []
    for vals in values or [()]:

        def pick(table: pa.Table, vals: tuple[object, ...] = vals) -> pa.Table:
            for key, value in zip(keys, vals, strict=False):
                column = table[key]
                mask = (
                    pc.is_null(column)
                    if value is None
                    else pc.equal(
                        column, pa.scalar(value, column.type) if not pa.types.is_string(column.type) else str(value)
                    )
                )
                table = table.filter(mask)
            return table.drop_columns(list(keys))

        summary = summarize(
            pick(cursors), pick(partitions), reason_counts(pick(anomalies)), seconds, engine, out_dir, unkeyed_events
        )
        out.append(summary)
    return out


def reason_counts(anomalies: pa.Table) -> dict[str, int]:
    """Anomalies per reason of an anomalies table (or one with just its ``reason`` column)."""
    if anomalies.num_rows == 0:
        return {}
    grouped = anomalies.group_by("reason").aggregate([("reason", "count")])
    return dict(zip(grouped["reason"].to_pylist(), grouped["reason_count"].to_pylist(), strict=False))
