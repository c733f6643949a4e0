"""Hand-written event logs: rows as dicts, to files or straight through the engine.

For tests and experiments. A row is a dict with ``"log"`` (``produced``, ``acked``,
``cancelled`` or ``subscriptions``) and that log's columns; missing columns are null, so

>>> rows = [
...     {"log": "produced", "topic": "t", "partition": 0, "ledger_id": 3, "entry_id": 0, "publish_time_ms": 10},
...     {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 3, "entry_id": 0, "ts_ms": 20},
... ]
>>> out = replay_rows(rows)
>>> out["cursors"].select(["subscription", "mark_delete_ledger_id", "mark_delete_entry_id", "backlog"]).to_pylist()
[{'subscription': 's', 'mark_delete_ledger_id': 3, 'mark_delete_entry_id': 0, 'backlog': 0}]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ._engine import ModelFactory
from ._generate import _CsvSink, _JsonSink
from ._local import output_tables, replay_table
from ._model import SubscriptionSpec
from ._schema import EVENT_LOGS, EVENT_SCHEMA, input_schema, to_events
from ._settings import ReplaySettings

LOGS = (*EVENT_LOGS, "subscriptions")


def log_tables(rows: Iterable[Mapping[str, Any]]) -> dict[str, pa.Table]:
    """Rows grouped by ``"log"`` into tables of each log's canonical schema (input order kept)."""
    by_log: dict[str, list[dict[str, Any]]] = {log: [] for log in LOGS}
    for row in rows:
        log = row["log"]
        if log not in by_log:
            raise ValueError(f"unknown log {log!r}; expected one of {', '.join(LOGS)}")
        by_log[log].append({k: v for k, v in row.items() if k != "log"})
    return {log: pa.Table.from_pylist(items, schema=input_schema(log)) for log, items in by_log.items()}


def write_logs(directory: str, rows: Iterable[Mapping[str, Any]], fmt: str = "parquet") -> None:
    """Write the rows as an events directory (one file per non-empty log)."""
    import pyarrow.parquet as pq

    for log, table in log_tables(rows).items():
        if table.num_rows == 0:
            continue
        os.makedirs(os.path.join(directory, log), exist_ok=True)
        ext = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv"}[fmt]
        path = os.path.join(directory, log, f"part-00000.{ext}")
        if fmt == "parquet":
            pq.write_table(table, path)
            continue
        sink = _CsvSink(path, table.schema) if fmt == "csv" else _JsonSink(path)
        sink.write(table)
        sink.close()


def event_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """The rows' events in :data:`~.schema.EVENT_SCHEMA`, as the reader would produce them."""
    tables = log_tables(rows)
    batches = [
        to_events(log, batch, 0, 0)
        for log in EVENT_LOGS
        for batch in tables[log].combine_chunks().to_batches()
        if batch.num_rows
    ]
    return pa.Table.from_batches(batches, EVENT_SCHEMA)


def declared(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[SubscriptionSpec, ...]]:
    """The ``subscriptions`` rows as declarations per topic (assumed valid)."""
    out: dict[str, list[SubscriptionSpec]] = {}
    for row in rows:
        if row["log"] == "subscriptions":
            spec = SubscriptionSpec(
                row["subscription"],
                (row.get("type") or "SHARED").upper(),
                (row.get("initial_position") or "earliest").lower(),
            )
            out.setdefault(row["topic"], []).append(spec)
    return {k: tuple(v) for k, v in out.items()}


def replay_rows(
    rows: Sequence[Mapping[str, Any]],
    settings: ReplaySettings | None = None,
    feed_rows: int = 10_000,
    model_factory: ModelFactory | None = None,
) -> dict[str, pa.Table]:
    """Replay hand-written rows in this process; the ``cursors``, ``anomalies`` and
    ``partitions`` tables."""
    batches = replay_table(event_table(rows), settings, declared(rows), feed_rows, model_factory)
    return output_tables(batches)
