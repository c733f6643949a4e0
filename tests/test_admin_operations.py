"""Issue 24 item 5: the admin operation table, the admin library, the REST app, RemoteAdmin and
mledger-admin agree (as tests/test_protocol_coverage.py checks the protocol's command table)."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mledger import NotFoundError
from mledger.admin import Admin, CancelDelayedMessageResult, RemoteAdmin
from mledger.admin._operations import (
    NON_PERSISTENT_BASE,
    OPERATIONS,
    TOPIC_BASE,
    AdminOperation,
    by_verb,
    operation,
)
from mledger.admin._remote import (
    RemoteClock,
    RemoteClusters,
    RemoteFaults,
    RemoteNamespaces,
    RemoteNonPersistentTopics,
    RemoteTenants,
    RemoteTopics,
)
from mledger.broker import BacklogQuota, Broker, InactiveTopicPolicies, RetentionPolicies
from mledger.core import Position
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.storage import MemoryStore

REMOTE = {
    "topics": RemoteTopics,
    "namespaces": RemoteNamespaces,
    "tenants": RemoteTenants,
    "clusters": RemoteClusters,
    "non_persistent": RemoteNonPersistentTopics,
    "faults": RemoteFaults,
    "clock": RemoteClock,
}
PATH_PREFIX = {"topics": "persistent", "non_persistent": "non-persistent", "faults": "mledger/faults", "clock": "mledger/clock"}
V1_TOPIC_BASE = "/admin/persistent/{property}/{cluster}/{namespace}"


@pytest.fixture(scope="module")
def admin() -> Iterator[Admin]:
    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    yield Admin(broker)
    broker.close()


def _called(op: AdminOperation) -> bool:
    return op.call is not None


def test_table_is_consistent() -> None:
    keys = [(op.group, op.name) for op in OPERATIONS]
    assert len(keys) == len(set(keys))
    shapes = [(op.method, re.sub(r"\{[^}]+\}", "{}", op.path)) for op in OPERATIONS]
    assert len(shapes) == len(set(shapes)), "one operation per method and path"
    for op in OPERATIONS:
        assert op.method in ("GET", "PUT", "POST", "DELETE"), op
        assert op.status in (200, 204), op
        assert (op.status == 204) == (op.response is None), op
        assert op.path.startswith(f"/{PATH_PREFIX.get(op.group, op.group)}"), op
    assert operation("topics", "get_stats").url(tenant="t", namespace="n", topic="x") == (
        "/admin/v2/persistent/t/n/x/stats"
    )
    with pytest.raises(KeyError):
        by_verb("topics", "reset-cursor")  # by message id or by time: the CLI picks


def test_admin_library_and_remote_admin_have_every_call_with_the_same_parameters(admin: Admin) -> None:
    for op in filter(_called, OPERATIONS):
        assert op.call is not None
        local = getattr(getattr(admin, op.group), op.call)
        remote = getattr(REMOTE[op.group], op.call)
        local_params = list(inspect.signature(local).parameters.values())
        remote_params = list(inspect.signature(remote).parameters)[1:]  # self
        assert [p.name for p in local_params[: len(remote_params)]] == remote_params, op
        extra = local_params[len(remote_params) :]  # local-only options (trigger_compaction's wait)
        assert all(p.default is not inspect.Parameter.empty for p in extra), op


def test_rest_app_serves_every_operation_and_only_them(admin: Admin) -> None:
    from mledger.rest import create_app

    document = create_app(admin).openapi()
    served = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        if path.startswith(("/admin/v2/persistent", "/admin/v2/namespaces", "/admin/v2/tenants", "/admin/v2/clusters"))
        for method in operations
    }
    # not documented: the non-persistent operations (as their 405 twins) and mledger's extensions
    documented = [op for op in OPERATIONS if op.group not in ("non_persistent", "faults", "clock")]
    expected = {(op.method, "/admin/v2" + op.path) for op in documented}
    assert served == expected
    for op in documented:
        paths = ["/admin/v2" + op.path]
        if op.group == "topics":
            paths.append(V1_TOPIC_BASE + op.topic_suffix)
        for path in paths:
            documented = document["paths"][path][op.method.lower()]
            assert documented["summary"] == op.summary, (path, op)
            assert str(op.status) in documented["responses"], (path, op)


class _Recorded(Exception):
    pass


class _Recorder:
    """Stands for ``admin.<group>``: records each call, then refuses it (a 404 for the client)."""

    def __init__(self, group: str, calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> None:
        self._group = group
        self._calls = calls

    def __getattr__(self, call: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            self._calls.append((self._group, call, args, kwargs))
            raise NotFoundError("recorded")

        return record


_SEGMENTS = {
    "numMessages": "3",
    "timestamp": "1000",
    "expireTimeInSeconds": "60",
    "faultId": "3",
    "topic": "a%20b",
    "subName": "s+1",
    "role": "r%2F1",
}
_BODIES = {
    "int": b"2",
    "long": b"10",
    "bool": b"true",
    "list[AuthAction]": b'["produce"]',
    "list[str]": b'["r"]',
    "RetentionPoliciesData": b'{"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}',
    "SchemaCompatibilityStrategy": b'"BACKWARD"',
    "SchemaAutoUpdateCompatibilityStrategy": b'"Full"',
    "Policies": b"{}",
    "ClusterData": b"{}",
    "TenantInfo": b"{}",
    "SkipMessageIdsBody": b'["CAEQAg=="]',
    "ResetCursorData": b'{"ledgerId": 1, "entryId": 2}',
    "FaultSpec": b'{"action": "close", "command": "SEND"}',
    "FaultScenario": b'{"faults": []}',
    "milliseconds": b"60000",
    "ExpiryPosition": b'{"ledgerId": 1, "entryId": 2, "isExcluded": true}',
    "seconds": b"60",
    "BacklogQuota": b'{"limitTime": 60, "policy": "producer_exception"}',
    "InactiveTopicPolicies": b'{"maxInactiveDurationSeconds": 60}',
}


def test_each_rest_route_runs_its_operations_admin_call_once() -> None:
    """Every route of an operation with a call, generated or written by hand, calls
    ``admin.<group>.<call>`` once, with the names of its path decoded first."""
    from mledger.rest import create_app

    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    admin = Admin(broker)
    calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
    for group in REMOTE:
        setattr(admin, group, _Recorder(group, calls))
    app = create_app(admin)

    async def answer(op: AdminOperation) -> httpx.Response:
        path = re.sub(r"\{(\w+)\}", lambda m: _SEGMENTS.get(m.group(1), m.group(1)), "/admin/v2" + op.path)
        query = {"ledgerId": "1", "entryId": "2"} if op.name == "cancel_delayed_message" else None
        if any(flag.required for flag in op.query):
            query = {flag.wire: "60" for flag in op.query if flag.required}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://mledger") as client:
            return await client.request(op.method, path, params=query, content=_BODIES.get(op.request or ""))

    for op in filter(_called, OPERATIONS):
        calls.clear()
        response = asyncio.run(answer(op))
        assert (response.status_code, response.json()) == (404, {"reason": "recorded"}), (op, response.text)
        [(group, call, args, _)] = calls
        assert (group, call) == (op.group, op.call), op
        if "{topic}" in op.path:
            assert args[0] == f"{PATH_PREFIX[op.group]}://tenant/namespace/a b", op
        if "{subName}" in op.path:
            assert args[1] == "s 1", op
        if "{role}" in op.path:
            assert "r/1" in args, op
    broker.close()


_ARGUMENTS: dict[str, Any] = {
    "topic": "persistent://te/ns/a b",
    "namespace": "te/ns",
    "tenant": "te",
    "cluster": "c1",
    "subscription": "sub 1",
    "role": "r/1",
    "actions": ["produce"],
    "roles": ["r"],
    "position": Position(1, 2),
    "num_messages": 3,
    "timestamp_ms": 1000,
    "threshold": 10,
    "strategy": "BACKWARD",
    "policy": "Full",
    "allowed": True,
    "request": b'[{"messageId": "CAEQAg=="}]',
    "ledger_id": 1,
    "entry_id": 2,
    "data": {},
    "info": {"adminRoles": [], "allowedClusters": ["c1"]},
    "fault": {"action": "close", "command": "SEND"},
    "scenario": {"faults": []},
    "fault_id": 3,
    "ms": 60000,
    "seconds": 60,
    "expire_time_seconds": 60,
    "quota": BacklogQuota(limit_time=60),
}


def _arguments(group: str, call: str) -> dict[str, Any]:
    signature = inspect.signature(getattr(REMOTE[group], call))
    values = {}
    for name, parameter in list(signature.parameters.items())[1:]:
        if parameter.default is inspect.Parameter.empty or name == "namespace":  # list_topics: one namespace
            if name == "policies":
                values[name] = InactiveTopicPolicies() if "inactive" in call else RetentionPolicies(1, 1)
            else:
                values[name] = _ARGUMENTS[name]
    if group == "non_persistent" and "topic" in values:
        values["topic"] = values["topic"].replace("persistent://", "non-persistent://")
    return values


def _pattern(op: AdminOperation) -> re.Pattern[str]:
    return re.compile("/admin/v2" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(op.path)) + "$")


def test_remote_admin_sends_each_call_as_its_operation() -> None:
    """Each RemoteAdmin method sends the method and path of an operation running that same call,
    and every operation with a call is reachable from RemoteAdmin."""
    sent: list[tuple[str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.raw_path.decode().split("?")[0]))
        return httpx.Response(204)

    remote = RemoteAdmin("http://admin.test")
    remote._client = httpx.Client(base_url=remote.url, transport=httpx.MockTransport(answer))
    reached = set()
    calls = {(op.group, op.call) for op in filter(_called, OPERATIONS)}
    for group, call in sorted(calls):  # type: ignore[type-var]
        variants = [_arguments(group, call)]
        if call == "create_topic":
            variants.append({**variants[0], "partitions": 2})
        for arguments in variants:
            sent.clear()
            try:
                getattr(getattr(remote, group), call)(**arguments)
            except Exception:  # noqa: S110 - the empty answer may not parse; the request is what counts
                pass
            assert len(sent) == 1, (group, call, sent)
            method, path = sent[0]
            matched = [op for op in OPERATIONS if op.method == method and _pattern(op).match(path)]
            assert [(op.group, op.call) for op in matched] == [(group, call)], (group, call, method, path)
            reached.add((matched[0].group, matched[0].name))
    unreached = {(op.group, op.name) for op in filter(_called, OPERATIONS)} - reached
    # RemoteAdmin deletes every persistent topic with DELETE {topic}, which the server answers
    # for a partitioned one too
    assert unreached == {("topics", "delete_partitioned_topic")}
    remote.close()


def test_remote_admin_encodes_names_as_pulsar_clients_do() -> None:
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.raw_path.decode())
        return httpx.Response(204)

    with RemoteAdmin("http://admin.test") as remote:
        remote._client = httpx.Client(base_url=remote.url, transport=httpx.MockTransport(answer))
        remote.topics.delete_subscription("persistent://te/ns/a b", "sub~1")
        remote.topics.revoke_permission("persistent://te/ns/a", "r/1")
    assert sent == [
        "/admin/v2/persistent/te/ns/a+b/subscription/sub%7E1",
        "/admin/v2/persistent/te/ns/a/permissions/r%2F1",
    ]


def test_cli_commands_that_are_one_admin_call_map_to_the_table() -> None:
    from mledger.cli._admin import _Run, build_parser

    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    bound = 0
    for group, group_parser in subcommands(build_parser()).items():
        for verb, command in subcommands(group_parser).items():
            handler = command._defaults.get("handler")
            if isinstance(handler, _Run):
                assert callable(handler.bind(group, verb)), (group, verb)
                assert by_verb(group, verb).call is not None  # type: ignore[arg-type]
                bound += 1
    assert bound >= 45


def test_topic_operations_share_the_namespace_base() -> None:
    for op in OPERATIONS:
        if op.group == "topics":
            assert op.path.startswith(TOPIC_BASE)
        elif op.group == "non_persistent":
            assert op.path == NON_PERSISTENT_BASE + op.topic_suffix
        else:
            with pytest.raises(ValueError):
                _ = op.topic_suffix


def test_cancel_refusal_is_one_text() -> None:
    result = CancelDelayedMessageResult(
        topic="persistent://public/default/t", ledgerId=1, entryId=2, results={"a": True, "excl": False, "fo": False}
    )
    assert result.refusal == (
        "Failed to cancel delayed message on subscription(s) excl, fo: their type uses cumulative acknowledgement"
    )
    assert CancelDelayedMessageResult(topic="t", ledgerId=1, entryId=2, results={"a": True}).refusal is None


def _remote(answer: Any) -> tuple[RemoteAdmin, list[httpx.Request]]:
    """A RemoteAdmin whose server is ``answer(request) -> httpx.Response``; the requests sent."""
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer(request)  # type: ignore[no-any-return]

    remote = RemoteAdmin("http://admin.test")
    remote._client = httpx.Client(base_url=remote.url, transport=httpx.MockTransport(handle))
    return remote, sent


def test_a_plain_operation_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 item 5: a row whose call takes the path's names is all an operation needs: the
    REST app serves and documents its route, and a RemoteAdmin method declared with ``restates``
    sends its request and reads its answer."""
    from mledger.admin import Topics, _operations
    from mledger.admin._remote import restates
    from mledger.rest import create_app

    row = AdminOperation(
        "topics", "subscriptions_again", "subscriptions-again", "GET", TOPIC_BASE + "/{topic}/subscriptionsAgain",
        200, "list_subscriptions", "The topic's subscriptions, again", None, "list[str]",
    )  # fmt: skip
    monkeypatch.setattr(_operations, "OPERATIONS", (*OPERATIONS, row))
    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    broker.create_topic("persistent://public/default/t")
    broker.subscribe("persistent://public/default/t", "s")
    app = create_app(Admin(broker))

    async def get(path: str) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://mledger") as client:
            return await client.get(path)

    path = "/admin/v2/persistent/public/default/t/subscriptionsAgain"
    answer = asyncio.run(get(path))
    assert (answer.status_code, answer.json()) == (200, ["s"])
    documented = app.openapi()["paths"]["/admin/v2" + row.path]["get"]
    assert documented["summary"] == row.summary and documented["operationId"] == "v2_subscriptions_again"
    assert "/admin/persistent/{property}/{cluster}/{namespace}/{topic}/subscriptionsAgain" in app.openapi()["paths"]
    broker.close()

    class Again(RemoteTopics):
        subscriptions_again = restates(Topics.list_subscriptions, "subscriptions_again")

    remote, sent = _remote(lambda request: httpx.Response(200, json=["s"]))
    assert Again(remote).subscriptions_again("t") == ["s"]
    assert [(r.method, r.url.path) for r in sent] == [("GET", path)]
    remote.close()


def test_restates_refuses_what_its_operation_cannot_carry() -> None:
    from mledger import ConfigError
    from mledger.admin import Topics
    from mledger.admin._remote import restates

    with pytest.raises(ConfigError, match="2 operations run delete_topic"):

        class Ambiguous(RemoteTopics):
            delete_topic = restates(Topics.delete_topic)  # DELETE {topic} or {topic}/partitions

    with pytest.raises(ConfigError, match="wait has no place"):

        class Waits(RemoteTopics):
            trigger_compaction = restates(Topics.trigger_compaction)  # type: ignore[assignment]


def test_remote_admin_flags_and_answers() -> None:
    """Flags travel only when they differ from the server's default, a flag that is not a bool
    is 400 before anything is sent, and an answer that is not the operation's response kind is
    AdminConnectionError."""
    from mledger import InvalidRequestError
    from mledger.admin._remote import AdminConnectionError

    remote, sent = _remote(lambda request: httpx.Response(200, json=[1]))
    with pytest.raises(AdminConnectionError, match="not a list"):
        remote.topics.list_subscriptions("t")
    with pytest.raises(AdminConnectionError, match="not a TopicStatsData"):
        remote.topics.stats("t", subscription_backlog_size=False, get_earliest_time_in_backlog=True)
    with pytest.raises(InvalidRequestError, match="invalid getPreciseBacklog 'yes': expected a bool"):
        remote.topics.stats("t", get_precise_backlog="yes")  # type: ignore[arg-type]
    assert [dict(r.url.params) for r in sent] == [
        {},
        {"subscriptionBacklogSize": "false", "getEarliestTimeInBacklog": "true"},
    ]
    remote.close()


def test_an_operation_without_an_admin_call_needs_a_handler() -> None:
    from fastapi import APIRouter

    from mledger import ConfigError
    from mledger.rest._operation_routes import OperationRoutes, namespace_handler

    with pytest.raises(ConfigError, match="'get_deduplication', 'namespace_topics', 'remove_deduplication'"):
        OperationRoutes("namespaces").add_to(APIRouter(), namespace_handler)
