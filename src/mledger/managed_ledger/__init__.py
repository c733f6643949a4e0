"""The managed ledger and its cursors: Pulsar's ``ManagedLedgerImpl`` / ``ManagedCursorImpl``.

* :mod:`.ledger` / :mod:`.factory` - the append-only log split into ledgers, and the factory
  that opens ledgers over one store; the ledger's jobs are private modules beside it: its
  state's one owner, with the write state's transition table (``_ledger_state``:
  :class:`WriteState`), the pending adds (``_add_pipeline``), the writes and rollovers
  (``_appender``), trimming (``_trimmer``), reads and position arithmetic (``_positions``);
* :mod:`.cursor` - :class:`ManagedCursor`: lifecycle, reads and the read position, resets,
  the persist throttle, properties, stats; :mod:`.cursor_reads` (read planning,
  :class:`PendingRead`), :mod:`.position_reset` (composite resets), :mod:`.cursor_stats`,
  :mod:`.cursor_args`;
* :mod:`.ack_state` - :class:`AckState`, a cursor's acknowledgement state (mark-delete, ack
  ranges, batch states): the one seam every acknowledgement crosses, as one :class:`AckPlan`
  applied and one :class:`AckOutcome` returned;
* :mod:`.cursor_store` - a durable cursor's state in Pulsar's two tiers (cursor ledger and
  ``ManagedCursorInfo``), PIP-381 chunks, recovery; it exchanges :mod:`.cursor_snapshot`
  values with the cursor and bytes with :mod:`mledger.codec`;
* :mod:`.revision` - the cursor state revision controller (docs/library.md, "Safe cursor resets");
* :mod:`.ledger_view` - :class:`LedgerView`, the narrow interface a cursor has to its ledger.

Imports inside the package run ledger -> cursor -> (ack_state, cursor_store, cursor_reads,
position_reset, revision) -> ledger_view; below it are :mod:`mledger.storage`,
:mod:`mledger.codec` and :mod:`mledger.core`.
"""

from ._ack_state import (
    ACKED as ACKED,
    BATCH_STATE_DROPPED as BATCH_STATE_DROPPED,
    MARK_DELETE_MOVED as MARK_DELETE_MOVED,
    AckOutcome as AckOutcome,
    AckPlan as AckPlan,
    AckState as AckState,
)
from ._cursor import ManagedCursor as ManagedCursor
from ._cursor_reads import PendingRead as PendingRead
from ._cursor_snapshot import (
    KEEP_PROPERTIES as KEEP_PROPERTIES,
    CursorEvent as CursorEvent,
    CursorLifecycle as CursorLifecycle,
    CursorLifecycleError as CursorLifecycleError,
    IndividualDeletedEntries as IndividualDeletedEntries,
    RecoveredCursorState as RecoveredCursorState,
)
from ._cursor_stats import (
    BulkAckRoom as BulkAckRoom,
    CursorStats as CursorStats,
    IndividualDeletedMessages as IndividualDeletedMessages,
    PersistenceStats as PersistenceStats,
    Redelivery as Redelivery,
)
from ._cursor_store import CursorStateStore as CursorStateStore
from ._explain import (
    RedeliveryExplanation as RedeliveryExplanation,
    Rule as RedeliveryRule,
    RuleShare as RuleShare,
    StopExplanation as StopExplanation,
)
from ._factory import ManagedLedgerFactory as ManagedLedgerFactory
from ._ledger import ManagedLedger as ManagedLedger, ManagedLedgerStats as ManagedLedgerStats
from ._ledger_state import (
    WriteEvent as WriteEvent,
    WriteState as WriteState,
    WriteStateError as WriteStateError,
)
from ._ledger_view import (
    ML_ROOT as ML_ROOT,
    InitialPosition as InitialPosition,
    LedgerInfo as LedgerInfo,
    LedgerView as LedgerView,
    PositionBound as PositionBound,
)
from ._position_reset import PositionReset as PositionReset
from ._restart_figures import redelivered_messages as redelivered_messages
from ._revision import CursorStateRevisionController as CursorStateRevisionController, RevisionStats as RevisionStats

__all__ = [
    "ACKED",
    "BATCH_STATE_DROPPED",
    "KEEP_PROPERTIES",
    "MARK_DELETE_MOVED",
    "ML_ROOT",
    "AckOutcome",
    "AckPlan",
    "AckState",
    "BulkAckRoom",
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
    "RecoveredCursorState",
    "Redelivery",
    "RedeliveryExplanation",
    "RedeliveryRule",
    "RevisionStats",
    "RuleShare",
    "StopExplanation",
    "WriteEvent",
    "WriteState",
    "WriteStateError",
    "redelivered_messages",
]
