"""What a cursor needs from its managed ledger, and the small values both sides share.

:class:`LedgerView` is the cursor's whole interface to the managed ledger it reads: the last
confirmed entry and the counters, position arithmetic over the ledger list, entry reads, and
two requests going the other way (trim what every cursor consumed; forget a closed non-durable
cursor). :class:`~mledger.managed_ledger.ManagedLedger` implements it; the cursor and its
state store depend on this protocol only, so the import graph runs ledger -> cursor -> view and
never back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np

from ..codec import Entry
from ..core import Clock, EntryMessages, ManagedLedgerConfig, ManagedLedgerFactoryConfig, Position
from ..storage import Store

__all__ = [
    "ML_ROOT",
    "InitialPosition",
    "LedgerFactoryView",
    "LedgerInfo",
    "LedgerView",
    "PositionBound",
    "cursor_info_path",
    "ledger_info_path",
]

ML_ROOT = "/managed-ledgers"
"""The metadata-store root of every managed ledger (Pulsar's path)."""


def ledger_info_path(ml_name: str) -> str:
    """Where a managed ledger's ``ManagedLedgerInfo`` lives."""
    return f"{ML_ROOT}/{ml_name}"


def cursor_info_path(ml_name: str, cursor_name: str) -> str:
    """Where a durable cursor's ``ManagedCursorInfo`` lives."""
    return f"{ML_ROOT}/{ml_name}/{cursor_name}"


class InitialPosition(Enum):
    """Where a new cursor starts: before the first entry or after the last one."""

    EARLIEST = "earliest"
    LATEST = "latest"


class PositionBound(Enum):
    """Whether ``position_after_n`` counts its start position (Pulsar's ``PositionBound``)."""

    START_INCLUDED = "startIncluded"
    START_EXCLUDED = "startExcluded"


@dataclass
class LedgerInfo:
    """One ledger of the list: id, number of entries, bytes, creation time (ms)."""

    ledger_id: int
    entries: int = 0
    size: int = 0
    timestamp: int = 0


class LedgerView(Protocol):
    """A managed ledger as its cursors see it (Pulsar's ``ManagedLedgerImpl`` calls from a cursor).

    Every method is thread-safe and takes the ledger's lock itself, briefly; a cursor may call
    them while it holds its own lock (cursor lock first, never the reverse). Reads may block on
    the store.
    """

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def factory_config(self) -> ManagedLedgerFactoryConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def store(self) -> Store: ...

    @property
    def executor(self) -> Executor: ...

    @property
    def is_terminated(self) -> bool:
        """Whether the ledger was terminated (accepts no more entries)."""
        ...

    # -- the ledger list ---------------------------------------------------------------------
    @property
    def last_confirmed_entry(self) -> Position: ...

    @property
    def entries_added_counter(self) -> int: ...

    def first_position(self) -> Position: ...

    def is_valid_position(self, position: Position) -> bool: ...

    def next_valid_position(self, position: Position) -> Position: ...

    def previous_position(self, position: Position) -> Position: ...

    def number_of_entries(
        self,
        lower: Position | None = None,
        upper: Position | None = None,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
    ) -> int: ...

    def position_after_n(self, start: Position, n: int, bound: PositionBound = ...) -> Position: ...

    def ledger_entries(self, ledger_id: int) -> int | None: ...

    @property
    def ledger_list(self) -> Mapping[int, LedgerInfo]:
        """The ledger list itself, live (ledger id -> :class:`LedgerInfo`, ascending): the same
        mapping for the ledger's lifetime, read without a lock and never changed by a cursor.
        O(1) ack validation reads it: an entry ``0 <= e < entries`` of a listed ledger is
        always at or below the last confirmed entry (the count grows only after the last
        confirmed entry has moved past what it counts), and a trimmed ledger is gone from it."""
        ...

    def next_ledger_id(self, ledger_id: int) -> int | None: ...

    def ledger_infos(self) -> list[LedgerInfo]: ...

    @property
    def entry_messages(self) -> EntryMessages:
        """How many messages each entry holds (batches; 1 where nothing was recorded)."""
        ...

    def record_entry_messages(self, first: Position, counts: Sequence[int] | np.ndarray) -> None:
        """Entries from ``first`` on (one ledger) hold ``counts`` messages each (a batch size a
        cursor learned from an acknowledgement)."""
        ...

    # -- reads -------------------------------------------------------------------------------
    def read_entry(self, position: Position) -> Entry: ...

    def read_range(self, ledger_id: int, first_entry: int, last_entry: int) -> list[Entry]: ...

    def read_positions(self, positions: Iterable[Position]) -> list[Entry]: ...

    # -- requests from a cursor --------------------------------------------------------------
    def request_trim(self, cursor: object, mark_delete: Position) -> None:
        """The durable ``cursor`` persisted ``mark_delete``: trim, in the background, what
        every cursor consumed and retention no longer keeps. Never blocks."""
        ...

    def forget_non_durable_cursor(self, cursor: object) -> None:
        """A non-durable cursor closed: stop advancing it before trims."""
        ...


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
