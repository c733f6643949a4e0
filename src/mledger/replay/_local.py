"""The single-process replay, and in-memory replays of event tables (tests, experiments).

:func:`run_single_process` replays a prepared log with the very task the Spark job runs on
its executors (:func:`~.tasks.run_task`), here one task holding every topic-partition, read
one topic-partition at a time: memory stays flat in the size of the log. Raw logs are
prepared first, in this process (:mod:`.prepare`).

:func:`replay_table` replays an in-memory event table of any order (sorted by
:func:`by_partition`, which ``mledger watch`` feeds its live replay with).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._checks import OutputPathError, check_input_dir, check_output_dir
from ._engine import ModelFactory, PartitionReplayer, declared_for, replayable
from ._inputs import filesystem_for, plan_inputs
from ._layout import PreparedLog, PreparedPartition, is_prepared, open_prepared
from ._model import SubscriptionSpec
from ._prepare import prepare_in_process
from ._progress import Progress
from ._schema import ANOMALY_SCHEMA, EVENT_SCHEMA, OUTPUT_SCHEMA, OUTPUTS, split_output
from ._settings import ReplaySettings, write_settings
from ._summary import ReplaySummary, SweepSummary, read_summaries, reason_counts as reason_counts
from ._sweep import Variant, variants
from ._tasks import ReplayTask, commit_outputs, run_task, start_outputs, write_extra_anomalies

TEMPORARY_PREPARED = "_prepared"

FEED_ROWS = 10_000
"""Rows per batch fed to the engine (Spark's default ``maxRecordsPerBatch``)."""
_NULL_PARTITION = np.iinfo(np.int64).min
_NULL_TS = np.iinfo(np.int64).min  # Spark sorts nulls first


def replay_table(
    events: pa.Table,
    settings: ReplaySettings | None = None,
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]] | None = None,
    feed_rows: int = FEED_ROWS,
    model_factory: ModelFactory | None = None,
) -> Iterator[pa.RecordBatch]:
    """Replay an in-memory :data:`~.schema.EVENT_SCHEMA` table (any row order)."""
    settings = settings or ReplaySettings()
    for topic, partition, batches in by_partition(events, feed_rows):
        replayer = PartitionReplayer(
            topic, partition, settings, declared_for(subscriptions or {}, topic), model_factory
        )
        for batch in batches:
            yield from replayer.feed(batch)
        yield from replayer.finish()


def by_partition(
    events: pa.Table, feed_rows: int = FEED_ROWS
) -> Iterator[tuple[str | None, int | None, Iterator[pa.RecordBatch]]]:
    """An :data:`~.schema.EVENT_SCHEMA` table of any row order as each topic-partition's
    events in replay order, ``(ts, kind, seq)``: ``(topic, partition, batches)`` of at most
    ``feed_rows`` rows (sorted here with numpy; take a topic-partition's batches before the next)."""
    if events.num_rows == 0:
        return
    enc = pc.dictionary_encode(events["topic"]).combine_chunks()
    names: list[str | None] = enc.dictionary.to_pylist()
    codes = np.asarray(pc.fill_null(enc.indices, len(names)).to_numpy(zero_copy_only=False), np.int64)
    names.append(None)
    parts = np.asarray(
        pc.fill_null(pc.cast(events["partition"], pa.int64()), _NULL_PARTITION).to_numpy(zero_copy_only=False)
    )
    table = events.select([f.name for f in EVENT_SCHEMA if f.name not in ("topic", "partition")]).combine_chunks()
    cols = {name: table[name].to_numpy() for name in ("kind", "seq")}
    cols["ts"] = pc.fill_null(table["ts"], _NULL_TS).to_numpy()
    order = np.lexsort((cols["seq"], cols["kind"], cols["ts"], parts, codes))
    del cols
    t_sorted, p_sorted = codes[order], parts[order]
    bounds = np.flatnonzero((np.diff(t_sorted) != 0) | (np.diff(p_sorted) != 0)) + 1
    for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)], strict=False):
        topic = names[int(t_sorted[a])]
        part = int(p_sorted[a])
        partition = None if part == _NULL_PARTITION else part
        yield topic, partition, _batches(table, order[a:b], topic, partition, feed_rows)


def _batches(
    table: pa.Table, order: np.ndarray, topic: str | None, partition: int | None, feed_rows: int
) -> Iterator[pa.RecordBatch]:
    for c in range(0, len(order), feed_rows):
        chunk = table.take(order[c : c + feed_rows])
        n = chunk.num_rows
        yield pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(topic, pa.string()), n),
                pa.repeat(pa.scalar(partition, pa.int64()), n),
                *[chunk.column(i).combine_chunks() for i in range(chunk.num_columns)],
            ],
            schema=EVENT_SCHEMA,
        )


def output_tables(batches: Iterable[pa.RecordBatch], extra_anomalies: pa.Table | None = None) -> dict[str, pa.Table]:
    """Split union output batches into the ``cursors``, ``anomalies`` and ``partitions`` tables."""
    union = pa.Table.from_batches(list(batches), OUTPUT_SCHEMA)
    tables = {name: split_output(union, name) for name in OUTPUTS}
    if extra_anomalies is not None and extra_anomalies.num_rows:
        tables["anomalies"] = pa.concat_tables([tables["anomalies"], extra_anomalies.cast(ANOMALY_SCHEMA)])
    return tables


def run_single_process(
    input_dir: str,
    out_dir: str,
    settings: ReplaySettings | None = None,
    progress: bool | Progress = False,
    model_factory: ModelFactory | None = None,
    sweep: Sequence[str] = (),
    fixed: Sequence[str] = (),
    prepared: str | None = None,
) -> ReplaySummary | SweepSummary:
    """Replay ``input_dir`` into ``out_dir`` (Parquet ``cursors``, ``anomalies``, ``partitions``)
    in this process, one topic-partition at a time (memory flat in the size of the log).

    ``input_dir`` is a prepared log, or raw logs, which are prepared first (in this process)
    into ``prepared`` (kept) or ``out_dir/_prepared`` (removed after the replay). ``sweep``:
    ``KEY=V1,V2`` specs (see :mod:`.sweep`; ``fixed`` names the ``--set`` keys). Returns the
    summary, or a :class:`~.summary.SweepSummary` with a sweep.
    """
    settings = settings or ReplaySettings()
    started = time.perf_counter()
    chosen = variants(settings, sweep, fixed)
    check_input_dir(input_dir)
    check_output_dir(out_dir, input_dir)
    bar = progress if isinstance(progress, Progress) else Progress(0, "replay", enabled=None if progress else False)
    try:
        log, temporary = prepared_log(input_dir, out_dir, prepared, bar)
        start_outputs(out_dir)
        task = ReplayTask(0, log.manifest.partitions)
        bar.set_total(log.manifest.events, "replay (single process)")
        bar.update(0)
        result = run_task(log, task, chosen, log.subscriptions(), out_dir, "a0", model_factory, bar.advance)
        extra = write_extra_anomalies(out_dir, log.anomalies(), chosen)
        commit_outputs(out_dir, [result], extra)
    finally:
        bar.close()
    if temporary:
        remove_tree(log.root)
    return finish_summary(
        out_dir,
        chosen,
        settings,
        time.perf_counter() - started,
        "single process",
        unkeyed_events(log.manifest.partitions),
    )


def prepared_log(input_dir: str, out_dir: str, prepared: str | None, bar: Progress | None) -> tuple[PreparedLog, bool]:
    """The prepared log to replay: ``input_dir`` itself, or raw logs prepared in this process
    into ``prepared`` or a temporary ``out_dir/_prepared``; (log, whether it is temporary)."""
    if is_prepared(input_dir):
        if prepared is not None:
            raise OutputPathError(f"--prepared {prepared}: {input_dir} is already a prepared log")
        return open_prepared(input_dir), False
    target = prepared or temporary_prepared_dir(out_dir)
    if prepared is None:
        fs, root = filesystem_for(out_dir)
        fs.create_dir(root, recursive=True)
    check_output_dir(target, input_dir, what="prepared log")
    plan = plan_inputs(input_dir)
    prepare_in_process(plan, target, bar)
    return open_prepared(target), prepared is None


def temporary_prepared_dir(out_dir: str) -> str:
    """Where a replay of raw logs prepares them when not told where: beside its outputs, so
    on a cluster the executors can read it wherever they can write the outputs."""
    return out_dir.rstrip("/") + "/" + TEMPORARY_PREPARED


def remove_tree(path: str) -> None:
    fs, p = filesystem_for(path)
    fs.delete_dir_contents(p, missing_dir_ok=True)
    fs.delete_dir(p)


def unkeyed_events(partitions: Sequence[PreparedPartition]) -> int:
    """Events of the prepared keys that cannot be replayed (no ``partitions`` rows of their own)."""
    return sum(p.rows for p in partitions if not replayable(p.topic, p.partition))


def finish_summary(
    out_dir: str, chosen: Sequence[Variant], settings: ReplaySettings, seconds: float, engine: str, unkeyed: int = 0
) -> ReplaySummary | SweepSummary:
    """Write ``settings.json`` and return the summary (a sweep's with several combinations);
    ``unkeyed`` events (see :func:`unkeyed_events`) count in its events."""
    keys = tuple(k for k, _ in chosen[0].values)
    values = [tuple(v for _, v in variant.values) for variant in chosen]
    summaries = read_summaries(out_dir, keys, values, seconds, engine, unkeyed)
    swept = {k: list(dict.fromkeys(vals[i] for vals in values)) for i, k in enumerate(keys)}
    write_settings(out_dir, settings, engine, swept)
    if not keys:
        return summaries[0]
    formats = tuple(variant.settings.ack_format for variant in chosen)
    return SweepSummary(keys, tuple(values), tuple(summaries), seconds, engine, out_dir, formats)
