"""The Spark job: ``run_replay(spark, events_dir, out_dir, settings)``.

Plan (checked with ``explain()``; see ``tests/test_spark_job.py``)::

    Scan parquet (one per file) -> Project (to the packed wire columns, WIRE_COLUMNS)
      [+ MapInArrow(read_task) for JSON Lines / CSV files]      # pyarrow reads the text formats
      -> Union
      -> Exchange hashpartitioning(topic_key, partition, N)     # repartition(N, ...)
      -> Sort [topic_key, partition, ts, kind_seq]              # sortWithinPartitions
      -> FlatMapGroupsInArrow(replay)                           # groupBy(...).applyInArrow, iterator form
      -> persisted once: anomalies written by Spark, cursor / partition rows and anomaly
         counts collected in one job and written by the driver

``topic_key`` is ``xxhash64(topic)``: the driver maps it back to the name (Parquet topics
read up front, text rows carry theirs) and a collision fails the replay. The group keys are
the sort's prefix, so Spark adds no second sort (checked in the tests).

The replay function has the iterator signature ``(key, Iterator[RecordBatch]) ->
Iterator[RecordBatch]``, so a topic-partition streams through the engine batch by batch
(``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) and is never held whole in a Python
worker. Spark does not promise to keep rows of a group in the sorted order; the engine
checks ``(ts, kind, seq)`` on every batch and fails the job if it goes backwards. The
replay's queries run with :data:`REPLAY_SQL_CONF`.

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
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import MLedgerError
from ..engine import ModelFactory, PartitionReplayer, declared_for
from ..inputs import InputPlan, ReadTask, filesystem_for, parquet_topics, plan_inputs, read_task
from ..model import SubscriptionSpec
from ..progress import Progress
from ..schema import (
    ANOMALY_SCHEMA,
    CURSOR_SCHEMA,
    EVENT_SCHEMA,
    INT,
    KIND_OF_LOG,
    LOG_COLUMNS,
    OUTPUT_SCHEMA,
    OUTPUTS,
    RECORD_FIELD,
    SEQ_FILE_SHIFT,
    ddl,
)
from ..local import reason_counts, write_outputs
from ..settings import ReplaySettings, write_settings
from ..summary import ReplaySummary, summarize

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame, SparkSession


def _reader(tasks: tuple[ReadTask, ...], fs: "pafs.FileSystem") -> Any:
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from read_task(tasks[i], fs)

    return read


# -- the wire format: what is shuffled, sorted and handed to the Python workers ------------------
TOPIC_KEY = "topic_key"
"""``xxhash64(topic)`` (null for a null topic): the group key instead of the topic string."""
KIND_SHIFT = 61
"""``kind_seq = kind << 61 | seq`` orders like ``(kind, seq)`` while ``seq < 2^61``."""
SEQ_MASK = (1 << KIND_SHIFT) - 1
WIRE_GROUP_KEYS = (TOPIC_KEY, "partition")
WIRE_COLUMNS = (TOPIC_KEY, "partition", "ts", "kind_seq", "name", "ledger_id", "entry_id", "batch", "aux",
                "sequence_id", "problem", "topic")
"""The columns the replay ships: every column costs CPU time three times (shuffle, sort and
the row-by-row Arrow conversion for Python), so :data:`~.schema.EVENT_SCHEMA` is packed:

* the topic becomes ``topic_key``; the string itself (``topic``) is only carried for rows of
  text files, Parquet topics are read up front (:func:`~.inputs.parquet_topics`);
* ``kind`` and ``seq`` become ``kind_seq`` (``kind, seq`` as two columns when a log has 2^21
  files or more);
* ``aux`` is ``deliver_at_ms`` for produced rows and ``ack_type`` for acked ones."""


_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)
_M64 = (1 << 64) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def spark_xxhash64(text: str, seed: int = 42) -> int:
    """Spark's ``xxhash64(text)`` (XXH64 of the UTF-8 bytes, seed 42, as a signed long), so
    the driver knows the ``topic_key`` of a topic without running a Spark job."""
    data = text.encode("utf-8")
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed & _M64, (seed - _P1) & _M64]
        while i <= n - 32:
            for k in range(4):
                v[k] = _round(v[k], int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i <= n - 8:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i <= n - 4:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h - (1 << 64) if h >= 1 << 63 else h


class TopicKeyCollisionError(MLedgerError, RuntimeError):
    """Two topic names have the same 64-bit ``topic_key`` (the replay cannot tell them apart)."""


def _packs_kind(plan: InputPlan) -> bool:
    return all(len(files) <= 1 << (KIND_SHIFT - SEQ_FILE_SHIFT) for files in plan.files.values())


def _wire(frame: "DataFrame", packed: bool, carry_topic: bool) -> "DataFrame":
    """:data:`~.schema.EVENT_SCHEMA` rows as :data:`WIRE_COLUMNS` (see there)."""
    from pyspark.sql import functions as F

    topic, kind = F.col("topic"), F.col("kind")
    key = F.when(topic.isNull(), F.lit(None).cast("bigint")).otherwise(F.xxhash64(topic))
    order = [F.shiftleft(kind.cast("bigint"), KIND_SHIFT).bitwiseOR(F.col("seq")).alias("kind_seq")] if packed \
        else [kind, F.col("seq")]
    aux = (F.when(kind == KIND_OF_LOG["produced"], F.col("deliver_at_ms"))
           .when(kind == KIND_OF_LOG["acked"], F.col("ack_type").cast("bigint")))
    return frame.select(
        key.alias(TOPIC_KEY), F.col("partition"), F.col("ts"), *order, F.col("name"), F.col("ledger_id"),
        F.col("entry_id"), F.col("batch"), aux.alias("aux"), F.col("sequence_id"), F.col("problem"),
        topic if carry_topic else F.lit(None).cast("string").alias("topic"),
    )


def _wire_events(batch: pa.RecordBatch, topic: str | None) -> pa.RecordBatch:
    """A wire batch back as :data:`~.schema.EVENT_SCHEMA` (the engine's input)."""
    n = batch.num_rows
    names = batch.schema.names
    if "kind_seq" in names:
        ks = batch.column("kind_seq")
        kind = pc.cast(pc.fill_null(pc.shift_right(ks, KIND_SHIFT), 0), pa.int8())
        seq = pc.bit_wise_and(ks, SEQ_MASK)
    else:
        kind, seq = batch.column("kind"), batch.column("seq")
    kinds = np.asarray(kind.to_numpy(zero_copy_only=False))
    aux = batch.column("aux")
    null_long = pa.nulls(n, pa.int64())
    if aux.null_count == n:
        deliver, ack = null_long, pa.nulls(n, pa.int8())
    else:
        deliver = pc.if_else(pa.array(kinds == KIND_OF_LOG["produced"]), aux, null_long)
        ack = pc.cast(pc.if_else(pa.array(kinds == KIND_OF_LOG["acked"]), aux, null_long), pa.int8())
    return pa.RecordBatch.from_arrays(
        [pa.repeat(pa.scalar(topic, pa.string()), n), batch.column("partition"), batch.column("ts"), kind, seq,
         batch.column("name"), batch.column("ledger_id"), batch.column("entry_id"), batch.column("batch"),
         deliver, batch.column("sequence_id"), ack, batch.column("problem")],
        schema=EVENT_SCHEMA,
    )


def _group_topic(key: int | None, known: dict[int, str], batch: pa.RecordBatch, topic: str | None,
                 resolved: bool) -> str | None:
    """The group's topic: from the driver's table, or the names text rows carry; raises
    :class:`TopicKeyCollisionError` when two names share the key."""
    if key is None:
        return None
    carried = batch.column("topic")
    if not resolved:
        topic = known.get(key)
        if topic is None and carried.null_count < len(carried):
            topic = pc.min(carried).as_py()
        if topic is None:
            raise TopicKeyCollisionError(f"no topic name for topic_key {key}: a Parquet file changed during the replay?")
    if carried.null_count < len(carried):
        other = pc.min_max(carried)
        for name in (other["min"].as_py(), other["max"].as_py()):
            if name != topic:
                raise TopicKeyCollisionError(
                    f"topics {topic!r} and {name!r} have the same topic_key {key} (64-bit hash collision); "
                    "the Spark replay cannot tell them apart: replay them separately or with --single-process")
    return topic


def _replayer(
    settings: ReplaySettings,
    subscriptions: dict,
    model_factory: ModelFactory | None,
    topics: dict[int, str] | None = None,
) -> Any:
    """The ``applyInArrow`` function: one group of wire batches through a replayer.

    ``topics``: ``topic_key`` to name for every topic the driver knows (Parquet files)."""
    declared: dict[str, tuple[SubscriptionSpec, ...]] = subscriptions
    known = topics or {}

    def replay(key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        topic_key, partition = key[0].as_py(), key[1].as_py()
        replayer: PartitionReplayer | None = None
        topic: str | None = None
        for batch in batches:
            topic = _group_topic(topic_key, known, batch, topic, replayer is not None)
            if replayer is None:
                replayer = PartitionReplayer(topic, partition, settings, declared_for(declared, topic), model_factory)
            yield from replayer.feed(_wire_events(batch, topic))
        if replayer is not None:
            yield from replayer.finish()

    return replay


_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

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
        # ASCII folding as in schema.ack_type_codes (only evaluated for text that is not exact)
        lowered = F.translate(F.trim(text), _ASCII_UPPER, _ASCII_UPPER.lower())
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
    """Every event of the plan as :data:`~.schema.EVENT_SCHEMA` rows: Parquet read natively,
    JSON Lines / CSV by pyarrow tasks."""
    frames = [_parquet_events(spark, plan, log, files) for log, files in _parquet_files(plan).items()]
    text = _text_events(spark, plan)
    if text is not None:
        frames.append(text)
    return _union(spark, frames, ddl(EVENT_SCHEMA))


def _parquet_files(plan: InputPlan) -> dict[str, list[str]]:
    found = {log: sorted({t.path for t in plan.tasks if t.log == log and t.fmt == "parquet"}) for log in KIND_OF_LOG}
    return {log: files for log, files in found.items() if files}


def _text_events(spark: "SparkSession", plan: InputPlan) -> "DataFrame | None":
    text = tuple(t for t in plan.tasks if t.fmt != "parquet")
    if not text:
        return None
    return spark.range(0, len(text), 1, len(text)).mapInArrow(_reader(text, plan.filesystem), ddl(EVENT_SCHEMA))


def _union(spark: "SparkSession", frames: list, schema: str) -> "DataFrame":
    if not frames:
        return spark.createDataFrame([], schema)
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame)
    return events


def wire_dataframe(spark: "SparkSession", plan: InputPlan) -> tuple["DataFrame", dict[int, str]]:
    """Every event of the plan as :data:`WIRE_COLUMNS` rows, and ``topic_key`` to topic name
    for the Parquet topics. Raises :class:`TopicKeyCollisionError` when two of those share a key."""
    packed = _packs_kind(plan)
    frames = [_wire(_parquet_events(spark, plan, log, files), packed, carry_topic=False)
              for log, files in _parquet_files(plan).items()]
    text = _text_events(spark, plan)
    if text is not None:
        frames.append(_wire(text, packed, carry_topic=True))
    topics: dict[int, str] = {}
    for name in sorted(parquet_topics(plan)):
        key = spark_xxhash64(name)
        other = topics.setdefault(key, name)
        if other != name:
            raise TopicKeyCollisionError(
                f"topics {other!r} and {name!r} have the same topic_key {key} (64-bit hash collision); the "
                "Spark replay cannot tell them apart: replay them separately or with --single-process")
    schema = ddl(EVENT_SCHEMA)
    if not frames:
        frames = [_wire(spark.createDataFrame([], schema), packed, carry_topic=True)]
    return _union(spark, frames, schema), topics


def default_partitions(spark: "SparkSession") -> int:
    """Shuffle partitions when none are set: 8 per core. A task replays whole topic-partitions
    and hashing spreads them unevenly, so small tasks keep the cores busy to the end (with 2
    per core, one core idled for a quarter of the replay stage)."""
    return max(8 * spark.sparkContext.defaultParallelism, 1)


def replay_dataframe(
    spark: "SparkSession",
    plan: InputPlan,
    settings: ReplaySettings,
    model_factory: ModelFactory | None = None,
) -> "DataFrame":
    """The lazy DataFrame of the replay's union output (:data:`~.schema.OUTPUT_SCHEMA`)."""
    n = settings.partitions or default_partitions(spark)
    events, topics = wire_dataframe(spark, plan)
    order = ("ts", "kind_seq") if "kind_seq" in events.columns else ("ts", "kind", "seq")
    return (
        events
        .repartition(n, *WIRE_GROUP_KEYS)
        .sortWithinPartitions(*WIRE_GROUP_KEYS, *order)
        .groupBy(*WIRE_GROUP_KEYS)
        .applyInArrow(_replayer(settings, plan.subscriptions, model_factory, topics), ddl(OUTPUT_SCHEMA))
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


REPLAY_SQL_CONF = {
    # Spark otherwise measures the Arrow batch it builds for Python after *every* row (a
    # walk over all column vectors): a third of the JVM's time in this job. At this value
    # (the maximum) it does not measure; batches stay bounded by maxRecordsPerBatch.
    "spark.sql.execution.arrow.maxBytesPerBatch": str((1 << 31) - 1),
}
"""SQL settings the replay's queries run with (set on the session for the replay, then restored)."""


@contextmanager
def replay_conf(spark: "SparkSession") -> Iterator[None]:
    """Run the block with :data:`REPLAY_SQL_CONF` set on ``spark``; restore the old values."""
    before = {key: spark.conf.get(key, None) for key in REPLAY_SQL_CONF}
    for key, value in REPLAY_SQL_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


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
    # Deserialized: the serialized levels go through Java serialization (JIT-compiled on
    # every run: seconds of CPU on a fresh JVM for nothing).
    out = replay_dataframe(spark, plan, settings, model_factory).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    record = F.col(RECORD_FIELD)
    try:
        with replay_conf(spark), _StageProgress(spark, "replay (spark)", progress):
            # Anomalies can be many: Spark writes them (this job runs the replay, cached).
            anomalies = out.where(record == "anomalies").select(*ANOMALY_SCHEMA.names)
            if plan.subscription_anomalies.num_rows:
                anomalies = anomalies.unionByName(
                    spark.createDataFrame(plan.subscription_anomalies.to_pandas(), ddl(ANOMALY_SCHEMA)))
            anomalies.write.mode("overwrite").parquet(f"{out_dir.rstrip('/')}/anomalies")
            # Cursor and partition rows are one per topic-partition (and subscription): the
            # summary needs them on the driver anyway, so they come back in one job and are
            # written from here. Serialized states can be large: with emit_state Spark writes
            # the cursors.
            wanted = [c for c in OUTPUT_SCHEMA.names if not (settings.emit_state and c in ("state", "state_record"))]
            small = out.where(record.isin("cursors", "partitions")).select(*wanted).toArrow()
            cursors = _rows_of(small, "cursors")
            partitions = _rows_of(small, "partitions")
            if settings.emit_state:
                out.where(record == "cursors").select(*CURSOR_SCHEMA.names).coalesce(1).write.mode("overwrite") \
                    .parquet(f"{out_dir.rstrip('/')}/cursors")
                write_outputs(out_dir, {"partitions": partitions})
            else:
                write_outputs(out_dir, {"cursors": cursors, "partitions": partitions})
    finally:
        out.unpersist()
    counts = anomaly_counts(f"{out_dir.rstrip('/')}/anomalies")
    summary = summarize(cursors, partitions, counts, time.perf_counter() - started, "spark", out_dir)
    write_settings(out_dir, settings, "spark")
    return summary


def anomaly_counts(anomalies_dir: str) -> dict[str, int]:
    """Anomalies per reason, from the ``reason`` column of the written Parquet files (a
    dictionary-encoded column: cheaper than a Spark aggregation and its shuffle)."""
    fs, path = filesystem_for(anomalies_dir)
    return reason_counts(pq.read_table(path, columns=["reason"], filesystem=fs))


def _rows_of(union: pa.Table, record: str) -> pa.Table:
    """One output's rows of a collected union table, in that output's schema (minus the
    columns that were not collected)."""
    schema = pa.schema([f for f in OUTPUTS[record] if f.name in union.column_names])
    return union.filter(pc.equal(union[RECORD_FIELD], record)).select(schema.names).cast(schema)


def main_submit(argv: list | None = None) -> int:
    """``spark-submit ... submit_job.py EVENTS OUT [--set k=v ...] [--emit-state] [--partitions N]``.

    Uses the session spark-submit configured (master, resources); prints the summary.
    """
    import argparse

    from pyspark.sql import SparkSession

    from ..summary import format_summary

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
