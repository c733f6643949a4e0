"""``mledger-admin``: pulsar-admin's ``topics``, ``namespaces``, ``tenants`` and ``clusters`` commands
over a local data directory.

Every command opens the directory's SQLite store, a managed-ledger factory and a broker, calls
one :class:`~mledger.admin.Admin` method (the CLI holds no admin logic of its own), prints the
result on stdout, and closes everything, so the state it changed is on disk when it exits.

Exit status (``EXIT_CODES``): 0 success; 2 bad command line (argparse); for an admin error, the
error's reason on stderr and a code per HTTP status: 3 = 400 invalid request, 4 = 401 not
authenticated, 5 = 403 permission denied, 6 = 404 not found, 7 = 405 not allowed,
8 = 409 conflict, 9 = 412 precondition failed, 10 = 413 entry too large, 1 = anything else
(500, or an unusable data directory). ``cancel-delayed-message`` prints its per-subscription
results and exits with 9 when a subscription refused (a cumulative-ack type), as the REST
endpoint answers 412 "Failed to cancel delayed message".

``--admin-url http://host:port`` (pulsar-admin's flag; ``--url`` is an alias) runs the same
commands against ``mledger-admin serve`` (see :mod:`mledger.admin`: same output and exit
codes; ``produce``/``consume`` need a data directory). ``serve`` runs that server
(:mod:`mledger.rest`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..admin import (
    LOCAL_ONLY_COMMANDS,
    RemoteAdmin,
    ResetCursorData,
    add_authentication_arguments,
    backlog_quotas_json,
    by_verb,
)
from ..broker import (
    BacklogQuota,
    BacklogQuotaType,
    BacklogRetentionPolicy,
    InactiveTopicDeleteMode,
    InactiveTopicPolicies,
    RetentionPolicies,
)
from ..core import EARLIEST, LATEST, MLedgerError, NotAllowedError, Position, PreconditionFailedError
from . import _admin_tables as _tables

if TYPE_CHECKING:
    from ..admin import Admin

__all__ = ["EXIT_CODES", "build_parser", "main"]

EXIT_CODES: dict[int, int] = {400: 3, 401: 4, 403: 5, 404: 6, 405: 7, 409: 8, 412: 9, 413: 10}
"""HTTP status of an admin error -> exit status; any other status exits with 1."""

EXIT_USAGE = 2
EXIT_OTHER = 1
DATA_DIR_ENV = "MLEDGER_DATA_DIR"
DEFAULT_BIND = "127.0.0.1:8080"
TOKEN_ENV = "MLEDGER_ADMIN_TOKEN"

_EPILOG = """exit status: 0 ok, 2 bad command line, 3 = HTTP 400 invalid request,
4 = 401 not authenticated, 5 = 403 permission denied, 6 = 404 not found,
7 = 405 not allowed, 8 = 409 conflict, 9 = 412 precondition failed (also:
cancel-delayed-message refused by a subscription), 10 = 413 entry too large,
1 = any other error. Errors print their reason on stderr."""

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")

_Handler: TypeAlias = Callable[["Admin", argparse.Namespace], Any]
_Command: TypeAlias = "_Handler | _Run"
"""A command's handler, or the admin call it is (bound to the table's operation when it runs)."""


# -- argument types ------------------------------------------------------------------------------


def _triplet(text: str) -> tuple[int, int, int | None]:
    """``ledgerId:entryId[:batchIndex]``; a negative batch index means the whole entry."""
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid message id triplet {text!r}: expected ledgerId:entryId[:batchIndex]"
        ) from None
    batch = values[2] if len(values) == 3 and values[2] >= 0 else None
    return values[0], values[1], batch


def _position(text: str) -> Position:
    """``ledgerId:entryId``, ``earliest`` or ``latest``."""
    lowered = text.strip().lower()
    if lowered == "earliest":
        return EARLIEST
    if lowered == "latest":
        return LATEST
    try:
        return _message_position(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"invalid position {text!r}: expected ledgerId:entryId, earliest or latest"
        ) from None


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


_TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
_SIZE_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _with_unit(text: str, units: dict[str, int], unit_of: Callable[[str], str], problem: str) -> int:
    """A whole number followed by an optional unit of ``units`` (``unit_of`` reads the last
    character as one), times the unit; -1 stays -1. ``problem`` names the argument."""
    value = text.strip()
    unit = units.get(unit_of(value[-1:])) if value else None
    try:
        amount = int(value[:-1] if unit is not None else value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {problem.format(text=repr(text))}") from None
    return amount if amount == -1 else amount * (unit or 1)


def _relative_seconds(text: str) -> int:
    """pulsar-admin's relative time (``RelativeTimeUtil``): a number with an optional unit s, m,
    h, d, w or y (seconds without one); -1 stays -1."""
    problem = "time {text}: a number with an optional unit s, m, h, d, w or y (100m, 3h, 2d)"
    return _with_unit(text, _TIME_UNITS, str, problem)


def _size_bytes(text: str) -> int:
    """pulsar-admin's size (``validateSizeString``): bytes with an optional unit k, m, g or t
    (either case); -1 stays -1."""
    return _with_unit(
        text, _SIZE_UNITS, str.lower, "size {text}: a number with an optional unit k, m, g or t (4096, 10M, 16G)"
    )


def _retention_policies(args: argparse.Namespace) -> RetentionPolicies:
    """``--time`` / ``--size`` as pulsar-admin's set-retention turns them into a policy."""
    minutes = args.time if args.time == -1 else args.time // 60
    size_mb = args.size if args.size == -1 else args.size // (1 << 20)
    return RetentionPolicies(minutes, size_mb)


def _backlog_quota(args: argparse.Namespace) -> BacklogQuota:
    """``--limit`` / ``--limitTime`` / ``--policy`` as pulsar-admin's set-backlog-quota builds the
    quota: the size limit for ``destination_storage``, the time limit for ``message_age``."""
    if args.quota_type == BacklogQuotaType.DESTINATION_STORAGE.value:
        return BacklogQuota(policy=args.policy, limit_size=args.limit)
    return BacklogQuota(limit_time=args.limit_time, policy=args.policy)


def _check_backlog_quota(args: argparse.Namespace) -> str | None:
    if args.quota_type == BacklogQuotaType.DESTINATION_STORAGE.value and args.limit is None:
        return "Quota type of 'destination_storage' needs a size limit"
    if args.quota_type == BacklogQuotaType.MESSAGE_AGE.value and args.limit_time is None:
        return "Quota type of 'message_age' needs a time limit"
    return None


def _inactive_topic_policies(args: argparse.Namespace) -> InactiveTopicPolicies:
    return InactiveTopicPolicies(args.delete_mode, args.max_inactive, args.enable)


def _check_inactive_topic_policies(args: argparse.Namespace) -> str | None:
    if args.enable == args.disable:
        return "Need to specify either enable-delete-while-inactive or disable-delete-while-inactive"
    return None


def _message_position(text: str) -> Position:
    """``ledgerId:entryId`` (pulsar-admin's ``validateMessageIdString``)."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        return Position(int(parts[0]), int(parts[1]))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid message id {text!r}: expected ledgerId:entryId") from None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise argparse.ArgumentTypeError(f"invalid value {text!r}: true or false")


def _subscription_type(text: str) -> str:
    for name in SUBSCRIPTION_TYPES:
        if name.lower() == text.strip().lower().replace("-", "_"):
            return name
    raise argparse.ArgumentTypeError(f"invalid subscription type {text!r}: one of {', '.join(SUBSCRIPTION_TYPES)}")


def _initial_position(text: str) -> str:
    lowered = text.strip().lower()
    if lowered not in ("earliest", "latest"):
        raise argparse.ArgumentTypeError(f"invalid subscription position {text!r}: Earliest or Latest")
    return lowered


# -- the parser ----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: global options, ``topics`` and its commands."""
    parser = _Parser(
        prog="mledger-admin",
        description="Administer mledger topics and subscriptions in a data directory (like pulsar-admin).",
        epilog=_EPILOG,
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_ENV),
        help=f"the data directory (a SQLite store); default ${DATA_DIR_ENV}",
    )
    parser.add_argument("--role", default=None, help="the caller's role (used when authorization is on)")
    parser.add_argument(
        "--auth-file",
        default=None,
        help='turn authorization on with this JSON file: {"superUserRoles": [...], '
        '"permissions": {role: {topic or "*": [operations]}}}',
    )
    parser.add_argument(
        "--admin-url",
        "--url",
        dest="admin_url",
        default=None,
        help="run the command against the REST server (mledger-admin serve) at this URL, http://host:port",
    )
    parser.add_argument(
        "--token", default=os.environ.get(TOKEN_ENV), help=f"bearer token for --admin-url; default ${TOKEN_ENV}"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("json", "table"),
        default="json",
        help="how stats, partitioned-stats, stats-internal, cancel-delayed-message, produce and consume print "
        "their results: "
        "json (default, as pulsar-admin; for scripts) or table (for people)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=60.0,
        help="with --admin-url: seconds to wait for connecting and for each read or write (default 60)",
    )
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    _add_serve_command(groups)
    command = _command_group(
        groups,
        "topics",
        "operations on topics and subscriptions",
        "Operations on topics.",
        ("topic", "topic name: persistent://tenant/namespace/topic, or a short name"),
    )

    def subscription_arg(sub: argparse.ArgumentParser, flag: str = "--subscription") -> None:
        sub.add_argument("-s", flag, dest="subscription", required=True, help="subscription name")

    sub = command(
        "grant-permission", "Grant actions on the topic to a role.", _run("topic", "permission_role", "actions")
    )
    _permission_args(sub)
    sub = command("revoke-permission", "Revoke a role's actions on the topic.", _run("topic", "permission_role"))
    _role_arg(sub)
    command("permissions", "The roles' actions on the topic (its namespace's too).", _run("topic"))

    sub = command(
        "list", "List the topics (partitioned topics by their name).", _run("namespace", show=_print_lines), None
    )
    sub.add_argument("namespace", nargs="?", default=None, help="tenant/namespace (default: all)")

    sub = command("list-partitioned-topics", "List the partitioned topics.", _run("namespace", show=_print_lines), None)
    sub.add_argument("namespace", nargs="?", default=None, help="tenant/namespace (default: all)")

    sub = command("create", "Create a non-partitioned topic.", _run("topic"))

    sub = command(
        "delete", "Delete a topic (every partition of a partitioned one) and its data.", _run("topic", "force")
    )
    sub.add_argument("-f", "--force", action="store_true", help="even with connected producers or consumers")

    sub = command("create-partitioned-topic", "Create a partitioned topic.", _run("topic", "partitions"))
    sub.add_argument("-p", "--partitions", type=_positive, required=True, help="number of partitions")

    sub = command("subscriptions", "List the subscriptions of a topic.", _run("topic", show=_print_lines))

    sub = command(
        "create-subscription",
        "Create a durable subscription.",
        _run("topic", "subscription", "position", "subscription_type"),
    )
    subscription_arg(sub)
    sub.add_argument(
        "-m",
        "--messageId",
        dest="position",
        type=_position,
        default=LATEST,
        help="where it starts: latest (default), earliest or ledgerId:entryId",
    )
    sub.add_argument(
        "-t",
        "--subscription-type",
        dest="subscription_type",
        type=_subscription_type,
        default=None,
        help="Exclusive, Shared, Failover or Key_Shared (default: the broker's default)",
    )

    sub = command("unsubscribe", "Delete a subscription.", _run("topic", "subscription"))
    subscription_arg(sub)

    def stats_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "-gpb",
            "--get-precise-backlog",
            dest="get_precise_backlog",
            action="store_true",
            help="accepted: mledger's backlog is always precise",
        )
        sub.add_argument(
            "-sbs",
            "--get-subscription-backlog-size",
            dest="subscription_backlog_size",
            type=_bool,
            nargs="?",
            const=True,
            default=True,
            metavar="true|false",
            help="each subscription's backlogSize (default true; false: -1)",
        )
        sub.add_argument(
            "-etb",
            "--get-earliest-time-in-backlog",
            dest="get_earliest_time_in_backlog",
            action="store_true",
            help="the publish time of each backlog's first message",
        )

    sub = command(
        "stats",
        "Stats of a topic (JSON, as pulsar-admin): rates, counters, publishers, subscriptions, consumers; "
        "a partitioned topic's as partitioned-stats.",
        _cmd_stats,
    )
    stats_options(sub)

    sub = command(
        "partitioned-stats",
        "Stats of a partitioned topic (JSON): its partitions' added up, and with --per-partition each one's.",
        _cmd_partitioned_stats,
    )
    sub.add_argument("--per-partition", dest="per_partition", action="store_true", help="each partition's stats too")
    stats_options(sub)

    sub = command(
        "stats-internal", "Internal stats of a topic (JSON); partitioned topics per partition.", _cmd_stats_internal
    )

    sub = command(
        "partitioned-stats-internal",
        "Internal stats of every partition of a partitioned topic (JSON).",
        _cmd_partitioned_stats_internal,
    )

    sub = command("reset-cursor", "Reset a subscription's cursor to a position, or back in time.", _cmd_reset_cursor)
    subscription_arg(sub)
    where = sub.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "-m",
        "--messageId",
        dest="position",
        type=_position,
        default=None,
        help="ledgerId:entryId, earliest or latest",
    )
    where.add_argument(
        "-t",
        "--time",
        dest="time",
        type=_relative_seconds,
        default=None,
        help="reset to the first message published this long ago or later (100m, 3h, 2d, 5w; seconds "
        "without a unit), as pulsar-admin's --time",
    )

    _applied(
        command(
            "get-retention",
            "The topic's retention policy (null when unset).",
            _run("topic", "applied", show=_print_to_json_or_null),
        )
    )

    sub = command("set-retention", "Set the topic's retention policy.", _run("topic", _retention_policies))
    _retention_args(sub)

    sub = command("remove-retention", "Remove the topic's retention policy.", _run("topic"))

    sub = command("compact", "Compact the topic in the background.", _cmd_compact)

    sub = command("compaction-status", "The status of the topic's last compaction.", _cmd_compaction_status)
    sub.add_argument("-w", "--wait-complete", action="store_true", help="wait for a running compaction to end")

    _applied(
        command(
            "get-compaction-threshold", "The topic's compaction threshold (null when unset).", _run("topic", "applied")
        ),
        "threshold",
    )

    sub = command("set-compaction-threshold", "Set the topic's compaction threshold.", _run("topic", "threshold"))
    _threshold_arg(sub)

    sub = command("remove-compaction-threshold", "Remove the topic's compaction threshold.", _run("topic"))

    sub = command("terminate", "Terminate a topic: no more messages; prints its last message id.", _cmd_terminate)

    sub = command(
        "partitioned-terminate",
        "Terminate every partition of a partitioned topic; prints each one's last message id.",
        _cmd_partitioned_terminate,
    )

    sub = command(
        "unload",
        "Unload a topic (every partition of a partitioned one): its clients reconnect, the next lookup loads it.",
        _run("topic"),
    )

    _applied(
        command(
            "get-schema-compatibility-strategy",
            "The topic's schema compatibility strategy (null when unset).",
            _run("topic", "applied", show=_print_strategy),
        ),
        "strategy",
    )

    sub = command(
        "set-schema-compatibility-strategy", "Set the topic's schema compatibility strategy.", _run("topic", "strategy")
    )
    sub.add_argument("-s", "--strategy", required=True, help=_STRATEGY_HELP)

    sub = command(
        "remove-schema-compatibility-strategy",
        "Remove the topic's schema compatibility strategy.",
        _run("topic"),
    )

    _add_time_policy_commands(command, "topic")

    sub = command(
        "expire-messages",
        "Expire a subscription's messages older than a time (--expireTime), or up to a message (--position).",
        _cmd_expire_messages,
    )
    sub.set_defaults(check=_check_expire_messages)
    subscription_arg(sub)
    sub.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time",
        type=_relative_seconds,
        default=None,
        help="expire messages older than this (100m, 3h, 2d, 5w; seconds without a unit)",
    )
    sub.add_argument("-p", "--position", dest="position", type=_message_position, default=None, help="ledgerId:entryId")
    sub.add_argument(
        "-e",
        "--exclude-reset-position",
        dest="excluded",
        action="store_true",
        help="the message after --position is the last one expired",
    )

    sub = command(
        "expire-messages-all-subscriptions",
        "Expire the messages older than a time on every subscription.",
        _run("topic", "expire_time_seconds"),
    )
    sub.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time_seconds",
        type=_relative_seconds,
        required=True,
        help="expire messages older than this (100m, 3h, 2d, 5w; seconds without a unit)",
    )

    sub = command("skip", "Skip the next N messages of a subscription.", _run("topic", "subscription", "count"))
    subscription_arg(sub)
    sub.add_argument("-n", "--count", type=_non_negative, required=True, help="number of messages to skip")

    sub = command("clear-backlog", "Skip every message of a subscription's backlog.", _run("topic", "subscription"))
    subscription_arg(sub)

    sub = command("skip-messages", "Skip messages of a subscription by their ids (PIP-423).", _cmd_skip_messages)
    sub.set_defaults(check=_check_skip_messages)
    subscription_arg(sub)
    sub.add_argument(
        "--messageId-triplet",
        dest="triplets",
        action="append",
        type=_triplet,
        default=[],
        metavar="L:E[:B]",
        help="ledgerId:entryId[:batchIndex] (repeatable)",
    )
    sub.add_argument(
        "--messageId-base64",
        dest="base64_ids",
        action="append",
        default=[],
        metavar="BASE64",
        help="a base64-encoded MessageId (repeatable)",
    )

    sub = command("cancel-delayed-message", "Cancel a delayed message on subscriptions (PIP-423).", _cmd_cancel_delayed)
    sub.add_argument("-l", "--ledgerId", dest="ledger_id", type=int, required=True, help="ledger id of the message")
    sub.add_argument("-e", "--entryId", dest="entry_id", type=int, required=True, help="entry id of the message")
    sub.add_argument(
        "-s",
        "--subscriptionNames",
        dest="subscription_names",
        type=_names,
        default=None,
        help="comma-separated subscription names (default: every subscription)",
    )

    sub = command("produce", "Publish messages (for trying things out).", _cmd_produce)
    sub.add_argument(
        "-m", "--messages", dest="messages", action="append", required=True, help="a message payload (repeatable)"
    )
    sub.add_argument(
        "-n",
        "--num-produce",
        dest="count",
        type=_positive,
        default=1,
        help="send the messages this many times (default 1)",
    )
    sub.add_argument("-k", "--key", default=None, help="message key")
    sub.add_argument(
        "--deliver-after-ms",
        dest="deliver_after_ms",
        type=_non_negative,
        default=None,
        help="deliver the messages this many ms from now (delayed delivery)",
    )
    sub.add_argument("--batch", action="store_true", help="send each round of messages as one batched entry")

    sub = command("consume", "Receive and acknowledge what is deliverable now (for trying things out).", _cmd_consume)
    subscription_arg(sub)
    sub.add_argument(
        "-t",
        "--subscription-type",
        dest="subscription_type",
        type=_subscription_type,
        default="Exclusive",
        help="Exclusive (default), Shared, Failover or Key_Shared",
    )
    sub.add_argument(
        "-n",
        "--num-messages",
        dest="count",
        type=_non_negative,
        default=1,
        help="at most this many messages (0: all that are deliverable; default 1)",
    )
    sub.add_argument(
        "-p",
        "--subscription-position",
        dest="initial_position",
        type=_initial_position,
        default="latest",
        help="where a new subscription starts: Latest (default) or Earliest",
    )
    _add_namespaces_group(groups)
    _add_tenants_group(groups)
    _add_clusters_group(groups)
    _add_faults_group(groups)
    _add_clock_group(groups)
    return parser


def _retention_args(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-t",
        "--time",
        type=_relative_seconds,
        required=True,
        help="retention time with an optional unit s, m, h, d, w or y (100m, 3h, 2d, 5w; seconds without "
        "one); 0 keeps nothing consumed, -1 is unlimited",
    )
    sub.add_argument(
        "-s",
        "--size",
        type=_size_bytes,
        required=True,
        help="retention size with an optional unit k, m, g or t (4096, 10M, 16G; bytes without one); 0 or "
        "less than 1M keeps nothing consumed, -1 is unlimited",
    )


def _threshold_arg(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-t",
        "--threshold",
        type=_size_bytes,
        required=True,
        help="bytes not compacted yet that trigger a compaction, with an optional unit k, m, g or t (10M, 1G); "
        "0 turns automatic compaction off",
    )


_STRATEGY_HELP = (
    "ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, "
    "FORWARD_TRANSITIVE, FULL_TRANSITIVE (UNDEFINED: not set here)"
)


def _command_group(
    groups: Any, name: str, help_text: str, description: str, positional: tuple[str, str] | None = None
) -> Callable[..., argparse.ArgumentParser]:
    """The GROUP ``name``: returns ``command(verb, help, handler)``, which adds a COMMAND of it
    (taking the ``positional`` argument ``(dest, help)`` first, unless told otherwise) and returns
    its parser."""
    group = groups.add_parser(name, help=help_text, description=description, epilog=_EPILOG)
    commands = group.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        verb: str,
        help_text: str,
        handler: _Command,
        positional: tuple[str, str] | None = positional,
        described: bool = True,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(verb, help=help_text, description=help_text if described else None, epilog=_EPILOG)
        sub.set_defaults(handler=handler, command_parser=sub)
        if positional is not None:
            sub.add_argument(positional[0], help=positional[1])
        return sub

    return command


def _add_namespaces_group(groups: Any) -> None:
    command = _command_group(
        groups,
        "namespaces",
        "namespaces and their policies (retention, compaction threshold, schemas)",
        "Namespaces and their policies.",
        ("namespace", "tenant/namespace"),
    )
    command("create", "Create a namespace (topics go in namespaces that exist).", _run("namespace"))
    command("list", "List the tenant's namespaces.", _run("tenant"), ("tenant", "tenant"), described=False)
    sub = command("delete", "Delete a namespace (409 while it has topics, unless --force).", _run("namespace", "force"))
    sub.add_argument("-f", "--force", action="store_true", help="delete its topics too")
    _permission_args(
        command(
            "grant-permission",
            "Grant actions on the namespace to a role.",
            _run("namespace", "permission_role", "actions"),
        )
    )
    _role_arg(
        command("revoke-permission", "Revoke a role's actions on the namespace.", _run("namespace", "permission_role"))
    )
    command("permissions", "The roles' actions on the namespace.", _run("namespace"))
    command("policies", "The namespace's policies (Pulsar's Policies JSON, as stored).", _run("namespace"))
    sub = command(
        "grant-subscription-permission",
        "Let only these roles consume through a subscription.",
        _run("namespace", "subscription", "roles"),
    )
    sub.add_argument("--subscription", required=True, help="subscription name")
    sub.add_argument("--roles", type=_names, required=True, help="comma-separated client roles")
    sub = command(
        "revoke-subscription-permission",
        "Remove a role from a subscription's roles.",
        _run("namespace", "subscription", "permission_role"),
    )
    sub.add_argument("--subscription", required=True, help="subscription name")
    _role_arg(sub)
    command("subscription-permission", "The roles of each restricted subscription.", _run("namespace"))
    command(
        "get-retention",
        "The namespace's retention policy (null when unset).",
        _run("namespace", show=_print_to_json_or_null),
    )
    _retention_args(
        command("set-retention", "Set the namespace's retention policy.", _run("namespace", _retention_policies))
    )
    command("remove-retention", "Remove the namespace's retention policy.", _run("namespace"))
    command("get-compaction-threshold", "The namespace's compaction threshold (null when unset).", _run("namespace"))
    _threshold_arg(
        command("set-compaction-threshold", "Set the namespace's compaction threshold.", _run("namespace", "threshold"))
    )
    command("remove-compaction-threshold", "Remove the namespace's compaction threshold.", _run("namespace"))
    command(
        "get-schema-compatibility-strategy",
        "The schema compatibility strategy of the namespace's topics.",
        _run("namespace", show=_print_strategy),
    )
    sub = command(
        "set-schema-compatibility-strategy",
        "Set the schema compatibility strategy of the namespace's topics.",
        _run("namespace", "compatibility"),
    )
    sub.add_argument("-c", "--compatibility", required=True, help=_STRATEGY_HELP)
    command(
        "get-is-allow-auto-update-schema",
        "Whether producers may register new schema versions.",
        _run("namespace"),
    )
    sub = command(
        "set-is-allow-auto-update-schema",
        "Allow (--enable) or forbid (--disable) new schema versions.",
        _run("namespace", "allowed"),
    )
    switch = sub.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", "-e", dest="allowed", action="store_true", help="allow")
    switch.add_argument("--disable", "-d", dest="allowed", action="store_false", help="forbid")
    _add_time_policy_commands(command, "namespace")


_QUOTA_POLICIES = tuple(p.value for p in BacklogRetentionPolicy)
_QUOTA_TYPES = tuple(t.value for t in BacklogQuotaType)
_DELETE_MODES = tuple(m.value for m in InactiveTopicDeleteMode)


def _applied(sub: argparse.ArgumentParser, what: str = "policy", *short: str) -> argparse.ArgumentParser:
    """``sub``, a topic's getter, with pulsar-admin's ``--applied`` flag (and the ``short`` ones):
    ``what`` is the setting it reads, in the flag's help."""
    sub.add_argument(
        *short,
        "--applied",
        action="store_true",
        help=f"the {what} in force: the topic's, else the namespace's, else the broker's",
    )
    return sub


def _add_time_policy_commands(command: Callable[..., argparse.ArgumentParser], scope: str) -> None:
    """The message TTL, backlog quota and inactive-topic commands of ``topics`` or ``namespaces``
    (``scope``: the group's positional argument), with pulsar-admin's flags."""
    whose = f"the {scope}'s"

    def applied(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return _applied(sub, "policy", "-ap") if scope == "topic" else sub

    def reading(show: Callable[[Any], None] | None = None) -> _Run:
        return _run(scope, *(["applied"] if scope == "topic" else []), show=show)

    applied(
        command("get-message-ttl", f"The message TTL of {whose} messages, in seconds (null when unset).", reading())
    )
    sub = command("set-message-ttl", f"Set the message TTL of {whose} messages.", _run(scope, "seconds"))
    flags = ("-t", "--ttl") if scope == "topic" else ("-ttl", "--messageTTL")
    sub.add_argument(
        *flags,
        dest="seconds",
        type=_relative_seconds,
        required=True,
        help="the TTL (100m, 3h, 2d, 5w; seconds without a unit); 0: messages never expire",
    )
    command("remove-message-ttl", f"Remove {whose} message TTL.", _run(scope))

    applied(command("get-backlog-quotas", f"{whose.capitalize()} backlog quotas by type.", reading(show=_print_quotas)))
    sub = command(
        "set-backlog-quota",
        f"Set a backlog quota of {whose} topics: by size (destination_storage) or by age (message_age).",
        _run(scope, _backlog_quota, "quota_type"),
    )
    sub.set_defaults(check=_check_backlog_quota)
    sub.add_argument(
        "-l", "--limit", type=_size_bytes, default=None, help="size limit (10M, 16G; bytes without a unit)"
    )
    sub.add_argument(
        "-lt",
        "--limitTime",
        dest="limit_time",
        type=_relative_seconds,
        default=None,
        help="time limit (100m, 3h, 2d, 5w; seconds without a unit); non-positive disables it",
    )
    sub.add_argument(
        "-p", "--policy", choices=_QUOTA_POLICIES, required=True, help="what happens once the limit is reached"
    )
    _quota_type_arg(sub, "the quota's type")
    _quota_type_arg(
        command("remove-backlog-quota", f"Remove a backlog quota of {whose}.", _run(scope, "quota_type")),
        "the type of the quota to remove",
    )

    applied(
        command(
            "get-inactive-topic-policies",
            f"{whose.capitalize()} inactive-topic policy (null when unset).",
            reading(show=_print_to_json_or_null),
        )
    )
    sub = command(
        "set-inactive-topic-policies",
        f"Set {whose} inactive-topic policy.",
        _run(scope, _inactive_topic_policies),
    )
    sub.set_defaults(check=_check_inactive_topic_policies)
    sub.add_argument("-e", "--enable-delete-while-inactive", dest="enable", action="store_true", help="delete them")
    sub.add_argument("-d", "--disable-delete-while-inactive", dest="disable", action="store_true", help="keep them")
    sub.add_argument(
        "-t",
        "--max-inactive-duration",
        dest="max_inactive",
        type=_relative_seconds,
        required=True,
        help="how long a topic may be inactive (1s, 10s, 1m, 5h, 3d; seconds without a unit)",
    )
    sub.add_argument("-m", "--delete-mode", dest="delete_mode", choices=_DELETE_MODES, required=True)
    command("remove-inactive-topic-policies", f"Remove {whose} inactive-topic policy.", _run(scope))


def _quota_type_arg(sub: argparse.ArgumentParser, help_text: str) -> None:
    sub.add_argument(
        "-t",
        "--type",
        dest="quota_type",
        choices=_QUOTA_TYPES,
        default=BacklogQuotaType.DESTINATION_STORAGE.value,
        help=f"{help_text}: destination_storage (default) or message_age",
    )


def _role_arg(sub: argparse.ArgumentParser) -> None:
    # its own dest: the global --role is the caller's role
    sub.add_argument("--role", dest="permission_role", required=True, help="the client role the permission is for")


def _permission_args(sub: argparse.ArgumentParser) -> None:
    _role_arg(sub)
    sub.add_argument(
        "--actions",
        type=_names,
        required=True,
        help="comma-separated actions: produce, consume (also functions, sources, sinks, packages)",
    )


def _add_clusters_group(groups: Any) -> None:
    command = _command_group(
        groups, "clusters", "clusters and their service URLs", "Clusters.", ("cluster", "cluster name")
    )

    def url_args(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--url", dest="service_url", help="serviceUrl: the admin (HTTP) URL")
        sub.add_argument("--url-secure", dest="service_url_tls", help="serviceUrlTls")
        sub.add_argument("--broker-url", dest="broker_url", help="brokerServiceUrl: pulsar://host:port")
        sub.add_argument("--broker-url-secure", dest="broker_url_tls", help="brokerServiceUrlTls")

    command("list", "List the clusters.", _run(), None)
    command("get", "The cluster's data (service URLs).", _run("cluster"))
    url_args(command("create", "Create a cluster.", _run("cluster", _cluster_data)))
    url_args(command("update", "Replace a cluster's data.", _run("cluster", _cluster_data)))
    command("delete", "Delete a cluster (412 while a tenant allows it).", _run("cluster"))


def _add_tenants_group(groups: Any) -> None:
    command = _command_group(
        groups, "tenants", "tenants, their admin roles and clusters", "Tenants.", ("tenant", "tenant name")
    )

    def info_args(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("-r", "--admin-roles", type=_names, default=[], help="comma-separated admin roles")
        sub.add_argument(
            "-c", "--allowed-clusters", type=_names, default=[], help="comma-separated clusters (default: all)"
        )

    command("list", "List the tenants.", _run(), None)
    command("get", "The tenant's admin roles and allowed clusters.", _run("tenant", show=_print_to_json))
    info_args(command("create", "Create a tenant.", _cmd_tenants_create))
    info_args(command("update", "Replace a tenant's admin roles and clusters.", _cmd_tenants_update))
    command("delete", "Delete a tenant (409 while it has namespaces).", _run("tenant"))


def _add_faults_group(groups: Any) -> None:
    command = _command_group(
        groups,
        "faults",
        "inject faults into a running broker (mledger extension; needs --admin-url)",
        "Arm, list and clear faults on a broker started with fault injection (mledger standalone "
        "--fault-injection): superusers only under authorization. Needs --admin-url.",
    )
    sub = command("arm", "Arm one fault; prints its id.", _run(_fault_argument), ("fault", "the fault as JSON"))
    sub.epilog = (
        'e.g. mledger-admin faults arm \'{"action": "error", "command": "PRODUCER", "error": "TopicNotFound"}\''
    )
    command(
        "load",
        "Arm a scenario file's faults (YAML or JSON); prints their ids.",
        _run(_scenario_argument),
        ("file", "the scenario file"),
    )
    command("list", "The faults armed now.", _run(show=_print_faults))
    command("fired", "The faults that fired, oldest first.", _run(show=_print_faults))
    command("stats", "The seed, the faults armed, the firings by action.", _run(show=_print_fault_stats))
    sub = command("remove", "Disarm one fault.", _run("fault_id"), None)
    sub.add_argument("fault_id", type=_positive, help="the fault's id")
    command("clear", "Disarm every fault, end a pause, heal half-open connections.", _run())
    command("resume", "End a pause.", _run())


def _add_clock_group(groups: Any) -> None:
    command = _command_group(
        groups,
        "clock",
        "read or advance a running broker's manual clock (mledger extension; needs --admin-url)",
        "The broker's time, and advancing its manual clock (mledger standalone --deterministic), which "
        "fires the broker's timers due on the way: superusers only under authorization. Needs --admin-url.",
    )
    command("now", "The broker's time (ms) and whether its clock is manual.", _run(show=_print_clock))
    sub = command(
        "advance",
        "Advance the manual clock by MS milliseconds; prints the time reached.",
        _run("ms", show=_print_clock),
    )
    sub.add_argument("ms", type=_positive, metavar="MS", help="milliseconds, > 0")


def _print_clock(reading: Any) -> None:
    _print_json(reading.as_dict())


def _fault_argument(args: argparse.Namespace) -> Any:
    from ..broker import parse_fault

    try:
        fault = json.loads(args.fault)
    except ValueError as exc:
        args.command_parser.error(f"the fault is not JSON: {exc}")
    return parse_fault(fault)


def _scenario_argument(args: argparse.Namespace) -> Any:
    from ..broker import load_scenario

    return load_scenario(args.file)


def _print_faults(faults: Sequence[Any]) -> None:
    _print_json([f.as_dict() for f in faults])


def _print_fault_stats(stats: Any) -> None:
    _print_json(
        {"seed": stats.seed, "armed": stats.armed, "fired": stats.fired, "firedByAction": stats.fired_by_action}
    )


def _add_serve_command(groups: Any) -> argparse.ArgumentParser:
    sub = groups.add_parser(
        "serve",
        help="serve the admin REST API (Pulsar's paths), /metrics and /docs over HTTP",
        description="Serve Pulsar's admin REST API for a data directory, Prometheus /metrics, the OpenAPI "
        "document at /openapi.json and interactive docs at /docs (they work offline). Needs the server "
        "extra: pip install 'mledger[server]'.",
    )
    # SUPPRESS: given before `serve` (global options) or after it, either works
    sub.add_argument("--data-dir", default=argparse.SUPPRESS, help=f"the data directory; default ${DATA_DIR_ENV}")
    sub.add_argument(
        "--bind", default=DEFAULT_BIND, help=f"host:port to listen on (default {DEFAULT_BIND}; port 0: any free port)"
    )
    sub.add_argument(
        "--auth-file",
        default=argparse.SUPPRESS,
        help="turn authorization on with this JSON file (as for the other commands)",
    )
    sub.add_argument(
        "--token-file",
        default=None,
        help='JSON {"<token>": "<role>"}: roles of "Authorization: Bearer <token>" callers (needs --auth-file)',
    )
    add_authentication_arguments(sub)
    sub.add_argument(
        "--trust-role-header",
        action="store_true",
        help="take the role from the X-Mledger-Role header, behind an authenticating proxy (needs --auth-file)",
    )
    sub.add_argument(
        "--authenticate-metrics-endpoint",
        action="store_true",
        help="/metrics answers only callers with a role (Pulsar's authenticateMetricsEndpoint; needs credentials)",
    )
    sub.add_argument(
        "--authenticate-docs-endpoint",
        action="store_true",
        help="/docs, /redoc and /openapi.json answer only callers with a role (mledger extension; needs credentials)",
    )
    sub.add_argument("--cluster", default="standalone", help="cluster name for v1 paths and metrics (standalone)")
    sub.add_argument("--max-concurrency", type=_positive, default=16, help="admin calls run at once (16)")
    sub.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stderr log level (INFO: one line per request)",
    )
    sub.set_defaults(run=_run_serve)
    return sub


def _run_serve(args: argparse.Namespace) -> int:
    try:
        from ..rest import run_serve  # the server extra: FastAPI and uvicorn
    except ImportError as e:
        print(f"mledger-admin serve: {e}", file=sys.stderr)
        return EXIT_OTHER
    return run_serve(args)


# -- commands ------------------------------------------------------------------------------------


Argument = str | Callable[[argparse.Namespace], Any]


@dataclass(frozen=True)
class _Run:
    """A command that is one admin call: the operation the table (:mod:`mledger.admin`)
    names for the command's group and pulsar-admin verb, called with ``arguments`` (each the
    name of a parsed argument, or a function of them); a result (a 200 operation) printed by
    ``show`` (default JSON)."""

    arguments: tuple[Argument, ...]
    show: Callable[[Any], None] | None = None

    def bind(self, group: str, verb: str) -> _Handler:
        """The handler of ``group verb``; ``KeyError`` when the table has no one operation for it."""
        op = by_verb(group, verb)  # type: ignore[arg-type]
        if op.call is None:
            raise KeyError(f"{group} {verb} has no admin call")
        call, show = op.call, (self.show or _print_json) if op.status == 200 else None

        def handler(admin: Admin, args: argparse.Namespace) -> None:
            values = [getattr(args, a) if isinstance(a, str) else a(args) for a in self.arguments]
            result = getattr(getattr(admin, group), call)(*values)
            if show is not None:
                show(result)

        return handler


def _run(*arguments: Argument, show: Callable[[Any], None] | None = None) -> _Run:
    return _Run(arguments, show)


def _print_to_json(value: Any) -> None:
    _print_json(value.to_json())


def _print_strategy(strategy: Any) -> None:
    _print_json(None if strategy is None else strategy.value)


def _print_json(value: Any) -> None:
    if hasattr(value, "to_json"):
        print(value.to_json())
    else:
        print(json.dumps(value, indent=2))


def _print_lines(values: Sequence[str]) -> None:
    for value in values:
        print(value)


def _stats_kwargs(args: argparse.Namespace) -> dict[str, bool]:
    return {
        "get_precise_backlog": args.get_precise_backlog,
        "subscription_backlog_size": args.subscription_backlog_size,
        "get_earliest_time_in_backlog": args.get_earliest_time_in_backlog,
    }


def _show(args: argparse.Namespace, stats: Any, table: Callable[[Any, str], None]) -> None:
    """``stats`` of ``args.topic`` as ``table`` prints them (``--output table``), else as JSON."""
    if args.output == "table":
        table(stats, args.topic)
    else:
        _print_json(stats)


def _cmd_stats(admin: Admin, args: argparse.Namespace) -> None:
    stats: Any
    try:
        stats = admin.topics.stats(args.topic, **_stats_kwargs(args))
    except NotAllowedError:  # a partitioned topic: its partitioned stats (needs GET_STATS only)
        stats = admin.topics.partitioned_stats(args.topic, per_partition=False, **_stats_kwargs(args))
    _show(args, stats, _tables.print_topic_stats)


def _cmd_partitioned_stats(admin: Admin, args: argparse.Namespace) -> None:
    stats = admin.topics.partitioned_stats(args.topic, per_partition=args.per_partition, **_stats_kwargs(args))
    _show(args, stats, _tables.print_topic_stats)


def _cmd_stats_internal(admin: Admin, args: argparse.Namespace) -> None:
    try:
        stats: Any = admin.topics.internal_stats(args.topic)
    except NotAllowedError:  # a partitioned topic: show every partition (needs GET_STATS only)
        stats = admin.topics.partitioned_internal_stats(args.topic)
    _show(args, stats, _tables.print_stats)


def _cmd_partitioned_stats_internal(admin: Admin, args: argparse.Namespace) -> None:
    stats = admin.topics.partitioned_internal_stats(args.topic)
    _show(args, stats, _tables.print_stats)


def _cmd_reset_cursor(admin: Admin, args: argparse.Namespace) -> None:
    if args.time is not None:  # pulsar-admin: now - time, to the first message published from then
        timestamp = int(time.time() * 1000) - args.time * 1000
        admin.topics.reset_cursor_by_time(args.topic, args.subscription, timestamp)
    else:
        admin.topics.reset_cursor(args.topic, args.subscription, args.position)


def _check_expire_messages(args: argparse.Namespace) -> str | None:
    if args.expire_time is not None and args.position is not None:
        return "Can't expire message by time and by message position at the same time."
    if args.expire_time is None and args.position is None:
        return "Either time (--expireTime) or message position (--position) has to be provided to expire messages"
    return None


def _cmd_expire_messages(admin: Admin, args: argparse.Namespace) -> None:
    if args.expire_time is not None:
        admin.topics.expire_messages(args.topic, args.subscription, args.expire_time)
        return
    position = ResetCursorData(
        ledger_id=args.position.ledger_id, entry_id=args.position.entry_id, is_excluded=args.excluded
    )
    admin.topics.expire_messages_by_position(args.topic, args.subscription, position)


def _print_quotas(quotas: dict[BacklogQuotaType, BacklogQuota]) -> None:
    _print_json(backlog_quotas_json(quotas))


def _print_to_json_or_null(value: Any) -> None:
    _print_json(None if value is None else value.to_json())


def _cluster_data(args: argparse.Namespace) -> dict[str, object]:
    fields = {
        "serviceUrl": args.service_url,
        "serviceUrlTls": args.service_url_tls,
        "brokerServiceUrl": args.broker_url,
        "brokerServiceUrlTls": args.broker_url_tls,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _tenant_info(admin: Admin, args: argparse.Namespace) -> dict[str, object]:
    # pulsar-admin: without --allowed-clusters, every cluster
    clusters = args.allowed_clusters or admin.clusters.list()
    return {"adminRoles": args.admin_roles, "allowedClusters": clusters}


def _cmd_tenants_create(admin: Admin, args: argparse.Namespace) -> None:
    admin.tenants.create(args.tenant, _tenant_info(admin, args))


def _cmd_tenants_update(admin: Admin, args: argparse.Namespace) -> None:
    admin.tenants.update(args.tenant, _tenant_info(admin, args))


def _terminated_at_json(mid: Any) -> dict[str, int]:
    """A last message id as the REST API answers it (Pulsar's ``MessageIdImpl``)."""
    return {"ledgerId": mid.ledger_id, "entryId": mid.entry_id, "partitionIndex": mid.partition}


def _cmd_terminate(admin: Admin, args: argparse.Namespace) -> None:
    mid = admin.topics.terminate(args.topic)
    print(f"Topic {args.topic} successfully terminated at {mid.ledger_id}:{mid.entry_id}")


def _cmd_partitioned_terminate(admin: Admin, args: argparse.Namespace) -> None:
    ids = admin.topics.terminate_partitioned(args.topic)
    _print_json({str(index): _terminated_at_json(mid) for index, mid in sorted(ids.items())})


def _cmd_compact(admin: Admin, args: argparse.Namespace) -> None:
    if isinstance(admin, RemoteAdmin):
        admin.topics.trigger_compaction(args.topic)
    else:  # over a data directory the process ends with the command: let the compaction end first
        admin.topics.trigger_compaction(args.topic, wait=True)
    print(f"Topic compaction requested for {args.topic}")


def _cmd_compaction_status(admin: Admin, args: argparse.Namespace) -> None:
    """pulsar-admin's texts; an ERROR status fails the command with the broker's last error."""
    status = admin.topics.compaction_status(args.topic)
    while args.wait_complete and status.status.value == "RUNNING":
        time.sleep(1)  # pulsar-admin polls once a second too
        status = admin.topics.compaction_status(args.topic)
    state = status.status.value
    if state == "NOT_RUN":
        print(f"Compaction has not been run for {args.topic} since broker startup")
    elif state == "RUNNING":
        print("Compaction is currently running")
    elif state == "SUCCESS":
        print("Compaction was a success")
    else:
        print("Error in compaction")
        raise PreconditionFailedError(f"Error compacting: {status.last_error}")


def _check_skip_messages(args: argparse.Namespace) -> str | None:
    if not args.triplets and not args.base64_ids:
        return "at least one --messageId-triplet or --messageId-base64 is required"
    return None


def _cmd_skip_messages(admin: Admin, args: argparse.Namespace) -> None:
    from ..admin import SkipMessageIdsRequest

    request = SkipMessageIdsRequest.of(args.triplets).merged(SkipMessageIdsRequest.from_base64(args.base64_ids))
    admin.topics.skip_messages(args.topic, args.subscription, request)


def _cmd_cancel_delayed(admin: Admin, args: argparse.Namespace) -> None:
    result = admin.topics.cancel_delayed_message(
        args.topic, args.ledger_id, args.entry_id, subscription_names=args.subscription_names
    )
    if args.output == "table":
        _tables.print_cancel_result(result)
    else:
        _print_json(result)
    if result.refusal is not None:
        raise PreconditionFailedError(result.refusal)


def _cmd_produce(admin: Admin, args: argparse.Namespace) -> None:
    ids = admin.messaging.produce(
        args.topic,
        [m.encode() for m in args.messages],
        key=args.key,
        deliver_after_ms=args.deliver_after_ms,
        rounds=args.count,
        batch=args.batch,
    )
    rows = [_message_id_json(mid) for mid in ids]
    if args.output == "table":
        _tables.print_messages(rows, ("messageId", "base64"))
        return
    for row in rows:
        print(json.dumps(row))


def _cmd_consume(admin: Admin, args: argparse.Namespace) -> None:
    messages = admin.messaging.consume(
        args.topic,
        args.subscription,
        subscription_type=args.subscription_type,
        max_messages=args.count,
        initial_position=args.initial_position,
    )
    rows = [_message_json(message) for message in messages]
    if args.output == "table":
        _tables.print_messages(rows, ("messageId", "key", "data", "dataBase64", "redeliveryCount"))
        return
    for row in rows:
        print(json.dumps(row))


def _message_id_json(mid: Any) -> dict[str, Any]:
    return {
        "messageId": f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}"
        + (f":{mid.batch_index}" if mid.batch_index >= 0 else ""),
        "ledgerId": mid.ledger_id,
        "entryId": mid.entry_id,
        "partition": mid.partition,
        "batchIndex": mid.batch_index,
        "base64": mid.to_base64(),
    }


def _message_json(message: Any) -> dict[str, Any]:
    data: bytes = message.data
    try:
        text: dict[str, Any] = {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        text = {"dataBase64": base64.b64encode(data).decode("ascii")}
    out = _message_id_json(message.message_id)
    out.update(text)
    out["key"] = message.key
    out["publishTimeMs"] = message.publish_time_ms
    out["deliverAtMs"] = message.deliver_at_ms
    out["redeliveryCount"] = message.redelivery_count
    return out


# -- running -------------------------------------------------------------------------------------


def _handler(args: argparse.Namespace) -> Callable[..., Any]:
    """The parsed command's handler (a :class:`_Run` bound to its group and verb)."""
    handler = args.handler
    return handler.bind(args.group, args.command) if isinstance(handler, _Run) else handler


def exit_code(error: MLedgerError) -> int:
    """The exit status for an admin error (see ``EXIT_CODES``)."""
    return EXIT_CODES.get(error.http_status, EXIT_OTHER)


_RUNNING_BROKER_GROUPS = {
    "faults": "faults are armed on a running broker (mledger standalone --fault-injection)",
    "clock": "the clock is a running broker's (mledger standalone --deterministic)",
}
"""The groups that act on a running broker only, and why."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.group == "serve":
        return int(args.run(args))
    if args.group in _RUNNING_BROKER_GROUPS and not args.admin_url:
        parser.error(f"{args.group} needs --admin-url: {_RUNNING_BROKER_GROUPS[args.group]}")
    if args.admin_url:
        if args.command in LOCAL_ONLY_COMMANDS:
            parser.error(f"{args.command} needs --data-dir: the admin REST API has no {args.command}")
        if args.auth_file:
            parser.error("--auth-file applies to a data directory; the server at --admin-url has its own")
    elif not args.data_dir:
        parser.error(f"--data-dir is required (or set ${DATA_DIR_ENV}), or give --admin-url")
    problem = args.check(args) if getattr(args, "check", None) else None
    if problem:
        args.command_parser.error(problem)  # exits with 2, before the data directory is opened
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        with _open_remote_admin(args) if args.admin_url else _open_admin(args) as admin:
            _handler(args)(admin, args)
    except MLedgerError as e:
        print(str(e) or type(e).__name__, file=sys.stderr)
        return exit_code(e)
    except (OSError, sqlite3.Error) as e:  # the data directory itself (permissions, disk)
        print(f"{args.admin_url or args.data_dir}: {e}", file=sys.stderr)
        return EXIT_OTHER
    sys.stdout.flush()
    return 0


@contextlib.contextmanager
def _open_remote_admin(args: argparse.Namespace) -> Iterator[RemoteAdmin]:
    """A :class:`~mledger.admin.RemoteAdmin` for ``--admin-url``, closed on the way out."""
    with RemoteAdmin(args.admin_url, token=args.token, role=args.role, timeout=args.timeout) as admin:
        yield admin


@contextlib.contextmanager
def _open_admin(args: argparse.Namespace) -> Iterator[Admin]:
    """Store, factory, broker (:func:`~mledger.broker.open_broker`) and admin over ``--data-dir``;
    all closed on the way out, so everything the command changed is persisted when it returns."""
    from ..admin import Admin, Authorization
    from ..broker import open_broker

    authorization = Authorization.from_json(args.auth_file) if args.auth_file else None
    with open_broker(args.data_dir) as opened:
        yield Admin(opened.broker, authorization=authorization, role=args.role)


if __name__ == "__main__":
    sys.exit(main())
