"""A managed ledger's reads and position arithmetic over its ledger list.

Position arithmetic follows Pulsar's ``ManagedLedgerImpl``: ``next_valid_position`` skips
missing and empty ledgers and, past the end, answers the position where the next entry will
be written; ``previous_position`` steps back into the last non-empty earlier ledger;
``number_of_entries`` counts real entries between two positions using the ledger list;
``position_after_n`` walks ledgers and is clamped to the LAC.

Every method holds the ledger lock briefly (or reads one attribute), never across I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from ..codec import Entry, stored_entry
from ..core import InvalidPositionError, LedgerNotFoundError, Position
from ._ledger_state import LedgerState
from ._ledger_view import LedgerInfo, PositionBound


class LedgerPositions:
    """Reads and position arithmetic of :class:`~mledger.managed_ledger.ManagedLedger` over the
    ledger's :class:`~mledger.managed_ledger._ledger_state.LedgerState`, which it is given (a
    base class of the managed ledger: these are its public methods)."""

    def __init__(self, state: LedgerState) -> None:
        self._state = state

    # -- reads ------------------------------------------------------------------------------
    def read_entry(self, position: Position) -> Entry:
        """Read one entry; raises ``InvalidPositionError`` if it does not exist."""
        entries = self.read_range(position.ledger_id, position.entry_id, position.entry_id)
        if not entries:
            raise InvalidPositionError(f"no entry at {position} in {self._state.name}")
        return entries[0]

    def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[Entry]:
        """Read the existing entries ``first_entry..last_entry`` of one ledger. Blocks on I/O."""
        try:
            raws = self._state.store.read(ledger_id, first_entry, last_entry)
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
        return self._state.last_confirmed

    last_position = last_confirmed_entry

    @property
    def entries_added_counter(self) -> int:
        """Entries appended since the ML was opened, plus those recovered."""
        return self._state.entries_added

    @property
    def current_ledger_id(self) -> int:
        current = self._state.current
        assert current is not None
        return current.ledger_id

    def first_position(self) -> Position:
        """``(first ledger, -1)``: before the first entry still stored."""
        state = self._state
        with state.lock:
            ledgers, lac = state.ledgers, state.last_confirmed
            first_id = ledgers.peekitem(0)[0]
            if first_id > lac.ledger_id and ledgers[first_id].entries == 0:
                first_id = lac.ledger_id
            return Position(first_id, -1)

    def is_valid_position(self, position: Position) -> bool:
        """Whether an entry exists at ``position`` (confirmed, ledger still present)."""
        ledger_id, entry_id = position
        state = self._state
        if entry_id < 0 or position > state.last_confirmed:
            return False
        li = state.ledgers.get(ledger_id)
        return li is not None and entry_id < li.entries

    def next_valid_position(self, position: Position) -> Position:
        """The first existing position after ``position``; past the end, the next write slot."""
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            ledger_id, entry_id = position[0], position[1] + 1
            lac = state.last_confirmed
            while (ledger_id, entry_id) <= lac:
                li = ledgers.get(ledger_id)
                if li is not None and 0 <= entry_id < li.entries:
                    return Position(ledger_id, entry_id)
                idx = ledgers.bisect_right(ledger_id)
                if idx >= len(ledgers):
                    break
                ledger_id, entry_id = ledgers.peekitem(idx)[0], 0
            return state.next_write_position()

    def previous_position(self, position: Position) -> Position:
        """The position before ``position``: ``L:E-1``, else the last entry of the nearest
        earlier non-empty ledger, else ``(first earlier ledger or L, -1)``."""
        ledger_id, entry_id = position
        if entry_id > 0:
            return Position(ledger_id, entry_id - 1)
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            earlier = list(ledgers.irange(maximum=ledger_id, inclusive=(True, False)))
            if not earlier:
                return Position(ledger_id, -1)
            for lid in reversed(earlier):
                li = ledgers[lid]
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
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            if lower is None and upper is None:
                return sum(li.entries for li in ledgers.values())
            if lower is None:
                lower, lower_inclusive = Position(-1, -1), False
            if upper is None:
                upper, upper_inclusive = state.last_confirmed, True
            if lower > upper:
                return 0
            total = 0
            for lid in ledgers.irange(lower[0], upper[0]):
                li = ledgers[lid]
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
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            if bound is PositionBound.START_INCLUDED:
                ledger_id, entry_id = start
            else:
                ledger_id, entry_id = self.next_valid_position(start)
            to_skip = n
            last_ledger_id = ledgers.peekitem(-1)[0]
            while to_skip >= 0:
                li = ledgers.get(ledger_id)
                total = li.entries if li is not None else 0
                unread = total - entry_id if total > 0 else 0
                if unread >= to_skip:
                    entry_id += to_skip
                    break
                to_skip -= unread
                if ledger_id >= last_ledger_id:
                    entry_id = total
                    break
                idx = ledgers.bisect_right(ledger_id)
                ledger_id = ledgers.peekitem(idx)[0] if idx < len(ledgers) else last_ledger_id + 1
                entry_id = 0
            result = self.previous_position(Position(ledger_id, entry_id))
            return min(result, state.last_confirmed)

    def ledger_infos(self) -> list[LedgerInfo]:
        """A copy of the ledger list, ascending."""
        state = self._state
        with state.lock:
            return [LedgerInfo(li.ledger_id, li.entries, li.size, li.timestamp) for li in state.ledgers.values()]

    @property
    def ledger_list(self) -> Mapping[int, LedgerInfo]:
        """The ledger list, live (see :attr:`LedgerView.ledger_list
        <mledger.managed_ledger.LedgerView.ledger_list>`)."""
        return cast("Mapping[int, LedgerInfo]", self._state.ledgers)

    def ledger_entries(self, ledger_id: int) -> int | None:
        """Number of entries of a ledger in the list, None if it is not there. O(1)."""
        li = self._state.ledgers.get(ledger_id)
        return None if li is None else li.entries

    def next_ledger_id(self, ledger_id: int) -> int | None:
        """The id of the first ledger in the list after ``ledger_id``, or None. O(log ledgers)."""
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            idx = ledgers.bisect_right(ledger_id)
            return ledgers.peekitem(idx)[0] if idx < len(ledgers) else None

    @property
    def total_size(self) -> int:
        """Bytes of every ledger in the list, the current one included (Pulsar's
        ``getTotalSize``). O(ledgers)."""
        state = self._state
        with state.lock:
            return sum(li.size for li in state.ledgers.values())

    def estimated_size_after(self, position: Position) -> int:
        """Bytes of the entries after ``position`` (Pulsar's ``estimateBacklogFromPosition``,
        a subscription's ``backlogSize`` from its mark-delete position): the ledgers after its
        ledger in full, plus the part of its ledger after it at that ledger's average entry
        size. O(ledgers)."""
        state = self._state
        with state.lock:
            ledgers = state.ledgers
            size = sum(li.size for li in ledgers.values() if li.ledger_id >= position.ledger_id)
            li = ledgers.get(position.ledger_id)
            if li is not None and li.entries > 0:
                if li.entries <= position.entry_id + 1:
                    size -= li.size
                elif position.entry_id >= 0:
                    size -= (position.entry_id + 1) * (li.size // li.entries)
            return size
