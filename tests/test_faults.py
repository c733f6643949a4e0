"""The test-support wrappers themselves: FaultInjectingStore and HeldReadStore."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from mledger import LedgerNotFoundError, MLedgerError
from mledger.storage import (
    DISK_FULL,
    FaultInjectingStore,
    HeldRead,
    HeldReadStore,
    InjectedFault,
    LedgerStore,
    MemoryStore,
    MetadataStore,
    SqliteStore,
    Store,
    Versioned,
    WriteRecord,
)

WRITES = {"create_ledger", "append", "append_many", "seal_ledger", "delete_ledger", "put", "delete"}


def _protocol_methods() -> set[str]:
    return {
        name
        for proto in (LedgerStore, MetadataStore)
        for name, member in vars(proto).items()
        if callable(member) and not name.startswith("_")
    }


@pytest.mark.parametrize("wrapper", [FaultInjectingStore, HeldReadStore])
def test_wrappers_implement_the_whole_protocol_explicitly(wrapper: type) -> None:
    methods = _protocol_methods()
    assert methods > WRITES  # a new write method in the protocol must be counted here too
    for name in methods:  # defined by a class of its own (the wrappers share one base), not forwarded
        assert any(name in vars(k) for k in wrapper.__mro__ if k is not object), f"{wrapper.__name__} lacks {name}"
    assert not hasattr(wrapper, "__getattr__")
    assert isinstance(wrapper(MemoryStore()), LedgerStore)
    assert isinstance(wrapper(MemoryStore()), MetadataStore)
    assert wrapper(MemoryStore(max_entry_size=7)).max_entry_size == 7


def test_injected_fault_is_an_mledger_error() -> None:
    assert issubclass(InjectedFault, MLedgerError)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        FaultInjectingStore(MemoryStore(), mode="explode")  # type: ignore[arg-type]


# -- FaultInjectingStore -----------------------------------------------------------------------
def _scenario(store: Store) -> None:
    """Every kind of write once, with reads in between (which are not counted)."""
    ledger = store.create_ledger()
    store.append(ledger, b"a")
    store.read(ledger, 0, 0)
    store.append_many(ledger, [b"b", b"c"])
    store.seal_ledger(ledger)
    store.put("/m", b"1")
    store.get("/m")
    store.children("/")
    store.delete("/m")
    store.delete_ledger(ledger)


def test_counts_and_logs_every_write_and_no_read() -> None:
    store = FaultInjectingStore(MemoryStore())
    _scenario(store)
    assert store.writes == 7
    assert store.log == [
        WriteRecord("create_ledger", None),
        WriteRecord("append", 1),
        WriteRecord("append_many", 1),
        WriteRecord("seal_ledger", 1),
        WriteRecord("put", "/m"),
        WriteRecord("delete", "/m"),
        WriteRecord("delete_ledger", 1),
    ]
    assert {r.kind for r in store.log} == WRITES
    assert store.fault is None and not store.crashed


def test_raise_fails_only_the_chosen_write_without_performing_it() -> None:
    store = FaultInjectingStore(MemoryStore(), fail_at=2)
    ledger = store.create_ledger()
    store.append(ledger, b"a")
    with pytest.raises(InjectedFault, match=r"write #2 \(append_many 1, not performed\)"):
        store.append_many(ledger, [b"b", b"c"])
    assert store.read(ledger, 0, 9) == [b"a"]
    assert store.append(ledger, b"d") == 1  # later writes work
    assert store.writes == 4
    assert store.fault == WriteRecord("append_many", ledger)
    assert not store.crashed


def test_a_full_disk_refuses_every_write_with_sqlites_error_until_space_is_freed() -> None:
    store = FaultInjectingStore(MemoryStore())
    ledger = store.create_ledger()
    store.append(ledger, b"kept")
    store.disk_full = True
    with pytest.raises(sqlite3.OperationalError, match=DISK_FULL):
        store.append(ledger, b"refused")
    with pytest.raises(sqlite3.OperationalError, match=DISK_FULL):
        store.put("/a", b"x")
    assert store.read(ledger, 0, 0) == [b"kept"]  # reads work meanwhile
    assert store.writes == 4 and store.fault is None  # counted, not an injected fault
    store.disk_full = False
    assert store.append(ledger, b"after") == 1
    assert store.inner.read(ledger, 0, 1) == [b"kept", b"after"]


def test_raise_after_performs_the_write_then_raises() -> None:
    store = FaultInjectingStore(MemoryStore(), fail_at=1, mode="raise_after")
    store.put("/m", b"0")
    with pytest.raises(InjectedFault, match="performed"):
        store.put("/m", b"1", expected_version=0)
    assert store.get("/m") == Versioned(b"1", 1)  # it happened; the caller was told it failed


@pytest.mark.parametrize("mode", ["crash", "crash_after"])
def test_crash_stops_every_later_call(mode: str) -> None:
    inner = MemoryStore()
    store = FaultInjectingStore(inner, fail_at=2, mode=mode)  # type: ignore[arg-type]
    ledger = store.create_ledger()
    store.append(ledger, b"a")
    with pytest.raises(InjectedFault):
        store.append(ledger, b"b")
    assert store.crashed
    for call in (
        lambda: store.append(ledger, b"c"),
        lambda: store.create_ledger(),
        lambda: store.put("/m", b""),
        lambda: store.read(ledger, 0, 0),
        lambda: store.last_entry_id(ledger),
        lambda: store.ledger_exists(ledger),
        lambda: store.get("/m"),
        lambda: store.children("/"),
    ):
        with pytest.raises(InjectedFault, match="crashed at write #2"):
            call()
    assert store.writes == 3  # nothing counted after the crash
    store.close()  # a no-op: the dead process never closed anything
    expected = [b"a", b"b"] if mode == "crash_after" else [b"a"]
    assert inner.read(ledger, 0, 9) == expected  # what survived, for the test to recover from


def test_close_closes_the_inner_store(tmp_path: Path) -> None:
    FaultInjectingStore(SqliteStore(tmp_path)).close()
    SqliteStore(tmp_path).close()  # the lock was released


def test_errors_of_the_inner_store_pass_through_and_are_counted() -> None:
    store = FaultInjectingStore(MemoryStore())
    with pytest.raises(LedgerNotFoundError):
        store.append(42, b"x")
    assert store.writes == 1


def test_fail_at_can_be_set_after_a_setup_phase() -> None:
    store = FaultInjectingStore(MemoryStore())
    ledger = store.create_ledger()
    store.fail_at = store.writes + 1
    store.append(ledger, b"a")
    with pytest.raises(InjectedFault):
        store.append(ledger, b"b")


def _confirmed_scenario(store: Store, confirmed: list[str]) -> None:
    """Appends and metadata puts, recording each one the store confirmed."""
    ledger = store.create_ledger()
    confirmed.append("ledger")
    version = -1
    for i in range(4):
        store.append(ledger, b"%d" % i)
        confirmed.append(f"entry {i}")
        version = store.put("/state", b"%d" % i, version)
        confirmed.append(f"state {i}")


@pytest.mark.parametrize("mode", ["raise", "crash", "crash_after"])
def test_failing_every_write_in_turn(mode: str) -> None:
    dry = FaultInjectingStore(MemoryStore())
    _confirmed_scenario(dry, [])
    assert dry.writes == 9
    for n in range(dry.writes):
        inner = MemoryStore()
        store = FaultInjectingStore(inner, fail_at=n, mode=mode)  # type: ignore[arg-type]
        confirmed: list[str] = []
        with pytest.raises(InjectedFault):
            _confirmed_scenario(store, confirmed)
        assert len(confirmed) == n and store.fault == dry.log[n]
        # Recovery from the inner store sees every confirmed write, and the failed one only
        # when it was performed.
        entries = inner.read(1, 0, 9) if inner.ledger_exists(1) else []
        state = inner.get("/state")
        seen = len(entries) + (0 if state is None else state.version + 1) + int(inner.ledger_exists(1))
        assert seen == n + (1 if mode == "crash_after" else 0)


def test_writes_are_counted_exactly_under_threads() -> None:
    store = FaultInjectingStore(MemoryStore(), fail_at=150)
    ledger = store.create_ledger()
    faults: list[InjectedFault] = []

    def append(_: int) -> None:
        for _ in range(50):
            try:
                store.append(ledger, b"x")
            except InjectedFault as exc:
                faults.append(exc)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(append, range(4)))
    assert store.writes == 201
    assert len(faults) == 1
    assert store.last_entry_id(ledger) == 198  # 200 appends, one refused


# -- HeldReadStore -----------------------------------------------------------------------------
@pytest.fixture
def held() -> HeldReadStore:
    inner = MemoryStore()
    ledger = inner.create_ledger()
    inner.append_many(ledger, [b"a", b"b", b"c"])
    return HeldReadStore(inner, hold_timeout=30)


def _read_in_thread(pool: ThreadPoolExecutor, store: Store, first: int, last: int) -> Future[list[bytes]]:
    return pool.submit(store.read, 1, first, last)


def test_reads_pass_through_until_held(held: HeldReadStore) -> None:
    assert held.read(1, 0, 2) == [b"a", b"b", b"c"]
    assert held.held_count() == 0 and held.reads == 1


def test_a_held_read_blocks_until_released(held: HeldReadStore) -> None:
    held.hold_reads()
    with ThreadPoolExecutor(2) as pool:
        first = _read_in_thread(pool, held, 0, 0)
        held.wait_until_held(1)
        second = _read_in_thread(pool, held, 1, 2)
        held.wait_until_held(2)
        assert held.held() == [HeldRead(1, 0, 0), HeldRead(1, 1, 2)]
        assert not first.done() and not second.done()
        assert held.release_one() == HeldRead(1, 0, 0)  # oldest first
        assert first.result(10) == [b"a"]
        assert held.held_count() == 1 and not second.done()
        held.release()
        assert second.result(10) == [b"b", b"c"]
    assert held.read(1, 0, 0) == [b"a"]  # release() stopped holding


def test_phase_before_reads_after_release_and_after_reads_before_the_hold(held: HeldReadStore) -> None:
    with ThreadPoolExecutor(1) as pool:
        held.hold_reads(phase="before")
        future = _read_in_thread(pool, held, 0, 9)
        held.wait_until_held()
        held.append(1, b"d")  # lands while the I/O is "in flight": the read sees it
        held.release()
        assert future.result(10) == [b"a", b"b", b"c", b"d"]

        held.hold_reads(phase="after")
        future = _read_in_thread(pool, held, 0, 9)
        held.wait_until_held()
        held.append(1, b"e")  # lands after the I/O finished: the held result does not see it
        held.release()
        assert future.result(10) == [b"a", b"b", b"c", b"d"]


def test_everything_else_is_not_held(held: HeldReadStore) -> None:
    held.hold_reads()
    assert held.last_entry_id(1) == 2
    assert held.append(1, b"d") == 3
    assert held.put("/m", b"x") == 0
    assert held.get("/m") == Versioned(b"x", 0)
    assert held.children("/") == ["m"]
    assert held.ledger_exists(1)
    assert held.held_count() == 0


def test_release_one_without_a_held_read_raises(held: HeldReadStore) -> None:
    with pytest.raises(RuntimeError, match="no read is held"):
        held.release_one()


def test_wait_until_held_times_out(held: HeldReadStore) -> None:
    held.hold_reads()
    with pytest.raises(TimeoutError, match="0 reads held"):
        held.wait_until_held(1, timeout=0.01)


def test_a_forgotten_held_read_times_out_instead_of_hanging() -> None:
    store = HeldReadStore(MemoryStore(), hold_timeout=0.01)
    ledger = store.create_ledger()
    store.hold_reads()
    with pytest.raises(TimeoutError, match="never released"):
        store.read(ledger, 0, 0)
    assert store.held_count() == 0


def test_close_releases_held_reads_and_closes_inner(held: HeldReadStore) -> None:
    held.hold_reads()
    with ThreadPoolExecutor(1) as pool:
        future = _read_in_thread(pool, held, 0, 0)
        held.wait_until_held()
        held.close()
        with pytest.raises(MLedgerError):  # the inner store is closed by the time it reads
            future.result(10)


def test_a_race_stepped_deterministically(held: HeldReadStore) -> None:
    """The shape of a revision-controller test: a read held across a concurrent change."""
    events: list[str] = []
    lock = threading.Lock()

    def record(what: str) -> Callable[[Future[list[bytes]]], None]:
        def done(_: Future[list[bytes]]) -> None:
            with lock:
                events.append(what)

        return done

    held.hold_reads()
    with ThreadPoolExecutor(2) as pool:
        stale = _read_in_thread(pool, held, 0, 0)
        stale.add_done_callback(record("stale read completed"))
        held.wait_until_held(1)
        with lock:
            events.append("reset")
        fresh = _read_in_thread(pool, held, 2, 2)
        fresh.add_done_callback(record("fresh read completed"))
        held.wait_until_held(2)
        held.release_one()
        stale.result(10)
        held.release_one()
        fresh.result(10)
    assert events == ["reset", "stale read completed", "fresh read completed"]
