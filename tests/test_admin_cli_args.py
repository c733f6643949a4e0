"""mledger-admin's command line: parsing, usage errors and --help (no broker needed)."""

from __future__ import annotations

import argparse

import pytest

from mledger import (
    EARLIEST,
    LATEST,
    InvalidRequestError,
    MLedgerError,
    NotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    Position,
    PreconditionFailedError,
    UnauthenticatedError,
)
from mledger.cli._admin import EXIT_CODES, build_parser, exit_code, main

COMMANDS = [
    "list",
    "list-partitioned-topics",
    "create",
    "delete",
    "unsubscribe",
    "create-partitioned-topic",
    "subscriptions",
    "create-subscription",
    "stats-internal",
    "partitioned-stats-internal",
    "reset-cursor",
    "skip",
    "clear-backlog",
    "skip-messages",
    "cancel-delayed-message",
    "produce",
    "consume",
]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--data-dir", "/tmp/x", *argv])


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_cancel_delayed_message_flags() -> None:
    args = parse("topics", "cancel-delayed-message", "t", "-l", "12345", "-e", "100", "-s", "a,b")
    assert (args.topic, args.ledger_id, args.entry_id, args.subscription_names) == ("t", 12345, 100, ["a", "b"])
    args = parse("topics", "cancel-delayed-message", "t", "--ledgerId", "-1", "--entryId", "2")
    assert (args.ledger_id, args.entry_id, args.subscription_names) == (-1, 2, None)
    args = parse("topics", "cancel-delayed-message", "t", "-l", "1", "-e", "2", "--subscriptionNames", " a , ,b")
    assert args.subscription_names == ["a", "b"]


def test_skip_messages_flags() -> None:
    args = parse(
        "topics", "skip-messages", "persistent://public/default/t", "-s", "sub",
        "--messageId-triplet", "12345:100", "--messageId-triplet", "12345:101:3",
        "--messageId-base64", "CLlgEAQwAA==", "--messageId-triplet", "1:2:-1",
    )
    assert args.subscription == "sub"
    assert args.triplets == [(12345, 100, None), (12345, 101, 3), (1, 2, None)]
    assert args.base64_ids == ["CLlgEAQwAA=="]
    args = parse("topics", "skip-messages", "t", "--subscription", "s")
    assert args.triplets == [] and args.base64_ids == []


@pytest.mark.parametrize("triplet", ["1", "1:2:3:4", "a:b", "1:x", "", "1::2"])
def test_bad_triplets_are_usage_errors(capsys: pytest.CaptureFixture[str], triplet: str) -> None:
    err = usage_error(capsys, "topics", "skip-messages", "t", "-s", "s", "--messageId-triplet", triplet)
    assert "invalid message id triplet" in err


def test_reset_cursor_positions() -> None:
    assert parse("topics", "reset-cursor", "t", "-s", "s", "-m", "3:4").position == Position(3, 4)
    assert parse("topics", "reset-cursor", "t", "-s", "s", "-m", "earliest").position == EARLIEST
    assert parse("topics", "reset-cursor", "t", "-s", "s", "--messageId", "Latest").position == LATEST


@pytest.mark.parametrize("position", ["3", "3:4:5", "x:y", "first"])
def test_bad_positions(capsys: pytest.CaptureFixture[str], position: str) -> None:
    assert "invalid position" in usage_error(capsys, "topics", "reset-cursor", "t", "-s", "s", "-m", position)


def test_other_commands() -> None:
    assert parse("topics", "skip", "t", "-s", "s", "-n", "5").count == 5
    assert parse("topics", "clear-backlog", "t", "-s", "s").subscription == "s"
    assert parse("topics", "create-partitioned-topic", "t", "-p", "3").partitions == 3
    assert parse("topics", "list").namespace is None
    assert parse("topics", "list-partitioned-topics", "a/b").namespace == "a/b"
    assert parse("topics", "delete", "t", "-f").force is True
    assert parse("topics", "delete", "t").force is False
    assert parse("topics", "unsubscribe", "t", "-s", "x").subscription == "x"
    assert parse("topics", "list", "public/default").namespace == "public/default"
    args = parse("topics", "create-subscription", "t", "-s", "s", "-m", "earliest", "-t", "shared")
    assert (args.position, args.subscription_type) == (EARLIEST, "Shared")
    assert parse("topics", "create-subscription", "t", "-s", "s").position == LATEST
    args = parse("topics", "produce", "t", "-m", "a", "-m", "b", "-n", "2", "--deliver-after-ms", "500", "-k", "k")
    assert (args.messages, args.count, args.deliver_after_ms, args.key, args.batch) == (["a", "b"], 2, 500, "k", False)
    args = parse("topics", "consume", "t", "-s", "s", "-t", "Key_Shared", "-n", "0", "-p", "Earliest")
    assert (args.subscription_type, args.count, args.initial_position) == ("Key_Shared", 0, "earliest")
    args = parse("topics", "consume", "t", "-s", "s")
    assert (args.subscription_type, args.count, args.initial_position) == ("Exclusive", 1, "latest")


@pytest.mark.parametrize(
    "argv",
    [
        ("topics", "skip", "t", "-s", "s", "-n", "-1"),
        ("topics", "skip", "t", "-s", "s"),
        ("topics", "skip", "t", "-n", "1"),
        ("topics", "create-partitioned-topic", "t", "-p", "0"),
        ("topics", "cancel-delayed-message", "t", "-l", "1"),
        ("topics", "cancel-delayed-message", "t", "-l", "x", "-e", "1"),
        ("topics", "consume", "t", "-s", "s", "-t", "Broadcast"),
        ("topics", "consume", "t", "-s", "s", "-p", "middle"),
        ("topics", "produce", "t"),
        ("topics", "nope"),
        ("topics",),
        ("namespaces", "list"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    usage_error(capsys, *argv)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_everywhere(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["topics", command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"mledger-admin topics {command}" in out
    assert "exit status" in out


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["topics", "--help"]):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args(argv)
        assert info.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


def test_data_dir_is_required(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLEDGER_DATA_DIR", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["topics", "list"])
    assert info.value.code == 2
    assert "--data-dir is required" in capsys.readouterr().err


def test_exit_codes_follow_http_status() -> None:
    cases = {
        InvalidRequestError: 3,
        UnauthenticatedError: 4,
        PermissionDeniedError: 5,
        NotFoundError: 6,
        NotAllowedError: 7,
        PreconditionFailedError: 9,
        MLedgerError: 1,
    }
    for cls, code in cases.items():
        assert exit_code(cls("x")) == code
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    assert 0 not in EXIT_CODES.values() and 1 not in EXIT_CODES.values() and 2 not in EXIT_CODES.values()
