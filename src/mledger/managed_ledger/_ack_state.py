"""A cursor's acknowledgement state: the one seam every acknowledgement crosses.

Theory of operation
-------------------
:class:`AckState` owns what a cursor knows about acknowledgements (Pulsar's
``ManagedCursorImpl`` fields ``markDeletePosition``, ``individualDeletedMessages`` and
``batchDeletedIndexes``):

* the mark-delete position (MD): every entry at or before it is acknowledged;
* the ack range set: entries above MD acknowledged individually;
* batch states: for partially acknowledged batch entries, the bits of the indexes still
  unacknowledged (Pulsar's ack-set rule: set bit = not yet acked; acks AND into it), with the
  batch size where it is known.

An acknowledgement of any kind is one :class:`AckPlan`, already resolved (whole entries, batch
entries by ack set, or a mark-delete), and :meth:`AckState.apply` takes it in three steps:

1. **validate** the whole plan against the ledger (:meth:`AckState._check_plan`; one
   position is :meth:`AckState._check_entry`, O(1)), raising before anything changes;
2. **apply** it: whole entries into the range set, ack sets AND-merged into the batch states
   (an empty result acknowledges the entry; without ``deletion_at_batch_index_level_enabled``
   a non-empty one is ignored, as Pulsar's ``asyncDelete``), or the mark-delete moved
   (Pulsar's ``setAcknowledgedPosition``);
3. **settle** (:meth:`AckState._absorb`): while the entry right after MD (which may be the
   first of the next ledger) is acknowledged, MD moves to the end of its run; batch states
   at or below MD go.

and returns one frozen :class:`AckOutcome`: what became acknowledged, the mark-delete before
and after, how many entries that acknowledged. :meth:`AckState.ack_entry` is the same three
steps, sharing their methods, for one whole entry: the single-call path, which allocates no
plan and no outcome (its result is the outcome's :data:`ACKED` / :data:`MARK_DELETE_MOVED` /
:data:`BATCH_STATE_DROPPED` flags; a property test checks that it leaves the state the
one-entry plan leaves, with the same outcome), and :meth:`AckState.apply` takes a plan of one
whole entry through it. A plan of more than :data:`SCALAR_ROWS` whole entries is checked over
one sort of its rows and added one bitmap per ledger; property tests check that both
shortcuts leave the state, the outcome and the refusal of the position-by-position path.

The cursor (:class:`~mledger.managed_ledger.ManagedCursor`) calls these under its lock and
keeps what is not acknowledgement state: lifecycle, reads and the read position, resets, the
persist throttle, properties, the consumed counter, stats. A rule of a Pulsar version that
changes what an acknowledgement does lives here (the ack set ignored without batch-index
deletion, kept aside for the restart figures: :meth:`AckState.ignored_batch_states`) or in the
outcome the cursor's persist step reads (:attr:`AckOutcome.persist`: apache/pulsar#26498),
and in the cursor state store: never in a second path.

Invariants (:meth:`AckState._check`): every acknowledged position lies strictly above MD and
at or below the last confirmed entry; the entry right after MD is not acknowledged (it was
absorbed); batch states lie above MD, are non-empty and are not of acknowledged entries; the
batch sizes known are of entries with a batch state; so are the ignored partial acks' entries
and sizes; the cached next position after MD is the ledger's; the cached view of the batch
states is theirs.

Not thread-safe: the owning cursor serialises every call under its lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sortedcontainers import SortedDict, SortedList

from ..core import (
    MAX_ENTRY_ID,
    AckRangeSet,
    InvalidPositionError,
    MarkDeletingMarkedPositionError,
    Position,
    rules_for,
)
from ._cursor_args import check_ack_set, lowest_bit, positions_array, to_position
from ._ledger_view import LedgerView

if TYPE_CHECKING:
    from ._cursor_snapshot import KeepProperties

__all__ = [
    "ACKED",
    "BATCH_STATE_DROPPED",
    "MARK_DELETE_MOVED",
    "AckOutcome",
    "AckPlan",
    "AckState",
    "IgnoredBatchStates",
    "IgnoredChanges",
]

ACKED = 1
""":meth:`AckState.ack_entry` flag: the entry was not acknowledged before and is now."""
MARK_DELETE_MOVED = 2
""":meth:`AckState.ack_entry` flag: the mark-delete position moved (the entry closed a hole)."""
BATCH_STATE_DROPPED = 4
""":meth:`AckState.ack_entry` flag: the entry had a partial batch state, which went with it."""

SCALAR_ROWS = 16
"""Plans with at most this many whole entries are checked and applied position by position;
larger ones with numpy, vectorised (the same rules; a plan the vectorised checks do not pass
goes position by position, which raises the same error whatever the plan's size)."""

_NO_ROWS = np.empty((0, 2), dtype=np.int64)
_NO_ROWS.flags.writeable = False

_Group = tuple[int, np.ndarray, int, int]
"""Checked whole entries of one ledger: its id, their entry ids (an ascending ``uint32`` array,
read-only), the lowest and the highest."""


@dataclass(frozen=True, slots=True)
class AckPlan:
    """One acknowledgement, resolved, as :meth:`AckState.apply` takes it (through
    ``ManagedCursor.acknowledge``): either individual (whole entries and batch entries by ack
    set) or cumulative (a mark-delete, with the ack set of a batch entry acknowledged in part).

    Build with :meth:`of` or :meth:`cumulative`, which check the shapes (positions,
    non-negative ack sets); the cursor checks the positions against its ledger when it applies
    the plan. O(entries) to build.
    """

    entries: np.ndarray = field(default_factory=lambda: _NO_ROWS)
    """Whole entries: an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows."""
    ack_sets: tuple[tuple[Position, int, int | None], ...] = ()
    """``(entry, ack set, batch size or None)``: set bits are the indexes still un-acked."""
    mark_delete: Position | None = None
    """Cumulative: acknowledge everything up to and including this position."""
    mark_delete_ack_set: int | None = None
    """With :attr:`mark_delete`: the indexes of the batch entry at ``mark_delete`` still
    un-acked; the mark-delete then goes to the entry before it."""
    mark_delete_names_entry: bool = False
    """With :attr:`mark_delete`: it is a message's entry (a consumer's cumulative ack), refused
    like an individual ack unless it is an entry of the ledger; otherwise Pulsar's
    ``markDelete`` rule applies (any position up to the last confirmed entry)."""
    properties: Mapping[str, int] | KeepProperties | None = None
    """With :attr:`mark_delete`: the mark-delete properties (PIP-6 ``LongProperty``; None: an
    empty map; ``KEEP_PROPERTIES``: the last ones)."""

    @classmethod
    def of(
        cls,
        entries: Iterable[Position] | np.ndarray | None = None,
        ack_sets: Iterable[tuple[Position, int, int | None]] = (),
    ) -> AckPlan:
        """An individual acknowledgement of ``entries`` (positions or an ``(n, 2)`` array) and
        ``ack_sets``; raises ``InvalidPositionError`` for something that is not a position or a
        negative ack set."""
        rows = _NO_ROWS if entries is None else positions_array(entries)
        if not ack_sets:
            return cls(rows)
        items = tuple((to_position(p), ack_set, size) for p, ack_set, size in ack_sets)
        for position, ack_set, _ in items:
            check_ack_set(position, ack_set)
        return cls(rows, items)

    @classmethod
    def cumulative(
        cls,
        position: Position,
        *,
        ack_set: int | None = None,
        properties: Mapping[str, int] | KeepProperties | None = None,
        names_entry: bool = False,
    ) -> AckPlan:
        """A cumulative acknowledgement up to ``position`` (see the attributes); raises
        ``InvalidPositionError`` for something that is not a position or a negative ack set."""
        position = to_position(position)
        if ack_set is not None:
            check_ack_set(position, ack_set)
        return cls(
            mark_delete=position,
            mark_delete_ack_set=ack_set,
            mark_delete_names_entry=names_entry,
            properties=properties,
        )

    @property
    def is_empty(self) -> bool:
        """Nothing to acknowledge."""
        return self.mark_delete is None and not self.entries.shape[0] and not self.ack_sets


@dataclass(frozen=True, slots=True)
class AckOutcome:
    """What one :class:`AckPlan` changed (frozen; ``ManagedCursor.acknowledge`` returns it)."""

    mark_delete_before: Position
    mark_delete_after: Position
    entries_acked: int = 0
    """Entries acknowledged now that were not before: acknowledged individually, and those the
    mark-delete passed that were not (the growth of ``messages_consumed_counter``)."""
    deleted: np.ndarray = field(default_factory=lambda: _NO_ROWS)
    """The entries the plan leaves fully acknowledged individually, of those above the
    mark-delete it started from: every whole entry it names there (acknowledged before or not:
    a bulk plan is applied without telling them apart; :attr:`entries_acked` counts the new
    ones) and every batch entry whose last indexes it acknowledged. ``(n, 2)`` int64 rows.
    Those the mark-delete passes are not listed (see :attr:`mark_delete_before` /
    :attr:`mark_delete_after`)."""
    batch_acked: tuple[tuple[Position, int], ...] = ()
    """``(entry, bits)`` per batch entry left partially acknowledged whose batch state the plan
    changed: the bits of the indexes acknowledged now (below the batch size where it is known)."""
    persist: bool = True
    """Whether the change asks for a persist (the throttled mark-delete, which else marks the
    cursor dirty); when False the cursor does neither and the change rides along with the next
    persist: under a Pulsar version's rules, an individual acknowledgement that leaves no range
    and does not move the mark-delete (``ManagedCursorImpl.asyncDelete`` returns when
    ``individualDeletedMessages`` is empty, before the limiter and without ``isDirty``:
    apache/pulsar#26498, :meth:`AckState.persists_nothing`)."""

    @property
    def mark_delete_moved(self) -> bool:
        """Whether the mark-delete position moved."""
        return self.mark_delete_after != self.mark_delete_before


class IgnoredChanges:
    """The positions whose ignored partial acks (:meth:`AckState.ignored_batch_states`) changed,
    in order, each change a generation: a reader that counted the states at one generation
    counts again only the positions changed since (:meth:`since`). Forgotten whole (every
    reader then counts all again) when longer than twice the states plus 256, and at a reset:
    O(1) amortised per change."""

    __slots__ = ("_log", "_start")

    def __init__(self) -> None:
        self._log: list[Position] = []
        self._start = 0  # the generation of the first position in the log

    @property
    def generation(self) -> int:
        """The generation now (one more per change noted)."""
        return self._start + len(self._log)

    def since(self, generation: int) -> list[Position] | None:
        """The positions changed after ``generation`` (repeats included), or None when the
        journal no longer holds them. O(changes since)."""
        if not self._start <= generation <= self._start + len(self._log):
            return None
        return self._log[generation - self._start :]

    def note(self, position: Position, states: int) -> None:
        """``position``'s ignored acks (or batch size) changed; ``states``: how many are kept."""
        log = self._log
        log.append(position)
        if len(log) > 2 * states + 256:
            self.forget()

    def forget(self) -> None:
        """Every state may have changed (a reset, or a journal grown long)."""
        self._start += len(self._log) + 1
        self._log.clear()


class IgnoredBatchStates(tuple[tuple[Position, int], ...]):
    """The ignored partial acks as batch states ``(position, un-acked bits)``, ascending (a
    tuple), with the journal of their changes (``changes``) at ``generation``, and the live
    states (``live``: position -> un-acked bits, equal to the tuple while ``generation`` is the
    journal's; the ack state's own map, lent: read only). The restart figures count only the
    states changed since their last count."""

    changes: IgnoredChanges
    generation: int
    live: Mapping[Position, int]

    def __new__(
        cls, pairs: Iterable[tuple[Position, int]], changes: IgnoredChanges, live: Mapping[Position, int]
    ) -> IgnoredBatchStates:
        view = super().__new__(cls, pairs)
        view.changes, view.generation, view.live = changes, changes.generation, live
        return view

    def __getnewargs__(self) -> tuple[tuple[tuple[Position, int], ...], IgnoredChanges, Mapping[Position, int]]:
        return tuple(self), self.changes, self.live  # for copy and pickle

    @property
    def is_current(self) -> bool:
        """Whether ``live`` still holds these very states (no change since). O(1)."""
        return self.generation == self.changes.generation


class AckState:
    """A cursor's acknowledgement state (see the module docstring). Not thread-safe.

    ``ml`` is the cursor's ledger; the state starts with mark-delete ``mark_delete`` and
    nothing acknowledged above it; ``name`` (the cursor's) is what its refusals name."""

    __slots__ = (
        "_acked",
        "_batch",
        "_batch_sizes",
        "_batch_view",
        "_ignored",
        "_ignored_changes",
        "_ignored_pairs",
        "_ignored_sizes",
        "_ignored_view",
        "_ledger_list",
        "_md",
        "_md_next",
        "_ml",
        "_name",
    )

    def __init__(self, ml: LedgerView, mark_delete: Position, name: str = "") -> None:
        self._ml = ml
        self._name = name
        self._ledger_list = ml.ledger_list  # live: O(1) validation of an entry, no call
        self._md = mark_delete
        self._md_next: Position | None = None  # cached next_valid_position(MD) while <= LAC
        self._acked = AckRangeSet()
        self._acked.weigh(ml.entry_messages)  # the restart figures count messages, not entries
        self._batch: SortedDict = SortedDict()  # Position -> int bitset of un-acked indexes
        self._batch_sizes: dict[Position, int] = {}
        self._batch_view: tuple[tuple[Position, int], ...] | None = ()  # None: to build again
        # Without batch-index deletion: the partial acks ignored (un-acked bits, AND-merged) of
        # entries above MD not acknowledged whole, kept so as each change goes (an entry leaves
        # when it is acknowledged whole or MD passes it), and their batch sizes where known
        self._ignored: SortedDict = SortedDict()
        self._ignored_sizes: dict[Position, int] = {}
        self._ignored_changes = IgnoredChanges()
        self._ignored_pairs = SortedList()  # the states as (position, bits) pairs, ascending
        self._ignored_view: IgnoredBatchStates | None = None  # None: to build again

    # -- views ------------------------------------------------------------------------------
    @property
    def mark_delete(self) -> Position:
        """Every entry at or before this position is acknowledged."""
        return self._md

    @property
    def acked(self) -> AckRangeSet:
        """The entries above the mark-delete acknowledged individually: the state's own range
        set, lent (the caller holds the cursor's lock and does not change it)."""
        return self._acked

    @property
    def batch_sizes(self) -> Mapping[Position, int]:
        """Batch sizes of partially acknowledged entries where they are known (lent)."""
        return self._batch_sizes

    def is_deleted(self, position: Position) -> bool:
        """``position <= MD`` or acknowledged individually (a partial batch state is not). O(1)."""
        return position <= self._md or self._acked.contains(position[0], position[1])

    def deleted_rows(self, rows: np.ndarray) -> list[bool]:
        """:meth:`is_deleted` of each ``(ledger_id, entry_id)`` row of an ``(n, 2)`` array:
        the mark-delete compared in bulk, the range set asked for the rows above it only.
        O(n) plus O(1) per row above the mark-delete."""
        if not len(rows):
            return []
        contains = self._acked.contains
        md = self._md
        ledger_ids, entry_ids = rows.T.tolist()  # two flat lists: cheaper than a list of rows
        return [(lid, eid) <= md or contains(lid, eid) for lid, eid in zip(ledger_ids, entry_ids, strict=True)]

    def counted_ack_sets(self, rows: np.ndarray) -> list[int | None]:
        """:meth:`counted_ack_set` of each ``(ledger_id, entry_id)`` row of an ``(n, 2)`` array.
        O(n), in C when the state holds batch states or ignored acks but not both."""
        ignored, batch = self._ignored, self._batch
        keys = map(tuple, rows.tolist())  # a tuple hashes and compares as its Position
        if not (ignored and batch):
            return list(map((ignored or batch).get, keys))
        out: list[int | None] = []
        for key in keys:
            kept = ignored.get(key)
            out.append(batch.get(key) if kept is None else kept)
        return out

    def batch_ack_set(self, position: Position) -> int | None:
        """The un-acked index bits of a partially acknowledged entry, None without a batch state."""
        return self._batch.get(position)

    def counted_ack_set(self, position: Position) -> int | None:
        """The un-acked index bits of an entry not acknowledged whole as the restart figures
        count them: its batch state, or without batch-index deletion the ack sets the state
        ignored (AND-merged; every bit clear when each index was acknowledged on its own, which
        the figures count as the whole batch acknowledged); None without either. O(log batch
        states)."""
        kept = self._ignored.get(position)
        return self._batch.get(position) if kept is None else kept

    def batch_states(self) -> tuple[tuple[Position, int], ...]:
        """Every batch state ``(position, un-acked bits)``, ascending. O(batch states) after a
        change of them, O(1) else (the same tuple)."""
        view = self._batch_view
        if view is None:
            batch = self._batch
            positions = list(batch)  # in C: a SortedDict's keys, then dict lookups
            view = self._batch_view = tuple(zip(positions, map(batch.__getitem__, positions), strict=True))
        return view

    @property
    def has_ignored_batch(self) -> bool:
        """Whether partial acks were ignored (batch-index deletion off) since the last reset."""
        return bool(self._ignored)

    @property
    def ignored_acks(self) -> Mapping[Position, int]:
        """The ignored partial acks (see :meth:`ignored_batch_states`), live and read-only: the
        same mapping for the state's life, so a caller on a hot path binds it once and asks
        its truth (``has_ignored_batch`` without a call)."""
        return self._ignored

    def ignored_batch_states(self) -> tuple[tuple[tuple[Position, int], ...], dict[Position, int]]:
        """The partial acks ignored without batch-index deletion (Pulsar's cursor has no
        ``batchDeletedIndexes`` then: ``asyncDelete`` skips a non-empty ack set,
        ``ackBatchPosition`` moves the mark-delete to the entry before) that still matter: of
        entries above the mark-delete not acknowledged whole, as batch states ``(position,
        un-acked bits)`` ascending, and their batch sizes where known. The whole entry comes
        back after any restart although its consumer acknowledged those messages; only the
        restart figures read this, and the journal of the changes the tuple carries (an
        internal subclass of tuple; to a caller, a tuple). O(ignored entries) in C to copy the
        states after a change, O(1) else (the same tuple); the sizes are lent (the caller holds
        the cursor's lock)."""
        view = self._ignored_view
        if view is None:  # changed since the last call: built again (the same tuple until then)
            ignored = self._ignored
            # in C: the pairs kept as each state changed
            view = self._ignored_view = IgnoredBatchStates(self._ignored_pairs, self._ignored_changes, ignored)
        return view, self._ignored_sizes

    def _ignore(self, position: Position, ack_set: int, size: int | None) -> None:
        """Keep an ack set the state ignores (AND-merged), for :meth:`ignored_batch_states`,
        of an entry not acknowledged whole (the caller checked: :meth:`is_deleted` False).
        O(log ignored entries)."""
        ignored = self._ignored
        kept = ignored.get(position)
        remaining = ignored[position] = ack_set if kept is None else ack_set & kept
        if remaining != kept:
            if kept is not None:
                self._ignored_pairs.remove((position, kept))
            self._ignored_pairs.add((position, remaining))
        self._ignored_view = None
        self._ignored_changes.note(position, len(ignored))
        if size:
            self._ignored_sizes[position] = size

    def _forget_ignored(self, position: Position) -> None:
        """``position`` is acknowledged whole: its ignored partial acks no longer matter."""
        kept = self._ignored.pop(position, None)
        if kept is not None:
            self._ignored_pairs.remove((position, kept))
            self._ignored_view = None
            self._ignored_changes.note(position, len(self._ignored))
            self._ignored_sizes.pop(position, None)

    def _forget_ignored_up_to(self, md: Position) -> None:
        """MD moved to ``md``: the ignored partial acks at or below it no longer matter.
        O(log ignored entries + those forgotten)."""
        for p in list(self._ignored.irange(maximum=md)):
            self._forget_ignored(p)

    def persists_nothing(self) -> bool:
        """Whether an individual acknowledgement that leaves this state, and did not move the
        mark-delete, persists nothing of its own: under a Pulsar version's rules
        (``CursorBehaviour.batch_ack_without_range_persists`` False) when no range is left
        (apache/pulsar#26498). O(1)."""
        return self._acked.is_empty() and (
            not rules_for(self._ml.config.pulsar_rules).behaviour.batch_ack_without_range_persists
        )

    def batch_state_count(self) -> int:
        """How many entries are partially acknowledged. O(1)."""
        return len(self._batch)

    def counted_state_count(self) -> int:
        """How many entries the restart figures count as partially acknowledged: those with a
        batch state, or (without batch-index deletion) with ack sets ignored. O(1)."""
        return len(self._batch) + len(self._ignored)

    def deleted_batch_indexes(self, position: Position) -> list[int] | None:
        """Acknowledged indexes of a partially acknowledged entry (below its batch size where
        known, else below its highest un-acked index + 1), None without a batch state."""
        remaining = self._batch.get(position)
        if remaining is None:
            return None
        size = self._batch_sizes.get(position, remaining.bit_length())
        return [i for i in range(size) if not (remaining >> i) & 1]

    # -- the seam ---------------------------------------------------------------------------
    def apply(self, plan: AckPlan) -> AckOutcome:
        """Validate ``plan`` whole, apply it, settle the mark-delete; return what it changed
        (a plan of one whole entry through :meth:`ack_entry`, its outcome from the flags).

        Raises ``InvalidPositionError`` (a position beyond the last confirmed entry, or above
        the mark-delete but no entry of the ledger), ``MarkDeletingMarkedPositionError`` (a
        mark-delete before the current one), and changes nothing then. O(entries) plus
        O(ranges touched); a mark-delete O(ledgers it passes).
        """
        before = self._md
        if plan.entries.shape[0] == 1 and plan.mark_delete is None and not plan.ack_sets:
            rows = plan.entries  # one whole entry: the single-call path, and its outcome
            position = Position._make(rows.tolist()[0])
            flags = self.ack_entry(position)
            persist = self._md != before or not self.persists_nothing()
            return AckOutcome(before, self._md, flags & ACKED, rows if position > before else _NO_ROWS, persist=persist)
        target, positions, groups, named = self._check_plan(plan)
        if target is not None:
            if plan.mark_delete is not None and plan.mark_delete_ack_set is not None:
                self._keep_batch_target(plan.mark_delete, plan.mark_delete_ack_set, target)
            passed = self._advance_mark_delete(target)
            return AckOutcome(before, self._md, passed)
        added = self._add_positions(positions) if positions else self._add_groups(groups)
        if not plan.ack_sets:
            if added:
                self._absorb()
            persist = self._md != before or not self.persists_nothing()
            return AckOutcome(before, self._md, added, named, persist=persist)
        batch_acked: dict[Position, int] = {}
        new = self._merge_ack_sets(plan.ack_sets, batch_acked)
        added += len(new)
        if added:
            self._absorb()
        # the named rows, then the batch entries completed: one array built, in one call
        rows = np.concatenate((named, new)) if new else named
        persist = self._md != before or not self.persists_nothing()
        return AckOutcome(before, self._md, added, rows, tuple(batch_acked.items()), persist)

    def ack_entry(self, position: Position) -> int:
        """:meth:`apply` of one whole entry, for the single-call path: the same steps (the
        validation, :meth:`_check_entry`, runs when its one dictionary lookup, made here inline,
        finds no such entry; :meth:`_drop_batch`; :meth:`_absorb`), without a plan or an outcome
        object. Returns the outcome's flags: 0 when nothing changed, else :data:`ACKED`, with
        :data:`MARK_DELETE_MOVED` and :data:`BATCH_STATE_DROPPED` as they happened. Raises what
        :meth:`apply` raises. O(1) unless the mark-delete moves."""
        if position <= self._md:
            if position > self._ml.last_confirmed_entry:
                raise self._refusal(position)
            return 0
        ledger_id, entry_id = position
        info = self._ledger_list.get(ledger_id)  # _check_entry's one lookup, without the call
        if info is None or not 0 <= entry_id < info.entries:
            self._check_entry(position)  # raises: the validation step says why
        flags = ACKED
        if self._batch and position in self._batch:
            self._drop_batch(position)
            flags = ACKED | BATCH_STATE_DROPPED
        if not self._acked.add(ledger_id, entry_id):
            return 0
        if self._ignored:
            self._forget_ignored(position)
        if (position == self._md_next or self._md_next is None) and self._absorb():
            return flags | MARK_DELETE_MOVED
        return flags

    def _advance_mark_delete(self, new_md: Position) -> int:
        """Move the mark-delete forward to ``new_md`` (Pulsar's ``setAcknowledgedPosition``;
        the caller checked it): forget what it passes, then absorb; return how many entries it
        acknowledged that were not before. O(ledgers passed)."""
        old = self._md
        if new_md == old:
            return 0
        passed = self._ml.number_of_entries(old, new_md, False, True) - self._acked.cardinality_between(
            old.next(), new_md
        )
        self._set_mark_delete(new_md)
        self._absorb()
        return max(passed, 0)

    # -- resets and recovery (the cursor's own operations) ----------------------------------
    def reset(self, mark_delete: Position) -> None:
        """Forget every acknowledgement above ``mark_delete`` and put the mark-delete there (a
        cursor reset or a fresh cursor). O(ledgers acknowledged)."""
        self._md = mark_delete
        self._md_next = None
        self._acked.clear()
        self._batch.clear()
        self._batch_view = ()
        self._batch_sizes.clear()
        self._ignored.clear()
        self._ignored_pairs.clear()
        self._ignored_sizes.clear()
        self._ignored_view = None
        self._ignored_changes.forget()

    def restore(self, mark_delete: Position, acked: AckRangeSet, batch: Mapping[Position, int]) -> None:
        """Take a recovered state (the state takes ownership of ``acked``): what lies at or
        below ``mark_delete`` or beyond the last confirmed entry is dropped, empty batch states
        too. O(size of the state)."""
        self.reset(mark_delete)
        lac = self._ml.last_confirmed_entry
        acked.remove_at_most(mark_delete.ledger_id, mark_delete.entry_id)
        acked.remove_after(lac.ledger_id, lac.entry_id)
        self._acked = acked
        acked.weigh(self._ml.entry_messages)
        self._batch.update((p, bits) for p, bits in batch.items() if p > mark_delete and bits)
        self._batch_view = None

    # -- step 1: validation -----------------------------------------------------------------
    def _check_plan(self, plan: AckPlan) -> tuple[Position | None, list[Position], list[_Group], np.ndarray]:
        """Validate the whole plan; raise before anything changes. Returns what applying it
        needs: a cumulative plan's mark-delete target, else the whole entries above MD as
        positions (a small plan, or one the vectorised checks do not pass) or as entry ids per
        ledger (vectorised), and as rows."""
        lac = self._ml.last_confirmed_entry
        position = plan.mark_delete
        if position is not None:
            if plan.mark_delete_names_entry and position > self._md:
                self._check_entry(position)
            if plan.mark_delete_ack_set is None:
                target = position
            else:
                if position > lac:
                    raise self._beyond_lac(position)
                target = self._ml.previous_position(position)
            self._check_mark_delete_target(target)
            return target, [], [], _NO_ROWS
        rows = plan.entries
        checked = self._check_rows(rows, lac) if rows.shape[0] > SCALAR_ROWS else None
        if checked is not None:
            groups, named = checked
            positions: list[Position] = []
        else:
            groups = []
            positions = [p for p in Position.from_rows(rows) if self._check_above_md(p, lac)]
            if len(positions) == rows.shape[0]:
                named = rows
            else:
                named = np.array(positions, dtype=np.int64).reshape(-1, 2) if positions else _NO_ROWS
        for item in plan.ack_sets:
            self._check_above_md(item[0], lac)
        return None, positions, groups, named

    def _check_mark_delete_target(self, target: Position) -> None:
        """Raise unless the mark-delete may move to ``target`` (Pulsar's ``asyncMarkDelete``
        checks): ``InvalidPositionError`` beyond the last confirmed entry (but for the first
        entry of the next ledger when MD ends its ledger), ``MarkDeletingMarkedPositionError``
        before the current mark-delete. O(1)."""
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

    def _check_above_md(self, position: Position, lac: Position) -> bool:
        """Validate one position of an individual acknowledgement; whether it lies above MD."""
        if position <= self._md:
            if position > lac:
                raise self._refusal(position)
            return False
        self._check_entry(position)
        return True

    def _check_entry(self, position: Position) -> None:
        """Raise unless ``position`` is an entry of a ledger in the ledger list (whose counts
        cover only confirmed entries, so it is at or below the last confirmed entry; a trimmed
        ledger's entry is refused). O(1): one dictionary lookup."""
        info = self._ledger_list.get(position[0])
        if info is None or not 0 <= position[1] < info.entries:
            raise self._refusal(position)

    def _check_rows(self, rows: np.ndarray, lac: Position) -> tuple[list[_Group], np.ndarray] | None:
        """The checks of :meth:`_check_above_md` over an ``(n, 2)`` int64 array at once
        (numpy): the entry ids above MD grouped by ledger, ascending, and the rows above MD; or
        None when a row does not pass them, or an id does not fit in 32 bits, for the
        position-by-position path to raise (or skip a row at or below MD).

        Exact: ids below 2**32 as ``ledger_id << 32 | entry_id`` keys sort in position order
        (a negative id, or a ledger id past 31 bits, makes a negative key: refused here), so MD
        and LAC are compared with the keys' bounds, and one ledger's keys are a slice whose
        ends are its lowest and highest entry; a row passes here only if
        :meth:`_check_above_md` passes it (above MD: an entry of its ledger; else not beyond
        LAC). O(n log n) in C, O(ledgers) in Python."""
        # ufuncs and methods called directly: numpy's Python wrappers cost more than the work
        if rows.dtype != np.int64 or np.maximum.reduce(rows, axis=None) > MAX_ENTRY_ID:  # an id past 32 bits
            return None
        ordered = rows[:, 0] << 32
        ordered |= rows[:, 1]  # negative for a negative id (or a ledger id past 31 bits)
        ordered.sort()
        ledgers = ordered >> 32
        cuts = [0, *[cut + 1 for cut in (ledgers[1:] != ledgers[:-1]).nonzero()[0].tolist()], ordered.size]
        # each ledger's lowest and highest key, in one gather
        bounds = ordered[[0, *[i for cut in cuts[1:-1] for i in (cut - 1, cut)], -1]].tolist()
        first = bounds[0]
        if first < 0:
            return None
        md_key = (self._md[0] << 32) + self._md[1]
        if first <= md_key:
            cut = int(np.searchsorted(ordered, md_key, side="right"))
            if ordered[cut - 1] > (lac[0] << 32) + lac[1]:
                return None  # at or below MD but beyond LAC: refused
            if cut == ordered.size:
                return [], _NO_ROWS
            above = ((rows[:, 0] << 32) | rows[:, 1]) > md_key
            return self._check_rows(rows[above], lac)  # the rows above MD, in their order
        entry_ids = ordered.astype(np.uint32)  # the keys' low 32 bits
        entry_ids.flags.writeable = False  # the range set may keep slices of it
        ledger_list = self._ledger_list
        groups: list[_Group] = []
        for i, (start, end) in enumerate(itertools.pairwise(cuts)):
            low, high = bounds[2 * i], bounds[2 * i + 1]
            ledger_id = low >> 32
            info = ledger_list.get(ledger_id)
            if info is None or high & MAX_ENTRY_ID >= info.entries:
                return None  # above MD, no entry of its ledger: refused
            groups.append((ledger_id, entry_ids[start:end], low & MAX_ENTRY_ID, high & MAX_ENTRY_ID))
        return groups, rows

    def _refusal(self, position: Position) -> InvalidPositionError:
        if position > self._ml.last_confirmed_entry:
            return self._beyond_lac(position)
        return self._no_such_entry(position)

    def _beyond_lac(self, position: Position) -> InvalidPositionError:
        return InvalidPositionError(f"Invalid mark deleted position {position} on {self._name}", position=position)

    def _no_such_entry(self, position: Position) -> InvalidPositionError:
        return InvalidPositionError(f"cannot ack {position} on {self._name}: no such entry", position=position)

    # -- step 2: apply ----------------------------------------------------------------------
    def _add_positions(self, positions: list[Position]) -> int:
        """Acknowledge checked whole entries one by one; how many were new."""
        acked, batch, ignored = self._acked, self._batch, self._ignored
        added = 0
        for position in positions:
            if acked.add(position[0], position[1]):
                added += 1
                if batch:
                    self._drop_batch(position)
                if ignored:
                    self._forget_ignored(position)
        return added

    def _add_groups(self, groups: list[_Group]) -> int:
        """Acknowledge checked entry ids (per ledger) in bulk; how many were new."""
        acked = self._acked
        added = 0
        for ledger_id, entry_ids, _, high in groups:
            added += acked.add_sorted(ledger_id, entry_ids, high)
        if added and self._batch:
            for p in self._now_acked(self._batch, groups):
                self._drop_batch(p)
        if added and self._ignored:
            for p in self._now_acked(self._ignored, groups):
                self._forget_ignored(p)
        return added

    def _now_acked(self, states: SortedDict, groups: list[_Group]) -> list[Position]:
        """The positions of ``states`` (batch states or ignored acks, none acknowledged whole
        before ``groups`` were added) that ``groups`` acknowledged: each state asked once when
        they are few, or each entry of the groups looked up when those are fewer (a state not
        acknowledged whole before is acknowledged now exactly when the groups name its entry),
        else those within each group's span. O(min(states, groups' entries, groups' spans))."""
        contains = self._acked.contains
        if sum(len(group[1]) for group in groups) < len(states):  # a tuple hashes as its Position
            return [Position(lid, e) for lid, ids, _, _ in groups for e in ids.tolist() if (lid, e) in states]
        if len(states) <= 4 * len(groups):
            return [p for p in states if contains(p[0], p[1])]
        return [
            p
            for ledger_id, _, low, high in groups
            for p in states.irange(Position(ledger_id, low), Position(ledger_id, high))
            if contains(p[0], p[1])
        ]

    def _merge_ack_sets(
        self,
        items: tuple[tuple[Position, int, int | None], ...],
        batch_acked: dict[Position, int],
    ) -> list[Position]:
        """AND-merge checked ack sets in order (ignored without batch-index deletion unless
        empty); an empty result acknowledges the entry. The entries newly acknowledged."""
        batch_level = self._ml.config.deletion_at_batch_index_level_enabled
        acked, batch = self._acked, self._batch
        new: list[Position] = []
        for position, ack_set, size in items:
            if self.is_deleted(position):
                self._drop_batch(position)
                continue
            if ack_set and not batch_level:
                self._ignore(position, ack_set, size)
                continue
            stored = batch.get(position)
            merged = ack_set if stored is None or not ack_set else stored & ack_set
            if ack_set and size is not None:
                self._batch_sizes.setdefault(position, size)
            if merged:
                known = self._batch_sizes.get(position, size)
                before = stored if stored is not None else (1 << (known or merged.bit_length())) - 1
                batch[position] = merged
                self._batch_view = None
                if before & ~merged:
                    batch_acked[position] = batch_acked.get(position, 0) | (before & ~merged)
                continue
            self._drop_batch(position)
            batch_acked.pop(position, None)
            if acked.add(position[0], position[1]):
                new.append(position)
                if self._ignored:
                    self._forget_ignored(position)
        return new

    def _keep_batch_target(self, position: Position, ack_set: int, target: Position) -> None:
        """A cumulative ack of part of the batch entry at ``position`` (mark-delete at
        ``target``, the entry before): keep its remaining indexes unless more were kept."""
        if not self._ml.config.deletion_at_batch_index_level_enabled:
            if not self.is_deleted(position):
                self._ignore(position, ack_set, None)
        elif position > self._md:
            stored = self._batch.get(position)
            if (stored is None or lowest_bit(ack_set) > lowest_bit(stored)) and ack_set:
                self._batch[position] = ack_set
                self._batch_view = None
        for p in list(self._batch.irange(maximum=target, inclusive=(True, False))):
            self._drop_batch(p)

    def _drop_batch(self, position: Position) -> None:
        if self._batch.pop(position, None) is not None:
            self._batch_view = None
            self._batch_sizes.pop(position, None)

    def _set_mark_delete(self, new_md: Position) -> None:
        self._md = new_md
        self._md_next = None
        self._acked.remove_at_most(new_md.ledger_id, new_md.entry_id)
        if self._batch:
            for p in list(self._batch.irange(maximum=new_md)):
                self._drop_batch(p)
        if self._ignored:
            self._forget_ignored_up_to(new_md)

    # -- step 3: settle ---------------------------------------------------------------------
    def _absorb(self) -> bool:
        """While the entry after MD is acknowledged, move MD to the end of its run (across
        ledgers); whether MD moved. O(1) when it does not, O(runs absorbed) when it does."""
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
        if moved and self._batch:
            for p in list(self._batch.irange(maximum=md)):
                self._drop_batch(p)
        if moved and self._ignored:
            self._forget_ignored_up_to(md)
        return moved

    # -- checks -----------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert the invariants (see the module docstring). O(size of the state)."""
        md, lac = self._md, self._ml.last_confirmed_entry
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
        assert self._batch_sizes.keys() <= self._batch.keys(), "a batch size kept without its batch state"
        view = self._batch_view
        assert view is None or view == tuple(self._batch.items()), "a stale view of the batch states"
        for p in self._ignored.keys():
            assert not self.is_deleted(p), f"ignored partial acks kept for deleted {p} with MD {md}"
        assert self._ignored_sizes.keys() <= self._ignored.keys(), "a batch size kept without its ignored acks"
        assert list(self._ignored_pairs) == list(self._ignored.items()), "the ignored states' pairs out of step"
        if self._md_next is not None:
            assert self._md_next == self._ml.next_valid_position(md), f"stale next {self._md_next} after MD {md}"
