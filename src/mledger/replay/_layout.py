"""The prepared log: a replay-ready layout of event logs, and its manifest.

A prepared log is a directory (local, or any filesystem pyarrow opens: ``hdfs://``,
``s3://``, ...)::

    _manifest.json                      written last: its presence marks a complete layout
    _subscriptions.parquet              declared subscriptions (topic, subscription, type, initial_position)
    _anomalies.parquet                  rows of the subscriptions log that could not be used
    topic=<escaped topic>/partition=<n>/part-<writer>-<k>.parquet

Each ``topic=.../partition=...`` directory (Hive style) holds the events of one
topic-partition from every log, as one table of :data:`PREPARED_SCHEMA` (the event schema
without ``topic`` and ``partition``, which the directory names), already in replay order
``(ts, kind, seq)``, in Parquet files of at most :data:`FILE_ROWS` rows and row groups of at
most :data:`ROW_GROUP_ROWS`. Rows whose topic or partition is missing sit in
``__HIVE_DEFAULT_PARTITION__`` directories, as in Hive; they replay as invalid rows.

The manifest (:class:`Manifest`, JSON) lists, per topic-partition, its files with their
row counts, byte sizes, first and last timestamps and a digest of their Parquet footer,
all by paths relative to the root, so a layout can be moved between filesystems. A replay
checks the layout against it before it starts (a file missing, of another size, or not in
the manifest is a :class:`ManifestMismatchError` naming it) and each task checks the
footer digest and row count of every file it reads.

Writers (``mledger prepare``, ``mledger generate``) write a file under a hidden temporary
name and rename it when it is complete; its final name carries the writer's id (a Spark
task attempt), so attempts never overwrite each other, and the driver keeps only the files
it was told about (:func:`remove_unlisted`).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import xxhash

from ..core import MLedgerError
from ._inputs import filesystem_for
from ._model import SubscriptionSpec
from ._schema import ANOMALY_SCHEMA, EVENT_SCHEMA, KIND_NAMES, SUBSCRIPTIONS_SCHEMA, EventOrderError

LAYOUT_FORMAT = "mledger-prepared-log"
LAYOUT_VERSION = 1
"""Version of the layout and of :data:`PREPARED_SCHEMA`; a reader refuses other versions."""
MANIFEST_FILE = "_manifest.json"
SUBSCRIPTIONS_FILE = "_subscriptions.parquet"
ANOMALIES_FILE = "_anomalies.parquet"
ROW_GROUP_ROWS = 65_536
FILE_ROWS = 4_194_304
READ_BATCH_ROWS = 65_536
"""Rows per batch a replay reads (bounded memory per topic-partition)."""
NULL_DIRECTORY = "__HIVE_DEFAULT_PARTITION__"
_MAX_NAME = 160
_NULL_TS = np.iinfo(np.int64).min

PREPARED_SCHEMA = pa.schema([f for f in EVENT_SCHEMA if f.name not in ("topic", "partition")])
"""The event table of one topic-partition (see :data:`~.schema.EVENT_SCHEMA`)."""


class PreparedLayoutError(MLedgerError, ValueError):
    """A directory is not a usable prepared log (no manifest, another version, bad manifest)."""


class ManifestMismatchError(PreparedLayoutError):
    """A prepared log's files no longer match its manifest; the message names the file."""


# -- names ------------------------------------------------------------------------------------------
def partition_directory(topic: str | None, partition: int | None) -> str:
    """The directory of a topic-partition, relative to the layout's root.

    >>> partition_directory("persistent://public/default/orders", 3)
    'topic=persistent%3A%2F%2Fpublic%2Fdefault%2Forders/partition=3'
    >>> partition_directory(None, None)
    'topic=__HIVE_DEFAULT_PARTITION__/partition=__HIVE_DEFAULT_PARTITION__'

    Names are percent-escaped (injective); a long one is cut and gets a digest of the whole
    name, so every name fits a filesystem's 255-byte limit.
    """
    if topic is None:
        name = NULL_DIRECTORY
    else:
        name = quote(topic, safe="-_")
        if name.startswith(("_", ".")) or name == NULL_DIRECTORY:
            name = "%" + f"{ord(name[0]):02X}" + name[1:]
        if len(name) > _MAX_NAME:
            name = name[: _MAX_NAME - 17] + "~" + xxhash.xxh64_hexdigest(topic.encode("utf-8"))
    part = NULL_DIRECTORY if partition is None else str(partition)
    return f"topic={name}/partition={part}"


# -- the manifest ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreparedFile:
    """One Parquet file of a topic-partition."""

    path: str
    """Relative to the layout's root."""
    rows: int
    bytes: int
    first_ts: int | None
    last_ts: int | None
    footer_xxh64: str
    """xxh64 of the file's Parquet footer (metadata): a rewritten file has another."""

    def to_json(self) -> dict[str, Any]:
        """The file as a record of the manifest (and of the Spark prepare's file rows)."""
        return asdict(self)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> PreparedFile:
        """The file from a record :meth:`to_json` wrote (extra keys ignored); ``KeyError``,
        ``ValueError`` or ``TypeError`` for a record missing or mistyping a field."""
        return cls(
            record["path"],
            int(record["rows"]),
            int(record["bytes"]),
            record["first_ts"],
            record["last_ts"],
            str(record["footer_xxh64"]),
        )


@dataclass(frozen=True)
class PreparedPartition:
    """One topic-partition of a prepared log: its files, in replay order."""

    topic: str | None
    partition: int | None
    files: tuple[PreparedFile, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def first_ts(self) -> int | None:
        return self.files[0].first_ts if self.files else None

    @property
    def last_ts(self) -> int | None:
        return self.files[-1].last_ts if self.files else None

    @property
    def directory(self) -> str:
        return partition_directory(self.topic, self.partition)

    @property
    def key(self) -> tuple[str | None, int | None]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Manifest:
    """What a prepared log holds. ``created_by`` says which tool wrote it."""

    partitions: tuple[PreparedPartition, ...]
    subscriptions: int = 0
    """Declared subscriptions (rows of :data:`SUBSCRIPTIONS_FILE`)."""
    anomalies: int = 0
    """Rows of :data:`ANOMALIES_FILE`."""
    created_by: str = ""
    version: int = LAYOUT_VERSION

    @property
    def events(self) -> int:
        return sum(p.rows for p in self.partitions)

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "format": LAYOUT_FORMAT,
            "version": self.version,
            "created_by": self.created_by,
            "schema": [{"name": f.name, "type": str(f.type)} for f in PREPARED_SCHEMA],
            "events": self.events,
            "subscriptions": self.subscriptions,
            "anomalies": self.anomalies,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "directory": p.directory,
                    "rows": p.rows,
                    "bytes": p.bytes,
                    "first_ts": p.first_ts,
                    "last_ts": p.last_ts,
                    "files": [f.to_json() for f in p.files],
                }
                for p in self.partitions
            ],
        }
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        """Parse a manifest; raises :class:`PreparedLayoutError` naming ``where``."""
        try:
            doc = json.loads(text)
            if doc.get("format") != LAYOUT_FORMAT:
                raise PreparedLayoutError(f"{where}: not an mledger prepared-log manifest")
            if doc.get("version") != LAYOUT_VERSION:
                raise PreparedLayoutError(
                    f"{where}: prepared-log version {doc.get('version')!r}; this mledger reads version "
                    f"{LAYOUT_VERSION} (prepare the raw logs again)"
                )
            schema = [(f["name"], f["type"]) for f in doc["schema"]]
            if schema != [(f.name, str(f.type)) for f in PREPARED_SCHEMA]:
                raise PreparedLayoutError(f"{where}: the event schema differs from this mledger's")
            parts = tuple(
                PreparedPartition(
                    p["topic"],
                    p["partition"],
                    tuple(PreparedFile.from_json(f) for f in p["files"]),
                )
                for p in doc["partitions"]
            )
            return cls(parts, int(doc["subscriptions"]), int(doc["anomalies"]), str(doc.get("created_by", "")))
        except PreparedLayoutError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise PreparedLayoutError(f"{where}: unreadable manifest ({type(exc).__name__}: {exc})") from None


# -- filesystems -------------------------------------------------------------------------------------
def is_prepared(root: str) -> bool:
    """Whether ``root`` holds a prepared log (its manifest)."""
    fs, path = filesystem_for(root)
    return fs.get_file_info(posixpath.join(path, MANIFEST_FILE)).type == pafs.FileType.File


@dataclass(frozen=True)
class PreparedLog:
    """An opened prepared log: where it is and its manifest."""

    root: str
    filesystem: pafs.FileSystem
    path: str
    manifest: Manifest

    def subscriptions(self) -> dict[str, tuple[SubscriptionSpec, ...]]:
        """The declared subscriptions per topic, in declaration order."""
        if not self.manifest.subscriptions:
            return {}
        table = pq.read_table(posixpath.join(self.path, SUBSCRIPTIONS_FILE), filesystem=self.filesystem)
        out: dict[str, list[SubscriptionSpec]] = {}
        for seq, row in enumerate(table.to_pylist()):
            out.setdefault(row["topic"], []).append(subscription_spec(row, seq))
        return {k: tuple(v) for k, v in out.items()}

    def anomalies(self) -> pa.Table:
        """Anomalies found while preparing (rows of the subscriptions log that were not used)."""
        if not self.manifest.anomalies:
            return ANOMALY_SCHEMA.empty_table()
        return pq.read_table(posixpath.join(self.path, ANOMALIES_FILE), filesystem=self.filesystem).cast(ANOMALY_SCHEMA)


_OWN_FILES = frozenset({MANIFEST_FILE, SUBSCRIPTIONS_FILE, ANOMALIES_FILE})


def open_prepared(root: str, verify: bool = True) -> PreparedLog:
    """Open a prepared log; with ``verify``, check its files against the manifest (one listing).

    Raises :class:`PreparedLayoutError` (no manifest, another version) or
    :class:`ManifestMismatchError`: a listed file missing or of another size, or a data file
    the manifest does not list (hidden files, ``.`` or ``_``, are ignored).
    """
    fs, path = filesystem_for(root)
    manifest_path = posixpath.join(path, MANIFEST_FILE)
    try:
        with fs.open_input_stream(manifest_path) as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise PreparedLayoutError(f"{root}: not a prepared log (no {MANIFEST_FILE})") from None
    manifest = Manifest.from_json(text, posixpath.join(root, MANIFEST_FILE))
    log = PreparedLog(root, fs, path, manifest)
    if verify:
        verify_files(log)
    return log


def verify_files(log: PreparedLog) -> None:
    """Check the layout's files against its manifest (see :func:`open_prepared`)."""
    fs, root = log.filesystem, log.path
    found: dict[str, int] = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = posixpath.relpath(info.path, root)
        if any(part.startswith((".", "_")) for part in rel.split("/")[-1:]) or rel in _OWN_FILES:
            continue
        found[rel] = info.size
    manifest = log.manifest
    for name, needed in ((SUBSCRIPTIONS_FILE, manifest.subscriptions), (ANOMALIES_FILE, manifest.anomalies)):
        if needed and fs.get_file_info(posixpath.join(root, name)).type != pafs.FileType.File:
            raise ManifestMismatchError(f"{posixpath.join(log.root, name)}: listed in the manifest but missing")
    for part in manifest.partitions:
        for f in part.files:
            size = found.pop(f.path, None)
            where = posixpath.join(log.root, f.path)
            if size is None:
                raise ManifestMismatchError(f"{where}: listed in the manifest but missing")
            if size != f.bytes:
                raise ManifestMismatchError(
                    f"{where}: {size:,} bytes, the manifest says {f.bytes:,} (the file changed after prepare)"
                )
    if found:
        extra = sorted(found)[0]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise ManifestMismatchError(
            f"{posixpath.join(log.root, extra)}{more}: not in the manifest (a file added after prepare)"
        )


# -- reading ------------------------------------------------------------------------------------------
def footer_digest(f: pa.NativeFile, size: int, where: str) -> str:
    """xxh64 (hex) of a Parquet file's footer: the metadata block before the last 8 bytes."""
    if size < 12:
        raise ManifestMismatchError(f"{where}: not a Parquet file ({size} bytes)")
    f.seek(size - 8)
    tail = f.read(8)
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1" or length > size - 12:
        raise ManifestMismatchError(f"{where}: not a Parquet file (no footer)")
    f.seek(size - 8 - length)
    return xxhash.xxh64_hexdigest(f.read(length))


def read_partition(
    log: PreparedLog, part: PreparedPartition, batch_rows: int = READ_BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The topic-partition's events in replay order, :data:`PREPARED_SCHEMA` batches of at most
    ``batch_rows`` rows; one file open at a time. Raises :class:`ManifestMismatchError` when a
    file's footer or row count differs from the manifest."""
    for entry in part.files:
        where = posixpath.join(log.root, entry.path)
        try:
            f = log.filesystem.open_input_file(posixpath.join(log.path, entry.path))
        except FileNotFoundError:
            raise ManifestMismatchError(f"{where}: listed in the manifest but missing") from None
        with f:
            size = f.size()
            if size != entry.bytes or footer_digest(f, size, where) != entry.footer_xxh64:
                raise ManifestMismatchError(f"{where}: the file changed after prepare (its footer differs)")
            f.seek(0)
            pfile = pq.ParquetFile(f)
            if pfile.metadata.num_rows != entry.rows:
                raise ManifestMismatchError(
                    f"{where}: {pfile.metadata.num_rows:,} rows, the manifest says {entry.rows:,}"
                )
            yield from pfile.iter_batches(batch_rows, columns=PREPARED_SCHEMA.names, use_threads=False)


# -- writing ------------------------------------------------------------------------------------------
def sort_key_columns(batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ts with nulls first, kind, seq) of event rows, as numpy arrays."""
    ts = batch.column("ts")
    ts_np = np.asarray((ts if ts.null_count == 0 else pc.fill_null(ts, _NULL_TS)).to_numpy(zero_copy_only=False))
    kind = np.asarray(batch.column("kind").to_numpy(zero_copy_only=False)).astype(np.int64)
    seq = np.asarray(pc.fill_null(batch.column("seq"), -1).to_numpy(zero_copy_only=False))
    return ts_np, kind, seq


def replay_order(table: pa.Table) -> np.ndarray:
    """The indices that sort event rows into replay order ``(ts, kind, seq)``, nulls first."""
    ts, kind, seq = sort_key_columns(table)
    return np.lexsort((seq, kind, ts))


def first_order_break(previous: tuple[int, int, int] | None, ts: np.ndarray, kind: np.ndarray, seq: np.ndarray) -> int:
    """Index of the first row not strictly after the one before it (-1 when in order);
    ``previous`` is the key of the row before the first."""
    if previous is not None:
        ts = np.concatenate(([previous[0]], ts))
        kind = np.concatenate(([previous[1]], kind))
        seq = np.concatenate(([previous[2]], seq))
    if len(ts) < 2:
        return -1
    t0, t1, k0, k1, s0, s1 = ts[:-1], ts[1:], kind[:-1], kind[1:], seq[:-1], seq[1:]
    ok = (t1 > t0) | ((t1 == t0) & ((k1 > k0) | ((k1 == k0) & (s1 > s0))))
    if ok.all():
        return -1
    return int(np.flatnonzero(~ok)[0]) + (0 if previous is not None else 1)


class PartitionWriter:
    """Writes one topic-partition's events, in replay order, as Parquet files of bounded size.

    ``write`` takes :data:`PREPARED_SCHEMA` (or :data:`~.schema.EVENT_SCHEMA`) batches that
    continue the order; it raises :class:`~.schema.EventOrderError` if a row is not after
    the one before it. ``close`` returns the :class:`PreparedPartition`. ``writer_id`` goes
    into the file names (a Spark task attempt id), so two writers of the same topic-partition
    never overwrite each other's files.
    """

    def __init__(
        self,
        fs: pafs.FileSystem,
        root: str,
        topic: str | None,
        partition: int | None,
        writer_id: str,
        file_rows: int = FILE_ROWS,
        row_group_rows: int = ROW_GROUP_ROWS,
    ) -> None:
        self._fs = fs
        self._root = root
        self.topic = topic
        self.partition = partition
        self._dir = partition_directory(topic, partition)
        self._writer_id = writer_id
        self._file_rows = file_rows
        self._row_group_rows = row_group_rows
        self._files: list[PreparedFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._temp = ""
        self._rows = 0
        self._first_ts: int | None = None
        self._last_ts: int | None = None
        self._last_key: tuple[int, int, int] | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        fs.create_dir(posixpath.join(root, self._dir), recursive=True)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0:
            return
        if isinstance(batch, pa.Table):
            for b in batch.combine_chunks().to_batches():
                self.write(b)
            return
        if batch.schema.names != PREPARED_SCHEMA.names:
            batch = batch.select(PREPARED_SCHEMA.names)
        ts, kind, seq = sort_key_columns(batch)
        bad = first_order_break(self._last_key, ts, kind, seq)
        if bad >= 0:
            raise EventOrderError(
                f"events of {self.topic} partition {self.partition} are not in replay order at row {bad} of a "
                f"batch: (ts={ts[bad]}, kind={KIND_NAMES[int(kind[bad])]}, seq={seq[bad]}) after {self._last_key}"
            )
        self._last_key = (int(ts[-1]), int(kind[-1]), int(seq[-1]))
        self._pending.append(batch.cast(PREPARED_SCHEMA))
        self._pending_rows += batch.num_rows
        if self._pending_rows >= self._row_group_rows:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        """Write whole row groups (and, when ``final``, the rest); keep a partial one pending."""
        if not self._pending_rows:
            return
        table = pa.Table.from_batches(self._pending, PREPARED_SCHEMA)
        n, start = table.num_rows, 0
        while n - start >= self._row_group_rows or (final and start < n):
            take = min(self._file_rows - self._rows, self._row_group_rows, n - start)
            part = table.slice(start, take)
            self._sink().write_table(part, row_group_size=self._row_group_rows)
            ts = part.column("ts")
            if self._rows == 0:
                self._first_ts = ts[0].as_py()
            self._last_ts = ts[-1].as_py()
            self._rows += take
            start += take
            if self._rows >= self._file_rows:
                self._close_file()
        rest = table.slice(start)
        self._pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def _sink(self) -> pq.ParquetWriter:
        if self._writer is None:
            name = f"part-{self._writer_id}-{len(self._files):05d}.parquet"
            self._final = posixpath.join(self._dir, name)
            self._temp = posixpath.join(self._root, self._dir, f".{name}.inprogress")
            self._writer = pq.ParquetWriter(self._temp, PREPARED_SCHEMA, filesystem=self._fs, write_statistics=["ts"])
        return self._writer

    def _close_file(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        final = posixpath.join(self._root, self._final)
        self._fs.move(self._temp, final)
        with self._fs.open_input_file(final) as f:
            size = f.size()
            digest = footer_digest(f, size, final)
        self._files.append(PreparedFile(self._final, self._rows, size, self._first_ts, self._last_ts, digest))
        self._rows = 0

    def close(self) -> PreparedPartition:
        """Write what is buffered and return the topic-partition's files."""
        self._flush(final=True)
        self._close_file()
        return PreparedPartition(self.topic, self.partition, tuple(self._files))

    def abort(self) -> None:
        """Remove the file being written (not the ones already complete)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._fs.delete_file(self._temp)


# -- the whole layout ---------------------------------------------------------------------------------
def start_layout(out: str) -> tuple[pafs.FileSystem, str]:
    """Make ``out`` ready for a new prepared log: created if missing, emptied if it holds an
    earlier prepared log; raises :class:`PreparedLayoutError` if it holds anything else."""
    fs, path = filesystem_for(out)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise PreparedLayoutError(f"{out}: is a file; prepare writes a directory")
    if info.type == pafs.FileType.Directory:
        entries = fs.get_file_info(pafs.FileSelector(path, recursive=False))
        if entries:
            if fs.get_file_info(posixpath.join(path, MANIFEST_FILE)).type != pafs.FileType.File:
                raise PreparedLayoutError(f"{out}: exists and is not a prepared log; give an empty or new directory")
            fs.delete_file(posixpath.join(path, MANIFEST_FILE))  # first: a half-deleted layout is no layout
            fs.delete_dir_contents(path)
    fs.create_dir(path, recursive=True)
    return fs, path


def subscription_rows(subscriptions: Mapping[str, Sequence[SubscriptionSpec]]) -> pa.Table:
    """Declared subscriptions and timed subscription events as rows of
    :data:`~.schema.SUBSCRIPTIONS_SCHEMA` (timed events in input order)."""
    rows = [
        {
            "topic": topic,
            "subscription": s.name,
            "type": s.type,
            "initial_position": s.initial_position,
            "partition": s.partition,
            "event": s.event,
            "ts_ms": s.ts_ms if s.timed else None,
            "ledger_id": s.ledger_id if s.ledger_id >= 0 else None,
            "entry_id": s.entry_id if s.entry_id >= 0 else None,
        }
        for topic, specs in subscriptions.items()
        for s in sorted(specs, key=lambda s: s.seq)
    ]
    return pa.Table.from_pylist(rows, schema=SUBSCRIPTIONS_SCHEMA)


def subscription_spec(row: Mapping[str, object], seq: int) -> SubscriptionSpec:
    """A row of :data:`SUBSCRIPTIONS_FILE` as a spec (a prepared log of an earlier version has
    declarations only)."""

    def num(name: str, default: int) -> int:
        value = row.get(name)
        return default if value is None else int(value)  # type: ignore[call-overload]

    event = row.get("event")
    partition = row.get("partition")
    return SubscriptionSpec(
        str(row["subscription"]),
        str(row["type"]),
        str(row["initial_position"]),
        event=None if event is None else str(event),
        ts_ms=num("ts_ms", -1),
        partition=None if partition is None else int(partition),  # type: ignore[call-overload]
        ledger_id=num("ledger_id", -1),
        entry_id=num("entry_id", -1),
        seq=seq,
    )


def finish_layout(
    fs: pafs.FileSystem,
    path: str,
    partitions: Iterable[PreparedPartition],
    subscriptions: Mapping[str, Sequence[SubscriptionSpec]],
    anomalies: pa.Table,
    created_by: str,
) -> Manifest:
    """Write the subscriptions, the anomalies and (last) the manifest; remove files of other
    writers (failed or duplicate attempts). Topic-partitions are listed by topic, partition."""
    parts = list(partitions)
    seen = set()
    for p in parts:
        if p.key in seen:
            raise PreparedLayoutError(f"topic {p.topic!r} partition {p.partition} was written twice")
        seen.add(p.key)
    for topic, specs in subscriptions.items():  # a partition with subscription events only
        for spec in specs:
            if spec.timed and spec.partition is not None and (topic, spec.partition) not in seen:
                seen.add((topic, spec.partition))
                parts.append(PreparedPartition(topic, spec.partition, ()))
    parts.sort(key=lambda p: (p.topic is None, p.topic or "", p.partition is None, p.partition or 0))
    subs = subscription_rows(subscriptions)
    if subs.num_rows:
        pq.write_table(subs, posixpath.join(path, SUBSCRIPTIONS_FILE), filesystem=fs)
    if anomalies.num_rows:
        pq.write_table(anomalies.cast(ANOMALY_SCHEMA), posixpath.join(path, ANOMALIES_FILE), filesystem=fs)
    remove_unlisted(fs, path, parts)
    manifest = Manifest(tuple(parts), subs.num_rows, anomalies.num_rows, created_by)
    with fs.open_output_stream(posixpath.join(path, MANIFEST_FILE)) as f:
        f.write(manifest.to_json().encode("utf-8"))
    return manifest


def remove_unlisted(fs: pafs.FileSystem, path: str, parts: Sequence[PreparedPartition]) -> None:
    """Delete every file under the topic-partition directories that ``parts`` does not list."""
    keep = {f.path for p in parts for f in p.files}
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
        rel = posixpath.relpath(info.path, path)
        if info.type == pafs.FileType.File and rel.startswith("topic=") and rel not in keep:
            fs.delete_file(info.path)
