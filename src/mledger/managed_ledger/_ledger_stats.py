"""A snapshot of a managed ledger's counters."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import Position


@dataclass(frozen=True)
class ManagedLedgerStats:
    """A snapshot of a managed ledger's counters (Pulsar's names in snake_case)."""

    name: str
    number_of_ledgers: int
    number_of_entries: int
    """Entries in every ledger of the list, the current one included."""
    total_size: int
    """Bytes of every ledger of the list, the current one included (Pulsar's ``totalSize``)."""
    entries_added_counter: int
    """Entries appended since this managed ledger was opened (Pulsar's counter)."""
    last_confirmed_entry: Position
    current_ledger_id: int
    cursors: int
    """Durable cursors open."""
    current_ledger_entries: int = 0
    current_ledger_size: int = 0
    last_ledger_created_timestamp: int = 0
    """When the current ledger was created (ms)."""
    non_durable_cursors: int = 0
    """Non-durable cursors open (never persisted, never holding trimming back)."""
    trimmed_ledgers_total: int = 0
    """Ledgers deleted by trimming since this managed ledger was opened."""
