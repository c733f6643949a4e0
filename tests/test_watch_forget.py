"""A long watch forgets the ledgers the cluster deleted (issue 35 item 4, "runs for days").

``PartitionReplayer.forget_ledgers_before`` is exact: every later output equals the replay of
the same events with nothing forgotten (resets below a mark-delete into a kept ledger, batch
indexes, cumulative acks, cancels, delayed deliveries), and where a position lands in the
deleted ledgers (a reset to the earliest entry, a subscription created at the earliest) it
equals a replay whose model trimmed them itself, as Pulsar does. Underneath,
``ManagedLedger.delete_ledgers_before`` deletes only what every durable cursor consumed. Against
``mledger standalone`` with ledgers that roll over and are trimmed, a watch's entry index stays
bounded poll after poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pyarrow as pa
import pytest
from test_watch import start_standalone, stop, wait_until

from mledger import EARLIEST, LedgerNotConsumedError, ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore
from mledger.admin import RemoteAdmin
from mledger.core import InlineExecutor, Position
from mledger.managed_ledger import InitialPosition
from mledger.replay import PartitionReplayer, ReplaySettings, SubscriptionSpec, Watch, WatchSettings
from mledger.replay._events import event_table
from mledger.replay._local import by_partition

T = "persistent://public/default/trimmed"
DECLARED = (SubscriptionSpec("s", "SHARED"), SubscriptionSpec("x", "EXCLUSIVE"))


def produced(
    ledger: int, entries: Iterable[int], ts: int, deliver_at: Mapping[int, int] | None = None
) -> list[dict[str, Any]]:
    """Batches of 3 messages at ``ledger:entry``; ``deliver_at``: the delayed ones."""
    return [
        {"log": "produced", "topic": T, "partition": 0, "ledger_id": ledger, "entry_id": e, "batch_size": 3,
         "publish_time_ms": ts, "deliver_at_ms": (deliver_at or {}).get(e)}
        for e in entries
    ]  # fmt: skip


def acked(
    sub: str, ledger: int, entry: int, ts: int, index: int | None = None, kind: str = "individual"
) -> dict[str, Any]:
    return {"log": "acked", "topic": T, "partition": 0, "subscription": sub, "ledger_id": ledger, "entry_id": entry,
            "batch_index": index, "ack_type": kind, "ts_ms": ts}  # fmt: skip


def cancelled(ledger: int, entry: int, ts: int) -> dict[str, Any]:
    return {"log": "cancelled", "topic": T, "partition": 0, "subscription": None, "ledger_id": ledger,
            "entry_id": entry, "batch_index": None, "ts_ms": ts}  # fmt: skip


def timed(name: str, event: str, ts: int, position: tuple[int, int] = (-1, -1), seq: int = 0) -> SubscriptionSpec:
    return SubscriptionSpec(name, "SHARED", "earliest", event, ts, 0, position[0], position[1], seq)


# Ledgers 1-3 wholly consumed by both subscriptions (x cumulatively to 3:3, the last entry of
# ledger 3), ledger 4 only in part (5 is the current ledger): the cluster then trims 1-3. Delayed messages in ledgers 2
# and 5 (2:1 is acknowledged long before it is due: it is never delivered).
BEFORE = [
    *produced(1, range(4), 1_000), *produced(2, range(4), 1_000, {1: 60_000}), *produced(3, range(4), 1_000),
    *produced(4, range(4), 1_000), *produced(5, [0], 1_000),
    *(acked("s", ledger, e, 2_000 + 1_500 * ledger) for ledger in (1, 2, 3) for e in range(4)),
    acked("s", 4, 1, 8_000), acked("s", 4, 2, 8_000, index=0),
    acked("x", 3, 3, 9_500, kind="cumulative"),
]  # fmt: skip


def feed(replayer: PartitionReplayer, rows: Sequence[dict[str, Any]]) -> list[pa.RecordBatch]:
    out = []
    for _, _, batches in by_partition(event_table(rows)):
        for batch in batches:
            out += replayer.feed(batch)
    return out


def replays(reference: ReplaySettings, forgetting: ReplaySettings) -> tuple[PartitionReplayer, PartitionReplayer]:
    """The same first events fed to both, observed, and ledgers 1-3 forgotten by the second."""
    one, other = PartitionReplayer(T, 0, reference, DECLARED), PartitionReplayer(T, 0, forgetting, DECLARED)
    assert feed(one, BEFORE) == feed(other, BEFORE)
    assert one.observe() == other.observe()
    with pytest.raises(LedgerNotConsumedError, match="before 5"):  # s has not consumed ledger 4
        other.forget_ledgers_before(5)
    assert other.forget_ledgers_before(4) == 12  # ledgers 1-3, 4 entries each
    return one, other


def same_from_now_on(one: PartitionReplayer, other: PartitionReplayer, steps: Sequence[Any]) -> list[Any]:
    """Feed each step (rows, or timed subscription events) to both; after each, the outputs
    and observed figures agree; then the final outputs. Returns the last observed figures."""
    seen: list[Any] = []
    for step in steps:
        if isinstance(step[0], SubscriptionSpec):
            one.add_subscription_events(step)
            other.add_subscription_events(step)
        else:
            assert feed(one, step) == feed(other, step)
        seen = one.observe()
        assert seen == other.observe()
    assert one.finish() == other.finish()
    return seen


def test_forgetting_changes_no_later_output() -> None:
    one, other = replays(ReplaySettings(), ReplaySettings())
    last = same_from_now_on(one, other, [
        [*produced(5, range(1, 4), 20_000, {2: 40_000}), *produced(6, range(2), 20_000),
         acked("s", 4, 0, 21_000), acked("x", 4, 2, 21_000, index=1, kind="cumulative"), acked("s", 5, 1, 22_500)],
        # a reset below s's mark-delete into the first ledger kept: its acks need the batch sizes there again
        [timed("s", "reset", 24_000, (4, 1), seq=1)],
        [acked("s", 4, 1, 25_000, index=i) for i in range(3)] + [acked("s", 4, 2, 25_000, index=2)],
        [cancelled(5, 2, 26_500), acked("x", 5, 0, 28_000, kind="cumulative"), acked("s", 6, 1, 70_000)],
    ])  # fmt: skip
    figures = {r.subscription: (r.mark_delete, r.backlog, r.ack_hole_ranges) for r in last}
    assert figures == {"s": ((4, 1), 6, 2), "x": ((5, 0), 5, 0)}  # the events did what they say


def test_a_reset_to_the_earliest_entry_lands_as_on_a_model_that_trimmed_itself() -> None:
    # the reference's model deletes consumed ledgers itself (no pulsar.dedup cursor holds them back); the
    # other's keeps them (its dedup cursor has not moved) until it is told the cluster deleted them
    one, other = replays(ReplaySettings(deduplication=False), ReplaySettings())
    last = same_from_now_on(one, other, [
        [*produced(5, [1], 20_000), acked("s", 4, 3, 21_000)],
        [timed("s", "reset", 22_000, (0, 0), seq=1), timed("late", "created", 22_000, seq=2)],
        [acked("s", 4, 2, 23_000, index=1), acked("late", 5, 0, 23_000), acked("x", 4, 0, 24_500, kind="cumulative")],
    ])  # fmt: skip
    figures = {r.subscription: (r.mark_delete, r.read_position, r.backlog) for r in last}
    # both land on the first entry kept, 4:0, the mark-delete before it: Pulsar's getNextValidPosition
    assert figures == {"s": ((4, -1), (4, 0), 6), "x": ((4, 0), (4, 1), 5), "late": ((4, -1), (4, 0), 5)}


def test_a_managed_ledger_deletes_the_ledgers_a_cluster_deleted_once_its_cursors_consumed_them() -> None:
    factory = ManagedLedgerFactory(MemoryStore(), executor=InlineExecutor())
    # retention keeps every consumed ledger: only delete_ledgers_before deletes any
    ml = factory.open("ml", ManagedLedgerConfig(max_entries_per_ledger=2, minimum_rollover_time_ms=0,
                                                retention_time_ms=-1, retention_size_in_mb=-1))  # fmt: skip
    durable = ml.open_cursor("s", initial_position=InitialPosition.EARLIEST)
    reader = ml.open_non_durable_cursor(initial_position=InitialPosition.EARLIEST)
    positions = [ml.add_entry(b"%d" % i) for i in range(7)]  # ledgers of 2 entries: 4 ledgers
    ledgers = [li.ledger_id for li in ml.ledger_infos()]
    durable.mark_delete(positions[2])  # ledger 0 consumed, not ledger 1
    with pytest.raises(LedgerNotConsumedError, match=f"before {ledgers[2]}: cursor 's' has persisted"):
        ml.delete_ledgers_before(ledgers[2])
    assert [li.ledger_id for li in ml.ledger_infos()] == ledgers  # nothing deleted
    durable.mark_delete(positions[3])
    assert ml.delete_ledgers_before(ledgers[2]) == ledgers[:2]
    assert [li.ledger_id for li in ml.ledger_infos()] == ledgers[2:]
    assert reader.mark_delete_position == positions[3]  # moved past them, as a trimming pass does
    durable.reset_cursor(EARLIEST)  # the first entry that exists: Pulsar's getNextValidPosition
    assert (durable.read_position, durable.mark_delete_position) == (positions[4], Position(ledgers[2], -1))
    assert ml.delete_ledgers_before(ledgers[2]) == []  # nothing below the first ledger kept
    with pytest.raises(LedgerNotConsumedError, match=f"at {ledgers[2]}:-1 only"):  # the reset took the cursor back
        ml.delete_ledgers_before(ledgers[-1])
    assert [li.ledger_id for li in ml.ledger_infos()] == ledgers[2:]
    factory.close()


# -- against mledger standalone: ledgers of 20 entries, trimmed once consumed ----------------------------
ROUNDS, ENTRIES, BATCH, UNACKED = 8, 40, 3, 25
CONF = """managedLedgerMaxEntriesPerLedger=20
managedLedgerMinLedgerRolloverTimeMinutes=0
managedLedgerDefaultMarkDeleteRateLimit=0
defaultRetentionTimeInMinutes=0
defaultRetentionSizeInMB=0
"""


def internal_stats(admin_url: str) -> dict[str, Any]:
    local = T.split("://", 1)[1]
    answer = httpx.get(f"{admin_url}/admin/v2/persistent/{local}/internalStats", timeout=30)
    return dict(answer.raise_for_status().json())


def first_ledger(admin_url: str) -> int:
    return int(internal_stats(admin_url)["ledgers"][0]["ledgerId"])


async def watch_rounds(urls: dict[str, str]) -> list[tuple[int, int, int]]:
    """``ROUNDS`` rounds of ``ENTRIES`` batched entries, acknowledged but the last ``UNACKED``
    (so two polls always share a ledger), each followed, once the cluster trimmed what was
    consumed, by a poll: what the watch's entry index holds after each (bytes, ledgers,
    entries forgotten so far)."""
    client = pulsar.Client(urls["service_url"], operation_timeout_seconds=30)
    held: list[tuple[int, int, int]] = []
    try:
        consumer = client.subscribe(T, "s", consumer_type=pulsar.ConsumerType.Exclusive)
        producer = client.create_producer(T, batching_enabled=True, batching_max_messages=BATCH,
                                          batching_max_publish_delay_ms=60_000)  # fmt: skip
        settings = WatchSettings(namespaces=("public/default",), replay=ReplaySettings())
        async with RemoteAdmin(urls["admin_url"]).asynchronous() as admin:
            live = Watch(admin, client, settings)
            try:
                await live.poll(first=True)  # its reader is open before anything is produced (and trimmed)
                for n in range(ROUNDS):
                    trimmed = first_ledger(urls["admin_url"])
                    for i in range(ENTRIES * BATCH):
                        producer.send_async(b"m%d" % i, None)
                        if i % BATCH == BATCH - 1:
                            producer.flush()
                    received = [consumer.receive(30_000) for _ in range(ENTRIES * BATCH)]
                    last = received[-UNACKED * BATCH - 1].message_id()  # the last message of its batch
                    consumer.acknowledge_cumulative(last)
                    md = f"{last.ledger_id()}:{last.entry_id()}"
                    wait_until(lambda m=md: internal_stats(urls["admin_url"])["cursors"]["s"]["markDeletePosition"] == m,
                               "the acknowledgement never reached the cursor")  # fmt: skip
                    if n:
                        wait_until(lambda t=trimmed: first_ledger(urls["admin_url"]) > t, "the cluster trimmed nothing")
                    done = await live.poll()
                    assert [(r.subscription, r.mark_delete) for r in done.subscriptions] == [("s", md)]
                    index = live._replayers[(T, -1)]._index  # what the replay holds per entry (private)
                    held.append((index.nbytes, index.ledgers, live.forgotten_entries))
                assert live.forget_refused == 0 and live.poller.anomaly_counts == {}
            finally:
                await live.close()
    finally:
        client.close()
    return held


@pytest.mark.timeout(300)
def test_a_watch_forgets_the_ledgers_the_cluster_trims(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    proc, urls = start_standalone("--config", str(conf))
    try:
        held = asyncio.run(watch_rounds(urls))
    finally:
        stop(proc)
    # flat: the facts of the ledgers that exist (a few), never of the ROUNDS * ENTRIES batched entries
    # produced (12 bytes each: without forgetting the index would outgrow the first round's by the 3rd)
    assert {nbytes for nbytes, _, _ in held} == {held[0][0]}
    assert max(ledgers for _, ledgers, _ in held) <= 3
    assert held[-1][2] >= (ROUNDS - 1) * ENTRIES - UNACKED
