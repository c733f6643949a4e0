"""Finding, checking and reading the event logs: one reader for Spark and the single process.

An events directory holds ``produced/``, ``acked/``, ``cancelled/`` and optionally
``subscriptions/`` (directories of files, searched recursively, names starting with ``_``
or ``.`` skipped as Spark does), or single files named ``produced.parquet`` and so on.
Formats by extension: ``.parquet`` / ``.pq``; JSON Lines ``.jsonl`` / ``.json`` /
``.ndjson``; ``.csv``; the text formats may be compressed (``.gz``, ``.bz2``, ``.zst``).
``produced`` and ``acked`` are required, the others optional.

:func:`plan_inputs` runs on the driver: it lists the files, checks every file's schema (an
:class:`~.schema.InputSchemaError` names the file, column and problem), reads the small
``subscriptions`` log and cuts the event logs into :class:`ReadTask`\\ s (Parquet row-group
ranges, whole text files). :func:`read_task` reads one task with pyarrow and yields
:data:`~.schema.EVENT_SCHEMA` batches; Spark runs it on the executors (``mapInArrow``), the
single-process replay runs it in a loop. Reading with one function on both paths gives both
the same parsing, the same row validation and the same input order (``seq``).

Paths are local, or URIs pyarrow's filesystems understand (``hdfs://``, ``s3://``, ...);
on a cluster the executors must be able to open them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.json as pjson
import pyarrow.parquet as pq

from ._fs import filesystem_for as filesystem_for
from ._model import SubscriptionSpec
from ._recording import warn_if_incomplete
from ._schema import (
    ANOMALY_SCHEMA,
    EVENT_LOGS,
    LOG_COLUMNS,
    SEQ_FILE_SHIFT,
    STR,
    InputSchemaError,
    check_file_schema,
    to_events,
)
from ._subscriptions import SubscriptionRows

_COMPRESSIONS = (".gz", ".bz2", ".zst")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".csv": "csv",
}
REQUIRED_LOGS = ("produced", "acked")
OPTIONAL_LOGS = ("cancelled", "subscriptions")
BATCH_ROWS = 65_536
TEXT_BLOCK_BYTES = 8 << 20


@dataclass(frozen=True)
class ReadTask:
    """One unit of reading: a file, or a range of a Parquet file's row groups."""

    log: str
    path: str
    fmt: str
    file_index: int
    row_groups: tuple[int, ...] | None
    row_offset: int
    rows: int
    """Rows in the task (-1 when unknown before reading: text formats)."""


@dataclass(frozen=True)
class InputPlan:
    """What :func:`plan_inputs` found: files, read tasks, declared subscriptions."""

    root: str
    filesystem: pafs.FileSystem
    files: dict[str, tuple[str, ...]]
    tasks: tuple[ReadTask, ...]
    root_path: str = ""
    """``root`` as a path of ``filesystem``."""
    log_dirs: dict[str, str | None] = field(default_factory=dict)
    """Per log, its directory (``None``: files named ``<log>.<ext>`` in the root)."""
    subscriptions: dict[str, tuple[SubscriptionSpec, ...]] = field(default_factory=dict)
    subscription_anomalies: pa.Table = field(default_factory=lambda: ANOMALY_SCHEMA.empty_table())

    def relative(self, log: str, path: str) -> str:
        """A file's name relative to its log's directory (its base name for the flat layout)."""
        directory = self.log_dirs.get(log)
        return posixpath.relpath(path, directory) if directory else posixpath.basename(path)

    def uri(self, path: str) -> str:
        """A file's URI for Spark: ``file://`` for local paths, the root's scheme and host
        otherwise (``s3://`` becomes Hadoop's ``s3a://``)."""
        if "://" not in self.root:
            return "file://" + path
        root = self.root.rstrip("/")
        prefix = root[: len(root) - len(self.root_path.rstrip("/"))]
        if prefix.startswith("s3://"):
            prefix = "s3a://" + prefix[len("s3://") :]
        return prefix + path

    @property
    def known_rows(self) -> int:
        """Event rows known before reading (Parquet only; text files count as 0)."""
        return sum(t.rows for t in self.tasks if t.rows > 0)


def file_format(path: str) -> str:
    """``parquet``, ``json`` or ``csv`` from the file name; raises ``InputSchemaError``."""
    name = posixpath.basename(path).lower()
    for comp in _COMPRESSIONS:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    ext = posixpath.splitext(name)[1]
    if ext not in _EXTENSIONS:
        raise InputSchemaError(
            f"{path}: unsupported file type {ext or '(no extension)'!r}; expected .parquet, .jsonl/.json or .csv"
        )
    return _EXTENSIONS[ext]


def _list_log(fs: pafs.FileSystem, root: str, log: str) -> tuple[list[str], str | None]:
    """The log's files sorted by path, and its directory (None for ``<log>.<ext>`` files)."""
    directory = posixpath.join(root, log)
    info = fs.get_file_info(directory)
    if info.type == pafs.FileType.Directory:
        found = fs.get_file_info(pafs.FileSelector(directory, recursive=True))
        files = [
            f.path
            for f in found
            if f.type == pafs.FileType.File
            and not any(part.startswith(("_", ".")) for part in posixpath.relpath(f.path, directory).split("/"))
        ]
        return sorted(files), directory
    siblings = fs.get_file_info(pafs.FileSelector(root, recursive=False))
    return sorted(
        f.path for f in siblings if f.type == pafs.FileType.File and posixpath.basename(f.path).startswith(log + ".")
    ), None


def plan_inputs(events_dir: str, rows_per_task: int = 500_000) -> InputPlan:
    """List and check every input file; raises :class:`InputSchemaError` on the first bad one."""
    fs, root = filesystem_for(events_dir)
    info = fs.get_file_info(root)
    if info.type != pafs.FileType.Directory:
        raise InputSchemaError(f"{events_dir}: no such directory")
    files: dict[str, tuple[str, ...]] = {}
    log_dirs: dict[str, str | None] = {}
    tasks: list[ReadTask] = []
    for log in (*EVENT_LOGS, "subscriptions"):
        paths, log_dirs[log] = _list_log(fs, root, log)
        if not paths and log in REQUIRED_LOGS:
            raise InputSchemaError(f"{posixpath.join(events_dir, log)}: the {log} log is missing (no files)")
        files[log] = tuple(paths)
        if log == "subscriptions":
            continue
        if len(paths) >= 1 << (63 - SEQ_FILE_SHIFT):
            raise InputSchemaError(f"{log}: {len(paths)} files is more than the replay can order")
        for index, path in enumerate(paths):
            tasks.extend(_check_and_split(fs, log, path, index, rows_per_task))
    subscriptions, anomalies = read_subscriptions(fs, files["subscriptions"], root)
    warn_if_incomplete(fs, root)
    return InputPlan(events_dir, fs, files, tuple(tasks), root, log_dirs, subscriptions, anomalies)


def _is_empty_log_file(fs: pafs.FileSystem, path: str, fmt: str) -> bool:
    """A 0-byte file that is still a file of its format: uncompressed JSON Lines with no
    record. Raises ``InputSchemaError`` naming any other 0-byte file: a CSV needs at least its
    header row (a header-only CSV is a valid empty log), Parquet its footer, a compressed file
    its own header. Skipping such a file silently lost a whole log (every ack of a 0-byte
    ``produced`` file became ``unknown_position``)."""
    if fs.get_file_info(path).size != 0:
        return False
    if fmt == "json" and not path.lower().endswith(_COMPRESSIONS):
        return True
    what = {"csv": "a CSV file (not even a header row)", "parquet": "a Parquet file (no footer)"}.get(fmt, "")
    if path.lower().endswith(_COMPRESSIONS):
        what = "a compressed file"
    raise InputSchemaError(f"{path}: the file is empty (0 bytes), not {what}; remove it or write the log again")


def _check_and_split(fs: pafs.FileSystem, log: str, path: str, index: int, rows_per_task: int) -> list[ReadTask]:
    fmt = file_format(path)
    if _is_empty_log_file(fs, path, fmt):
        return []
    try:
        if fmt == "parquet":
            with fs.open_input_file(path) as f:
                meta = pq.ParquetFile(f).metadata
                schema = meta.schema.to_arrow_schema()
            check_file_schema(log, path, schema)
            tasks: list[ReadTask] = []
            group: list[int] = []
            offset = rows = 0
            for rg in range(meta.num_row_groups):
                n = meta.row_group(rg).num_rows
                if group and rows + n > rows_per_task:
                    tasks.append(ReadTask(log, path, fmt, index, tuple(group), offset, rows))
                    offset, group, rows = offset + rows, [], 0
                group.append(rg)
                rows += n
            if group:
                tasks.append(ReadTask(log, path, fmt, index, tuple(group), offset, rows))
            return tasks
        with _open_text(fs, path, fmt, log) as reader:
            check_file_schema(log, path, reader.schema, text_columns=True)
        return [ReadTask(log, path, fmt, index, None, 0, -1)]
    except InputSchemaError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputSchemaError(f"{path}: cannot read the {log} log as {fmt}: {exc}") from None


class _TextReader:
    """A streaming CSV / JSON Lines reader that closes its file."""

    def __init__(self, stream: pa.NativeFile, reader: pa.RecordBatchReader | pcsv.CSVStreamingReader) -> None:
        self._stream = stream
        self._reader = reader
        self.schema: pa.Schema = reader.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self._reader)

    def __enter__(self) -> _TextReader:  # noqa: PYI034 - final class
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()


def _open_text(fs: pafs.FileSystem, path: str, fmt: str, log: str) -> _TextReader:
    stream = fs.open_input_stream(path, compression="detect")
    try:
        if fmt == "csv":
            types = {c.name: pa.string() for c in LOG_COLUMNS[log]}
            reader = pcsv.open_csv(
                stream,
                read_options=pcsv.ReadOptions(block_size=TEXT_BLOCK_BYTES),
                convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True),
            )
        else:
            reader = pjson.open_json(stream, read_options=pjson.ReadOptions(block_size=TEXT_BLOCK_BYTES))
    except BaseException:
        stream.close()
        raise
    return _TextReader(stream, reader)


def read_task(task: ReadTask, fs: pafs.FileSystem) -> Iterator[pa.RecordBatch]:
    """Read one task as :data:`~.schema.EVENT_SCHEMA` batches.

    Raises :class:`~.schema.InputSchemaError` naming the file when the file itself cannot be
    read (corrupt, or a text file whose column changes type half way).
    """
    offset = task.row_offset
    try:
        if task.fmt == "parquet":
            with fs.open_input_file(task.path) as f:
                pfile = pq.ParquetFile(f)
                names = set(pfile.schema_arrow.names)
                columns = [c.name for c in LOG_COLUMNS[task.log] if c.name in names]
                for batch in pfile.iter_batches(BATCH_ROWS, row_groups=list(task.row_groups or ()), columns=columns):
                    yield to_events(task.log, batch, task.file_index, offset)
                    offset += batch.num_rows
            return
        with _open_text(fs, task.path, task.fmt, task.log) as reader:
            for batch in reader:
                if task.fmt == "json":
                    check_file_schema(task.log, task.path, batch.schema, text_columns=True)
                    _check_json_types(task, batch.schema)
                yield to_events(task.log, batch, task.file_index, offset)
                offset += batch.num_rows
    except InputSchemaError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise InputSchemaError(f"{task.path}: cannot read the {task.log} log: {exc}") from None


def _check_json_types(task: ReadTask, schema: pa.Schema) -> None:
    for col in LOG_COLUMNS[task.log]:
        if col.name in schema.names:
            t = schema.field(col.name).type
            usable = (
                pa.types.is_null(t)
                or pa.types.is_string(t)
                or pa.types.is_large_string(t)
                or (col.kind != STR and pa.types.is_integer(t))
            )
            if not usable:
                raise InputSchemaError(f"{task.path}: column '{col.name}' has type {t}; expected {col.kind}")


def read_subscriptions(
    fs: pafs.FileSystem, paths: tuple[str, ...], root: str = ""
) -> tuple[dict[str, tuple[SubscriptionSpec, ...]], pa.Table]:
    """Read the ``subscriptions`` log: declarations and timed events per topic, and anomalies
    for bad rows (see :class:`~.subscriptions.SubscriptionRows`; details name the file
    relative to ``root``).
    """
    acc = SubscriptionRows()
    for path in paths:
        fmt = file_format(path)
        try:
            if _is_empty_log_file(fs, path, fmt):
                continue
            if fmt == "parquet":
                with fs.open_input_file(path) as f:
                    table = pq.read_table(f)
            else:
                with _open_text(fs, path, fmt, "subscriptions") as reader:
                    table = pa.Table.from_batches(list(reader), reader.schema)
        except (pa.ArrowException, OSError) as exc:
            raise InputSchemaError(f"{path}: cannot read the subscriptions log: {exc}") from None
        check_file_schema("subscriptions", path, table.schema, text_columns=fmt != "parquet")
        acc.add(table, posixpath.relpath(path, root) if root else path)
    return acc.result()


def validate_subscriptions(table: pa.Table, source: str) -> tuple[dict[str, tuple[SubscriptionSpec, ...]], pa.Table]:
    """Declarations, timed events and anomalies of one in-memory ``subscriptions`` table
    (``source`` names it in anomaly details), as :func:`read_subscriptions` finds them in a file."""
    acc = SubscriptionRows()
    acc.add(table, source)
    return acc.result()


def read_all(plan: InputPlan) -> Iterator[pa.RecordBatch]:
    """Every event batch of the plan, task after task (single process)."""
    for task in plan.tasks:
        yield from read_task(task, plan.filesystem)


def parquet_topics(plan: InputPlan) -> set[str]:
    """Every non-null ``topic`` of the plan's Parquet event files (text files are not read).

    Reads only the ``topic`` column, dictionary-encoded: for the usual dictionary-encoded
    column chunks that is the dictionaries plus their indices, a few KB per row group. The
    Spark job uses it to group by an integer hash of the topic instead of the string.
    """
    names: set[str] = set()
    for path in sorted({t.path for t in plan.tasks if t.fmt == "parquet"}):
        with plan.filesystem.open_input_file(path) as f:
            parquet = pq.ParquetFile(f, read_dictionary=["topic"])
            if "topic" not in parquet.schema_arrow.names:
                continue
            for chunk in parquet.read(columns=["topic"]).column(0).chunks:
                if pa.types.is_dictionary(chunk.type):
                    values = chunk.dictionary
                elif pa.types.is_null(chunk.type):
                    continue
                else:
                    values = pc.unique(chunk)
                names.update(v for v in pc.cast(values, pa.string()).to_pylist() if v is not None)
    return names
