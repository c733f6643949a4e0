"""Durable store: one SQLite database in WAL mode inside a data directory.

Theory of operation
-------------------
The directory holds ``mledger.db`` (with SQLite's ``-wal``/``-shm`` companions) and ``LOCK``.
Opening a store takes an exclusive ``flock`` on ``LOCK`` and writes the holder's pid into it,
so a second process (or a second store object in this process) is refused with
:class:`~mledger.core.StoreLockedError` instead of both writing one database. The kernel
drops the lock when its holder exits, a SIGKILL included, so a crashed process never leaves a
stale lock behind. (``flock`` is advisory and unreliable on network file systems: keep data
directories on local disks.)

Writes go through one connection, with group commit. Every ``create_ledger``, ``append``,
``append_many``, ``seal_ledger``, ``delete_ledger``, ``put`` and ``delete`` call is one *write*;
the calling thread queues it and waits. The thread whose write is at the head of the queue is
the *leader*: it takes the queued writes (at most :data:`GROUP_COMMIT_MAX_WRITES`), runs them
in one ``BEGIN IMMEDIATE .. COMMIT`` transaction, each inside its own ``SAVEPOINT``, then wakes
their threads and hands the lead to the next queued write. Writes that arrive while a
transaction commits (its fsync) therefore share the next one, as in LevelDB's writer queue or
a database's group commit. A write is confirmed (its call returns) only after the transaction
holding it committed, so a call that returned is on disk (with ``synchronous="FULL"``, even
across a power loss; with ``"NORMAL"``, across a process crash). A write that raises changed
nothing: its savepoint is rolled back and the others of its group still commit; a failed
commit fails every write of the group. Each call stays one atomic unit, so a fault-injecting
wrapper above the store still sees, and can fail, every write point.

Reads use one connection per reading thread: WAL lets them run against the last committed
state while a write (and its fsync) is in progress. Measured on 2 cores with one appending
thread and one reading thread (FULL): a single shared connection gave 5.8k appends/s and 0.56M
entries read/s; per-thread readers gave 4.4k appends/s and 1.5M entries read/s, and with
synchronous NORMAL the shared connection starved the writer (1.8k vs 23.6k appends/s), because
readers hold the lock between statements.

WAL checkpoints run off the commit path. SQLite's automatic checkpoint (``wal_autocheckpoint``)
runs inside the COMMIT that pushes the WAL past 1,000 pages: that commit copies the WAL into
the database and fsyncs both, which took 5-40 ms against 0.3-0.5 ms for a plain commit of a
100 KB entry with ``synchronous="NORMAL"``, and every write queued behind it waited. Here the
writer connection has it off; once the commits since the last checkpoint have written about
``checkpoint_bytes`` (an estimate: the entries' and values' bytes plus three pages a write), the
leader wakes a checkpointer thread, started on first need, with its own connection. It runs a
``PASSIVE`` checkpoint, which copies what no reader still needs and never blocks writers or
readers; the next write after a complete one restarts the WAL from its start. Under a sustained
load a PASSIVE checkpoint never catches up (frames arrive while it copies), so when the WAL
holds more than ``wal_limit_bytes`` the checkpointer runs a ``RESTART`` checkpoint, which waits
for the write in progress, copies everything and makes the next write restart the WAL; writers
wait for it (the checkpointer holds the store's transaction lock meanwhile). Should the thread
fall behind anyway (starved of CPU while a writer commits back to back), a leader that finds
the WAL file over twice ``wal_limit_bytes`` returns only once a checkpoint requested after its
commit has run, so the WAL's size has a hard bound. ``journal_size_limit`` truncates a WAL that grew past
that limit when it restarts. :meth:`SqliteStore.close` stops the thread and runs a
``TRUNCATE`` checkpoint, so a closed store is the database file alone with an empty WAL.
Checkpoints never change what a commit means: a write is durable once its COMMIT returned, and
a crash in the middle of a checkpoint is recovered by SQLite from the WAL on the next open.

Every read is a single SQL statement, hence one consistent snapshot; a range read is one
index range scan on ``entries (ledger_id, entry_id)``.

Settings are data stored in the database (``settings`` table), as diskcache does: a store
reopened without ``max_entry_size`` adopts the stored value; a store opened with an explicit
value adopts that value and records it. Changing the limit is always safe: it governs new
appends only, and entries stored under a larger limit stay readable.

Ledger ids come from an ``AUTOINCREMENT`` key, so they are unique and increasing for the life of
the database, deleted ledgers included. Entry ids are ``MAX(entry_id) + 1`` within the append's
transaction, so they are contiguous from 0; :meth:`SqliteStore.check` verifies it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from ..core import (
    BadVersionError,
    ConfigError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    StateCorruptedError,
    StoreLockedError,
)
from ._base import DEFAULT_MAX_ENTRY_SIZE, NEW_NODE, Versioned, checked_size

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_CHECKPOINT_BYTES",
    "DEFAULT_WAL_LIMIT_BYTES",
    "GROUP_COMMIT_MAX_WRITES",
    "LOCK_NAME",
    "SCHEMA_VERSION",
    "SYNCHRONOUS_MODES",
    "SqliteStore",
    "SqliteStoreStats",
]

log = logging.getLogger(__name__)

DATABASE_NAME = "mledger.db"
LOCK_NAME = "LOCK"
SCHEMA_VERSION = 1
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

GROUP_COMMIT_MAX_WRITES = 512
"""The most writes (store calls) one group-commit transaction holds."""

DEFAULT_CHECKPOINT_BYTES = 4 * 1024 * 1024
"""WAL bytes written (estimated) after which the checkpointer runs a PASSIVE checkpoint: SQLite's
automatic checkpoint threshold (1,000 pages of 4 KiB)."""

DEFAULT_WAL_LIMIT_BYTES = 16 * 1024 * 1024
"""WAL size past which the checkpointer runs a RESTART checkpoint, making writers wait."""

_T = TypeVar("_T")
_APPLICATION_ID = 0x4D4C4447  # "MLDG": marks the file as an mledger store for `file(1)` and us
_BUSY_TIMEOUT_MS = 10_000
_CHECKPOINT_BUSY_TIMEOUT_MS = 1_000
# WAL bytes a write costs beyond its data: the b-tree pages it changes (a leaf and its parents;
# measured 3-4 pages of 4 KiB per single 1 KiB append, up to 11 when a leaf splits).
_WRITE_OVERHEAD_ESTIMATE = 3 * 4096

_SCHEMA = """
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value NOT NULL
);
CREATE TABLE ledgers (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    sealed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE entries (
    ledger_id INTEGER NOT NULL,
    entry_id  INTEGER NOT NULL,
    data      BLOB NOT NULL,
    PRIMARY KEY (ledger_id, entry_id)
) WITHOUT ROWID;
CREATE TABLE metadata (
    path    TEXT PRIMARY KEY,
    data    BLOB NOT NULL,
    version INTEGER NOT NULL
);
"""
# WITHOUT ROWID on entries: the (ledger_id, entry_id) key is the table itself, so an append
# writes one b-tree instead of two and a range read is one scan (about 30% more single
# appends per second for 100-byte entries than a rowid table with a separate index).

_INSERT_CHUNKS = (64, 16, 4, 1)
"""Rows of the multi-row INSERT statements a batch is cut into, largest first."""
_INSERT_SQL = {
    n: "INSERT INTO entries VALUES " + ",".join(f"(?1, ?2 + {k}, ?{k + 3})" for k in range(n)) for n in _INSERT_CHUNKS
}
# One multi-row INSERT per 64 entries instead of ``executemany`` (one statement step per row):
# measured on 2 cores, 130-byte entries, WAL + NORMAL, per row: 1.7 -> 1.1 us for batches of
# 100, 2.9 -> 0.8 us for 500; batches of one cost the same. A handful of fixed sizes keeps the
# prepared statements few (sqlite3's statement cache holds them all).

_LENGTH = "SELECT (SELECT COALESCE(SUM(LENGTH(data)), 0) FROM entries WHERE ledger_id = ?1) FROM ledgers WHERE id = ?1"
_LAST_ENTRY = "SELECT sealed, (SELECT MAX(entry_id) FROM entries WHERE ledger_id = ?1) FROM ledgers WHERE id = ?1"


@dataclass(frozen=True)
class SqliteStoreStats:
    """Group-commit counters of a :class:`SqliteStore`."""

    writes: int
    """Write calls run in a transaction (failed ones included)."""
    transactions: int
    """Transactions run: ``writes / transactions`` is the mean group size."""
    largest_group: int
    """The most writes one transaction held."""
    checkpoints: int = 0
    """Background PASSIVE checkpoints run (they never block writers)."""
    blocking_checkpoints: int = 0
    """RESTART checkpoints run because the WAL passed ``wal_limit_bytes`` (writers waited)."""
    stalls: int = 0
    """Commits whose thread then waited for a checkpoint: the WAL had passed twice its limit."""


class SqliteStore:
    """A :class:`~mledger.storage.Store` kept in a SQLite database under ``path``.

    ``path`` is a directory, created if missing. ``max_entry_size`` None keeps the stored
    limit (``DEFAULT_MAX_ENTRY_SIZE``, 5 MiB, for a new store); a value is adopted and stored.
    ``synchronous`` is SQLite's durability level for commits: ``"FULL"`` survives power loss,
    ``"NORMAL"`` survives a process crash and is faster; it is a per-process choice, not stored.
    ``checkpoint_bytes`` and ``wal_limit_bytes`` tune the background WAL checkpoints (see the
    module doc): a PASSIVE checkpoint after about ``checkpoint_bytes`` written, a blocking
    RESTART one when the WAL holds more than ``wal_limit_bytes``.

    Raises :class:`StoreLockedError` when another store holds the directory,
    :class:`StateCorruptedError` when the database is not a readable mledger store, and
    :class:`ConfigError` for invalid arguments.

    Thread-safe. A write blocks until the group-commit transaction holding it committed (a
    commit fsyncs under FULL and EXTRA; concurrent writes share one); reads never wait for
    writes. ``blocking_writes`` is True under FULL and EXTRA only: a managed ledger then writes
    on its writer threads, else on the adding thread (a WAL commit under NORMAL or OFF reaches
    the operating system, not the disk: about 15 µs). After :meth:`close` every call raises
    :class:`ManagedLedgerClosedError`. Do not use a store in a child process after ``fork``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_entry_size: int | None = None,
        synchronous: str = "FULL",
        *,
        checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES,
        wal_limit_bytes: int = DEFAULT_WAL_LIMIT_BYTES,
    ) -> None:
        for name, value in (("checkpoint_bytes", checkpoint_bytes), ("wal_limit_bytes", wal_limit_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if wal_limit_bytes < checkpoint_bytes:
            raise ConfigError(
                f"wal_limit_bytes ({wal_limit_bytes}) must be at least checkpoint_bytes ({checkpoint_bytes})"
            )
        if max_entry_size is not None and (not isinstance(max_entry_size, int) or max_entry_size <= 0):
            raise ConfigError(f"max_entry_size must be a positive int, got {max_entry_size!r}")
        sync = synchronous.upper()
        if sync not in SYNCHRONOUS_MODES:
            raise ConfigError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, got {synchronous!r}")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.database = self.path / DATABASE_NAME
        self.synchronous = sync
        self._closed = False
        # A commit that fsyncs (FULL, EXTRA) waits on the disk: a managed ledger hands its adds
        # to a writer thread. Under NORMAL or OFF a WAL commit only reaches the OS, so the
        # adding thread writes itself: a broker's event loop then answers its producers
        # without two thread switches per group of SENDs (issue 27).
        self.blocking_writes = sync in ("FULL", "EXTRA")
        # The transaction lock: held by the group-commit leader while its transaction runs,
        # and by close() and check().
        self._write_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: deque[_Write] = deque()
        self._writes_committed = 0
        self._transactions = 0
        self._largest_group = 0
        self.checkpoint_bytes = checkpoint_bytes
        self.wal_limit_bytes = wal_limit_bytes
        self._wal_written = 0  # estimated WAL bytes since the checkpointer was last woken
        self._checkpointer: _Checkpointer | None = None
        self._stalls = 0
        self._wal_file = self.path / (DATABASE_NAME + "-wal")
        self._registry_lock = threading.Lock()
        self._readers: list[_Reader] = []
        self._local = threading.local()
        self._lock_fd = _acquire_dir_lock(self.path)
        try:
            self._writer = self._connect()
            self._max_entry_size = self._open_schema(max_entry_size)
        except BaseException:
            if hasattr(self, "_writer"):
                self._writer.close()
            _release_dir_lock(self._lock_fd)
            raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"SqliteStore({str(self.path)!r}, {state})"

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- settings ---------------------------------------------------------------------------
    @property
    def max_entry_size(self) -> int:
        """The largest entry accepted, in bytes; assigning stores the new limit (one transaction)."""
        return self._max_entry_size

    @max_entry_size.setter
    def max_entry_size(self, value: int) -> None:
        if not isinstance(value, int) or value <= 0:
            raise ConfigError(f"max_entry_size must be a positive int, got {value!r}")
        self._write(lambda conn: _put_setting(conn, "max_entry_size", value))
        self._max_entry_size = value

    # -- LedgerStore ------------------------------------------------------------------------
    def create_ledger(self) -> int:
        """Create an empty ledger; return its id (unique, increasing, never reused)."""

        def apply(conn: sqlite3.Connection) -> int:
            ledger_id = conn.execute("INSERT INTO ledgers DEFAULT VALUES").lastrowid
            assert ledger_id is not None
            return ledger_id

        return self._write(apply)

    def append(self, ledger_id: int, data: bytes) -> int:
        """Append one entry in one transaction; return its entry id.

        Raises EntryTooLargeError, LedgerNotFoundError (unknown or sealed ledger).
        """
        data = self._sized(data)

        def apply(conn: sqlite3.Connection) -> int:
            entry_id = self._next_entry_id(conn, ledger_id)
            conn.execute("INSERT INTO entries VALUES (?, ?, ?)", (ledger_id, entry_id, data))
            return entry_id

        return self._write(apply, len(data))

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        """Append all ``entries`` in one transaction, or none; return the first entry id.

        An empty batch stores nothing and returns the id the next entry would get.
        Raises EntryTooLargeError (before anything is written), LedgerNotFoundError.
        """
        size = checked_size(entries, self._max_entry_size)
        # A caller's buffer is copied (the write may run on another thread); bytes are immutable.
        batch = entries if all(type(data) is bytes for data in entries) else [bytes(data) for data in entries]

        def apply(conn: sqlite3.Connection) -> int:
            first = self._next_entry_id(conn, ledger_id)
            _insert_entries(conn, ledger_id, first, batch)
            return first

        return self._write(apply, size)

    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        """Entries ``first_entry..last_entry`` (inclusive) that exist, in order; one query.

        Raises LedgerNotFoundError.
        """
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT data FROM entries WHERE ledger_id = ? AND entry_id BETWEEN ? AND ? ORDER BY entry_id",
                (ledger_id, first_entry, last_entry),
            ).fetchall()
            # Entries exist only inside an existing ledger, so rows prove the ledger exists. An
            # empty result needs the second look; it is still linearizable because ledgers are
            # created empty and ids are never reused.
            if not rows and _one(conn, "SELECT 1 FROM ledgers WHERE id = ?", (ledger_id,)) is None:
                raise _not_found(ledger_id)
        return [row[0] for row in rows]

    def last_entry_id(self, ledger_id: int) -> int:
        """The id of the ledger's last entry, -1 when empty. Raises LedgerNotFoundError."""
        with self._reading() as conn:
            row = _one(conn, _LAST_ENTRY, (ledger_id,))
        if row is None:
            raise _not_found(ledger_id)
        return -1 if row[1] is None else int(row[1])

    def ledger_length(self, ledger_id: int) -> int:
        """The bytes of the ledger's entries. Raises LedgerNotFoundError."""
        with self._reading() as conn:
            row = _one(conn, _LENGTH, (ledger_id,))
        if row is None:
            raise _not_found(ledger_id)
        return int(row[0])

    def ledger_exists(self, ledger_id: int) -> bool:
        """Whether the ledger exists (created and not deleted)."""
        with self._reading() as conn:
            return _one(conn, "SELECT 1 FROM ledgers WHERE id = ?", (ledger_id,)) is not None

    def seal_ledger(self, ledger_id: int) -> None:
        """Close the ledger for appends (idempotent). Raises LedgerNotFoundError."""

        def apply(conn: sqlite3.Connection) -> None:
            if conn.execute("UPDATE ledgers SET sealed = 1 WHERE id = ?", (ledger_id,)).rowcount == 0:
                raise _not_found(ledger_id)

        self._write(apply)

    def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger and all its entries in one transaction; a missing ledger is a no-op."""

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM entries WHERE ledger_id = ?", (ledger_id,))
            conn.execute("DELETE FROM ledgers WHERE id = ?", (ledger_id,))

        self._write(apply)

    # -- MetadataStore ----------------------------------------------------------------------
    def get(self, path: str) -> Versioned | None:
        """The value and version at ``path``, or None."""
        with self._reading() as conn:
            row = _one(conn, "SELECT data, version FROM metadata WHERE path = ?", (path,))
        return None if row is None else Versioned(row[0], row[1])

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        """Store ``data`` at ``path`` in one transaction; return the new version.

        Compare-and-set as in :meth:`MetadataStore.put`: raises BadVersionError, changing
        nothing, when ``expected_version`` does not match (``NEW_NODE``: the node exists).
        """
        data = bytes(data)

        def apply(conn: sqlite3.Connection) -> int:
            current = _current_version(conn, path)
            _check_version(path, current, expected_version)
            version = 0 if current is None else current + 1
            conn.execute(
                "INSERT INTO metadata (path, data, version) VALUES (?, ?, ?)"
                " ON CONFLICT (path) DO UPDATE SET data = excluded.data, version = excluded.version",
                (path, data, version),
            )
            return version

        return self._write(apply, len(data))

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete ``path`` in one transaction; a missing node is a no-op unless a version is expected.

        Raises BadVersionError, changing nothing, on a version mismatch.
        """

        def apply(conn: sqlite3.Connection) -> None:
            current = _current_version(conn, path)
            if current is None and expected_version is None:
                return
            _check_version(path, current, expected_version)
            conn.execute("DELETE FROM metadata WHERE path = ?", (path,))

        self._write(apply)

    def children(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path`` (implied by deeper paths too)."""
        prefix = path.rstrip("/") + "/"
        # '0' is the character after '/', so [prefix, upper) is exactly the keys under prefix.
        upper = prefix[:-1] + "0"
        start = len(prefix) + 1
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT DISTINCT CASE WHEN instr(substr(path, ?1), '/') = 0 THEN substr(path, ?1)"
                " ELSE substr(path, ?1, instr(substr(path, ?1), '/') - 1) END"
                " FROM metadata WHERE path >= ?2 AND path < ?3",
                (start, prefix, upper),
            ).fetchall()
        return sorted(row[0] for row in rows)

    # -- lifecycle and maintenance ----------------------------------------------------------
    def close(self) -> None:
        """Close every connection and release the directory lock. Idempotent.

        Blocks until in-flight calls on other threads have finished.
        """
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            checkpointer, self._checkpointer = self._checkpointer, None
        try:
            if checkpointer is not None:
                checkpointer.stop()
            with self._registry_lock:
                readers, self._readers = self._readers, []
            for reader in readers:
                with reader.lock:
                    reader.conn.close()
            with self._write_lock:
                try:
                    # Every reader is closed: this copies the whole WAL and truncates it.
                    self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                except sqlite3.Error:
                    log.exception("%s: the closing checkpoint failed (the WAL keeps the data)", self.path)
                self._writer.close()
        finally:
            _release_dir_lock(self._lock_fd)

    def stats(self) -> SqliteStoreStats:
        """Group-commit counters since the store was opened (a consistent snapshot)."""
        with self._write_lock:
            checkpointer = self._checkpointer
            checkpoints, blocking = (0, 0) if checkpointer is None else checkpointer.counts()
            return SqliteStoreStats(
                self._writes_committed,
                self._transactions,
                self._largest_group,
                checkpoints,
                blocking,
                self._stalls,
            )

    def check(self) -> list[str]:
        """Verify the database and the store's invariants; return the problems found (empty: clean).

        Checks SQLite's own integrity, WAL mode, the settings, that each ledger's entry ids are
        contiguous from 0, that no entry belongs to a missing ledger, that the ledger id counter
        is ahead of every ledger, and the metadata versions. Reads everything: O(size of the
        database). Blocks writers while it runs. Raises ManagedLedgerClosedError.
        """
        problems: list[str] = []
        with self._write_lock:
            self._check_open()
            conn = self._writer
            conn.execute("BEGIN")
            try:
                problems += _check_database(conn)
            finally:
                conn.execute("COMMIT")
        return problems

    # -- internals --------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.database, isolation_level=None, check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000
        )
        try:
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        except BaseException as exc:
            conn.close()
            _raise_if_corrupt(self.database, exc)
            raise
        return conn

    def _open_schema(self, max_entry_size: int | None) -> int:
        conn = self._writer
        try:
            mode = _one(conn, "PRAGMA journal_mode = WAL", ())
            if mode is None or str(mode[0]).lower() != "wal":
                raise StateCorruptedError(f"{self.database}: cannot switch to WAL mode (journal mode {mode})")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer thread does it
            conn.execute(f"PRAGMA journal_size_limit = {self.wal_limit_bytes}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                limit = self._init_or_verify(conn, max_entry_size)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            _raise_if_corrupt(self.database, exc)
            raise
        return limit

    def _init_or_verify(self, conn: sqlite3.Connection, max_entry_size: int | None) -> int:
        version = _one(conn, "PRAGMA user_version", ())[0]
        if version == 0:
            if _one(conn, "SELECT 1 FROM sqlite_schema WHERE type = 'table'", ()) is not None:
                raise StateCorruptedError(f"{self.database} holds tables but is not an mledger store")
            _create_schema(conn)
            conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            _put_setting(conn, "schema_version", SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise StateCorruptedError(
                f"{self.database} has schema version {version}; this mledger reads version {SCHEMA_VERSION}"
            )
        stored = _one(conn, "SELECT value FROM settings WHERE key = 'max_entry_size'", ())
        if max_entry_size is None:
            if stored is not None:
                return int(stored[0])
            max_entry_size = DEFAULT_MAX_ENTRY_SIZE
        elif stored is not None and stored[0] != max_entry_size:
            log.info("%s: max_entry_size changed from %s to %s", self.path, stored[0], max_entry_size)
        _put_setting(conn, "max_entry_size", max_entry_size)
        return max_entry_size

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosedError(f"the store at {self.path} is closed")

    def _write(self, apply: Callable[[sqlite3.Connection], _T], size: int = 0) -> _T:
        """Run ``apply`` in a group-commit transaction; return its result once committed.

        Queues the write; the thread at the head of the queue leads (see the module doc), the
        others sleep until their write is done or they reach the head. ``size`` is the bytes of
        data it writes (for the checkpoint estimate). Raises what ``apply`` raised (its
        savepoint rolled back), the commit's error, or ManagedLedgerClosedError.
        """
        write = _Write(apply, size)
        with self._queue_lock:
            self._check_open()
            queue = self._queue
            queue.append(write)
            leads = len(queue) == 1
        if not leads:
            write.wake.acquire()  # released when it is done, or when it is at the head
        if not write.done:
            self._lead()
        if write.error is not None:
            raise write.error
        return write.result

    def _lead(self) -> None:
        """Commit the writes at the head of the queue (ours first) in one transaction."""
        group: list[_Write] = []
        stall: tuple[_Checkpointer, int] | None = None
        try:
            with self._write_lock:
                # Taken once the transaction lock is ours: what queued while we waited joins.
                with self._queue_lock:
                    group = list(islice(self._queue, GROUP_COMMIT_MAX_WRITES))
                if self._closed:
                    closed = ManagedLedgerClosedError(f"the store at {self.path} is closed")
                    for write in group:
                        write.error = closed
                else:
                    _commit(self._writer, group)
                    self._transactions += 1
                    self._writes_committed += len(group)
                    if len(group) > self._largest_group:
                        self._largest_group = len(group)
                    self._wal_written += sum(write.size for write in group) + _WRITE_OVERHEAD_ESTIMATE * len(group)
                    if self._wal_written >= self.checkpoint_bytes:
                        self._wal_written = 0
                        stall = self._request_checkpoint()
        finally:
            with self._queue_lock:
                for _ in group:
                    self._queue.popleft()
                head = self._queue[0] if self._queue else None
            for write in group[1:]:
                write.done = True
                write.wake.release()
            if group:
                group[0].done = True  # ours: no wake-up needed
            if head is not None:
                head.wake.release()  # the next leader
        if stall is not None:
            # The WAL passed twice its limit: the checkpointer fell behind. Our writes are
            # committed and the next leader runs; we return once a checkpoint has caught up.
            checkpointer, request = stall
            checkpointer.wait_for(request)
            self._stalls += 1

    def _request_checkpoint(self) -> tuple[_Checkpointer, int] | None:
        """Wake the checkpointer (started on first need); the leader calls it, locked.

        Returns the checkpointer and the request's number when the committing thread must wait
        for that checkpoint: ``journal_size_limit`` truncates a restarting WAL to
        ``wal_limit_bytes``, so a WAL file over twice that holds more frames not yet copied
        than the checkpointer should have let through.
        """
        checkpointer = self._checkpointer
        if checkpointer is None:
            try:
                checkpointer = _Checkpointer(self._connect(), self._write_lock, self.wal_limit_bytes, str(self.path))
            except sqlite3.Error:
                log.exception("%s: cannot open the checkpointer's connection; checkpointing at close", self.path)
                return None
            self._checkpointer = checkpointer
        request = checkpointer.wake()
        try:
            size = self._wal_file.stat().st_size
        except FileNotFoundError:
            return None
        return (checkpointer, request) if size > 2 * self.wal_limit_bytes else None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """This thread's read connection, held against a concurrent close()."""
        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._new_reader()
        with reader.lock:
            self._check_open()
            yield reader.conn

    def _new_reader(self) -> _Reader:
        with self._registry_lock:
            self._check_open()
            # Connections of threads that have ended are closed here rather than leaked until close().
            alive = []
            for reader in self._readers:
                if reader.thread.is_alive():
                    alive.append(reader)
                else:
                    with reader.lock:
                        reader.conn.close()
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            reader = _Reader(conn, threading.current_thread())
            alive.append(reader)
            self._readers = alive
        self._local.reader = reader
        return reader

    def _sized(self, data: bytes) -> bytes:
        data = bytes(data)
        checked_size((data,), self._max_entry_size)
        return data

    @staticmethod
    def _next_entry_id(conn: sqlite3.Connection, ledger_id: int) -> int:
        row = _one(conn, _LAST_ENTRY, (ledger_id,))
        if row is None:
            raise _not_found(ledger_id)
        if row[0]:
            raise LedgerNotFoundError(f"ledger {ledger_id} is sealed and accepts no appends")
        return 0 if row[1] is None else int(row[1]) + 1


class _Write:
    """One queued write: what to run in the transaction, and its outcome."""

    __slots__ = ("apply", "done", "error", "result", "size", "wake")

    def __init__(self, apply: Callable[[sqlite3.Connection], Any], size: int) -> None:
        self.apply = apply
        self.size = size
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.wake = threading.Lock()
        self.wake.acquire()


def _commit(conn: sqlite3.Connection, group: list[_Write]) -> None:
    """Run ``group`` in one transaction, each write in a savepoint; record every outcome.

    Never raises: a write's own error is recorded on it (its savepoint rolled back, the others
    go on); an error of the transaction itself (BEGIN, COMMIT, SQLite rolling everything back)
    is recorded on every write that has no error yet.
    """
    single = len(group) == 1  # no savepoint needed: the transaction is the write
    try:
        conn.execute("BEGIN IMMEDIATE")
        for write in group:
            if single:
                write.result = write.apply(conn)
                break
            conn.execute("SAVEPOINT w")
            try:
                write.result = write.apply(conn)
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # SQLite rolled the whole transaction back: the group failed
                conn.execute("ROLLBACK TO w")
                write.result, write.error = None, exc
            conn.execute("RELEASE w")
        conn.execute("COMMIT")
    except BaseException as exc:
        # SQLite may already have rolled back on its own (e.g. SQLITE_FULL).
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:  # pragma: no cover - the connection itself is broken
                log.exception("rollback of a failed group commit failed")
        for write in group:
            if write.error is None:
                write.result, write.error = None, exc


class _Checkpointer:
    """The background thread that checkpoints the WAL on its own connection (see the module doc).

    :meth:`wake` asks for a checkpoint and never blocks; :meth:`wait_for` waits until a
    checkpoint that started after that request has finished; :meth:`stop` lets a running
    checkpoint finish, ends the thread (releasing every waiter) and closes its connection.
    """

    def __init__(self, conn: sqlite3.Connection, write_lock: threading.Lock, wal_limit_bytes: int, name: str) -> None:
        self._conn = conn
        self._write_lock = write_lock
        self._wal_limit_bytes = wal_limit_bytes
        self._page_size = int(_one(conn, "PRAGMA page_size", ())[0])
        # A RESTART checkpoint waits (holding the transaction lock) for readers still on an older
        # snapshot; past this it goes on as a PASSIVE one and the next request retries.
        conn.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_BUSY_TIMEOUT_MS}")
        self._cond = threading.Condition()
        self._requested = 0  # requests made, numbered from 1
        self._completed = 0  # every request up to this one has had its checkpoint
        self._stopping = False
        self.checkpoints = 0
        self.blocking = 0
        self._thread = threading.Thread(target=self._run, name=f"mledger-sqlite-checkpointer {name}", daemon=True)
        self._thread.start()

    def wake(self) -> int:
        """Request a checkpoint; return the request's number for :meth:`wait_for`."""
        with self._cond:
            self._requested += 1
            self._cond.notify_all()
            return self._requested

    def wait_for(self, request: int) -> None:
        with self._cond:
            while self._completed < request and not self._stopping:
                self._cond.wait()

    def counts(self) -> tuple[int, int]:
        """(checkpoints run, RESTART checkpoints among them)."""
        with self._cond:
            return self.checkpoints, self.blocking

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._completed >= self._requested and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                request = self._requested
            blocking = False
            try:
                blocking = self._checkpoint()
            except sqlite3.Error:  # e.g. a full disk: the WAL keeps the data, the next request retries
                log.exception("background WAL checkpoint failed")
            with self._cond:
                self._completed = request
                self.checkpoints += 1
                self.blocking += blocking
                self._cond.notify_all()

    def _checkpoint(self) -> bool:
        _busy, frames, _copied = _one(self._conn, "PRAGMA wal_checkpoint(PASSIVE)", ())
        if frames * self._page_size <= self._wal_limit_bytes:
            return False
        # The writers outran the PASSIVE checkpoints (frames arrive while one copies, so the WAL
        # never ends fully copied before a write). Holding the store's transaction lock makes
        # the write in progress finish and the next one wait (SQLite's own busy-wait for its
        # writer lock loses that race to a back-to-back writer); RESTART then copies the frames
        # the PASSIVE one missed, and the next write restarts the WAL.
        with self._write_lock:
            _one(self._conn, "PRAGMA wal_checkpoint(RESTART)", ())
        return True


class _Reader:
    """A reading thread's connection, with the lock close() takes before closing it."""

    __slots__ = ("conn", "lock", "thread")

    def __init__(self, conn: sqlite3.Connection, thread: threading.Thread) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.thread = thread


# -- helpers -----------------------------------------------------------------------------------
def _insert_entries(conn: sqlite3.Connection, ledger_id: int, first: int, batch: Sequence[bytes]) -> None:
    """Insert ``batch`` as entries ``first..`` of ``ledger_id``, in multi-row statements
    (:data:`_INSERT_CHUNKS`)."""
    done, total = 0, len(batch)
    for size in _INSERT_CHUNKS:
        if total - done >= size:
            sql = _INSERT_SQL[size]
            while total - done >= size:
                conn.execute(sql, (ledger_id, first + done, *batch[done : done + size]))
                done += size


def _one(conn: sqlite3.Connection, sql: str, params: Any) -> Any:
    # Closing the cursor ends the statement: a half-read SELECT would pin its snapshot, and later
    # reads on this connection would see stale data.
    cur = conn.execute(sql, params)
    try:
        return cur.fetchone()
    finally:
        cur.close()


def _raise_if_corrupt(database: Path, exc: BaseException) -> None:
    # OperationalError (cannot open, I/O error, disk full) is an environment problem, not bad
    # content; every other DatabaseError (SQLITE_NOTADB, SQLITE_CORRUPT) is.
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        raise StateCorruptedError(f"{database} is not a readable mledger store: {exc}") from exc


def _create_schema(conn: sqlite3.Connection) -> None:
    # executescript() would COMMIT the open transaction; run the statements one by one instead.
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def _put_setting(conn: sqlite3.Connection, key: str, value: object) -> None:
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _current_version(conn: sqlite3.Connection, path: str) -> int | None:
    row = _one(conn, "SELECT version FROM metadata WHERE path = ?", (path,))
    return None if row is None else int(row[0])


def _not_found(ledger_id: int) -> LedgerNotFoundError:
    return LedgerNotFoundError(f"ledger {ledger_id} does not exist")


def _check_version(path: str, current: int | None, expected: int | None) -> None:
    """MemoryStore's compare-and-set rule, on bare versions, with the same messages."""
    if expected is None:
        return
    if expected == NEW_NODE:
        if current is not None:
            raise BadVersionError(f"{path} already exists at version {current}")
        return
    if current is None:
        raise BadVersionError(f"{path} does not exist (expected version {expected})")
    if current != expected:
        raise BadVersionError(f"{path} is at version {current}, expected {expected}")


def _check_database(conn: sqlite3.Connection) -> list[str]:
    problems = [f"sqlite: {row[0]}" for row in conn.execute("PRAGMA integrity_check").fetchall() if row[0] != "ok"]
    mode = _one(conn, "PRAGMA journal_mode", ())[0]
    if str(mode).lower() != "wal":
        problems.append(f"journal mode is {mode}, expected wal")
    settings = dict(conn.execute("SELECT key, value FROM settings").fetchall())
    if settings.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"settings: schema_version is {settings.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    limit = settings.get("max_entry_size")
    if not isinstance(limit, int) or limit <= 0:
        problems.append(f"settings: max_entry_size is {limit!r}, expected a positive int")
    for ledger_id, n, low, high in conn.execute(
        "SELECT ledger_id, COUNT(*), MIN(entry_id), MAX(entry_id) FROM entries GROUP BY ledger_id"
    ):
        if low != 0 or high != n - 1:
            problems.append(f"ledger {ledger_id}: entry ids not contiguous from 0 ({n} entries, ids {low}..{high})")
    for (ledger_id,) in conn.execute(
        "SELECT DISTINCT ledger_id FROM entries WHERE ledger_id NOT IN (SELECT id FROM ledgers)"
    ):
        problems.append(f"ledger {ledger_id}: entries of a ledger that does not exist")
    for (ledger_id,) in conn.execute("SELECT ledger_id FROM entries WHERE typeof(data) != 'blob' LIMIT 10"):
        problems.append(f"ledger {ledger_id}: an entry is not a blob")
    for ledger_id, sealed in conn.execute("SELECT id, sealed FROM ledgers WHERE sealed NOT IN (0, 1)"):
        problems.append(f"ledger {ledger_id}: sealed flag is {sealed!r}")
    seq = _one(conn, "SELECT seq FROM sqlite_sequence WHERE name = 'ledgers'", ())
    top = _one(conn, "SELECT MAX(id) FROM ledgers", ())[0]
    if top is not None and (seq is None or seq[0] < top):
        problems.append(f"ledger id counter ({None if seq is None else seq[0]}) is behind ledger {top}")
    for path, version, kind in conn.execute(
        "SELECT path, version, typeof(data) FROM metadata WHERE version < 0 OR typeof(version) != 'integer'"
        " OR typeof(data) != 'blob'"
    ):
        problems.append(f"metadata {path}: version {version!r}, data of type {kind}")
    return problems


def _acquire_dir_lock(directory: Path) -> int:
    """Take the exclusive flock on ``directory/LOCK`` and record our pid; return the fd."""
    lock_path = directory / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise StoreLockedError(f"data directory {directory} is locked by {_holder(lock_path)}") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except BaseException:
        _release_dir_lock(fd)
        raise
    return fd


def _holder(lock_path: Path) -> str:
    try:
        pid = int(lock_path.read_text().strip())
    except (OSError, ValueError):
        return "another process (pid unknown)"
    if pid == os.getpid():
        return f"another SqliteStore in this process (pid {pid})"
    return f"another process (pid {pid})"


def _release_dir_lock(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # so a stale pid is never reported for the next holder
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
