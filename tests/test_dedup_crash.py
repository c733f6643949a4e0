"""Crash tests for deduplication: a client publishing with retries of the same sequence ids
around crashes ends with every message stored exactly once and every acknowledged message
stored where its ack said.

The client follows Pulsar's contract: it resends, with the same sequence ids and the same
batching, everything after the last message it saw acknowledged, from a little earlier (the
overlap: messages that may or may not have been stored); a duplicate answer ``(-1, -1)`` means
"already stored". Two ways to crash: every write of an in-process scenario failed in turn (the
"process" dies at it, before or after the write), and real child processes over a
``SqliteStore`` killed with SIGKILL at random points, recovery included.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from mledger import ManagedLedger, ManagedLedgerConfig, ManagedLedgerFactory, MemoryStore, Position, SqliteStore
from mledger.broker import (
    DEDUPLICATION_CURSOR_NAME,
    Broker,
    BrokerConfig,
    InitialPosition,
    ManualClock,
    MessageDeduplication,
    Producer,
    Topic,
)
from mledger.storage import FaultInjectingStore, InjectedFault, Store

T = "persistent://public/default/crash"
ML_NAME = "public/default/persistent/crash"
NAMES = ("a", "b")


def config() -> BrokerConfig:
    return BrokerConfig(
        deduplication_enabled=True,
        deduplication_entries_interval=3,
        managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=7, metadata_max_entries_per_ledger=4),
    )


def batch_size(seq: int, end: int) -> int:
    """The client's batching, a function of the sequence id so that every resend batches
    the same way: a batch of 3 starts at every id = 1 mod 5."""
    return min(3, end - seq) if seq % 5 == 1 else 1


Ack = tuple[str, int, int, int]  # producer, sequence id, ledger id, entry id ((-1, -1): duplicate)


def publish(producers: dict[str, Producer], starts: dict[str, int], end: int, on_ack: Callable[[Ack], None]) -> None:
    """Send each producer's ids from its start to ``end``, interleaved; every 4th id is sent
    twice (a retry of an acknowledged message, which must come back as a duplicate)."""
    seq = dict(starts)
    while any(seq[n] < end for n in NAMES):
        for n in NAMES:
            s = seq[n]
            if s >= end:
                continue
            size = batch_size(s, end)
            if size == 1:
                mid = producers[n].send(b"%s-%d" % (n.encode(), s), sequence_id=s)
                on_ack((n, s, mid.ledger_id, mid.entry_id))
            else:
                ids = producers[n].send_batch([b"%s-%d" % (n.encode(), s + i) for i in range(size)], sequence_id=s)
                for i in range(size):
                    first = ids[0]
                    on_ack((n, s + i, first.ledger_id, first.entry_id))
            if s % 4 == 0:
                again = producers[n].send(b"retry", sequence_id=s)
                assert (again.ledger_id, again.entry_id) == (-1, -1), f"retry of acknowledged {n}:{s} was stored"
            seq[n] = s + size


def publish_pipelined(
    producers: dict[str, Producer], starts: dict[str, int], end: int, on_ack: Callable[[Ack], None], window: int = 6
) -> None:
    """``publish`` with ``send_async``: one thread per producer keeps up to ``window`` sends in
    flight (group-committed with the other producer's), reports the acks as its futures
    complete (in order), and retries every 4th id once it is acknowledged. Raises the first
    error a thread met (the injected fault when there was one)."""
    errors: list[BaseException] = []

    def run(n: str) -> None:
        producer = producers[n]
        s = starts[n]
        inflight: deque[tuple[int, int, Future[Any]]] = deque()
        try:
            while s < end or inflight:
                while s < end and len(inflight) < window:
                    size = batch_size(s, end)
                    if size == 1:
                        future: Future[Any] = producer.send_async(b"%s-%d" % (n.encode(), s), sequence_id=s)
                    else:
                        future = producer.send_batch_async(
                            [b"%s-%d" % (n.encode(), s + i) for i in range(size)], sequence_id=s
                        )
                    inflight.append((s, size, future))
                    s += size
                first, size, future = inflight.popleft()
                result = future.result(30)
                mid = result if size == 1 else result[0]
                for i in range(size):
                    on_ack((n, first + i, mid.ledger_id, mid.entry_id))
                if first % 4 == 0:
                    again = producer.send(b"retry", sequence_id=first)
                    assert (again.ledger_id, again.entry_id) == (-1, -1), f"retry of acknowledged {n}:{first} was stored"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in NAMES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise next((e for e in errors if isinstance(e, InjectedFault)), errors[0])


PUBLISHERS = {"send": publish, "send_async": publish_pipelined}


class Client:
    """What the publishing application knows: the acks it received."""

    def __init__(self) -> None:
        self.acked: dict[str, dict[int, Position | None]] = {n: {} for n in NAMES}

    def on_ack(self, ack: Ack) -> None:
        n, s, ledger_id, entry_id = ack
        self.acked[n][s] = None if (ledger_id, entry_id) == (-1, -1) else Position(ledger_id, entry_id)

    def resume(self, rng: random.Random) -> dict[str, int]:
        """Where to start again: a little before the first id not acknowledged."""
        starts = {}
        for n in NAMES:
            first_missing = 0
            while first_missing in self.acked[n]:
                first_missing += 1
            starts[n] = max(0, first_missing - rng.randrange(4))
        return starts


def stored_messages(ml: ManagedLedger) -> dict[str, list[tuple[int, Position]]]:
    """Per producer, every stored sequence id with its entry's position (batches expanded)."""
    out: dict[str, list[tuple[int, Position]]] = {n: [] for n in NAMES}
    lac = ml.last_confirmed_entry
    for info in ml.ledger_infos():
        if not info.entries or info.ledger_id > lac.ledger_id:
            continue
        for e in ml.read_range(info.ledger_id, 0, info.entries - 1):
            md = e.metadata
            hi = md.highest_sequence_id if md.highest_sequence_id is not None else md.sequence_id
            out[md.producer_name].extend((s, e.position) for s in range(md.sequence_id, hi + 1))
    return out


def last_ids_up_to(ml: ManagedLedger, position: Position) -> dict[str, int]:
    """What a snapshot at ``position`` must hold: each producer's last entry up to there."""
    out: dict[str, int] = {}
    for n, items in stored_messages(ml).items():
        ids = [s for s, p in items if p <= position]
        if ids:
            out[n] = max(ids)
    return out


def check_final_state(ml: ManagedLedger, client: Client, end: int) -> None:
    stored = stored_messages(ml)
    for n in NAMES:
        ids = [s for s, _ in stored[n]]
        assert ids == list(range(end)), f"producer {n}: stored ids {ids} (duplicates or gaps)"
        where = dict(stored[n])
        for s, position in client.acked[n].items():
            if position is not None:
                assert where[s] == position, f"{n}:{s} acknowledged at {position}, stored at {where[s]}"


def open_broker(store: Store) -> Broker:
    broker = Broker(ManagedLedgerFactory(store, clock=ManualClock(0)), config(), clock=ManualClock(0))
    broker.subscribe(T, "hold", initial_position=InitialPosition.EARLIEST)  # keep every entry
    return broker


def producers_of(broker: Broker) -> dict[str, Producer]:
    out = {}
    for n in NAMES:
        p = broker.create_producer(T, n)
        assert isinstance(p, Producer)
        out[n] = p
    return out


def dedup_of(broker: Broker) -> tuple[Topic, MessageDeduplication]:
    topic = broker.get_topic(T)
    assert isinstance(topic, Topic) and isinstance(topic.deduplication, MessageDeduplication)
    return topic, topic.deduplication


# -- every write point ---------------------------------------------------------------------------

END = 14


def run_until_crash(store: Store, client: Client, sender: str = "send") -> None:
    broker = open_broker(store)
    PUBLISHERS[sender](producers_of(broker), {n: 0 for n in NAMES}, END, client.on_ack)
    broker.close()


@pytest.mark.parametrize("sender", ["send", "send_async"])
@pytest.mark.parametrize("mode", ["crash", "crash_after"])
def test_crash_at_every_write_then_retry_stores_each_message_once(mode: str, sender: str) -> None:
    """With ``send_async`` the writes are pending and group-committed (two producers, several
    sends in flight each, the writer thread of the ledger): the crash hits a different mix
    of in-flight writes at each write point, and still no acknowledged message is lost or
    stored twice."""
    dry = FaultInjectingStore(MemoryStore())
    run_until_crash(dry, Client(), sender)
    assert dry.writes > 30 if sender == "send" else dry.writes > 10  # appends, snapshots, rollovers
    rng = random.Random(mode)
    for n in range(dry.writes):
        inner = MemoryStore()
        store = FaultInjectingStore(inner, fail_at=n, mode=mode)  # type: ignore[arg-type]
        client = Client()
        try:
            run_until_crash(store, client, sender)
        except InjectedFault:
            pass
        else:  # pipelined sends group differently from run to run: this run needed fewer writes
            assert sender == "send_async" and store.writes <= n, f"write {n} failed unnoticed"
            continue
        # A new process over what the crash left; the client resends from where it stood.
        broker = open_broker(inner)
        producers = producers_of(broker)
        for name in NAMES:
            acked = [s for s in client.acked[name]]
            assert producers[name].last_sequence_id >= max(acked, default=-1), f"write {n}: an ack was lost"
        topic, dedup = dedup_of(broker)
        dedup._check()
        cursor = dedup.cursor
        assert cursor is not None
        assert cursor.properties == last_ids_up_to(topic.managed_ledger, cursor.mark_delete_position)
        publish(producers, client.resume(rng), END, client.on_ack)
        check_final_state(topic.managed_ledger, client, END)
        assert dedup.highest_sequence_persisted() == {name: END - 1 for name in NAMES}
        broker.close()


# -- real processes killed with SIGKILL -----------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    sys.path.insert(0, sys.argv[1])
    import test_dedup_crash as t
    from mledger import SqliteStore
    data_dir, end = sys.argv[2], int(sys.argv[3])
    starts = json.loads(sys.argv[4])
    sender = t.PUBLISHERS[sys.argv[5]]
    store = SqliteStore(data_dir, synchronous="NORMAL")
    broker = t.open_broker(store)
    producers = t.producers_of(broker)
    topic, dedup = t.dedup_of(broker)
    cursor = dedup.cursor
    print("ready", json.dumps({
        "last": {n: p.last_sequence_id for n, p in producers.items()},
        "md": list(cursor.mark_delete_position), "props": cursor.properties,
    }), flush=True)
    lock = threading.Lock()

    def on_ack(ack):
        with lock:
            print("ack", *ack, flush=True)

    sender(producers, starts, end, on_ack)
    broker.close()
    store.close()
    print("done", flush=True)
    """
)


def run_child(data_dir: Path, end: int, starts: dict[str, int], kill_after: int | None,
              client: Client, sender: str = "send") -> dict[str, object]:
    """Run one publishing process; kill it after ``kill_after`` ack lines (None: let it end)."""
    import json

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(Path(__file__).parent), str(data_dir), str(end), json.dumps(starts), sender],
        stdout=subprocess.PIPE, text=True,
    )
    assert child.stdout is not None
    try:
        first = child.stdout.readline()
        assert first.startswith("ready "), f"child failed to start: {first!r}"
        ready: dict[str, object] = json.loads(first[len("ready "):])
        seen = 0
        done = False
        for line in child.stdout:
            if not line.endswith("\n"):
                break  # cut short by the kill
            if line.startswith("done"):
                done = True
                break
            _, n, s, ledger_id, entry_id = line.split()
            client.on_ack((n, int(s), int(ledger_id), int(entry_id)))
            seen += 1
            if kill_after is not None and seen >= kill_after:
                os.kill(child.pid, signal.SIGKILL)
                kill_after = None  # drain what was written before the kill landed
        child.wait(timeout=60)
        if kill_after is None and not done:
            assert child.returncode == -signal.SIGKILL
        else:
            assert child.returncode == 0 and done
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return ready


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "sender"), [(1, "send"), (2, "send"), (3, "send_async"), (4, "send_async")])
def test_sigkill_while_publishing_with_retries_stores_each_message_once(tmp_path: Path, seed: int, sender: str) -> None:
    """``send_async``: pending and group-committed writes (two producer threads with sends in
    flight, dedup snapshots, the subscription's cursor) when the SIGKILL lands."""
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    end = 400
    client = Client()
    readies = []
    starts = {n: 0 for n in NAMES}
    for _ in range(5):
        readies.append(run_child(data_dir, end, starts, rng.randrange(1, 150), client, sender))
        starts = client.resume(rng)
    readies.append(run_child(data_dir, end, starts, None, client, sender))

    store = SqliteStore(data_dir)
    try:
        factory = ManagedLedgerFactory(store)
        ml = factory.open(ML_NAME, config().managed_ledger_config)
        check_final_state(ml, client, end)
        # Each recovery reported a last sequence id covering every earlier ack, and a snapshot
        # matching the log up to its mark-delete position.
        acked_before: dict[str, int] = {n: -1 for n in NAMES}
        for ready in readies:
            last = ready["last"]
            assert isinstance(last, dict)
            for n in NAMES:
                assert last[n] >= acked_before[n]
            md = ready["md"]
            assert isinstance(md, list)
            assert ready["props"] == last_ids_up_to(ml, Position(*md))
        cursor = ml.get_cursor(DEDUPLICATION_CURSOR_NAME)
        assert cursor.properties == {n: end - 1 for n in NAMES}  # the clean close's snapshot
        assert cursor.mark_delete_position == ml.last_confirmed_entry
        ml.close()
    finally:
        store.close()
