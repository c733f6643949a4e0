"""``mledger standalone``: Pulsar's binary protocol and the admin REST API over one broker.

    mledger standalone [--config standalone.conf] [--defaults pulsar-4.0] [--print-config] [--strict-config]
                       [--bind 127.0.0.1:6650] [--admin-bind 127.0.0.1:8080]
                       [--tls-port P] [--admin-tls-port P] [--tls-cert-file F] [--tls-key-file F]
                       [--tls-trust-certs-file F] [--tls-require-trusted-client-cert]
                       [--data-dir DIR | --memory] [--token-file F] [--authorization F]
                       [--token-secret-key K | --token-public-key K] [--basic-auth-conf F]
                       [--anonymous-user-role R] [--authentication-providers token,basic,tls]
                       [--advertised-listeners L] [--internal-listener-name N]
                       [--authenticate-metrics-endpoint] [--authenticate-docs-endpoint]
                       [--record DIR [--record-flush-interval S] ...]
                       [--fault-injection] [--faults FILE] [--fault-seed N]

Like ``pulsar standalone``: one process, one broker and data directory (SQLite by default,
``--memory`` for none), clients on ``pulsar://127.0.0.1:6650``, ``pulsar-admin``-style calls on
``http://127.0.0.1:8080`` (ready when ``GET /admin/v2/clusters`` answers ``["standalone"]``,
the check container tools make), protocol metrics on ``/metrics``. ``public/default``,
``pulsar/system`` and ``sample/ns1`` exist from the start, as in Pulsar's standalone (with
authorization on, only the cluster: as Pulsar's, whose internal admin client then has no
credentials); topics in other namespaces need the tenant and namespace created first
(``PUT /admin/v2/tenants/{tenant}``, ``PUT /admin/v2/namespaces/{tenant}/{ns}``).
``--config`` reads Pulsar's ``broker.conf`` / ``standalone.conf`` (:mod:`mledger._standalone_config`;
the options override it), ``--print-config`` prints the effective settings. ``--defaults
pulsar-4.0`` (``pulsar-3.0``, ``pulsar-4.1``, ``pulsar-newest``) starts from that Pulsar version's
cursor settings and rules instead of mledger's (the file and the options apply on top): its
cursors persist at Pulsar's pace (the mark-delete rate limiter, the 60 s flush) and answer an
ack's receipt before persisting, so a restart redelivers what that version would. The TLS ports serve
``pulsar+ssl://`` and ``https://`` (:mod:`mledger.core`).
``--record DIR`` records what the broker does as the replay's raw logs
(:mod:`mledger.replay`, imported only then: it needs the ``replay`` extra).
``--fault-injection`` lets tests make the broker misbehave on purpose over REST
(``/admin/v2/mledger/faults``, superusers only under authorization; ``mledger-admin faults``);
``--faults FILE`` (implies it) arms a scenario file's faults at start, ``--fault-seed`` seeds
their random draws (docs/faults.md).
At start the soft file descriptor limit is raised to the hard one; the ports stop accepting
(connections wait in the backlog) before the descriptors run out, and close connections that
send nothing within ``firstByteTimeoutSeconds`` (:mod:`mledger.protocol`).
SIGTERM or SIGINT stops it gracefully: no new connections, the admin calls in flight finish,
the appends in flight are stored and answered, then the broker and the store close.

:class:`Standalone` is the same thing for a program that runs its own event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .admin import (
    AuthenticationSettings,
    Authenticator,
    add_authentication_arguments,
    basic_auth_conf_from_env,
    build_authenticator,
)
from .broker import STANDALONE_NAMESPACES, Broker, BrokerConfig, BrokerJournal, Faults, open_broker
from .core import PULSAR_VERSIONS, ConfigError, ManagedLedgerFactoryConfig, TlsSettings, lazy_getattr, parse_bind
from .protocol import (
    ClientAuth,
    EmbeddedBroker,
    ListenerUrls,
    ProtocolConfig,
    ProtocolServer,
    freeze_startup_heap,
    parse_advertised_listeners,
    raise_descriptor_limit,
    stop_event_on_signals,
)
from .rest import checked_role_resolver

if TYPE_CHECKING:
    from fastapi import FastAPI

    # the configuration file's keys and settings: loaded on first use (EmbeddedStandalone and
    # the pytest fixture never read a broker.conf; run_standalone and standalone_settings do)
    from ._standalone_config import (
        PULSAR_KEYS as PULSAR_KEYS,
        StandaloneSettings as StandaloneSettings,
        authorization_from_settings as authorization_from_settings,
        effective_settings as effective_settings,
        read_pulsar_conf as read_pulsar_conf,
        render_settings as render_settings,
    )
    from .admin import Authorization
    from .broker import FaultScenario
    from .replay import RecordSettings
    from .rest import AdminServer, RoleResolver

__all__ = [
    "PULSAR_KEYS",
    "EmbeddedStandalone",
    "Standalone",
    "StandaloneSettings",
    "effective_settings",
    "read_pulsar_conf",
    "add_standalone_arguments",
    "run_standalone",
    "standalone_faults",
    "standalone_settings",
]

# imported on first use (PEP 562): the configuration file's machinery (Pulsar's key table)
_LAZY = {
    "._standalone_config": (
        "PULSAR_KEYS",
        "StandaloneSettings",
        "authorization_from_settings",
        "effective_settings",
        "read_pulsar_conf",
        "render_settings",
    ),
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

log = logging.getLogger(__name__)


class Standalone:
    """A broker with the protocol server and the REST admin in front of it.

    ``data_dir`` None keeps everything in memory. ``tokens`` (token -> role) and
    ``authentication`` (the providers, :class:`~mledger.admin.AuthenticationSettings`)
    turn on authentication on both servers, through one identity table, and need
    ``authorization``, which decides what each role may do: credentials alone would be demanded
    on the protocol port and leave the admin API open, so they raise
    :class:`~mledger.core.ConfigError` (as ``mledger-admin serve`` does).
    ``record`` (a directory) records what the broker does as the replay's raw logs, written as
    ``record_settings`` say (see :mod:`mledger.replay`).
    ``advertised_listeners`` and ``internal_listener_name`` are Pulsar's ``advertisedListeners``
    and ``internalListenerName`` (see :class:`~mledger.protocol.ProtocolConfig`): the addresses
    lookups answer, on the binary protocol and over HTTP (``/lookup/v2/topic/...``); given, they
    replace ``protocol_config``'s.
    ``protocol_config``: the protocol server's other settings (its host and port are ``bind``'s;
    its first-byte and TLS handshake limits apply to the REST ports too);
    ``max_http_server_connections`` and ``max_concurrent_http_requests``: Pulsar's
    ``maxHttpServerConnections`` and ``maxConcurrentHttpRequests`` on each REST port (None:
    Pulsar's defaults lowered to fit the descriptor limit, see :class:`~mledger.rest.AdminServer`);
    ``factory_config``: the managed-ledger factory's. ``faults`` turns fault injection on (a
    :class:`~mledger.broker.Faults`: the library, REST and ``mledger-admin faults`` arm faults
    on it). ``tls`` with ``tls_port`` serves
    ``pulsar+ssl://`` on the ``bind`` host, with ``admin_tls_port`` ``https://`` on the
    ``admin_bind`` host (port 0: a free one); the certificate files are read here
    (``ConfigError``). ``seed`` seeds the broker's random source (:attr:`Broker.random
    <mledger.broker.Broker.random>`); ``deterministic`` runs the broker on a manual clock
    starting at :data:`~mledger.broker.DETERMINISTIC_START_MS`, which stands still until a
    client advances it over REST (``POST /admin/v2/mledger/clock/advance``, firing the broker's
    timers due on the way: delayed delivery, TTL, ...), and trims inline
    (docs/pulsar/deterministic.md).
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
        advertised_listeners: Mapping[str, ListenerUrls] | None = None,
        internal_listener_name: str | None = None,
        *,
        protocol_config: ProtocolConfig | None = None,
        factory_config: ManagedLedgerFactoryConfig | None = None,
        tls: TlsSettings | None = None,
        tls_port: int | None = None,
        admin_tls_port: int | None = None,
        max_http_server_connections: int | None = None,
        max_concurrent_http_requests: int | None = None,
        faults: Faults | None = None,
        deterministic: bool = False,
        seed: int | None = None,
    ) -> None:
        authenticator = build_authenticator(tokens, authentication)
        self._authenticator = authenticator
        roles = _checked_roles(authenticator, authorization, "authorization", broker_config)
        protocol = replace(protocol_config or ProtocolConfig(), host=bind[0], port=bind[1], tls_port=tls_port, tls=tls)
        if advertised_listeners is not None or internal_listener_name is not None:
            protocol = replace(
                protocol,
                advertised_listeners=dict(advertised_listeners or {}),
                internal_listener_name=internal_listener_name,
            )
        if admin_tls_port is not None and tls is None:
            raise ConfigError("admin_tls_port needs tls (tlsCertificateFilePath and tlsKeyFilePath)")
        journal = recorder(record, record_settings)
        # as Pulsar's standalone, whose internal admin client has no credentials when authorization
        # is on: then only the cluster is created, tenants and namespaces come from the set-up
        self.opened = open_broker(
            data_dir,
            broker_config=broker_config,
            factory_config=factory_config,
            journal=journal,
            namespaces=STANDALONE_NAMESPACES if authorization is None else (),
            default_namespace=authorization is None,
            faults=faults,
            seed=seed,
            deterministic=deterministic,
        )
        self.store = self.opened.store
        self.factory = self.opened.factory
        self.broker = self.opened.broker
        self.admin_tls: AdminServer | None = None
        try:
            from .rest import AdminServer, DeferredApp  # uvicorn: only a process that serves REST loads it

            auth = _client_auth(authenticator, authorization)
            self.protocol = ProtocolServer(self.broker, protocol, auth=auth)
            # the readiness route answers as soon as the port listens; the app is built on the
            # first other request (see mledger.rest.DeferredApp)
            broker, server = self.broker, self.protocol
            app = DeferredApp(lambda: _admin_app(broker, server, authorization, roles), self.broker.clusters.list)
            limits = _admin_limits(protocol, max_http_server_connections, max_concurrent_http_requests)
            self.admin = AdminServer(app, admin_bind[0], admin_bind[1], **limits)
            # https:// beside http://, over the same app (as Pulsar's webServicePortTls beside webServicePort)
            if admin_tls_port is not None:
                self.admin_tls = AdminServer(app, admin_bind[0], admin_tls_port, tls=tls, **limits)
        except BaseException:
            if getattr(self, "admin", None) is not None:
                self.admin.shutdown(0)
            self.opened.close()
            raise

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` of the protocol server."""
        return self.protocol.service_url

    @property
    def admin_url(self) -> str:
        """``http://host:port`` of the REST admin, with the advertised host as :attr:`service_url`
        (Pulsar's ``webServiceAddress``: ``advertisedAddress``, else the bound host)."""
        return self.admin.advertised_url(self.protocol.config.advertised_address)

    @property
    def tls_service_url(self) -> str | None:
        """``pulsar+ssl://host:port`` of the protocol server's TLS port; None without one."""
        return self.protocol.tls_service_url

    @property
    def admin_tls_url(self) -> str | None:
        """``https://host:port`` of the REST admin's TLS port, with the advertised host (Pulsar's
        ``webServiceAddressTls``: a certificate for ``advertisedAddress`` verifies it); None
        without one."""
        if self.admin_tls is None:
            return None
        return self.admin_tls.advertised_url(self.protocol.config.advertised_address)

    def urls(self) -> dict[str, str]:
        """The servers' URLs by name (``service_url``, ``admin_url``, and over TLS
        ``service_url_tls``, ``admin_url_tls``): what ``mledger standalone`` prints when ready."""
        urls = {"service_url": self.service_url, "admin_url": self.admin_url}
        if self.tls_service_url is not None:
            urls["service_url_tls"] = self.tls_service_url
        if self.admin_tls_url is not None:
            urls["admin_url_tls"] = self.admin_tls_url
        return urls

    async def start(self) -> None:
        """Start the servers (the admin ones on their own threads)."""
        await self.protocol.start()
        self.admin.start()
        if self.admin_tls is not None:
            self.admin_tls.start()

    async def stop(self) -> None:
        """Stop the servers gracefully, then close the broker and the store."""
        await self.protocol.stop()
        loop = asyncio.get_running_loop()
        if self.admin_tls is not None:
            await loop.run_in_executor(None, self.admin_tls.shutdown)
        await loop.run_in_executor(None, self.admin.shutdown)
        if self._authenticator is not None:
            self._authenticator.close()  # the password checks' workers
        self.opened.close()


def _admin_app(
    broker: Broker, protocol: ProtocolServer, authorization: Authorization | None, roles: RoleResolver
) -> FastAPI:
    """The admin REST app of a standalone: ``broker``'s admin, the protocol server's metrics on
    ``/metrics`` and its addresses on the HTTP lookup. Imports FastAPI and the admin operations."""
    from .admin import Admin
    from .metrics import ProtocolCollector
    from .rest import create_app

    return create_app(
        Admin(broker, authorization),
        roles=roles,
        collectors=[ProtocolCollector(protocol, broker.config.cluster_name)],
        lookup=protocol.lookup_urls,
    )


def _admin_limits(
    protocol: ProtocolConfig, max_connections: int | None = None, max_concurrent_requests: int | None = None
) -> dict[str, Any]:
    """The connection limits of a standalone's REST ports: the protocol server's first-byte and
    TLS handshake limits, and the HTTP connection and request limits."""
    return {
        "max_connections": max_connections,
        "max_concurrent_requests": max_concurrent_requests,
        "first_byte_timeout": protocol.first_byte_timeout_seconds,
        "tls_handshake_timeout": protocol.tls_handshake_timeout_seconds,
        "max_tls_handshakes": protocol.max_concurrent_tls_handshakes,
    }


def recorder(record: str | Path | None, settings: RecordSettings | None = None) -> BrokerJournal | None:
    """A :class:`~mledger.replay.Recorder` writing into ``record`` (None: no
    recording, and nothing of the replay package imported)."""
    if record is None:
        return None
    return _recording_module().Recorder(record, settings)


def _recording_module() -> Any:
    """:mod:`mledger.replay` with its recorder loaded, or :class:`ConfigError` without the replay extra."""
    try:
        from . import replay as recording
        from .replay import Recorder  # noqa: F401 -- lazy in the face: this loads the recorder (pyarrow)
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

    ``tokens`` without ``authorization`` raise :class:`~mledger.core.ConfigError` (see
    :class:`Standalone`).
    """

    _admin_server: AdminServer | None = None
    _admin_port = 0  # after the first start: its port, which a restart keeps
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
        the app takes a few hundred milliseconds, which tests that never call it do not pay);
        the same after a :meth:`restart`."""
        with self._admin_lock:
            if self._admin_server is None:
                roles = _checked_roles(self._authenticator, self._authorization, "authorization", self.broker.config)
                app = _admin_app(self.broker, self.server, self._authorization, roles)
                limits = _admin_limits(self.server.config)
                from .rest import AdminServer  # uvicorn: loaded by the first test that asks for the admin URL

                self._admin_server = AdminServer(app, self._host, self._admin_port, drain_timeout=2.0, **limits)
                self._admin_server.start()
                self._admin_port = self._admin_server.address[1]
            return self._admin_server.url

    def _before_stop(self) -> None:
        with self._admin_lock:
            if self._admin_server is not None:
                self._admin_server.shutdown()
                self._admin_server = None

    def _after_fault_restart(self) -> None:
        if self._admin_port:  # it served before: REST clients (the one that armed the restart) come back
            _ = self.admin_url


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
) -> RoleResolver:
    """The REST role resolver after the start-up checks (:func:`~mledger.rest.checked_role_resolver`);
    runs before anything is opened."""
    return checked_role_resolver(authenticator, authorization is not None, config, option=option)


def add_standalone_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mledger standalone``."""
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="Pulsar's broker.conf / standalone.conf (key=value); the options below override it",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the effective settings (Pulsar's key=value) and exit"
    )
    parser.add_argument(
        "--defaults",
        choices=tuple(PULSAR_VERSIONS),
        metavar="PRESET",
        help="a Pulsar version whose cursor settings, persist pace and recovery rules the broker follows, so a "
        f"restart redelivers what it would ({', '.join(PULSAR_VERSIONS)}); --config and the options apply on top",
    )
    parser.add_argument(
        "--strict-config",
        action="store_true",
        help="refuse a --config key that is not one of Pulsar's broker keys (a typo), instead of a warning",
    )
    parser.add_argument(
        "--bind", help="protocol server host:port, port or [ipv6]:port (127.0.0.1:6650; bindAddress, brokerServicePort)"
    )
    parser.add_argument(
        "--admin-bind", help="REST admin host:port, port or [ipv6]:port (127.0.0.1:8080; bindAddress, webServicePort)"
    )
    parser.add_argument(
        "--tls-port", type=int, metavar="PORT", help="pulsar+ssl:// port on the --bind host (brokerServicePortTls)"
    )
    parser.add_argument(
        "--admin-tls-port", type=int, metavar="PORT", help="https:// port on the --admin-bind host (webServicePortTls)"
    )
    parser.add_argument("--tls-cert-file", metavar="F", help="the servers' certificate, PEM (tlsCertificateFilePath)")
    parser.add_argument("--tls-key-file", metavar="F", help="its private key, PEM (tlsKeyFilePath)")
    parser.add_argument(
        "--tls-trust-certs-file", metavar="F", help="CA certificates client certificates are verified against"
    )
    parser.add_argument(
        "--tls-require-trusted-client-cert",
        action="store_true",
        help="refuse TLS clients without a trusted certificate (tlsRequireTrustedClientCertOnConnect)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, default=Path("data"), help="SQLite data directory (data)")
    where.add_argument("--memory", action="store_true", help="keep everything in memory (nothing survives)")
    parser.add_argument("--token-file", type=Path, help='JSON {"<token>": "<role>"}: clients must authenticate')
    parser.add_argument("--authorization", type=Path, help="JSON permissions of the roles (mledger-admin's format)")
    add_authentication_arguments(parser)
    parser.add_argument("--deduplication", action="store_true", help="deduplicate messages on every namespace")
    parser.add_argument(
        "--advertised-listeners",
        metavar="LISTENERS",
        help="named addresses lookups answer, e.g. internal:pulsar://10.0.0.5:6650,external:pulsar://ci-host:6650 "
        "(Pulsar's advertisedListeners; clients pick one with listener_name)",
    )
    parser.add_argument(
        "--internal-listener-name",
        metavar="NAME",
        help="the listener lookups naming none answer with (Pulsar's internalListenerName; default: the first)",
    )
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
        "--seed", type=int, metavar="N", help="seed of the broker's random draws (default: a random one)"
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="runs that repeat, with --seed: a manual clock that starts at 2024-01-01 and moves only when advanced "
        "(mledger-admin clock advance MS, POST /admin/v2/mledger/clock/advance)",
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
        "--fault-injection",
        action="store_true",
        help="let tests inject faults over REST (/admin/v2/mledger/faults, superusers only; mledger-admin faults)",
    )
    parser.add_argument(
        "--faults",
        type=Path,
        metavar="FILE",
        help="a fault scenario (YAML or JSON) armed at start; implies --fault-injection",
    )
    parser.add_argument("--fault-seed", type=int, metavar="N", help="the seed of the faults' random draws")
    parser.add_argument(
        "--record-max-pending-rows",
        type=int,
        default=1_000_000,
        metavar="N",
        help="rows waiting to be written at most; more are dropped and the recording marked incomplete (1000000)",
    )


def run_standalone(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT; prints the servers' URLs (JSON) once they answer.
    ``--print-config`` prints the effective settings instead and returns."""
    from ._standalone_config import authorization_from_settings, render_settings

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise_descriptor_limit()
    settings = standalone_settings(args)
    if args.print_config:
        print(render_settings(settings), end="", flush=True)
        return 0
    for note in settings.notes:
        log.warning("%s: %s", args.config, note)
    authorization = authorization_from_settings(settings.server)
    if authorization is not None and settings.authentication is None:
        raise ConfigError(
            "--authorization needs authentication (--token-file, "
            "--token-secret-key, --token-public-key, --basic-auth-conf, --anonymous-user-role), as does "
            "authorizationEnabled=true (authenticationEnabled=true and the providers' settings): roles come from "
            "the clients' credentials"
        )
    authenticator = build_authenticator(None, settings.authentication)
    _checked_roles(authenticator, authorization, "--authorization", settings.broker)
    record_settings = None
    if args.record is not None:
        record_settings = _recording_module().RecordSettings(
            args.record_flush_interval, args.record_rows_per_part, args.record_max_pending_rows
        )
    faults, scenario = standalone_faults(args)
    server = settings.server
    standalone = Standalone(
        None if args.memory else args.data_dir,
        (server.bind_address, server.broker_service_port),
        (server.web_bind_address, server.web_service_port),
        settings.broker,
        authorization=authorization,
        authentication=settings.authentication,
        record=args.record,
        record_settings=record_settings,
        deterministic=args.deterministic,
        seed=args.seed,
        protocol_config=settings.protocol,
        factory_config=settings.factory,
        tls=settings.tls,
        tls_port=server.broker_service_port_tls,
        admin_tls_port=server.web_service_port_tls,
        max_http_server_connections=server.max_http_server_connections,
        max_concurrent_http_requests=server.max_concurrent_http_requests,
        faults=faults,
    )

    async def run() -> None:
        stop = stop_event_on_signals()
        await standalone.start()
        if faults is not None:
            armed = faults.load(scenario) if scenario is not None else []
            log.warning("fault injection on: %d faults armed from %s (seed %d)", len(armed), args.faults, faults.seed)
        freeze_startup_heap()
        print(json.dumps(standalone.urls()), flush=True)
        await stop.wait()
        log.warning("stopping")
        await standalone.stop()

    asyncio.run(run())
    return 0


def standalone_faults(args: argparse.Namespace) -> tuple[Faults | None, FaultScenario | None]:
    """The fault registry of ``mledger standalone``'s options (None: fault injection off) and
    the ``--faults`` scenario to arm once the servers listen, read and checked here, before
    anything starts (``FaultSpecError``, a ``ConfigError``, naming the file and each problem).
    ``--fault-seed`` wins over the scenario's seed."""
    scenario_file = getattr(args, "faults", None)
    if not getattr(args, "fault_injection", False) and scenario_file is None:
        return None, None
    seed = getattr(args, "fault_seed", None)
    scenario = None
    if scenario_file is not None:
        from .broker import FaultSpecError, load_scenario

        scenario = load_scenario(scenario_file)
        restarts = [i for i, fault in enumerate(scenario.faults) if fault.action == "restart"]
        if restarts:
            raise FaultSpecError(
                f"{scenario_file}: faults[{restarts[0]}]: mledger standalone cannot restart in place (stop and"
                " start its process); restart faults act on the pytest fixture and EmbeddedBroker"
            )
        if seed is None:
            seed = scenario.seed
        scenario = scenario.model_copy(update={"seed": None})
    return Faults(seed=seed), scenario


_CREDENTIAL_FLAGS = {
    "token_file": "token_file",
    "token_secret_key": "token_secret_key",
    "token_public_key": "token_public_key",
    "token_auth_claim": "token_auth_claim",
    "basic_auth_conf": "basic_auth_conf",
    "anonymous_user_role": "anonymous_user_role",
}
"""``mledger standalone``'s credential options -> their ``AuthenticationSettings`` fields."""

_SWITCHES = {
    "deduplication": "broker.deduplication_enabled",
    "authenticate_metrics_endpoint": "broker.authenticate_metrics_endpoint",
    "authenticate_docs_endpoint": "broker.authenticate_docs_endpoint",
    "tls_require_trusted_client_cert": "tls.require_trusted_client_cert_on_connect",
}
"""The on/off options -> the setting each turns on (never off: the file's value stays otherwise)."""

_VALUES = {
    "tls_port": "server.broker_service_port_tls",
    "admin_tls_port": "server.web_service_port_tls",
    "tls_cert_file": "tls.certificate_file_path",
    "tls_key_file": "tls.key_file_path",
    "tls_trust_certs_file": "tls.trust_certs_file_path",
}


def standalone_settings(args: argparse.Namespace) -> StandaloneSettings:
    """The effective settings of ``mledger standalone``'s options: mledger's defaults, then
    ``--config`` (Pulsar's keys), then every option given on the command line."""
    from ._standalone_config import effective_settings, read_pulsar_conf

    strict = getattr(args, "strict_config", False)
    conf = read_pulsar_conf(args.config, strict=strict) if getattr(args, "config", None) else None
    base = effective_settings(conf).server
    overrides: dict[str, Any] = {}
    if args.bind is not None:
        host, port = parse_bind(args.bind, base.broker_service_port, default_host=base.bind_address)
        overrides.update({"server.bind_address": host, "server.broker_service_port": port})
    if args.admin_bind is not None:
        host, port = parse_bind(
            args.admin_bind, base.web_service_port, default_host=base.web_bind_address, option="--admin-bind"
        )
        overrides.update({"server.web_bind_address": host, "server.web_service_port": port})
    for option, target in _VALUES.items():
        if getattr(args, option, None) is not None:
            overrides[target] = getattr(args, option) if "port" in option else str(getattr(args, option))
    if getattr(args, "advertised_listeners", None) is not None:
        overrides["protocol.advertised_listeners"] = parse_advertised_listeners(args.advertised_listeners)
    if getattr(args, "internal_listener_name", None) is not None:
        overrides["protocol.internal_listener_name"] = args.internal_listener_name
    for option, target in _SWITCHES.items():
        if getattr(args, option, False):
            overrides[target] = True
    credentials = {f: getattr(args, o) for o, f in _CREDENTIAL_FLAGS.items() if getattr(args, o, None) is not None}
    if getattr(args, "authentication_providers", None):
        credentials["authentication_providers"] = tuple(
            p.strip() for p in args.authentication_providers.split(",") if p.strip()
        )
    # a credential option turns authentication on (as before --config), and so does the .htpasswd
    # location in PULSAR_EXTRA_OPTS (Pulsar's -Dpulsar.auth.basic.conf); the claim name alone does not
    if set(credentials) - {"token_auth_claim"} or basic_auth_conf_from_env(os.environ):
        overrides["server.authentication_enabled"] = True
    if credentials:
        overrides.update({f"authentication.{f}": str(v) if f == "token_file" else v for f, v in credentials.items()})
    if args.authorization is not None:
        overrides.update({"server.authorization_file": str(args.authorization), "server.authorization_enabled": True})
    return effective_settings(conf, overrides, getattr(args, "defaults", None))
