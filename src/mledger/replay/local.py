"""The single-process replay: the same files, reader and engine as the Spark job, no Spark.

Reads every event with :func:`~.inputs.read_task`, sorts once by ``(topic, partition, ts,
kind, seq)`` with numpy (topics as integer codes), and streams each topic-partition through
a :class:`~.engine.PartitionReplayer` in batches. It holds all events in memory (about 90
bytes per event): it is the reference the Spark job is checked against and the baseline of
the benchmark, not the way to replay logs larger than memory.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .engine import ModelFactory, PartitionReplayer, declared_for
from .inputs import InputPlan, filesystem_for, plan_inputs, read_task
from .model import SubscriptionSpec
from .progress import Progress
from .schema import ANOMALY_SCHEMA, EVENT_SCHEMA, OUTPUT_SCHEMA, OUTPUTS, split_output
from .settings import ReplaySettings, write_settings
from .summary import ReplaySummary, summarize

FEED_ROWS = 10_000
"""Rows per batch fed to the engine (Spark's default ``maxRecordsPerBatch``)."""
_NULL_PARTITION = np.iinfo(np.int64).min
_NULL_TS = np.iinfo(np.int64).min  # Spark sorts nulls first


def _load(plan: InputPlan, progress: Progress | None) -> tuple[pa.Table, list[str | None], np.ndarray, np.ndarray]:
    """All events without their key columns, plus topic codes and partitions per row."""
    topics: dict[str | None, int] = {}
    batches: list[pa.RecordBatch] = []
    codes: list[np.ndarray] = []
    parts: list[np.ndarray] = []
    rows = 0
    keep = [f.name for f in EVENT_SCHEMA if f.name not in ("topic", "partition")]
    for task in plan.tasks:
        for batch in read_task(task, plan.filesystem):
            enc = pc.dictionary_encode(batch.column("topic"))
            lookup = np.array([topics.setdefault(v, len(topics)) for v in enc.dictionary.to_pylist()] + [0], np.int64)
            idx = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), np.int64)
            null_code = topics.setdefault(None, len(topics)) if enc.indices.null_count else -1
            codes.append(np.where(idx < 0, null_code, lookup[idx]))
            part = batch.column("partition")
            parts.append(np.asarray(pc.fill_null(pc.cast(part, pa.int64()), _NULL_PARTITION).to_numpy(zero_copy_only=False)))
            batches.append(batch.select(keep))
            rows += batch.num_rows
            if progress is not None:
                progress.update(rows, "reading")
    schema = pa.schema([EVENT_SCHEMA.field(n) for n in keep])
    table = pa.Table.from_batches(batches, schema)
    names: list[str | None] = [None] * len(topics)
    for name, code in topics.items():
        names[code] = name
    empty = np.empty(0, np.int64)
    return (table, names, np.concatenate(codes) if codes else empty, np.concatenate(parts) if parts else empty)


def replay_events(
    plan: InputPlan,
    settings: ReplaySettings,
    progress: Progress | None = None,
    model_factory: ModelFactory | None = None,
) -> Iterator[pa.RecordBatch]:
    """Replay every topic-partition of the plan; yields :data:`~.schema.OUTPUT_SCHEMA` batches."""
    table, topic_names, topic_codes, partitions = _load(plan, progress)
    yield from _replay_sorted(table, topic_names, topic_codes, partitions, plan.subscriptions, settings,
                              progress, model_factory)


def replay_table(
    events: pa.Table,
    settings: ReplaySettings | None = None,
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]] | None = None,
    feed_rows: int = FEED_ROWS,
    model_factory: ModelFactory | None = None,
) -> Iterator[pa.RecordBatch]:
    """Replay an in-memory :data:`~.schema.EVENT_SCHEMA` table (any row order)."""
    enc = pc.dictionary_encode(events["topic"]).combine_chunks()
    names: list[str | None] = enc.dictionary.to_pylist()
    codes = np.asarray(pc.fill_null(enc.indices, len(names)).to_numpy(zero_copy_only=False), np.int64)
    names.append(None)
    parts = np.asarray(pc.fill_null(pc.cast(events["partition"], pa.int64()), _NULL_PARTITION).to_numpy(zero_copy_only=False))
    rest = events.select([f.name for f in EVENT_SCHEMA if f.name not in ("topic", "partition")])
    yield from _replay_sorted(rest, names, codes, parts, subscriptions or {}, settings or ReplaySettings(),
                              None, model_factory, feed_rows)


def _replay_sorted(
    table: pa.Table,
    topic_names: Sequence[str | None],
    topic_codes: np.ndarray,
    partitions: np.ndarray,
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]],
    settings: ReplaySettings,
    progress: Progress | None,
    model_factory: ModelFactory | None,
    feed_rows: int = FEED_ROWS,
) -> Iterator[pa.RecordBatch]:
    if table.num_rows == 0:
        return
    table = table.combine_chunks()
    cols = {name: table[name].to_numpy() for name in ("kind", "seq")}
    cols["ts"] = pc.fill_null(table["ts"], _NULL_TS).to_numpy()
    order = np.lexsort((cols["seq"], cols["kind"], cols["ts"], partitions, topic_codes))
    del cols
    t_sorted, p_sorted = topic_codes[order], partitions[order]
    bounds = np.flatnonzero((np.diff(t_sorted) != 0) | (np.diff(p_sorted) != 0)) + 1
    done = 0
    for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)]):
        topic = topic_names[int(t_sorted[a])]
        part = int(p_sorted[a])
        partition = None if part == _NULL_PARTITION else part
        replayer = PartitionReplayer(topic, partition, settings, declared_for(subscriptions, topic), model_factory)
        for c in range(a, b, feed_rows):
            chunk = table.take(order[c:min(c + feed_rows, b)])
            n = chunk.num_rows
            batch = pa.RecordBatch.from_arrays(
                [pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int64()), n),
                 *[chunk.column(i).combine_chunks() for i in range(chunk.num_columns)]],
                schema=EVENT_SCHEMA,
            )
            yield from replayer.feed(batch)
            done += chunk.num_rows
            if progress is not None:
                progress.update(done, "replaying")
        yield from replayer.finish()


def output_tables(batches: Iterable[pa.RecordBatch], extra_anomalies: pa.Table | None = None) -> dict[str, pa.Table]:
    """Split union output batches into the ``cursors``, ``anomalies`` and ``partitions`` tables."""
    union = pa.Table.from_batches(list(batches), OUTPUT_SCHEMA)
    tables = {name: split_output(union, name) for name in OUTPUTS}
    if extra_anomalies is not None and extra_anomalies.num_rows:
        tables["anomalies"] = pa.concat_tables([tables["anomalies"], extra_anomalies.cast(ANOMALY_SCHEMA)])
    return tables


def write_outputs(out_dir: str, tables: dict[str, pa.Table]) -> None:
    """Write each output as ``out_dir/<name>/part-00000.parquet`` (replacing the directory);
    ``out_dir`` is a local path or a URI pyarrow's filesystems understand."""
    fs, root = filesystem_for(out_dir)
    for name, table in tables.items():
        directory = posixpath.join(root, name)
        fs.delete_dir_contents(directory, missing_dir_ok=True)
        fs.create_dir(directory, recursive=True)
        pq.write_table(table, posixpath.join(directory, "part-00000.parquet"), filesystem=fs)


def run_single_process(
    events_dir: str,
    out_dir: str,
    settings: ReplaySettings | None = None,
    progress: bool = False,
    model_factory: ModelFactory | None = None,
) -> ReplaySummary:
    """Replay ``events_dir`` into ``out_dir`` (Parquet ``cursors``, ``anomalies``, ``partitions``)."""
    settings = settings or ReplaySettings()
    started = time.perf_counter()
    plan = plan_inputs(events_dir)
    bar = Progress(plan.known_rows, "replay (single process)", enabled=None if progress else False)
    tables = output_tables(replay_events(plan, settings, bar, model_factory), plan.subscription_anomalies)
    bar.close()
    write_outputs(out_dir, tables)
    counts = reason_counts(tables["anomalies"])
    summary = summarize(tables["cursors"], tables["partitions"], counts, time.perf_counter() - started,
                        "single process", out_dir)
    write_settings(out_dir, settings, "single process")
    return summary


def reason_counts(anomalies: pa.Table) -> dict[str, int]:
    """Anomalies per reason of an anomalies table (or one with just its ``reason`` column)."""
    if anomalies.num_rows == 0:
        return {}
    grouped = anomalies.group_by("reason").aggregate([("reason", "count")])
    return dict(zip(grouped["reason"].to_pylist(), grouped["reason_count"].to_pylist()))
