"""The replay output, read and summarised for the report (pyarrow, no Spark).

Input: a replay output directory (``mledger replay EVENTS OUT``) holding Parquet datasets
``cursors/`` (required) and ``anomalies/`` (optional), with the columns of
:data:`mledger.replay.CURSOR_SCHEMA` / ``ANOMALY_SCHEMA``. Spark's marker and checksum
files (``_SUCCESS``, ``.crc``) are ignored; missing optional columns read as 0, so outputs of
older replays still render. The serialized ``state`` column is never read.

Memory: the cursors table is read whole (one row per topic-partition-subscription); anomalies
are streamed batch by batch, keeping only counts and a few examples per reason.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core import ConfigError, ManagedLedgerConfig, MissingExtraError, MLedgerError

__all__ = [
    "NEAR_LIMIT",
    "SweepSetting",
    "AnomalyKind",
    "PartitionSummary",
    "ReplayReportInputError",
    "ReportModel",
    "SubscriptionState",
    "load_model",
    "recorded_ledger_settings",
    "recorded_limit",
    "recorded_sweep",
]

NEAR_LIMIT = 0.8
"""A subscription at or above this share of ``max_unacked_ranges_to_persist`` is flagged."""

EXAMPLES_PER_REASON = 3

_STOPS = ("crash", "crash_limits", "unload")
"""The stop figures of the ``cursors`` output the report reads: the crash total, its limits
part, the unload figure (each at the end, its maximum and when it was first reached)."""

_CURSOR_COLUMNS = {
    "topic": "",
    "partition": -1,
    "subscription": "",
    "subscription_type": "",
    "mark_delete_ledger_id": -1,
    "mark_delete_entry_id": -1,
    "read_ledger_id": -1,
    "read_entry_id": -1,
    "ack_hole_ranges": 0,
    "backlog": 0,
    "acked": 0,
    "cancelled": 0,
    "delayed_delivered": 0,
    "delayed_pending": 0,
    "persisted_state_bytes": 0,
    "state_chunks": 0,
    "truncated_ranges": 0,
    "truncated_batch_indexes": 0,
    "redelivered_after_restart": 0,
    "redelivered_after_restart_max": 0,
    "state_over_limit_at_ms": None,
    **{f"redelivered_after_{stop}{part}": 0 for stop in _STOPS for part in ("", "_max")},
    **{f"redelivered_after_{stop}_max_at_ms": None for stop in _STOPS},
}
_ANOMALY_COLUMNS = (
    "topic",
    "partition",
    "subscription",
    "event",
    "ts_ms",
    "ledger_id",
    "entry_id",
    "batch_index",
    "reason",
    "detail",
)


class ReplayReportInputError(MLedgerError, ValueError):
    """The directory is not a replay output (no ``cursors`` dataset) or cannot be read."""


@dataclass(frozen=True)
class SubscriptionState:
    """One subscription of one topic-partition at the end of the replay."""

    topic: str
    partition: int
    subscription: str
    type: str
    mark_delete: str
    read: str
    hole_ranges: int
    backlog: int
    acked: int
    cancelled: int
    delayed_delivered: int
    delayed_pending: int
    persisted_bytes: int
    chunks: int
    truncated_ranges: int
    truncated_batch_indexes: int
    redelivered_after_restart: int = 0
    """Acknowledged messages a restart at the end would redeliver (``cursors`` column)."""
    redelivered_after_restart_max: int = 0
    state_over_limit_at_ms: int | None = None
    redelivered_after_crash: int = 0
    """Acknowledged messages a crash at the end would redeliver (the total)."""
    redelivered_after_crash_max: int = 0
    redelivered_after_crash_max_at_ms: int | None = None
    redelivered_after_crash_limits: int = 0
    """The part of the crash total lost to the limits: what sizing a limit changes."""
    redelivered_after_crash_limits_max: int = 0
    redelivered_after_crash_limits_max_at_ms: int | None = None
    redelivered_after_unload: int = 0
    """Acknowledged messages an unload (or clean restart) at the end would redeliver."""
    redelivered_after_unload_max: int = 0
    redelivered_after_unload_max_at_ms: int | None = None

    @property
    def worst(self) -> int:
        """The larger worst moment of the two figures a limit's size changes: the crash's
        limits part and the unload."""
        return max(self.redelivered_after_crash_limits_max, self.redelivered_after_unload_max)

    @property
    def topic_partition(self) -> str:
        """``persistent://t/ns/x-partition-i`` (the topic itself when not partitioned)."""
        return self.topic if self.partition < 0 else f"{self.topic}-partition-{self.partition}"

    def utilisation(self, limit: int) -> float:
        """``hole_ranges / limit`` (0 when the limit is 0)."""
        return self.hole_ranges / limit if limit > 0 else 0.0

    def over_limit(self, limit: int) -> bool:
        """Ranges were (or would be) left out of the persisted state."""
        return self.truncated_ranges > 0 or (limit > 0 and self.hole_ranges > limit)


@dataclass(frozen=True)
class PartitionSummary:
    """One topic-partition: its subscriptions' worst figures and its anomalies."""

    topic_partition: str
    subscriptions: int
    backlog: int
    max_hole_ranges: int
    max_utilisation: float
    max_persisted_bytes: int
    max_chunks: int
    truncated_ranges: int
    anomalies: int


@dataclass(frozen=True)
class AnomalyKind:
    """The anomalies of one reason: how many, what it means, a few examples."""

    reason: str
    count: int
    meaning: str
    examples: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class SweepSetting:
    """One combination of settings of a sweep (``mledger replay --sweep``) and its totals."""

    label: str
    """``key=value, ...``"""
    values: tuple[tuple[str, Any], ...]
    limit: int
    """``max_unacked_ranges_to_persist`` this combination ran with."""
    ack_format: str
    """The individual-ack format it persisted with: ``range``, ``long_array`` or ``auto``."""
    subscriptions: int
    hole_ranges: int
    truncated_ranges: int
    truncated_batch_indexes: int
    persisted_bytes: int
    """Total over every subscription's last persisted state."""
    max_persisted_bytes: int
    max_chunks: int
    over_limit: int
    anomalies: int
    redelivered_after_restart: int = 0
    redelivered_after_restart_max: int = 0
    """Sum of each subscription's maximum over the replay."""
    redelivered_after_crash: int = 0
    redelivered_after_crash_max: int = 0
    redelivered_after_crash_limits: int = 0
    redelivered_after_crash_limits_max: int = 0
    redelivered_after_unload: int = 0
    redelivered_after_unload_max: int = 0
    """Sums of each subscription's figure at the end and at its worst moment."""
    state_over_store_limit: int = 0
    """Subscriptions whose state exceeded the frame limit or ``jute.maxbuffer``."""


@dataclass(frozen=True)
class ReportModel:
    """Everything the page shows.

    For a sweep's output, :attr:`sweep` holds one :class:`SweepSetting` per combination, and
    the per-subscription figures (:attr:`subscriptions`, :attr:`partitions`,
    :attr:`anomalies`) are those of :attr:`shown`, the first combination.
    """

    source: str
    limit: int
    subscriptions: list[SubscriptionState]
    partitions: list[PartitionSummary]
    anomalies: list[AnomalyKind]
    totals: dict[str, int] = field(default_factory=dict)
    sweep: tuple[SweepSetting, ...] = ()
    shown: str = ""

    @property
    def common_prefix(self) -> str:
        """``persistent://tenant/ns/`` when every topic shares it, else ``""`` (for short labels)."""
        prefixes = {s.topic.rsplit("/", 1)[0] + "/" for s in self.subscriptions if "/" in s.topic}
        return prefixes.pop() if len(prefixes) == 1 else ""

    def short(self, name: str) -> str:
        """``name`` without :attr:`common_prefix`."""
        prefix = self.common_prefix
        return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def _pyarrow() -> Any:
    try:
        import pyarrow.dataset as ds
    except ImportError as e:
        raise MissingExtraError("mledger report reads Parquet with pyarrow: pip install 'mledger[report]'") from e
    return ds


def _dataset(ds: Any, path: str) -> Any | None:
    if not os.path.isdir(path):
        return None
    try:
        return ds.dataset(path, format="parquet")
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for unreadable files
        raise ReplayReportInputError(f"{path}: not a readable Parquet dataset: {e}") from None


def _read_cursors(ds: Any, out_dir: str, keys: Iterable[str] = ()) -> list[dict[str, Any]]:
    dataset = _dataset(ds, os.path.join(out_dir, "cursors"))
    if dataset is None:
        raise ReplayReportInputError(
            f"{out_dir}: no cursors/ directory; expected the output of `mledger replay EVENTS {out_dir}`"
        )
    present = [c for c in _CURSOR_COLUMNS if c in dataset.schema.names]
    if "topic" not in present or "subscription" not in present:
        raise ReplayReportInputError(f"{out_dir}/cursors: columns topic and subscription are required")
    missing = [k for k in keys if k not in dataset.schema.names]
    if missing:
        raise ReplayReportInputError(f"{out_dir}/cursors: the swept setting {missing[0]} has no column")
    rows = dataset.to_table(columns=[*present, *keys]).to_pylist()
    for row in rows:
        for name, default in _CURSOR_COLUMNS.items():
            if row.get(name) is None:
                row[name] = default
    return rows


def _state(row: dict[str, Any]) -> SubscriptionState:
    return SubscriptionState(
        topic=str(row["topic"]),
        partition=int(row["partition"]),
        subscription=str(row["subscription"]),
        type=str(row["subscription_type"]),
        mark_delete=f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}",
        read=f"{row['read_ledger_id']}:{row['read_entry_id']}",
        hole_ranges=int(row["ack_hole_ranges"]),
        backlog=int(row["backlog"]),
        acked=int(row["acked"]),
        cancelled=int(row["cancelled"]),
        delayed_delivered=int(row["delayed_delivered"]),
        delayed_pending=int(row["delayed_pending"]),
        persisted_bytes=int(row["persisted_state_bytes"]),
        chunks=int(row["state_chunks"]),
        truncated_ranges=int(row["truncated_ranges"]),
        truncated_batch_indexes=int(row["truncated_batch_indexes"]),
        redelivered_after_restart=int(row["redelivered_after_restart"]),
        redelivered_after_restart_max=int(row["redelivered_after_restart_max"]),
        state_over_limit_at_ms=row["state_over_limit_at_ms"],
        **{
            name: int(row[name])
            for stop in _STOPS
            for name in (f"redelivered_after_{stop}", f"redelivered_after_{stop}_max")
        },
        **{f"redelivered_after_{stop}_max_at_ms": row[f"redelivered_after_{stop}_max_at_ms"] for stop in _STOPS},
    )


def _scan_anomalies(
    ds: Any, out_dir: str, only: tuple[tuple[str, Any], ...] = ()
) -> tuple[Counter[str], Counter[str], dict[str, list[dict[str, Any]]]]:
    """(count by reason, count by topic-partition, examples by reason), streaming; ``only``:
    the rows of one sweep combination. Rows whose key the replay cannot replay (no topic or
    no partition, e.g. a bad row of the subscriptions log) belong to no topic-partition, as in
    the replay's ``partitions`` output (:func:`mledger.replay.replayable`)."""
    from ..replay import replayable

    by_reason: Counter[str] = Counter()
    by_partition: Counter[str] = Counter()
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    dataset = _dataset(ds, os.path.join(out_dir, "anomalies"))
    if dataset is None:
        return by_reason, by_partition, examples
    columns = [c for c in _ANOMALY_COLUMNS if c in dataset.schema.names]
    if "reason" not in columns:
        raise ReplayReportInputError(f"{out_dir}/anomalies: column reason is required")
    for batch in dataset.to_batches(columns=columns, filter=_combination_filter(ds, only)):
        data = batch.to_pydict()
        reasons = data["reason"]
        topics = data.get("topic", [None] * len(reasons))
        partitions = data.get("partition", [None] * len(reasons))
        by_reason.update(r or "unknown" for r in reasons)
        for topic, partition in zip(topics, partitions, strict=True):
            if replayable(topic, partition):
                by_partition[topic if partition < 0 else f"{topic}-partition-{partition}"] += 1
        for i, reason in enumerate(reasons):
            kept = examples[reason or "unknown"]
            if len(kept) < EXAMPLES_PER_REASON:
                kept.append({name: data[name][i] for name in columns})
    return by_reason, by_partition, examples


def _meanings() -> dict[str, str]:
    try:
        from ..replay import REASONS
    except ImportError:  # the schema module needs pyarrow and numpy; both come with the extra
        return {}
    return dict(REASONS)


def _partitions(subs: Iterable[SubscriptionState], anomalies: Counter[str], limit: int) -> list[PartitionSummary]:
    grouped: dict[str, list[SubscriptionState]] = defaultdict(list)
    for sub in subs:
        grouped[sub.topic_partition].append(sub)
    for name in anomalies:
        grouped.setdefault(name, [])
    out = []
    for name, members in grouped.items():
        out.append(
            PartitionSummary(
                topic_partition=name,
                subscriptions=len(members),
                backlog=sum(m.backlog for m in members),
                max_hole_ranges=max((m.hole_ranges for m in members), default=0),
                max_utilisation=max((m.utilisation(limit) for m in members), default=0.0),
                max_persisted_bytes=max((m.persisted_bytes for m in members), default=0),
                max_chunks=max((m.chunks for m in members), default=0),
                truncated_ranges=sum(m.truncated_ranges for m in members),
                anomalies=anomalies.get(name, 0),
            )
        )
    out.sort(key=lambda p: (-p.truncated_ranges, -p.max_utilisation, -p.anomalies, -p.backlog, p.topic_partition))
    return out


SETTINGS_FILE = "settings.json"
"""Written by ``mledger replay`` beside its outputs: the settings it ran with."""


def recorded_limit(out_dir: str) -> int | None:
    """``max_unacked_ranges_to_persist`` from ``out_dir/settings.json``, or ``None`` when the
    output has no such file (replays before it was written). Raises
    :class:`ReplayReportInputError` when the file is there but unusable."""
    path = os.path.join(out_dir, SETTINGS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)["ledger"]["max_unacked_ranges_to_persist"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReplayReportInputError(f"{path}: not a replay settings file ({type(e).__name__}: {e})") from None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ReplayReportInputError(f"{path}: max_unacked_ranges_to_persist is {value!r}, not a count")
    return value


def recorded_sweep(out_dir: str) -> dict[str, list[Any]]:
    """The swept settings and their values from ``out_dir/settings.json`` (``{}`` when the
    replay was no sweep or recorded none)."""
    path = os.path.join(out_dir, SETTINGS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            sweep = json.load(f).get("sweep") or {}
    except (OSError, ValueError, AttributeError) as e:
        raise ReplayReportInputError(f"{path}: not a replay settings file ({type(e).__name__}: {e})") from None
    if not isinstance(sweep, dict) or not all(isinstance(v, list) and v for v in sweep.values()):
        raise ReplayReportInputError(f"{path}: sweep is {sweep!r}, not lists of values by setting")
    return sweep


def recorded_ledger_settings(out_dir: str) -> dict[str, Any]:
    """The ``ledger`` settings of ``out_dir/settings.json`` (``{}`` without the file); a sweep's
    swept keys hold the base it started from there."""
    path = os.path.join(out_dir, SETTINGS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            ledger = json.load(f).get("ledger") or {}
    except (OSError, ValueError, AttributeError) as e:
        raise ReplayReportInputError(f"{path}: not a replay settings file ({type(e).__name__}: {e})") from None
    if not isinstance(ledger, dict):
        raise ReplayReportInputError(f"{path}: ledger is {ledger!r}, not settings by name")
    return ledger


def _ack_format(ledger: dict[str, Any], values: dict[str, Any]) -> str:
    """The individual-ack format of a combination: its swept values over the recorded base."""
    chosen = {**ledger, **values}
    try:
        config = ManagedLedgerConfig(
            persist_individual_ack_as_long_array=bool(chosen.get("persist_individual_ack_as_long_array", False)),
            individual_ack_format=chosen.get("individual_ack_format"),
        )
    except ConfigError as e:
        raise ReplayReportInputError(f"settings.json: {e}") from None
    return config.effective_ack_format


def _combination_filter(ds: Any, only: tuple[tuple[str, Any], ...]) -> Any:
    expr = None
    for key, value in only:
        term = ds.field(key).is_null() if value is None else ds.field(key) == value
        expr = term if expr is None else expr & term
    return expr


def _sweep_settings(
    ds: Any, out_dir: str, sweep: dict[str, list[Any]], rows: list[dict[str, Any]], limit: int
) -> list[SweepSetting]:
    keys = list(sweep)
    ledger = recorded_ledger_settings(out_dir)
    anomalies: Counter[tuple[Any, ...]] = Counter()
    dataset = _dataset(ds, os.path.join(out_dir, "anomalies"))
    if dataset is not None and all(k in dataset.schema.names for k in keys):
        table = dataset.to_table(columns=keys)
        if table.num_rows:
            grouped = table.group_by(keys).aggregate([([], "count_all")])
            for row in grouped.to_pylist():
                anomalies[tuple(row[k] for k in keys)] += row["count_all"]
    by_values: dict[tuple[Any, ...], list[SubscriptionState]] = defaultdict(list)
    for row in rows:
        by_values[tuple(row[k] for k in keys)].append(_state(row))
    out = []
    for combo in itertools.product(*sweep.values()):
        values = tuple(zip(keys, combo, strict=False))
        own = dict(values).get("max_unacked_ranges_to_persist", limit)
        subs = by_values.get(tuple(combo), [])
        out.append(
            SweepSetting(
                label=", ".join(f"{k}={v}" for k, v in values),
                values=values,
                limit=own,
                ack_format=_ack_format(ledger, dict(values)),
                subscriptions=len(subs),
                hole_ranges=sum(s.hole_ranges for s in subs),
                truncated_ranges=sum(s.truncated_ranges for s in subs),
                truncated_batch_indexes=sum(s.truncated_batch_indexes for s in subs),
                persisted_bytes=sum(s.persisted_bytes for s in subs),
                max_persisted_bytes=max((s.persisted_bytes for s in subs), default=0),
                max_chunks=max((s.chunks for s in subs), default=0),
                over_limit=sum(1 for s in subs if s.over_limit(own)),
                anomalies=anomalies.get(tuple(combo), 0),
                redelivered_after_restart=sum(s.redelivered_after_restart for s in subs),
                redelivered_after_restart_max=sum(s.redelivered_after_restart_max for s in subs),
                **_stop_sums(subs),
                state_over_store_limit=sum(1 for s in subs if s.state_over_limit_at_ms is not None),
            )
        )
    return out


def _stop_sums(subs: list[SubscriptionState]) -> dict[str, int]:
    """The stop figures summed over ``subs``: at the end and each subscription's worst."""
    names = [f"redelivered_after_{stop}{part}" for stop in _STOPS for part in ("", "_max")]
    return {name: sum(getattr(s, name) for s in subs) for name in names}


def load_model(out_dir: str, limit: int) -> ReportModel:
    """Read ``out_dir`` and summarise it against ``limit`` (``max_unacked_ranges_to_persist``).

    Raises :class:`ReplayReportInputError` for a directory that is not a replay output and
    :class:`~mledger.core.MissingExtraError` without pyarrow.
    """
    if limit < 0:
        raise ValueError(f"max_unacked_ranges_to_persist must be >= 0, got {limit}")
    ds = _pyarrow()
    sweep = recorded_sweep(out_dir)
    rows = _read_cursors(ds, out_dir, sweep)
    settings: list[SweepSetting] = []
    only: tuple[tuple[str, Any], ...] = ()
    if sweep:  # per-subscription figures for the first combination; the sweep chart compares them all
        settings = _sweep_settings(ds, out_dir, sweep, rows, limit)
        only = settings[0].values
        limit = settings[0].limit
        rows = [row for row in rows if all(row[k] == v for k, v in only)]
    subs = [_state(row) for row in rows]
    subs.sort(key=lambda s: (-s.hole_ranges, -s.persisted_bytes, s.topic_partition, s.subscription))
    by_reason, by_partition, examples = _scan_anomalies(ds, out_dir, only)
    meanings = _meanings()
    anomalies = [
        AnomalyKind(reason, count, meanings.get(reason, ""), tuple(examples.get(reason, ())))
        for reason, count in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    partitions = _partitions(subs, by_partition, limit)
    totals = {
        "topic_partitions": len({s.topic_partition for s in subs} | set(by_partition)),
        "subscriptions": len(subs),
        "backlog": sum(s.backlog for s in subs),
        "hole_ranges": sum(s.hole_ranges for s in subs),
        "max_hole_ranges": max((s.hole_ranges for s in subs), default=0),
        "acked": sum(s.acked for s in subs),
        "cancelled": sum(s.cancelled for s in subs),
        "anomalies": sum(by_reason.values()),
        "unplaced_anomalies": sum(by_reason.values()) - sum(by_partition.values()),
        "over_limit": sum(1 for s in subs if s.over_limit(limit)),
        "near_limit": sum(1 for s in subs if not s.over_limit(limit) and s.utilisation(limit) >= NEAR_LIMIT),
        "truncated_ranges": sum(s.truncated_ranges for s in subs),
        "max_persisted_bytes": max((s.persisted_bytes for s in subs), default=0),
        "max_chunks": max((s.chunks for s in subs), default=0),
        "chunked": sum(1 for s in subs if s.chunks > 1),
        "redelivered_after_restart": sum(s.redelivered_after_restart for s in subs),
        "redelivered_after_restart_max": sum(s.redelivered_after_restart_max for s in subs),
        **_stop_sums(subs),
        "state_over_store_limit": sum(1 for s in subs if s.state_over_limit_at_ms is not None),
    }
    return ReportModel(
        os.path.abspath(out_dir),
        limit,
        subs,
        partitions,
        anomalies,
        totals,
        tuple(settings),
        settings[0].label if settings else "",
    )
