"""``mledger capture`` at cluster scale (issue 35 item 1), against ``mledger standalone``.

A steady poll costs one admin call per topic-partition (its internal stats; the topic stats
only where a cursor changed); the topic lists are read at their own, slower cadence (and at the
last poll), so a topic created in between is found later and read from its earliest entry, and
one deleted is dropped and, once a listing no longer names it, found again if created again.
Memory is bounded by settings: a subscription over ``max_ranges_per_subscription`` is an anomaly
and not held until it fits again (then restated), and the events reach the sink in batches of at
most ``max_pending_events``, which is also the API a long-running watcher consumes
(:class:`~mledger.replay._poller.ClusterPoller`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pyarrow.parquet as pq
import pytest
from test_capture import standalone  # noqa: F401 - the fixture
from test_capture_hostile import (  # noqa: F401 - the fixture
    HostileAdmin,
    description,
    hostile,
    live_cursor,
    mledger_capture,
    produce_and_subscribe,
    wait_until,
)
from test_record_differential import NS

from mledger.admin import RemoteAdmin
from mledger.core import Position
from mledger.replay import Capture, CaptureSettings, run_single_process
from mledger.replay._poll_events import Acked, Anomaly, CaptureEvent, SubscriptionCreated, SubscriptionReset
from mledger.replay._poller import ClusterPoller, PollBudget, PollerSettings

pytestmark = pytest.mark.timeout(180)


def kinds(paths: list[str]) -> list[str]:
    """``topic/kind`` of each admin path asked for (``orders/internalStats``), or the listing."""
    out = []
    for path in paths:
        parts = path.split("?")[0].split("/")
        out.append("/".join(parts[6:]) if len(parts) > 6 else "listing " + "/".join(parts[3:]))
    return sorted(out)


def acked_up_to(urls: dict[str, str], topic: str, entry: int) -> None:
    """Until ``billing``'s mark-delete on ``topic`` is at ``entry`` (acks are asynchronous)."""
    wait_until(lambda: live_cursor(urls, topic)["markDeletePosition"].endswith(f":{entry}"), f"{topic} never acked")


def test_a_steady_poll_costs_one_call_per_topic_partition_and_topics_are_listed_at_their_own_cadence(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    hostile: HostileAdmin,  # noqa: F811 - the fixture
) -> None:
    httpx.put(f"{standalone['admin_url']}/admin/v2/persistent/public/default/events/partitions", json=2, timeout=30)
    produce_and_subscribe(standalone)
    acked_up_to(standalone, "orders", 1)
    settings = CaptureSettings(namespace="public/default", discovery_interval_s=3600, concurrency=2)
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(hostile.url) as admin:
            capture = Capture(tmp_path / "cap", client, admin, settings)
            hostile.seen.clear()
            capture.poll(first=True)  # the internal stats read to open a reader serve this poll too
            first = [k for k in kinds(hostile.seen) if k.endswith(("/internalStats", "/stats"))]
            assert first == [
                "events-partition-0/internalStats", "events-partition-0/stats", "events-partition-1/internalStats",
                "events-partition-1/stats", "orders/internalStats", "orders/stats",
            ]  # fmt: skip
            assert capture.list_captured() == [f"{NS}/events-partition-0", f"{NS}/events-partition-1", f"{NS}/orders"]
            hostile.seen.clear()
            capture.poll()  # nothing changed: the internal stats of each, no listing, no topic stats
            assert kinds(hostile.seen) == [
                "events-partition-0/internalStats", "events-partition-1/internalStats", "orders/internalStats"
            ]  # fmt: skip
            produce_and_subscribe(standalone, "late", acked=1)  # a topic created between two listings
            consumer = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
            consumer.acknowledge(consumer.receive(10_000))  # a cursor changed: its topic stats are read
            consumer.close()
            acked_up_to(standalone, "orders", 2)
            acked_up_to(standalone, "late", 0)
            hostile.seen.clear()
            capture.poll()
            assert kinds(hostile.seen) == [
                "events-partition-0/internalStats", "events-partition-1/internalStats", "orders/internalStats",
                "orders/stats",
            ]  # fmt: skip
            assert f"{NS}/late" not in capture.list_captured()  # found by the next listing
            hostile.seen.clear()
            capture.poll(PollBudget(final=True))  # the last poll lists the topics again
            assert f"{NS}/late" in capture.list_captured()
            assert kinds(hostile.seen).count("late/internalStats") == 1
            capture.close()
    finally:
        client.close()
    assert description(tmp_path / "cap")["complete"], description(tmp_path / "cap")
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    replayed = {r["topic"]: r for r in pq.read_table(tmp_path / "out" / "cursors").to_pylist()}
    for topic in ("orders", "late"):  # read from its earliest entry although found late
        live = live_cursor(standalone, topic)
        row = replayed[f"{NS}/{topic}"]
        assert f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}" == live["markDeletePosition"]
        assert row["backlog"] == live["numberOfEntriesInBacklog"]


def test_a_topic_deleted_and_created_again_is_dropped_then_found_again(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    """With every poll listing the topics: a deleted topic is an anomaly and is dropped (its
    reader closed, not recreating it); once a listing no longer names it, the same name
    created again is a new topic, read from its earliest entry."""
    produce_and_subscribe(standalone, "churn")
    acked_up_to(standalone, "churn", 1)
    settings = CaptureSettings(namespace="public/default", discovery_interval_s=0.001)
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(standalone["admin_url"]) as admin:
            capture = Capture(tmp_path / "cap", client, admin, settings)
            capture.poll(first=True)
            admin.topics.delete_topic(f"{NS}/churn", force=True)
            capture.poll()  # listed (or not), then 404: dropped
            capture.poll()  # a listing without it
            assert capture.list_captured() == []
            assert admin.topics.list_topics("public/default") == []  # its reader did not create it again
            produce_and_subscribe(standalone, "churn", acked=3)
            acked_up_to(standalone, "churn", 2)
            capture.poll()
            assert capture.list_captured() == [f"{NS}/churn"]
            capture.close()
    finally:
        client.close()
    desc = description(tmp_path / "cap")
    assert desc["anomaly_counts"] == {"topic_disappeared": 1}, desc
    events = [r["event"] for r in pq.read_table(tmp_path / "cap" / "subscriptions").to_pylist()]
    # each starts at the state of its first poll (a mark-delete above the first entry: a reset)
    assert events == ["created", "reset", "deleted", "created", "reset"]
    options = ["--concurrency", "2", "--discovery-interval", "1s", "--max-ranges-per-subscription", "5",
               "--max-pending-events", "7", "--reader-queue-size", "9"]  # fmt: skip
    assert mledger_capture(tmp_path / "cli", standalone, "--all", "--duration", "1s", *options) == 0
    desc = description(tmp_path / "cli")
    assert desc["complete"] and desc["all_namespaces"] and desc["concurrency"] == 2, desc
    assert desc["topics"] == [f"{NS}/churn"] and desc["discovery_interval_s"] == 1


def test_the_poller_hands_bounded_batches_and_holds_no_subscription_over_its_bound(
    standalone: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    """The watcher's API: every tenant's namespaces polled (``all_namespaces``), events in
    batches of at most ``max_pending_events``, a subscription with more ranges than
    ``max_ranges_per_subscription`` reported and not held, then restated once it fits."""
    admin_url = standalone["admin_url"]
    httpx.put(
        f"{admin_url}/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]}, timeout=30
    ).raise_for_status()
    httpx.put(f"{admin_url}/admin/v2/namespaces/acme/apps", timeout=30).raise_for_status()
    topic = "persistent://acme/apps/wide"
    client = pulsar.Client(standalone["service_url"])
    consumer = client.subscribe(topic, "billing", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(8)]
    received = {m.message_id().entry_id(): m for m in (consumer.receive(10_000) for _ in range(8))}
    for entry in (1, 3, 5):  # three ranges: over a bound of two
        consumer.acknowledge(received[ids[entry].entry_id()])
    produce_and_subscribe(standalone)  # public/default/orders
    batches: list[list[CaptureEvent]] = []
    settings = PollerSettings(all_namespaces=True, max_ranges_per_subscription=2, max_pending_events=3)

    async def polls() -> list[Any]:
        async with RemoteAdmin(admin_url).asynchronous() as admin:
            poller = ClusterPoller(admin, client, settings, batches.append)
            try:
                await wait_for_cursor(admin_url, lambda c: c["individuallyDeletedMessages"].count("(") == 3)
                await poller.poll(first=True)
                states = {(t, name): state for t, _, name, state in poller.subscription_states()}
                for entry in (0, 2, 4):  # the mark-delete moves to entry 5: no range left
                    consumer.acknowledge(received[ids[entry].entry_id()])
                md = f"{ids[5].ledger_id()}:{ids[5].entry_id()}"
                await wait_for_cursor(admin_url, lambda c: c["markDeletePosition"] == md)
                await poller.poll()
                return [poller.list_captured(), states, dict(poller.anomaly_counts)]
            finally:
                await poller.close()

    try:
        captured, states, anomalies = asyncio.run(polls())
    finally:
        client.close()
    assert captured == [topic, f"{NS}/orders"]
    assert states[(topic, "billing")].untracked and not states[(topic, "billing")].individually_deleted  # not held
    assert anomalies == {"subscription_over_bound": 1}
    assert batches and max(len(b) for b in batches) <= 3
    wide = [e for batch in batches for e in batch if getattr(e, "topic", None) == topic or isinstance(e, Anomaly)]
    created, over, reset = (
        [e for e in wide if isinstance(e, kind)] for kind in (SubscriptionCreated, Anomaly, SubscriptionReset)
    )
    assert [(e.subscription, e.sub_type) for e in created] == [("billing", "SHARED")]
    assert [e.kind for e in over] == ["subscription_over_bound"] and "3 ranges" in over[0].detail
    restated = Position(ids[5].ledger_id(), ids[5].entry_id() + 1)
    assert [(e.subscription, e.position) for e in reset] == [("billing", restated)]  # restated once it fits
    assert not [e for e in wide if isinstance(e, Acked)]  # its acks were never listed one by one


async def wait_for_cursor(admin_url: str, applied: Callable[[dict[str, Any]], bool]) -> None:
    """Until the broker applied the acks (acknowledgements are asynchronous): ``applied`` of the
    internal stats of the cursor is true."""
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(600):
            stats = (await http.get(f"{admin_url}/admin/v2/persistent/acme/apps/wide/internalStats")).json()
            if applied(stats["cursors"]["billing"]):
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"the acks were never applied: {stats['cursors']['billing']}")


def test_a_subscription_first_seen_in_a_wrong_shaped_answer_is_read_at_the_next_poll(
    tmp_path: Path,
    standalone: dict[str, str],  # noqa: F811 - the fixture
    hostile: HostileAdmin,  # noqa: F811 - the fixture
) -> None:
    """A poll that reads no topic stats compares the cursors with those of the last poll that
    read them all: one whose subscription could not be read then is read again, not skipped."""

    def without_mark_delete(stats: dict[str, Any]) -> dict[str, Any]:
        cursor = {k: v for k, v in stats["cursors"]["billing"].items() if k != "markDeletePosition"}
        return {**stats, "cursors": {**stats["cursors"], "billing": cursor}}

    produce_and_subscribe(standalone)
    acked_up_to(standalone, "orders", 1)
    client = pulsar.Client(standalone["service_url"])
    try:
        with RemoteAdmin(hostile.url) as admin:
            capture = Capture(tmp_path / "cap", client, admin, CaptureSettings(topics=("orders",)))
            hostile.internal_stats = without_mark_delete
            capture.poll(first=True)  # billing is listed, its cursor has no mark-delete
            hostile.internal_stats = None
            capture.poll()  # the same cursors, nothing changed since: billing is read all the same
            capture.close()
    finally:
        client.close()
    assert description(tmp_path / "cap")["anomaly_counts"] == {"missing_field": 1}
    events = [r["event"] for r in pq.read_table(tmp_path / "cap" / "subscriptions").to_pylist()]
    assert events == ["created", "reset"]
