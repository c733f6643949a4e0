"""``mledger prepare`` in this process: raw event logs into a prepared log (see :mod:`.layout`).

Two passes, memory bounded by the largest topic-partition (not the whole log):

1. every read task's event batches (:func:`~.inputs.read_task`: the same parsing and the same
   input order ``seq`` as every other reader) are split by topic-partition and buffered;
   past :data:`SPILL_BYTES` of buffers, each topic-partition's buffer goes to a hidden spill
   file in the output directory;
2. each topic-partition in turn is gathered (spill files and buffer), sorted into replay
   order ``(ts, kind, seq)`` and written with a :class:`~.layout.PartitionWriter`.

The Spark version (:mod:`.spark.prepare`) does the same with one shuffle, for inputs larger
than one machine's memory; both write the same layout and the same rows.
"""

from __future__ import annotations

import posixpath
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ._inputs import InputPlan, read_task
from ._layout import (
    PREPARED_SCHEMA,
    ROW_GROUP_ROWS,
    Manifest,
    PartitionWriter,
    finish_layout,
    replay_order,
    start_layout,
)
from ._progress import Progress

SPILL_BYTES = 256 << 20
"""Buffered events (Arrow bytes) past which buffers are spilled to disk."""
IN_PROCESS_ROWS = 2_000_000
"""``mledger prepare`` without ``--master``/``--single-process`` prepares inputs with fewer
known rows than this in this process (no JVM to start); larger ones on Spark."""
_NULL_PARTITION = np.iinfo(np.int64).min
_SPILL_DIR = ".prepare-spill"

Key = tuple[str | None, int | None]


class _Buckets:
    """Event rows by topic-partition, buffered in memory and spilled past a size."""

    def __init__(self, fs: pafs.FileSystem, root: str, spill_bytes: int) -> None:
        self._fs = fs
        self._spill_dir = posixpath.join(root, _SPILL_DIR)
        self._spill_bytes = spill_bytes
        self._memory: dict[Key, list[pa.RecordBatch]] = {}
        self._spilled: dict[Key, list[str]] = {}
        self._ids: dict[Key, int] = {}
        self._bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        topics = pc.dictionary_encode(batch.column("topic"))
        names: list[str | None] = topics.dictionary.to_pylist()
        codes = np.asarray(pc.fill_null(topics.indices, len(names)).to_numpy(zero_copy_only=False), np.int64)
        names.append(None)
        part = batch.column("partition")
        parts = np.asarray(pc.fill_null(part, _NULL_PARTITION).to_numpy(zero_copy_only=False), np.int64)
        order = np.lexsort((parts, codes))  # stable: input order kept within a topic-partition
        c, p = codes[order], parts[order]
        bounds = np.flatnonzero((c[1:] != c[:-1]) | (p[1:] != p[:-1])) + 1
        rows = batch.select(PREPARED_SCHEMA.names)
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)], strict=False):
            pv = int(p[a])
            key = (names[int(c[a])], None if pv == _NULL_PARTITION else pv)
            piece = rows.take(pa.array(order[a:b])) if b - a < len(order) else rows.take(pa.array(order))
            self._memory.setdefault(key, []).append(piece)
            self._bytes += piece.nbytes
        if self._bytes > self._spill_bytes:
            self.spill()

    def spill(self) -> None:
        self._fs.create_dir(self._spill_dir, recursive=True)
        for key, batches in self._memory.items():
            ident = self._ids.setdefault(key, len(self._ids))
            path = posixpath.join(self._spill_dir, f"{ident}-{uuid.uuid4().hex}.parquet")
            pq.write_table(
                pa.Table.from_batches(batches, PREPARED_SCHEMA), path, filesystem=self._fs, compression="lz4"
            )
            self._spilled.setdefault(key, []).append(path)
        self._memory.clear()
        self._bytes = 0

    def keys(self) -> list[Key]:
        """Every topic-partition seen, by topic then partition (missing ones last)."""
        keys = set(self._memory) | set(self._spilled)
        return sorted(keys, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or 0))

    def take(self, key: Key) -> pa.Table:
        """All rows of a topic-partition (any order), releasing them here."""
        paths = self._spilled.pop(key, [])
        tables = [pq.read_table(path, filesystem=self._fs) for path in paths]
        for path in paths:
            self._fs.delete_file(path)
        tables.append(pa.Table.from_batches(self._memory.pop(key, []), PREPARED_SCHEMA))
        return pa.concat_tables(tables)

    def close(self) -> None:
        self._fs.delete_dir_contents(self._spill_dir, missing_dir_ok=True)
        if self._fs.get_file_info(self._spill_dir).type == pafs.FileType.Directory:
            self._fs.delete_dir(self._spill_dir)


def prepare_in_process(
    plan: InputPlan,
    out: str,
    progress: Progress | None = None,
    spill_bytes: int = SPILL_BYTES,
    created_by: str = "mledger prepare (in process)",
) -> Manifest:
    """Write the prepared log of ``plan`` (see :func:`~.inputs.plan_inputs`) into ``out``.

    ``out`` is created, or emptied when it holds an earlier prepared log; anything else there
    is refused (:class:`~.layout.PreparedLayoutError`). Returns the manifest written.
    """
    fs, path = start_layout(out)
    buckets = _Buckets(fs, path, spill_bytes)
    read = 0
    try:
        if progress is not None:
            progress.set_total(plan.known_rows, "prepare: reading")
        for task in plan.tasks:
            for batch in read_task(task, plan.filesystem):
                buckets.add(batch)
                read += batch.num_rows
                if progress is not None:
                    progress.update(read)
        if progress is not None:
            progress.set_total(read, "prepare: sorting and writing")
            progress.update(0)
        parts = []
        written = 0
        for key in buckets.keys():
            table = buckets.take(key)
            order = replay_order(table)
            writer = PartitionWriter(fs, path, key[0], key[1], "local")
            for start in range(0, len(order), ROW_GROUP_ROWS):
                writer.write(table.take(pa.array(order[start : start + ROW_GROUP_ROWS])))
            parts.append(writer.close())
            written += table.num_rows
            del table, order
            if progress is not None:
                progress.update(written)
    finally:
        buckets.close()
    return finish_layout(fs, path, parts, plan.subscriptions, plan.subscription_anomalies, created_by)
