"""Storage backends and the protocols they implement."""

from .base import (
    DEFAULT_MAX_ENTRY_SIZE as DEFAULT_MAX_ENTRY_SIZE,
    NEW_NODE as NEW_NODE,
    LedgerStore as LedgerStore,
    MetadataStore as MetadataStore,
    Store as Store,
    Versioned as Versioned,
)
from .memory import MemoryStore as MemoryStore
from .sqlite import SqliteStore as SqliteStore, SqliteStoreStats as SqliteStoreStats

__all__ = [
    "DEFAULT_MAX_ENTRY_SIZE",
    "NEW_NODE",
    "LedgerStore",
    "MetadataStore",
    "MemoryStore",
    "SqliteStore",
    "SqliteStoreStats",
    "Store",
    "Versioned",
]
