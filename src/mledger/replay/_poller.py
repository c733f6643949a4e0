"""Poll a live Pulsar cluster's public APIs, concurrently, as a stream of events (``mledger capture``).

:class:`ClusterPoller` is the engine of ``mledger capture`` and is meant to serve a long-running
watcher the same way: it keeps, per topic-partition, a reader's view of the entries and, per
durable subscription, the state the last poll saw; each :meth:`ClusterPoller.poll` reads the
cluster once and hands what changed to a *sink* as events (:mod:`mledger.replay._poll_events`).

API (asyncio; one event loop)::

    poller = ClusterPoller(admin, client, PollerSettings(namespaces=("public/default",)), sink)
    await poller.check_topics()            # named topics must exist (TopicNotFoundError)
    summary = await poller.poll(first=True)   # PollSummary: what this poll did
    while running:
        await asyncio.sleep(interval)
        summary = await poller.poll(PollBudget(stop=..., ends=...))
    await poller.poll(PollBudget(ends=time.monotonic() + 30, final=True))
    await poller.close()                   # closes the readers; the admin client is the caller's

* ``admin`` is an :class:`AsyncAdminJson` (``mledger.admin.RemoteAdmin(...).asynchronous(n)``:
  every call bounded by a total deadline and a size cap, at most ``n`` in flight per broker);
  ``client`` a ``pulsar.Client`` whose readers (one per topic-partition, non-durable, from the
  earliest entry) give the entries; all readers share it (one connection pool).
* ``sink(events)`` is called, on the loop, with a list of events in order: whenever
  ``max_pending_events`` wait, and at the end of each poll; every event of a poll has been
  handed over when :meth:`~ClusterPoller.poll` returns. The sink must not block for long (the
  poll waits for it: back-pressure, nothing is dropped by the poller); a sink that cannot keep
  up drops on its own and says so (the capture's recorder counts the rows it drops).
* :meth:`~ClusterPoller.subscription_states` is every subscription's state as last seen
  (:class:`~mledger.replay.SubscriptionState`), :meth:`~ClusterPoller.first_ledgers` each
  topic-partition's first ledger as last listed; :attr:`~ClusterPoller.anomaly_counts`
  and :attr:`~ClusterPoller.anomalies` what was not seen.
* A poll may be cancelled (a stop signal): the events of what it did are handed over, the state
  stays consistent, and the next poll reads again what it missed.

What one poll does: when discovery is due (every ``discovery_interval_s``, and at the first and
the last poll) it lists the tenants, namespaces, topics and partitions in scope (``topics``,
``namespaces`` or ``all_namespaces``) and opens a reader for each new topic-partition, once its
internal stats show it exists (a reader's subscribe would create it: Pulsar's auto-creation);
then, ``concurrency`` topic-partitions at a time, it reads each one's ``internalStats`` (a
topic-partition this poll's discovery found: those read to open its reader, not a second time), reads
its entries up to the last one those name (from the reader's queue, without a round trip to
the broker), and, where a cursor appeared, went or changed (and at a topic-partition's first
and the last poll), its ``stats``, and records the differences; a topic-partition where nothing
changed costs one admin call:

* the stats list the durable subscriptions and their types (non-durable ones, the readers among
  them, are not subscriptions); the internal stats give each one's mark-delete position and
  individually deleted ranges (and the ``__compaction`` cursor's, an Exclusive subscription);
* the acks are the differences between two polls: a mark-delete that moves back, or an acked
  entry above it that is no longer acked, is a reset to the new mark-delete followed by acks
  of what is acked now; a subscription that disappears from the stats is deleted; one that
  appears is created at the state of the poll that first sees it.

Memory is bounded by settings, not by the size of the topics: a topic-partition holds its
entries as runs (:class:`~mledger.replay._poll_ranges.KnownEntries`), one per ledger, and the
entry counts its internal stats named per ledger, both for the ledgers that exist (those of the
ledgers the cluster deleted are dropped: :meth:`ClusterPoller._forget_deleted_ledgers`); a
subscription holds its internal stats' text (at most ``max_ranges_per_subscription`` ranges: a
larger one is an anomaly and is not held until it fits again, then restated); events wait for
the sink up to ``max_pending_events``; each reader's queue holds ``reader_queue_size`` messages;
an admin answer is read up to the admin client's size cap, ``concurrency`` at a time.

What the poller did not see is said, never guessed: each such thing is an anomaly
(:data:`ANOMALY_KINDS`), handed to the sink as an event and counted, and what it concerns keeps
the state of the last good poll (a subscription is deleted only when the stats stop listing it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar
from urllib.parse import quote

from ..broker import AckRecord
from ..codec import MessageId
from ..core import EARLIEST, ConfigError, MLedgerError, NotFoundError, Position
from ._poll_answers import (
    PARTITION,
    BadAnswer,
    admin_path,
    entries_added,
    full_name,
    last_entry,
    ledger_entries,
    ledger_ids,
    names_of,
    namespace_path,
    object_of,
    parse_deleted_ranges,
    position_of,
)
from ._poll_events import (
    Acked,
    Anomaly,
    CaptureEvent,
    EntrySeen,
    ObservedEntry,
    SubscriptionCreated,
    SubscriptionDeleted,
    SubscriptionReset,
    SubscriptionState,
)
from ._poll_ranges import Interval, KnownEntries, above, difference, normalised

__all__ = [
    "ANOMALY_KINDS",
    "AsyncAdminJson",
    "ClusterPoller",
    "PollBudget",
    "PollSummary",
    "PollerSettings",
    "TopicNotFoundError",
]

log = logging.getLogger(__name__)

READER_PREFIX = "mledger-capture"
"""The readers' subscription role prefix."""
COMPACTION_CURSOR = "__compaction"
"""The compaction's durable cursor: a subscription of the replay (Pulsar lists it in the topic
stats; mledger only in the internal stats)."""
MAX_ANOMALIES_LISTED = 100
"""The first anomalies of each kind kept with their detail, up to this many; all are counted."""
CUT_GRACE_S = 1.0
"""A poll is cut this long after its budget's end, by when every call has ended by its own deadline."""
DRAIN_STEP = 1000
"""Messages read from one reader's queue before the loop lets the other topic-partitions run."""

ANOMALY_KINDS = {
    "topic_disappeared": "the topic-partition answered 404 after it was found: its reader was closed, its "
    "subscriptions recorded as deleted, and it is not read again",
    "topic_recreated": "every ledger the topic had at the last look was gone, newer ones in their place, and its "
    "managed ledger's count of entries added (entriesAddedCounter) went down: it was deleted and created again "
    "in between (a reader's subscribe creates a topic, Pulsar's auto-creation, so capture's own "
    "reader may have done it when the topic went between the check and the read)",
    "invalid_answer": "an admin answer of the wrong shape (a list where an object is expected, a position "
    "below -1, ...): what it would have changed keeps its previous state",
    "missing_field": "an admin answer without a field capture needs: what depends on it keeps its previous "
    "state (a subscription is never deleted for it)",
    "admin_error": "an admin call failed, passed its deadline or answered more than the size cap: that "
    "topic-partition was not polled this time",
    "reader_error": "a reader could not be opened or read (after the first poll): tried again at the next poll",
    "entries_not_read": "the reader did not reach the entries the stats name in time",
    "entries_trimmed": "the cluster deleted (trimmed) ledgers before the reader read all their entries (every "
    "subscription had consumed them; the reader was moved past them): those whose positions the internal stats "
    "named are known from them, one message each (their batch sizes unknown), the others not at all",
    "chunks_unknown": "a chunked message's chunks could not all be placed (they span ledgers, or lie among "
    "entries already written): the replay fills the gap with placeholders",
    "subscription_over_bound": "a subscription's individually deleted ranges were more than "
    "max_ranges_per_subscription: its acks are not recorded until it fits again, then it is restated (a reset "
    "to its mark-delete and acks of what is acked then)",
    "last_poll_incomplete": "the last poll ran out of its time (stop_timeout_s) before polling everything",
    "replay_failed": "a watch's replay of the topic-partition raised (logged with its traceback): its model was "
    "dropped and the topic-partition is read again from its earliest entry, its subscriptions created again at "
    "their state then; after repeated failures it is no longer read",
}
"""Anomaly kinds and what each means."""


class AsyncAdminJson(Protocol):
    """The admin calls the poller needs (``mledger.admin.RemoteAdmin(...).asynchronous()``)."""

    async def get_json(self, path: str, query: Any = None, *, deadline: float | None = None) -> Any:
        """GET ``path`` and decode its JSON within ``deadline`` seconds (None: the client's own);
        raises an ``MLedgerError`` for an error status, a failed call or one past its deadline."""
        ...


class TopicNotFoundError(NotFoundError):
    """A topic named for capture does not exist (capture never creates one)."""


@dataclass(frozen=True)
class PollerSettings:
    """What to poll and within which bounds (see the module docstring).

    Scope, exactly one of: ``topics`` (full or short names; partitioned ones whole),
    ``namespaces`` (``tenant/ns``: every persistent topic of each) or ``all_namespaces`` (every
    namespace of every tenant). ``discovery_interval_s``: how often the topic lists are read
    again (the first and the last poll always read them). ``concurrency``: topic-partitions
    polled at once (two admin calls each; the admin client bounds the calls per broker).
    ``max_ranges_per_subscription``, ``max_pending_events``, ``reader_queue_size``: the memory
    bounds. ``read_timeout_s``: how long a poll waits for a reader to reach the entries the
    stats name. ``readers``: read the entries with a reader per topic-partition (the default);
    False: no reader at all, the entries are known from the internal stats' ledger list only
    (:meth:`ClusterPoller._entries_from_ledgers`: each entry counts as one message, published
    at the poll that first lists it; the figures are in entries, and batch-index acks unseen).
    ``readers_for_cursors``: a topic-partition has a reader only while its internal stats list a
    cursor other than the poller's own (a watcher's choice: a topic without subscriptions has
    nothing to model, and a reader on a force-deleted topic reconnects and so creates it again,
    empty, under Pulsar's automatic topic creation; without a cursor of its own that topic loses
    its reader, and with it the poller's part in keeping it alive). The reader opened later reads
    from the earliest entry, skipping those known."""

    topics: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    discovery_interval_s: float = 10.0
    concurrency: int = 4
    max_ranges_per_subscription: int = 100_000
    max_pending_events: int = 10_000
    reader_queue_size: int = 100
    read_timeout_s: float = 30.0
    readers: bool = True
    readers_for_cursors: bool = False

    def __post_init__(self) -> None:
        if sum((bool(self.topics), bool(self.namespaces), self.all_namespaces)) != 1:
            raise ConfigError("capture needs one of topics, a namespace or all namespaces")
        for namespace in self.namespaces:
            if len([p for p in namespace.split("/") if p]) != 2:
                raise ConfigError(f"invalid namespace {namespace!r}: expected TENANT/NAMESPACE")
        for name in ("discovery_interval_s", "read_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("concurrency", "max_ranges_per_subscription", "max_pending_events", "reader_queue_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")


class PollBudget:
    """When a poll must stop: ``stop()`` says so (a stop asked for, the duration passed: checked
    before each topic-partition and while waiting for entries), ``ends`` is the monotonic time
    its calls must end by, at which the poll is cut (None: each call has the admin client's own
    deadline). ``final``: the last poll, after which nothing reads again."""

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


@dataclass(frozen=True)
class PollSummary:
    """What one poll did: its ``number`` (0 for the first), the topic-partitions known and
    those ``polled`` in full, the events and anomalies it handed over, and its wall time."""

    number: int
    topic_partitions: int
    polled: int
    events: int
    anomalies: int
    wall_s: float

    @property
    def complete(self) -> bool:
        """Every topic-partition polled, and nothing unseen."""
        return self.polled == self.topic_partitions and not self.anomalies


class _Seen(NamedTuple):
    """A subscription's state and the answer's text it was read from (an unchanged answer is
    recognised without being parsed again)."""

    raw_type: Any
    raw_mark_delete: Any
    state: SubscriptionState


class _Pending(NamedTuple):
    """A topic-partition's last entry, written once the next one shows its batch is whole."""

    position: Position
    publish_time_ms: int
    producer_name: str | None
    key: str | None
    top_batch_index: int


class _Partition:
    """One polled topic-partition: its reader, the entries it saw, its subscriptions' states."""

    def __init__(self, topic: str, partition: int, reader: Any | None, ledgers: frozenset[int]) -> None:
        self.topic = topic
        self.partition = partition
        self.reader = reader  # None without readers (PollerSettings.readers)
        self.ledgers = ledgers  # at the last look (before the reader opened, then each poll): topic_recreated
        self.added: int | None = None  # entriesAddedCounter at the last look: topic_recreated
        # each ledger's entries as the internal stats named them: the ledgers listed at the last look, and
        # those deleted since whose entries the reader had not all read (ledger_entries)
        self.entry_counts: dict[int, int] = {}
        self.known = KnownEntries()
        self.subscriptions: dict[str, _Seen] = {}
        self.pending: _Pending | None = None
        self.settled = False  # the reader's queue was empty after its last entry was read
        self.cursors: frozenset[str] | None = None  # the internal stats' cursors when the stats were read
        # the internal stats read to open it, and the poll that read them: that poll uses them
        # instead of asking again (a first poll makes no second internalStats call per topic)
        self.opening: tuple[int, dict[str, Any]] | None = None

    @property
    def local_name(self) -> str:
        return self.topic if self.partition < 0 else f"{self.topic}-partition-{self.partition}"


class _Progress:
    done = 0


T = TypeVar("T")


class ClusterPoller:
    """Polls ``admin``/``client``'s cluster and hands the changes to ``sink`` (see the module
    docstring). Not thread-safe: use it from one event loop."""

    def __init__(
        self,
        admin: AsyncAdminJson,
        client: Any,
        settings: PollerSettings,
        sink: Callable[[list[CaptureEvent]], None],
    ) -> None:
        self.admin = admin
        self.client = client
        self.settings = settings
        self._sink = sink
        self._events: list[CaptureEvent] = []
        self._handed = 0
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._gone: set[tuple[str, int]] = set()
        self.anomalies: dict[str, list[dict[str, Any]]] = {}
        """The first :data:`MAX_ANOMALIES_LISTED` anomalies of each kind (time, topic, detail)."""
        self.anomaly_counts: dict[str, int] = {}
        """Every anomaly so far, counted by kind."""
        self.polls = 0
        self._discovered_at: float | None = None
        self._executor = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="mledger-poller")
        self._closed = False

    # -- the public face ----------------------------------------------------------------------
    async def check_topics(self) -> None:
        """Refuse, naming them, the named topics that do not exist (:class:`TopicNotFoundError`).
        Existence is read from the namespaces' topic lists, which create nothing."""
        wanted: dict[tuple[str, str], list[str]] = {}
        for topic in self.settings.topics:
            full = full_name(topic)
            domain, name = full.split("://", 1)
            wanted.setdefault((domain, "/".join(name.split("/", 2)[:2])), []).append(full)
        listed: dict[tuple[str, str], set[str]] = {}

        async def list_namespace(key: tuple[str, str]) -> None:
            base = namespace_path(*key)
            try:
                topics, partitioned = await self._both(base, base + "/partitioned", None)
                what = f"the topics of {key[1]}"
                listed[key] = set(names_of(topics, what)) | set(names_of(partitioned, "the partitioned " + what))
            except NotFoundError:
                listed[key] = set()  # the namespace does not exist
            except BadAnswer as exc:
                raise ConfigError(f"cannot tell whether the topics of {key[1]} exist: {exc}") from None

        await self._each(wanted, list_namespace, PollBudget(), _Progress())
        missing = [full for key, fulls in wanted.items() for full in fulls if full not in listed[key]]
        if missing:
            what = (
                f"topic {missing[0]} does not exist"
                if len(missing) == 1
                else f"topics {', '.join(missing)} do not exist"
            )
            raise TopicNotFoundError(f"{what} (capture creates nothing: check the name, or create the topic first)")

    async def poll(self, budget: PollBudget | None = None, *, first: bool = False) -> PollSummary:
        """One poll (see the module docstring); every event of it has been handed to the sink
        when it returns or is cancelled. It stops starting work when ``budget.over()`` and is cut
        at ``budget.ends``: the last poll (``budget.final``) reports what it did not poll, an
        earlier one nothing (the last poll reads it again). Discovery and reader failures of
        the ``first`` poll are raised (``ConfigError``, ``pulsar.PulsarException``); later ones
        are anomalies."""
        budget = budget or PollBudget()
        started = time.monotonic()
        handed, unseen = self._handed, sum(self.anomaly_counts.values())
        progress = _Progress()
        cut = asyncio.timeout(None if budget.ends is None else max(budget.ends - time.monotonic(), 0) + CUT_GRACE_S)
        try:
            async with cut:
                if first or budget.final or self._discovery_due():
                    await self._discover(budget, first)
                parts = list(self._partitions.values())
                await self._each(parts, lambda tp: self._poll_partition(tp, budget), budget, progress)
        except TimeoutError:
            if not cut.expired():
                raise  # cut at budget.ends: reported below for the last poll
        finally:
            self._hand_over()
        total = len(self._partitions)
        if budget.final and progress.done < total:
            self._anomaly(
                "last_poll_incomplete",
                None,
                f"{total - progress.done} of {total} topic-partitions not polled within the last poll's time",
            )
            self._hand_over()
        self.polls += 1
        return PollSummary(
            number=self.polls - 1,
            topic_partitions=total,
            polled=progress.done,
            events=self._handed - handed,
            anomalies=sum(self.anomaly_counts.values()) - unseen,
            wall_s=time.monotonic() - started,
        )

    async def close(self) -> None:
        """Read what the readers hold, write the last entries, close the readers and hand the
        last events over. Idempotent; the admin client and the pulsar client are the caller's."""
        if self._closed:
            return
        self._closed = True
        import pulsar  # the capture extra

        for tp in self._partitions.values():
            if tp.reader is None:
                continue
            try:
                self._drain(tp, self.settings.reader_queue_size)
            except pulsar.PulsarException as exc:
                self._anomaly("reader_error", tp.local_name, f"reading: {type(exc).__name__}: {exc}")
            self._flush_entry(tp)
        self._hand_over()
        closing = [tp.reader for tp in self._partitions.values() if tp.reader is not None]
        await self._each(
            closing, lambda reader: self._in_thread(functools.partial(_close, reader)), PollBudget(), _Progress()
        )
        self._executor.shutdown(wait=False)

    def flush_settled(self) -> None:
        """Hand over now the last entry of each topic-partition whose reader's queue was found
        empty after it (a poll otherwise holds it until the next entry shows that its batch
        was whole, which an idle topic never shows). A batch entry reaches the reader's queue
        whole, so this holds back nothing a later message could change. For a watcher, whose
        figures would otherwise wait behind that entry's acks; capture does not call it."""
        for tp in self._partitions.values():
            if tp.settled:
                self._flush_entry(tp)
        self._hand_over()

    def forget_partition(self, topic: str, partition: int, kind: str, detail: str, *, read_again: bool) -> None:
        """Drop all that is held of a topic-partition (its reader closed, its entries and its
        subscriptions' states forgotten, no event for them) and record an anomaly of ``kind``:
        with ``read_again`` the next poll's discovery (due at once) opens it again and reads it
        from its earliest entry, its subscriptions created again at their state then;
        otherwise it is not read again until a listing no longer names it (deleted). For a
        watcher whose model of it failed. Blocks while the reader closes."""
        key = (topic, partition)
        tp = self._partitions.pop(key, None)
        local = topic if partition < 0 else f"{topic}-partition-{partition}"
        self._anomaly(kind, local, detail)
        if tp is not None and tp.reader is not None:
            _close(tp.reader)
        if read_again:
            self._discovered_at = None
        else:
            self._gone.add(key)

    def list_captured(self) -> list[str]:
        """The topic-partitions polled so far (their local names), sorted."""
        return sorted(tp.local_name for tp in self._partitions.values())

    def subscription_states(self) -> Iterator[tuple[str, int, str, SubscriptionState]]:
        """``(topic, partition, subscription, state)`` of every subscription as last seen."""
        for tp in self._partitions.values():
            for name, seen in tp.subscriptions.items():
                yield tp.topic, tp.partition, name, seen.state

    def first_ledgers(self) -> Iterator[tuple[str, int, int]]:
        """``(topic, partition, ledger id)``: the first ledger each topic-partition's internal
        stats listed at the last look (``ledgers[0].ledgerId``; the ledgers below it were
        deleted, trimmed by the cluster), for those that listed any. O(topic-partitions)."""
        for tp in self._partitions.values():
            if tp.ledgers:
                yield tp.topic, tp.partition, min(tp.ledgers)

    # -- running many things at once ------------------------------------------------------------
    async def _each(
        self, items: Iterable[T], work: Callable[[T], Awaitable[None]], budget: PollBudget, progress: _Progress
    ) -> None:
        """``work`` on each item, ``concurrency`` at a time, none started once ``budget.over()``;
        an exception cancels the rest and is raised. ``progress.done`` counts those finished."""
        queue = iter(items)

        async def worker() -> None:
            for item in queue:  # one iterator shared by the workers: each takes the next item
                if budget.over():
                    return
                await work(item)
                progress.done += 1

        workers = [asyncio.ensure_future(worker()) for _ in range(self.settings.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _both(self, first: str, second: str, budget: PollBudget | None) -> tuple[Any, Any]:
        """Two GETs at once; the first one's error is raised before the second's."""
        deadline = None if budget is None else budget.deadline()
        answers = await asyncio.gather(
            self.admin.get_json(first, deadline=deadline),
            self.admin.get_json(second, deadline=deadline),
            return_exceptions=True,
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return answers[0], answers[1]

    async def _get(self, path: str, budget: PollBudget) -> Any:
        return await self.admin.get_json(path, deadline=budget.deadline())

    async def _in_thread(self, call: Callable[[], T], abandon: Callable[[T], None] | None = None) -> T:
        """``call()`` on the poller's threads (pulsar's blocking calls). If the poll is cancelled
        meanwhile, ``abandon`` gets the result once it comes (a reader opened for nothing)."""
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if abandon is not None:
                future.add_done_callback(lambda f: None if f.cancelled() or f.exception() else abandon(f.result()))
            raise

    # -- discovery --------------------------------------------------------------------------------
    def _discovery_due(self) -> bool:
        at = self._discovered_at
        return at is None or time.monotonic() - at >= self.settings.discovery_interval_s

    async def _discover(self, budget: PollBudget, first: bool) -> None:
        """List the topic-partitions in scope and open a reader for each new one. A topic that
        went (:meth:`_gone_partition`) is opened again only once a complete listing no longer
        named it in between: a topic created again."""
        self._discovered_at = time.monotonic()
        found: list[tuple[str, int]] = []
        failed: list[str] = []

        async def listed(what: str, read: Awaitable[list[T]]) -> list[T]:
            try:
                return await read
            except (MLedgerError, BadAnswer) as exc:
                if first:
                    raise ConfigError(f"cannot list the topics to capture: {exc}") from None
                failed.append(what)
                self._call_failed(exc, None, f"listing {what}: {exc}", budget)
                return []

        async def partitions(name: str) -> None:
            found.extend(await listed(name, self._partitions_of(name, budget)))

        async def namespace(name: str) -> None:
            found.extend(await listed(name, self._list_namespace(name, budget)))

        settings = self.settings
        if settings.topics:
            await self._each(sorted({full_name(t) for t in settings.topics}), partitions, budget, _Progress())
        else:
            namespaces = list(settings.namespaces)
            if settings.all_namespaces:
                namespaces = await listed("the namespaces", self._all_namespaces(budget, first))
            await self._each(namespaces, namespace, budget, _Progress())
        if not failed and not budget.over():
            self._gone &= set(found)  # a complete listing: a topic it no longer names was deleted for good
        new = [key for key in dict.fromkeys(found) if key not in self._partitions and key not in self._gone]
        await self._each(new, lambda key: self._open(key, budget, first), budget, _Progress())

    async def _all_namespaces(self, budget: PollBudget, first: bool) -> list[str]:
        tenants = names_of(await self._get("/admin/v2/tenants", budget), "the tenants")
        namespaces: list[str] = []

        async def of_tenant(tenant: str) -> None:
            path = f"/admin/v2/namespaces/{quote(tenant, safe='')}"
            try:
                namespaces.extend(names_of(await self._get(path, budget), f"the namespaces of {tenant}"))
            except NotFoundError:
                pass  # deleted since the tenants were listed
            except (MLedgerError, BadAnswer) as exc:
                if first:
                    raise
                self._call_failed(exc, None, f"listing the namespaces of {tenant}: {exc}", budget)

        await self._each(tenants, of_tenant, budget, _Progress())
        return [ns for ns in namespaces if len([p for p in ns.split("/") if p]) == 2]

    async def _partitions_of(self, full: str, budget: PollBudget) -> list[tuple[str, int]]:
        try:
            meta = await self._get(admin_path(full, "partitions"), budget)
        except NotFoundError:  # Pulsar answers {"partitions": 0} for a non-partitioned topic; some 404
            meta = {}
        count = object_of(meta, f"the partitioned metadata of {full}").get("partitions", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BadAnswer("invalid_answer", f"the partition count of {full} is {count!r}")
        return [(full, i) for i in range(count)] if count > 0 else [(full, -1)]

    async def _list_namespace(self, namespace: str, budget: PollBudget) -> list[tuple[str, int]]:
        """Every topic-partition of the namespace: the partitions of each partitioned topic
        (from its metadata: brokers list them, or only the partitioned name) and the others."""
        base = namespace_path("persistent", namespace)
        topics, partitioned_names = await self._both(base, base + "/partitioned", budget)
        partitioned = set(names_of(partitioned_names, f"the partitioned topics of {namespace}"))
        out: list[tuple[str, int]] = []

        async def partitions(name: str) -> None:
            out.extend(tp for tp in await self._partitions_of(name, budget) if tp[1] >= 0)

        await self._each(sorted(partitioned), partitions, budget, _Progress())
        for name in names_of(topics, f"the topics of {namespace}"):
            m = PARTITION.match(name)
            if name not in partitioned and (m is None or m.group(1) not in partitioned):
                out.append((name, -1))
        return out

    async def _open(self, key: tuple[str, int], budget: PollBudget, first: bool) -> None:
        """A reader for one topic-partition, once its internal stats show it exists (the ledgers
        it has then are checked at its first poll: ``topic_recreated``)."""
        import pulsar  # the capture extra

        topic, partition = key
        local = topic if partition < 0 else f"{topic}-partition-{partition}"
        try:
            internal = object_of(await self._get(admin_path(local, "internalStats"), budget), "the internal stats")
        except NotFoundError:
            self._anomaly("topic_disappeared", local, "not found before its reader was opened: not read")
            self._gone.add(key)
            return
        except (MLedgerError, BadAnswer) as exc:
            self._call_failed(exc, local, f"internal stats before opening its reader: {exc}", budget)
            return
        reader = None
        if self._reader_wanted(internal):
            try:
                reader = await self._open_reader(local)
            except pulsar.PulsarException as exc:
                if first:
                    raise
                self._anomaly("reader_error", local, f"{type(exc).__name__}: {exc}")
                return
        tp = self._partitions[key] = _Partition(topic, partition, reader, ledger_ids(internal))
        tp.added = entries_added(internal)
        tp.opening = (self.polls, internal)

    def _reader_wanted(self, internal: dict[str, Any]) -> bool:
        """Whether the topic-partition these internal stats describe is read by a reader
        (:attr:`PollerSettings.readers`, :attr:`PollerSettings.readers_for_cursors`)."""
        settings = self.settings
        if not settings.readers:
            return False
        if not settings.readers_for_cursors:
            return True
        cursors = internal.get("cursors")
        return isinstance(cursors, dict) and any(not str(name).startswith(READER_PREFIX) for name in cursors)

    async def _open_reader(self, local: str) -> Any:
        """A non-durable reader of ``local`` from its earliest entry (``pulsar.PulsarException``)."""
        import pulsar  # the capture extra

        create = functools.partial(
            self.client.create_reader,
            local,
            pulsar.MessageId.earliest,
            subscription_role_prefix=READER_PREFIX,
            receiver_queue_size=self.settings.reader_queue_size,
        )
        return await self._in_thread(create, _close)

    async def _follow_cursors(self, tp: _Partition, internal: dict[str, Any]) -> bool:
        """Under ``readers_for_cursors``, open the reader of a topic-partition that has a cursor
        now, close that of one that has none; False when a reader could not be opened."""
        import pulsar  # the capture extra

        wanted = self._reader_wanted(internal)
        if wanted and tp.reader is None:
            try:
                tp.reader = await self._open_reader(tp.local_name)
            except pulsar.PulsarException as exc:
                self._anomaly("reader_error", tp.local_name, f"{type(exc).__name__}: {exc}")
                return False
            tp.settled = False
        elif not wanted and tp.reader is not None:
            self._flush_entry(tp)
            reader, tp.reader = tp.reader, None
            await self._in_thread(functools.partial(_close, reader))
        return True

    # -- one topic-partition ----------------------------------------------------------------------
    async def _poll_partition(self, tp: _Partition, budget: PollBudget) -> None:
        local = tp.local_name
        opening, tp.opening = tp.opening, None
        try:
            if opening is not None and opening[0] == self.polls:  # read by this poll's discovery
                internal = opening[1]
            else:
                internal = object_of(await self._get(admin_path(local, "internalStats"), budget), "the internal stats")
            stats = None
            if self._stats_due(tp, internal, budget):
                stats = object_of(await self._get(admin_path(local, "stats"), budget), "the stats")
        except NotFoundError:  # the topic was deleted: so were its subscriptions
            self._gone_partition(tp)
            return
        except (MLedgerError, BadAnswer) as exc:
            self._call_failed(exc, local, str(exc), budget)
            return
        now = _now()
        self._check_recreated(tp, internal)
        try:
            last = last_entry(internal)
        except BadAnswer as exc:
            self._anomaly(exc.kind, local, str(exc))
            last = None
        for ledger_id, count in ledger_entries(internal).items():
            tp.entry_counts[ledger_id] = max(count, tp.entry_counts.get(ledger_id, 0))
        if self.settings.readers_for_cursors and not await self._follow_cursors(tp, internal):
            return
        if not self.settings.readers:
            self._entries_from_ledgers(tp, internal, last)
        elif tp.reader is not None:
            await self._read_entries(tp, last, budget)  # every entry the stats name is known
        if stats is not None:  # else no cursor changed since the stats were last read
            self._subscriptions_changed(tp, stats, internal, opening is not None, now)
        self._forget_deleted_ledgers(tp)

    def _subscriptions_changed(
        self, tp: _Partition, stats: dict[str, Any], internal: dict[str, Any], opened: bool, now: int
    ) -> None:
        """The subscription events of freshly read stats and internal stats."""
        try:
            current, settled = self._subscriptions(tp, stats, internal)
        except BadAnswer as exc:
            self._anomaly(exc.kind, tp.local_name, f"{exc}: the subscriptions keep their previous state")
            return
        for name in sorted(set(tp.subscriptions) - set(current)):
            self._emit(SubscriptionDeleted(tp.topic, tp.partition, name, now))
            del tp.subscriptions[name]
        for name, change in sorted(current.items()):
            if change is not None:
                self._diff(tp, name, *change, now)
        # what a poll that reads no stats compares with; None: a subscription is still to be read
        tp.cursors = frozenset(internal["cursors"]) | _readers(stats, opened=opened) if settled else None

    def _forget_deleted_ledgers(self, tp: _Partition) -> None:
        """Drop what the poller holds per ledger for the ledgers below the first one listed,
        which the cluster deleted (trimmed), as a watch forgets them: their entry counts once
        the reader is past them (or there is no reader to move past them), and the runs of
        known entries at or below every subscription's mark-delete as last seen (the acks of
        an entry are events only while a subscription's mark-delete has not passed it; a
        Pulsar trim deletes nothing a cursor has not consumed, so this is every deleted
        ledger once the poller has seen the acks). O(ledgers held + subscriptions)."""
        if not tp.ledgers:
            return
        first = min(tp.ledgers)
        top = tp.known.last
        for ledger_id in [i for i in tp.entry_counts if i < first]:
            if tp.reader is None or (top is not None and Position(ledger_id, tp.entry_counts[ledger_id] - 1) <= top):
                del tp.entry_counts[ledger_id]
        marks = [seen.state.mark_delete for seen in tp.subscriptions.values()]
        tp.known.forget_before(min([Position(first, -1), *marks]))

    def _stats_due(self, tp: _Partition, internal: dict[str, Any], budget: PollBudget) -> bool:
        """Whether the topic stats must be read with these internal stats. They list the
        durable subscriptions and their types, which matter only when a cursor appears,
        disappears or changes (then the poll records events, under the type read now), so they
        are read then, and at a topic-partition's first and the last poll; otherwise a poll
        costs one admin call per topic-partition. (A subscription whose type changed and that
        acked nothing since keeps its old type until it acks or the last poll.)"""
        if budget.final or tp.cursors is None:
            return True
        cursors = internal.get("cursors")
        if not isinstance(cursors, dict) or cursors.keys() != tp.cursors:
            return True
        for name, seen in tp.subscriptions.items():
            cursor = cursors.get(name)
            if (
                not isinstance(cursor, dict)
                or seen.state.untracked
                or cursor.get("markDeletePosition") != seen.raw_mark_delete
                or cursor.get("individuallyDeletedMessages") != seen.state.individually_deleted
            ):
                return True
        return False

    def _subscriptions(
        self, tp: _Partition, stats: dict[str, Any], internal: dict[str, Any]
    ) -> tuple[dict[str, tuple[_Seen, list[Interval]] | None], bool]:
        """Each durable subscription the stats list, with its state from the internal stats
        and its acked ranges, when they changed (None: keep the previous state, e.g. its cursor
        was not in this answer, or it is unchanged), and whether every one was read (not: one
        had no cursor in this answer, or a cursor of the wrong shape). Raises
        :class:`BadAnswer` when the answers cannot say which subscriptions exist."""
        subscriptions = object_of(stats.get("subscriptions"), "the stats' subscriptions")
        cursors = object_of(internal.get("cursors"), "the internal stats' cursors")
        if COMPACTION_CURSOR in cursors and COMPACTION_CURSOR not in subscriptions:
            subscriptions = {**subscriptions, COMPACTION_CURSOR: {"type": "Exclusive", "isDurable": True}}
        current: dict[str, tuple[_Seen, list[Interval]] | None] = {}
        settled = True
        for name, sub in subscriptions.items():
            try:
                sub = object_of(sub, f"subscription {name!r} of the stats")
                if sub.get("isDurable", True) is False:
                    continue
                current[name] = None
                if name not in cursors:  # created or deleted between the two calls: the next poll says
                    settled = False
                    continue
                cursor = object_of(cursors[name], f"cursor {name!r}")
                raw_type = sub.get("type", "Shared")
                raw_md = cursor.get("markDeletePosition")
                ranges = cursor.get("individuallyDeletedMessages")
                old = tp.subscriptions.get(name)
                if (
                    old is not None
                    and old.raw_type == raw_type
                    and old.raw_mark_delete == raw_md
                    and old.state.individually_deleted == ranges
                    and not old.state.untracked
                ):
                    continue  # unchanged: nothing to parse
                current[name] = self._read_cursor(tp, name, raw_type, raw_md, ranges)
            except BadAnswer as exc:
                self._anomaly(exc.kind, tp.local_name, f"{exc}: subscription {name!r} keeps its previous state")
                current[name] = None
                settled = False
        return current, settled

    def _read_cursor(
        self, tp: _Partition, name: str, raw_type: Any, raw_md: Any, ranges: Any
    ) -> tuple[_Seen, list[Interval]]:
        """A changed cursor's state, checked (:class:`BadAnswer`), and its acked ranges (none
        held for one over ``max_ranges_per_subscription``: ``untracked``)."""
        md = position_of(raw_md, f"cursor {name!r}: markDeletePosition")
        if not isinstance(ranges, str):
            kind = "missing_field" if ranges is None else "invalid_answer"
            raise BadAnswer(kind, f"cursor {name!r}: individuallyDeletedMessages is {ranges!r}")
        if not isinstance(raw_type, str):
            raise BadAnswer("invalid_answer", f"subscription {name!r}: type is {raw_type!r}")
        count = ranges.count("(")
        if count > self.settings.max_ranges_per_subscription:
            old = tp.subscriptions.get(name)
            if old is None or not old.state.untracked:
                self._anomaly(
                    "subscription_over_bound",
                    tp.local_name,
                    f"subscription {name!r} has {count} ranges, more than max_ranges_per_subscription "
                    f"{self.settings.max_ranges_per_subscription}: not held until it fits again",
                )
            return _Seen(raw_type, raw_md, SubscriptionState(raw_type.upper(), md, "", untracked=True)), []
        try:
            parsed = normalised(parse_deleted_ranges(ranges))
        except ValueError as exc:
            raise BadAnswer("invalid_answer", f"cursor {name!r}: {exc}") from None
        return _Seen(raw_type, raw_md, SubscriptionState(raw_type.upper(), md, ranges)), parsed

    def _diff(self, tp: _Partition, name: str, seen: _Seen, ranges: list[Interval], now: int) -> None:
        """The events that take the subscription from its last state to ``seen``."""
        old = tp.subscriptions.get(name)
        new = seen.state
        tp.subscriptions[name] = seen
        if old is not None and old.state.sub_type != new.sub_type:  # subscribed again with another type
            self._emit(SubscriptionCreated(tp.topic, tp.partition, name, new.sub_type, old.state.mark_delete, now))
        if old is None:
            self._emit(SubscriptionCreated(tp.topic, tp.partition, name, new.sub_type, new.mark_delete, now))
            first = tp.known.first
            if first is not None and new.mark_delete >= first:  # a created event starts at the first entry
                self._reset(tp, name, new.mark_delete, now)
        if new.untracked:
            return
        if old is None:
            acks = tp.known.held_within(ranges)
        elif old.state.untracked or new.mark_delete < old.state.mark_delete:
            self._reset(tp, name, new.mark_delete, now)
            acks = tp.known.held_within(ranges)
        else:
            before = normalised(parse_deleted_ranges(old.state.individually_deleted))
            if tp.known.any_held_within(above(difference(before, ranges), new.mark_delete)):  # an ack undone
                self._reset(tp, name, new.mark_delete, now)
                acks = tp.known.held_within(ranges)
            else:
                moved = [(old.state.mark_delete, new.mark_delete), *ranges]
                acks = tp.known.held_within(difference(normalised(moved), before))
        self._emit_acks(tp, name, acks, now)

    def _reset(self, tp: _Partition, name: str, mark_delete: Position, now: int) -> None:
        """A reset that leaves the mark-delete at ``mark_delete`` (Pulsar's resetCursor reads
        from the given position and marks everything before it deleted)."""
        after = Position(mark_delete.ledger_id, mark_delete.entry_id + 1)
        self._emit(SubscriptionReset(tp.topic, tp.partition, name, after, now))

    def _emit_acks(self, tp: _Partition, name: str, positions: Iterator[Position], now: int) -> None:
        """``Acked`` events of at most ``max_pending_events`` acks each."""
        chunk: list[AckRecord] = []
        for p in positions:
            chunk.append(AckRecord(p[0], p[1]))
            if len(chunk) >= self.settings.max_pending_events:
                self._emit(Acked(tp.topic, tp.partition, name, tuple(chunk), now))
                chunk = []
        if chunk:
            self._emit(Acked(tp.topic, tp.partition, name, tuple(chunk), now))

    def _check_recreated(self, tp: _Partition, internal: dict[str, Any]) -> None:
        """A topic whose ledgers of the last look are all gone was deleted and created again,
        or trimmed of all of them (a topic consumed as fast as it is written keeps one ledger,
        trimmed once it rolls over). Ledger ids cannot tell: Pulsar's (and mledger's) are
        unique in the cluster and only go up, so a new topic's are above the old one's too.
        The managed ledger's ``entriesAddedCounter`` can: a trim keeps the managed ledger,
        whose counter counts on, while a topic created again counts from 0, so its counter is
        below the old one's unless it has since had as many entries added as the old one had
        counted. (Not ``numberOfEntries`` on top: Pulsar reads the two one after the other,
        while entries are added. An unload restarts the counter too: a topic unloaded and
        wholly trimmed between two looks reads as recreated.)"""
        before, now = tp.ledgers, ledger_ids(internal)
        added_before, added = tp.added, entries_added(internal)
        if not now:
            return
        tp.ledgers, tp.added = now, added
        if not before or before & now or min(now) < max(before):
            return
        if added_before is not None and added is not None and added >= added_before:
            return  # trimmed: the managed ledger counted on
        counted = "" if added is None or added_before is None else f" (entries added {added_before}, now {added})"
        self._anomaly(
            "topic_recreated", tp.local_name, f"its ledgers were {sorted(before)}, now {sorted(now)}{counted}"
        )

    def _gone_partition(self, tp: _Partition) -> None:
        """The topic-partition was deleted: its reader is closed at once (a reconnecting reader
        would create it again) and it is not read again."""
        now = _now()
        self._anomaly("topic_disappeared", tp.local_name, "answered 404: its subscriptions are recorded as deleted")
        self._flush_entry(tp)
        if tp.reader is not None:
            _close(tp.reader)
        for name in sorted(tp.subscriptions):
            self._emit(SubscriptionDeleted(tp.topic, tp.partition, name, now))
        tp.subscriptions.clear()
        del self._partitions[(tp.topic, tp.partition)]
        self._gone.add((tp.topic, tp.partition))

    # -- entries ----------------------------------------------------------------------------------
    async def _read_entries(self, tp: _Partition, last: Position | None, budget: PollBudget) -> None:
        """Read at least up to ``last`` (the topic's last entry when its stats were taken; None:
        not known, then ask the broker as ``has_message_available`` does), so that every entry
        those stats name is known, and what the reader's queue holds. Entries come from the
        queue without a round trip; a reader that had everything when its queue was last found
        empty is not read at all. An entry's ``produced`` event waits until the next entry (or
        the end) shows that all its batch's messages were seen.

        A reader whose next entry lies in a ledger the cluster deleted is moved to the next
        entry that exists (Pulsar's ``ManagedLedgerImpl.getNextValidPosition``), so the
        entries of a deleted ledger it had not read never come: once its queue is empty and
        ``last`` lies below the first ledger listed (after a rollover to an empty ledger
        ``lastConfirmedEntry`` names the last entry of the previous one, which a trim may
        have deleted), nothing that exists is left to read up to it, and the entries the
        internal stats named up to it are known from them (:meth:`_skip_deleted`). A reader
        whose queue is empty and that has no message available has every entry a reader can
        have: what lies between it and ``last`` is never delivered (markers)."""
        import pulsar  # the capture extra

        def caught_up() -> bool:
            top = tp.known.last
            return last is not None and (last == EARLIEST or (top is not None and top >= last))

        if caught_up() and tp.settled and not budget.final:
            return
        reader = tp.reader
        assert reader is not None  # called for a topic-partition with a reader only
        deadline = time.monotonic() + self.settings.read_timeout_s
        if budget.ends is not None:
            deadline = min(deadline, budget.ends)
        pause, past = 0.005, 0
        ask = True  # whether to ask the broker, when the queue is empty: once per empty spell
        try:
            while True:
                read, emptied = self._drain(tp, DRAIN_STEP)
                ask = ask or read > 0
                if emptied and last is not None and not caught_up() and _deleted(tp, last):
                    self._flush_entry(tp)
                    self._skip_deleted(tp, last)
                if caught_up():
                    tp.settled = emptied
                    past += read
                    if emptied or past >= self.settings.reader_queue_size:
                        return  # a busy topic's newer entries are read by the next poll
                elif not read:
                    # Nothing the broker would dispatch is left (asked once the queue is empty,
                    # and again only after more was read): the entries up to ``last`` are ones
                    # no reader receives, server-only markers or aborted transactions' entries
                    # (Pulsar's getLastMessageId names the last dispatchable entry,
                    # PersistentTopic.getLastDispatchablePosition); they become placeholders
                    # of the replay once a later entry is read.
                    if ask and not await self._in_thread(reader.has_message_available):
                        tp.settled = True
                        return
                    ask = False
                    if budget.stop():
                        return  # stopping: the last poll reads them
                    if time.monotonic() > deadline:
                        self._anomaly("entries_not_read", tp.local_name, f"entries up to {last} not read")
                        return
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.1)
                    continue
                await asyncio.sleep(0)  # let the other topic-partitions run
        except pulsar.PulsarException as exc:
            self._anomaly("reader_error", tp.local_name, f"reading: {type(exc).__name__}: {exc}")

    def _entries_from_ledgers(self, tp: _Partition, internal: dict[str, Any], last: Position | None) -> None:
        """Without a reader: every entry the internal stats named up to ``last``
        (:attr:`_Partition.entry_counts`: a closed ledger's ``entries`` count is final, the
        last one's entries end at ``last``; a ledger deleted since an earlier look named it
        keeps what that look said), above those known, becomes known, one message each
        (``batch_size`` 1), published now. O(new entries + ledgers); the entries of ledgers
        created and deleted between two looks are never known."""
        if last is None or last == EARLIEST:
            return
        top = tp.known.last
        for ledger_id in sorted(ledger_ids(internal)):
            if (
                ledger_id not in tp.entry_counts
                and ledger_id <= last.ledger_id
                and (top is None or ledger_id >= top.ledger_id)
            ):
                self._anomaly("missing_field", tp.local_name, f"ledger {ledger_id} has no entry count")
                last = Position(ledger_id, -1)  # the entries before it only
                break
        self._know_named(tp, last)
        tp.settled = True

    def _know_named(self, tp: _Partition, upto: Position) -> tuple[int, Position | None]:
        """Make known the positions above the last known entry, up to ``upto``, that the
        internal stats named (:attr:`_Partition.entry_counts`), in order, each one message
        (``batch_size`` 1) published now; returns how many and the first.
        O(ledgers held + positions)."""
        entry = ObservedEntry(publish_time_ms=_now())
        top, first, count = tp.known.last, None, 0
        for ledger_id in sorted(tp.entry_counts):
            if ledger_id > upto.ledger_id:
                break
            if top is not None and ledger_id < top.ledger_id:
                continue
            start = top.entry_id + 1 if top is not None and ledger_id == top.ledger_id else 0
            stop = tp.entry_counts[ledger_id]
            if ledger_id == upto.ledger_id:
                stop = min(stop, upto.entry_id + 1)
            for entry_id in range(start, stop):
                position = Position(ledger_id, entry_id)
                tp.known.add(position)
                self._emit(EntrySeen(tp.topic, tp.partition, position, entry))
                first = first or position
                count += 1
        return count, first

    def _skip_deleted(self, tp: _Partition, upto: Position) -> None:
        """The reader was moved past deleted ledgers (:meth:`_read_entries`): the entries of
        those ledgers up to ``upto`` it never read and the internal stats named become known,
        one message each (their batch sizes are gone with them), published now, and
        ``entries_trimmed`` says how many. Every subscription had consumed them (Pulsar trims
        nothing a cursor has not), so what the replay needs of them is their positions: the
        acks that take a mark-delete past them. O(ledgers held + positions)."""
        if not tp.ledgers:
            return
        count, first = self._know_named(tp, min(upto, Position(min(tp.ledgers), -1)))  # deleted ledgers only
        if count:
            self._anomaly(
                "entries_trimmed",
                tp.local_name,
                f"{count} entries from {first} to {tp.known.last} were deleted before the reader read them: "
                "counted one message each",
            )

    def _drain(self, tp: _Partition, limit: int) -> tuple[int, bool]:
        """Read up to ``limit`` messages the reader's queue holds now, without waiting: how
        many, and whether the queue was found empty."""
        import pulsar  # the capture extra

        reader = tp.reader
        assert reader is not None  # called for a topic-partition with a reader only
        for read in range(limit):
            try:
                msg = reader.read_next(0)
            except pulsar.Timeout:
                return read, True
            self._message(tp, msg)
        return limit, False

    def _message(self, tp: _Partition, msg: Any) -> None:
        mid = msg.message_id()
        position = Position(mid.ledger_id(), mid.entry_id())
        pending = tp.pending
        if pending is not None and pending.position == position:
            tp.pending = pending._replace(top_batch_index=max(pending.top_batch_index, mid.batch_index()))
            return
        top = tp.known.last
        if top is not None and position <= top:
            return  # seen already (a reader reconnecting resends)
        self._flush_entry(tp)
        first = _first_chunk(mid)
        start = first if first is not None and first < position else position
        if top is not None and start.ledger_id != top.ledger_id:  # moved past the ledgers deleted in between?
            self._skip_deleted(tp, Position(start.ledger_id, -1))
        seen = _Pending(
            position,
            int(msg.publish_timestamp()),
            msg.producer_name() or None,
            msg.partition_key() or None,
            mid.batch_index(),
        )
        if first is not None and first < position:
            self._chunked(tp, first, seen)
            return
        tp.pending = seen
        tp.known.add(position)

    def _chunked(self, tp: _Partition, first: Position, seen: _Pending) -> None:
        """A chunked message: one row per chunk, from ``first`` to its last chunk (its chunks
        are consecutive entries of one ledger unless another producer's entries came between)."""
        last = seen.position
        written = tp.known.last
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
                    self._write_entry(tp, seen._replace(position=position), 1, chunk_id, len(chunks))
                else:
                    self._write_entry(tp, seen._replace(position=position), 1)
                tp.known.add(position)

    def _flush_entry(self, tp: _Partition) -> None:
        if tp.pending is not None:
            pending, tp.pending = tp.pending, None
            self._write_entry(tp, pending, max(pending.top_batch_index + 1, 1))

    def _write_entry(
        self,
        tp: _Partition,
        seen: _Pending,
        batch_size: int,
        chunk_id: int | None = None,
        num_chunks: int | None = None,
    ) -> None:
        entry = ObservedEntry(
            publish_time_ms=seen.publish_time_ms,
            batch_size=batch_size,
            producer_name=seen.producer_name,
            key=seen.key,
            chunk_id=chunk_id,
            num_chunks=num_chunks,
        )
        self._emit(EntrySeen(tp.topic, tp.partition, seen.position, entry))

    # -- events and anomalies -------------------------------------------------------------------
    def _emit(self, event: CaptureEvent) -> None:
        self._events.append(event)
        if len(self._events) >= self.settings.max_pending_events:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the sink the events waiting (in order)."""
        if self._events:
            events, self._events = self._events, []
            self._handed += len(events)
            self._sink(events)

    def _call_failed(self, exc: Exception, topic: str | None, detail: str, budget: PollBudget) -> None:
        """An admin call failed or answered the wrong shape: an anomaly, unless the call failed
        because a poll before the last ran out of time (the last poll reads it again)."""
        if isinstance(exc, BadAnswer) or not budget.lapsed():
            self._anomaly(exc.kind if isinstance(exc, BadAnswer) else "admin_error", topic, detail)

    def _anomaly(self, kind: str, topic: str | None, detail: str) -> None:
        """Record what the poller could not see: counted, listed (the first of each kind),
        logged once per kind and handed to the sink."""
        count = self.anomaly_counts.get(kind, 0)
        self.anomaly_counts[kind] = count + 1
        now = _now()
        if count < MAX_ANOMALIES_LISTED:
            self.anomalies.setdefault(kind, []).append({"ts_ms": now, "topic": topic, "detail": detail})
        if count == 0:
            log.warning("capture: %s%s: %s", kind, f" on {topic}" if topic else "", detail)
        self._emit(Anomaly(kind, topic, detail, now))


def _now() -> int:
    return int(time.time() * 1000)


def _deleted(tp: _Partition, position: Position) -> bool:
    """Whether ``position`` lies below the first ledger listed at the last look (deleted)."""
    return bool(tp.ledgers) and position.ledger_id < min(tp.ledgers)


def _readers(stats: dict[str, Any], opened: bool) -> frozenset[str]:
    """The non-durable subscriptions (readers) the stats list, when the internal stats they go
    with were read before the poller's own reader opened (``opened``): its cursor is not in
    those, and the next poll's would otherwise differ by it and read the stats again. Only
    readers are added, which are no subscriptions of the replay; a durable subscription that
    appears is a cursor not named by these stats, so the next poll reads them."""
    if not opened:
        return frozenset()
    subscriptions = stats.get("subscriptions")
    return (
        frozenset(
            name for name, sub in subscriptions.items() if isinstance(sub, dict) and sub.get("isDurable", True) is False
        )
        if isinstance(subscriptions, dict)
        else frozenset()
    )


def _close(reader: Any) -> None:
    try:
        reader.close()
    except Exception:  # noqa: BLE001 - a reader of a deleted topic may refuse to close
        pass


def _first_chunk(mid: Any) -> Position | None:
    """The first chunk's position of a chunked message's id (None for any other message)."""
    try:
        first = MessageId.from_bytes(mid.serialize()).first_chunk_message_id
    except MLedgerError:
        return None
    return None if first is None else first.position
