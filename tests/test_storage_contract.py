"""The store contract (mledger.storage._base), run against every backend and wrapper.

MemoryStore is the reference: SqliteStore must behave identically, which the Hypothesis
machine at the end checks call by call on random sequences of operations.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from mledger import (
    BadVersionError,
    EntryTooLargeError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    MLedgerError,
)
from mledger.storage import (
    DEFAULT_MAX_ENTRY_SIZE,
    NEW_NODE,
    FaultInjectingStore,
    HeldReadStore,
    LedgerStore,
    MemoryStore,
    MetadataStore,
    SqliteStore,
    Store,
    Versioned,
)

MakeStore = Callable[..., Store]

BACKENDS = ["memory", "sqlite", "faults(sqlite)", "held(memory)"]


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory of fresh stores of one backend; every store made is closed at teardown."""
    made: list[Store] = []

    def make(max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE) -> Store:
        kind: str = request.param
        store: Store
        if "sqlite" in kind:
            store = SqliteStore(tmp_path / f"store{len(made)}", max_entry_size=max_entry_size)
        else:
            store = MemoryStore(max_entry_size=max_entry_size)
        if kind.startswith("faults"):
            store = FaultInjectingStore(store)
        elif kind.startswith("held"):
            store = HeldReadStore(store)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: MakeStore) -> Store:
    return make_store()


# -- ledgers -----------------------------------------------------------------------------------
def test_implements_both_protocols(store: Store) -> None:
    assert isinstance(store, LedgerStore)
    assert isinstance(store, MetadataStore)


def test_ledger_length_is_the_bytes_of_its_entries(store: Store) -> None:
    # BookKeeper's LedgerHandle.getLength: what a reopened managed ledger counts as the size of
    # the ledger that was open (Pulsar's totalSize).
    ledger = store.create_ledger()
    assert store.ledger_length(ledger) == 0
    store.append(ledger, b"abc")
    store.append_many(ledger, [b"", b"x" * 1000])
    assert store.ledger_length(ledger) == 1003
    store.seal_ledger(ledger)
    assert store.ledger_length(ledger) == 1003
    store.delete_ledger(ledger)
    with pytest.raises(LedgerNotFoundError):
        store.ledger_length(ledger)


def test_ledger_ids_are_unique_and_increasing_even_after_deletes(store: Store) -> None:
    ids = [store.create_ledger() for _ in range(3)]
    store.delete_ledger(ids[-1])
    ids.append(store.create_ledger())
    assert ids == sorted(set(ids))
    assert all(store.ledger_exists(i) for i in ids if i != ids[2])
    assert not store.ledger_exists(ids[2])


def test_entry_ids_start_at_zero_and_read_is_inclusive(store: Store) -> None:
    ledger = store.create_ledger()
    assert store.last_entry_id(ledger) == -1
    assert [store.append(ledger, f"e{i}".encode()) for i in range(5)] == [0, 1, 2, 3, 4]
    assert store.last_entry_id(ledger) == 4
    assert store.read(ledger, 1, 3) == [b"e1", b"e2", b"e3"]
    assert store.read(ledger, 0, 4) == [f"e{i}".encode() for i in range(5)]
    assert store.read(ledger, 3, 100) == [b"e3", b"e4"]  # only what exists
    assert store.read(ledger, -5, 0) == [b"e0"]
    assert store.read(ledger, 3, 2) == []
    assert store.read(ledger, 0, -1) == []
    assert store.read(ledger, 7, 9) == []


def test_read_with_last_entry_below_minus_one_is_empty(store: Store) -> None:
    ledger = store.create_ledger()
    store.append_many(ledger, [b"a", b"b", b"c"])
    assert store.read(ledger, 0, -2) == []


def test_entries_of_ledgers_are_independent(store: Store) -> None:
    a, b = store.create_ledger(), store.create_ledger()
    store.append(a, b"a0")
    assert store.append(b, b"b0") == 0
    assert store.append(a, b"a1") == 1
    assert store.read(a, 0, 9) == [b"a0", b"a1"]
    assert store.read(b, 0, 9) == [b"b0"]


def test_bytes_like_entries_are_stored_as_bytes(store: Store) -> None:
    ledger = store.create_ledger()
    store.append(ledger, bytearray(b"ba"))  # type: ignore[arg-type]
    store.append_many(ledger, [memoryview(b"mv"), b""])  # type: ignore[list-item]
    assert store.read(ledger, 0, 2) == [b"ba", b"mv", b""]
    assert all(type(e) is bytes for e in store.read(ledger, 0, 2))


def test_unknown_ledger_raises_ledger_not_found(store: Store) -> None:
    missing = store.create_ledger() + 100
    for call in (
        lambda: store.append(missing, b"x"),
        lambda: store.append_many(missing, [b"x"]),
        lambda: store.append_many(missing, []),
        lambda: store.read(missing, 0, 1),
        lambda: store.last_entry_id(missing),
        lambda: store.seal_ledger(missing),
    ):
        with pytest.raises(LedgerNotFoundError, match=str(missing)):
            call()
    assert not store.ledger_exists(missing)
    store.delete_ledger(missing)  # a no-op


def test_sealed_ledger_rejects_appends_and_stays_readable(store: Store) -> None:
    ledger = store.create_ledger()
    store.append_many(ledger, [b"a", b"b"])
    store.seal_ledger(ledger)
    store.seal_ledger(ledger)  # idempotent
    for call in (
        lambda: store.append(ledger, b"c"),
        lambda: store.append_many(ledger, [b"c"]),
        lambda: store.append_many(ledger, []),
    ):
        with pytest.raises(LedgerNotFoundError, match="sealed"):
            call()
    assert store.read(ledger, 0, 5) == [b"a", b"b"]
    assert store.last_entry_id(ledger) == 1
    assert store.ledger_exists(ledger)


def test_delete_ledger_removes_it_and_its_entries(store: Store) -> None:
    keep, gone = store.create_ledger(), store.create_ledger()
    store.append(keep, b"k")
    store.append_many(gone, [b"x"] * 10)
    store.delete_ledger(gone)
    store.delete_ledger(gone)
    assert not store.ledger_exists(gone)
    with pytest.raises(LedgerNotFoundError):
        store.read(gone, 0, 9)
    assert store.read(keep, 0, 0) == [b"k"]


def test_append_many_returns_the_first_id(store: Store) -> None:
    ledger = store.create_ledger()
    assert store.append_many(ledger, [b"a", b"b", b"c"]) == 0
    assert store.append_many(ledger, [b"d"]) == 3
    assert store.append_many(ledger, []) == 4  # nothing stored, the next id reported
    assert store.last_entry_id(ledger) == 3
    assert store.append(ledger, b"e") == 4


def test_append_many_is_all_or_nothing(make_store: MakeStore) -> None:
    store = make_store(max_entry_size=100)
    ledger = store.create_ledger()
    store.append(ledger, b"first")
    with pytest.raises(EntryTooLargeError):
        store.append_many(ledger, [b"ok", b"x" * 101, b"ok too"])
    assert store.last_entry_id(ledger) == 0
    assert store.read(ledger, 0, 10) == [b"first"]


def test_entry_too_large_names_the_size_and_limit(make_store: MakeStore) -> None:
    store = make_store(max_entry_size=100)
    ledger = store.create_ledger()
    assert store.append(ledger, b"x" * 100) == 0  # the limit itself is allowed
    with pytest.raises(EntryTooLargeError, match=r"\b101 bytes\b.*\b100\b"):
        store.append(ledger, b"x" * 101)
    assert store.last_entry_id(ledger) == 0


def test_default_limit_is_five_mib(store: Store) -> None:
    assert store.max_entry_size == DEFAULT_MAX_ENTRY_SIZE == 5 * 1024 * 1024
    ledger = store.create_ledger()
    with pytest.raises(EntryTooLargeError, match=str(DEFAULT_MAX_ENTRY_SIZE + 1)):
        store.append(ledger, bytes(DEFAULT_MAX_ENTRY_SIZE + 1))
    assert store.append(ledger, bytes(DEFAULT_MAX_ENTRY_SIZE)) == 0
    assert len(store.read(ledger, 0, 0)[0]) == DEFAULT_MAX_ENTRY_SIZE


# -- metadata ----------------------------------------------------------------------------------
def test_put_versions_start_at_zero_and_increase(store: Store) -> None:
    assert store.get("/m/a") is None
    assert store.put("/m/a", b"v0") == 0
    assert store.get("/m/a") == Versioned(b"v0", 0)
    assert store.put("/m/a", b"v1", expected_version=0) == 1
    assert store.put("/m/a", b"v2") == 2  # None: unconditional
    assert store.get("/m/a") == Versioned(b"v2", 2)
    assert type(store.get("/m/a").data) is bytes  # type: ignore[union-attr]


def test_put_with_a_stale_version_changes_nothing(store: Store) -> None:
    store.put("/m/a", b"v0")
    store.put("/m/a", b"v1", 0)
    for stale in (0, 2, 7):
        with pytest.raises(BadVersionError, match=r"/m/a .*version 1"):
            store.put("/m/a", b"lost", expected_version=stale)
    assert store.get("/m/a") == Versioned(b"v1", 1)


def test_new_node_creates_only_when_missing(store: Store) -> None:
    assert store.put("/m/n", b"x", expected_version=NEW_NODE) == 0
    with pytest.raises(BadVersionError, match="already exists"):
        store.put("/m/n", b"y", expected_version=NEW_NODE)
    assert store.get("/m/n") == Versioned(b"x", 0)
    with pytest.raises(BadVersionError, match="does not exist"):
        store.put("/m/missing", b"y", expected_version=0)
    assert store.get("/m/missing") is None


def test_delete_with_and_without_version(store: Store) -> None:
    store.delete("/m/none")  # missing, unconditional: a no-op
    with pytest.raises(BadVersionError):
        store.delete("/m/none", expected_version=0)
    store.put("/m/d", b"x")
    store.put("/m/d", b"y")
    with pytest.raises(BadVersionError):
        store.delete("/m/d", expected_version=0)
    with pytest.raises(BadVersionError):
        store.delete("/m/d", expected_version=NEW_NODE)
    assert store.get("/m/d") == Versioned(b"y", 1)
    store.delete("/m/d", expected_version=1)
    assert store.get("/m/d") is None
    assert store.put("/m/d", b"again") == 0  # a recreated node starts over
    store.delete("/m/d")
    assert store.get("/m/d") is None


def test_delete_missing_node_expecting_new_node_is_a_no_op(store: Store) -> None:
    store.delete("/m/none", expected_version=NEW_NODE)
    assert store.get("/m/none") is None


def test_children_are_direct_sorted_and_implied(store: Store) -> None:
    for path in ("/managed-ledgers/t2", "/managed-ledgers/t1", "/managed-ledgers/t1/c2", "/managed-ledgers/t1/c1",
                 "/managed-ledgers/t3/deep/er", "/managed-ledgersX/no", "/managed-ledgers"):
        store.put(path, b"")
    assert store.children("/managed-ledgers") == ["t1", "t2", "t3"]
    assert store.children("/managed-ledgers/") == ["t1", "t2", "t3"]
    assert store.children("/managed-ledgers/t1") == ["c1", "c2"]
    assert store.children("/managed-ledgers/t3") == ["deep"]
    assert store.children("/managed-ledgers/t2") == []
    assert store.children("/nothing") == []
    assert store.children("/") == ["managed-ledgers", "managed-ledgersX"]


def test_metadata_values_may_be_large_and_binary(store: Store) -> None:
    value = bytes(range(256)) * 4096
    store.put("/m/big", value)
    assert store.get("/m/big") == Versioned(value, 0)


# -- closing -----------------------------------------------------------------------------------
_CLOSED_CALLS: dict[str, Callable[[Store, int], Any]] = {
    "create_ledger": lambda s, ledger: s.create_ledger(),
    "append": lambda s, ledger: s.append(ledger, b"x"),
    "append_many": lambda s, ledger: s.append_many(ledger, [b"x"]),
    "read": lambda s, ledger: s.read(ledger, 0, 0),
    "last_entry_id": lambda s, ledger: s.last_entry_id(ledger),
    "ledger_exists": lambda s, ledger: s.ledger_exists(ledger),
    "seal_ledger": lambda s, ledger: s.seal_ledger(ledger),
    "delete_ledger": lambda s, ledger: s.delete_ledger(ledger),
    "get": lambda s, ledger: s.get("/m/a"),
    "put": lambda s, ledger: s.put("/m/a", b"y"),
    "delete": lambda s, ledger: s.delete("/m/a"),
    "children": lambda s, ledger: s.children("/m"),
}


@pytest.mark.parametrize("call", sorted(_CLOSED_CALLS))
def test_every_call_on_a_closed_store_raises(store: Store, call: str) -> None:
    ledger = store.create_ledger()
    store.append(ledger, b"x")
    store.put("/m/a", b"x")
    store.close()
    store.close()  # idempotent
    with pytest.raises(ManagedLedgerClosedError):
        _CLOSED_CALLS[call](store, ledger)


# -- concurrency -------------------------------------------------------------------------------
def _run_threads(n: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_concurrent_puts_with_the_same_version_have_exactly_one_winner(store: Store) -> None:
    threads, rounds = 8, 10
    store.put("/m/cas", b"start")
    barrier = threading.Barrier(threads)
    winners: list[list[int]] = [[] for _ in range(rounds)]

    def contend(i: int) -> None:
        for r in range(rounds):
            barrier.wait()
            try:
                store.put("/m/cas", f"{r}:{i}".encode(), expected_version=r)
                winners[r].append(i)
            except BadVersionError:
                pass
            barrier.wait()

    _run_threads(threads, contend)
    assert [len(w) for w in winners] == [1] * rounds
    last = store.get("/m/cas")
    assert last == Versioned(f"{rounds - 1}:{winners[-1][0]}".encode(), rounds)


def test_concurrent_cas_increments_lose_no_update(store: Store) -> None:
    threads, increments = 4, 50
    store.put("/m/counter", b"0")
    won: list[int] = []

    def increment(_: int) -> None:
        for _ in range(increments):
            while True:
                current = store.get("/m/counter")
                assert current is not None
                try:
                    won.append(store.put("/m/counter", b"%d" % (int(current.data) + 1), current.version))
                    break
                except BadVersionError:
                    continue

    _run_threads(threads, increment)
    assert store.get("/m/counter") == Versioned(b"%d" % (threads * increments), threads * increments)
    assert sorted(won) == list(range(1, threads * increments + 1))  # every version won once


def test_concurrent_appends_get_distinct_contiguous_ids(store: Store) -> None:
    ledger = store.create_ledger()
    ids: list[int] = []
    lock = threading.Lock()

    def append(i: int) -> None:
        for j in range(25):
            if j % 5 == 0:
                first = store.append_many(ledger, [b"%d-%d-a" % (i, j), b"%d-%d-b" % (i, j)])
                got = [first, first + 1]
            else:
                got = [store.append(ledger, b"%d-%d" % (i, j))]
            store.read(ledger, got[0], got[-1])
            with lock:
                ids.extend(got)

    _run_threads(4, append)
    assert sorted(ids) == list(range(len(ids)))
    assert store.last_entry_id(ledger) == len(ids) - 1


# -- differential: SqliteStore against MemoryStore, call by call ---------------------------------
_PATHS = st.sampled_from(["/a", "/a/b", "/a/c", "/a/b/c", "/b"])
_VERSIONS = st.one_of(st.none(), st.integers(-1, 3))
_DATA = st.binary(max_size=12)


def _ledger_state(store: Store, ledger: int) -> tuple[bool, int | None]:
    exists = store.ledger_exists(ledger)
    return exists, store.last_entry_id(ledger) if exists else None


def _node_state(store: Store, path: str) -> tuple[Versioned | None, list[str]]:
    return store.get(path), store.children(path)


class SqliteMatchesMemory(RuleBasedStateMachine):
    """Every call gives SqliteStore and MemoryStore the same result or the same error class."""

    @initialize()
    def open_stores(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.memory = MemoryStore(max_entry_size=8)
        self.sqlite = SqliteStore(self.tmp.name, max_entry_size=8, synchronous="OFF")
        self.ledgers: list[int] = []

    def teardown(self) -> None:
        if hasattr(self, "sqlite"):
            self.sqlite.close()
            self.tmp.cleanup()

    def both(self, call: Callable[[Store], Any]) -> Any:
        results = []
        for store in (self.memory, self.sqlite):
            try:
                results.append(("ok", call(store)))
            except MLedgerError as exc:
                results.append(("error", type(exc)))
        assert results[0] == results[1]
        return results[0][1]

    def ledger(self, data: st.DataObject) -> int:
        return data.draw(st.sampled_from([*self.ledgers, 999]))

    @rule()
    def create_ledger(self) -> None:
        self.ledgers.append(self.both(lambda s: s.create_ledger()))

    @rule(data=st.data(), entry=_DATA)
    def append(self, data: st.DataObject, entry: bytes) -> None:
        ledger = self.ledger(data)
        self.both(lambda s: s.append(ledger, entry))

    @rule(data=st.data(), entries=st.lists(_DATA, max_size=4))
    def append_many(self, data: st.DataObject, entries: list[bytes]) -> None:
        ledger = self.ledger(data)
        self.both(lambda s: s.append_many(ledger, entries))

    @rule(data=st.data(), first=st.integers(-2, 6), length=st.integers(-4, 6))
    def read(self, data: st.DataObject, first: int, length: int) -> None:
        ledger = self.ledger(data)
        last = first + length
        self.both(lambda s: s.read(ledger, first, last))

    @rule(data=st.data())
    def seal_or_delete(self, data: st.DataObject) -> None:
        ledger = self.ledger(data)
        if data.draw(st.booleans()):
            self.both(lambda s: s.seal_ledger(ledger))
        else:
            self.both(lambda s: s.delete_ledger(ledger))

    @rule(path=_PATHS, value=_DATA, version=_VERSIONS)
    def put(self, path: str, value: bytes, version: int | None) -> None:
        self.both(lambda s: s.put(path, value, version))

    @rule(path=_PATHS, version=_VERSIONS)
    def delete(self, path: str, version: int | None) -> None:
        self.both(lambda s: s.delete(path, version))

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "ledgers"):
            return
        for ledger in self.ledgers:
            self.both(partial(_ledger_state, ledger=ledger))
        for path in ("/", "/a", "/a/b"):
            self.both(partial(_node_state, path=path))

    @invariant()
    def sqlite_is_consistent(self) -> None:
        if hasattr(self, "sqlite"):
            assert self.sqlite.check() == []


TestSqliteMatchesMemory = SqliteMatchesMemory.TestCase
TestSqliteMatchesMemory.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_a_reopened_memory_store_holds_the_data_and_the_old_one_is_closed() -> None:
    """``MemoryStore.reopen``: a restart over the same data (the embedded broker's, without a data
    directory); the previous owner's store refuses every call, so it cannot change the data."""
    old = MemoryStore(first_ledger_id=7)
    ledger = old.create_ledger()
    old.append(ledger, b"a")
    old.seal_ledger(ledger)
    old.put("/n", b"v")
    new = old.reopen()
    assert (new.read(ledger, 0, 0), new.get("/n")) == ([b"a"], Versioned(b"v", 0))
    assert new.create_ledger() == ledger + 1
    with pytest.raises(LedgerNotFoundError):
        new.append(ledger, b"b")  # still sealed
    for call in (lambda: old.put("/n", b"w"), lambda: old.read(ledger, 0, 0), old.create_ledger):
        with pytest.raises(ManagedLedgerClosedError):
            call()
    old.close()
    new.close()
    assert new.reopen().get("/n") == Versioned(b"v", 0)  # from a closed store too
