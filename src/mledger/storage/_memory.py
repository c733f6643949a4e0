"""In-memory store: ledgers as Python lists, metadata as a dict. For tests and Spark replay."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..core import BadVersionError, LedgerNotFoundError, ManagedLedgerClosedError
from ._base import DEFAULT_MAX_ENTRY_SIZE, NEW_NODE, Versioned, checked_size


class MemoryStore:
    """A :class:`~mledger.storage.Store` held in process memory.

    Thread-safe; no call blocks beyond a short internal lock. Nothing survives the process;
    :meth:`reopen` hands the data to a new store, as a restart over the same data.
    """

    def __init__(self, max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE, first_ledger_id: int = 1) -> None:
        if max_entry_size <= 0:
            raise ValueError(f"max_entry_size must be positive, got {max_entry_size}")
        self.max_entry_size = max_entry_size
        self.blocking_writes = False
        """Writes never wait on I/O: a managed ledger writes on the adding thread."""
        self._lock = threading.Lock()
        self._ledgers: dict[int, list[bytes]] = {}
        self._sealed: set[int] = set()
        self._next_ledger_id = first_ledger_id
        self._metadata: dict[str, Versioned] = {}
        self._closed = False

    # -- LedgerStore ------------------------------------------------------------------------
    def create_ledger(self) -> int:
        with self._lock:
            self._check_open()
            ledger_id = self._next_ledger_id
            self._next_ledger_id += 1
            self._ledgers[ledger_id] = []
            return ledger_id

    def append(self, ledger_id: int, data: bytes) -> int:
        return self.append_many(ledger_id, (data,))

    def append_many(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        checked_size(entries, self.max_entry_size)
        with self._lock:
            self._check_open()
            ledger = self._writable(ledger_id)
            first = len(ledger)
            ledger.extend(bytes(d) for d in entries)
            return first

    def read(self, ledger_id: int, first_entry: int, last_entry: int) -> list[bytes]:
        with self._lock:
            self._check_open()
            ledger = self._ledger(ledger_id)
            if last_entry < first_entry or last_entry < 0:
                return []
            return ledger[max(first_entry, 0) : last_entry + 1]

    def last_entry_id(self, ledger_id: int) -> int:
        with self._lock:
            self._check_open()
            return len(self._ledger(ledger_id)) - 1

    def ledger_length(self, ledger_id: int) -> int:
        with self._lock:
            self._check_open()
            return sum(map(len, self._ledger(ledger_id)))

    def ledger_exists(self, ledger_id: int) -> bool:
        with self._lock:
            self._check_open()
            return ledger_id in self._ledgers

    def seal_ledger(self, ledger_id: int) -> None:
        with self._lock:
            self._check_open()
            self._ledger(ledger_id)
            self._sealed.add(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        with self._lock:
            self._check_open()
            self._ledgers.pop(ledger_id, None)
            self._sealed.discard(ledger_id)

    # -- MetadataStore ----------------------------------------------------------------------
    def get(self, path: str) -> Versioned | None:
        with self._lock:
            self._check_open()
            return self._metadata.get(path)

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        with self._lock:
            self._check_open()
            current = self._metadata.get(path)
            _check_version(path, current, expected_version)
            version = 0 if current is None else current.version + 1
            self._metadata[path] = Versioned(bytes(data), version)
            return version

    def delete(self, path: str, expected_version: int | None = None) -> None:
        with self._lock:
            self._check_open()
            current = self._metadata.get(path)
            if current is None and expected_version is None:
                return
            _check_version(path, current, expected_version)
            if current is not None:  # NEW_NODE on a missing node: the check passed, nothing to delete
                del self._metadata[path]

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        with self._lock:
            self._check_open()
            names = {k[len(prefix) :].split("/", 1)[0] for k in self._metadata if k.startswith(prefix)}
        return sorted(names)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def crash_image(self) -> MemoryStore:
        """A copy of everything stored now, as a crash at this instant leaves it: a factory
        opened over the copy recovers what a broker restarted now would, while this store
        carries on. O(entries + nodes); the entries' bytes are shared, not copied."""
        with self._lock:
            image = MemoryStore(self.max_entry_size, self._next_ledger_id)
            image._ledgers = {ledger_id: list(entries) for ledger_id, entries in self._ledgers.items()}
            image._sealed = set(self._sealed)
            image._metadata = dict(self._metadata)
            return image

    def reopen(self) -> MemoryStore:
        """Close this store and return a new one holding its ledgers and metadata: what a
        process restarting over a data directory finds, every write this store confirmed.
        The data moves: a call on this store afterwards raises ``ManagedLedgerClosedError``
        (a write in flight on another thread either completed before or raises), so what the
        previous owner still holds cannot change the new store. Works on a closed store too
        (the owner closed it at a clean stop). O(1)."""
        with self._lock:
            self._closed = True
            store = MemoryStore(self.max_entry_size, self._next_ledger_id)
            store._ledgers, self._ledgers = self._ledgers, {}
            store._sealed, self._sealed = self._sealed, set()
            store._metadata, self._metadata = self._metadata, {}
        return store

    # -- internals --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosedError("the store is closed")

    def _ledger(self, ledger_id: int) -> list[bytes]:
        try:
            return self._ledgers[ledger_id]
        except KeyError:
            raise LedgerNotFoundError(f"ledger {ledger_id} does not exist") from None

    def _writable(self, ledger_id: int) -> list[bytes]:
        ledger = self._ledger(ledger_id)
        if ledger_id in self._sealed:
            raise LedgerNotFoundError(f"ledger {ledger_id} is sealed and accepts no appends")
        return ledger


def _check_version(path: str, current: Versioned | None, expected: int | None) -> None:
    if expected is None:
        return
    if expected == NEW_NODE:
        if current is not None:
            raise BadVersionError(f"{path} already exists at version {current.version}")
        return
    if current is None:
        raise BadVersionError(f"{path} does not exist (expected version {expected})")
    if current.version != expected:
        raise BadVersionError(f"{path} is at version {current.version}, expected {expected}")
