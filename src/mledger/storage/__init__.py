"""Storage backends and the protocols they implement."""

from ._base import (
    DEFAULT_MAX_ENTRY_SIZE as DEFAULT_MAX_ENTRY_SIZE,
    NEW_NODE as NEW_NODE,
    LedgerStore as LedgerStore,
    MetadataStore as MetadataStore,
    Store as Store,
    Versioned as Versioned,
    checked_size as checked_size,
)
from ._faults import (
    DISK_FULL as DISK_FULL,
    FaultInjectingStore as FaultInjectingStore,
    HeldRead as HeldRead,
    HeldReadStore as HeldReadStore,
    HeldWriteStore as HeldWriteStore,
    InjectedFault as InjectedFault,
    WriteRecord as WriteRecord,
)
from ._memory import MemoryStore as MemoryStore
from ._sqlite import SqliteStore as SqliteStore, SqliteStoreStats as SqliteStoreStats

__all__ = [
    "DEFAULT_MAX_ENTRY_SIZE",
    "DISK_FULL",
    "FaultInjectingStore",
    "HeldRead",
    "HeldReadStore",
    "HeldWriteStore",
    "InjectedFault",
    "LedgerStore",
    "MemoryStore",
    "MetadataStore",
    "NEW_NODE",
    "SqliteStore",
    "SqliteStoreStats",
    "Store",
    "Versioned",
    "WriteRecord",
]
