"""The managed ledger: an append-only log split into ledgers, and its factory.

Theory of operation
-------------------
A managed ledger (ML) is a list of ledgers, each an append-only sequence of entries in the
:class:`~mledger.storage.LedgerStore`. Appends go to the *current* ledger; after
``max_entries_per_ledger`` entries (or ``max_size_per_ledger_mb`` bytes, or
``maximum_rollover_time_ms``) the current ledger is sealed and a new one is created at once, so
the next entry lands at ``(newLedger, 0)``. The last confirmed entry (LAC) is the last
position whose append returned.

Position arithmetic follows Pulsar's ``ManagedLedgerImpl``: ``next_valid_position`` skips
missing and empty ledgers and, past the end, answers the position where the next entry will
be written; ``previous_position`` steps back into the last non-empty earlier ledger;
``number_of_entries`` counts real entries between two positions using the ledger list;
``position_after_n`` walks ledgers and is clamped to the LAC.

The ledger list is persisted as Pulsar's ``ManagedLedgerInfo`` at ``/managed-ledgers/<name>``
with compare-and-set, so a reopened ML recovers every confirmed entry. On reopen the last
ledger is sealed and a new current ledger created, as Pulsar does.

Retention and trimming follow ``ManagedLedgerImpl.internalTrimConsumedLedgers``: a pass takes
the ledgers strictly below the slowest durable cursor's *persisted* mark-delete ledger (the
ledger after it when that mark-delete is its last entry), oldest first, stops at the current
ledger (never trimmed), and deletes a ledger while it is expired (``now - closed >
retention_time_ms``) or over quota (what would stay is still at least ``retention_size_in_mb``);
-1 makes a limit unlimited, 0 (the default) keeps nothing consumed. A pass runs on the
factory's executor, never on the caller's thread: a persisted mark-delete that moves the
slowest cursor into a later ledger, a rollover, a deleted cursor and the broker's periodic
retention check queue one (:meth:`ManagedLedger.trim_consumed_ledgers_in_background`); passes
are serialised and coalesced. Non-durable cursors never hold trimming back: before ledgers go
they are mark-deleted past them (``advanceCursorsIfNecessary``). Without durable cursors every
closed ledger counts as consumed (Pulsar's slowest reader is then the ledger after the current
one), so retention alone decides what stays. ``retain_without_subscriptions`` keeps instead
everything of a ledger without a durable consumer cursor (system cursors like ``pulsar.dedup``
do not count), for embedded logs that must not lose data nobody subscribed to.

Sizes follow Pulsar: each ledger's bytes are counted as entries are appended (the current
ledger's from the store on reopen), ``total_size`` is their sum, ``entries_added_counter``
counts the entries appended since this ML was opened; a closed ledger's timestamp is the time
it was closed.

Adds are pipelined (Pulsar's pending adds, ``OpAddEntry``): an add is queued and completes
later through its callback or future; adds complete in the order they were queued. One thread
at a time is the ML's *writer*: it takes everything queued (up to ``_MAX_BATCH_ENTRIES``
entries) and writes it with one ``append_many`` per ledger touched, so the adds that arrive
while a write is in flight share the next one (and the store's group commit batches the writes
of several MLs and cursors into one transaction). The writer is the adding thread for a
blocking :meth:`ManagedLedger.add_entries` when no write is under way, the adding thread too
when the store's writes never block (``MemoryStore``), else one of the factory's writer
threads, which never hold a ledger for long (a few batches, then it queues itself again). A
failed write fails every add queued behind it: nothing queued after a failure is written before
the failure has been reported.

Locking: one re-entrant lock per ML guards the ledger list, LAC and counters; position
arithmetic holds it briefly. The writer holds an *append lock* across an append (rollovers take
it too, before the ML lock) and writes entries that fit in the current ledger without the ML
lock, so readers never wait for a store write; only a rollover (seal, create, ``ManagedLedgerInfo``)
does I/O under the ML lock. A third, short lock guards the queue of pending adds, so queueing
never waits for a write. Callbacks run with no lock held. Cursors take their own lock first
and may then take the ML lock, never the reverse.

Cursors see the ML as a :class:`~mledger.managed_ledger._ledger_view.LedgerView`; the ML sees its
factory as a :class:`LedgerFactoryView`. ``ManagedLedgerInfo`` bytes are
:mod:`mledger.codec._ledger_info`'s.
"""

from __future__ import annotations

import logging
import threading
import uuid
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from sortedcontainers import SortedDict

from ..codec._entry import Entry, EntryMetadata, encode_entry, stored_entry
from ..codec._ledger_info import (
    StoredLedger,
    decode_managed_ledger_info,
    decode_terminated_position,
    encode_managed_ledger_info,
)
from ..core._clock import Clock
from ..core._config import ManagedLedgerConfig, ManagedLedgerFactoryConfig
from ..core._errors import (
    EntryTooLargeError,
    InvalidPositionError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerTerminatedError,
    NotFoundError,
    StateCorruptedError,
)
from ..core._position import Position
from ..storage._base import Store
from ._cursor import ManagedCursor
from ._ledger_view import InitialPosition, LedgerInfo, PositionBound, cursor_info_path, ledger_info_path

log = logging.getLogger(__name__)

_DEFAULT_METADATA = EntryMetadata()

_MAX_BATCH_ENTRIES = 1000
"""The most entries the writer takes from the queue for one write (one add is never split)."""
_BACKGROUND_BATCHES = 16
"""Batches a writer thread writes for one ledger before it queues itself behind the others."""

AddCallback = Callable[[list[Position] | None, BaseException | None], None]
"""``callback(positions, None)`` once an add is stored, ``callback(None, error)`` if it failed."""


class LedgerFactoryView(Protocol):
    """What a managed ledger needs from the factory that opened it."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def config(self) -> ManagedLedgerFactoryConfig: ...

    @property
    def executor(self) -> Executor: ...

    @property
    def write_executor(self) -> Executor:
        """The writer threads of ledgers whose store's writes block."""
        ...

    def managed_ledger_closed(self, name: str) -> None:
        """The ledger ``name`` closed: a later ``open`` recovers it anew."""
        ...


@dataclass(frozen=True)
class ManagedLedgerStats:
    """A snapshot of a managed ledger's counters (Pulsar's names in snake_case)."""

    name: str
    number_of_ledgers: int
    number_of_entries: int
    """Entries in every ledger of the list, the current one included."""
    total_size: int
    """Bytes of every ledger of the list, the current one included (Pulsar's ``totalSize``)."""
    entries_added_counter: int
    """Entries appended since this managed ledger was opened (Pulsar's counter)."""
    last_confirmed_entry: Position
    current_ledger_id: int
    cursors: int
    """Durable cursors open."""
    current_ledger_entries: int = 0
    current_ledger_size: int = 0
    last_ledger_created_timestamp: int = 0
    """When the current ledger was created (ms)."""
    non_durable_cursors: int = 0
    """Non-durable cursors open (never persisted, never holding trimming back)."""
    trimmed_ledgers_total: int = 0
    """Ledgers deleted by trimming since this managed ledger was opened."""


class ManagedLedger:
    """An append-only log of entries split into ledgers (Pulsar's ``ManagedLedgerImpl``).

    Obtain one with :meth:`ManagedLedgerFactory.open`. Public methods are thread-safe; appends
    and reads may block on the store.
    """

    def __init__(
        self,
        factory: LedgerFactoryView,
        name: str,
        config: ManagedLedgerConfig,
    ) -> None:
        self._factory = factory
        self.name = name
        self.config = config
        self._store: Store = factory.store
        self._clock: Clock = factory.clock
        self._lock = threading.RLock()
        self._ledgers: SortedDict = SortedDict()  # ledger id -> LedgerInfo
        self._current: LedgerInfo | None = None
        self._current_created_ms = 0
        self._last_confirmed = Position(-1, -1)
        self._entries_added = 0
        self._info_version: int | None = None
        self._cursors: dict[str, ManagedCursor] = {}
        self._non_durable: dict[str, ManagedCursor] = {}
        self._closed = False
        self._properties: dict[str, str] = {}
        # Termination (Pulsar's state Terminated): set under the add lock, so no add queues after
        # it; the position is the last entry once the adds queued before it completed.
        self._terminating = False
        self._terminated: Position | None = None
        # The add pipeline (see the module doc).
        self._add_lock = threading.Lock()
        # Held by the writer across an append (the store write runs outside self._lock) and by
        # every other change of the current ledger (rollovers), so they never interleave.
        self._append_lock = threading.Lock()
        self._adds_idle = threading.Condition(self._add_lock)
        self._idle_waiters = 0
        self._pending_adds: deque[_PendingAdd] = deque()
        self._writing = False
        self._writer_ident: int | None = None
        self._closing = False
        self._failing = False
        self._failure_listener: Callable[[], None] | None = None
        self._roll_over_failed = False
        # A failure episode: the error of the first failed write since the last successful
        # one (None: writes succeed), and the writes and entries failed in it (logged once).
        self._write_failure: BaseException | None = None
        self._failed_writes = 0
        self._failed_entries = 0
        self._writes_block: bool = getattr(self._store, "blocking_writes", True)
        # Background trimming: passes are serialised by _trim_mutex; at most one more waits
        # queued (_trim_queued), which every request in the meantime shares.
        self._trim_mutex = threading.Lock()
        self._trim_queued: Future[list[int]] | None = None
        self._trim_horizon = -1  # the slowest reader's ledger (Pulsar's rule) last queued for
        self._trim_deferred = False  # a pass gave way to a cursor reset: retry on the next request
        self._reported: dict[object, int] = {}  # durable cursor name -> reader ledger last reported
        self._trimmed_total = 0

    # -- lifecycle --------------------------------------------------------------------------
    def initialize(self) -> None:
        """Recover the ledger list (if any), seal the last ledger, start a new one.

        The factory calls this once, right after construction. Raises
        ``StateCorruptedError`` for an unreadable ``ManagedLedgerInfo``."""
        stored = self._store.get(self.info_path)
        if stored is not None:
            try:
                ledgers, properties = decode_managed_ledger_info(
                    stored.data, self._factory.config.max_state_size_in_bytes
                )
            except StateCorruptedError as exc:
                raise StateCorruptedError(f"managed ledger {self.name}: {exc}") from exc
            self._info_version = stored.version
            self._properties = properties
            terminated = decode_terminated_position(stored.data, self._factory.config.max_state_size_in_bytes)
            if terminated is not None:
                self._terminating = True
                self._terminated = Position(*terminated)
            now = self._clock.now_ms()
            for k, li in enumerate(ledgers):
                entries, size, timestamp = li.entries, li.size or 0, li.timestamp
                if entries is None or k == len(ledgers) - 1:
                    # The last ledger was open when the ML closed: the store's LAC and length
                    # are the truth, and it is closed now (Pulsar's recovery).
                    exists = self._store.ledger_exists(li.ledger_id)
                    entries = self._store.last_entry_id(li.ledger_id) + 1 if exists else 0
                    size = self._store.ledger_length(li.ledger_id) if exists else 0
                    timestamp = now
                # A ledger stored without a timestamp (or 0) gets the current time, as in Pulsar.
                self._ledgers[li.ledger_id] = LedgerInfo(li.ledger_id, entries, size, timestamp or now)
            if self._ledgers:
                last = self._ledgers.peekitem(-1)[1]
                if self._store.ledger_exists(last.ledger_id):
                    self._store.seal_ledger(last.ledger_id)
                if last.entries == 0:
                    del self._ledgers[last.ledger_id]
                    self._store.delete_ledger(last.ledger_id)
            for li in reversed(self._ledgers.values()):
                if li.entries > 0:
                    self._last_confirmed = Position(li.ledger_id, li.entries - 1)
                    break
        self._create_ledger()
        if self._last_confirmed.ledger_id == -1:
            self._last_confirmed = Position(self._current.ledger_id, -1)  # type: ignore[union-attr]

    def close(self) -> None:
        """Close the ML and its cursors (cursors persist their state). Idempotent.

        New adds are refused at once; the queued ones are written first (on the writer's own
        thread, from a callback, they fail with ``ManagedLedgerClosedError`` instead)."""
        with self._add_lock:
            self._closing = True
        self.wait_for_adds()
        with self._lock:
            if self._closed:
                return
            # Non-durable cursors close too (Pulsar closes every cursor of the ledger); they
            # persist nothing.
            cursors = list(self._cursors.values()) + list(self._non_durable.values())
        for cursor in cursors:
            cursor.close()
        with self._lock:
            self._closed = True
            self._factory.managed_ledger_closed(self.name)
        # A trimming pass in flight finishes first (it then finds the ML closed).
        with self._trim_mutex:
            pass

    @property
    def is_closed(self) -> bool:
        return self._closed

    # -- termination ------------------------------------------------------------------------
    def terminate(self) -> Position:
        """Terminate the ledger (Pulsar's ``asyncTerminate``): adds queued before complete, every
        later add raises ``ManagedLedgerTerminatedError``; the state is persisted in the
        ``ManagedLedgerInfo`` (``terminatedPosition``), so a restart keeps it. Returns the last
        entry's position (entry -1 of the current ledger when the ledger is empty). Idempotent;
        ``ManagedLedgerClosedError`` once closed."""
        with self._add_lock:
            if self._closed or self._closing:
                raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
            self._terminating = True
        self.wait_for_adds()
        with self._append_lock, self._lock:
            self._check_open()
            if self._terminated is None:
                self._terminated = self._last_confirmed
                self._persist_info()
                log.info("managed ledger %s terminated at %s", self.name, self._terminated)
            return self._terminated

    @property
    def is_terminated(self) -> bool:
        """Whether :meth:`terminate` was called (now or before a restart)."""
        return self._terminating

    @property
    def terminated_position(self) -> Position | None:
        """The last entry of a terminated ledger, None while it accepts entries."""
        return self._terminated

    # -- appends ----------------------------------------------------------------------------
    def add_entry(self, data: bytes, metadata: EntryMetadata | None = None) -> Position:
        """Append one entry and return its position. Blocks until it is stored."""
        return self.add_entries((data,), None if metadata is None else (metadata,))[0]

    def add_entries(
        self, payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None = None
    ) -> list[Position]:
        """Append entries in order, after every add queued before; return their positions.

        One store transaction per ledger touched (adds queued together share them). A batch
        that reaches the rollover limit continues in a new ledger. Raises
        ``EntryTooLargeError`` (nothing written) for an oversized entry. Blocks until stored.
        """
        return self.add_framed_entries(self._frame(payloads, metadatas))

    def add_entries_async(
        self, payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None = None
    ) -> Future[list[Position]]:
        """:meth:`add_entries` without waiting: a future of the positions (or of the error).

        Adds complete in the order they were queued; see :meth:`async_add_framed_entries`.
        """
        return self.add_framed_entries_async(self._frame(payloads, metadatas))

    @staticmethod
    def _frame(payloads: Sequence[bytes], metadatas: Sequence[EntryMetadata] | None) -> list[bytes]:
        if metadatas is not None and len(metadatas) != len(payloads):
            raise ValueError(f"{len(payloads)} payloads but {len(metadatas)} metadata records")
        if metadatas is None:
            # One header for the whole call: framing is [size][metadata][payload].
            header = encode_entry(b"", _DEFAULT_METADATA)
            return [header + p for p in payloads]
        return [encode_entry(p, m) for p, m in zip(payloads, metadatas, strict=True)]

    def add_framed_entries(self, raw: Sequence[bytes]) -> list[Position]:
        """Append entries already framed as Pulsar stores them, byte for byte.

        Each item is ``[size][MessageMetadata][payload]``, optionally behind the producer's
        ``[0x0e01][crc32c]`` (what a Pulsar client sends; :func:`~mledger.codec._entry.decode_entry`
        reads both). The caller vouches for the framing; a protocol server checks it before.
        Like :meth:`add_entries`: positions in order, ``EntryTooLargeError`` (nothing written)
        for an oversized entry. Blocks until stored; when no write is under way the calling
        thread performs it (with whatever else is queued), else it waits for the writer.
        """
        waiter = _AddWaiter()
        self.async_add_framed_entries(raw, waiter, start_writing=False)
        self.start_writing(inline=True, until=waiter)
        return waiter.wait()

    def add_framed_entries_async(self, raw: Sequence[bytes]) -> Future[list[Position]]:
        """:meth:`add_framed_entries` without waiting: a future of the positions (or of the error)."""
        future: Future[list[Position]] = Future()

        def done(positions: list[Position] | None, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(positions)  # type: ignore[arg-type]

        self.async_add_framed_entries(raw, done)
        return future

    def async_add_framed_entries(
        self, raw: Sequence[bytes], callback: AddCallback, *, start_writing: bool = True
    ) -> None:
        """Queue framed entries (Pulsar's ``asyncAddEntry``); never waits on the store.

        Adds are written in the order they were queued: everything queued while a write is
        under way goes into the next store call (one transaction per ledger touched, the
        store's group commit on top). ``callback(positions, None)`` runs once they are stored,
        ``callback(None, error)`` once they failed, in queue order, on the thread that wrote
        them (this one when the store's writes never block, else one of the factory's writer
        threads), outside the ledger's locks. A callback must not wait for a later add of this
        ledger (it runs on the writer). A failed write fails, with its error, every add queued
        behind it (nothing after a failure is written before the failure is reported, so an
        owner can fence, as Pulsar's ``clearPendingAddEntries``); a write that stored some
        entries of a multi-ledger add reports the error for that add.

        ``start_writing=False`` only queues: the caller calls :meth:`start_writing` once it
        released its own locks. Raises ``EntryTooLargeError`` and ``ManagedLedgerClosedError``
        at once (nothing queued).
        """
        limit = self._store.max_entry_size
        for i, r in enumerate(raw):
            if len(r) > limit:
                raise EntryTooLargeError(f"entry {i} of {len(r)} bytes exceeds the maximum entry size {limit}")
        op = _PendingAdd(raw, callback)
        with self._add_lock:
            if self._closed or self._closing:
                raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")
            if self._terminating:
                raise ManagedLedgerTerminatedError(f"Managed ledger {self.name} was already terminated")
            self._pending_adds.append(op)
        if start_writing:
            self.start_writing()

    def start_writing(self, inline: bool = False, until: _AddWaiter | None = None) -> None:
        """Write the queued adds unless a writer is at work already.

        On this thread when the store's writes never block (``blocking_writes`` False, the
        memory store) or ``inline`` (until ``until`` completed; what is left goes to a writer
        thread), else on one of the factory's writer threads.
        """
        with self._add_lock:
            if self._writing or not self._pending_adds:
                return
            self._writing = True
        if inline or not self._writes_block:
            self._drain(until if self._writes_block else None)
        else:
            self._drain_elsewhere()

    def wait_for_adds(self, timeout: float | None = None) -> bool:
        """Block until every queued add completed (at once on the writer's own thread).

        Returns False when ``timeout`` seconds passed first.
        """
        with self._adds_idle:
            if self._writer_ident == threading.get_ident():
                return True
            self._idle_waiters += 1
            try:
                return self._adds_idle.wait_for(lambda: not self._writing and not self._pending_adds, timeout)
            finally:
                self._idle_waiters -= 1

    @property
    def pending_add_entries(self) -> int:
        """Adds queued or being written (Pulsar's ``pendingAddEntriesCount``)."""
        return len(self._pending_adds)

    def _drain_elsewhere(self) -> None:
        try:
            self._factory.write_executor.submit(self._drain, None, _BACKGROUND_BATCHES)
        except RuntimeError as exc:  # the executor shut down: the factory is closing
            self._fail_queued([], ManagedLedgerClosedError(f"managed ledger {self.name} is closed: {exc}"))
            with self._adds_idle:
                self._writing = False
                self._adds_idle.notify_all()

    def _drain(self, until: _AddWaiter | None = None, max_batches: int = 0) -> None:
        """Write queued adds batch by batch (this thread is the ledger's writer meanwhile).

        Stops when the queue is empty; with ``until``, once that add completed, and with
        ``max_batches``, after that many batches (for fairness between ledgers sharing the
        writer threads): what is left is handed to a writer thread.
        """
        self._writer_ident = threading.get_ident()
        batches = 0
        try:
            while True:
                with self._add_lock:
                    queue = self._pending_adds
                    if not queue:
                        self._writing = False
                        self._writer_ident = None
                        if self._idle_waiters:
                            self._adds_idle.notify_all()
                        return
                    if (until is not None and until.done) or (max_batches and batches >= max_batches):
                        break
                    batch = [queue.popleft()]
                    n = len(batch[0].raw)
                    while queue and n + len(queue[0].raw) <= _MAX_BATCH_ENTRIES:
                        op = queue.popleft()
                        n += len(op.raw)
                        batch.append(op)
                self._write_batch(batch)
                batches += 1
        except BaseException:
            with self._adds_idle:
                self._writing = False
                self._writer_ident = None
                self._adds_idle.notify_all()
            raise
        self._writer_ident = None
        self._drain_elsewhere()

    def _write_batch(self, batch: list[_PendingAdd]) -> None:
        single = len(batch) == 1
        raw = batch[0].raw if single else [r for op in batch for r in op.raw]
        error: BaseException | None = None
        try:
            with self._append_lock:
                positions, error = self._append(raw)
        except BaseException as exc:
            positions, error = [], exc
        done = 0
        if self._write_failure is not None and positions:
            self._writes_recovered()
        if single:
            if error is None:
                _complete(batch[0], positions, None)
                return
        else:
            start = 0
            for op in batch:  # the adds stored in full succeed, in order
                end = start + len(op.raw)
                if end > len(positions):
                    break
                _complete(op, positions[start:end], None)
                start = end
                done += 1
        if error is not None:
            self._write_failed(error, len(raw) - len(positions))
            self._fail_queued(batch[done:], error)
            if not isinstance(error, Exception):
                raise error

    def _write_failed(self, error: BaseException, entries: int) -> None:
        """Count a failed write; log it only when it starts an episode (a full disk fails
        every retry of every producer: one line per episode, not one per write)."""
        with self._lock:
            first = self._write_failure is None
            if first:
                self._write_failure = error
            self._failed_writes += 1
            self._failed_entries += entries
        if first:
            log.warning(
                "managed ledger %s: append failed: %s (the failures that follow are counted, and reported"
                " once writes succeed again)",
                self.name,
                error,
            )

    def _writes_recovered(self) -> None:
        with self._lock:
            error, self._write_failure = self._write_failure, None
            writes, entries = self._failed_writes, self._failed_entries
            self._failed_writes = self._failed_entries = 0
        if error is not None:
            log.warning(
                "managed ledger %s: writes succeed again after %d failed writes (%d entries; first error: %s)",
                self.name,
                writes,
                entries,
                error,
            )

    @property
    def write_failure(self) -> BaseException | None:
        """The error of the failed write that started the current failure episode; None when
        the last write succeeded (or none failed). See :meth:`check_writable`."""
        return self._write_failure

    def check_writable(self) -> None:
        """After a failed write (:attr:`write_failure` set), find out whether the store accepts
        writes again: persist the ledger's metadata again, unchanged. On success the episode
        ends; otherwise the probe counts as a failed write and its error is raised. Does
        nothing (no write) while writes succeed."""
        if self._write_failure is None:
            return
        try:
            with self._lock:
                self._check_open()
                self._persist_info()
        except ManagedLedgerClosedError:
            raise
        except BaseException as exc:
            self._write_failed(exc, 0)
            raise
        self._writes_recovered()

    def _fail_queued(self, failed: list[_PendingAdd], error: BaseException) -> None:
        """Fail ``failed`` and every add queued behind, until the queue is seen empty; then
        tell the failure listener (see :meth:`set_failure_listener`)."""
        self._failing = True
        while True:
            for op in failed:
                _complete(op, None, error)
            with self._add_lock:
                if not self._pending_adds:
                    self._failing = False
                    break
                failed = list(self._pending_adds)
                self._pending_adds.clear()
        listener = self._failure_listener
        if listener is not None:
            try:
                listener()
            except Exception:  # an owner's bug must not stop the pipeline
                log.exception("managed ledger %s: the failure listener failed", self.name)

    def set_failure_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener()`` (on the writer thread, no lock held) each time a failed write and
        every add failed with it have been reported to their callbacks. An owner that fences
        on a failure (Pulsar's topic) lifts the fence then: before that, an add it queues
        would be failed with the earlier error."""
        self._failure_listener = listener

    @property
    def adds_failing(self) -> bool:
        """Whether a failed write is being reported (adds queued meanwhile fail with it)."""
        return self._failing

    def _append(self, raw: Sequence[bytes]) -> tuple[list[Position], BaseException | None]:
        """Write ``raw`` to the current ledger(s), rolling over as needed (the caller holds the
        append lock). Returns the positions written and the error that stopped it, if any.

        When everything fits in the current ledger (the common case) the store write runs
        without the ledger lock, so readers and position arithmetic never wait for it: only
        this writer appends, and rollovers take the append lock too. A batch that reaches a
        rollover limit is written under the ledger lock, chunk by chunk.
        """
        positions: list[Position] = []
        n = len(raw)
        with self._lock:
            self._check_open()
            if not n:
                return positions, None
            current = self._current
            assert current is not None
            config = self.config
            size = sum(map(len, raw))
            fits = not self._roll_over_failed and (
                (
                    current.entries + n < config.max_entries_per_ledger
                    and current.size + size < config.max_size_per_ledger_mb * 1024 * 1024
                )
                or not self._may_roll_over()
            )
        if fits:
            ledger_id = current.ledger_id
            try:
                first = self._store.append_many(ledger_id, raw)
            except BaseException as exc:
                return positions, exc
            positions = [Position(ledger_id, first + k) for k in range(n)] if n != 1 else [Position(ledger_id, first)]
            with self._lock:
                current.entries += n
                current.size += size
                self._last_confirmed = positions[-1]
                self._entries_added += n
                if self._ledger_is_full(current):  # by age
                    try:
                        self._roll_over()
                    except Exception as exc:
                        self._roll_over_failed = True
                        log.warning("managed ledger %s: rollover after an add failed: %s", self.name, exc)
            return positions, None
        with self._lock:
            return self._append_rolling(raw)

    def _append_rolling(self, raw: Sequence[bytes]) -> tuple[list[Position], BaseException | None]:
        """:meth:`_append` for a batch that reaches a rollover limit (caller holds both locks)."""
        positions: list[Position] = []
        cumulative = list(accumulate(map(len, raw)))  # prefix sums of the entry sizes
        done = 0
        try:
            while done < len(raw):
                if self._roll_over_failed:  # retry the rollover a previous add could not do
                    self._roll_over()
                    self._roll_over_failed = False
                current = self._current
                assert current is not None
                base = cumulative[done - 1] if done else 0
                if self._may_roll_over():
                    end = min(done + max(self.config.max_entries_per_ledger - current.entries, 1), len(raw))
                    # Size rollover, as for single adds: the chunk ends with the entry that
                    # brings the ledger to max_size_per_ledger_mb.
                    size_room = self.config.max_size_per_ledger_mb * 1024 * 1024 - current.size
                    end = min(end, bisect_left(cumulative, base + size_room, done, end) + 1)
                else:  # too young to roll over: everything goes to the current ledger
                    end = len(raw)
                chunk = raw[done:end]
                first = self._store.append_many(current.ledger_id, chunk)
                current.entries += len(chunk)
                current.size += cumulative[end - 1] - base
                positions.extend(Position(current.ledger_id, first + k) for k in range(len(chunk)))
                self._last_confirmed = positions[-1]
                self._entries_added += len(chunk)
                done = end
                if self._ledger_is_full(current):
                    try:
                        self._roll_over()
                    except Exception as exc:
                        # The entries are stored: they succeed; the next add rolls over first.
                        self._roll_over_failed = True
                        log.warning("managed ledger %s: rollover after an add failed: %s", self.name, exc)
        except BaseException as exc:
            return positions, exc
        return positions, None

    def add_repeated_entries(self, raw: bytes, count: int) -> Position | None:
        """Append ``count`` copies of one framed entry (as :meth:`add_framed_entries` would, with
        the same rollover rules); return the last position (``None`` when ``count`` is 0).

        The bulk path of a replay, whose entries carry no payload: O(ledgers touched) here,
        no per-entry objects (the store still receives every entry). Raises
        ``EntryTooLargeError`` (nothing written) when the entry is oversized.
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        size = len(raw)
        if size > self._store.max_entry_size:
            raise EntryTooLargeError(
                f"entry of {size} bytes exceeds the maximum entry size {self._store.max_entry_size}"
            )
        last: Position | None = None
        with self._append_lock, self._lock:
            self._check_open()
            done = 0
            while done < count:
                current = self._current
                assert current is not None
                n = count - done
                if self._may_roll_over():
                    n = min(n, self.config.max_entries_per_ledger - current.entries)
                    size_room = self.config.max_size_per_ledger_mb * 1024 * 1024 - current.size
                    if size:  # the chunk ends with the entry that brings the ledger to its size limit
                        n = min(n, max(-(-size_room // size), 1))
                    n = max(n, 1)
                first = self._store.append_many(current.ledger_id, [raw] * n)
                current.entries += n
                current.size += n * size
                last = Position(current.ledger_id, first + n - 1)
                self._last_confirmed = last
                self._entries_added += n
                done += n
                if self._ledger_is_full(current):
                    self._roll_over()
        return last

    def _ledger_is_full(self, li: LedgerInfo) -> bool:
        """Pulsar's ``currentLedgerIsFull``: the entry or size limit, or the maximum age, is
        reached, and the ledger is older than ``minimum_rollover_time_ms`` (which gates every
        rollover, not only the time-based one)."""
        cfg = self.config
        age = self._clock.now_ms() - self._current_created_ms
        reached = (
            li.entries >= cfg.max_entries_per_ledger
            or li.size >= cfg.max_size_per_ledger_mb * 1024 * 1024
            or (li.entries > 0 and age >= cfg.maximum_rollover_time_ms)
        )
        return reached and self._may_roll_over(age)

    def _may_roll_over(self, age_ms: int | None = None) -> bool:
        """Whether the current ledger is old enough to roll over (``minimum_rollover_time_ms``)."""
        minimum = self.config.minimum_rollover_time_ms
        if minimum <= 0:
            return True
        if age_ms is None:
            age_ms = self._clock.now_ms() - self._current_created_ms
        return age_ms > minimum

    def roll_over_if_due(self) -> bool:
        """Roll over the current ledger if its time limit has passed; True if it did."""
        with self._append_lock, self._lock:
            self._check_open()
            assert self._current is not None
            if self._ledger_is_full(self._current):
                self._roll_over()
                return True
            return False

    def roll_over(self) -> int:
        """Seal the current ledger now and continue in a new one; return the new ledger's id.

        An empty current ledger is kept as it is (nothing to seal) and its id returned.
        """
        with self._append_lock, self._lock:
            self._check_open()
            assert self._current is not None
            if self._current.entries > 0:
                self._roll_over()
            return self._current.ledger_id

    def _roll_over(self) -> None:
        assert self._current is not None
        self._store.seal_ledger(self._current.ledger_id)
        self._current.timestamp = self._clock.now_ms()  # a ledger's timestamp is its close time
        self._create_ledger()
        if self._may_trim():
            # Pulsar's ledgerClosed: the closed ledger may be consumed (or expired) already.
            self.trim_consumed_ledgers_in_background()

    def _create_ledger(self) -> None:
        ledger_id = self._store.create_ledger()
        li = LedgerInfo(ledger_id, 0, 0, 0)  # timestamp 0 while open, as Pulsar stores it
        self._ledgers[ledger_id] = li
        self._current = li
        self._current_created_ms = self._clock.now_ms()
        self._persist_info()

    def _persist_info(self) -> None:
        current_id = self._current.ledger_id if self._current is not None else None
        cfg = self._factory.config
        data = encode_managed_ledger_info(
            (
                StoredLedger(li.ledger_id, li.entries, li.size, li.timestamp)
                if li.ledger_id != current_id
                else StoredLedger(li.ledger_id, None, None, li.timestamp)
                for li in self._ledgers.values()
            ),
            self._properties,
            cfg.managed_ledger_info_compression_type,
            cfg.managed_ledger_info_compression_threshold_in_bytes,
            None if self._terminated is None else (self._terminated.ledger_id, self._terminated.entry_id),
        )
        expected = -1 if self._info_version is None else self._info_version
        self._info_version = self._store.put(self.info_path, data, expected)

    # -- reads ------------------------------------------------------------------------------
    def read_entry(self, position: Position) -> Entry:
        """Read one entry; raises ``InvalidPositionError`` if it does not exist."""
        entries = self.read_range(position.ledger_id, position.entry_id, position.entry_id)
        if not entries:
            raise InvalidPositionError(f"no entry at {position} in {self.name}")
        return entries[0]

    def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[Entry]:
        """Read the existing entries ``first_entry..last_entry`` of one ledger. Blocks on I/O."""
        try:
            raws = self._store.read(ledger_id, first_entry, last_entry)
        except LedgerNotFoundError:
            return []
        first = max(first_entry, 0)
        return [stored_entry(Position(ledger_id, first + k), raw) for k, raw in enumerate(raws)]

    def read_positions(self, positions: Iterable[Position]) -> list[Entry]:
        """Read the entries at ``positions`` (ascending or not), one store read per run."""
        ordered = sorted(set(positions))
        out: list[Entry] = []
        i = 0
        while i < len(ordered):
            ledger_id, first = ordered[i]
            j = i
            while j + 1 < len(ordered) and ordered[j + 1] == (ledger_id, ordered[j][1] + 1):
                j += 1
            out.extend(self.read_range(ledger_id, first, ordered[j][1]))
            i = j + 1
        return out

    # -- position arithmetic ----------------------------------------------------------------
    @property
    def last_confirmed_entry(self) -> Position:
        """The last position whose append completed (``L:-1`` for an empty ML)."""
        return self._last_confirmed

    last_position = last_confirmed_entry

    @property
    def entries_added_counter(self) -> int:
        """Entries appended since the ML was opened, plus those recovered."""
        return self._entries_added

    @property
    def current_ledger_id(self) -> int:
        assert self._current is not None
        return self._current.ledger_id

    def first_position(self) -> Position:
        """``(first ledger, -1)``: before the first entry still stored."""
        with self._lock:
            first_id = self._ledgers.peekitem(0)[0]
            if first_id > self._last_confirmed.ledger_id and self._ledgers[first_id].entries == 0:
                first_id = self._last_confirmed.ledger_id
            return Position(first_id, -1)

    def is_valid_position(self, position: Position) -> bool:
        """Whether an entry exists at ``position`` (confirmed, ledger still present)."""
        ledger_id, entry_id = position
        if entry_id < 0 or position > self._last_confirmed:
            return False
        li = self._ledgers.get(ledger_id)
        return li is not None and entry_id < li.entries

    def next_valid_position(self, position: Position) -> Position:
        """The first existing position after ``position``; past the end, the next write slot."""
        with self._lock:
            ledgers = self._ledgers
            ledger_id, entry_id = position[0], position[1] + 1
            lac = self._last_confirmed
            while (ledger_id, entry_id) <= lac:
                li = ledgers.get(ledger_id)
                if li is not None and 0 <= entry_id < li.entries:
                    return Position(ledger_id, entry_id)
                idx = ledgers.bisect_right(ledger_id)
                if idx >= len(ledgers):
                    break
                ledger_id, entry_id = ledgers.peekitem(idx)[0], 0
            return self._next_write_position()

    def _next_write_position(self) -> Position:
        current = self._current
        assert current is not None
        if current.entries == 0 and current.ledger_id > self._last_confirmed.ledger_id:
            return Position(current.ledger_id, 0)
        return self._last_confirmed.next()

    def previous_position(self, position: Position) -> Position:
        """The position before ``position``: ``L:E-1``, else the last entry of the nearest
        earlier non-empty ledger, else ``(first earlier ledger or L, -1)``."""
        ledger_id, entry_id = position
        if entry_id > 0:
            return Position(ledger_id, entry_id - 1)
        with self._lock:
            earlier = list(self._ledgers.irange(maximum=ledger_id, inclusive=(True, False)))
            if not earlier:
                return Position(ledger_id, -1)
            for lid in reversed(earlier):
                li = self._ledgers[lid]
                if li.entries > 0:
                    return Position(lid, li.entries - 1)
            return Position(earlier[0], -1)

    def number_of_entries(
        self,
        lower: Position | None = None,
        upper: Position | None = None,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
    ) -> int:
        """Count the entries that exist between two positions (all entries if no bounds).

        Positions with a negative entry id are never counted; missing ledgers count 0.
        O(ledgers between).
        """
        with self._lock:
            if lower is None and upper is None:
                return sum(li.entries for li in self._ledgers.values())
            if lower is None:
                lower, lower_inclusive = Position(-1, -1), False
            if upper is None:
                upper, upper_inclusive = self._last_confirmed, True
            if lower > upper:
                return 0
            total = 0
            for lid in self._ledgers.irange(lower[0], upper[0]):
                li = self._ledgers[lid]
                lo = (lower[1] if lower_inclusive else lower[1] + 1) if lid == lower[0] else 0
                hi = (upper[1] if upper_inclusive else upper[1] - 1) if lid == upper[0] else li.entries - 1
                lo = max(lo, 0)
                hi = min(hi, li.entries - 1)
                if hi >= lo:
                    total += hi - lo + 1
            return total

    def position_after_n(
        self, start: Position, n: int, bound: PositionBound = PositionBound.START_EXCLUDED
    ) -> Position:
        """The position ``n`` entries after ``start``, walking ledgers, clamped to the LAC
        (Pulsar's ``getPositionAfterN``)."""
        with self._lock:
            if bound is PositionBound.START_INCLUDED:
                ledger_id, entry_id = start
            else:
                ledger_id, entry_id = self.next_valid_position(start)
            to_skip = n
            last_ledger_id = self._ledgers.peekitem(-1)[0]
            while to_skip >= 0:
                li = self._ledgers.get(ledger_id)
                total = li.entries if li is not None else 0
                unread = total - entry_id if total > 0 else 0
                if unread >= to_skip:
                    entry_id += to_skip
                    break
                to_skip -= unread
                if ledger_id >= last_ledger_id:
                    entry_id = total
                    break
                idx = self._ledgers.bisect_right(ledger_id)
                ledger_id = self._ledgers.peekitem(idx)[0] if idx < len(self._ledgers) else last_ledger_id + 1
                entry_id = 0
            result = self.previous_position(Position(ledger_id, entry_id))
            return min(result, self._last_confirmed)

    def ledger_infos(self) -> list[LedgerInfo]:
        """A copy of the ledger list, ascending."""
        with self._lock:
            return [LedgerInfo(li.ledger_id, li.entries, li.size, li.timestamp) for li in self._ledgers.values()]

    def ledger_entries(self, ledger_id: int) -> int | None:
        """Number of entries of a ledger in the list, None if it is not there. O(1)."""
        li = self._ledgers.get(ledger_id)
        return None if li is None else li.entries

    def next_ledger_id(self, ledger_id: int) -> int | None:
        """The id of the first ledger in the list after ``ledger_id``, or None. O(log ledgers)."""
        with self._lock:
            idx = self._ledgers.bisect_right(ledger_id)
            return self._ledgers.peekitem(idx)[0] if idx < len(self._ledgers) else None

    # -- cursors ----------------------------------------------------------------------------
    def open_cursor(
        self,
        name: str,
        initial_position: InitialPosition = InitialPosition.LATEST,
        properties: dict[str, int] | None = None,
        cursor_properties: dict[str, str] | None = None,
    ) -> ManagedCursor:
        """Open (recovering, or creating at ``initial_position``) the durable cursor ``name``."""
        if not name or "/" in name:
            raise InvalidPositionError(f"invalid cursor name {name!r}")
        with self._lock:
            self._check_open()
            existing = self._cursors.get(name)
            if existing is not None:
                return existing
            cursor = ManagedCursor.open_durable(self, name, initial_position, properties, cursor_properties)
            self._cursors[name] = cursor
            return cursor

    def open_non_durable_cursor(
        self,
        start_position: Position | None = None,
        name: str | None = None,
        initial_position: InitialPosition = InitialPosition.LATEST,
    ) -> ManagedCursor:
        """A cursor kept only in memory (Pulsar's ``newNonDurableCursor``): listed with the
        ledger's cursors while open (:attr:`non_durable_cursors`, :attr:`all_cursors`,
        :meth:`get_cursor`), never persisted, never holding trimming back (it is moved past
        trimmed ledgers). An open cursor of the same name is returned as it is, as Pulsar
        does; without a name one is generated (``non-durable-cursor-<uuid>``)."""
        with self._lock:
            self._check_open()
            if name is not None:
                existing = self._cursors.get(name) or self._non_durable.get(name)
                if existing is not None:
                    return existing
            name = name if name is not None else f"non-durable-cursor-{uuid.uuid4()}"
            cursor = ManagedCursor.open_non_durable(self, name, start_position, initial_position)
            self._non_durable[name] = cursor
            return cursor

    def get_cursor(self, name: str) -> ManagedCursor:
        """The open cursor ``name``, durable or not; raises ``NotFoundError``."""
        cursor = self._cursors.get(name) or self._non_durable.get(name)
        if cursor is None:
            raise NotFoundError(f"cursor {name!r} not found on {self.name}")
        return cursor

    @property
    def cursors(self) -> list[ManagedCursor]:
        """The durable cursors, by name."""
        with self._lock:
            return [self._cursors[k] for k in sorted(self._cursors)]

    @property
    def non_durable_cursors(self) -> list[ManagedCursor]:
        """The open non-durable cursors, in the order they were opened."""
        with self._lock:
            return list(self._non_durable.values())

    @property
    def all_cursors(self) -> list[ManagedCursor]:
        """Every open cursor (Pulsar's ``getCursors()``): the durable ones by name, then the
        non-durable ones in the order they were opened."""
        with self._lock:
            return [self._cursors[k] for k in sorted(self._cursors)] + list(self._non_durable.values())

    def cursor_names(self) -> list[str]:
        """Names of the durable cursors known to this ML (open or stored)."""
        with self._lock:
            stored = set(self._store.children(self.info_path))
            return sorted(stored | set(self._cursors))

    def delete_cursor(self, name: str) -> None:
        """Delete a cursor: a durable one with its stored state, a non-durable one is closed
        and forgotten (Pulsar's ``asyncDeleteCursor``). Raises ``NotFoundError``."""
        with self._lock:
            non_durable = self._non_durable.get(name)
            if non_durable is None:
                cursor = self._cursors.pop(name, None)
                if cursor is None and self._store.get(cursor_info_path(self.name, name)) is None:
                    raise NotFoundError(f"cursor {name!r} not found on {self.name}")
        if non_durable is not None:
            non_durable.close()  # forgets itself
            return
        self._reported.pop(name, None)
        if cursor is not None:
            cursor.discard()
        else:
            self._store.delete(cursor_info_path(self.name, name))
        self._trim_deferred = True  # the slowest cursor may have gone: a pass must look again
        self.trim_consumed_ledgers_in_background()

    def forget_non_durable_cursor(self, cursor: object) -> None:
        """A non-durable cursor closed: it is no longer listed nor advanced before trims (its
        ``close`` calls this)."""
        with self._lock:
            for name, open_cursor in list(self._non_durable.items()):
                if open_cursor is cursor:
                    del self._non_durable[name]

    def slowest_cursor_position(self) -> Position | None:
        """The lowest *persisted* mark-delete position over the durable cursors, None without
        any: what trimming respects (Pulsar's ``getSlowestReaderPosition``), so a crash can
        never recover a cursor into a trimmed ledger."""
        with self._lock:
            positions = [c.persistent_mark_delete_position for c in self._cursors.values()]
        return min(positions) if positions else None

    # -- retention and trimming ---------------------------------------------------------------
    def request_trim(self, cursor: object, mark_delete: Position) -> None:
        """The durable ``cursor`` persisted ``mark_delete``: queue a trimming pass if that moved
        the slowest cursor into another ledger (Pulsar's ``onCursorMarkDeletePositionUpdated``:
        "only trigger a trimming when switching to the next ledger").

        Called on every persisted ack, so the common case is O(1): a cursor still in the
        ledger it last reported decides nothing; only when it changes ledger are the cursors
        scanned (O(cursors)). The pass itself runs in the background."""
        name = getattr(cursor, "name", None)
        ledger = self._reader_ledger(mark_delete)
        if self._reported.get(name) == ledger and not self._trim_deferred:
            return
        with self._lock:
            self._reported[name] = ledger
            slowest = self._slowest_reader_ledger()
            forward = slowest is not None and slowest > self._trim_horizon
            if slowest is not None:
                self._trim_horizon = slowest  # also when a reset moved it back
        if forward or self._trim_deferred:
            self.trim_consumed_ledgers_in_background()

    def _reader_ledger(self, mark_delete: Position) -> int:
        """Pulsar's slowest-reader ledger for one mark-delete: its ledger, or the next one when
        it is the last entry of a closed ledger (that ledger is then consumed)."""
        li = self._ledgers.get(mark_delete.ledger_id)
        if li is not None and li is not self._current and mark_delete.entry_id + 1 >= li.entries:
            return mark_delete.ledger_id + 1
        return mark_delete.ledger_id

    def _slowest_reader_ledger(self) -> int | None:
        """The first ledger a pass keeps for the cursors' sake; without durable cursors the
        one after the current ledger (Pulsar: with no durable cursor every closed ledger is
        consumed), or None when ``retain_without_subscriptions`` keeps everything then."""
        slowest = self.slowest_cursor_position()
        if slowest is not None:
            return self._reader_ledger(slowest)
        if self.config.retain_without_subscriptions or self._current is None:
            return None
        return self._current.ledger_id + 1

    def _may_trim(self) -> bool:
        """Whether a pass can delete anything: always with Pulsar's rule, else only with a
        durable consumer cursor (``retain_without_subscriptions``)."""
        if not self.config.retain_without_subscriptions:
            return True
        return any(c.counts_as_consumer for c in self._cursors.values())

    def trim_consumed_ledgers_in_background(self) -> Future[list[int]]:
        """Queue a trimming pass on the factory's executor (Pulsar's
        ``trimConsumedLedgersInBackground``); the future gives the ids of the ledgers deleted.

        Passes run one at a time; while one is queued and not started, further requests share
        it, so the future always belongs to a pass that starts after the call. Never blocks.
        """
        with self._lock:
            queued = self._trim_queued
            if queued is not None:
                return queued
            future: Future[list[int]] = Future()
            self._trim_queued = future
        try:
            self._factory.executor.submit(self._run_trim, future)
        except RuntimeError:  # the executor shut down (the factory is closing)
            with self._lock:
                self._trim_queued = None
            future.set_result([])
        return future

    def _run_trim(self, future: Future[list[int]]) -> None:
        with self._lock:
            if self._trim_queued is future:
                self._trim_queued = None
        try:
            future.set_result(self.trim_consumed_ledgers())
        except BaseException as exc:  # delivered through the future, and logged
            log.warning("managed ledger %s: trimming failed: %s", self.name, exc)
            future.set_exception(exc)

    def trim_consumed_ledgers(self) -> list[int]:
        """Run one trimming pass now, on this thread; return the ids of the ledgers deleted.

        The retention rules of ``ManagedLedgerImpl.internalTrimConsumedLedgers``: see the
        module docstring. Blocks on the store while it deletes. Usually called through
        :meth:`trim_consumed_ledgers_in_background`.
        """
        with self._trim_mutex:
            return self._trim_pass()

    def _trim_candidates(self) -> list[LedgerInfo] | None:
        """The ledgers a pass deletes (under the ML lock); None when a durable cursor is
        being reset or has not yet persisted what its reset set (its mark-delete may be moving
        back into them: the pass gives way)."""
        if self._closed or not self._may_trim():
            # retain_without_subscriptions and no durable consumer cursor (only system ones,
            # like the dedup cursor): keep everything, nobody subscribed has consumed it.
            return []
        if any(c.is_resetting for c in self._cursors.values()):
            return None
        slowest = self._slowest_reader_ledger()
        if slowest is None:
            return []
        cfg = self.config
        now = self._clock.now_ms()
        total = sum(li.size for li in self._ledgers.values())
        quota = cfg.retention_size_in_mb * 1024 * 1024
        size_to_delete = 0
        chosen: list[LedgerInfo] = []
        for li in self._ledgers.values():
            if li.ledger_id >= slowest or li is self._current:
                break
            size_to_delete += li.size
            over_quota = cfg.retention_size_in_mb >= 0 and total - size_to_delete >= quota
            expired = cfg.retention_time_ms >= 0 and now - li.timestamp > cfg.retention_time_ms
            if not (over_quota or expired):
                break  # retained, and so is every later ledger
            chosen.append(li)
        return chosen

    def _trim_pass(self) -> list[int]:
        with self._lock:
            chosen = self._trim_candidates()
            if chosen is None:
                self._trim_deferred = True
                return []
            self._trim_deferred = False
            if not chosen:
                return []
            highest = next((Position(li.ledger_id, li.entries - 1) for li in reversed(chosen) if li.entries), None)
            non_durable = list(self._non_durable.values())
        # Pulsar's advanceCursorsIfNecessary: cursors not counted for trimming (non-durable ones)
        # are mark-deleted past the ledgers before those go, while their entries can still be
        # counted. Outside the ML lock: cursors take their own lock first, then the ML lock.
        if highest is not None:
            for cursor in non_durable:
                cursor.skip_trimmed_ledgers(highest)
        with self._lock:
            again = self._trim_candidates()  # a reset may have started meanwhile
            if again is None:
                self._trim_deferred = True
                return []
            keep = {li.ledger_id for li in again}
            trimmed = [li.ledger_id for li in chosen if li.ledger_id in keep and li.ledger_id in self._ledgers]
            if not trimmed:
                return []
            for lid in trimmed:
                del self._ledgers[lid]
            self._persist_info()
            self._trimmed_total += len(trimmed)
        for lid in trimmed:
            self._store.delete_ledger(lid)
        log.info("managed ledger %s: trimmed ledgers %s", self.name, trimmed)
        return trimmed

    @property
    def total_size(self) -> int:
        """Bytes of every ledger in the list, the current one included (Pulsar's
        ``getTotalSize``). O(ledgers)."""
        with self._lock:
            return sum(li.size for li in self._ledgers.values())

    def estimated_backlog_size(self) -> int:
        """Bytes after the slowest durable cursor's persisted mark-delete (Pulsar's
        ``getEstimatedBacklogSize``): the ledgers after its ledger in full, plus the part of
        its ledger after it at that ledger's average entry size. 0 without durable cursors.
        O(ledgers)."""
        with self._lock:
            slowest = self.slowest_cursor_position()
            if slowest is None:
                return 0
            return self.estimated_size_after(slowest)

    def estimated_size_after(self, position: Position) -> int:
        """Bytes of the entries after ``position`` (Pulsar's ``estimateBacklogFromPosition``,
        a subscription's ``backlogSize`` from its mark-delete position): the ledgers after its
        ledger in full, plus the part of its ledger after it at that ledger's average entry
        size. O(ledgers)."""
        with self._lock:
            size = sum(li.size for li in self._ledgers.values() if li.ledger_id >= position.ledger_id)
            li = self._ledgers.get(position.ledger_id)
            if li is not None and li.entries > 0:
                if li.entries <= position.entry_id + 1:
                    size -= li.size
                elif position.entry_id >= 0:
                    size -= (position.entry_id + 1) * (li.size // li.entries)
            return size

    # -- misc -------------------------------------------------------------------------------
    def set_config(self, config: ManagedLedgerConfig) -> None:
        """Replace the ledger's settings while it is open (Pulsar's ``setConfig``, which the
        broker calls when a topic's policies change, retention included).

        Rollover limits apply from the next append, cursor persistence settings from the next
        persisted state, retention from the next trimming pass, which is queued now."""
        if not isinstance(config, ManagedLedgerConfig):
            raise TypeError(f"config must be a ManagedLedgerConfig, got {config!r}")
        with self._lock:
            self.config = config
            self._trim_deferred = True  # the limits changed: a pass must look again
        self.trim_consumed_ledgers_in_background()

    @property
    def properties(self) -> dict[str, str]:
        """ML properties (``ManagedLedgerInfo.properties``)."""
        return dict(self._properties)

    def set_property(self, key: str, value: str) -> None:
        """Set and persist one ML property."""
        with self._lock:
            self._properties[str(key)] = str(value)
            self._persist_info()

    def stats(self) -> ManagedLedgerStats:
        """A consistent snapshot of the ML's counters."""
        with self._lock:
            current = self._current
            assert current is not None
            return ManagedLedgerStats(
                name=self.name,
                number_of_ledgers=len(self._ledgers),
                number_of_entries=sum(li.entries for li in self._ledgers.values()),
                total_size=sum(li.size for li in self._ledgers.values()),
                entries_added_counter=self._entries_added,
                last_confirmed_entry=self._last_confirmed,
                current_ledger_id=current.ledger_id,
                cursors=len(self._cursors),
                current_ledger_entries=current.entries,
                current_ledger_size=current.size,
                last_ledger_created_timestamp=self._current_created_ms,
                non_durable_cursors=len(self._non_durable),
                trimmed_ledgers_total=self._trimmed_total,
            )

    @property
    def store(self) -> Store:
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def factory(self) -> LedgerFactoryView:
        """The factory that opened this ledger."""
        return self._factory

    @property
    def factory_config(self) -> ManagedLedgerFactoryConfig:
        """The factory's settings (metadata compression)."""
        return self._factory.config

    @property
    def executor(self) -> Executor:
        """The executor that runs asynchronous reads (the factory's)."""
        return self._factory.executor

    @property
    def info_path(self) -> str:
        """Where this ledger's ``ManagedLedgerInfo`` lives in the metadata store."""
        return ledger_info_path(self.name)

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosedError(f"managed ledger {self.name} is closed")

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name!r}, lac={self._last_confirmed})"


class _PendingAdd:
    """One queued add: its framed entries and its callback."""

    __slots__ = ("callback", "raw")

    def __init__(self, raw: Sequence[bytes], callback: AddCallback) -> None:
        self.raw = raw
        self.callback = callback


class _AddWaiter:
    """The callback of a blocking add: records the outcome, wakes the waiting thread."""

    __slots__ = ("done", "error", "lock", "positions")

    def __init__(self) -> None:
        self.done = False
        self.positions: list[Position] | None = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.lock.acquire()

    def __call__(self, positions: list[Position] | None, error: BaseException | None) -> None:
        self.positions, self.error = positions, error
        self.done = True
        self.lock.release()

    def wait(self) -> list[Position]:
        if not self.done:
            self.lock.acquire()
        if self.error is not None:
            raise self.error
        assert self.positions is not None
        return self.positions


def _complete(op: _PendingAdd, positions: list[Position] | None, error: BaseException | None) -> None:
    try:
        op.callback(positions, error)
    except Exception:  # a caller's bug must not stop the pipeline
        log.exception("an add callback failed")


__all__ = [
    "AddCallback",
    "InitialPosition",
    "LedgerFactoryView",
    "LedgerInfo",
    "ManagedLedger",
    "ManagedLedgerStats",
    "PositionBound",
]
