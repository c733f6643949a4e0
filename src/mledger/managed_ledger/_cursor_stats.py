"""Read-only views of a cursor: its stats snapshot and its individually deleted ranges."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ..core import AckRangeSet, Position
from ._revision import RevisionStats

__all__ = ["BulkAckRoom", "CursorStats", "IndividualDeletedMessages", "PersistenceStats", "Redelivery"]


class BulkAckRoom(NamedTuple):
    """How many acknowledgements one change of a cursor may carry and leave every restart
    figure as the same acknowledgements one change each leave it (the figures' maxima
    included): ``w`` whole entries and ``b`` batch indexes fit when ``w + b * batch_cost <=
    entries`` and ``b <= batch_indexes``. ``entries == 0``: one at a time.

    ``unload``: when the close record keeps no batch state, the unload figure is then the
    acknowledged indexes of the partially acknowledged entries (and those entries), which batch
    acks move up and completed entries down: ``(messages, entries, messages_max,
    entries_max)`` now, for the caller to cut its changes at a new maximum; None otherwise.

    ``shrink_loses_batch``: the close record may keep batch states now and lose them once the
    mark-delete takes ranges away (from the cursor ledger, which keeps them, to the metadata
    store, which a recovery before apache/pulsar#26474 does not read them from: the unload figure
    up, then down as the mark-delete passes them), or whether it may is not known: a run of
    cumulative acknowledgements then goes one at a time. Cumulative acknowledgements otherwise
    only take state away, which never raises the unload figure, but for a batch index they
    leave (a new batch state: within ``fits(0, 1)``).

    ``from_ledger``: the room holds only for acknowledgements of entries of this ledger or a
    later one (-1: of any): past the limits, the ledgers the close record's long-array cut-off
    leaves out, where a whole-entry acknowledgement only adds its messages to the unload
    figure."""

    entries: int
    batch_cost: int
    batch_indexes: int
    unload: tuple[int, int, int, int] | None = None
    shrink_loses_batch: bool = True
    from_ledger: int = -1

    def fits(self, whole: int, batch: int) -> bool:
        """Whether ``whole`` whole-entry and ``batch`` batch-index acknowledgements fit. O(1)."""
        return batch <= self.batch_indexes and whole + batch * self.batch_cost <= self.entries


UNBOUNDED_ROOM = BulkAckRoom(1 << 62, 0, 1 << 62, None, False, -1)
"""The room of a cursor whose changes no state store observes (a non-durable cursor)."""


@dataclass(frozen=True, slots=True)
class Redelivery:
    """One restart figure of a cursor: acknowledged messages a stop would redeliver (and the
    entries carrying them), now and at the worst instant so far."""

    messages: int = 0
    entries: int = 0
    messages_max: int = 0
    messages_max_at_ms: int = -1
    """Clock time at which ``messages_max`` was first reached; -1 while it is 0."""
    entries_max: int = 0
    entries_max_at_ms: int = -1


@dataclass(frozen=True, slots=True)
class PersistenceStats:
    """What a durable cursor's state store wrote and what its limits dropped."""

    persisted_state_bytes: int = 0
    persist_count: int = 0
    persist_entries_written: int = 0
    last_persist_chunks: int = 0
    truncated_ranges: int = 0
    truncated_ranges_total: int = 0
    truncated_batch_indexes: int = 0
    truncated_batch_indexes_total: int = 0
    persist_unacked_ranges_truncated: int = 0
    """Builds of the range format that dropped ranges, each build once (a persist that falls
    back from the cursor ledger to the metadata store builds twice): Pulsar's counter
    ``pulsar.broker.managed_ledger.cursor.persist.unacked_ranges.truncated`` (#25548)."""
    persist_batch_deleted_indexes_truncated: int = 0
    """Builds of the batch-index list that dropped states
    (``pulsar.broker.managed_ledger.cursor.persist.batch_deleted_indexes.truncated``, #25548)."""
    persist_long_array_truncated: int = 0
    """Builds of the long-array format whose cut-off (``toRanges(max)``) left ledgers out; no
    Pulsar counter sees these."""
    redelivered_after_crash: Redelivery = Redelivery()
    """What a crash now (and at its worst instant) would redeliver: everything acknowledged the
    last stored record does not hold (``mledger.managed_ledger._restart_figures``)."""
    redelivered_after_crash_limits: Redelivery = Redelivery()
    """The part of :attr:`redelivered_after_crash` the last write lost to the limits (and,
    under a Pulsar version's rules, the partial batch acks apache/pulsar#26498 leaves unwritten
    while nothing waits for the flush)."""
    redelivered_after_unload: Redelivery = Redelivery()
    """What a clean close (unload, clean restart) now would redeliver: what the close path's
    record loses."""
    redelivered_after_unload_limits: Redelivery = Redelivery()
    """The part of :attr:`redelivered_after_unload` lost to the limits: all of it (a close
    writes the whole state)."""
    redelivered_after_restart: int = 0
    """``redelivered_after_crash.messages``, under its name before the crash and unload figures
    (kept for one release)."""
    redelivered_after_restart_max: int = 0
    """``redelivered_after_crash.messages_max`` (kept for one release)."""
    redelivered_after_restart_max_at_ms: int = -1
    """``redelivered_after_crash.messages_max_at_ms`` (kept for one release)."""
    state_over_limit_at_ms: int = -1
    """When a state first exceeded the frame limit or ``jute.maxbuffer``; -1 never."""
    cursor_ledger_id: int = -1


@dataclass(frozen=True, slots=True)
class CursorStats:
    """A consistent snapshot of a cursor's positions and counters (``ManagedCursor.stats()``),
    taken under its lock; frozen, the revision and persistence figures nested."""

    name: str
    durable: bool
    state: str
    mark_delete_position: Position
    persistent_mark_delete_position: Position
    read_position: Position
    individually_deleted_ranges: int
    """Ack holes after the mark-delete position."""
    individually_deleted_entries: int
    batch_partially_acked_entries: int
    messages_consumed_counter: int
    backlog: int
    """Unacknowledged entries, precise."""
    mark_delete_lag: int
    """Entries in (mark-delete, read position] (``number_of_entries_since_first_not_acked``)."""
    entries_to_read: int
    properties: dict[str, int]
    """A copy of the mark-delete properties."""
    cursor_properties: dict[str, str]
    """A copy of the cursor properties."""
    dirty: bool
    """State changes wait for a throttled persist."""
    revision: RevisionStats
    persistence: PersistenceStats
    """What the durable cursor's state store wrote and dropped (all zero for a non-durable one)."""


class IndividualDeletedMessages:
    """A snapshot of a cursor's individually deleted ranges.

    Iterates open-closed ``(a, b]`` pairs of positions; ``len()`` is the number of ranges;
    ``str()`` prints Pulsar's form ``[(3:5..3:7],(3:9..3:10]]``.
    """

    def __init__(self, ranges: AckRangeSet) -> None:
        self._ranges = ranges

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return self._ranges.size()

    def __contains__(self, position: object) -> bool:
        return position in self._ranges

    def cardinality(self) -> int:
        """Number of individually deleted entries."""
        return self._ranges.cardinality()

    def as_range_set(self) -> AckRangeSet:
        """The underlying (copied) range set."""
        return self._ranges

    def __str__(self) -> str:
        return str(self._ranges)

    def __repr__(self) -> str:
        return f"IndividualDeletedMessages({self})"
