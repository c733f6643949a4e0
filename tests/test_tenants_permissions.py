"""Issue 26 item 4: clusters, tenants and permissions set up over REST as a CI script does it,
then decided for real pulsar-client clients and REST calls from the stored grants (Pulsar's
``PulsarAuthorizationProvider``: superusers, tenant admin roles, namespace and topic actions)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from mledger import NotFoundError, PermissionDeniedError, PreconditionFailedError
from mledger.admin import Admin, Authorization
from mledger.broker import Broker
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol import EmbeddedBroker
from mledger.storage import MemoryStore

pytestmark = pytest.mark.timeout(120)

TOKENS = {"t-root": "root", "t-acme": "acme-admin", "t-writer": "writer", "t-reader": "reader", "t-nobody": "nobody"}
ORDERS = "persistent://acme/app/orders"
OTHER = "persistent://acme/app/other"
RECEIVE_MS = 5000


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _client(broker: EmbeddedBroker, token: str) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url,
        authentication=pulsar.AuthenticationToken(token),
        operation_timeout_seconds=10,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def set_up(admin: str) -> None:
    """What a CI script sends before its tests run (curl-like calls, the superuser's token)."""
    root = _headers("t-root")
    cluster = {"serviceUrl": "http://ci:8080", "brokerServiceUrl": "pulsar://ci:6650"}
    assert httpx.put(f"{admin}/admin/v2/clusters/ci", json=cluster, headers=root).status_code == 204
    tenant = {"adminRoles": ["acme-admin"], "allowedClusters": ["standalone", "ci"]}
    assert httpx.put(f"{admin}/admin/v2/tenants/acme", json=tenant, headers=root).status_code == 204
    assert httpx.put(f"{admin}/admin/v2/namespaces/acme/app", headers=root).status_code == 204
    grant = httpx.post(f"{admin}/admin/v2/namespaces/acme/app/permissions/writer", json=["produce"], headers=root)
    assert grant.status_code == 204, grant.text
    grant = httpx.post(
        f"{admin}/admin/v2/persistent/acme/app/orders/permissions/reader", json=["consume"], headers=root
    )
    assert grant.status_code == 204, grant.text


@pytest.fixture
def secured(pulsar_broker_factory: Callable[..., EmbeddedBroker]) -> Iterator[EmbeddedBroker]:
    broker = pulsar_broker_factory(tokens=TOKENS, authorization=Authorization(super_user_roles=["root"]))
    set_up(broker.admin_url)  # type: ignore[attr-defined]
    root = _client(broker, "t-root")
    for topic in (ORDERS, OTHER):
        root.create_producer(topic).close()
    root.close()
    yield broker


def _may_produce(broker: EmbeddedBroker, token: str, topic: str) -> bool:
    client = _client(broker, token)
    try:
        client.create_producer(topic).close()
        return True
    except pulsar.AuthorizationError:
        return False
    finally:
        client.close()


def _may_consume(broker: EmbeddedBroker, token: str, topic: str) -> bool:
    client = _client(broker, token)
    try:
        client.subscribe(topic, f"sub-{token}").close()
        return True
    except pulsar.AuthorizationError:
        return False
    finally:
        client.close()


def _may_look_up(broker: EmbeddedBroker, token: str, topic: str) -> bool:
    client = _client(broker, token)
    try:
        client.get_topic_partitions(topic)
        return True
    except (pulsar.AuthorizationError, pulsar.exceptions.LookupError):
        return False
    finally:
        client.close()


def _may_list_topics(broker: EmbeddedBroker, token: str) -> bool:
    """Whether GET_TOPICS_OF_NAMESPACE (what a regex subscription sends first) is answered: the
    C++ client reports its refusal as LookupError, and a refused subscription to the listed
    topics afterwards as AuthorizationError."""
    client = _client(broker, token)
    try:
        client.subscribe(re.compile("persistent://acme/app/.*"), f"regex-{token}").close()
        return True
    except pulsar.AuthorizationError:
        return True  # listed, then refused CONSUME on the topics
    except pulsar.exceptions.LookupError:
        return False
    finally:
        client.close()


@pytest.mark.parametrize(
    ("token", "produce", "consume", "lookup", "listing"),
    [
        ("t-root", True, True, True, True),  # superuser
        ("t-acme", True, True, True, True),  # the tenant's admin role
        ("t-writer", True, False, True, True),  # produce on the namespace
        ("t-reader", False, True, True, False),  # consume on the one topic
        ("t-nobody", False, False, False, False),
    ],
)
def test_clients_can_do_exactly_what_the_stored_permissions_say(
    secured: EmbeddedBroker, token: str, produce: bool, consume: bool, lookup: bool, listing: bool
) -> None:
    assert _may_produce(secured, token, ORDERS) is produce
    assert _may_consume(secured, token, ORDERS) is consume
    assert _may_look_up(secured, token, ORDERS) is lookup
    assert _may_list_topics(secured, token) is listing
    # the topic grant covers its topic only; the namespace grant covers every topic
    assert _may_consume(secured, token, OTHER) is (token in ("t-root", "t-acme"))
    assert _may_produce(secured, token, OTHER) is produce


def test_messages_flow_between_the_granted_roles(secured: EmbeddedBroker) -> None:
    reader = _client(secured, "t-reader")
    consumer = reader.subscribe(ORDERS, "billing")
    writer = _client(secured, "t-writer")
    writer.create_producer(ORDERS).send(b"order-1")
    assert consumer.receive(RECEIVE_MS).data() == b"order-1"
    writer.close()
    reader.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"),
    [
        ("GET", "/admin/v2/namespaces/acme/app/permissions", None, {"t-root", "t-acme"}),
        ("GET", "/admin/v2/persistent/acme/app/orders/permissions", None, {"t-root", "t-acme"}),
        ("GET", "/admin/v2/namespaces/acme", None, {"t-root", "t-acme"}),
        ("GET", "/admin/v2/tenants/acme", None, {"t-root", "t-acme"}),
        ("GET", "/admin/v2/tenants", None, {"t-root"}),
        ("GET", "/admin/v2/persistent/acme/app", None, {"t-root", "t-acme", "t-writer"}),
        ("GET", "/admin/v2/persistent/acme/app/orders/stats", None, {"t-root", "t-acme", "t-writer", "t-reader"}),
        ("GET", "/admin/v2/persistent/acme/app/other/stats", None, {"t-root", "t-acme", "t-writer"}),
        ("POST", "/admin/v2/namespaces/acme/app/permissions/x", ["consume"], {"t-root", "t-acme"}),
        ("POST", "/admin/v2/persistent/acme/app/orders/permissions/x", ["produce"], {"t-root", "t-acme"}),
        ("POST", "/admin/v2/namespaces/acme/app/deduplication", True, {"t-root", "t-acme"}),
        ("PUT", "/admin/v2/namespaces/acme/made-by-{token}", None, {"t-root", "t-acme"}),
        ("PUT", "/admin/v2/tenants/made-by-{token}", {"allowedClusters": ["standalone"]}, {"t-root"}),
        ("PUT", "/admin/v2/clusters/made-by-{token}", {}, {"t-root"}),
    ],
)
def test_rest_calls_of_each_role_get_2xx_or_403(
    secured: EmbeddedBroker, method: str, path: str, body: object, allowed: set[str]
) -> None:
    for token in TOKENS:
        url = secured.admin_url + path.format(token=token[2:])  # type: ignore[attr-defined]
        answer = httpx.request(method, url, json=body, headers=_headers(token))
        expected = (200, 204) if token in allowed else (403,)
        assert answer.status_code in expected, (token, answer.status_code, answer.text)


def test_grants_listed_revoked_and_applied_at_once(secured: EmbeddedBroker) -> None:
    admin, acme = secured.admin_url, _headers("t-acme")  # type: ignore[attr-defined]
    assert httpx.get(f"{admin}/admin/v2/namespaces/acme/app/permissions", headers=acme).json() == {
        "writer": ["produce"]
    }
    on_topic = httpx.get(f"{admin}/admin/v2/persistent/acme/app/orders/permissions", headers=acme).json()
    assert on_topic == {"reader": ["consume"], "writer": ["produce"]}  # the namespace's and the topic's
    assert httpx.delete(f"{admin}/admin/v2/namespaces/acme/app/permissions/writer", headers=acme).status_code == 204
    assert not _may_produce(secured, "t-writer", ORDERS)
    assert (
        httpx.delete(f"{admin}/admin/v2/persistent/acme/app/orders/permissions/reader", headers=acme).status_code == 204
    )
    assert not _may_consume(secured, "t-reader", ORDERS)
    again = httpx.delete(f"{admin}/admin/v2/persistent/acme/app/orders/permissions/reader", headers=acme)
    assert again.status_code == 412 and "Permissions are not set at the topic level" in again.json()["reason"]
    bad = httpx.post(f"{admin}/admin/v2/namespaces/acme/app/permissions/w", json=["write"], headers=acme)
    assert bad.status_code == 400 and "write" in bad.json()["reason"]


def test_existing_unknown_and_non_empty_answer_409_404_412(secured: EmbeddedBroker) -> None:
    admin, root = secured.admin_url, _headers("t-root")  # type: ignore[attr-defined]
    ci = httpx.get(f"{admin}/admin/v2/clusters/ci", headers=root).json()
    assert ci["serviceUrl"] == "http://ci:8080" and ci["brokerServiceUrl"] == "pulsar://ci:6650"
    assert ci["serviceUrlTls"] is None
    assert httpx.get(f"{admin}/admin/v2/clusters").json() == ["ci", "standalone"]
    assert httpx.put(f"{admin}/admin/v2/clusters/ci", json={}, headers=root).status_code == 409
    assert httpx.put(f"{admin}/admin/v2/clusters/standalone", json={}, headers=root).status_code == 409
    assert (
        httpx.post(f"{admin}/admin/v2/clusters/ci", json={"serviceUrl": "http://ci2:8080"}, headers=root).status_code
        == 204
    )
    assert httpx.get(f"{admin}/admin/v2/clusters/ci", headers=root).json()["serviceUrl"] == "http://ci2:8080"
    assert httpx.get(f"{admin}/admin/v2/clusters/nope", headers=root).status_code == 404
    assert httpx.delete(f"{admin}/admin/v2/clusters/ci", headers=root).status_code == 412  # acme allows it
    tenant = {"adminRoles": [], "allowedClusters": ["standalone"]}
    assert httpx.put(f"{admin}/admin/v2/tenants/acme", json=tenant, headers=root).status_code == 409
    assert httpx.put(f"{admin}/admin/v2/tenants/x", json={"allowedClusters": ["nope"]}, headers=root).status_code == 412
    assert httpx.put(f"{admin}/admin/v2/tenants/x", json={"allowedClusters": []}, headers=root).status_code == 412
    assert httpx.get(f"{admin}/admin/v2/tenants/nope", headers=root).status_code == 404
    assert httpx.delete(f"{admin}/admin/v2/tenants/nope", headers=root).status_code == 404
    busy = httpx.delete(f"{admin}/admin/v2/tenants/acme", headers=root)
    assert busy.status_code == 409 and busy.json()["reason"] == "The tenant still has active namespaces"
    missing = httpx.put(f"{admin}/admin/v2/namespaces/nope/app", headers=root)
    assert missing.status_code == 404 and missing.json()["reason"] == "Tenant does not exist"
    assert httpx.put(f"{admin}/admin/v2/namespaces/acme/app", headers=root).status_code == 409
    granted = httpx.post(f"{admin}/admin/v2/namespaces/acme/nope/permissions/w", json=["produce"], headers=root)
    assert granted.status_code == 404
    # a tenant emptied of its namespaces, and then a cluster no tenant allows, can go
    assert (
        httpx.put(f"{admin}/admin/v2/tenants/empty", json={"allowedClusters": ["ci"]}, headers=root).status_code == 204
    )
    assert httpx.post(f"{admin}/admin/v2/tenants/acme", json=tenant, headers=root).status_code == 204
    assert httpx.delete(f"{admin}/admin/v2/tenants/empty", headers=root).status_code == 204
    assert httpx.delete(f"{admin}/admin/v2/clusters/ci", headers=root).status_code == 204


def test_a_namespace_put_applies_the_policies_of_its_body(secured: EmbeddedBroker) -> None:
    admin, acme = secured.admin_url, _headers("t-acme")  # type: ignore[attr-defined]
    policies = {
        "auth_policies": {"namespace_auth": {"nobody": ["consume"]}, "destination_auth": {}},
        "deduplicationEnabled": True,
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
    }
    assert httpx.put(f"{admin}/admin/v2/namespaces/acme/ops", json=policies, headers=acme).status_code == 204
    assert httpx.get(f"{admin}/admin/v2/namespaces/acme/ops/permissions", headers=acme).json() == {
        "nobody": ["consume"]
    }
    assert httpx.get(f"{admin}/admin/v2/namespaces/acme/ops/deduplication", headers=acme).json() is True
    retention = httpx.get(f"{admin}/admin/v2/namespaces/acme/ops/retention", headers=acme).json()
    assert retention == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert _may_consume(secured, "t-nobody", "persistent://acme/ops/t")
    stored = httpx.get(f"{admin}/admin/v2/namespaces/acme/ops", headers=acme).json()  # getPolicies
    assert stored["auth_policies"]["namespace_auth"] == {"nobody": ["consume"]}
    assert stored["deduplicationEnabled"] is True and stored["retention_policies"]["retentionSizeInMB"] == 10
    assert httpx.get(f"{admin}/admin/v2/namespaces/acme/ops", headers=_headers("t-writer")).status_code == 403
    bad = httpx.put(
        f"{admin}/admin/v2/namespaces/acme/bad",
        json={"auth_policies": {"namespace_auth": {"r": ["fly"]}}},
        headers=acme,
    )
    assert bad.status_code == 400


def test_file_grants_and_stored_grants_combine_in_one_decision() -> None:
    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    file = Authorization({"ops": {"public/default": ["skip"]}}, super_user_roles=["root"])
    admin = Admin(broker, file, role="root")
    admin.tenants.create("acme", {"adminRoles": ["boss"], "allowedClusters": ["standalone"]})
    admin.namespaces.create("acme/app")
    admin.topics.grant_permission("acme/app/t", "ops", ["consume"])
    ops, boss = admin.as_role("ops"), admin.as_role("boss")
    assert ops.may("SKIP", "persistent://public/default/x") and ops.may("CONSUME", "acme/app/t")  # type: ignore[arg-type]
    assert not ops.may("PRODUCE", "acme/app/t") and not ops.may("CONSUME", "acme/app/u")  # type: ignore[arg-type]
    assert ops.may("CONSUME", "acme/app/t-partition-3")  # type: ignore[arg-type]  # a partition: its topic's grants
    assert boss.may("TERMINATE", "acme/app/t") and not boss.may("LOOKUP", "public/default/t")  # type: ignore[arg-type]
    boss.namespaces.grant_permission("acme/app", "app", ["produce"])
    with pytest.raises(PermissionDeniedError):
        ops.namespaces.grant_permission("acme/app", "app", ["produce"])
    with pytest.raises(PermissionDeniedError):
        boss.tenants.create("other", {"allowedClusters": ["standalone"]})
    with pytest.raises(NotFoundError, match="Tenant does not exist"):
        admin.namespaces.create("nope/app")
    with pytest.raises(PreconditionFailedError):
        admin.topics.revoke_permission("acme/app/u", "ops")
    assert Admin(broker).namespaces.permissions("acme/app") == {"app": ["produce"]}  # authorization off


# -- mledger standalone with authorization on ------------------------------------------------------


def _standalone(data_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    tokens, authorization = tmp_path / "tokens.json", tmp_path / "authorization.json"
    tokens.write_text(json.dumps(TOKENS))
    authorization.write_text(json.dumps({"superUserRoles": ["root"]}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mledger.cli",
            "standalone",
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--token-file",
            str(tokens),
            "--authorization",
            str(authorization),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_standalone_with_authorization_pre_creates_only_its_cluster_and_keeps_grants(tmp_path: Path) -> None:
    proc, urls = _standalone(tmp_path / "data", tmp_path)
    admin, root = urls["admin_url"], _headers("t-root")
    try:
        assert httpx.get(f"{admin}/admin/v2/clusters").json() == ["standalone"]
        assert httpx.get(f"{admin}/admin/v2/tenants", headers=root).json() == []
        public = {"adminRoles": [], "allowedClusters": ["standalone"]}
        assert httpx.put(f"{admin}/admin/v2/tenants/public", json=public, headers=root).status_code == 204  # not 409
        assert httpx.put(f"{admin}/admin/v2/namespaces/public/default", headers=root).status_code == 204
        set_up(admin)
    finally:
        _stop(proc)
    proc, urls = _standalone(tmp_path / "data", tmp_path)  # the grants are in the SQLite store
    admin = urls["admin_url"]
    try:
        assert httpx.get(f"{admin}/admin/v2/tenants", headers=root).json() == ["acme", "public"]
        assert httpx.get(f"{admin}/admin/v2/namespaces/acme/app/permissions", headers=root).json() == {
            "writer": ["produce"]
        }
        assert httpx.get(f"{admin}/admin/v2/tenants/acme", headers=_headers("t-acme")).json() == {
            "adminRoles": ["acme-admin"],
            "allowedClusters": ["ci", "standalone"],
        }
        client = pulsar.Client(
            urls["service_url"],
            authentication=pulsar.AuthenticationToken("t-writer"),
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        client.create_producer(ORDERS).send(b"after restart")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(ORDERS, "sub")
        client.close()
    finally:
        _stop(proc)


def test_subscription_roles_restrict_who_consumes_through_a_subscription(secured: EmbeddedBroker) -> None:
    """Pulsar's ``subscription_auth_roles`` (grantPermissionOnSubscription): a listed subscription
    admits only its roles, whatever else they may do; tenant admins and superusers always."""
    admin, acme = secured.admin_url, _headers("t-acme")  # type: ignore[attr-defined]
    base = f"{admin}/admin/v2/namespaces/acme/app/permissions"
    assert httpx.post(f"{base}/subscription/audit", json=["auditor"], headers=acme).status_code == 204
    assert httpx.get(f"{base}/subscription", headers=acme).json() == {"audit": ["auditor"]}
    reader = _client(secured, "t-reader")
    with pytest.raises(pulsar.AuthorizationError):
        reader.subscribe(ORDERS, "audit")
    reader.subscribe(ORDERS, "billing").close()  # other subscriptions: the topic grant applies
    reader.close()
    tenant_admin = _client(secured, "t-acme")
    tenant_admin.subscribe(ORDERS, "audit").close()
    tenant_admin.close()
    assert httpx.post(f"{base}/subscription/audit", json=["auditor"], headers=_headers("t-reader")).status_code == 403
    assert httpx.delete(f"{base}/audit/auditor", headers=acme).status_code == 204
    assert httpx.delete(f"{base}/audit/auditor", headers=acme).status_code == 412
    assert httpx.get(f"{base}/subscription", headers=acme).json() == {}
    reader = _client(secured, "t-reader")
    reader.subscribe(ORDERS, "audit").close()
    reader.close()
