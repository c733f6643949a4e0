"""Issue 31 item 6: policy reads are a tenant admin's, and a refusal says nothing about existence.

Pulsar's rule for policy operations, reads included: ``PulsarAuthorizationProvider``'s
``allowNamespacePolicyOperationAsync`` and ``allowTopicPolicyOperationAsync`` return
``validateTenantAdminAccess`` (a superuser or a role in the tenant's ``adminRoles``), and
``ClustersBase.getCluster`` is ``validateSuperUserAccessAsync``; a ``produce`` or ``consume``
grant lets a role read data (stats, subscriptions, topic lists), never a policy. mledger checks
the role before it looks the object up, so a refused caller gets the same 403 whether the
object exists or not (Pulsar answers 404 for a tenant that does not exist).

The routes come from the app itself: every GET route under ``/admin`` is a policy read unless it
is one of the data reads listed below, so a new policy route is held to the rule the day it is
added.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import NamedTuple

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from mledger.admin import Admin, Authorization
from mledger.broker import Broker, ManualClock
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.rest import RoleResolver, create_app
from mledger.rest._app import context_of_app

pytestmark = pytest.mark.timeout(60)

ROLE_HEADER = "X-Mledger-Role"
CLUSTER = "standalone"
TENANT, NAMESPACE, TOPIC = "tenant-b", "ns-b", "orders"
GHOSTS = {"tenant": "ghost-tenant", "namespace": "ghost-ns", "topic": "ghost-topic", "cluster": "ghost-cluster"}
REAL = {"tenant": TENANT, "namespace": NAMESPACE, "topic": TOPIC, "cluster": CLUSTER}

ROLES = {
    "root": "the superuser",
    "b-admin": "in tenant-b's adminRoles",
    "a-admin": "in another tenant's adminRoles",
    "app": "produce and consume on tenant-b/ns-b, stored and in the file (on '*')",
    "nobody": "authenticated, no grant",
}

DATA_READS = frozenset(
    {
        # GET_TOPICS, LOOKUP, GET_STATS, GET_SUBSCRIPTIONS: a produce or consume grant allows them
        "list_topics",
        "list_partitioned_topics",
        "namespace_topics",
        "get_partitioned_metadata",
        "get_subscriptions",
        "get_stats",
        "get_partitioned_stats",
        "get_internal_stats",
        "get_partitioned_internal_stats",
    }
)
"""The GET routes that are not policy reads (by operation name)."""
PUBLIC = frozenset({"list_clusters"})  # Pulsar's ClustersBase.getClusters checks nothing
SUPERUSER_ONLY = frozenset({"get_cluster", "list_tenants", "get_clock", "list_faults", "fired_faults", "fault_stats"})
"""Pulsar's superuser reads, and mledger's own extension reads (the broker's clock and faults)."""
OFF_UNLESS_ENABLED = frozenset({"list_faults", "fired_faults", "fault_stats"})
"""404 for everyone admitted: this test's broker runs without fault injection."""


def make_app() -> tuple[FastAPI, Broker]:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1_000))
    auth = Authorization({"app": {"*": ["produce", "consume"]}}, super_user_roles=["root"])
    root = Admin(broker, authorization=auth, role="root")
    # the broker's own cluster, "standalone", exists from the start
    root.tenants.create(TENANT, {"adminRoles": ["b-admin"], "allowedClusters": [CLUSTER]})
    root.tenants.create("tenant-a", {"adminRoles": ["a-admin"], "allowedClusters": [CLUSTER]})
    root.namespaces.create(f"{TENANT}/{NAMESPACE}")
    root.namespaces.grant_permission(f"{TENANT}/{NAMESPACE}", "app", ["produce", "consume"])
    topic = f"persistent://{TENANT}/{NAMESPACE}/{TOPIC}"
    root.topics.create_topic(topic)
    root.topics.grant_permission(topic, "app", ["produce", "consume"])
    app = create_app(Admin(broker, authorization=auth), roles=RoleResolver(trust_role_header=True))
    return app, broker


def operation_name(route: APIRoute) -> str:
    """The admin operation a route serves (``v1_get_retention`` -> ``get_retention``)."""
    return re.sub(r"^(v[12]_)?(non_persistent_)?", "", route.name)


def get_routes(app: FastAPI) -> list[APIRoute]:
    return [
        r for r in app.router.routes if isinstance(r, APIRoute) and "GET" in r.methods and r.path.startswith("/admin")
    ]


def _policy_routes() -> dict[str, str]:
    """``{path: operation name}`` of the app's policy reads."""
    app, broker = make_app()
    try:
        routes = get_routes(app)
        names = {operation_name(r) for r in routes}
        assert names >= DATA_READS | PUBLIC | SUPERUSER_ONLY, "a listed route is gone: update the lists"
        return {r.path: operation_name(r) for r in routes if operation_name(r) not in DATA_READS | PUBLIC}
    finally:
        broker.close()


POLICY_ROUTES = _policy_routes()


class Variant(NamedTuple):
    name: str
    values: dict[str, str]


def variants(path: str) -> list[Variant]:
    """The existing object, then, per level the path names, that level missing."""
    params = set(re.findall(r"{(\w+)}", path)) - {"domain"}
    levels = ["cluster"] if path.startswith("/admin/v2/clusters/") else []
    levels += [p for p in ("tenant", "namespace", "topic") if p in params or (p == "tenant" and "property" in params)]
    known = {"tenant", "property", "namespace", "topic", "cluster"}
    assert params <= known, f"{path}: give the test values for {params - known}"
    found = [Variant("existing", dict(REAL))]
    for level in levels:
        values = dict(REAL)
        values[level] = GHOSTS[level]
        found.append(Variant(f"missing {level}", values))
    return found


def url(path: str, values: dict[str, str]) -> str:
    fill = {**values, "property": values["tenant"]}
    if not path.startswith("/admin/v2/clusters/"):
        fill["cluster"] = CLUSTER  # a v1 path's cluster is the local one
    return re.sub(r"{(\w+)}", lambda m: fill[m.group(1)], path)


def expected(path: str, role: str, variant: Variant) -> int:
    name = POLICY_ROUTES[path]
    if "/non-persistent/" in path:
        return 405  # Pulsar serves no policy of a non-persistent topic: refused before any look-up
    if role == "root":
        admitted = True
    elif role == "b-admin":
        admitted = name not in SUPERUSER_ONLY and variant.values["tenant"] == TENANT
    else:
        admitted = False
    if not admitted:
        return 403
    if name in OFF_UNLESS_ENABLED:
        return 404
    if variant.name == "existing":
        return 200
    if variant.name == "missing topic" and name == "get_permissions":
        return 200  # a topic's permissions are its namespace's grants, readable before it exists (Pulsar)
    return 404


@pytest.fixture(scope="module")
def app() -> Iterator[FastAPI]:
    app, broker = make_app()
    yield app
    context_of_app(app).close()
    broker.close()


def get_all(app: FastAPI, requests: list[tuple[str, str]]) -> list[httpx.Response]:
    """``GET url`` as ``role`` for each ``(url, role)``, in the app's process (no server)."""

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mledger") as client:
            return [await client.get(u, headers={ROLE_HEADER: role}) for u, role in requests]

    return asyncio.run(run())


def _reason(body: dict[str, str]) -> str:
    reason = body["reason"]
    for level, ghost in GHOSTS.items():
        reason = reason.replace(ghost, REAL[level])
    return reason


@pytest.mark.parametrize("path", sorted(POLICY_ROUTES))
def test_only_a_superuser_or_the_tenants_admin_reads_a_policy(app: FastAPI, path: str) -> None:
    cases = [(role, variant) for role in ROLES for variant in variants(path)]
    answers = get_all(app, [(url(path, variant.values), role) for role, variant in cases])
    refusals: dict[str, set[str]] = {role: set() for role in ROLES}
    for (role, variant), answer in zip(cases, answers, strict=True):
        want = expected(path, role, variant)
        assert answer.status_code == want, (role, ROLES[role], variant.name, answer.status_code, answer.text)
        if want in (403, 405):
            refusals[role].add(_reason(answer.json()))
    # the same refusal whether the object exists or not (names aside, which the caller sent)
    assert all(len(reasons) <= 1 for reasons in refusals.values()), refusals


def test_the_policy_reads_of_issue_31_are_among_the_routes_checked() -> None:
    """The 12 routes and the cluster read the issue found answering 200 to any role."""
    topic_base = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
    v1_base = "/admin/persistent/{property}/{cluster}/{namespace}/{topic}"
    ns_base = "/admin/v2/namespaces/{tenant}/{namespace}"
    found = {
        *(f"{base}/{leaf}" for base in (topic_base, v1_base) for leaf in ("retention", "compactionThreshold")),
        *(f"{base}/schemaCompatibilityStrategy" for base in (topic_base, v1_base)),
        *(
            f"{ns_base}/{leaf}"
            for leaf in (
                "retention",
                "deduplication",
                "compactionThreshold",
                "schemaCompatibilityStrategy",
                "schemaAutoUpdateCompatibilityStrategy",
                "isAllowAutoUpdateSchema",
            )
        ),
        "/admin/v2/clusters/{cluster}",
    }
    assert found <= set(POLICY_ROUTES)
