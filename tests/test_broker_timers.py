"""The broker's timers on its clock (mledger.broker._monitors): each fires under a manual clock,
the right number of times, in time order; message TTL, inactive-topic deletion and backlog
quotas by time behave as Pulsar's checkMessageExpiry, checkGC and monitorBacklogQuota."""

from __future__ import annotations

from pathlib import Path

import pytest

from mledger import (
    ConfigError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MemoryStore,
    NotFoundError,
    PreconditionFailedError,
)
from mledger._standalone_config import effective_settings, read_pulsar_conf
from mledger.broker import (
    BacklogQuota,
    BacklogQuotaExceededError,
    BacklogRetentionPolicy,
    Broker,
    BrokerConfig,
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    InitialPosition,
    ManualClock,
    NamespaceNotFoundError,
    RateWindow,
    SubscriptionType,
)
from mledger.core._errors import ServerError

T = "persistent://public/default/t"
MINUTE = 60_000
HOUR = 60 * MINUTE


def make_broker(clock: ManualClock, ledger: ManagedLedgerConfig | None = None, **settings: object) -> Broker:
    config = BrokerConfig(managed_ledger_config=ledger, **settings)  # type: ignore[arg-type]
    return Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), config, clock=clock)


def test_a_large_advance_fires_every_periodic_check_once_per_interval() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock, deduplication_enabled=True)
    broker.create_producer(T).send(b"x")
    broker.timers.advance(3 * HOUR)
    fired = broker.timers.stats().fired
    assert fired == {
        "checkConsumedLedgers": 90,  # every 120 s
        "checkCompaction": 180,
        "checkDeduplicationSnapshot": 90,
        "checkMessageDeduplicationInfo": 1,  # every 360 min / 3
        "checkMessageExpiry": 36,  # every 5 min
        "checkGC": 180,
        "monitorBacklogQuota": 180,
        "updateRates": 180,
        "flushCursors": 180,  # every 60 s (the factory's cursor_position_flush_seconds)
    }
    broker.close()
    assert broker.timers.next_due_ms() is None  # a closed broker disarms its timers


def test_delayed_delivery_is_dispatched_at_its_own_time_within_an_advance() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    consumer = sub.add_consumer("c")
    broker.create_producer(T).send(b"later", deliver_at_ms=90_000)
    assert consumer.receive() == []
    seen: list[int] = []
    original = sub.dispatch

    def dispatch() -> int:
        seen.append(clock.now_ms())
        return original()

    sub.dispatch = dispatch  # type: ignore[method-assign]
    broker.timers.advance(10 * MINUTE)
    assert seen[0] == 90_000
    assert [m.data for m in consumer.receive()] == [b"later"]
    assert broker.timers.stats().fired["delayedDelivery"] == 1


# -- message TTL (checkMessageExpiry) ---------------------------------------------------------------
def test_message_ttl_expires_the_backlog_of_a_subscription_without_consumers() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    broker.set_namespace_message_ttl("public/default", 120)
    sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    old = [producer.send(b"old%d" % i) for i in range(3)]
    clock.advance(200_000)
    young = producer.send(b"young")
    broker.timers.advance(100_000)  # the check at 300 s: the first three are 300 s old, the last 100 s
    assert sub.mark_delete_position == old[-1].position and sub.backlog() == 1
    stats = sub.stats()
    assert (stats.total_msg_expired, stats.last_expire_ms) == (3, 300_000)
    broker.timers.advance(5 * MINUTE)
    assert sub.mark_delete_position == young.position and sub.stats().total_msg_expired == 4


def test_a_topic_ttl_overrides_the_namespace_and_a_connected_consumer_waits_for_one_and_a_half() -> None:
    # Pulsar: a connected subscription with a small backlog expires only once its oldest message
    # is 1.5 TTLs old (PersistentSubscription.expireMessages).
    clock = ManualClock(0)
    broker = make_broker(clock, ttl_duration_default_in_seconds=3600)
    broker.create_topic(T)
    broker.set_topic_message_ttl(T, 240)
    assert broker.time_policies.message_ttl_seconds(broker.get_topic(T).topic_name) == 240  # type: ignore[union-attr]
    sub = broker.subscribe(T, "s", SubscriptionType.SHARED, InitialPosition.EARLIEST)
    sub.add_consumer("c", permits=0)
    broker.create_producer(T).send(b"x")
    broker.timers.advance(5 * MINUTE)  # 300 s old: past the TTL, not 1.5 times it
    assert sub.backlog() == 1
    broker.timers.advance(5 * MINUTE)  # 600 s > 360 s
    assert sub.backlog() == 0


def test_ttl_validation_and_404s() -> None:
    broker = make_broker(ManualClock(0))
    with pytest.raises(PreconditionFailedError, match="Invalid value for message TTL"):
        broker.set_namespace_message_ttl("public/default", -1)
    with pytest.raises(NamespaceNotFoundError, match="Namespace does not exist"):
        broker.set_namespace_message_ttl("public/nowhere", 10)
    with pytest.raises(NotFoundError, match="Topic not found"):
        broker.set_topic_message_ttl("persistent://public/default/missing", 10)


# -- inactive topics (checkGC) ------------------------------------------------------------------------
def test_an_inactive_topic_without_subscriptions_is_deleted_after_its_inactive_time() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    producer = broker.create_producer(T)
    producer.send(b"x")
    broker.timers.advance(2 * MINUTE)
    assert broker.topic_exists(T)  # a producer is connected: active
    producer.close()
    broker.timers.advance(MINUTE)  # the check at 180 s: inactive since it was found active at 120 s
    assert not broker.topic_exists(T)


def test_subscriptions_keep_a_topic_unless_the_mode_is_caught_up() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    broker.create_producer(T).close()
    broker.timers.advance(5 * MINUTE)
    assert broker.topic_exists(T)  # delete_when_no_subscriptions: a subscription keeps it
    broker.set_namespace_inactive_topic_policies(
        "public/default", InactiveTopicPolicies(InactiveTopicDeleteMode.DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP, 30)
    )
    broker.timers.advance(MINUTE)
    assert not broker.topic_exists(T) and sub.is_closed  # caught up: it goes with its subscription


def test_retention_and_the_policy_switch_keep_an_inactive_topic() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock, ManagedLedgerConfig(retention_time_ms=10 * MINUTE, retention_size_in_mb=-1))
    broker.create_topic(T)
    broker.timers.advance(5 * MINUTE)
    assert broker.topic_exists(T)  # retained for 10 minutes (Pulsar's shouldTopicBeRetained)
    broker.timers.advance(6 * MINUTE)
    assert not broker.topic_exists(T)
    broker.create_topic(T)
    broker.set_topic_inactive_topic_policies(T, InactiveTopicPolicies(delete_while_inactive=False))
    broker.timers.advance(HOUR)
    assert broker.topic_exists(T)


def test_an_inactive_partition_goes_alone_and_comes_back_empty() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    broker.create_topic(T, partitions=2)
    broker.create_producer(f"{T}-partition-0").send(b"x")  # partition 0 stays active
    broker.timers.advance(2 * MINUTE)
    assert not broker.factory.exists("public/default/persistent/t-partition-1")
    assert broker.factory.exists("public/default/persistent/t-partition-0")
    assert broker.partitioned_topic_metadata(T) == 2  # the partitioned topic stays
    assert broker.factory.exists("public/default/persistent/t-partition-1")  # used again: created empty


# -- backlog quota by time (monitorBacklogQuota) ---------------------------------------------------
def quota_broker(clock: ManualClock, policy: BacklogRetentionPolicy, precise: bool = True) -> Broker:
    broker = make_broker(clock, precise_time_based_backlog_quota_check=precise)
    broker.set_namespace_backlog_quota("public/default", BacklogQuota(limit_time=100, policy=policy))
    return broker


def test_producer_request_hold_refuses_new_producers_while_the_backlog_is_too_old() -> None:
    clock = ManualClock(0)
    broker = quota_broker(clock, BacklogRetentionPolicy.PRODUCER_REQUEST_HOLD)
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    broker.create_producer(T, "first").send(b"x")
    broker.timers.advance(2 * MINUTE)
    with pytest.raises(BacklogQuotaExceededError, match="backlog quota exceeded") as refused:
        broker.create_producer(T, "second")
    assert refused.value.server_error is ServerError.ProducerBlockedQuotaExceededError
    sub.clear_backlog()
    broker.create_producer(T, "second")


def test_consumer_backlog_eviction_drops_the_old_backlog_down_to_ninety_percent_of_the_limit() -> None:
    clock = ManualClock(0)
    broker = quota_broker(clock, BacklogRetentionPolicy.CONSUMER_BACKLOG_EVICTION)
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    producer.send(b"old")
    clock.advance(50_000)
    kept = producer.send(b"young")  # 10 s old at the check at 60 s, 70 s at the next
    broker.timers.advance(10_000)
    assert sub.backlog() == 2  # the oldest is 60 s old: under the 100 s limit
    broker.timers.advance(MINUTE)  # at 120 s: 120 s old > 100 s: drop what is older than 90 s
    assert sub.backlog() == 1 and sub.mark_delete_position < kept.position


def test_the_imprecise_check_reads_ledger_close_times_and_evicts_whole_ledgers() -> None:
    clock = ManualClock(HOUR)  # a close time of 0 would read as "not closed", as in Pulsar
    broker = make_broker(clock, ManagedLedgerConfig(max_entries_per_ledger=2))
    broker.set_namespace_backlog_quota(
        "public/default", BacklogQuota(limit_time=100, policy=BacklogRetentionPolicy.CONSUMER_BACKLOG_EVICTION)
    )
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    ids = [producer.send(b"m%d" % i) for i in range(3)]  # a closed ledger of two, the third open
    broker.timers.advance(3 * MINUTE)
    assert sub.mark_delete_position == ids[1].position  # the closed ledger skipped whole
    assert sub.backlog() == 1  # the open ledger never counts


def test_producer_exception_refuses_with_its_own_error() -> None:
    clock = ManualClock(0)
    broker = quota_broker(clock, BacklogRetentionPolicy.PRODUCER_EXCEPTION)
    broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    broker.create_producer(T).send(b"x")
    broker.timers.advance(2 * MINUTE)
    with pytest.raises(BacklogQuotaExceededError) as refused:
        broker.create_producer(T)
    assert refused.value.server_error is ServerError.ProducerBlockedQuotaExceededException


# -- the rest: rollover by age, the stats interval ------------------------------------------------
def test_the_retention_check_rolls_an_idle_ledger_past_its_maximum_age_and_trims_it() -> None:
    clock = ManualClock(0)
    ledger = ManagedLedgerConfig(maximum_rollover_time_ms=10 * MINUTE, retention_time_ms=0, retention_size_in_mb=0)
    broker = make_broker(clock, ledger)
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(T)
    first = producer.send(b"x")
    sub.clear_backlog()
    ml = broker.get_topic(T).managed_ledger  # type: ignore[union-attr]
    broker.timers.advance(9 * MINUTE)  # the checks every 120 s up to 480 s: younger than 10 minutes
    assert ml.stats().current_ledger_id == first.ledger_id
    broker.timers.advance(MINUTE)  # the check at 600 s: rolled over, then a trimming pass queued
    assert ml.stats().current_ledger_id != first.ledger_id
    ml.trim_consumed_ledgers_in_background().result(10)  # the queued pass (or one after it)
    assert first.ledger_id not in [info.ledger_id for info in ml.ledger_infos()]


def test_rates_close_at_each_stats_interval() -> None:
    clock = ManualClock(0)
    broker = make_broker(clock)
    producer = broker.create_producer(T)
    for _ in range(120):
        producer.send(b"x")
    broker.timers.advance(MINUTE)  # updateRates at 60 s: 120 messages over 60 s
    clock.advance(30_000)  # between two ticks: the last interval's rate stays
    assert broker.get_topic(T).stats().msg_rate_in == pytest.approx(2.0)  # type: ignore[union-attr]
    broker.timers.advance(30_000)  # the next tick: nothing published
    assert broker.get_topic(T).stats().msg_rate_in == 0.0  # type: ignore[union-attr]


def test_the_timers_keys_of_a_pulsar_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "messageExpiryCheckIntervalInMinutes=1\nttlDurationDefaultInSeconds=30\n"
        "brokerDeleteInactiveTopicsEnabled=false\nbrokerDeleteInactiveTopicsMode=delete_when_subscriptions_caught_up\n"
        "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=600\nbacklogQuotaDefaultLimitSecond=3600\n"
        "backlogQuotaDefaultRetentionPolicy=consumer_backlog_eviction\npreciseTimeBasedBacklogQuotaCheck=true\n"
        "backlogQuotaDefaultLimitBytes=1048576\n"
    )
    broker = effective_settings(read_pulsar_conf(conf)).broker
    assert (broker.message_expiry_check_interval_in_minutes, broker.ttl_duration_default_in_seconds) == (1, 30)
    assert not broker.broker_delete_inactive_topics_enabled
    assert broker.broker_delete_inactive_topics_mode == "delete_when_subscriptions_caught_up"
    assert broker.broker_delete_inactive_topics_max_inactive_duration_seconds == 600
    assert broker.backlog_quota_default_limit_second == 3600 and broker.precise_time_based_backlog_quota_check
    assert broker.backlog_quota_default_limit_bytes == 1 << 20
    conf.write_text("backlogQuotaDefaultRetentionPolicy=drop_everything\n")
    with pytest.raises(ConfigError, match="backlog_quota_default_retention_policy must be one of"):
        effective_settings(read_pulsar_conf(conf))


def test_a_stats_tick_just_after_a_read_closed_the_interval_keeps_its_rate() -> None:
    window = RateWindow(0)
    assert window.rates(60_000, 60_000, 120, 0) == (2.0, 0.0)  # a read closes [0, 60 s]
    window.close(60_005, 60_000, 121, 0)  # the timer, 5 ms late: not a 5 ms interval
    assert window.rates(60_010, 60_000, 121, 0) == (2.0, 0.0)
    window.close(120_000, 60_000, 240, 0)
    assert window.rates(120_000, 60_000, 240, 0) == pytest.approx((2.0, 0.0))
