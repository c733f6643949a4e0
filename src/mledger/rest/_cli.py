"""``mledger-admin serve``: run the admin REST server over a data directory (see
:func:`mledger.rest.serve`). The arguments are defined by ``mledger-admin``'s parser
(:mod:`mledger.cli`); this module runs them.

Prints ``mledger-admin: serving http://HOST:PORT ...`` on stdout once listening (``--bind
host:0`` picks a free port; read it from that line), logs one line per request on stderr, and
exits 0 after SIGINT/SIGTERM once requests in flight finished and the data directory is closed.
Exit 1 when the directory cannot be opened (held by another process, permissions) or the
address cannot be bound, 2 for a bad command line, including credentials (``--token-file``,
``--token-secret-key``, ``--token-public-key``, ``--basic-auth-conf``, ``--anonymous-user-role``)
or ``--trust-role-header`` without ``--auth-file``: credentials without authorization would let
every caller do everything, so the server refuses to start rather than run open; likewise
``--authenticate-metrics-endpoint`` or ``--authenticate-docs-endpoint`` with no credentials.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys

from ..admin import Authenticator, Authorization, settings_from_args
from ..broker import BrokerConfig
from ..core import MLedgerError
from ._auth import checked_role_resolver
from ._server import AdminServer, parse_bind, serve

__all__ = ["DATA_DIR_ENV", "run_serve"]

DATA_DIR_ENV = "MLEDGER_DATA_DIR"


def run_serve(args: argparse.Namespace) -> int:
    """Run the server for parsed ``args``; returns the exit status."""
    data_dir = getattr(args, "data_dir", None) or os.environ.get(DATA_DIR_ENV)
    if not data_dir:
        print(f"mledger-admin serve: --data-dir is required (or set ${DATA_DIR_ENV})", file=sys.stderr)
        return 2
    auth_file = getattr(args, "auth_file", None)
    try:
        parse_bind(args.bind, 8080)
        settings = settings_from_args(args)
        authenticator = Authenticator.from_settings(settings) if settings is not None else None
        endpoints = BrokerConfig(
            authenticate_metrics_endpoint=args.authenticate_metrics_endpoint,
            authenticate_docs_endpoint=args.authenticate_docs_endpoint,
        )
        roles = checked_role_resolver(
            authenticator, bool(auth_file), endpoints, trust_role_header=args.trust_role_header
        )
    except MLedgerError as e:
        print(f"mledger-admin serve: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        authorization = Authorization.from_json(auth_file) if auth_file else None

        def ready(server: AdminServer) -> None:
            state = "on" if authorization is not None else "off"
            print(
                f"mledger-admin: serving {server.url} (data dir {data_dir}, authorization {state}; "
                f"docs at {server.url}/docs)",
                flush=True,
            )

        serve(
            data_dir,
            args.bind,
            authorization,
            roles,
            cluster=args.cluster,
            ready=ready,
            max_concurrency=args.max_concurrency,
            authenticate_metrics_endpoint=endpoints.authenticate_metrics_endpoint,
            authenticate_docs_endpoint=endpoints.authenticate_docs_endpoint,
        )
    except MLedgerError as e:
        print(f"mledger-admin serve: {e}", file=sys.stderr)
        return 1
    except (OSError, sqlite3.Error) as e:
        print(f"mledger-admin serve: {data_dir} / {args.bind}: {e}", file=sys.stderr)
        return 1
    return 0
