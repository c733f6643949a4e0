"""``mledger prepare`` on Spark: raw event logs into a prepared log with one shuffle.

Plan (checked with ``explain()``; see ``tests/test_spark_prepare.py``)::

    Scan parquet (one per file) -> Project (to the packed wire columns, WIRE_COLUMNS)
      [+ MapInArrow(read_task) for JSON Lines / CSV files]      # pyarrow reads the text formats
      -> Union
      -> Exchange hashpartitioning(topic_key, partition, N)     # the project's only shuffle
      -> Sort [topic_key, partition, ts, kind_seq]              # sortWithinPartitions
      -> FlatMapGroupsInArrow(write)                            # groupBy(...).applyInArrow, iterator form
      -> one row per file written, collected by the driver, which writes the manifest

``topic_key`` is ``xxhash64(topic)``: the driver maps it back to the name (Parquet topics
read up front, text rows carry theirs) and a collision stops the job with
:class:`TopicKeyCollisionError`. The group keys are the sort's prefix, so Spark adds no
second sort (checked in the tests).

The write function has the iterator signature ``(key, Iterator[RecordBatch]) ->
Iterator[RecordBatch]``: a topic-partition streams through a
:class:`~mledger.replay._layout.PartitionWriter` batch by batch and is never held whole in a
Python worker. Spark does not promise to keep a group's rows in the sorted order; the writer
checks ``(ts, kind, seq)`` on every batch and fails the job if it goes backwards. Files are
written under names carrying the task attempt; the driver keeps those of the attempts whose
rows it collected (:func:`~mledger.replay._layout.finish_layout`).

Parquet files are read by Spark; the select turns them into exactly the rows
:func:`~mledger.replay._schema.to_events` makes (the equality tests check it), with the input
order ``seq`` taken from the plan's file index and ``_metadata.row_index``. JSON Lines and
CSV files are read on the executors with :func:`~mledger.replay._inputs.read_task`. Row
validation happens in the replay (:func:`~mledger.replay._schema.check_events`).
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from ...core import MLedgerError, as_int64
from .._inputs import InputPlan, ReadTask, filesystem_for, parquet_topics, read_task
from .._layout import (
    PREPARED_SCHEMA,
    Manifest,
    PartitionWriter,
    PreparedFile,
    PreparedPartition,
    finish_layout,
    start_layout,
)
from .._schema import EVENT_SCHEMA, INT, KIND_OF_LOG, LOG_COLUMNS, SEQ_FILE_SHIFT, ddl
from ._stages import StageProgress

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
WIRE_COLUMNS = (
    TOPIC_KEY,
    "partition",
    "ts",
    "kind_seq",
    "name",
    "ledger_id",
    "entry_id",
    "batch",
    "aux",
    "sequence_id",
    "problem",
    "topic",
)
"""The columns the replay ships: every column costs CPU time three times (shuffle, sort and
the row-by-row Arrow conversion for Python), so :data:`~.schema.EVENT_SCHEMA` is packed:

* the topic becomes ``topic_key``; the string itself (``topic``) is only carried for rows of
  text files, Parquet topics are read up front (:func:`~.inputs.parquet_topics`);
* ``kind`` and ``seq`` become ``kind_seq`` (``kind, seq`` as two columns when a log has 2^21
  files or more);
* ``aux`` is ``deliver_at_ms`` for produced rows and ``ack_type`` for acked ones."""


def spark_xxhash64(text: str, seed: int = 42) -> int:
    """Spark's ``xxhash64(text)`` (XXH64 of the UTF-8 bytes, seed 42, as a signed long), so
    the driver knows the ``topic_key`` of a topic without running a Spark job."""
    return as_int64(xxhash.xxh64_intdigest(text.encode("utf-8"), seed))


class TopicKeyCollisionError(MLedgerError, RuntimeError):
    """Two topic names have the same 64-bit ``topic_key`` (the replay cannot tell them apart)."""


def _packs_kind(plan: InputPlan) -> bool:
    return all(len(files) <= 1 << (KIND_SHIFT - SEQ_FILE_SHIFT) for files in plan.files.values())


def _wire(frame: "DataFrame", packed: bool, carry_topic: bool) -> "DataFrame":
    """:data:`~.schema.EVENT_SCHEMA` rows as :data:`WIRE_COLUMNS` (see there)."""
    from pyspark.sql import functions as F

    topic, kind = F.col("topic"), F.col("kind")
    key = F.when(topic.isNull(), F.lit(None).cast("bigint")).otherwise(F.xxhash64(topic))
    order = (
        [F.shiftleft(kind.cast("bigint"), KIND_SHIFT).bitwiseOR(F.col("seq")).alias("kind_seq")]
        if packed
        else [kind, F.col("seq")]
    )
    aux = F.when(kind == KIND_OF_LOG["produced"], F.col("deliver_at_ms")).when(
        kind == KIND_OF_LOG["acked"], F.col("ack_type").cast("bigint")
    )
    return frame.select(
        key.alias(TOPIC_KEY),
        F.col("partition"),
        F.col("ts"),
        *order,
        F.col("name"),
        F.col("ledger_id"),
        F.col("entry_id"),
        F.col("batch"),
        aux.alias("aux"),
        F.col("sequence_id"),
        F.col("problem"),
        topic if carry_topic else F.lit(None).cast("string").alias("topic"),
    )


def _wire_events(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A wire batch back as :data:`~mledger.replay._layout.PREPARED_SCHEMA` rows."""
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
        [
            batch.column("ts"),
            kind,
            seq,
            batch.column("name"),
            batch.column("ledger_id"),
            batch.column("entry_id"),
            batch.column("batch"),
            deliver,
            batch.column("sequence_id"),
            ack,
            batch.column("problem"),
        ],
        schema=PREPARED_SCHEMA,
    )


def _group_topic(
    key: int | None, known: dict[int, str], batch: pa.RecordBatch, topic: str | None, resolved: bool
) -> str | None:
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
            raise TopicKeyCollisionError(
                f"no topic name for topic_key {key}: a Parquet file changed during the replay?"
            )
    if carried.null_count < len(carried):
        other = pc.min_max(carried)
        for name in (other["min"].as_py(), other["max"].as_py()):
            if name != topic:
                raise TopicKeyCollisionError(
                    f"topics {topic!r} and {name!r} have the same topic_key {key} (64-bit hash collision); "
                    "the Spark replay cannot tell them apart: replay them separately or with --single-process"
                )
    return topic


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
        scans = [
            spark.read.schema(read_schema)
            .parquet(plan.uri(f))
            .withColumn("_file", F.lit(index[f]).cast("bigint"))
            .withColumn("_row", F.col("_metadata.row_index"))
            for f in files
        ]
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
        ack = (
            F.when(text.isNull(), F.lit(None))
            .when(text == "individual", F.lit(0))
            .when(text == "cumulative", F.lit(1))
            .when(lowered == "individual", F.lit(0))
            .when(lowered == "cumulative", F.lit(1))
            .otherwise(F.lit(-1))
        ).cast("tinyint")
        problem = F.when(ack == -1, F.concat(F.lit("unknown ack_type '"), F.col("ack_type"), F.lit("'")))
    else:
        ack = F.lit(None).cast("tinyint")
        problem = F.lit(None).cast("string")
    return frame.select(
        F.col("topic"),
        F.col("partition"),
        F.col("publish_time_ms" if produced else "ts_ms").alias("ts"),
        F.lit(KIND_OF_LOG[log]).cast("tinyint").alias("kind"),
        seq.alias("seq"),
        F.col("producer_name" if produced else "subscription").alias("name"),
        F.col("ledger_id"),
        F.col("entry_id"),
        F.col("batch_size" if produced else "batch_index").alias("batch"),
        F.col("deliver_at_ms") if produced else null_long.alias("deliver_at_ms"),
        (_dedup_sequence_id() if produced else F.col("command") if log == "acked" else null_long).alias("sequence_id"),
        ack.alias("ack_type"),
        problem.alias("problem"),
    )


def _dedup_sequence_id() -> Any:
    """:func:`~mledger.replay._schema.dedup_sequence_ids` in SQL: null for a chunk that is not
    its message's last (Pulsar deduplicates a chunked message on its last chunk only)."""
    from pyspark.sql import functions as F

    chunk_id = F.col("chunk_id")
    earlier = chunk_id.isNotNull() & (chunk_id != F.coalesce(F.col("num_chunks"), F.lit(0)) - 1)
    return F.when(earlier, F.lit(None).cast("bigint")).otherwise(F.col("sequence_id"))


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
    frames = [
        _wire(_parquet_events(spark, plan, log, files), packed, carry_topic=False)
        for log, files in _parquet_files(plan).items()
    ]
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
                "Spark replay cannot tell them apart: replay them separately or with --single-process"
            )
    schema = ddl(EVENT_SCHEMA)
    if not frames:
        frames = [_wire(spark.createDataFrame([], schema), packed, carry_topic=True)]
    return _union(spark, frames, schema), topics


def default_partitions(spark: "SparkSession") -> int:
    """Shuffle partitions when none are set: 8 per core. A task replays whole topic-partitions
    and hashing spreads them unevenly, so small tasks keep the cores busy to the end (with 2
    per core, one core idled for a quarter of the replay stage)."""
    return max(8 * spark.sparkContext.defaultParallelism, 1)


FILE_ROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int64()),
        pa.field("file_index", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("first_ts", pa.int64()),
        pa.field("last_ts", pa.int64()),
        pa.field("footer_xxh64", pa.string()),
    ]
)
"""What the write function returns: one row per file it wrote."""


def _writer(root: str, topics: dict[int, str]) -> Any:
    """The ``applyInArrow`` function: one topic-partition's sorted wire batches into its files.

    ``topics``: ``topic_key`` to name for every topic the driver knows (Parquet files)."""
    known = dict(topics)

    def write(key: tuple[pa.Scalar, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        writer_id = f"a{context.taskAttemptId()}" if context is not None else "a0"
        fs, path = filesystem_for(root)
        topic_key, partition = key[0].as_py(), key[1].as_py()
        writer: PartitionWriter | None = None
        topic: str | None = None
        try:
            for batch in batches:
                topic = _group_topic(topic_key, known, batch, topic, writer is not None)
                if writer is None:
                    writer = PartitionWriter(fs, path, topic, partition, writer_id)
                writer.write(_wire_events(batch))
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is None:
            return
        part = writer.close()
        yield pa.RecordBatch.from_pylist(
            [
                {"topic": part.topic, "partition": part.partition, "file_index": i, **f.to_json()}
                for i, f in enumerate(part.files)
            ],
            schema=FILE_ROW_SCHEMA,
        )

    return write


def _partitions(files: pa.Table) -> list[PreparedPartition]:
    by_key: dict[tuple[str | None, int | None], list[tuple[int, PreparedFile]]] = {}
    for row in files.to_pylist():
        entry = PreparedFile.from_json(row)
        by_key.setdefault((row["topic"], row["partition"]), []).append((row["file_index"], entry))
    return [
        PreparedPartition(topic, partition, tuple(f for _, f in sorted(entries, key=lambda e: e[0])))
        for (topic, partition), entries in by_key.items()
    ]


PREPARE_SQL_CONF = {
    # Spark otherwise measures the Arrow batch it builds for Python after *every* row (a
    # walk over all column vectors): a third of the JVM's time in this job. At this value
    # (the maximum) it does not measure; batches stay bounded by maxRecordsPerBatch.
    "spark.sql.execution.arrow.maxBytesPerBatch": str((1 << 31) - 1),
}
"""SQL settings the prepare query runs with (set on the session for it, then restored)."""


@contextmanager
def prepare_conf(spark: "SparkSession") -> Iterator[None]:
    """Run the block with :data:`PREPARE_SQL_CONF` set on ``spark``; restore the old values."""
    before = {key: spark.conf.get(key, None) for key in PREPARE_SQL_CONF}
    for key, value in PREPARE_SQL_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def executor_path(path: str) -> str:
    """A path executors can open: URIs as given, local paths made absolute."""
    if "://" in path:
        return path
    import os

    return os.path.abspath(path)


def prepare_dataframe(spark: "SparkSession", plan: InputPlan, out: str, partitions: int | None = None) -> "DataFrame":
    """The lazy DataFrame of the prepare: its rows are the files written (:data:`FILE_ROW_SCHEMA`)."""
    n = partitions or default_partitions(spark)
    events, topics = wire_dataframe(spark, plan)
    order = ("ts", "kind_seq") if "kind_seq" in events.columns else ("ts", "kind", "seq")
    return (
        events.repartition(n, *WIRE_GROUP_KEYS)
        .sortWithinPartitions(*WIRE_GROUP_KEYS, *order)
        .groupBy(*WIRE_GROUP_KEYS)
        .applyInArrow(_writer(executor_path(out), topics), ddl(FILE_ROW_SCHEMA))
    )


def prepare_on_spark(
    spark: "SparkSession",
    plan: InputPlan,
    out: str,
    partitions: int | None = None,
    progress: bool = False,
) -> Manifest:
    """Write the prepared log of ``plan`` into ``out`` with one Spark job (one shuffle).

    ``out`` is created, or emptied when it holds an earlier prepared log; anything else there
    is refused. ``partitions``: shuffle partitions (default 8 per core). Returns the manifest.
    """
    fs, path = start_layout(out)
    frame = prepare_dataframe(spark, plan, out, partitions)
    with prepare_conf(spark), StageProgress(spark, "prepare (spark)", progress):
        files = frame.toArrow()
    master = spark.sparkContext.master
    return finish_layout(
        fs,
        path,
        _partitions(files),
        plan.subscriptions,
        plan.subscription_anomalies,
        f"mledger prepare (spark {master})",
    )
