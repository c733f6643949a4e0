"""The managed cursor: read position, mark-delete position, individual and batch-index acks.

Theory of operation
-------------------
A cursor (Pulsar's ``ManagedCursorImpl``) tracks one subscriber's progress through a managed
ledger with these pieces of state, all guarded by one re-entrant lock:

* its acknowledgement state, one :class:`~mledger.managed_ledger.AckState`: the
  mark-delete position (MD: every entry at or before it is acknowledged), the ack range set
  (entries above MD acked individually; "holes" are what lies between) and the batch states
  of partially acked batch entries;
* ``read_position``: the next entry a sequential read returns; always ``> MD``;
* mark-delete properties (PIP-6 ``LongProperty``) and cursor properties (strings);
* ``messages_consumed_counter``, which makes the cheap backlog ``added - consumed``.

Invariants checked by :meth:`ManagedCursor._check` (and by the stateful tests after every
step): ``read_position > MD``; the acknowledgement state's own (``AckState._check``); the
precise backlog equals ``count(MD, LAC] - acked`` and the counter backlog agrees.

Resets (reset_cursor, seek, rewind, skip_entries, clear_backlog and callers' composite resets
via :meth:`ManagedCursor.position_reset`) run inside a revision of the
:class:`~mledger.managed_ledger.CursorStateRevisionController`: reads are refused while
one runs, and a read that started before a reset is discarded when it completes.

Collaborators, each behind a narrow interface: the managed ledger is a
:class:`~mledger.managed_ledger.LedgerView` (last confirmed entry, position
arithmetic over the ledger list, reads, trim requests); a durable cursor's
:class:`~mledger.managed_ledger.CursorStateStore` takes a
:class:`~mledger.managed_ledger._cursor_snapshot.CursorSnapshot` and gives back a
:class:`~mledger.managed_ledger.RecoveredCursorState`; read planning is
:mod:`~mledger.managed_ledger._cursor_reads`, composite resets
:mod:`~mledger.managed_ledger._position_reset`.

The acknowledgement path, top-down: the broker resolves a consumer's ``AckRequest`` into one
:class:`~mledger.managed_ledger.AckPlan` -> :meth:`acknowledge`, which applies it to the
acknowledgement state under the lock (``AckState.apply``: validate the whole plan, apply it,
settle the mark-delete) and gets one frozen ``AckOutcome`` back -> the consumed counter and the
read position follow the outcome (:meth:`_apply`) -> :meth:`_after_change` (throttle, or
``CursorStateStore.persist(snapshot)``: format and truncate -> :mod:`mledger.codec`
``PositionInfo`` bytes -> the ``LedgerStore``). A throttled plan that only acknowledges whole
entries (individually or by passing them with the mark-delete; no batch state gained, changed
or passed) reaches the state stores as counts, in O(1), as the single-call path's acks do
(:meth:`_whole_acks_since`; a plan of one whole entry from its outcome, :meth:`_apply_entry`),
and past the unload headroom a plan of one entry with its position, as that path's do; any other
throttled change as a snapshot. The Pulsar-named ack methods (``delete``,
``delete_many``, ``delete_batch_indexes``, ``delete_with_ack_set(s)``, ``mark_delete``) only build
the plan; so do the resets that move the mark-delete (``skip_entries``, ``clear_backlog``, a
composite reset's mark-delete) and trimming's ``skip_trimmed_ledgers``. ``delete(position)`` is
the single-call path: ``AckState.ack_entry`` (the same steps for one entry, no plan, no outcome
object: the validation is one lookup in the ledger's live list, :attr:`LedgerView.ledger_list
<mledger.managed_ledger.LedgerView.ledger_list>`), then the throttle inlined: one
clock reading (``time.time_ns`` on the system clock) against a deadline re-armed at each persist
and by the ledger's ``set_config`` (``_rearm_throttle``: mledger's throttle, or under a Pulsar
version's rules the next free ticket of Guava's limiter, which a persist caused by an ack or a
flush takes); its whole-entry acks reach the cursor's own state store as one O(1)
``observe_entries_acked`` per run of them (``_settle_observation``, before anything else uses the
store) while the store's unload figure cannot move (``unload_headroom``), else one
``observe_entry_acked`` with the position each (a few bitmap queries); nothing is allocated
beyond the bitmap's growth. Under a Pulsar version's rules an individual acknowledgement that
leaves no range persists nothing of its own (``AckOutcome.persist``, apache/pulsar#26498): the
state stores only observe it.

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
from typing import TYPE_CHECKING, cast

import numpy as np

from ..codec import Entry
from ..core import (
    EARLIEST,
    LATEST,
    CursorAlreadyClosedError,
    CursorModifyingError,
    InvalidPositionError,
    InvalidRequestError,
    Position,
    nanosecond_reader,
    rules_for,
)
from ._ack_state import ACKED, BATCH_STATE_DROPPED, MARK_DELETE_MOVED, AckOutcome, AckPlan, AckState
from ._cursor_args import ack_set_of, checked_properties, to_position
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
from ._cursor_stats import UNBOUNDED_ROOM, BulkAckRoom, CursorStats, IndividualDeletedMessages, PersistenceStats
from ._cursor_store import CursorStateStore
from ._explain import RedeliveryExplanation, explain_redelivery
from ._ledger_view import InitialPosition, LedgerView, PositionBound
from ._position_reset import PositionReset, ResetHooks
from ._revision import CursorStateRevisionController

if TYPE_CHECKING:
    from ..core import SmoothBurstyLimiter

log = logging.getLogger(__name__)

_WholeAcksBaseline = tuple[tuple[tuple[Position, int], ...], int, int, int, Position, dict[str, int]]
"""What :meth:`ManagedCursor._whole_acks_since` compares an acknowledgement's result with."""

CURSOR_INTERNAL_PROPERTY_PREFIX = "#pulsar.internal."
"""Cursor-property keys the broker owns (Pulsar's ``CURSOR_INTERNAL_PROPERTY_PREFIX``):
``set_cursor_properties`` keeps them and refuses a map naming one."""


class ManagedCursor:
    """A durable or non-durable cursor over a :class:`~mledger.managed_ledger.ManagedLedger`.

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
        self._state = AckState(ml, Position(-1, -1), name)  # the acknowledgement state: MD, ranges, batches
        self._ack_entry = self._state.ack_entry  # bound once: the single-call path's one call
        self._ignored_acks = self._state.ignored_acks  # live: its truth is has_ignored_batch
        self._is_deleted = self._state.is_deleted  # bound once: reads filter every entry with it
        self._persistent_md = Position(-1, -1)
        self._reset_settling = False  # a reset's new state applied, its persist not yet done
        self._read = Position(-1, 0)
        self._md_properties: dict[str, int] = {}
        self._cursor_properties: dict[str, str] = {}
        # read-only copies of the two property maps as the last snapshot took them, with the
        # maps they copy (both are replaced, never changed in place: a new map, a new copy)
        self._properties_views: tuple[object, object, Mapping[str, int], Mapping[str, str]] = (None, None, {}, {})
        self._sizes_view: tuple[object, Mapping[Position, int]] = (None, {})  # the batch sizes' view, see _snapshot
        self._consumed = 0
        self._dirty = False
        self._last_persist_ms: int | None = None
        self._clock_ns = nanosecond_reader(ml.clock)
        # The persist throttle as a deadline: a change persists once the clock reads at least
        # this (ns); re-armed by every persist and by the ledger's set_config (_rearm_throttle).
        self._persist_due_ns: float = -math.inf
        # Under a Pulsar version's rules, Guava's limiter, created with the cursor (Pulsar's
        # ManagedCursorImpl constructor): the deadline is its next free ticket.
        self._limiter: SmoothBurstyLimiter | None = None
        self._dirty_until_flush = False
        self._follow_rate_rules()
        self._observed = True  # the state stores' redelivery figures are up to date (but for:)
        # Whole-entry acks of the single-call fast path not yet told to the cursor's own state
        # store (the cursor is dirty while there are any), and the clock reading of the latest:
        # see _settle_observation.
        self._unobserved_acks = 0
        self._unobserved_extra = 0  # their messages beyond one each (batch entries acked whole)
        self._unobserved_at_ns = 0
        self._entry_messages = ml.entry_messages  # how many messages an acked entry holds
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
            store.observe(cursor._snapshot())  # what a stop now would redeliver, as recovered
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
        self._state.restore(md, recovered.acked, recovered.batch)
        self._persistent_md = md
        self._md_properties = dict(recovered.properties)
        self._cursor_properties = dict(recovered.cursor_properties)
        self._read = ml.next_valid_position(md)
        self._consumed = ml.entries_added_counter - self._precise_backlog()

    def skip_trimmed_ledgers(self, position: Position) -> None:
        """Mark-delete up to ``position``, the last entry of ledgers about to be trimmed
        (Pulsar's ``advanceCursorsIfNecessary``); the mark-delete properties are kept.

        The managed ledger calls this on cursors that do not hold trimming back (non-durable
        ones) before it deletes ledgers, while their entries can still be counted."""
        with self._lock:
            if self._closed or position <= self._state.mark_delete or position > self._ml.last_confirmed_entry:
                return
            self._apply(AckPlan.cumulative(position, properties=KEEP_PROPERTIES))

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
        return self._state.mark_delete

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
            spans, examined = plan_read(self._ml, self._state.acked, self._read, max_entries, max_position)
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

    # -- acknowledgement: thin builders of one plan ---------------------------------------------
    # The Pulsar-named methods below only build an AckPlan. Every acknowledgement then crosses
    # into the acknowledgement state once (AckState.apply: validate the whole plan, raising
    # before anything changes; apply; settle the mark-delete) and comes back as one AckOutcome,
    # which _apply follows (the consumed counter, the read position, the properties) before
    # _after_change persists or throttles. delete(position) is the single-call path
    # (AckState.ack_entry: the same steps for one entry, no plan and no outcome object).
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
        self.acknowledge(AckPlan.cumulative(position, ack_set=ack_set, properties=properties))

    def delete(self, positions: Position | Iterable[Position]) -> None:
        """Individually acknowledge one position or many (the iterable form is bulk).

        Already-deleted positions are ignored. Raises ``InvalidPositionError`` (nothing
        changed) if any position is beyond the last confirmed entry, or above the mark-delete
        but not an entry of this ledger (Pulsar accepts those and then miscounts the backlog).
        O(1) per position: one position is the single-call path (no allocation beyond the
        bitmap's growth; see the module docstring).
        """
        if type(positions) is not Position:
            self.delete_many(cast("Iterable[Position]", positions))
            return
        lock = self._lock
        lock.acquire()  # not `with`: __enter__/__exit__ cost a third of this path's locking
        try:
            if self._closed:
                self._check_open()
            # read before the ack, which forgets the entry's ignored partial acks: the figures
            # counted them as a batch state, so the change goes to the stores as a snapshot
            ignored = bool(self._ignored_acks)  # has_ignored_batch, without a call
            flags = self._ack_entry(positions)
            if flags != ACKED or ignored:
                self._after_entry(flags, positions, ignored)
                return
            self._consumed += 1  # the common case: one more entry, nothing else moved
            if self._durable:  # _after_change, inlined for it
                now_ns = self._clock_ns()
                if now_ns >= self._persist_due_ns:
                    self._persist()
                    return
                counts = self._entry_messages
                store = self._store
                assert store is not None
                if self._observed and not self._mirrors and self._unobserved_acks < store.unload_headroom:
                    self._unobserved_acks += 1  # _throttled for this one common case: dirty, told
                    self._unobserved_at_ns = now_ns  # to the store later (_settle_observation)
                    if counts.batched:  # a batch entry acked whole: all its messages
                        self._unobserved_extra += counts.of(positions[0], positions[1]) - 1
                else:  # past the limits the stores follow the ack from its position
                    messages = counts.of(positions[0], positions[1]) if counts.batched else 1
                    self._throttled(now_ns, 1, messages, positions)
        finally:
            lock.release()

    def _after_entry(self, flags: int, position: Position, ignored: bool) -> None:
        """What :meth:`delete` of ``position`` does after ``AckState.ack_entry`` returned
        ``flags`` other than a plain :data:`ACKED`, or when the state held ignored partial acks
        before it (``ignored``; caller holds the lock): the consumed counter, the read position
        after a mark-delete that moved, the throttled persist (none under a Pulsar version's
        rules for an entry deleted already while no range exists, #26498)."""
        if flags:
            self._consumed += 1
            if flags & MARK_DELETE_MOVED:
                self._follow_mark_delete()
        elif self._state.persists_nothing():
            return  # nothing changed, nothing to persist
        counts = self._entry_messages
        messages = counts.of(position[0], position[1]) if flags & ACKED and counts.batched else None
        # a batch state gone, or partial acks ignored (their entry may be acked now): a snapshot
        whole = -1 if flags & BATCH_STATE_DROPPED or ignored else flags & ACKED
        self._after_change(entries_acked=whole, messages=messages)

    def delete_many(self, positions: Iterable[Position] | np.ndarray) -> int:
        """Bulk individual acknowledgement; returns how many entries became acked.

        Accepts positions or an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows.
        Validates everything first: an invalid position raises and changes nothing.
        """
        return self.acknowledge(AckPlan.of(entries=positions)).entries_acked

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
        return self.acknowledge(AckPlan.of(ack_sets=items)).entries_acked

    def acknowledge(self, plan: AckPlan) -> AckOutcome:
        """Apply one acknowledgement plan (individual: whole entries, then batch entries by ack
        set; or cumulative: a mark-delete) under one lock with one persistence check; return
        what it changed. Every ack method of the cursor builds one; so does the broker for each
        acknowledgement it takes.

        Validates the whole plan first (``InvalidPositionError``,
        ``MarkDeletingMarkedPositionError``, and bad mark-delete properties: nothing changed);
        raises ``CursorAlreadyClosedError`` on a closed cursor and, for a cumulative plan,
        ``CursorModifyingError`` while a reset runs. O(entries) + O(ranges touched).
        """
        with self._lock:
            self._check_open()
            if plan.mark_delete is not None and self._revision.is_under_revision:
                raise CursorModifyingError(
                    f"Reset cursor in progress - unable to mark delete position {plan.mark_delete}"
                )
            if plan.is_empty:
                md = self._state.mark_delete
                return AckOutcome(md, md)
            position = None
            if plan.entries.shape[0] == 1 and plan.mark_delete is None and not plan.ack_sets:
                outcome, entries, messages, position = self._apply_entry(plan)
            else:
                before = self._whole_acks_baseline(plan)
                outcome = self._apply(plan)
                entries, messages = (-1, None)
                if before is not None and outcome.persist:
                    entries, messages = self._whole_acks_since(before, outcome)
            if outcome.persist:
                self._after_change(entries_acked=entries, messages=messages, position=position)
            else:
                self._observe(self._clock_ns() // 1_000_000, unpersisted=True)
            return outcome

    def _apply_entry(self, plan: AckPlan) -> tuple[AckOutcome, int, int | None, Position | None]:
        """:meth:`_apply` of a ``plan`` of one whole entry, with what :meth:`_after_change`
        takes for it: ``(outcome, entries, messages, position)``, as :meth:`_whole_acks_since`
        finds them, without its baseline. ``AckState.apply`` acks the entry as ``ack_entry``
        does (the single-call path), so when it acknowledged it (``entries_acked`` 1) and left
        the batch states the very tuple (none dropped; properties are only a mark-delete's)
        the change is that one entry and its messages, however far its absorption moved the
        mark-delete; its position when the mark-delete did not move
        (``CursorStateStore.observe_entry_acked`` past the limits). Else ``(outcome, -1, None,
        None)``: a snapshot. O(1)."""
        state, counts = self._state, self._entry_messages
        batch = state.batch_states() if self._counts_observable() else None
        generation = counts.generation
        outcome = self._apply(plan)
        if (
            batch is None
            or outcome.entries_acked != 1
            or state.batch_states() is not batch
            or state.has_ignored_batch
            or counts.generation != generation
        ):
            return outcome, -1, None, None
        position = Position(*plan.entries.tolist()[0])
        messages = counts.of(position[0], position[1]) if counts.batched else None
        return outcome, 1, messages, None if outcome.mark_delete_moved else position

    def _counts_observable(self) -> bool:
        """Before a change that the throttle will defer (the deadline not passed: the clock only
        moves on), with state stores that keep their room for acknowledgements at once
        meanwhile (``CursorStateStore.counts_keep_room``) and no ignored partial acks: whether
        whole-entry acknowledgements may reach the stores as counts. O(1)."""
        store = self._store
        if store is None or self._clock_ns() >= self._persist_due_ns:
            return False  # no store, or it persists: a snapshot is taken anyway
        if not store.counts_keep_room or self._state.has_ignored_batch:
            return False
        return not self._mirrors or all(mirror.counts_keep_room for mirror in self._mirrors)

    def _whole_acks_baseline(self, plan: AckPlan) -> _WholeAcksBaseline | None:
        """Before a ``plan`` (:meth:`_counts_observable`), what :meth:`_whole_acks_since`
        compares with: the batch states (the very tuple, kept until one changes), the
        acknowledged entries, their messages beyond one, the generation of the ledger's message
        counts, the mark-delete and its properties. None when the change goes to the state
        stores as a snapshot anyway. O(1) (the range set keeps its messages; O(batch states) to
        build their tuple after a change of them, which the snapshot would build)."""
        if not self._counts_observable():
            return None
        state = self._state
        acked, counts = state.acked, self._entry_messages
        extra = acked.extra_messages(counts) if counts.batched else 0
        return (
            state.batch_states(),
            acked.cardinality(),
            extra,
            counts.generation,
            state.mark_delete,
            self._md_properties,
        )

    def _whole_acks_since(self, before: _WholeAcksBaseline, outcome: AckOutcome) -> tuple[int, int | None]:
        """``(entries, messages)`` for :meth:`_after_change` after an acknowledgement applied
        since ``before`` (:meth:`_whole_acks_baseline`): when it only acknowledged whole
        entries, individually or by moving the mark-delete over them (the batch states the same
        tuple, so none gained, changed or lost one, none passed by the mark-delete; the
        properties the same; the ledger's message counts of the same generation), the state
        stores observe those entries and their messages in O(1), exactly as the single-call
        path tells them one entry at a time: each adds its messages to the crash total, which
        no batch state moves (the entries the mark-delete absorbs from the ranges leave it as
        it is). The new entries: the growth of the acknowledged entries plus those the
        mark-delete passed; their messages likewise, from the range set's kept messages and the
        ledger's counts over the span passed. Otherwise ``(-1, None)``: a snapshot. O(1), and
        O(ledgers) for a mark-delete that moved across ledgers."""
        batch, cardinality, extra, generation, md, properties = before
        state, counts = self._state, self._entry_messages
        entries = outcome.entries_acked
        acked = state.acked
        if (
            entries <= 0
            or state.batch_states() is not batch
            or state.has_ignored_batch
            or counts.generation != generation
            or (self._md_properties is not properties and self._md_properties != properties)
        ):
            return -1, None
        grown = acked.cardinality() - cardinality
        passed_extra = 0
        new_md = state.mark_delete
        if new_md != md:
            grown += self._ml.number_of_entries(md, new_md, False, True)
            passed_extra = counts.extra_between(md, new_md) if counts.batched else 0
        if grown != entries:
            return -1, None
        if not counts.batched:
            return entries, None
        return entries, entries + acked.extra_messages(counts) - extra + passed_extra

    def _apply(self, plan: AckPlan) -> AckOutcome:
        """Apply ``plan`` to the acknowledgement state and follow its outcome: the mark-delete
        properties, the consumed counter, the read position (caller holds the lock; the caller
        persists). The one place the consumed counter grows, but for the single-call path."""
        properties = self._resolve_properties(plan.properties) if plan.mark_delete is not None else None
        outcome = self._state.apply(plan)
        if properties is not None:
            self._md_properties = properties
        self._consumed += outcome.entries_acked
        if outcome.mark_delete_moved:
            self._follow_mark_delete()
        return outcome

    def _follow_mark_delete(self) -> None:
        """The mark-delete moved: the read position stays after it."""
        md = self._state.mark_delete
        if self._read <= md:
            self._read = self._ml.next_valid_position(md)

    def is_message_deleted(self, position: Position) -> bool:
        """``position <= MD`` or individually deleted (batch partial state is ignored)."""
        with self._lock:
            return self._is_deleted(position)

    def deleted_rows(self, rows: np.ndarray) -> list[bool]:
        """:meth:`is_message_deleted` of each ``(ledger_id, entry_id)`` row of an ``(n, 2)``
        int64 array, under one lock (a bulk look, such as a dispatch of many delayed
        messages). O(n)."""
        with self._lock:
            return self._state.deleted_rows(rows)

    def batch_ack_set(self, position: Position) -> int | None:
        """The remaining (un-acked) batch indexes of a partially acked entry, or None."""
        with self._lock:
            return self._state.batch_ack_set(position)

    def counted_batch_ack_set(self, position: Position) -> int | None:
        """:meth:`batch_ack_set` as the restart figures count it: without batch-index deletion,
        the ack sets the cursor ignored (``AckState.counted_ack_set``)."""
        with self._lock:
            return self._state.counted_ack_set(position)

    def counted_batch_ack_sets(self, rows: np.ndarray) -> list[int | None]:
        """:meth:`counted_batch_ack_set` of each ``(ledger_id, entry_id)`` row of an ``(n, 2)``
        int64 array, under one lock. O(n)."""
        with self._lock:
            return self._state.counted_ack_sets(rows)

    def deleted_batch_indexes(self, position: Position) -> list[int] | None:
        """Acked indexes of a partially acked batch entry, or None when it has no partial state.

        The batch size is the one given to ``delete_batch_indexes`` (else the highest
        remaining index bounds it).
        """
        with self._lock:
            return self._state.deleted_batch_indexes(position)

    def batch_deleted_states(self) -> list[tuple[Position, int]]:
        """Every partial batch state ``(position, remaining bits)``, ascending."""
        with self._lock:
            return list(self._state.batch_states())

    def _resolve_properties(self, properties: Mapping[str, int] | None | KeepProperties) -> dict[str, int]:
        if properties is KEEP_PROPERTIES:
            return self._md_properties
        if properties is None:
            return {}
        return checked_properties(properties)  # type: ignore[arg-type]

    def _after_change(
        self,
        force_persist: bool = False,
        entries_acked: int = -1,
        messages: int | None = None,
        position: Position | None = None,
    ) -> None:
        """Persist (or mark dirty under throttling) after a state change; trim the ML.

        ``entries_acked >= 0``: the change only acknowledged that many whole entries (none
        with batch state, holding ``messages``, default one each), which the state stores
        observe in O(1) (nothing for 0); ``position``: that one entry, when it is one and the
        mark-delete did not move, which the stores follow past the limits without a snapshot
        (``CursorStateStore.observe_entry_acked``). A forced persist (a reset, a close) does
        not ask the limiter."""
        if not self._durable:
            return
        if not force_persist:
            now_ns = self._clock_ns()
            if now_ns < self._persist_due_ns:
                self._throttled(now_ns, entries_acked, messages, position)
                return
        self._persist(acquire=not force_persist)

    def _throttled(
        self, now_ns: int, entries_acked: int, messages: int | None = None, position: Position | None = None
    ) -> None:
        """A change the throttle defers (read at ``now_ns``): mark dirty; the state stores
        observe it (see :meth:`_after_change` for ``entries_acked`` and ``messages``;
        ``position``: the one entry, when the mark-delete did not move). Whole-entry acks go
        to the stores as counts while the unload figure cannot move; past that one entry with
        its position (``CursorStateStore.observe_entry_acked``), anything else, or what a store
        cannot follow, as a snapshot."""
        self._dirty = True
        now = now_ns // 1_000_000
        if entries_acked < 0 or not self._observed:
            self._observe(now)
        elif entries_acked and self._store is not None:
            self._settle_observation()
            store, mirrors = self._store, self._mirrors  # mostly no mirrors: nothing built for them
            ranges = self._state.acked.size()
            # a close that would change branch needs a snapshot whatever the headroom
            # (``unload_branch_moves``); else counts within the headroom, past it the one
            # entry followed by its position, told to every store (then a snapshot for all
            # where one could not follow it)
            if not (
                store.unload_branch_moves(ranges) or (mirrors and any(m.unload_branch_moves(ranges) for m in mirrors))
            ):
                if store.unload_headroom >= entries_acked and not (
                    mirrors and any(m.unload_headroom < entries_acked for m in mirrors)
                ):
                    store.observe_entries_acked(entries_acked, now, messages, ranges)
                    for mirror in mirrors:
                        mirror.observe_entries_acked(entries_acked, now, messages, ranges)
                    return
                if position is not None and entries_acked == 1:
                    one = 1 if messages is None else messages
                    followed = store.observe_entry_acked(position[0], position[1], one, now)
                    for mirror in mirrors:
                        followed = mirror.observe_entry_acked(position[0], position[1], one, now) and followed
                    if followed:
                        return
            self._observe(now)  # the unload figure may change: the stores need the state

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
            self._dirty = True  # deferred acks are throttled changes (the cursor is dirty meanwhile)
            messages, self._unobserved_extra = n + self._unobserved_extra, 0
            self._store.observe_entries_acked(n, self._unobserved_at_ns // 1_000_000, messages)

    def _rearm_throttle(self) -> None:
        """Set the deadline from which a change persists again: ``throttle_mark_delete``
        persists per second (Pulsar's mark-delete rate limit) after the last persist; none
        without a throttle or before the first persist. Under a Pulsar version's rules the
        deadline is the next free ticket of Guava's limiter (:meth:`_follow_rate_rules`).

        Exact in whole milliseconds, as a throttle reading the clock's ``now_ms`` on every
        change: ``now_ms - last < 1000 / rate`` holds for an integer ``now_ms`` exactly when
        ``now_ms < last + ceil(1000 / rate)``, that is when the clock reads fewer nanoseconds
        than that many milliseconds (``now_ms`` is the nanosecond reading floored)."""
        if self._limiter is not None:
            self._persist_due_ns = self._limiter.next_free_ns
            return
        throttle = self._ml.config.throttle_mark_delete
        last = self._last_persist_ms
        if not (throttle > 0) or last is None:
            self._persist_due_ns = -math.inf
            return
        interval_ms = 1000.0 / throttle
        self._persist_due_ns = math.inf if math.isinf(interval_ms) else (last + math.ceil(interval_ms)) * 1_000_000

    def _follow_rate_rules(self) -> None:
        """The rate limit of the ledger's settings: Guava's limiter under a Pulsar version's
        rules (``CursorBehaviour.guava_rate_limiter``), created once with the cursor and given a
        new rate as ``setThrottleMarkDelete`` does (``setRate``; none for a rate of 0), else
        mledger's own throttle; and whether only :meth:`flush` clears the dirty flag."""
        config = self._ml.config
        behaviour = rules_for(config.pulsar_rules).behaviour
        self._dirty_until_flush = behaviour.dirty_until_flush
        rate = config.throttle_mark_delete
        if not (behaviour.guava_rate_limiter and rate > 0):
            self._limiter = None
        elif self._limiter is None:
            from ..core import SmoothBurstyLimiter  # Guava's limiter: only under a Pulsar version's rules

            self._limiter = SmoothBurstyLimiter(rate, self._clock_ns())
        elif self._limiter.rate != rate:
            self._limiter.set_rate(rate, self._clock_ns())
        self._rearm_throttle()

    def ledger_config_changed(self) -> None:
        """The managed ledger's settings were replaced (``ManagedLedger.set_config`` calls this,
        as Pulsar's ``setConfig`` calls ``setThrottleMarkDelete`` on each cursor): the persist
        throttle follows the new ``throttle_mark_delete`` from the next change on."""
        with self._lock:
            self._follow_rate_rules()

    def _observe(self, now_ms: int, unpersisted: bool = False) -> None:
        """Let the state stores see a change they do not persist (what a restart would
        redeliver), from a snapshot. ``unpersisted``: a change no persist will carry by itself
        (``AckOutcome.persist`` False, apache/pulsar#26498): while nothing else waits for the
        flush (the cursor is not dirty) its loss is part of the crash figure's limits part too,
        as only a later persist for another reason writes it."""
        store = self._store
        if store is None:
            return
        self._settle_observation()
        snapshot = self._snapshot()
        limits = unpersisted and not self._dirty
        store.observe(snapshot, now_ms, limits)
        for mirror in self._mirrors:
            mirror.observe(snapshot, now_ms, limits)
        self._observed = True

    def _persist(self, acquire: bool = True) -> None:
        """Persist the state now. ``acquire``: a change or a flush (Pulsar's ``asyncMarkDelete``
        / ``asyncDelete`` past ``tryAcquire``) takes a permit of the limiter; a reset or a close
        does not go through it."""
        if self._store is None:
            return
        if acquire and self._limiter is not None:
            self._limiter.try_acquire(self._clock_ns())  # granted: the deadline had passed
        self._settle_observation()
        snapshot = self._snapshot()
        self._observed = False  # until the stores have taken the write (and observed it)
        self._store.persist(snapshot)
        for mirror in self._mirrors:
            mirror.persist(snapshot)
        self._observed = True
        md = self._persistent_md = self._state.mark_delete
        if not self._dirty_until_flush:
            self._dirty = False  # Pulsar clears isDirty in flush() only
        self._last_persist_ms = self._clock_ns() // 1_000_000
        self._rearm_throttle()
        self._ml.request_trim(self, md)

    def _snapshot(self) -> CursorSnapshot:
        """The state the store persists, taken under the lock (the ack set is lent, not copied).
        Without batch-index deletion its batch states are the partial acks the state ignores
        (``AckState.ignored_batch_states``): no record writes them (the flag is off), the
        restart figures count them."""
        state = self._state
        batch, sizes = state.batch_states(), state.batch_sizes
        if state.has_ignored_batch:
            batch, sizes = state.ignored_batch_states()
        views = self._properties_views
        if views[0] is not self._md_properties or views[1] is not self._cursor_properties:
            md_props, cursor_props = self._md_properties, self._cursor_properties
            views = self._properties_views = (
                md_props,
                cursor_props,
                MappingProxyType(dict(md_props)),
                MappingProxyType(dict(cursor_props)),
            )
        sizes_view = self._sizes_view
        if sizes_view[0] is not sizes:  # a read-only view of the (live) sizes, one per mapping
            sizes_view = self._sizes_view = (sizes, MappingProxyType(sizes))
        return CursorSnapshot(state.mark_delete, state.acked, batch, views[2], views[3], sizes_view[1])

    def flush(self) -> bool:
        """Persist deferred (throttled) state now; True if anything was written.

        Under a Pulsar version's rules, ``ManagedCursorImpl.flush``: the dirty flag is cleared,
        then the write asks the limiter like an acknowledgement (``asyncMarkDelete``); refused,
        the cursor is dirty again and nothing is written."""
        with self._lock:
            if not (self._dirty or self._unobserved_acks) or self._closed:
                return False
            if self._limiter is not None:
                self._dirty = False
                if self._clock_ns() < self._persist_due_ns:
                    self._dirty = True
                    return False
            self._persist()
            return True

    def persist_pending(self) -> bool:
        """Persist the state a throttle holds back, now and outside the rate limit (as a reset
        or a close writes): what the broker's periodic flush will have written by a later
        instant. True if anything was written. Blocks on storage like a persist."""
        with self._lock:
            if not (self._dirty or self._unobserved_acks) or self._closed or self._store is None:
                return False
            self._persist(acquire=False)
            self._dirty = False
            return True

    @property
    def is_dirty(self) -> bool:
        """Whether state changes are waiting for a throttled persist."""
        return self._dirty or self._unobserved_acks > 0

    @property
    def persist_due_ns(self) -> float:
        """The clock reading from which a change persists at once (the next free ticket of
        Guava's limiter under a Pulsar version's rules, else mledger's throttle deadline; -inf:
        every change persists). Changes before it are throttled, and a refusal leaves it as it
        is, so a run of changes before it persists nothing."""
        return self._persist_due_ns

    @property
    def writes_read_lac(self) -> bool:
        """Whether a persist now reads the ledger's last confirmed entry: a state store without
        a cursor ledger writes the node while nothing follows the mark-delete, else creates a
        ledger (``internalMarkDelete`` in ``NoLedger``)."""
        return self._store is not None and any(s.ledger_id is None for s in (self._store, *self._mirrors))

    def bulk_ack_room(self, batch_words: int) -> BulkAckRoom:
        """How many throttled acknowledgements (individual: whole entries, or batch indexes of
        entries of at most ``batch_words`` BitSet words) one change may carry and leave every
        restart figure, maxima included, as one change each would: the least room of the state
        stores (``CursorStateStore.bulk_ack_room``; with mirrors, no batch index where one
        store's unload figure would need following), none while an acknowledgement could be one
        no persist writes (apache/pulsar#26498 on a clean cursor: it sets the limits part by
        itself). O(stores)."""
        with self._lock:
            store = self._store
            if store is None or not self._durable:
                return UNBOUNDED_ROOM
            self._settle_observation()
            if (
                not self._dirty
                and not rules_for(self._ml.config.pulsar_rules).behaviour.batch_ack_without_range_persists
            ):
                return BulkAckRoom(0, 0, 0)
            count = self._state.counted_state_count()  # the snapshot's batch states: ignored ones too
            if not self._mirrors:
                return store.bulk_ack_room(count, batch_words)
            rooms = [s.bulk_ack_room(count, batch_words) for s in (store, *self._mirrors)]
            followed = any(r.unload is not None for r in rooms)  # one figure to follow at most
            return BulkAckRoom(
                min(r.entries for r in rooms),
                max(r.batch_cost for r in rooms),
                0 if followed else min(r.batch_indexes for r in rooms),
                None,
                any(r.shrink_loses_batch for r in rooms),
                max(r.from_ledger for r in rooms),
            )

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
            return self._ml.number_of_entries(read, lac, True, True) - self._state.acked.cardinality_between(read, lac)

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
        md = self._state.mark_delete
        if md >= lac:
            return 0
        return self._ml.number_of_entries(md, lac, False, True) - self._state.acked.cardinality()

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
            md = self._state.mark_delete
            if md >= self._read:
                return 0
            return self._ml.number_of_entries(md, self._read, False, True)

    def individually_deleted_messages(self) -> IndividualDeletedMessages:
        """A snapshot of the individually deleted ranges. O(size of the bitmaps)."""
        with self._lock:
            return IndividualDeletedMessages(self._state.acked.copy())

    def individually_deleted_text(self) -> str:
        """``str(individually_deleted_messages())`` (Pulsar's ``[(3:5..3:7],...]``) without the
        copy: the text is made under the lock. O(ranges)."""
        with self._lock:
            return str(self._state.acked)

    def total_non_contiguous_deleted_messages_range(self) -> int:
        """Number of individually deleted ranges (Pulsar's stat of the same name)."""
        with self._lock:
            return self._state.acked.size()

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
        """Read again from the entry after the mark-delete position; persists nothing (Pulsar's
        ``ManagedCursorImpl.rewind``)."""
        with self.position_reset() as reset:
            reset.rewind()

    def seek(self, position: Position, force: bool = False) -> None:
        """Move the read position to ``position``; at or below MD it goes to the entry after MD.
        Persists nothing (Pulsar's ``ManagedCursorImpl.seek``): state the rate limiter held back
        stays unpersisted; :meth:`reset_cursor` is the reset that persists."""
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
        self._read = self._ml.next_valid_position(self._state.mark_delete)

    def _apply_seek(self, position: Position, force: bool) -> None:
        md = self._state.mark_delete
        if position <= md:
            position = self._ml.next_valid_position(md)
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
        self._state.reset(new_md)
        if self.name != "__compaction":
            self._md_properties = {}
        self._read = new_read if new_read > new_md else ml.next_valid_position(new_md)
        self._consumed = ml.entries_added_counter - self._precise_backlog()

    def _apply_mark_delete_in_reset(self, position: Position, properties: Mapping[str, int] | None) -> None:
        self._apply(AckPlan.cumulative(position, properties=properties))

    def _apply_skip(self, n: int, deleted: IndividualDeletedEntries) -> None:
        ml = self._ml
        extra = self._deleted_entries_to_skip(n) if deleted is IndividualDeletedEntries.EXCLUDE else 0
        md = self._state.mark_delete
        target = ml.position_after_n(md, n + extra, PositionBound.START_EXCLUDED)
        if target < md:
            return  # Pulsar treats the IllegalArgument race as success
        self._apply(AckPlan.cumulative(target))

    def _deleted_entries_to_skip(self, n: int) -> int:
        """Pulsar's ``getNumIndividualDeletedEntriesToSkip``: acked entries passed while
        walking gaps from MD until ``n`` unacked entries are covered."""
        ml = self._ml
        total = 0
        deleted = 0
        start = self._state.mark_delete
        for lower, upper in self._state.acked:
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
        if target <= self._state.mark_delete:
            return
        self._apply(AckPlan.cumulative(target))

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
                    self._persistent_md = self._state.mark_delete
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
        self._state.reset(md)
        self._read = read if read > md else self._ml.next_valid_position(md)

    # -- stats and checks -------------------------------------------------------------------
    def explain_redelivery(self) -> RedeliveryExplanation | None:
        """What a crash and an unload now would redeliver, per rule, with the positions
        (:func:`~mledger.managed_ledger._explain.explain_redelivery`); None for a non-durable
        cursor. Reads storage, writes nothing; under the lock. O(state)."""
        with self._lock:
            if self._store is None:
                return None
            self._settle_observation()
            snapshot = self._snapshot()
            records = self._store.explain_records(snapshot)
            return explain_redelivery(
                self.name,
                snapshot.mark_delete,
                snapshot.acked,
                snapshot.batch,
                snapshot.batch_sizes,
                records,
                self._ml.ledger_infos(),
                self._ml.entry_messages,
            )

    def stats(self) -> CursorStats:
        """A consistent snapshot (frozen) of positions, counters, revision and persistence
        figures, under the lock once. O(ledgers)."""
        with self._lock:
            self._settle_observation()
            state = self._state
            return CursorStats(
                name=self.name,
                durable=self._durable,
                state=self.state.value,
                mark_delete_position=state.mark_delete,
                persistent_mark_delete_position=self._persistent_md,
                read_position=self._read,
                individually_deleted_ranges=state.acked.size(),
                individually_deleted_entries=state.acked.cardinality(),
                batch_partially_acked_entries=state.batch_state_count(),
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
            md, read = self._state.mark_delete, self._read
            assert read > md, f"read position {read} <= mark-delete {md}"
            self._state._check()
            assert self._ignored_acks is self._state.ignored_acks, "delete's bound ignored-acks mapping is stale"
            backlog = self._precise_backlog()
            assert backlog >= 0, f"negative backlog {backlog}"
            assert self._ml.entries_added_counter - self._consumed == backlog, (
                f"counter backlog {self._ml.entries_added_counter - self._consumed} != precise {backlog}"
            )

    def __repr__(self) -> str:
        # Pulsar's toString: durable cursors print "name=", non-durable ones "cursor=".
        if self._durable:
            return f"ManagedCursorImpl{{ledger={self._ml.name}, name={self.name}, ackPos={self._state.mark_delete}, readPos={self._read}}}"
        return f"NonDurableCursorImpl{{ledger={self._ml.name}, cursor={self.name}, ackPos={self._state.mark_delete}, readPos={self._read}}}"

    __str__ = __repr__


__all__ = [
    "CURSOR_INTERNAL_PROPERTY_PREFIX",
    "KEEP_PROPERTIES",
    "CursorLifecycle",
    "IndividualDeletedEntries",
    "ManagedCursor",
]
