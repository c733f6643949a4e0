"""Issue 34 item 1, for other languages: faults over REST (``/admin/v2/mledger/faults``, an
mledger extension), off unless the broker was started with fault injection and for superusers
only under authorization; ``RemoteAdmin.faults`` and ``mledger-admin faults``; the firings in
``/metrics`` and in ``recording.json``'s session."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pulsar
import pytest
from asgi import asgi_request

from mledger import ManagedLedgerFactory
from mledger.admin import Admin, Authorization, RemoteAdmin
from mledger.broker import Broker, Faults, FaultSpecError
from mledger.cli._admin import main as admin_main
from mledger.rest import RoleResolver, create_app
from mledger.standalone import EmbeddedStandalone, standalone_faults

pytestmark = pytest.mark.timeout(60)

FAULTS = "/admin/v2/mledger/faults"


def test_off_unless_the_broker_was_started_with_fault_injection() -> None:
    broker = Broker(ManagedLedgerFactory())
    app = create_app(Admin(broker))
    response = asgi_request(app, "POST", FAULTS, body={"action": "close"})
    assert response.status_code == 404
    assert "fault injection is off on this broker: start it with --fault-injection" in response.json()["reason"]
    assert not any("mledger/faults" in path for path in app.openapi()["paths"])  # not Pulsar's API
    assert "mledger_faults" not in asgi_request(app, "GET", "/metrics").text
    broker.close()


def test_superusers_only_under_authorization_and_invalid_faults_are_400() -> None:
    broker = Broker(ManagedLedgerFactory(), faults=Faults(seed=11))
    app = create_app(
        Admin(broker, Authorization({}, super_user_roles=["admin"])),
        roles=RoleResolver({"root-token": "admin", "bob-token": "bob"}),
    )
    assert asgi_request(app, "GET", FAULTS).status_code == 401
    refused = asgi_request(app, "POST", FAULTS, "bob-token", {"action": "error", "command": "SEND"})
    assert refused.status_code == 403 and "not a superuser" in refused.json()["reason"]
    bad = asgi_request(app, "POST", FAULTS, "root-token", {"action": "error", "command": "FLOW"})
    assert bad.status_code == 400 and "FLOW has no answer" in bad.json()["reason"]
    armed = asgi_request(app, "POST", FAULTS, "root-token", {"action": "error", "command": "SEND", "count": 2})
    assert armed.status_code == 200 and armed.json() == {"faultId": 1}
    listed = asgi_request(app, "GET", FAULTS, "root-token").json()
    assert listed == [
        {
            "faultId": 1,
            "fault": {"command": "SEND", "after": 0, "count": 2, "action": "error", "error": "ServiceNotReady"},
            "matches": 0,
            "fired": 0,
        }
    ]
    assert asgi_request(app, "GET", f"{FAULTS}/stats", "root-token").json() == {
        "seed": 11,
        "armed": 1,
        "fired": 0,
        "firedByAction": {},
    }
    assert asgi_request(app, "DELETE", f"{FAULTS}/7", "root-token").status_code == 404
    assert asgi_request(app, "DELETE", f"{FAULTS}/1", "root-token").status_code == 204
    assert asgi_request(app, "GET", FAULTS, "root-token").json() == []
    broker.close()


def test_remote_admin_and_mledger_admin_faults_against_a_running_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "recording"
    with EmbeddedStandalone(record=record, fault_seed=5) as standalone:
        url = standalone.admin_url
        scenario = tmp_path / "scenario.yaml"
        scenario.write_text("faults:\n  - {action: error, command: PRODUCER, error: ProducerBusy, topic: orders}\n")
        assert admin_main(["--admin-url", url, "faults", "load", str(scenario)]) == 0
        assert json.loads(capsys.readouterr().out) == [1]
        fault = '{"action": "error", "command": "SUBSCRIBE", "error": "ConsumerBusy"}'
        assert admin_main(["--admin-url", url, "faults", "arm", fault]) == 0
        assert json.loads(capsys.readouterr().out) == 2
        assert admin_main(["--admin-url", url, "faults", "arm", '{"action": "eror"}']) == 3  # 400
        assert "does not match any of the expected tags" in capsys.readouterr().err
        client = pulsar.Client(
            standalone.service_url, operation_timeout_seconds=1, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        try:
            with pytest.raises(pulsar.ProducerBusy):
                client.create_producer("orders")
            with pytest.raises(pulsar.ConsumerBusy):
                client.subscribe("orders", "billing")
        finally:
            client.close()
        assert admin_main(["--admin-url", url, "faults", "fired"]) == 0
        fired = json.loads(capsys.readouterr().out)
        assert [(f["faultId"], f["command"], f["detail"]) for f in fired] == [
            (1, "PRODUCER", "answered ProducerBusy"),
            (2, "SUBSCRIBE", "answered ConsumerBusy"),
        ]
        with RemoteAdmin(url) as remote:
            assert remote.faults.stats().fired_by_action == {"error": 2}
            assert remote.faults.fired()[0].topic == "persistent://public/default/orders"
            remote.faults.arm({"action": "pause"})  # a fault without a command acts at once
            assert standalone.server.paused
            remote.faults.resume()
            with pytest.raises(FaultSpecError, match="delay_ms: Field required"):
                remote.faults.arm({"action": "delay", "command": "SEND"})  # refused before it is sent
        metrics = httpx.get(f"{url}/metrics").text
        assert 'mledger_faults_fired_total{action="error",cluster="standalone"} 2.0' in metrics
        assert 'mledger_faults_fired_total{action="pause",cluster="standalone"} 1.0' in metrics
        assert admin_main(["--admin-url", url, "faults", "clear"]) == 0
        assert admin_main(["--admin-url", url, "faults", "list"]) == 0
        assert json.loads(capsys.readouterr().out) == []
    # the recording lists the faults with its session, and replays nothing of them
    (session,) = json.loads((record / "recording.json").read_text())["sessions"]
    assert session["faults_fired"] == 3
    assert [f["action"] for f in session["faults"]] == ["error", "error", "pause"]


def test_mledger_admin_faults_needs_an_admin_url(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        admin_main(["--data-dir", "somewhere", "faults", "list"])
    assert exited.value.code == 2
    assert "faults needs --admin-url" in capsys.readouterr().err


def test_mledger_standalone_refuses_a_bad_scenario_file_before_starting(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("faults:\n  - {action: error, command: FLOW}\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mledger.cli",
            "standalone",
            "--memory",
            "--faults",
            str(scenario),
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""  # nothing started, no URLs printed
    assert f"{scenario}: faults[0]: FLOW has no answer to carry an error" in done.stderr


def test_restart_and_unload_over_rest_where_the_broker_can_restart_in_place() -> None:
    with EmbeddedStandalone() as standalone:
        url = standalone.admin_url
        client = pulsar.Client(
            standalone.service_url, operation_timeout_seconds=1, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        try:
            consumer = client.subscribe("orders", "billing")
            producer = client.create_producer("orders")
            with RemoteAdmin(url) as remote:
                remote.faults.arm({"action": "unload_topic", "topic": "orders"})
                server = standalone.server
                remote.faults.arm({"action": "restart", "crash": True})  # answered before the restart
            deadline = time.monotonic() + 30
            # the restart runs on a thread of its own: until it has replaced the server, the old
            # REST admin may still answer; then the new one comes back on the same port
            while standalone.server is server or not _answers(f"{url}{FAULTS}/stats"):
                assert time.monotonic() < deadline, "the broker did not come back"
                time.sleep(0.05)
            assert httpx.get(f"{url}{FAULTS}/stats").json()["firedByAction"] == {"unload_topic": 1, "restart": 1}
            producer.send(b"after")
            assert consumer.receive(10_000).data() == b"after"
        finally:
            client.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_broker_that_cannot_restart_in_place_refuses_restart_faults() -> None:
    broker = Broker(ManagedLedgerFactory(), faults=Faults())
    app = create_app(Admin(broker))
    refused = asgi_request(app, "POST", FAULTS, body={"action": "restart", "crash": True})
    assert refused.status_code == 405 and "cannot restart in place" in refused.json()["reason"]
    assert asgi_request(app, "GET", FAULTS).json() == []
    broker.close()
    args = argparse.Namespace(faults=None, fault_injection=True, fault_seed=None)
    for fault in ({"action": "restart"}, {"action": "restart", "command": "SEND", "after": 5}):
        scenario = Path(tempfile.mkdtemp()) / "restart.json"
        scenario.write_text(json.dumps({"faults": [{"action": "delay", "command": "SEND", "delay_ms": 5}, fault]}))
        with pytest.raises(FaultSpecError, match=r"restart.json: faults\[1\]: mledger standalone cannot restart"):
            standalone_faults(argparse.Namespace(**{**vars(args), "faults": scenario}))
