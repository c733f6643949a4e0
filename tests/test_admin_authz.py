"""Admin with authorization: each operation denied (403, nothing changed) and allowed; 401."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mledger import EARLIEST, ManagedLedgerFactory, PermissionDeniedError, UnauthenticatedError
from mledger.admin import Admin, Authorization, NamespaceOperation, SkipMessageIdsRequest, TopicOperation
from mledger.broker import Broker, ManualClock, MessageId, SubscriptionType

T = "persistent://public/default/orders"
P = "persistent://public/default/parts"


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    yield b
    b.close()


class World:
    """A topic, a partitioned topic, subscriptions and messages, built by a superuser."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.auth = Authorization(
            {
                "ops": {T: [TopicOperation.SKIP, TopicOperation.CANCEL_DELAYED_MESSAGE], P: ["skip"]},
                "reader": {"*": ["get_stats", "get_subscriptions", "lookup"]},
                "creator": {"public/default": [NamespaceOperation.CREATE_TOPIC, NamespaceOperation.GET_TOPICS]},
                "app": {"*": ["produce", "consume"]},
                "nobody": {},
            },
            super_user_roles=["root"],
        )
        root = self.admin("root")
        root.topics.create_topic(T)
        root.topics.create_topic(P, partitions=2)
        for topic in (T, P):
            root.topics.create_subscription(topic, "shared", EARLIEST, SubscriptionType.SHARED)
            root.topics.create_subscription(topic, "excl", EARLIEST, SubscriptionType.EXCLUSIVE)
        self.ids = root.messaging.produce(T, [b"a", b"b", b"c"], deliver_after_ms=60_000)
        self.pids = root.messaging.produce(P, [b"a", b"b"], deliver_after_ms=60_000)

    def admin(self, role: str | None) -> Admin:
        return Admin(self.broker, authorization=self.auth, role=role)

    def state(self) -> str:
        """Everything an admin call could change, as one comparable string."""
        root = self.admin("root")
        return json.dumps(
            [
                root.topics.list_topics(),
                json.loads(root.topics.internal_stats(T).to_json()),
                json.loads(root.topics.partitioned_internal_stats(P).to_json()),
            ],
            sort_keys=True,
        )


@pytest.fixture
def world(broker: Broker) -> World:
    return World(broker)


Call = Callable[[Admin, World], Any]

CALLS: dict[str, tuple[Call, TopicOperation | NamespaceOperation]] = {
    "skip_messages": (
        lambda a, w: a.topics.skip_messages(T, "shared", SkipMessageIdsRequest.of(w.ids[:1])),
        TopicOperation.SKIP,
    ),
    "skip_messages_partitioned": (
        lambda a, w: a.topics.skip_messages(P, "shared", SkipMessageIdsRequest.of(w.pids[:1])),
        TopicOperation.SKIP,
    ),
    "cancel_delayed_message": (
        lambda a, w: a.topics.cancel_delayed_message(T, w.ids[1].ledger_id, w.ids[1].entry_id),
        TopicOperation.CANCEL_DELAYED_MESSAGE,
    ),
    "skip": (lambda a, w: a.topics.skip(T, "shared", 1), TopicOperation.SKIP),
    "clear_backlog": (lambda a, w: a.topics.clear_backlog(T, "shared"), TopicOperation.SKIP),
    "reset_cursor": (lambda a, w: a.topics.reset_cursor(T, "shared", w.ids[2].position), TopicOperation.RESET_CURSOR),
    "internal_stats": (lambda a, w: a.topics.internal_stats(T), TopicOperation.GET_STATS),
    "partitioned_internal_stats": (lambda a, w: a.topics.partitioned_internal_stats(P), TopicOperation.GET_STATS),
    "list_subscriptions": (lambda a, w: a.topics.list_subscriptions(T), TopicOperation.GET_SUBSCRIPTIONS),
    "create_subscription": (lambda a, w: a.topics.create_subscription(T, "new"), TopicOperation.SUBSCRIBE),
    "delete_subscription": (lambda a, w: a.topics.delete_subscription(T, "excl"), TopicOperation.UNSUBSCRIBE),
    "metadata": (lambda a, w: a.topics.partitioned_topic_metadata(P), TopicOperation.LOOKUP),
    "create_topic": (lambda a, w: a.topics.create_topic("fresh"), NamespaceOperation.CREATE_TOPIC),
    "delete_topic": (lambda a, w: a.topics.delete_topic(T), NamespaceOperation.DELETE_TOPIC),
    "list_topics_ns": (lambda a, w: a.topics.list_topics("public/default"), NamespaceOperation.GET_TOPICS),
    "list_partitioned_ns": (
        lambda a, w: a.topics.list_partitioned_topics("public/default"), NamespaceOperation.GET_TOPICS
    ),
    "produce": (lambda a, w: a.messaging.produce(T, [b"x"]), TopicOperation.PRODUCE),
    "consume": (lambda a, w: a.messaging.consume(T, "shared", "Shared", max_messages=0), TopicOperation.CONSUME),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_denied_call_is_403_and_changes_nothing(world: World, name: str) -> None:
    call, operation = CALLS[name]
    before = world.state()
    with pytest.raises(PermissionDeniedError) as info:
        call(world.admin("nobody"), world)
    assert info.value.http_status == 403
    kind = "Namespace" if isinstance(operation, NamespaceOperation) else "Topic"
    assert str(info.value).startswith(f"Unauthorized to validate{kind}Operation for operation [{operation.value}]")
    assert world.state() == before


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unauthenticated_call_is_401_and_changes_nothing(world: World, name: str) -> None:
    call, _ = CALLS[name]
    before = world.state()
    for role in (None, ""):
        with pytest.raises(UnauthenticatedError) as info:
            call(world.admin(role), world)
        assert info.value.http_status == 401
        assert str(info.value) == "Need to authenticate to perform the request"
    assert world.state() == before


@pytest.mark.parametrize("name", sorted(CALLS))
def test_superuser_may_do_everything(broker: Broker, name: str) -> None:
    call, _ = CALLS[name]
    world = World(broker)
    call(world.admin("root"), world)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("role", [None, "nobody"])
def test_authorization_off_by_default(name: str, role: str | None) -> None:
    call, _ = CALLS[name]
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    world = World(broker)
    call(Admin(broker, role=role), world)  # no authorization: allowed, whatever the role
    broker.close()


def test_granted_roles(world: World) -> None:
    ops = world.admin("ops")
    ops.topics.skip_messages(T, "shared", SkipMessageIdsRequest.of(world.ids[:1]))
    result = ops.topics.cancel_delayed_message(T, world.ids[1].ledger_id, world.ids[1].entry_id)
    assert result.results == {"excl": False, "shared": True}
    ops.topics.skip_messages(P, "shared", SkipMessageIdsRequest.of(world.pids[:1]))
    # a partition inherits its parent's grants
    partition = f"{P}-partition-{world.pids[1].partition}"
    ops.topics.skip_messages(partition, "shared", SkipMessageIdsRequest.of(world.pids[1:]))
    # ...but the grant is per operation and per topic
    with pytest.raises(PermissionDeniedError):
        ops.topics.cancel_delayed_message(P, world.pids[0].ledger_id, world.pids[0].entry_id)
    with pytest.raises(PermissionDeniedError):
        ops.topics.reset_cursor(T, "shared", EARLIEST)
    with pytest.raises(PermissionDeniedError):
        ops.topics.internal_stats(T)
    reader = world.admin("reader")
    stats = reader.topics.internal_stats(T)
    # the skip of ids[0] and the cancel of ids[1] moved the mark-delete over both
    assert stats.cursors["shared"].mark_delete_position == str(world.ids[1].position)
    assert stats.cursors["excl"].mark_delete_position == f"{world.ids[0].ledger_id}:-1"
    assert reader.topics.list_subscriptions(P) == ["excl", "shared"]
    assert reader.topics.partitioned_topic_metadata(P).partitions == 2
    world.broker.clock.advance(120_000)  # type: ignore[attr-defined]
    app = world.admin("app")
    assert [m.data for m in app.messaging.consume(T, "shared", "Shared", max_messages=0)] == [b"c"]
    assert [m.data for m in app.messaging.consume(P, "shared", "Shared", max_messages=0)] == []


def test_list_topics_leaves_out_namespaces_the_role_may_not_list(world: World) -> None:
    with pytest.raises(PermissionDeniedError):
        world.admin("creator").namespaces.create("acme/prod")  # a superuser's change
    world.admin("root").tenants.create("acme", {"allowedClusters": ["standalone"]})
    world.admin("root").namespaces.create("acme/prod")
    world.admin("root").topics.create_topic("acme/prod/x")
    everything = world.admin("root").topics.list_topics()
    assert "persistent://acme/prod/x" in everything
    assert world.admin("creator").topics.list_topics() == [T, P]
    assert world.admin("creator").topics.list_partitioned_topics() == [P]
    assert world.admin("nobody").topics.list_topics() == []
    for role in (None, ""):
        with pytest.raises(UnauthenticatedError):
            world.admin(role).topics.list_topics()
        with pytest.raises(UnauthenticatedError):
            world.admin(role).topics.list_partitioned_topics()
    with pytest.raises(PermissionDeniedError):
        world.admin("creator").topics.list_topics("acme/prod")
    with pytest.raises(PermissionDeniedError):
        world.admin("creator").topics.list_partitioned_topics("acme/prod")
    assert world.admin("creator").topics.create_topic("fresh") == "persistent://public/default/fresh"
    with pytest.raises(PermissionDeniedError):
        world.admin("creator").topics.create_topic("acme/prod/y")


def test_as_role_switches_the_caller(world: World) -> None:
    nobody = world.admin("nobody")
    with pytest.raises(PermissionDeniedError):
        nobody.topics.internal_stats(T)
    assert nobody.as_role("reader").topics.internal_stats(T).last_confirmed_entry
    assert nobody.may(TopicOperation.SKIP, T) is False
    assert nobody.as_role("ops").may(TopicOperation.SKIP, T) is True


def test_bad_requests_are_400_before_authorization(world: World) -> None:
    # Pulsar validates the topic name (and the body) before it authorizes
    with pytest.raises(Exception) as info:
        world.admin("nobody").topics.skip("a/b", "s", 1)
    assert getattr(info.value, "http_status", None) == 400
    with pytest.raises(Exception) as info:
        world.admin("nobody").topics.skip_messages(T, "shared", "")
    assert getattr(info.value, "http_status", None) == 400
    with pytest.raises(Exception) as info:
        world.admin(None).topics.cancel_delayed_message(T, -1, 0)
    assert getattr(info.value, "http_status", None) == 412


def test_denied_cancel_leaves_the_message_deliverable(world: World) -> None:
    target: MessageId = world.ids[0]
    with pytest.raises(PermissionDeniedError):
        world.admin("reader").topics.cancel_delayed_message(T, target.ledger_id, target.entry_id)
    world.broker.clock.advance(120_000)  # type: ignore[attr-defined]
    assert [m.data for m in Admin(world.broker).messaging.consume(T, "shared", "Shared", max_messages=0)] == [
        b"a", b"b", b"c",
    ]


def test_topic_list_needs_namespace_level_produce_or_consume(broker: Broker) -> None:
    """Pulsar's GET_TOPICS rule (apache/pulsar#12600): a namespace-level PRODUCE or CONSUME grant
    (or "*") lists the namespace; grants on single topics do not, and the refusal names no topic."""
    auth = Authorization(
        {
            "topic-only": {T: ["produce", "consume", "get_stats"]},
            "consumer": {"public/default": ["consume"]},
            "producer": {"*": ["produce"]},
        },
        super_user_roles=["root"],
    )
    Admin(broker, auth, "root").topics.create_topic(T)
    for role in ("consumer", "producer", "root"):
        assert Admin(broker, auth, role).topics.list_topics("public/default") == [T]
        assert auth.is_allowed(role, NamespaceOperation.GET_TOPICS, "public/default")
    assert not auth.is_allowed("consumer", NamespaceOperation.GET_TOPICS, "acme/prod")
    with pytest.raises(PermissionDeniedError) as info:
        Admin(broker, auth, "topic-only").topics.list_topics("public/default")
    assert T not in str(info.value)
    assert Admin(broker, auth, "topic-only").topics.list_topics() == []
    # an implied GET_TOPICS allows nothing else on the namespace
    assert not auth.is_allowed("consumer", NamespaceOperation.CREATE_TOPIC, "public/default")
