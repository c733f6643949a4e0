"""Issue 32 item 5: generating the admin routes from the operation table leaves ``/openapi.json``
as it was, request and response models included.

``tests/data/openapi-before.json`` is the document the app served before the routes were
generated (``create_app(Admin(broker)).openapi()``, keys sorted). The document served now is
that one plus the additions listed in ``INTENDED``, ``NEW_ROUTES`` and ``NEW_SCHEMAS`` and nothing
else: no change, no removal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mledger.admin import Admin
from mledger.broker import Broker
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.storage import MemoryStore

BEFORE = Path(__file__).parent / "data" / "openapi-before.json"


NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC_ROLE = ("/admin/persistent/{property}/{cluster}/{namespace}", "/admin/v2/persistent/{tenant}/{namespace}")


def _body(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "description": description, "content": {"application/json": {"schema": schema}}}


# pointer -> the value added there. Every body a handler parses is documented from its kind in
# mledger.admin._bodies (the namespace routes documented some and not others), and the topic
# routes' {role} is described as the namespace routes' is.
INTENDED: dict[str, Any] = {
    f"/paths/{NS}/retention/post/requestBody/description": "retentionTimeInMinutes and retentionSizeInMB",
    f"/paths/{NS}/compactionThreshold/put/requestBody/description": "bytes not compacted yet that trigger compaction",
    f"/paths/{NS}/schemaCompatibilityStrategy/put/requestBody": _body(
        'the strategy, e.g. "BACKWARD"', {"type": "string"}
    ),
    f"/paths/{NS}/schemaAutoUpdateCompatibilityStrategy/put/requestBody": _body(
        'the policy, e.g. "Full"', {"type": "string"}
    ),
    f"/paths/{NS}/isAllowAutoUpdateSchema/post/requestBody": _body("true or false", {"type": "boolean"}),
    f"/paths/{NS}/deduplication/post/requestBody": _body("true or false", {"type": "boolean"}),
    **{
        f"/paths/{base}/{{topic}}/permissions/{{role}}/{method}/parameters/0/{where}": "role"
        for base in TOPIC_ROLE
        for method in ("post", "delete")
        for where in ("description", "schema/description")
    },
}


# issue 34: the routes of message TTL, backlog quotas, inactive-topic policies and message expiry,
# each a new path (v1's twin for the topic routes) with these methods, and the models they name
NEW_ROUTES: dict[str, set[str]] = {
    **{
        f"{base}/{{topic}}/{leaf}": methods
        for base in TOPIC_ROLE
        for leaf, methods in (
            ("messageTTL", {"get", "post", "delete"}),
            ("backlogQuotaMap", {"get"}),
            ("backlogQuota", {"post", "delete"}),
            ("inactiveTopicPolicies", {"get", "post", "delete"}),
            ("subscription/{subName}/expireMessages/{expireTimeInSeconds}", {"post"}),
            ("subscription/{subName}/expireMessages", {"post"}),
            ("all_subscription/expireMessages/{expireTimeInSeconds}", {"post"}),
            ("unload", {"put"}),  # issue 33: unloading a topic
        )
    },
    f"{NS}/messageTTL": {"get", "post", "delete"},
    f"{NS}/backlogQuotaMap": {"get"},
    f"{NS}/backlogQuota": {"post", "delete"},
    f"{NS}/inactiveTopicPolicies": {"get", "post", "delete"},
}
NEW_SCHEMAS = {
    "BacklogQuotaData",
    "BacklogQuotaType",
    "BacklogRetentionPolicy",
    "InactiveTopicDeleteMode",
    "InactiveTopicPoliciesData",
}
# the stats carry the limits of the backlog quotas in force, as Pulsar's TopicStatsImpl
INTENDED.update(
    {
        f"/components/schemas/{model}/properties/backlogQuotaLimit{limit}": {
            "type": "integer",
            "title": f"Backlogquotalimit{limit.lower()}",
            "default": -1,
        }
        for model in ("TopicStatsData", "PartitionedTopicStatsData")
        for limit in ("Size", "Time")
    }
)


def _differences(before: Any, after: Any, at: list[str]) -> Iterator[tuple[str, str, Any]]:
    """(kind, pointer, value) for each place the documents differ: ``added`` (absent before),
    ``removed`` or ``changed``. Pointers name dictionary keys and list indexes, unescaped."""
    where = "/" + "/".join(at)
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before.keys() - after.keys():
            yield "removed", f"{where}/{key}" if at else f"/{key}", before[key]
        for key in after.keys() - before.keys():
            yield "added", f"{where}/{key}" if at else f"/{key}", after[key]
        for key in before.keys() & after.keys():
            yield from _differences(before[key], after[key], [*at, str(key)])
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            yield from _differences(b, a, [*at, str(index)])
    elif before != after:
        yield "changed", where, (before, after)


@pytest.fixture(scope="module")
def document() -> Iterator[dict[str, Any]]:
    from mledger.rest import create_app

    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    yield json.loads(json.dumps(create_app(Admin(broker)).openapi()))  # as /openapi.json serves it
    broker.close()


def test_openapi_document_is_the_one_before_plus_the_intended_additions(document: dict[str, Any]) -> None:
    before = json.loads(BEFORE.read_text())
    before["info"]["version"] = document["info"]["version"]  # the package's version, whatever it is
    differences = sorted(_differences(before, document, []), key=lambda d: d[1])
    changed = [(kind, pointer) for kind, pointer, _ in differences if kind != "added"]
    assert changed == [], "a route's documentation changed or went away"
    added = {pointer: value for _, pointer, value in differences}
    routes = {path: set(added.pop(f"/paths/{path}", {})) for path in NEW_ROUTES}
    assert routes == NEW_ROUTES, "a new route is missing or has other methods"
    schemas = {name for name in NEW_SCHEMAS if added.pop(f"/components/schemas/{name}", None)}
    assert schemas == NEW_SCHEMAS
    assert added == INTENDED


def test_differences_are_found() -> None:
    """The comparison itself: a change, a removal and an addition at any depth are each seen."""
    before = {"paths": {"/a": {"get": {"parameters": [{"name": "x"}], "summary": "s"}}}}
    after = {"paths": {"/a": {"get": {"parameters": [{"name": "y"}], "tags": ["t"]}}}}
    assert sorted(_differences(before, after, [])) == [
        ("added", "/paths//a/get/tags", ["t"]),
        ("changed", "/paths//a/get/parameters/0/name", ("x", "y")),
        ("removed", "/paths//a/get/summary", "s"),
    ]
