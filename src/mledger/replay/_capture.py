"""Capture a live Pulsar cluster as the replay's raw logs (``mledger capture``).

Only the public APIs every Pulsar has are used, through the cluster poller
(:class:`~mledger.replay.ClusterPoller`, which says what a poll reads and how the acks
are found); :class:`Capture` is one consumer of it, which writes each poll's events as a
recording:

- the namespaces' topic lists (admin REST) say which topics exist: a named topic that does not
  exist is refused before anything is read (:class:`TopicNotFoundError`), because a reader's
  subscribe would create it (Pulsar's auto-creation), and capture never changes the cluster;
- a non-durable reader per topic-partition, from its earliest entry, gives the ``produced``
  rows (ledger and entry ids, publish time, producer, key; payloads are not kept). A chunked
  message arrives whole, with the ids of its first and last chunks: each chunk is one row with
  its ``chunk_id`` and ``num_chunks``;
- the topic ``stats`` and ``internalStats``, polled every ``interval_s``, give the durable
  subscriptions, their types and their cursors; the acks are the differences between two polls.

Scale. The admin calls of a poll run concurrently (``concurrency`` topic-partitions at a time,
at most that many calls in flight per broker, over keep-alive connections); the topic lists are
read again every ``discovery_interval_s`` (and at the first and the last poll), not at every
poll; the readers of all topics share the one ``pulsar.Client`` given. Memory is bounded by
the settings (see :mod:`mledger.replay._poller`), not by the size of the topics.

What capture did not see is said, never guessed. An answer of the wrong shape, an admin call
that fails or passes its deadline, an answer larger than the cap, a topic that disappears: each
is an *anomaly* (:data:`ANOMALY_KINDS`), listed in ``capture.json``, and the state it would
have changed is kept as the last poll left it (a subscription is deleted only when the stats
stop listing it). Any anomaly makes the capture incomplete (``capture.json`` and
``recording.json`` say so, and the replay warns).

Ending. :meth:`Capture.run` polls until the duration passes or ``stop`` is set; the poll under
way is then cancelled at once (whatever it did is kept; the calls a duration's end cuts short
are no anomaly) and one last poll runs, cut ``stop_timeout_s`` later (its calls end by then;
what it did not poll is an anomaly). A capture that fails (a topic missing, the cluster
unreachable) leaves its recording marked incomplete with the reason.

The rows go through the recorder's writer (:class:`~mledger.replay.Recorder`), so
the output is a recording (``recording.json`` and Parquet parts) plus ``capture.json`` saying
what is approximate. The admin side is any object with ``asynchronous(n)`` returning an
asyncio client (the CLI passes :class:`mledger.admin.RemoteAdmin`, whose
``asynchronous()`` keeps its credentials, deadline and size cap); the protocol side a
``pulsar.Client``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core import ConfigError
from ._poll_answers import parse_deleted_ranges
from ._poll_events import (
    CaptureEvent,
    EntrySeen,
)
from ._poller import (
    ANOMALY_KINDS,
    AsyncAdminJson,
    ClusterPoller,
    PollBudget,
    PollerSettings,
    PollSummary,
    TopicNotFoundError,
)
from ._recording import RECORDING_FILE, Recorder, RecordSettings

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

CAPTURE_FILE = "capture.json"
STOP_CHECK_S = 0.05
"""How often a running capture looks at its stop flag (set by a signal handler, on any thread)."""

APPROXIMATIONS = {
    "ack_times": "acks are seen by polling internal stats: their times are the poll's (quantised to the interval)",
    "partial_batch_acks": "batch-index acks of a partly acknowledged entry are not in internal stats: not captured",
    "starting_state": "a subscription that existed before the capture starts from its first poll's state",
    "created_state": "a subscription created during the capture starts from the state of the first poll that "
    "sees it (its initial position and the acks before that poll are folded into it); a topic is found by the "
    "next discovery (every discovery_interval_s, and at the last poll) and read from its earliest entry",
    "resets": "resets are inferred from two polls; several resets between two polls are one",
    "deliver_at_ms": "not exposed to a reader by the Python client: null (delayed messages replay as immediate)",
    "sequence_id": "not exposed to a reader by the Python client: null (no deduplication in the replay)",
    "batch_size": "the highest batch index a reader sees + 1",
    "chunks": "a chunked message's chunks are the positions from its first chunk to its last (a reader sees "
    "only those two ids); its uuid is not exposed to a reader: null",
}


class AsyncAdminClient(AsyncAdminJson, Protocol):
    """An asyncio admin client the capture closes when it ends."""

    async def aclose(self) -> None:
        """Close its connections."""
        ...


class AdminJson(Protocol):
    """The admin client a capture is given (:class:`mledger.admin.RemoteAdmin`)."""

    def asynchronous(self, max_concurrency_per_host: int = 8) -> AsyncAdminClient:
        """An asyncio client of the same server, credentials and limits, at most
        ``max_concurrency_per_host`` calls in flight per broker."""
        ...


class OutputNotEmptyError(ConfigError):
    """The capture's output directory holds files and appending was not asked for."""


@dataclass(frozen=True)
class CaptureSettings(PollerSettings):
    """What to capture and how (the scope, concurrency and memory bounds of
    :class:`~mledger.replay.PollerSettings`, and): ``namespace``, one namespace
    (``tenant/ns``; ``namespaces`` for several); ``interval_s``, the stats poll interval;
    ``hash_keys`` replaces message keys by an HMAC-SHA256 under a random per-capture key (keys
    stay equal to each other, unreadable); ``append`` allows an output directory that is not
    empty (a new session of the recording there); ``stop_timeout_s`` bounds the last poll
    after a stop."""

    namespace: str | None = None
    interval_s: float = 1.0
    hash_keys: bool = False
    description: Mapping[str, Any] = field(default_factory=dict)
    append: bool = False
    stop_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.namespace is not None:  # one namespace is the first of the namespaces
            object.__setattr__(self, "namespaces", tuple(dict.fromkeys((self.namespace, *self.namespaces))))
        super().__post_init__()
        for name in ("interval_s", "stop_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")


class Capture:
    """Captures ``client``/``admin``'s cluster into ``directory`` (see the module docstring).

    ``run(duration_s, stop)`` checks the named topics, polls every interval until
    ``duration_s`` passed or ``stop`` is set, polls once more and closes; ``check_topics()``,
    ``poll()`` and ``close()`` run one step each (they block; each runs the poller on the
    capture's own event loop). Raises ``OutputNotEmptyError`` for a directory holding files
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
        self._runner = asyncio.Runner()
        self._admin: AsyncAdminClient | None = None
        self._poller: ClusterPoller | None = None
        self._started_ms = _now()
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
        set (the poll under way is cancelled at once), then poll once more within
        ``stop_timeout_s``, and close. ``started`` is called with :meth:`list_captured` after
        the first poll (whose calls have the admin client's deadline only). A failure marks
        the recording incomplete and is raised."""
        try:
            self._runner.run(self._run(duration_s, stop or threading.Event(), started))
        except BaseException as exc:
            self._failed = f"{type(exc).__name__}: {exc}"
            self.recorder.not_recorded(f"the capture failed ({self._failed})", _now())
            raise
        finally:
            self.close()

    async def _run(self, duration_s: float, stop: threading.Event, started: Callable[[list[str]], None] | None) -> None:
        ends = time.monotonic() + duration_s

        def stopping() -> bool:
            return stop.is_set() or time.monotonic() >= ends

        poller = self._engine()
        await poller.check_topics()
        await until_stopped(stop, poller.poll(PollBudget(stopping), first=True))
        if started is not None:
            started(poller.list_captured())
        while not stopping():
            await wait_or_stop(stop, min(self.settings.interval_s, max(ends - time.monotonic(), 0)))
            if stopping():
                break
            await until_stopped(stop, poller.poll(PollBudget(stopping, ends)))  # a call under way ends by the end
        await poller.poll(PollBudget(ends=time.monotonic() + self.settings.stop_timeout_s, final=True))

    def check_topics(self) -> None:
        """Refuse, naming them, the named topics that do not exist (:class:`TopicNotFoundError`)."""
        self._runner.run(self._engine().check_topics())

    def poll(self, budget: PollBudget | None = None, *, first: bool = False) -> PollSummary:
        """One poll (:meth:`ClusterPoller.poll <mledger.replay.ClusterPoller.poll>`),
        its events written."""
        return self._runner.run(self._engine().poll(budget, first=first))

    def close(self) -> None:
        """Close the readers, the admin client's connections and the recorder, write
        ``capture.json``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._poller is not None:
                self._runner.run(self._close_engine())
        finally:
            self._runner.close()
            self.recorder.close()
            self._write_description()

    def list_captured(self) -> list[str]:
        """The topic-partitions captured so far (their local names), sorted."""
        return [] if self._poller is None else self._poller.list_captured()

    def _engine(self) -> ClusterPoller:
        if self._poller is None:
            self._admin = self.admin.asynchronous(self.settings.concurrency)
            self._poller = ClusterPoller(self._admin, self.client, self.settings, self._write)
        return self._poller

    async def _close_engine(self) -> None:
        assert self._poller is not None and self._admin is not None
        try:
            await self._poller.close()
        finally:
            await self._admin.aclose()

    # -- the sink: events as rows ---------------------------------------------------------------
    def _write(self, events: list[CaptureEvent]) -> None:
        key = self._key
        if key is not None:
            events = [_hashed(event, key) for event in events]
        self.recorder.write_events(events)

    # -- the description ------------------------------------------------------------------------
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
        poller = self._poller
        counts = {} if poller is None else dict(sorted(poller.anomaly_counts.items()))
        listed = {} if poller is None else {kind: poller.anomalies[kind] for kind in sorted(poller.anomalies)}
        settings = self.settings
        description = {
            "format": "mledger-capture",
            "version": 1,
            **dict(settings.description),
            "topics": self.list_captured(),
            "namespace": settings.namespaces[0] if len(settings.namespaces) == 1 else None,
            "namespaces": list(settings.namespaces),
            "all_namespaces": settings.all_namespaces,
            "interval_s": settings.interval_s,
            "discovery_interval_s": settings.discovery_interval_s,
            "concurrency": settings.concurrency,
            "started_ms": self._started_ms,
            "ended_ms": _now(),
            "polls": 0 if poller is None else poller.polls,
            "keys_hashed": settings.hash_keys,
            "complete": self.recorder.complete and self._failed is None and not counts,
            "failed": self._failed,
            "anomaly_counts": counts,
            "anomalies": listed,
            "approximations": APPROXIMATIONS,
        }
        if self._earlier:
            description["earlier_captures"] = self._earlier
        (self.directory / CAPTURE_FILE).write_text(json.dumps(description, indent=2) + "\n")


async def until_stopped(stop: threading.Event, work: Awaitable[Any]) -> None:
    """Run ``work``; cancel it as soon as ``stop`` is set (what it did is kept). Its errors are raised."""
    task = asyncio.ensure_future(work)
    while not task.done() and not stop.is_set():
        await asyncio.wait({task}, timeout=STOP_CHECK_S)
    if not task.done():
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not task.cancelled() or (current is not None and current.cancelling()):
            raise


async def wait_or_stop(stop: threading.Event, seconds: float) -> None:
    """Sleep ``seconds``, or until ``stop`` is set."""
    ends = time.monotonic() + seconds
    while not stop.is_set() and (left := ends - time.monotonic()) > 0:
        await asyncio.sleep(min(left, STOP_CHECK_S))


def _hashed(event: CaptureEvent, key: bytes) -> CaptureEvent:
    """``event`` with its message key replaced by an HMAC-SHA256 under ``key``."""
    if isinstance(event, EntrySeen) and event.entry.key is not None:
        hashed = hmac.new(key, event.entry.key.encode(), hashlib.sha256).hexdigest()[:32]
        return event._replace(entry=event.entry._replace(key=hashed))
    return event


def _now() -> int:
    return int(time.time() * 1000)
