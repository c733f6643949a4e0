"""Deprecated alias of :mod:`mledger.managed_ledger.cursor` (kept for one release; import from there).

``CursorState`` (the lifecycle enum) is now
:class:`~mledger.managed_ledger.cursor_snapshot.CursorLifecycle`.
"""

from .core.ranges import ack_set_to_words as ack_set_to_words
from .managed_ledger.cursor import ManagedCursor as ManagedCursor
from .managed_ledger.cursor_reads import PendingRead as PendingRead
from .managed_ledger.cursor_snapshot import (
    KEEP_PROPERTIES as KEEP_PROPERTIES,
    CursorLifecycle as CursorLifecycle,
    IndividualDeletedEntries as IndividualDeletedEntries,
    RecoveredCursorState as RecoveredCursorState,
)
from .managed_ledger.cursor_stats import (
    CursorStats as CursorStats,
    IndividualDeletedMessages as IndividualDeletedMessages,
)
from .managed_ledger.position_reset import PositionReset as PositionReset

CursorState = CursorLifecycle
"""The old name of :class:`~mledger.managed_ledger.cursor_snapshot.CursorLifecycle`."""
