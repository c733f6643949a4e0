"""Capture a live Pulsar cluster as the replay's raw logs (``mledger capture``).

Only the public APIs every Pulsar has are used:

- a non-durable reader per topic-partition, from its earliest entry, gives the ``produced``
  rows (ledger and entry ids, publish time, producer, key; payloads are not kept);
- the topic ``stats`` give the durable subscriptions and their types (non-durable ones, the
  capture's own readers among them, are not subscriptions of the replay);
- ``internalStats``, polled every ``interval_s``, give each subscription's mark-delete
  position and individually deleted ranges. The acks are the differences between two polls:
  a mark-delete that moves back, or an acked entry above it that is no longer acked, is a
  ``reset`` to the new mark-delete followed by acks of what is acked now; a subscription that
  disappears is ``deleted``; one that appears is ``created`` at the state of the poll that
  first sees it (one that existed before the capture starts from the first poll's state).

The rows go through the recorder's writer (:class:`~mledger.replay._recording.Recorder`), so
the output is a recording (``recording.json`` and Parquet parts) plus ``capture.json`` saying
what is approximate. The admin side is any object with ``get_json(path, query)`` (the CLI
passes :class:`mledger.admin.RemoteAdmin`); the protocol side a ``pulsar.Client``.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from ..broker._journal import AckRecord
from ..core._errors import ConfigError, NotFoundError
from ..core._position import Position
from ._recording import ObservedEntry, Recorder, RecordSettings

__all__ = ["CAPTURE_FILE", "AdminJson", "Capture", "CaptureSettings", "parse_deleted_ranges"]

CAPTURE_FILE = "capture.json"
READER_PREFIX = "mledger-capture"
"""The capture's readers' subscription role prefix."""
READ_TIMEOUT_S = 30.0
"""How long a poll waits for its readers to reach the entries the stats name."""
_PARTITION = re.compile(r"^(.*)-partition-(\d+)$")
_RANGE = re.compile(r"\((-?\d+):(-?\d+)\.\.(-?\d+):(-?\d+)\]")

APPROXIMATIONS = {
    "ack_times": "acks are seen by polling internal stats: their times are the poll's (quantised to the interval)",
    "partial_batch_acks": "batch-index acks of a partly acknowledged entry are not in internal stats: not captured",
    "starting_state": "a subscription that existed before the capture starts from its first poll's state",
    "created_state": "a subscription created during the capture starts from the state of the first poll that "
    "sees it (its initial position and the acks before that poll are folded into it)",
    "resets": "resets are inferred from two polls; several resets between two polls are one",
    "deliver_at_ms": "not exposed to a reader by the Python client: null (delayed messages replay as immediate)",
    "sequence_id": "not exposed to a reader by the Python client: null (no deduplication in the replay)",
    "batch_size": "the highest batch index a reader sees + 1",
}


class AdminJson(Protocol):
    """The admin calls the capture needs: a GET whose JSON body is returned."""

    def get_json(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        """GET ``path`` and decode its JSON; raises an ``MLedgerError`` for an error status."""
        ...


@dataclass(frozen=True)
class CaptureSettings:
    """What to capture: ``topics`` (full or short names) or every topic of ``namespace``
    (``tenant/ns``), polled every ``interval_s``; ``hash_keys`` replaces message keys by an
    HMAC-SHA256 under a random per-capture key (keys stay equal to each other, unreadable)."""

    topics: tuple[str, ...] = ()
    namespace: str | None = None
    interval_s: float = 1.0
    hash_keys: bool = False
    description: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.namespace):
            raise ConfigError("capture needs either topics or a namespace (not both)")
        if self.namespace is not None and len([p for p in self.namespace.split("/") if p]) != 2:
            raise ConfigError(f"invalid namespace {self.namespace!r}: expected TENANT/NAMESPACE")
        if not self.interval_s > 0:
            raise ConfigError(f"interval must be > 0, got {self.interval_s!r}")


def parse_deleted_ranges(text: str) -> list[tuple[Position, Position]]:
    """Internal stats' ``individuallyDeletedMessages`` (``[(3:5..3:7],(3:9..3:10]]``) as
    ``(lower, upper]`` position pairs. Raises ``ValueError`` naming the text if it is not that form."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    ranges = []
    for m in _RANGE.finditer(body):
        a, b, c, d = (int(x) for x in m.groups())
        ranges.append((Position(a, b), Position(c, d)))
    if _RANGE.sub("", body[1:-1]).replace(",", "").strip():
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    return ranges


def _now() -> int:
    return int(time.time() * 1000)


def _full_name(topic: str) -> str:
    if "://" in topic:
        return topic
    return f"persistent://{topic}" if topic.count("/") == 2 else f"persistent://public/default/{topic}"


def _admin_path(full: str, *rest: str) -> str:
    domain, name = full.split("://", 1)
    tenant, ns, local = name.split("/", 2)
    return "/".join([f"/admin/v2/{domain}", quote(tenant, safe=""), quote(ns, safe=""), quote(local, safe=""), *rest])


@dataclass
class _SubState:
    sub_type: str
    mark_delete: Position
    acked: set[Position]


class _TopicPartition:
    """One captured topic-partition: its reader, known entries and subscriptions' last state."""

    def __init__(self, topic: str, partition: int, reader: Any) -> None:
        self.topic = topic
        self.partition = partition
        self.reader = reader
        self.positions: list[Position] = []
        self.subscriptions: dict[str, _SubState] = {}
        self.pending: tuple[Position, Any, int] | None = None  # the last entry: first message, top batch index

    @property
    def local_name(self) -> str:
        return self.topic if self.partition < 0 else f"{self.topic}-partition-{self.partition}"

    def between(self, low: Position, high: Position) -> list[Position]:
        """Known entries in ``(low, high]``."""
        lo = bisect.bisect_right(self.positions, low)
        hi = bisect.bisect_right(self.positions, high)
        return self.positions[lo:hi]


class Capture:
    """Captures ``client``/``admin``'s cluster into ``directory`` (see the module docstring).

    ``poll()`` lists, reads and diffs once; ``run(duration_s, stop)`` polls every interval
    until ``duration_s`` passed or ``stop`` is set, then polls once more and closes. Raises
    ``ConfigError`` when ``directory`` cannot be written.
    """

    def __init__(self, directory: str | Path, client: Any, admin: AdminJson, settings: CaptureSettings) -> None:
        self.directory = Path(directory)
        self.client = client
        self.admin = admin
        self.settings = settings
        self.recorder = Recorder(self.directory, RecordSettings(flush_interval_s=max(settings.interval_s, 1.0)))
        self._key = secrets.token_bytes(32) if settings.hash_keys else None
        self._partitions: dict[tuple[str, int], _TopicPartition] = {}
        self._started_ms = _now()
        self._polls = 0
        self._closed = False

    # -- the loop -----------------------------------------------------------------------------
    def run(self, duration_s: float, stop: threading.Event | None = None) -> None:
        """Poll every interval for ``duration_s`` seconds or until ``stop`` is set, then once
        more, and close."""
        stop = stop or threading.Event()
        deadline = time.monotonic() + duration_s
        try:
            self.poll()
            while not stop.is_set() and time.monotonic() < deadline:
                stop.wait(min(self.settings.interval_s, max(deadline - time.monotonic(), 0)))
                self.poll()
        finally:
            self.close()

    def poll(self) -> None:
        """One poll: find topic-partitions (new ones get a reader), then for each read the
        subscriptions, their internal stats and the new entries, and record the differences."""
        for topic, partition in self._list():
            if (topic, partition) not in self._partitions:
                self._open(topic, partition)
        for tp in list(self._partitions.values()):
            self._poll_partition(tp)
        self._polls += 1

    def close(self) -> None:
        """Close the readers and the recorder, write ``capture.json``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for tp in self._partitions.values():
            self._flush_entry(tp)
            try:
                tp.reader.close()
            except Exception:  # noqa: BLE001 - a reader of a deleted topic may refuse to close
                pass
        self.recorder.close()
        self._write_description()

    # -- listing ------------------------------------------------------------------------------
    def _list(self) -> list[tuple[str, int]]:
        if self.settings.namespace is not None:
            return self._list_namespace(self.settings.namespace)
        out: list[tuple[str, int]] = []
        for topic in self.settings.topics:
            out.extend(self._partitions_of(_full_name(topic)))
        return out

    def _partitions_of(self, full: str) -> list[tuple[str, int]]:
        try:
            meta = self.admin.get_json(_admin_path(full, "partitions"))
        except NotFoundError:  # a topic that does not exist yet: the reader creates it, as a client does
            meta = {}
        n = int(meta.get("partitions", 0)) if isinstance(meta, dict) else 0
        return [(full, i) for i in range(n)] if n > 0 else [(full, -1)]

    def _list_namespace(self, namespace: str) -> list[tuple[str, int]]:
        """Every topic-partition of the namespace: the partitions of each partitioned topic
        (from its metadata: brokers list them, or only the partitioned name) and the others."""
        tenant, ns = (p for p in namespace.split("/") if p)
        base = f"/admin/v2/persistent/{quote(tenant, safe='')}/{quote(ns, safe='')}"
        partitioned = set(self.admin.get_json(base + "/partitioned"))
        out = [tp for name in sorted(partitioned) for tp in self._partitions_of(name) if tp[1] >= 0]
        for name in self.admin.get_json(base):
            m = _PARTITION.match(name)
            if name not in partitioned and (m is None or m.group(1) not in partitioned):
                out.append((name, -1))
        return out

    def _open(self, topic: str, partition: int) -> None:
        import pulsar  # the capture extra

        local = topic if partition < 0 else f"{topic}-partition-{partition}"
        reader = self.client.create_reader(
            local, pulsar.MessageId.earliest, subscription_role_prefix=READER_PREFIX, receiver_queue_size=1000
        )
        self._partitions[(topic, partition)] = _TopicPartition(topic, partition, reader)

    # -- one topic-partition ------------------------------------------------------------------
    def _poll_partition(self, tp: _TopicPartition) -> None:
        try:
            stats = self.admin.get_json(_admin_path(tp.local_name, "stats"))
            internal = self.admin.get_json(_admin_path(tp.local_name, "internalStats"))
        except NotFoundError:  # the topic was deleted: so were its subscriptions
            self._gone(tp)
            return
        now = _now()
        last = internal.get("lastConfirmedEntry")
        self._read_entries(tp, Position.parse(last) if last else None)  # every entry the stats name is known
        cursors = internal.get("cursors", {})
        current: dict[str, _SubState] = {}
        for name, sub in stats.get("subscriptions", {}).items():
            if not sub.get("isDurable", True) or name not in cursors:
                continue
            cursor = cursors[name]
            md = Position.parse(cursor["markDeletePosition"])
            acked: set[Position] = set()
            for low, high in parse_deleted_ranges(cursor.get("individuallyDeletedMessages", "[]")):
                acked.update(tp.between(low, high))
            current[name] = _SubState(str(sub.get("type", "Shared")).upper(), md, acked)
        for name in sorted(set(tp.subscriptions) - set(current)):
            self.recorder.subscription_deleted(tp.topic, tp.partition, name, now)
            del tp.subscriptions[name]
        for name, state in sorted(current.items()):
            self._diff(tp, name, state, now)

    def _diff(self, tp: _TopicPartition, name: str, new: _SubState, now: int) -> None:
        old = tp.subscriptions.get(name)
        if old is not None and old.sub_type != new.sub_type:  # subscribed again with another type
            self.recorder.subscription_created(
                tp.topic, tp.partition, name, new.sub_type, "earliest", old.mark_delete, now
            )
        if old is None:
            self.recorder.subscription_created(
                tp.topic, tp.partition, name, new.sub_type, "earliest", new.mark_delete, now
            )
            if tp.positions and new.mark_delete >= tp.positions[0]:  # a created event starts at the first entry
                self._reset(tp, name, new.mark_delete, now)
            acks = sorted(new.acked)
        elif new.mark_delete < old.mark_delete or any(p > new.mark_delete and p not in new.acked for p in old.acked):
            self._reset(tp, name, new.mark_delete, now)
            acks = sorted(new.acked)
        else:
            moved = tp.between(old.mark_delete, new.mark_delete)
            acks = sorted((set(moved) | new.acked) - old.acked)
        if acks:
            self.recorder.acked(tp.topic, tp.partition, name, [AckRecord(p.ledger_id, p.entry_id) for p in acks], now)
        tp.subscriptions[name] = new

    def _reset(self, tp: _TopicPartition, name: str, mark_delete: Position, now: int) -> None:
        """A ``reset`` that leaves the mark-delete at ``mark_delete`` (Pulsar's resetCursor
        reads from the given position and marks everything before it deleted)."""
        after = Position(mark_delete.ledger_id, mark_delete.entry_id + 1)
        self.recorder.subscription_reset(tp.topic, tp.partition, name, after, now)

    def _gone(self, tp: _TopicPartition) -> None:
        now = _now()
        for name in sorted(tp.subscriptions):
            self.recorder.subscription_deleted(tp.topic, tp.partition, name, now)
        tp.subscriptions.clear()

    def _read_entries(self, tp: _TopicPartition, last_confirmed: Position | None) -> None:
        """Read what the reader has, and at least up to ``last_confirmed`` (the topic's last
        entry when its stats were taken), so that every entry those stats name is known.
        An entry's ``produced`` row is written once the next entry (or the end) shows that
        all its batch's messages were seen; acks naming it wait in the recorder until then."""
        import pulsar  # the capture extra

        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            behind = (
                last_confirmed is not None
                and last_confirmed.entry_id >= 0
                and (not tp.positions or tp.positions[-1] < last_confirmed)
            )
            if not behind and not tp.reader.has_message_available():
                return
            try:
                msg = tp.reader.read_next(timeout_millis=200)
            except pulsar.Timeout:
                if time.monotonic() > deadline:
                    self.recorder.not_recorded(f"{tp.local_name}: entries up to {last_confirmed} not read", _now())
                    return
                continue
            self._message(tp, msg)

    def _message(self, tp: _TopicPartition, msg: Any) -> None:
        mid = msg.message_id()
        position = Position(mid.ledger_id(), mid.entry_id())
        pending = tp.pending
        if pending is not None and pending[0] == position:
            tp.pending = (position, pending[1], max(pending[2], mid.batch_index()))
            return
        if tp.positions and position <= tp.positions[-1]:
            return  # seen already (a reader reconnecting resends)
        self._flush_entry(tp)
        tp.pending = (position, msg, mid.batch_index())
        tp.positions.append(position)

    def _flush_entry(self, tp: _TopicPartition) -> None:
        if tp.pending is None:
            return
        position, msg, batch_index = tp.pending
        tp.pending = None
        key = msg.partition_key() or None
        if key is not None and self._key is not None:
            key = hmac.new(self._key, key.encode(), hashlib.sha256).hexdigest()[:32]
        entry = ObservedEntry(
            publish_time_ms=int(msg.publish_timestamp()),
            batch_size=max(batch_index + 1, 1),
            producer_name=msg.producer_name() or None,
            key=key,
        )
        self.recorder.entry_observed(tp.topic, tp.partition, position, entry)

    # -- description --------------------------------------------------------------------------
    def _write_description(self) -> None:
        description = {
            "format": "mledger-capture",
            "version": 1,
            **dict(self.settings.description),
            "topics": self.list_captured(),
            "namespace": self.settings.namespace,
            "interval_s": self.settings.interval_s,
            "started_ms": self._started_ms,
            "ended_ms": _now(),
            "polls": self._polls,
            "keys_hashed": self.settings.hash_keys,
            "complete": self.recorder.complete,
            "approximations": APPROXIMATIONS,
        }
        (self.directory / CAPTURE_FILE).write_text(json.dumps(description, indent=2) + "\n")

    def list_captured(self) -> list[str]:
        """The topic-partitions captured so far (their local names), sorted."""
        return sorted(tp.local_name for tp in self._partitions.values())
