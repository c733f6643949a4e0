"""Pipelined publish: the SQLite store's group commit, the managed ledger's pending adds, the
topic's PIP-6 "pushed but not persisted" state and fencing, and ``Producer.send_async``.

Races are stepped deterministically: :class:`HeldWriteStore` holds a write "in flight" until the
test lets it go (or fails it), and the group-commit tests hold the store's transaction lock so
that writes queue behind it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from mledger import (
    BadVersionError,
    EntryTooLargeError,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManualClock,
    MemoryStore,
    Position,
    SqliteStore,
)
from mledger.broker import (
    AlreadyClosedError,
    Broker,
    BrokerConfig,
    DedupVerdict,
    InitialPosition,
    MessageDeduplication,
    MessageDupUnknownError,
    MessageId,
    NoDeduplication,
    PersistenceError,
    Producer,
    PublishContext,
    Topic,
    TopicFencedError,
)
from mledger.storage import DISK_FULL, NEW_NODE, FaultInjectingStore, HeldWriteStore, InjectedFault

pytestmark = [pytest.mark.timeout(60)]

T = "persistent://public/default/pipeline"


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.001)


# -- SqliteStore group commit ----------------------------------------------------------------------


def queue_behind_a_commit(store: SqliteStore, writes: list[object]) -> list[Future[object]]:
    """Run ``writes`` (callables taking the store) on threads while the transaction lock is
    held, so that they all queue; release it once they have; return their futures."""
    futures: list[Future[object]] = []
    threads = []
    with store._write_lock:  # a commit "in progress"
        for write in writes:
            future: Future[object] = Future()

            def run(write: object = write, future: Future[object] = future) -> None:
                try:
                    future.set_result(write(store))  # type: ignore[operator]
                except BaseException as exc:
                    future.set_exception(exc)

            thread = threading.Thread(target=run)
            thread.start()
            threads.append(thread)
            futures.append(future)
        wait_for(lambda: len(store._queue) == len(writes))
    for thread in threads:
        thread.join(10)
    return futures


def test_writes_arriving_during_a_commit_share_the_next_transaction(tmp_path: Path) -> None:
    with SqliteStore(tmp_path) as store:
        a, b = store.create_ledger(), store.create_ledger()
        before = store.stats()
        futures = queue_behind_a_commit(
            store,
            [
                lambda s: s.append(a, b"a0"),
                lambda s: s.append_many(b, [b"b0", b"b1"]),
                lambda s: s.append(a, b"a1"),
                lambda s: s.put("/meta", b"m", NEW_NODE),
                lambda s: s.append(b, b"b2"),
            ],
        )
        results = [f.result() for f in futures]
        stats = store.stats()
        assert stats.transactions - before.transactions == 1
        assert stats.writes - before.writes == 5
        assert stats.largest_group == 5
        # Each write saw the ones before it in the same transaction: ids are contiguous.
        a_data, b_data = store.read(a, 0, 9), store.read(b, 0, 9)
        assert sorted(a_data) == [b"a0", b"a1"] and {results[0], results[2]} == {0, 1}
        assert a_data[results[0]] == b"a0"  # type: ignore[index]
        assert sorted(b_data) == [b"b0", b"b1", b"b2"]
        assert b_data[results[1]] == b"b0" and b_data[results[4]] == b"b2"  # type: ignore[index]
        assert store.get("/meta") is not None
        assert store.check() == []


def test_a_failing_write_in_a_group_changes_nothing_and_the_others_commit(tmp_path: Path) -> None:
    with SqliteStore(tmp_path) as store:
        ledger = store.create_ledger()
        store.put("/meta", b"v0", NEW_NODE)
        sealed = store.create_ledger()
        store.seal_ledger(sealed)
        futures = queue_behind_a_commit(
            store,
            [
                lambda s: s.append(ledger, b"kept-1"),
                lambda s: s.put("/meta", b"stale", 7),  # wrong version
                lambda s: s.append_many(sealed, [b"x", b"y"]),  # sealed ledger
                lambda s: s.append(ledger, b"kept-2"),
            ],
        )
        with pytest.raises(BadVersionError):
            futures[1].result()
        with pytest.raises(Exception, match="sealed"):
            futures[2].result()
        assert {futures[0].result(), futures[3].result()} == {0, 1}
        assert sorted(store.read(ledger, 0, 9)) == [b"kept-1", b"kept-2"]
        assert store.read(sealed, 0, 9) == []
        meta = store.get("/meta")
        assert meta is not None and (meta.data, meta.version) == (b"v0", 0)
        assert store.check() == []


def test_close_fails_the_writes_still_queued(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    ledger = store.create_ledger()
    closer = threading.Thread(target=store.close)
    with store._write_lock:
        futures: list[Future[int]] = []

        def append() -> None:
            future: Future[int] = Future()
            futures.append(future)
            try:
                future.set_result(store.append(ledger, b"x"))
            except BaseException as exc:
                future.set_exception(exc)

        writer = threading.Thread(target=append)
        writer.start()
        wait_for(lambda: len(store._queue) == 1)
        closer.start()  # waits for the transaction lock
    writer.join(10)
    closer.join(10)
    # Either the writer's leader got the lock first (stored) or close did (refused).
    try:
        futures[0].result()
    except ManagedLedgerClosedError:
        pass
    with pytest.raises(ManagedLedgerClosedError):
        store.append(ledger, b"y")


# -- the managed ledger's pending adds ---------------------------------------------------------------


def open_ml(store: object, **config: object) -> tuple[ManagedLedgerFactory, object]:
    factory = ManagedLedgerFactory(store, clock=ManualClock(0))  # type: ignore[arg-type]
    return factory, factory.open("public/default/persistent/pipe", ManagedLedgerConfig(**config))  # type: ignore[arg-type]


def test_adds_queued_during_a_write_go_into_the_next_store_call() -> None:
    store = HeldWriteStore(MemoryStore())
    factory, ml = open_ml(store)
    writes = store.writes
    store.hold_writes()
    first = ml.add_entries_async([b"0"])  # type: ignore[attr-defined]
    store.wait_until_held(1)  # the writer thread is inside append_many
    later = [ml.add_entries_async([b"%d" % i]) for i in range(1, 6)]  # type: ignore[attr-defined]
    assert ml.pending_add_entries == 5  # type: ignore[attr-defined]
    assert not first.done() and not any(f.done() for f in later)
    store.release_one()
    store.wait_until_held(1)  # the five queued adds: one append_many
    assert store.held()[0].kind == "append_many"
    store.release()
    ledger = first.result(10)[0].ledger_id
    assert [f.result(10)[0] for f in later] == [Position(ledger, i) for i in range(1, 6)]
    assert store.writes - writes == 2
    assert [e.data for e in ml.read_range(ledger, 0, 9)] == [b"%d" % i for i in range(6)]  # type: ignore[attr-defined]
    factory.close()


def test_callbacks_run_in_add_order_with_positions_in_order() -> None:
    store = HeldWriteStore(MemoryStore())
    factory, ml = open_ml(store, max_entries_per_ledger=4)
    store.hold_writes()
    order: list[int] = []
    futures = []
    for i in range(10):
        future = ml.add_entries_async([b"a%d" % i, b"b%d" % i])  # type: ignore[attr-defined]
        future.add_done_callback(lambda f, i=i: order.append(i))
        futures.append(future)
    store.release()
    positions = [p for f in futures for p in f.result(10)]
    assert order == list(range(10))
    assert positions == sorted(positions) and len(set(positions)) == 20
    assert [len({p.ledger_id for p in positions[k : k + 4]}) for k in range(0, 20, 4)] == [1] * 5  # 4 per ledger
    factory.close()


def test_a_failed_write_fails_every_add_queued_behind_it_and_later_adds_work() -> None:
    store = HeldWriteStore(MemoryStore())
    factory, ml = open_ml(store)
    ok = ml.add_entry(b"before")  # type: ignore[attr-defined]
    store.hold_writes()
    failing = ml.add_entries_async([b"x"])  # type: ignore[attr-defined]
    store.wait_until_held(1)
    behind = [ml.add_entries_async([b"y%d" % i]) for i in range(3)]  # type: ignore[attr-defined]
    store.release_one(fail=True)
    with pytest.raises(InjectedFault):
        failing.result(10)
    for future in behind:  # Pulsar's clearPendingAddEntries: nothing behind a failure is written
        with pytest.raises(InjectedFault):
            future.result(10)
    store.release()
    after = ml.add_entry(b"after")  # type: ignore[attr-defined]
    assert after == ok.next()
    assert [e.data for e in ml.read_range(ok.ledger_id, 0, 9)] == [b"before", b"after"]  # type: ignore[attr-defined]
    factory.close()


def test_oversized_and_closed_adds_are_refused_at_once() -> None:
    factory, ml = open_ml(MemoryStore(max_entry_size=20))
    with pytest.raises(EntryTooLargeError):
        ml.add_entries_async([b"x" * 30])  # type: ignore[attr-defined]
    assert ml.pending_add_entries == 0  # type: ignore[attr-defined]
    ml.close()  # type: ignore[attr-defined]
    with pytest.raises(ManagedLedgerClosedError):
        ml.add_entries_async([b"x"])  # type: ignore[attr-defined]
    factory.close()


def test_close_writes_the_pending_adds_first(tmp_path: Path) -> None:
    store = HeldWriteStore(SqliteStore(tmp_path))
    factory, ml = open_ml(store)
    store.hold_writes()
    futures = [ml.add_entries_async([b"%d" % i]) for i in range(5)]  # type: ignore[attr-defined]
    store.wait_until_held(1)
    closer = threading.Thread(target=ml.close)  # type: ignore[attr-defined]
    closer.start()
    wait_for(lambda: ml._adds.closing)  # type: ignore[attr-defined]
    with pytest.raises(ManagedLedgerClosedError):
        ml.add_entries_async([b"late"])  # type: ignore[attr-defined]
    store.release()
    closer.join(10)
    assert [f.result(10)[0].entry_id for f in futures] == [0, 1, 2, 3, 4]
    factory.close()
    factory, ml = open_ml(SqliteStore(tmp_path))
    assert ml.number_of_entries() == 5  # type: ignore[attr-defined]
    factory.close()


def test_a_failure_episode_is_logged_once_with_its_count(caplog: pytest.LogCaptureFixture) -> None:
    """A full disk fails every retry: one warning when the failures start, one with the count
    when a write succeeds again, none per failed write."""
    caplog.set_level(logging.DEBUG, logger="mledger")
    store = FaultInjectingStore(MemoryStore())
    factory, ml = open_ml(store)
    ml.add_entry(b"before")  # type: ignore[attr-defined]
    store.disk_full = True
    for _ in range(50):
        with pytest.raises(sqlite3.OperationalError, match=DISK_FULL):
            ml.add_entries([b"a", b"b"])  # type: ignore[attr-defined]
    assert isinstance(ml.write_failure, sqlite3.OperationalError)  # type: ignore[attr-defined]
    with pytest.raises(sqlite3.OperationalError):
        ml.check_writable()  # type: ignore[attr-defined]  # the probe fails and counts
    store.disk_full = False
    ml.check_writable()  # type: ignore[attr-defined]
    assert ml.write_failure is None  # type: ignore[attr-defined]
    ml.add_entry(b"after")  # type: ignore[attr-defined]
    lines = [r.getMessage() for r in caplog.records if DISK_FULL in r.getMessage()]
    assert len(lines) == 2, lines
    assert "writes succeed again after 51 failed writes (100 entries" in lines[1]
    assert not any(r.exc_info for r in caplog.records)
    factory.close()


def test_a_failed_write_disconnects_remote_producers_and_refuses_new_ones_until_the_store_writes() -> None:
    """Pulsar's ``addFailed``: the remote producers (with a listener) are disconnected; a new
    producer is refused with ``PersistenceError`` while a probe write fails, admitted once it
    succeeds. An in-process producer has no connection and stays."""
    store = FaultInjectingStore(MemoryStore())
    broker = Broker(ManagedLedgerFactory(store, clock=ManualClock(0)), clock=ManualClock(0))
    closed: list[Producer] = []

    class Listener:
        def producer_closed(self, producer: Producer) -> None:
            closed.append(producer)

    topic = broker.create_topic(T)
    assert isinstance(topic, Topic)
    remote = topic.create_producer("remote", listener=Listener())
    local = topic.create_producer("local")
    store.disk_full = True
    with pytest.raises(sqlite3.OperationalError):
        local.send(b"x")
    wait_for(lambda: not topic.is_fenced)
    assert closed == [remote] and [p.name for p in topic.producers] == ["local"]
    with pytest.raises(PersistenceError, match=DISK_FULL):
        topic.create_producer("remote", listener=Listener())
    store.disk_full = False
    again = topic.create_producer("remote", listener=Listener())
    assert again.send(b"y").entry_id >= 0 and local.send(b"z").entry_id >= 0
    broker.close()


# -- the topic: PIP-6 pushed vs persisted, fencing ----------------------------------------------------


def dedup_broker(store: object) -> tuple[Broker, Topic, MessageDeduplication]:
    broker = Broker(ManagedLedgerFactory(store, clock=ManualClock(0)),  # type: ignore[arg-type]
                    BrokerConfig(deduplication_enabled=True), clock=ManualClock(0))
    broker.subscribe(T, "keep", initial_position=InitialPosition.EARLIEST)
    topic = broker.get_topic(T)
    assert isinstance(topic, Topic) and isinstance(topic.deduplication, MessageDeduplication)
    return broker, topic, topic.deduplication


def test_is_duplicate_with_failure() -> None:
    """Pulsar's ``MessageDuplicationTest.testIsDuplicateWithFailure``, through the real write
    path: a retry while the write is pending is Unknown; a failed write resets pushed to
    persisted; the retry of the failed message is then accepted, an older one is a Dup."""
    store = HeldWriteStore(MemoryStore())
    broker, topic, dedup = dedup_broker(store)
    p1 = broker.create_producer(T, "producer1")
    p2 = broker.create_producer(T, "producer2")
    assert isinstance(p1, Producer) and isinstance(p2, Producer)
    p1.send(b"", sequence_id=0)
    p2.send(b"", sequence_id=1)
    p1.send(b"", sequence_id=1)
    p1.send(b"", sequence_id=5)
    assert p1.send(b"", sequence_id=0) == MessageId(-1, -1)  # a duplicate
    assert dedup.highest_sequence_pushed() == {"producer1": 5, "producer2": 1}

    store.hold_writes()
    pending = p1.send_async(b"", sequence_id=6)  # the write of 6 is in flight
    store.wait_until_held(1)
    assert dedup.highest_sequence_pushed()["producer1"] == 6
    assert dedup.highest_sequence_persisted()["producer1"] == 5
    with pytest.raises(MessageDupUnknownError, match="Cannot determine whether the message is a duplicate"):
        p1.send_async(b"", sequence_id=6).result(10)
    store.release_one()
    assert pending.result(10).entry_id >= 0

    failing = p1.send_async(b"", sequence_id=7)
    store.wait_until_held(1)
    store.release_one(fail=True)
    with pytest.raises(InjectedFault):
        failing.result(10)
    store.release()
    wait_for(lambda: not topic.is_fenced)  # the writer finished reporting the failure
    assert dedup.highest_sequence_pushed() == {"producer1": 6, "producer2": 1}  # reset to persisted
    assert dedup.highest_sequence_persisted() == {"producer1": 6, "producer2": 1}
    assert dedup.stats().failed_writes == 1
    assert p1.send(b"", sequence_id=6) == MessageId(-1, -1)  # stored: a Dup
    assert p1.send(b"", sequence_id=7).entry_id >= 0  # the failed one: accepted again
    assert dedup.highest_sequence_persisted()["producer1"] == 7
    dedup._check()
    broker.close()


def test_a_failed_write_fences_the_topic_until_its_pending_writes_completed() -> None:
    store = HeldWriteStore(MemoryStore())
    broker, topic, dedup = dedup_broker(store)
    p = broker.create_producer(T, "p")
    assert isinstance(p, Producer)
    p.send(b"0", sequence_id=0)
    store.hold_writes()
    failing = p.send_async(b"1", sequence_id=1)
    store.wait_until_held(1)
    behind = [p.send_async(b"%d" % s, sequence_id=s) for s in (2, 3)]
    # While the failure is reported, new publishes are refused (a callback of a failed send
    # tries one while another failed write is still to be reported).
    seen: list[BaseException] = []

    def on_failed(f: Future[MessageId]) -> None:
        seen.append(p.send_async(b"4", sequence_id=4).exception(0))  # type: ignore[arg-type]

    behind[0].add_done_callback(on_failed)  # a write is still pending then: fenced
    store.release_one(fail=True)
    for future in [failing, *behind]:
        with pytest.raises(InjectedFault):
            future.result(10)
    assert isinstance(seen[0], TopicFencedError)
    store.release()
    wait_for(lambda: not topic.is_fenced)
    # Every pending write completed: the fence is down, pushed was reset, the retries go in order.
    assert dedup.highest_sequence_pushed() == {"p": 0}
    assert [p.send(b"%d" % s, sequence_id=s).entry_id for s in (1, 2, 3, 4)] == [1, 2, 3, 4]
    dedup._check()
    broker.close()


def test_send_async_futures_complete_in_order_and_carry_errors(tmp_path: Path) -> None:
    broker = Broker(ManagedLedgerFactory(SqliteStore(tmp_path)))
    producer = broker.create_producer(T, "p")
    assert isinstance(producer, Producer)
    done: list[int] = []
    futures = []
    for i in range(200):
        future = producer.send_async(b"m%d" % i)
        future.add_done_callback(lambda f, i=i: done.append(i))
        futures.append(future)
    batch = producer.send_batch_async([b"x", b"y", b"z"])
    bad = producer.send_async("not bytes")  # type: ignore[arg-type]
    ids = [f.result(10) for f in futures]
    assert done == list(range(200))
    assert ids == sorted(ids) and len(set(ids)) == 200
    assert [m.batch_index for m in batch.result(10)] == [0, 1, 2]
    assert batch.result().position > ids[-1].position  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="invalid message payload"):
        bad.result(0)
    assert producer.last_sequence_id == 202
    producer.close()
    with pytest.raises(AlreadyClosedError):
        producer.send_async(b"late").result(0)
    broker.close()


def test_sixteen_threads_of_sends_are_stored_once_each_in_per_producer_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, synchronous="NORMAL")
    broker = Broker(ManagedLedgerFactory(store), BrokerConfig(deduplication_enabled=True))
    sub = broker.subscribe(T, "s", initial_position=InitialPosition.EARLIEST)
    producers = [broker.create_producer(T, f"p{i}") for i in range(16)]
    results: dict[int, list[MessageId]] = {}

    def run(i: int) -> None:
        p = producers[i]
        if i % 2:
            results[i] = [p.send(b"%d-%d" % (i, k)) for k in range(50)]
        else:
            futures = [p.send_async(b"%d-%d" % (i, k)) for k in range(50)]
            results[i] = [f.result(30) for f in futures]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    all_ids = [m for ids in results.values() for m in ids]
    assert len(all_ids) == 800 and len(set(all_ids)) == 800
    for ids in results.values():
        assert ids == sorted(ids)  # a producer's messages are stored in send order
    stats = store.stats()
    assert stats.largest_group >= 1
    consumer = sub.add_consumer("c", permits=1000)  # type: ignore[union-attr]
    received = consumer.receive(1000)
    assert len(received) == 800
    broker.close()
    store.close()


def test_deduplication_off_costs_no_hook_call_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """With deduplication off (NoDeduplication itself), a publish neither asks the hook about
    each message nor tells it about each stored one; a subclass still hears every message."""

    def per_message(*args: object) -> None:
        raise AssertionError("NoDeduplication called per message")

    monkeypatch.setattr(NoDeduplication, "check", per_message)
    monkeypatch.setattr(NoDeduplication, "record_persisted", per_message)
    broker = Broker(ManagedLedgerFactory(MemoryStore()), dedup_factory=lambda t: NoDeduplication())
    producer = broker.create_producer(T, "p")
    assert type(broker.get_topic(T).deduplication) is NoDeduplication
    ids = [producer.send_async(b"m%d" % i).result(10) for i in range(3)]
    assert len(set(ids)) == 3
    broker.close()

    heard: list[tuple[str, int]] = []

    class Listening(NoDeduplication):
        def check(self, ctx: PublishContext) -> DedupVerdict:
            heard.append(("check", ctx.sequence_id))
            return DedupVerdict.NOT_DUPLICATE

        def record_persisted(self, ctx: PublishContext, position: Position) -> None:
            heard.append(("persisted", ctx.sequence_id))

    broker = Broker(ManagedLedgerFactory(MemoryStore()), dedup_factory=lambda t: Listening())
    producer = broker.create_producer(T, "p")
    producer.send_async(b"a").result(10)
    producer.send_async(b"b").result(10)
    assert heard == [("check", 0), ("persisted", 0), ("check", 1), ("persisted", 1)]
    broker.close()
