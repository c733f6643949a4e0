"""The managed cursor: read position, mark-delete position, individual and batch-index acks.

Theory of operation
-------------------
A cursor (Pulsar's ``ManagedCursorImpl``) tracks one subscriber's progress through a managed
ledger with these pieces of state, all guarded by one re-entrant lock:

* ``mark_delete_position`` (MD): every entry at or before it is acknowledged;
* ``read_position``: the next entry a sequential read returns; always ``> MD``;
* the ack range set: entries above MD acked individually ("holes" are what lies between);
* batch state: for partially acked batch entries, the bitset of *remaining* (un-acked)
  indexes (Pulsar's ack-set rule: set bit = not yet acked; acks AND into it);
* mark-delete properties (PIP-6 ``LongProperty``) and cursor properties (strings);
* ``messages_consumed_counter``, which makes the cheap backlog ``added - consumed``.

Invariants checked by :meth:`ManagedCursor._check` (and by the stateful tests after every
step): ``read_position > MD``; every acked position lies strictly above MD and at or below the
last confirmed entry; batch states lie above MD and are non-empty; the precise backlog equals
``count(MD, LAC] - acked``.

Individual acks absorb into MD: when the entry right after MD (``next_valid_position(MD)``,
which crosses ledger boundaries) becomes acked, MD jumps to the end of that run, repeatedly.

Resets (reset_cursor, seek, rewind, skip_entries, clear_backlog and callers' composite resets
via :meth:`ManagedCursor.position_reset`) run inside a revision of the
:class:`~mledger.managed_ledger._revision.CursorStateRevisionController`: reads are refused while
one runs, and a read that started before a reset is discarded when it completes.

Collaborators, each behind a narrow interface: the managed ledger is a
:class:`~mledger.managed_ledger._ledger_view.LedgerView` (last confirmed entry, position
arithmetic over the ledger list, reads, trim requests); a durable cursor's
:class:`~mledger.managed_ledger._cursor_store.CursorStateStore` takes a
:class:`~mledger.managed_ledger._cursor_snapshot.CursorSnapshot` and gives back a
:class:`~mledger.managed_ledger._cursor_snapshot.RecoveredCursorState`; read planning is
:mod:`~mledger.managed_ledger._cursor_reads`, composite resets
:mod:`~mledger.managed_ledger._position_reset`.

The acknowledgement path, top-down: a ``Consumer`` ack method builds an ``AckRequest`` ->
``Subscription.consumer_acknowledge`` -> :meth:`acknowledge` (an :class:`AckPlan`: whole entries
and ack sets) or :meth:`mark_delete`. Every cursor ack form is a thin builder over one pipeline:
validation (``_check_entry``, O(1) per position; ``_check_rows``, vectorised;
``_check_mark_delete_target``), which raises and changes nothing -> the apply step (the bitmap,
batch states, the mark-delete) -> ``_acked_entries`` (the consumed counter, absorption into MD)
-> :meth:`_after_change` (throttle, or ``CursorStateStore.persist(snapshot)``: format and
truncate -> :mod:`mledger.codec._cursor_info` ``PositionInfo`` bytes -> the ``LedgerStore``).
``delete(position)`` is the single-call fast path through the same steps, inlined: the
validation is one lookup in the ledger's live list (:attr:`LedgerView.ledger_list
<mledger.managed_ledger._ledger_view.LedgerView.ledger_list>`), the throttle one clock reading
(``time.time_ns`` on the system clock) against a deadline re-armed at each persist and by the
ledger's ``set_config`` (``_rearm_throttle``), and its whole-entry acks reach the cursor's own
state store as one O(1) ``observe_entries_acked`` per run of them (``_settle_observation``, before
anything else uses the store); nothing is allocated beyond the bitmap's growth.

The lifecycle (:class:`CursorLifecycle`) moves only through ``_move`` over
:data:`~mledger.managed_ledger._cursor_snapshot.LIFECYCLE_TRANSITIONS`.

Blocking: reads block on the store outside the cursor lock. Acks and mark-deletes hold the lock
and, for durable cursors, persist through the cursor's state store (storage I/O) unless
``throttle_mark_delete`` defers it; :meth:`flush` then persists the pending state.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from types import MappingProxyType
from typing import cast

import numpy as np
from sortedcontainers import SortedDict

from ..codec._entry import Entry
from ..core._clock import nanosecond_reader
from ..core._errors import (
    CursorAlreadyClosedError,
    CursorModifyingError,
    InvalidPositionError,
    InvalidRequestError,
    MarkDeletingMarkedPositionError,
)
from ..core._position import EARLIEST, LATEST, Position
from ..core._ranges import AckRangeSet
from ._cursor_args import AckPlan, ack_set_of, check_ack_set, checked_properties, lowest_bit, to_position
from ._cursor_reads import PendingRead, ReadPlan, fetch_plan, plan_read
from ._cursor_snapshot import (
    KEEP_PROPERTIES,
    CursorEvent,
    CursorLifecycle,
    CursorSnapshot,
    IndividualDeletedEntries,
    KeepProperties,
    RecoveredCursorState,
    lifecycle_transition,
)
from ._cursor_stats import CursorStats, IndividualDeletedMessages, PersistenceStats
from ._cursor_store import CursorStateStore
from ._ledger_view import InitialPosition, LedgerView, PositionBound
from ._position_reset import PositionReset, ResetHooks
from ._revision import CursorStateRevisionController

log = logging.getLogger(__name__)

CURSOR_INTERNAL_PROPERTY_PREFIX = "#pulsar.internal."
"""Cursor-property keys the broker owns (Pulsar's ``CURSOR_INTERNAL_PROPERTY_PREFIX``):
``set_cursor_properties`` keeps them and refuses a map naming one."""


class ManagedCursor:
    """A durable or non-durable cursor over a :class:`~mledger.managed_ledger._ledger.ManagedLedger`.

    Open with ``ManagedLedger.open_cursor`` / ``open_non_durable_cursor``. Every public
    method is thread-safe (one lock per cursor). Reads block on storage outside the lock;
    acks, mark-deletes and resets of a durable cursor may block on persisting its state.
    """

    def __init__(self, ml: LedgerView, name: str, durable: bool) -> None:
        self._ml = ml
        self.name = name
        self._durable = durable
        self._lock = threading.RLock()
        self._lifecycle = CursorLifecycle.UNINITIALIZED
        self._closed = False  # self._lifecycle.is_closed, kept by _move for the ack fast path
        self._md = Position(-1, -1)
        self._persistent_md = Position(-1, -1)
        self._reset_settling = False  # a reset's new state applied, its persist not yet done
        self._read = Position(-1, 0)
        self._md_next: Position | None = None  # cached next_valid_position(MD) while <= LAC
        self._acked = AckRangeSet()
        self._batch: SortedDict = SortedDict()  # Position -> int bitset of un-acked indexes
        self._batch_sizes: dict[Position, int] = {}
        self._md_properties: dict[str, int] = {}
        self._cursor_properties: dict[str, str] = {}
        self._consumed = 0
        self._dirty = False
        self._last_persist_ms: int | None = None
        self._clock_ns = nanosecond_reader(ml.clock)
        # The persist throttle as a deadline: a change persists once the clock reads at least
        # this (ns); re-armed by every persist and by the ledger's set_config (_rearm_throttle).
        self._persist_due_ns: float = -math.inf
        self._ledger_list = ml.ledger_list  # live: O(1) validation of an ack, no call
        self._observed = True  # the state stores' redelivery figures are up to date (but for:)
        # Whole-entry acks of the single-call fast path not yet told to the cursor's own state
        # store, and the clock reading of the latest: see _settle_observation.
        self._unobserved_acks = 0
        self._unobserved_at_ns = 0
        self._revision = CursorStateRevisionController(self._lock, ml.clock, name=f"{ml.name}/{name}")
        self._store: CursorStateStore | None = None
        self._mirrors: list[CursorStateStore] = []  # see add_state_mirror
        self.counts_as_consumer = True
        """False for a system cursor (the broker's ``pulsar.dedup``): it holds ledger trimming
        back at its mark-delete like any durable cursor, but with the ledger's
        ``retain_without_subscriptions`` it never lets a ledger go on its own."""

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def open_durable(
        cls,
        ml: LedgerView,
        name: str,
        initial_position: InitialPosition,
        properties: Mapping[str, int] | None = None,
        cursor_properties: Mapping[str, str] | None = None,
    ) -> ManagedCursor:
        """Recover the durable cursor ``name`` from its stored state, or create it at
        ``initial_position`` and store it. ``ManagedLedger.open_cursor`` calls this (and
        registers the cursor); applications call that. May block on storage I/O."""
        cursor = cls(ml, name, durable=True)
        store = cursor._store = CursorStateStore(ml, name)
        recovered = store.recover()
        if recovered is None:
            cursor._initialize_position(initial_position)
            if properties:
                cursor._md_properties = checked_properties(properties)
            if cursor_properties:
                cursor._cursor_properties = {str(k): str(v) for k, v in cursor_properties.items()}
            store.initialize(cursor._snapshot())
        else:
            cursor._restore(recovered)
        cursor._move(CursorEvent.OPENED_DURABLE)
        return cursor

    @classmethod
    def open_non_durable(
        cls,
        ml: LedgerView,
        name: str,
        start: Position | None,
        initial_position: InitialPosition,
    ) -> ManagedCursor:
        """A cursor kept only in memory, starting after ``start`` (or at ``initial_position``).
        ``ManagedLedger.open_non_durable_cursor`` calls this; applications call that."""
        cursor = cls(ml, name, durable=False)
        last = ml.last_confirmed_entry
        if start is None or start > last:
            cursor._initialize_position(initial_position)
        elif start.ledger_id == -1:
            cursor._initialize_position(InitialPosition.EARLIEST)
        else:
            read = ml.next_valid_position(start)
            md = ml.previous_position(read)
            cursor._set_positions(md, read)
            cursor._consumed = ml.entries_added_counter - ml.number_of_entries(read, last, True, True)
        cursor._move(CursorEvent.OPENED_NON_DURABLE)
        return cursor

    def _initialize_position(self, initial: InitialPosition) -> None:
        ml = self._ml
        if initial is InitialPosition.EARLIEST:
            md = ml.previous_position(ml.first_position())
        else:
            md = ml.last_confirmed_entry
        self._set_positions(md, ml.next_valid_position(md))
        self._persistent_md = md
        self._consumed = ml.entries_added_counter - self._precise_backlog()

    def _restore(self, recovered: RecoveredCursorState) -> None:
        ml = self._ml
        md = recovered.mark_delete
        if md.entry_id == -1 and ml.ledger_entries(md.ledger_id) is None:
            nxt = ml.next_ledger_id(md.ledger_id)
            if nxt is not None:
                md = Position(nxt, -1)
        if md > ml.last_confirmed_entry:
            md = ml.last_confirmed_entry
        self._md = md
        self._persistent_md = md
        self._acked = recovered.acked
        self._acked.remove_at_most(md.ledger_id, md.entry_id)
        self._drop_acked_beyond_lac()
        self._batch = SortedDict({p: bits for p, bits in recovered.batch.items() if p > md and bits})
        self._md_properties = dict(recovered.properties)
        self._cursor_properties = dict(recovered.cursor_properties)
        self._read = ml.next_valid_position(md)
        self._md_next = None
        self._consumed = ml.entries_added_counter - self._precise_backlog()

    def skip_trimmed_ledgers(self, position: Position) -> None:
        """Mark-delete up to ``position``, the last entry of ledgers about to be trimmed
        (Pulsar's ``advanceCursorsIfNecessary``); the mark-delete properties are kept.

        The managed ledger calls this on cursors that do not hold trimming back (non-durable
        ones) before it deletes ledgers, while their entries can still be counted."""
        with self._lock:
            if self._closed or position <= self._md or position > self._ml.last_confirmed_entry:
                return
            self._set_acknowledged_position(position, self._md_properties)

    def _drop_acked_beyond_lac(self) -> None:
        lac = self._ml.last_confirmed_entry
        self._acked.remove_after(lac.ledger_id, lac.entry_id)

    # -- properties -------------------------------------------------------------------------
    @property
    def ledger(self) -> LedgerView:
        """The managed ledger this cursor reads."""
        return self._ml

    @property
    def is_durable(self) -> bool:
        """Whether the cursor's state is persisted (and holds ledger trimming back)."""
        return self._durable

    @property
    def state(self) -> CursorLifecycle:
        """The lifecycle state; a durable cursor is ``OPEN`` while its state store holds a
        cursor ledger and ``NO_LEDGER`` while the state lives in the metadata store only."""
        lifecycle = self._lifecycle
        if lifecycle is CursorLifecycle.NO_LEDGER and self._store is not None and self._store.ledger_id is not None:
            return CursorLifecycle.OPEN
        return lifecycle

    @property
    def is_closed(self) -> bool:
        """Closed (or deleted): reads, acks and resets raise ``CursorAlreadyClosedError``."""
        return self._closed

    @property
    def read_position(self) -> Position:
        """The next position a sequential read returns (always after the mark-delete)."""
        return self._read

    @property
    def mark_delete_position(self) -> Position:
        """Every entry at or before this position is acknowledged."""
        return self._md

    @property
    def is_resetting(self) -> bool:
        """Whether a position reset is running or the state it set is not yet persisted.

        Lock-free: the managed ledger reads it under its own lock and defers trimming
        meanwhile, since a reset may move the mark-delete back into ledgers that the persisted
        mark-delete (what trimming follows) has already passed."""
        return self._revision.is_under_revision or self._reset_settling

    def _mark_reset_settling(self, settling: bool) -> None:
        self._reset_settling = settling
        if not settling and self._store is not None:
            # A trimming pass that ran meanwhile gave way: it is deferred until asked again.
            self._ml.request_trim(self, self._persistent_md)

    @property
    def persistent_mark_delete_position(self) -> Position:
        """The mark-delete position last persisted."""
        return self._persistent_md

    @property
    def properties(self) -> dict[str, int]:
        """The last mark-delete's properties (PIP-6 ``LongProperty``), a copy."""
        with self._lock:
            return dict(self._md_properties)

    @property
    def cursor_properties(self) -> dict[str, str]:
        """Cursor (subscription) properties, PIP-105 ``StringProperty``, a copy."""
        with self._lock:
            return dict(self._cursor_properties)

    @property
    def revision(self) -> CursorStateRevisionController:
        """The cursor's state revision controller."""
        return self._revision

    @property
    def messages_consumed_counter(self) -> int:
        """Entries acknowledged since the cursor opened (the cheap backlog is added - consumed)."""
        return self._consumed

    # -- reads ------------------------------------------------------------------------------
    def read_entries(self, max_entries: int, max_position: Position | None = None) -> list[Entry]:
        """Read up to ``max_entries`` entries from the read position, skipping acked ones.

        The read position moves to the position after the last entry examined. Returns an
        empty list at the end of the ledger. Blocks on the store (outside the cursor lock).
        Raises ``CursorModifyingError`` if a reset is running or ran while the read was in
        flight (the read is then discarded and the read position untouched). Like Pulsar's
        dispatchers, keep one sequential read in flight per cursor: two concurrent ones start
        from the same read position and return the same entries.
        """
        revision_num, plan, examined = self._plan_read(max_entries, max_position)
        if not plan:
            return []
        entries = self._fetch(plan)
        return self._complete_read(revision_num, plan, entries, examined)

    def read_entries_async(self, max_entries: int, max_position: Position | None = None) -> Future[list[Entry]]:
        """``read_entries`` on the factory's executor; the revision is taken now.

        Raises ``CursorModifyingError`` at once if a reset is running; the future fails with
        it if a reset happens before the read completes.
        """
        revision_num, plan, examined = self._plan_read(max_entries, max_position)
        future: Future[list[Entry]] = Future()
        if not plan:
            future.set_result([])
            return future

        def run() -> None:
            try:
                entries = self._fetch(plan)
                future.set_result(self._complete_read(revision_num, plan, entries, examined))
            except BaseException as exc:  # delivered through the future
                future.set_exception(exc)

        self._ml.executor.submit(run)
        return future

    def read_entries_held(self, max_entries: int, max_position: Position | None = None) -> PendingRead:
        """Start a read whose completion the caller drives (dispatchers, tests).

        Returns a :class:`PendingRead`: call ``fetch()`` (storage I/O) and then
        ``complete()``; a reset in between discards it.
        """
        revision_num, plan, examined = self._plan_read(max_entries, max_position)
        return PendingRead(self, revision_num, plan, examined, self._ml, self._complete_read)

    def replay_entries(self, positions: Iterable[Position]) -> list[Entry]:
        """Read the entries at ``positions`` without moving the read position.

        Positions already deleted are skipped (Pulsar's ``asyncReplayEntries``). Raises
        ``CursorModifyingError`` if a reset is running or ran during the read.
        """
        with self._lock:
            self._check_open()
            self._refuse_during_revision("replay")
            revision_num = self._revision.revision_num
            wanted = [p for p in positions if not self._is_deleted(p)]
            missing = [p for p in wanted if not self._ml.is_valid_position(p)]
            if missing:
                # Pulsar fails the replay when an entry cannot be read (testReplayEntries).
                raise InvalidPositionError(f"cursor {self.name}: cannot replay {missing[0]}: no such entry")
        entries = self._ml.read_positions(wanted)
        with self._lock:
            if self._revision.is_revision_num_outdated(revision_num):
                self._revision.record_discarded_read()
                raise CursorModifyingError(
                    f"cursor {self.name}: replay read discarded, the cursor was reset while it was in flight"
                )
            return [e for e in entries if not self._is_deleted(e.position)]

    def _plan_read(self, max_entries: int, max_position: Position | None) -> tuple[int, ReadPlan, Position]:
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        with self._lock:
            self._check_open()
            self._refuse_during_revision("read")
            spans, examined = plan_read(self._ml, self._acked, self._read, max_entries, max_position)
            if not spans:
                # Only acked entries up to the limit: move past them now (Pulsar completes such
                # a read empty and advances the read position).
                self._advance_read_past(examined)
            return self._revision.revision_num, spans, examined

    def _advance_read_past(self, examined: Position) -> None:
        new_read = self._ml.next_valid_position(examined)
        if new_read > self._read:
            self._read = new_read

    def _fetch(self, plan: ReadPlan) -> list[Entry]:
        return fetch_plan(self._ml, plan)

    def _complete_read(
        self,
        revision_num: int,
        plan: ReadPlan,
        entries: list[Entry],
        examined: Position | None = None,
    ) -> list[Entry]:
        with self._lock:
            if self._revision.is_revision_num_outdated(revision_num):
                self._revision.record_discarded_read()
                raise CursorModifyingError(
                    f"cursor {self.name}: read discarded, the cursor was reset while it was in flight"
                )
            self._check_open()
            # Past the last entry examined: a read that reached its limit also skips the acked
            # entries after its last entry (testReadEntriesWithSkipDeletedEntries).
            last_ledger, _, last_entry = plan[-1]
            self._advance_read_past(examined if examined is not None else Position(last_ledger, last_entry))
            return [e for e in entries if not self._is_deleted(e.position)]

    # -- acknowledgement: one pipeline ------------------------------------------------------
    # The Pulsar-named methods below only build what to acknowledge (an AckPlan, or a
    # mark-delete target). Every acknowledgement then runs the same steps: validation
    # (_check_entry, O(1) per position; _check_rows, vectorised; _check_mark_delete_target),
    # which raises and changes nothing; the apply step (_apply_rows / _apply_ack_sets /
    # _set_acknowledged_position); _acked_entries, the one place the consumed counter grows
    # and holes are absorbed into the mark-delete; and _after_change (persist or throttle).
    # delete(position) is the single-call fast path through the same steps.
    def mark_delete(
        self,
        position: Position,
        properties: Mapping[str, int] | None | KeepProperties = None,
        *,
        ack_set: int | None = None,
    ) -> None:
        """Cumulatively acknowledge everything up to and including ``position``.

        ``properties`` become the mark-delete properties (PIP-6 ``LongProperty``); omitted or
        None means an empty map, as Pulsar's ``markDelete(position)``; ``KEEP_PROPERTIES``
        keeps the last ones. ``ack_set`` (remaining un-acked batch indexes as an int bitset)
        acks part of the batch entry at ``position`` and marks deleted up to the entry before.

        Raises ``MarkDeletingMarkedPositionError`` if ``position`` is before the current
        mark-delete, ``InvalidPositionError`` if it is beyond the last confirmed entry,
        ``CursorAlreadyClosedError``, and ``CursorModifyingError`` while a reset runs.
        """
        position = to_position(position)
        if ack_set is not None:
            check_ack_set(position, ack_set)
        with self._lock:
            self._check_open()
            if self._revision.is_under_revision:
                raise CursorModifyingError(f"Reset cursor in progress - unable to mark delete position {position}")
            if ack_set is None:
                target = position
            else:
                if position > self._ml.last_confirmed_entry:
                    raise self._beyond_lac(position)
                target = self._ml.previous_position(position)
            self._check_mark_delete_target(target)
            props = self._resolve_properties(properties)
            if ack_set is not None:
                self._apply_batch_target(position, ack_set, target)
            self._set_acknowledged_position(target, props)
            self._after_change()

    def delete(self, positions: Position | Iterable[Position]) -> None:
        """Individually acknowledge one position or many (the iterable form is bulk).

        Already-deleted positions are ignored. Raises ``InvalidPositionError`` (nothing
        changed) if any position is beyond the last confirmed entry, or above the mark-delete
        but not an entry of this ledger (Pulsar accepts those and then miscounts the backlog).
        O(1) per position: one position is the single-call fast path (no allocation beyond
        the bitmap's growth; see the module docstring).
        """
        if type(positions) is not Position:
            self.delete_many(cast("Iterable[Position]", positions))
            return
        # The steps of the pipeline, inlined: this path runs once per acknowledged message.
        lock = self._lock
        lock.acquire()  # not `with`: __enter__/__exit__ cost a third of this path's locking
        try:
            if self._closed:
                self._check_open()
            entries_acked = 0
            if positions > self._md:
                # _check_entry in O(1) without a call: the ledger list's entry counts cover
                # only confirmed entries (LedgerView.ledger_list); anything else is refused there.
                ledger_id, entry_id = positions
                info = self._ledger_list.get(ledger_id)
                if info is None or not 0 <= entry_id < info.entries:
                    self._check_entry(positions, self._ml.last_confirmed_entry)
                entries_acked = 1
                if self._batch and positions in self._batch:
                    self._drop_batch(positions)
                    entries_acked = -1  # its acked indexes count no more: observe from a snapshot
                if self._acked.add(ledger_id, entry_id):
                    self._consumed += 1  # _acked_entries, absorbing only after the mark-delete
                    if positions == self._md_next or self._md_next is None:
                        self._absorb()
                else:
                    entries_acked = 0
            elif positions > self._ml.last_confirmed_entry:
                raise self._beyond_lac(positions)
            if self._durable:  # _after_change(False, entries_acked)
                now_ns = self._clock_ns()
                if now_ns >= self._persist_due_ns:
                    self._persist()
                elif entries_acked == 1 and self._observed and not self._mirrors:
                    self._dirty = True  # _throttled, for the one common case, told to the store later
                    self._unobserved_acks += 1
                    self._unobserved_at_ns = now_ns
                else:
                    self._throttled(now_ns, entries_acked)
        finally:
            lock.release()

    def delete_many(self, positions: Iterable[Position] | np.ndarray) -> int:
        """Bulk individual acknowledgement; returns how many entries became acked.

        Accepts positions or an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows.
        Validates everything first: an invalid position raises and changes nothing.
        """
        return self.acknowledge(AckPlan.of(entries=positions))

    def delete_batch_indexes(self, position: Position, indexes: Iterable[int], batch_size: int) -> None:
        """Acknowledge some messages of a batch entry (batch-index ack).

        ``indexes`` must lie in ``[0, batch_size)``. When every index of the entry is acked
        the entry becomes an individually deleted entry. With batch-index deletion disabled
        (``deletion_at_batch_index_level_enabled=False``) nothing happens, as in Pulsar.
        """
        position = to_position(position)
        self.delete_with_ack_set(position, ack_set_of(position, indexes, batch_size), batch_size=batch_size)

    def delete_with_ack_set(self, position: Position, ack_set: int, batch_size: int | None = None) -> None:
        """Individually ack with a Pulsar ack set (set bits = indexes still un-acked).

        The ack set is AND-merged into the stored state; an empty result deletes the entry.
        """
        self.acknowledge(AckPlan.of(ack_sets=((position, ack_set, batch_size),)))

    def delete_with_ack_sets(self, items: Iterable[tuple[Position, int, int | None]]) -> int:
        """Bulk :meth:`delete_with_ack_set`: ``(position, ack set, batch size or None)`` per
        entry, applied in order under one lock with one persistence check at the end; returns
        how many entries became fully acknowledged.

        Validates everything first (``InvalidPositionError``, nothing changed). The state it
        leaves is the state the calls one at a time leave (tested); a throttled persist that
        falls due sees the whole bulk applied. O(entries) plus O(ranges touched).
        """
        return self.acknowledge(AckPlan.of(ack_sets=items))

    def acknowledge(self, plan: AckPlan) -> int:
        """Individually acknowledge what ``plan`` names (whole entries, then batch entries by
        ack set), under one lock with one persistence check; returns how many entries became
        fully acknowledged. What :meth:`delete_many` and :meth:`delete_with_ack_sets` do, at
        once: validates everything first (``InvalidPositionError``, nothing changed), as they
        do; ``CursorAlreadyClosedError`` on a closed cursor. O(entries) + O(ranges touched)."""
        with self._lock:
            self._check_open()
            if plan.is_empty:
                return 0
            lac = self._ml.last_confirmed_entry
            groups = self._check_rows(plan.entries, lac)
            for position, _, _ in plan.ack_sets:
                self._check_entry(position, lac)
            added = self._apply_rows(groups) + self._apply_ack_sets(plan.ack_sets)
            if added:
                self._acked_entries(added)
            self._after_change()
            return added

    # -- acknowledgement: validation --------------------------------------------------------
    def _beyond_lac(self, position: object) -> InvalidPositionError:
        return InvalidPositionError(f"Invalid mark deleted position {position} on {self.name}")

    def _no_such_entry(self, position: object) -> InvalidPositionError:
        return InvalidPositionError(f"cannot ack {position} on {self.name}: no such entry")

    def _check_entry(self, position: Position, lac: Position) -> bool:
        """Validate one individual ack; whether it lies above the mark-delete (something to
        apply). Raises unless ``position`` is at or below ``lac`` and, above the mark-delete, an
        entry of a ledger in the ledger list (one that was trimmed is refused). O(1): one
        dictionary lookup for a position above the mark-delete, none at or below it."""
        if position > lac:
            raise self._beyond_lac(position)
        if position <= self._md:
            return False
        if 0 <= position[1] < (self._ml.ledger_entries(position[0]) or 0):
            return True
        raise self._no_such_entry(position)

    def _check_rows(self, rows: np.ndarray, lac: Position) -> list[tuple[int, np.ndarray]]:
        """:meth:`_check_entry` over an ``(n, 2)`` array at once (numpy); the entry ids above
        the mark-delete grouped by ledger, ascending."""
        if rows.shape[0] == 0:
            return []
        ledgers, entries = rows[:, 0], rows[:, 1]
        beyond = (ledgers > lac[0]) | ((ledgers == lac[0]) & (entries > lac[1]))
        if beyond.any():
            i = int(np.flatnonzero(beyond)[0])
            raise self._beyond_lac(Position(int(ledgers[i]), int(entries[i])))
        md_l, md_e = self._md
        above = (ledgers > md_l) | ((ledgers == md_l) & (entries > md_e))
        ledgers, entries = ledgers[above], entries[above]
        if not ledgers.size:
            return []
        order = np.argsort(ledgers, kind="stable")
        ledgers, entries = ledgers[order], entries[order]
        bounds = np.flatnonzero(np.diff(ledgers)) + 1
        groups = [
            (int(part[0]), part_e)
            for part, part_e in zip(np.split(ledgers, bounds), np.split(entries, bounds), strict=True)
        ]
        for ledger_id, part_e in groups:
            low, top = int(part_e.min()), int(part_e.max())
            size = self._ml.ledger_entries(ledger_id) or 0
            if low < 0 or top >= size:
                raise self._no_such_entry(Position(ledger_id, low if low < 0 else top))
        return groups

    def _check_mark_delete_target(self, target: Position) -> None:
        ml = self._ml
        lac = ml.last_confirmed_entry
        if target > lac:
            md = self._md
            md_entries = ml.ledger_entries(md.ledger_id)
            at_ledger_end = md_entries is not None and md.entry_id + 1 >= md_entries
            if not (at_ledger_end and target.ledger_id == ml.next_ledger_id(lac.ledger_id)):
                raise self._beyond_lac(target)
        if target < self._md:
            raise MarkDeletingMarkedPositionError(
                f"Mark deleting an already mark-deleted position. Current mark-delete: {self._md}"
                f" -- attempted mark delete: {target}"
            )

    # -- acknowledgement: apply -------------------------------------------------------------
    def _apply_rows(self, groups: list[tuple[int, np.ndarray]]) -> int:
        """Add checked entry ids (per ledger) to the ack set; entries newly acked."""
        added = 0
        for ledger_id, entries in groups:
            added += self._acked.add_many(ledger_id, entries)
        if added and self._batch:
            for p in [p for p in self._batch.keys() if self._acked.contains(p[0], p[1])]:
                self._drop_batch(p)
        return added

    def _apply_ack_sets(self, items: tuple[tuple[Position, int, int | None], ...]) -> int:
        """AND-merge checked ack sets in order; an empty result deletes the entry (ignored
        without batch-index deletion). Entries newly acked."""
        if not items:
            return 0
        batch_level = self._ml.config.deletion_at_batch_index_level_enabled
        acked, batch = self._acked, self._batch
        added = 0
        for position, ack_set, size in items:
            if self._is_deleted(position):
                self._drop_batch(position)
                continue
            if ack_set and not batch_level:
                continue
            merged = ack_set
            if ack_set:
                stored = batch.get(position)
                if stored is not None:
                    merged = stored & ack_set
                if size is not None:
                    self._batch_sizes.setdefault(position, size)
            if merged:
                batch[position] = merged
                continue
            self._drop_batch(position)
            if acked.add(position[0], position[1]):
                added += 1
        return added

    def _apply_batch_target(self, position: Position, ack_set: int, target: Position) -> None:
        """A cumulative ack of part of the batch entry at ``position`` (mark-delete at
        ``target``, the entry before): keep its remaining indexes unless more were kept."""
        if self._ml.config.deletion_at_batch_index_level_enabled and position > self._md:
            stored = self._batch.get(position)
            if (stored is None or lowest_bit(ack_set) > lowest_bit(stored)) and ack_set:
                self._batch[position] = ack_set
        for p in list(self._batch.irange(maximum=target, inclusive=(True, False))):
            self._drop_batch(p)

    def _acked_entries(self, n: int) -> None:
        """``n`` more entries are acknowledged (the one place the consumed counter grows, but
        for its inlined copy in the single-call fast path, which absorbs only when the entry
        acked is the one right after the mark-delete); then absorb holes into the mark-delete."""
        self._consumed += n
        self._absorb()

    def is_message_deleted(self, position: Position) -> bool:
        """``position <= MD`` or individually deleted (batch partial state is ignored)."""
        with self._lock:
            return self._is_deleted(position)

    def _is_deleted(self, position: Position) -> bool:
        return position <= self._md or self._acked.contains(position[0], position[1])

    def batch_ack_set(self, position: Position) -> int | None:
        """The remaining (un-acked) batch indexes of a partially acked entry, or None."""
        with self._lock:
            return self._batch.get(position)

    def deleted_batch_indexes(self, position: Position) -> list[int] | None:
        """Acked indexes of a partially acked batch entry, or None when it has no partial state.

        The batch size is the one given to ``delete_batch_indexes`` (else the highest
        remaining index bounds it).
        """
        with self._lock:
            remaining = self._batch.get(position)
            if remaining is None:
                return None
            size = self._batch_sizes.get(position, remaining.bit_length())
            return [i for i in range(size) if not (remaining >> i) & 1]

    def batch_deleted_states(self) -> list[tuple[Position, int]]:
        """Every partial batch state ``(position, remaining bits)``, ascending."""
        with self._lock:
            return list(self._batch.items())

    def _drop_batch(self, position: Position) -> None:
        if self._batch.pop(position, None) is not None:
            self._batch_sizes.pop(position, None)

    # -- mark-delete internals ---------------------------------------------------------------
    def _resolve_properties(self, properties: Mapping[str, int] | None | KeepProperties) -> dict[str, int]:
        if properties is KEEP_PROPERTIES:
            return self._md_properties
        if properties is None:
            return {}
        return checked_properties(properties)  # type: ignore[arg-type]

    def _set_acknowledged_position(self, new_md: Position, properties: dict[str, int]) -> None:
        """Pulsar's ``setAcknowledgedPosition``: count, absorb holes, trim, fix the read position."""
        old = self._md
        self._md_properties = properties
        if new_md == old:
            return
        skipped = self._ml.number_of_entries(old, new_md, False, True) - self._acked.cardinality_between(
            old.next(), new_md
        )
        self._move_md(new_md)
        self._acked_entries(max(skipped, 0))

    def _move_md(self, new_md: Position) -> None:
        self._md = new_md
        self._md_next = None
        self._acked.remove_at_most(new_md.ledger_id, new_md.entry_id)
        if self._batch:
            for p in list(self._batch.irange(maximum=new_md)):
                self._drop_batch(p)
        if self._read <= new_md:
            self._read = self._ml.next_valid_position(new_md)

    def _absorb(self) -> None:
        """While the entry after MD is acked, move MD to the end of its run (across ledgers)."""
        ml = self._ml
        acked = self._acked
        moved = False
        md = self._md
        while True:
            nxt = self._md_next if (self._md_next is not None and not moved) else ml.next_valid_position(md)
            if not acked.contains(nxt[0], nxt[1]):
                self._md_next = nxt if nxt <= ml.last_confirmed_entry else None
                break
            md = Position(nxt[0], acked.run_end(nxt[0], nxt[1]))
            moved = True
            self._md = md
            acked.remove_at_most(md[0], md[1])
        if moved:
            if self._batch:
                for p in list(self._batch.irange(maximum=md)):
                    self._drop_batch(p)
            if self._read <= md:
                self._read = ml.next_valid_position(md)

    def _after_change(self, force_persist: bool = False, entries_acked: int = -1) -> None:
        """Persist (or mark dirty under throttling) after a state change; trim the ML.

        ``entries_acked >= 0``: the change only acknowledged that many whole entries (none
        with batch state), which the state stores observe in O(1) (nothing for 0)."""
        if not self._durable:
            return
        if not force_persist:
            now_ns = self._clock_ns()
            if now_ns < self._persist_due_ns:
                self._throttled(now_ns, entries_acked)
                return
        self._persist()

    def _throttled(self, now_ns: int, entries_acked: int) -> None:
        """A change the throttle defers (read at ``now_ns``): mark dirty; the state stores
        observe it (see :meth:`_after_change` for ``entries_acked``)."""
        self._dirty = True
        now = now_ns // 1_000_000
        if entries_acked < 0 or not self._observed:
            self._observe(now)
        elif entries_acked and self._store is not None:
            self._settle_observation()
            self._store.observe_entries_acked(entries_acked, now)
            for mirror in self._mirrors:
                mirror.observe_entries_acked(entries_acked, now)

    def _settle_observation(self) -> None:
        """Tell the cursor's own state store the whole-entry acks the single-call fast path
        deferred (only while the stores' figures are observed and there are no mirrors), as
        one ``observe_entries_acked``; every other use of the store calls this first.

        Exactly what one call per ack would have left: each such ack adds 1 to the figure's
        entries part, so over a run the figure never falls and its last value is its highest,
        reached (first) at the run's last ack, whose clock reading is kept; the maximum is
        compared and stamped once with those. (When the figure does not grow over the run it
        stays at or below the maximum, which was last compared with it.)"""
        n = self._unobserved_acks
        if n and self._store is not None:
            self._unobserved_acks = 0
            self._store.observe_entries_acked(n, self._unobserved_at_ns // 1_000_000)

    def _rearm_throttle(self) -> None:
        """Set the deadline from which a change persists again: ``throttle_mark_delete``
        persists per second (Pulsar's mark-delete rate limit) after the last persist; none
        without a throttle or before the first persist.

        Exact in whole milliseconds, as a throttle reading the clock's ``now_ms`` on every
        change: ``now_ms - last < 1000 / rate`` holds for an integer ``now_ms`` exactly when
        ``now_ms < last + ceil(1000 / rate)``, that is when the clock reads fewer nanoseconds
        than that many milliseconds (``now_ms`` is the nanosecond reading floored)."""
        throttle = self._ml.config.throttle_mark_delete
        last = self._last_persist_ms
        if not (throttle > 0) or last is None:
            self._persist_due_ns = -math.inf
            return
        interval_ms = 1000.0 / throttle
        self._persist_due_ns = math.inf if math.isinf(interval_ms) else (last + math.ceil(interval_ms)) * 1_000_000

    def ledger_config_changed(self) -> None:
        """The managed ledger's settings were replaced (``ManagedLedger.set_config`` calls this,
        as Pulsar's ``setConfig`` calls ``setThrottleMarkDelete`` on each cursor): the persist
        throttle follows the new ``throttle_mark_delete`` from the next change on."""
        with self._lock:
            self._rearm_throttle()

    def _observe(self, now_ms: int) -> None:
        """Let the state stores see a change they do not persist (what a restart would
        redeliver), from a snapshot."""
        store = self._store
        if store is None:
            return
        self._settle_observation()
        snapshot = self._snapshot()
        store.observe(snapshot, now_ms)
        for mirror in self._mirrors:
            mirror.observe(snapshot, now_ms)
        self._observed = True

    def _persist(self) -> None:
        if self._store is None:
            return
        self._settle_observation()
        snapshot = self._snapshot()
        self._observed = False  # until the stores have taken the write (and observed it)
        self._store.persist(snapshot)
        for mirror in self._mirrors:
            mirror.persist(snapshot)
        self._observed = True
        self._persistent_md = self._md
        self._dirty = False
        self._last_persist_ms = self._clock_ns() // 1_000_000
        self._rearm_throttle()
        self._ml.request_trim(self, self._md)

    def _snapshot(self) -> CursorSnapshot:
        """The state the store persists, taken under the lock (the ack set is lent, not copied)."""
        return CursorSnapshot(
            mark_delete=self._md,
            acked=self._acked,
            batch=tuple(self._batch.items()),
            properties=MappingProxyType(dict(self._md_properties)),
            cursor_properties=MappingProxyType(dict(self._cursor_properties)),
            batch_sizes=MappingProxyType(self._batch_sizes),
        )

    def flush(self) -> bool:
        """Persist deferred (throttled) state now; True if anything was written."""
        with self._lock:
            if not self._dirty or self._closed:
                return False
            self._persist()
            return True

    @property
    def is_dirty(self) -> bool:
        """Whether state changes are waiting for a throttled persist."""
        return self._dirty

    def add_state_mirror(self, store: CursorStateStore) -> None:
        """Also persist this durable cursor's state through ``store``, a state store of its own
        (another metadata store and cursor ledgers, other persistence settings): it gets the
        same snapshots at the same moments as the cursor's own store, from now on, starting
        with ``initialize``. Compares persistence settings on one cursor, side by side (the
        replay's settings sweeps). Raises ``ValueError`` on a non-durable cursor."""
        with self._lock:
            self._check_open()
            if self._store is None:
                raise ValueError(f"cursor {self.name} is not durable: it persists no state to mirror")
            self._settle_observation()  # the fast path defers nothing once there is a mirror
            store.initialize(self._snapshot())
            self._mirrors.append(store)

    # -- mark-delete properties ---------------------------------------------------------------
    def put_property(self, key: str, value: int) -> bool:
        """Set one mark-delete property in memory; persisted with the next state write."""
        with self._lock:
            self._md_properties = {**self._md_properties, **checked_properties({key: value})}
            self._dirty = self._durable
            return True

    def remove_property(self, key: str) -> bool:
        """Remove one mark-delete property in memory; True if it existed."""
        with self._lock:
            if key not in self._md_properties:
                return False
            props = dict(self._md_properties)
            del props[key]
            self._md_properties = props
            self._dirty = self._durable
            return True

    def set_cursor_property(self, key: str, value: str) -> None:
        """Set and persist one cursor (subscription) property (Pulsar's ``putCursorProperty``).

        If persisting fails, the property is left as it was."""
        with self._lock:
            self._check_open()
            self._replace_cursor_properties({**self._cursor_properties, str(key): str(value)})

    def remove_cursor_property(self, key: str) -> bool:
        """Remove and persist one cursor property; True if it existed."""
        with self._lock:
            self._check_open()
            if key not in self._cursor_properties:
                return False
            self._replace_cursor_properties({k: v for k, v in self._cursor_properties.items() if k != key})
            return True

    def set_cursor_properties(self, properties: Mapping[str, str] | None) -> None:
        """Replace the cursor properties with ``properties`` and persist them (Pulsar's
        ``setCursorProperties``).

        The internal properties (keys starting with ``#pulsar.internal.``) are kept; a map
        that names one is refused with ``InvalidRequestError`` ("The property key can't start
        with #pulsar.internal.") and nothing changes. ``None`` clears the user properties.
        Persisted like :meth:`set_cursor_property` (``ManagedCursorInfo``); if persisting
        fails, the properties are left as they were. O(properties)."""
        new = {str(k): str(v) for k, v in (properties or {}).items()}
        for key in new:
            if key.startswith(CURSOR_INTERNAL_PROPERTY_PREFIX):
                raise InvalidRequestError(f"The property key can't start with {CURSOR_INTERNAL_PROPERTY_PREFIX}")
        with self._lock:
            self._check_open()
            internal = {
                k: v for k, v in self._cursor_properties.items() if k.startswith(CURSOR_INTERNAL_PROPERTY_PREFIX)
            }
            self._replace_cursor_properties({**new, **internal})

    def _replace_cursor_properties(self, properties: dict[str, str]) -> None:
        # Cursor properties live only in ManagedCursorInfo (field 8), as in Pulsar. Written
        # first, adopted after: a failed write leaves the cursor as it was.
        if self._store is not None:
            self._settle_observation()
            snapshot = replace(self._snapshot(), cursor_properties=MappingProxyType(dict(properties)))
            self._store.persist_cursor_properties(snapshot)
            for mirror in self._mirrors:
                mirror.persist_cursor_properties(snapshot)
        self._cursor_properties = properties

    # -- counting ---------------------------------------------------------------------------
    def number_of_entries(self) -> int:
        """Entries still to read: ``[read, LAC]`` minus the acked ones."""
        with self._lock:
            lac = self._ml.last_confirmed_entry
            read = self._read
            if read > lac:
                return 0
            return self._ml.number_of_entries(read, lac, True, True) - self._acked.cardinality_between(read, lac)

    def number_of_entries_in_backlog(self, precise: bool = True) -> int:
        """Unacknowledged entries: precise ``count(MD, LAC] - acked``, else ``added - consumed``."""
        with self._lock:
            if not precise:
                backlog = self._ml.entries_added_counter - self._consumed
                if backlog >= 0:
                    return backlog
            return self._precise_backlog()

    def _precise_backlog(self) -> int:
        lac = self._ml.last_confirmed_entry
        if self._md >= lac:
            return 0
        return self._ml.number_of_entries(self._md, lac, False, True) - self._acked.cardinality()

    def has_more_entries(self) -> bool:
        """Whether a sequential read would find an entry (Pulsar's ``hasMoreEntries``)."""
        with self._lock:
            lac = self._ml.last_confirmed_entry
            if lac.entry_id != -1:
                return self._read <= lac and self.number_of_entries() > 0
            return self.number_of_entries() > 0

    def has_backlog(self) -> bool:
        """Whether any entry after MD is not acknowledged. O(ranges walked)."""
        with self._lock:
            return self._precise_backlog() > 0

    def number_of_entries_since_first_not_acked(self) -> int:
        """``count(MD, read]`` when MD < read, else 0."""
        with self._lock:
            if self._md >= self._read:
                return 0
            return self._ml.number_of_entries(self._md, self._read, False, True)

    def individually_deleted_messages(self) -> IndividualDeletedMessages:
        """A snapshot of the individually deleted ranges. O(size of the bitmaps)."""
        with self._lock:
            return IndividualDeletedMessages(self._acked.copy())

    def individually_deleted_text(self) -> str:
        """``str(individually_deleted_messages())`` (Pulsar's ``[(3:5..3:7],...]``) without the
        copy: the text is made under the lock. O(ranges)."""
        with self._lock:
            return str(self._acked)

    def total_non_contiguous_deleted_messages_range(self) -> int:
        """Number of individually deleted ranges (Pulsar's stat of the same name)."""
        with self._lock:
            return self._acked.size()

    # -- resets -----------------------------------------------------------------------------
    def position_reset(self) -> PositionReset:
        """A composite reset: ``with cursor.position_reset() as r: <own state>; r.rewind()``.

        Raises ``ConcurrentResetError`` on entry if another reset is running.
        """
        return PositionReset(self._reset_hooks())

    def _reset_hooks(self) -> ResetHooks:
        """The operations a :class:`PositionReset` of this cursor drives."""

        def seek(position: Position, force: bool) -> Callable[[], None]:
            self._validate_seek(position)
            return lambda: self._apply_seek(position, force)

        def reset_to(position: Position) -> Callable[[], None]:
            target = self._reset_target(position)
            return lambda: self._apply_reset(target)

        return ResetHooks(
            name=self.name,
            cursor=self,
            lock=self._lock,
            revision=self._revision,
            check_open=self._check_open,
            after_change=lambda: self._after_change(force_persist=True),
            mark_settling=self._mark_reset_settling,
            choose_rewind=lambda: self._apply_rewind,
            choose_seek=seek,
            choose_reset_to=reset_to,
            choose_skip=lambda n, deleted: lambda: self._apply_skip(n, deleted),
            choose_clear_backlog=lambda: self._apply_clear_backlog,
            choose_mark_delete=lambda p, props: lambda: self._apply_mark_delete_in_reset(p, props),
        )

    def rewind(self) -> None:
        """Read again from the entry after the mark-delete position."""
        with self.position_reset() as reset:
            reset.rewind()

    def seek(self, position: Position, force: bool = False) -> None:
        """Move the read position to ``position``; at or below MD it goes to the entry after MD."""
        with self.position_reset() as reset:
            reset.seek(to_position(position), force)

    def reset_cursor(self, position: Position) -> None:
        """Reset read and mark-delete: read from ``position`` (EARLIEST / LATEST allowed), MD
        just before it; acks above are cleared and the mark-delete may move backwards."""
        with self.position_reset() as reset:
            reset.reset_to(to_position(position))

    def skip_entries(self, n: int, deleted: IndividualDeletedEntries = IndividualDeletedEntries.EXCLUDE) -> None:
        """Mark-delete ``n`` more entries (Pulsar's ``skipEntries``).

        With ``EXCLUDE`` the already-acked entries do not count toward ``n``.
        """
        if n < 0:
            raise InvalidPositionError(f"cannot skip a negative number of entries: {n}")
        with self.position_reset() as reset:
            reset.skip_entries(n, deleted)

    def clear_backlog(self) -> None:
        """Mark-delete everything up to the last confirmed entry."""
        with self.position_reset() as reset:
            reset.clear_backlog()

    def _validate_seek(self, position: Position) -> None:
        if position.entry_id < -1 and position != EARLIEST:
            raise InvalidPositionError(f"invalid seek position {position}")

    def _apply_rewind(self) -> None:
        self._read = self._ml.next_valid_position(self._md)

    def _apply_seek(self, position: Position, force: bool) -> None:
        if position <= self._md:
            position = self._ml.next_valid_position(self._md)
        elif not force and not self._ml.is_valid_position(position):
            position = self._ml.next_valid_position(self._ml.previous_position(position))
        self._read = position

    def _reset_target(self, position: Position) -> Position:
        ml = self._ml
        if position == EARLIEST:
            return ml.next_valid_position(ml.first_position())
        if position == LATEST or position > ml.last_confirmed_entry:
            return ml.next_valid_position(ml.last_confirmed_entry)
        if not ml.is_valid_position(position):
            return ml.next_valid_position(position if position.entry_id < 0 else ml.previous_position(position))
        return position

    def _apply_reset(self, new_read: Position) -> None:
        ml = self._ml
        new_md = ml.previous_position(new_read)
        self._md = new_md
        self._md_next = None
        self._acked.clear()
        self._batch.clear()
        self._batch_sizes.clear()
        if self.name != "__compaction":
            self._md_properties = {}
        self._read = new_read if new_read > new_md else ml.next_valid_position(new_md)
        self._consumed = ml.entries_added_counter - self._precise_backlog()

    def _apply_mark_delete_in_reset(self, position: Position, properties: Mapping[str, int] | None) -> None:
        position = to_position(position)
        self._check_mark_delete_target(position)
        self._set_acknowledged_position(position, self._resolve_properties(properties))

    def _apply_skip(self, n: int, deleted: IndividualDeletedEntries) -> None:
        ml = self._ml
        extra = self._deleted_entries_to_skip(n) if deleted is IndividualDeletedEntries.EXCLUDE else 0
        target = ml.position_after_n(self._md, n + extra, PositionBound.START_EXCLUDED)
        if target < self._md:
            return  # Pulsar treats the IllegalArgument race as success
        self._check_mark_delete_target(target)
        self._set_acknowledged_position(target, {})

    def _deleted_entries_to_skip(self, n: int) -> int:
        """Pulsar's ``getNumIndividualDeletedEntriesToSkip``: acked entries passed while
        walking gaps from MD until ``n`` unacked entries are covered."""
        ml = self._ml
        total = 0
        deleted = 0
        start = self._md
        for lower, upper in self._acked:
            if start > lower:
                continue
            gap = ml.number_of_entries(start, lower, False, True)
            if total + gap >= n:
                break
            total += gap
            deleted += ml.number_of_entries(lower, upper, False, True)
            start = upper
        return deleted

    def _apply_clear_backlog(self) -> None:
        target = self._ml.last_confirmed_entry
        if target <= self._md:
            return
        self._set_acknowledged_position(target, {})

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Persist the final state (durable) and close. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._move(CursorEvent.CLOSE)
            try:
                if self._store is not None:
                    self._settle_observation()
                    snapshot = self._snapshot()
                    self._store.close(snapshot)
                    for mirror in self._mirrors:
                        mirror.close(snapshot)
                    self._persistent_md = self._md
                    self._dirty = False
            finally:
                self._move(CursorEvent.CLOSE_DONE)
        if not self._durable:
            self._ml.forget_non_durable_cursor(self)

    def discard(self) -> None:
        """Close without persisting and delete the stored state (node and cursor ledgers).

        ``ManagedLedger.delete_cursor`` calls this after unregistering the cursor."""
        with self._lock:
            self._move(CursorEvent.DELETE)
            if self._store is not None:
                self._store.delete()
                for mirror in self._mirrors:
                    mirror.delete()
            self._move(CursorEvent.DELETE_DONE)

    def _move(self, event: CursorEvent) -> None:
        """The one lifecycle move: ``LIFECYCLE_TRANSITIONS`` decides (``CursorLifecycleError``
        for a move it does not have)."""
        self._lifecycle = lifecycle_transition(self._lifecycle, event)
        self._closed = self._lifecycle.is_closed

    def _check_open(self) -> None:
        if self._closed:
            raise CursorAlreadyClosedError(f"cursor {self.name} is closed")

    def _refuse_during_revision(self, what: str) -> None:
        if self._revision.is_under_revision:
            self._revision.record_discarded_read()
            raise CursorModifyingError(f"cursor {self.name}: {what} refused, a position reset is in progress")

    def _set_positions(self, md: Position, read: Position) -> None:
        self._md = md
        self._md_next = None
        self._read = read if read > md else self._ml.next_valid_position(md)

    # -- stats and checks -------------------------------------------------------------------
    def stats(self) -> CursorStats:
        """A consistent snapshot (frozen) of positions, counters, revision and persistence
        figures, under the lock once. O(ledgers)."""
        with self._lock:
            self._settle_observation()
            return CursorStats(
                name=self.name,
                durable=self._durable,
                state=self.state.value,
                mark_delete_position=self._md,
                persistent_mark_delete_position=self._persistent_md,
                read_position=self._read,
                individually_deleted_ranges=self._acked.size(),
                individually_deleted_entries=self._acked.cardinality(),
                batch_partially_acked_entries=len(self._batch),
                messages_consumed_counter=self._consumed,
                backlog=self._precise_backlog(),
                mark_delete_lag=self.number_of_entries_since_first_not_acked(),
                entries_to_read=self.number_of_entries(),
                properties=dict(self._md_properties),
                cursor_properties=dict(self._cursor_properties),
                dirty=self._dirty,
                revision=self._revision.stats(),
                persistence=self._store.stats() if self._store is not None else PersistenceStats(),
            )

    def _check(self) -> None:
        """Assert the cursor invariants (stateful tests call this after every step)."""
        with self._lock:
            md, read, lac = self._md, self._read, self._ml.last_confirmed_entry
            assert read > md, f"read position {read} <= mark-delete {md}"
            self._acked._check()
            first = self._acked.first_range()
            if first is not None:
                assert Position(first[0].ledger_id, first[0].entry_id + 1) > md, f"acked {first} at or below MD {md}"
                last = self._acked.last_range()
                assert last is not None and last[1] <= lac, f"acked {last} beyond LAC {lac}"
                nxt = self._ml.next_valid_position(md)
                assert not self._acked.contains(nxt[0], nxt[1]), f"acked {nxt} right after MD {md} not absorbed"
            for p, bits in self._batch.items():
                assert p > md and bits != 0, f"batch state {p}={bits} invalid with MD {md}"
                assert not self._acked.contains(p[0], p[1]), f"batch state kept for deleted {p}"
            backlog = self._precise_backlog()
            assert backlog >= 0, f"negative backlog {backlog}"
            assert self._ml.entries_added_counter - self._consumed == backlog, (
                f"counter backlog {self._ml.entries_added_counter - self._consumed} != precise {backlog}"
            )

    def __repr__(self) -> str:
        # Pulsar's toString: durable cursors print "name=", non-durable ones "cursor=".
        if self._durable:
            return f"ManagedCursorImpl{{ledger={self._ml.name}, name={self.name}, ackPos={self._md}, readPos={self._read}}}"
        return f"NonDurableCursorImpl{{ledger={self._ml.name}, cursor={self.name}, ackPos={self._md}, readPos={self._read}}}"

    __str__ = __repr__


__all__ = [
    "CURSOR_INTERNAL_PROPERTY_PREFIX",
    "KEEP_PROPERTIES",
    "CursorLifecycle",
    "IndividualDeletedEntries",
    "ManagedCursor",
]
