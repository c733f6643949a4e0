"""SqliteStore beyond the shared contract: persistence, WAL, the directory lock, crashes, check()."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mledger import (
    ConfigError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    StateCorruptedError,
    StoreLockedError,
)
from mledger.storage import DEFAULT_MAX_ENTRY_SIZE, SqliteStore, Versioned
from mledger.storage._sqlite import DATABASE_NAME, LOCK_NAME

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(data_dir)
    yield s
    s.close()


# -- persistence -------------------------------------------------------------------------------
def test_creates_the_directory_with_database_and_lock(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b"
    with SqliteStore(path):
        assert (path / DATABASE_NAME).is_file()
        assert (path / LOCK_NAME).is_file()


def test_everything_survives_a_reopen(data_dir: Path) -> None:
    with SqliteStore(data_dir) as s:
        open_ledger, sealed, deleted = s.create_ledger(), s.create_ledger(), s.create_ledger()
        s.append_many(open_ledger, [b"a", b"b"])
        s.append(sealed, b"s")
        s.seal_ledger(sealed)
        s.delete_ledger(deleted)
        s.put("/managed-ledgers/t", b"info")
        s.put("/managed-ledgers/t", b"info2", 0)
        s.put("/managed-ledgers/t/c", b"cursor")
    with SqliteStore(data_dir) as s:
        assert s.read(open_ledger, 0, 9) == [b"a", b"b"]
        assert s.append(open_ledger, b"c") == 2
        assert s.read(sealed, 0, 0) == [b"s"]
        with pytest.raises(LedgerNotFoundError, match="sealed"):
            s.append(sealed, b"t")
        assert not s.ledger_exists(deleted)
        assert s.create_ledger() > deleted  # the id counter is persisted, ids never reused
        assert s.get("/managed-ledgers/t") == Versioned(b"info2", 1)
        assert s.children("/managed-ledgers/t") == ["c"]
        assert s.check() == []


def test_database_is_in_wal_mode(store: SqliteStore) -> None:
    store.append(store.create_ledger(), b"x")
    assert (store.path / (DATABASE_NAME + "-wal")).exists()
    conn = sqlite3.connect(store.database)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_synchronous_level_is_applied_per_connection(data_dir: Path) -> None:
    with SqliteStore(data_dir, synchronous="normal") as s:
        assert s.synchronous == "NORMAL"
        assert s._writer.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with SqliteStore(data_dir) as s:
        assert s._writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, the default


@pytest.mark.parametrize("kwargs", [{"synchronous": "SOMETIMES"}, {"max_entry_size": 0}, {"max_entry_size": -5}])
def test_invalid_arguments_raise_config_error(data_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        SqliteStore(data_dir, **kwargs)  # type: ignore[arg-type]


# -- settings stored with the database -------------------------------------------------------------
def test_max_entry_size_is_stored_and_adopted(data_dir: Path) -> None:
    with SqliteStore(data_dir) as s:
        assert s.max_entry_size == DEFAULT_MAX_ENTRY_SIZE
    with SqliteStore(data_dir, max_entry_size=1000) as s:  # an explicit value is adopted and stored
        assert s.max_entry_size == 1000
        s.append(s.create_ledger(), b"x" * 1000)
    with SqliteStore(data_dir) as s:  # no value: the stored one
        assert s.max_entry_size == 1000
    with SqliteStore(data_dir, max_entry_size=10) as s:  # lowering keeps larger entries readable
        assert s.read(1, 0, 0) == [b"x" * 1000]
        s.max_entry_size = 20  # assignment is stored too
        assert s.check() == []
    with SqliteStore(data_dir) as s:
        assert s.max_entry_size == 20


def test_setting_an_invalid_limit_is_refused(store: SqliteStore) -> None:
    with pytest.raises(ConfigError):
        store.max_entry_size = 0
    assert store.max_entry_size == DEFAULT_MAX_ENTRY_SIZE


# -- refusing what is not ours -----------------------------------------------------------------
def test_a_file_that_is_not_a_database_is_refused(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / DATABASE_NAME).write_bytes(b"definitely not sqlite" * 100)
    for _ in range(2):  # the lock is released on failure: the second try fails the same way
        with pytest.raises(StateCorruptedError, match=DATABASE_NAME):
            SqliteStore(data_dir)


def test_a_foreign_database_is_refused(data_dir: Path) -> None:
    data_dir.mkdir()
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StateCorruptedError, match="not an mledger store"):
        SqliteStore(data_dir)


def test_a_newer_schema_is_refused(data_dir: Path) -> None:
    SqliteStore(data_dir).close()
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StateCorruptedError, match="schema version 99"):
        SqliteStore(data_dir)


# -- the directory lock ------------------------------------------------------------------------
_HOLDER = r"""
import sys
from mledger import StoreLockedError
from mledger.storage._sqlite import SqliteStore
try:
    store = SqliteStore(sys.argv[1])
except StoreLockedError as exc:
    print("LOCKED", exc, flush=True)
    sys.exit(3)
print("OPEN", flush=True)
sys.stdin.readline()
store.close()
print("CLOSED", flush=True)
sys.stdin.readline()
"""


def _spawn_holder(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def test_a_second_process_is_refused_with_the_directory_and_pid(store: SqliteStore) -> None:
    child = _spawn_holder(store.path)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 3, out
    assert out.startswith("LOCKED")
    assert str(store.path) in out
    assert f"pid {os.getpid()}" in out


def test_the_lock_is_refused_here_while_another_process_holds_it_and_released_on_close(data_dir: Path) -> None:
    child = _spawn_holder(data_dir)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "OPEN"
        with pytest.raises(StoreLockedError, match=rf"{data_dir}.*pid {child.pid}\b"):
            SqliteStore(data_dir)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "CLOSED"
        with SqliteStore(data_dir) as s:  # the child still runs, but has closed its store
            assert s.check() == []
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()


def test_a_second_store_in_this_process_is_refused(store: SqliteStore) -> None:
    with pytest.raises(StoreLockedError, match="this process"):
        SqliteStore(store.path)


def test_close_releases_the_lock(data_dir: Path) -> None:
    SqliteStore(data_dir).close()
    SqliteStore(data_dir).close()
    child = _spawn_holder(data_dir)
    out, _ = child.communicate("\n\n", timeout=60)
    assert child.returncode == 0, out
    assert out.split() == ["OPEN", "CLOSED"]


# -- threads -----------------------------------------------------------------------------------
def test_a_thread_reading_sees_writes_committed_by_another(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    store.append(ledger, b"0")
    first_read, wrote, read_back = threading.Event(), threading.Event(), threading.Event()
    seen: list[list[bytes]] = []

    def reader() -> None:
        seen.append(store.read(ledger, 0, 9))  # opens this thread's connection before the write
        first_read.set()
        wrote.wait(10)
        seen.append(store.read(ledger, 0, 9))
        read_back.set()

    t = threading.Thread(target=reader)
    t.start()
    assert first_read.wait(10)
    store.append(ledger, b"1")
    wrote.set()
    assert read_back.wait(10)
    t.join()
    assert seen == [[b"0"], [b"0", b"1"]]


def test_close_while_other_threads_read(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    store.append_many(ledger, [b"x" * 100] * 1000)
    started = threading.Barrier(5)
    outcomes: list[str] = []

    def reader() -> None:
        started.wait()
        try:
            while True:
                assert len(store.read(ledger, 0, 999)) == 1000
        except ManagedLedgerClosedError:
            outcomes.append("closed")

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    store.close()
    for t in threads:
        t.join(10)
    assert outcomes == ["closed"] * 4


def test_connections_of_finished_threads_are_closed(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    for _ in range(10):
        t = threading.Thread(target=store.read, args=(ledger, 0, 0))
        t.start()
        t.join()
    store.read(ledger, 0, 0)
    assert len(store._readers) <= 2


def test_a_large_range_is_read_with_one_query(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    entries = [b"%06d" % i for i in range(20_000)]
    store.append_many(ledger, entries)
    store.read(ledger, 0, 0)  # opens this thread's read connection
    statements: list[str] = []
    store._local.reader.conn.set_trace_callback(statements.append)
    assert store.read(ledger, 0, 19_999) == entries
    assert len(statements) == 1 and statements[0].startswith("SELECT data FROM entries")


def test_a_batch_is_appended_with_a_few_multi_row_inserts(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    statements: list[str] = []
    store._writer.set_trace_callback(statements.append)
    store.append_many(ledger, [b"%03d" % i for i in range(150)])
    store._writer.set_trace_callback(None)
    inserts = [s for s in statements if s.startswith("INSERT INTO entries")]
    assert len(inserts) == 6  # 150 rows = 2 x 64 + 16 + 4 + 2 x 1, not one statement step per row
    assert len(statements) <= 10  # with BEGIN, the entry id lookup, COMMIT


@pytest.mark.parametrize("sizes", [[0, 1, 3], [4, 5, 63], [64, 65, 100], [150, 1, 257]])
def test_batches_cut_into_multi_row_inserts_keep_ids_contiguous_and_data_intact(
    store: SqliteStore, sizes: list[int]
) -> None:
    ledger = store.create_ledger()
    expected: list[bytes] = []
    for size in sizes:
        batch = [b"%d-%d" % (size, i) for i in range(size)]
        assert store.append_many(ledger, batch) == len(expected)
        expected += batch
    assert store.read(ledger, 0, len(expected)) == expected
    assert store.last_entry_id(ledger) == len(expected) - 1
    assert store.check() == []

# -- check() -----------------------------------------------------------------------------------
def _raw(data_dir: Path, *sql: str) -> None:
    conn = sqlite3.connect(data_dir / DATABASE_NAME, isolation_level=None)
    try:
        for statement in sql:
            conn.execute(statement)
    finally:
        conn.close()


def test_check_is_clean_on_a_normal_store(store: SqliteStore) -> None:
    a, b = store.create_ledger(), store.create_ledger()
    store.append_many(a, [b"x"] * 10)
    store.append(b, b"y")
    store.delete_ledger(b)
    store.put("/m", b"")
    assert store.check() == []


def test_check_reports_gaps_orphans_and_bad_settings(data_dir: Path) -> None:
    with SqliteStore(data_dir) as s:
        gap, orphan = s.create_ledger(), s.create_ledger()
        s.append_many(gap, [b"x"] * 5)
        s.append(orphan, b"y")
    _raw(
        data_dir,
        f"DELETE FROM entries WHERE ledger_id = {gap} AND entry_id = 2",
        f"DELETE FROM ledgers WHERE id = {orphan}",
        "UPDATE settings SET value = -1 WHERE key = 'max_entry_size'",
    )
    with SqliteStore(data_dir, max_entry_size=100) as s:  # an explicit limit repairs the setting
        problems = s.check()
    assert any(f"ledger {gap}: entry ids not contiguous" in p for p in problems), problems
    assert any(f"ledger {orphan}: entries of a ledger that does not exist" in p for p in problems), problems
    assert len(problems) == 2, problems


def test_check_on_a_closed_store_raises(store: SqliteStore) -> None:
    store.close()
    with pytest.raises(ManagedLedgerClosedError):
        store.check()


# -- a real crash ------------------------------------------------------------------------------
_APPENDER = r"""
import sys
from mledger.storage._sqlite import SqliteStore
store = SqliteStore(sys.argv[1])
ledger = store.create_ledger()
def say(line):
    # One write per line: under PYTHONUNBUFFERED print() writes each piece separately, and a
    # SIGKILL between pieces would leave the parent a partial line.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
say(f"L {ledger}")
next_id, version, i = 0, -1, 0
while True:
    size = (i % 4) * 3  # 0: a single append, else a batch of 3, 6 or 9
    if size == 0:
        assert store.append(ledger, b"%d" % next_id) == next_id
        size = 1
    else:
        assert store.append_many(ledger, [b"%d" % (next_id + k) for k in range(size)]) == next_id
    next_id += size
    say(f"E {next_id - 1}")
    if i % 5 == 0:
        version = store.put("/crash/meta", b"%d" % (version + 1), version if version >= 0 else -1)
        say(f"M {version}")
    i += 1
"""


def _batch_ends() -> Iterator[int]:
    """The last entry id of each call the appender makes, in order (its schedule)."""
    last, i = -1, 0
    while True:
        last += max((i % 4) * 3, 1)
        yield last
        i += 1


@pytest.mark.parametrize("kill_after", [1, 60, 400])
def test_sigkill_loses_no_confirmed_write(data_dir: Path, kill_after: int) -> None:
    SqliteStore(data_dir).close()
    child = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(data_dir)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert child.stdout is not None
        kind, ledger_text = child.stdout.readline().split()
        assert kind == "L"
        confirmed_entry, confirmed_version = -1, -1
        for lines, line in enumerate(child.stdout, 1):
            kind, value = line.split()
            if kind == "E":
                confirmed_entry = int(value)
            else:
                confirmed_version = int(value)
            if lines == kill_after:
                os.kill(child.pid, signal.SIGKILL)
                break
        # Lines printed before the kill landed are confirmations too.
        for line in child.stdout:
            kind, value = line.split()
            if kind == "E":
                confirmed_entry = int(value)
            else:
                confirmed_version = int(value)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL

    ledger = int(ledger_text)
    with SqliteStore(data_dir) as s:  # the kernel released the dead child's lock
        assert s.check() == []
        last = s.last_entry_id(ledger)
        assert last >= confirmed_entry
        ends = _batch_ends()
        unconfirmed_end = next(ends)
        while unconfirmed_end <= confirmed_entry:
            unconfirmed_end = next(ends)
        # At most the one call in flight beyond the confirmed ones, and all of it or none.
        assert last in (confirmed_entry, unconfirmed_end)
        assert s.read(ledger, 0, last) == [b"%d" % i for i in range(last + 1)]
        meta = s.get("/crash/meta")
        if confirmed_version >= 0:
            assert meta is not None and meta.version in (confirmed_version, confirmed_version + 1)
        if meta is not None:
            assert meta.data == b"%d" % meta.version


# -- a real crash during group commits ---------------------------------------------------------------
_GROUP_APPENDERS = r"""
import sys, threading
from mledger.storage._sqlite import SqliteStore
store = SqliteStore(sys.argv[1])
threads = int(sys.argv[2])
ledgers = [store.create_ledger() for _ in range(threads)]
print("L", *ledgers, flush=True)
out = threading.Lock()

def append(t):
    ledger, next_id, i = ledgers[t], 0, 0
    while True:
        size = (i + t) % 3 + 1
        if size == 1:
            assert store.append(ledger, b"%d" % next_id) == next_id
        else:
            assert store.append_many(ledger, [b"%d" % (next_id + k) for k in range(size)]) == next_id
        next_id += size
        with out:
            print("E", t, next_id - 1, flush=True)
        i += 1

def put():
    version = -1
    while True:
        version = store.put("/crash/meta", b"%d" % (version + 1), version if version >= 0 else -1)
        with out:
            print("M", version, flush=True)

for t in range(threads):
    threading.Thread(target=append, args=(t,), daemon=True).start()
put()
"""


@pytest.mark.parametrize("kill_after", [30, 600])
def test_sigkill_during_group_commits_loses_no_confirmed_write(data_dir: Path, kill_after: int) -> None:
    """Eight appending threads and a metadata writer share group-commit transactions; a SIGKILL
    mid-stream keeps every confirmed write, and each thread's one unconfirmed call is all there
    or not at all."""
    SqliteStore(data_dir).close()
    child = subprocess.Popen(
        [sys.executable, "-c", _GROUP_APPENDERS, str(data_dir), "8"], stdout=subprocess.PIPE, text=True, env=_env()
    )
    confirmed: dict[int, int] = {}
    confirmed_version = -1
    try:
        assert child.stdout is not None
        ledgers = [int(x) for x in child.stdout.readline().split()[1:]]

        def record(line: str) -> None:
            nonlocal confirmed_version
            kind, *values = line.split()
            if kind == "E":
                confirmed[int(values[0])] = int(values[1])
            else:
                confirmed_version = int(values[0])

        for lines, line in enumerate(child.stdout, 1):
            record(line)
            if lines == kill_after:
                os.kill(child.pid, signal.SIGKILL)
                break
        for line in child.stdout:  # confirmations printed before the kill landed
            if line.endswith("\n"):
                record(line)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with SqliteStore(data_dir) as s:
        assert s.check() == []
        for t, ledger in enumerate(ledgers):
            last = s.last_entry_id(ledger)
            done = confirmed.get(t, -1)
            ends, end, i = [], -1, 0  # the thread's schedule: the last entry id of each call
            while end <= done:
                end += (i + t) % 3 + 1
                ends.append(end)
                i += 1
            assert last in (done, ends[-1]), f"thread {t}: confirmed {done}, stored up to {last}"
            assert s.read(ledger, 0, last) == [b"%d" % i for i in range(last + 1)]
        meta = s.get("/crash/meta")
        if confirmed_version >= 0:
            assert meta is not None and meta.version in (confirmed_version, confirmed_version + 1)
        if meta is not None:
            assert meta.data == b"%d" % meta.version


# -- background WAL checkpoints ------------------------------------------------------------------
def _wal_size(data_dir: Path) -> int:
    wal = data_dir / (DATABASE_NAME + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def _checkpointer_threads(data_dir: Path) -> list[threading.Thread]:
    """The checkpointer threads of the store at ``data_dir`` (the thread's name carries it:
    another test's store left open must not count here)."""
    return [t for t in threading.enumerate() if t.name == f"mledger-sqlite-checkpointer {data_dir}"]


def test_the_writer_leaves_checkpoints_to_the_checkpointer(store: SqliteStore) -> None:
    assert store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert store._writer.execute("PRAGMA journal_size_limit").fetchone()[0] == store.wal_limit_bytes


@pytest.mark.parametrize(
    "kwargs",
    [
        {"checkpoint_bytes": 0},
        {"checkpoint_bytes": -1},
        {"wal_limit_bytes": "big"},
        {"checkpoint_bytes": True},
        {"checkpoint_bytes": 1 << 20, "wal_limit_bytes": 1 << 19},
    ],
)
def test_invalid_checkpoint_settings_raise_config_error(data_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="checkpoint_bytes|wal_limit_bytes"):
        SqliteStore(data_dir, **kwargs)  # type: ignore[arg-type]


def test_the_wal_stays_bounded_under_back_to_back_commits(data_dir: Path) -> None:
    """2,000 commits of 1 KiB with no pause between them: a PASSIVE checkpoint never catches
    up with such a writer, so the RESTART checkpoints (the checkpointer's, or the leader's when
    the thread fell behind) must keep the WAL within twice the limit plus what the commits
    between two checks add (a checkpoint step, estimated: up to 4 steps of actual frames)."""
    limit, step = 256 * 1024, 64 * 1024
    with SqliteStore(data_dir, synchronous="NORMAL", checkpoint_bytes=step, wal_limit_bytes=limit) as s:
        ledger = s.create_ledger()
        largest = 0
        for i in range(2000):
            s.append(ledger, b"%04d" % i * 256)
            largest = max(largest, _wal_size(data_dir))
        stats = s.stats()
        assert stats.checkpoints + stats.blocking_checkpoints > 0
        assert stats.blocking_checkpoints > 0  # a back-to-back writer needs the RESTART ones
        assert largest <= 2 * limit + 4 * step, f"the WAL reached {largest} bytes"
        assert len(_checkpointer_threads(data_dir)) == 1
        assert s.read(ledger, 1999, 1999) == [b"1999" * 256]


def test_a_store_that_writes_little_starts_no_thread(store: SqliteStore) -> None:
    ledger = store.create_ledger()
    store.append_many(ledger, [b"x" * 100] * 10)
    assert _checkpointer_threads(store.path) == []
    assert store.stats().checkpoints == 0


def test_close_checkpoints_everything_and_ends_the_thread(data_dir: Path) -> None:
    s = SqliteStore(data_dir, synchronous="NORMAL", checkpoint_bytes=32 * 1024, wal_limit_bytes=1 << 20)
    ledger = s.create_ledger()
    for i in range(200):
        s.append_many(ledger, [b"%d" % i * 100] * 3)
    s.put("/k", b"v")
    reader = threading.Thread(target=lambda: s.read(ledger, 0, 10))  # a reader connection to close too
    reader.start()
    reader.join()
    assert len(_checkpointer_threads(data_dir)) == 1
    s.close()
    assert _checkpointer_threads(data_dir) == []
    assert _wal_size(data_dir) == 0
    # The database file alone (immutable: SQLite does not look for a WAL) holds every write.
    conn = sqlite3.connect(f"file:{data_dir / DATABASE_NAME}?immutable=1", uri=True)
    try:
        assert conn.execute("SELECT COUNT(*) FROM entries WHERE ledger_id = ?", (ledger,)).fetchone()[0] == 600
        assert conn.execute("SELECT data FROM metadata WHERE path = '/k'").fetchone()[0] == b"v"
    finally:
        conn.close()


def test_writes_from_many_threads_survive_concurrent_checkpoints(data_dir: Path) -> None:
    with SqliteStore(data_dir, synchronous="NORMAL", checkpoint_bytes=16 * 1024, wal_limit_bytes=64 * 1024) as s:
        ledgers = [s.create_ledger() for _ in range(4)]
        errors: list[BaseException] = []

        def work(ledger: int) -> None:
            try:
                for i in range(150):
                    assert s.append(ledger, b"%d" % i * 50) == i
                    if i % 10 == 0:
                        assert s.read(ledger, i, i) == [b"%d" % i * 50]
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(ledger,)) for ledger in ledgers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert s.check() == []
        for ledger in ledgers:
            assert s.read(ledger, 0, 149) == [b"%d" % i * 50 for i in range(150)]


_CHECKPOINTING_APPENDER = r"""
import sys
from mledger.storage._sqlite import SqliteStore
# A checkpoint every few commits and a RESTART one every few more: a SIGKILL lands in one.
store = SqliteStore(sys.argv[1], synchronous=sys.argv[2], checkpoint_bytes=24 * 1024, wal_limit_bytes=48 * 1024)
ledger = store.create_ledger()
sys.stdout.write(f"L {ledger}\n")
sys.stdout.flush()
i = 0
while True:
    assert store.append_many(ledger, [b"%d" % (i + k) * 300 for k in range(3)]) == i
    i += 3
    sys.stdout.write(f"E {i - 1}\n")
    sys.stdout.flush()
"""


@pytest.mark.parametrize(("synchronous", "kill_after"), [("NORMAL", 150), ("FULL", 60), ("NORMAL", 700)])
def test_sigkill_during_checkpoints_loses_no_confirmed_write(data_dir: Path, synchronous: str, kill_after: int) -> None:
    SqliteStore(data_dir).close()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHECKPOINTING_APPENDER, str(data_dir), synchronous],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    confirmed = -1
    try:
        assert child.stdout is not None
        kind, ledger_text = child.stdout.readline().split()
        assert kind == "L"
        for lines, line in enumerate(child.stdout, 1):
            confirmed = int(line.split()[1])
            if lines == kill_after:
                os.kill(child.pid, signal.SIGKILL)
                break
        for line in child.stdout:  # confirmations printed before the kill landed
            if line.endswith("\n"):
                confirmed = int(line.split()[1])
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    ledger = int(ledger_text)
    with SqliteStore(data_dir) as s:
        assert s.check() == []
        last = s.last_entry_id(ledger)
        assert last in (confirmed, confirmed + 3)  # the call in flight: all of it or none
        assert s.read(ledger, 0, last) == [b"%d" % i * 300 for i in range(last + 1)]
