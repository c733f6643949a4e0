"""The admin REST server against a real socket on 127.0.0.1 (random free port, bounded requests):
every route, status code and error body; authorization on and off; PIP-423 effects on the
cursors; concurrency; the CLI in --admin-url mode and `mledger-admin serve` as subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mledger import ConfigError, ManagedLedgerFactory, NotFoundError, Position
from mledger.admin import PAYLOAD_ERROR_PREFIX, Admin, Authorization, Topics
from mledger.admin._wire import CANCEL_RESULTS_HEADER
from mledger.broker import Broker, BrokerConfig, InitialPosition, ManualClock, MessageId, SubscriptionType
from mledger.rest import ROLE_HEADER, AdminServer, RoleResolver, parse_bind

pytestmark = pytest.mark.timeout(180)  # every test talks to a server

T0 = 1_700_000_000_000
MINUTE = 60_000
ORDERS = "persistent://public/default/orders"  # partitioned, 2 partitions
PLAIN = "persistent://public/default/plain"
V2 = "/admin/v2/persistent/public/default"
V1 = "/admin/persistent/public/standalone/default"
TIMEOUT = 10  # seconds per request: every request in this file is bounded

_SCRIPT = Path(sys.executable).with_name("mledger-admin")
ADMIN_CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mledger.cli._admin"]


# -- the world and the server ---------------------------------------------------------------------


class World:
    """A broker with a partitioned and a plain topic, three subscription types, delayed, plain
    and batched messages."""

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.broker = Broker(ManagedLedgerFactory(), config, clock=ManualClock(T0))
        self.broker.create_topic(ORDERS, partitions=2)
        self.broker.create_topic(PLAIN)
        for topic in (ORDERS, PLAIN):
            for sub, kind in (
                ("shared", SubscriptionType.SHARED),
                ("keyed", SubscriptionType.KEY_SHARED),
                ("excl", SubscriptionType.EXCLUSIVE),
            ):
                self.broker.subscribe(topic, sub, kind, InitialPosition.EARLIEST)
        producer = self.broker.create_producer(PLAIN)
        self.delayed = [producer.send(f"d{i}".encode(), deliver_at_ms=T0 + MINUTE) for i in range(4)]
        self.plain = [producer.send(f"p{i}".encode()) for i in range(6)]
        self.batch = producer.send_batch([b"b0", b"b1", b"b2"])
        producer.close()
        producer = self.broker.create_producer(ORDERS)
        self.orders_delayed = [
            producer.send(f"od{i}".encode(), key=f"k{i}", deliver_at_ms=T0 + MINUTE) for i in range(4)
        ]
        producer.close()

    def sub(self, topic: str, name: str) -> Any:
        return self.broker.get_subscription(topic, name)

    def deleted(self, topic: str, name: str, mid: MessageId) -> bool:
        sub = self.broker.get_topic(mid_topic(topic, mid)).get_subscription(name)
        return bool(sub.cursor.is_message_deleted(Position(mid.ledger_id, mid.entry_id)))

    def drain(self, topic: str, name: str) -> list[bytes]:
        """Everything deliverable to a new consumer of ``name`` after the delay passed."""
        self.broker.clock.advance(2 * MINUTE)
        consumer = self.sub(topic, name).add_consumer()
        out: list[bytes] = []
        while got := consumer.receive(100):
            consumer.acknowledge(got)
            out.extend(m.data for m in got)
        consumer.close()
        return sorted(out)


def mid_topic(topic: str, mid: MessageId) -> str:
    return f"{topic}-partition-{mid.partition}" if mid.partition >= 0 else topic


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.broker.close()


@pytest.fixture
def server(world: World) -> Iterator[AdminServer]:
    with AdminServer(Admin(world.broker), port=0) as srv:
        yield srv


ALL_OPS = [
    "lookup",
    "get_stats",
    "get_subscriptions",
    "skip",
    "cancel_delayed_message",
    "reset_cursor",
    "subscribe",
    "unsubscribe",
    "get_topics",
    "create_topic",
    "delete_topic",
]


@pytest.fixture
def auth_server(world: World) -> Iterator[AdminServer]:
    authorization = Authorization(
        {"ops": {"*": ALL_OPS}, "reader": {"*": ["get_stats", "lookup", "get_subscriptions", "get_topics"]}},
        super_user_roles={"root"},
    )
    roles = RoleResolver({"tok-ops": "ops", "tok-reader": "reader"}, trust_role_header=True)
    with AdminServer(Admin(world.broker, authorization=authorization), port=0, roles=roles) as srv:
        yield srv


class Reply:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def reason(self) -> str:
        return str(self.json["reason"])


def call(
    srv: AdminServer, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None
) -> Reply:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(srv.url + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def cancel_path(base: str, topic_local: str, mid: MessageId, extra: str = "") -> str:
    return f"{base}/{topic_local}/cancelDelayedMessage?ledgerId={mid.ledger_id}&entryId={mid.entry_id}{extra}"


def skip_path(topic_local: str, sub: str) -> str:
    return f"{V2}/{topic_local}/subscription/{sub}/skipByMessageIds"


# -- listing, metadata, stats ------------------------------------------------------------------------


def test_list_topics_partitioned_and_metadata(server: AdminServer) -> None:
    r = call(server, "GET", V2)
    assert (r.status, r.json) == (200, [ORDERS, PLAIN])
    assert r.headers["Content-Type"] == "application/json"
    assert call(server, "GET", V2 + "/partitioned").json == [ORDERS]
    assert call(server, "GET", f"{V2}/orders/partitions").json == {"partitions": 2}
    assert call(server, "GET", f"{V2}/plain/partitions").json == {"partitions": 0}
    r = call(server, "GET", f"{V2}/nope/partitions")
    assert r.status == 404 and "not found" in r.reason
    assert call(server, "GET", "/admin/v2/persistent/public/other").json == []
    assert call(server, "GET", V1).json == [ORDERS, PLAIN]  # v1 lists the same namespace


def test_subscriptions_and_internal_stats(server: AdminServer, world: World) -> None:
    assert call(server, "GET", f"{V2}/orders/subscriptions").json == ["excl", "keyed", "shared"]
    assert call(server, "GET", f"{V2}/orders-partition-1/subscriptions").json == ["excl", "keyed", "shared"]
    r = call(server, "GET", f"{V2}/plain/internalStats")
    assert r.status == 200
    stats = r.json
    assert set(stats["cursors"]) == {"excl", "keyed", "shared"}
    assert stats["cursors"]["shared"]["numberOfEntriesInBacklog"] == 11
    assert stats == json.loads(Admin(world.broker).topics.internal_stats(PLAIN).to_json())
    r = call(server, "GET", f"{V2}/orders/internalStats")
    assert r.status == 405 and "partitioned" in r.reason
    r = call(server, "GET", f"{V2}/orders/partitioned-internalStats")
    assert r.status == 200 and r.json["metadata"] == {"partitions": 2}
    assert set(r.json["partitions"]) == {f"{ORDERS}-partition-0", f"{ORDERS}-partition-1"}
    r = call(server, "GET", f"{V2}/plain/partitioned-internalStats")
    assert r.status == 404 and "Partitioned Topic not found" in r.reason
    for path in (f"{V2}/nope/subscriptions", f"{V2}/nope/internalStats"):
        r = call(server, "GET", path)
        assert r.status == 404 and r.reason == "Topic persistent://public/default/nope not found"


def test_unknown_routes_methods_and_domains(server: AdminServer) -> None:
    for path in ("/", "/admin", "/admin/v2/persistent/public", f"{V2}/plain/nothing", "/admin/v3/x/y/z"):
        r = call(server, "GET", path)
        assert (r.status, r.reason) == (404, "HTTP 404 Not Found"), path
    r = call(server, "GET", cancel_path(V2, "plain", MessageId(1, 1)))
    assert (r.status, r.reason) == (405, "HTTP 405 Method Not Allowed")
    assert r.headers["Allow"] == "POST"
    r = call(server, "POST", f"{V2}/plain/internalStats", b"")
    assert r.status == 405 and r.headers["Allow"] == "GET"
    r = call(server, "POST", cancel_path("/admin/v2/non-persistent/public/default", "plain", MessageId(1, 1)), b"")
    assert (r.status, r.reason) == (405, "Operation not allowed on non-persistent topic")
    r = call(server, "POST", "/metrics", b"")
    assert r.status == 405


def test_metrics_scrapes_follow_the_broker(server: AdminServer, world: World) -> None:
    """The app builds its metrics registry once; every scrape reads the broker anew, and serves
    what render_metrics writes for the same broker."""
    from mledger.metrics import render_metrics

    first = call(server, "GET", "/metrics")
    assert first.status == 200 and first.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert first.body.decode() == render_metrics(world.broker, cluster="standalone")
    assert 'subscription="late"' not in first.body.decode()
    assert call(server, "PUT", f"{V2}/plain/subscription/late", b"").status == 204
    second = call(server, "GET", "/metrics").body.decode()
    assert (
        'pulsar_subscription_back_log{cluster="standalone",namespace="public/default",subscription="late",'
        f'topic="{PLAIN}"}} 0.0' in second
    )
    assert second == render_metrics(world.broker, cluster="standalone")
    assert call(server, "DELETE", f"{V2}/plain/subscription/late").status == 204
    assert 'subscription="late"' not in call(server, "GET", "/metrics").body.decode()


# -- PIP-423: cancelDelayedMessage ----------------------------------------------------------------


def test_cancel_delayed_message_v2(server: AdminServer, world: World) -> None:
    d0, d1 = world.delayed[0], world.delayed[1]
    # every subscription: Exclusive refuses -> 412, the others are cancelled all the same
    r = call(server, "POST", cancel_path(V2, "plain", d0), b"")
    assert r.status == 412
    assert r.reason.startswith("Failed to cancel delayed message on subscription(s) excl")
    assert json.loads(r.headers[CANCEL_RESULTS_HEADER]) == {"excl": False, "keyed": True, "shared": True}
    # named subscriptions, repeated and comma-separated
    r = call(server, "POST", cancel_path(V2, "plain", d1, "&subscriptionNames=shared&subscriptionNames=keyed"), b"")
    assert (r.status, r.body) == (204, b"")
    assert json.loads(r.headers[CANCEL_RESULTS_HEADER]) == {"shared": True, "keyed": True}
    path = cancel_path(V2, "plain", world.delayed[2], "&subscriptionNames=shared,&authoritative=true")
    r = call(server, "POST", path, b"")
    assert r.status == 204 and json.loads(r.headers[CANCEL_RESULTS_HEADER]) == {"shared": True}
    # the effect: never delivered on those subscriptions, even after the deliver-at time
    assert b"d0" not in world.drain(PLAIN, "shared") and b"d1" not in world.drain(PLAIN, "keyed")
    assert all(world.deleted(PLAIN, s, d) for s in ("shared", "keyed") for d in (d0, d1))
    assert not world.deleted(PLAIN, "excl", d0)


def test_cancel_delayed_message_partitioned_fans_out(server: AdminServer, world: World) -> None:
    target = world.orders_delayed[1]
    r = call(server, "POST", cancel_path(V2, "orders", target, "&subscriptionNames=shared,keyed"), b"")
    assert r.status == 204
    assert world.deleted(ORDERS, "shared", target) and world.deleted(ORDERS, "keyed", target)
    assert b"od1" not in world.drain(ORDERS, "shared")


def test_cancel_delayed_message_v1_path(server: AdminServer, world: World) -> None:
    mid = world.delayed[3]
    r = call(server, "POST", cancel_path(V1, "plain", mid, "&subscriptionNames=shared"), b"")
    assert r.status == 204 and world.deleted(PLAIN, "shared", mid)
    r = call(
        server,
        "POST",
        cancel_path("/admin/v1/persistent/public/standalone/default", "plain", mid, "&subscriptionNames=keyed"),
        b"",
    )
    assert r.status == 204 and world.deleted(PLAIN, "keyed", mid)
    r = call(server, "POST", cancel_path("/admin/persistent/public/elsewhere/default", "plain", mid), b"")
    assert (r.status, r.reason) == (412, "Cluster elsewhere does not exist")


@pytest.mark.parametrize(
    ("base", "text"), [(V2, "ledgerId, entryId must be positive."), (V1, "ledgerId, entryId must be non-negative.")]
)
def test_cancel_negative_ids_are_412_with_the_seed_text(server: AdminServer, base: str, text: str) -> None:
    for query in ("ledgerId=-1&entryId=0", "ledgerId=3&entryId=-5"):
        r = call(server, "POST", f"{base}/plain/cancelDelayedMessage?{query}", b"")
        assert (r.status, r.reason) == (412, text)


def test_cancel_invalid_parameters(server: AdminServer, world: World) -> None:
    mid = world.delayed[0]
    cases = {
        f"{V2}/plain/cancelDelayedMessage?entryId=1": "missing ledgerId",
        f"{V2}/plain/cancelDelayedMessage?ledgerId=1": "missing entryId",
        f"{V2}/plain/cancelDelayedMessage?ledgerId=abc&entryId=1": "Invalid ledgerId 'abc'",
        f"{V2}/plain/cancelDelayedMessage?ledgerId=1&entryId=1.5": "Invalid entryId '1.5'",
        f"{V2}/plain/cancelDelayedMessage?ledgerId=99999999999999999999&entryId=1": "out of range",
    }
    for path, reason in cases.items():
        r = call(server, "POST", path, b"")
        assert r.status == 412 and reason in r.reason, (path, r.reason)
    r = call(server, "POST", cancel_path(V2, "plain", MessageId(mid.ledger_id, 999)), b"")
    assert r.status == 412 and "does not exist" in r.reason
    r = call(server, "POST", cancel_path(V2, "nope", mid), b"")
    assert r.status == 404 and "nope not found" in r.reason
    r = call(server, "POST", cancel_path(V2, "plain", mid, "&subscriptionNames=shared,ghost"), b"")
    assert r.status == 404 and "ghost" in r.reason
    assert not world.deleted(PLAIN, "shared", mid)  # nothing changed before the 404


# -- PIP-423: skipByMessageIds ----------------------------------------------------------------------


def test_skip_by_message_ids_both_bodies(server: AdminServer, world: World) -> None:
    p0, p1, p2 = world.plain[:3]
    b1 = world.batch[1]
    structured = {
        "type": "messageId",
        "messageIds": [
            {"ledgerId": p0.ledger_id, "entryId": p0.entry_id},
            {"ledgerId": str(b1.ledger_id), "entryId": b1.entry_id, "batchIndex": 1},
        ],
    }
    r = call(server, "POST", skip_path("plain", "shared"), json.dumps(structured))
    assert (r.status, r.body) == (204, b"")
    r = call(server, "POST", skip_path("plain", "shared"), json.dumps([p1.to_base64(), None]))
    assert r.status == 204
    r = call(
        server, "POST", skip_path("plain", "keyed"), json.dumps({"type": "byteArray", "messageIds": [p2.to_base64()]})
    )
    assert r.status == 204
    assert world.deleted(PLAIN, "shared", p0) and world.deleted(PLAIN, "shared", p1)
    assert world.deleted(PLAIN, "keyed", p2) and not world.deleted(PLAIN, "shared", p2)
    got = world.drain(PLAIN, "shared")
    assert b"p0" not in got and b"p1" not in got and b"b1" not in got and b"b0" in got and b"p2" in got


def test_skip_by_message_ids_errors(server: AdminServer, world: World) -> None:
    p0 = world.plain[0]
    bad = {
        b"": "empty body",
        b"{not json": "malformed JSON",
        b'"text"': "unsupported top-level JSON",
        b'{"type": "messageId"}': "missing messageIds",
        b'["@@not base64@@"]': "invalid base64 messageId",
        b'[""]': "invalid base64 messageId (empty)",
        b'{"type": "messageId", "messageIds": [{"entryId": 1}]}': "missing ledgerId",
        b'{"type": "messageId", "messageIds": [{"ledgerId": "x", "entryId": 1}]}': "invalid ledgerId",
        b'{"type": "other", "messageIds": []}': "unsupported type for array",
    }
    for body, reason in bad.items():
        r = call(server, "POST", skip_path("plain", "shared"), body)
        assert r.status == 400, (body, r.body)
        assert r.reason.startswith(PAYLOAD_ERROR_PREFIX) and reason in r.reason, (body, r.reason)
    negative = json.dumps({"type": "messageId", "messageIds": [{"ledgerId": -1, "entryId": 0}]})
    r = call(server, "POST", skip_path("plain", "shared"), negative)
    assert r.status == 412 and "non-negative" in r.reason
    batch_out_of_range = json.dumps(
        {
            "type": "messageId",
            "messageIds": [{"ledgerId": world.batch[0].ledger_id, "entryId": world.batch[0].entry_id, "batchIndex": 7}],
        }
    )
    r = call(server, "POST", skip_path("plain", "shared"), batch_out_of_range)
    assert r.status == 400 and "Invalid batch index 7" in r.reason
    good = json.dumps([p0.to_base64()])
    r = call(server, "POST", skip_path("plain", "excl"), good)
    assert (r.status, r.reason) == (405, "Unsupported subscription type.")
    r = call(server, "POST", skip_path("plain", "ghost"), good)
    assert r.status == 404 and "ghost" in r.reason
    r = call(server, "POST", skip_path("nope", "shared"), good)
    assert r.status == 404
    assert not world.deleted(PLAIN, "shared", p0)


# -- skip, clear-backlog, reset-cursor ------------------------------------------------------------------


def backlog(srv: AdminServer, sub: str) -> int:
    return int(call(srv, "GET", f"{V2}/plain/internalStats").json["cursors"][sub]["numberOfEntriesInBacklog"])


def test_skip_clear_backlog_and_reset_cursor(server: AdminServer, world: World) -> None:
    assert backlog(server, "shared") == 11
    r = call(server, "POST", f"{V2}/plain/subscription/shared/skip/3", b"")
    assert r.status == 204 and backlog(server, "shared") == 8
    for bad in ("abc", "1.5", "99999999999"):
        r = call(server, "POST", f"{V2}/plain/subscription/shared/skip/{bad}", b"")
        assert r.status == 400 and "numMessages" in r.reason
    r = call(server, "POST", f"{V2}/plain/subscription/shared/skip/-1", b"")
    assert r.status == 400
    r = call(server, "POST", f"{V2}/plain/subscription/shared/skip_all", b"")
    assert r.status == 204 and backlog(server, "shared") == 0
    # reset to earliest with Pulsar's MessageId.earliest body, then to a position
    r = call(server, "POST", f"{V2}/plain/subscription/shared/resetcursor", json.dumps({"ledgerId": -1, "entryId": -1}))
    assert r.status == 204 and backlog(server, "shared") == 11
    p3 = world.plain[3]
    body = {
        "ledgerId": p3.ledger_id,
        "entryId": p3.entry_id,
        "partitionIndex": -1,
        "isExcluded": False,
        "batchIndex": -1,
        "properties": {},
    }
    r = call(server, "POST", f"{V2}/plain/subscription/shared/resetcursor", json.dumps(body))
    assert r.status == 204 and backlog(server, "shared") == 4  # p3, p4, p5, batch
    # by publish time: everything (all published at T0) -> back to the first entry
    r = call(server, "POST", f"{V2}/plain/subscription/shared/resetcursor/{T0}", b"")
    assert r.status == 204 and backlog(server, "shared") == 11
    r = call(server, "POST", f"{V2}/plain/subscription/shared/resetcursor/soon", b"")
    assert r.status == 400
    for body_text, reason in (
        ("", "empty"),
        ("[1]", "expected a JSON object"),
        ('{"ledgerId": 1}', "missing entryId"),
        ('{"ledgerId": 1, "entryId": 0, "isExcluded": true}', "isExcluded"),
    ):
        r = call(server, "POST", f"{V2}/plain/subscription/shared/resetcursor", body_text)
        assert r.status == 400 and reason in r.reason, (body_text, r.reason)
    r = call(server, "POST", f"{V2}/plain/subscription/ghost/skip_all", b"")
    assert r.status == 404


# -- create / delete ------------------------------------------------------------------------------------


def test_create_and_delete_topics_and_subscriptions(server: AdminServer) -> None:
    assert call(server, "PUT", f"{V2}/fresh", b"").status == 204
    r = call(server, "PUT", f"{V2}/fresh", b"")
    assert r.status == 409 and "already exists" in r.reason
    assert call(server, "PUT", f"{V2}/multi/partitions", b"3").status == 204
    assert call(server, "GET", f"{V2}/multi/partitions").json == {"partitions": 3}
    for body in (b"0", b"x", b"[]"):
        assert call(server, "PUT", f"{V2}/other/partitions", body).status == 400
    r = call(
        server,
        "PUT",
        f"{V2}/multi/subscription/s1?subscriptionType=Shared",
        json.dumps({"ledgerId": -1, "entryId": -1}),
    )
    assert r.status == 204
    assert call(server, "PUT", f"{V2}/multi/subscription/s1", b"").status == 409
    assert call(server, "PUT", f"{V2}/multi/subscription/s2?subscriptionType=Bogus", b"").status == 400
    assert call(server, "GET", f"{V2}/multi/subscriptions").json == ["s1"]
    assert call(server, "DELETE", f"{V2}/multi/subscription/s1").status == 204
    assert call(server, "DELETE", f"{V2}/multi/subscription/s1").status == 404
    assert call(server, "DELETE", f"{V2}/multi/partitions?force=true").status == 204
    assert call(server, "DELETE", f"{V2}/fresh").status == 204
    assert call(server, "DELETE", f"{V2}/fresh").status == 404
    assert call(server, "GET", V2).json == [ORDERS, PLAIN]


def test_names_are_url_decoded_as_pulsar_encodes_them(server: AdminServer, world: World) -> None:
    # Java's URLEncoder: space -> '+', '+' -> %2B; ':' -> %3A
    assert call(server, "PUT", f"{V2}/my+topic%2Bv%3A1", b"").status == 204
    assert "persistent://public/default/my topic+v:1" in call(server, "GET", V2).json
    assert call(server, "PUT", f"{V2}/my+topic%2Bv%3A1/subscription/sub+one?subscriptionType=Shared", b"").status == 204
    assert call(server, "GET", f"{V2}/my+topic%2Bv%3A1/subscriptions").json == ["sub one"]
    assert world.broker.get_subscription("persistent://public/default/my topic+v:1", "sub one") is not None
    r = call(server, "GET", f"{V2}/a%2Fb/subscriptions")  # an encoded '/' stays in the name: invalid
    assert r.status == 400 and "Invalid topic name" in r.reason
    r = call(server, "GET", f"{V2}/%FF/subscriptions")
    assert r.status == 400 and "UTF-8" in r.reason


def test_unexpected_errors_are_500_with_a_reason(server: AdminServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Topics, namespace: str | None = None) -> list[str]:
        raise RuntimeError("boom")

    monkeypatch.setattr(Topics, "list_topics", boom)
    r = call(server, "GET", V2)
    assert (r.status, r.reason) == (500, "Internal server error: RuntimeError: boom")


def test_request_limits(world: World) -> None:
    with AdminServer(Admin(world.broker), port=0, max_body_bytes=64) as srv:
        r = call(srv, "POST", skip_path("plain", "shared"), b"[" + b'"AA==",' * 20 + b'"AA=="]')
        assert r.status == 413 and "too large" in r.reason
        assert chunked(srv, skip_path("plain", "shared"), [b'["', b"AA==", b'"]']) == (400, "invalid base64 messageId")
        assert chunked(srv, skip_path("plain", "shared"), [b"x" * 40, b"y" * 40])[0] == 413
    with AdminServer(Admin(world.broker), port=0) as srv:
        mid = world.plain[0]
        assert chunked(srv, skip_path("plain", "shared"), [b'["', mid.to_base64().encode(), b'"]'])[0] == 204
        assert world.deleted(PLAIN, "shared", mid)


def chunked(srv: AdminServer, path: str, parts: list[bytes]) -> tuple[int, str]:
    """POST ``parts`` with Transfer-Encoding: chunked; (status, reason or "")."""
    import http.client

    host, port = srv.address
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        conn.request("POST", path, body=iter(parts), encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
        response = conn.getresponse()
        body = response.read()
        reason = json.loads(body)["reason"] if body else ""
        return response.status, reason.removeprefix(PAYLOAD_ERROR_PREFIX)
    finally:
        conn.close()


# -- authorization ---------------------------------------------------------------------------------------


def test_authorization_on(auth_server: AdminServer, world: World) -> None:
    stats = f"{V2}/plain/internalStats"
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic dG9rLW9wcw=="},
        {"Authorization": "Bearer "},
    ):
        r = call(auth_server, "GET", stats, headers=headers)
        assert (r.status, r.reason) == (401, "Authentication required"), headers
    r = call(auth_server, "GET", "/admin/v2/persistent/public/default/plain/nothing")
    assert r.status == 401  # authentication comes first, as Pulsar's filter
    reader = {"Authorization": "Bearer tok-reader"}
    assert call(auth_server, "GET", stats, headers=reader).status == 200
    mid = world.delayed[0]
    r = call(auth_server, "POST", cancel_path(V2, "plain", mid, "&subscriptionNames=shared"), b"", reader)
    assert r.status == 403
    assert r.reason == (
        "Unauthorized to validateTopicOperation for operation [CANCEL_DELAYED_MESSAGE] "
        "on topic [persistent://public/default/plain]"
    )
    r = call(auth_server, "POST", skip_path("plain", "shared"), json.dumps([mid.to_base64()]), reader)
    assert r.status == 403 and "[SKIP]" in r.reason
    assert not world.deleted(PLAIN, "shared", mid)
    ops = {"Authorization": "Bearer tok-ops"}
    r = call(auth_server, "POST", cancel_path(V2, "plain", mid, "&subscriptionNames=shared"), b"", ops)
    assert r.status == 204 and world.deleted(PLAIN, "shared", mid)
    r = call(auth_server, "POST", skip_path("plain", "keyed"), json.dumps([mid.to_base64()]), {ROLE_HEADER: "root"})
    assert r.status == 204 and world.deleted(PLAIN, "keyed", mid)
    r = call(auth_server, "POST", skip_path("plain", "keyed"), json.dumps([mid.to_base64()]), {ROLE_HEADER: "nobody"})
    assert r.status == 403
    assert call(auth_server, "GET", "/metrics").status == 200  # like Pulsar's default


def test_role_header_needs_trust(world: World) -> None:
    authorization = Authorization({"ops": {"*": ALL_OPS}})
    with AdminServer(Admin(world.broker, authorization=authorization), port=0, roles=RoleResolver({"t": "ops"})) as srv:
        assert call(srv, "GET", V2, headers={ROLE_HEADER: "ops"}).status == 401
        assert call(srv, "GET", V2, headers={"Authorization": "bearer t"}).status == 200


def test_authorization_off_ignores_credentials(server: AdminServer, world: World) -> None:
    mid = world.delayed[0]
    r = call(
        server,
        "POST",
        cancel_path(V2, "plain", mid, "&subscriptionNames=shared"),
        b"",
        {"Authorization": "Bearer whatever", ROLE_HEADER: "nobody"},
    )
    assert r.status == 204


def test_token_file_and_bind_parsing(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"abc": "ops"}))
    assert RoleResolver.from_token_file(path).role_for({"Authorization": "Bearer abc"}, required=True) == "ops"
    for text in ("[1]", "{bad", json.dumps({"abc": ""})):
        path.write_text(text)
        with pytest.raises(ConfigError):
            RoleResolver.from_token_file(path)
    assert parse_bind("127.0.0.1:0", 8080) == ("127.0.0.1", 0)
    assert parse_bind("[::1]:8080", 8080) == ("::1", 8080)
    assert parse_bind("8081", 8080) == ("127.0.0.1", 8081)  # a bare port (tests/test_bind_address.py)
    for bad in ("host:x", "host:70000", "::1:80"):
        with pytest.raises(ConfigError):
            parse_bind(bad, 8080)


def test_connections_accepted_by_a_plain_asyncio_loop_have_nagle_off() -> None:
    """AdminServer.serve() may run in any asyncio loop (not only uvloop's): asyncio turns Nagle's
    algorithm off only on sockets made as TCP, and without it each response (uvicorn writes head
    and body apart) waits for the client's delayed ACK."""
    import asyncio
    import socket

    from mledger.protocol import Acceptor, listening_socket

    listening = listening_socket("127.0.0.1", 0, 16, "probe")
    nodelay: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def accept_one() -> None:
        acceptor = Acceptor(listening, Probe, name="probe")
        acceptor.start()
        try:
            reader, writer = await asyncio.open_connection(*listening.getsockname()[:2])
            await asyncio.wait_for(reader.read(), TIMEOUT)  # the probe closes it
            writer.close()
        finally:
            await acceptor.close()

    with asyncio.Runner() as runner:  # the standard library's loop
        runner.run(accept_one())
    assert nodelay and nodelay[0] != 0


# -- concurrency -------------------------------------------------------------------------------------------


def test_concurrent_requests_leave_consistent_state(server: AdminServer, world: World) -> None:
    producer = world.broker.create_producer(PLAIN)
    ids = [producer.send(f"c{i}".encode()) for i in range(60)]
    producer.close()
    threads, per_thread = 4, 15
    statuses: list[int] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for i in range(per_thread):
            mid = ids[t * per_thread + i]
            if i % 3 == 0:
                r = call(server, "POST", cancel_path(V2, "plain", mid, "&subscriptionNames=shared,keyed"), b"")
            elif i % 3 == 1:
                r = call(server, "POST", skip_path("plain", "shared"), json.dumps([mid.to_base64()]))
                r2 = call(server, "POST", skip_path("plain", "keyed"), json.dumps([mid.to_base64()]))
                with lock:
                    statuses.append(r2.status)
            else:
                r = call(server, "GET", f"{V2}/plain/internalStats")
                call(server, "POST", skip_path("plain", "shared"), json.dumps([mid.to_base64()]))
                call(server, "POST", skip_path("plain", "keyed"), json.dumps([mid.to_base64()]))
            with lock:
                statuses.append(r.status)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)
    assert set(statuses) <= {200, 204} and len(statuses) == threads * per_thread + threads * 5
    for sub in ("shared", "keyed"):
        assert all(world.deleted(PLAIN, sub, mid) for mid in ids)
        stats = call(server, "GET", f"{V2}/plain/internalStats").json["cursors"][sub]
        assert stats["numberOfEntriesInBacklog"] == 11  # only the first messages are left
        cursor = world.sub(PLAIN, sub).cursor
        assert str(cursor.individually_deleted_messages()) == stats["individuallyDeletedMessages"]
        cursor._check()
    assert server.in_flight == 0


def test_shutdown_drains_and_is_idempotent(world: World) -> None:
    srv = AdminServer(Admin(world.broker), port=0).start()
    assert call(srv, "GET", V2).status == 200
    assert srv.shutdown(drain_timeout=5) is True
    assert srv.shutdown() is True
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(srv.url + V2, timeout=2)


# -- the CLI against the server, as a subprocess -------------------------------------------------------------


def admin_cli(*argv: str, code: int = 0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*ADMIN_CLI, *argv], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    assert done.returncode == code, (argv, done.returncode, done.stdout, done.stderr)
    return done


def test_cli_admin_url_mode(server: AdminServer, world: World) -> None:
    url = ["--admin-url", server.url]
    local = Admin(world.broker)
    assert admin_cli(*url, "topics", "list", "public/default").stdout.split() == [ORDERS, PLAIN]
    assert admin_cli(*url, "topics", "list-partitioned-topics", "public/default").stdout.split() == [ORDERS]
    assert admin_cli(*url, "topics", "subscriptions", "orders").stdout.split() == ["excl", "keyed", "shared"]
    out = admin_cli(*url, "topics", "stats-internal", "plain").stdout
    assert out.strip() == local.topics.internal_stats(PLAIN).to_json()
    out = admin_cli(*url, "topics", "stats-internal", "orders").stdout  # partitioned: the CLI's fallback
    assert json.loads(out)["metadata"] == {"partitions": 2}

    d0 = world.delayed[0]
    done = admin_cli(
        *url, "topics", "cancel-delayed-message", "plain", "-l", str(d0.ledger_id), "-e", str(d0.entry_id), code=9
    )
    assert json.loads(done.stdout) == {
        "topic": PLAIN,
        "ledgerId": d0.ledger_id,
        "entryId": d0.entry_id,
        "results": {"excl": False, "keyed": True, "shared": True},
    }
    assert "excl" in done.stderr
    d1 = world.delayed[1]
    done = admin_cli(
        *url,
        "topics",
        "cancel-delayed-message",
        "plain",
        "--ledgerId",
        str(d1.ledger_id),
        "--entryId",
        str(d1.entry_id),
        "--subscriptionNames",
        "shared",
    )
    assert json.loads(done.stdout)["results"] == {"shared": True}
    p0, p1, b2 = world.plain[0], world.plain[1], world.batch[2]
    admin_cli(
        *url,
        "topics",
        "skip-messages",
        "plain",
        "-s",
        "shared",
        "--messageId-triplet",
        f"{p0.ledger_id}:{p0.entry_id}",
        "--messageId-base64",
        p1.to_base64(),
        "--messageId-triplet",
        f"{b2.ledger_id}:{b2.entry_id}:2",
    )
    assert world.deleted(PLAIN, "shared", p0) and world.deleted(PLAIN, "shared", p1)
    assert world.sub(PLAIN, "shared").cursor.deleted_batch_indexes(Position(b2.ledger_id, b2.entry_id)) == [2]

    before = local.topics.internal_stats(PLAIN).cursors["keyed"].number_of_entries_in_backlog
    admin_cli(*url, "topics", "skip", "plain", "-s", "keyed", "-n", "2")
    assert local.topics.internal_stats(PLAIN).cursors["keyed"].number_of_entries_in_backlog == before - 2
    admin_cli(*url, "topics", "clear-backlog", "plain", "-s", "keyed")
    admin_cli(*url, "topics", "reset-cursor", "plain", "-s", "keyed", "-m", "earliest")
    assert local.topics.internal_stats(PLAIN).cursors["keyed"].number_of_entries_in_backlog == 11
    admin_cli(*url, "topics", "create-partitioned-topic", "more", "-p", "2")
    admin_cli(*url, "topics", "create-subscription", "more", "-s", "s", "-t", "Shared", "-m", "earliest")
    assert admin_cli(*url, "topics", "subscriptions", "more").stdout.split() == ["s"]
    admin_cli(*url, "topics", "unsubscribe", "more", "-s", "s")
    admin_cli(*url, "topics", "delete", "more")

    # errors: same exit codes and reasons as the local mode
    done = admin_cli(*url, "topics", "subscriptions", "nope", code=6)
    assert done.stderr.strip() == "Topic persistent://public/default/nope not found"
    done = admin_cli(*url, "topics", "skip-messages", "plain", "-s", "excl", "--messageId-triplet", "1:1", code=7)
    assert done.stderr.strip() == "Unsupported subscription type."
    admin_cli(*url, "topics", "cancel-delayed-message", "plain", "-l", "-1", "-e", "0", code=9)
    admin_cli(*url, "topics", "list", code=3)
    assert "needs --data-dir" in admin_cli(*url, "topics", "produce", "plain", "-m", "x", code=2).stderr
    done = admin_cli("--admin-url", "http://127.0.0.1:9", "topics", "list", "public/default", code=1)
    assert "cannot reach" in done.stderr


def test_cli_admin_url_with_a_token(auth_server: AdminServer, world: World) -> None:
    url = ["--admin-url", auth_server.url]
    admin_cli(*url, "topics", "subscriptions", "plain", code=4)
    assert admin_cli(*url, "--token", "tok-reader", "topics", "subscriptions", "plain").stdout.split() == [
        "excl",
        "keyed",
        "shared",
    ]
    mid = world.delayed[0]
    args = (
        "topics",
        "cancel-delayed-message",
        "plain",
        "-l",
        str(mid.ledger_id),
        "-e",
        str(mid.entry_id),
        "-s",
        "shared",
    )
    admin_cli(*url, *args, code=5, env={"MLEDGER_ADMIN_TOKEN": "tok-reader"})
    admin_cli(*url, *args, env={"MLEDGER_ADMIN_TOKEN": "tok-ops"})
    admin_cli(*url, "--role", "root", "topics", "clear-backlog", "plain", "-s", "keyed")


def _read_line(stream: Any, timeout: float) -> str:
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return line[0] if line else ""


def test_serve_subprocess_over_a_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [*ADMIN_CLI, "serve", "--data-dir", str(data), "--bind", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = _read_line(proc.stdout, 60)
        assert first.startswith("mledger-admin: serving http://127.0.0.1:"), (first, proc.poll())
        url = first.split()[2]
        admin_cli("--admin-url", url, "topics", "create", "orders")
        admin_cli("--admin-url", url, "topics", "create-subscription", "orders", "-s", "s", "-t", "Shared")
        with urllib.request.urlopen(url + "/metrics", timeout=TIMEOUT) as r:
            text = r.read().decode()
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
        }
        labels = (
            ("cluster", "standalone"),
            ("namespace", "public/default"),
            ("subscription", "s"),
            ("topic", "persistent://public/default/orders"),
        )
        assert samples[("pulsar_cursor_epoch_increase_count_total", labels)] == 0
        # the directory is held by the server
        admin_cli("--data-dir", str(data), "topics", "list", code=1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert admin_cli("--data-dir", str(data), "topics", "subscriptions", "orders").stdout.split() == ["s"]
    stderr = proc.stderr.read() if proc.stderr else ""
    assert '"PUT /admin/v2/persistent/public/default/orders" 204' in stderr  # one access-log line per request


def test_serve_command_line_errors(tmp_path: Path) -> None:
    done = admin_cli("serve", "--data-dir", str(tmp_path), "--bind", "nope:x", code=2)
    assert "invalid --bind 'nope:x': port 'x' is not a number" in done.stderr
    done = admin_cli("serve", "--data-dir", str(tmp_path), "--bind", "nope.invalid", code=1)  # a host, port 8080
    assert "admin REST server: cannot listen on nope.invalid:8080" in done.stderr
    done = admin_cli("serve", code=2, env={"MLEDGER_DATA_DIR": ""})
    assert "--data-dir is required" in done.stderr


# -- retention policies ------------------------------------------------------------------------


def test_retention_policies_on_topics_and_namespaces(server: AdminServer, world: World) -> None:
    ns = "/admin/v2/namespaces/public/default/retention"
    assert call(server, "GET", ns).json is None
    assert call(server, "POST", ns, '{"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}').status == 204
    assert call(server, "GET", ns).json == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
    assert call(server, "GET", f"{V2}/plain/retention").json is None
    assert call(server, "GET", f"{V2}/plain/retention?applied=true").json == {
        "retentionTimeInMinutes": 60,
        "retentionSizeInMB": 1024,
    }
    assert (
        call(server, "POST", f"{V2}/orders/retention", '{"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}').status
        == 204
    )
    partition = world.broker.get_topic(f"{ORDERS}-partition-1")
    assert partition.managed_ledger.config.retention_time_ms == -1  # applied to every partition
    assert call(server, "GET", f"{V1}/orders/retention").json == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    bad = call(server, "POST", f"{V2}/plain/retention", '{"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}')
    assert bad.status == 412 and "Setting a single time or size limit to 0 is invalid" in bad.reason
    for body in ("not json", '{"retentionTimeInMinutes": "1h"}', '{"retention": 1}', "[]"):
        assert call(server, "POST", f"{V2}/plain/retention", body).status == 400, body
    assert call(server, "GET", f"{V2}/missing/retention").status == 404
    assert call(server, "DELETE", f"{V2}/orders/retention").status == 204
    assert call(server, "GET", f"{V2}/orders/retention").json is None
    assert call(server, "DELETE", ns).status == 204
    assert call(server, "GET", ns).json is None
    document = call(server, "GET", "/openapi.json").json
    assert "RetentionPoliciesData" in document["components"]["schemas"]
    assert {"get", "post", "delete"} <= set(
        document["paths"]["/admin/v2/persistent/{tenant}/{namespace}/{topic}/retention"]
    )


def test_retention_reads_and_changes_need_a_tenant_admin(auth_server: AdminServer) -> None:
    policy = '{"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}'
    ops = {"Authorization": "Bearer tok-ops"}
    root = {ROLE_HEADER: "root"}
    assert call(auth_server, "GET", f"{V2}/plain/retention").status == 401
    assert call(auth_server, "GET", f"{V2}/plain/retention", headers=ops).status == 403  # a policy: issue 31
    assert call(auth_server, "GET", f"{V2}/plain/retention", headers=root).status == 200
    assert call(auth_server, "POST", f"{V2}/plain/retention", policy, headers=ops).status == 403
    assert call(auth_server, "POST", "/admin/v2/namespaces/public/default/retention", policy, headers=ops).status == 403
    assert call(auth_server, "POST", f"{V2}/plain/retention", policy, headers=root).status == 204
    assert call(auth_server, "DELETE", f"{V2}/plain/retention", headers=ops).status == 403


def test_remote_admin_retention_matches_the_library(server: AdminServer) -> None:
    from mledger.admin import RemoteAdmin, RetentionPolicies

    with RemoteAdmin(server.url, timeout=TIMEOUT) as remote:
        remote.namespaces.set_retention("public/default", RetentionPolicies(30, 100))
        assert remote.namespaces.get_retention("public/default") == RetentionPolicies(30, 100)
        assert remote.topics.get_retention(PLAIN) is None
        assert remote.topics.get_retention(PLAIN, applied=True) == RetentionPolicies(30, 100)
        remote.topics.set_retention(PLAIN, RetentionPolicies(-1, 5))
        assert remote.topics.get_retention(PLAIN) == RetentionPolicies(-1, 5)
        remote.topics.remove_retention(PLAIN)
        remote.namespaces.remove_retention("public/default")
        assert remote.topics.get_retention(PLAIN, applied=True) == RetentionPolicies(0, 0)
        with pytest.raises(NotFoundError, match="Namespace does not exist: acme/prod"):
            remote.topics.create_topic("acme/prod/x")
        remote.tenants.create("acme", {"allowedClusters": ["standalone"]})
        remote.namespaces.create("acme/prod")
        assert remote.topics.create_topic("acme/prod/x") == "persistent://acme/prod/x"


# -- topic stats (GET .../stats, .../partitioned-stats) ---------------------------------------------


def test_topic_stats_routes(server: AdminServer, world: World) -> None:
    local = Admin(world.broker).topics
    r = call(server, "GET", f"{V2}/plain/stats")
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    assert r.json == json.loads(local.stats(PLAIN).to_json())
    assert r.json["msgInCounter"] == 13 and r.json["publishers"] == []  # 4 delayed, 6 plain, a batch of 3
    assert set(r.json["subscriptions"]) == {"excl", "keyed", "shared"}
    assert (
        r.json["subscriptions"]["shared"]["msgBacklog"] == 11 and r.json["subscriptions"]["shared"]["type"] == "Shared"
    )
    assert r.json["subscriptions"]["shared"]["backlogSize"] > 0
    # Pulsar's query parameters
    r = call(
        server,
        "GET",
        f"{V2}/plain/stats?subscriptionBacklogSize=false&getEarliestTimeInBacklog=true&getPreciseBacklog=true",
    )
    assert r.status == 200
    assert {s["backlogSize"] for s in r.json["subscriptions"].values()} == {-1}
    assert r.json["earliestMsgPublishTimeInBacklogs"] == T0
    assert call(server, "GET", f"{V1}/plain/stats").json == json.loads(local.stats(PLAIN).to_json())
    # partitioned: the partitions' added up, each one's by default (perPartition=true, as Pulsar)
    r = call(server, "GET", f"{V2}/orders/partitioned-stats")
    assert r.status == 200 and r.json["metadata"] == {"partitions": 2}
    assert set(r.json["partitions"]) == {f"{ORDERS}-partition-0", f"{ORDERS}-partition-1"}
    assert r.json["msgInCounter"] == 4 and r.json["subscriptions"]["keyed"]["msgBacklog"] == 4
    r = call(server, "GET", f"{V2}/orders/partitioned-stats?perPartition=false")
    assert r.status == 200 and r.json["partitions"] == {}
    full = call(server, "GET", f"{V2}/orders/partitioned-stats").json
    one = call(server, "GET", f"{V2}/orders-partition-1/stats")
    assert one.status == 200 and one.json == full["partitions"][f"{ORDERS}-partition-1"]


def test_topic_stats_route_errors(server: AdminServer, auth_server: AdminServer) -> None:
    r = call(server, "GET", f"{V2}/orders/stats")
    assert r.status == 405 and "partitioned-stats" in r.reason
    r = call(server, "GET", f"{V2}/plain/partitioned-stats")
    assert r.status == 404 and "Partitioned Topic not found" in r.reason
    for path in (f"{V2}/nope/stats", f"{V2}/nope/partitioned-stats"):
        assert call(server, "GET", path).status == 404
    assert call(server, "GET", f"{V2}/plain/stats?subscriptionBacklogSize=maybe").status == 400
    assert call(server, "GET", f"{V2}/orders/partitioned-stats?perPartition=2").status == 400
    r = call(server, "GET", "/admin/v2/non-persistent/public/default/plain/partitioned-stats")
    assert (r.status, r.reason) == (405, "Operation not allowed on non-persistent topic")
    r = call(server, "GET", "/admin/v2/non-persistent/public/default/plain/stats")  # never loaded
    assert r.status == 404
    assert call(server, "POST", f"{V2}/plain/stats", b"").status == 405
    # GET_STATS, as Pulsar's TopicOperation
    assert call(auth_server, "GET", f"{V2}/plain/stats").status == 401
    assert call(auth_server, "GET", f"{V2}/plain/stats", headers={ROLE_HEADER: "reader"}).status == 200
    assert call(auth_server, "GET", f"{V2}/orders/partitioned-stats", headers={ROLE_HEADER: "reader"}).status == 200
    assert call(auth_server, "GET", f"{V2}/plain/stats", headers={ROLE_HEADER: "nobody"}).status == 403


def test_remote_admin_topic_stats_match_the_library(server: AdminServer, world: World) -> None:
    from mledger import MLedgerError
    from mledger.admin import RemoteAdmin

    local = Admin(world.broker).topics
    with RemoteAdmin(server.url, timeout=TIMEOUT) as remote:
        assert remote.topics.stats(PLAIN) == local.stats(PLAIN)
        got = remote.topics.stats(PLAIN, subscription_backlog_size=False, get_earliest_time_in_backlog=True)
        assert got.subscriptions["shared"].backlog_size == -1 and got.earliest_msg_publish_time_in_backlogs == T0
        assert remote.topics.partitioned_stats(ORDERS) == local.partitioned_stats(ORDERS)
        assert remote.topics.partitioned_stats(ORDERS, per_partition=False).partitions == {}
        with pytest.raises(MLedgerError) as info:
            remote.topics.stats(ORDERS)
        assert info.value.http_status == 405
        with pytest.raises(MLedgerError) as info:
            remote.topics.stats(PLAIN, get_precise_backlog="yes")  # type: ignore[arg-type]
        assert info.value.http_status == 400


# -- authenticated /metrics and docs (issue 23, item 3) ------------------------------------------


def _endpoint_server(**switches: bool) -> AdminServer:
    world = World(BrokerConfig(**switches))  # create_app reads the switches from the broker's config
    authorization = Authorization({"scraper": {}}, super_user_roles={"root"})
    roles = RoleResolver({"tok-scrape": "scraper"})
    return AdminServer(Admin(world.broker, authorization=authorization), port=0, roles=roles)


DOCS = ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect")


def test_metrics_and_docs_are_public_by_default_even_with_authentication() -> None:
    with _endpoint_server() as srv:
        assert call(srv, "GET", "/metrics").status == 200  # Pulsar's default
        assert all(call(srv, "GET", path).status == 200 for path in DOCS)


def test_authenticate_metrics_endpoint() -> None:
    with _endpoint_server(authenticate_metrics_endpoint=True) as srv:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = call(srv, "GET", "/metrics", headers=headers)
            assert (refused.status, refused.reason) == (401, "Authentication required")
            assert b"subscription=" not in refused.body
        assert call(srv, "GET", "/metrics/").status == 401
        scraped = call(srv, "GET", "/metrics", headers={"Authorization": "Bearer tok-scrape"})  # any role
        assert scraped.status == 200 and 'subscription="shared"' in scraped.body.decode()
        assert all(call(srv, "GET", path).status == 200 for path in DOCS)  # its own switch


def test_authenticate_docs_endpoint() -> None:
    with _endpoint_server(authenticate_docs_endpoint=True) as srv:
        for path in DOCS:
            assert call(srv, "GET", path).status == 401, path
            assert call(srv, "GET", path, headers={"Authorization": "Bearer tok-scrape"}).status == 200, path
        assert call(srv, "GET", "/metrics").status == 200


def test_endpoint_authentication_needs_credentials(tmp_path: Path) -> None:
    for switch in ("authenticate_metrics_endpoint", "authenticate_docs_endpoint"):
        with pytest.raises(ConfigError, match=f"{switch} needs authentication"):
            AdminServer(Admin(World(BrokerConfig(**{switch: True})).broker), port=0)
        done = admin_cli(
            "serve", "--data-dir", str(tmp_path), "--bind", "127.0.0.1:0", "--" + switch.replace("_", "-"), code=2
        )
        assert f"{switch} needs authentication" in done.stderr


# -- out-of-range numbers (issue 23, item 10) -----------------------------------------------------

HUGE = 2**70


def test_retention_out_of_java_range_is_refused_everywhere(server: AdminServer, world: World) -> None:
    """retentionTimeInMinutes is a Java int, retentionSizeInMB a long (Pulsar's clients cannot
    read back more): 400 naming the value, nothing stored; the library, REST and RemoteAdmin."""
    from mledger import InvalidRequestError
    from mledger.admin import RemoteAdmin
    from mledger.broker import RetentionPolicies

    ns = "/admin/v2/namespaces/public/default/retention"
    for path in (ns, f"{V2}/plain/retention"):
        for body, value in (
            (f'{{"retentionTimeInMinutes": {HUGE}, "retentionSizeInMB": 1}}', HUGE),
            (f'{{"retentionTimeInMinutes": {2**31}, "retentionSizeInMB": 1}}', 2**31),
            (f'{{"retentionTimeInMinutes": 1, "retentionSizeInMB": {HUGE}}}', HUGE),
            (f'{{"retentionTimeInMinutes": 1, "retentionSizeInMB": {-(2**63) - 1}}}', -(2**63) - 1),
        ):
            refused = call(server, "POST", path, body)
            assert refused.status == 400 and str(value) in refused.reason, (path, body, refused.reason)
        assert call(server, "GET", path).json is None  # nothing stored
        widest = f'{{"retentionTimeInMinutes": {2**31 - 1}, "retentionSizeInMB": {2**63 - 1}}}'
        assert call(server, "POST", path, widest).status == 204
    huge = RetentionPolicies(HUGE, 1)
    with RemoteAdmin(server.url, timeout=TIMEOUT) as remote:
        with pytest.raises(InvalidRequestError, match=str(HUGE)):
            remote.namespaces.set_retention("public/default", huge)
    local = Admin(world.broker)
    with pytest.raises(InvalidRequestError, match=str(HUGE)):
        local.namespaces.set_retention("public/default", huge)
    with pytest.raises(InvalidRequestError, match=str(HUGE)):
        local.topics.set_retention(PLAIN, huge)


def test_reset_cursor_refuses_negative_positions_and_times(server: AdminServer, world: World) -> None:
    base = f"{V2}/plain/subscription/shared"
    stats = f"{V2}/plain/internalStats"
    before = call(server, "GET", stats).json["cursors"]["shared"]
    for body, named in (
        ('{"ledgerId": -5, "entryId": -1}', "-5:-1"),
        ('{"ledgerId": 3, "entryId": -7}', "3:-7"),
        ('{"ledgerId": -1, "entryId": 0}', "-1:0"),
    ):
        refused = call(server, "POST", f"{base}/resetcursor", body)
        assert refused.status == 412 and named in refused.reason, (body, refused.reason)
        refused = call(server, "PUT", f"{V2}/plain/subscription/fresh", body)
        assert refused.status == 412 and named in refused.reason, (body, refused.reason)
    for timestamp in ("-1", str(-(2**63))):
        refused = call(server, "POST", f"{base}/resetcursor/{timestamp}")
        assert refused.status == 400 and timestamp in refused.reason, (timestamp, refused.reason)
    assert call(server, "GET", stats).json["cursors"]["shared"] == before
    assert "fresh" not in call(server, "GET", f"{V2}/plain/subscriptions").json
    # -1:-1 is MessageId.earliest, as Pulsar's clients send it; 0 is the epoch
    assert call(server, "POST", f"{base}/resetcursor", '{"ledgerId": -1, "entryId": -1}').status == 204
    assert call(server, "POST", f"{base}/resetcursor/0").status == 204


def test_remote_admin_tenants_clusters_and_permissions(server: AdminServer) -> None:
    """Issue 26 item 4: RemoteAdmin has the library's tenant, cluster and permission calls."""
    from mledger.admin import RemoteAdmin
    from mledger.admin._remote import RemoteAdminError
    from mledger.broker import TenantInfo

    with RemoteAdmin(server.url, timeout=TIMEOUT) as remote:
        remote.clusters.create("ci", {"serviceUrl": "http://ci:8080"})
        assert remote.clusters.get("ci")["serviceUrl"] == "http://ci:8080"
        remote.clusters.update("ci", {"brokerServiceUrl": "pulsar://ci:6650"})
        assert remote.clusters.get("ci")["brokerServiceUrl"] == "pulsar://ci:6650"
        assert remote.clusters.list() == ["ci", "standalone"]
        remote.tenants.create("acme", TenantInfo(("boss",), ("ci",)))
        with pytest.raises(RemoteAdminError) as conflict:
            remote.tenants.create("acme", TenantInfo(("boss",), ("ci",)))
        assert conflict.value.http_status == 409
        remote.tenants.update("acme", {"adminRoles": ["boss", "deputy"], "allowedClusters": ["standalone"]})
        assert remote.tenants.get("acme") == TenantInfo(("boss", "deputy"), ("standalone",))
        assert "acme" in remote.tenants.list()
        remote.namespaces.create("acme/app", {"auth_policies": {"namespace_auth": {"app": ["produce"]}}})
        assert remote.namespaces.list("acme") == ["acme/app"]
        remote.namespaces.grant_permission("acme/app", "ops", ["consume"])
        assert remote.namespaces.permissions("acme/app") == {"app": ["produce"], "ops": ["consume"]}
        remote.topics.grant_permission("acme/app/t", "reader", ["consume"])
        assert remote.topics.permissions("acme/app/t") == {
            "app": ["produce"],
            "ops": ["consume"],
            "reader": ["consume"],
        }
        remote.topics.revoke_permission("acme/app/t", "reader")
        remote.namespaces.revoke_permission("acme/app", "ops")
        assert remote.topics.permissions("acme/app/t") == {"app": ["produce"]}
        remote.namespaces.delete("acme/app")
        remote.tenants.delete("acme")
        remote.clusters.delete("ci")
        with pytest.raises(NotFoundError):
            remote.tenants.get("acme")
