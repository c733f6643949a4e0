"""The seam between the replay engine and the semantics it drives.

The engine (:mod:`.engine`) owns what is about the *log*: event order, which positions the
log has produced and their batch sizes and deliver times, cutting the stream into steps that
can be applied in bulk, and turning problems into anomaly rows. Everything about what a
broker *does* with those events sits behind :class:`PartitionModel`, one object per
topic-partition:

* placing entries at the log's positions (the managed ledger),
* subscriptions, their types and cursors (acks, cumulative acks, batch-index acks),
* PIP-423 cancellation (an individual ack; refused on cumulative-ack subscription types),
* the delayed-delivery dispatcher (which subscriptions a due message is delivered to),
* producer deduplication,
* the final per-subscription results, persisted state included.

:class:`~mledger.replay.BrokerModel` implements it with ``mledger.broker``: a
``Broker`` topic, its subscriptions and consumers, its ``MessageDeduplication`` and the
dispatcher's delayed-delivery tracker, on a memory-bounded store. Another model (a test
double, an instrumented one) plugs in through the ``model_factory`` argument of
:class:`~mledger.replay.PartitionReplayer` and of the job's entry points.

Contract for implementations: positions are ``(ledger_id, entry_id)``; the engine only
passes positions it knows were produced (ack/cancel of anything else is reported, never
passed on); calls come in event order, with ``set_time`` called before the events of each
step; bulk calls (``ack``) carry events that commute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..managed_ledger import BulkAckRoom
from ._settings import ReplaySettings

SHARED_TYPES = frozenset({"SHARED", "KEY_SHARED"})
"""Subscription types that take individual acks only, honour deliver_at and accept cancels."""


@dataclass(frozen=True)
class SubscriptionSpec:
    """A row of the ``subscriptions`` log: a declaration (``event`` None: the subscription
    exists from the start, or from its first ack when ``latest``), or a timed event of one
    topic-partition (``partition`` None: of every partition) at ``ts_ms``: ``created`` (with
    its type and initial position), ``reset`` (the cursor reads from ``ledger_id:entry_id``
    next, Pulsar's ``resetCursor``) or ``deleted``. ``seq`` is the input order."""

    name: str
    type: str = "SHARED"
    initial_position: str = "earliest"
    event: str | None = None
    ts_ms: int = -1
    partition: int | None = None
    ledger_id: int = -1
    entry_id: int = -1
    seq: int = 0

    @property
    def timed(self) -> bool:
        """A timed event rather than a declaration."""
        return self.event is not None

    @property
    def shared(self) -> bool:
        """Shared or Key_Shared: individual acks, delayed delivery, cancellable."""
        return self.type in SHARED_TYPES


@dataclass(frozen=True)
class SubscriptionResult:
    """The final state of one subscription, as the ``cursors`` output reports it."""

    subscription: str
    subscription_type: str
    mark_delete: tuple[int, int]
    read_position: tuple[int, int]
    ack_hole_ranges: int
    backlog: int
    delayed_delivered: int
    delayed_pending: int
    persisted_state_bytes: int
    state_chunks: int
    truncated_ranges: int
    truncated_batch_indexes: int
    answers: RestartAnswers = field(default_factory=lambda: RestartAnswers())
    """What a restart would cost (see :class:`RestartAnswers`)."""
    state_record: str | None = None
    state: bytes | None = None
    individually_deleted_messages: str = "[]"
    """The individually deleted ranges as Pulsar's internal stats print them."""


@dataclass(frozen=True)
class RestartAnswers:
    """The operator's answers for one cursor under one setting (``cursors`` columns of the
    same names; ``None`` where the moment never came)."""

    redelivered_after_restart: int = 0
    redelivered_after_restart_max: int = 0
    redelivered_after_restart_max_at_ms: int | None = None
    state_over_limit_at_ms: int | None = None
    persist_unacked_ranges_truncated: int = 0
    persist_batch_deleted_indexes_truncated: int = 0
    persist_long_array_truncated: int = 0
    # What a crash and an unload (clean close) would redeliver, in messages and entries, and the
    # part of the crash figure lost to the limits (``PersistenceStats.redelivered_after_*``):
    redelivered_after_crash: int = 0
    redelivered_after_crash_max: int = 0
    redelivered_after_crash_max_at_ms: int | None = None
    redelivered_after_crash_entries: int = 0
    redelivered_after_crash_entries_max: int = 0
    redelivered_after_crash_limits: int = 0
    redelivered_after_crash_limits_max: int = 0
    redelivered_after_crash_limits_max_at_ms: int | None = None
    redelivered_after_crash_limits_entries: int = 0
    redelivered_after_crash_limits_entries_max: int = 0
    redelivered_after_unload: int = 0
    redelivered_after_unload_max: int = 0
    redelivered_after_unload_max_at_ms: int | None = None
    redelivered_after_unload_entries: int = 0
    redelivered_after_unload_entries_max: int = 0


class PartitionModel(Protocol):
    """What the engine drives for one topic-partition. See the module docstring."""

    # time -----------------------------------------------------------------------------------
    def set_time(self, now_ms: int) -> None:
        """Event time of the next calls (never goes back)."""
        ...

    def next_flush_ms(self) -> int | None:
        """Event time of the next periodic cursor flush (None: none): the engine cuts its steps
        there, so a flush sees exactly the events before it."""
        ...

    # what a persist depends on (the engine's exact bulk acks) --------------------------------
    def persist_due_ms(self, subscription: str) -> float:
        """The first event time at which a change of the subscription's cursor persists at
        once; every change before it is throttled and leaves it as it is (-inf: any time)."""
        ...

    def writes_read_lac(self, subscription: str) -> bool:
        """Whether a persist of the subscription's cursor now depends on how many entries were
        produced before it."""
        ...

    def bulk_ack_room(self, subscription: str, batch_words: int) -> BulkAckRoom:
        """How many throttled individual acks one call may carry for the subscription and leave
        every figure as one call per ack would (``ManagedCursor.bulk_ack_room``)."""
        ...

    def batch_ack_set(self, subscription: str, ledger_id: int, entry_id: int) -> int | None:
        """The remaining (un-acknowledged) indexes of a partially acknowledged entry, or None,
        as the restart figures count them: where the broker ignores ack sets (batch-index
        deletion off), those it ignored."""
        ...

    # producing ------------------------------------------------------------------------------
    def start(self, ledger_id: int) -> None:
        """Called once, before the first ``deduplicate`` / ``append``, with the ledger id of
        the first produced position: the managed ledger opens on exactly that ledger."""
        ...

    def append(self, ledger_id: int, batch_sizes: np.ndarray) -> None:
        """Append one entry per batch size (its messages) at the next positions of
        ``ledger_id``; a ledger id above the current one rolls the ledger over to exactly that
        id."""
        ...

    def deduplicate(self, producers: np.ndarray, names: Sequence[str], sequence_ids: np.ndarray) -> np.ndarray:
        """Dedup verdicts for produced rows in order (True = duplicate, dropped), recording
        the others. ``producers`` are int codes into ``names``, -1 = no producer name; a
        ``sequence_ids`` value of -1 means none (never a duplicate)."""
        ...

    # subscriptions --------------------------------------------------------------------------
    def subscribe(self, spec: SubscriptionSpec) -> None:
        """Create the subscription now (its initial position is taken now)."""
        ...

    def has_subscription(self, name: str) -> bool: ...

    def change_type(self, subscription: str, sub_type: str) -> None:
        """Subscribe again with another type (Pulsar changes the type, keeping the cursor)."""
        ...

    def reset(self, subscription: str, ledger_id: int, entry_id: int) -> None:
        """Reset the subscription's cursor to read from ``ledger_id:entry_id`` (the broker's
        reset: mark-delete just before it, later acks forgotten)."""
        ...

    def unsubscribe(self, subscription: str) -> None:
        """Delete the subscription: it has no result unless created again."""
        ...

    def subscription_specs(self) -> list[SubscriptionSpec]:
        """Every subscription created so far, in creation order."""
        ...

    # acknowledgements -----------------------------------------------------------------------
    def ack(self, subscription: str, positions: np.ndarray) -> int:
        """Individual acks of whole entries (``(n, 2)`` int64); returns entries newly acked."""
        ...

    def ack_batch_indexes(
        self, subscription: str, ledger_id: int, entry_id: int, indexes: Sequence[int], batch_size: int
    ) -> int:
        """Batch-index acks of one entry; returns 1 if the entry became fully acked."""
        ...

    def ack_batch_messages(
        self,
        subscription: str,
        positions: np.ndarray,
        batch_indexes: np.ndarray,
        batch_sizes: np.ndarray,
        entries: np.ndarray,
    ) -> int:
        """Batch-index acks of messages (``(n, 2)`` positions, each with its batch index and
        its entry's batch size) and whole-entry acks (``entries``) as one request, the way a
        ``CommandAck`` carries them; returns the entries that became fully acked."""
        ...

    def ack_batch_sets(
        self,
        subscription: str,
        positions: np.ndarray,
        ack_sets: Sequence[int],
        batch_sizes: np.ndarray,
        entries: np.ndarray | None = None,
    ) -> int:
        """Batch-index acks of many entries in bulk: per entry (``(n, 2)`` positions) the
        indexes still unacknowledged after these acks (``ack_sets``, Pulsar's ack-set bits)
        and the batch size; the same as ``ack_batch_indexes`` entry by entry; with
        ``entries``, whole-entry acks in the same request (one change of the cursor). An entry
        may come more than once (the engine's ignored ack sets, one per ack: each AND-merged in
        order); an empty set acknowledges the entry. Returns the entries that became fully
        acked."""
        ...

    def ack_cumulative(
        self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
    ) -> int:
        """Cumulative ack up to the position (and batch index, -1 = whole entry); returns
        the entries newly acked. Only called for non-shared subscriptions."""
        ...

    def cancel(self, subscription: str, ledger_id: int, entry_id: int, batch_index: int, batch_size: int) -> int:
        """PIP-423 cancel on one shared subscription: an individual (batch-index) ack."""
        ...

    def is_deleted(self, subscription: str, ledger_id: int, entry_id: int) -> bool:
        """Whether the entry is acknowledged on the subscription."""
        ...

    def deleted_rows(self, subscription: str, positions: np.ndarray) -> list[bool]:
        """:meth:`is_deleted` of each ``(ledger_id, entry_id)`` row of ``positions``, in one call."""
        ...

    def batch_ack_sets(self, subscription: str, positions: np.ndarray) -> list[int | None]:
        """:meth:`batch_ack_set` of each ``(ledger_id, entry_id)`` row of ``positions``, in one call."""
        ...

    # delayed delivery -------------------------------------------------------------------------
    def schedule(self, positions: np.ndarray, deliver_at: np.ndarray) -> None:
        """Delayed entries just appended (``(n, 2)`` positions, deliver times in ms)."""
        ...

    def due(self, before_ms: int) -> tuple[np.ndarray, np.ndarray]:
        """Scheduled entries with deliver time < ``before_ms``, by time: (positions, times)."""
        ...

    def dispatch(self, before_ms: int) -> None:
        """Deliver everything due before ``before_ms`` to the shared subscriptions that have
        not acknowledged it (the state at call time is the state at delivery time)."""
        ...

    def was_delivered(self, subscription: str, ledger_id: int, entry_id: int, deliver_at_ms: int) -> bool:
        """Whether the entry reached the subscription: it is in the subscription's range and,
        if delayed (``deliver_at_ms`` >= 0, already dispatched), it was not acknowledged
        before its deliver time."""
        ...

    # results ----------------------------------------------------------------------------------
    def finish(self, end_ms: int, emit_state: bool) -> list[SubscriptionResult]:
        """Close the replay: dispatcher reads, final persist, one result per subscription."""
        ...

    def persist_pending(self) -> None:
        """Persist every cursor's state its rate limit holds back, now, outside the limit (what
        the broker's flush will have written by a later instant)."""
        ...

    def observe(self) -> list[SubscriptionResult]:
        """Every subscription's figures now, the replay going on (``mledger watch``): as
        ``finish`` reports them but with nothing persisted, rewound or dispatched for it (the
        read position is the cursor's own, no delayed message is counted pending); none for a
        subscription whose topic has no entry yet."""
        ...

    # shared sweeps (see :mod:`.mirror`) --------------------------------------------------------
    def mirror_persistence(self, settings: Sequence[ReplaySettings]) -> None:
        """Persist every subscription's cursor state under each of ``settings`` too (they differ
        from the model's own settings in persistence-only keys); called before ``subscribe``."""
        ...

    def mirror_results(self, own: Sequence[SubscriptionResult], emit_state: bool) -> list[list[SubscriptionResult]]:
        """After ``finish`` (which returned ``own``): the results under each mirrored setting."""
        ...

    def ledger_count(self) -> int:
        """Data ledgers created."""
        ...

    def forget_ledgers_before(self, ledger_id: int) -> list[int]:
        """Delete the data ledgers below ``ledger_id`` (the cluster deleted them) but the current
        one; their ids. ``LedgerNotConsumedError``, changing nothing, while a subscription's
        persisted mark-delete is below one of their entries."""
        ...
