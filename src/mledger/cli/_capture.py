"""``mledger capture OUT``: capture a live Pulsar cluster as the replay's raw logs.

See :mod:`mledger.replay`. The command builds the two clients (one ``pulsar.Client``
for every reader, :class:`mledger.admin.RemoteAdmin` for the stats, with the same credentials
and the same ``--connect-timeout``; every admin call bounded by ``--admin-timeout`` in all and
``--max-response-size``, at most ``--concurrency`` in flight per broker), checks that the named topics exist, prints one JSON line once the
first poll is done (``{"capturing": [topic-partitions]}``), and stops after ``--duration`` or at
SIGTERM/SIGINT, after one last poll bounded by ``--stop-timeout``. Errors are one line on
stderr (exit 2): a topic that does not exist, a non-empty output directory without
``--append``, a cluster that cannot be reached (naming the URL).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import threading
from typing import Any

from ..core import MLedgerError

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """``30``, ``30s``, ``5m``, ``1h``, ``500ms`` as seconds (> 0); ``ArgumentTypeError`` otherwise."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: expected e.g. 30s, 5m, 1h")
    if float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must be above zero (e.g. 500ms, 30s, 5m)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_size(text: str) -> int:
    """pulsar-admin's size form (``16M``, ``4096``, ``1g``) as bytes (> 0); ``ArgumentTypeError`` otherwise."""
    from ._admin import _size_bytes  # imported when a size is parsed: the admin CLI is not small

    size = _size_bytes(text)
    if size <= 0:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: must be above 0")
    return size


def parse_count(text: str) -> int:
    """A count above zero; ``ArgumentTypeError`` otherwise."""
    from ._admin import _positive  # imported when a count is parsed: the admin CLI is not small

    return _positive(text)


def add_capture_arguments(cap: argparse.ArgumentParser) -> None:
    """The options of ``mledger capture``."""
    cap.add_argument("out", help="directory the raw logs and capture.json are written to")
    add_cluster_arguments(cap, what="capture")
    cap.add_argument("--duration", type=parse_duration, required=True, help="how long to capture (30s, 5m, 1h)")
    cap.add_argument("--interval", type=parse_duration, default=1.0, help="stats poll interval (default 1s)")
    cap.add_argument(
        "--hash-keys", action="store_true", help="replace message keys by a keyed hash (a random key per capture)"
    )
    cap.add_argument(
        "--append", action="store_true", help="capture into a directory holding a recording: add a session to it"
    )
    cap.add_argument(
        "--stop-timeout",
        type=parse_duration,
        default=30.0,
        help="the last poll after --duration or SIGTERM at most (default 30s)",
    )
    cap.add_argument(
        "--max-pending-events",
        type=parse_count,
        default=10_000,
        help="events held before they are written, at most (default 10000)",
    )


def add_cluster_arguments(cap: argparse.ArgumentParser, what: str, *, readers_optional: bool = False) -> None:
    """The options of a command that polls a cluster (``mledger capture``, ``mledger watch``):
    its URLs, the scope, credentials, timeouts, concurrency and memory bounds;
    ``readers_optional``: ``--no-readers`` too, with which ``--service-url`` is not needed."""
    cap.add_argument(
        "--service-url",
        required=not readers_optional,
        help="pulsar://host:6650 or pulsar+ssl://host:6651" + (" (not with --no-readers)" if readers_optional else ""),
    )
    if readers_optional:
        cap.add_argument(
            "--no-readers",
            action="store_true",
            help=f"{what} from the admin stats alone, reading no message: the figures are in entries, not "
            "messages, and batch-index acks are not seen",
        )
    cap.add_argument("--admin-url", required=True, help="http(s)://host:8080")
    scope = cap.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", help=f"a topic to {what} (repeatable; partitioned ones whole)")
    scope.add_argument(
        "--namespace",
        action="append",
        help="TENANT/NS: every persistent topic of it, listed again every --discovery-interval (repeatable)",
    )
    scope.add_argument("--all", action="store_true", help="every persistent topic of every namespace of every tenant")
    auth = cap.add_mutually_exclusive_group()
    auth.add_argument("--auth-token", help="a token for both the protocol and the admin calls")
    auth.add_argument(
        "--auth-params",
        help="Pulsar's auth params, JSON or k:v,k:v: userId and password (basic), or tlsCertFile and "
        "tlsKeyFile (TLS client certificate); for both the protocol and the admin calls",
    )
    cap.add_argument("--tls-trust-certs-file", help="CA certificates trusted for pulsar+ssl:// and https://")
    cap.add_argument(
        "--connect-timeout",
        type=parse_duration,
        default=10.0,
        help="connecting to the service and admin URLs, and each client operation, at most (default 10s)",
    )
    cap.add_argument(
        "--admin-timeout",
        type=parse_duration,
        default=30.0,
        help="one admin call at most, in all, however slowly the server answers (default 30s)",
    )
    cap.add_argument(
        "--discovery-interval",
        type=parse_duration,
        default=10.0,
        help="how often tenants, namespaces, topics and partitions are listed again (default 10s; the first "
        "and the last poll always list them)",
    )
    cap.add_argument(
        "--concurrency",
        type=parse_count,
        default=4,
        help="topic-partitions polled at once, and admin calls in flight per broker at most (default 4)",
    )
    cap.add_argument(
        "--max-ranges-per-subscription",
        type=parse_count,
        default=100_000,
        help="a subscription with more individually deleted ranges is not held (an anomaly) until it fits "
        "again (default 100000)",
    )
    cap.add_argument(
        "--reader-queue-size",
        type=parse_count,
        default=100,
        help="messages each topic-partition's reader holds ahead, at most (default 100)",
    )
    cap.add_argument(
        "--max-response-size",
        type=parse_size,
        default=16 << 20,
        help="the largest admin answer read, e.g. 16M (default); a larger one is an anomaly",
    )


def parse_auth_params(text: str) -> dict[str, str]:
    """Pulsar's ``--auth-params``: a JSON object or ``key:value,key:value``, naming either
    ``userId``/``password`` or ``tlsCertFile``/``tlsKeyFile``. ``ValueError`` otherwise."""
    try:
        params = json.loads(text)
    except ValueError:
        params = dict(item.split(":", 1) for item in text.split(",") if ":" in item)
    if not isinstance(params, dict) or not (
        {"userId", "password"} <= params.keys() or {"tlsCertFile", "tlsKeyFile"} <= params.keys()
    ):
        raise ValueError(f"invalid --auth-params {text!r}: expected userId and password, or tlsCertFile and tlsKeyFile")
    return {str(k): str(v) for k, v in params.items()}


class ServiceUnreachableError(MLedgerError):
    """The Pulsar service URL could not be read from (connect, lookup, subscribe)."""


def run_capture(args: argparse.Namespace) -> int:
    """Run ``mledger capture``; 0 when the capture ended cleanly."""
    import pulsar  # the capture extra

    from ..replay import Capture, CaptureSettings

    settings = CaptureSettings(
        **poller_options(args),
        max_pending_events=args.max_pending_events,
        interval_s=args.interval,
        hash_keys=args.hash_keys,
        description={"service_url": args.service_url, "admin_url": args.admin_url},
        append=args.append,
        stop_timeout_s=args.stop_timeout,
    )
    with contextlib.ExitStack() as stack:
        client, admin = open_clients(args, stack)
        stop = stop_on_signals(stack)
        capture = Capture(args.out, client, admin, settings)
        try:
            capture.run(args.duration, stop, lambda topics: print(json.dumps({"capturing": topics}), flush=True))
        except pulsar.PulsarException as exc:  # the first poll's readers: one line, naming the URL
            raise unreachable(args, exc) from None
    return 0


def poller_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~mledger.replay.PollerSettings` fields of the cluster options."""
    return {
        "topics": tuple(args.topic or ()),
        "namespaces": tuple(args.namespace or ()),
        "all_namespaces": args.all,
        "discovery_interval_s": args.discovery_interval,
        "concurrency": args.concurrency,
        "max_ranges_per_subscription": args.max_ranges_per_subscription,
        "reader_queue_size": args.reader_queue_size,
        "readers": not getattr(args, "no_readers", False),
    }


def unreachable(args: argparse.Namespace, exc: Exception) -> ServiceUnreachableError:
    """The one-line error of a first poll whose readers could not read (naming the URL)."""
    return ServiceUnreachableError(
        f"cannot read from the Pulsar service at {args.service_url} "
        f"(within --connect-timeout {args.connect_timeout:g} s): {type(exc).__name__}: {exc}"
    )


def stop_on_signals(stack: contextlib.ExitStack) -> threading.Event:
    """An event that SIGTERM and SIGINT set instead of ending the process; the handlers before
    are back when ``stack`` closes."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        stack.callback(signal.signal, sig, signal.signal(sig, lambda *_: stop.set()))
    return stop


def open_clients(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[Any, Any]:
    """The ``pulsar.Client`` (None with ``--no-readers``) and :class:`mledger.admin.RemoteAdmin`
    of the cluster options (:func:`add_cluster_arguments`), closed by ``stack``: the same credentials for both,
    ``--connect-timeout``, every admin call bounded by ``--admin-timeout`` and
    ``--max-response-size``, at most ``--concurrency`` in flight per broker."""
    import pulsar  # the capture extra

    from ..admin import RemoteAdmin

    # the C++ client logs to stdout by default, and stdout carries the JSON line; a native file
    # logger on stderr (a Python logger's callbacks can run during interpreter shutdown: abort)
    client_options: dict[str, Any] = {
        "logger": pulsar.FileLogger(pulsar.LoggerLevel.Warn, "/dev/stderr"),
        "connection_timeout_ms": max(int(args.connect_timeout * 1000), 1),
        "operation_timeout_seconds": max(int(args.connect_timeout + 0.999), 1),  # whole seconds, rounded up
    }
    if args.auth_token:
        client_options["authentication"] = pulsar.AuthenticationToken(args.auth_token)
    admin_auth: dict[str, Any] = {"token": args.auth_token}
    if args.auth_params:
        params = parse_auth_params(args.auth_params)
        if "userId" in params:
            client_options["authentication"] = pulsar.AuthenticationBasic(params["userId"], params["password"])
            admin_auth["basic"] = (params["userId"], params["password"])
        else:
            client_options["authentication"] = pulsar.AuthenticationTLS(params["tlsCertFile"], params["tlsKeyFile"])
            admin_auth["cert"] = (params["tlsCertFile"], params["tlsKeyFile"])
    if args.tls_trust_certs_file:
        client_options["tls_trust_certs_file_path"] = args.tls_trust_certs_file
    admin = stack.enter_context(
        RemoteAdmin(
            args.admin_url,
            max_connections=args.concurrency,
            verify=args.tls_trust_certs_file or True,
            timeout=args.admin_timeout,
            connect_timeout=args.connect_timeout,
            deadline=args.admin_timeout,
            max_response_bytes=args.max_response_size,
            **admin_auth,
        )
    )
    if getattr(args, "no_readers", False):
        return None, admin
    client = pulsar.Client(args.service_url, **client_options)
    stack.callback(client.close)
    return client, admin
