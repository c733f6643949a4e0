"""Issue 34: the admin API of message TTL, backlog quotas and inactive-topic policies, and
``expire-messages``, as Pulsar's admin REST (``Namespaces``, ``PersistentTopics`` v2 and v1) and
pulsar-admin serve them: the set-up script of a Pulsar client's CI works unchanged.

Seen with the official pulsar-client against the fixture (a backlog quota set with mledger-admin
refuses a producer; tests/test_fixture_clock.py sets a TTL over REST that expires a backlog under
the fixture's clock), over REST
(round trips, Pulsar's validation and messages, authorization), through RemoteAdmin and the CLI,
and at the broker (the size quota's eviction, the stats' quota limits).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pulsar
import pytest

from mledger.admin import Admin, Authorization, RemoteAdmin
from mledger.broker import (
    BacklogQuota,
    BacklogQuotaExceededError,
    BacklogQuotaType,
    Broker,
    BrokerConfig,
    InactiveTopicPolicies,
    InitialPosition,
    ManualClock,
    SubscriptionType,
)
from mledger.cli._admin import main as admin_main
from mledger.managed_ledger import ManagedLedgerFactory

pytestmark = pytest.mark.timeout(120)

MINUTE = 60_000
NS = "/admin/v2/namespaces/public/default"
TOPICS = "/admin/v2/persistent/public/default"
ROLE_HEADER = "X-Mledger-Role"


# -- helpers ---------------------------------------------------------------------------------


class Rest:
    """Requests to an in-process app (no server), as ``role`` when given."""

    def __init__(self, broker: Broker, authorization: Authorization | None = None) -> None:
        from mledger.rest import RoleResolver, create_app

        roles = RoleResolver(trust_role_header=True) if authorization is not None else None
        self.app = create_app(Admin(broker, authorization=authorization), roles=roles)

    def __call__(self, method: str, path: str, role: str | None = None, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://mledger") as client:
                headers = {ROLE_HEADER: role} if role else None
                return await client.request(method, path, headers=headers, **kwargs)

        return asyncio.run(send())


def answer(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, (response.json() if response.content else None)


@pytest.fixture
def broker() -> Iterator[Broker]:
    clock = ManualClock(1_000_000)
    broker = Broker(ManagedLedgerFactory(clock=clock), clock=clock)
    broker.create_topic("persistent://public/default/t")
    broker.create_topic("persistent://public/default/parts", partitions=2)
    yield broker
    broker.close()


def cli(*argv: str) -> tuple[int, str]:
    """``mledger-admin ARGV`` in this process: (exit status, stdout)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = admin_main(list(argv))
    return code, out.getvalue()


# -- the official client against the fixture -------------------------------------------------


def test_a_backlog_quota_set_through_the_cli_refuses_a_producer(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    url = pulsar_broker.admin_url
    assert cli("--admin-url", url, "namespaces", "set-backlog-quota", "public/default", "-l", "1K",
               "-p", "producer_request_hold") == (0, "")  # fmt: skip
    code, printed = cli("--admin-url", url, "namespaces", "get-backlog-quotas", "public/default")
    assert (code, json.loads(printed)) == (0, {"destination_storage": {
        "limit": 1024, "limitSize": 1024, "limitTime": -1, "policy": "producer_request_hold"}})  # fmt: skip
    client = client_for(pulsar_broker)
    client.subscribe("held", "sub").close()
    producer = client.create_producer("held", batching_enabled=False)
    for _ in range(3):
        producer.send(b"x" * 600)
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededError):
        client.create_producer("held")
    producer.send(b"still")  # producer_request_hold: the connected producer carries on
    stats = httpx.get(f"{url}{TOPICS}/held/stats").json()
    assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (1024, -1)
    assert stats["backlogSize"] >= 1024
    assert cli("--admin-url", url, "namespaces", "remove-backlog-quota", "public/default") == (0, "")
    client.create_producer("held").send(b"again")


# -- REST round trips and Pulsar's validation -------------------------------------------------


def test_namespace_policies_round_trip_with_pulsars_answers(broker: Broker) -> None:
    rest = Rest(broker)
    assert answer(rest("GET", f"{NS}/messageTTL")) == (200, None)
    assert rest("POST", f"{NS}/messageTTL", content=b"3600").status_code == 204
    assert answer(rest("GET", f"{NS}/messageTTL")) == (200, 3600)
    assert answer(rest("POST", f"{NS}/messageTTL", content=b"-1")) == (
        412, {"reason": "Invalid value for message TTL, message TTL must >= 0"})  # fmt: skip
    assert rest("POST", f"{NS}/messageTTL", content=b'"1h"').status_code == 400
    assert rest("DELETE", f"{NS}/messageTTL").status_code == 204
    assert answer(rest("GET", f"{NS}/messageTTL")) == (200, None)

    age = {"limitTime": 600, "policy": "consumer_backlog_eviction"}
    assert answer(rest("GET", f"{NS}/backlogQuotaMap")) == (200, {})
    assert rest("POST", f"{NS}/backlogQuota", params={"backlogQuotaType": "message_age"}, json=age).status_code == 204
    assert (
        rest("POST", f"{NS}/backlogQuota", json={"limitSize": 1 << 20, "policy": "producer_exception"}).status_code
        == 204
    )
    assert answer(rest("GET", f"{NS}/backlogQuotaMap")) == (200, {
        "destination_storage": {"limit": 1 << 20, "limitSize": 1 << 20, "limitTime": -1, "policy": "producer_exception"},
        "message_age": {"limit": -1, "limitSize": -1, "limitTime": 600, "policy": "consumer_backlog_eviction"},
    })  # fmt: skip
    assert rest("DELETE", f"{NS}/backlogQuota", params={"backlogQuotaType": "message_age"}).status_code == 204
    assert set(rest("GET", f"{NS}/backlogQuotaMap").json()) == {"destination_storage"}
    assert rest("POST", f"{NS}/backlogQuota", params={"backlogQuotaType": "size"}, json=age).status_code == 400
    assert rest("POST", f"{NS}/backlogQuota", json={"policy": "drop_everything"}).status_code == 400

    inactive = {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up", "maxInactiveDurationSeconds": 30,
                "deleteWhileInactive": True}  # fmt: skip
    assert answer(rest("GET", f"{NS}/inactiveTopicPolicies")) == (200, None)
    assert rest("POST", f"{NS}/inactiveTopicPolicies", json=inactive).status_code == 204
    assert answer(rest("GET", f"{NS}/inactiveTopicPolicies")) == (200, inactive)
    assert rest("POST", f"{NS}/inactiveTopicPolicies", json={"inactiveTopicDeleteMode": "never"}).status_code == 400
    assert rest("DELETE", f"{NS}/inactiveTopicPolicies").status_code == 204
    assert answer(rest("GET", f"{NS}/inactiveTopicPolicies")) == (200, None)
    # they are the namespace's Policies fields, Pulsar's names
    assert set(rest("GET", NS).json()) >= {"backlog_quota_map"}
    for path in ("messageTTL", "backlogQuotaMap", "inactiveTopicPolicies"):
        assert rest("GET", f"/admin/v2/namespaces/public/nowhere/{path}").status_code == 404


def test_a_quota_and_a_retention_policy_must_agree_as_pulsar_checks_them(broker: Broker) -> None:
    rest = Rest(broker)
    assert (
        rest("POST", f"{NS}/retention", json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}).status_code == 204
    )
    # namespace: a destination_storage quota must stay under the retention size
    assert answer(rest("POST", f"{NS}/backlogQuota", json={"limitSize": 10 << 20, "policy": "producer_exception"})) == (
        412, {"reason": "Backlog Quota exceeds configured retention quota for namespace. Please increase retention "
                        "quota and retry"})  # fmt: skip
    assert (
        rest("POST", f"{NS}/backlogQuota", json={"limitSize": 5 << 20, "policy": "producer_exception"}).status_code
        == 204
    )
    assert answer(rest("POST", f"{NS}/retention", json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 4})) == (
        412, {"reason": "Retention Quota must exceed configured backlog quota for namespace."})  # fmt: skip
    # topic: the quota against the retention it has (its namespace's here), its limitTime included
    over = {"limitTime": 3600, "policy": "producer_request_hold"}
    assert answer(rest("POST", f"{TOPICS}/t/backlogQuota", params={"backlogQuotaType": "message_age"}, json=over)) == (
        412, {"reason": "Backlog Quota exceeds configured retention quota for topic. Please increase retention quota "
                        "and retry"})  # fmt: skip
    within = {"limitTime": 1800, "policy": "producer_request_hold"}
    assert (
        rest("POST", f"{TOPICS}/t/backlogQuota", params={"backlogQuotaType": "message_age"}, json=within).status_code
        == 204
    )
    assert answer(rest("POST", f"{TOPICS}/t/retention", json={"retentionTimeInMinutes": 20, "retentionSizeInMB": 10})) == (
        412, {"reason": "Retention Quota must exceed configured backlog quota for topic. Please increase retention "
                        "quota and retry"})  # fmt: skip
    assert (
        rest("POST", f"{TOPICS}/t/retention", json={"retentionTimeInMinutes": 31, "retentionSizeInMB": 10}).status_code
        == 204
    )


def test_topic_policies_round_trip_applied_and_refused_on_a_partition(broker: Broker) -> None:
    rest = Rest(broker)
    broker.set_namespace_message_ttl("public/default", 120)
    assert answer(rest("GET", f"{TOPICS}/t/messageTTL")) == (200, None)
    assert answer(rest("GET", f"{TOPICS}/t/messageTTL", params={"applied": "true"})) == (200, 120)
    assert rest("POST", f"{TOPICS}/t/messageTTL", params={"messageTTL": "30"}).status_code == 204
    assert answer(rest("GET", f"{TOPICS}/t/messageTTL")) == (200, 30)
    assert answer(rest("POST", f"{TOPICS}/t/messageTTL", params={"messageTTL": "-5"})) == (
        412, {"reason": "Invalid value for message TTL"})  # fmt: skip
    assert answer(rest("POST", f"{TOPICS}/t/messageTTL")) == (400, {"reason": "Missing messageTTL"})
    assert rest("DELETE", f"{TOPICS}/t/messageTTL").status_code == 204
    broker.set_namespace_message_ttl("public/default", None)
    assert answer(rest("GET", f"{TOPICS}/t/messageTTL", params={"applied": "true"})) == (200, 0)  # the broker's

    default = {"limit": -1, "limitSize": -1, "limitTime": -1, "policy": "producer_request_hold"}
    applied = rest("GET", f"{TOPICS}/t/backlogQuotaMap", params={"applied": "true"})
    assert answer(applied) == (200, {"destination_storage": default, "message_age": default})
    quota = {"limitTime": 60, "policy": "producer_exception"}
    assert (
        rest("POST", f"{TOPICS}/t/backlogQuota", params={"backlogQuotaType": "message_age"}, json=quota).status_code
        == 204
    )
    own = {"message_age": {"limit": -1, "limitSize": -1, "limitTime": 60, "policy": "producer_exception"}}
    assert answer(rest("GET", f"{TOPICS}/t/backlogQuotaMap")) == (200, own)
    assert answer(rest("GET", f"{TOPICS}/t/backlogQuotaMap", params={"applied": "true"})) == (200, own)

    policy = {"inactiveTopicDeleteMode": "delete_when_no_subscriptions", "maxInactiveDurationSeconds": 5,
              "deleteWhileInactive": False}  # fmt: skip
    assert rest("POST", f"{TOPICS}/t/inactiveTopicPolicies", json=policy).status_code == 204
    assert answer(rest("GET", f"{TOPICS}/t/inactiveTopicPolicies")) == (200, policy)
    assert rest("DELETE", f"{TOPICS}/t/inactiveTopicPolicies").status_code == 204
    broker_policy = rest("GET", f"{TOPICS}/t/inactiveTopicPolicies", params={"applied": "true"}).json()
    assert broker_policy == {"inactiveTopicDeleteMode": "delete_when_no_subscriptions",
                             "maxInactiveDurationSeconds": 60, "deleteWhileInactive": True}  # fmt: skip
    # a partition's name: Pulsar's preValidation; an unknown topic: 404; v1's twin serves the same
    partition = rest("POST", f"{TOPICS}/parts-partition-0/messageTTL", params={"messageTTL": "1"})
    assert answer(partition) == (412, {"reason": "Not allowed to set/get topic policy for a partition"})
    assert rest("GET", f"{TOPICS}/missing/backlogQuotaMap").status_code == 404
    assert (
        rest("POST", "/admin/persistent/public/standalone/default/t/messageTTL", params={"messageTTL": "9"}).status_code
        == 204
    )
    assert broker.topic_message_ttl("persistent://public/default/t") == 9


def test_expire_messages_by_time_by_position_and_on_every_subscription(broker: Broker) -> None:
    rest = Rest(broker)
    topic = "persistent://public/default/t"
    subs = {name: broker.subscribe(topic, name, SubscriptionType.SHARED, InitialPosition.EARLIEST)
            for name in ("a", "b", "c")}  # fmt: skip
    producer = broker.create_producer(topic)
    ids = [producer.send(b"old%d" % i) for i in range(3)]
    broker.clock.advance(10 * MINUTE)
    producer.send(b"new")
    assert rest("POST", f"{TOPICS}/t/subscription/a/expireMessages/300").status_code == 204
    assert subs["a"].backlog() == 1 and subs["a"].stats().total_msg_expired == 3
    body = {"ledgerId": ids[0].ledger_id, "entryId": ids[0].entry_id, "isExcluded": True}
    assert rest("POST", f"{TOPICS}/t/subscription/b/expireMessages", json=body).status_code == 204
    assert subs["b"].backlog() == 2  # up to the message after the one named
    assert rest("POST", f"{TOPICS}/t/all_subscription/expireMessages/300").status_code == 204
    assert [subs[name].backlog() for name in "abc"] == [1, 1, 1]
    # nothing that old on "a": issued all the same (204); no backlog at all: Pulsar's 409
    assert rest("POST", f"{TOPICS}/t/subscription/a/expireMessages/0").status_code == 204
    assert subs["a"].backlog() == 1  # "new" was published at this very millisecond
    broker.clock.advance(1)
    assert rest("POST", f"{TOPICS}/t/subscription/a/expireMessages/0").status_code == 204
    assert subs["a"].backlog() == 0
    refused = rest("POST", f"{TOPICS}/t/subscription/a/expireMessages/0")
    assert refused.status_code == 409
    assert refused.json()["reason"].startswith(
        "Expire message by timestamp not issued on topic persistent://public/default/t for subscription a"
    )
    past = {"ledgerId": ids[0].ledger_id + 5, "entryId": 0}
    assert rest("POST", f"{TOPICS}/t/subscription/b/expireMessages", json=past).status_code == 409
    assert rest("POST", f"{TOPICS}/t/subscription/nope/expireMessages/1").status_code == 404
    # a partitioned topic: every partition by time; by position, a partition must be named
    parts = broker.subscribe("persistent://public/default/parts", "p", initial_position=InitialPosition.EARLIEST)
    for i in range(4):
        broker.create_producer("persistent://public/default/parts").send(b"x", key=str(i))
    broker.clock.advance(MINUTE)
    assert rest("POST", f"{TOPICS}/parts/subscription/p/expireMessages/30").status_code == 204
    assert parts.backlog() == 0
    position = rest("POST", f"{TOPICS}/parts/subscription/p/expireMessages", json={"ledgerId": 1, "entryId": 0})
    assert answer(position) == (405, {"reason": "Expire message at position is not supported for partitioned-topic"})


def test_policy_writes_are_a_tenant_admins_and_expiry_a_consumers(broker: Broker) -> None:
    """Reads are held to the rule by tests/test_policy_reads_authz.py (every GET route)."""
    auth = Authorization({}, super_user_roles=["root"])
    root = Admin(broker, authorization=auth, role="root")
    root.tenants.update("public", {"adminRoles": ["ops"], "allowedClusters": ["standalone"]})
    root.namespaces.grant_permission("public/default", "app", ["produce", "consume"])  # what CI set-ups grant
    root.namespaces.grant_permission("public/default", "writer", ["produce"])
    rest = Rest(broker, auth)
    broker.subscribe("persistent://public/default/t", "s", initial_position=InitialPosition.EARLIEST)
    quota = {"limitTime": 60, "policy": "producer_exception"}
    writes = [
        ("POST", f"{NS}/messageTTL", {"content": b"60"}),
        ("DELETE", f"{NS}/messageTTL", {}),
        ("POST", f"{NS}/backlogQuota", {"json": quota, "params": {"backlogQuotaType": "message_age"}}),
        ("DELETE", f"{NS}/backlogQuota", {}),
        ("POST", f"{NS}/inactiveTopicPolicies", {"json": {"maxInactiveDurationSeconds": 9}}),
        ("DELETE", f"{NS}/inactiveTopicPolicies", {}),
        ("POST", f"{TOPICS}/t/messageTTL", {"params": {"messageTTL": "60"}}),
        ("DELETE", f"{TOPICS}/t/messageTTL", {}),
        ("POST", f"{TOPICS}/t/backlogQuota", {"json": quota, "params": {"backlogQuotaType": "message_age"}}),
        ("DELETE", f"{TOPICS}/t/backlogQuota", {}),
        ("POST", f"{TOPICS}/t/inactiveTopicPolicies", {"json": {"maxInactiveDurationSeconds": 9}}),
        ("DELETE", f"{TOPICS}/t/inactiveTopicPolicies", {}),
    ]
    for method, path, kwargs in writes:
        assert rest(method, path, role="app", **kwargs).status_code == 403, (method, path)
        assert rest(method, path, role="ops", **kwargs).status_code == 204, (method, path)
    assert rest("DELETE", f"{NS}/messageTTL").status_code == 401  # no credentials
    # EXPIRE_MESSAGES is a consume operation (Pulsar's PulsarAuthorizationProvider)
    expire = f"{TOPICS}/t/subscription/s/expireMessages/60"
    assert rest("POST", expire, role="writer").status_code == 403
    assert rest("POST", expire, role="app").status_code == 409  # allowed; nothing to expire


# -- RemoteAdmin and mledger-admin ------------------------------------------------------------


def test_remote_admin_and_the_cli_round_trip_typed_values(pulsar_broker: Any) -> None:
    url = pulsar_broker.admin_url
    topic = "persistent://public/default/remote"
    with RemoteAdmin(url, timeout=30) as remote:
        remote.topics.create_topic(topic)
        remote.namespaces.set_message_ttl("public/default", 90)
        assert remote.namespaces.get_message_ttl("public/default") == 90
        assert remote.topics.get_message_ttl(topic) is None
        assert remote.topics.get_message_ttl(topic, applied=True) == 90
        remote.topics.set_message_ttl(topic, 45)
        quota = BacklogQuota(limit_time=120, policy="producer_exception")
        remote.topics.set_backlog_quota(topic, quota, BacklogQuotaType.MESSAGE_AGE)
        assert remote.topics.get_backlog_quota_map(topic) == {BacklogQuotaType.MESSAGE_AGE: quota}
        remote.namespaces.set_inactive_topic_policies(
            "public/default", InactiveTopicPolicies(delete_while_inactive=False)
        )
        assert remote.topics.get_inactive_topic_policies(topic, applied=True) == InactiveTopicPolicies(
            delete_while_inactive=False
        )
        remote.topics.remove_backlog_quota(topic, "message_age")
        assert remote.topics.get_backlog_quota_map(topic) == {}
    assert cli("--admin-url", url, "topics", "get-message-ttl", topic) == (0, "45\n")
    assert cli("--admin-url", url, "topics", "set-message-ttl", topic, "-t", "2h") == (0, "")
    assert cli("--admin-url", url, "topics", "get-message-ttl", topic, "-ap") == (0, "7200\n")
    assert cli("--admin-url", url, "namespaces", "set-inactive-topic-policies", "public/default", "-e", "-t", "1h",
               "-m", "delete_when_subscriptions_caught_up") == (0, "")  # fmt: skip
    code, printed = cli("--admin-url", url, "namespaces", "get-inactive-topic-policies", "public/default")
    assert json.loads(printed) == {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                                   "maxInactiveDurationSeconds": 3600, "deleteWhileInactive": True}  # fmt: skip
    assert cli("--admin-url", url, "namespaces", "set-message-ttl", "public/default", "-ttl", "-1")[0] == 9  # 412
    assert cli("--admin-url", url, "topics", "expire-messages-all-subscriptions", topic, "-t", "1h") == (0, "")


def test_cli_flags_are_pulsar_admins(capsys: pytest.CaptureFixture[str]) -> None:
    """What pulsar-admin refuses before sending anything, mledger-admin refuses too (exit 2)."""
    cases = [
        (["namespaces", "set-backlog-quota", "public/default", "-p", "producer_exception"],
         "Quota type of 'destination_storage' needs a size limit"),
        (["namespaces", "set-backlog-quota", "public/default", "-l", "1G", "-p", "producer_exception",
          "-t", "message_age"], "Quota type of 'message_age' needs a time limit"),
        (["topics", "set-inactive-topic-policies", "t", "-t", "1h", "-m", "delete_when_no_subscriptions"],
         "Need to specify either enable-delete-while-inactive or disable-delete-while-inactive"),
        (["topics", "expire-messages", "t", "-s", "sub"],
         "Either time (--expireTime) or message position (--position) has to be provided to expire messages"),
        (["topics", "expire-messages", "t", "-s", "sub", "-t", "1h", "-p", "1:2"],
         "Can't expire message by time and by message position at the same time."),
    ]  # fmt: skip
    for argv, reason in cases:
        with pytest.raises(SystemExit) as exited:
            admin_main(["--admin-url", "http://127.0.0.1:9", *argv])
        assert exited.value.code == 2
        assert reason in capsys.readouterr().err


# -- the broker: the size quota -------------------------------------------------------------


def test_a_size_quota_evicts_the_slowest_subscription_down_to_90_percent() -> None:
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(clock=clock), BrokerConfig(), clock=clock)
    topic = "persistent://public/default/big"
    slow = broker.subscribe(topic, "slow", initial_position=InitialPosition.EARLIEST)
    fast = broker.subscribe(topic, "fast", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(topic)
    for _ in range(40):
        producer.send(b"x" * 100)
    consumer = fast.add_consumer("c")
    for message in consumer.receive(10):
        consumer.acknowledge(message.message_id)
    ml = broker.get_topic(topic).managed_ledger
    limit = ml.estimated_backlog_size() // 2
    broker.set_namespace_backlog_quota(
        "public/default", BacklogQuota(limit_size=limit, policy="consumer_backlog_eviction"),
        BacklogQuotaType.DESTINATION_STORAGE,
    )  # fmt: skip
    broker.create_producer(topic)  # consumer_backlog_eviction holds no producer back
    broker.timers.advance(MINUTE)  # monitorBacklogQuota
    assert ml.estimated_backlog_size() <= 0.9 * limit
    assert slow.backlog() < 40 and slow.backlog() <= fast.backlog()
    broker.close()


def test_producers_are_refused_over_a_size_quota_and_disconnected_under_producer_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mledger.broker import Topic

    disconnected: list[str] = []
    monkeypatch.setattr(Topic, "disconnect_producers", lambda self, why: disconnected.append(why) or 0)
    clock = ManualClock(0)
    broker = Broker(ManagedLedgerFactory(clock=clock), BrokerConfig(), clock=clock)
    topic = "persistent://public/default/full"
    broker.subscribe(topic, "sub", initial_position=InitialPosition.EARLIEST)
    producer = broker.create_producer(topic)
    for _ in range(5):
        producer.send(b"y" * 100)
    broker.set_topic_backlog_quota(topic, BacklogQuota(limit_size=200, policy="producer_exception"),
                                   BacklogQuotaType.DESTINATION_STORAGE)  # fmt: skip
    with pytest.raises(BacklogQuotaExceededError, match="Cannot create producer on topic with backlog quota exceeded"):
        broker.create_producer(topic)
    broker.timers.advance(MINUTE)  # monitorBacklogQuota: the remote producers are disconnected
    assert disconnected == ["the backlog quota by size is exceeded"]
    stats = Admin(broker).topics.stats(topic)
    assert (stats.backlog_quota_limit_size, stats.backlog_quota_limit_time) == (200, -1)
    broker.close()
