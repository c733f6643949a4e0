"""``mledger watch``: every subscription's restart risk on a live Pulsar cluster, continuously.

See :class:`mledger.replay.Watch`. The command builds the same two clients as ``mledger capture``
(:func:`~mledger.cli._capture.open_clients`), models the cursors under ``--defaults`` (or the
settings the brokers report: :func:`cluster_settings`) and ``--set``, and either prints one round (``--once``, a table or
``--format json``) or polls every ``--interval`` until SIGTERM/SIGINT, serving the latest
round as Prometheus metrics on ``http://--metrics-bind/metrics`` and printing one JSON line per
round on stdout. Errors are one line on stderr (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .._pulsar_keys import MANAGED_LEDGER_KEYS, MAX_MESSAGE_SIZE_KEY
from ..core import ConfigError, MLedgerError, parse_bind
from ._capture import (
    add_cluster_arguments,
    open_clients,
    parse_count,
    parse_duration,
    poller_options,
    stop_on_signals,
    unreachable,
)

if TYPE_CHECKING:
    from ..replay import ReplaySettings

FORMATS = ("table", "json")


def add_watch_arguments(cmd: argparse.ArgumentParser) -> None:
    """The options of ``mledger watch``."""
    add_cluster_arguments(cmd, what="watch", readers_optional=True)
    cmd.add_argument("--interval", type=parse_duration, default=30.0, help="poll interval (default 30s)")
    cmd.add_argument(
        "--horizon",
        type=parse_duration,
        default=3600.0,
        help="a subscription whose state passes a limit within this time at its current growth is AT_RISK (default 1h)",
    )
    cmd.add_argument("--once", action="store_true", help="poll once, print the round and exit")
    cmd.add_argument("--format", choices=FORMATS, default="table", help="--once's output (default table)")
    cmd.add_argument(
        "--defaults",
        metavar="PRESET",
        help="the Pulsar version's settings the cursors are modelled with: pulsar-3.0, pulsar-4.0, pulsar-4.1, "
        "pulsar-newest, or none (mledger's own); without it they are read from the brokers (their version "
        "and runtime configuration: a super-user's role)",
    )
    cmd.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting on top of --defaults, as mledger replay takes it (e.g. max_unacked_ranges_to_persist=1000)",
    )
    cmd.add_argument(
        "--metrics-bind",
        default="127.0.0.1:9180",
        help="host:port of the /metrics endpoint while watching (default 127.0.0.1:9180; port 0: a free one)",
    )
    cmd.add_argument(
        "--report",
        metavar="DIR",
        help="after each round, write its subscriptions into DIR as the replay's cursors table (replaced "
        "atomically) for `mledger report DIR` to render",
    )
    cmd.add_argument(
        "--max-history",
        type=parse_count,
        default=120,
        help="samples kept per subscription for its growth; the oldest is dropped beyond it (default 120)",
    )


def run_watch(args: argparse.Namespace) -> int:
    """Run ``mledger watch``; 0 when it ended cleanly."""
    import pulsar  # the capture extra

    from ..replay import ReplaySettings, Watch, WatchSettings

    given = None if args.defaults is None else ReplaySettings().with_values({"defaults": args.defaults})

    def watch_settings(replay: ReplaySettings, namespaces: Mapping[str, ReplaySettings] | None = None) -> WatchSettings:
        return WatchSettings(
            **poller_options(args),
            replay=ReplaySettings.from_pairs(args.set, replay),
            namespace_replay={ns: ReplaySettings.from_pairs(args.set, s) for ns, s in (namespaces or {}).items()},
            interval_s=args.interval,
            horizon_s=args.horizon,
            max_history=args.max_history,
        )

    if not args.no_readers and not args.service_url:
        raise ConfigError("mledger watch needs --service-url for its readers, or --no-readers")
    settings = watch_settings(given or ReplaySettings())  # the options checked before anything connects
    with contextlib.ExitStack() as stack:
        client, admin = open_clients(args, stack)
        stop = stop_on_signals(stack)
        on_round = _printer(args) if args.once else _exporter(args, stack)

        async def main() -> None:
            admin_async = admin.asynchronous(settings.concurrency)
            try:
                if given is not None:
                    chosen = settings
                else:
                    base = await cluster_settings(admin_async)
                    scope = await namespaces_in_scope(admin_async, args)
                    chosen = watch_settings(base, await namespace_settings(admin_async, scope, base))
                watch = Watch(admin_async, client, chosen)
                if args.report is not None:
                    await watch.run(stop, _reporter(args.report, watch, chosen, on_round), once=args.once)
                else:
                    await watch.run(stop, on_round, once=args.once)
            finally:
                await admin_async.aclose()

        try:
            asyncio.run(main())
        except pulsar.PulsarException as exc:  # the first poll's readers: one line, naming the URL
            raise unreachable(args, exc) from None
    # the process ends next: its finalisation need not collect the models (0.3 s at 20 topics,
    # more at thousands, on a loaded machine), and SIGTERM must end the watch within a second
    gc.freeze()
    return 0


async def cluster_settings(admin: Any) -> ReplaySettings:
    """The replay settings of the cluster's brokers, read with ``admin`` (an asyncio admin
    client): the preset of the Pulsar release ``/admin/v2/brokers/version`` names, then the
    managed ledger's keys of ``/admin/v2/brokers/configuration/runtime`` on top (Pulsar's
    ``BrokersBase.getRuntimeConfiguration``: every value in force; a super-user's call). Raises
    ``ConfigError`` saying what could not be read and that ``--defaults`` is needed then."""
    from ..replay import PULSAR_DEFAULTS, ReplaySettings

    refused = _refused
    try:
        _, _, body = await admin.call("GET", "/admin/v2/brokers/version")
        runtime = await admin.get_json("/admin/v2/brokers/configuration/runtime")
    except MLedgerError as exc:
        raise refused("version and runtime configuration", exc) from None
    text = body.decode("utf-8", "replace").strip()
    version = json.loads(text) if text.startswith('"') else text
    preset = f"pulsar-{'.'.join(str(version).split('.')[:2])}"
    if preset not in PULSAR_DEFAULTS or preset == "pulsar-newest":
        raise refused("settings", f"no preset for Pulsar {version!r}")
    if not isinstance(runtime, dict):
        raise refused("runtime configuration", f"not an object: {runtime!r:.80}")
    settings = ReplaySettings().with_values({"defaults": preset})
    known = set(ReplaySettings.known_keys())
    values: dict[str, str] = {}
    for key in (*MANAGED_LEDGER_KEYS, MAX_MESSAGE_SIZE_KEY):
        raw = runtime.get(key.name)
        if raw is None or str(raw).strip() == "":
            continue
        try:
            value = key.read(str(raw).strip())
        except ValueError as exc:
            raise refused("runtime configuration", f"{key.name}={raw!r}: {exc}") from None
        for target in key.targets:
            name = target.partition(".")[2]
            if target.startswith(("ledger.", "factory.")) and name in known:
                values[name] = str(value)
    return settings.with_values(values)


def _refused(what: str, why: object) -> ConfigError:
    """The error of settings the cluster did not give: ``--defaults`` is needed."""
    from ..replay import PULSAR_DEFAULTS

    return ConfigError(
        f"cannot read the brokers' {what} ({why}): pass --defaults PRESET ({', '.join(PULSAR_DEFAULTS)}), "
        "and --set for the broker.conf values that differ from it"
    )


async def namespaces_in_scope(admin: Any, args: argparse.Namespace) -> list[str]:
    """The namespaces (``tenant/ns``) the watch's scope names now: ``--namespace``'s, the
    namespaces of ``--topic``'s, or with ``--all`` every namespace of every tenant."""
    from ..replay import namespace_of

    if args.namespace:
        return sorted({"/".join(p for p in ns.split("/") if p) for ns in args.namespace})
    if args.topic:
        return sorted({namespace_of(t) for t in args.topic})
    found: list[str] = []
    try:
        for tenant in await admin.get_json("/admin/v2/tenants"):
            found.extend(str(ns) for ns in await admin.get_json(f"/admin/v2/namespaces/{quote(str(tenant), safe='')}"))
    except MLedgerError as exc:
        raise _refused("namespaces", exc) from None
    return sorted(found)


async def namespace_settings(admin: Any, namespaces: Sequence[str], base: ReplaySettings) -> dict[str, ReplaySettings]:
    """The settings of each namespace whose persistence policies (``GET
    /admin/v2/namespaces/{tenant}/{ns}/persistence``) set a mark-delete rate: ``base`` with
    ``throttle_mark_delete`` at the policy's ``managedLedgerMaxMarkDeleteRate``, as Pulsar's
    ``BrokerService.getManagedLedgerConfig`` takes it. A namespace without policies keeps
    ``base`` (the broker's ``managedLedgerDefaultMarkDeleteRateLimit``); a refused call raises
    ``ConfigError`` asking for ``--defaults``. (A namespace created later keeps ``base``.)"""
    out: dict[str, ReplaySettings] = {}
    for namespace in namespaces:
        tenant, ns = namespace.split("/", 1)
        path = f"/admin/v2/namespaces/{quote(tenant, safe='')}/{quote(ns, safe='')}/persistence"
        try:
            _, _, body = await admin.call("GET", path)
        except MLedgerError as exc:
            raise _refused(f"persistence policies of {namespace}", exc) from None
        policies = json.loads(body) if body.strip() else None
        rate = policies.get("managedLedgerMaxMarkDeleteRate") if isinstance(policies, dict) else None
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            out[namespace] = base.with_values({"throttle_mark_delete": str(float(rate))})
    return out


def round_record(done: Any) -> dict[str, Any]:
    """A :class:`~mledger.replay.WatchRound` as the JSON object ``--format json`` prints."""
    return {
        "at_ms": done.at_ms,
        "unit": done.unit,
        "poll": dataclasses.asdict(done.poll),
        "anomalies": done.anomalies,
        "counts": done.counts(),
        "subscriptions": [dataclasses.asdict(row) for row in done.subscriptions],
    }


def _printer(args: argparse.Namespace) -> Any:
    def on_round(done: Any) -> None:
        if args.format == "json":
            print(json.dumps(round_record(done)), flush=True)
        else:
            _table(done)

    return on_round


def _exporter(args: argparse.Namespace, stack: contextlib.ExitStack) -> Any:
    """Serve /metrics at ``--metrics-bind`` and print one JSON line per round (its counts)."""
    from prometheus_client import CollectorRegistry

    from ..metrics import WatchCollector

    collector = WatchCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    host, port = parse_bind(args.metrics_bind, 9180, option="--metrics-bind")
    server, thread = _serve_metrics(registry, host, port)
    stack.callback(thread.join, 5)
    stack.callback(server.server_close)
    stack.callback(server.shutdown)
    print(json.dumps({"metrics": f"http://{host}:{server.server_port}/metrics"}), flush=True)

    def on_round(done: Any) -> None:
        collector.update(done)
        line = {"at_ms": done.at_ms, "unit": done.unit, "counts": done.counts(), "anomalies": done.anomalies,
                "poll_s": round(done.poll.wall_s, 3)}  # fmt: skip
        print(json.dumps(line), flush=True)

    return on_round


def _serve_metrics(registry: Any, host: str, port: int) -> tuple[Any, threading.Thread]:
    """``registry`` served (prometheus_client's WSGI app, one thread per scrape) on a thread
    whose loop looks for a shutdown every 50 ms: ``start_http_server``'s looks every 0.5 s, and
    SIGTERM must end the watch within a second."""
    import socket
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass  # a scrape is not news

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host, port, make_wsgi_app(registry), Server, handler_class=Quiet)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="mledger-watch-metrics", daemon=True
    )
    thread.start()
    return server, thread


def _reporter(directory: str, watch: Any, settings: Any, on_round: Any) -> Any:
    """``on_round``, then the round's cursors table written as ``DIR/cursors/part-0.parquet``
    (a temporary file renamed over it: a reader sees the last round or the one before, whole)
    and the settings beside it (``DIR/settings.json``, once): a replay output directory, which
    ``mledger report DIR`` renders."""
    import os
    from pathlib import Path

    import pyarrow.parquet as pq

    from ..replay import write_settings

    cursors = Path(directory) / "cursors"
    cursors.mkdir(parents=True, exist_ok=True)
    write_settings(directory, settings.replay, "watch")

    def on_report(done: Any) -> None:
        on_round(done)
        temp = cursors / ".part-0.parquet.tmp"
        pq.write_table(watch.cursors(), temp)
        os.replace(temp, cursors / "part-0.parquet")

    return on_report


def _table(done: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    title = f"mledger watch: {len(done.subscriptions)} subscriptions"
    if done.unit != "messages":
        title += f" (no readers: redeliveries counted in {done.unit}, batch-index acks unseen)"
    table = Table(title=title, title_justify="left")
    numbers = ("ranges", "state bytes", "crash redelivers", "unload redelivers")
    for column in ("topic", "subscription", "status", *numbers, "persist limit", "frame limit", "reason"):
        table.add_column(column, justify="right" if column in numbers else "left")
    for row in done.subscriptions:
        table.add_row(
            row.local_topic,
            row.subscription,
            row.status,
            str(row.unacked_ranges),
            str(row.state_bytes),
            str(row.redelivered_after_crash),
            str(row.redelivered_after_unload),
            _when(row.at_ms, row.persist_limit_at_ms),
            _when(row.at_ms, row.frame_limit_at_ms),
            row.reason,
        )
    Console(file=sys.stdout, width=200).print(table)


def _when(now_ms: int, at_ms: int | None) -> str:
    if at_ms is None:
        return "not growing"
    if at_ms <= now_ms:
        return "passed"
    return f"in {(at_ms - now_ms) / 1000:.0f} s"
