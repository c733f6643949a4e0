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

Cursors see the ML as a :class:`~mledger.managed_ledger.ledger_view.LedgerView`; the ML sees its
factory as a :class:`LedgerFactoryView`. ``ManagedLedgerInfo`` bytes are
:mod:`mledger.codec.ledger_info`'s.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from sortedcontainers import SortedDict

from ..codec.entry import Entry, EntryMetadata, decode_entry, encode_entry
from ..codec.ledger_info import StoredLedger, decode_managed_ledger_info, encode_managed_ledger_info
from ..core.clock import Clock
from ..core.config import ManagedLedgerConfig, ManagedLedgerFactoryConfig
from ..core.errors import (
    EntryTooLargeError,
    InvalidPositionError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    NotFoundError,
    StateCorruptedError,
)
from ..core.position import Position
from ..storage.base import Store
from .cursor import ManagedCursor
from .ledger_view import InitialPosition, LedgerInfo, PositionBound, cursor_info_path, ledger_info_path

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
    """A snapshot of a managed ledger's counters."""

    name: str
    number_of_ledgers: int
    number_of_entries: int
    total_size: int
    entries_added_counter: int
    last_confirmed_entry: Position
    current_ledger_id: int
    cursors: int


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
        self._last_confirmed = Position(-1, -1)
        self._entries_added = 0
        self._info_version: int | None = None
        self._cursors: dict[str, ManagedCursor] = {}
        self._non_durable: list[ManagedCursor] = []
        self._closed = False
        self._properties: dict[str, str] = {}
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
        self._writes_block: bool = getattr(self._store, "blocking_writes", True)

    # -- lifecycle --------------------------------------------------------------------------
    def initialize(self) -> None:
        """Recover the ledger list (if any), seal the last ledger, start a new one.

        The factory calls this once, right after construction. Raises
        ``StateCorruptedError`` for an unreadable ``ManagedLedgerInfo``."""
        stored = self._store.get(self.info_path)
        if stored is not None:
            try:
                ledgers, properties = decode_managed_ledger_info(stored.data)
            except StateCorruptedError as exc:
                raise StateCorruptedError(f"managed ledger {self.name}: {exc}") from exc
            self._info_version = stored.version
            self._properties = properties
            now = self._clock.now_ms()
            for k, li in enumerate(ledgers):
                entries = li.entries
                if entries is None or k == len(ledgers) - 1:
                    # The last ledger was open when the ML closed: its LAC is the truth.
                    exists = self._store.ledger_exists(li.ledger_id)
                    entries = self._store.last_entry_id(li.ledger_id) + 1 if exists else 0
                self._ledgers[li.ledger_id] = LedgerInfo(
                    li.ledger_id, entries, li.size or 0, li.timestamp if li.timestamp else now
                )
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
            self._entries_added = sum(li.entries for li in self._ledgers.values())
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
            cursors = list(self._cursors.values()) + list(self._non_durable)
        for cursor in cursors:
            cursor.close()
        with self._lock:
            self._closed = True
            self._factory.managed_ledger_closed(self.name)

    @property
    def is_closed(self) -> bool:
        return self._closed

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
        ``[0x0e01][crc32c]`` (what a Pulsar client sends; :func:`~mledger.entry.decode_entry`
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
            log.warning("managed ledger %s: append failed: %s", self.name, error)
            self._fail_queued(batch[done:], error)
            if not isinstance(error, Exception):
                raise error

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
            fits = (
                not self._roll_over_failed
                and current.entries + n < config.max_entries_per_ledger
                and current.size + size < config.max_size_per_ledger_mb * 1024 * 1024
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
                end = min(done + self.config.max_entries_per_ledger - current.entries, len(raw))
                # Size rollover, as for single adds: the chunk ends with the entry that brings
                # the ledger to max_size_per_ledger_mb.
                size_room = self.config.max_size_per_ledger_mb * 1024 * 1024 - current.size
                base = cumulative[done - 1] if done else 0
                end = min(end, bisect_left(cumulative, base + size_room, done, end) + 1)
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
                n = min(count - done, self.config.max_entries_per_ledger - current.entries)
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
        cfg = self.config
        if li.entries >= cfg.max_entries_per_ledger:
            return True
        if li.size >= cfg.max_size_per_ledger_mb * 1024 * 1024:
            return True
        age = self._clock.now_ms() - li.timestamp
        return li.entries > 0 and age >= cfg.maximum_rollover_time_ms and age >= cfg.minimum_rollover_time_ms

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
        self._create_ledger()

    def _create_ledger(self) -> None:
        ledger_id = self._store.create_ledger()
        li = LedgerInfo(ledger_id, 0, 0, self._clock.now_ms())
        self._ledgers[ledger_id] = li
        self._current = li
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
        out = []
        for k, raw in enumerate(raws):
            meta, payload = decode_entry(raw)
            out.append(Entry(Position(ledger_id, max(first_entry, 0) + k), payload, meta, raw))
        return out

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
        """A cursor kept only in memory, not counted for trimming (``NonDurableCursorImpl``)."""
        with self._lock:
            self._check_open()
            cursor = ManagedCursor.open_non_durable(
                self, name or f"non-durable-{len(self._non_durable)}", start_position, initial_position
            )
            self._non_durable.append(cursor)
            return cursor

    def get_cursor(self, name: str) -> ManagedCursor:
        """The open durable cursor ``name``; raises ``NotFoundError``."""
        try:
            return self._cursors[name]
        except KeyError:
            raise NotFoundError(f"cursor {name!r} not found on {self.name}") from None

    @property
    def cursors(self) -> list[ManagedCursor]:
        """The durable cursors, by name."""
        with self._lock:
            return [self._cursors[k] for k in sorted(self._cursors)]

    def cursor_names(self) -> list[str]:
        """Names of the durable cursors known to this ML (open or stored)."""
        with self._lock:
            stored = set(self._store.children(self.info_path))
            return sorted(stored | set(self._cursors))

    def delete_cursor(self, name: str) -> None:
        """Delete a durable cursor and its stored state; raises ``NotFoundError``."""
        with self._lock:
            cursor = self._cursors.pop(name, None)
            if cursor is None and self._store.get(cursor_info_path(self.name, name)) is None:
                raise NotFoundError(f"cursor {name!r} not found on {self.name}")
        if cursor is not None:
            cursor.discard()
        else:
            self._store.delete(cursor_info_path(self.name, name))
        self.trim_consumed_ledgers()

    def forget_non_durable_cursor(self, cursor: object) -> None:
        """A non-durable cursor closed: it is no longer advanced before trims (its ``close`` calls this)."""
        with self._lock:
            if cursor in self._non_durable:
                self._non_durable.remove(cursor)

    def slowest_cursor_position(self) -> Position | None:
        """The lowest mark-delete position over the durable cursors, None without any."""
        with self._lock:
            positions = [c.mark_delete_position for c in self._cursors.values()]
        return min(positions) if positions else None

    def request_trim(self, mark_delete: Position) -> None:
        """A durable cursor persisted ``mark_delete``: trim if that consumed the first ledger.

        The first ledger is consumed once the mark-delete is beyond it or at its last entry
        (Pulsar trims ledger x when the slowest mark-delete is x's last entry); the other
        cursors may still hold it back (:meth:`trim_consumed_ledgers` decides)."""
        with self._lock:
            if not self._ledgers:
                return
            first_id, first = self._ledgers.peekitem(0)
            consumed = mark_delete.ledger_id > first_id or (
                mark_delete.ledger_id == first_id
                and first is not self._current
                and mark_delete.entry_id + 1 >= first.entries
            )
        if consumed:
            self.trim_consumed_ledgers()

    def trim_consumed_ledgers(self) -> list[int]:
        """Delete the ledgers that every durable cursor has consumed; return their ids.

        A ledger is trimmed when it lies entirely at or below the slowest durable cursor's
        mark-delete position. The current ledger is never trimmed, and an ML without durable
        cursors keeps everything (an embedded log must not lose data nobody read).
        """
        with self._lock:
            slowest = self.slowest_cursor_position()
            if slowest is None or self._closed or not any(c.counts_as_consumer for c in self._cursors.values()):
                # No durable cursor, or only system ones (the dedup cursor): nobody consumed
                # anything yet, so keep everything.
                return []
            trimmed = []
            for lid in list(self._ledgers.keys()):
                li = self._ledgers[lid]
                if li is self._current or lid > slowest.ledger_id:
                    break
                if lid == slowest.ledger_id and slowest.entry_id < li.entries - 1:
                    break
                trimmed.append(lid)
            if not trimmed:
                return []
            highest = next(
                (
                    Position(lid, self._ledgers[lid].entries - 1)
                    for lid in reversed(trimmed)
                    if self._ledgers[lid].entries
                ),
                None,
            )
            non_durable = list(self._non_durable)
        # Pulsar's advanceCursorsIfNecessary: cursors not counted for trimming (non-durable ones)
        # are mark-deleted past the ledgers before those go, while their entries can still be
        # counted. Outside the ML lock: cursors take their own lock first, then the ML lock.
        if highest is not None:
            for cursor in non_durable:
                cursor.skip_trimmed_ledgers(highest)
        with self._lock:
            trimmed = [lid for lid in trimmed if lid in self._ledgers]
            if not trimmed:
                return []
            for lid in trimmed:
                del self._ledgers[lid]
            self._persist_info()
        for lid in trimmed:
            self._store.delete_ledger(lid)
        return trimmed

    # -- misc -------------------------------------------------------------------------------
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
            return ManagedLedgerStats(
                name=self.name,
                number_of_ledgers=len(self._ledgers),
                number_of_entries=sum(li.entries for li in self._ledgers.values()),
                total_size=sum(li.size for li in self._ledgers.values()),
                entries_added_counter=self._entries_added,
                last_confirmed_entry=self._last_confirmed,
                current_ledger_id=self.current_ledger_id,
                cursors=len(self._cursors),
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
