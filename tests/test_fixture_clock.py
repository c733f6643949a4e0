"""The fixture's manual clock moves every broker-semantic timer and no transport timer, seen
with the real pulsar-client: a ten-hour advance keeps the client's connection and fires each
periodic check once per interval; message TTL, inactive-topic deletion, deduplication snapshots
and backlog quotas act under advance()."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pulsar
import pytest

from mledger.broker import BrokerConfig

pytestmark = pytest.mark.timeout(120)

MINUTE = 60_000
HOUR = 60 * MINUTE
ADMIN = "/admin/v2/persistent/public/default"


def test_ten_hours_keep_the_connection_and_fire_each_check_once_per_interval(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    start = pulsar_broker.clock.now_ms()  # the clock stands still until the first advance
    broker = pulsar_broker.broker
    assert broker.factory.clock is broker.clock  # cursors (the mark-delete throttle) read it too
    client = client_for(pulsar_broker)
    consumer = client.subscribe("long", "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("long")
    producer.send(b"before")
    assert consumer.receive(30_000).data() == b"before"
    opened = pulsar_broker.stats().connections_opened
    now = pulsar_broker.clock.advance(10 * HOUR)
    producer.send(b"after")  # the same connection: keep-alive runs on real time
    assert consumer.receive(30_000).data() == b"after"
    assert pulsar_broker.stats().connections_opened == opened
    fired = broker.timers.stats().fired
    config = BrokerConfig()
    every_ms = {
        "checkGC": config.broker_delete_inactive_topics_frequency_seconds * 1000,
        "checkMessageExpiry": config.message_expiry_check_interval_in_minutes * MINUTE,
        "monitorBacklogQuota": config.backlog_quota_check_interval_in_seconds * 1000,
        "checkConsumedLedgers": config.retention_check_interval_in_seconds * 1000,
        "checkCompaction": config.broker_service_compaction_monitor_interval_in_seconds * 1000,
        "updateRates": config.stats_update_frequency_in_secs * 1000,
    }
    assert {name: fired[name] for name in every_ms} == {name: (now - start) // ms for name, ms in every_ms.items()}


def test_message_ttl_expires_a_backlog_under_advance(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    ttl = f"{pulsar_broker.admin_url}/admin/v2/namespaces/public/default/messageTTL"
    assert httpx.post(ttl, json=60).status_code == 204  # as a set-up script sets it (issue 34)
    assert httpx.get(ttl).json() == 60
    client = client_for(pulsar_broker)
    client.subscribe("ttl", "sub", consumer_type=pulsar.ConsumerType.Shared).close()
    producer = client.create_producer("ttl", batching_enabled=False)
    for i in range(3):
        producer.send(b"m%d" % i)
    pulsar_broker.clock.advance(6 * MINUTE)  # checkMessageExpiry every 5 minutes
    stats = httpx.get(f"{pulsar_broker.admin_url}{ADMIN}/ttl/stats").json()["subscriptions"]["sub"]
    assert (stats["msgBacklog"], stats["totalMsgExpired"]) == (0, 3)
    consumer = client.subscribe("ttl", "sub", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)


def test_an_inactive_topic_is_deleted_under_advance(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    client = client_for(pulsar_broker)
    producer = client.create_producer("idle")
    producer.send(b"x")
    topics = f"{pulsar_broker.admin_url}{ADMIN}"
    assert "persistent://public/default/idle" in httpx.get(topics).json()
    producer.close()
    pulsar_broker.clock.advance(2 * MINUTE)  # checkGC every 60 s, 60 s of inactivity
    assert "persistent://public/default/idle" not in httpx.get(topics).json()


def test_a_dedup_snapshot_is_taken_under_advance(
    pulsar_broker_factory: Callable[..., Any], client_for: Callable[[Any], pulsar.Client]
) -> None:
    broker = pulsar_broker_factory(broker_config=BrokerConfig(deduplication_enabled=True))
    client = client_for(broker)
    producer = client.create_producer("dedup", producer_name="p", batching_enabled=False)
    for _ in range(3):
        producer.send(b"x")
    dedup = broker.broker.get_topic("dedup").deduplication
    assert dedup.stats().snapshots_taken == 0
    broker.clock.advance(2 * MINUTE)  # checkDeduplicationSnapshot every 120 s
    assert dedup.stats().snapshots_taken == 1
    cursor = httpx.get(f"{broker.admin_url}{ADMIN}/dedup/internalStats").json()["cursors"]["pulsar.dedup"]
    assert cursor["properties"] == {"p": 2}


def test_a_backlog_quota_by_time_refuses_producers_after_advance(
    pulsar_broker_factory: Callable[..., Any], client_for: Callable[[Any], pulsar.Client]
) -> None:
    config = BrokerConfig(
        backlog_quota_default_limit_second=60,
        backlog_quota_default_retention_policy="producer_exception",
        precise_time_based_backlog_quota_check=True,
    )
    broker = pulsar_broker_factory(broker_config=config)
    client = client_for(broker)
    client.subscribe("quota", "sub").close()
    client.create_producer("quota").send(b"old")
    broker.clock.advance(2 * MINUTE)  # monitorBacklogQuota disconnects the producer
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer("quota")
