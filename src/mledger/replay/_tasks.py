"""Replay tasks over a prepared log: placement, the task itself, its output parts, the commit.

A replay cuts a prepared log's topic-partitions into tasks balanced by size
(:func:`plan_tasks`: largest first, each to the least loaded task). A task
(:func:`run_task`) replays its topic-partitions one after the other: it reads each one's
files itself (:func:`~.layout.read_partition`, bounded batches), feeds every batch to one
:class:`~.engine.PartitionReplayer` per sweep :class:`~.sweep.Variant`, and streams the
outputs into its own part files, one per output (``cursors``, ``anomalies``,
``partitions``). Spark runs tasks on executors (:mod:`.spark.job`); the single-process
replay runs one task with every topic-partition (:mod:`.local`). The same code on both
paths is why their outputs are equal row for row.

Part files are written under a hidden temporary name and renamed when the task completes;
their names carry the task and its attempt (``part-00003-a17.parquet``). Spark may run a
task twice (a retry after a failure, speculation): :func:`commit_outputs` keeps exactly the
parts of the attempts whose results reached the driver and deletes every other file, so
no topic-partition is ever counted twice or half.
"""

from __future__ import annotations

import heapq
import logging
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ._engine import ModelFactory, PartitionReplayer, declared_for
from ._inputs import filesystem_for
from ._layout import PreparedLog, PreparedPartition, open_prepared, read_partition
from ._mirror import shared_groups
from ._model import SubscriptionSpec
from ._schema import OUTPUTS, REPORT_DIR
from ._sweep import Variant, column_value, sweep_fields

PART_PREFIX = "part-"


@dataclass(frozen=True)
class ReplayTask:
    """The topic-partitions one task replays, largest first."""

    index: int
    partitions: tuple[PreparedPartition, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)


@dataclass(frozen=True)
class TaskResult:
    """What a task attempt wrote: its part files (relative to the output directory)."""

    index: int
    attempt: str
    files: tuple[str, ...]
    events: int


def plan_tasks(partitions: Sequence[PreparedPartition], tasks: int) -> list[ReplayTask]:
    """Place topic-partitions on at most ``tasks`` tasks, balanced by rows (longest processing
    time first: each, largest first, to the task with the fewest rows so far). Tasks left
    empty are dropped; ties go to the lower task index, so placement is deterministic."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    n = min(tasks, len(partitions))
    if n == 0:
        return []
    order = sorted(range(len(partitions)), key=lambda i: (-partitions[i].rows, i))
    heap = [(0, t) for t in range(n)]
    placed: list[list[PreparedPartition]] = [[] for _ in range(n)]
    for i in order:
        load, t = heapq.heappop(heap)
        placed[t].append(partitions[i])
        heapq.heappush(heap, (load + partitions[i].rows, t))
    return [ReplayTask(t, tuple(ps)) for t, ps in enumerate(placed) if ps]


def output_schemas(chosen: Sequence[Variant]) -> dict[str, pa.Schema]:
    """Each output's schema: its own columns, then one per swept key."""
    extra = sweep_fields(chosen)
    return {name: pa.schema([*schema, *extra]) for name, schema in OUTPUTS.items()}


class PartWriter:
    """A task attempt's output parts: one Parquet file per output, renamed when complete."""

    def __init__(self, out_dir: str, task: int, attempt: str, schemas: Mapping[str, pa.Schema]) -> None:
        self._fs, self._root = filesystem_for(out_dir)
        self._schemas = schemas
        self._name = f"{PART_PREFIX}{task:05d}-{attempt}.parquet"
        self._writers: dict[str, pq.ParquetWriter] = {}

    def _temp(self, output: str) -> str:
        return posixpath.join(self._root, output, f".{self._name}.inprogress")

    def write(self, output: str, batch: pa.RecordBatch) -> None:
        writer = self._writers.get(output)
        if writer is None:
            writer = self._writers[output] = pq.ParquetWriter(
                self._temp(output), self._schemas[output], filesystem=self._fs
            )
        writer.write_batch(batch)

    def close(self) -> tuple[str, ...]:
        """Finish every output (an empty one too) and rename the files; their relative paths."""
        done = []
        for output, schema in self._schemas.items():
            writer = self._writers.pop(output, None)
            if writer is None:  # an output without rows is an empty file with its schema
                writer = pq.ParquetWriter(self._temp(output), schema, filesystem=self._fs)
            writer.close()
            final = posixpath.join(output, self._name)
            self._fs.move(self._temp(output), posixpath.join(self._root, final))
            done.append(final)
        return tuple(done)

    def abort(self) -> None:
        for output, writer in self._writers.items():
            writer.close()
            self._fs.delete_file(self._temp(output))
        self._writers.clear()


def _with_values(batch: pa.RecordBatch, schema: pa.Schema, extra: Sequence[tuple[pa.Field, Any]]) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = [batch.column(i) for i in range(batch.num_columns)]
    arrays += [pa.array([column_value(f, v)] * n, f.type) for f, v in extra]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _split(union: pa.RecordBatch) -> Iterable[tuple[str, pa.RecordBatch]]:
    """A union output batch (:data:`~.schema.OUTPUT_SCHEMA`) as (output, batch) pairs."""
    records = union.column(0)
    first = records[0].as_py()
    names = [first] if pc.all(pc.equal(records, first)).as_py() else pc.unique(records).to_pylist()
    for name in names:
        rows = union if len(names) == 1 else union.filter(pc.equal(records, name))
        schema = OUTPUTS[name]
        yield name, pa.RecordBatch.from_arrays([rows.column(f.name).cast(f.type) for f in schema], schema=schema)


def replay_partition_into(
    log: PreparedLog,
    part: PreparedPartition,
    chosen: Sequence[Variant],
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]],
    sink: Callable[[str, pa.RecordBatch, int], None],
    model_factory: ModelFactory | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Replay one topic-partition under every variant, reading its files once; output
    batches go to ``sink(output, batch, variant index)``. Variants that differ only in
    persistence-only settings share one replay (:mod:`.mirror`). Returns the events read."""
    declared = declared_for(subscriptions, part.topic)
    replayers = [
        (
            PartitionReplayer(
                part.topic,
                part.partition,
                chosen[group[0]].settings,
                declared,
                model_factory,
                also_persist=[chosen[i].settings for i in group[1:]],
            ),
            group,
        )
        for group in shared_groups(v.settings for v in chosen)
    ]
    events = 0
    for batch in read_partition(log, part):
        for replayer, group in replayers:
            for union in replayer.feed(batch):
                for name, out in _split(union):
                    for i in group:
                        sink(name, out, i)
        events += batch.num_rows
        if on_batch is not None:
            on_batch(batch.num_rows)
    for replayer, group in replayers:
        for i, outputs in zip(group, replayer.finish_variants(), strict=True):
            for union in outputs:
                for name, out in _split(union):
                    sink(name, out, i)
    return events


def run_task(
    log: PreparedLog | str,
    task: ReplayTask,
    chosen: Sequence[Variant],
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]],
    out_dir: str,
    attempt: str = "a0",
    model_factory: ModelFactory | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> TaskResult:
    """Replay a task's topic-partitions into its part files (see the module docstring).

    ``log``: the prepared log, or its root (an executor opens it without re-checking the
    listing; every file's footer is still checked). Raises what reading and the engine
    raise (``ManifestMismatchError``, ``EventOrderError``); the attempt's files are removed.
    """
    if isinstance(log, str):
        log = open_prepared(log, verify=False)
    schemas = output_schemas(chosen)
    extras = [list(zip(sweep_fields(chosen), (value for _, value in v.values), strict=False)) for v in chosen]
    parts = PartWriter(out_dir, task.index, attempt, schemas)

    def sink(name: str, batch: pa.RecordBatch, variant: int) -> None:
        if batch.num_rows:
            parts.write(name, _with_values(batch, schemas[name], extras[variant]) if extras[variant] else batch)

    events = 0
    try:
        with quiet_library_warnings():
            for part in task.partitions:
                events += replay_partition_into(log, part, chosen, subscriptions, sink, model_factory, on_batch)
        files = parts.close()
    except BaseException:
        parts.abort()
        raise
    return TaskResult(task.index, attempt, files, events)


@contextmanager
def quiet_library_warnings() -> Iterator[None]:
    """Hold mledger's own warnings (cursor ranges beyond the persistence limit, ...) during a
    replay, unless the application set the ``mledger`` logger's level itself: the outputs
    count those events per cursor (``truncated_ranges``), and a replay would log them by the
    thousand."""
    logger = logging.getLogger("mledger")
    if logger.level != logging.NOTSET:
        yield
        return
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(logging.NOTSET)


def start_outputs(out_dir: str) -> None:
    """Create the output directories, emptied of earlier outputs; remove the report drawn from
    them (:data:`~mledger.replay.REPORT_DIR`)."""
    fs, root = filesystem_for(out_dir)
    report = posixpath.join(root, REPORT_DIR)
    if fs.get_file_info(report).type == pafs.FileType.Directory:
        fs.delete_dir(report)
    for name in OUTPUTS:
        directory = posixpath.join(root, name)
        fs.delete_dir_contents(directory, missing_dir_ok=True)
        fs.create_dir(directory, recursive=True)


def write_extra_anomalies(out_dir: str, anomalies: pa.Table, chosen: Sequence[Variant]) -> tuple[str, ...]:
    """Anomalies found before the replay (the subscriptions log's), once per variant, as the
    ``part-prepare.parquet`` part of the anomalies output."""
    if anomalies.num_rows == 0:
        return ()
    schema = output_schemas(chosen)["anomalies"]
    fields = sweep_fields(chosen)
    tables = []
    for v in chosen:
        table = anomalies.cast(OUTPUTS["anomalies"])
        for f, (_, value) in zip(fields, v.values, strict=False):
            table = table.append_column(f, pa.array([column_value(f, value)] * table.num_rows, f.type))
        tables.append(table.cast(schema))
    fs, root = filesystem_for(out_dir)
    name = posixpath.join("anomalies", f"{PART_PREFIX}prepare.parquet")
    pq.write_table(pa.concat_tables(tables), posixpath.join(root, name), filesystem=fs)
    return (name,)


def commit_outputs(out_dir: str, results: Iterable[TaskResult], extra: Iterable[str] = ()) -> None:
    """Keep exactly the parts of ``results`` (and ``extra``); delete every other file in the
    output directories (parts of failed or speculative attempts, temporary files)."""
    fs, root = filesystem_for(out_dir)
    keep = {f for r in results for f in r.files} | set(extra)
    for name in OUTPUTS:
        for info in fs.get_file_info(pafs.FileSelector(posixpath.join(root, name), allow_not_found=True)):
            if info.type == pafs.FileType.File and posixpath.relpath(info.path, root) not in keep:
                fs.delete_file(info.path)
