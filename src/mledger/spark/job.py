"""The Spark job: ``run_replay(spark, events_dir, out_dir, settings)``.

Plan (checked with ``explain()``; see ``tests/test_spark_job.py``)::

    Scan parquet (one per file) -> Project (to the event schema) # Spark reads Parquet natively
      [+ MapInArrow(read_task) for JSON Lines / CSV files]      # pyarrow reads the text formats
      -> Union
      -> Exchange hashpartitioning(topic, partition, N)         # repartition(N, topic, partition)
      -> Sort [topic, partition, ts, kind, seq]                 # sortWithinPartitions
      -> FlatMapGroupsInArrow(replay)                           # groupBy(...).applyInArrow, iterator form
      -> persisted once, written as cursors / anomalies / partitions (Parquet)

The replay function has the iterator signature ``(key, Iterator[RecordBatch]) ->
Iterator[RecordBatch]``, so a topic-partition streams through the engine batch by batch
(``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) and is never held whole in a Python
worker. Spark does not promise to keep rows of a group in the sorted order; the engine
checks ``(ts, kind, seq)`` on every batch and fails the job if it goes backwards.

Parquet files are read by Spark; the select turns them into exactly the rows
:func:`~.schema.to_events` makes (the equality tests check it), with the input order
``seq`` taken from the plan's file index and ``_metadata.row_index``. JSON Lines and CSV
files are read on the executors with :func:`~.inputs.read_task`. Row validation happens in
the replay (:func:`~.schema.check_events`), the same code for every way of reading.
"""

import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .engine import ModelFactory, declared_for, replay_partition
from .inputs import InputPlan, ReadTask, plan_inputs, read_task
from .model import SubscriptionSpec
from .progress import Progress
from .schema import (
    ANOMALY_SCHEMA,
    EVENT_SCHEMA,
    GROUP_KEYS,
    INT,
    KIND_OF_LOG,
    LOG_COLUMNS,
    OUTPUT_SCHEMA,
    OUTPUTS,
    RECORD_FIELD,
    SEQ_FILE_SHIFT,
    SORT_KEYS,
    ddl,
)
from .settings import ReplaySettings
from .summary import ReplaySummary, summarize

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame, SparkSession


def _reader(tasks: tuple[ReadTask, ...], fs: "pafs.FileSystem") -> Any:
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from read_task(tasks[i], fs)

    return read


def _replayer(
    settings: ReplaySettings,
    subscriptions: dict,
    model_factory: ModelFactory | None,
) -> Any:
    declared: dict[str, tuple[SubscriptionSpec, ...]] = subscriptions

    def replay(key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        topic, partition = key[0].as_py(), key[1].as_py()
        yield from replay_partition(topic, partition, batches, settings, declared_for(declared, topic), model_factory)

    return replay


PER_FILE_SCANS = 256
"""Up to this many Parquet files per log are read as one scan each (file index a literal);
more are read as one scan, the index looked up from ``_metadata.file_path`` per row."""


def _parquet_events(spark: "SparkSession", plan: InputPlan, log: str, files: list) -> "DataFrame":
    """One log's Parquet files read natively, as :data:`~.schema.EVENT_SCHEMA` rows.

    The same result as :func:`~.schema.to_events` on the same files: ``seq`` from the file's
    index in the plan (matched on its path relative to the log directory) and
    ``_metadata.row_index``; unknown ``ack_type`` text becomes a problem. Integer columns
    are read as bigint (Spark widens narrower Parquet integers); absent optional columns are
    null. Nothing here can fail on a bad value: validation happens in the replay.
    """
    from pyspark.sql import functions as F

    read_schema = ", ".join(f"`{c.name}` {'bigint' if c.kind == INT else 'string'}" for c in LOG_COLUMNS[log])
    index = {f: i for i, f in enumerate(plan.files[log])}
    if len(files) <= PER_FILE_SCANS:
        # One scan per file with its index as a literal: no per-row string work.
        scans = [spark.read.schema(read_schema).parquet(plan.uri(f))
                 .withColumn("_file", F.lit(index[f]).cast("bigint"))
                 .withColumn("_row", F.col("_metadata.row_index")) for f in files]
        frame = scans[0]
        for scan in scans[1:]:
            frame = frame.unionByName(scan)
        file_index, row_index = F.col("_file"), F.col("_row")
    else:
        frame = spark.read.schema(read_schema).parquet(*[plan.uri(f) for f in files])
        relative = {plan.relative(log, f): i for f, i in index.items()}
        path = F.url_decode(F.col("_metadata.file_path"))
        directory = plan.log_dirs.get(log)
        pattern = re.escape(directory.rstrip("/") + "/") + "(.*)$" if directory else r"([^/]*)$"
        mapping = F.create_map(*[F.lit(v) for kv in relative.items() for v in kv])
        file_index = F.try_element_at(mapping, F.regexp_extract(path, pattern, 1)).cast("bigint")
        row_index = F.col("_metadata.row_index")
    seq = F.shiftleft(file_index, SEQ_FILE_SHIFT).bitwiseOR(row_index)
    produced = log == "produced"
    null_long = F.lit(None).cast("bigint")
    if log == "acked":
        text = F.col("ack_type")
        lowered = F.lower(F.trim(text))  # only evaluated for text that is not already exact
        ack = (F.when(text.isNull(), F.lit(None)).when(text == "individual", F.lit(0))
               .when(text == "cumulative", F.lit(1)).when(lowered == "individual", F.lit(0))
               .when(lowered == "cumulative", F.lit(1)).otherwise(F.lit(-1))).cast("tinyint")
        problem = F.when(ack == -1, F.concat(F.lit("unknown ack_type '"), F.col("ack_type"), F.lit("'")))
    else:
        ack = F.lit(None).cast("tinyint")
        problem = F.lit(None).cast("string")
    return frame.select(
        F.col("topic"), F.col("partition"),
        F.col("publish_time_ms" if produced else "ts_ms").alias("ts"),
        F.lit(KIND_OF_LOG[log]).cast("tinyint").alias("kind"), seq.alias("seq"),
        F.col("producer_name" if produced else "subscription").alias("name"),
        F.col("ledger_id"), F.col("entry_id"),
        F.col("batch_size" if produced else "batch_index").alias("batch"),
        F.col("deliver_at_ms") if produced else null_long.alias("deliver_at_ms"),
        F.col("sequence_id") if produced else null_long.alias("sequence_id"),
        ack.alias("ack_type"), problem.alias("problem"),
    )


def events_dataframe(spark: "SparkSession", plan: InputPlan) -> "DataFrame":
    """Every event of the plan: Parquet read natively, JSON Lines / CSV by pyarrow tasks."""
    frames = []
    for log in KIND_OF_LOG:
        parquet = sorted({t.path for t in plan.tasks if t.log == log and t.fmt == "parquet"})
        if parquet:
            frames.append(_parquet_events(spark, plan, log, parquet))
    text = tuple(t for t in plan.tasks if t.fmt != "parquet")
    if text:
        frames.append(spark.range(0, len(text), 1, len(text)).mapInArrow(_reader(text, plan.filesystem),
                                                                          ddl(EVENT_SCHEMA)))
    if not frames:
        return spark.createDataFrame([], ddl(EVENT_SCHEMA))
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame)
    return events


def replay_dataframe(
    spark: "SparkSession",
    plan: InputPlan,
    settings: ReplaySettings,
    model_factory: ModelFactory | None = None,
) -> "DataFrame":
    """The lazy DataFrame of the replay's union output (:data:`~.schema.OUTPUT_SCHEMA`)."""
    n = settings.partitions or max(2 * spark.sparkContext.defaultParallelism, 1)
    return (
        events_dataframe(spark, plan)
        .repartition(n, *GROUP_KEYS)
        .sortWithinPartitions(*SORT_KEYS)
        .groupBy(*GROUP_KEYS)
        .applyInArrow(_replayer(settings, plan.subscriptions, model_factory), ddl(OUTPUT_SCHEMA))
    )


class _StageProgress:
    """Polls Spark's status tracker and draws the running stages' task counts (TTY only)."""

    def __init__(self, spark: "SparkSession", label: str, enabled: bool) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._bar = Progress(0, label, unit="tasks", enabled=None if enabled else False, show_rate=False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.enabled = self._bar.enabled

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            active = self._tracker.getActiveStageIds()
            done = total = running = 0
            for sid in active:
                info = self._tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
                    running += info.numActiveTasks
            if active:
                self._bar.total = total
                self._bar.update(done, f"stage {max(active)}, {running} running")

    def __enter__(self) -> "_StageProgress":  # noqa: PYI034 - final class
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()
            self._bar.close()


def run_replay(
    spark: "SparkSession",
    events_dir: str,
    out_dir: str,
    settings: ReplaySettings | None = None,
    progress: bool = False,
    model_factory: ModelFactory | None = None,
) -> ReplaySummary:
    """Replay the logs in ``events_dir`` on ``spark``; write ``out_dir/{cursors,anomalies,partitions}``.

    Input files are checked first (:class:`~.schema.InputSchemaError` before any Spark job
    runs). Returns the summary; :func:`~.summary.format_summary` prints it.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    settings = settings or ReplaySettings()
    started = time.perf_counter()
    plan = plan_inputs(events_dir)
    out = replay_dataframe(spark, plan, settings, model_factory).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with _StageProgress(spark, "replay (spark)", progress):
            for name, schema in OUTPUTS.items():
                frame = out.where(F.col(RECORD_FIELD) == name).select(*schema.names)
                if name == "anomalies" and plan.subscription_anomalies.num_rows:
                    extra = spark.createDataFrame(plan.subscription_anomalies.to_pandas(), ddl(ANOMALY_SCHEMA))
                    frame = frame.unionByName(extra)
                if name != "anomalies":
                    frame = frame.coalesce(1)
                frame.write.mode("overwrite").parquet(f"{out_dir.rstrip('/')}/{name}")
            small = [c for c in OUTPUTS["cursors"].names if c != "state"]
            cursors = out.where(F.col(RECORD_FIELD) == "cursors").select(*small).toArrow()
            partitions = out.where(F.col(RECORD_FIELD) == "partitions").select(*OUTPUTS["partitions"].names).toArrow()
            counts = {
                r["reason"]: int(r["count"])
                for r in out.where(F.col(RECORD_FIELD) == "anomalies").groupBy("reason").count().collect()
            }
    finally:
        out.unpersist()
    for row in plan.subscription_anomalies.to_pylist():
        counts[row["reason"]] = counts.get(row["reason"], 0) + 1
    return summarize(cursors, partitions, counts, time.perf_counter() - started, "spark", out_dir)


def main_submit(argv: list | None = None) -> int:
    """``spark-submit ... submit_job.py EVENTS OUT [--set k=v ...] [--emit-state] [--partitions N]``.

    Uses the session spark-submit configured (master, resources); prints the summary.
    """
    import argparse

    from pyspark.sql import SparkSession

    from .summary import format_summary

    parser = argparse.ArgumentParser(prog="submit_job.py", description="mledger event-log replay (spark-submit)")
    parser.add_argument("events")
    parser.add_argument("out")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--emit-state", action="store_true")
    parser.add_argument("--partitions", type=int, default=None)
    args = parser.parse_args(argv)
    settings = ReplaySettings.from_pairs(args.settings).with_changes(emit_state=args.emit_state, partitions=args.partitions)
    spark = SparkSession.builder.appName("mledger-replay").getOrCreate()
    try:
        summary = run_replay(spark, args.events, args.out, settings)
    finally:
        spark.stop()
    print(format_summary(summary))
    sys.stdout.flush()
    return 0
