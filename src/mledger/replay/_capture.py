"""Capture a live Pulsar cluster as the replay's raw logs (``mledger capture``).

Only the public APIs every Pulsar has are used:

- the namespace's topic lists (admin REST) say which topics exist: a named topic that does not
  exist is refused before anything is read (:class:`TopicNotFoundError`), because a reader's
  subscribe would create it (Pulsar's auto-creation), and capture never changes the cluster;
- a non-durable reader per topic-partition, from its earliest entry, gives the ``produced``
  rows (ledger and entry ids, publish time, producer, key; payloads are not kept). A chunked
  message arrives whole, with the ids of its first and last chunks: each chunk is one row with
  its ``chunk_id`` and ``num_chunks``;
- the topic ``stats`` give the durable subscriptions and their types (non-durable ones, the
  capture's own readers among them, are not subscriptions of the replay);
- ``internalStats``, polled every ``interval_s``, give each subscription's mark-delete
  position and individually deleted ranges (and the ``__compaction`` cursor's, an Exclusive
  subscription of the replay). The acks are the differences between two polls:
  a mark-delete that moves back, or an acked entry above it that is no longer acked, is a
  ``reset`` to the new mark-delete followed by acks of what is acked now; a subscription that
  disappears from the stats is ``deleted``; one that appears is ``created`` at the state of
  the poll that first sees it (one that existed before the capture starts from the first
  poll's state).

What capture did not see is said, never guessed. An answer of the wrong shape (a list where an
object is expected, a position below -1, a missing field), an admin call that fails or passes
its deadline, an answer larger than the cap, a topic that disappears: each is an *anomaly*
(:data:`ANOMALY_KINDS`), listed in ``capture.json``, and the state it would have changed is
kept as the last poll left it (a subscription is deleted only when the stats stop listing it).
Any anomaly makes the capture incomplete (``capture.json`` and ``recording.json`` say so, and
the replay warns).

Ending. :meth:`Capture.run` polls until the duration passes or ``stop`` is set; the poll under
way then stops at its next admin call or read (the call under way ends by the end of the
duration, or by the admin client's own deadline on every call), and one last poll runs, its
calls bounded by ``stop_timeout_s`` in all. A capture
that fails (a topic missing, the cluster unreachable) leaves its recording marked incomplete
with the reason.

The rows go through the recorder's writer (:class:`~mledger.replay._recording.Recorder`), so
the output is a recording (``recording.json`` and Parquet parts) plus ``capture.json`` saying
what is approximate. The admin side is any object with ``get_json(path, query, deadline=)``
(the CLI passes :class:`mledger.admin.RemoteAdmin`); the protocol side a ``pulsar.Client``.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from ..broker._journal import AckRecord
from ..codec._messageid import MessageId
from ..core._errors import ConfigError, InvalidPositionError, MLedgerError, NotFoundError
from ..core._position import Position
from ._recording import RECORDING_FILE, ObservedEntry, Recorder, RecordSettings

__all__ = [
    "ANOMALY_KINDS",
    "CAPTURE_FILE",
    "AdminJson",
    "Capture",
    "CaptureSettings",
    "OutputNotEmptyError",
    "TopicNotFoundError",
    "parse_deleted_ranges",
]

log = logging.getLogger(__name__)

CAPTURE_FILE = "capture.json"
READER_PREFIX = "mledger-capture"
"""The capture's readers' subscription role prefix."""
READ_TIMEOUT_S = 30.0
"""How long a poll waits for its readers to reach the entries the stats name."""
COMPACTION_CURSOR = "__compaction"
"""The compaction's durable cursor: a subscription of the replay (Pulsar lists it in the topic
stats; mledger only in the internal stats)."""
MAX_ANOMALIES_LISTED = 100
"""``capture.json`` lists the first anomalies of each kind up to this many; all are counted."""
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
    "chunks": "a chunked message's chunks are the positions from its first chunk to its last (a reader sees "
    "only those two ids); its uuid is not exposed to a reader: null",
}

ANOMALY_KINDS = {
    "topic_disappeared": "the topic-partition answered 404 after it was found: its reader was closed, its "
    "subscriptions recorded as deleted, and it is not read again",
    "topic_recreated": "every ledger the topic had at the last look was gone, newer ones in their place: it was "
    "deleted and created again in between (a reader's subscribe creates a topic, Pulsar's auto-creation, so "
    "capture's own reader may have done it when the topic went between the check and the read)",
    "invalid_answer": "an admin answer of the wrong shape (a list where an object is expected, a position "
    "below -1, ...): what it would have changed keeps its previous state",
    "missing_field": "an admin answer without a field capture needs: what depends on it keeps its previous "
    "state (a subscription is never deleted for it)",
    "admin_error": "an admin call failed, passed its deadline or answered more than the size cap: that "
    "topic-partition was not polled this time",
    "reader_error": "a reader could not be opened (after the first poll): tried again at the next poll",
    "entries_not_read": "the reader did not reach the entries the stats name in time",
    "chunks_unknown": "a chunked message's chunks could not all be placed (they span ledgers, or lie among "
    "entries already written): the replay fills the gap with placeholders",
    "last_poll_incomplete": "the last poll ran out of its time (stop_timeout_s) before polling everything",
}
"""Anomaly kinds of ``capture.json`` and what each means."""


class AdminJson(Protocol):
    """The admin calls the capture needs: a GET whose JSON body is returned."""

    def get_json(self, path: str, query: Mapping[str, str] | None = None, *, deadline: float | None = None) -> Any:
        """GET ``path`` and decode its JSON within ``deadline`` seconds (None: the client's own);
        raises an ``MLedgerError`` for an error status, a failed call or one past its deadline."""
        ...


class TopicNotFoundError(NotFoundError):
    """A topic named for capture does not exist (capture never creates one)."""


class OutputNotEmptyError(ConfigError):
    """The capture's output directory holds files and appending was not asked for."""


class _BadAnswer(Exception):
    """An admin answer of the wrong shape: ``kind`` is ``invalid_answer`` or ``missing_field``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass(frozen=True)
class CaptureSettings:
    """What to capture: ``topics`` (full or short names) or every topic of ``namespace``
    (``tenant/ns``), polled every ``interval_s``; ``hash_keys`` replaces message keys by an
    HMAC-SHA256 under a random per-capture key (keys stay equal to each other, unreadable).
    ``append`` allows an output directory that is not empty (a new session of the recording
    there); ``stop_timeout_s`` bounds the last poll after a stop."""

    topics: tuple[str, ...] = ()
    namespace: str | None = None
    interval_s: float = 1.0
    hash_keys: bool = False
    description: Mapping[str, Any] = field(default_factory=dict)
    append: bool = False
    stop_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.namespace):
            raise ConfigError("capture needs either topics or a namespace (not both)")
        if self.namespace is not None and len([p for p in self.namespace.split("/") if p]) != 2:
            raise ConfigError(f"invalid namespace {self.namespace!r}: expected TENANT/NAMESPACE")
        for name in ("interval_s", "stop_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")


def parse_deleted_ranges(text: str) -> list[tuple[Position, Position]]:
    """Internal stats' ``individuallyDeletedMessages`` (``[(3:5..3:7],(3:9..3:10]]``) as
    ``(lower, upper]`` position pairs. Raises ``ValueError`` naming the text if it is not that
    form or names an id below -1."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    ranges = []
    for m in _RANGE.finditer(body):
        a, b, c, d = (int(x) for x in m.groups())
        if min(a, b, c, d) < -1:
            raise ValueError(f"an id below -1 in individuallyDeletedMessages: {m.group(0)!r}")
        ranges.append((Position(a, b), Position(c, d)))
    if _RANGE.sub("", body[1:-1]).replace(",", "").strip():
        raise ValueError(f"not an individuallyDeletedMessages string: {text!r}")
    return ranges


def _position(value: Any, what: str) -> Position:
    """A position of an admin answer (``"L:E"``, both ids -1 or more: -1 is Pulsar's "before the
    first entry", every new subscription's mark-delete is ``L:-1``); :class:`_BadAnswer` otherwise."""
    if value is None:
        raise _BadAnswer("missing_field", f"{what} is missing")
    if not isinstance(value, str):
        raise _BadAnswer("invalid_answer", f"{what} is {value!r}, not a position")
    try:
        position = Position.parse(value)
    except InvalidPositionError as exc:
        raise _BadAnswer("invalid_answer", f"{what}: {exc}") from None
    if position.ledger_id < -1 or position.entry_id < -1:
        raise _BadAnswer("invalid_answer", f"{what} {value!r} has an id below -1")
    return position


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        raise _BadAnswer("missing_field", f"{what} is missing")
    if not isinstance(value, dict):
        raise _BadAnswer("invalid_answer", f"{what} is a {type(value).__name__}, not an object")
    return value


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _BadAnswer("invalid_answer", f"{what} is {type(value).__name__}, not a list of names")
    return value


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


def _namespace_path(domain: str, namespace: str) -> str:
    tenant, ns = (p for p in namespace.split("/") if p)
    return f"/admin/v2/{domain}/{quote(tenant, safe='')}/{quote(ns, safe='')}"


def _first_chunk(mid: Any) -> Position | None:
    """The first chunk's position of a chunked message's id (None for any other message)."""
    try:
        first = MessageId.from_bytes(mid.serialize()).first_chunk_message_id
    except MLedgerError:
        return None
    return None if first is None else first.position


@dataclass
class _SubState:
    sub_type: str
    mark_delete: Position
    acked: set[Position]


class _TopicPartition:
    """One captured topic-partition: its reader, known entries and subscriptions' last state."""

    def __init__(self, topic: str, partition: int, reader: Any, ledgers: frozenset[int]) -> None:
        self.topic = topic
        self.partition = partition
        self.reader = reader
        self.ledgers = ledgers  # at the last look (before the reader opened, then each poll): topic_recreated
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


class _Budget:
    """When the poll under way must stop: ``stop()`` says so (a stop asked for, the duration
    passed: checked between calls), ``ends`` is the monotonic time its calls must end by
    (None: each call has the admin client's own deadline). ``final``: the last poll, after
    which nothing reads again."""

    def __init__(
        self, stop: Callable[[], bool] = lambda: False, ends: float | None = None, final: bool = False
    ) -> None:
        self.stop = stop
        self.ends = ends
        self.final = final

    def deadline(self) -> float | None:
        """The seconds the next call may take (None: the admin client's own deadline)."""
        return None if self.ends is None else max(self.ends - time.monotonic(), 0.001)

    def over(self) -> bool:
        return self.stop() or (self.ends is not None and time.monotonic() >= self.ends)

    def lapsed(self) -> bool:
        """Whether a poll that is not the last ran out (what it missed, the last poll reads)."""
        return not self.final and self.over()


class Capture:
    """Captures ``client``/``admin``'s cluster into ``directory`` (see the module docstring).

    ``run(duration_s, stop)`` checks the named topics, polls every interval until
    ``duration_s`` passed or ``stop`` is set, polls once more and closes; ``poll()`` lists,
    reads and diffs once. Raises ``OutputNotEmptyError`` for a directory holding files
    (unless ``settings.append``), ``ConfigError`` when it cannot be written,
    :class:`TopicNotFoundError` for a named topic that does not exist, and the admin client's
    or ``pulsar``'s errors when the cluster cannot be reached for the first poll.
    """

    def __init__(self, directory: str | Path, client: Any, admin: AdminJson, settings: CaptureSettings) -> None:
        self.directory = Path(directory)
        self.client = client
        self.admin = admin
        self.settings = settings
        self._earlier: list[Any] = []
        if self.directory.is_dir() and any(self.directory.iterdir()):
            if not settings.append:
                raise OutputNotEmptyError(
                    f"{self.directory} is not empty: capture into a new directory, or pass --append to add "
                    "a session to the recording there"
                )
            self._earlier = self._earlier_captures()
        self.recorder = Recorder(self.directory, RecordSettings(flush_interval_s=max(settings.interval_s, 1.0)))
        self._key = secrets.token_bytes(32) if settings.hash_keys else None
        self._partitions: dict[tuple[str, int], _TopicPartition] = {}
        self._gone: set[tuple[str, int]] = set()
        self._anomalies: dict[str, list[dict[str, Any]]] = {}
        self._anomaly_counts: dict[str, int] = {}
        self._started_ms = _now()
        self._polls = 0
        self._failed: str | None = None
        self._closed = False

    # -- the loop -----------------------------------------------------------------------------
    def run(
        self,
        duration_s: float,
        stop: threading.Event | None = None,
        started: Callable[[list[str]], None] | None = None,
    ) -> None:
        """Check the topics, poll every interval for ``duration_s`` seconds or until ``stop`` is
        set (a poll under way stops at its next call; its call under way ends by the end of the
        duration, or by the admin client's deadline), then poll once more within
        ``stop_timeout_s``, and close. ``started`` is called with :meth:`list_captured` after
        the first poll (whose calls have the admin client's deadline only). A failure marks
        the recording incomplete and is raised."""
        stop = stop or threading.Event()
        ends = time.monotonic() + duration_s

        def stopping() -> bool:
            return stop.is_set() or time.monotonic() >= ends

        try:
            self.check_topics()
            self.poll(_Budget(stopping), first=True)
            if started is not None:
                started(self.list_captured())
            while not stopping():
                stop.wait(min(self.settings.interval_s, max(ends - time.monotonic(), 0)))
                if stopping():
                    break
                self.poll(_Budget(stopping, ends))  # a call under way ends by the end of the duration
            self.poll(_Budget(ends=time.monotonic() + self.settings.stop_timeout_s, final=True))
        except BaseException as exc:
            self._failed = f"{type(exc).__name__}: {exc}"
            self.recorder.not_recorded(f"the capture failed ({self._failed})", _now())
            raise
        finally:
            self.close()

    def check_topics(self) -> None:
        """Refuse, naming them, the named topics that do not exist (:class:`TopicNotFoundError`).
        Existence is read from the namespaces' topic lists, which create nothing."""
        missing = []
        listed: dict[tuple[str, str], set[str]] = {}
        for topic in self.settings.topics:
            full = _full_name(topic)
            domain, name = full.split("://", 1)
            namespace = "/".join(name.split("/", 2)[:2])
            known = listed.get((domain, namespace))
            if known is None:
                base = _namespace_path(domain, namespace)
                try:
                    known = set(_names(self.admin.get_json(base), f"the topics of {namespace}"))
                    known |= set(
                        _names(self.admin.get_json(base + "/partitioned"), f"the partitioned topics of {namespace}")
                    )
                except NotFoundError:
                    known = set()  # the namespace does not exist
                except _BadAnswer as exc:
                    raise ConfigError(f"cannot tell whether {full} exists: {exc}") from None
                listed[(domain, namespace)] = known
            if full not in known:
                missing.append(full)
        if missing:
            what = (
                f"topic {missing[0]} does not exist"
                if len(missing) == 1
                else f"topics {', '.join(missing)} do not exist"
            )
            raise TopicNotFoundError(f"{what} (capture creates nothing: check the name, or create the topic first)")

    def poll(self, budget: _Budget | None = None, *, first: bool = False) -> None:
        """One poll: find topic-partitions (new ones get a reader), then for each read the
        subscriptions, their internal stats and the new entries, and record the differences.
        Stops early when ``budget`` says so (the last poll that does reports it; a call that an
        earlier poll's budget cut short is no anomaly: the last poll reads again). Listing and
        reader failures of the ``first`` poll are raised; later ones are anomalies."""
        budget = budget or _Budget()
        try:
            found = self._list(budget)
        except (MLedgerError, _BadAnswer) as exc:
            if first:
                raise ConfigError(f"cannot list the topics to capture: {exc}") from None
            self._call_failed(exc, None, f"listing the topics: {exc}", budget)
            found = []
        for topic, partition in found:
            if budget.over():
                break
            if (topic, partition) not in self._partitions and (topic, partition) not in self._gone:
                self._open(topic, partition, budget, first)
        done = 0
        for tp in list(self._partitions.values()):
            if budget.over():
                break
            self._poll_partition(tp, budget)
            done += 1
        if budget.final and done < len(self._partitions):
            self._anomaly(
                "last_poll_incomplete",
                None,
                f"{len(self._partitions) - done} of {len(self._partitions)} topic-partitions not polled "
                f"within {self.settings.stop_timeout_s:g} s",
            )
        self._polls += 1

    def close(self) -> None:
        """Close the readers and the recorder, write ``capture.json``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for tp in self._partitions.values():
            self._flush_entry(tp)
            self._close_reader(tp)
        self.recorder.close()
        self._write_description()

    # -- listing ------------------------------------------------------------------------------
    def _get(self, path: str, budget: _Budget) -> Any:
        return self.admin.get_json(path, deadline=budget.deadline())

    def _list(self, budget: _Budget) -> list[tuple[str, int]]:
        if self.settings.namespace is not None:
            return self._list_namespace(self.settings.namespace, budget)
        out: list[tuple[str, int]] = []
        for topic in self.settings.topics:
            full = _full_name(topic)
            out.extend(tp for tp in self._partitions_of(full, budget) if tp not in self._gone)
        return out

    def _partitions_of(self, full: str, budget: _Budget) -> list[tuple[str, int]]:
        try:
            meta = self._get(_admin_path(full, "partitions"), budget)
        except NotFoundError:  # Pulsar answers {"partitions": 0} for a non-partitioned topic; some 404
            meta = {}
        count = _object(meta, f"the partitioned metadata of {full}").get("partitions", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _BadAnswer("invalid_answer", f"the partition count of {full} is {count!r}")
        return [(full, i) for i in range(count)] if count > 0 else [(full, -1)]

    def _list_namespace(self, namespace: str, budget: _Budget) -> list[tuple[str, int]]:
        """Every topic-partition of the namespace: the partitions of each partitioned topic
        (from its metadata: brokers list them, or only the partitioned name) and the others."""
        base = _namespace_path("persistent", namespace)
        partitioned = set(_names(self._get(base + "/partitioned", budget), f"the partitioned topics of {namespace}"))
        out = [tp for name in sorted(partitioned) for tp in self._partitions_of(name, budget) if tp[1] >= 0]
        for name in _names(self._get(base, budget), f"the topics of {namespace}"):
            m = _PARTITION.match(name)
            if name not in partitioned and (m is None or m.group(1) not in partitioned):
                out.append((name, -1))
        return out

    def _open(self, topic: str, partition: int, budget: _Budget, first: bool) -> None:
        """A reader for one topic-partition, once its internal stats show it exists (the ledgers
        it has then are checked at its first poll: ``topic_recreated``)."""
        import pulsar  # the capture extra

        local = topic if partition < 0 else f"{topic}-partition-{partition}"
        try:
            internal = _object(self._get(_admin_path(local, "internalStats"), budget), f"the internal stats of {local}")
        except NotFoundError:
            self._anomaly("topic_disappeared", local, "not found before its reader was opened: not read")
            self._gone.add((topic, partition))
            return
        except (MLedgerError, _BadAnswer) as exc:
            self._call_failed(exc, local, f"internal stats before opening its reader: {exc}", budget)
            return
        try:
            reader = self.client.create_reader(
                local, pulsar.MessageId.earliest, subscription_role_prefix=READER_PREFIX, receiver_queue_size=1000
            )
        except pulsar.PulsarException as exc:
            if first:
                raise
            self._anomaly("reader_error", local, f"{type(exc).__name__}: {exc}")
            return
        self._partitions[(topic, partition)] = _TopicPartition(topic, partition, reader, _ledger_ids(internal))

    # -- one topic-partition ------------------------------------------------------------------
    def _poll_partition(self, tp: _TopicPartition, budget: _Budget) -> None:
        try:
            stats = _object(self._get(_admin_path(tp.local_name, "stats"), budget), "the stats")
            internal = _object(self._get(_admin_path(tp.local_name, "internalStats"), budget), "the internal stats")
        except NotFoundError:  # the topic was deleted: so were its subscriptions
            self._gone_partition(tp)
            return
        except (MLedgerError, _BadAnswer) as exc:
            self._call_failed(exc, tp.local_name, str(exc), budget)
            return
        now = _now()
        self._check_recreated(tp, internal)
        try:
            last = internal.get("lastConfirmedEntry")
            last_confirmed = None if last is None else _position(last, "lastConfirmedEntry")
        except _BadAnswer as exc:
            self._anomaly(exc.kind, tp.local_name, str(exc))
            last_confirmed = None
        self._read_entries(tp, last_confirmed, budget)  # every entry the stats name is known
        try:
            current = self._subscriptions(tp, stats, internal)
        except _BadAnswer as exc:
            self._anomaly(exc.kind, tp.local_name, f"{exc}: the subscriptions keep their previous state")
            return
        listed = set(current)
        for name in sorted(set(tp.subscriptions) - listed):
            self.recorder.subscription_deleted(tp.topic, tp.partition, name, now)
            del tp.subscriptions[name]
        for name, state in sorted(current.items()):
            if state is not None:
                self._diff(tp, name, state, now)

    def _subscriptions(
        self, tp: _TopicPartition, stats: dict[str, Any], internal: dict[str, Any]
    ) -> dict[str, _SubState | None]:
        """Each durable subscription the stats list, with its state from the internal stats
        (None: keep the previous one, e.g. its cursor was not in this answer). Raises
        :class:`_BadAnswer` when the answers cannot say which subscriptions exist."""
        subscriptions = _object(stats.get("subscriptions"), "the stats' subscriptions")
        cursors = _object(internal.get("cursors"), "the internal stats' cursors")
        if COMPACTION_CURSOR in cursors and COMPACTION_CURSOR not in subscriptions:
            subscriptions = {**subscriptions, COMPACTION_CURSOR: {"type": "Exclusive", "isDurable": True}}
        current: dict[str, _SubState | None] = {}
        for name, sub in subscriptions.items():
            try:
                sub = _object(sub, f"subscription {name!r} of the stats")
                if sub.get("isDurable", True) is False:
                    continue
                current[name] = None
                if name not in cursors:  # created or deleted between the two calls: the next poll says
                    continue
                cursor = _object(cursors[name], f"cursor {name!r}")
                md = _position(cursor.get("markDeletePosition"), f"cursor {name!r}: markDeletePosition")
                ranges = cursor.get("individuallyDeletedMessages")
                if not isinstance(ranges, str):
                    kind = "missing_field" if ranges is None else "invalid_answer"
                    raise _BadAnswer(kind, f"cursor {name!r}: individuallyDeletedMessages is {ranges!r}")
                try:
                    deleted = parse_deleted_ranges(ranges)
                except ValueError as exc:
                    raise _BadAnswer("invalid_answer", f"cursor {name!r}: {exc}") from None
                sub_type = sub.get("type", "Shared")
                if not isinstance(sub_type, str):
                    raise _BadAnswer("invalid_answer", f"subscription {name!r}: type is {sub_type!r}")
            except _BadAnswer as exc:
                self._anomaly(exc.kind, tp.local_name, f"{exc}: subscription {name!r} keeps its previous state")
                continue
            acked: set[Position] = set()
            for low, high in deleted:
                acked.update(tp.between(low, high))
            current[name] = _SubState(sub_type.upper(), md, acked)
        return current

    def _check_recreated(self, tp: _TopicPartition, internal: dict[str, Any]) -> None:
        before, now = tp.ledgers, _ledger_ids(internal)
        if not now:
            return
        tp.ledgers = now
        if before and not (before & now) and min(now) > max(before):
            self._anomaly("topic_recreated", tp.local_name, f"its ledgers were {sorted(before)}, now {sorted(now)}")

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

    def _gone_partition(self, tp: _TopicPartition) -> None:
        """The topic-partition was deleted: its reader is closed at once (a reconnecting reader
        would create it again) and it is not read again."""
        now = _now()
        self._anomaly("topic_disappeared", tp.local_name, "answered 404: its subscriptions are recorded as deleted")
        self._flush_entry(tp)
        self._close_reader(tp)
        for name in sorted(tp.subscriptions):
            self.recorder.subscription_deleted(tp.topic, tp.partition, name, now)
        tp.subscriptions.clear()
        del self._partitions[(tp.topic, tp.partition)]
        self._gone.add((tp.topic, tp.partition))

    @staticmethod
    def _close_reader(tp: _TopicPartition) -> None:
        try:
            tp.reader.close()
        except Exception:  # noqa: BLE001 - a reader of a deleted topic may refuse to close
            pass

    # -- entries ------------------------------------------------------------------------------
    def _read_entries(self, tp: _TopicPartition, last_confirmed: Position | None, budget: _Budget) -> None:
        """Read what the reader has, and at least up to ``last_confirmed`` (the topic's last
        entry when its stats were taken), so that every entry those stats name is known.
        An entry's ``produced`` row is written once the next entry (or the end) shows that
        all its batch's messages were seen; acks naming it wait in the recorder until then."""
        import pulsar  # the capture extra

        deadline = time.monotonic() + READ_TIMEOUT_S
        if budget.ends is not None:
            deadline = min(deadline, budget.ends)
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
                if budget.stop():
                    return  # stopping: the last poll reads them
                if time.monotonic() > deadline:
                    self._anomaly("entries_not_read", tp.local_name, f"entries up to {last_confirmed} not read")
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
        first = _first_chunk(mid)
        if first is not None and first < position:
            self._chunked(tp, first, position, msg)
            return
        tp.pending = (position, msg, mid.batch_index())
        tp.positions.append(position)

    def _chunked(self, tp: _TopicPartition, first: Position, last: Position, msg: Any) -> None:
        """A chunked message: one row per chunk, from ``first`` to ``last`` (its chunks are
        consecutive entries of one ledger unless another producer's entries came between)."""
        written = tp.positions[-1] if tp.positions else None
        if first.ledger_id == last.ledger_id:
            chunks = [Position(last.ledger_id, e) for e in range(first.entry_id, last.entry_id + 1)]
        else:
            chunks = [first, last]
        exact = first.ledger_id == last.ledger_id and (written is None or first > written)
        if not exact:
            self._anomaly("chunks_unknown", tp.local_name, f"the chunks of the message from {first} to {last}")
        for chunk_id, position in enumerate(chunks):
            if written is None or position > written:
                if exact:
                    self._write_entry(tp, position, msg, 1, chunk_id, len(chunks))
                else:
                    self._write_entry(tp, position, msg, 1)
                tp.positions.append(position)

    def _flush_entry(self, tp: _TopicPartition) -> None:
        if tp.pending is None:
            return
        position, msg, batch_index = tp.pending
        tp.pending = None
        self._write_entry(tp, position, msg, max(batch_index + 1, 1))

    def _write_entry(
        self,
        tp: _TopicPartition,
        position: Position,
        msg: Any,
        batch_size: int,
        chunk_id: int | None = None,
        num_chunks: int | None = None,
    ) -> None:
        key = msg.partition_key() or None
        if key is not None and self._key is not None:
            key = hmac.new(self._key, key.encode(), hashlib.sha256).hexdigest()[:32]
        entry = ObservedEntry(
            publish_time_ms=int(msg.publish_timestamp()),
            batch_size=batch_size,
            producer_name=msg.producer_name() or None,
            key=key,
            chunk_id=chunk_id,
            num_chunks=num_chunks,
        )
        self.recorder.entry_observed(tp.topic, tp.partition, position, entry)

    # -- anomalies and the description ----------------------------------------------------------
    def _call_failed(self, exc: Exception, topic: str | None, detail: str, budget: _Budget) -> None:
        """An admin call failed or answered the wrong shape: an anomaly, unless the call failed
        because a poll before the last ran out of time (the last poll reads it again)."""
        if isinstance(exc, _BadAnswer) or not budget.lapsed():
            self._anomaly(_kind(exc), topic, detail)

    def _anomaly(self, kind: str, topic: str | None, detail: str) -> None:
        """Record what capture could not see; the capture (and its recording) is incomplete."""
        count = self._anomaly_counts.get(kind, 0)
        self._anomaly_counts[kind] = count + 1
        now = _now()
        if count < MAX_ANOMALIES_LISTED:
            self._anomalies.setdefault(kind, []).append({"ts_ms": now, "topic": topic, "detail": detail})
        if count == 0:
            log.warning("capture: %s%s: %s", kind, f" on {topic}" if topic else "", detail)
        self.recorder.not_recorded(f"capture anomaly {kind}{f' on {topic}' if topic else ''}: {detail}", now)

    def _earlier_captures(self) -> list[Any]:
        path = self.directory / CAPTURE_FILE
        if not (self.directory / RECORDING_FILE).exists() and not path.exists():
            raise OutputNotEmptyError(f"{self.directory} holds files but no recording: capture into a new directory")
        try:
            earlier = json.loads(path.read_text()) if path.exists() else None
        except (OSError, ValueError):
            return []
        if not isinstance(earlier, dict):
            return []
        return [*earlier.pop("earlier_captures", []), earlier]

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
            "complete": self.recorder.complete and self._failed is None and not self._anomaly_counts,
            "failed": self._failed,
            "anomaly_counts": dict(sorted(self._anomaly_counts.items())),
            "anomalies": {kind: self._anomalies[kind] for kind in sorted(self._anomalies)},
            "approximations": APPROXIMATIONS,
        }
        if self._earlier:
            description["earlier_captures"] = self._earlier
        (self.directory / CAPTURE_FILE).write_text(json.dumps(description, indent=2) + "\n")

    def list_captured(self) -> list[str]:
        """The topic-partitions captured so far (their local names), sorted."""
        return sorted(tp.local_name for tp in self._partitions.values())


def _kind(exc: BaseException) -> str:
    return exc.kind if isinstance(exc, _BadAnswer) else "admin_error"


def _ledger_ids(internal: dict[str, Any]) -> frozenset[int]:
    """The ledger ids internal stats list (nothing when the field has another shape)."""
    ledgers = internal.get("ledgers")
    if not isinstance(ledgers, list):
        return frozenset()
    return frozenset(
        item["ledgerId"] for item in ledgers if isinstance(item, dict) and isinstance(item.get("ledgerId"), int)
    )
