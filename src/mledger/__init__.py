"""mledger: an embeddable model of Apache Pulsar's managed ledger and its cursors."""

from ._moved import MOVED_MODULES as _MOVED_MODULES
from .codec._entry import Entry as Entry, EntryMetadata as EntryMetadata
from .codec._messageid import MessageId as MessageId
from .core import moved_modules as _moved_modules
from .core._clock import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock
from .core._config import (
    ManagedLedgerConfig as ManagedLedgerConfig,
    ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig,
)
from .core._errors import (
    BadVersionError as BadVersionError,
    ConcurrentResetError as ConcurrentResetError,
    ConfigError as ConfigError,
    CursorAlreadyClosedError as CursorAlreadyClosedError,
    CursorModifyingError as CursorModifyingError,
    EntryTooLargeError as EntryTooLargeError,
    InvalidMessageIdError as InvalidMessageIdError,
    InvalidPositionError as InvalidPositionError,
    InvalidRequestError as InvalidRequestError,
    LedgerNotFoundError as LedgerNotFoundError,
    ManagedLedgerClosedError as ManagedLedgerClosedError,
    ManagedLedgerTerminatedError as ManagedLedgerTerminatedError,
    MarkDeletingMarkedPositionError as MarkDeletingMarkedPositionError,
    MissingExtraError as MissingExtraError,
    MLedgerError as MLedgerError,
    NotAllowedError as NotAllowedError,
    NotFoundError as NotFoundError,
    PermissionDeniedError as PermissionDeniedError,
    PreconditionFailedError as PreconditionFailedError,
    StateCorruptedError as StateCorruptedError,
    StoreLockedError as StoreLockedError,
    UnauthenticatedError as UnauthenticatedError,
)
from .core._position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from .core._ranges import AckRangeSet as AckRangeSet
from .managed_ledger import (
    KEEP_PROPERTIES as KEEP_PROPERTIES,
    CursorStateRevisionController as CursorStateRevisionController,
    CursorStats as CursorStats,
    IndividualDeletedEntries as IndividualDeletedEntries,
    IndividualDeletedMessages as IndividualDeletedMessages,
    InitialPosition as InitialPosition,
    LedgerInfo as LedgerInfo,
    ManagedCursor as ManagedCursor,
    ManagedLedger as ManagedLedger,
    ManagedLedgerFactory as ManagedLedgerFactory,
    ManagedLedgerStats as ManagedLedgerStats,
    PendingRead as PendingRead,
    PositionBound as PositionBound,
    PositionReset as PositionReset,
    RevisionStats as RevisionStats,
)
from .storage import (
    LedgerStore as LedgerStore,
    MemoryStore as MemoryStore,
    MetadataStore as MetadataStore,
    SqliteStore as SqliteStore,
)

__version__ = "0.1.0"

__all__ = [
    "AckRangeSet",
    "BadVersionError",
    "Clock",
    "ConcurrentResetError",
    "ConfigError",
    "CursorAlreadyClosedError",
    "CursorModifyingError",
    "CursorStateRevisionController",
    "CursorStats",
    "EARLIEST",
    "Entry",
    "EntryMetadata",
    "EntryTooLargeError",
    "IndividualDeletedEntries",
    "IndividualDeletedMessages",
    "InitialPosition",
    "InvalidMessageIdError",
    "InvalidPositionError",
    "InvalidRequestError",
    "KEEP_PROPERTIES",
    "LATEST",
    "LedgerInfo",
    "LedgerNotFoundError",
    "LedgerStore",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerFactory",
    "ManagedLedgerFactoryConfig",
    "ManagedLedgerStats",
    "ManagedLedgerTerminatedError",
    "ManualClock",
    "MarkDeletingMarkedPositionError",
    "MemoryStore",
    "MessageId",
    "MetadataStore",
    "MissingExtraError",
    "MLedgerError",
    "NotAllowedError",
    "NotFoundError",
    "PendingRead",
    "PermissionDeniedError",
    "Position",
    "PositionBound",
    "PositionReset",
    "PreconditionFailedError",
    "RevisionStats",
    "SqliteStore",
    "StateCorruptedError",
    "StoreLockedError",
    "SystemClock",
    "UnauthenticatedError",
]

# Old module paths kept one release: importing one warns and names the new path.
_moved_modules(__name__, _MOVED_MODULES)
