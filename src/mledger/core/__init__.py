"""The pure core: values and rules, no I/O, no threads, no clock reads.

* :mod:`.position` - :class:`Position` (``ledger_id:entry_id``), ``EARLIEST`` / ``LATEST``;
* :mod:`.ranges` - :class:`AckRangeSet`, Pulsar's ``OpenLongPairRangeSet`` over roaring
  bitmaps, and its ``BitSet.toLongArray()`` word views;
* :mod:`.config` - frozen managed-ledger configuration with Pulsar's names and defaults;
* :mod:`.errors` - one base class, one subclass per condition;
* :mod:`.clock` - the injectable clock protocol (the system clock is read only through it);
* :mod:`.timers` - :class:`TimerQueue`, the broker-semantic timers on an injected clock;
* :mod:`.state_machine` - :class:`TransitionTable`, the one lookup every state machine's
  transitions go through, and :class:`TransitionRefusedError`, the refusal its errors derive from;
* :mod:`.futures` - :class:`InlineExecutor` (background work run at once, for runs that repeat)
  and small future combinators;
* :mod:`.ints` - Java's ``long`` / ``int`` bounds, defined once;
* :mod:`.pulsar_versions` - what each Pulsar version persists and recovers for a cursor, one
  table (:data:`PULSAR_VERSIONS`), and :mod:`.rate_limiter`, Guava's limiter Pulsar's cursors use;
* :mod:`.entry_messages` - how many messages each entry holds (batches).

Everything above this layer imports from here; this layer imports nothing else of mledger.
"""

from typing import TYPE_CHECKING

from ._address import (
    DEFAULT_HOST as DEFAULT_HOST,
    MAX_PORT as MAX_PORT,
    advertised_host as advertised_host,
    format_address as format_address,
    parse_bind as parse_bind,
)
from ._clock import (
    Clock as Clock,
    ManualClock as ManualClock,
    SystemClock as SystemClock,
    nanosecond_reader as nanosecond_reader,
)
from ._config import (
    DEFAULT_MAX_STATE_SIZE_IN_BYTES as DEFAULT_MAX_STATE_SIZE_IN_BYTES,
    ManagedLedgerConfig as ManagedLedgerConfig,
    ManagedLedgerFactoryConfig as ManagedLedgerFactoryConfig,
    parse_setting as parse_setting,
    unacked_ranges_limit_notes as unacked_ranges_limit_notes,
)
from ._deprecation import (
    moved_modules as moved_modules,
    moved_names as moved_names,
    renamed_attribute as renamed_attribute,
    renamed_call as renamed_call,
)
from ._entry_messages import EntryMessages as EntryMessages
from ._errors import (
    BadVersionError as BadVersionError,
    ConcurrentResetError as ConcurrentResetError,
    ConfigError as ConfigError,
    CursorAlreadyClosedError as CursorAlreadyClosedError,
    CursorModifyingError as CursorModifyingError,
    EntryTooLargeError as EntryTooLargeError,
    InvalidMessageIdError as InvalidMessageIdError,
    InvalidPositionError as InvalidPositionError,
    InvalidRequestError as InvalidRequestError,
    InvalidTopicNameError as InvalidTopicNameError,
    LedgerNotConsumedError as LedgerNotConsumedError,
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
    ServerError as ServerError,
    StateCorruptedError as StateCorruptedError,
    StoreLockedError as StoreLockedError,
    UnauthenticatedError as UnauthenticatedError,
    error_class_for_status as error_class_for_status,
    server_error_of as server_error_of,
)
from ._futures import InlineExecutor as InlineExecutor, chain as chain, settled as settled
from ._ints import (
    INT32_MAX as INT32_MAX,
    INT32_MIN as INT32_MIN,
    INT32_SIGN as INT32_SIGN,
    INT64_MAX as INT64_MAX,
    INT64_MIN as INT64_MIN,
    UINT32_MASK as UINT32_MASK,
    UINT64_MASK as UINT64_MASK,
    as_int64 as as_int64,
    check_int as check_int,
)
from ._lazy import lazy_getattr as lazy_getattr
from ._position import EARLIEST as EARLIEST, LATEST as LATEST, Position as Position
from ._pulsar_versions import (
    MLEDGER_RULES as MLEDGER_RULES,
    PULSAR_VERSIONS as PULSAR_VERSIONS,
    CursorBehaviour as CursorBehaviour,
    LongArrayCutoff as LongArrayCutoff,
    PulsarVersion as PulsarVersion,
    preset_values as preset_values,
    pulsar_version as pulsar_version,
    rules_for as rules_for,
)
from ._ranges import (
    MAX_ENTRY_ID as MAX_ENTRY_ID,
    AckRangeSet as AckRangeSet,
    LedgersToken as LedgersToken,
    RangeRuns as RangeRuns,
    ack_set_to_words as ack_set_to_words,
    words_to_ack_set as words_to_ack_set,
)
from ._state_machine import TransitionRefusedError as TransitionRefusedError, TransitionTable as TransitionTable
from ._suggest import did_you_mean as did_you_mean
from ._timers import TimerQueue as TimerQueue, TimerQueueStats as TimerQueueStats
from ._tls import (
    TlsSettings as TlsSettings,
    parse_subject_name as parse_subject_name,
    server_context as server_context,
    subject_name as subject_name,
)

if TYPE_CHECKING:
    from ._rate_limiter import SmoothBurstyLimiter as SmoothBurstyLimiter

# imported on first use (PEP 562): Guava's limiter acts only under a Pulsar version's rules (a
# ``--defaults`` preset); a cursor under mledger's own rules never creates one
_LAZY = {"._rate_limiter": ("SmoothBurstyLimiter",)}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "MLEDGER_RULES",
    "PULSAR_VERSIONS",
    "AckRangeSet",
    "CursorBehaviour",
    "EntryMessages",
    "LedgersToken",
    "LongArrayCutoff",
    "PulsarVersion",
    "RangeRuns",
    "SmoothBurstyLimiter",
    "rules_for",
    "preset_values",
    "pulsar_version",
    "parse_setting",
    "BadVersionError",
    "Clock",
    "ConcurrentResetError",
    "ConfigError",
    "CursorAlreadyClosedError",
    "CursorModifyingError",
    "EARLIEST",
    "EntryTooLargeError",
    "InlineExecutor",
    "InvalidMessageIdError",
    "InvalidPositionError",
    "InvalidRequestError",
    "LATEST",
    "LedgerNotConsumedError",
    "LedgerNotFoundError",
    "MLedgerError",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerFactoryConfig",
    "ManagedLedgerTerminatedError",
    "ManualClock",
    "MarkDeletingMarkedPositionError",
    "MissingExtraError",
    "NotAllowedError",
    "NotFoundError",
    "PermissionDeniedError",
    "Position",
    "PreconditionFailedError",
    "StateCorruptedError",
    "StoreLockedError",
    "SystemClock",
    "TimerQueue",
    "TimerQueueStats",
    "TlsSettings",
    "TransitionRefusedError",
    "TransitionTable",
    "UnauthenticatedError",
    "format_address",
    "parse_bind",
]
