"""One rule for tenant, namespace and cluster names: Pulsar's ``NamedEntity.checkName`` (ASCII
letters, digits and ``-=:._``), with Pulsar's 412 and message ("Tenant name is not valid",
``TenantsBase.createTenant``; "Namespace name is not valid", ``AdminResource.validateNamespaceName``;
"Cluster name is not valid", ``ClustersBase.createCluster``) from the library, the REST API and
the remote admin alike. Before, the stores accepted any Unicode letter, so a tenant named
``tenänt`` could be created but could never hold a topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings, strategies as st

from mledger import ConfigError, ManagedLedgerFactory, PreconditionFailedError
from mledger.admin import Admin, Authorization, NamespaceOperation, RemoteAdmin
from mledger.broker import Broker, BrokerConfig, InvalidNameError
from mledger.cli._admin import main as admin_main
from mledger.rest import create_app

pytestmark = pytest.mark.timeout(60)

CLUSTERS = {"allowedClusters": ["standalone"]}
BAD = ["tenänt", "ｆｕｌｌ", "٣", ".", "..", "a/b", "", "a b", "abc\n", "a%b"]
"""Names Pulsar refuses: Unicode letters and digits (Java's ``\\w`` is ASCII), the dot segments
(no HTTP path or ZooKeeper node can carry them), a slash, empty, a space, a trailing newline,
a percent sign."""
GOOD = "a-Z_0=9:b.c"
"""Every kind of character Pulsar allows."""


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker(ManagedLedgerFactory())
    yield b
    b.close()


@pytest.fixture
def admin(broker: Broker) -> Admin:
    return Admin(broker)


@pytest.fixture
def rest(admin: Admin) -> Iterator[TestClient]:
    with TestClient(create_app(admin)) as client:
        yield client


def _refused(kind: str, name: str, error: pytest.ExceptionInfo[InvalidNameError]) -> None:
    # a PreconditionFailedError, the class the remote admin raises for any 412
    assert isinstance(error.value, PreconditionFailedError) and error.value.http_status == 412
    assert str(error.value).startswith(f"{kind} name is not valid: {name!r}")


# -- the in-process admin --------------------------------------------------------------------------


@pytest.mark.parametrize("name", BAD)
def test_the_library_refuses_a_bad_tenant_cluster_or_namespace_name_with_412(admin: Admin, name: str) -> None:
    before = (admin.tenants.list(), admin.clusters.list(), admin.broker.list_namespaces())
    with pytest.raises(InvalidNameError) as error:
        admin.tenants.create(name, CLUSTERS)
    _refused("Tenant", name, error)
    with pytest.raises(InvalidNameError) as error:
        admin.clusters.create(name)
    _refused("Cluster", name, error)
    for namespace in (f"public/{name}", f"{name}/ns"):
        with pytest.raises(InvalidNameError) as error:
            admin.namespaces.create(namespace)
        _refused("Namespace", namespace, error)
    with pytest.raises(InvalidNameError) as error:
        admin.namespaces.list(name)
    _refused("Tenant", name, error)
    assert (admin.tenants.list(), admin.clusters.list(), admin.broker.list_namespaces()) == before


@pytest.mark.parametrize("namespace", ["public", "a/b/c", "/", "public/", "/default"])
def test_a_namespace_is_two_names(admin: Admin, namespace: str) -> None:
    with pytest.raises(InvalidNameError) as error:
        admin.namespaces.create(namespace)
    _refused("Namespace", namespace, error)


def test_valid_names_with_every_allowed_character_hold_a_topic(admin: Admin, broker: Broker) -> None:
    admin.clusters.create(GOOD)
    admin.tenants.create(GOOD, {"allowedClusters": [GOOD]})
    admin.namespaces.create(f"{GOOD}/{GOOD}")
    topic = f"persistent://{GOOD}/{GOOD}/orders"
    assert admin.topics.create_topic(topic) == topic
    assert broker.create_producer(topic).send(b"x").ledger_id >= 0
    assert admin.namespaces.list(GOOD) == [f"{GOOD}/{GOOD}"]


@settings(max_examples=40, deadline=None)
@given(name=st.text(alphabet=st.sampled_from("aZ09-=:._/ %äé٣\n\x00"), min_size=0, max_size=4))
def test_a_tenant_that_can_be_created_can_hold_a_topic(name: str) -> None:
    # The defect: the stores' rule (any Unicode letter) was wider than the topic names' (ASCII).
    with Broker(ManagedLedgerFactory()) as broker:
        admin = Admin(broker)
        try:
            admin.tenants.create(name, CLUSTERS)
        except InvalidNameError:
            return
        admin.namespaces.create(f"{name}/ns")
        topic = f"persistent://{name}/ns/t"
        assert admin.topics.create_topic(topic) == topic


def test_a_broker_config_or_an_authorization_file_naming_a_bad_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="Cluster name is not valid: 'clüster'"):
        BrokerConfig(cluster_name="clüster")
    with pytest.raises(ConfigError, match="Namespace name is not valid: 'tenänt/ns'"):
        Authorization({"ops": {"tenänt/ns": [NamespaceOperation.GET_TOPICS]}})


# -- REST --------------------------------------------------------------------------------------------


def test_rest_refuses_bad_names_with_pulsars_412_and_reason(rest: TestClient, admin: Admin) -> None:
    for name in [n for n in BAD if n]:  # an empty segment is another route
        segment = quote(name, safe="").replace(".", "%2E")  # an HTTP client would resolve a bare . or ..
        cases = [
            ("PUT", f"/admin/v2/tenants/{segment}", CLUSTERS, "Tenant", name),
            ("PUT", f"/admin/v2/clusters/{segment}", {}, "Cluster", name),
            ("PUT", f"/admin/v2/namespaces/public/{segment}", None, "Namespace", f"public/{name}"),
            ("PUT", f"/admin/v2/namespaces/{segment}/ns", None, "Namespace", f"{name}/ns"),
            ("GET", f"/admin/v2/namespaces/{segment}", None, "Tenant", name),
            ("GET", f"/admin/v2/namespaces/public/{segment}/retention", None, "Namespace", f"public/{name}"),
            ("GET", f"/admin/v2/namespaces/public/{segment}/deduplication", None, "Namespace", f"public/{name}"),
            ("GET", f"/admin/v2/persistent/public/{segment}", None, "Namespace", f"public/{name}"),
        ]
        for method, path, body, kind, shown in cases:
            answer = rest.request(method, path, json=body)
            assert answer.status_code == 412, (path, answer.text)
            assert answer.json()["reason"].startswith(f"{kind} name is not valid: {shown!r}"), (path, answer.text)
    assert admin.tenants.list() == ["public"] and admin.clusters.list() == ["standalone"]


def test_rest_accepts_every_allowed_character(rest: TestClient) -> None:
    assert rest.put(f"/admin/v2/clusters/{GOOD}", json={}).status_code == 204
    assert rest.put(f"/admin/v2/tenants/{GOOD}", json={"allowedClusters": [GOOD]}).status_code == 204
    assert rest.put(f"/admin/v2/namespaces/{GOOD}/{GOOD}").status_code == 204
    assert rest.put(f"/admin/v2/persistent/{GOOD}/{GOOD}/orders").status_code == 204
    assert rest.get(f"/admin/v2/persistent/{GOOD}/{GOOD}").json() == [f"persistent://{GOOD}/{GOOD}/orders"]


# -- the remote admin ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".", "..", "tenänt", "a/b", ""])
def test_the_remote_admin_refuses_bad_names_before_sending(name: str) -> None:
    # Port 9 (discard) is never an admin server: an attempt to send would raise a connection error.
    with RemoteAdmin("http://127.0.0.1:9", timeout=5) as remote:
        for call, kind, shown in (
            (lambda: remote.tenants.create(name, CLUSTERS), "Tenant", name),
            (lambda: remote.clusters.delete(name), "Cluster", name),
            (lambda: remote.namespaces.create(f"public/{name}"), "Namespace", f"public/{name}"),
            (lambda: remote.namespaces.list(name), "Tenant", name),
        ):
            with pytest.raises(InvalidNameError) as error:
                call()
            _refused(kind, shown, error)


# -- the CLI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [["--data-dir", "{tmp}"], ["--admin-url", "http://127.0.0.1:9"]])
def test_the_cli_refuses_bad_names_with_exit_9_in_both_modes(
    where: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    place = [arg.format(tmp=tmp_path / "data") for arg in where]
    for argv, reason in (
        (["tenants", "create", "tenänt", "-c", "standalone"], "Tenant name is not valid: 'tenänt'"),
        (["namespaces", "create", "public/.."], "Namespace name is not valid: 'public/..'"),
        (["clusters", "delete", "."], "Cluster name is not valid: '.'"),
    ):
        assert admin_main([*place, *argv]) == 9  # 412
        assert reason in capsys.readouterr().err
