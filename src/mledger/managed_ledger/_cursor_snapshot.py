"""The values a cursor exchanges with its state store, and its lifecycle states.

The cursor hands its state store a :class:`CursorSnapshot` (taken under the cursor lock) and
gets back a :class:`RecoveredCursorState` when it opens; the store never reads or writes the
cursor itself. The store reports whether it holds a cursor ledger; the cursor derives its
:class:`CursorLifecycle` state from that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from ..core import AckRangeSet, Position, TransitionRefusedError, TransitionTable

__all__ = [
    "KEEP_PROPERTIES",
    "KeepProperties",
    "LIFECYCLE_TRANSITIONS",
    "CursorEvent",
    "CursorLifecycle",
    "CursorLifecycleError",
    "CursorSnapshot",
    "IndividualDeletedEntries",
    "RecoveredCursorState",
    "lifecycle_transition",
]


class CursorLifecycle(Enum):
    """Lifecycle states (Pulsar's ``ManagedCursorImpl.State``, those this model enters).

    A cursor moves between them only through :func:`lifecycle_transition` over
    :data:`LIFECYCLE_TRANSITIONS`."""

    UNINITIALIZED = "Uninitialized"
    NO_LEDGER = "NoLedger"
    OPEN = "Open"
    CLOSING = "Closing"
    CLOSED = "Closed"
    DELETING = "Deleting"
    DELETED = "Deleted"

    @property
    def is_closed(self) -> bool:
        """Closing, closed or deleted: no more reads, acks or resets."""
        return self in _CLOSED_STATES


_CLOSED_STATES = frozenset(
    {CursorLifecycle.CLOSING, CursorLifecycle.CLOSED, CursorLifecycle.DELETING, CursorLifecycle.DELETED}
)


class CursorEvent(Enum):
    """What moves a cursor's lifecycle (the keys of :data:`LIFECYCLE_TRANSITIONS`)."""

    OPENED_DURABLE = "opened durable"
    OPENED_NON_DURABLE = "opened non-durable"
    CLOSE = "close"
    CLOSE_DONE = "close done"
    DELETE = "delete"
    DELETE_DONE = "delete done"


class CursorLifecycleError(TransitionRefusedError):
    """A lifecycle move :data:`LIFECYCLE_TRANSITIONS` does not have (a bug in the caller);
    ``state`` and ``event`` name it."""

    machine = "cursor lifecycle"


_S, _E = CursorLifecycle, CursorEvent
LIFECYCLE_TRANSITIONS: TransitionTable[CursorLifecycle, CursorEvent] = TransitionTable(
    {
        (_S.UNINITIALIZED, _E.OPENED_DURABLE): _S.NO_LEDGER,
        (_S.UNINITIALIZED, _E.OPENED_NON_DURABLE): _S.OPEN,
        (_S.NO_LEDGER, _E.CLOSE): _S.CLOSING,
        (_S.OPEN, _E.CLOSE): _S.CLOSING,
        (_S.CLOSING, _E.CLOSE_DONE): _S.CLOSED,
        (_S.NO_LEDGER, _E.DELETE): _S.DELETING,
        (_S.OPEN, _E.DELETE): _S.DELETING,
        (_S.CLOSED, _E.DELETE): _S.DELETING,
        (_S.DELETING, _E.DELETE_DONE): _S.DELETED,
    },
    CursorLifecycleError,
)
"""``(state, event) -> new state``: every lifecycle move a cursor makes. A durable cursor's
``NO_LEDGER`` reads as ``OPEN`` while its state store holds a cursor ledger (derived, not a
move: see ``ManagedCursor.state``)."""
del _S, _E

lifecycle_transition = LIFECYCLE_TRANSITIONS.next_state
"""The state an event moves a lifecycle state to; raises :class:`CursorLifecycleError` (naming
both) when :data:`LIFECYCLE_TRANSITIONS` has no such move. O(1)."""


class IndividualDeletedEntries(Enum):
    """Whether ``skip_entries`` counts already-acked entries among the ``n`` (Pulsar's enum)."""

    INCLUDE = "Include"
    EXCLUDE = "Exclude"


class KeepProperties:
    """Sentinel: keep the last mark-delete properties (Pulsar's ``null`` properties)."""


KEEP_PROPERTIES = KeepProperties()
"""Pass as ``mark_delete(..., properties=KEEP_PROPERTIES)`` to keep the last properties."""


@dataclass(frozen=True, slots=True)
class CursorSnapshot:
    """A durable cursor's state at one instant, as its state store persists it.

    Taken under the cursor lock and handed to the store within the same critical section.
    ``acked`` is the cursor's own range set, lent for the duration of the call (copying
    millions of ranges per persist would cost more than the write): the store only reads it
    and keeps no reference. Everything else is a copy.
    """

    mark_delete: Position
    acked: AckRangeSet
    batch: tuple[tuple[Position, int], ...]
    """Partially acked batch entries: ``(position, remaining un-acked index bits)``, ascending."""
    properties: Mapping[str, int]
    cursor_properties: Mapping[str, str]
    batch_sizes: Mapping[Position, int] = field(default_factory=lambda: MappingProxyType({}))
    """Batch sizes of the partially acked entries where the cursor knows them (lent, read
    only); a missing one is taken as the highest remaining bit + 1."""


@dataclass(frozen=True, slots=True)
class RecoveredCursorState:
    """What a state store recovered for a cursor; the cursor takes ownership of ``acked``."""

    mark_delete: Position
    acked: AckRangeSet
    batch: Mapping[Position, int]
    properties: Mapping[str, int]
    cursor_properties: Mapping[str, str]
