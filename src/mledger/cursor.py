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
:class:`~mledger.revision.CursorStateRevisionController`: reads are refused while one runs,
and a read that started before a reset is discarded when it completes.

Blocking: reads block on the store outside the cursor lock. Acks and mark-deletes hold the lock
and, for durable cursors, persist through the cursor's persistence layer (storage I/O) unless
``throttle_mark_delete`` defers it; :meth:`flush` then persists the pending state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np
from sortedcontainers import SortedDict

from .entry import Entry
from .errors import (
    ConcurrentResetError,
    CursorAlreadyClosedError,
    CursorModifyingError,
    InvalidPositionError,
    MarkDeletingMarkedPositionError,
)
from .position import EARLIEST, LATEST, Position
from .ranges import AckRangeSet, ack_set_to_words
from .revision import CursorStateRevisionController, RevisionStats

if TYPE_CHECKING:
    from .cursor_persistence import CursorPersistence
    from .ledger import InitialPosition, ManagedLedger

log = logging.getLogger(__name__)

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class IndividualDeletedEntries(Enum):
    """Whether ``skip_entries`` counts already-acked entries among the ``n`` (Pulsar's enum)."""

    INCLUDE = "Include"
    EXCLUDE = "Exclude"


class CursorState(Enum):
    """Lifecycle states (Pulsar's ``ManagedCursorImpl.State``)."""

    UNINITIALIZED = "Uninitialized"
    NO_LEDGER = "NoLedger"
    OPEN = "Open"
    SWITCHING_LEDGER = "SwitchingLedger"
    CLOSING = "Closing"
    CLOSED = "Closed"
    DELETING = "Deleting"
    DELETED = "Deleted"
    DELETING_FAILED = "DeletingFailed"

    @property
    def is_closed(self) -> bool:
        return self in _CLOSED_STATES


_CLOSED_STATES = frozenset(
    {CursorState.CLOSING, CursorState.CLOSED, CursorState.DELETING, CursorState.DELETED, CursorState.DELETING_FAILED}
)


@dataclass(frozen=True)
class CursorStats:
    """A consistent snapshot of a cursor's positions and counters."""

    name: str
    durable: bool
    state: str
    mark_delete_position: Position
    persistent_mark_delete_position: Position
    read_position: Position
    individually_deleted_ranges: int
    individually_deleted_entries: int
    batch_partially_acked_entries: int
    messages_consumed_counter: int
    backlog: int
    entries_to_read: int
    properties: dict[str, int]
    cursor_properties: dict[str, str]
    revision_num: int
    is_under_revision: bool
    revision: RevisionStats
    persisted_state_bytes: int = 0
    persist_count: int = 0
    persist_entries_written: int = 0
    last_persist_chunks: int = 0
    truncated_ranges: int = 0
    truncated_ranges_total: int = 0
    truncated_batch_indexes: int = 0
    truncated_batch_indexes_total: int = 0
    cursor_ledger_id: int = -1
    dirty: bool = False


class IndividualDeletedMessages:
    """A snapshot of a cursor's individually deleted ranges.

    Iterates open-closed ``(a, b]`` pairs of positions; ``len()`` is the number of ranges;
    ``str()`` prints Pulsar's form ``[(3:5..3:7],(3:9..3:10]]``.
    """

    def __init__(self, ranges: AckRangeSet) -> None:
        self._ranges = ranges

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return self._ranges.size()

    def __contains__(self, position: object) -> bool:
        return position in self._ranges

    def cardinality(self) -> int:
        """Number of individually deleted entries."""
        return self._ranges.cardinality()

    def as_range_set(self) -> AckRangeSet:
        """The underlying (copied) range set."""
        return self._ranges

    def __str__(self) -> str:
        return str(self._ranges)

    def __repr__(self) -> str:
        return f"IndividualDeletedMessages({self})"


class _Keep:
    """Sentinel: keep the last mark-delete properties (Pulsar's ``null`` properties)."""


KEEP_PROPERTIES = _Keep()


class PositionReset:
    """A composite cursor reset, used as a context manager from :meth:`ManagedCursor.position_reset`.

    Inside the ``with`` block a revision is running: reads are refused and other resets fail
    fast, so the caller can change its own state (e.g. a dispatcher's replay queue) knowing no
    read will interleave. Choose the cursor change with one of :meth:`rewind`, :meth:`seek`,
    :meth:`reset_to`, :meth:`mark_delete` or :meth:`edit`; it is applied when the block exits,
    atomically with ending the revision. If the block raises, nothing is applied to the
    cursor (the revision still ends, outdating in-flight reads).
    """

    def __init__(self, cursor: ManagedCursor) -> None:
        self._cursor = cursor
        self._action: Callable[[], None] | None = None
        self.revision_num = -1

    def _set(self, action: Callable[[], None]) -> None:
        if self._action is not None:
            raise ConcurrentResetError("a position reset applies one cursor change; one was already chosen")
        self._action = action

    def rewind(self) -> None:
        """Read again from the entry after the mark-delete position."""
        self._set(self._cursor._apply_rewind)

    def seek(self, position: Position, force: bool = False) -> None:
        """Move the read position (never to or below the mark-delete position)."""
        self._cursor._validate_seek(position)
        self._set(lambda: self._cursor._apply_seek(position, force))

    def reset_to(self, position: Position) -> None:
        """Reset like ``reset_cursor``: read from ``position``, mark-delete just before it."""
        target = self._cursor._reset_target(position)
        self._set(lambda: self._cursor._apply_reset(target))

    def skip_entries(self, n: int, deleted: IndividualDeletedEntries = IndividualDeletedEntries.EXCLUDE) -> None:
        """Mark-delete ``n`` more entries as part of the reset (see ``ManagedCursor.skip_entries``)."""
        if n < 0:
            raise InvalidPositionError(f"cannot skip a negative number of entries: {n}")
        self._set(lambda: self._cursor._apply_skip(n, deleted))

    def clear_backlog(self) -> None:
        """Mark-delete everything up to the last confirmed entry as part of the reset."""
        self._set(self._cursor._apply_clear_backlog)

    def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Move the mark-delete position (forward only) as part of the reset."""
        self._set(lambda: self._cursor._apply_mark_delete_in_reset(position, properties))

    def edit(self, editor: Callable[[ManagedCursor], None]) -> None:
        """Run ``editor(cursor)`` under the cursor lock when the revision ends."""
        self._set(lambda: editor(self._cursor))

    def __enter__(self) -> PositionReset:
        cursor = self._cursor
        cursor._check_open()
        num = cursor._revision.start_revision()
        if num == -1:
            raise ConcurrentResetError(
                f"cursor {cursor.name}: a position reset is already in progress; this one was not applied"
            )
        self.revision_num = num
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        cursor = self._cursor
        action = self._action if exc_type is None else None
        with cursor._lock:
            cursor._revision.end_revision(action)
            if action is not None:
                cursor._after_change(force_persist=True)


class ManagedCursor:
    """A durable or non-durable cursor over a :class:`~mledger.ledger.ManagedLedger`.

    Open with ``ManagedLedger.open_cursor`` / ``open_non_durable_cursor``. Every public
    method is thread-safe (one lock per cursor). Reads block on storage outside the lock;
    acks, mark-deletes and resets of a durable cursor may block on persisting its state.
    """

    def __init__(self, ml: ManagedLedger, name: str, durable: bool) -> None:
        self._ml = ml
        self.name = name
        self._durable = durable
        self._lock = threading.RLock()
        self._state = CursorState.UNINITIALIZED
        self._md = Position(-1, -1)
        self._persistent_md = Position(-1, -1)
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
        self._revision = CursorStateRevisionController(self._lock, ml.clock, name=f"{ml.name}/{name}")
        self._persistence: CursorPersistence | None = None
        self.counts_as_consumer = True
        """False for a system cursor (the broker's ``pulsar.dedup``): it still holds ledger
        trimming back at its mark-delete, but on its own never lets a ledger go."""

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def _open_durable(
        cls,
        ml: ManagedLedger,
        name: str,
        initial_position: InitialPosition,
        properties: dict[str, int] | None,
        cursor_properties: dict[str, str] | None,
    ) -> ManagedCursor:
        from .cursor_persistence import CursorPersistence

        cursor = cls(ml, name, durable=True)
        cursor._persistence = CursorPersistence(cursor)
        recovered = cursor._persistence.recover()
        if recovered is None:
            cursor._initialize_position(initial_position)
            if properties:
                cursor._md_properties = _checked_properties(properties)
            if cursor_properties:
                cursor._cursor_properties = {str(k): str(v) for k, v in cursor_properties.items()}
            cursor._persistence.initialize()
        else:
            cursor._restore(recovered)
        cursor._state = CursorState.NO_LEDGER
        return cursor

    @classmethod
    def _open_non_durable(
        cls,
        ml: ManagedLedger,
        name: str,
        start: Position | None,
        initial_position: InitialPosition,
    ) -> ManagedCursor:
        from .ledger import InitialPosition

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
        cursor._state = CursorState.OPEN
        return cursor

    def _initialize_position(self, initial: InitialPosition) -> None:
        from .ledger import InitialPosition

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

    def _skip_trimmed_ledgers(self, position: Position) -> None:
        """Mark-delete up to ``position``, the last entry of ledgers about to be trimmed
        (Pulsar's ``advanceCursorsIfNecessary``); the mark-delete properties are kept."""
        with self._lock:
            if self._state.is_closed or position <= self._md or position > self._ml._last_confirmed:
                return
            self._set_acknowledged_position(position, self._md_properties)

    def _drop_acked_beyond_lac(self) -> None:
        lac = self._ml.last_confirmed_entry
        self._acked.remove_after(lac.ledger_id, lac.entry_id)

    # -- properties -------------------------------------------------------------------------
    @property
    def ledger(self) -> ManagedLedger:
        return self._ml

    @property
    def is_durable(self) -> bool:
        return self._durable

    @property
    def state(self) -> CursorState:
        return self._state

    @property
    def is_closed(self) -> bool:
        return self._state.is_closed

    @property
    def read_position(self) -> Position:
        """The next position a sequential read returns (always after the mark-delete)."""
        return self._read

    @property
    def mark_delete_position(self) -> Position:
        """Every entry at or before this position is acknowledged."""
        return self._md

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

        self._ml.factory.executor.submit(run)
        return future

    def read_entries_held(self, max_entries: int, max_position: Position | None = None) -> PendingRead:
        """Start a read whose completion the caller drives (dispatchers, tests).

        Returns a :class:`PendingRead`: call ``fetch()`` (storage I/O) and then
        ``complete()``; a reset in between discards it.
        """
        revision_num, plan, examined = self._plan_read(max_entries, max_position)
        return PendingRead(self, revision_num, plan, examined)

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

    def _plan_read(
        self, max_entries: int, max_position: Position | None
    ) -> tuple[int, list[tuple[int, int, int]], Position]:
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        with self._lock:
            self._check_open()
            self._refuse_during_revision("read")
            spans, examined = self._readable_spans(self._read, max_entries, max_position)
            if not spans:
                # Only acked entries up to the limit: move past them now (Pulsar completes such
                # a read empty and advances the read position).
                self._advance_read_past(examined)
            return self._revision.revision_num, spans, examined

    def _readable_spans(
        self, start: Position, max_entries: int, max_position: Position | None
    ) -> tuple[list[tuple[int, int, int]], Position]:
        """Spans ``(ledger, first, last)`` of unacked existing entries from ``start``, and the
        last position examined: the last entry planned when ``max_entries`` were found, else
        the limit (the LAC or ``max_position``), acked entries before it included."""
        ml = self._ml
        limit = ml.last_confirmed_entry
        if max_position is not None and max_position < limit:
            limit = max_position
        spans: list[tuple[int, int, int]] = []
        remaining = max_entries
        ledger_id, entry_id = start
        acked = self._acked
        with ml._lock:
            ledgers = ml._ledgers
            while remaining > 0 and (ledger_id, entry_id) <= limit:
                li = ledgers.get(ledger_id)
                if li is None or entry_id >= li.entries:
                    nxt = ml.next_ledger_id(ledger_id)
                    if nxt is None:
                        break
                    ledger_id, entry_id = nxt, 0
                    continue
                entry_id = max(entry_id, 0)
                entry_id = acked.next_unacked_entry(ledger_id, entry_id)
                if entry_id >= li.entries:
                    continue
                last = li.entries - 1
                if ledger_id == limit[0]:
                    last = min(last, limit[1])
                if entry_id > last:
                    break
                next_acked = acked.next_acked_entry(ledger_id, entry_id)
                if next_acked is not None:
                    last = min(last, next_acked - 1)
                last = min(last, entry_id + remaining - 1)
                spans.append((ledger_id, entry_id, last))
                remaining -= last - entry_id + 1
                entry_id = last + 1
        if remaining == 0:
            return spans, Position(spans[-1][0], spans[-1][2])
        return spans, limit

    def _advance_read_past(self, examined: Position) -> None:
        new_read = self._ml.next_valid_position(examined)
        if new_read > self._read:
            self._read = new_read

    def _fetch(self, plan: list[tuple[int, int, int]]) -> list[Entry]:
        entries: list[Entry] = []
        for ledger_id, first, last in plan:
            entries.extend(self._ml.read_range(ledger_id, first, last))
        return entries

    def _complete_read(
        self,
        revision_num: int,
        plan: list[tuple[int, int, int]],
        entries: list[Entry],
        examined: Position | None = None,
    ) -> list[Entry]:
        with self._lock:
            if self._revision.is_revision_num_outdated(revision_num):
                self._revision.record_discarded_read()
                raise CursorModifyingError(
                    f"cursor {self.name}: read discarded, the cursor was reset while it was in flight"
                )
            if self._state.is_closed:
                raise CursorAlreadyClosedError(f"cursor {self.name} is closed")
            # Past the last entry examined: a read that reached its limit also skips the acked
            # entries after its last entry (testReadEntriesWithSkipDeletedEntries).
            last_ledger, _, last_entry = plan[-1]
            self._advance_read_past(examined if examined is not None else Position(last_ledger, last_entry))
            return [e for e in entries if not self._is_deleted(e.position)]

    # -- acknowledgement --------------------------------------------------------------------
    def mark_delete(
        self,
        position: Position,
        properties: Mapping[str, int] | None | _Keep = None,
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
        position = _as_position(position)
        with self._lock:
            self._check_open()
            if self._revision.is_under_revision:
                raise CursorModifyingError(
                    f"Reset cursor in progress - unable to mark delete position {position}"
                )
            target = self._batch_target(position, ack_set) if ack_set is not None else position
            self._validate_mark_delete_target(target)
            props = self._resolve_properties(properties)
            self._set_acknowledged_position(target, props)
            self._after_change()

    def delete(self, positions: Position | Iterable[Position]) -> None:
        """Individually acknowledge one position or many (the iterable form is bulk).

        Already-deleted positions are ignored. Raises ``InvalidPositionError`` (nothing
        changed) if any position is beyond the last confirmed entry, or above the mark-delete
        but not an entry of this ledger (Pulsar accepts those and then miscounts the backlog).
        O(1) per position.
        """
        if type(positions) is Position:
            with self._lock:
                if self._state.is_closed:
                    raise CursorAlreadyClosedError(f"cursor {self.name} is closed")
                if positions > self._ml._last_confirmed:
                    raise InvalidPositionError(f"Invalid mark deleted position {positions} on {self.name}")
                if positions > self._md:
                    li = self._ml._ledgers.get(positions[0])
                    if li is None or not 0 <= positions[1] < li.entries:
                        raise InvalidPositionError(f"cannot ack {positions} on {self.name}: no such entry")
                    if self._batch and positions in self._batch:
                        self._drop_batch(positions)
                    if self._acked.add(positions[0], positions[1]):
                        self._consumed += 1
                        if positions == self._md_next or self._md_next is None:
                            self._absorb()
                self._after_change()
            return
        self.delete_many(positions)

    def delete_many(self, positions: Iterable[Position] | np.ndarray) -> int:
        """Bulk individual acknowledgement; returns how many entries became acked.

        Accepts positions or an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows.
        Validates everything first: an invalid position raises and changes nothing.
        """
        arr = _positions_array(positions)
        with self._lock:
            self._check_open()
            if arr.shape[0] == 0:
                return 0
            lac = self._ml._last_confirmed
            ledgers, entries = arr[:, 0], arr[:, 1]
            beyond = (ledgers > lac[0]) | ((ledgers == lac[0]) & (entries > lac[1]))
            if beyond.any():
                i = int(np.flatnonzero(beyond)[0])
                raise InvalidPositionError(
                    f"Invalid mark deleted position {ledgers[i]}:{entries[i]} on {self.name}"
                )
            if (entries < 0).any():
                i = int(np.flatnonzero(entries < 0)[0])
                raise InvalidPositionError(f"invalid position {ledgers[i]}:{entries[i]}: negative entry id")
            md_l, md_e = self._md
            above = (ledgers > md_l) | ((ledgers == md_l) & (entries > md_e))
            ledgers, entries = ledgers[above], entries[above]
            added = 0
            if ledgers.size:
                order = np.argsort(ledgers, kind="stable")
                ledgers, entries = ledgers[order], entries[order]
                bounds = np.flatnonzero(np.diff(ledgers)) + 1
                parts = list(zip(np.split(ledgers, bounds), np.split(entries, bounds)))
                for part_l, part_e in parts:  # validate everything before changing anything
                    li = self._ml._ledgers.get(int(part_l[0]))
                    top = int(part_e.max())
                    if li is None or top >= li.entries:
                        bad = top if li is not None else int(part_e[0])
                        raise InvalidPositionError(
                            f"cannot ack {int(part_l[0])}:{bad} on {self.name}: no such entry"
                        )
                for part_l, part_e in parts:
                    added += self._acked.add_many(int(part_l[0]), part_e)
                if self._batch:
                    for p in [p for p in self._batch.keys() if self._acked.contains(p[0], p[1])]:
                        self._drop_batch(p)
                self._consumed += added
                self._absorb()
            self._after_change()
            return added

    def delete_batch_indexes(self, position: Position, indexes: Iterable[int], batch_size: int) -> None:
        """Acknowledge some messages of a batch entry (batch-index ack).

        ``indexes`` must lie in ``[0, batch_size)``. When every index of the entry is acked
        the entry becomes an individually deleted entry. With batch-index deletion disabled
        (``deletion_at_batch_index_level_enabled=False``) nothing happens, as in Pulsar.
        """
        position = _as_position(position)
        if batch_size <= 0:
            raise InvalidPositionError(f"invalid batch size {batch_size} for {position}")
        idx = list(indexes)
        for i in idx:
            if not 0 <= i < batch_size:
                raise InvalidPositionError(
                    f"batch index {i} out of range [0, {batch_size}) for {position}"
                )
        ack_set = (1 << batch_size) - 1
        for i in idx:
            ack_set &= ~(1 << i)
        self.delete_with_ack_set(position, ack_set, batch_size=batch_size)

    def delete_with_ack_set(self, position: Position, ack_set: int, batch_size: int | None = None) -> None:
        """Individually ack with a Pulsar ack set (set bits = indexes still un-acked).

        The ack set is AND-merged into the stored state; an empty result deletes the entry.
        """
        position = _as_position(position)
        if ack_set < 0:
            raise InvalidPositionError(f"invalid ack set {ack_set} for {position}")
        with self._lock:
            self._check_open()
            if position > self._ml._last_confirmed:
                raise InvalidPositionError(f"Invalid mark deleted position {position} on {self.name}")
            if self._is_deleted(position):
                self._drop_batch(position)
                self._after_change()
                return
            if not self._ml.is_valid_position(position):
                raise InvalidPositionError(f"cannot ack {position} on {self.name}: no such entry")
            if ack_set == 0:
                self._drop_batch(position)
                if self._acked.add(position[0], position[1]):
                    self._consumed += 1
                    self._absorb()
                self._after_change()
                return
            if not self._ml.config.deletion_at_batch_index_level_enabled:
                return
            stored = self._batch.get(position)
            merged = ack_set if stored is None else stored & ack_set
            if batch_size is not None:
                self._batch_sizes.setdefault(position, batch_size)
            if merged == 0:
                self._drop_batch(position)
                if self._acked.add(position[0], position[1]):
                    self._consumed += 1
                    self._absorb()
            else:
                self._batch[position] = merged
            self._after_change()

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
    def _batch_target(self, position: Position, ack_set: int) -> Position:
        if ack_set < 0:
            raise InvalidPositionError(f"invalid ack set {ack_set} for {position}")
        ml = self._ml
        if position > ml._last_confirmed:
            raise InvalidPositionError(f"Invalid mark deleted position {position} on {self.name}")
        if ml.config.deletion_at_batch_index_level_enabled and position > self._md:
            stored = self._batch.get(position)
            if stored is None or _lowest_bit(ack_set) > _lowest_bit(stored):
                if ack_set:
                    self._batch[position] = ack_set
        target = ml.previous_position(position)
        for p in list(self._batch.irange(maximum=target, inclusive=(True, False))):
            self._drop_batch(p)
        return target

    def _validate_mark_delete_target(self, target: Position) -> None:
        ml = self._ml
        lac = ml._last_confirmed
        if target > lac:
            md = self._md
            md_entries = ml.ledger_entries(md.ledger_id)
            at_ledger_end = md_entries is not None and md.entry_id + 1 >= md_entries
            if not (at_ledger_end and target.ledger_id == ml.next_ledger_id(lac.ledger_id)):
                raise InvalidPositionError(f"Invalid mark deleted position {target} on {self.name}")
        if target < self._md:
            raise MarkDeletingMarkedPositionError(
                f"Mark deleting an already mark-deleted position. Current mark-delete: {self._md}"
                f" -- attempted mark delete: {target}"
            )

    def _resolve_properties(self, properties: Mapping[str, int] | None | _Keep) -> dict[str, int]:
        if properties is KEEP_PROPERTIES:
            return self._md_properties
        if properties is None:
            return {}
        return _checked_properties(properties)  # type: ignore[arg-type]

    def _set_acknowledged_position(self, new_md: Position, properties: dict[str, int]) -> None:
        """Pulsar's ``setAcknowledgedPosition``: count, absorb holes, trim, fix the read position."""
        old = self._md
        self._md_properties = properties
        if new_md == old:
            return
        ml = self._ml
        skipped = ml.number_of_entries(old, new_md, False, True) - self._acked.cardinality_between(
            old.next(), new_md
        )
        self._consumed += max(skipped, 0)
        self._move_md(new_md)
        self._absorb()

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
                self._md_next = nxt if nxt <= ml._last_confirmed else None
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

    def _after_change(self, force_persist: bool = False) -> None:
        """Persist (or mark dirty under throttling) after a state change; trim the ML."""
        if not self._durable:
            return
        throttle = self._ml.config.throttle_mark_delete
        if throttle > 0 and not force_persist:
            now = self._ml.clock.now_ms()
            if self._last_persist_ms is not None and now - self._last_persist_ms < 1000.0 / throttle:
                self._dirty = True
                return
        self._persist()

    def _persist(self) -> None:
        if self._persistence is None:
            return
        self._persistence.persist()
        self._persistent_md = self._md
        self._dirty = False
        self._last_persist_ms = self._ml.clock.now_ms()
        ledgers = self._ml._ledgers
        if ledgers:
            first_id, first = ledgers.peekitem(0)
            md = self._md
            # The first ledger is consumed once MD is beyond it or at its last entry (Pulsar
            # trims ledger x when the slowest mark-delete is x's last entry).
            if md.ledger_id > first_id or (
                md.ledger_id == first_id and first is not self._ml._current and md.entry_id + 1 >= first.entries
            ):
                self._ml.trim_consumed_ledgers()

    def flush(self) -> bool:
        """Persist deferred (throttled) state now; True if anything was written."""
        with self._lock:
            if not self._dirty or self._state.is_closed:
                return False
            self._persist()
            return True

    @property
    def is_dirty(self) -> bool:
        """Whether state changes are waiting for a throttled persist."""
        return self._dirty

    # -- mark-delete properties ---------------------------------------------------------------
    def put_property(self, key: str, value: int) -> bool:
        """Set one mark-delete property in memory; persisted with the next state write."""
        with self._lock:
            self._md_properties = {**self._md_properties, **_checked_properties({key: value})}
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
        """Set and persist one cursor (subscription) property."""
        with self._lock:
            self._check_open()
            self._cursor_properties[str(key)] = str(value)
            self._persist_cursor_properties()

    def remove_cursor_property(self, key: str) -> bool:
        """Remove and persist one cursor property; True if it existed."""
        with self._lock:
            self._check_open()
            if self._cursor_properties.pop(key, None) is None:
                return False
            self._persist_cursor_properties()
            return True

    def _persist_cursor_properties(self) -> None:
        # Cursor properties live only in ManagedCursorInfo (field 8), as in Pulsar.
        if self._persistence is not None:
            self._persistence.persist_cursor_properties()

    # -- counting ---------------------------------------------------------------------------
    def number_of_entries(self) -> int:
        """Entries still to read: ``[read, LAC]`` minus the acked ones."""
        with self._lock:
            lac = self._ml._last_confirmed
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
        lac = self._ml._last_confirmed
        if self._md >= lac:
            return 0
        return self._ml.number_of_entries(self._md, lac, False, True) - self._acked.cardinality()

    def has_more_entries(self) -> bool:
        """Whether a sequential read would find an entry (Pulsar's ``hasMoreEntries``)."""
        with self._lock:
            lac = self._ml._last_confirmed
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

    def total_non_contiguous_deleted_messages_range(self) -> int:
        """Number of individually deleted ranges (Pulsar's stat of the same name)."""
        with self._lock:
            return self._acked.size()

    # -- resets -----------------------------------------------------------------------------
    def position_reset(self) -> PositionReset:
        """A composite reset: ``with cursor.position_reset() as r: <own state>; r.rewind()``.

        Raises ``ConcurrentResetError`` on entry if another reset is running.
        """
        return PositionReset(self)

    def rewind(self) -> None:
        """Read again from the entry after the mark-delete position."""
        with self.position_reset() as reset:
            reset.rewind()

    def seek(self, position: Position, force: bool = False) -> None:
        """Move the read position to ``position``; at or below MD it goes to the entry after MD."""
        with self.position_reset() as reset:
            reset.seek(_as_position(position), force)

    def reset_cursor(self, position: Position) -> None:
        """Reset read and mark-delete: read from ``position`` (EARLIEST / LATEST allowed), MD
        just before it; acks above are cleared and the mark-delete may move backwards."""
        with self.position_reset() as reset:
            reset.reset_to(_as_position(position))

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
        if position == LATEST or position > ml._last_confirmed:
            return ml.next_valid_position(ml._last_confirmed)
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
        position = _as_position(position)
        self._validate_mark_delete_target(position)
        self._set_acknowledged_position(position, self._resolve_properties(properties))

    def _apply_skip(self, n: int, deleted: IndividualDeletedEntries) -> None:
        from .ledger import PositionBound

        ml = self._ml
        extra = self._deleted_entries_to_skip(n) if deleted is IndividualDeletedEntries.EXCLUDE else 0
        target = ml.position_after_n(self._md, n + extra, PositionBound.START_EXCLUDED)
        if target < self._md:
            return  # Pulsar treats the IllegalArgument race as success
        self._validate_mark_delete_target(target)
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
        target = self._ml._last_confirmed
        if target <= self._md:
            return
        self._set_acknowledged_position(target, {})

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Persist the final state (durable) and close. Idempotent."""
        with self._lock:
            if self._state.is_closed:
                return
            self._state = CursorState.CLOSING
            try:
                if self._persistence is not None:
                    self._persistence.close()
                    self._persistent_md = self._md
                    self._dirty = False
            finally:
                self._state = CursorState.CLOSED
        if not self._durable:
            self._ml._forget_non_durable(self)

    def _delete(self) -> None:
        with self._lock:
            self._state = CursorState.DELETING
            if self._persistence is not None:
                self._persistence.delete()
            self._state = CursorState.DELETED

    def _check_open(self) -> None:
        if self._state.is_closed:
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
        """A consistent snapshot of positions, counters and persistence figures."""
        with self._lock:
            pstats = self._persistence.stats() if self._persistence is not None else {}
            rev = self._revision.stats()
            return CursorStats(
                name=self.name,
                durable=self._durable,
                state=self._state.value,
                mark_delete_position=self._md,
                persistent_mark_delete_position=self._persistent_md,
                read_position=self._read,
                individually_deleted_ranges=self._acked.size(),
                individually_deleted_entries=self._acked.cardinality(),
                batch_partially_acked_entries=len(self._batch),
                messages_consumed_counter=self._consumed,
                backlog=self._precise_backlog(),
                entries_to_read=self.number_of_entries(),
                properties=dict(self._md_properties),
                cursor_properties=dict(self._cursor_properties),
                revision_num=rev.revision_num,
                is_under_revision=rev.is_under_revision,
                revision=rev,
                dirty=self._dirty,
                **pstats,
            )

    def _snapshot_for_persistence(self) -> tuple[Position, AckRangeSet, list[tuple[Position, int]], dict[str, int], dict[str, str]]:
        """State the persistence layer writes, taken under the lock."""
        return self._md, self._acked, list(self._batch.items()), dict(self._md_properties), dict(self._cursor_properties)

    def _check(self) -> None:
        """Assert the cursor invariants (stateful tests call this after every step)."""
        with self._lock:
            md, read, lac = self._md, self._read, self._ml._last_confirmed
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


class PendingRead:
    """A read started under a revision whose I/O and completion the caller drives.

    ``fetch()`` reads the planned entries from storage (may block); ``complete()`` hands them
    over if no reset happened since the read started, else raises ``CursorModifyingError``.
    """

    def __init__(
        self,
        cursor: ManagedCursor,
        revision_num: int,
        plan: list[tuple[int, int, int]],
        examined: Position | None = None,
    ) -> None:
        self.cursor = cursor
        self.revision_num = revision_num
        self.plan = plan
        self.examined = examined
        self._entries: list[Entry] | None = None

    @property
    def positions(self) -> list[Position]:
        """The positions the read will examine."""
        return [Position(lid, e) for lid, first, last in self.plan for e in range(first, last + 1)]

    def is_current(self) -> bool:
        """False once a reset started or completed after this read began: a dispatcher that
        got entries from :meth:`complete` checks this again before handing them to consumers
        (the "half in-flight read" of seeds/002)."""
        return not self.cursor._revision.is_revision_num_outdated(self.revision_num)

    def fetch(self) -> PendingRead:
        """Read the entries from storage (outside the cursor lock)."""
        self._entries = self.cursor._fetch(self.plan) if self.plan else []
        return self

    def complete(self) -> list[Entry]:
        """Hand the entries over and advance the read position, or raise if outdated."""
        if not self.plan:
            return []
        if self._entries is None:
            self.fetch()
        assert self._entries is not None
        return self.cursor._complete_read(self.revision_num, self.plan, self._entries, self.examined)


@dataclass
class RecoveredCursorState:
    """What persistence recovered for a cursor."""

    mark_delete: Position
    acked: AckRangeSet
    batch: dict[Position, int]
    properties: dict[str, int]
    cursor_properties: dict[str, str]


def _as_position(position: object) -> Position:
    if type(position) is Position:
        return position  # type: ignore[return-value]
    try:
        ledger_id, entry_id = position  # type: ignore[misc]
    except (TypeError, ValueError):
        raise InvalidPositionError(f"not a position: {position!r}") from None
    return Position.of(ledger_id, entry_id)


def _positions_array(positions: Iterable[Position] | np.ndarray) -> np.ndarray:
    if isinstance(positions, np.ndarray):
        arr = positions.astype(np.int64, copy=False)
        if arr.ndim != 2 or (arr.size and arr.shape[1] != 2):
            raise InvalidPositionError(f"expected an (n, 2) array of positions, got shape {arr.shape}")
        return arr.reshape(-1, 2)
    items = positions if isinstance(positions, (list, tuple)) else list(positions)
    if not items:
        return np.empty((0, 2), dtype=np.int64)
    from itertools import chain

    try:
        flat = np.fromiter(chain.from_iterable(items), dtype=np.int64, count=2 * len(items))
    except (TypeError, ValueError):
        for p in items:
            _as_position(p)
        raise
    return flat.reshape(-1, 2)


def _checked_properties(properties: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidPositionError(f"invalid mark-delete property name {key!r}")
        if isinstance(value, bool) or not isinstance(value, int) or not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidPositionError(f"mark-delete property {key!r} must be a 64-bit integer, got {value!r}")
        out[key] = int(value)
    return out


def _lowest_bit(bits: int) -> int:
    return (bits & -bits).bit_length() - 1 if bits else 1 << 62


__all__ = [
    "CursorState",
    "CursorStats",
    "IndividualDeletedEntries",
    "IndividualDeletedMessages",
    "KEEP_PROPERTIES",
    "ManagedCursor",
    "PendingRead",
    "PositionReset",
    "RecoveredCursorState",
    "ack_set_to_words",
]
