"""A watch that runs for days while the cluster trims (issue 35 item 4).

Against ``mledger standalone`` with ledgers of 20 entries, deleted once consumed: a watch whose
reader lags behind the trimming (the default receiver queue of 100 messages, 200 produced and
consumed between two polls) is moved past the deleted ledgers as Pulsar moves a reader
(``ManagedLedgerImpl.getNextValidPosition``): the poll does not wait for entries that no
longer exist, the entries of the deleted ledgers it knows of are counted one message each
(``entries_trimmed``), and every ledger of the last look trimmed is not a recreated topic; the
poller's per-ledger records follow the ledgers that exist. A topic deleted and created again
is still reported as recreated.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest
from test_watch import start_standalone, stop, wait_until

from mledger.admin import RemoteAdmin
from mledger.replay import ReplaySettings, Watch, WatchRound, WatchSettings

T = "persistent://public/default/lagging"
CONF = """managedLedgerMaxEntriesPerLedger=20
managedLedgerMinLedgerRolloverTimeMinutes=0
managedLedgerDefaultMarkDeleteRateLimit=0
defaultRetentionTimeInMinutes=0
defaultRetentionSizeInMB=0
"""
MESSAGES = 200  # ten ledgers of 20: twice the reader's queue


def internal_stats(admin_url: str) -> dict[str, Any]:
    local = T.split("://", 1)[1]
    answer = httpx.get(f"{admin_url}/admin/v2/persistent/{local}/internalStats", timeout=30)
    return dict(answer.raise_for_status().json())


def produce(client: pulsar.Client, count: int) -> None:
    producer = client.create_producer(T, batching_enabled=False)
    for i in range(count):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    producer.close()


def produce_and_consume(client: pulsar.Client, consumer: pulsar.Consumer, admin_url: str, waiting: int) -> str:
    """``MESSAGES`` messages with the ``waiting`` ones, every one acknowledged; returns the
    mark-delete once the cluster trimmed every ledger it consumed."""
    first = internal_stats(admin_url)["ledgers"][0]["ledgerId"]
    produce(client, MESSAGES - waiting)
    received = [consumer.receive(30_000) for _ in range(MESSAGES)]
    last = received[-1].message_id()
    consumer.acknowledge_cumulative(last)
    md = f"{last.ledger_id()}:{last.entry_id()}"

    def trimmed() -> bool:
        stats = internal_stats(admin_url)
        return stats["cursors"]["s"]["markDeletePosition"] == md and stats["ledgers"][0]["ledgerId"] > first

    wait_until(trimmed, "the cluster trimmed nothing")
    return md


@contextlib.asynccontextmanager
async def watching(urls: dict[str, str], readers: bool) -> AsyncIterator[tuple[pulsar.Client, Watch]]:
    """A client and a watch of ``public/default`` (the default receiver queue of 100 messages, and
    the default read timeout: a poll that waited for the entries of a deleted ledger would wait
    30 s and report entries_not_read); both closed at the end."""
    client = pulsar.Client(urls["service_url"], operation_timeout_seconds=30)
    try:
        settings = WatchSettings(namespaces=("public/default",), replay=ReplaySettings(), readers=readers)
        async with RemoteAdmin(urls["admin_url"]).asynchronous() as admin:
            live = Watch(admin, client, settings)
            try:
                yield client, live
            finally:
                await live.close()
    finally:
        client.close()


async def lagging_rounds(urls: dict[str, str], readers: bool) -> tuple[list[WatchRound], list[str], Watch]:
    rounds: list[WatchRound] = []
    marks: list[str] = []
    async with watching(urls, readers) as (client, live):
        consumer = client.subscribe(T, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        produce(client, 1)  # one entry before the first poll (the replay's model starts on a ledger holding one)
        rounds.append(await live.poll(first=True))  # the reader opens before the rest is produced
        for waiting in (1, 0):
            marks.append(produce_and_consume(client, consumer, urls["admin_url"], waiting))
            rounds.append(await live.poll())
    return rounds, marks, live


@pytest.mark.timeout(120)
@pytest.mark.parametrize("readers", [True, False], ids=["reader", "no-readers"])
def test_a_watch_whose_reader_lags_behind_a_trim_moves_past_the_deleted_ledgers(tmp_path: Path, readers: bool) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    proc, urls = start_standalone("--config", str(conf))
    try:
        rounds, marks, live = asyncio.run(lagging_rounds(urls, readers))
        last = internal_stats(urls["admin_url"])
    finally:
        stop(proc)
    # the last confirmed entry lies in a deleted ledger (the current one is empty): nothing to wait for
    lce = last["lastConfirmedEntry"]
    assert lce == marks[-1] and int(lce.split(":")[0]) < last["ledgers"][0]["ledgerId"]
    counts = dict(live.poller.anomaly_counts)
    assert "entries_not_read" not in counts and "topic_recreated" not in counts
    if readers:  # the entries the reader never read: the deleted ledgers the stats named (the last one)
        assert counts == {"entries_trimmed": 2}
        details = [a["detail"] for a in live.poller.anomalies["entries_trimmed"]]
        assert all("counted one message each" in d for d in details)
    else:
        assert counts == {}
    # the figures are the cluster's: the mark-delete where the consumer left it, nothing in backlog
    for done, md in zip(rounds[1:], marks, strict=True):
        assert [(r.subscription, r.mark_delete, r.backlog) for r in done.subscriptions] == [("s", md, 0)]
    # the poller's records per ledger follow the ledgers that exist, not those seen since the start
    (tp,) = live.poller._partitions.values()  # private: what the poller holds per ledger
    assert tp.known.runs <= 1 and set(tp.entry_counts) <= {int(lce.split(":")[0]), *tp.ledgers}


async def recreated_rounds(urls: dict[str, str]) -> Watch:
    """A topic polled, deleted and created again (with fewer entries than it had), polled again."""
    async with watching(urls, readers=False) as (client, live):
        consumer = client.subscribe(T, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        produce(client, 5)
        await live.poll(first=True)
        consumer.close()
        local = T.split("://", 1)[1]
        httpx.delete(f"{urls['admin_url']}/admin/v2/persistent/{local}", params={"force": "true"},
                     timeout=30).raise_for_status()  # fmt: skip
        client.subscribe(T, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        produce(client, 3)
        await live.poll()
    return live


@pytest.mark.timeout(120)
def test_a_topic_deleted_and_created_again_is_still_reported_as_recreated() -> None:
    proc, urls = start_standalone()
    try:
        live = asyncio.run(recreated_rounds(urls))
    finally:
        stop(proc)
    # its ledger ids went up, as a trim's do; its entriesAddedCounter started again
    assert live.poller.anomaly_counts == {"topic_recreated": 1}
    (anomaly,) = live.poller.anomalies["topic_recreated"]
    assert "entries added 5, now 3" in anomaly["detail"]
