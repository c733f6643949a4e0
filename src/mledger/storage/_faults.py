"""Test-support store wrappers: fail a chosen write, hold reads or writes until a test releases them.

Each wraps any :class:`~mledger.storage.Store` and implements the whole protocol explicitly,
through one base class that sends every write through one interception point (no
``__getattr__`` forwarding): a method added to the protocol must be added there, so that a new
write path can never bypass fault injection unnoticed.

Fault-injection loop, the intended use::

    dry = FaultInjectingStore(MemoryStore())
    scenario(dry)                                   # count the writes
    for n in range(dry.writes):
        store = FaultInjectingStore(MemoryStore(), fail_at=n, mode="crash")
        with pytest.raises(InjectedFault):
            scenario(store)
        recover_and_check(store.inner)              # what survived the crash
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Generic, Literal, NamedTuple, NoReturn, TypeVar

from ..core import MLedgerError
from ._base import Store, Versioned

__all__ = [
    "DISK_FULL",
    "FaultInjectingStore",
    "FaultMode",
    "HeldRead",
    "HeldReadStore",
    "HeldWriteStore",
    "InjectedFault",
    "WriteRecord",
]

T = TypeVar("T")

DISK_FULL = "database or disk is full"
"""The message of SQLite's ``SQLITE_FULL`` error, which :attr:`FaultInjectingStore.disk_full` raises."""

FaultMode = Literal["raise", "raise_after", "crash", "crash_after"]
_MODES: tuple[str, ...] = ("raise", "raise_after", "crash", "crash_after")


class InjectedFault(MLedgerError):
    """A failure injected by :class:`FaultInjectingStore` (or a call after an injected crash)."""


class WriteRecord(NamedTuple):
    """One write call seen by :class:`FaultInjectingStore`: its kind and target."""

    kind: str
    """The method name: create_ledger, append, append_many, seal_ledger, delete_ledger, put, delete."""
    target: int | str | None
    """The ledger id or metadata path written; None for create_ledger."""


class _StoreWrapper:
    """The whole :class:`~mledger.storage.Store` protocol, delegated to ``inner``: every write
    goes through :meth:`_write` (its kind, target and call), every other call through
    :meth:`_check_call` first; a wrapper overrides those two (and :meth:`read` or :meth:`close`)
    to intercept."""

    inner: Store

    @property
    def max_entry_size(self) -> int:
        return self.inner.max_entry_size

    @max_entry_size.setter
    def max_entry_size(self, value: int) -> None:
        self.inner.max_entry_size = value

    # -- writes -----------------------------------------------------------------------------
    def create_ledger(self) -> int:
        return self._write("create_ledger", None, self.inner.create_ledger)

    def append(self, ledger_id: int, data: bytes) -> int:
        return self._write("append", ledger_id, lambda: self.inner.append(ledger_id, data))

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        return self._write("append_many", ledger_id, lambda: self.inner.append_many(ledger_id, entries))

    def seal_ledger(self, ledger_id: int) -> None:
        self._write("seal_ledger", ledger_id, lambda: self.inner.seal_ledger(ledger_id))

    def delete_ledger(self, ledger_id: int) -> None:
        self._write("delete_ledger", ledger_id, lambda: self.inner.delete_ledger(ledger_id))

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        return self._write("put", path, lambda: self.inner.put(path, data, expected_version))

    def delete(self, path: str, expected_version: int | None = None) -> None:
        self._write("delete", path, lambda: self.inner.delete(path, expected_version))

    # -- reads ------------------------------------------------------------------------------
    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        self._check_call()
        return self.inner.read(ledger_id, first_entry, last_entry)

    def last_entry_id(self, ledger_id: int) -> int:
        self._check_call()
        return self.inner.last_entry_id(ledger_id)

    def ledger_length(self, ledger_id: int) -> int:
        self._check_call()
        return self.inner.ledger_length(ledger_id)

    def ledger_exists(self, ledger_id: int) -> bool:
        self._check_call()
        return self.inner.ledger_exists(ledger_id)

    def get(self, path: str) -> Versioned | None:
        self._check_call()
        return self.inner.get(path)

    def children(self, path: str) -> list[str]:
        self._check_call()
        return self.inner.children(path)

    def close(self) -> None:
        self.inner.close()

    # -- what a wrapper intercepts ----------------------------------------------------------
    def _write(self, kind: str, target: int | str | None, perform: Callable[[], T]) -> T:
        return perform()

    def _check_call(self) -> None:
        """Before every call but a write (which :meth:`_write` sees): raise to refuse it."""


class FaultInjectingStore(_StoreWrapper):
    """Counts every write and fails the one with index ``fail_at`` (0-based).

    Modes, for the failing write:

    * ``"raise"``: not performed, raises :class:`InjectedFault`; later calls work normally.
    * ``"raise_after"``: performed, then raises: the caller cannot know it succeeded.
    * ``"crash"``: not performed, raises, and every later call (reads included) raises
      :class:`InjectedFault`, as if the process had died; :meth:`close` becomes a no-op.
    * ``"crash_after"``: performed, then the same as ``"crash"``.

    ``disk_full`` True refuses every write, not performed, with the error SQLite raises on a full
    disk (``sqlite3.OperationalError: database or disk is full``) until it is set False again
    (space freed); reads work meanwhile. Refused writes are counted and logged like the others.

    ``fail_at`` None only counts. Both ``fail_at`` and ``mode`` may be changed between calls
    (e.g. ``store.fail_at = store.writes + n`` after a setup phase). ``writes`` counts the
    writes attempted, the failing one included, none after a crash; ``log`` lists them in
    order (``keep_log=False``: nothing is listed, for a long-running broker) and ``fault`` is
    the one that failed.

    ``on_write``, when set, is called with each write's :class:`WriteRecord` before it is
    performed (outside the lock): it may raise to refuse the write (not performed) or sleep to
    slow it; the broker's fault registry sets it while store faults are armed
    (:meth:`mledger.broker.Faults.disk_full`, :meth:`~mledger.broker.Faults.slow_writes`).
    ``blocking_writes`` is the inner store's unless ``writes_may_block`` is set (slowed
    writes), so a managed ledger writes on the adding thread exactly when it would without
    the wrapper. Thread-safe: each write is counted and decided
    under a lock and performed outside it, so concurrent writes still reach the inner store
    together (a :class:`~mledger.storage.SqliteStore` group-commits them); a write in flight
    when another one crashes the store raises :class:`InjectedFault` once performed (the
    process died before it could be confirmed), the way a SIGKILL leaves an unconfirmed write.
    """

    def __init__(
        self, inner: Store, fail_at: int | None = None, mode: FaultMode = "raise", *, keep_log: bool = True
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.inner = inner
        self.keep_log = keep_log
        self.on_write: Callable[[WriteRecord], None] | None = None
        self.writes_may_block = False
        self.fail_at = fail_at
        self.mode: FaultMode = mode
        self.writes = 0
        self.log: list[WriteRecord] = []
        self.fault: WriteRecord | None = None
        self.crashed = False
        self.disk_full = False
        self._crash_note = ""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FaultInjectingStore({self.inner!r}, fail_at={self.fail_at}, mode={self.mode!r}, writes={self.writes})"

    @property
    def blocking_writes(self) -> bool:
        """Whether writes may wait (the inner store's, or slowed writes): a managed ledger then
        hands its adds to a writer thread."""
        return self.writes_may_block or getattr(self.inner, "blocking_writes", True)

    def close(self) -> None:
        """Close the inner store; after a crash, do nothing (the test owns ``inner``)."""
        if not self.crashed:
            self.inner.close()

    # -- internals --------------------------------------------------------------------------
    def _check_call(self) -> None:
        if self.crashed:
            raise InjectedFault(f"the store crashed at {self._crash_note}; no call succeeds after a crash")

    def _write(self, kind: str, target: int | str | None, perform: Callable[[], T]) -> T:
        # Counted and decided under the lock, performed outside it, so that concurrent writes
        # reach the inner store together (its group commit) and the wrapper still sees each one.
        with self._lock:
            self._check_call()
            index = self.writes
            record = WriteRecord(kind, target)
            self.writes += 1
            if self.keep_log:
                self.log.append(record)
            if self.disk_full:
                raise sqlite3.OperationalError(DISK_FULL)
            failing = index == self.fail_at
            if failing and not self.mode.endswith("_after"):
                self._fail(index, record)
        hook = self.on_write
        if hook is not None:
            hook(record)  # may refuse (raise) or slow (sleep) the write
        if not failing:
            result = perform()
            if self.crashed:  # the "process" died while this write was in flight: never confirmed
                raise InjectedFault(
                    f"the store crashed at {self._crash_note} while this write ({_describe(record)}) was in flight"
                )
            return result
        perform()
        with self._lock:
            self._fail(index, record)
        raise AssertionError("unreachable")  # pragma: no cover

    def _fail(self, index: int, record: WriteRecord) -> NoReturn:
        """Record the injected fault of write ``index`` and raise it (caller holds the lock)."""
        self.fault = record
        done = "performed" if self.mode.endswith("_after") else "not performed"
        note = f"write #{index} ({_describe(record)}, {done})"
        if self.mode.startswith("crash"):
            self.crashed = True
            self._crash_note = note
        raise InjectedFault(f"injected fault at {note}")


def _describe(record: WriteRecord) -> str:
    return record.kind if record.target is None else f"{record.kind} {record.target}"


class HeldRead(NamedTuple):
    """The arguments of a read held by :class:`HeldReadStore`."""

    ledger_id: int
    first_entry: int
    last_entry: int


H = TypeVar("H", HeldRead, WriteRecord)


class _Held(Generic[H]):
    """One held call: what it does, and the event that lets it go (``fail``: refused instead)."""

    __slots__ = ("fail", "go", "what")

    def __init__(self, what: H) -> None:
        self.what: H = what
        self.go = threading.Event()
        self.fail = False


class _HoldingStore(_StoreWrapper, Generic[H]):
    """A store wrapper that holds calls (reads or writes: ``noun``) until the test releases
    them, oldest first; the test's controls shared by :class:`HeldReadStore` and
    :class:`HeldWriteStore`."""

    noun: str

    def __init__(self, inner: Store, hold_timeout: float | None) -> None:
        self.inner = inner
        self.hold_timeout = hold_timeout
        self._holding = False
        self._held: list[_Held[H]] = []
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, holding={self._holding}, held={len(self._held)})"

    def release(self) -> None:
        """Stop holding, and let every held call go on."""
        with self._cond:
            self._holding = False
            held, self._held = self._held, []
        for h in held:
            h.go.set()

    def _release_oldest(self, fail: bool) -> H:
        with self._cond:
            if not self._held:
                raise RuntimeError(f"release_one(): no {self.noun} is held")
            h = self._held.pop(0)
        h.fail = fail
        h.go.set()
        return h.what

    def held(self) -> list[H]:
        """The blocked calls, oldest first."""
        with self._cond:
            return [h.what for h in self._held]

    def wait_until_held(self, n: int = 1, timeout: float = 10.0) -> None:
        """Block until at least ``n`` calls are held; raise TimeoutError after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._held) >= n, timeout):
                raise TimeoutError(f"{len(self._held)} {self.noun}s held after {timeout} s, waited for {n}")

    def close(self) -> None:
        """Release every held call, then close ``inner``."""
        self.release()
        self.inner.close()

    def _enqueue(self, what: H) -> _Held[H]:
        """Hold ``what`` (caller holds the lock, so that holding is decided with it)."""
        h: _Held[H] = _Held(what)
        self._held.append(h)
        self._cond.notify_all()
        return h

    def _wait(self, h: _Held[H], describe: str) -> None:
        """Block until ``h`` is released; ``InjectedFault`` when it was released to fail,
        ``TimeoutError`` when nobody released it within ``hold_timeout``."""
        if not h.go.wait(self.hold_timeout):
            with self._cond:
                if h in self._held:  # else released between the timeout and here
                    self._held.remove(h)
                    raise TimeoutError(f"{self.noun} {describe} was held for {self.hold_timeout} s and never released")
        if h.fail:
            raise InjectedFault(f"injected fault at held {self.noun} ({describe}, not performed)")


class HeldReadStore(_HoldingStore[HeldRead]):
    """Delegates everything to ``inner``; ``read()`` can be held until the test releases it.

    After :meth:`hold_reads`, each ``read()`` blocks (on its own event) until :meth:`release`
    or :meth:`release_one` lets it go. With ``phase="before"`` the inner read runs after the
    release (the I/O is in flight while held); with ``"after"`` it runs first and only the
    return to the caller is held (the I/O finished, its completion not yet delivered).
    :meth:`wait_until_held` lets the test wait for a reader thread to reach the hold, so races
    are stepped deterministically instead of by sleeping.

    A held read that nobody releases within ``hold_timeout`` seconds raises ``TimeoutError``
    in the reading thread (None: wait forever), so a broken test fails instead of hanging.
    :meth:`close` releases every held read before closing ``inner``. Thread-safe.
    """

    noun = "read"

    def __init__(self, inner: Store, hold_timeout: float | None = 30.0) -> None:
        super().__init__(inner, hold_timeout)
        self.reads = 0
        self._phase: Literal["before", "after"] = "before"

    # -- the test's controls ----------------------------------------------------------------
    def hold_reads(self, phase: Literal["before", "after"] = "before") -> None:
        """Make every later ``read()`` block until released (see the class doc for ``phase``)."""
        if phase not in ("before", "after"):
            raise ValueError(f"phase must be 'before' or 'after', got {phase!r}")
        with self._cond:
            self._holding = True
            self._phase = phase

    def release_one(self) -> HeldRead:
        """Release the oldest held read (holding stays on); return what it reads.

        Raises RuntimeError when no read is held.
        """
        return self._release_oldest(False)

    def held_count(self) -> int:
        """How many reads are blocked right now."""
        with self._cond:
            return len(self._held)

    # -- the store --------------------------------------------------------------------------
    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        """Delegate, blocking first while reads are held (see the class doc)."""
        with self._cond:
            self.reads += 1
            phase = self._phase if self._holding else None
        read = HeldRead(ledger_id, first_entry, last_entry)
        if phase == "before":
            self._hold(read)
        result = self.inner.read(ledger_id, first_entry, last_entry)
        if phase == "after":
            self._hold(read)
        return result

    def _hold(self, read: HeldRead) -> None:
        with self._cond:
            h = self._enqueue(read)
        self._wait(h, str(read))


class HeldWriteStore(_HoldingStore[WriteRecord]):
    """Delegates everything to ``inner``; writes can be held until the test releases them.

    After :meth:`hold_writes`, each write call (``append``, ``append_many``, ``put``, ...)
    blocks before reaching ``inner`` until :meth:`release` or :meth:`release_one` lets it go:
    the write is "in flight" while held, so a test can look at what callers see meanwhile
    (PIP-6's pushed-but-not-persisted state, queued adds, group commits) and then let it
    complete or fail it (``release_one(fail=True)``: it raises :class:`InjectedFault` without
    reaching ``inner``). :meth:`wait_until_held` steps the race deterministically. A held write
    nobody releases within ``hold_timeout`` seconds raises ``TimeoutError`` in its thread.
    :meth:`close` releases every held write before closing ``inner``. Thread-safe.
    """

    noun = "write"

    def __init__(self, inner: Store, hold_timeout: float | None = 30.0) -> None:
        super().__init__(inner, hold_timeout)
        self.writes = 0

    # -- the test's controls ----------------------------------------------------------------
    def hold_writes(self) -> None:
        """Make every later write block until released."""
        with self._cond:
            self._holding = True

    def release_one(self, fail: bool = False) -> WriteRecord:
        """Let the oldest held write go on (holding stays on), or fail it with ``fail=True``;
        return what it writes. Raises RuntimeError when no write is held."""
        return self._release_oldest(fail)

    def _write(self, kind: str, target: int | str | None, perform: Callable[[], T]) -> T:
        record = WriteRecord(kind, target)
        with self._cond:
            self.writes += 1
            h = self._enqueue(record) if self._holding else None
        if h is not None:
            self._wait(h, _describe(record))
        return perform()
