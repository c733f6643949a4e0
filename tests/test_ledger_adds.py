"""The managed ledger's add methods (issue 24): three forms of one name, ``add_entries``
(blocking), ``add_entries_async`` (a future) and ``add_entries_with_callback``, with ``framed``
a parameter; the renamed spellings warn for one release; one size check per publish."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from mledger import (
    EntryMetadata,
    EntryTooLargeError,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MemoryStore,
    Position,
    SqliteStore,
)
from mledger.broker import Broker, BrokerConfig, FramedPublish, PublishResult, Topic
from mledger.codec import decode_entry, encode_entry

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=3, retain_without_subscriptions=True)


def open_ml(store: MemoryStore | None = None) -> ManagedLedger:
    return ManagedLedgerFactory(store or MemoryStore()).open("t/adds", CONFIG)


def test_the_three_forms_take_payloads_or_framed_entries() -> None:
    ml = open_ml()
    framed = encode_entry(b"f", EntryMetadata(partition_key="k"))
    blocking = ml.add_entries([b"a", b"b"], [EntryMetadata(), EntryMetadata(partition_key="k")])
    assert ml.add_entries([framed], framed=True) == [blocking[-1].next()]
    future = ml.add_entries_async([framed, framed], framed=True)
    done = threading.Event()
    got: list[object] = []

    def callback(positions: list[Position] | None, error: BaseException | None) -> None:
        got.append(positions if error is None else error)
        done.set()

    ml.add_entries_with_callback([b"c"], callback)
    assert done.wait(10)
    positions = future.result(timeout=10)
    assert got == [[ml.last_confirmed_entry]]
    assert [p.entry_id for p in blocking + positions] == [0, 1, 0, 1]  # rolled over after three
    stored = ml.read_entry(positions[0])
    assert stored.data == b"f" and decode_entry(framed)[0].partition_key == "k"
    ml._check()
    with pytest.raises(ValueError, match="metadatas=None"):
        ml.add_entries([framed], [EntryMetadata()], framed=True)


def test_blocking_and_future_forms_refuse_an_oversized_entry_at_once() -> None:
    ml = open_ml(MemoryStore(max_entry_size=64))
    with pytest.raises(EntryTooLargeError):
        ml.add_entries([b"x" * 100])
    with pytest.raises(EntryTooLargeError):
        ml.add_entries_async([b"x" * 100], framed=True)
    assert ml.pending_add_entries == 0
    assert ml.last_confirmed_entry.entry_id == -1
    ml._check()


@pytest.mark.parametrize(
    ("old", "call", "new"),
    [
        ("add_framed_entries", lambda ml, raw: ml.add_framed_entries([raw]), "add_entries(raw, framed=True)"),
        (
            "add_framed_entries_async",
            lambda ml, raw: ml.add_framed_entries_async([raw]).result(timeout=10),
            "add_entries_async(raw, framed=True)",
        ),
        (
            "async_add_framed_entries",
            lambda ml, raw: ml.async_add_framed_entries([raw], lambda p, e: None),
            "add_entries_with_callback(raw, callback, framed=True)",
        ),
        ("add_repeated_entries", lambda ml, raw: ml.add_repeated_entries(raw, 2), "add_repeated_entries"),
    ],
)
def test_renamed_add_methods_warn_naming_the_new_spelling_and_still_add(
    old: str, call: Callable[[ManagedLedger, bytes], object], new: str
) -> None:
    ml = open_ml()
    raw = encode_entry(b"r", EntryMetadata())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(ml, raw)
    [warning] = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    text = str(warning.message)
    assert f"ManagedLedger.{old} is deprecated" in text and "will be removed in mledger " in text and new in text
    assert warning.filename == __file__  # it points at the caller
    ml.wait_for_adds(10)
    assert ml.number_of_entries() >= 1


def test_the_old_callback_spelling_still_refuses_an_oversized_entry_at_once() -> None:
    ml = open_ml(MemoryStore(max_entry_size=16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(EntryTooLargeError):
            ml.async_add_framed_entries([b"x" * 32], lambda p, e: None)
    assert ml.pending_add_entries == 0


class _CountingStore(MemoryStore):
    """Counts the reads of ``max_entry_size``: every size check reads the limit."""

    def __init__(self) -> None:
        self.limit_reads = 0
        super().__init__()

    @property
    def max_entry_size(self) -> int:
        self.limit_reads += 1
        return self._limit

    @max_entry_size.setter
    def max_entry_size(self, value: int) -> None:
        self._limit = value


def test_a_publish_checks_the_entry_size_at_the_topic_and_the_store_only() -> None:
    """A SEND's entry was checked at the topic, again in the ledger and again in the store;
    now the topic refuses an oversized message (alone) and the store's write keeps its own
    guard: two reads of the limit, one of them the store's total."""
    store = _CountingStore()
    broker = Broker(ManagedLedgerFactory(store), BrokerConfig())
    topic = broker.open_topic("persistent://public/default/sized")
    assert isinstance(topic, Topic)
    results: list[list[PublishResult]] = []
    done = threading.Event()

    def callback(r: list[PublishResult]) -> None:
        results.append(r)
        done.set()

    item = FramedPublish("p", 0, 0, 1, EntryMetadata(), encode_entry(b"m", EntryMetadata()))
    store.limit_reads = 0
    topic.publish_entries([item], callback)
    assert done.wait(10)
    assert isinstance(results[0][0], Position)
    assert store.limit_reads == 2


def test_a_write_counts_each_producers_entries_when_producers_interleave() -> None:
    """A write's completion counts stored entries per run of one producer's entries: runs
    that alternate between producers still credit each producer with its own."""
    broker = Broker(ManagedLedgerFactory(MemoryStore()), BrokerConfig())
    topic = broker.open_topic("persistent://public/default/counted")
    assert isinstance(topic, Topic)
    a, b = topic.create_producer("a"), topic.create_producer("b")
    order = [("a", 1), ("a", 2), ("b", 3), ("a", 4), ("b", 5), ("b", 6), ("gone", 7)]
    items = [
        FramedPublish(name, seq, seq, seq, EntryMetadata(), encode_entry(b"m" * seq, EntryMetadata()))
        for name, seq in order
    ]
    results: list[list[PublishResult]] = []
    topic.publish_entries(items, results.append)
    assert topic.wait_for_publishes(10)
    assert all(isinstance(r, Position) for r in results[0])

    def counted(name: str) -> tuple[int, int]:
        return sum(s for n, s in order if n == name), sum(len(i.framed) for i in items if i.producer_name == name)

    for producer in (a, b):
        stats = producer.stats(0, 1000)
        assert (stats.msg_in_counter, stats.bytes_in_counter) == counted(producer.name)


@pytest.mark.parametrize(("synchronous", "on_adding_thread"), [("NORMAL", True), ("OFF", True), ("FULL", False)])
def test_a_sqlite_store_that_does_not_fsync_is_written_by_the_adding_thread(
    tmp_path: Path, synchronous: str, on_adding_thread: bool
) -> None:
    """Issue 27: a commit that only reaches the OS (NORMAL, OFF) is written where the add was
    made, with no hop to a writer thread and back; one that fsyncs (FULL) stays off the caller."""
    store = SqliteStore(tmp_path, synchronous=synchronous)
    assert store.blocking_writes is not on_adding_thread
    factory = ManagedLedgerFactory(store)
    try:
        ml = factory.open("t/sqlite-adds", CONFIG)
        threads: list[int] = []
        stored: list[Position] = []
        done = threading.Event()

        def callback(positions: list[Position] | None, error: BaseException | None) -> None:
            assert error is None and positions is not None
            threads.append(threading.get_ident())
            stored.extend(positions)
            done.set()

        ml.add_entries_with_callback([b"a", b"b"], callback)
        assert done.wait(10)
        assert (threads == [threading.get_ident()]) is on_adding_thread
        assert [e.data for e in ml.read_positions(stored)] == [b"a", b"b"]
        ml._check()
    finally:
        factory.close()
