"""Pulsar's ``broker.conf`` / ``standalone.conf`` for ``mledger standalone --config FILE``.

Theory of operation
-------------------
:data:`PULSAR_KEYS` is the one table from Pulsar's key names to mledger's settings: each
:class:`Key` names the setting(s) it fills (``section.field``: ``server``, ``protocol``,
``broker`` (:class:`~mledger.broker.BrokerConfig`), ``ledger``
(:class:`~mledger.core.ManagedLedgerConfig`), ``factory``
(:class:`~mledger.core.ManagedLedgerFactoryConfig`), ``authentication``
(:class:`~mledger.admin.AuthenticationSettings`), ``tls``
(:class:`~mledger.core.TlsSettings`)) and how its text is read and written back (units:
Pulsar's minutes are mledger's milliseconds).

:func:`read_pulsar_conf` parses the file (Java properties as Pulsar reads them: ``key=value`` or
``key: value``, ``#`` / ``!`` comments, a trailing ``\\`` continues the line, values trimmed;
an empty value leaves the default, as in Pulsar) into the modeled keys' values and what it does
not take, told apart by Pulsar's own list of broker keys (``pulsar_broker_keys.txt``, shipped
with the package, read by :func:`pulsar_fields`): Pulsar keys mledger does not model
(:attr:`PulsarConf.unmodeled`, ignored), keys that are not Pulsar's at all
(:attr:`PulsarConf.unknown`: likely typos, each with the closest Pulsar key; refused with
``strict``), and keys written without ``=`` or ``:`` (:attr:`PulsarConf.valueless`).
:meth:`PulsarConf.notes` words them, once at start-up and in ``--print-config``.
:func:`effective_settings` applies, in order, mledger's defaults, the file, then the command
line's overrides (``section.field`` -> value) and validates the result into a frozen
:class:`StandaloneSettings`; :func:`render_settings` writes it back in the file's format
(``--print-config``). Every number of the file is first checked against the Java type Pulsar
gives the key and its ``@FieldContext`` bounds (:func:`check_java_value`). A bad value raises
:class:`~mledger.core.ConfigError` naming the key and the value.
:func:`authorization_from_settings` maps ``authorizationEnabled`` / ``superUserRoles`` onto
:class:`~mledger.admin.Authorization`.

Defaults are mledger's (for ``standalone``: loopback binding, Pulsar's ports) where the file is
silent; ``--print-config`` shows them.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ._pulsar_keys import MANAGED_LEDGER_KEYS, MAX_MESSAGE_SIZE_KEY, Key, keys, read_bool, read_int
from .admin import AuthenticationSettings, Authorization, read_setting_file
from .broker import BROKER_MANAGED_LEDGER_CONFIG, BrokerConfig, preset_configs
from .core import (
    DEFAULT_HOST,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_PORT,
    ConfigError,
    ManagedLedgerConfig,
    ManagedLedgerFactoryConfig,
    TlsSettings,
    did_you_mean,
)
from .protocol import ListenerUrls, ProtocolConfig, fit_to_descriptors, parse_advertised_listeners
from .rest import PULSAR_MAX_CONCURRENT_HTTP_REQUESTS, PULSAR_MAX_HTTP_SERVER_CONNECTIONS

__all__ = [
    "PULSAR_KEYS",
    "Key",
    "PulsarConf",
    "PulsarField",
    "ServerSettings",
    "StandaloneSettings",
    "authorization_from_settings",
    "check_java_value",
    "effective_settings",
    "is_pulsar_key",
    "pulsar_fields",
    "read_pulsar_conf",
    "render_settings",
]


# -- values ------------------------------------------------------------------------------------


def _list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _write_listeners(listeners: Mapping[str, ListenerUrls]) -> str:
    return ",".join(
        f"{name}:{url}"
        for name, urls in listeners.items()
        for url in (urls.broker_service_url, urls.broker_service_url_tls, urls.broker_http_url, urls.broker_https_url)
        if url is not None
    )


PULSAR_KEYS: dict[str, Key] = {
    key.name: key
    for key in [
        # where: bindAddress is both servers' host; the TLS ports are off unless set
        Key("bindAddress", ("server.bind_address", "server.web_bind_address")),
        Key("advertisedAddress", ("protocol.advertised_address",)),
        Key("advertisedListeners", ("protocol.advertised_listeners",), parse_advertised_listeners, _write_listeners),
        Key("internalListenerName", ("protocol.internal_listener_name",)),
        *keys(
            "server",
            read_int,
            brokerServicePort="broker_service_port",
            brokerServicePortTls="broker_service_port_tls",
            webServicePort="web_service_port",
            webServicePortTls="web_service_port_tls",
        ),
        # the protocol (maxMessageSize also bounds the cursor ledger's entries, as Pulsar's bookies)
        MAX_MESSAGE_SIZE_KEY,
        Key("keepAliveIntervalSeconds", ("protocol.keep_alive_interval_seconds",), read_int),
        Key("maxPendingPublishRequestsPerConnection", ("protocol.max_pending_sends",), read_int),
        # connection limits: Pulsar's keys, then mledger's transport timeouts (not Pulsar keys)
        Key("brokerMaxConnections", ("protocol.broker_max_connections",), read_int),
        Key("brokerMaxConnectionsPerIp", ("protocol.broker_max_connections_per_ip",), read_int),
        Key("maxHttpServerConnections", ("server.max_http_server_connections",), read_int),
        Key("maxConcurrentHttpRequests", ("server.max_concurrent_http_requests",), read_int),
        Key("firstByteTimeoutSeconds", ("protocol.first_byte_timeout_seconds",), float, java_type="double"),
        Key("tlsHandshakeTimeoutSeconds", ("protocol.tls_handshake_timeout_seconds",), float, java_type="double"),
        Key("maxConcurrentTlsHandshakes", ("protocol.max_concurrent_tls_handshakes",), read_int, java_type="int"),
        # TLS
        *keys(
            "tls",
            str,
            tlsCertificateFilePath="certificate_file_path",
            tlsKeyFilePath="key_file_path",
            tlsTrustCertsFilePath="trust_certs_file_path",
        ),
        Key("tlsRequireTrustedClientCertOnConnect", ("tls.require_trusted_client_cert_on_connect",), read_bool),
        *keys("tls", _list, tlsProtocols="protocols", tlsCiphers="ciphers"),
        # authentication and authorization
        Key("authenticationEnabled", ("server.authentication_enabled",), read_bool),
        Key("authenticationProviders", ("authentication.authentication_providers",), _list),
        Key("anonymousUserRole", ("authentication.anonymous_user_role",)),
        Key("tokenSecretKey", ("authentication.token_secret_key",), secret=True),
        Key("tokenPublicKey", ("authentication.token_public_key",)),
        *keys(
            "authentication",
            str,
            tokenPublicAlg="token_public_alg",
            tokenAuthClaim="token_auth_claim",
            tokenAudienceClaim="token_audience_claim",
            tokenAudience="token_audience",
            basicAuthConf="basic_auth_conf",
        ),
        # password checks: mledger's own keys (Pulsar verifies on its I/O threads, limits no failures)
        *(
            Key(name, (f"authentication.{target}",), read_int, java_type="int")
            for name, target in {
                "maxConcurrentPasswordChecks": "max_concurrent_password_checks",
                "maxAuthenticationFailuresPerUserPerIp": "max_authentication_failures_per_user_per_ip",
                "maxAuthenticationFailuresPerIp": "max_authentication_failures_per_ip",
                "authenticationFailureWindowSeconds": "authentication_failure_window_seconds",
            }.items()
        ),
        Key("authorizationEnabled", ("server.authorization_enabled",), read_bool),
        Key("superUserRoles", ("server.super_user_roles",), _list),
        Key("authenticateMetricsEndpoint", ("broker.authenticate_metrics_endpoint",), read_bool),
        # the broker
        Key("clusterName", ("broker.cluster_name",)),
        Key("replicatorPrefix", ("broker.replicator_prefix",)),
        Key("schemaCompatibilityStrategy", ("broker.schema_compatibility_strategy",)),
        *keys(
            "broker",
            read_bool,
            allowAutoTopicCreation="allow_auto_topic_creation",
            delayedDeliveryEnabled="delayed_delivery_enabled",
            isDelayedDeliveryDeliverAtTimeStrict="delayed_delivery_deliver_at_time_strict",
            brokerDeduplicationEnabled="deduplication_enabled",
            isAllowAutoUpdateSchemaEnabled="is_allow_auto_update_schema_enabled",
        ),
        *keys(
            "broker",
            read_int,
            dispatcherMaxReadBatchSize="dispatcher_max_read_batch_size",
            maxUnackedMessagesPerConsumer="max_unacked_messages_per_consumer",
            maxUnackedMessagesPerSubscription="max_unacked_messages_per_subscription",
            subscriptionKeySharedConsistentHashingReplicaPoints=(
                "subscription_key_shared_consistent_hashing_replica_points"
            ),
            delayedDeliveryTickTimeMillis="delayed_delivery_tick_time_millis",
            brokerDeduplicationMaxNumberOfProducers="deduplication_max_number_of_producers",
            brokerDeduplicationEntriesInterval="deduplication_entries_interval",
            brokerDeduplicationSnapshotFrequencyInSeconds="deduplication_snapshot_frequency_in_seconds",
            brokerDeduplicationSnapshotIntervalSeconds="deduplication_snapshot_interval_seconds",
            brokerDeduplicationProducerInactivityTimeoutMinutes="deduplication_producer_inactivity_timeout_minutes",
            retentionCheckIntervalInSeconds="retention_check_interval_in_seconds",
            statsUpdateFrequencyInSecs="stats_update_frequency_in_secs",
            brokerServiceCompactionMonitorIntervalInSeconds="broker_service_compaction_monitor_interval_in_seconds",
            brokerServiceCompactionThresholdInBytes="broker_service_compaction_threshold_in_bytes",
        ),
        # the broker's timers: message TTL, inactive topics, backlog quotas (issue 34)
        *keys(
            "broker",
            read_int,
            messageExpiryCheckIntervalInMinutes="message_expiry_check_interval_in_minutes",
            ttlDurationDefaultInSeconds="ttl_duration_default_in_seconds",
            brokerDeleteInactiveTopicsFrequencySeconds="broker_delete_inactive_topics_frequency_seconds",
            brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=(
                "broker_delete_inactive_topics_max_inactive_duration_seconds"
            ),
            backlogQuotaCheckIntervalInSeconds="backlog_quota_check_interval_in_seconds",
            backlogQuotaDefaultLimitBytes="backlog_quota_default_limit_bytes",
            backlogQuotaDefaultLimitSecond="backlog_quota_default_limit_second",
        ),
        *keys(
            "broker",
            read_bool,
            brokerDeleteInactiveTopicsEnabled="broker_delete_inactive_topics_enabled",
            brokerDeleteInactivePartitionedTopicMetadataEnabled=(
                "broker_delete_inactive_partitioned_topic_metadata_enabled"
            ),
            backlogQuotaCheckEnabled="backlog_quota_check_enabled",
            preciseTimeBasedBacklogQuotaCheck="precise_time_based_backlog_quota_check",
        ),
        *keys(
            "broker",
            str,
            brokerDeleteInactiveTopicsMode="broker_delete_inactive_topics_mode",
            backlogQuotaDefaultRetentionPolicy="backlog_quota_default_retention_policy",
        ),
        # the managed ledger and its cursors (ManagedLedgerConfig under the broker's names)
        *MANAGED_LEDGER_KEYS,
    ]
}
"""Pulsar's key -> the mledger settings it fills; every key ``--config`` reads (see the module
docstring)."""


# -- Pulsar's keys and their Java types -------------------------------------------------------

PULSAR_KEY_LIST = "pulsar_broker_keys.txt"
"""Pulsar's broker keys with their Java types, a data file of this package (its header names the
Pulsar version and the files it was taken from)."""


@dataclass(frozen=True)
class PulsarField:
    """A key of Pulsar's broker (a line of :data:`PULSAR_KEY_LIST`): the Java type of its value
    (``property`` for one Pulsar reads from the properties) and its ``@FieldContext`` bounds."""

    java_type: str
    minimum: int | None = None
    maximum: int | None = None
    why: str = ""
    """Why the bounds are what they are (the data file's comment), for the error message."""


@functools.cache
def pulsar_fields() -> Mapping[str, PulsarField]:
    """Pulsar's broker keys -> :class:`PulsarField`, read once from :data:`PULSAR_KEY_LIST`; a
    key ending in ``*`` is a prefix Pulsar passes on (``bookkeeper_*``). O(keys)."""
    text = importlib.resources.files("mledger").joinpath(PULSAR_KEY_LIST).read_text(encoding="utf-8")
    fields: dict[str, PulsarField] = {}
    for raw in text.splitlines():
        line, _, why = raw.partition("#")
        words = line.split()
        if not words:
            continue
        bounds = [None if w == "-" else int(w) for w in words[2:4]] + [None, None]
        fields[words[0]] = PulsarField(words[1], bounds[0], bounds[1], why.strip())
    return fields


def is_pulsar_key(name: str) -> bool:
    """Whether ``name`` is a key of Pulsar's broker (or one mledger models)."""
    if name in PULSAR_KEYS or name in pulsar_fields():
        return True
    return any(k.endswith("*") and name.startswith(k[:-1]) for k in pulsar_fields())


def _pulsar_key_names() -> list[str]:
    return [*PULSAR_KEYS, *(k for k in pulsar_fields() if not k.endswith("*") and k not in PULSAR_KEYS)]


_JAVA_INTEGERS = {
    **dict.fromkeys(("int", "Integer", "Optional<Integer>"), (INT32_MIN, INT32_MAX)),
    **dict.fromkeys(("long", "Long", "Optional<Long>"), (INT64_MIN, INT64_MAX)),
}
_JAVA_DOUBLES = {"double", "Double", "Optional<Double>"}
_JAVA_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


def check_java_value(key: Key, text: str) -> None:
    """``ValueError`` unless ``text`` reads as a value of the Java type Pulsar gives ``key``:
    a whole number within the type (int: 32 bits, long: 64) and the field's ``@FieldContext``
    bounds (``maxMessageSize`` at most ``Integer.MAX_VALUE`` - 10 KB: its frame is an int too),
    a number for a double; other types are left to ``key.read``."""
    fields = pulsar_fields()
    spec = fields.get(key.name, PulsarField("property"))
    java_type = key.java_type or spec.java_type
    # mledger's own keys (not in Pulsar's list) are typed like Pulsar's, but are not Pulsar's
    owner = "Pulsar's" if key.name in fields else "mledger's"
    if java_type in _JAVA_DOUBLES:
        if math.isnan(float(text)):
            raise ValueError(f"not a number ({owner} {key.name} is a Java {java_type})")
        return
    if java_type not in _JAVA_INTEGERS:
        return
    if not _JAVA_INTEGER_TEXT.fullmatch(text):
        raise ValueError(f"not a whole number ({owner} {key.name} is a Java {java_type})")
    low, high = _JAVA_INTEGERS[java_type]
    low = low if spec.minimum is None else spec.minimum
    high = high if spec.maximum is None else spec.maximum
    if not low <= int(text) <= high:
        why = f" ({spec.why})" if spec.why else ""
        raise ValueError(f"out of range: {owner} {key.name} is a Java {java_type} from {low} to {high}{why}")


# -- the file ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PulsarConf:
    """A parsed Pulsar configuration file: ``values`` (modeled key -> text, the last one when a
    key repeats, empty values left out), ``unmodeled`` (Pulsar keys mledger does not model, with
    a value), ``unknown`` (keys that are not Pulsar's, with a value or not) and ``valueless``
    (keys written without ``=``, ``:`` or a space before a value); each key once, in file order."""

    path: str
    values: Mapping[str, str] = field(default_factory=dict)
    unmodeled: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    valueless: tuple[str, ...] = ()

    def notes(self) -> tuple[str, ...]:
        """One line per kind of key the file has that mledger does not take: what start-up
        logs and ``--print-config`` prints as comments. Empty when there is none."""
        notes = []
        if self.unmodeled:
            notes.append("not modeled by mledger (ignored): " + ", ".join(self.unmodeled))
        if self.unknown:
            notes.append(f"not Pulsar keys (ignored; a typo?): {self.unknown_keys()}")
        if self.valueless:
            notes.append("no value (no '=' or ':'; the default stays): " + ", ".join(self.valueless))
        return tuple(notes)

    def unknown_keys(self) -> str:
        """The keys that are not Pulsar's, each with the closest Pulsar key when one is close."""
        names = _pulsar_key_names()
        return ", ".join(key + did_you_mean(key, names) for key in self.unknown)


def read_pulsar_conf(path: str | Path, *, strict: bool = False) -> PulsarConf:
    """Parse ``path`` (see the module docstring), a file of at most
    :data:`~mledger.admin.MAX_SETTING_FILE_BYTES`. :class:`ConfigError` if it cannot be
    read, a line has no key, or (``strict``, ``--strict-config``) a key is not Pulsar's."""
    try:
        text = read_setting_file(path, "the config file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read the config file {str(path)!r}: {exc}") from None
    values: dict[str, str] = {}
    unmodeled: dict[str, None] = {}
    unknown: dict[str, None] = {}
    valueless: dict[str, None] = {}
    for number, line in _logical_lines(text):
        key, value, separated = _split(line)
        if not key:
            raise ConfigError(f"{path}:{number}: no key in {line!r}")
        if not separated:
            valueless.setdefault(key, None)
        if not is_pulsar_key(key):
            unknown.setdefault(key, None)
        elif not value:
            continue  # Pulsar: an empty value keeps the default
        elif key in PULSAR_KEYS:
            values[key] = value
        else:
            unmodeled.setdefault(key, None)
    conf = PulsarConf(str(path), values, tuple(unmodeled), tuple(unknown), tuple(valueless))
    if strict and conf.unknown:
        raise ConfigError(f"{path}: not Pulsar keys (--strict-config): {conf.unknown_keys()}")
    return conf


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip() if not pending else raw.lstrip()
        if not pending:
            start = number
            if not line or line.startswith(("#", "!")):
                continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _split(line: str) -> tuple[str, str, bool]:
    """``(key, value, separated)``: ``separated`` False for a line that is a key alone."""
    cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if cut < 0:
        key, space, value = line.partition(" ")
        return key.strip(), value.strip(), bool(space)
    return line[:cut].strip(), line[cut + 1 :].strip(), True


# -- the effective settings --------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSettings:
    """What ``mledger standalone`` listens on and who may do what (the ``server`` section)."""

    bind_address: str = DEFAULT_HOST
    """The protocol server's host (Pulsar's ``bindAddress``; Pulsar binds 0.0.0.0, mledger loopback)."""
    web_bind_address: str = DEFAULT_HOST
    """The REST server's host (``bindAddress`` too; ``--admin-bind`` sets it alone)."""
    broker_service_port: int = 6650
    broker_service_port_tls: int | None = None
    web_service_port: int = 8080
    web_service_port_tls: int | None = None
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    super_user_roles: tuple[str, ...] = ()
    authorization_file: str | None = None
    """mledger's JSON permissions (``--authorization``); see :func:`authorization_from_settings`."""
    max_http_server_connections: int = field(
        default_factory=lambda: fit_to_descriptors(PULSAR_MAX_HTTP_SERVER_CONNECTIONS)
    )
    """HTTP connections open at most, per port (``maxHttpServerConnections``; 0: no limit;
    default: Pulsar's 2048 lowered to fit the descriptor limit)."""
    max_concurrent_http_requests: int = field(
        default_factory=lambda: fit_to_descriptors(PULSAR_MAX_CONCURRENT_HTTP_REQUESTS)
    )
    """HTTP requests answered at once, per port (``maxConcurrentHttpRequests``; 0: no limit;
    default: Pulsar's 1024 lowered likewise)."""

    def __post_init__(self) -> None:
        for setting, key in _PORT_KEYS.items():
            port = getattr(self, setting)
            if port is not None and (type(port) is not int or not 0 <= port <= MAX_PORT):
                raise ConfigError(f"{key}={port!r}: out of range: a port is 0 to {MAX_PORT} (0: any free port)")


_PORT_KEYS = {
    "broker_service_port": "brokerServicePort",
    "broker_service_port_tls": "brokerServicePortTls",
    "web_service_port": "webServicePort",
    "web_service_port_tls": "webServicePortTls",
}


@dataclass(frozen=True)
class StandaloneSettings:
    """The effective settings of ``mledger standalone``: defaults, then the file, then flags."""

    server: ServerSettings
    protocol: ProtocolConfig
    broker: BrokerConfig
    ledger: ManagedLedgerConfig
    factory: ManagedLedgerFactoryConfig
    authentication_settings: AuthenticationSettings
    """The providers' settings as given, whether or not authentication is on."""
    tls: TlsSettings | None
    """None: no TLS port is set."""
    notes: tuple[str, ...] = ()
    """What the file has that mledger does not take (:meth:`PulsarConf.notes`)."""

    @property
    def authentication(self) -> AuthenticationSettings | None:
        """The providers' settings when authentication is on (``authenticationEnabled``, or a
        credential option), else None."""
        return self.authentication_settings if self.server.authentication_enabled else None


_DEFAULTS: dict[str, Any] = {
    "server": ServerSettings(),
    "protocol": ProtocolConfig(),
    "broker": BrokerConfig(),
    "ledger": BROKER_MANAGED_LEDGER_CONFIG,
    "factory": ManagedLedgerFactoryConfig(),
    "authentication": AuthenticationSettings(),
}


def effective_settings(
    conf: PulsarConf | None = None, overrides: Mapping[str, Any] | None = None, defaults: str | None = None
) -> StandaloneSettings:
    """Defaults, then ``conf``'s values, then ``overrides`` (``"section.field"`` -> value, the
    command line's flags), validated. :class:`ConfigError` names the key and value at fault.
    ``defaults`` names a Pulsar version (``--defaults``) whose cursor settings and rules replace
    mledger's defaults for the managed ledgers and their factory
    (:func:`~mledger.broker.preset_configs`); the file and the flags apply on top."""
    base = dict(_DEFAULTS)
    if defaults is not None:
        broker, base["factory"] = preset_configs(defaults)
        base["ledger"] = broker.ledger_config
    sections: dict[str, dict[str, Any]] = {name: {} for name in (*base, "tls")}
    for name, text in (conf.values if conf else {}).items():
        key = PULSAR_KEYS[name]
        try:
            check_java_value(key, text)
            value = key.read(text)
        except ValueError as exc:
            raise ConfigError(f"{conf.path if conf else ''}: {name}={text!r}: {exc}") from None
        for target in key.targets:
            section, _, setting = target.partition(".")
            sections[section][setting] = value
    for target, value in (overrides or {}).items():
        section, _, setting = target.partition(".")
        sections[section][setting] = value
    source = f" (from {conf.path})" if conf else ""
    built: dict[str, Any] = {}
    for section, default in base.items():
        try:
            built[section] = replace(default, **sections[section])
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"{exc}{source}") from None
    server: ServerSettings = built["server"]
    tls = _tls(server, sections["tls"], source)
    protocol = replace(
        built["protocol"],
        host=server.bind_address,
        port=server.broker_service_port,
        tls_port=server.broker_service_port_tls,
        tls=tls,
    )
    broker = replace(built["broker"], managed_ledger_config=built["ledger"])
    return StandaloneSettings(
        server,
        protocol,
        broker,
        built["ledger"],
        built["factory"],
        built["authentication"],
        tls,
        conf.notes() if conf else (),
    )


def _tls(server: ServerSettings, values: Mapping[str, Any], source: str) -> TlsSettings | None:
    if server.broker_service_port_tls is None and server.web_service_port_tls is None:
        return None
    try:
        return TlsSettings(
            certificate_file_path=values.get("certificate_file_path") or "",
            key_file_path=values.get("key_file_path") or "",
            **{k: v for k, v in values.items() if k not in ("certificate_file_path", "key_file_path")},
        )
    except ConfigError as exc:
        raise ConfigError(f"brokerServicePortTls/webServicePortTls: {exc}{source}") from None


def authorization_from_settings(server: ServerSettings) -> Authorization | None:
    """The :class:`~mledger.admin.Authorization` of ``authorizationEnabled``, ``superUserRoles``
    and mledger's permissions file (``--authorization``), the one place they meet:

    * a permissions file: its grants and superusers, plus ``superUserRoles`` (authorization on);
    * ``authorizationEnabled=true`` without one: the superusers of ``superUserRoles`` and no
      grant yet: other roles get what is granted later (the namespace and topic permissions a
      set-up script gives over REST), until then nothing;
    * neither: None (authorization off: every call allowed).
    """
    if server.authorization_file is not None:
        base = Authorization.from_json(Path(server.authorization_file))
        if not server.super_user_roles:
            return base
        data = base.to_json()
        roles = sorted({*data["superUserRoles"], *server.super_user_roles})
        return Authorization(data["permissions"], roles)
    if server.authorization_enabled:
        return Authorization({}, server.super_user_roles)
    return None


# -- --print-config ----------------------------------------------------------------------------


def render_settings(settings: StandaloneSettings) -> str:
    """``settings`` as Pulsar's ``key=value`` lines, one per key of :data:`PULSAR_KEYS` (what
    ``--print-config`` prints; the output reads back with ``--config``), then what the file had
    that mledger does not take (:meth:`PulsarConf.notes`), as comments. Key material other than ``file:`` URLs is shown
    as ``<redacted>``."""
    objects: dict[str, Any] = {
        "server": settings.server,
        "protocol": settings.protocol,
        "broker": settings.broker,
        "ledger": settings.ledger,
        "factory": settings.factory,
        "authentication": settings.authentication_settings,
        "tls": settings.tls,
    }
    lines = ["# mledger standalone: effective settings (Pulsar's names)"]
    if settings.ledger.pulsar_rules is not None:
        lines.append(
            f"# cursors under {settings.ledger.pulsar_rules}'s rules (--defaults {settings.ledger.pulsar_rules})"
        )
    for key in PULSAR_KEYS.values():
        section, _, setting = key.targets[0].partition(".")
        holder = objects[section]
        value = getattr(holder, setting) if holder is not None else None
        text = key.write(value) if value is not None else ""
        if key.secret and text and not text.startswith("file:"):
            text = "<redacted>"
        lines.append(f"{key.name}={text}")
    if settings.server.web_bind_address != settings.server.bind_address:
        lines.append(f"# the REST server binds {settings.server.web_bind_address} (--admin-bind)")
    if settings.server.authorization_file:
        lines.append(f"# permissions: {settings.server.authorization_file} (--authorization)")
    lines += [f"# {note}" for note in settings.notes]
    return "\n".join(lines) + "\n"
