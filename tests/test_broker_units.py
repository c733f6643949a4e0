"""Broker building blocks on their own: names, config, hashes, routing, batch codec, value types,
delayed tracker, replay queue, Key_Shared ring and recently-joined map."""

from __future__ import annotations

import doctest
import importlib

import pytest

from mledger import BadVersionError, ConfigError, InvalidRequestError, MemoryStore, Position, StateCorruptedError
from mledger.broker import (
    BatchMessageIds,
    BrokerConfig,
    DelayedDeliveryTracker,
    Message,
    MessageId,
    SkipEntry,
    SubscriptionType,
    TopicName,
    murmur3_32,
    sticky_key_hash,
)
from mledger.broker._hashing import java_string_hash
from mledger.broker._keyshared import ConsistentHashRing, RecentlyJoinedConsumers
from mledger.broker._names import ProducerNameGenerator, decode_partitioned_metadata, encode_partitioned_metadata
from mledger.broker._redelivery import RedeliveryQueue
from mledger.broker._routing import RoundRobinPartitionRouter
from mledger.codec import SingleMessage, decode_batch, encode_batch


@pytest.mark.parametrize(
    "module",
    ["mledger.broker", "mledger.broker._names", "mledger.broker._hashing", "mledger.broker._types"],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


# -- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, full",
    [
        ("orders", "persistent://public/default/orders"),
        ("acme/prod/orders", "persistent://acme/prod/orders"),
        ("persistent://acme/prod/orders", "persistent://acme/prod/orders"),
    ],
)
def test_topic_name_short_and_full_forms(text: str, full: str) -> None:
    assert str(TopicName.parse(text)) == full


def test_topic_name_maps_to_pulsars_managed_ledger_name_and_back() -> None:
    t = TopicName.parse("persistent://acme/prod/my orders~")
    assert t.managed_ledger_name == "acme/prod/persistent/my+orders%7E"  # Java URLEncoder
    assert TopicName.from_managed_ledger_name(t.managed_ledger_name) == t
    assert TopicName.from_managed_ledger_name("not/a/topic") is None
    assert TopicName.from_managed_ledger_name("a/b/non-persistent/c") is None
    assert t.partitioned_metadata_path == "/admin/partitioned-topics/acme/prod/persistent/my+orders%7E"


def test_topic_name_partitions() -> None:
    t = TopicName.parse("orders")
    p = t.partition(2)
    assert str(p) == "persistent://public/default/orders-partition-2"
    assert p.partition_index == 2 and p.is_partition and p.partitioned_topic == t
    assert t.partition_index == -1 and not t.is_partition and t.partitioned_topic is t
    assert TopicName.parse("x-partition-abc").partition_index == -1
    with pytest.raises(InvalidRequestError, match="partition index -1"):
        t.partition(-1)


@pytest.mark.parametrize(
    "bad",
    ["", " orders", "a/b", "a/b/c/d", "non-persistent://a/b/c", "persistent://a/b", "persistent://a//c",
     "persistent://a b/ns/t", 42],
)
def test_topic_name_rejects_bad_names_naming_them(bad: object) -> None:
    with pytest.raises(InvalidRequestError) as info:
        TopicName.parse(bad)  # type: ignore[arg-type]
    assert info.value.http_status == 400
    if isinstance(bad, str) and bad:
        assert bad.strip() in str(info.value) or repr(bad) in str(info.value)


def test_partitioned_metadata_codec() -> None:
    assert decode_partitioned_metadata("/p", encode_partitioned_metadata(4)) == 4
    for raw in (b"{}", b"nope", b'{"partitions": 0}', b'{"partitions": "3"}'):
        with pytest.raises(StateCorruptedError, match="/p"):
            decode_partitioned_metadata("/p", raw)


def test_producer_names_are_unique_across_generators_on_one_store() -> None:
    store = MemoryStore()
    a, b = ProducerNameGenerator(store, "standalone"), ProducerNameGenerator(store, "standalone")
    names = {a.next_name(), a.next_name(), b.next_name()}
    assert names == {"standalone-0-0", "standalone-0-1", "standalone-1-0"}
    assert (a.instance, b.instance) == (0, 1)


def test_producer_name_generator_retries_a_lost_race() -> None:
    store = MemoryStore()
    real_put = store.put
    calls = []

    def racing_put(path: str, data: bytes, expected_version: int | None = None) -> int:
        calls.append(path)
        if len(calls) == 1:
            real_put(path, b"5")  # someone else claimed first
            raise BadVersionError("lost")
        return real_put(path, data, expected_version)

    store.put = racing_put  # type: ignore[method-assign]
    assert ProducerNameGenerator(store, "c").instance == 6


# -- config ---------------------------------------------------------------------------------------


def test_config_defaults_are_pulsars() -> None:
    c = BrokerConfig()
    assert c.dispatcher_max_read_batch_size == 100
    assert c.max_unacked_messages_per_consumer == 50_000
    assert c.delayed_delivery_tick_time_millis == 1000
    assert c.subscription_key_shared_consistent_hashing_replica_points == 100
    assert c.deduplication_entries_interval == c.dedup_entries_interval == 1000
    assert c.allow_auto_topic_creation and not c.deduplication_enabled
    assert c.with_changes(receiver_queue_size=5).receiver_queue_size == 5


@pytest.mark.parametrize(
    "field, value",
    [
        ("dispatcher_max_read_batch_size", 0),
        ("receiver_queue_size", -1),
        ("max_unacked_messages_per_consumer", -1),
        ("delayed_delivery_enabled", 1),
        ("cluster_name", ""),
        ("managed_ledger_config", "x"),
        ("deduplication_entries_interval", True),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        BrokerConfig(**{field: value})


# -- hashes and routing ---------------------------------------------------------------------------


def test_murmur3_known_vectors() -> None:
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    assert murmur3_32(b"abc") == 0xB3DD93FA


def test_java_string_hash_matches_the_jvm() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, masked to 0
    assert java_string_hash("polygenelubricants") == 0
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00) & 0x7FFFFFFF  # surrogate pair


def test_sticky_key_hash_uses_none_key_without_a_key() -> None:
    assert sticky_key_hash(None) == sticky_key_hash("NONE_KEY") == sticky_key_hash(b"NONE_KEY")
    assert 0 <= sticky_key_hash("k") < 2**31


def test_router_key_hash_else_round_robin() -> None:
    r = RoundRobinPartitionRouter(3)
    assert [r.choose(None) for _ in range(4)] == [0, 1, 2, 0]
    assert r.choose("hello") == 99162322 % 3 == r.choose("hello")
    with pytest.raises(ValueError):
        RoundRobinPartitionRouter(0)


# -- batch codec ----------------------------------------------------------------------------------


def test_batch_round_trip() -> None:
    msgs = [
        SingleMessage(b"a", "k", (("p", "1"),), 7),
        SingleMessage(b"", None, (), None),
        SingleMessage(b"\x00" * 300, "k\u00e9", (("x", "y"), ("z", "w")), 2**40),
    ]
    assert decode_batch(encode_batch(msgs), 3) == msgs


def test_batch_reader_skips_unknown_fields() -> None:
    # SingleMessageMetadata with compacted_out (4, varint), event_time (5), ordering_key (7, bytes),
    # a fixed64 (wire 1) and fixed32 (wire 5) unknown field, then payload_size=2.
    meta = bytes([0x20, 0x00, 0x28, 0x05, 0x3A, 0x01, 0x6B, 0x49]) + b"\x00" * 8 + bytes([0x4D]) + b"\x00" * 4
    meta += bytes([0x18, 0x02])
    data = len(meta).to_bytes(4, "big") + meta + b"hi"
    assert decode_batch(data, 1) == [SingleMessage(b"hi")]


@pytest.mark.parametrize(
    "data, n, message",
    [
        (b"\x00\x00", 1, "cut short"),
        (b"\x00\x00\x00\x09\x18", 1, "runs past the end"),
        (b"\x00\x00\x00\x02\x08\x01", 1, "payload_size"),
        (b"\x00\x00\x00\x02\x18\x09", 1, "payload of 9 bytes"),
        (b"\x00\x00\x00\x01\x1b", 1, "wire type 3"),
        (b"\x00\x00\x00\x02\x18\x00", 2, "message 1 of 2"),
    ],
)
def test_batch_reader_rejects_corrupt_payloads(data: bytes, n: int, message: str) -> None:
    with pytest.raises(StateCorruptedError, match=message):
        decode_batch(data, n)


# -- value types ----------------------------------------------------------------------------------


def test_skip_entry_is_frozen_and_copies_indexes() -> None:
    indexes = [3, 1]
    e = SkipEntry(10, 2, indexes)
    indexes.append(7)
    assert e.batch_indexes == (3, 1) and not e.is_whole_entry
    assert SkipEntry(10, 2).is_whole_entry and SkipEntry(10, 2, ()).batch_indexes is None
    with pytest.raises(AttributeError):
        e.entry_id = 5  # type: ignore[misc]
    assert SkipEntry(1, 2, [0]) == SkipEntry(1, 2, (0,))


@pytest.mark.parametrize(
    "args, message",
    [
        (("1", 2), "ledger_id '1'"),
        ((1, True), "entry_id True"),
        ((1, 2**63), "entry_id"),
        ((1, 2, "12"), "batch_indexes '12'"),
        ((1, 2, [1.5]), "batch index 1.5"),
        ((1, 2, [2**31]), "batch index 2147483648"),
    ],
)
def test_skip_entry_validates_naming_the_value(args: tuple, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        SkipEntry(*args)


def test_subscription_type_names_and_ack_modes() -> None:
    assert SubscriptionType.parse("Key_Shared") is SubscriptionType.KEY_SHARED
    assert SubscriptionType.parse("key-shared") is SubscriptionType.KEY_SHARED
    assert SubscriptionType.parse("exclusive") is SubscriptionType.EXCLUSIVE
    assert [t.is_cumulative_ack_mode for t in SubscriptionType] == [True, False, True, False]
    with pytest.raises(InvalidRequestError, match="'Fanout'"):
        SubscriptionType.parse("Fanout")


def test_message_and_batch_ids() -> None:
    ids = BatchMessageIds(MessageId(5, 1, 2, i, 2) for i in range(2))
    assert (ids.ledger_id, ids.entry_id, ids.partition, ids.position) == (5, 1, 2, Position(5, 1))
    assert [m.batch_index for m in ids] == [0, 1]
    m = Message(MessageId(5, 1), b"x", properties={"a": "b"})
    assert hash(m) == hash(MessageId(5, 1)) and m.position == Position(5, 1)


# -- dispatcher parts -------------------------------------------------------------------------------


def test_delayed_tracker_orders_by_time_and_honours_the_cutoff() -> None:
    t = DelayedDeliveryTracker(tick_time_ms=1000, strict=True)
    t.add(Position(1, 2), 500, 9)
    t.add(Position(1, 1), 700)
    t.add(Position(1, 0), 900)
    assert len(t) == 3 and t.next_deliver_at() == 500
    assert t.pop_due(499) == []
    assert t.pop_due(700) == [(Position(1, 2), 9), (Position(1, 1), None)]
    assert t.remove(Position(1, 0)) and not t.remove(Position(1, 0)) and len(t) == 0
    lax = DelayedDeliveryTracker(tick_time_ms=1000, strict=False)
    assert lax.is_due(1500, 600) and not lax.is_due(1601, 600)
    lax.add(Position(2, 0), 1500)
    lax.add(Position(2, 0), 3000)  # re-adding moves it
    assert lax.pop_due(600) == [] and lax.pop_due(2000) == [(Position(2, 0), None)]
    lax.add(Position(3, 0), 1)
    lax.add(Position(3, 5), 1)
    assert lax.remove_at_most(Position(3, 1)) == 1 and Position(3, 5) in lax
    lax.clear()
    assert len(lax) == 0 and lax.next_deliver_at() is None


def test_redelivery_queue_keeps_position_order_and_key_hashes() -> None:
    q = RedeliveryQueue()
    q.add(Position(2, 0), 7)
    q.add(Position(1, 5), 7)
    q.add(Position(1, 5), 8)  # idempotent
    q.add(Position(1, 9))
    assert list(q) == [Position(1, 5), Position(1, 9), Position(2, 0)]
    assert q.first(2) == [Position(1, 5), Position(1, 9)] and q.key_hash(Position(1, 5)) == 7
    assert q.contains_hash(7)
    q.remove(Position(1, 5))
    assert q.contains_hash(7)
    assert q.remove_at_most(Position(2, 0)) == 2 and not q.contains_hash(7) and len(q) == 0
    assert not q.remove(Position(9, 9))


def test_hash_ring_moves_only_some_keys_when_a_consumer_joins() -> None:
    ring: ConsistentHashRing[str] = ConsistentHashRing(100)
    assert ring.select(5) is None
    ring.add("c1", "c1")
    keys = [sticky_key_hash(f"key-{i}") for i in range(500)]
    assert {ring.select(k) for k in keys} == {"c1"}
    ring.add("c2", "c2")
    owners = [ring.select(k) for k in keys]
    assert 100 < owners.count("c2") < 400  # both get a fair share
    ring.add("c3", "c3")
    after = [ring.select(k) for k in keys]
    assert all(a in (o, "c3") for o, a in zip(owners, after, strict=True))  # keys only move to the newcomer
    ring.remove("c3")
    assert [ring.select(k) for k in keys] == owners


def test_recently_joined_consumers_release_when_everything_before_is_acked() -> None:
    r: RecentlyJoinedConsumers[str] = RecentlyJoinedConsumers()
    r.add("c2", Position(3, 10))
    r.add("c3", Position(3, 20))
    assert r.allows("c2", Position(3, 9)) and not r.allows("c2", Position(3, 10)) and r.allows("c1", Position(9, 9))
    assert r.release(Position(3, 9)) == []
    assert r.release(Position(3, 10)) == ["c2"]
    assert r.max_read_position("c3") == Position(3, 20) and "c3" in r
    r.clear()
    assert len(r) == 0
