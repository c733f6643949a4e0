"""Guaranteed message deduplication (PIP-6, docs/dedup.md; Pulsar's ``MessageDeduplication``).

Theory of operation
-------------------
Every topic (each partition) owns one :class:`MessageDeduplication`, the
:class:`~mledger.broker.Deduplication` hook its publish path consults. A producer is
identified by its name; a publish (one entry: a message, a batch or one chunk) carries
``sequence_id`` and, for a batch, ``highest_sequence_id``. Two maps, producer -> sequence id:

* ``pushed``: the highest sequence id *accepted*, updated by :meth:`check` before the append;
* ``persisted``: the highest sequence id *stored*, updated by :meth:`record_persisted` after
  the append returned. ``pushed[p] >= persisted[p]`` always holds.

:meth:`check` answers with Pulsar's ``MessageDupStatus``::

    seq <= pushed[p] and seq <= persisted[p]   -> DUPLICATE  (no write; the producer gets (-1, -1))
    seq <= pushed[p] and not <= persisted[p]   -> UNKNOWN    (a write of it may be in flight:
                                                              MessageDupUnknownError, retry later)
    otherwise                                  -> NOT_DUPLICATE, and pushed[p] = max(highest, seq)

A chunked message is checked on its last chunk only (``chunk_id == num_chunks - 1``); earlier
chunks are NOT_DUPLICATE and never touch the maps. A failed append resets ``pushed`` to a copy
of ``persisted`` (``resetHighestSequenceIdPushed``), so the producer's retry is accepted.

Snapshots. The persisted map is stored as the mark-delete *properties* of the durable cursor
``pulsar.dedup`` (PIP-6 ``LongProperty``): a mark-delete at position P with properties M says
"M is the state of the maps once every entry up to P is applied". One is taken every
``deduplication_entries_interval`` persisted entries at the entry's position, by the timed
check (:meth:`take_snapshot`: ``deduplication_snapshot_interval_seconds`` since the last one,
looked at every ``deduplication_snapshot_frequency_in_seconds`` by the broker's
``checkDeduplicationSnapshot`` timer), after a purge of
inactive producers (at the current mark-delete), at the end of a recovery that replayed at
least an interval's worth of entries, and on a clean :meth:`close`. A snapshot holds at most
``deduplication_max_number_of_producers`` producers; those left out stay in memory, are counted
in :meth:`stats` and logged once per crossing of the cap.

Recovery (topic load, or enabling): open the cursor, load its properties into both maps, then
replay every entry after its mark-delete position, setting ``persisted[p] = pushed[p] =
max(highest_sequence_id, sequence_id)`` for each entry's producer (last entry wins, as in
Pulsar's replay). Because the live maps also hold "the value of p's last stored entry", the
rebuilt maps are exactly the maps the previous broker had when it stopped, with two
exceptions: a producer purged after the snapshot comes back if it has entries after it (the
safe direction), and a producer a snapshot left out over the cap is forgotten unless it has.
The same last-entry-wins rule makes a snapshot exact at any position at or before the state it
holds, which is why the purge may snapshot at the current mark-delete. A missing cursor (first
enable, re-enable after a disable, deleted by hand) is created at the earliest position and
the whole ledger is replayed; so is a cursor that does not open (``StateCorruptedError``: it is
deleted first) and one whose snapshot was lost (empty properties with entries at or before its
mark-delete: what the cursor's recovery fallback yields when its cursor ledger is unreadable).

Status machine (Pulsar's ``MessageDeduplication.Status``), driven by :meth:`set_enabled`. The
table ``_TRANSITIONS`` below is the machine: the status changes only through
:func:`next_status`, which looks the (status, :class:`DedupEvent`) pair up and raises
:class:`DedupTransitionError` for a pair the table does not have::

    Initialized --enable--> Recovering --replayed--> Enabled --disable--> Removing --removed--> Disabled
    Initialized --disable--> Removing --removed--> Disabled   (deletes a leftover dedup cursor)
    Disabled --enable--> Recovering ...                       (rebuilds from the whole ledger)
    Recovering / Removing --storage error--> Failed           (set_enabled retries:
    Failed --enable--> Recovering, Failed --disable--> Removing)

:meth:`set_enabled` asks the table too: an ``enable`` (``disable``) the current status has no
transition for is a no-op (already enabled, or disabled).

Differences from Pulsar, each for correctness or determinism:

* A new dedup cursor starts at the earliest position and the whole ledger is replayed; Pulsar
  opens it at the latest position with empty maps, so the messages stored before dedup was
  (re-)enabled are not recognised when their producers retry them.
* Replay skips non-last chunks, exactly as the live path does; Pulsar's replay counts them, so
  after a crash between the chunks of a message its retry's last chunk would be a Dup and the
  message would stay incomplete forever.
* The timed snapshot is taken at the last entry the maps reflect, not at the LAC: an append
  sits between the store write and :meth:`record_persisted` for a moment, and a snapshot at
  the LAC then would claim an entry the maps do not hold yet.
* The snapshot keeps the most recently persisted producers when over the cap (Pulsar keeps an
  arbitrary hash-order subset), then writes them sorted by name (Pulsar's TreeMap).
* While a failed enable leaves the status Failed, :meth:`check` answers UNKNOWN (the producer
  is told to retry) instead of Pulsar's NOT_DUPLICATE, which would silently store duplicates.
* A clean :meth:`close` snapshots at the last entry (unless that would drop producers over the
  cap), so a restart replays nothing; recovery marks only disconnected producers inactive.
* Replication (``pulsar.repl`` producers, V1 original ids, V2 ``_LID``/``_EID`` keys) and
  marker messages are not modelled: a replicator's producer is deduplicated like any other.

Locking: one re-entrant lock guards the maps, counters and status; :meth:`check`,
:meth:`record_persisted` and :meth:`record_failed` hold it for a few dict operations.
Recovery and disabling hold it throughout (publishes wait for them instead of slipping past
an unfinished rebuild) and block on storage I/O. Snapshot writes (a cursor mark-delete, storage
I/O) run outside it under a second lock, one at a time, never older over newer. Lock order:
this lock, then the snapshot lock, then the cursor's and ledger's own locks. The topic calls
:meth:`check` and :meth:`record_failed` under its publish lock, and :meth:`record_persisted`
on its ledger's writer thread, in append order, with no topic lock held (publishing is
pipelined); nothing here calls back into the topic. While the status is Disabled, :meth:`check`
and :meth:`record_persisted` return without taking the lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import islice
from typing import Protocol, cast

import numpy as np
from google.protobuf.message import DecodeError

from ..codec import decode_entry
from ..codec.proto.PulsarApi_pb2 import MessageMetadata
from ..core import (
    Clock,
    LedgerNotFoundError,
    MLedgerError,
    NotFoundError,
    Position,
    StateCorruptedError,
    TransitionRefusedError,
    TransitionTable,
    as_int64,
)
from ..managed_ledger import InitialPosition, ManagedCursor, ManagedLedger
from ._config import BrokerConfig
from ._hooks import DEDUPLICATION_CURSOR_NAME, BrokerSettings, DedupVerdict, MetadataNeeds, PublishContext

__all__ = [
    "DedupEvent",
    "DedupStatus",
    "DedupTransitionError",
    "DeduplicationStats",
    "MessageDeduplication",
    "REPLAY_BATCH_SIZE",
    "next_status",
]

log = logging.getLogger(__name__)


class DedupTopic(Protocol):
    """The topic a :class:`MessageDeduplication` serves, as it sees it."""

    @property
    def name(self) -> str: ...

    @property
    def managed_ledger(self) -> ManagedLedger: ...

    @property
    def broker(self) -> BrokerSettings: ...


REPLAY_BATCH_SIZE = 1000
"""Entries read per store read during recovery (Pulsar reads 100 per cursor read)."""

_NOT_DUPLICATE = DedupVerdict.NOT_DUPLICATE
_DUPLICATE = DedupVerdict.DUPLICATE
_UNKNOWN = DedupVerdict.UNKNOWN
_MS_PER_MINUTE = 60_000


class DedupStatus(Enum):
    """Pulsar's ``MessageDeduplication.Status``."""

    INITIALIZED = "Initialized"
    DISABLED = "Disabled"
    RECOVERING = "Recovering"
    ENABLED = "Enabled"
    REMOVING = "Removing"
    FAILED = "Failed"


class DedupEvent(Enum):
    """What moves the :class:`DedupStatus` (the arrows of the module docstring's diagram)."""

    ENABLE = "enable"
    REPLAYED = "replayed"
    DISABLE = "disable"
    REMOVED = "removed"
    STORAGE_ERROR = "storage error"


class DedupTransitionError(TransitionRefusedError):
    """A status change the transition table does not have (a bug in the caller, never input);
    ``status`` (also ``state``) and ``event`` name it."""

    def __init__(self, status: DedupStatus, event: DedupEvent) -> None:
        super().__init__(status, event, f"deduplication status {status.value} has no transition on {event.value!r}")

    @property
    def status(self) -> DedupStatus:
        """The status the event was refused in (``state``)."""
        return cast(DedupStatus, self.state)


_INITIALIZED = DedupStatus.INITIALIZED
_DISABLED = DedupStatus.DISABLED
_RECOVERING = DedupStatus.RECOVERING
_ENABLED = DedupStatus.ENABLED
_REMOVING = DedupStatus.REMOVING
_FAILED = DedupStatus.FAILED

_TRANSITIONS: TransitionTable[DedupStatus, DedupEvent] = TransitionTable(
    {
        (_INITIALIZED, DedupEvent.ENABLE): _RECOVERING,
        (_DISABLED, DedupEvent.ENABLE): _RECOVERING,
        (_FAILED, DedupEvent.ENABLE): _RECOVERING,
        (_RECOVERING, DedupEvent.REPLAYED): _ENABLED,
        (_RECOVERING, DedupEvent.STORAGE_ERROR): _FAILED,
        (_INITIALIZED, DedupEvent.DISABLE): _REMOVING,
        (_ENABLED, DedupEvent.DISABLE): _REMOVING,
        (_FAILED, DedupEvent.DISABLE): _REMOVING,
        (_REMOVING, DedupEvent.REMOVED): _DISABLED,
        (_REMOVING, DedupEvent.STORAGE_ERROR): _FAILED,
    },
    DedupTransitionError,
)
"""(status, event) -> the next status: the whole status machine (Pulsar's ``checkStatus``)."""

next_status = _TRANSITIONS.next_state
"""The status an event moves a status to. O(1). Raises :class:`DedupTransitionError` naming
both when the table has no such transition."""


@dataclass(frozen=True)
class DeduplicationStats:
    """A consistent snapshot of one topic's deduplication state and counters.

    ``producers_over_cap`` is how many producers the last snapshot left out because of
    ``deduplication_max_number_of_producers`` (they are still deduplicated in memory, but a
    restart forgets them unless their last entry is after the snapshot).
    """

    status: DedupStatus
    producers: int
    """Producers in the persisted map."""
    inactive_producers: int
    """Producers disconnected (or recovered and not reconnected), candidates for the purge."""
    entries_since_snapshot: int
    """Pulsar's ``snapshotCounter``: persisted entries since the last count-based snapshot."""
    snapshots_taken: int
    snapshot_failures: int
    last_snapshot_position: Position | None
    """Where the last snapshot this object wrote sits (None before the first)."""
    last_snapshot_time_ms: int | None
    snapshot_age_ms: int | None
    """Broker-clock time since the last snapshot, None before the first."""
    snapshot_producers: int
    """Producers in the last snapshot."""
    producers_over_cap: int
    snapshots_over_cap: int
    """Snapshots that left producers out."""
    duplicates: int
    """Publishes answered DUPLICATE."""
    unknowns: int
    """Publishes answered UNKNOWN."""
    failed_writes: int
    """Appends that failed after ``check`` accepted them (each reset the pushed map)."""
    purged_producers: int
    recoveries: int
    last_recovery_entries: int
    """Entries replayed by the last recovery."""
    last_recovery_full: bool
    """Whether the last recovery replayed the whole ledger (missing, unreadable or lost snapshot)."""


@dataclass(frozen=True)
class _Snapshot:
    """A snapshot prepared under the main lock, written outside it."""

    generation: int
    position: Position
    properties: dict[str, int]
    producers: int
    left_out: int


class MessageDeduplication:
    """Per-topic deduplication state: the :class:`~mledger.broker.Deduplication` hook.

    Built by the broker as ``MessageDeduplication(topic)`` when
    ``BrokerConfig.deduplication_enabled``; ``enabled`` overrides the broker setting for this
    topic (Pulsar's namespace / topic policy) and ``snapshot_interval_seconds`` the timed
    snapshot interval (``deduplicationSnapshotInterval``; 0 disables it). Construction runs
    :meth:`set_enabled`: with dedup on, it recovers the maps (storage I/O, O(entries after the
    last snapshot)) and raises what the store raises, leaving the status Failed; with dedup
    off, it deletes a leftover ``pulsar.dedup`` cursor.

    Thread-safe. :meth:`check`, :meth:`producer_added`, :meth:`producer_removed` and
    :meth:`last_sequence_id` are O(1); :meth:`record_failed` is O(producers);
    :meth:`record_persisted` is O(1) except every ``deduplication_entries_interval``-th call,
    which writes a snapshot (O(producers log producers), blocks on storage). All of them wait
    while a recovery or a disable is running.
    """

    metadata_needs = MetadataNeeds.CHUNK_FIELDS
    """:meth:`check` and :meth:`record_persisted` read only the chunk fields of the metadata
    (only a message's last chunk is checked); the producer and sequence ids come with the
    publish itself."""

    def __init__(
        self,
        topic: DedupTopic,
        enabled: bool | None = None,
        *,
        snapshot_interval_seconds: int | None = None,
    ) -> None:
        broker = topic.broker
        config: BrokerConfig = broker.config
        self._topic_name = topic.name
        self._ml: ManagedLedger = topic.managed_ledger
        self._clock: Clock = broker.clock
        self._interval = config.deduplication_entries_interval
        self._max_producers = config.deduplication_max_number_of_producers
        interval_s = (
            config.deduplication_snapshot_interval_seconds
            if snapshot_interval_seconds is None
            else snapshot_interval_seconds
        )
        self._snapshot_interval_ms = max(int(interval_s), 0) * 1000
        timeout_min = config.deduplication_producer_inactivity_timeout_minutes
        self._inactivity_timeout_ms = max(timeout_min, 1) * _MS_PER_MINUTE

        self._lock = threading.RLock()
        self._snapshot_lock = threading.Lock()
        self._status = _INITIALIZED
        self._want_enabled = False
        self._closed = False
        self._cursor: ManagedCursor | None = None
        # persisted is kept in recency order (re-inserted on every update) so that a snapshot
        # over the cap keeps the producers that published last.
        self._pushed: dict[str, int] = {}
        self._persisted: dict[str, int] = {}
        self._inactive: dict[str, int] = {}
        self._connected: set[str] = set()
        self._counter = 0
        # The last entry the maps reflect (replayed or recorded); entries at or before it are
        # ignored by record_persisted, entries after it are applied even if check never saw them.
        self._last_position: Position | None = None
        self._generation = 0

        # Snapshot bookkeeping: written under the snapshot lock only.
        self._written_generation = -1
        self._last_snapshot_ms = 0  # Pulsar's lastSnapshotTimestamp starts at the epoch
        self._last_snapshot_position: Position | None = None
        self._snapshot_producers = 0
        self._left_out = 0
        self._over_cap_logged = False
        self._snapshots_taken = 0
        self._snapshot_failures = 0
        self._snapshots_over_cap = 0

        self._duplicates = 0
        self._unknowns = 0
        self._failed_writes = 0
        self._purged = 0
        self._recoveries = 0
        self._last_recovery_entries = 0
        self._last_recovery_full = False

        self.set_enabled(config.deduplication_enabled if enabled is None else bool(enabled))

    # -- the publish path ---------------------------------------------------------------------
    def check(self, ctx: PublishContext) -> DedupVerdict:
        """Pulsar's ``isDuplicate``: DUPLICATE, UNKNOWN, or NOT_DUPLICATE (recorded as pushed).

        NOT_DUPLICATE whenever dedup is not enabled, for a producer without a name, and for
        a chunk that is not its message's last. UNKNOWN while a failed enable left the status
        Failed. O(1); waits while a recovery or disable runs.
        """
        md = ctx.metadata
        chunk_id = md.chunk_id
        if chunk_id is not None and chunk_id != (md.num_chunks or 0) - 1:
            # All chunks share the message's sequence id: only the last one is checked.
            with self._lock:
                if self._status is _FAILED and self._want_enabled:
                    self._unknowns += 1
                    return _UNKNOWN
            return _NOT_DUPLICATE
        if self._status is _DISABLED:
            return _NOT_DUPLICATE  # the common case, without the lock (a transition takes it)
        name = ctx.producer_name
        seq = ctx.sequence_id
        with self._lock:
            status = self._status
            if status is not _ENABLED:
                if status is _FAILED and self._want_enabled:
                    self._unknowns += 1
                    return _UNKNOWN
                return _NOT_DUPLICATE
            if not name:
                return _NOT_DUPLICATE
            pushed = self._pushed.get(name)
            if pushed is not None and seq <= pushed:
                persisted = self._persisted.get(name)
                if persisted is not None and seq <= persisted:
                    self._duplicates += 1
                    return _DUPLICATE
                self._unknowns += 1
                return _UNKNOWN
            highest = ctx.highest_sequence_id
            self._pushed[name] = highest if highest > seq else seq
        return _NOT_DUPLICATE

    def record_persisted(self, ctx: PublishContext, position: Position) -> None:
        """Pulsar's ``recordMessagePersisted``: the entry is stored at ``position``.

        Sets ``persisted[producer]`` (not for a non-last chunk), counts the entry, and every
        ``deduplication_entries_interval`` entries snapshots at ``position`` (storage I/O).
        Entries the maps already reflect (replayed by a recovery) are ignored. A snapshot
        failure is logged and counted, never raised: the data is stored, the next snapshot
        or a longer replay covers it.
        """
        if self._status is _DISABLED:
            return
        with self._lock:
            if self._status is not _ENABLED:
                return
            last = self._last_position
            if last is not None and position <= last:
                return
            self._last_position = position
            md = ctx.metadata
            chunk_id = md.chunk_id
            name = ctx.producer_name
            if name and (chunk_id is None or chunk_id == (md.num_chunks or 0) - 1):
                seq = ctx.sequence_id
                highest = ctx.highest_sequence_id
                value = highest if highest > seq else seq
                persisted = self._persisted
                persisted.pop(name, None)
                persisted[name] = value
                pushed = self._pushed.get(name)
                if pushed is None or pushed < value:
                    # Only when check did not see this publish (it began before an enable).
                    self._pushed[name] = value
            self._counter += 1
            if self._counter < self._interval:
                return
            self._counter = 0
            snapshot = self._prepare_snapshot(position)
        self._write_snapshot(snapshot)

    def check_and_record_many(
        self, producers: np.ndarray, names: Sequence[str], sequence_ids: np.ndarray
    ) -> np.ndarray:
        """Deduplicate a run of single-message publishes that complete in order (a log replay).

        Row ``i`` is producer ``names[producers[i]]`` (a code < 0: no producer name) with
        ``sequence_ids[i]`` (< 0: none). Each row gets the verdict :meth:`check` gives when
        every earlier row has been stored: DUPLICATE when its sequence id is at or below the
        producer's highest stored one, else it is recorded as stored (both maps), exactly as
        :meth:`check` + :meth:`record_persisted` would. Returns a bool array, True =
        duplicate (not to be written). Rows without a name or sequence id are never
        duplicates, nor is anything while dedup is not enabled.

        Accepted rows count toward ``deduplication_entries_interval``; when it is crossed a
        snapshot is taken at the ledger's last entry *before* this run (the maps hold at
        least that state: exact by the last-entry-wins rule). O(rows) numpy work plus
        O(producers in the run) dict updates.
        """
        producers = np.asarray(producers, dtype=np.int64)
        sequence_ids = np.asarray(sequence_ids, dtype=np.int64)
        if producers.shape != sequence_ids.shape or producers.ndim != 1:
            raise ValueError(f"producers {producers.shape} and sequence_ids {sequence_ids.shape} differ")
        duplicate = np.zeros(len(sequence_ids), dtype=bool)
        named = (producers >= 0) & (sequence_ids >= 0)
        snapshot = None
        with self._lock:
            if self._status is not _ENABLED or not named.any():
                return duplicate
            rows = np.flatnonzero(named)
            codes = producers[rows]
            accepted = 0
            persisted, pushed = self._persisted, self._pushed
            for code in np.unique(codes).tolist():
                name = names[code]
                if not name:
                    continue
                idx = rows[codes == code]
                seqs = sequence_ids[idx]
                last = persisted.get(name, -1)
                running = np.maximum.accumulate(np.concatenate(([last], seqs)))[:-1]
                dup = seqs <= running
                duplicate[idx] = dup
                accepted += len(seqs) - int(dup.sum())
                highest = max(last, int(seqs.max()))
                persisted.pop(name, None)
                persisted[name] = highest
                if pushed.get(name, -1) < highest:
                    pushed[name] = highest
            self._duplicates += int(duplicate.sum())
            self._counter += accepted
            position = self._ml.last_confirmed_entry
            if self._counter >= self._interval and position.entry_id >= 0:
                self._counter = 0
                if self._last_position is None or self._last_position < position:
                    self._last_position = position
                snapshot = self._prepare_snapshot(position)
        if snapshot is not None:
            self._write_snapshot(snapshot)
        return duplicate

    def record_failed(self, ctx: PublishContext) -> None:
        """Pulsar's ``resetHighestSequenceIdPushed`` after a failed append: pushed := persisted.

        Without it the producer's retry of the failed message would be UNKNOWN forever.
        O(producers).
        """
        with self._lock:
            if self._status is not _ENABLED:
                return
            self._failed_writes += 1
            self._pushed = dict(self._persisted)

    # -- producers ------------------------------------------------------------------------------
    def producer_added(self, producer_name: str) -> None:
        """A producer connected: it is no longer inactive (never purged while connected)."""
        with self._lock:
            self._connected.add(producer_name)
            self._inactive.pop(producer_name, None)

    def producer_removed(self, producer_name: str) -> None:
        """A producer disconnected: remember when, for the inactivity purge."""
        with self._lock:
            self._connected.discard(producer_name)
            if self._status is _ENABLED:
                self._inactive[producer_name] = self._clock.now_ms()

    def last_sequence_id(self, producer_name: str) -> int:
        """Pulsar's ``getLastPublishedSequenceId``: ``pushed[producer]``, -1 when unknown.

        Equal to the highest persisted sequence id unless a write of that producer is in
        flight. A producer reconnecting after a restart continues after it.
        """
        with self._lock:
            return self._pushed.get(producer_name, -1)

    # -- periodic work (fired by the broker's timers: mledger.broker._monitors) ---------------
    def take_snapshot(self) -> bool:
        """Pulsar's timed ``takeSnapshot()``: snapshot if enabled, the interval is on and has
        passed since the last snapshot, and entries were recorded after the cursor's
        mark-delete. Returns whether a snapshot was written. Blocks on storage."""
        with self._lock:
            if self._closed or self._status is not _ENABLED or self._snapshot_interval_ms <= 0 or self._cursor is None:
                return False
            if self._clock.now_ms() - self._last_snapshot_ms < self._snapshot_interval_ms:
                return False
            position = self._last_position
            if position is None or position <= self._cursor.mark_delete_position:
                return False
            snapshot = self._prepare_snapshot(position)
        return self._write_snapshot(snapshot)

    def purge_inactive_producers(self) -> list[str]:
        """Forget producers disconnected for longer than the inactivity timeout, then snapshot
        at the current mark-delete. Returns the purged names. When disabled, only clears the
        inactive list (Pulsar's rule)."""
        with self._lock:
            if self._closed or self._status is not _ENABLED or self._cursor is None:
                self._inactive.clear()
                return []
            oldest_allowed = self._clock.now_ms() - self._inactivity_timeout_ms
            purged = [name for name, since in self._inactive.items() if since < oldest_allowed]
            if not purged:
                return []
            for name in purged:
                log.info("%s: purging deduplication information of inactive producer %s", self._topic_name, name)
                del self._inactive[name]
                self._pushed.pop(name, None)
                self._persisted.pop(name, None)
            self._purged += len(purged)
            snapshot = self._prepare_snapshot(self._cursor.mark_delete_position)
        self._write_snapshot(snapshot)
        return purged

    # -- status ---------------------------------------------------------------------------------
    @property
    def status(self) -> DedupStatus:
        """The current :class:`DedupStatus`."""
        return self._status

    @property
    def is_enabled(self) -> bool:
        """Whether publishes are being deduplicated (status Enabled)."""
        return self._status is _ENABLED

    @property
    def cursor(self) -> ManagedCursor | None:
        """The ``pulsar.dedup`` cursor while enabled, else None."""
        return self._cursor

    def set_enabled(self, enabled: bool) -> None:
        """Turn deduplication on or off for this topic (Pulsar's ``checkStatus``).

        On: open (or create at the earliest position) the ``pulsar.dedup`` cursor and recover
        the maps; off: delete the cursor (absent is fine) and clear the maps. No-op when
        already in the wanted state; a Failed transition is retried. Blocks on storage; raises
        what the store raises, leaving the status Failed.
        """
        with self._lock:
            self._want_enabled = bool(enabled)
            status = self._status
            if self._want_enabled:
                if (status, DedupEvent.ENABLE) in _TRANSITIONS:
                    self._enable()
            elif (status, DedupEvent.DISABLE) in _TRANSITIONS:
                self._disable(log_disabled=status is _ENABLED)

    def close(self) -> None:
        """The topic is closing: snapshot at the last recorded entry (unless that would leave
        producers out over the cap, which a replay would still find), then stop. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            snapshot = None
            cursor = self._cursor
            last = self._last_position
            if (
                self._status is _ENABLED
                and cursor is not None
                and not cursor.is_closed
                and last is not None
                and last > cursor.mark_delete_position
                and len(self._persisted) <= self._max_producers
            ):
                snapshot = self._prepare_snapshot(last)
        if snapshot is not None:
            self._write_snapshot(snapshot)

    # -- views ----------------------------------------------------------------------------------
    def highest_sequence_pushed(self) -> dict[str, int]:
        """A copy of the pushed map (Pulsar's ``highestSequencedPushed``)."""
        with self._lock:
            return dict(self._pushed)

    def highest_sequence_persisted(self) -> dict[str, int]:
        """A copy of the persisted map (Pulsar's ``highestSequencedPersisted``)."""
        with self._lock:
            return dict(self._persisted)

    def inactive_producers(self) -> dict[str, int]:
        """Producer name -> broker-clock time (ms) it became inactive, a copy."""
        with self._lock:
            return dict(self._inactive)

    def stats(self) -> DeduplicationStats:
        """Counters and snapshot figures; ``snapshot_age_ms`` by the broker clock."""
        with self._lock, self._snapshot_lock:
            now = self._clock.now_ms()
            has_snapshot = self._last_snapshot_position is not None
            return DeduplicationStats(
                status=self._status,
                producers=len(self._persisted),
                inactive_producers=len(self._inactive),
                entries_since_snapshot=self._counter,
                snapshots_taken=self._snapshots_taken,
                snapshot_failures=self._snapshot_failures,
                last_snapshot_position=self._last_snapshot_position,
                last_snapshot_time_ms=self._last_snapshot_ms if has_snapshot else None,
                snapshot_age_ms=now - self._last_snapshot_ms if has_snapshot else None,
                snapshot_producers=self._snapshot_producers,
                producers_over_cap=self._left_out,
                snapshots_over_cap=self._snapshots_over_cap,
                duplicates=self._duplicates,
                unknowns=self._unknowns,
                failed_writes=self._failed_writes,
                purged_producers=self._purged,
                recoveries=self._recoveries,
                last_recovery_entries=self._last_recovery_entries,
                last_recovery_full=self._last_recovery_full,
            )

    def _check(self) -> None:
        """Assert the invariants (tests call this after each step)."""
        with self._lock:
            if self._status is not _ENABLED:
                assert not self._persisted and not self._pushed, "maps kept while not enabled"
                return
            for name, persisted in self._persisted.items():
                pushed = self._pushed.get(name)
                assert pushed is not None and pushed >= persisted, (
                    f"producer {name!r}: pushed {pushed} below persisted {persisted}"
                )
            assert 0 <= self._counter < self._interval, f"snapshot counter {self._counter}"
            assert not (self._connected & self._inactive.keys()), "a connected producer is marked inactive"

    def __repr__(self) -> str:
        return f"MessageDeduplication({self._topic_name!r}, status={self._status.value})"

    # -- transitions (caller holds the lock) ----------------------------------------------------
    def _fire(self, event: DedupEvent) -> None:
        """Move the status by the table (the only place it changes after construction)."""
        self._status = next_status(self._status, event)

    def _enable(self) -> None:
        self._fire(DedupEvent.ENABLE)
        try:
            self._recover()
        except BaseException:
            self._fire(DedupEvent.STORAGE_ERROR)
            self._clear_maps()
            log.warning("%s: failed to enable deduplication", self._topic_name, exc_info=True)
            raise
        self._fire(DedupEvent.REPLAYED)

    def _recover(self) -> None:
        """Pulsar's ``recoverSequenceIdsMap`` + ``replayCursor``, synchronously."""
        ml = self._ml
        self._clear_maps()
        existing = DEDUPLICATION_CURSOR_NAME in ml.cursor_names()
        try:
            cursor = ml.open_cursor(DEDUPLICATION_CURSOR_NAME, InitialPosition.EARLIEST)
        except StateCorruptedError as exc:
            # Derived state only: the entries are the truth, so drop it and rebuild.
            log.warning(
                "%s: the deduplication cursor is unreadable (%s); deleting it and rebuilding from the whole ledger",
                self._topic_name,
                exc,
            )
            ml.delete_cursor(DEDUPLICATION_CURSOR_NAME)
            cursor = ml.open_cursor(DEDUPLICATION_CURSOR_NAME, InitialPosition.EARLIEST)
            existing = False
        cursor.counts_as_consumer = False
        mark_delete = cursor.mark_delete_position
        properties = cursor.properties
        full = not existing
        lost = not full and not properties and ml.number_of_entries(None, mark_delete) > 0
        if lost:
            # The cursor's own recovery falls back to its metadata-store copy, without
            # properties, when its ledger is unreadable: the snapshot is gone, not empty.
            log.warning(
                "%s: the deduplication snapshot at %s has no producers although entries precede it;"
                " rebuilding from the whole ledger",
                self._topic_name,
                mark_delete,
            )
            full = True
        if full:
            start = Position(-1, -1)
        else:
            start = mark_delete
            for name, value in sorted(properties.items()):
                self._persisted[name] = value
        replayed, last = self._replay(start)
        self._pushed = dict(self._persisted)
        now = self._clock.now_ms()
        for name in self._persisted:
            if name not in self._connected:
                self._inactive[name] = now
        self._last_position = last if last is not None else mark_delete
        self._counter = replayed
        self._cursor = cursor
        self._recoveries += 1
        self._last_recovery_entries = replayed
        self._last_recovery_full = full
        log.info(
            "%s: enabled deduplication: %d producers, %d entries replayed from %s%s",
            self._topic_name,
            len(self._persisted),
            replayed,
            "the start" if full else mark_delete,
            " (no snapshot)" if full else "",
        )
        snapshot = None
        if last is not None and (self._counter >= self._interval or lost):
            snapshot = self._prepare_snapshot(last)
        if self._counter >= self._interval:
            self._counter = 0
        if snapshot is not None:
            self._write_snapshot(snapshot)

    def _replay(self, after: Position) -> tuple[int, Position | None]:
        """Apply every stored entry after ``after`` up to the LAC to the persisted map.

        Returns (entries read, position of the last). Reads raw entries straight from the
        store in ``REPLAY_BATCH_SIZE`` runs and parses only the five metadata fields it needs
        (:func:`_replay_fields`), about 4x faster than the ledger's read path, which builds a
        full :class:`~mledger.codec.EntryMetadata` per entry; it leaves the cursor's read
        position alone. Raises ``StateCorruptedError`` naming an entry that does not parse.
        """
        ml = self._ml
        store = ml.store
        lac = ml.last_confirmed_entry
        persisted = self._persisted
        count = 0
        last: Position | None = None
        for info in ml.ledger_infos():
            ledger_id = info.ledger_id
            if ledger_id < after.ledger_id or ledger_id > lac.ledger_id:
                continue
            first = after.entry_id + 1 if ledger_id == after.ledger_id else 0
            end = info.entries - 1
            if ledger_id == lac.ledger_id:
                end = min(end, lac.entry_id)
            while first <= end:
                stop = min(first + REPLAY_BATCH_SIZE - 1, end)
                try:
                    raws = store.read(ledger_id, first, stop)
                except LedgerNotFoundError:
                    break  # trimmed meanwhile: nothing left to replay in it
                for offset, raw in enumerate(raws):
                    name, seq, highest, last_chunk = _replay_fields(raw, ledger_id, first + offset)
                    if name and last_chunk:
                        persisted.pop(name, None)
                        persisted[name] = highest if highest > seq else seq
                if raws:
                    count += len(raws)
                    last = Position(ledger_id, first + len(raws) - 1)
                first = stop + 1
        return count, last

    def _disable(self, log_disabled: bool) -> None:
        self._fire(DedupEvent.DISABLE)
        try:
            with self._snapshot_lock:
                try:
                    self._ml.delete_cursor(DEDUPLICATION_CURSOR_NAME)
                except NotFoundError:
                    pass  # Pulsar: CursorNotFound is fine when disabling
                self._cursor = None
        except BaseException:
            self._fire(DedupEvent.STORAGE_ERROR)
            log.warning("%s: failed to disable deduplication", self._topic_name, exc_info=True)
            raise
        self._clear_maps()
        self._fire(DedupEvent.REMOVED)
        if log_disabled:
            log.info("%s: disabled deduplication", self._topic_name)

    def _clear_maps(self) -> None:
        self._pushed = {}
        self._persisted = {}
        self._inactive.clear()
        self._counter = 0
        self._last_position = None
        self._cursor = None

    # -- snapshots --------------------------------------------------------------------------------
    def _prepare_snapshot(self, position: Position) -> _Snapshot:
        """The persisted map as mark-delete properties, capped (caller holds the lock)."""
        persisted = self._persisted
        total = len(persisted)
        if total > self._max_producers:
            # Most recently persisted last: keep the tail.
            recent = islice(reversed(persisted.items()), self._max_producers)
            properties = dict(sorted(recent))
        else:
            properties = dict(sorted(persisted.items()))
        self._generation += 1
        return _Snapshot(self._generation, position, properties, total, total - len(properties))

    def _write_snapshot(self, snapshot: _Snapshot) -> bool:
        """Mark-delete the dedup cursor at the snapshot's position with its properties and
        persist it now (even under ``throttle_mark_delete``). Skips a snapshot older than the
        last one written. Returns whether it was written; failures are logged and counted."""
        with self._snapshot_lock:
            cursor = self._cursor
            if cursor is None or cursor.is_closed or snapshot.generation < self._written_generation:
                return False
            if snapshot.position < cursor.mark_delete_position:
                return False
            try:
                cursor.mark_delete(snapshot.position, snapshot.properties)
                cursor.flush()
            except MLedgerError as exc:
                self._snapshot_failures += 1
                log.warning("%s: deduplication snapshot at %s failed: %s", self._topic_name, snapshot.position, exc)
                return False
            self._written_generation = snapshot.generation
            self._last_snapshot_ms = self._clock.now_ms()
            self._last_snapshot_position = snapshot.position
            self._snapshots_taken += 1
            self._snapshot_producers = len(snapshot.properties)
            self._left_out = snapshot.left_out
            if snapshot.left_out:
                self._snapshots_over_cap += 1
                if not self._over_cap_logged:
                    self._over_cap_logged = True
                    log.warning(
                        "%s: %d producers tracked, the deduplication snapshot keeps %d"
                        " (deduplication_max_number_of_producers); %d left out stay in memory only",
                        self._topic_name,
                        snapshot.producers,
                        len(snapshot.properties),
                        snapshot.left_out,
                    )
            elif self._over_cap_logged:
                self._over_cap_logged = False
                log.info("%s: deduplication snapshot back under the producer cap", self._topic_name)
            return True


_parse_metadata = MessageMetadata.FromString
_MAGIC = 0x0E  # first byte of Pulsar's 0x0e01 (checksum) and 0x0e02 (broker metadata) prefixes


def _replay_fields(raw: bytes, ledger_id: int, entry_id: int) -> tuple[str, int, int, bool]:
    """(producer name, sequence id, highest sequence id, is a last chunk or not a chunk) of a
    stored entry. The plain framing ``[size][MessageMetadata][payload]`` that mledger writes is
    parsed here directly; anything else (checksummed or broker-metadata framing, a name that
    is not valid UTF-8) goes through :func:`~mledger.codec.decode_entry`, the reference."""
    if len(raw) >= 4 and raw[0] != _MAGIC:
        size = int.from_bytes(raw[:4], "big")
        if 4 + size <= len(raw):
            try:
                md = _parse_metadata(raw[4 : 4 + size])
            except DecodeError as exc:
                raise StateCorruptedError(f"entry {ledger_id}:{entry_id}: invalid entry metadata: {exc}") from None
            name = md.producer_name
            if type(name) is str:
                seq = as_int64(md.sequence_id)  # uint64 on the wire; Java's -1 arrives as 2**64-1
                highest = seq
                if md.HasField("highest_sequence_id"):
                    highest = as_int64(md.highest_sequence_id)
                last_chunk = not md.HasField("chunk_id") or md.chunk_id == md.num_chunks_from_msg - 1
                return name, seq, highest, last_chunk
    try:
        meta, _ = decode_entry(raw)
    except StateCorruptedError as exc:
        raise StateCorruptedError(f"entry {ledger_id}:{entry_id}: {exc}") from None
    hi = meta.highest_sequence_id
    chunk_id = meta.chunk_id
    return (
        meta.producer_name,
        meta.sequence_id,
        meta.sequence_id if hi is None else hi,
        chunk_id is None or chunk_id == (meta.num_chunks or 0) - 1,
    )
