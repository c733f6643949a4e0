"""``mledger capture OUT``: capture a live Pulsar cluster as the replay's raw logs.

See :mod:`mledger.replay._capture`. The command builds the two clients (``pulsar.Client`` for
the readers, :class:`mledger.admin.RemoteAdmin` for the stats, with the same credentials),
prints one JSON line once the first poll is done (``{"capturing": [topic-partitions]}``),
and stops after ``--duration`` or at SIGTERM/SIGINT, after one last poll.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
from typing import Any

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


def add_capture_arguments(cap: argparse.ArgumentParser) -> None:
    """The options of ``mledger capture``."""
    cap.add_argument("out", help="directory the raw logs and capture.json are written to")
    cap.add_argument("--service-url", required=True, help="pulsar://host:6650 or pulsar+ssl://host:6651")
    cap.add_argument("--admin-url", required=True, help="http(s)://host:8080")
    what = cap.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic", action="append", help="a topic to capture (repeatable; partitioned ones whole)")
    what.add_argument("--namespace", help="TENANT/NS: every persistent topic of it, listed again at every poll")
    cap.add_argument("--duration", type=parse_duration, required=True, help="how long to capture (30s, 5m, 1h)")
    cap.add_argument("--interval", type=parse_duration, default=1.0, help="stats poll interval (default 1s)")
    auth = cap.add_mutually_exclusive_group()
    auth.add_argument("--auth-token", help="a token for both the protocol and the admin calls")
    auth.add_argument(
        "--auth-params",
        help="Pulsar's auth params, JSON or k:v,k:v: userId and password (basic), or tlsCertFile and "
        "tlsKeyFile (TLS client certificate); for both the protocol and the admin calls",
    )
    cap.add_argument("--tls-trust-certs-file", help="CA certificates trusted for pulsar+ssl:// and https://")
    cap.add_argument(
        "--hash-keys", action="store_true", help="replace message keys by a keyed hash (a random key per capture)"
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


def run_capture(args: argparse.Namespace) -> int:
    """Run ``mledger capture``; 0 when the capture ended cleanly."""
    import pulsar  # the capture extra

    from ..admin import RemoteAdmin
    from ..replay._capture import Capture, CaptureSettings

    settings = CaptureSettings(
        topics=tuple(args.topic or ()),
        namespace=args.namespace,
        interval_s=args.interval,
        hash_keys=args.hash_keys,
        description={"service_url": args.service_url, "admin_url": args.admin_url},
    )
    # the C++ client logs to stdout by default, and stdout carries the JSON line; a native file
    # logger on stderr (a Python logger's callbacks can run during interpreter shutdown: abort)
    client_options: dict[str, Any] = {"logger": pulsar.FileLogger(pulsar.LoggerLevel.Warn, "/dev/stderr")}
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
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    client = pulsar.Client(args.service_url, **client_options)
    admin = RemoteAdmin(args.admin_url, verify=args.tls_trust_certs_file or True, **admin_auth)
    try:
        capture = Capture(args.out, client, admin, settings)
        try:
            capture.poll()
            print(json.dumps({"capturing": capture.list_captured()}), flush=True)
            capture.run(args.duration, stop)
        finally:
            capture.close()
    finally:
        admin.close()
        client.close()
    return 0
