"""docs/protocol-coverage.md is generated from the server's command table and is up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _generator():  # the script is not a package module
    spec = importlib.util.spec_from_file_location(
        "gen_protocol_coverage", ROOT / "scripts" / "gen_protocol_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_coverage_table_is_fresh() -> None:
    committed = (ROOT / "docs" / "protocol-coverage.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), (
        "docs/protocol-coverage.md is stale: run python scripts/gen_protocol_coverage.py and commit it"
    )


def test_table_lists_every_command_once() -> None:
    from mledger.codec.proto import PulsarApi_pb2 as api

    text = _generator().render()
    for value in api.BaseCommand.Type.DESCRIPTOR.values:
        assert text.count(f"| `{value.name}` |") == 1, value.name


def test_rest_half_lists_every_pulsar_family_once_and_every_v2_route_is_one() -> None:
    """Issue 26 item 10: the REST table comes from the app's routes and Pulsar's families."""
    from mledger.rest._pulsar_api import FAMILIES

    generator = _generator()
    text = generator.render()
    shapes = {(f.method, generator._shape(f.path)) for f in FAMILIES}
    assert len(shapes) == len(FAMILIES)  # no family twice
    for family in FAMILIES:
        assert text.count(f"| {family.group} | {family.method} | `{family.path}` |") == 1, family
    served = generator.served_routes()
    assert served, "the app has /admin/v2 routes"
    assert served <= shapes, f"v2 routes missing from pulsar_api.FAMILIES: {sorted(served - shapes)}"
    assert "| tenants | PUT | `/tenants/{tenant}` | createTenant | served |" in text
    assert "| clusters | GET | `/clusters/{cluster}/peers` | getPeerClusterNames | 501 " in text


def test_unserved_pulsar_endpoints_answer_501_at_once_and_unknown_paths_404() -> None:
    import httpx

    from mledger.admin import Admin
    from mledger.broker import Broker
    from mledger.managed_ledger import ManagedLedgerFactory
    from mledger.rest import AdminServer
    from mledger.storage import MemoryStore

    broker = Broker(ManagedLedgerFactory(MemoryStore()))
    with AdminServer(Admin(broker), port=0) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        _check_501(client)
    broker.close()


def _check_501(client: Any) -> None:
    answer = client.get("/admin/v2/namespaces/public/default/subscriptionExpirationTime")
    assert answer.status_code == 501
    assert answer.json() == {
        "reason": "getSubscriptionExpirationTime (GET /admin/v2/namespaces/{tenant}/{namespace}/"
        "subscriptionExpirationTime) is not supported by mledger"
    }
    # a family whose path mledger serves with other methods: 501, not 405
    assert client.post("/admin/v2/persistent/public/default/t/partitions", json=3).status_code == 501
    assert client.get("/admin/v2/schemas/public/default/t/schema").status_code == 501
    assert client.get("/admin/v2/nothing/here").status_code == 404
    refused = client.post("/admin/v2/namespaces/public/default/compactionThreshold", json=1)  # Pulsar: PUT
    assert refused.status_code == 405
    assert client.get("/admin/v2/persistent/public/default").status_code == 200  # served routes unchanged
