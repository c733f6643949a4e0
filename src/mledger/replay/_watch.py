"""``mledger watch``: every subscription's restart risk on a live cluster, poll after poll.

Theory of operation
-------------------
A :class:`Watch` is a :class:`~mledger.replay.ClusterPoller` (the capture's engine:
concurrent admin polls, one non-durable reader per topic-partition) whose events go, instead
of to Parquet, to the replay itself, fed as they happen:

1. the poller's events are stamped into the raw logs' rows by the recorder's own stamping
   (:class:`~mledger.replay._recording.RowJournal`: the same rows ``mledger capture`` would
   write), sealed at the end of each poll so that no later row sorts before one already fed;
2. the rows become the replay's events (:func:`~mledger.replay._schema.to_events`,
   :class:`~mledger.replay._subscriptions.SubscriptionRows`), sorted per topic-partition
   (:func:`~mledger.replay._local.by_partition`);
3. each topic-partition has one :class:`~mledger.replay.PartitionReplayer`, the
   replay's engine and its model (mledger's broker and cursors under the replay settings),
   kept for the whole watch: each poll's events are fed to it
   (:meth:`~mledger.replay.PartitionReplayer.feed`, its subscription events through
   :meth:`~mledger.replay.PartitionReplayer.add_subscription_events`) and its
   figures read without ending it
   (:meth:`~mledger.replay.PartitionReplayer.observe`). Nothing is replayed twice.

Without readers (``WatchSettings(readers=False)``, ``mledger watch --no-readers``) the poller
knows the entries from the internal stats' ledger lists alone, each one a message of its own:
every figure (backlog, redeliveries) is then in entries, not messages (:attr:`WatchRound.unit`),
and batch-index acks are not seen. It reads nothing from the topics, only the admin stats.

A topic-partition the poller finds deleted (``topic_disappeared``) takes its model with it;
a subscription that goes takes its history. The ledgers the cluster deleted (trimmed) go too:
after each round, a replayer whose topic-partition's internal stats list a later first ledger
forgets the ledgers below it
(:meth:`~mledger.replay.PartitionReplayer.forget_ledgers_before`), so what it holds follows
the ledgers that exist, not how long the watch has run.

A topic-partition whose replay raises (a defect: nothing a cluster does should make it) does
not stop the watch: its model is dropped, a ``replay_failed`` anomaly says so (the traceback is
logged), the poller reads it again from its earliest entry into a new model
(:meth:`~mledger.replay.ClusterPoller.forget_partition`), and the other topic-partitions go on.
After :data:`MAX_REBUILDS` rebuilds of one topic-partition it is no longer read.

Per subscription a bounded history of samples (poll time, ack ranges, persisted state bytes)
gives the growth (a least-squares slope over the samples kept) and the forecast: when the
ranges pass the persist limit (``max_unacked_ranges_to_persist``, plus one under the
pre-#25548 off-by-one) and when the persisted state passes the frame limit
(``ManagedLedgerFactoryConfig.frame_limit``). When a history is full its oldest sample is dropped
and the row says so (``history_dropped``).

Status (:data:`STATUSES`): ``LOSING_STATE`` when a crash or an unload now would lose acks to
a limit (the replay's ``redelivered_after_crash_limits`` or ``redelivered_after_unload`` above
0: truncation, the frame limit, #26498, batch indexes lost on unload; or the last persist
truncated ranges or batch indexes, or the state is over the frame limit); ``AT_RISK`` when the forecast crosses a limit within the horizon; ``OK`` otherwise.
Each comes with its reason.

Read-only: the poller reads admin GETs and non-durable readers only (see
:mod:`mledger.replay._poller`); nothing here writes to the cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core import ConfigError, LedgerNotConsumedError
from ._capture import until_stopped, wait_or_stop
from ._engine import PartitionReplayer
from ._local import by_partition
from ._model import SubscriptionResult, SubscriptionSpec
from ._poll_answers import full_name
from ._poll_events import Anomaly, CaptureEvent
from ._poller import AsyncAdminJson, ClusterPoller, PollBudget, PollerSettings, PollSummary
from ._recording import Row, RowJournal, rows_table
from ._schema import CURSOR_SCHEMA, EVENT_LOGS, EVENT_SCHEMA, RECORD_FIELD, to_events
from ._settings import ReplaySettings
from ._subscriptions import SubscriptionRows

__all__ = [
    "AT_RISK",
    "ENTRIES",
    "MAX_REBUILDS",
    "MESSAGES",
    "LOSING_STATE",
    "OK",
    "STATUSES",
    "SubscriptionWatch",
    "Watch",
    "WatchRound",
    "WatchSettings",
    "forecast_crossing",
    "namespace_of",
]

log = logging.getLogger(__name__)

MAX_REBUILDS = 3
"""How many times a watch rebuilds one topic-partition's model after its replay raised (reading
the topic-partition again from its earliest entry each time) before it stops reading it."""
LOSING_STATE = "LOSING_STATE"
AT_RISK = "AT_RISK"
OK = "OK"
STATUSES = {
    LOSING_STATE: "a crash or an unload now would lose acknowledgements to a limit (truncated ranges or batch "
    "indexes, a state over the frame limit, batch-index acks not persisted or not read back): those messages "
    "would be delivered again",
    AT_RISK: "at the current growth the state passes a limit within the horizon",
    OK: "no limit is passed now, and none within the horizon at the current growth",
}
"""Each status and what it means."""
MESSAGES = "messages"
ENTRIES = "entries"
"""The units of a round's figures: messages with readers, entries without (:attr:`WatchRound.unit`)."""


@dataclass(frozen=True)
class WatchSettings(PollerSettings):
    """What to watch (the scope and bounds of :class:`~mledger.replay.PollerSettings`)
    and how: ``replay``, the settings the cursors are modelled with (``--defaults``, ``--set``),
    and ``namespace_replay`` those of the namespaces (``tenant/ns``) whose policies differ;
    ``interval_s``, the poll interval; ``horizon_s``, how far ahead a forecast crossing makes a
    subscription ``AT_RISK``; ``max_history``, the samples kept per subscription (the memory
    bound: the oldest is dropped). A watch reads a topic-partition only while it has a
    subscription (``readers_for_cursors``: a reader's reconnection would otherwise keep a
    deleted topic alive)."""

    replay: ReplaySettings = field(default_factory=ReplaySettings)
    namespace_replay: Mapping[str, ReplaySettings] = field(default_factory=dict)
    interval_s: float = 30.0
    horizon_s: float = 3600.0
    max_history: int = 120
    readers_for_cursors: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("interval_s", "horizon_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if isinstance(self.max_history, bool) or not isinstance(self.max_history, int) or self.max_history < 2:
            raise ConfigError(f"max_history must be an integer >= 2, got {self.max_history!r}")


@dataclass(frozen=True)
class SubscriptionWatch:
    """One subscription as the last poll left it: its figures, growth, forecast and status.

    ``state_bytes``: the cursor state's size at its last persist; ``unacked_ranges``: its ack
    holes now; ``redelivered_after_crash``: acknowledged messages a crash now would deliver
    again, ``redelivered_after_crash_limits`` the part of them lost to the limits (the rest is
    what the mark-delete limiter has not persisted yet), ``redelivered_after_unload`` those a
    clean close (an unload, a restart) would (the replay's figures of the same names, under the
    Pulsar version's rules); ``persist_limit_at_ms`` / ``frame_limit_at_ms``:
    when the ranges pass the persist limit and the state the frame limit at the current growth
    (None: not growing; a time at or before ``at_ms``: passed already); ``history_dropped``:
    samples were dropped for the memory bound (the growth is over the samples kept)."""

    topic: str
    partition: int
    subscription: str
    subscription_type: str
    at_ms: int
    mark_delete: str
    backlog: int
    unacked_ranges: int
    state_bytes: int
    redelivered_after_crash: int
    redelivered_after_crash_limits: int
    redelivered_after_unload: int
    truncated_ranges: int
    truncated_batch_indexes: int
    ranges_per_s: float
    state_bytes_per_s: float
    persist_limit: int
    persist_limit_at_ms: int | None
    frame_limit: int
    frame_limit_at_ms: int | None
    status: str
    reason: str
    history_samples: int
    history_dropped: bool

    @property
    def local_topic(self) -> str:
        """The topic-partition's own name (a partition's ``...-partition-N``)."""
        return _local_name(self.topic, self.partition)


@dataclass(frozen=True)
class WatchRound:
    """What one poll gave: the poll's own summary and every subscription watched; ``unit``:
    what the counts of messages count, :data:`MESSAGES` (with readers) or :data:`ENTRIES`
    (without: each entry counted as one message)."""

    poll: PollSummary
    at_ms: int
    subscriptions: tuple[SubscriptionWatch, ...]
    anomalies: int
    unit: str = MESSAGES

    def counts(self) -> dict[str, int]:
        """Subscriptions per status."""
        out = dict.fromkeys(STATUSES, 0)
        for row in self.subscriptions:
            out[row.status] += 1
        return out


class _Sample:
    __slots__ = ("at_ms", "bytes", "ranges")

    def __init__(self, at_ms: int, ranges: int, state_bytes: int) -> None:
        self.at_ms = at_ms
        self.ranges = ranges
        self.bytes = state_bytes


class _History:
    """A subscription's last samples (at most ``size``) and whether older ones were dropped."""

    def __init__(self, size: int) -> None:
        self.samples: deque[_Sample] = deque(maxlen=size)
        self.dropped = False

    def add(self, sample: _Sample) -> None:
        if len(self.samples) == self.samples.maxlen:
            self.dropped = True
        self.samples.append(sample)


class _Rows(RowJournal):
    """The stamped rows of the poller's events, held until the watch feeds them."""

    def __init__(self, max_waiting_rows: int) -> None:
        super().__init__(max_waiting_rows)
        self.rows: dict[str, list[Row]] = {}
        self.dropped = 0
        self.anomalies = 0

    def _put(self, name: str, rows: list[Row]) -> None:
        self.rows.setdefault(name, []).extend(rows)

    def _drop(self, n: int, now_ms: int, why: str) -> None:
        self.dropped += n

    def not_recorded(self, what: str, now_ms: int) -> None:
        self.anomalies += 1

    def take(self) -> dict[str, list[Row]]:
        with self._lock:
            rows, self.rows = self.rows, {}
            return rows


class Watch:
    """Watches ``admin``/``client``'s cluster (see the module docstring).

    ``await poll(first=...)`` polls once, feeds the replay and returns the :class:`WatchRound`;
    ``await close()`` closes the readers (the admin client and the pulsar client are the
    caller's). Use it from one event loop. ``poll`` raises what the poller's first poll raises
    (``ConfigError``, ``TopicNotFoundError``, ``pulsar.PulsarException``).
    """

    def __init__(self, admin: AsyncAdminJson, client: Any, settings: WatchSettings) -> None:
        self.settings = settings
        self._journal = _Rows(settings.max_pending_events)
        self._poller = ClusterPoller(admin, client, settings, self.events)
        self._replayers: dict[tuple[str, int], PartitionReplayer] = {}
        self._histories: dict[tuple[str, int, str], _History] = {}
        self._subscription_rows = SubscriptionRows()
        self._gone: set[str] = set()  # topic-partitions deleted since the last feed (local names)
        self._observed: dict[tuple[str, int], list[SubscriptionResult]] = {}  # the last round's, per replayer
        self._first_ledgers: dict[tuple[str, int], int] = {}  # per replayer: the first ledger it kept
        self._polls = 0
        self.replay_anomalies = 0
        """Events the replay could not apply (its ``anomalies`` output rows), counted."""
        self.forgotten_entries = 0
        """Entries of the ledgers the cluster deleted that the replay forgot, counted."""
        self.forget_refused = 0
        """Polls at which a topic-partition's deleted ledgers were not forgotten, counted: a
        subscription's replayed mark-delete had not passed them (``LedgerNotConsumedError``;
        the next poll tries again)."""
        self.replay_failures: dict[tuple[str, int], int] = {}
        """Per topic-partition, how many times its replay raised (``replay_failed``)."""
        self._failed_now = 0  # replay failures of the feed under way (counted in its round's anomalies)

    @property
    def poller(self) -> ClusterPoller:
        return self._poller

    async def check_topics(self) -> None:
        """Refuse the named topics that do not exist (the poller's check)."""
        await self._poller.check_topics()

    async def poll(self, budget: PollBudget | None = None, *, first: bool = False) -> WatchRound:
        """One poll, its events fed to the replay, every subscription's figures."""
        summary = await self._poller.poll(budget, first=first)
        self._poller.flush_settled()
        return self._feed(summary, _now())

    async def close(self) -> None:
        """Close the readers. Idempotent."""
        await self._poller.close()

    async def run(self, stop: threading.Event, on_round: Callable[[WatchRound], None], *, once: bool = False) -> None:
        """Check the named topics and poll at once, then every ``interval_s`` until ``stop`` is
        set, handing each round to ``on_round``; ``once``: one poll only. A wait or a poll under
        way when ``stop`` is set ends within 50 ms (the poll is
        cancelled: its round is not handed on). Closes the readers when it ends."""
        try:
            first = True
            while not stop.is_set():
                if not first:
                    await wait_or_stop(stop, self.settings.interval_s)
                    if stop.is_set():
                        break
                rounds: list[WatchRound] = []
                await until_stopped(stop, self._poll_into(rounds, PollBudget(stop.is_set), first=first))
                for done in rounds:
                    on_round(done)
                if once:
                    break
                first = False
        finally:
            await self.close()

    async def _poll_into(self, rounds: list[WatchRound], budget: PollBudget, *, first: bool) -> None:
        if first:
            await self.check_topics()
        rounds.append(await self.poll(budget, first=first))

    def cursors(self) -> pa.Table:
        """The last round's subscriptions as the replay's ``cursors`` table
        (:data:`~mledger.replay.CURSOR_SCHEMA`, the rows ``mledger replay`` writes and
        ``mledger report`` reads). O(subscriptions)."""
        batches = [self._replayers[key].cursor_rows(results) for key, results in sorted(self._observed.items())]
        return pa.Table.from_batches(batches, schema=CURSOR_SCHEMA)

    def events(self, events: Sequence[CaptureEvent]) -> None:
        """Take events as the poller hands them (the poller's sink; tests feed hand-made ones)."""
        for event in events:
            if isinstance(event, Anomaly) and event.kind == "topic_disappeared" and event.topic is not None:
                self._gone.add(event.topic)
        self._journal.write_events(events)

    def feed(self, summary: PollSummary, at_ms: int) -> WatchRound:
        """Feed the events taken so far to the replay and observe it at ``at_ms``."""
        return self._feed(summary, at_ms)

    # -- feeding the replay -----------------------------------------------------------------------
    def _feed(self, summary: PollSummary, at_ms: int) -> WatchRound:
        journal = self._journal
        journal.seal()
        rows = journal.take()
        self._polls += 1
        self._failed_now = 0
        events = self._event_table(rows)
        specs = self._subscription_specs(rows.get("subscriptions", []))
        keys: set[tuple[str, int]] = {
            (t, s.partition) for t, ss in specs.items() for s in ss if s.partition is not None
        }
        failed: set[tuple[str, int]] = set()
        for topic, partition, batches in by_partition(events):
            assert topic is not None and partition is not None  # the poller's events name both

            def feed(replayer: PartitionReplayer, batches: Iterator[pa.RecordBatch] = batches) -> None:
                for batch in batches:
                    self._count_anomalies(replayer.feed(batch))

            self._safely((topic, partition), keys, specs, failed, feed)
        for topic, partition in sorted(keys):  # those with subscription events only
            self._safely((topic, partition), keys, specs, failed, lambda _: None)
        if self._gone:  # a deleted topic-partition's model goes with it (read again from its start if created again)
            for key in [k for k in self._replayers if _local_name(*k) in self._gone]:
                del self._replayers[key]
                self._first_ledgers.pop(key, None)
            self._gone.clear()
        done = self._observe(summary, at_ms)
        self._forget_deleted_ledgers()
        return dataclasses.replace(done, anomalies=done.anomalies + self._failed_now) if self._failed_now else done

    def _forget_deleted_ledgers(self) -> None:
        """Each replayer forgets the ledgers below the first one its topic-partition's internal
        stats listed, when that moved (:meth:`PartitionReplayer.forget_ledgers_before
        <mledger.replay.PartitionReplayer.forget_ledgers_before>`): after the round was
        observed, so what the rate limits held back is persisted, as it was on the cluster
        before it trimmed. A refusal is counted (:attr:`forget_refused`) and tried again at the
        next poll."""
        for topic, partition, first in self._poller.first_ledgers():
            key = (topic, partition)
            replayer = self._replayers.get(key)
            if replayer is None or self._first_ledgers.get(key) == first:
                continue
            try:
                self.forgotten_entries += replayer.forget_ledgers_before(first)
            except LedgerNotConsumedError:
                self.forget_refused += 1
                continue
            except Exception as exc:  # noqa: BLE001 - one topic-partition's defect must not stop the watch
                self._replay_failed(key, exc)
                continue
            self._first_ledgers[key] = first

    def _safely(
        self,
        key: tuple[str, int],
        keys: set[tuple[str, int]],
        specs: dict[str, list[SubscriptionSpec]],
        failed: set[tuple[str, int]],
        work: Callable[[PartitionReplayer], None],
    ) -> None:
        """``work`` on the topic-partition's replayer (given this feed's subscription events
        first); if either raises, the replayer is dropped (:meth:`_replay_failed`) and the
        rest of this feed's events for it are skipped (in ``failed``)."""
        if key in failed:
            keys.discard(key)
            return
        try:
            work(self._replayer(*key, keys, specs))
        except Exception as exc:  # noqa: BLE001 - one topic-partition's defect must not stop the watch
            failed.add(key)
            self._replay_failed(key, exc)

    def _replay_failed(self, key: tuple[str, int], exc: Exception) -> None:
        """Drop the topic-partition's model after its replay raised ``exc``, and have the poller
        read it again from its earliest entry (a ``replay_failed`` anomaly), or, after
        :data:`MAX_REBUILDS` rebuilds, stop reading it."""
        self._replayers.pop(key, None)
        self._first_ledgers.pop(key, None)
        self._observed.pop(key, None)
        failures = self.replay_failures[key] = self.replay_failures.get(key, 0) + 1
        self._failed_now += 1
        again = failures <= MAX_REBUILDS
        log.error("watch: the replay of %s failed", _local_name(*key), exc_info=exc)
        then = "read again from its earliest entry" if again else f"failed {failures} times: no longer read"
        self._poller.forget_partition(
            *key, "replay_failed", f"{type(exc).__name__}: {exc}: its model was dropped, {then}", read_again=again
        )

    def _replayer(
        self,
        topic: str,
        partition: int,
        keys: set[tuple[str, int]],
        specs: dict[str, list[SubscriptionSpec]],
    ) -> PartitionReplayer:
        """The topic-partition's replayer, given this feed's subscription events once."""
        key = (topic, partition)
        replayer = self._replayers.get(key)
        if replayer is None:
            settings = self.settings.namespace_replay.get(namespace_of(topic), self.settings.replay)
            replayer = self._replayers[key] = PartitionReplayer(topic, partition, settings)
        if key in keys:
            keys.discard(key)
            replayer.add_subscription_events(specs.get(topic, ()))
        return replayer

    def _event_table(self, rows: dict[str, list[Row]]) -> pa.Table:
        """The rows of the event logs as the replay's events; input order is the feed and the
        row (``seq``: one ``file`` per log per feed)."""
        batches = []
        for k, log in enumerate(EVENT_LOGS):
            if rows.get(log):
                for batch in rows_table(log, rows[log]).to_batches():
                    batches.append(to_events(log, batch, self._polls * len(EVENT_LOGS) + k, 0))
        return pa.Table.from_batches(batches, EVENT_SCHEMA)

    def _subscription_specs(self, rows: Sequence[Row]) -> dict[str, list[SubscriptionSpec]]:
        """The ``subscriptions`` rows as timed events per topic (one row reader for the whole
        watch: its ``seq`` keeps the input order)."""
        if not rows:
            return {}
        reader = self._subscription_rows
        reader.add(rows_table("subscriptions", list(rows)), "watch")
        timed, reader.timed, reader.declared = reader.timed, {}, {}
        self.replay_anomalies += len(reader.bad)
        reader.bad.clear()
        return timed

    def _count_anomalies(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:  # while it is fed, the replay's output is its anomaly rows
            self.replay_anomalies += pc.sum(pc.equal(batch.column(RECORD_FIELD), "anomalies")).as_py() or 0

    # -- observing --------------------------------------------------------------------------------
    def _observe(self, summary: PollSummary, at_ms: int) -> WatchRound:
        horizon_ms = int(self.settings.horizon_s * 1000)
        rows: list[SubscriptionWatch] = []
        seen: set[tuple[str, int, str]] = set()
        self._observed = {}
        for (topic, partition), replayer in sorted(self._replayers.items()):
            ledger = replayer.settings.ledger
            persist_limit = ledger.max_unacked_ranges_to_persist + (1 if ledger.unacked_ranges_limit_off_by_one else 0)
            frame_limit = replayer.settings.factory.frame_limit
            try:
                results = replayer.observe()
            except Exception as exc:  # noqa: BLE001 - one topic-partition's defect must not stop the watch
                self._replay_failed((topic, partition), exc)
                continue
            self._observed[(topic, partition)] = results
            for result in results:
                key = (topic, partition, result.subscription)
                seen.add(key)
                history = self._histories.get(key)
                if history is None:
                    history = self._histories[key] = _History(self.settings.max_history)
                history.add(_Sample(at_ms, result.ack_hole_ranges, result.persisted_state_bytes))
                rows.append(_row(topic, partition, result, history, at_ms, persist_limit, frame_limit, horizon_ms))
        for gone in set(self._histories) - seen:  # deleted subscriptions and topics are dropped
            del self._histories[gone]
        unit = MESSAGES if self.settings.readers else ENTRIES
        return WatchRound(summary, at_ms, tuple(rows), summary.anomalies, unit)


def _row(
    topic: str,
    partition: int,
    result: SubscriptionResult,
    history: _History,
    at_ms: int,
    persist_limit: int,
    frame_limit: int,
    horizon_ms: int,
) -> SubscriptionWatch:
    samples = history.samples
    ranges_rate = _slope([(s.at_ms, s.ranges) for s in samples])
    bytes_rate = _slope([(s.at_ms, s.bytes) for s in samples])
    ranges_at = forecast_crossing(at_ms, result.ack_hole_ranges, ranges_rate, persist_limit)
    bytes_at = forecast_crossing(at_ms, result.persisted_state_bytes, bytes_rate, frame_limit)
    status, reason = _status(result, at_ms, ranges_at, bytes_at, persist_limit, frame_limit, horizon_ms)
    if history.dropped:
        reason += f" (history: the oldest samples dropped, the growth is over the last {len(samples)})"
    ledger_id, entry_id = result.mark_delete
    return SubscriptionWatch(
        topic=topic,
        partition=partition,
        subscription=result.subscription,
        subscription_type=result.subscription_type,
        at_ms=at_ms,
        mark_delete=f"{ledger_id}:{entry_id}",
        backlog=result.backlog,
        unacked_ranges=result.ack_hole_ranges,
        state_bytes=result.persisted_state_bytes,
        redelivered_after_crash=result.answers.redelivered_after_crash,
        redelivered_after_crash_limits=result.answers.redelivered_after_crash_limits,
        redelivered_after_unload=result.answers.redelivered_after_unload,
        truncated_ranges=result.truncated_ranges,
        truncated_batch_indexes=result.truncated_batch_indexes,
        ranges_per_s=ranges_rate * 1000,
        state_bytes_per_s=bytes_rate * 1000,
        persist_limit=persist_limit,
        persist_limit_at_ms=ranges_at,
        frame_limit=frame_limit,
        frame_limit_at_ms=bytes_at,
        status=status,
        reason=reason,
        history_samples=len(samples),
        history_dropped=history.dropped,
    )


def _status(
    result: SubscriptionResult,
    at_ms: int,
    ranges_at: int | None,
    bytes_at: int | None,
    persist_limit: int,
    frame_limit: int,
    horizon_ms: int,
) -> tuple[str, str]:
    """The status and its reason (:data:`STATUSES`)."""
    losing = []
    answers = result.answers
    if answers.redelivered_after_crash_limits:
        losing.append(f"a crash now would deliver {answers.redelivered_after_crash_limits} acknowledged messages "
                      "again, lost to the limits")  # fmt: skip
    if answers.redelivered_after_unload:
        losing.append(f"an unload now would deliver {answers.redelivered_after_unload} acknowledged messages again")
    if result.truncated_ranges:
        losing.append(f"the last persist left out {result.truncated_ranges} ack ranges (limit {persist_limit})")
    if result.truncated_batch_indexes:
        losing.append(f"the last persist left out {result.truncated_batch_indexes} batch-index states")
    if result.persisted_state_bytes > frame_limit:
        losing.append(f"the state is {result.persisted_state_bytes} bytes, over the {frame_limit}-byte frame limit")
    if losing:
        return LOSING_STATE, "; ".join(losing)
    risks = []
    if ranges_at is not None and ranges_at - at_ms <= horizon_ms:
        risks.append(f"the ack ranges pass the persist limit ({persist_limit}) in {_seconds(ranges_at - at_ms)}")
    if bytes_at is not None and bytes_at - at_ms <= horizon_ms:
        risks.append(f"the state passes the {frame_limit}-byte frame limit in {_seconds(bytes_at - at_ms)}")
    if risks:
        return AT_RISK, "; ".join(risks)
    return OK, "no limit passed now or within the horizon"


def forecast_crossing(at_ms: int, value: int, rate_per_ms: float, limit: int) -> int | None:
    """When a count ``value`` (at ``at_ms``), growing by ``rate_per_ms``, passes ``limit``
    (reaches ``limit + 1``): ``at_ms`` itself when it is over already, None when it does not grow.

    >>> forecast_crossing(1_000, 50, 0.01, 100)
    6100
    >>> forecast_crossing(1_000, 50, 0.0, 100) is None
    True
    """
    if value > limit:
        return at_ms
    if rate_per_ms <= 0:
        return None
    return at_ms + math.ceil((limit + 1 - value) / rate_per_ms)


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """The least-squares slope of ``(ms, value)`` points, per ms (0 for fewer than two)."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def _seconds(ms: int) -> str:
    s = max(ms, 0) / 1000
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def namespace_of(topic: str) -> str:
    """A topic's namespace, ``tenant/ns`` (a short name's is ``public/default``).

    >>> namespace_of("persistent://team/a/orders"), namespace_of("orders")
    ('team/a', 'public/default')
    """
    return "/".join(full_name(topic).split("://", 1)[1].split("/")[:2])


def _local_name(topic: str, partition: int) -> str:
    return topic if partition < 0 else f"{topic}-partition-{partition}"


def _now() -> int:
    return int(time.time() * 1000)
