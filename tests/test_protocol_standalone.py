"""``mledger standalone`` as a process: ready when /admin/v2/clusters answers, serves clients
and the REST set-up calls over one broker, stops gracefully on SIGTERM and keeps its data."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pulsar
import pytest

pytestmark = pytest.mark.timeout(120)


def standalone(data_dir: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0",
         "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def test_standalone_serves_protocol_and_rest_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc, urls = standalone(tmp_path / "data")
    admin = urls["admin_url"]
    try:
        assert httpx.get(f"{admin}/admin/v2/clusters").json() == ["standalone"]
        assert "public/default" in httpx.get(f"{admin}/admin/v2/namespaces/public").json()
        assert httpx.put(f"{admin}/admin/v2/namespaces/acme/prod").status_code == 204
        assert httpx.put(f"{admin}/admin/v2/namespaces/acme/prod").status_code == 409
        assert httpx.put(f"{admin}/admin/v2/persistent/acme/prod/orders/partitions", json=2).status_code == 204
        client = pulsar.Client(urls["service_url"], operation_timeout_seconds=10,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        consumer = client.subscribe("persistent://acme/prod/orders", "sub")
        producer = client.create_producer("persistent://acme/prod/orders")
        for i in range(10):
            producer.send(b"%d" % i)
        got = sorted(int(consumer.receive(5000).data()) for _ in range(10))
        assert got == list(range(10))
        metrics = httpx.get(f"{admin}/metrics").text
        assert 'pulsar_in_messages_total{cluster="standalone"} 10.0' in metrics
        assert 'pulsar_active_connections{cluster="standalone"} 1.0' in metrics
        assert httpx.delete(f"{admin}/admin/v2/namespaces/acme/prod").status_code == 409  # not empty
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    # The data survives a restart.
    proc, urls = standalone(tmp_path / "data")
    try:
        topics = httpx.get(f"{urls['admin_url']}/admin/v2/persistent/acme/prod/partitioned").json()
        assert topics == ["persistent://acme/prod/orders"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_standalone_memory_mode(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0",
         "--memory"],
        stdout=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    assert proc.stdout is not None
    urls = json.loads(proc.stdout.readline())
    try:
        assert httpx.get(f"{urls['admin_url']}/admin/v2/clusters").json() == ["standalone"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert not (tmp_path / "data").exists()


# -- authentication set-up (issue 23, item 1) ---------------------------------------------------


def test_standalone_refuses_tokens_without_authorization(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"s3cret": "app"}))
    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0",
         "--memory", "--token-file", str(tokens)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert done.returncode == 2, done
    assert "--authorization" in done.stderr and "without an authorization file" in done.stderr
    assert done.stdout == ""  # never started: no URLs printed


def test_embedded_standalone_refuses_tokens_without_authorization() -> None:
    from mledger.core.errors import ConfigError
    from mledger.standalone import EmbeddedStandalone, Standalone

    with pytest.raises(ConfigError, match="without an authorization file \\(authorization\\)"):
        EmbeddedStandalone(tokens={"s3cret": "app"})
    with pytest.raises(ConfigError, match="without an authorization file \\(authorization\\)"):
        Standalone(None, ("127.0.0.1", 0), ("127.0.0.1", 0), tokens={"s3cret": "app"})


def test_secured_standalone_has_no_anonymous_admin_mutation(tmp_path: Path) -> None:
    from mledger.admin import Authorization
    from mledger.standalone import EmbeddedStandalone

    auth = Authorization({"app": {"public/default": ["produce", "consume"]}}, super_user_roles=["admin"])
    with EmbeddedStandalone(tokens={"s3cret": "app", "root": "admin"}, authorization=auth) as broker:
        base = f"{broker.admin_url}/admin/v2/persistent/public/default"
        assert httpx.put(f"{base}/anon").status_code == 401
        assert httpx.get(base).status_code == 401
        assert httpx.put(f"{base}/owned", headers={"Authorization": "Bearer root"}).status_code == 204
        assert httpx.delete(f"{base}/owned").status_code == 401
        assert httpx.get(base, headers={"Authorization": "Bearer root"}).json() == ["persistent://public/default/owned"]


def test_standalone_authenticated_metrics_endpoint(tmp_path: Path) -> None:
    """Issue 23 item 3: --authenticate-metrics-endpoint (BrokerConfig.authenticate_metrics_endpoint)."""
    from mledger.admin import Authorization
    from mledger.broker import BrokerConfig
    from mledger.core.errors import ConfigError
    from mledger.standalone import EmbeddedStandalone

    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0",
         "--memory", "--authenticate-metrics-endpoint"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert done.returncode == 2 and "authenticate_metrics_endpoint needs authentication" in done.stderr, done
    config = BrokerConfig(authenticate_metrics_endpoint=True)
    with pytest.raises(ConfigError, match="needs authentication"):
        EmbeddedStandalone(broker_config=config)
    auth = Authorization({"prometheus": {}}, super_user_roles=["admin"])
    with EmbeddedStandalone(broker_config=config, tokens={"scrape": "prometheus"}, authorization=auth) as broker:
        assert httpx.get(f"{broker.admin_url}/metrics").status_code == 401
        scraped = httpx.get(f"{broker.admin_url}/metrics", headers={"Authorization": "Bearer scrape"})
        assert scraped.status_code == 200 and "pulsar_active_connections" in scraped.text
