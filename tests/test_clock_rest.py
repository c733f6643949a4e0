"""Issue 34 items 2 and 3, for other languages: the broker's manual clock over REST
(``/admin/v2/mledger/clock``, an mledger extension): ``GET`` reads it, ``POST /advance`` moves it
and fires the broker's timers due on the way, as the fixture's ``clock.advance`` does; refused
on the system clock, superusers only under authorization; ``RemoteAdmin.clock`` and
``mledger-admin clock``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pulsar
import pytest
from asgi import asgi_request
from standalone_process import running_standalone

from mledger import ManagedLedgerFactory
from mledger.admin import Admin, Authorization, RemoteAdmin
from mledger.broker import DETERMINISTIC_START_MS, Broker, ClockNotManualError
from mledger.cli._admin import main as admin_main
from mledger.core import ManualClock
from mledger.rest import RoleResolver, create_app

pytestmark = pytest.mark.timeout(60)

CLOCK = "/admin/v2/mledger/clock"


@pytest.fixture
def deterministic_standalone() -> Iterator[dict[str, str]]:
    """``mledger standalone --deterministic --seed 7``: its URLs."""
    with running_standalone("--deterministic", "--seed", "7") as urls:
        yield urls


def test_a_delayed_message_waits_for_the_rest_advance_under_mledger_standalone(
    deterministic_standalone: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = deterministic_standalone["admin_url"]
    assert httpx.get(f"{url}{CLOCK}").json() == {"nowMs": DETERMINISTIC_START_MS, "manual": True}
    client = pulsar.Client(
        deterministic_standalone["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        consumer = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer("orders", batching_enabled=False)
        producer.send(b"later", deliver_at=DETERMINISTIC_START_MS + 60_000)  # the broker's time
        producer.send(b"now")
        assert consumer.receive(30_000).data() == b"now"  # dispatched, the delayed one held back
        advanced = httpx.post(f"{url}{CLOCK}/advance", json=59_999)
        assert advanced.json() == {"nowMs": DETERMINISTIC_START_MS + 59_999, "manual": True}
        with pytest.raises(pulsar.Timeout):  # one millisecond short of its deadline
            consumer.receive(500)
        assert admin_main(["--admin-url", url, "clock", "advance", "1"]) == 0
        assert json.loads(capsys.readouterr().out) == {"nowMs": DETERMINISTIC_START_MS + 60_000, "manual": True}
        assert consumer.receive(30_000).data() == b"later"
    finally:
        client.close()
    with RemoteAdmin(url) as remote:
        assert remote.clock.now() == (DETERMINISTIC_START_MS + 60_000, True)
        assert remote.clock.advance(1000).now_ms == DETERMINISTIC_START_MS + 61_000
    assert admin_main(["--admin-url", url, "clock", "now"]) == 0
    assert json.loads(capsys.readouterr().out) == {"nowMs": DETERMINISTIC_START_MS + 61_000, "manual": True}
    for bad in (0, -5, 1.5, "60s", True, None):
        refused = httpx.post(f"{url}{CLOCK}/advance", content=json.dumps(bad))
        assert refused.status_code == 400, bad
        assert refused.json()["reason"].startswith(f"invalid clock advance {bad!r}: expected a positive integer")
    refused = httpx.post(f"{url}{CLOCK}/advance", content=b"1 minute")
    assert refused.status_code == 400
    assert refused.json()["reason"] == "invalid clock advance '1 minute': expected a positive integer of milliseconds"
    assert httpx.get(f"{url}{CLOCK}").json()["nowMs"] == DETERMINISTIC_START_MS + 61_000  # nothing moved


def test_the_fixture_s_broker_advances_over_rest_as_clock_advance_does(
    pulsar_broker: Any, client_for: Callable[[Any], pulsar.Client]
) -> None:
    # the fixture's clock follows the wall clock on advance: deliver_after (the client's wall
    # time) comes due as it does under pulsar_broker.clock.advance
    client = client_for(pulsar_broker)
    consumer = client.subscribe("later", "sub", consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer("later").send(b"in a minute", deliver_after=timedelta(minutes=1))
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    reading = httpx.post(f"{pulsar_broker.admin_url}{CLOCK}/advance", json=60_000).json()
    assert reading == {"nowMs": pulsar_broker.clock.now_ms(), "manual": True}
    assert consumer.receive(30_000).data() == b"in a minute"


def test_an_advance_is_refused_on_the_system_clock(capsys: pytest.CaptureFixture[str]) -> None:
    broker = Broker(ManagedLedgerFactory())
    app = create_app(Admin(broker))
    reading = asgi_request(app, "GET", CLOCK).json()
    assert reading["manual"] is False and reading["nowMs"] > DETERMINISTIC_START_MS
    refused = asgi_request(app, "POST", f"{CLOCK}/advance", body=60_000)
    assert refused.status_code == 409
    assert refused.json()["reason"].startswith("the broker runs on the system clock: only a manual clock advances")
    assert not any("mledger/clock" in path for path in app.openapi()["paths"])  # not Pulsar's API
    with pytest.raises(ClockNotManualError):
        broker.advance_clock(1)
    broker.close()
    with pytest.raises(SystemExit) as exited:
        admin_main(["--data-dir", "somewhere", "clock", "now"])
    assert exited.value.code == 2
    assert "clock needs --admin-url" in capsys.readouterr().err


def test_superusers_only_under_authorization() -> None:
    broker = Broker(ManagedLedgerFactory(), clock=ManualClock(1000))
    app = create_app(
        Admin(broker, Authorization({}, super_user_roles=["admin"])),
        roles=RoleResolver({"root-token": "admin", "bob-token": "bob"}),
    )
    assert asgi_request(app, "GET", CLOCK).status_code == 401
    assert asgi_request(app, "POST", f"{CLOCK}/advance", body=10).status_code == 401
    for method, path, body in (("GET", CLOCK, None), ("POST", f"{CLOCK}/advance", 10)):
        refused = asgi_request(app, method, path, "bob-token", body)
        assert refused.status_code == 403 and "not a superuser" in refused.json()["reason"]
    assert broker.clock.now_ms() == 1000
    assert asgi_request(app, "POST", f"{CLOCK}/advance", "root-token", 10).json() == {"nowMs": 1010, "manual": True}
    assert asgi_request(app, "GET", CLOCK, "root-token").json() == {"nowMs": 1010, "manual": True}
    broker.close()
