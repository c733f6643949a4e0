"""mledger-admin through a real subprocess: every run is a fresh broker over the same directory."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

T = "persistent://public/default/orders"
P = "persistent://public/default/parts"

_SCRIPT = Path(sys.executable).with_name("mledger-admin")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mledger.cli._admin"]


class Cli:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def run(self, *argv: str, code: int = 0, global_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*COMMAND, "--data-dir", str(self.data_dir), *global_args, *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
        return done

    def json_lines(self, *argv: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.run(*argv).stdout.splitlines()]

    def produce(self, topic: str, *argv: str) -> list[dict[str, Any]]:
        return self.json_lines("topics", "produce", topic, *argv)

    def consume(self, topic: str, sub: str, *argv: str) -> list[str]:
        return [m["data"] for m in self.json_lines("topics", "consume", topic, "-s", sub, "-n", "0", *argv)]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data")


def test_pip423_end_to_end_across_processes(cli: Cli) -> None:
    import pulsar

    cli.run("topics", "create-partitioned-topic", "parts", "-p", "2")
    for sub, kind in (("shared", "Shared"), ("keyed", "Key_Shared"), ("excl", "Exclusive")):
        cli.run("topics", "create-subscription", "parts", "-s", sub, "-t", kind, "-m", "earliest")
    assert cli.run("topics", "subscriptions", "parts").stdout.split() == ["excl", "keyed", "shared"]
    assert cli.run("topics", "list").stdout.split() == [P]

    delayed = cli.produce("parts", "-m", "d0", "-m", "d1", "-m", "d2", "--deliver-after-ms", "1500")
    plain = cli.produce("parts", "-m", "p0", "-m", "p1", "-m", "p2")
    batch = cli.produce("parts", "-m", "b0", "-m", "b1", "-m", "b2", "--batch")
    assert [m["batchIndex"] for m in batch] == [0, 1, 2]

    # cancel d0 everywhere (Exclusive refuses: exit 9, results still printed)
    done = cli.run(
        "topics",
        "cancel-delayed-message",
        "parts",
        "-l",
        str(delayed[0]["ledgerId"]),
        "-e",
        str(delayed[0]["entryId"]),
        code=9,
    )
    assert json.loads(done.stdout)["results"] == {"excl": False, "keyed": True, "shared": True}
    assert "excl" in done.stderr
    # cancel d1 on shared only, by the long flags
    done = cli.run(
        "topics",
        "cancel-delayed-message",
        "parts",
        "--ledgerId",
        str(delayed[1]["ledgerId"]),
        "--entryId",
        str(delayed[1]["entryId"]),
        "--subscriptionNames",
        "shared",
    )
    assert json.loads(done.stdout)["results"] == {"shared": True}
    # skip p0 by triplet, p1 by the real client's base64, b1 by a triplet with its batch index
    p1 = pulsar.MessageId(plain[1]["partition"], plain[1]["ledgerId"], plain[1]["entryId"], -1)
    cli.run(
        "topics",
        "skip-messages",
        "parts",
        "-s",
        "shared",
        "--messageId-triplet",
        f"{plain[0]['ledgerId']}:{plain[0]['entryId']}",
        "--messageId-base64",
        base64.b64encode(p1.serialize()).decode(),
        "--messageId-triplet",
        f"{batch[1]['ledgerId']}:{batch[1]['entryId']}:1",
    )
    # the Java client's form of an id works too (batch_size = 0 trailer)
    java_form = base64.b64encode(
        bytes.fromhex("08" + _varint(plain[2]["ledgerId"]) + "10" + _varint(plain[2]["entryId"]) + "3000")
    ).decode()
    cli.run("topics", "skip-messages", "parts", "-s", "keyed", "--messageId-base64", java_form)

    stats = json.loads(cli.run("topics", "stats-internal", "parts").stdout)
    assert stats["metadata"] == {"partitions": 2}
    assert set(stats["partitions"]) == {f"{P}-partition-0", f"{P}-partition-1"}

    time.sleep(1.6)  # the delayed messages are due now
    assert sorted(cli.consume("parts", "shared", "-t", "Shared")) == ["b0", "b2", "d2", "p2"]
    assert sorted(cli.consume("parts", "keyed", "-t", "Key_Shared")) == ["b0", "b1", "b2", "d1", "d2", "p0", "p1"]
    assert sorted(cli.consume("parts", "excl")) == ["b0", "b1", "b2", "d0", "d1", "d2", "p0", "p1", "p2"]
    assert cli.consume("parts", "shared", "-t", "Shared") == []
    assert cli.run("topics", "list-partitioned-topics").stdout.split() == [P]
    cli.run("topics", "unsubscribe", "parts", "-s", "keyed")
    assert cli.run("topics", "subscriptions", "parts").stdout.split() == ["excl", "shared"]
    cli.run("topics", "delete", "parts")
    assert cli.run("topics", "list").stdout == ""


def _varint(value: int) -> str:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return out.hex()


def test_cursor_commands(cli: Cli) -> None:
    cli.run("topics", "create", "orders")
    cli.run("topics", "create-subscription", "orders", "-s", "s", "-t", "Shared", "-m", "earliest")
    ids = cli.produce("orders", "-m", "m", "-n", "5")
    assert len(ids) == 5

    def cursor() -> dict[str, Any]:
        return json.loads(cli.run("topics", "stats-internal", "orders").stdout)["cursors"]["s"]

    assert cursor()["numberOfEntriesInBacklog"] == 5
    cli.run("topics", "skip", "orders", "-s", "s", "-n", "2")
    assert cursor()["numberOfEntriesInBacklog"] == 3
    assert cursor()["markDeletePosition"] == f"{ids[1]['ledgerId']}:{ids[1]['entryId']}"
    cli.run("topics", "reset-cursor", "orders", "-s", "s", "-m", f"{ids[3]['ledgerId']}:{ids[3]['entryId']}")
    assert cursor()["numberOfEntriesInBacklog"] == 2
    cli.run("topics", "reset-cursor", "orders", "-s", "s", "-m", "earliest")
    assert cursor()["numberOfEntriesInBacklog"] == 5
    triplet = f"{ids[2]['ledgerId']}:{ids[2]['entryId']}"
    cli.run("topics", "skip-messages", "orders", "-s", "s", "--messageId-triplet", triplet)
    c = cursor()
    ledger, entry = ids[2]["ledgerId"], ids[2]["entryId"]
    assert c["individuallyDeletedMessages"] == f"[({ledger}:{entry - 1}..{ledger}:{entry}]]"
    assert c["totalNonContiguousDeletedMessagesRange"] == 1
    assert c["numberOfEntriesInBacklog"] == 4
    cli.run("topics", "clear-backlog", "orders", "-s", "s")
    assert cursor()["numberOfEntriesInBacklog"] == 0
    assert cli.consume("orders", "s", "-t", "shared") == []


def test_error_exit_codes_and_messages(cli: Cli) -> None:
    cli.run("topics", "create", "orders")
    cli.run("topics", "create-subscription", "orders", "-s", "ex", "-m", "earliest")
    cli.run("topics", "create-subscription", "orders", "-s", "sh", "-t", "Shared", "-m", "earliest")
    mid = cli.produce("orders", "-m", "x")[0]
    triplet = f"{mid['ledgerId']}:{mid['entryId']}"

    done = cli.run("topics", "stats-internal", "nope", code=6)
    assert done.stderr.strip() == "Topic persistent://public/default/nope not found"
    done = cli.run("topics", "skip-messages", "orders", "-s", "nope", "--messageId-triplet", triplet, code=6)
    assert done.stderr.strip() == f"Subscription 'nope' not found on topic {T}"
    done = cli.run("topics", "skip-messages", "orders", "-s", "ex", "--messageId-triplet", triplet, code=7)
    assert done.stderr.strip() == "Unsupported subscription type."
    done = cli.run("topics", "cancel-delayed-message", "orders", "-l", "-1", "-e", "0", code=9)
    assert done.stderr.strip() == "ledgerId, entryId must be non-negative."
    done = cli.run("topics", "skip-messages", "orders", "-s", "sh", "--messageId-base64", "%%%", code=3)
    assert done.stderr.strip() == "Invalid skipByMessageIds payload: invalid base64 messageId"
    done = cli.run("topics", "skip-messages", "orders", "-s", "sh", "--messageId-base64", "", code=3)
    assert done.stderr.strip() == "Invalid skipByMessageIds payload: invalid base64 messageId (empty)"
    done = cli.run("topics", "skip-messages", "orders", "-s", "sh", "--messageId-triplet", f"{triplet}:4", code=3)
    assert "Invalid batch index 4" in done.stderr
    done = cli.run("topics", "skip-messages", "orders", "-s", "sh", "--messageId-triplet", "999:0", code=9)
    assert "does not exist" in done.stderr
    done = cli.run("topics", "create", "orders", code=8)
    assert "This topic already exists" in done.stderr
    done = cli.run("topics", "create-subscription", "orders", "-s", "sh", code=8)
    assert "Subscription already exists" in done.stderr
    done = cli.run("topics", "internal", code=2)
    assert "invalid choice" in done.stderr
    done = cli.run("topics", "skip-messages", "orders", "-s", "sh", code=2)
    assert "at least one --messageId-triplet or --messageId-base64 is required" in done.stderr
    done = cli.run("topics", "stats-internal", "a/b", code=3)
    assert "Invalid short topic name" in done.stderr
    # nothing of the above changed the subscriptions
    cursors = json.loads(cli.run("topics", "stats-internal", "orders").stdout)["cursors"]
    assert cursors["sh"]["numberOfEntriesInBacklog"] == 1 and cursors["ex"]["numberOfEntriesInBacklog"] == 1


def test_topics_go_in_namespaces_that_exist(cli: Cli) -> None:
    # pulsar-admin: topics create in a missing namespace is 404; namespaces create makes it.
    done = cli.run("topics", "create", "acme/prod/orders", code=6)
    assert done.stderr.strip() == "Namespace does not exist: acme/prod (topic persistent://acme/prod/orders)"
    cli.run("tenants", "create", "acme", "--allowed-clusters", "standalone")
    cli.run("namespaces", "create", "acme/prod")
    done = cli.run("namespaces", "create", "acme/prod", code=8)
    assert done.stderr.strip() == "Namespace already exists: acme/prod"
    cli.run("topics", "create", "acme/prod/orders")
    assert cli.run("topics", "list", "acme/prod").stdout.split() == ["persistent://acme/prod/orders"]


def test_authorization_file(cli: Cli, tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(
        json.dumps(
            {
                "superUserRoles": ["admin"],
                "permissions": {"ops": {"orders": ["skip", "cancel_delayed_message"]}, "viewer": {"*": ["get_stats"]}},
            }
        )
    )
    as_admin = ("--auth-file", str(auth), "--role", "admin")
    cli.run("topics", "create", "orders", global_args=as_admin)
    cli.run(
        "topics", "create-subscription", "orders", "-s", "sh", "-t", "Shared", "-m", "earliest", global_args=as_admin
    )
    mid = cli.json_lines("--auth-file", str(auth), "--role", "admin", "topics", "produce", "orders", "-m", "x")[0]
    triplet = f"{mid['ledgerId']}:{mid['entryId']}"

    done = cli.run(
        "topics",
        "skip-messages",
        "orders",
        "-s",
        "sh",
        "--messageId-triplet",
        triplet,
        global_args=("--auth-file", str(auth), "--role", "viewer"),
        code=5,
    )
    assert done.stderr.strip() == (f"Unauthorized to validateTopicOperation for operation [SKIP] on topic [{T}]")
    done = cli.run(
        "topics",
        "skip-messages",
        "orders",
        "-s",
        "sh",
        "--messageId-triplet",
        triplet,
        global_args=("--auth-file", str(auth)),
        code=4,
    )
    assert done.stderr.strip() == "Need to authenticate to perform the request"
    done = cli.run(
        "topics",
        "reset-cursor",
        "orders",
        "-s",
        "sh",
        "-m",
        "earliest",
        global_args=("--auth-file", str(auth), "--role", "ops"),
        code=5,
    )
    assert "[RESET_CURSOR]" in done.stderr
    stats = json.loads(
        cli.run("topics", "stats-internal", "orders", global_args=("--auth-file", str(auth), "--role", "viewer")).stdout
    )
    assert stats["cursors"]["sh"]["numberOfEntriesInBacklog"] == 1  # the denied calls changed nothing
    cli.run(
        "topics",
        "skip-messages",
        "orders",
        "-s",
        "sh",
        "--messageId-triplet",
        triplet,
        global_args=("--auth-file", str(auth), "--role", "ops"),
    )
    stats = json.loads(cli.run("topics", "stats-internal", "orders").stdout)  # no auth file: off
    assert stats["cursors"]["sh"]["numberOfEntriesInBacklog"] == 0

    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    done = cli.run("topics", "list", global_args=("--auth-file", str(bad)), code=3)
    assert "not valid JSON" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("topics", "--help"),
        ("topics", "skip-messages", "--help"),
        ("topics", "cancel-delayed-message", "--help"),
        ("topics", "consume", "-h"),
    ],
)
def test_help(cli: Cli, argv: tuple[str, ...]) -> None:
    done = subprocess.run([*COMMAND, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "usage: mledger-admin" in done.stdout
    assert "exit status" in done.stdout


def test_module_entry_point(cli: Cli) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mledger.cli._admin", "--data-dir", str(cli.data_dir), "topics", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == ""


def test_unusable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run(
        [*COMMAND, "--data-dir", str(blocker / "sub"), "topics", "list"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip()
    assert "Traceback" not in done.stderr


def test_output_table_for_people_json_by_default(cli: Cli) -> None:
    cli.run("topics", "create", "orders")
    cli.run("topics", "create-subscription", "orders", "-s", "billing", "-t", "Shared", "-m", "earliest")
    produced = cli.run("--output", "table", "topics", "produce", "orders", "-m", "a", "-m", "b").stdout
    assert "messageId" in produced and "base64" in produced and "{" not in produced
    table = cli.run("-o", "table", "topics", "stats-internal", "orders").stdout
    for heading in ("ledgers", "cursors", "subscription", "mark-delete", "backlog", "billing"):
        assert heading in table, table
    stats = json.loads(cli.run("topics", "stats-internal", "orders").stdout)  # the default is still JSON
    assert stats["cursors"]["billing"]["numberOfEntriesInBacklog"] == 2


def test_retention_commands_as_pulsar_admin(cli: Cli) -> None:
    # pulsar-admin namespaces set-retention / topics set-retention: --time with s/m/h/d/w/y,
    # --size with k/M/G/T, -1 unlimited; stored as minutes and MB.
    cli.run("topics", "create", "orders")
    assert cli.run("namespaces", "get-retention", "public/default").stdout.strip() == "null"
    cli.run("namespaces", "set-retention", "public/default", "--time", "3h", "--size", "10G")
    expected = {"retentionTimeInMinutes": 180, "retentionSizeInMB": 10240}
    assert json.loads(cli.run("namespaces", "get-retention", "public/default").stdout) == expected
    assert cli.run("topics", "get-retention", "orders").stdout.strip() == "null"
    assert json.loads(cli.run("topics", "get-retention", "orders", "--applied").stdout) == expected
    cli.run("topics", "set-retention", "orders", "-t", "-1", "-s", "512M")
    own = {"retentionTimeInMinutes": -1, "retentionSizeInMB": 512}
    assert json.loads(cli.run("topics", "get-retention", "orders").stdout) == own
    assert json.loads(cli.run("topics", "get-retention", "orders", "--applied").stdout) == own
    done = cli.run("topics", "set-retention", "orders", "-t", "10m", "-s", "0", code=9)  # 412
    assert "Use the value of -1 instead of 0" in done.stderr
    cli.run("topics", "remove-retention", "orders")
    assert json.loads(cli.run("topics", "get-retention", "orders", "--applied").stdout) == expected
    cli.run("namespaces", "remove-retention", "public/default")
    assert json.loads(cli.run("topics", "get-retention", "orders", "--applied").stdout) == {
        "retentionTimeInMinutes": 0,
        "retentionSizeInMB": 0,
    }
    cli.run("topics", "get-retention", "missing", code=6)
    assert "invalid time" in cli.run("topics", "set-retention", "orders", "-t", "3x", "-s", "1G", code=2).stderr


def test_reset_cursor_back_in_time_into_retained_data(cli: Cli) -> None:
    # pulsar-admin topics reset-cursor --time 1h: to the first message published since now - 1h;
    # with retention, consumed messages come back.
    cli.run("topics", "create", "orders")
    cli.run("namespaces", "set-retention", "public/default", "-t", "-1", "-s", "-1")
    cli.run("topics", "create-subscription", "orders", "-s", "s", "-m", "earliest")
    cli.produce("orders", "-m", "m", "-n", "3")
    assert cli.consume("orders", "s") == ["m", "m", "m"]

    def backlog() -> int:
        return int(
            json.loads(cli.run("topics", "stats-internal", "orders").stdout)["cursors"]["s"]["numberOfEntriesInBacklog"]
        )

    assert backlog() == 0
    cli.run("topics", "reset-cursor", "orders", "-s", "s", "--time", "1h")
    assert backlog() == 3
    cli.run("topics", "reset-cursor", "orders", "-s", "s", "--time", "-60")  # a minute from now: nothing
    assert backlog() == 0
    cli.run("topics", "reset-cursor", "orders", "-s", "s", code=2)  # -m or -t is required


def test_topic_stats_commands_as_pulsar_admin(cli: Cli) -> None:
    cli.run("topics", "create", "orders")
    cli.run("topics", "create-subscription", "orders", "-s", "billing", "-t", "Shared", "-m", "earliest")
    cli.produce("orders", "-m", "a", "-m", "b")
    stats = json.loads(cli.run("topics", "stats", "orders").stdout)
    sub = stats["subscriptions"]["billing"]
    assert (sub["type"], sub["msgBacklog"], sub["unackedMessages"], sub["consumers"]) == ("Shared", 2, 0, [])
    assert sub["backlogSize"] > 0 and stats["storageSize"] > 0
    assert stats["msgInCounter"] == 0  # counters start when a broker loads the topic: this run's broker
    stats = json.loads(cli.run("topics", "stats", "orders", "-sbs", "false", "-etb", "-gpb").stdout)
    assert stats["subscriptions"]["billing"]["backlogSize"] == -1
    assert stats["subscriptions"]["billing"]["earliestMsgPublishTimeInBacklog"] > 0
    table = cli.run("-o", "table", "topics", "stats", "orders").stdout
    for heading in ("publishers", "subscriptions", "billing", "Shared", "storage size"):
        assert heading in table, table

    cli.run("topics", "create-partitioned-topic", "parts", "-p", "2")
    cli.run("topics", "create-subscription", "parts", "-s", "s", "-m", "earliest")
    cli.produce("parts", "-m", "a", "-m", "b", "-m", "c")
    stats = json.loads(cli.run("topics", "partitioned-stats", "parts").stdout)
    assert stats["metadata"] == {"partitions": 2} and stats["partitions"] == {}
    assert stats["subscriptions"]["s"]["msgBacklog"] == 3
    stats = json.loads(cli.run("topics", "partitioned-stats", "parts", "--per-partition").stdout)
    assert set(stats["partitions"]) == {f"{P}-partition-0", f"{P}-partition-1"}
    assert json.loads(cli.run("topics", "stats", "parts").stdout)["metadata"] == {"partitions": 2}
    assert "partitions" in cli.run("-o", "table", "topics", "partitioned-stats", "parts", "--per-partition").stdout
    done = cli.run("topics", "partitioned-stats", "orders", code=6)  # 404
    assert "Partitioned Topic not found" in done.stderr
    cli.run("topics", "stats", "orders", "-sbs", "maybe", code=2)


def test_retention_out_of_range_is_refused(cli: Cli) -> None:
    # issue 23 item 10: 100000000 weeks is 1008000000000 minutes, more than a Java int
    cli.run("topics", "create", "orders")
    done = cli.run("namespaces", "set-retention", "public/default", "--time", "100000000w", "--size", "1G", code=3)
    assert "1008000000000" in done.stderr
    assert cli.run("namespaces", "get-retention", "public/default").stdout.strip() == "null"


def test_tenants_clusters_and_permissions_commands(cli: Cli, tmp_path: Path) -> None:
    """Issue 26 item 4: pulsar-admin's clusters, tenants and permission commands (and flags)."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"superUserRoles": ["admin"]}))
    root, boss = ("--auth-file", str(auth), "--role", "admin"), ("--auth-file", str(auth), "--role", "boss")
    cli.run("clusters", "create", "ci", "--url", "http://ci:8080", "--broker-url", "pulsar://ci:6650", global_args=root)
    got = json.loads(cli.run("clusters", "get", "ci", global_args=root).stdout)
    assert (got["serviceUrl"], got["brokerServiceUrl"], got["serviceUrlTls"]) == (
        "http://ci:8080",
        "pulsar://ci:6650",
        None,
    )
    assert json.loads(cli.run("clusters", "list").stdout) == ["ci", "standalone"]
    cli.run("tenants", "create", "acme", "--admin-roles", "boss", global_args=root)  # every cluster by default
    assert json.loads(cli.run("tenants", "get", "acme", global_args=boss).stdout) == {
        "adminRoles": ["boss"],
        "allowedClusters": ["ci", "standalone"],
    }
    assert cli.run("tenants", "create", "other", global_args=boss, code=5).stderr.startswith("Role 'boss' is not")
    assert (
        cli.run("tenants", "create", "acme", global_args=root, code=8).stderr.strip() == "Tenant already exists: acme"
    )
    cli.run("namespaces", "create", "acme/app", global_args=boss)
    cli.run(
        "namespaces", "grant-permission", "acme/app", "--role", "app", "--actions", "produce,consume", global_args=boss
    )
    cli.run(
        "topics", "grant-permission", "acme/app/orders", "--role", "reader", "--actions", "consume", global_args=boss
    )
    assert json.loads(cli.run("namespaces", "permissions", "acme/app", global_args=boss).stdout) == {
        "app": ["consume", "produce"]
    }
    assert json.loads(cli.run("topics", "permissions", "acme/app/orders", global_args=boss).stdout) == {
        "app": ["consume", "produce"],
        "reader": ["consume"],
    }
    cli.run("namespaces", "grant-permission", "acme/app", "--role", "x", "--actions", "fly", global_args=boss, code=3)
    cli.run("namespaces", "revoke-permission", "acme/app", "--role", "app", global_args=boss)
    cli.run("topics", "revoke-permission", "acme/app/orders", "--role", "reader", global_args=boss)
    cli.run("topics", "revoke-permission", "acme/app/orders", "--role", "reader", global_args=boss, code=9)
    assert json.loads(cli.run("topics", "permissions", "acme/app/orders", global_args=boss).stdout) == {}
    assert json.loads(cli.run("namespaces", "list", "acme", global_args=boss).stdout) == ["acme/app"]
    grant = ("namespaces", "grant-subscription-permission", "acme/app", "--subscription", "audit", "--roles", "a,b")
    cli.run(*grant, global_args=boss)
    assert json.loads(cli.run("namespaces", "subscription-permission", "acme/app", global_args=boss).stdout) == {
        "audit": ["a", "b"]
    }
    revoke = ("namespaces", "revoke-subscription-permission", "acme/app", "--subscription", "audit", "--role", "a")
    cli.run(*revoke, global_args=boss)
    cli.run(*revoke, global_args=boss, code=9)
    assert cli.run("tenants", "delete", "acme", global_args=root, code=8).stderr.strip() == (
        "The tenant still has active namespaces"
    )
    cli.run("clusters", "delete", "ci", global_args=root, code=9)  # acme allows it
    cli.run("namespaces", "delete", "acme/app", global_args=boss)
    cli.run("tenants", "delete", "acme", global_args=root)
    cli.run("clusters", "delete", "ci", global_args=root)
    cli.run("clusters", "delete", "ci", global_args=root, code=6)
    assert "acme" not in json.loads(cli.run("tenants", "list", global_args=root).stdout)
