"""Admin.topics: every operation, every error path with its status and message, fan-out."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mledger import (
    EARLIEST,
    LATEST,
    ConfigError,
    InvalidPositionError,
    InvalidRequestError,
    ManagedLedgerFactory,
    MLedgerError,
    NotAllowedError,
    NotFoundError,
    Position,
    PreconditionFailedError,
)
from mledger.admin import (
    PAYLOAD_ERROR_PREFIX,
    Admin,
    Authorization,
    CancelDelayedMessageResult,
    PartitionedTopicInternalStats,
    PersistentTopicInternalStats,
    SkipMessageIdsRequest,
    SubscriptionAlreadyExistsError,
)
from mledger.broker import (
    Broker,
    InitialPosition,
    InvalidNameError,
    ManualClock,
    MessageId,
    SubscriptionBusyError,
    SubscriptionType,
    TopicAlreadyExistsError,
)

T = "persistent://public/default/orders"
P = "persistent://public/default/parts"
SHARED = SubscriptionType.SHARED


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    yield b
    b.close()


@pytest.fixture
def admin(broker: Broker) -> Admin:
    return Admin(broker)


def status(call, *args, **kwargs) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(MLedgerError) as info:
        call(*args, **kwargs)
    return info.value.http_status, str(info.value)


def setup_topic(admin: Admin, topic: str = T, partitions: int = 0) -> None:
    admin.topics.create_topic(topic, partitions=partitions)
    admin.topics.create_subscription(topic, "shared", EARLIEST, SHARED)
    admin.topics.create_subscription(topic, "keyed", EARLIEST, SubscriptionType.KEY_SHARED)
    admin.topics.create_subscription(topic, "excl", EARLIEST, SubscriptionType.EXCLUSIVE)
    admin.topics.create_subscription(topic, "fail", EARLIEST, SubscriptionType.FAILOVER)


def receive_all(broker: Broker, topic: str, sub: str, sub_type: SubscriptionType = SHARED) -> list[bytes]:
    consumer = broker.subscribe(topic, sub, sub_type).add_consumer()
    out: list[bytes] = []
    while True:
        got = consumer.receive(100)
        if not got:
            break
        consumer.acknowledge(got)
        out.extend(m.data for m in got)
    consumer.close()
    return out


def backlog(broker: Broker, topic: str, sub: str) -> int:
    return broker.get_subscription(topic, sub).backlog()


# -- construction --------------------------------------------------------------------------------


def test_admin_arguments_are_checked(broker: Broker) -> None:
    with pytest.raises(ConfigError):
        Admin(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Admin(broker, authorization={"ops": {}})  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Admin(broker, role=3)  # type: ignore[arg-type]
    assert not Admin(broker).authorization_enabled
    assert "authorization off" in repr(Admin(broker))


# -- topics and subscriptions ------------------------------------------------------------------


def test_create_list_and_delete_topics(admin: Admin) -> None:
    assert admin.topics.create_topic("orders") == T
    assert admin.topics.create_topic("parts", partitions=3) == P
    with pytest.raises(NotFoundError, match="Namespace does not exist: acme/prod"):
        admin.topics.create_topic("acme/prod/x")  # Pulsar's 404: topics go in namespaces that exist
    admin.broker.ensure_namespace("acme/prod")
    assert admin.topics.create_topic("acme/prod/x") == "persistent://acme/prod/x"
    assert admin.topics.list_topics() == ["persistent://acme/prod/x", T, P]
    assert admin.topics.list_topics("public/default") == [T, P]
    assert admin.topics.list_partitioned_topics() == [P]
    assert admin.topics.list_partitioned_topics("acme/prod") == []
    assert admin.topics.partitioned_topic_metadata(P).partitions == 3
    assert admin.topics.partitioned_topic_metadata(T).partitions == 0
    admin.topics.delete_topic("acme/prod/x")
    assert admin.topics.list_topics("acme/prod") == []


@pytest.mark.parametrize(
    ("call", "code", "text"),
    [
        (lambda a: a.topics.create_topic("orders"), 409, "This topic already exists"),
        (lambda a: a.topics.create_topic("parts"), 409, "This topic already exists"),
        (lambda a: a.topics.create_topic("new-partition-1"), 400, "should not contain '-partition-'"),
        (lambda a: a.topics.create_topic("new", partitions=-1), 400, "invalid number of partitions"),
        (lambda a: a.topics.create_topic("new", partitions=True), 400, "invalid number of partitions"),
        (lambda a: a.topics.create_topic("a/b"), 400, "Invalid short topic name"),
        (lambda a: a.topics.create_topic("http://x/y/z"), 400, "only the 'persistent' domain"),
        (lambda a: a.topics.list_topics("nons"), 412, "Namespace name is not valid: 'nons'"),
        (lambda a: a.topics.list_partitioned_topics("a/b/c"), 412, "Namespace name is not valid: 'a/b/c'"),
        (lambda a: a.topics.delete_topic("nope"), 404, "not found"),
        (lambda a: a.topics.partitioned_topic_metadata("nope"), 404, "not found"),
        (lambda a: a.topics.list_subscriptions("nope"), 404, "Topic persistent://public/default/nope not found"),
        (lambda a: a.topics.internal_stats("nope"), 404, "not found"),
        (lambda a: a.topics.internal_stats("parts"), 405, "is a partitioned topic"),
        (lambda a: a.topics.partitioned_internal_stats("orders"), 404, "Partitioned Topic not found"),
        (lambda a: a.topics.partitioned_internal_stats("nope"), 404, "not found"),
    ],
)
def test_topic_errors(admin: Admin, call, code: int, text: str) -> None:  # type: ignore[no-untyped-def]
    admin.topics.create_topic("orders")
    admin.topics.create_topic("parts", partitions=2)
    got_code, message = status(call, admin)
    assert got_code == code
    assert text in message


def test_subscriptions(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    assert admin.topics.list_subscriptions("orders") == ["excl", "fail", "keyed", "shared"]
    assert broker.get_subscription(T, "keyed").type is SubscriptionType.KEY_SHARED
    admin.topics.delete_subscription("orders", "fail")
    assert admin.topics.list_subscriptions("orders") == ["excl", "keyed", "shared"]
    code, message = status(admin.topics.create_subscription, "orders", "shared")
    assert (code, message) == (409, f"Subscription already exists for topic: 'shared' on {T}")
    assert status(admin.topics.create_subscription, "nope", "s")[0] == 404
    assert status(admin.topics.create_subscription, "orders", "s", subscription_type="Broadcast")[0] == 400
    assert status(admin.topics.create_subscription, "orders", "a/b")[0] == 400
    assert status(admin.topics.create_subscription, "orders", "s", position="3:4")[0] == 400
    assert status(admin.topics.delete_subscription, "orders", "nope")[0] == 404
    consumer = broker.get_subscription(T, "shared").add_consumer()
    code, _ = status(admin.topics.delete_subscription, "orders", "shared")
    assert code == 412
    consumer.close()
    assert isinstance(SubscriptionBusyError("x"), PreconditionFailedError)


def test_create_subscription_positions(admin: Admin, broker: Broker) -> None:
    admin.topics.create_topic("orders")
    producer = broker.create_producer(T)
    ids = [producer.send(f"m{i}".encode()) for i in range(4)]
    admin.topics.create_subscription("orders", "latest", subscription_type="Shared")
    admin.topics.create_subscription("orders", "earliest", EARLIEST, "Shared")
    admin.topics.create_subscription("orders", "from2", ids[2].position, "Shared")
    admin.topics.create_subscription("orders", "from1", ids[1], "Shared")
    admin.topics.create_subscription("orders", "mid-latest", MessageId.LATEST, "Shared")
    admin.topics.create_subscription("orders", "mid-earliest", MessageId.EARLIEST, "Shared")
    producer.send(b"m4")
    assert receive_all(broker, T, "latest") == [b"m4"]
    assert receive_all(broker, T, "earliest") == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert receive_all(broker, T, "from2") == [b"m2", b"m3", b"m4"]
    assert receive_all(broker, T, "from1") == [b"m1", b"m2", b"m3", b"m4"]
    assert receive_all(broker, T, "mid-latest") == [b"m4"]
    assert receive_all(broker, T, "mid-earliest") == [b"m0", b"m1", b"m2", b"m3", b"m4"]


# -- internal stats ------------------------------------------------------------------------------


def test_internal_stats_fields(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    ids = [producer.send(f"m{i}".encode()) for i in range(6)]
    admin.topics.skip_messages("orders", "shared", SkipMessageIdsRequest.of([ids[1], ids[2], ids[4]]))
    stats = admin.topics.internal_stats("orders")
    assert isinstance(stats, PersistentTopicInternalStats)
    data = json.loads(stats.to_json())
    assert data["entriesAddedCounter"] == 6 and data["numberOfEntries"] == 6
    assert data["lastConfirmedEntry"] == str(ids[5].position)
    assert data["state"] == "LedgerOpened"
    # Pulsar lists the open ledger with entries and size 0; its figures are the current ones.
    assert [(li["entries"], li["size"]) for li in data["ledgers"]] == [(0, 0)]
    assert data["currentLedgerEntries"] == 6
    assert data["totalSize"] == data["currentLedgerSize"] > 6 * len(b"m0")
    assert set(data["cursors"]) == {"shared", "keyed", "excl", "fail"}
    cursor = data["cursors"]["shared"]
    ledger = ids[0].ledger_id
    assert cursor["markDeletePosition"] == f"{ledger}:-1"
    assert cursor["readPosition"] == f"{ledger}:0"
    assert cursor["individuallyDeletedMessages"] == f"[({ledger}:0..{ledger}:2],({ledger}:3..{ledger}:4]]"
    assert cursor["totalNonContiguousDeletedMessagesRange"] == 2
    assert cursor["numberOfEntriesInBacklog"] == 3
    assert cursor["messagesConsumedCounter"] == 3
    assert cursor["properties"] == {}
    assert cursor["state"] == "Open"
    for key in (
        "numberOfEntriesSinceFirstNotAckedMessage", "cursorLedger", "cursorLedgerLastEntry", "waitingReadOp",
        "pendingReadOps", "lastLedgerSwitchTimestamp", "subscriptionHavePendingRead",
        "subscriptionHavePendingReplayRead",
    ):
        assert key in cursor
    assert data["cursors"]["excl"]["numberOfEntriesInBacklog"] == 6
    for key in ("totalSize", "currentLedgerEntries", "currentLedgerSize", "lastLedgerCreatedTimestamp",
                "waitingCursorsCount", "pendingAddEntriesCount", "schemaLedgers", "compactedLedger"):
        assert key in data
    assert stats.cursors["shared"].mark_delete_position == f"{ledger}:-1"


def test_partitioned_internal_stats(admin: Admin, broker: Broker) -> None:
    setup_topic(admin, P, partitions=2)
    stats = admin.topics.partitioned_internal_stats("parts")
    assert isinstance(stats, PartitionedTopicInternalStats)
    data = json.loads(stats.to_json())
    assert data["metadata"] == {"partitions": 2}
    assert sorted(data["partitions"]) == [f"{P}-partition-0", f"{P}-partition-1"]
    one = admin.topics.internal_stats(f"{P}-partition-1")
    assert set(one.cursors) == {"shared", "keyed", "excl", "fail"}


# -- reset, skip, clear -----------------------------------------------------------------------


def test_reset_skip_and_clear_backlog(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    admin.topics.skip("orders", "shared", 2)
    assert backlog(broker, T, "shared") == 3
    admin.topics.clear_backlog("orders", "shared")
    assert backlog(broker, T, "shared") == 0
    admin.topics.reset_cursor("orders", "shared", ids[3].position)
    assert receive_all(broker, T, "shared") == [b"m3", b"m4"]
    admin.topics.reset_cursor("orders", "shared", EARLIEST)
    assert backlog(broker, T, "shared") == 5
    admin.topics.reset_cursor("orders", "shared", LATEST)
    assert backlog(broker, T, "shared") == 0
    admin.topics.reset_cursor("orders", "shared", ids[1])
    assert backlog(broker, T, "shared") == 4


def test_reset_skip_and_clear_on_a_partitioned_topic(admin: Admin, broker: Broker) -> None:
    setup_topic(admin, P, partitions=2)
    producer = broker.create_producer(P)
    ids = [producer.send(f"m{i}".encode()) for i in range(6)]  # round-robin over both partitions
    assert backlog(broker, P, "shared") == 6
    admin.topics.skip("parts", "shared", 1)
    assert backlog(broker, P, "shared") == 4  # one on every partition
    admin.topics.clear_backlog("parts", "shared")
    assert backlog(broker, P, "shared") == 0
    admin.topics.reset_cursor("parts", "shared", EARLIEST)
    assert backlog(broker, P, "shared") == 6
    admin.topics.clear_backlog("parts", "shared")
    admin.topics.reset_cursor("parts", "shared", ids[0])  # the partition holding it
    assert backlog(broker, P, "shared") == 3


@pytest.mark.parametrize(
    ("call", "code", "text"),
    [
        (lambda a: a.topics.skip("nope", "shared", 1), 404, "Topic persistent://public/default/nope not found"),
        (lambda a: a.topics.skip("orders", "nope", 1), 404, "Subscription 'nope' not found"),
        (lambda a: a.topics.skip("orders", "shared", -1), 400, "invalid number of messages to skip"),
        (lambda a: a.topics.skip("orders", "shared", "1"), 400, "invalid number of messages to skip"),
        (lambda a: a.topics.skip("orders", "", 1), 400, "invalid subscription name"),
        (lambda a: a.topics.clear_backlog("nope", "shared"), 404, "not found"),
        (lambda a: a.topics.clear_backlog("orders", "nope"), 404, "Subscription 'nope' not found"),
        (lambda a: a.topics.reset_cursor("nope", "shared", EARLIEST), 404, "not found"),
        (lambda a: a.topics.reset_cursor("orders", "nope", EARLIEST), 404, "Subscription 'nope' not found"),
        (lambda a: a.topics.reset_cursor("orders", "shared", "1:2"), 400, "invalid reset position"),
        (lambda a: a.topics.reset_cursor("orders", "shared", (1, 2)), 400, "invalid reset position"),
        (lambda a: a.topics.skip("a/b", "s", 1), 400, "Invalid short topic name"),
    ],
)
def test_cursor_operation_errors(admin: Admin, call, code: int, text: str) -> None:  # type: ignore[no-untyped-def]
    setup_topic(admin)
    got_code, message = status(call, admin)
    assert got_code == code
    assert text in message


def test_reset_to_a_position_in_no_partition_is_412(admin: Admin) -> None:
    setup_topic(admin, P, partitions=2)
    assert status(admin.topics.reset_cursor, "parts", "shared", Position(999, 0))[0] == 412


# -- PIP-423: skip_messages --------------------------------------------------------------------


def test_skip_messages_both_body_formats(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    ids = [producer.send(f"m{i}".encode()) for i in range(4)]
    batch = producer.send_batch([b"b0", b"b1", b"b2"])
    structured = json.dumps(
        {
            "type": "messageId",
            "messageIds": [
                {"ledgerId": ids[0].ledger_id, "entryId": ids[0].entry_id},
                {"ledgerId": str(batch.ledger_id), "entryId": str(batch.entry_id), "batchIndex": 1},
            ],
        }
    )
    admin.topics.skip_messages("orders", "shared", structured)
    admin.topics.skip_messages("orders", "shared", json.dumps([ids[2].to_base64(), batch[2].to_base64()]).encode())
    assert receive_all(broker, T, "shared") == [b"m1", b"m3", b"b0"]
    admin.topics.skip_messages("orders", "keyed", SkipMessageIdsRequest.of([]))  # empty: nothing
    assert backlog(broker, T, "keyed") == 5


def test_skip_messages_on_a_partitioned_topic_routes_by_ledger(admin: Admin, broker: Broker) -> None:
    setup_topic(admin, P, partitions=3)
    producer = broker.create_producer(P)
    ids = [producer.send(f"m{i}".encode()) for i in range(6)]
    assert len({m.partition for m in ids}) == 3
    admin.topics.skip_messages("parts", "shared", SkipMessageIdsRequest.of(ids[::2]))
    assert sorted(receive_all(broker, P, "shared")) == [b"m1", b"m3", b"m5"]
    assert backlog(broker, P, "keyed") == 6


@pytest.mark.parametrize("sub", ["excl", "fail"])
def test_skip_messages_refused_on_cumulative_types(admin: Admin, broker: Broker, sub: str) -> None:
    setup_topic(admin)
    mid = broker.create_producer(T).send(b"x")
    code, message = status(admin.topics.skip_messages, "orders", sub, SkipMessageIdsRequest.of([mid]))
    assert (code, message) == (405, "Unsupported subscription type.")
    assert backlog(broker, T, sub) == 1


@pytest.mark.parametrize("sub", ["excl", "fail"])
def test_skip_messages_refused_on_cumulative_types_partitioned(admin: Admin, broker: Broker, sub: str) -> None:
    setup_topic(admin, P, partitions=2)
    mid = broker.create_producer(P).send(b"x")
    assert status(admin.topics.skip_messages, "parts", sub, SkipMessageIdsRequest.of([mid])) == (
        405,
        "Unsupported subscription type.",
    )


def test_skip_messages_errors(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    mid = producer.send(b"x")
    batch = producer.send_batch([b"a", b"b"])
    good = SkipMessageIdsRequest.of([mid])
    assert status(admin.topics.skip_messages, "nope", "shared", good) == (
        404,
        "Topic persistent://public/default/nope not found",
    )
    assert status(admin.topics.skip_messages, "orders", "nope", good) == (
        404,
        f"Subscription 'nope' not found on topic {T}",
    )
    assert status(admin.topics.skip_messages, "orders", "shared", "") == (400, PAYLOAD_ERROR_PREFIX + "empty body")
    assert status(admin.topics.skip_messages, "orders", "shared", b'{"type": "x", "messageIds": []}') == (
        400,
        PAYLOAD_ERROR_PREFIX + "unsupported type for array",
    )
    assert status(admin.topics.skip_messages, "orders", "shared", [mid])[0] == 400  # not a request
    code, message = status(
        admin.topics.skip_messages, "orders", "shared", SkipMessageIdsRequest.of([(batch.ledger_id, batch.entry_id, 2)])
    )
    assert code == 400 and "Invalid batch index 2" in message
    code, message = status(admin.topics.skip_messages, "orders", "shared", SkipMessageIdsRequest.of([(999, 0)]))
    assert code == 412 and "does not exist" in message
    # a bad item anywhere leaves everything unacknowledged
    mixed = SkipMessageIdsRequest.of([mid, (batch.ledger_id, batch.entry_id, 5)])
    assert status(admin.topics.skip_messages, "orders", "shared", mixed)[0] == 400
    assert backlog(broker, T, "shared") == 2


def test_skip_messages_with_ids_from_the_real_client(admin: Admin, broker: Broker) -> None:
    import base64

    import pulsar

    setup_topic(admin, P, partitions=2)
    producer = broker.create_producer(P)
    ids = [producer.send(f"m{i}".encode()) for i in range(4)]
    batch = producer.send_batch([b"b0", b"b1"])
    body = json.dumps(
        [
            base64.b64encode(pulsar.MessageId(m.partition, m.ledger_id, m.entry_id, m.batch_index).serialize()).decode()
            for m in (ids[0], ids[3], batch[0])
        ]
    )
    admin.topics.skip_messages("parts", "shared", body)
    assert sorted(receive_all(broker, P, "shared")) == [b"b1", b"m1", b"m2"]


# -- PIP-423: cancel_delayed_message -----------------------------------------------------------


def test_cancel_delayed_message_on_every_subscription(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    later = producer.send(b"later", deliver_at_ms=60_000)
    producer.send(b"now")
    result = admin.topics.cancel_delayed_message("orders", later.ledger_id, later.entry_id)
    assert isinstance(result, CancelDelayedMessageResult)
    assert result.results == {"excl": False, "fail": False, "keyed": True, "shared": True}
    assert result.cancelled == ["keyed", "shared"] and result.refused == ["excl", "fail"]
    assert json.loads(result.to_json()) == {
        "topic": T, "ledgerId": later.ledger_id, "entryId": later.entry_id, "results": result.results,
    }
    broker.clock.advance(120_000)  # type: ignore[attr-defined]
    assert receive_all(broker, T, "shared") == [b"now"]
    assert receive_all(broker, T, "keyed", SubscriptionType.KEY_SHARED) == [b"now"]
    # cumulative types were left alone (and ignore deliver-at times anyway)
    assert receive_all(broker, T, "excl", SubscriptionType.EXCLUSIVE) == [b"later", b"now"]


def test_cancel_delayed_message_on_named_subscriptions(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    later = broker.create_producer(T).send(b"later", deliver_at_ms=60_000)
    result = admin.topics.cancel_delayed_message("orders", later.ledger_id, later.entry_id, ["shared"])
    assert result.results == {"shared": True}
    result = admin.topics.cancel_delayed_message("orders", later.ledger_id, later.entry_id, "keyed, excl,,")
    assert result.results == {"keyed": True, "excl": False}
    result = admin.topics.cancel_delayed_message("orders", later.ledger_id, later.entry_id, [])
    assert set(result.results) == {"excl", "fail", "keyed", "shared"}  # empty = every subscription
    broker.clock.advance(120_000)  # type: ignore[attr-defined]
    assert receive_all(broker, T, "shared") == []


def test_cancel_delayed_message_partitioned(admin: Admin, broker: Broker) -> None:
    setup_topic(admin, P, partitions=2)
    producer = broker.create_producer(P)
    a = producer.send(b"a", deliver_at_ms=60_000)
    b = producer.send(b"b", deliver_at_ms=60_000)
    assert a.partition != b.partition
    result = admin.topics.cancel_delayed_message("parts", b.ledger_id, b.entry_id)
    assert result.results == {"excl": False, "fail": False, "keyed": True, "shared": True}
    broker.clock.advance(120_000)  # type: ignore[attr-defined]
    assert receive_all(broker, P, "shared") == [b"a"]
    # on the partition itself too
    c = producer.send(b"c", deliver_at_ms=200_000)
    result = admin.topics.cancel_delayed_message(f"{P}-partition-{c.partition}", c.ledger_id, c.entry_id, "shared")
    assert result.results == {"shared": True}
    broker.clock.advance(200_000)  # type: ignore[attr-defined]
    assert receive_all(broker, P, "shared") == []


def test_cancel_delayed_message_errors(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    later = broker.create_producer(T).send(b"later", deliver_at_ms=60_000)
    lid, eid = later.ledger_id, later.entry_id
    for ledger_id, entry_id in ((-1, eid), (lid, -1), (-5, -5)):
        assert status(admin.topics.cancel_delayed_message, "orders", ledger_id, entry_id) == (
            412,
            "ledgerId, entryId must be non-negative.",
        )
    # negative ids are refused before the topic is even looked up (Pulsar's order)
    assert status(admin.topics.cancel_delayed_message, "nope", -1, 0)[0] == 412
    assert status(admin.topics.cancel_delayed_message, "orders", "1", eid)[0] == 400
    assert status(admin.topics.cancel_delayed_message, "orders", lid, 1 << 63)[0] == 400
    assert status(admin.topics.cancel_delayed_message, "orders", True, eid)[0] == 400
    assert status(admin.topics.cancel_delayed_message, "nope", lid, eid) == (
        404,
        "Topic persistent://public/default/nope not found",
    )
    # an unknown name among the named subscriptions: 404 and nothing cancelled anywhere
    assert status(admin.topics.cancel_delayed_message, "orders", lid, eid, ["shared", "nope"]) == (
        404,
        f"Subscription 'nope' not found on topic {T}",
    )
    assert status(admin.topics.cancel_delayed_message, "orders", lid, eid, [3])[0] == 400
    code, message = status(admin.topics.cancel_delayed_message, "orders", 999, 0)
    assert code == 412 and "does not exist" in message
    assert isinstance(InvalidPositionError("x"), MLedgerError)
    broker.clock.advance(120_000)  # type: ignore[attr-defined]
    assert receive_all(broker, T, "shared") == [b"later"]


def test_cancel_delayed_message_on_a_topic_without_subscriptions(admin: Admin) -> None:
    admin.topics.create_topic("orders")
    assert admin.topics.cancel_delayed_message("orders", 1, 0).results == {}


def test_errors_carry_their_status() -> None:
    assert NotFoundError.http_status == 404
    assert NotAllowedError.http_status == 405
    assert InvalidRequestError.http_status == 400
    assert PreconditionFailedError.http_status == 412
    assert SubscriptionAlreadyExistsError.http_status == 409
    assert TopicAlreadyExistsError.http_status == 409


def test_authorization_object_accepted(broker: Broker) -> None:
    admin = Admin(broker, Authorization({"r": {"*": ["get_stats"]}}), role="r")
    assert admin.authorization_enabled and admin.as_role("x").role == "x"


def test_retention_policies_through_the_admin_library(admin: Admin, broker: Broker) -> None:
    from mledger.admin import RetentionPolicies

    setup_topic(admin)
    assert admin.topics.get_retention("orders") is None
    admin.namespaces.set_retention("public/default", RetentionPolicies(60, 1024))
    assert admin.namespaces.get_retention("public/default") == RetentionPolicies(60, 1024)
    assert admin.topics.get_retention("orders", applied=True) == RetentionPolicies(60, 1024)
    admin.topics.set_retention("orders", RetentionPolicies(-1, -1))
    ml = broker.get_topic(T).managed_ledger  # type: ignore[union-attr]
    assert (ml.config.retention_time_ms, ml.config.retention_size_in_mb) == (-1, -1)
    admin.topics.remove_retention("orders")
    assert ml.config.retention_time_ms == 3_600_000
    with pytest.raises(InvalidNameError):
        admin.namespaces.get_retention("not a namespace")
    with pytest.raises(InvalidRequestError):
        admin.topics.set_retention("orders", (60, 10))  # type: ignore[arg-type]


def test_internal_stats_list_readers_non_durable_cursors(admin: Admin, broker: Broker) -> None:
    # Pulsar's getManagedLedgerInternalStats iterates getCursors(), which holds the non-durable
    # cursors of readers while they are open.
    setup_topic(admin)
    topic = broker.get_topic(T)
    reader = topic.open_non_durable_subscription("reader-1", start_position=EARLIEST)  # type: ignore[union-attr]
    stats = admin.topics.internal_stats("orders")
    assert "reader-1" in stats.cursors and stats.cursors["reader-1"].cursor_ledger == -1
    assert set(stats.cursors) - {"reader-1"} == {"shared", "keyed", "excl", "fail"}
    topic.remove_non_durable_subscription(reader)  # type: ignore[union-attr]
    assert "reader-1" not in admin.topics.internal_stats("orders").cursors


# -- topic stats (pulsar-admin topics stats) -------------------------------------------------------


def shared_scenario(broker: Broker, topic: str = T) -> None:
    """A Shared subscription: 5 plain messages and 1 delayed; consumer c1 got the 5 plain ones
    and acknowledged 2 of them (3 unacked)."""
    sub = broker.subscribe(topic, "shared", SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(topic, producer_name="p1")
    for i in range(5):
        producer.send(f"m{i}".encode())
    producer.send(b"later", deliver_at_ms=broker.clock.now_ms() + 3_600_000)
    consumer = sub.add_consumer("c1", permits=10)
    got = consumer.receive(10)
    assert len(got) == 5
    consumer.acknowledge(got[:2])


def test_topic_stats_pulsar_shape_and_values(admin: Admin, broker: Broker) -> None:
    admin.topics.create_topic(T)
    shared_scenario(broker)
    stats = admin.topics.stats("orders")
    data = json.loads(stats.to_json())
    # Pulsar's TopicStatsImpl fields, camelCase, nulls left out
    for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter", "msgInCounter",
                "bytesOutCounter", "msgOutCounter", "averageMsgSize", "msgChunkPublished", "storageSize",
                "backlogSize", "earliestMsgPublishTimeInBacklogs", "offloadedStorageSize", "publishers",
                "waitingPublishers", "subscriptions", "replication", "deduplicationStatus",
                "nonContiguousDeletedMessagesRanges", "compaction"):
        assert key in data, key
    assert "topicEpoch" not in data and "ownerBroker" not in data
    assert data["msgInCounter"] == 6 and data["msgOutCounter"] == 5
    ml = broker.get_topic(T).managed_ledger  # type: ignore[union-attr]
    assert data["bytesInCounter"] == data["storageSize"] == ml.total_size
    assert data["deduplicationStatus"] == "Disabled"
    [publisher] = data["publishers"]
    assert publisher["producerName"] == "p1" and publisher["accessMode"] == "Shared"
    assert "address" not in publisher  # a library producer has no connection
    sub = data["subscriptions"]["shared"]
    assert sub["type"] == "Shared" and sub["isDurable"] is True
    assert (sub["msgBacklog"], sub["msgDelayed"], sub["msgBacklogNoDelayed"], sub["unackedMessages"]) == (4, 1, 3, 3)
    assert sub["msgOutCounter"] == 5 and sub["nonContiguousDeletedMessagesRanges"] == 0
    assert sub["backlogSize"] == ml.estimated_size_after(Position(ml.stats().current_ledger_id, 1)) > 0
    assert sub["lastAckedTimestamp"] == sub["lastConsumedTimestamp"] == sub["lastMarkDeleteAdvancedTimestamp"] == 1_000
    [consumer] = sub["consumers"]
    assert consumer["consumerName"] == "c1" and consumer["unackedMessages"] == 3
    assert consumer["availablePermits"] == 10 and consumer["msgOutCounter"] == 5
    assert consumer["connectedSince"] == "1970-01-01T00:00:01.000+0000"
    # rates: 0 until a stats interval (60 s) passed, then the average over it
    assert data["msgRateIn"] == data["msgRateOut"] == 0.0
    broker.clock.advance(60_000)  # type: ignore[attr-defined]
    stats = admin.topics.stats(T)
    assert stats.msg_rate_in == pytest.approx(6 / 60)
    assert stats.msg_throughput_in == pytest.approx(ml.total_size / 60)
    assert stats.average_msg_size == pytest.approx(ml.total_size / 6)
    assert stats.msg_rate_out == stats.subscriptions["shared"].consumers[0].msg_rate_out == pytest.approx(5 / 60)
    assert stats.publishers[0].msg_rate_in == pytest.approx(6 / 60)
    # the options: no backlog sizes; the earliest publish time in the backlog (m2, at t=1000)
    stats = admin.topics.stats(T, subscription_backlog_size=False, get_earliest_time_in_backlog=True)
    assert stats.subscriptions["shared"].backlog_size == -1
    assert stats.subscriptions["shared"].earliest_msg_publish_time_in_backlog == 1_000
    assert stats.earliest_msg_publish_time_in_backlogs == 1_000
    assert admin.topics.stats(T, get_precise_backlog=True).subscriptions["shared"].msg_backlog == 4


def test_topic_stats_counters_keep_consumers_and_subscriptions_gone(admin: Admin, broker: Broker) -> None:
    admin.topics.create_topic(T)
    shared_scenario(broker)
    consumer = broker.get_subscription(T, "shared").consumers[0]
    consumer.close()  # its 3 unacked messages go back; its counters stay with the subscription
    stats = admin.topics.stats(T)
    assert stats.subscriptions["shared"].consumers == [] and stats.subscriptions["shared"].msg_out_counter == 5
    admin.topics.delete_subscription(T, "shared")
    stats = admin.topics.stats(T)
    assert stats.subscriptions == {} and stats.msg_out_counter == 5 and stats.msg_in_counter == 6


def test_topic_stats_exclusive_and_key_shared(admin: Admin, broker: Broker) -> None:
    setup_topic(admin)
    producer = broker.create_producer(T)
    producer.send(b"a")
    excl = broker.get_subscription(T, "excl").add_consumer("x")
    assert len(excl.receive(10)) == 1
    keyed = broker.get_subscription(T, "keyed").add_consumer("k")
    assert len(keyed.receive(10)) == 1
    stats = admin.topics.stats(T)
    sub = stats.subscriptions["excl"]
    # Pulsar counts a consumer's unacked messages on individual-ack types only
    assert (sub.type, sub.active_consumer_name, sub.unacked_messages, sub.msg_backlog) == ("Exclusive", "x", 0, 1)
    assert stats.subscriptions["keyed"].key_shared_mode == "AUTO_SPLIT"
    assert stats.subscriptions["keyed"].unacked_messages == 1
    assert stats.subscriptions["shared"].key_shared_mode is None


def test_partitioned_stats_add_up_the_partitions(admin: Admin, broker: Broker) -> None:
    admin.topics.create_topic(P, partitions=2)
    broker.subscribe(P, "shared", SHARED, InitialPosition.EARLIEST)
    producer = broker.create_producer(P, producer_name="pp")
    for i in range(6):
        producer.send(f"m{i}".encode(), key=f"k{i}")
    stats = admin.topics.partitioned_stats(P)
    parts = [f"{P}-partition-0", f"{P}-partition-1"]
    assert stats.metadata.partitions == 2 and sorted(stats.partitions) == parts
    one = [admin.topics.stats(p) for p in parts]
    assert [stats.partitions[p] for p in parts] == one
    assert stats.msg_in_counter == 6 == sum(s.msg_in_counter for s in one)
    assert stats.storage_size == sum(s.storage_size for s in one)
    assert stats.subscriptions["shared"].msg_backlog == 6 == sum(s.subscriptions["shared"].msg_backlog for s in one)
    assert [p.producer_name for p in stats.publishers] == ["pp"]  # added up by name
    data = json.loads(stats.to_json())
    assert data["metadata"] == {"partitions": 2} and set(data["partitions"]) == set(parts)
    assert admin.topics.partitioned_stats(P, per_partition=False).partitions == {}


def test_topic_stats_errors(admin: Admin, broker: Broker) -> None:
    admin.topics.create_topic(T)
    admin.topics.create_topic(P, partitions=2)
    assert status(admin.topics.stats, "nope")[0] == 404
    assert status(admin.topics.stats, P)[0] == 405
    assert status(admin.topics.partitioned_stats, T)[0] == 404
    assert status(admin.topics.partitioned_stats, "nope")[0] == 404
    code, text = status(admin.topics.stats, T, subscription_backlog_size="yes")
    assert code == 400 and "subscriptionBacklogSize" in text
    assert status(admin.topics.partitioned_stats, P, per_partition=1)[0] == 400
    assert status(admin.topics.stats, "persistent://bad name")[0] == 400
    # GET_STATS, as Pulsar's TopicOperation
    allowed = Admin(broker, Authorization({"r": {"public/default": ["get_stats"]}}), role="r")
    assert allowed.topics.stats(T).msg_in_counter == 0
    assert allowed.topics.partitioned_stats(P).metadata.partitions == 2
    denied = Admin(broker, Authorization({"r": {"public/default": ["lookup"]}}), role="r")
    assert status(denied.topics.stats, T)[0] == 403
    assert status(denied.topics.partitioned_stats, P)[0] == 403
