"""mledger: an embeddable model of Apache Pulsar's managed ledger and its cursors."""

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
from .position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from .storage import MemoryStore as MemoryStore

__version__ = "0.1.0"
