"""Issue 24 item 4: the broker methods the protocol session uses instead of reaching below the
broker (the previous position, the last message id, flushing a subscription's acks), and
deduplication saying what metadata it reads instead of being type-tested."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mledger.broker import Broker, BrokerConfig, MessageDeduplication, MetadataNeeds, NoDeduplication, Topic
from mledger.codec import EntryMetadata
from mledger.core import ManagedLedgerConfig, ManualClock, Position
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol._convert import metadata_for
from mledger.storage import MemoryStore


@pytest.fixture
def broker() -> Iterator[Broker]:
    clock = ManualClock(0)
    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(throttle_mark_delete=1.0))
    b = Broker(ManagedLedgerFactory(MemoryStore(), clock=clock), config=config, clock=clock)
    yield b
    b.close()


def publish(topic: Topic, metadata: EntryMetadata, n: int = 1) -> Position:
    position = topic.publish("", b"x", metadata, -1, -1, n)
    assert position is not None
    return position


def test_last_message_id_names_the_last_message_of_a_batch(broker: Broker) -> None:
    topic = broker.create_topic("last")
    assert isinstance(topic, Topic)
    assert topic.last_message_id()[1] == -1 and topic.last_message_id()[0].entry_id < 0  # empty
    single = publish(topic, EntryMetadata(producer_name="p", sequence_id=0))
    assert topic.last_message_id() == (single, -1)
    batch = publish(topic, EntryMetadata(producer_name="p", sequence_id=1, num_messages=3), n=3)
    assert topic.last_message_id() == (batch, 2)
    assert topic.last_message_id(read_compacted=True) == (batch, 2)  # no compacted view: the ledger's


def test_previous_position_steps_back_one_entry(broker: Broker) -> None:
    topic = broker.create_topic("previous")
    assert isinstance(topic, Topic)
    first = publish(topic, EntryMetadata(producer_name="p", sequence_id=0))
    second = publish(topic, EntryMetadata(producer_name="p", sequence_id=1))
    assert topic.previous_position(second) == first
    assert topic.previous_position(first).entry_id == -1


def test_flush_acks_persists_what_the_throttle_held_back(broker: Broker) -> None:
    topic = broker.create_topic("flush")
    assert isinstance(topic, Topic)
    subscription = topic.subscribe("s")
    first, second = (publish(topic, EntryMetadata(producer_name="p", sequence_id=i)) for i in range(2))
    consumer = subscription.add_consumer("c")
    consumer.acknowledge_entries([first])  # persisted: the first change after a quiet second
    consumer.acknowledge_entries([second])  # held back by the throttle (the clock stands still)
    assert subscription.mark_delete_position == second
    subscription.flush_acks()
    assert subscription.cursor.flush() is False  # nothing was left to write


class _Undeclared(NoDeduplication):
    metadata_needs = None  # type: ignore[assignment]  # a hook that declares nothing usable


class _Stub:
    def __init__(self, dedup: Any) -> None:
        self.deduplication = dedup
        self.journal = None


def test_deduplication_declares_the_metadata_it_reads() -> None:
    assert NoDeduplication.metadata_needs is MetadataNeeds.NOTHING
    assert MessageDeduplication.metadata_needs is MetadataNeeds.CHUNK_FIELDS
    full = EntryMetadata(producer_name="p", sequence_id=7, chunk_id=1, num_chunks=3, partition_key="k")
    data = full.to_bytes()
    assert metadata_for(_Stub(NoDeduplication()), data) == EntryMetadata()  # type: ignore[arg-type]
    chunked = metadata_for(_Stub(object.__new__(MessageDeduplication)), data)  # type: ignore[arg-type]
    assert (chunked.chunk_id, chunked.num_chunks, chunked.partition_key) == (1, 3, None)
    assert metadata_for(_Stub(_Undeclared()), data) == full  # type: ignore[arg-type]
    assert metadata_for(_Stub(object()), data) == full  # type: ignore[arg-type]
