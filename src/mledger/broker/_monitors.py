"""The broker's periodic checks (Pulsar's ``BrokerService`` monitors) on its timer queue.

Every timer that decides what the broker does with messages runs on the broker's
:class:`~mledger.core.TimerQueue` (``Broker.timers``), on the broker's clock: a test's
:class:`~mledger.core.ManualClock` moves them all (``TimerQueue.advance`` fires each at its own
due time), the real-time server wakes up for them on the wall clock. Each periodic check first
fires one interval after the broker starts, then every interval (``scheduleAtFixedRate``):

==================================  ==================================================  ============================================
timer (Pulsar's task)               every                                               what it does on each loaded topic
==================================  ==================================================  ============================================
``checkConsumedLedgers``            ``retention_check_interval_in_seconds``             queue a trimming pass (retention); roll the
                                                                                        current ledger over if it reached its maximum
                                                                                        age (the managed ledger's own rollover timer)
``checkCompaction``                 ``broker_service_compaction_monitor_interval_in_…`` compact topics over their compaction threshold
``checkDeduplicationSnapshot``      ``deduplication_snapshot_frequency_in_seconds``     the timed deduplication snapshot (0: off)
``checkMessageDeduplicationInfo``   ``deduplication_producer_inactivity_timeout_…`` / 3 purge producers gone past the timeout
``checkMessageExpiry``              ``message_expiry_check_interval_in_minutes``        message TTL: expire what is older than it
``checkGC``                         ``broker_delete_inactive_topics_frequency_seconds`` delete inactive topics (when enabled)
``monitorBacklogQuota``             ``backlog_quota_check_interval_in_seconds``         backlog quotas by size and time (when enabled)
``updateRates``                     ``stats_update_frequency_in_secs``                  close the stats interval of every rate
``flushCursors``                    the factory's ``cursor_position_flush_seconds``     persist what the mark-delete rate limit
                                                                                        held back, on every cursor
==================================  ==================================================  ============================================

One-shot timers join them: each subscription's ``delayedDelivery`` timer, armed for when its
earliest delayed message becomes due (:mod:`mledger.broker._subscription`).

The managed ledger's cursor flush is one of them: ``flushCursors`` (:data:`CURSOR_FLUSH`, Pulsar's
``ManagedLedgerFactoryImpl.flushCursors``), every ``cursor_position_flush_seconds`` of the
factory's settings (``managedLedgerCursorPositionFlushSeconds``, 60 s), persists on every cursor
of every loaded topic what the mark-delete rate limit held back (``ManagedCursor.flush``; a
no-op for a cursor that persists every change, mledger's default), so a manual clock moves it
with the others. The rate limit itself reads the managed ledger factory's clock (the broker's,
when both are built by :func:`~mledger.broker.open_broker`).

Transport timers never come here: keep-alive pings and their timeout, TLS handshake and idle
connection timeouts, login rate limits run on real time in :mod:`mledger.protocol`, so moving a
test's clock by hours closes no connection.

A check that raises for one topic is logged and the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..core import MLedgerError
from ..managed_ledger import ManagedLedgerFactory
from ._backlog_quota import (
    BacklogQuotaType,
    BacklogRetentionPolicy,
    eviction_target_bytes,
    eviction_target_seconds,
    exceeds_size_limit,
    exceeds_time_limit,
)
from ._hooks import BrokerSettings
from ._inactive_topics import InactiveTopicDeleteMode
from ._names import TopicName
from ._time_policies import TimePolicies
from ._topic import Topic

__all__ = [
    "CHECK_COMPACTION",
    "CHECK_CONSUMED_LEDGERS",
    "CHECK_DEDUPLICATION_SNAPSHOT",
    "CHECK_GC",
    "CHECK_MESSAGE_DEDUPLICATION_INFO",
    "CHECK_MESSAGE_EXPIRY",
    "CURSOR_FLUSH",
    "MONITOR_BACKLOG_QUOTA",
    "UPDATE_RATES",
    "BrokerMonitors",
]

log = logging.getLogger(__name__)

CHECK_CONSUMED_LEDGERS = "checkConsumedLedgers"
CHECK_COMPACTION = "checkCompaction"
CHECK_DEDUPLICATION_SNAPSHOT = "checkDeduplicationSnapshot"
CHECK_MESSAGE_DEDUPLICATION_INFO = "checkMessageDeduplicationInfo"
CHECK_MESSAGE_EXPIRY = "checkMessageExpiry"
CHECK_GC = "checkGC"
MONITOR_BACKLOG_QUOTA = "monitorBacklogQuota"
UPDATE_RATES = "updateRates"
CURSOR_FLUSH = "flushCursors"
"""The name the managed ledger's cursor flush registers under (see the module docstring)."""

_SECOND = 1000
_MINUTE = 60_000


class MonitoredBroker(BrokerSettings, Protocol):
    """What the checks need from the broker: its settings, clock and timers, and these."""

    @property
    def time_policies(self) -> TimePolicies: ...

    @property
    def factory(self) -> ManagedLedgerFactory:
        """The managed-ledger factory of the topics (its settings: the cursor flush period)."""
        ...

    def loaded_topics(self) -> list[Topic]:
        """The topics (partitions) loaded now."""
        ...

    def compaction_threshold_in_force(self, name: TopicName) -> int:
        """The compaction threshold that applies to ``name`` (bytes; 0: none)."""
        ...

    def delete_inactive_topic(self, topic: Topic, mode: InactiveTopicDeleteMode) -> bool:
        """Delete ``topic`` as Pulsar's ``checkGC`` does, unless it became busy; whether it went."""
        ...


class BrokerMonitors:
    """Registers the periodic checks of the module docstring on ``broker.timers``."""

    def __init__(self, broker: MonitoredBroker) -> None:
        self._broker = broker
        config = broker.config
        every = broker.timers.every
        every(CHECK_CONSUMED_LEDGERS, config.retention_check_interval_in_seconds * _SECOND, self.check_consumed_ledgers)
        every(
            CHECK_COMPACTION,
            config.broker_service_compaction_monitor_interval_in_seconds * _SECOND,
            self.check_compaction,
        )
        if config.deduplication_snapshot_frequency_in_seconds > 0:
            every(
                CHECK_DEDUPLICATION_SNAPSHOT,
                config.deduplication_snapshot_frequency_in_seconds * _SECOND,
                self._each_topic(lambda t: t.deduplication.take_snapshot()),
            )
        every(
            CHECK_MESSAGE_DEDUPLICATION_INFO,
            max(config.deduplication_producer_inactivity_timeout_minutes * _MINUTE // 3, 1),
            self._each_topic(lambda t: t.deduplication.purge_inactive_producers()),
        )
        every(
            CHECK_MESSAGE_EXPIRY, config.message_expiry_check_interval_in_minutes * _MINUTE, self.check_message_expiry
        )
        if config.broker_delete_inactive_topics_enabled:
            every(CHECK_GC, config.broker_delete_inactive_topics_frequency_seconds * _SECOND, self.check_gc)
        if config.backlog_quota_check_enabled:
            every(
                MONITOR_BACKLOG_QUOTA,
                config.backlog_quota_check_interval_in_seconds * _SECOND,
                self.monitor_backlog_quota,
            )
        every(UPDATE_RATES, config.stats_update_frequency_in_secs * _SECOND, self.update_rates)
        every(CURSOR_FLUSH, broker.factory.cursor_flush_interval_ms, self.flush_cursors)

    def _each_topic(self, check: Callable[[Topic], object]) -> Callable[[], None]:
        def run() -> None:
            for topic in self._broker.loaded_topics():
                if topic.is_closed:
                    continue
                try:
                    check(topic)
                except MLedgerError as exc:  # one topic's failure must not stop the others' checks
                    log.warning("%s: periodic check failed: %s", topic.name, exc)

        return run

    # -- the checks ----------------------------------------------------------------------------
    def check_consumed_ledgers(self) -> None:
        """Pulsar's ``checkConsumedLedgers``: a trimming pass in the background on every topic,
        after rolling over a current ledger past its maximum age (the managed ledger's
        ``rollCurrentLedgerIfFull`` timer, at this check's granularity)."""

        def check(topic: Topic) -> None:
            ml = topic.managed_ledger
            ml.roll_over_if_due()
            ml.trim_consumed_ledgers_in_background()

        self._each_topic(check)()

    def flush_cursors(self) -> None:
        """Pulsar's ``flushCursors``: every cursor persists what the mark-delete rate limit held
        back (``ManagedLedger.flush_cursors``), topic by topic."""
        self._each_topic(lambda t: t.managed_ledger.flush_cursors())()

    def check_compaction(self) -> None:
        """Pulsar's ``checkCompaction``: compact the topics whose uncompacted bytes exceed their
        threshold."""
        threshold = self._broker.compaction_threshold_in_force
        self._each_topic(lambda t: t.check_compaction(threshold(t.topic_name)))()

    def check_message_expiry(self) -> None:
        """Pulsar's ``checkMessageExpiry``: each subscription of a topic with a message TTL
        expires what is older than it (:meth:`Subscription.expire_messages`)."""
        policies = self._broker.time_policies

        def check(topic: Topic) -> None:
            ttl = policies.message_ttl_seconds(topic.topic_name)
            if ttl > 0:
                for sub in topic.subscriptions.values():
                    if sub.durable:
                        sub.expire_messages(ttl)

        self._each_topic(check)()

    def check_gc(self) -> None:
        """Pulsar's ``checkGC`` on every loaded topic (:mod:`mledger.broker._inactive_topics`)."""
        broker = self._broker
        policies = broker.time_policies

        def check(topic: Topic) -> None:
            name = topic.topic_name
            if name.local_name.startswith("__"):
                return  # a system topic
            policy = policies.inactive_topic_policies(name)
            if not policy.delete_while_inactive:
                return
            now = broker.clock.now_ms()
            mode = policy.inactive_topic_delete_mode
            if _is_active(topic, mode):
                topic.last_active_ms = now
                return
            inactive_ms = now - topic.last_active_ms
            if inactive_ms < policy.max_inactive_duration_seconds * _SECOND:
                return
            retention_ms = topic.managed_ledger.config.retention_time_ms
            if retention_ms < 0 or inactive_ms < retention_ms:
                return  # Pulsar's shouldTopicBeRetained
            if broker.delete_inactive_topic(topic, mode):
                log.info("%s: deleted after %d s of inactivity (%s)", name, inactive_ms // _SECOND, mode.value)

        self._each_topic(check)()

    def monitor_backlog_quota(self) -> None:
        """Pulsar's ``monitorBacklogQuota`` (:mod:`mledger.broker._backlog_quota`): a topic over
        its size quota is handled for that quota, else one over its time quota for that one
        (``BacklogQuotaManager.handleExceededBacklogQuota``)."""
        broker = self._broker
        policies = broker.time_policies
        precise = broker.config.precise_time_based_backlog_quota_check

        def check(topic: Topic) -> None:
            name = topic.topic_name
            size_quota = policies.backlog_quota(name, BacklogQuotaType.DESTINATION_STORAGE)
            if exceeds_size_limit(topic.managed_ledger.estimated_backlog_size(), size_quota.limit_size):
                if size_quota.policy is BacklogRetentionPolicy.CONSUMER_BACKLOG_EVICTION:
                    drop_backlog_for_size_limit(topic, eviction_target_bytes(size_quota))
                elif size_quota.policy is BacklogRetentionPolicy.PRODUCER_EXCEPTION:
                    topic.disconnect_producers("the backlog quota by size is exceeded")
                return
            quota = policies.backlog_quota(name, BacklogQuotaType.MESSAGE_AGE)
            if not time_backlog_exceeded(topic, quota.limit_time_ms, precise, broker.clock.now_ms()):
                return
            if quota.policy is BacklogRetentionPolicy.CONSUMER_BACKLOG_EVICTION:
                seconds = eviction_target_seconds(quota) if precise else quota.limit_time
                for sub in topic.subscriptions.values():
                    if sub.durable:
                        sub.drop_backlog_older_than(seconds, precise)
            elif quota.policy is BacklogRetentionPolicy.PRODUCER_EXCEPTION:
                topic.disconnect_producers("the backlog quota by time is exceeded")

        self._each_topic(check)()

    def update_rates(self) -> None:
        """Pulsar's ``updateRates``: close the stats interval of every rate of every topic."""
        now = self._broker.clock.now_ms()
        self._each_topic(lambda t: t.update_rates(now))()


def _is_active(topic: Topic, mode: InactiveTopicDeleteMode) -> bool:
    """Pulsar's ``PersistentTopic.isActive``: producers or consumers connected, or by the mode
    subscriptions (``delete_when_no_subscriptions``) or a backlog (``..._caught_up``)."""
    if topic.has_connections():
        return True
    subs = topic.subscriptions.values()
    if mode is InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS:
        return bool(subs)
    return any(sub.backlog() > 0 for sub in subs)


def time_backlog_exceeded(topic: Topic, limit_ms: int, precise: bool, now_ms: int) -> bool:
    """Pulsar's ``checkTimeBacklogExceeded`` for ``topic`` (module docstring of
    :mod:`mledger.broker._backlog_quota`): the oldest unacknowledged entry of its slowest
    durable subscription, by publish time (``precise``) or by its ledger's close time.
    Reads at most one entry."""
    if limit_ms <= 0:
        return False
    ml = topic.managed_ledger
    durable = [sub.mark_delete_position for sub in topic.subscriptions.values() if sub.durable]
    if not durable:
        return False
    oldest = ml.next_valid_position(min(durable))
    if oldest > ml.last_confirmed_entry:
        return False  # no backlog
    if precise:
        publish = ml.read_entry(oldest).metadata.publish_time_ms
        return exceeds_time_limit(now_ms, limit_ms, publish, None, precise=True)
    infos = ml.ledger_infos()
    closed = {info.ledger_id: info.timestamp for info in infos[:-1]}  # the current ledger is open
    return exceeds_time_limit(now_ms, limit_ms, None, closed.get(oldest.ledger_id), precise=False)


def drop_backlog_for_size_limit(topic: Topic, target_bytes: float) -> None:
    """Pulsar's ``BacklogQuotaManager.dropBacklogForSizeLimit``: while the estimated backlog is
    over ``target_bytes``, the slowest durable subscription skips the share of its backlog the
    excess is of the backlog; stops when that is no entry or the slowest subscription did not
    move. Blocks on storage."""
    ml = topic.managed_ledger
    backlog = ml.estimated_backlog_size()
    previous = None
    while backlog > target_bytes:
        durable = [sub for sub in topic.subscriptions.values() if sub.durable]
        if not durable:
            return
        slowest = min(durable, key=lambda sub: sub.mark_delete_position)
        if slowest is previous:
            log.info("%s: cursors not progressing; backlog %d bytes, target %d", topic.name, backlog, target_bytes)
            return
        skip = int((backlog - target_bytes) / backlog * slowest.backlog())
        if skip == 0:
            return
        slowest.skip(skip)
        log.info("%s/%s: skipped %d entries over the backlog quota by size", topic.name, slowest.name, skip)
        backlog, previous = ml.estimated_backlog_size(), slowest
