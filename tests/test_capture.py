"""``mledger capture`` (issue 25 item 4): a capture of a live broker replays to its cursors.

The seeded real-client workload of ``test_record_differential`` runs against ``mledger
standalone`` while ``mledger capture`` (a separate process, public APIs only: readers and
stats polls) captures its three topics; at the end (consumers closed) the live broker's
internal stats are read, the capture is stopped by SIGTERM (one last poll), and the replay of
the capture must give every subscription's mark-delete position, individually deleted ranges
and backlog exactly as the live broker reports them.
"""

from __future__ import annotations

import base64
import json
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pulsar
import pyarrow.parquet as pq
import pytest
from standalone_process import running_standalone
from test_authentication import EVERYONE, created, htpasswd, tokens_cli
from test_record_differential import (
    NS,
    PARTITIONED,
    PLAIN,
    Done,
    Workload,
    assert_replay_equals,
    internal_stats,
    standalone_config,
)
from test_standalone_tls import client as tls_client, start as start_tls, stop as stop_tls

from mledger.admin import Authorization, RemoteAdmin
from mledger.admin._authentication import AuthenticationSettings
from mledger.broker import MessageId
from mledger.cli._capture import parse_auth_params
from mledger.core import Position
from mledger.replay import Capture, CaptureSettings, run_single_process
from mledger.replay._capture import CAPTURE_FILE, parse_deleted_ranges
from mledger.standalone import EmbeddedStandalone

pytestmark = pytest.mark.timeout(300)

SEED = 11
STEPS = 300


def test_parse_deleted_ranges() -> None:
    assert parse_deleted_ranges("[]") == []
    assert parse_deleted_ranges("[(3:5..3:7],(3:9..4:0]]") == [
        (Position(3, 5), Position(3, 7)),
        (Position(3, 9), Position(4, 0)),
    ]
    with pytest.raises(ValueError, match="3:5"):
        parse_deleted_ranges("[(3:5..x]]")


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[dict[str, str]]:
    with running_standalone("--config", str(standalone_config(tmp_path))) as urls:
        yield urls


def start_capture(out: Path, urls: dict[str, str], *options: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "capture", str(out), "--service-url", urls["service_url"],
         "--admin-url", urls["admin_url"], "--duration", "10m", "--interval", "200ms", *options],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.wait(timeout=30)
    return proc, json.loads(line)["capturing"]


def stop_capture(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_capture_of_a_workload_replays_to_the_live_internal_stats(tmp_path: Path, standalone: dict[str, str]) -> None:
    work = Workload(standalone["service_url"], standalone["admin_url"], SEED)  # creates the partitioned topic
    topics = [f"{NS}/{t}" for t in [*PLAIN, PARTITIONED]]
    options = [o for t in topics for o in ("--topic", t)]
    proc, capturing = start_capture(tmp_path / "cap", standalone, *options, "--hash-keys")
    try:
        assert capturing == sorted([f"{NS}/{t}" for t in PLAIN] + [f"{NS}/{PARTITIONED}-partition-{i}" for i in (0, 1)])
        work.run(STEPS)
        stop_capture(proc)  # after the workload: its last poll sees the final state
        live = internal_stats(standalone["admin_url"])  # without the capture's readers, closed now
    finally:
        if proc.poll() is None:
            proc.kill()
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    assert_replay_equals(Done(work.counts, frozenset(work.unsubscribed)), live, tmp_path / "out")
    description = json.loads((tmp_path / "cap" / CAPTURE_FILE).read_text())
    assert description["complete"] and description["keys_hashed"]
    assert {"ack_times", "partial_batch_acks", "starting_state"} <= set(description["approximations"])
    keys = {r["key"] for r in pq.read_table(tmp_path / "cap" / "produced").to_pylist()}
    assert keys and not keys & {f"k{i}" for i in range(5)}  # hashed, never the workload's keys
    names = {r["subscription"] for r in pq.read_table(tmp_path / "cap" / "subscriptions").to_pylist()}
    assert names and not any(n.startswith("reader") or "capture" in n for n in names)


def test_namespace_capture_finds_topics_created_during_it(tmp_path: Path, standalone: dict[str, str]) -> None:
    proc, capturing = start_capture(tmp_path / "cap", standalone, "--namespace", "public/default")
    try:
        assert capturing == []  # nothing exists yet: every topic is found by a later poll
        work = Workload(standalone["service_url"], standalone["admin_url"], SEED + 1)
        work.run(STEPS // 2)
        stop_capture(proc)
        live = internal_stats(standalone["admin_url"])
    finally:
        if proc.poll() is None:
            proc.kill()
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    assert_replay_equals(Done(work.counts, frozenset(work.unsubscribed)), live, tmp_path / "out")
    description = json.loads((tmp_path / "cap" / CAPTURE_FILE).read_text())
    assert description["namespace"] == "public/default" and not description["keys_hashed"]
    assert set(description["topics"]) == {f"{NS}/{t}" for t in PLAIN} | {
        f"{NS}/{PARTITIONED}-partition-{i}" for i in (0, 1)
    }


def captured_with_credentials(
    tmp_path: Path,
    urls: dict[str, str],
    make_client: Callable[[], pulsar.Client],
    http: httpx.Client,
    refusal: str | None,
    *options: str,
) -> None:
    """Refused without ``options`` (stderr says ``refusal``); with them, a capture of a small
    workload replays to the cursor the admin API (``http``) reports."""
    if refusal is not None:
        refused = subprocess.run(
            [sys.executable, "-m", "mledger.cli", "capture", str(tmp_path / "no"), "--service-url",
             urls["service_url"], "--admin-url", urls["admin_url"], "--topic", "orders", "--duration", "1s"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert refused.returncode == 2 and refusal in refused.stderr, refused.stderr
    http.put(f"{urls['admin_url']}/admin/v2/persistent/public/default/orders").raise_for_status()  # capture creates none
    proc, capturing = start_capture(tmp_path / "cap", urls, "--topic", "orders", *options)
    try:
        assert capturing == [f"{NS}/orders"]
        client = make_client()
        consumer = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer("orders")
        for i in range(6):
            producer.send(b"%d" % i)
        for i in range(6):
            message = consumer.receive(10_000)
            if i % 2:
                consumer.acknowledge(message)
        client.close()
        # acknowledgements are asynchronous: the capture's last poll must come after the broker
        # applied all three (ranges (0:0..0:1], (0:2..0:3], (0:4..0:5] or their ledger's ids)
        internal = f"{urls['admin_url']}/admin/v2/persistent/public/default/orders/internalStats"
        deadline = time.monotonic() + 30
        while http.get(internal).json()["cursors"]["billing"]["individuallyDeletedMessages"].count("(") < 3:
            assert time.monotonic() < deadline, "the broker never applied the three acknowledgements"
            time.sleep(0.05)
        stop_capture(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    stats = http.get(f"{urls['admin_url']}/admin/v2/persistent/public/default/orders/internalStats").json()
    cursor = stats["cursors"]["billing"]
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    (row,) = pq.read_table(tmp_path / "out" / "cursors").to_pylist()
    assert f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}" == cursor["markDeletePosition"]
    assert row["individually_deleted_messages"] == cursor["individuallyDeletedMessages"] != "[]"


def test_token_authenticates_the_readers_and_the_admin_calls(tmp_path: Path) -> None:
    secret = tmp_path / "secret.key"
    assert tokens_cli("create-secret-key", "--output", str(secret)).returncode == 0
    token = created("--subject", "root", "--secret-key", f"file://{secret}")
    settings = AuthenticationSettings(token_secret_key=f"file://{secret}")
    with EmbeddedStandalone(authentication=settings, authorization=EVERYONE) as broker:
        urls = {"service_url": broker.service_url, "admin_url": broker.admin_url}
        auth = pulsar.AuthenticationToken(token)
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as http:
            captured_with_credentials(
                tmp_path, urls, lambda: pulsar.Client(urls["service_url"], authentication=auth), http,
                "Authentication required", "--auth-token", token,
            )  # fmt: skip


def test_basic_auth_params_authenticate_the_readers_and_the_admin_calls(tmp_path: Path) -> None:
    settings = AuthenticationSettings(basic_auth_conf=str(htpasswd(tmp_path)))
    authorization = Authorization({}, super_user_roles=["apr"])
    with EmbeddedStandalone(authentication=settings, authorization=authorization) as broker:
        urls = {"service_url": broker.service_url, "admin_url": broker.admin_url}
        auth = pulsar.AuthenticationBasic("apr", "pw-apr")
        params = json.dumps({"userId": "apr", "password": "pw-apr"})
        with httpx.Client(headers={"Authorization": "Basic " + base64.b64encode(b"apr:pw-apr").decode()}) as http:
            captured_with_credentials(
                tmp_path, urls, lambda: pulsar.Client(urls["service_url"], authentication=auth), http,
                "Authentication required", "--auth-params", params,
            )  # fmt: skip


def test_tls_trust_and_client_certificate_for_the_readers_and_the_admin_calls(tmp_path: Path) -> None:
    broker = start_tls(tmp_path)
    try:
        pki = broker.pki
        urls = {"service_url": broker.urls["service_url_tls"], "admin_url": broker.urls["admin_url_tls"]}
        params = f"tlsCertFile:{pki.client_cert},tlsKeyFile:{pki.client_key}"
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
        with httpx.Client(verify=context) as http:
            captured_with_credentials(
                tmp_path, urls, lambda: tls_client(broker, pki.ca, certificate=True), http, None,
                "--tls-trust-certs-file", str(pki.ca), "--auth-params", params,
            )  # fmt: skip
    finally:
        stop_tls(broker)


def test_auth_params_forms() -> None:
    assert parse_auth_params('{"userId": "u", "password": "p"}') == {"userId": "u", "password": "p"}
    assert parse_auth_params("tlsCertFile:/c.pem,tlsKeyFile:/k.pem") == {
        "tlsCertFile": "/c.pem",
        "tlsKeyFile": "/k.pem",
    }
    with pytest.raises(ValueError, match="userId and password"):
        parse_auth_params("userId:u")


def test_a_zero_interval_says_it_must_be_above_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """``--interval 0`` said "invalid duration" without saying what a valid one is."""
    from mledger.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["capture", "out", "--service-url", "pulsar://127.0.0.1:1", "--admin-url", "http://127.0.0.1:1",
              "--topic", "t", "--duration", "1s", "--interval", "0"])
    assert exited.value.code == 2
    assert "argument --interval: invalid duration '0': must be above zero" in capsys.readouterr().err


def test_a_type_change_and_a_reset_between_polls(tmp_path: Path, standalone: dict[str, str]) -> None:
    """In process, one poll per step: a subscription subscribed again with another type is
    created again with it, and a seek back is a reset followed by the acks still there."""
    client = pulsar.Client(standalone["service_url"])
    admin = RemoteAdmin(standalone["admin_url"])
    capture = Capture(tmp_path / "cap", client, admin, CaptureSettings(topics=("orders",)))
    try:
        producer = client.create_producer("orders", batching_enabled=False)
        exclusive = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Exclusive)
        ids = [producer.send(b"%d" % i) for i in range(6)]
        capture.poll()
        for _ in range(3):
            message = exclusive.receive(10_000)
        exclusive.acknowledge_cumulative(message)
        exclusive.close()
        capture.poll()
        shared = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
        for message in (shared.receive(10_000) for _ in range(3)):
            if message.message_id().entry_id() == ids[4].entry_id():
                shared.acknowledge(message)
        shared.close()
        capture.poll()
        admin.topics.reset_cursor(f"{NS}/orders", "billing", MessageId(ids[1].ledger_id(), ids[1].entry_id()))
        capture.poll()
    finally:
        capture.close()
        client.close()
    live = admin.topics.internal_stats(f"{NS}/orders").cursors["billing"]
    admin.close()
    events = [r["event"] for r in pq.read_table(tmp_path / "cap" / "subscriptions").to_pylist()]
    assert events == ["created", "created", "reset"]
    run_single_process(str(tmp_path / "cap"), str(tmp_path / "out"))
    (row,) = pq.read_table(tmp_path / "out" / "cursors").to_pylist()
    assert row["subscription_type"] == "SHARED"
    assert f"{row['mark_delete_ledger_id']}:{row['mark_delete_entry_id']}" == live.mark_delete_position
    assert row["individually_deleted_messages"] == live.individually_deleted_messages


def test_duration_ends_the_capture_after_one_last_poll(tmp_path: Path, standalone: dict[str, str]) -> None:
    httpx.put(f"{standalone['admin_url']}/admin/v2/persistent/public/default/orders", timeout=30).raise_for_status()
    proc = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "capture", str(tmp_path / "cap"), "--service-url",
         standalone["service_url"], "--admin-url", standalone["admin_url"], "--topic", "orders",
         "--duration", "3s", "--interval", "200ms"],  # 3 s: room for slow polls on a loaded machine
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0]) == {"capturing": [f"{NS}/orders"]}
    description = json.loads((tmp_path / "cap" / CAPTURE_FILE).read_text())
    # the first, at least one more, the last (the loop needs the first poll to end within the duration)
    assert description["polls"] >= 3 and description["complete"]
    status = json.loads((tmp_path / "cap" / "recording.json").read_text())
    assert status["complete"] and all(s.get("stopped_ms") for s in status["sessions"]), status
