"""``mledger standalone``: Pulsar's binary protocol and the admin REST API over one broker.

    mledger standalone [--bind 127.0.0.1:6650] [--admin-bind 127.0.0.1:8080]
                       [--data-dir DIR | --memory] [--token-file F] [--authorization F]
                       [--token-secret-key K | --token-public-key K] [--basic-auth-conf F]
                       [--anonymous-user-role R] [--authentication-providers token,basic,tls]
                       [--authenticate-metrics-endpoint] [--authenticate-docs-endpoint]
                       [--record DIR [--record-flush-interval S] ...]

Like ``pulsar standalone``: one process, one broker and data directory (SQLite by default,
``--memory`` for none), clients on ``pulsar://127.0.0.1:6650``, ``pulsar-admin``-style calls on
``http://127.0.0.1:8080`` (ready when ``GET /admin/v2/clusters`` answers ``["standalone"]``,
the check container tools make), protocol metrics on ``/metrics``. ``public/default``,
``pulsar/system`` and ``sample/ns1`` exist from the start, as in Pulsar's standalone (with
authorization on, only the cluster: as Pulsar's, whose internal admin client then has no
credentials); topics in other namespaces need the tenant and namespace created first
(``PUT /admin/v2/tenants/{tenant}``, ``PUT /admin/v2/namespaces/{tenant}/{ns}``).
``--record DIR`` records what the broker does as the replay's raw logs
(:mod:`mledger.replay.recording`, imported only then: it needs the ``replay`` extra).
SIGTERM or SIGINT stops it gracefully: no new connections, the admin calls in flight finish,
the appends in flight are stored and answered, then the broker and the store close.

:class:`Standalone` is the same thing for a program that runs its own event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .admin import Admin, Authorization
from .admin.authentication import (
    AuthenticationSettings,
    Authenticator,
    add_authentication_arguments,
    build_authenticator,
    settings_from_args,
)
from .broker import Broker, BrokerConfig
from .broker.journal import BrokerJournal
from .broker.namespaces import STANDALONE_NAMESPACES
from .core.address import parse_bind
from .core.errors import ConfigError
from .managed_ledger import ManagedLedgerFactory
from .metrics.protocol import ProtocolCollector
from .protocol import ClientAuth, EmbeddedBroker, ProtocolConfig, ProtocolServer
from .rest import AdminServer, RoleResolver, create_app
from .rest.auth import check_authentication_setup, check_endpoint_authentication
from .storage import MemoryStore, SqliteStore

if TYPE_CHECKING:
    from .replay.recording import RecordSettings

__all__ = ["EmbeddedStandalone", "Standalone", "add_standalone_arguments", "run_standalone"]

log = logging.getLogger(__name__)


class Standalone:
    """A broker with the protocol server and the REST admin in front of it.

    ``data_dir`` None keeps everything in memory. ``tokens`` (token -> role) and
    ``authentication`` (the providers, :class:`~mledger.admin.authentication.AuthenticationSettings`)
    turn on authentication on both servers, through one identity table, and need
    ``authorization``, which decides what each role may do: credentials alone would be demanded
    on the protocol port and leave the admin API open, so they raise
    :class:`~mledger.core.errors.ConfigError` (as ``mledger-admin serve`` does).
    ``record`` (a directory) records what the broker does as the replay's raw logs, written as
    ``record_settings`` say (see :mod:`mledger.replay.recording`).
    Use ``await start()`` / ``await stop()`` inside a running event loop.
    """

    def __init__(
        self,
        data_dir: str | Path | None = "data",
        bind: tuple[str, int] = ("127.0.0.1", 6650),
        admin_bind: tuple[str, int] = ("127.0.0.1", 8080),
        broker_config: BrokerConfig | None = None,
        tokens: dict[str, str] | None = None,
        authorization: Authorization | None = None,
        authentication: AuthenticationSettings | None = None,
        record: str | Path | None = None,
        record_settings: RecordSettings | None = None,
    ) -> None:
        authenticator = build_authenticator(tokens, authentication)
        roles = _checked_roles(authenticator, authorization, "authorization", broker_config)
        journal = recorder(record, record_settings)
        self.store: MemoryStore | SqliteStore = (
            MemoryStore() if data_dir is None else SqliteStore(data_dir, synchronous="NORMAL")
        )
        self.factory = ManagedLedgerFactory(self.store)
        # as Pulsar's standalone, whose internal admin client has no credentials when authorization
        # is on: then only the cluster is created, tenants and namespaces come from the set-up
        self.broker = Broker(self.factory, broker_config, journal=journal, default_namespace=authorization is None)
        for namespace in STANDALONE_NAMESPACES if authorization is None else ():
            self.broker.ensure_namespace(namespace)
        auth = _client_auth(authenticator, authorization)
        self.protocol = ProtocolServer(self.broker, ProtocolConfig(host=bind[0], port=bind[1]), auth=auth)
        app = create_app(
            Admin(self.broker, authorization),
            roles=roles,
            collectors=[ProtocolCollector(self.protocol, self.broker.config.cluster_name)],
        )
        self.admin = AdminServer(app, admin_bind[0], admin_bind[1])

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` of the protocol server."""
        return self.protocol.service_url

    @property
    def admin_url(self) -> str:
        """``http://host:port`` of the REST admin."""
        return self.admin.url

    async def start(self) -> None:
        """Start both servers (the admin on its own thread)."""
        await self.protocol.start()
        self.admin.start()

    async def stop(self) -> None:
        """Stop both servers gracefully, then close the broker and the store."""
        await self.protocol.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.admin.shutdown)
        self.broker.close()
        self.factory.close()
        if isinstance(self.store, SqliteStore):
            self.store.close()


def recorder(record: str | Path | None, settings: RecordSettings | None = None) -> BrokerJournal | None:
    """A :class:`~mledger.replay.recording.Recorder` writing into ``record`` (None: no
    recording, and nothing of the replay package imported)."""
    if record is None:
        return None
    return _recording_module().Recorder(record, settings)


def _recording_module() -> Any:
    try:
        from .replay import recording
    except ImportError as exc:  # pyarrow: the replay extra
        raise ConfigError(f"recording needs mledger's replay extra: pip install 'mledger[replay]' ({exc})") from None
    return recording


class EmbeddedStandalone(EmbeddedBroker):
    """:class:`~mledger.protocol.EmbeddedBroker` with the admin REST API beside the protocol
    server (``admin_url``, free port), over the same broker: what the pytest fixture starts.
    ``record=DIR`` (and ``record_settings``) record what the broker does as the replay's raw
    logs, as ``mledger standalone --record`` does; the recording is complete once ``stop``
    returned.

    >>> with EmbeddedStandalone() as broker:      # doctest: +SKIP
    ...     httpx.put(f"{broker.admin_url}/admin/v2/persistent/public/default/t/partitions", json=3)

    ``tokens`` without ``authorization`` raise :class:`~mledger.core.errors.ConfigError` (see
    :class:`Standalone`).
    """

    _admin_server: AdminServer | None = None
    _admin_lock = threading.Lock()

    def __init__(
        self,
        *args: Any,
        record: str | Path | None = None,
        record_settings: RecordSettings | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._record = record
        self._record_settings = record_settings

    def _make_journal(self) -> BrokerJournal | None:
        return recorder(self._record, self._record_settings)

    def _check_options(self) -> None:
        _checked_roles(self._authenticator, self._authorization, "authorization", self._broker_config)

    @property
    def admin_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the admin REST API, started on first use (building
        the app takes a few hundred milliseconds, which tests that never call it do not pay)."""
        with self._admin_lock:
            if self._admin_server is None:
                roles = _checked_roles(self._authenticator, self._authorization, "authorization", self.broker.config)
                app = create_app(
                    Admin(self.broker, self._authorization),
                    roles=roles,
                    collectors=[ProtocolCollector(self.server, self.broker.config.cluster_name)],
                )
                self._admin_server = AdminServer(app, self._host, 0, drain_timeout=2.0)
                self._admin_server.start()
            return self._admin_server.url

    def _before_stop(self) -> None:
        with self._admin_lock:
            if self._admin_server is not None:
                self._admin_server.shutdown()
                self._admin_server = None


def _client_auth(authenticator: Authenticator | None, authorization: Authorization | None) -> ClientAuth | None:
    """The protocol server's authentication: on with an authenticator or an authorization (then
    a client without credentials is refused unless an anonymous role is set)."""
    if authenticator is None and authorization is None:
        return None
    return ClientAuth(authenticator or Authenticator(), authorization)


def _checked_roles(
    authenticator: Authenticator | None,
    authorization: Authorization | None,
    option: str,
    config: BrokerConfig | None,
) -> RoleResolver | None:
    """The REST role resolver of ``authenticator``; ``ConfigError`` naming ``option`` when
    credentials come without an authorization (the check ``mledger-admin serve`` makes), and when
    ``config`` asks for authenticated ``/metrics`` or docs with nothing that authenticates. Runs
    before anything is opened."""
    roles = RoleResolver(authenticator) if authenticator is not None else None
    if roles is not None:
        check_authentication_setup(roles, authorization is not None, option)
    check_endpoint_authentication(roles or RoleResolver(), config or BrokerConfig())
    return roles


def add_standalone_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mledger standalone``."""
    parser.add_argument(
        "--bind", default="127.0.0.1:6650", help="protocol server host:port, port or [ipv6]:port (127.0.0.1:6650)"
    )
    parser.add_argument(
        "--admin-bind", default="127.0.0.1:8080", help="REST admin host:port, port or [ipv6]:port (127.0.0.1:8080)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, default=Path("data"), help="SQLite data directory (data)")
    where.add_argument("--memory", action="store_true", help="keep everything in memory (nothing survives)")
    parser.add_argument("--token-file", type=Path, help='JSON {"<token>": "<role>"}: clients must authenticate')
    parser.add_argument("--authorization", type=Path, help="JSON permissions of the roles (mledger-admin's format)")
    add_authentication_arguments(parser)
    parser.add_argument("--deduplication", action="store_true", help="deduplicate messages on every namespace")
    parser.add_argument(
        "--authenticate-metrics-endpoint",
        action="store_true",
        help="/metrics answers only callers with a role (Pulsar's authenticateMetricsEndpoint; needs credentials)",
    )
    parser.add_argument(
        "--authenticate-docs-endpoint",
        action="store_true",
        help="/docs, /redoc and /openapi.json answer only callers with a role (mledger extension; needs credentials)",
    )
    parser.add_argument(
        "--record", type=Path, metavar="DIR", help="record what the broker does as the replay's raw logs in DIR"
    )
    parser.add_argument(
        "--record-flush-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between writes of the recording: the most a crash loses (1)",
    )
    parser.add_argument(
        "--record-rows-per-part", type=int, default=100_000, metavar="N", help="rows per Parquet part at most (100000)"
    )
    parser.add_argument(
        "--record-max-pending-rows",
        type=int,
        default=1_000_000,
        metavar="N",
        help="rows waiting to be written at most; more are dropped and the recording marked incomplete (1000000)",
    )


def run_standalone(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT; prints the two URLs once both servers answer."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    authentication = settings_from_args(args)
    authorization = Authorization.from_json(args.authorization) if args.authorization else None
    if authorization is not None and authentication is None:
        raise ConfigError(
            "--authorization needs authentication (--token-file, --token-secret-key, --token-public-key, "
            "--basic-auth-conf or --anonymous-user-role): roles come from the clients' credentials"
        )
    authenticator = build_authenticator(None, authentication)
    config = BrokerConfig(
        deduplication_enabled=args.deduplication,
        authenticate_metrics_endpoint=args.authenticate_metrics_endpoint,
        authenticate_docs_endpoint=args.authenticate_docs_endpoint,
    )
    _checked_roles(authenticator, authorization, "--authorization", config)
    record_settings = None
    if args.record is not None:
        record_settings = _recording_module().RecordSettings(
            args.record_flush_interval, args.record_rows_per_part, args.record_max_pending_rows
        )
    bind = parse_bind(args.bind, 6650)
    admin_bind = parse_bind(args.admin_bind, 8080, option="--admin-bind")
    standalone = Standalone(
        None if args.memory else args.data_dir,
        bind,
        admin_bind,
        config,
        authorization=authorization,
        authentication=authentication,
        record=args.record,
        record_settings=record_settings,
    )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await standalone.start()
        print(json.dumps({"service_url": standalone.service_url, "admin_url": standalone.admin_url}), flush=True)
        await stop.wait()
        log.warning("stopping")
        await standalone.stop()

    asyncio.run(run())
    return 0
