"""Sequential reads of a cursor: planning them over the ledger list, and reads the caller drives.

A read is planned under the cursor lock (:func:`plan_read`: spans of unacked, existing entries
from the read position), fetched from the store outside it, and completed under it again, where
a reset that happened in between discards it (the revision number changed). :class:`PendingRead`
is that sequence handed to the caller (a dispatcher that interleaves its own state changes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..codec import Entry
from ..core import AckRangeSet, Position
from ._ledger_view import LedgerView
from ._revision import CursorStateRevisionController

__all__ = ["PendingRead", "ReadPlan", "ReadingCursor", "fetch_plan", "plan_read"]

ReadPlan = list[tuple[int, int, int]]
"""Spans ``(ledger_id, first_entry, last_entry)`` to fetch, in order."""


def plan_read(
    ledgers: LedgerView, acked: AckRangeSet, start: Position, max_entries: int, max_position: Position | None
) -> tuple[ReadPlan, Position]:
    """Spans of unacked existing entries from ``start``, and the last position examined.

    The last position examined is the last entry planned when ``max_entries`` were found, else
    the limit (the last confirmed entry or ``max_position``), acked entries before it included.
    O(ledgers and ack ranges walked).
    """
    limit = ledgers.last_confirmed_entry
    if max_position is not None and max_position < limit:
        limit = max_position
    spans: ReadPlan = []
    remaining = max_entries
    ledger_id, entry_id = start
    while remaining > 0 and (ledger_id, entry_id) <= limit:
        entries = ledgers.ledger_entries(ledger_id)
        if entries is None or entry_id >= entries:
            nxt = ledgers.next_ledger_id(ledger_id)
            if nxt is None:
                break
            ledger_id, entry_id = nxt, 0
            continue
        entry_id = max(entry_id, 0)
        entry_id = acked.next_unacked_entry(ledger_id, entry_id)
        if entry_id >= entries:
            continue
        last = entries - 1
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


def fetch_plan(ledgers: LedgerView, plan: ReadPlan) -> list[Entry]:
    """Read the planned spans from the store (may block; call it outside the cursor lock)."""
    entries: list[Entry] = []
    for ledger_id, first, last in plan:
        entries.extend(ledgers.read_range(ledger_id, first, last))
    return entries


class ReadingCursor(Protocol):
    """The cursor a :class:`PendingRead` belongs to, as the read sees it."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> CursorStateRevisionController: ...


Completion = Callable[[int, ReadPlan, list[Entry], "Position | None"], list[Entry]]
"""The cursor's completion step: ``(revision_num, plan, entries, examined) -> entries``."""


class PendingRead:
    """A read started under a revision whose I/O and completion the caller drives.

    ``fetch()`` reads the planned entries from storage (may block); ``complete()`` hands them
    over if no reset happened since the read started, else raises ``CursorModifyingError``.
    Created by :meth:`ManagedCursor.read_entries_held
    <mledger.managed_ledger.ManagedCursor.read_entries_held>`.
    """

    def __init__(
        self,
        cursor: ReadingCursor,
        revision_num: int,
        plan: ReadPlan,
        examined: Position | None,
        ledgers: LedgerView,
        complete: Completion,
    ) -> None:
        self.cursor = cursor
        self.revision_num = revision_num
        self.plan = plan
        self.examined = examined
        self._ledgers = ledgers
        self._complete = complete
        self._entries: list[Entry] | None = None

    @property
    def positions(self) -> list[Position]:
        """The positions the read will examine."""
        return [Position(lid, e) for lid, first, last in self.plan for e in range(first, last + 1)]

    @property
    def _revision(self) -> CursorStateRevisionController:
        return self.cursor.revision

    def is_current(self) -> bool:
        """False once a reset started or completed after this read began: a dispatcher that
        got entries from :meth:`complete` checks this again before handing them to consumers
        (the "half in-flight read", docs/library.md, "Safe cursor resets")."""
        return not self._revision.is_revision_num_outdated(self.revision_num)

    def fetch(self) -> PendingRead:
        """Read the entries from storage (outside the cursor lock)."""
        self._entries = fetch_plan(self._ledgers, self.plan) if self.plan else []
        return self

    def complete(self) -> list[Entry]:
        """Hand the entries over and advance the read position, or raise if outdated."""
        if not self.plan:
            return []
        if self._entries is None:
            self.fetch()
        assert self._entries is not None
        return self._complete(self.revision_num, self.plan, self._entries, self.examined)
