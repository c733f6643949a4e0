"""Broker, topics and producers: creation, lookup, listing, deletion, restart, publish metadata,
partition routing, producer names and sequence ids, and the deduplication hook."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mledger import (
    ConfigError,
    EntryMetadata,
    EntryTooLargeError,
    InvalidRequestError,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    NotFoundError,
    Position,
    SqliteStore,
)
from mledger.broker import (
    SUBSCRIPTION_TYPE_PROPERTY,
    AlreadyClosedError,
    BatchMessageIds,
    Broker,
    BrokerConfig,
    DedupVerdict,
    InitialPosition,
    ManualClock,
    MessageDupUnknownError,
    MessageId,
    NamespaceNotFoundError,
    PartitionedProducer,
    PartitionedTopic,
    ProducerBusyError,
    PublishContext,
    RetentionPolicies,
    SubscriptionBusyError,
    SubscriptionType,
    Topic,
    TopicAlreadyExistsError,
    TopicBusyError,
)
from mledger.broker._hashing import java_string_hash
from mledger.codec import decode_batch
from mledger.storage import FaultInjectingStore, InjectedFault, MemoryStore

EARLIEST = InitialPosition.EARLIEST
T = "persistent://public/default/orders"


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    yield b
    b.close()


# -- topics -------------------------------------------------------------------------------------


def test_create_get_and_list_topics(broker: Broker) -> None:
    t = broker.create_topic("orders")
    assert isinstance(t, Topic) and t.name == T and t.partition_index == -1
    assert t.managed_ledger.name == "public/default/persistent/orders"
    broker.ensure_namespace("acme/prod")
    p = broker.create_topic("acme/prod/pay", partitions=3)
    assert isinstance(p, PartitionedTopic) and p.num_partitions == 3
    assert [x.managed_ledger.name for x in p.partitions] == [
        f"acme/prod/persistent/pay-partition-{i}" for i in range(3)
    ]
    assert broker.get_topic(T) is t
    assert broker.get_topic("persistent://acme/prod/pay-partition-1") is p.partitions[1]
    assert broker.partitioned_topic_metadata("acme/prod/pay") == 3
    assert broker.partitioned_topic_metadata("orders") == 0
    assert broker.list_topics() == ["persistent://acme/prod/pay", T]
    assert broker.list_topics(namespace="public/default") == [T]
    assert broker.list_topics(include_partitions=True) == [
        "persistent://acme/prod/pay",
        *(f"persistent://acme/prod/pay-partition-{i}" for i in range(3)),
        T,
    ]
    assert broker.list_partitioned_topics() == ["persistent://acme/prod/pay"]
    assert broker.topic_exists("orders") and not broker.topic_exists("nope")
    assert p.partition(2) is p.partitions[2]
    with pytest.raises(NotFoundError, match="partition 3"):
        p.partition(3)


def test_create_topic_errors(broker: Broker) -> None:
    broker.create_topic("orders")
    broker.create_topic("pay", partitions=2)
    for name, parts in (("orders", 0), ("orders", 2), ("pay", 0), ("pay", 3)):
        with pytest.raises(TopicAlreadyExistsError, match="already exists") as info:
            broker.create_topic(name, partitions=parts)
        assert info.value.http_status == 409
    with pytest.raises(InvalidRequestError, match="-partition-"):
        broker.create_topic("x-partition-0", partitions=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(InvalidRequestError, match="number of partitions"):
            broker.create_topic("y", partitions=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        broker.create_topic("non-persistent://a/b/c")


def test_topics_are_created_only_in_namespaces_that_exist(broker: Broker) -> None:
    # Pulsar: auto topic creation makes topics, never tenants or namespaces; explicit creation
    # in a missing namespace is 404 "Namespace does not exist". public/default exists from the start.
    assert broker.namespace_exists("public/default") and broker.list_namespaces() == ["public/default"]
    calls = {
        "create_topic": lambda t: broker.create_topic(t),
        "create_partitioned": lambda t: broker.create_topic(t, partitions=2),
        "producer": lambda t: broker.create_producer(t),
        "subscribe": lambda t: broker.subscribe(t, "s"),
        "open_topic": lambda t: broker.open_topic(t),
        "open_partition": lambda t: broker.open_partition(t, 0),
        "lookup": lambda t: broker.check_topic_namespace(t),
        "auto_creation": lambda t: broker.check_auto_creation(t),
    }
    for what, call in calls.items():
        with pytest.raises(NamespaceNotFoundError, match="Namespace does not exist: acme/prod") as info:
            call(f"persistent://acme/prod/{what}")
        assert info.value.http_status == 404, what
    policy_calls = {
        "set_retention": lambda: broker.set_namespace_retention("acme/prod", RetentionPolicies(60, 10)),
        "get_retention": lambda: broker.namespace_retention("acme/prod"),
        "set_deduplication": lambda: broker.set_namespace_deduplication("acme/prod", True),
        "get_deduplication": lambda: broker.namespace_deduplication("acme/prod"),
    }
    for policy_call in policy_calls.values():  # Pulsar: 404, not a namespace made by a policy
        with pytest.raises(NamespaceNotFoundError, match="Namespace does not exist: acme/prod"):
            policy_call()
    assert broker.list_topics() == [] and broker.list_namespaces() == ["public/default"]
    broker.ensure_namespace("acme/prod")
    for policy_call in policy_calls.values():
        policy_call()
    for what, call in calls.items():
        call(f"persistent://acme/prod/{what}")
    assert broker.list_namespaces() == ["acme/prod", "public/default"]
    broker.delete_namespace("public/default")  # it may go, as in Pulsar
    with pytest.raises(NamespaceNotFoundError):
        broker.create_producer("orders")


def test_a_namespace_holding_topics_without_a_policies_node_exists(broker: Broker) -> None:
    # Data directories of mledger versions that created namespaces with their first topic.
    broker.ensure_namespace("acme/prod")
    broker.create_topic("acme/prod/old")
    broker.create_topic("acme/prod/pay", partitions=2)
    broker.namespaces.delete("acme/prod")  # what such a directory looks like
    assert broker.namespace_exists("acme/prod") and "acme/prod" in broker.list_namespaces()
    broker.create_producer("acme/prod/new").close()
    broker.delete_topic("acme/prod/old")
    broker.delete_topic("acme/prod/pay")
    broker.delete_topic("acme/prod/new")
    assert not broker.namespace_exists("acme/prod")
    with pytest.raises(NamespaceNotFoundError):
        broker.create_producer("acme/prod/new")


def test_get_unknown_topic_and_partition_is_404(broker: Broker) -> None:
    broker.create_topic("pay", partitions=2)
    for name in ("nope", "pay-partition-2", "nope-partition-0"):
        with pytest.raises(NotFoundError, match="not found") as info:
            broker.get_topic(name)
        assert info.value.http_status == 404
    with pytest.raises(NotFoundError):
        broker.get_subscription("pay", "sub")


def test_auto_creation_and_its_switch() -> None:
    b = Broker(ManagedLedgerFactory(), BrokerConfig(allow_auto_topic_creation=False))
    with pytest.raises(NotFoundError, match="automatic topic creation is off"):
        b.create_producer("orders")
    with pytest.raises(NotFoundError):
        b.subscribe("orders", "s")
    a = Broker(ManagedLedgerFactory())
    a.create_producer("orders")
    assert a.list_topics() == [T]
    with pytest.raises(NotFoundError, match="partitions are created"):
        a.subscribe("other-partition-0", "s")


def test_delete_topic(broker: Broker) -> None:
    broker.create_topic("pay", partitions=2)
    producer = broker.create_producer("pay")
    with pytest.raises(TopicBusyError) as info:
        broker.delete_topic("pay")
    assert info.value.http_status == 412
    with pytest.raises(InvalidRequestError, match="is a partition"):
        broker.delete_topic("pay-partition-0")
    broker.delete_topic("pay", force=True)
    assert producer.is_closed and broker.list_topics() == [] and broker.factory.list_managed_ledgers() == []
    with pytest.raises(NotFoundError):
        broker.delete_topic("pay")
    broker.create_topic("pay", partitions=1)  # the name is free again
    t = broker.create_topic("orders")
    t.subscribe("s", SubscriptionType.SHARED).add_consumer()
    with pytest.raises(TopicBusyError):
        broker.delete_topic("orders")
    broker.delete_topic("orders", force=True)
    assert not broker.topic_exists("orders")


def test_closed_broker_refuses_work(broker: Broker) -> None:
    t = broker.create_topic("orders")
    producer = broker.create_producer("orders")
    broker.close()
    broker.close()  # idempotent
    assert broker.is_closed and t.is_closed and broker.run_due_tasks() == 0
    for call in (lambda: broker.get_topic("orders"), lambda: broker.create_topic("x"), broker.list_topics):
        with pytest.raises(AlreadyClosedError):
            call()
    with pytest.raises(AlreadyClosedError, match="producer"):
        producer.send(b"x")
    with pytest.raises(AlreadyClosedError, match="topic"):
        t.subscribe("s")


def test_broker_rejects_bad_construction() -> None:
    with pytest.raises(ConfigError):
        Broker("factory")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Broker(ManagedLedgerFactory(), config={"x": 1})  # type: ignore[arg-type]


def test_topics_subscriptions_and_types_survive_a_restart(tmp_path: Path) -> None:
    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"))
    b = Broker(factory, clock=ManualClock(0))
    b.create_topic("pay", partitions=2)
    b.subscribe("pay", "ks", SubscriptionType.KEY_SHARED, EARLIEST)
    b.subscribe("orders", "fo", SubscriptionType.FAILOVER)
    b.subscribe("orders", "sh", "Shared")
    b.close()
    factory.close()

    factory = ManagedLedgerFactory(SqliteStore(tmp_path / "data"))
    b = Broker(factory, clock=ManualClock(0))
    assert b.list_topics() == [T, "persistent://public/default/pay"]
    assert b.get_subscription("pay", "ks").type is SubscriptionType.KEY_SHARED
    topic = b.get_topic("orders")
    assert isinstance(topic, Topic) and topic.subscription_names() == ["fo", "sh"]
    assert topic.get_subscription("fo").type is SubscriptionType.FAILOVER
    assert topic.get_subscription("sh").cursor.cursor_properties[SUBSCRIPTION_TYPE_PROPERTY] == "Shared"
    b.close()
    factory.close()


def test_cursors_without_a_type_or_of_the_system_are_handled(broker: Broker) -> None:
    ml = broker.factory.open("public/default/persistent/raw")
    ml.open_cursor("plain")
    ml.open_cursor("odd", cursor_properties={SUBSCRIPTION_TYPE_PROPERTY: "Broadcast"})
    ml.open_cursor("pulsar.dedup")
    ml.open_cursor("pulsar.repl.east")
    topic = broker.get_topic("raw")
    assert isinstance(topic, Topic)
    assert topic.subscription_names() == ["odd", "plain"]
    assert topic.get_subscription("plain").type is SubscriptionType.EXCLUSIVE
    assert topic.get_subscription("odd").type is SubscriptionType.EXCLUSIVE
    for reserved in ("pulsar.dedup", "pulsar.repl.west"):
        with pytest.raises(InvalidRequestError, match="reserved"):
            topic.subscribe(reserved)


# -- subscriptions on topics --------------------------------------------------------------------


def test_subscribe_defaults_and_type_changes(broker: Broker) -> None:
    producer = broker.create_producer("orders")
    producer.send(b"before")
    sub = broker.subscribe("orders", "s")  # Pulsar's defaults: Exclusive, Latest
    assert sub.type is SubscriptionType.EXCLUSIVE and sub.backlog() == 0
    assert broker.subscribe("orders", "s", SubscriptionType.SHARED) is sub
    assert sub.type is SubscriptionType.SHARED
    sub.add_consumer("c")
    with pytest.raises(SubscriptionBusyError, match="different type"):
        broker.subscribe("orders", "s", SubscriptionType.FAILOVER)
    for bad in ("", "a/b", 5):
        with pytest.raises(InvalidRequestError):
            broker.subscribe("orders", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="initial position"):
        broker.subscribe("orders", "x", "Shared", "earliest")  # type: ignore[arg-type]


def test_unsubscribe(broker: Broker) -> None:
    sub = broker.subscribe("orders", "s", SubscriptionType.SHARED)
    consumer = sub.add_consumer()
    with pytest.raises(SubscriptionBusyError, match="active connected consumers"):
        sub.unsubscribe()
    consumer.close()
    broker.unsubscribe("orders", "s")
    assert broker.get_topic("orders").subscription_names() == []  # type: ignore[union-attr]
    assert broker.get_topic("orders").managed_ledger.cursor_names() == []  # type: ignore[union-attr]
    with pytest.raises(NotFoundError, match="'s' not found"):
        broker.unsubscribe("orders", "s")
    ps = broker.subscribe("pay-topic", "x")
    ps.unsubscribe()
    broker.create_topic("pay", partitions=2)
    psub = broker.subscribe("pay", "x", SubscriptionType.SHARED)
    psub.unsubscribe()
    with pytest.raises(NotFoundError):
        broker.get_subscription("pay", "x")
    with pytest.raises(NotFoundError):
        broker.unsubscribe("pay", "x")


# -- producers ----------------------------------------------------------------------------------


def test_send_writes_pulsars_metadata(broker: Broker) -> None:
    producer = broker.create_producer("orders", "p1")
    broker.clock.advance(500)  # type: ignore[attr-defined]
    mid = producer.send(b"hello", key="k", deliver_at_ms=9_000, properties={"a": "1"})
    assert mid == MessageId(mid.ledger_id, 0) and mid.partition == -1
    entry = broker.get_topic("orders").managed_ledger.read_entry(mid.position)  # type: ignore[union-attr]
    assert entry.data == b"hello"
    assert entry.metadata == EntryMetadata(
        producer_name="p1", sequence_id=0, publish_time_ms=1_500, partition_key="k",
        deliver_at_ms=9_000, properties={"a": "1"},
    )
    assert producer.last_sequence_id == 0


def test_send_batch_writes_one_entry_with_batch_indexes(broker: Broker) -> None:
    producer = broker.create_producer("orders", "p1")
    ids = producer.send_batch([b"a", bytearray(b"b"), memoryview(b"c")], key="k", properties={"x": "y"})
    assert isinstance(ids, BatchMessageIds) and len(ids) == 3
    assert [(m.batch_index, m.batch_size) for m in ids] == [(0, 3), (1, 3), (2, 3)]
    assert len({m.position for m in ids}) == 1
    entry = broker.get_topic("orders").managed_ledger.read_entry(ids.position)  # type: ignore[union-attr]
    md = entry.metadata
    assert (md.num_messages, md.sequence_id, md.highest_sequence_id, md.partition_key) == (3, 0, 2, "k")
    singles = decode_batch(entry.data, 3)
    assert [(s.payload, s.key, s.sequence_id, s.properties) for s in singles] == [
        (b"a", "k", 0, (("x", "y"),)), (b"b", "k", 1, (("x", "y"),)), (b"c", "k", 2, (("x", "y"),)),
    ]
    assert producer.last_sequence_id == 2
    one = producer.send_batch([b"solo"])  # a one-message batch is a plain message
    assert len(one) == 1 and one[0].batch_index == -1 and producer.last_sequence_id == 3


def test_sequence_ids(broker: Broker) -> None:
    p = broker.create_producer("orders", initial_sequence_id=9)
    assert p.last_sequence_id == 9
    p.send(b"a")
    p.send(b"b", sequence_id=100)  # explicit ids do not move the generator
    p.send(b"c")
    ml = broker.get_topic("orders").managed_ledger  # type: ignore[union-attr]
    assert [e.metadata.sequence_id for e in ml.read_range(ml.current_ledger_id, 0, 2)] == [10, 100, 11]
    assert p.last_sequence_id == 100


def test_producer_names_are_generated_unique_and_checked_per_topic(broker: Broker) -> None:
    a = broker.create_producer("orders")
    b = broker.create_producer("other")
    assert a.name != b.name and a.name.startswith("standalone-")
    broker.create_producer("orders", "fixed")
    with pytest.raises(ProducerBusyError, match="'fixed' is already connected") as info:
        broker.create_producer("orders", "fixed")
    assert info.value.http_status == 409
    broker.create_producer("other", "fixed")  # another topic is fine
    topic = broker.get_topic("orders")
    assert sorted(p.name for p in topic.producers) == sorted([a.name, "fixed"])  # type: ignore[union-attr]
    a.close()
    a.close()
    assert a.is_closed and broker.create_producer("orders", a.name).name == a.name


def test_generated_names_stay_unique_across_restarts(tmp_path: Path) -> None:
    names = []
    for _ in range(2):
        factory = ManagedLedgerFactory(SqliteStore(tmp_path / "d"))
        b = Broker(factory)
        names.append(b.create_producer("orders").name)
        b.close()
        factory.close()
    assert names[0] != names[1]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: p.send("text"), "payload of type str"),
        (lambda p: p.send(b"x", key=5), "invalid key 5"),
        (lambda p: p.send(b"x", deliver_at_ms="soon"), "deliver_at_ms 'soon'"),
        (lambda p: p.send(b"x", deliver_at_ms=True), "deliver_at_ms True"),
        (lambda p: p.send(b"x", sequence_id=-1), "sequence_id -1"),
        (lambda p: p.send(b"x", properties={"a": 1}), "property"),
        (lambda p: p.send_batch([]), "empty batch"),
        (lambda p: p.send_batch(b"abc"), "list of payloads"),
        (lambda p: p.send_batch([b"a", 3]), "payload of type int"),
    ],
)
def test_send_errors_name_the_bad_value(broker: Broker, call, message: str) -> None:  # type: ignore[no-untyped-def]
    p = broker.create_producer("orders")
    with pytest.raises(InvalidRequestError, match=message) as info:
        call(p)
    assert info.value.http_status == 400
    assert p.last_sequence_id == -1


def test_producer_argument_errors(broker: Broker) -> None:
    bad: list[dict[str, object]] = [
        {"producer_name": ""}, {"producer_name": 3}, {"initial_sequence_id": -2}, {"initial_sequence_id": "1"},
    ]
    for kwargs in bad:
        with pytest.raises(InvalidRequestError):
            broker.create_producer("orders", **kwargs)  # type: ignore[arg-type]


def test_oversized_entry_is_refused_and_nothing_written() -> None:
    factory = ManagedLedgerFactory()
    factory.store.max_entry_size = 100
    b = Broker(factory)
    p = b.create_producer("orders")
    with pytest.raises(EntryTooLargeError):
        p.send(b"x" * 200)
    assert b.get_topic("orders").managed_ledger.number_of_entries() == 0  # type: ignore[union-attr]


def test_partitioned_producer_routes_by_key_else_round_robin(broker: Broker) -> None:
    broker.create_topic("pay", partitions=3)
    p = broker.create_producer("pay", "pp")
    assert isinstance(p, PartitionedProducer) and [x.topic for x in p.producers] == [
        f"persistent://public/default/pay-partition-{i}" for i in range(3)
    ]
    assert [p.send(b"x").partition for _ in range(4)] == [0, 1, 2, 0]
    for key in ("alpha", "beta", "gamma", "k1"):
        expected = java_string_hash(key) % 3
        assert {p.send(b"x", key=key).partition for _ in range(3)} == {expected}
        assert p.send_batch([b"a", b"b"], key=key).partition == expected
    assert p.last_sequence_id >= 0
    with pytest.raises(InvalidRequestError):
        p.send(b"x", key=1)  # type: ignore[arg-type]
    p.close()
    assert p.is_closed
    with pytest.raises(ProducerBusyError):
        broker.create_producer("pay", "pp2") and broker.create_producer("pay", "pp2")


def test_partitioned_producer_async_verbs_refuse_through_the_future(broker: Broker) -> None:
    """A partitioned producer's asynchronous sends route like the blocking ones; a message
    that cannot be routed fails its future (nothing raised) and does not move the round-robin."""
    broker.create_topic("pay", partitions=2)
    p = broker.create_producer("pay", "pp")
    bad = p.send_async(b"x", sequence_id=-1)
    bad_batch = p.send_batch_async([b"a", b"b"], key=1)  # type: ignore[arg-type]
    for future in (bad, bad_batch):
        with pytest.raises(InvalidRequestError):
            future.result(timeout=30)
    assert p.send_async(b"x").result(timeout=30).partition == 0
    ids = p.send_batch_async([b"a", b"b"]).result(timeout=30)
    assert [(m.partition, m.batch_index) for m in ids] == [(1, 0), (1, 1)]
    with pytest.raises(InvalidRequestError):
        p.send_batch([])  # routed first, refused by the partition's producer
    assert p.send(b"y").partition == 1  # the refused batch took its turn, as before
    p.close()


def test_partitioned_producer_creation_is_all_or_nothing(broker: Broker) -> None:
    t = broker.create_topic("pay", partitions=2)
    assert isinstance(t, PartitionedTopic)
    t.partitions[1].create_producer("taken")
    with pytest.raises(ProducerBusyError):
        broker.create_producer("pay", "taken")
    assert [x.name for x in t.partitions[0].producers] == []


def test_managed_ledger_config_is_applied_to_topics() -> None:
    config = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=2))
    b = Broker(ManagedLedgerFactory(), config)
    p = b.create_producer("orders")
    ids = [p.send(b"x") for _ in range(5)]
    assert len({m.ledger_id for m in ids}) == 3


# -- the deduplication hook ----------------------------------------------------------------------


class RecordingDedup:
    """A fake hook: remembers calls, answers with scripted verdicts."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        self.calls: list[tuple] = []
        self.verdicts: list[DedupVerdict] = []
        self.last = {"known": 41}

    def check(self, ctx: PublishContext) -> DedupVerdict:
        self.calls.append(("check", ctx.producer_name, ctx.sequence_id, ctx.highest_sequence_id, ctx.num_messages))
        return self.verdicts.pop(0) if self.verdicts else DedupVerdict.NOT_DUPLICATE

    def record_persisted(self, ctx: PublishContext, position: Position) -> None:
        self.calls.append(("persisted", ctx.sequence_id, position))

    def record_failed(self, ctx: PublishContext) -> None:
        self.calls.append(("failed", ctx.sequence_id))

    def producer_added(self, name: str) -> None:
        self.calls.append(("added", name))

    def producer_removed(self, name: str) -> None:
        self.calls.append(("removed", name))

    def last_sequence_id(self, name: str) -> int:
        return self.last.get(name, -1)

    def take_snapshot(self) -> bool:
        self.calls.append(("snapshot",))
        return False

    def purge_inactive_producers(self) -> None:
        self.calls.append(("purge",))

    def close(self) -> None:
        self.calls.append(("close",))


def test_dedup_hook_is_consulted_before_and_told_after_each_append() -> None:
    hooks: list[RecordingDedup] = []

    def factory(topic: Topic) -> RecordingDedup:
        hooks.append(RecordingDedup(topic))
        return hooks[-1]

    clock = ManualClock(0)
    b = Broker(ManagedLedgerFactory(clock=clock), dedup_factory=factory, clock=clock)
    p = b.create_producer("orders", "known")
    hook = hooks[0]
    assert hook.topic.name == T and p.last_sequence_id == 41  # continues from the hook's knowledge
    mid = p.send(b"a")
    assert mid.entry_id == 0
    hook.verdicts = [DedupVerdict.DUPLICATE]
    assert p.send(b"again", sequence_id=42) == MessageId(-1, -1)
    hook.verdicts = [DedupVerdict.UNKNOWN]
    with pytest.raises(MessageDupUnknownError, match="Cannot determine whether the message is a duplicate"):
        p.send(b"x")
    ids = p.send_batch([b"b", b"c"])
    assert hook.calls == [
        ("added", "known"),
        ("check", "known", 42, 42, 1),
        ("persisted", 42, mid.position),
        ("check", "known", 42, 42, 1),
        ("check", "known", 43, 43, 1),
        ("check", "known", 44, 45, 2),
        ("persisted", 44, ids.position),
    ]
    assert b.get_topic("orders").managed_ledger.number_of_entries() == 2  # type: ignore[union-attr]
    hook.verdicts = [DedupVerdict.DUPLICATE]
    assert list(p.send_batch([b"d", b"e"])) == [MessageId(-1, -1)]
    b.timers.advance(120 * 60_000)  # the broker's timers: snapshots every 120 s, purges every 120 min
    assert hook.calls.count(("snapshot",)) == 60 and hook.calls.count(("purge",)) == 1
    p.close()
    b.close()
    assert hook.calls[-2:] == [("removed", "known"), ("close",)]


def test_dedup_hook_hears_of_failed_appends() -> None:
    hooks: list[RecordingDedup] = []
    factory = ManagedLedgerFactory(FaultInjectingStore(MemoryStore(max_entry_size=100)))

    def make_hook(topic: Topic) -> RecordingDedup:
        hooks.append(RecordingDedup(topic))
        return hooks[-1]

    b = Broker(factory, dedup_factory=make_hook)
    p = b.create_producer("orders", "p")
    # Pulsar checks the size before deduplication (isExceedMaximumMessageSize, then
    # isDuplicate): an oversized message is refused without the hook hearing of it.
    with pytest.raises(EntryTooLargeError):
        p.send(b"x" * 500)
    assert hooks[0].calls == [("added", "p")]
    store = factory.store
    assert isinstance(store, FaultInjectingStore)
    store.fail_at = store.writes  # the next write: the append
    with pytest.raises(InjectedFault):
        p.send(b"y")
    assert hooks[0].calls[-2:] == [("check", "p", 1, 1, 1), ("failed", 1)]
    assert p.send(b"z").entry_id == 0  # later writes work normally


def test_dedup_defaults() -> None:
    from mledger.broker import DedupStatus, MessageDeduplication

    b = Broker(ManagedLedgerFactory())
    topic = b.create_topic("orders")
    dedup = topic.deduplication  # type: ignore[union-attr]
    assert isinstance(dedup, MessageDeduplication)
    assert dedup.stats().status is DedupStatus.DISABLED
    assert "pulsar.dedup" not in topic.managed_ledger.cursor_names()  # type: ignore[union-attr]
