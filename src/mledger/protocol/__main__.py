"""``python -m mledger.protocol``: the protocol server alone, in the foreground.

    python -m mledger.protocol [--bind 127.0.0.1:6650] [--data-dir DIR | --memory] [--token-file F]
                               [--token-secret-key K | --token-public-key K] [--basic-auth-conf F]
                               [--anonymous-user-role R]

Prints ``ready pulsar://host:port`` on stdout once clients can connect; stops cleanly on
SIGTERM or SIGINT. Raises the soft file descriptor limit to the hard one at start.
``mledger standalone`` runs the same server with the REST admin beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from ..admin import Authenticator, add_authentication_arguments, settings_from_args
from ..broker import BrokerConfig, open_broker
from ..core import ConfigError, parse_bind
from ._acceptor import raise_descriptor_limit
from ._access import ClientAuth
from ._config import ProtocolConfig
from ._server import ProtocolServer, freeze_startup_heap, stop_event_on_signals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mledger.protocol", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bind", default="127.0.0.1:6650", help="host:port, a port or [ipv6]:port to listen on (port 0: a free one)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, default=Path("data"), help="SQLite data directory (default: data)")
    where.add_argument("--memory", action="store_true", help="keep everything in memory")
    parser.add_argument("--token-file", type=Path, help='token -> role JSON ({"<token>": "<role>"}): tokens required')
    add_authentication_arguments(parser)
    parser.add_argument("--deduplication", action="store_true", help="enable message deduplication (PIP-6)")
    args = parser.parse_args(argv)
    try:
        host, port = parse_bind(args.bind, 6650)
    except ConfigError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise_descriptor_limit()
    settings = settings_from_args(args)
    auth = ClientAuth(Authenticator.from_settings(settings)) if settings is not None else None
    opened = open_broker(
        None if args.memory else args.data_dir, broker_config=BrokerConfig(deduplication_enabled=args.deduplication)
    )
    server = ProtocolServer(opened.broker, ProtocolConfig(host=host, port=port), auth=auth)

    async def run() -> None:
        stop = stop_event_on_signals()
        await server.start()
        freeze_startup_heap()
        print(f"ready {server.service_url}", flush=True)
        await stop.wait()
        await server.stop()

    try:
        asyncio.run(run())
    except OSError as exc:  # the address is taken or not ours: the message names server and address
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        opened.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
