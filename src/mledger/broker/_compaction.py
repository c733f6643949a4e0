"""Topic compaction: the last message of each key, kept in a compacted ledger beside the topic's.

Pulsar's ``org.apache.pulsar.compaction`` (``TwoPhaseCompactor``, ``CompactedTopicImpl``) and
``PersistentTopic.triggerCompaction`` / ``compactionStatus`` / ``checkCompaction``:

* **The horizon.** A durable system cursor named ``__compaction`` (:data:`COMPACTION_SUBSCRIPTION`)
  holds it: its mark-delete position is the compaction horizon and its mark-delete property
  ``CompactedTopicLedger`` the id of the compacted ledger, a sealed ledger in the topic's store.
  Both move in one persisted mark-delete, so a restart finds the view it was left with; the
  cursor also keeps every entry after the horizon from being trimmed.
* **Two phases.** Phase one reads the previous compacted view and then the topic from the
  horizon up to the last entry at the start, and records, per message key, the id of its last
  message (an empty payload is a tombstone: the key goes). Phase two reads the same again and
  appends to a new ledger each entry that holds one of those last messages, in order: a plain
  entry as it is, a batch re-batched with the other messages replaced by empty
  ``compacted_out`` records (:func:`~mledger.codec.compact_batch`), so batch indexes keep
  their meaning. Messages without a key, and chunks, are left out (Pulsar's default). Each
  compacted entry keeps its original ledger/entry id. Then the ``__compaction`` cursor is
  mark-deleted to the last entry read, with the new ledger's id, and the old ledger deleted.
* **Reading.** A read-compacted consumer (Exclusive, Failover, or a reader) whose read position
  is at or below the horizon reads the compacted ledger from the first entry at or after that
  position, and its cursor moves past what it got; past the horizon it reads the topic
  (``CompactedTopicUtils.asyncReadCompactedEntries``, done by the dispatcher).
* **Status.** ``NOT_RUN`` until the first run on this broker, ``RUNNING``, ``SUCCESS`` or
  ``ERROR`` with the last error (Pulsar's ``LongRunningProcessStatus``); a trigger while one runs
  is refused with :class:`CompactionInProgressError` (409 "Compaction already in progress").
* **Journal.** The ``__compaction`` cursor is a durable cursor like a subscription's (it holds
  retention back), so a broker's journal (:mod:`mledger.broker._journal`) hears it: created as
  an Exclusive subscription at the earliest position when the first run opens it, then one
  cumulative ack of the new horizon per run that moved it. A recording replays it as a cursor
  of that name.
* **Threshold.** The ``compactionThreshold`` policy (bytes): the broker's periodic check
  (``brokerServiceCompactionMonitorIntervalInSeconds``) compacts a topic whose backlog behind
  the ``__compaction`` cursor (the whole topic before the first compaction) exceeds it.

A compacted ledger entry is ``[original ledger id: 8][original entry id: 8]`` followed by the
entry's stored bytes (Pulsar stores a ``RawMessage``: its id and the headers and payload).
"""

from __future__ import annotations

import bisect
import enum
import logging
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future, wait as wait_futures
from dataclasses import dataclass, replace

from ..codec import Entry, compact_batch, decode_batch, decompress_message, split_entry, stored_entry
from ..codec.proto.PulsarApi_pb2 import MessageMetadata
from ..core import EARLIEST, MLedgerError, Position, PreconditionFailedError
from ..managed_ledger import InitialPosition, ManagedCursor, ManagedLedger
from ..storage import LedgerStore
from ._journal import AckRecord, TopicJournal
from ._types import SubscriptionType

__all__ = [
    "COMPACTED_TOPIC_LEDGER_PROPERTY",
    "COMPACTION_SUBSCRIPTION",
    "CompactedLedger",
    "CompactedTopic",
    "CompactionRecord",
    "CompactionStats",
    "CompactionInProgressError",
    "CompactionStatus",
    "LongRunningProcessStatus",
    "check_compaction_threshold",
    "kept_messages_mask",
]

log = logging.getLogger(__name__)

COMPACTION_SUBSCRIPTION = "__compaction"
"""The system cursor whose mark-delete position is the compaction horizon (Pulsar's name)."""

COMPACTED_TOPIC_LEDGER_PROPERTY = "CompactedTopicLedger"
"""The ``__compaction`` cursor's mark-delete property holding the compacted ledger's id."""

_HEADER = struct.Struct(">qq")
_READ_CHUNK = 100
"""Entries per store read (Pulsar's dispatchers read 100 at a time) and per compacted-ledger append."""


class CompactionInProgressError(MLedgerError):
    """A compaction was triggered while one runs (409 "Compaction already in progress")."""

    http_status = 409


class CompactionStatus(enum.Enum):
    """Pulsar's ``LongRunningProcessStatus.Status``."""

    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


@dataclass(frozen=True)
class LongRunningProcessStatus:
    """A compaction's status and, after ``ERROR``, what failed (``""`` otherwise)."""

    status: CompactionStatus
    last_error: str = ""

    def to_json(self) -> dict[str, str]:
        """Pulsar's JSON form: ``{"status": "...", "lastError": "..."}``."""
        return {"status": self.status.value, "lastError": self.last_error}


@dataclass(frozen=True)
class CompactionRecord:
    """The figures of a topic's compactions on this broker (Pulsar's ``CompactionRecord``, the
    ``compaction`` part of the topic stats): messages the last successful run left out, when the
    last run succeeded and failed (epoch ms, 0: never) and how long the last success took."""

    last_removed_event_count: int = 0
    last_succeed_timestamp_ms: int = 0
    last_failed_timestamp_ms: int = 0
    last_duration_ms: int = 0


@dataclass(frozen=True)
class CompactionStats:
    """A snapshot of a topic's compaction on this broker (``CompactedTopic.stats()``)."""

    status: LongRunningProcessStatus
    """The last run's status (``NOT_RUN`` before any), as ``compaction-status`` answers it."""
    record: CompactionRecord
    """The figures of the runs (Pulsar's ``CompactionRecord``, the topic stats' ``compaction``)."""
    horizon: Position | None
    """The compaction horizon of the current view, None before the first compaction."""
    running: bool
    """Whether a compaction runs now."""


class CompactedLedger:
    """One compacted view: a sealed ledger of entries with their original ids, up to a horizon.

    The ids of its entries are indexed in memory on first use (reading the ledger once), so a
    read finds its start by binary search (Pulsar's ``CompactedTopicImpl.findStartPoint``).
    Thread-safe: the index is built once under a lock, then only read.
    """

    def __init__(
        self, store: LedgerStore, ledger_id: int, horizon: Position, positions: list[Position] | None = None
    ) -> None:
        self._store = store
        self.ledger_id = ledger_id
        self.horizon = horizon
        self._positions = positions
        self._lock = threading.Lock()

    def _index(self) -> list[Position]:
        positions = self._positions
        if positions is None:
            with self._lock:
                if self._positions is None:
                    self._positions = [entry.position for entry in self.entries()]
                positions = self._positions
        return positions

    def __len__(self) -> int:
        return len(self._index())

    def entries(self, first: int = 0) -> Iterator[Entry]:
        """Every entry from index ``first``, in order, read a chunk at a time."""
        last = self._store.last_entry_id(self.ledger_id)
        while first <= last:
            stop = min(first + _READ_CHUNK, last + 1) - 1
            for raw in self._store.read(self.ledger_id, first, stop):
                yield _decode(raw)
            first = stop + 1

    def read(self, start: Position, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries whose original id is at or after ``start``."""
        positions = self._index()
        first = bisect.bisect_left(positions, start)
        last = min(first + max_entries, len(positions)) - 1
        if last < first:
            return []
        return [_decode(raw) for raw in self._store.read(self.ledger_id, first, last)]

    def last_message_id(self) -> tuple[Position, int] | None:
        """The id of the view's last message: its entry and batch index (the last message not
        compacted out; -1 for a plain entry); None when the view is empty."""
        last = self._store.last_entry_id(self.ledger_id)
        if last < 0:
            return None
        entry = _decode(self._store.read(self.ledger_id, last, last)[0])
        batch = _batch_messages(entry)
        if batch is None:
            return entry.position, -1
        md, payload = batch
        singles = decode_batch(payload, md.num_messages_in_batch)
        kept = [i for i, single in enumerate(singles) if not single.compacted_out]
        return entry.position, kept[-1] if kept else len(singles) - 1

    def delete(self) -> None:
        """Delete the ledger (a newer compaction replaced it, or its topic was deleted)."""
        self._store.delete_ledger(self.ledger_id)


def kept_messages_mask(entry: Entry) -> int | None:
    """For a compacted batch entry, the bitset of its batch indexes not compacted out; None
    for a plain entry. The dispatcher sends it as the MESSAGE's ack set, so clients skip the
    empty placeholders whether or not they know ``compacted_out``."""
    batch = _batch_messages(entry)
    if batch is None:
        return None
    md, payload = batch
    mask = 0
    for i, single in enumerate(decode_batch(payload, md.num_messages_in_batch)):
        if not single.compacted_out:
            mask |= 1 << i
    return mask


def _decode(raw: bytes) -> Entry:
    ledger_id, entry_id = _HEADER.unpack_from(raw)
    return stored_entry(Position(ledger_id, entry_id), raw[_HEADER.size :])


def _encode(position: Position, raw: bytes) -> bytes:
    return _HEADER.pack(position.ledger_id, position.entry_id) + raw


# -- the compactor -------------------------------------------------------------------------
_MessageKey = tuple[Position, int]
"""A message's id in phase one's map: entry position and batch index (-1: not batched)."""


def _batch_messages(entry: Entry) -> tuple[MessageMetadata, bytes] | None:
    """A batch entry's metadata and decompressed batch payload; None for a plain entry."""
    if not entry.metadata.batched:
        return None
    md_bytes, payload = split_entry(entry.raw)
    md = MessageMetadata.FromString(md_bytes)
    if md.compression:
        payload = bytes(decompress_message(md.compression, payload, md.uncompressed_size))
    return md, payload


def _keys_of(entry: Entry) -> Iterator[tuple[str, int, bool]]:
    """(key, batch index, is tombstone) of each keyed message of ``entry``."""
    meta = entry.metadata
    if meta.uuid is not None or meta.num_chunks is not None:
        return  # a chunk: not compacted (kept out of the view)
    batch = _batch_messages(entry)
    if batch is None:
        if meta.partition_key is not None:
            yield meta.partition_key, -1, not entry.data
        return
    md, payload = batch
    for i, single in enumerate(decode_batch(payload, md.num_messages_in_batch)):
        key = single.key if single.key is not None else meta.partition_key
        if key is not None and not single.compacted_out:
            yield key, i, not single.payload


def _compacted_raw(entry: Entry, latest: dict[str, _MessageKey]) -> bytes | None:
    """What phase two keeps of ``entry``: its stored bytes, a re-batched copy, or None."""
    position = entry.position
    batch = _batch_messages(entry)
    if batch is None:
        key = entry.metadata.partition_key
        keep = key is not None and entry.data and latest.get(key) == (position, -1)
        return entry.raw if keep else None
    md, payload = batch
    n = md.num_messages_in_batch
    keeps = [False] * n
    for key, i, tombstone in _keys_of(entry):
        keeps[i] = not tombstone and latest.get(key) == (position, i)
    if not any(keeps):
        return None
    if all(keeps) and not md.compression:
        return entry.raw
    body = compact_batch(payload, n, keeps)
    if md.compression:
        md.ClearField("compression")  # NONE: stored decompressed
        md.ClearField("uncompressed_size")
    md_bytes = md.SerializeToString()
    return b"".join((struct.pack(">I", len(md_bytes)), md_bytes, body))


class _Compactor:
    """One run of the two-phase compaction of a topic (Pulsar's ``TwoPhaseCompactor``)."""

    def __init__(self, ml: ManagedLedger, cursor: ManagedCursor, previous: CompactedLedger | None) -> None:
        self._ml = ml
        self._cursor = cursor
        self._previous = previous
        self._store = ml.store
        self.messages_read = 0
        """Keyed messages phase one read (those the view could keep)."""
        self.messages_kept = 0

    def _source(self, end: Position) -> Iterator[Entry]:
        """The previous view, then the topic from the horizon up to ``end``."""
        if self._previous is not None:
            yield from self._previous.entries()
        self._cursor.rewind()
        while True:
            entries = self._cursor.read_entries(_READ_CHUNK, max_position=end)
            if not entries:
                return
            yield from entries

    def run(self) -> CompactedLedger | None:
        """Compact; return the new view (the previous one when nothing was added)."""
        end = self._ml.last_confirmed_entry
        horizon = self._cursor.mark_delete_position
        if end <= horizon or end.entry_id < 0:
            return self._previous
        latest: dict[str, _MessageKey] = {}
        for entry in self._source(end):
            for key, index, tombstone in _keys_of(entry):
                self.messages_read += 1
                if tombstone:
                    latest.pop(key, None)
                else:
                    latest[key] = (entry.position, index)
        self.messages_kept = len(latest)
        ledger_id = self._store.create_ledger()
        try:
            positions = self._phase_two(ledger_id, end, latest)
            self._store.seal_ledger(ledger_id)
            self._cursor.mark_delete(end, {COMPACTED_TOPIC_LEDGER_PROPERTY: ledger_id})
            self._cursor.flush()  # persisted before the previous ledger is deleted (throttled mark-deletes)
        except BaseException:
            self._store.delete_ledger(ledger_id)
            raise
        return CompactedLedger(self._store, ledger_id, end, positions)

    def _phase_two(self, ledger_id: int, end: Position, latest: dict[str, _MessageKey]) -> list[Position]:
        positions: list[Position] = []
        batch: list[bytes] = []
        for entry in self._source(end):
            raw = _compacted_raw(entry, latest)
            if raw is None:
                continue
            positions.append(entry.position)
            batch.append(_encode(entry.position, raw))
            if len(batch) >= _READ_CHUNK:
                self._store.append_many(ledger_id, batch)
                batch = []
        if batch:
            self._store.append_many(ledger_id, batch)
        return positions


class CompactedTopic:
    """A topic's compaction: its current compacted view, the runs and their status.

    Thread-safe. :meth:`trigger` starts a run on the ledger's executor; readers take
    :attr:`view` (an immutable snapshot, replaced when a run completes). ``journal`` hears the
    ``__compaction`` cursor's creation and moves (see the module docstring).
    """

    def __init__(self, ml: ManagedLedger, journal: TopicJournal | None = None) -> None:
        self._ml = ml
        self._journal = journal
        self._lock = threading.Lock()
        self._status = LongRunningProcessStatus(CompactionStatus.NOT_RUN)
        self._running: Future[None] | None = None
        self._view: CompactedLedger | None = None
        self._cursor: ManagedCursor | None = None
        self._record = CompactionRecord()
        if COMPACTION_SUBSCRIPTION in ml.cursor_names():
            self._cursor = ml.open_cursor(COMPACTION_SUBSCRIPTION)
            ledger_id = self._cursor.properties.get(COMPACTED_TOPIC_LEDGER_PROPERTY)
            if ledger_id is not None and ml.store.ledger_exists(ledger_id):
                self._view = CompactedLedger(ml.store, ledger_id, self._cursor.mark_delete_position)
            elif ledger_id is not None:
                log.warning("%s: compacted ledger %d is missing; compact the topic again", ml.name, ledger_id)

    @property
    def view(self) -> CompactedLedger | None:
        """The current compacted view, None before the first compaction."""
        return self._view

    @property
    def horizon(self) -> Position | None:
        """The compaction horizon, None before the first compaction."""
        view = self._view
        return view.horizon if view is not None else None

    @property
    def cursor(self) -> ManagedCursor | None:
        """The ``__compaction`` cursor, None before the first compaction."""
        return self._cursor

    def stats(self) -> CompactionStats:
        """A frozen snapshot: the last run's status, the figures of the runs, the horizon. O(1)."""
        with self._lock:
            view = self._view
            return CompactionStats(
                self._status, self._record, view.horizon if view is not None else None, self.is_running()
            )

    def status(self) -> LongRunningProcessStatus:
        """The last run's status on this broker (``NOT_RUN`` before any)."""
        return self._status

    def is_running(self) -> bool:
        """Whether a compaction runs now."""
        running = self._running
        return running is not None and not running.done()

    def wait(self, timeout: float | None = None) -> LongRunningProcessStatus:
        """Wait up to ``timeout`` seconds for the running compaction (if any) to end; return
        the status then. Raises ``TimeoutError`` when it is still running."""
        running = self._running
        if running is not None:
            wait_futures([running], timeout)
            if not running.done():
                raise TimeoutError(f"{self._ml.name}: compaction still running after {timeout} s")
        return self._status

    def trigger(self) -> Future[None]:
        """Start a compaction on the managed ledger's executor (a worker thread; at once, on
        this thread, with a deterministic broker's :class:`~mledger.core.InlineExecutor`); the
        future completes with it (raising what made it fail; the status says ``ERROR`` then).

        Raises :class:`CompactionInProgressError` while one runs.
        """
        with self._lock:
            if self.is_running():
                raise CompactionInProgressError("Compaction already in progress")
            future: Future[None] = Future()
            self._running = future
            self._status = LongRunningProcessStatus(CompactionStatus.RUNNING)
            if self._cursor is None:
                self._cursor = self._ml.open_cursor(COMPACTION_SUBSCRIPTION, InitialPosition.EARLIEST)
                if self._journal is not None:
                    self._journal.subscription_created(
                        COMPACTION_SUBSCRIPTION,
                        SubscriptionType.EXCLUSIVE.name,
                        InitialPosition.EARLIEST.value,
                        self._cursor.mark_delete_position,
                    )
        try:
            self._ml.executor.submit(self._run, future)
        except RuntimeError as exc:  # the executor shut down (the factory is closing)
            with self._lock:
                self._status = LongRunningProcessStatus(CompactionStatus.ERROR, str(exc))
            future.set_exception(exc)
        return future

    def _run(self, future: Future[None]) -> None:
        cursor = self._cursor
        assert cursor is not None
        previous = self._view
        clock = self._ml.clock
        started = clock.now_ms()
        compactor = _Compactor(self._ml, cursor, previous)
        try:
            view = compactor.run()
        except BaseException as exc:
            log.warning("%s: compaction failed: %s", self._ml.name, exc)
            with self._lock:
                self._status = LongRunningProcessStatus(CompactionStatus.ERROR, str(exc) or type(exc).__name__)
                self._record = replace(self._record, last_failed_timestamp_ms=clock.now_ms())
            future.set_exception(exc)
            return
        if view is not None and view is not previous and self._journal is not None:
            horizon = view.horizon  # the cursor's new mark-delete position
            self._journal.acked(COMPACTION_SUBSCRIPTION, [AckRecord(horizon.ledger_id, horizon.entry_id, -1, True)])
        now = clock.now_ms()
        with self._lock:
            self._view = view
            self._status = LongRunningProcessStatus(CompactionStatus.SUCCESS)
            self._record = replace(
                self._record,
                last_removed_event_count=compactor.messages_read - compactor.messages_kept,
                last_succeed_timestamp_ms=now,
                last_duration_ms=now - started,
            )
        if previous is not None and view is not previous:
            try:
                previous.delete()
            except MLedgerError as exc:  # a leftover ledger, not a failed compaction
                log.warning("%s: cannot delete compacted ledger %d: %s", self._ml.name, previous.ledger_id, exc)
        future.set_result(None)

    def last_message_id(self, last_confirmed: Position) -> tuple[Position, int] | None:
        """What GET_LAST_MESSAGE_ID answers a read-compacted consumer when the topic ends at
        or below the horizon (``last_confirmed`` is its last entry): the compacted view's last
        message, ``((-1, -1), -1)`` for an empty view. None when the topic has entries after the
        horizon, or no view: answer from the ledger (Pulsar's ``getLargestBatchIndexWhenPossible``
        and ``handleLastMessageIdFromCompactionService``)."""
        view = self._view
        if view is None or last_confirmed > view.horizon:
            return None
        last = view.last_message_id()
        return last if last is not None else (EARLIEST, -1)

    def backlog_size(self) -> int:
        """Bytes not compacted yet: the ``__compaction`` cursor's backlog, or the whole topic
        before the first compaction (Pulsar's estimate in ``checkCompaction``)."""
        cursor = self._cursor
        if cursor is None:
            return self._ml.total_size
        return self._ml.estimated_size_after(cursor.mark_delete_position)

    def delete(self) -> None:
        """Delete the compacted ledger (the topic is being deleted)."""
        view = self._view
        self._view = None
        if view is not None:
            view.delete()


def check_compaction_threshold(threshold: int | None) -> None:
    """Refuse a negative or non-integer ``compactionThreshold`` (412, Pulsar's message); None
    (unset) passes."""
    if threshold is None:
        return
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise PreconditionFailedError(f"compactionThreshold must be 0 or more, got {threshold!r}")
