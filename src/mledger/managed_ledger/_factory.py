"""The managed-ledger factory: opens managed ledgers (and their cursors) over one store.

One factory per store: it caches the open ledgers by name, recovers a ledger and its durable
cursors on first open, runs asynchronous reads on its executor, and closes everything (the
store included) on :meth:`ManagedLedgerFactory.close`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from concurrent.futures import Executor, ThreadPoolExecutor

from ..codec import looks_like_managed_ledger_info
from ..core import (
    Clock,
    InvalidPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerFactoryConfig,
    StateCorruptedError,
    SystemClock,
)
from ..storage import MemoryStore, Store
from ._ledger import ManagedLedger
from ._ledger_view import ML_ROOT, cursor_info_path, ledger_info_path

__all__ = ["ManagedLedgerFactory"]

log = logging.getLogger(__name__)


class ManagedLedgerFactory:
    """Opens managed ledgers over one store; ``ManagedLedgerFactory()`` uses memory.

    ``ManagedLedgerFactory(SqliteStore("data/"))`` gives durable ledgers and cursors that a
    later factory over the same directory recovers. Thread-safe.
    """

    def __init__(
        self,
        store: Store | None = None,
        config: ManagedLedgerFactoryConfig | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.config = config or ManagedLedgerFactoryConfig()
        self.clock: Clock = clock or SystemClock()
        self._executor = executor
        self._own_executor = executor is None
        self._write_executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._ledgers: dict[str, ManagedLedger] = {}
        self._closed = False

    def open(
        self, name: str, config: ManagedLedgerConfig | None = None, derived_cursors: Collection[str] = ()
    ) -> ManagedLedger:
        """Open (creating or recovering) the managed ledger ``name``, with its cursors.

        Cursors named in ``derived_cursors`` hold state their owner rebuilds (the broker's
        ``pulsar.dedup``): one that is unreadable is left unopened and logged instead of failing
        the open (``open_cursor`` raises for it again). Any other unreadable cursor fails the
        open and the ledger is not cached half-open.
        """
        if not name or name.startswith("/") or "//" in name.replace("://", ""):
            raise InvalidPositionError(f"invalid managed ledger name {name!r}")
        with self._lock:
            if self._closed:
                raise ManagedLedgerClosedError("the factory is closed")
            ml = self._ledgers.get(name)
            if ml is not None:
                return ml
            ml = ManagedLedger(self, name, config or ManagedLedgerConfig())
            ml.initialize()
            self._ledgers[name] = ml
        try:
            for cursor_name in self.store.children(ml.info_path):
                try:
                    ml.open_cursor(cursor_name)
                except StateCorruptedError as exc:
                    if cursor_name not in derived_cursors:
                        raise
                    log.warning("managed ledger %s: cursor %s is unreadable, left unopened: %s", name, cursor_name, exc)
        except BaseException:
            self.managed_ledger_closed(name)  # a retry must recover again, not get a ledger missing a cursor
            raise
        return ml

    def exists(self, name: str) -> bool:
        """Whether the managed ledger ``name`` is open or stored (without opening it)."""
        with self._lock:
            if name in self._ledgers:
                return True
        return self.store.get(ledger_info_path(name)) is not None

    def list_managed_ledgers(self) -> list[str]:
        """Names of every managed ledger in the store."""
        names: list[str] = []
        self._collect(ML_ROOT, "", names)
        return names

    def _collect(self, path: str, prefix: str, out: list[str]) -> None:
        # ML names may contain '/', cursors may not: a node with ManagedLedgerInfo is an ML.
        for child in self.store.children(path):
            if not child:
                # An empty segment ("persistent://..."): children() strips trailing slashes, so
                # it would list this same path again, forever. Such names cannot be walked.
                continue
            child_path = f"{path}/{child}"
            name = f"{prefix}{child}"
            node = self.store.get(child_path)
            if node is not None and looks_like_managed_ledger_info(node.data, self.config.max_state_size_in_bytes):
                out.append(name)
            elif node is None:
                self._collect(child_path, name + "/", out)

    def delete(self, name: str) -> None:
        """Delete a managed ledger, its ledgers and cursors."""
        ml = self.open(name)
        ml.close()
        for li in ml.ledger_infos():
            self.store.delete_ledger(li.ledger_id)
        for cursor_name in self.store.children(ml.info_path):
            self.store.delete(cursor_info_path(name, cursor_name))
        self.store.delete(ml.info_path)

    def flush_cursors(self) -> int:
        """One tick of Pulsar's cursor flush (``ManagedLedgerFactoryImpl.flushCursors``): every
        cursor of every open managed ledger persists what the mark-delete rate limit held back
        (``ManagedCursorImpl.flush``); returns how many wrote. The factory's owner calls it at
        each tick of one fixed-rate timer, every :attr:`cursor_flush_interval_ms` from the
        factory's start (the broker: ``Broker.timers.every(CURSOR_FLUSH, ...)``; the replay: at
        those instants of event time). May block on storage."""
        with self._lock:
            ledgers = list(self._ledgers.values())
        return sum(ml.flush_cursors() for ml in ledgers)

    @property
    def cursor_flush_interval_ms(self) -> int:
        """The period of :meth:`flush_cursors` (``cursor_position_flush_seconds``, Pulsar's
        ``managedLedgerCursorPositionFlushSeconds``: 60 s)."""
        return self.config.cursor_position_flush_seconds * 1000

    @property
    def executor(self) -> Executor:
        """The executor running asynchronous reads (created on first use)."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mledger-io")
            return self._executor

    @property
    def write_executor(self) -> Executor:
        """The writer threads of managed ledgers whose store's writes block (created on first
        use; see :meth:`ManagedLedger.add_entries_with_callback`)."""
        with self._lock:
            if self._write_executor is None:
                self._write_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mledger-write")
            return self._write_executor

    def close(self) -> None:
        """Close every open ML, the executors this factory created, and the store."""
        with self._lock:
            if self._closed:
                return
            ledgers = list(self._ledgers.values())
        for ml in ledgers:
            ml.close()
        with self._lock:
            self._closed = True
            if self._own_executor and self._executor is not None:
                self._executor.shutdown(wait=True)
            if self._write_executor is not None:
                self._write_executor.shutdown(wait=True)
        self.store.close()

    def managed_ledger_closed(self, name: str) -> None:
        """Drop the closed ledger ``name`` from the cache (its ``close`` calls this)."""
        with self._lock:
            self._ledgers.pop(name, None)

    def __enter__(self) -> ManagedLedgerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
