"""Record a live broker as the replay's raw logs (``mledger standalone --record DIR``).

:class:`Recorder` is a :class:`~mledger.broker.BrokerJournal`: given to
``Broker(journal=...)`` (or ``--record`` / ``record=`` on the standalone, the embedded broker
and the pytest factory), it writes what the broker did as the raw logs ``mledger prepare`` and
``mledger replay`` read (docs/replay/inputs.md)::

    DIR/recording.json                     what was recorded, whether it is complete, the faults fired
    DIR/produced/part-<session>-<n>.parquet   every stored entry (a chunk of a chunked message
                                           with its chunk_id, num_chunks and uuid)
    DIR/acked/...                          acks that changed a cursor (individual, cumulative,
                                           batch index; PIP-423 skips are individual acks), the
                                           rows of one request sharing a ``command`` number
    DIR/cancelled/...                      PIP-423 cancels
    DIR/subscriptions/...                  subscriptions created, reset (seek, reset-cursor,
                                           clear-backlog) and deleted, with their times

Theory of operation
-------------------
The broker calls the recorder synchronously, on its own threads, with cheap tuples. The
recorder stamps each row with its topic-partition's time and puts it on a bounded in-memory
queue; a writer thread takes the queue every ``flush_interval_s`` (or sooner once
``rows_per_part`` rows wait) and writes one Parquet part per log, of at most ``rows_per_part``
rows, under a hidden temporary name renamed when complete. So a recording is always a set of
complete, readable parts: a SIGKILL loses at most the rows of the last interval; a clean stop
(``close``, which the broker's ``close`` calls) writes everything first. A session starts by writing an
empty part for each log that has none, so every log exists (the replay requires ``acked``).

Never blocking the broker: the queue holds at most ``max_pending_rows`` rows. Rows that do not
fit, and rows whose part cannot be written (a full disk), are dropped and counted; the
recording is then marked incomplete in ``recording.json`` (from when, why, how many rows were
dropped and the interval they cover) and a warning is logged once. Clients never notice.

Completeness. ``recording.json`` says ``"complete": false`` from its first byte: a session is
complete only once a clean stop (``close``) has written everything with nothing dropped and
nothing left unexpressed, and a recording only when every session is. So a SIGKILL, a full
disk that also refuses the status file, or a crash mid-write all leave it incomplete; the
status file is replaced atomically and a temporary one is removed when its write fails (and at
the next start, after a crash).

Order. The replay orders a topic-partition's events by ``(ts, kind, input order)`` with
produced < cancelled < acked < subscription events at equal ``ts``. Rows are stamped so that
order is the order the broker applied them where it matters: a topic-partition's stamps never
go back (``max(now, last)``), events after a subscription event are stamped at least 1 ms
after it, and an ack, cancel or subscription event naming an entry whose produced row was not
written yet (the entry was readable a moment before the writer thread reported it) waits for
that row, with every later event of its topic-partition behind it. Acks and produced rows of
the same millisecond commute (an ack names an entry already stored). ``publish_time_ms`` is
therefore the time the broker stored the entry, not the client's publish time.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..broker import AckRecord, PublishContext
from ..core import ConfigError, Position
from ._poll_events import (
    Acked,
    Anomaly,
    CaptureEvent,
    EntrySeen,
    ObservedEntry,
    SubscriptionCreated,
    SubscriptionDeleted,
    SubscriptionReset,
)
from ._schema import (
    CANCELLED_SCHEMA,
    PRODUCED_SCHEMA,
    RECORDED_ACKED_SCHEMA,
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_DELETED,
    SUBSCRIPTION_RESET,
    SUBSCRIPTIONS_SCHEMA,
)

__all__ = [
    "RECORDING_FILE",
    "ObservedEntry",
    "RecordSettings",
    "Recorder",
    "RowJournal",
    "read_recording_status",
    "rows_table",
    "warn_if_incomplete",
]

log = logging.getLogger(__name__)

RECORDING_FILE = "recording.json"
"""The recording's status file, beside the logs."""
MAX_LISTED_FAULTS = 1000
"""Injected faults a session lists in ``recording.json`` at most (more are counted only)."""
FORMAT = "mledger-recording"
VERSION = 1

_SCHEMAS = {
    "produced": PRODUCED_SCHEMA,
    "acked": RECORDED_ACKED_SCHEMA,
    "cancelled": CANCELLED_SCHEMA,
    "subscriptions": SUBSCRIPTIONS_SCHEMA,
}
_LOGS = tuple(_SCHEMAS)


@dataclass(frozen=True)
class RecordSettings:
    """How a :class:`Recorder` writes: ``flush_interval_s`` (the most a SIGKILL loses),
    ``rows_per_part`` (a part holds at most this many rows; a flush starts early once this
    many wait) and ``max_pending_rows`` (the memory cap: rows waiting for the writer beyond
    it are dropped, and the recording marked incomplete)."""

    flush_interval_s: float = 1.0
    rows_per_part: int = 100_000
    max_pending_rows: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.flush_interval_s > 0:
            raise ConfigError(f"flush_interval_s must be > 0, got {self.flush_interval_s!r}")
        for name in ("rows_per_part", "max_pending_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")


Row = tuple[Any, ...]
Make = Callable[[int], list[Row]]
"""Builds a deferred event's rows once its time stamp is known."""


class _Partition:
    """One topic-partition's stamping state (guarded by the recorder's lock)."""

    __slots__ = ("commands", "floor", "last_produced", "last_ts", "waiting")

    def __init__(self) -> None:
        self.commands = 0  # acknowledgement requests numbered so far: the ``command`` column
        self.last_ts = -1
        self.floor = -1  # the least stamp allowed: 1 ms after the last subscription event
        self.last_produced: Position | None = None
        self.waiting: deque[tuple[Position | None, str, bool, Make]] = deque()

    def stamp(self, now_ms: int, subscription_event: bool) -> int:
        ts = max(now_ms, self.last_ts, self.floor)
        self.last_ts = ts
        if subscription_event:
            self.floor = ts + 1
        return ts

    def covers(self, required: Position | None) -> bool:
        """Whether the entry ``required`` names was recorded as produced (None: nothing needed)."""
        if required is None:
            return True
        last = self.last_produced
        return last is not None and required <= last


class RowJournal:
    """A broker journal's rows, stamped in replay order (see "Order" in the module docstring)
    and handed to :meth:`_put` under the lock: the :class:`Recorder` queues them for its
    Parquet writer, ``mledger watch`` feeds them to its replay (:mod:`mledger.replay._watch`).
    Events waiting for their produced rows count against ``max_waiting_rows``; one more is
    dropped (:meth:`_drop`). Thread-safe."""

    def __init__(self, max_waiting_rows: int) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._queued_rows = 0
        self._max_waiting_rows = max_waiting_rows

    # -- the journal ------------------------------------------------------------------------------
    def entries_persisted(
        self, topic: str, partition: int, entries: Sequence[tuple[Position, PublishContext]], now_ms: int
    ) -> None:
        """Stored entries: one ``produced`` row each."""
        with self._lock:
            part = self._partition(topic, partition)
            ts = part.stamp(now_ms, False)
            rows = []
            for position, ctx in entries:
                md = ctx.metadata
                rows.append(
                    (
                        topic,
                        partition,
                        position.ledger_id,
                        position.entry_id,
                        max(ctx.num_messages, 1),
                        ts,
                        md.deliver_at_ms,
                        ctx.producer_name,
                        ctx.sequence_id,
                        md.partition_key,
                        md.chunk_id,
                        md.num_chunks,
                        md.uuid,
                    )
                )
                part.last_produced = position
            self._put("produced", rows)
            self._release(part, now_ms)

    def entry_observed(self, topic: str, partition: int, position: Position, entry: ObservedEntry) -> None:
        """One entry seen from outside the broker (``mledger capture``): a ``produced`` row
        stamped at its publish time (never before the partition's earlier rows)."""
        with self._lock:
            part = self._partition(topic, partition)
            ts = part.stamp(entry.publish_time_ms, False)
            row = (
                topic,
                partition,
                position.ledger_id,
                position.entry_id,
                entry.batch_size,
                ts,
                entry.deliver_at_ms,
                entry.producer_name,
                entry.sequence_id,
                entry.key,
                entry.chunk_id,
                entry.num_chunks,
                entry.uuid,
            )
            part.last_produced = position
            self._put("produced", [row])
            self._release(part, entry.publish_time_ms)

    def acked(
        self,
        topic: str,
        partition: int,
        subscription: str,
        acks: Sequence[AckRecord],
        now_ms: int,
        one_command: bool = True,
    ) -> None:
        """Acks that changed a cursor: one ``acked`` row each. ``one_command``: the acks are one
        acknowledgement request (one ``CommandAck``, one persist attempt), so their rows share a
        ``command`` number, new for each call on the topic-partition; else (a capture, which
        cannot see requests) ``command`` is null."""
        top = acks[0][:2] if len(acks) == 1 else max(a[:2] for a in acks)
        with self._lock:  # the usual case, without a deferred row builder: nothing waits
            part = self._partition(topic, partition)
            command = None
            if one_command:
                command = part.commands
                part.commands += 1
            last = part.last_produced
            if not part.waiting and last is not None and top <= last:
                rows = _ack_rows(topic, partition, subscription, acks, part.stamp(now_ms, False), command)
                self._put("acked", rows)
                return
        required = Position(*top)

        def make(ts: int) -> list[Row]:
            return _ack_rows(topic, partition, subscription, acks, ts, command)

        self._event(topic, partition, required, "acked", False, make, now_ms)

    def cancelled(self, topic: str, partition: int, subscription: str, position: Position, now_ms: int) -> None:
        """A PIP-423 cancel: one ``cancelled`` row naming the subscription."""

        def make(ts: int) -> list[Row]:
            return [(topic, partition, subscription, position.ledger_id, position.entry_id, None, ts)]

        self._event(topic, partition, position, "cancelled", False, make, now_ms)

    def subscription_created(
        self,
        topic: str,
        partition: int,
        subscription: str,
        sub_type: str,
        initial_position: str,
        mark_delete: Position,
        now_ms: int,
    ) -> None:
        """A ``created`` row with the position its cursor started at (a ``latest`` one waits for
        the produced rows of the entries before it)."""
        required = mark_delete if mark_delete.entry_id >= 0 else None
        self._subscription_event(
            topic,
            partition,
            subscription,
            SUBSCRIPTION_CREATED,
            required,
            sub_type,
            initial_position,
            mark_delete,
            now_ms,
        )

    def subscription_reset(
        self, topic: str, partition: int, subscription: str, position: Position, now_ms: int
    ) -> None:
        """A ``reset`` row: the position the cursor reads from next."""
        before = Position(position.ledger_id, position.entry_id - 1) if position.entry_id > 0 else None
        self._subscription_event(
            topic, partition, subscription, SUBSCRIPTION_RESET, before, None, None, position, now_ms
        )

    def subscription_deleted(self, topic: str, partition: int, subscription: str, now_ms: int) -> None:
        """A ``deleted`` row."""
        self._subscription_event(topic, partition, subscription, SUBSCRIPTION_DELETED, None, None, None, None, now_ms)

    def write_events(self, events: Iterable[CaptureEvent]) -> None:
        """A cluster poller's events (:mod:`mledger.replay._poll_events`) as rows; an anomaly is
        a change not recorded (:meth:`not_recorded`)."""
        for event in events:
            match event:
                case EntrySeen(topic, partition, position, entry):
                    self.entry_observed(topic, partition, position, entry)
                case Acked(topic, partition, name, acks, ts):
                    self.acked(topic, partition, name, acks, ts, one_command=False)
                case SubscriptionCreated(topic, partition, name, sub_type, mark_delete, ts):
                    self.subscription_created(topic, partition, name, sub_type, "earliest", mark_delete, ts)
                case SubscriptionReset(topic, partition, name, position, ts):
                    self.subscription_reset(topic, partition, name, position, ts)
                case SubscriptionDeleted(topic, partition, name, ts):
                    self.subscription_deleted(topic, partition, name, ts)
                case Anomaly(kind, topic, detail, ts):
                    self.not_recorded(f"capture anomaly {kind}{f' on {topic}' if topic else ''}: {detail}", ts)

    def not_recorded(self, what: str, now_ms: int) -> None:
        """A change the logs cannot express."""
        raise NotImplementedError

    def seal(self) -> None:
        """Stamp every later row after every row stamped so far (``mledger watch`` feeds its
        replay up to here: a later row of the same time would sort before rows already fed)."""
        with self._lock:
            for part in self._partitions.values():
                part.floor = max(part.floor, part.last_ts + 1)

    # -- internals: the broker's side ----------------------------------------------------------
    def _partition(self, topic: str, partition: int) -> _Partition:
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is None:
            part = self._partitions[key] = _Partition()
        return part

    def _subscription_event(
        self,
        topic: str,
        partition: int,
        subscription: str,
        event: str,
        required: Position | None,
        sub_type: str | None,
        initial_position: str | None,
        position: Position | None,
        now_ms: int,
    ) -> None:
        def make(ts: int) -> list[Row]:
            return [
                (
                    topic,
                    subscription,
                    sub_type,
                    initial_position,
                    partition,
                    event,
                    ts,
                    None if position is None else position.ledger_id,
                    None if position is None else position.entry_id,
                )
            ]

        self._event(topic, partition, required, "subscriptions", True, make, now_ms)

    def _event(
        self, topic: str, partition: int, required: Position | None, name: str, is_sub: bool, make: Make, now: int
    ) -> None:
        with self._lock:
            part = self._partition(topic, partition)
            if part.waiting or not part.covers(required):
                part.waiting.append((required, name, is_sub, make))
                self._queued_rows += 1  # counted against the cap while it waits
                if self._queued_rows > self._max_waiting_rows:
                    self._drop(1, now, "too many events wait for their produced rows")
                    part.waiting.pop()
                    self._queued_rows -= 1
                return
            self._put(name, make(part.stamp(now, is_sub)))

    def _release(self, part: _Partition, now_ms: int) -> None:
        while part.waiting and part.covers(part.waiting[0][0]):
            _, name, is_sub, make = part.waiting.popleft()
            self._queued_rows -= 1
            self._put(name, make(part.stamp(now_ms, is_sub)))

    def _put(self, name: str, rows: list[Row]) -> None:
        """Take stamped rows of log ``name`` (the caller holds the lock)."""
        raise NotImplementedError

    def _drop(self, n: int, now_ms: int, why: str) -> None:
        """``n`` rows were lost (the caller holds the lock)."""
        raise NotImplementedError


class Recorder(RowJournal):
    """Writes a broker's stored entries and cursor changes under ``directory`` as raw logs.

    See the module docstring. Thread-safe; every journal method returns at once. ``close``
    (idempotent) writes what is queued and marks the session stopped. A directory holding an
    earlier recording is appended to (a new session; parts of each session sort after the
    earlier ones). Raises ``ConfigError`` when ``directory`` cannot be created or written.
    """

    def __init__(self, directory: str | Path, settings: RecordSettings | None = None) -> None:
        self.directory = Path(directory)
        self.settings = settings or RecordSettings()
        super().__init__(self.settings.max_pending_rows)
        self._queue: deque[tuple[str, list[Row]]] = deque()
        self._dropped = 0
        self._dropped_span: tuple[int, int] | None = None  # first and last drop (ms)
        self._written = dict.fromkeys(_LOGS, 0)
        self._incomplete: tuple[int, str] | None = None
        self._faults: list[dict[str, object]] = []
        self._faults_fired = 0
        self._status_dirty = False
        self._closed = False
        self._wake = threading.Event()
        self._session = int(time.time() * 1000)
        self._parts = 0
        try:
            for name in _LOGS:
                (self.directory / name).mkdir(parents=True, exist_ok=True)
                for leftover in (self.directory / name).glob(".part-*"):
                    leftover.unlink()  # a part an earlier process was writing when it died
            _status_temp(self.directory).unlink(missing_ok=True)  # the same for the status file
            for name, schema in _SCHEMAS.items():  # every log exists, even one nothing is written to
                if not any((self.directory / name).glob("part-*.parquet")):
                    empty = self.directory / name / f"part-{self._session:013d}-{0:08d}.parquet"
                    pq.write_table(schema.empty_table(), empty)
            self._status = self._load_status()
            self._write_status()
        except OSError as exc:
            raise ConfigError(f"cannot record into {self.directory}: {exc}") from None
        self._writer = threading.Thread(target=self._run, name="mledger-recorder", daemon=True)
        self._writer.start()

    def not_recorded(self, what: str, now_ms: int) -> None:
        """A change the logs cannot express: the recording is incomplete from now."""
        with self._lock:
            self._mark_incomplete(now_ms, f"not recorded: {what}")

    def fault_fired(self, fault: Mapping[str, object], now_ms: int) -> None:
        """An injected fault fired: listed under the session's ``faults`` in ``recording.json``
        (the first :data:`MAX_LISTED_FAULTS`, then counted), not a replay event: what the
        broker did because of it (a refused write, a deleted subscription) is recorded as
        usual."""
        with self._lock:
            if len(self._faults) < MAX_LISTED_FAULTS:
                self._faults.append(dict(fault))
            self._faults_fired += 1
            self._status_dirty = True

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self) -> None:
        """Write everything queued (deferred events too), close the session. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for part in self._partitions.values():
                while part.waiting:  # their produced rows never came: written as they are,
                    _, name, is_sub, make = part.waiting.popleft()  # at their partition's last time
                    self._put(name, make(part.stamp(-1, is_sub)))
        self._wake.set()
        self._writer.join()

    @property
    def dropped_rows(self) -> int:
        """Rows lost so far (queue full, or their part could not be written)."""
        return self._dropped

    @property
    def complete(self) -> bool:
        """Whether everything the broker did so far is recorded (or still queued). The status
        file says ``complete`` only once ``close`` has also written it all."""
        return self._incomplete is None

    def flush(self, timeout: float = 30.0) -> bool:
        """Write what is queued now (for tests and tools); False when ``timeout`` passed first."""
        done = threading.Event()
        with self._lock:
            self._queue.append(("", [(done,)]))
        self._wake.set()
        return done.wait(timeout)

    def _put(self, name: str, rows: list[Row]) -> None:
        """Queue rows (caller holds the lock), or drop them when the queue is full."""
        if self._closed and not self._writer.is_alive():
            self._drop(len(rows), int(time.time() * 1000), "recorded after the recorder closed")
            return
        if self._queued_rows + len(rows) > self.settings.max_pending_rows:
            self._drop(len(rows), int(time.time() * 1000), "the queue was full (max_pending_rows)")
            return
        self._queue.append((name, rows))
        self._queued_rows += len(rows)
        if self._queued_rows >= self.settings.rows_per_part:
            self._wake.set()

    def _drop(self, n: int, now_ms: int, why: str) -> None:
        self._dropped += n
        span = self._dropped_span
        self._dropped_span = (now_ms, now_ms) if span is None else (span[0], max(span[1], now_ms))
        self._mark_incomplete(now_ms, why)

    def _mark_incomplete(self, now_ms: int, why: str) -> None:
        """Caller holds the lock; the status file is rewritten by the writer thread."""
        if self._incomplete is None:
            self._incomplete = (now_ms, why)
            log.warning("recording %s is incomplete from now on: %s", self.directory, why)
        self._status_dirty = True

    # -- internals: the writer thread --------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self.settings.flush_interval_s)
            self._wake.clear()
            closing = self._closed
            self._write_queued()
            if closing:
                self._write_queued()
                self._session_status(stopped=True)
                self._write_status_safely()
                return
            if self._status_dirty:
                self._write_status_safely()

    def _write_queued(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, deque()
            waiting = sum(len(p.waiting) for p in self._partitions.values())
            self._queued_rows = waiting
        rows: dict[str, list[Row]] = {name: [] for name in _LOGS}
        markers = []
        for name, items in batch:
            if name:
                rows[name].extend(items)
            else:
                markers.append(items[0][0])
        for name, items in rows.items():
            limit = self.settings.rows_per_part
            for start in range(0, len(items), limit):
                self._write_part(name, items[start : start + limit])
        if self._status_dirty:
            self._write_status_safely()
        for marker in markers:
            marker.set()

    def _write_part(self, name: str, rows: list[Row]) -> None:
        self._parts += 1
        final = self.directory / name / f"part-{self._session:013d}-{self._parts:08d}.parquet"
        temp = final.with_name("." + final.name + ".tmp")
        try:
            pq.write_table(rows_table(name, rows), temp)
            os.replace(temp, final)
            self._written[name] += len(rows)
        except (OSError, pa.ArrowException) as exc:
            with self._lock:
                self._drop(len(rows), int(time.time() * 1000), f"cannot write {final.name}: {exc}")
            try:
                temp.unlink(missing_ok=True)
            except OSError:
                pass

    # -- internals: recording.json -----------------------------------------------------------------
    def _load_status(self) -> dict[str, Any]:
        path = self.directory / RECORDING_FILE
        status: dict[str, Any] = {"format": FORMAT, "version": VERSION, "sessions": []}
        if path.exists():
            try:
                earlier = json.loads(path.read_text())
                if earlier.get("format") == FORMAT:
                    status["sessions"] = list(earlier.get("sessions", []))
            except (OSError, ValueError):
                log.warning("%s: unreadable %s replaced", self.directory, RECORDING_FILE)
        status["sessions"].append(
            {
                "session": self._session,
                "started_ms": self._session,
                "stopped_ms": None,
                "settings": asdict(self.settings),
            }
        )
        return status

    def _session_status(self, stopped: bool = False) -> None:
        with self._lock:
            session = self._status["sessions"][-1]
            session["rows"] = dict(self._written)
            session["dropped_rows"] = self._dropped
            if self._dropped_span is not None:
                session["dropped_from_ms"], session["dropped_until_ms"] = self._dropped_span
            if self._incomplete is not None:
                session["incomplete_since_ms"], session["incomplete_reason"] = self._incomplete
            if self._faults_fired:
                session["faults"] = list(self._faults)
                session["faults_fired"] = self._faults_fired
            if stopped:
                session["stopped_ms"] = int(time.time() * 1000)
            self._status_dirty = False

    def _write_status(self) -> None:
        """Replace ``recording.json`` atomically; raises ``OSError`` (no temporary file left)."""
        self._status["complete"] = all(_session_complete(s) for s in self._status["sessions"])
        temp = _status_temp(self.directory)
        try:
            temp.write_text(json.dumps(self._status, indent=2) + "\n")
            os.replace(temp, self.directory / RECORDING_FILE)
        except OSError:
            try:
                temp.unlink(missing_ok=True)
            except OSError:
                pass
            raise

    def _write_status_safely(self) -> None:
        self._session_status()
        try:
            self._write_status()
        except OSError as exc:  # a full disk: the file on disk still says incomplete
            log.debug("cannot write %s: %s", RECORDING_FILE, exc)


def rows_table(name: str, rows: list[Row]) -> pa.Table:
    """Stamped rows of log ``name`` as a table of its schema."""
    schema = _SCHEMAS[name]
    # one conversion of the row tuples as a struct array: a few times faster than transposing
    # them into columns and converting each
    rows_array = pa.array(rows, type=pa.struct(list(schema)))
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(rows_array)]).cast(schema)


def _status_temp(directory: Path) -> Path:
    return directory / ("." + RECORDING_FILE + ".tmp")


def _session_complete(session: dict[str, Any]) -> bool:
    """A session is complete once stopped cleanly with nothing dropped nor left unexpressed."""
    return (
        session.get("incomplete_since_ms") is None
        and not session.get("dropped_rows")
        and session.get("stopped_ms") is not None
    )


def _ack_rows(
    topic: str, partition: int, subscription: str, acks: Sequence[AckRecord], ts: int, command: int | None
) -> list[Row]:
    """The ``acked`` rows of acks stamped ``ts``, of one ``command`` (None: not known)."""
    return [
        (
            topic,
            partition,
            subscription,
            a.ledger_id,
            a.entry_id,
            a.batch_index if a.batch_index >= 0 else None,
            "cumulative" if a.cumulative else "individual",
            ts,
            command,
        )
        for a in acks
    ]


def read_recorded_rows(directory: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Every log's rows of the recording in ``directory``, by log name (``produced``, ``acked``,
    ``cancelled``, ``subscriptions``), in recorded order: parts in name order, rows in part order.
    The file layout (how rows were cut into parts) and the session stamps in ``recording.json``
    are left out, so two recordings of the same run compare equal. Reads every part: O(rows)."""
    root = Path(directory)
    return {
        name: [row for part in sorted((root / name).glob("part-*.parquet")) for row in pq.read_table(part).to_pylist()]
        for name in _LOGS
    }


def read_recording_status(directory: str | Path, filesystem: pafs.FileSystem | None = None) -> dict[str, Any] | None:
    """The ``recording.json`` of a recording directory, None when there is none.

    ``complete`` is False when a session dropped rows or was not stopped cleanly (a crash:
    its last ``flush_interval_s`` of events may be missing), or was not recorded from an
    empty broker (``incomplete_reason`` says why).
    """
    fs = filesystem or pafs.LocalFileSystem()
    path = posixpath.join(str(directory) if filesystem else os.path.abspath(directory), RECORDING_FILE)
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        status: dict[str, Any] = json.loads(f.read().decode("utf-8"))
    status["complete"] = all(_session_complete(s) for s in status.get("sessions", []))
    return status


def warn_if_incomplete(filesystem: pafs.FileSystem, directory: str) -> None:
    """Log a warning when ``directory`` is a recording that is not complete (what reading raw
    logs calls: the replay of such a recording may differ from the broker it recorded)."""
    try:
        status = read_recording_status(directory, filesystem)
    except (OSError, ValueError, pa.ArrowException) as exc:
        log.warning("%s: unreadable %s (%s)", directory, RECORDING_FILE, exc)
        return
    if status is None or status["complete"]:
        return
    reasons = [_incompleteness(s) for s in status.get("sessions", []) if not _session_complete(s)]
    log.warning(
        "%s is an incomplete recording (%s): the replay may differ from the broker", directory, "; ".join(reasons)
    )


def _incompleteness(session: dict[str, Any]) -> str:
    """Why one session is incomplete, with the rows it dropped and when."""
    parts = []
    if session.get("incomplete_reason"):
        parts.append(str(session["incomplete_reason"]))
    dropped = session.get("dropped_rows") or 0
    if dropped:
        span = ""
        if session.get("dropped_from_ms") is not None:
            span = f" between {_utc(session['dropped_from_ms'])} and {_utc(session['dropped_until_ms'])}"
        parts.append(f"{dropped} rows dropped{span}")
    if session.get("stopped_ms") is None:
        parts.append("not stopped cleanly: its last interval may be missing")
    return ", ".join(parts) or "incomplete"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
