"""The summary table a replay prints, computed from its (small) outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc


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


def summarize(cursors: pa.Table, partitions: pa.Table, anomaly_counts: dict[str, int],
              seconds: float = 0.0, engine: str = "", out_dir: str = "") -> ReplaySummary:
    """Aggregate the ``cursors`` and ``partitions`` outputs and the anomaly counts by reason."""
    by_type = []
    if cursors.num_rows:
        grouped = cursors.group_by("subscription_type").aggregate([
            ("subscription", "count"), ("backlog", "sum"), ("ack_hole_ranges", "sum"), ("acked", "sum"),
            ("cancelled", "sum"), ("delayed_delivered", "sum"), ("persisted_state_bytes", "max"),
            ("state_chunks", "max"), ("truncated_ranges", "sum"),
        ]).sort_by("subscription_type")
        by_type = grouped.to_pylist()
    top = []
    if cursors.num_rows:
        top = cursors.sort_by([("backlog", "descending"), ("topic", "ascending"), ("partition", "ascending"),
                               ("subscription", "ascending")]).slice(0, 5).to_pylist()
    return ReplaySummary(
        events=_sum(partitions, "events"),
        topic_partitions=partitions.num_rows,
        entries=_sum(partitions, "entries"),
        placeholder_entries=_sum(partitions, "placeholder_entries"),
        ledgers=_sum(partitions, "ledgers"),
        subscriptions=cursors.num_rows,
        backlog=_sum(cursors, "backlog"),
        ack_hole_ranges=_sum(cursors, "ack_hole_ranges"),
        acked=_sum(cursors, "acked"),
        cancelled=_sum(cursors, "cancelled"),
        anomalies=dict(sorted(anomaly_counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_type=by_type,
        top_backlog=top,
        seconds=seconds,
        engine=engine,
        out_dir=out_dir,
    )


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    cells = [[h for h in headers]] + [[f"{v:,}" if isinstance(v, int) else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for k, row in enumerate(cells):
        lines.append("  " + "  ".join(c.rjust(w) if k and i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if k == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return lines


def format_summary(s: ReplaySummary) -> str:
    """The human-readable summary table."""
    lines = [
        f"replayed {s.events:,} events of {s.topic_partitions:,} topic-partitions"
        + (f" in {s.seconds:.1f} s ({s.events_per_second:,.0f} events/s, {s.engine})" if s.seconds else ""),
        (f"entries {s.entries:,} in {s.ledgers:,} ledgers ({s.placeholder_entries:,} placeholders); "
         f"{s.subscriptions:,} cursors; backlog {s.backlog:,}; ack-hole ranges {s.ack_hole_ranges:,}"),
        "",
        "cursors by subscription type:",
    ]
    lines += _table(
        ["type", "cursors", "backlog", "hole ranges", "acked", "cancelled", "delayed delivered",
         "max state bytes", "max chunks", "truncated ranges"],
        [[r["subscription_type"], r["subscription_count"], r["backlog_sum"], r["ack_hole_ranges_sum"],
          r["acked_sum"], r["cancelled_sum"], r["delayed_delivered_sum"], r["persisted_state_bytes_max"],
          r["state_chunks_max"], r["truncated_ranges_sum"]] for r in s.by_type],
    )
    if s.top_backlog:
        lines += ["", "largest backlogs:"]
        lines += _table(
            ["topic", "partition", "subscription", "mark-delete", "backlog", "hole ranges", "state bytes"],
            [[r["topic"], r["partition"], r["subscription"],
              f"{r['mark_delete_ledger_id']}:{r['mark_delete_entry_id']}", r["backlog"], r["ack_hole_ranges"],
              r["persisted_state_bytes"]] for r in s.top_backlog],
        )
    lines += ["", f"anomalies: {s.anomaly_total:,}"]
    if s.anomalies:
        lines += _table(["reason", "count"], [[k, v] for k, v in s.anomalies.items()])
    if s.out_dir:
        lines += ["", f"outputs: {s.out_dir}/cursors, {s.out_dir}/anomalies, {s.out_dir}/partitions (Parquet)"]
    return "\n".join(lines)
