"""``mledger-admin`` commands for schema compatibility strategies and topic termination, over a
data directory and over ``--admin-url`` (pulsar-admin's names and options)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mledger.protocol import EmbeddedBroker

COMMAND = [sys.executable, "-m", "mledger.cli._admin"]


def run(*argv: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*COMMAND, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


@pytest.fixture
def data(tmp_path: Path) -> list[str]:
    return ["--data-dir", str(tmp_path / "data")]


def test_schema_strategy_commands(data: list[str]) -> None:
    run(*data, "topics", "create", "users")
    assert json.loads(run(*data, "namespaces", "get-schema-compatibility-strategy", "public/default").stdout) == "FULL"
    run(*data, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "BACKWARD")
    assert json.loads(run(*data, "topics", "get-schema-compatibility-strategy", "users").stdout) is None
    applied = run(*data, "topics", "get-schema-compatibility-strategy", "users", "--applied").stdout
    assert json.loads(applied) == "BACKWARD"
    run(*data, "topics", "set-schema-compatibility-strategy", "users", "-s", "FORWARD_TRANSITIVE")
    assert json.loads(run(*data, "topics", "get-schema-compatibility-strategy", "users").stdout) == "FORWARD_TRANSITIVE"
    run(*data, "topics", "remove-schema-compatibility-strategy", "users")
    assert json.loads(run(*data, "topics", "get-schema-compatibility-strategy", "users").stdout) is None
    bad = run(*data, "topics", "set-schema-compatibility-strategy", "users", "-s", "SOMETIMES", code=3)  # 400
    assert "SOMETIMES" in bad.stderr
    run(*data, "topics", "get-schema-compatibility-strategy", "missing", code=6)  # 404
    assert json.loads(run(*data, "namespaces", "get-is-allow-auto-update-schema", "public/default").stdout) is True
    run(*data, "namespaces", "set-is-allow-auto-update-schema", "public/default", "--disable")
    assert json.loads(run(*data, "namespaces", "get-is-allow-auto-update-schema", "public/default").stdout) is False


def test_terminate_commands(data: list[str]) -> None:
    run(*data, "topics", "create", "orders")
    run(*data, "topics", "produce", "orders", "-m", "a", "-m", "b")
    done = run(*data, "topics", "terminate", "orders")
    assert done.stdout.startswith("Topic orders successfully terminated at ")
    run(*data, "topics", "produce", "orders", "-m", "c", code=9)  # TopicTerminated: 412
    run(*data, "topics", "create-partitioned-topic", "parts", "-p", "2")
    run(*data, "topics", "terminate", "parts", code=7)  # 405, as Pulsar
    ids = json.loads(run(*data, "topics", "partitioned-terminate", "parts").stdout)
    assert sorted(ids) == ["0", "1"]
    run(*data, "topics", "partitioned-terminate", "orders", code=6)


def test_the_same_commands_over_admin_url(pulsar_broker: EmbeddedBroker) -> None:
    url = ["--admin-url", pulsar_broker.admin_url]
    run(*url, "topics", "create", "remote")
    run(*url, "topics", "set-schema-compatibility-strategy", "remote", "-s", "ALWAYS_COMPATIBLE")
    assert json.loads(run(*url, "topics", "get-schema-compatibility-strategy", "remote").stdout) == "ALWAYS_COMPATIBLE"
    run(*url, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "FULL_TRANSITIVE")
    assert json.loads(run(*url, "namespaces", "get-schema-compatibility-strategy", "public/default").stdout) == (
        "FULL_TRANSITIVE"
    )
    assert "successfully terminated" in run(*url, "topics", "terminate", "remote").stdout
    assert pulsar_broker.broker.get_topic("remote").is_terminated
