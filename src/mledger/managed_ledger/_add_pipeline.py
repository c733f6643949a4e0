"""A managed ledger's pending adds (Pulsar's ``OpAddEntry`` queue): queueing, writer
election, batching and the failure fan-out.

An add is queued and completes later through its callback; adds complete in the order they
were queued. One thread at a time is the ledger's *writer*: it takes everything queued (up to
``_MAX_BATCH_ENTRIES`` entries) and hands it to the ledger's write function, so the adds that
arrive while a write is in flight share the next one. The writer is the adding thread for a
blocking add when no write is under way, the adding thread too when the store's writes never
wait on the disk (``MemoryStore``, a ``SqliteStore`` whose commits do not fsync), else one of
the factory's writer threads, which never hold a ledger for long (a few batches, then it queues
itself again). A failed write fails every add queued
behind it: nothing queued after a failure is written before the failure has been reported.

Whether an add is admitted is the ledger's write state's to say (``LedgerState``, its table
``WRITE_TRANSITIONS``): the pipeline asks it for each add and moves it to ``WriteFailed`` and
back while it reports a failed write; it keeps no flags of its own.

One short lock guards the queue, so queueing never waits for a write; callbacks run with no
lock held.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from ..core import ManagedLedgerClosedError, Position
from ._ledger_state import LedgerState, WriteEvent, WriteState

log = logging.getLogger(__name__)

_MAX_BATCH_ENTRIES = 1000
"""The most entries the writer takes from the queue for one write (one add is never split)."""
_BACKGROUND_BATCHES = 16
"""Batches a writer thread writes for one ledger before it queues itself behind the others."""

_OPEN = WriteState.OPEN

AddCallback = Callable[[list[Position] | None, BaseException | None], None]
"""``callback(positions, None)`` once an add is stored, ``callback(None, error)`` if it failed."""

WriteFunction = Callable[[Sequence[bytes]], tuple[list[Position], BaseException | None]]
"""Writes framed entries (rolling over as needed); returns the positions written and the error
that stopped it, if any."""


class PendingAdd:
    """One queued add: its framed entries and its callback."""

    __slots__ = ("callback", "raw")

    def __init__(self, raw: Sequence[bytes], callback: AddCallback) -> None:
        self.raw = raw
        self.callback = callback


class AddWaiter:
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
        """The positions once the add completed; raises its error."""
        if not self.done:
            self.lock.acquire()
        if self.error is not None:
            raise self.error
        assert self.positions is not None
        return self.positions


class AddPipeline:
    """The pending adds of one managed ledger (see the module docstring).

    ``state`` is the ledger's :class:`~mledger.managed_ledger._ledger_state.LedgerState`: its
    write state admits or refuses each add, and the pipeline moves it while it reports a failed
    write. ``write`` stores one batch; ``write_executor`` gives the factory's writer threads
    (asked for at each hand-off, so a factory that shuts them down is seen); ``writes_block`` reads
    the store's ``blocking_writes`` (at each hand-off: a fault-injecting store's slowed writes
    move to a writer thread).
    """

    def __init__(
        self,
        state: LedgerState,
        write: WriteFunction,
        write_executor: Callable[[], Executor],
        writes_block: Callable[[], bool],
    ) -> None:
        self._state = state
        self._name = state.name
        self._write = write
        self._write_executor = write_executor
        self._writes_block = writes_block
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._idle_waiters = 0
        self._pending: deque[PendingAdd] = deque()
        self._writing = False
        self._writer_ident: int | None = None
        self._failure_listener: Callable[[], None] | None = None
        # A failure episode: the error of the first failed write since the last successful
        # one (None: writes succeed), and the writes and entries failed in it (logged once).
        self._episode_lock = threading.Lock()
        self._write_failure: BaseException | None = None
        self._failed_writes = 0
        self._failed_entries = 0

    # -- admission ----------------------------------------------------------------------------
    def queue(self, raw: Sequence[bytes], callback: AddCallback) -> None:
        """Queue one add behind every earlier one, if the write state admits it (under the
        pipeline's lock: an add admitted before a close or terminate moved the state is queued
        before that call waits for the queue); raises ``ManagedLedgerClosedError`` (closing or
        closed) or ``ManagedLedgerTerminatedError``, nothing queued."""
        op = PendingAdd(raw, callback)
        state = self._state
        with self._lock:
            if state.write is not _OPEN:
                state.check_add()
            self._pending.append(op)

    @property
    def closing(self) -> bool:
        """Whether adds are refused because the ledger closes (the write state)."""
        return self._state.is_closing

    # -- writing ------------------------------------------------------------------------------
    def start(self, inline: bool = False, until: AddWaiter | None = None) -> None:
        """Write the queued adds unless a writer is at work already: on this thread when the
        store's writes never block or ``inline`` (until ``until`` completed; what is left goes
        to a writer thread), else on one of the factory's writer threads."""
        with self._lock:
            if self._writing or not self._pending:
                return
            self._writing = True
        block = self._writes_block()
        if inline or not block:
            self._drain(until if block else None)
        else:
            self._drain_elsewhere()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every queued add completed (at once on the writer's own thread); False
        when ``timeout`` seconds passed first."""
        with self._idle:
            if self._writer_ident == threading.get_ident():
                return True
            self._idle_waiters += 1
            try:
                return self._idle.wait_for(lambda: not self._writing and not self._pending, timeout)
            finally:
                self._idle_waiters -= 1

    @property
    def pending(self) -> int:
        """Adds queued or being written."""
        return len(self._pending)

    def _drain_elsewhere(self) -> None:
        try:
            self._write_executor().submit(self._drain, None, _BACKGROUND_BATCHES)
        except RuntimeError as exc:  # the executor shut down: the factory is closing
            self._fail_queued([], ManagedLedgerClosedError(f"managed ledger {self._name} is closed: {exc}"))
            with self._idle:
                self._writing = False
                self._idle.notify_all()

    def _drain(self, until: AddWaiter | None = None, max_batches: int = 0) -> None:
        """Write queued adds batch by batch (this thread is the writer meanwhile). Stops when
        the queue is empty; with ``until``, once that add completed, and with ``max_batches``,
        after that many batches (fairness between ledgers sharing the writer threads): what
        is left is handed to a writer thread."""
        self._writer_ident = threading.get_ident()
        batches = 0
        try:
            while True:
                with self._lock:
                    queue = self._pending
                    if not queue:
                        self._writing = False
                        self._writer_ident = None
                        if self._idle_waiters:
                            self._idle.notify_all()
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
            with self._idle:
                self._writing = False
                self._writer_ident = None
                self._idle.notify_all()
            raise
        self._writer_ident = None
        self._drain_elsewhere()

    def _write_batch(self, batch: list[PendingAdd]) -> None:
        single = len(batch) == 1
        raw = batch[0].raw if single else [r for op in batch for r in op.raw]
        try:
            positions, error = self._write(raw)
        except BaseException as exc:
            positions, error = [], exc
        done = 0
        if self._write_failure is not None and positions:
            self.writes_recovered()
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
            self.write_failed(error, len(raw) - len(positions))
            self._fail_queued(batch[done:], error)
            if not isinstance(error, Exception):
                raise error

    # -- failures -----------------------------------------------------------------------------
    def write_failed(self, error: BaseException, entries: int) -> None:
        """Count a failed write; log it only when it starts an episode (a full disk fails
        every retry of every producer: one line per episode, not one per write)."""
        with self._episode_lock:
            first = self._write_failure is None
            if first:
                self._write_failure = error
            self._failed_writes += 1
            self._failed_entries += entries
        if first:
            log.warning(
                "managed ledger %s: append failed: %s (the failures that follow are counted, and reported"
                " once writes succeed again)",
                self._name,
                error,
            )

    def writes_recovered(self) -> None:
        """A write succeeded: end the failure episode (logged with its counts)."""
        with self._episode_lock:
            error, self._write_failure = self._write_failure, None
            writes, entries = self._failed_writes, self._failed_entries
            self._failed_writes = self._failed_entries = 0
        if error is not None:
            log.warning(
                "managed ledger %s: writes succeed again after %d failed writes (%d entries; first error: %s)",
                self._name,
                writes,
                entries,
                error,
            )

    @property
    def write_failure(self) -> BaseException | None:
        """The error that started the current failure episode; None while writes succeed."""
        return self._write_failure

    def _fail_queued(self, failed: list[PendingAdd], error: BaseException) -> None:
        """Fail ``failed`` and every add queued behind, until the queue is seen empty; then
        tell the failure listener. The write state is ``WriteFailed`` meanwhile."""
        state = self._state
        state.fire(WriteEvent.WRITE_FAILED)
        while True:
            for op in failed:
                _complete(op, None, error)
            with self._lock:
                if not self._pending:
                    break
                failed = list(self._pending)
                self._pending.clear()
        state.fire(WriteEvent.FAILURE_REPORTED)
        listener = self._failure_listener
        if listener is not None:
            try:
                listener()
            except Exception:  # an owner's bug must not stop the pipeline
                log.exception("managed ledger %s: the failure listener failed", self._name)

    def set_failure_listener(self, listener: Callable[[], None] | None) -> None:
        """See :meth:`ManagedLedger.set_failure_listener`."""
        self._failure_listener = listener

    @property
    def failing(self) -> bool:
        """Whether a failed write is being reported (adds queued meanwhile fail with it)."""
        return self._state.write is WriteState.WRITE_FAILED


def _complete(op: PendingAdd, positions: list[Position] | None, error: BaseException | None) -> None:
    try:
        op.callback(positions, error)
    except Exception:  # a caller's bug must not stop the pipeline
        log.exception("an add callback failed")
