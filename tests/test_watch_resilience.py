"""A watch survives a cluster's normal life (issue 35 item 4, "runs for days").

* A subscription created on an empty ledger whose first entries come in a later ledger (Pulsar
  discards an empty ledger when it closes it, ``ManagedLedgerImpl.ledgerClosed``, and on
  recovery): the model moves on to that ledger instead of raising (a replayer alone, and a
  watch of ``mledger standalone`` whose topic is unloaded before its first entry).
* Entries a reader never receives (server-only markers, aborted transactions' entries), which
  the broker acknowledges for every subscription itself: the replay's mark-delete follows the
  cluster's past them, as the internal stats show it.
* One topic-partition whose replay raises: the others go on, an anomaly says so, and that
  topic-partition is read again from its start into a new model.

The last two run a :class:`~mledger.replay.Watch` over a fake cluster (its admin answers and a
reader, as a broker gives them), so that the poller's own diff of the internal stats is checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pulsar
import pytest
from test_watch import start_standalone, stop, wait_until
from test_watch_forget import T as FORGET_TOPIC, acked, feed, produced, timed

from mledger.admin import RemoteAdmin
from mledger.codec import MessageId
from mledger.core import Position
from mledger.replay import PartitionReplayer, ReplaySettings, Watch, WatchRound, WatchSettings

pytestmark = pytest.mark.timeout(60)


def test_a_subscription_created_on_an_empty_ledger_follows_the_entries_of_a_later_one() -> None:
    replayer = PartitionReplayer(FORGET_TOPIC, 0, ReplaySettings())
    replayer.add_subscription_events([timed("s", "created", 500, (1, -1))])  # ledger 1: no entry ever
    assert feed(replayer, produced(10, range(3), 1_000)) == []
    assert [(r.mark_delete, r.backlog) for r in replayer.observe()] == [((1, -1), 3)]
    feed(replayer, [acked("s", 10, 0, 2_000), acked("s", 10, 1, 2_500)])
    assert [(r.mark_delete, r.backlog) for r in replayer.observe()] == [((10, 1), 1)]


EMPTY_FIRST = "persistent://public/default/empty-first"


def internal_stats(admin_url: str) -> dict[str, Any]:
    local = EMPTY_FIRST.split("://", 1)[1]
    return dict(httpx.get(f"{admin_url}/admin/v2/persistent/{local}/internalStats", timeout=30).json())


async def watch_an_unloaded_empty_topic(urls: dict[str, str]) -> list[WatchRound]:
    """A subscription on a topic without entries, watched; the topic unloaded (its empty ledger
    is deleted on recovery, a new one created), 3 messages produced, then all acknowledged."""
    client = pulsar.Client(urls["service_url"], operation_timeout_seconds=30)
    admin_url = urls["admin_url"]
    try:
        consumer = client.subscribe(EMPTY_FIRST, "s", consumer_type=pulsar.ConsumerType.Shared)
        async with RemoteAdmin(admin_url).asynchronous() as admin:
            live = Watch(admin, client, WatchSettings(topics=(EMPTY_FIRST,)))
            try:
                done = [await live.poll(first=True)]
                local = EMPTY_FIRST.split("://", 1)[1]
                httpx.put(f"{admin_url}/admin/v2/persistent/{local}/unload", timeout=30).raise_for_status()
                producer = client.create_producer(EMPTY_FIRST, batching_enabled=False)
                for i in range(3):
                    producer.send(b"m%d" % i)
                done.append(await live.poll())
                for _ in range(3):
                    consumer.acknowledge(consumer.receive(30_000))
                wait_until(lambda: internal_stats(admin_url)["cursors"]["s"]["markDeletePosition"].endswith(":2"),
                           "the acknowledgements never reached the cursor")  # fmt: skip
                done.append(await live.poll())
            finally:
                await live.close()
    finally:
        client.close()
    return done


def test_a_watch_goes_on_when_the_first_entries_come_after_an_empty_ledger() -> None:
    proc, urls = start_standalone()
    try:
        first, produced_, acknowledged = asyncio.run(watch_an_unloaded_empty_topic(urls))
        stats = internal_stats(urls["admin_url"])
    finally:
        stop(proc)
    ledger = stats["ledgers"][-1]["ledgerId"]
    assert [(r.subscription, r.backlog) for r in first.subscriptions] == [("s", 0)]
    assert [(r.subscription, r.backlog) for r in produced_.subscriptions] == [("s", 3)]
    assert [(r.mark_delete, r.backlog) for r in acknowledged.subscriptions] == [(f"{ledger}:2", 0)]
    assert stats["cursors"]["s"]["markDeletePosition"] == f"{ledger}:2"


class _Id:
    def __init__(self, position: Position) -> None:
        self.position = position

    def ledger_id(self) -> int:
        return self.position.ledger_id

    def entry_id(self) -> int:
        return self.position.entry_id

    def batch_index(self) -> int:
        return -1

    def serialize(self) -> bytes:
        return MessageId(self.position.ledger_id, self.position.entry_id).to_bytes()


class _Message:
    def __init__(self, position: Position) -> None:
        self.id = _Id(position)

    def message_id(self) -> _Id:
        return self.id

    def publish_timestamp(self) -> int:
        return 1_000 + self.id.position.entry_id

    def producer_name(self) -> str:
        return "p"

    def partition_key(self) -> str:
        return ""


class _Topic:
    """One topic as a broker shows it: its entries in ledger 3, those a reader never receives
    (``hidden``), each subscription's internal-stats cursor (mark-delete, ranges text)."""

    def __init__(self, entries: int, hidden: set[int]) -> None:
        self.entries = entries
        self.hidden = hidden
        self.cursors: dict[str, tuple[str, str]] = {}

    def internal_stats(self) -> dict[str, Any]:
        cursors = {name: {"markDeletePosition": md, "individuallyDeletedMessages": ranges}
                   for name, (md, ranges) in self.cursors.items()}  # fmt: skip
        return {"entriesAddedCounter": self.entries, "lastConfirmedEntry": f"3:{self.entries - 1}",
                "ledgers": [{"ledgerId": 3, "entries": 0, "size": 0}], "cursors": cursors}  # fmt: skip

    def stats(self) -> dict[str, Any]:
        return {"subscriptions": {name: {"type": "Shared", "isDurable": True} for name in self.cursors}}


class _Reader:
    def __init__(self, topic: _Topic) -> None:
        self.topic = topic
        self.next = 0

    def read_next(self, timeout_millis: int) -> _Message:
        while self.next < self.topic.entries and self.next in self.topic.hidden:
            self.next += 1  # the dispatcher filters it out (and acknowledges it)
        if self.next >= self.topic.entries:
            raise pulsar.Timeout("no message")
        self.next += 1
        return _Message(Position(3, self.next - 1))

    def has_message_available(self) -> bool:
        return False

    def close(self) -> None:
        pass


class FakeCluster:
    """The admin answers (:class:`~mledger.replay.AsyncAdminJson`) and the readers of ``topics``."""

    def __init__(self, topics: dict[str, _Topic]) -> None:
        self.topics = topics
        self.readers: list[str] = []

    async def get_json(self, path: str, query: Any = None, *, deadline: float | None = None) -> Any:
        local, call = path.removeprefix("/admin/v2/persistent/").rsplit("/", 1)
        topic = self.topics[f"persistent://{local}"]
        return (
            {"partitions": 0}
            if call == "partitions"
            else getattr(topic, call.replace("internalStats", "internal_stats"))()
        )

    def create_reader(self, topic: str, start: Any, **options: Any) -> _Reader:
        self.readers.append(topic)
        return _Reader(self.topics[topic])


def rounds(cluster: FakeCluster, steps: list[Any]) -> Iterator[WatchRound]:
    """A watch of ``cluster``'s topics, one poll per step (a step changes the cluster first)."""

    async def run() -> list[WatchRound]:
        live = Watch(cluster, cluster, WatchSettings(topics=tuple(cluster.topics), read_timeout_s=5))
        done = []
        for n, step in enumerate(steps):
            step(live)
            done.append(await live.poll(first=n == 0))
        await live.close()
        return done

    return iter(asyncio.run(run()))


def marks(done: WatchRound) -> dict[tuple[str, str], tuple[str, int, int]]:
    return {(r.topic, r.subscription): (r.mark_delete, r.backlog, r.unacked_ranges) for r in done.subscriptions}


A, B = "persistent://public/default/a", "persistent://public/default/b"


def test_the_mark_delete_follows_the_cluster_past_entries_no_reader_receives() -> None:
    topic = _Topic(6, hidden={2, 5})  # 3:2 and 3:5: markers (3:5 a placeholder only once 3:6 comes)
    topic.cursors = {"s": ("3:-1", "[]"), "t": ("3:-1", "[]")}
    cluster = FakeCluster({A: topic})

    def acks(_: Watch) -> None:  # the broker acknowledged the markers it filtered out itself
        topic.cursors = {"s": ("3:3", "[]"), "t": ("3:0", "[(3:1..3:3]]")}

    def more(_: Watch) -> None:
        topic.entries = 8
        topic.cursors = {"s": ("3:6", "[]"), "t": ("3:0", "[(3:1..3:3],(3:4..3:6]]")}

    first, second, third = rounds(cluster, [lambda _: None, acks, more])
    assert marks(first) == {(A, "s"): ("3:-1", 5, 0), (A, "t"): ("3:-1", 5, 0)}  # 3:5 not known yet
    assert marks(second) == {(A, "s"): ("3:3", 1, 0), (A, "t"): ("3:0", 2, 1)}
    assert marks(third) == {(A, "s"): ("3:6", 1, 0), (A, "t"): ("3:0", 3, 2)}
    assert second.anomalies == third.anomalies == 0


def two_topics() -> FakeCluster:
    """Topics A and B, 4 entries each, subscription ``s`` acknowledging none."""
    topics = {A: _Topic(4, hidden=set()), B: _Topic(4, hidden=set())}
    for topic in topics.values():
        topic.cursors = {"s": ("3:-1", "[]")}
    return FakeCluster(topics)


def test_a_failing_replay_is_rebuilt_and_the_other_topics_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import mledger.replay._watch as module

    cluster = two_topics()
    topics = cluster.topics
    original = module.PartitionReplayer.feed
    failing = [True]

    def feed_or_fail(self: PartitionReplayer, batch: Any) -> Any:
        if self.topic == A and failing and topics[A].cursors["s"][0] == "3:1":
            failing.clear()
            raise RuntimeError("a defect")
        return original(self, batch)

    monkeypatch.setattr(module.PartitionReplayer, "feed", feed_or_fail)

    def ack(_: Watch) -> None:
        for topic in topics.values():
            topic.cursors = {"s": ("3:1", "[]")}

    def more(_: Watch) -> None:
        topics[A].cursors = {"s": ("3:2", "[]")}

    first, failed, rebuilt = rounds(cluster, [lambda _: None, ack, more])
    assert marks(first) == {(A, "s"): ("3:-1", 4, 0), (B, "s"): ("3:-1", 4, 0)}
    assert marks(failed) == {(B, "s"): ("3:1", 2, 0)}  # A's model dropped, B's goes on
    assert failed.anomalies == 1
    assert marks(rebuilt) == {(A, "s"): ("3:2", 1, 0), (B, "s"): ("3:1", 2, 0)}  # A read again from its start
    assert sorted(cluster.readers) == [A, A, B]


def test_a_replay_that_keeps_failing_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    import mledger.replay._watch as module

    cluster = two_topics()
    original = module.PartitionReplayer.observe

    def observe_or_fail(self: PartitionReplayer) -> Any:
        if self.topic == A:
            raise RuntimeError("a defect")
        return original(self)

    monkeypatch.setattr(module.PartitionReplayer, "observe", observe_or_fail)
    done = list(rounds(cluster, [lambda _: None] * (module.MAX_REBUILDS + 3)))
    assert [d.anomalies for d in done] == [1] * (module.MAX_REBUILDS + 1) + [0, 0]
    assert all(marks(d) == {(B, "s"): ("3:-1", 4, 0)} for d in done)
    assert cluster.readers.count(A) == module.MAX_REBUILDS + 1  # read again after each failure but the last
