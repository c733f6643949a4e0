"""A managed ledger's retention and trimming (``ManagedLedgerImpl.internalTrimConsumedLedgers``).

A pass takes the ledgers strictly below the slowest durable cursor's *persisted* mark-delete
ledger (the ledger after it when that mark-delete is its last entry), oldest first, stops at
the current ledger (never trimmed), and deletes a ledger while it is expired (``now - closed >
retention_time_ms``) or over quota (what would stay is still at least ``retention_size_in_mb``);
-1 makes a limit unlimited, 0 keeps nothing consumed. Passes run on the factory's executor,
one at a time (a mutex); while one is queued and not started, further requests share it. A
pass gives way to a cursor reset (it is *deferred*: the next request runs one). Non-durable
cursors never hold trimming back: before ledgers go they are mark-deleted past them
(``advanceCursorsIfNecessary``).

:meth:`Trimmer.delete_before` deletes instead the ledgers another managed ledger's trimming
deleted (a model that follows a live topic: ``mledger watch``), retention aside, refused while
a durable consumer cursor has not consumed them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Protocol

from ..core import LedgerNotConsumedError, ManagedLedgerConfig, Position
from ._cursor import ManagedCursor
from ._ledger_state import LedgerState
from ._ledger_view import LedgerInfo

log = logging.getLogger(__name__)


class TrimmedLedger(Protocol):
    """What a trimming pass reads of its managed ledger besides the state (all public): the
    settings, the cursors, the executor passes run on."""

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def cursors(self) -> list[ManagedCursor]: ...

    @property
    def non_durable_cursors(self) -> list[ManagedCursor]: ...

    @property
    def executor(self) -> Executor: ...


class Trimmer:
    """Serialised, coalesced trimming passes over one managed ledger (module docstring), given
    its :class:`~mledger.managed_ledger._ledger_state.LedgerState` and the ledger itself."""

    def __init__(self, state: LedgerState, ledger: TrimmedLedger) -> None:
        self._state = state
        self._ledger = ledger
        self._mutex = threading.Lock()
        self._queued: Future[list[int]] | None = None
        self._horizon = -1  # the slowest reader's ledger (Pulsar's rule) last queued for
        self.deferred = False
        """A pass gave way to a cursor reset, or the limits or cursors changed: the next
        request queues a pass."""
        self._reported: dict[object, int] = {}  # durable cursor name -> reader ledger last reported
        self.trimmed_total = 0
        """Ledgers deleted since the managed ledger was opened."""

    def slowest_cursor_position(self) -> Position | None:
        """See :meth:`ManagedLedger.slowest_cursor_position`."""
        positions = [c.persistent_mark_delete_position for c in self._ledger.cursors]
        return min(positions) if positions else None

    def request(self, cursor: object, mark_delete: Position) -> None:
        """See :meth:`ManagedLedger.request_trim`: O(1) while the cursor stays in the ledger
        it last reported; O(cursors) when it changes ledger."""
        name = getattr(cursor, "name", None)
        ledger = self._reader_ledger(mark_delete)
        if self._reported.get(name) == ledger and not self.deferred:
            return
        with self._state.lock:
            self._reported[name] = ledger
            slowest = self._slowest_reader_ledger()
            forward = slowest is not None and slowest > self._horizon
            if slowest is not None:
                self._horizon = slowest  # also when a reset moved it back
        if forward or self.deferred:
            self.in_background()

    def forget_cursor(self, name: str) -> None:
        """The durable cursor ``name`` was deleted: a pass must look again."""
        self._reported.pop(name, None)
        self.deferred = True

    def _reader_ledger(self, mark_delete: Position) -> int:
        """Pulsar's slowest-reader ledger for one mark-delete: its ledger, or the next one when
        it is the last entry of a closed ledger (that ledger is then consumed)."""
        state = self._state
        li = state.ledgers.get(mark_delete.ledger_id)
        if li is not None and li is not state.current and mark_delete.entry_id + 1 >= li.entries:
            return mark_delete.ledger_id + 1
        return mark_delete.ledger_id

    def _slowest_reader_ledger(self) -> int | None:
        """The first ledger a pass keeps for the cursors' sake; without durable cursors the
        one after the current ledger (Pulsar: with no durable cursor every closed ledger is
        consumed), or None when ``retain_without_subscriptions`` keeps everything then."""
        slowest = self.slowest_cursor_position()
        if slowest is not None:
            return self._reader_ledger(slowest)
        current = self._state.current
        if self._ledger.config.retain_without_subscriptions or current is None:
            return None
        return current.ledger_id + 1

    def may_trim(self) -> bool:
        """Whether a pass can delete anything: always with Pulsar's rule, else only with a
        durable consumer cursor (``retain_without_subscriptions``)."""
        if not self._ledger.config.retain_without_subscriptions:
            return True
        return any(c.counts_as_consumer for c in self._ledger.cursors)

    def in_background(self) -> Future[list[int]]:
        """See :meth:`ManagedLedger.trim_consumed_ledgers_in_background`."""
        lock = self._state.lock
        with lock:
            queued = self._queued
            if queued is not None:
                return queued
            future: Future[list[int]] = Future()
            self._queued = future
        try:
            self._ledger.executor.submit(self._run, future)
        except RuntimeError:  # the executor shut down (the factory is closing)
            with lock:
                self._queued = None
            future.set_result([])
        return future

    def _run(self, future: Future[list[int]]) -> None:
        with self._state.lock:
            if self._queued is future:
                self._queued = None
        try:
            future.set_result(self.run_pass())
        except BaseException as exc:  # delivered through the future, and logged
            log.warning("managed ledger %s: trimming failed: %s", self._state.name, exc)
            future.set_exception(exc)

    def run_pass(self) -> list[int]:
        """One pass now, on this thread (after any pass in flight); the ledgers deleted."""
        with self._mutex:
            return self._pass()

    def wait_idle(self) -> None:
        """Return once the pass in flight, if any, finished."""
        with self._mutex:
            pass

    def _candidates(self) -> list[LedgerInfo] | None:
        """The ledgers a pass deletes (under the ML lock); None when a durable cursor is
        being reset or has not yet persisted what its reset set (its mark-delete may be moving
        back into them: the pass gives way)."""
        state = self._state
        if state.is_closed or not self.may_trim():
            # retain_without_subscriptions and no durable consumer cursor (only system ones,
            # like the dedup cursor): keep everything, nobody subscribed has consumed it.
            return []
        if any(c.is_resetting for c in self._ledger.cursors):
            return None
        slowest = self._slowest_reader_ledger()
        if slowest is None:
            return []
        cfg = self._ledger.config
        now = state.clock.now_ms()
        total = sum(li.size for li in state.ledgers.values())
        quota = cfg.retention_size_in_mb * 1024 * 1024
        size_to_delete = 0
        chosen: list[LedgerInfo] = []
        for li in state.ledgers.values():
            if li.ledger_id >= slowest or li is state.current:
                break
            size_to_delete += li.size
            over_quota = cfg.retention_size_in_mb >= 0 and total - size_to_delete >= quota
            expired = cfg.retention_time_ms >= 0 and now - li.timestamp > cfg.retention_time_ms
            if not (over_quota or expired):
                break  # retained, and so is every later ledger
            chosen.append(li)
        return chosen

    def _pass(self) -> list[int]:
        state = self._state
        with state.lock:
            chosen = self._candidates()
            if chosen is None:
                self.deferred = True
                return []
            self.deferred = False
        return self._delete(chosen, self._candidates) if chosen else []

    def delete_before(self, ledger_id: int) -> list[int]:
        """See :meth:`ManagedLedger.delete_ledgers_before`."""
        with self._mutex:
            with self._state.lock:
                chosen = self._below(ledger_id)

            def still() -> list[LedgerInfo] | None:
                try:
                    return self._below(ledger_id)
                except LedgerNotConsumedError:
                    return None  # a reset started meanwhile: it wins, as it does over a pass

            return self._delete(chosen, still) if chosen else []

    def _below(self, ledger_id: int) -> list[LedgerInfo]:
        """The ledgers below ``ledger_id`` but the current one (under the ML lock); raises
        :class:`~mledger.core.LedgerNotConsumedError` when a durable consumer cursor has not
        consumed them (its persisted mark-delete is below their last entry, or it is being
        reset). System cursors (``pulsar.dedup``) are not asked: they are left as they are."""
        state = self._state
        chosen = [li for li in state.ledgers.values() if li.ledger_id < ledger_id and li is not state.current]
        highest = _last_entry(chosen)
        if highest is None:
            return chosen
        for cursor in self._ledger.cursors:
            if not cursor.counts_as_consumer:
                continue
            md = cursor.persistent_mark_delete_position
            if md < highest or cursor.is_resetting:
                why = "is being reset" if md >= highest else f"has persisted its mark-delete at {md} only"
                raise LedgerNotConsumedError(
                    f"managed ledger {state.name}: cannot delete the ledgers before {ledger_id}: "
                    f"cursor {cursor.name!r} {why}, below their last entry {highest}"
                )
        return chosen

    def _delete(self, chosen: list[LedgerInfo], still: Callable[[], list[LedgerInfo] | None]) -> list[int]:
        """Delete ``chosen`` (the ML lock not held), those of them ``still`` chooses again once
        the cursors that do not hold trimming back were moved past them (None: none, and the
        next request runs a pass); the ledgers deleted."""
        state = self._state
        highest = _last_entry(chosen)
        with state.lock:
            non_durable = self._ledger.non_durable_cursors
        # Pulsar's advanceCursorsIfNecessary: cursors not counted for trimming (non-durable ones)
        # are mark-deleted past the ledgers before those go, while their entries can still be
        # counted. Outside the ML lock: cursors take their own lock first, then the ML lock.
        if highest is not None:
            for cursor in non_durable:
                cursor.skip_trimmed_ledgers(highest)
        with state.lock:
            again = still()  # a reset may have started meanwhile
            if again is None:
                self.deferred = True
                return []
            keep = {li.ledger_id for li in again}
            trimmed = state.remove_ledgers([li.ledger_id for li in chosen if li.ledger_id in keep])
            if not trimmed:
                return []
            self.trimmed_total += len(trimmed)
        for lid in trimmed:
            state.store.delete_ledger(lid)
        log.info("managed ledger %s: trimmed ledgers %s", state.name, trimmed)
        return trimmed


def _last_entry(ledgers: list[LedgerInfo]) -> Position | None:
    """The last entry of the last of ``ledgers`` holding any (None: they hold none)."""
    return next((Position(li.ledger_id, li.entries - 1) for li in reversed(ledgers) if li.entries), None)
