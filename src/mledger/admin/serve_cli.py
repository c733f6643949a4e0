"""``mledger-admin serve``: the command line of the admin REST server (:mod:`mledger.admin.server`).

::

    mledger-admin serve --data-dir DIR [--bind 127.0.0.1:8080] [--auth-file AUTH.json]
                        [--token-file TOKENS.json] [--trust-role-header] [--cluster standalone]

Prints ``mledger-admin: serving http://HOST:PORT ...`` on stdout once listening (``--bind
host:0`` picks a free port; read it from that line), logs one line per request on stderr, and
exits 0 after SIGINT/SIGTERM once requests in flight finished and the data directory is closed.
Exit 1 when the directory cannot be opened (held by another process, permissions) or the
address cannot be bound, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from typing import Any

from ..errors import MLedgerError
from .server import DEFAULT_BIND, AdminHttpServer, parse_bind, serve

__all__ = ["add_serve_command", "run_serve"]

DATA_DIR_ENV = "MLEDGER_DATA_DIR"


def add_serve_command(groups: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to the ``mledger-admin`` sub-command group ``groups``."""
    sub = groups.add_parser(
        "serve",
        help="serve the admin REST API (Pulsar's paths) and /metrics over HTTP",
        description="Serve Pulsar's admin REST API for a data directory, and Prometheus /metrics.",
    )
    # SUPPRESS: given before `serve` (global options) or after it, either works
    sub.add_argument("--data-dir", default=argparse.SUPPRESS, help=f"the data directory; default ${DATA_DIR_ENV}")
    sub.add_argument("--bind", default=DEFAULT_BIND,
                     help=f"host:port to listen on (default {DEFAULT_BIND}; port 0: any free port)")
    sub.add_argument("--auth-file", default=argparse.SUPPRESS,
                     help="turn authorization on with this JSON file (as for the other commands)")
    sub.add_argument("--token-file", default=None,
                     help='JSON {"<token>": "<role>"}: roles of "Authorization: Bearer <token>" callers')
    sub.add_argument("--trust-role-header", action="store_true",
                     help="take the role from the X-Mledger-Role header (behind an authenticating proxy)")
    sub.add_argument("--cluster", default="standalone", help="cluster name for v1 paths and metrics (standalone)")
    sub.add_argument("--max-concurrency", type=int, default=16, help="requests run at once (16)")
    sub.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                     help="stderr log level (INFO: one line per request)")
    sub.set_defaults(run=run_serve)
    return sub


def run_serve(args: argparse.Namespace) -> int:
    """Run the server for parsed ``args``; returns the exit status."""
    from .auth import Authorization
    from .http_auth import RoleResolver

    data_dir = getattr(args, "data_dir", None) or os.environ.get(DATA_DIR_ENV)
    if not data_dir:
        print(f"mledger-admin serve: --data-dir is required (or set ${DATA_DIR_ENV})", file=sys.stderr)
        return 2
    try:
        parse_bind(args.bind)
    except MLedgerError as e:
        print(f"mledger-admin serve: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        auth_file = getattr(args, "auth_file", None)
        authorization = Authorization.from_json(auth_file) if auth_file else None
        if args.token_file:
            roles = RoleResolver.from_token_file(args.token_file, args.trust_role_header)
        else:
            roles = RoleResolver(trust_role_header=args.trust_role_header)

        def ready(server: AdminHttpServer) -> None:
            state = "on" if authorization is not None else "off"
            print(f"mledger-admin: serving {server.url} (data dir {data_dir}, authorization {state})", flush=True)

        serve(data_dir, args.bind, authorization, roles, cluster=args.cluster, ready=ready,
              max_concurrency=args.max_concurrency)
    except MLedgerError as e:
        print(f"mledger-admin serve: {e}", file=sys.stderr)
        return 1
    except (OSError, sqlite3.Error) as e:
        print(f"mledger-admin serve: {data_dir} / {args.bind}: {e}", file=sys.stderr)
        return 1
    return 0
