"""mledger: an embeddable model of Apache Pulsar's managed ledger and its cursors."""

from .clock import Clock as Clock, ManualClock as ManualClock, SystemClock as SystemClock
from .config import ManagedLedgerConfig as ManagedLedgerConfig, ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig
from .cursor import (
    KEEP_PROPERTIES as KEEP_PROPERTIES,
    CursorStats as CursorStats,
    IndividualDeletedEntries as IndividualDeletedEntries,
    IndividualDeletedMessages as IndividualDeletedMessages,
    ManagedCursor as ManagedCursor,
    PendingRead as PendingRead,
    PositionReset as PositionReset,
)
from .entry import Entry as Entry, EntryMetadata as EntryMetadata
from .messageid import InvalidMessageIdError as InvalidMessageIdError, MessageId as MessageId
from .errors import (
    BadVersionError as BadVersionError,
    ConcurrentResetError as ConcurrentResetError,
    ConfigError as ConfigError,
    CursorAlreadyClosedError as CursorAlreadyClosedError,
    CursorModifyingError as CursorModifyingError,
    EntryTooLargeError as EntryTooLargeError,
    InvalidPositionError as InvalidPositionError,
    InvalidRequestError as InvalidRequestError,
    LedgerNotFoundError as LedgerNotFoundError,
    ManagedLedgerClosedError as ManagedLedgerClosedError,
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
from .ledger import (
    InitialPosition as InitialPosition,
    LedgerInfo as LedgerInfo,
    ManagedLedger as ManagedLedger,
    ManagedLedgerFactory as ManagedLedgerFactory,
    ManagedLedgerStats as ManagedLedgerStats,
    PositionBound as PositionBound,
)
from .position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from .ranges import AckRangeSet as AckRangeSet
from .revision import CursorStateRevisionController as CursorStateRevisionController, RevisionStats as RevisionStats
from .storage import LedgerStore as LedgerStore, MemoryStore as MemoryStore, MetadataStore as MetadataStore, SqliteStore as SqliteStore

__version__ = "0.1.0"
