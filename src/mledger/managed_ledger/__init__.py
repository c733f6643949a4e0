"""The managed ledger and its cursors: Pulsar's ``ManagedLedgerImpl`` / ``ManagedCursorImpl``.

* :mod:`.ledger` / :mod:`.factory` - the append-only log split into ledgers, and the factory
  that opens ledgers over one store;
* :mod:`.cursor` - :class:`ManagedCursor`: read and mark-delete positions, individual and
  batch-index acks, resets; :mod:`.cursor_reads` (read planning, :class:`PendingRead`),
  :mod:`.position_reset` (composite resets), :mod:`.cursor_stats`, :mod:`.cursor_args`;
* :mod:`.cursor_store` - a durable cursor's state in Pulsar's two tiers (cursor ledger and
  ``ManagedCursorInfo``), PIP-381 chunks, recovery; it exchanges :mod:`.cursor_snapshot`
  values with the cursor and bytes with :mod:`mledger.codec`;
* :mod:`.revision` - the cursor state revision controller (seeds/002);
* :mod:`.ledger_view` - :class:`LedgerView`, the narrow interface a cursor has to its ledger.

Imports inside the package run ledger -> cursor -> (cursor_store, cursor_reads,
position_reset, revision) -> ledger_view; below it are :mod:`mledger.storage`,
:mod:`mledger.codec` and :mod:`mledger.core`.
"""

from .cursor import ManagedCursor as ManagedCursor
from .cursor_args import AckPlan as AckPlan
from .cursor_reads import PendingRead as PendingRead
from .cursor_snapshot import (
    KEEP_PROPERTIES as KEEP_PROPERTIES,
    CursorEvent as CursorEvent,
    CursorLifecycle as CursorLifecycle,
    CursorLifecycleError as CursorLifecycleError,
    IndividualDeletedEntries as IndividualDeletedEntries,
)
from .cursor_stats import (
    CursorStats as CursorStats,
    IndividualDeletedMessages as IndividualDeletedMessages,
    PersistenceStats as PersistenceStats,
)
from .factory import ManagedLedgerFactory as ManagedLedgerFactory
from .ledger import ManagedLedger as ManagedLedger, ManagedLedgerStats as ManagedLedgerStats
from .ledger_view import (
    ML_ROOT as ML_ROOT,
    InitialPosition as InitialPosition,
    LedgerInfo as LedgerInfo,
    LedgerView as LedgerView,
    PositionBound as PositionBound,
)
from .position_reset import PositionReset as PositionReset
from .revision import CursorStateRevisionController as CursorStateRevisionController, RevisionStats as RevisionStats

__all__ = [
    "KEEP_PROPERTIES",
    "ML_ROOT",
    "AckPlan",
    "CursorEvent",
    "CursorLifecycle",
    "CursorLifecycleError",
    "CursorStateRevisionController",
    "CursorStats",
    "IndividualDeletedEntries",
    "IndividualDeletedMessages",
    "InitialPosition",
    "LedgerInfo",
    "LedgerView",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerFactory",
    "ManagedLedgerStats",
    "PendingRead",
    "PersistenceStats",
    "PositionBound",
    "PositionReset",
    "RevisionStats",
]
