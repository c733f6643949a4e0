"""``mledger standalone`` as a process: ready when /admin/v2/clusters answers, serves clients
and the REST set-up calls over one broker, stops gracefully on SIGTERM and keeps its data."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
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
        assert httpx.put(f"{admin}/admin/v2/namespaces/acme/prod").status_code == 404  # no tenant yet
        tenant = {"adminRoles": [], "allowedClusters": ["standalone"]}
        assert httpx.put(f"{admin}/admin/v2/tenants/acme", json=tenant).status_code == 204
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
    from mledger import ConfigError
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
    from mledger import ConfigError
    from mledger.admin import Authorization
    from mledger.broker import BrokerConfig
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_standalone_takes_a_bare_port_as_a_port_on_the_default_host(tmp_path: Path) -> None:
    """``--bind 36653``, as people type it, is 127.0.0.1:36653 (it was host 0.0.143.45 on 6650)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", str(port), "--admin-bind", "0", "--memory"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        assert line, proc.stderr.read() if proc.stderr else ""
        urls = json.loads(line)
        assert urls["service_url"] == f"pulsar://127.0.0.1:{port}"
        assert urls["admin_url"].startswith("http://127.0.0.1:")
        client = pulsar.Client(urls["service_url"], operation_timeout_seconds=10,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        client.create_producer("bare-port").send(b"x")
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.parametrize("option", ["--admin-bind", "--bind"])
def test_an_address_in_use_names_the_address_and_the_server(tmp_path: Path, option: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        binds = {"--bind": "127.0.0.1:0", "--admin-bind": "127.0.0.1:0", option: f"127.0.0.1:{port}"}
        argv = [a for pair in binds.items() for a in pair]
        done = subprocess.run(
            [sys.executable, "-m", "mledger.cli", "standalone", "--memory", *argv],
            capture_output=True, text=True, cwd=tmp_path, timeout=60,
        )
    server = "admin REST server" if option == "--admin-bind" else "Pulsar protocol server"
    assert done.returncode == 2, done.stderr
    assert f"{server}: cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("bind", ["localhost:x", "[::1", "::1:6650", "127.0.0.1:70000"])
def test_a_bad_bind_is_refused_with_the_value_before_anything_starts(tmp_path: Path, bind: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli", "standalone", "--data-dir", str(tmp_path / "data"), "--bind", bind],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert f"invalid --bind {bind!r}" in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()


def test_the_broker_command_imports_nothing_of_the_replay_or_the_report() -> None:
    """``mledger standalone`` works with the server extra alone: parsing its command line and
    building its servers import no replay, report, pyarrow, pandas, matplotlib or pyspark."""
    code = textwrap.dedent(
        """
        import sys
        from mledger.cli._mledger import build_parser
        from mledger.core._address import parse_bind
        argv = ["standalone", "--memory", "--bind", "0", "--admin-bind", "0"]
        args = build_parser(argv).parse_args(argv)
        from mledger.standalone import Standalone
        Standalone(None, parse_bind(args.bind, 6650), parse_bind(args.admin_bind, 8080)).admin.shutdown()
        heavy = ("pyarrow", "pandas", "matplotlib", "pyspark", "mledger.replay", "mledger.report")
        print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_standalone_on_ipv6_loopback(tmp_path: Path) -> None:
    """``[::1]:port`` binds IPv6 and the URLs put the address in brackets."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--bind", "[::1]:0", "--admin-bind", "[::1]:0", "--memory"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        assert line, proc.stderr.read() if proc.stderr else ""
        urls = json.loads(line)
        assert urls["service_url"].startswith("pulsar://[::1]:") and urls["admin_url"].startswith("http://[::1]:")
        assert httpx.get(f"{urls['admin_url']}/admin/v2/clusters").json() == ["standalone"]
        # pulsar-client 3.13 refuses IPv6 literals in service URLs ("invalid hostname"): a socket
        # shows the protocol server listens there
        port = int(urls["service_url"].rsplit(":", 1)[1])
        socket.create_connection(("::1", port), timeout=10).close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_protocol_server_alone_reports_an_address_in_use_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "mledger.protocol", "--memory", "--bind", str(port)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert f"Pulsar protocol server: cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
