"""Settings and counters of a protocol server: :class:`ProtocolConfig` and :class:`ProtocolStats`.

Plain data, below every part of the server that reads them: the session answers CONNECT with
the configured limits and counts into the stats; the asyncio shell binds and paces with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .. import __version__
from ..core import INT32_MAX, MAX_PORT, ConfigError, TlsSettings
from ._errors import UnknownListenerError
from ._framing import DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING

__all__ = ["ListenerUrls", "ProtocolConfig", "ProtocolStats", "lookup_urls", "parse_advertised_listeners"]


@dataclass(frozen=True)
class ListenerUrls:
    """The addresses of one advertised listener (Pulsar's ``AdvertisedListener``): what a
    LOOKUP naming the listener answers. Any may be None (not advertised on that listener)."""

    broker_service_url: str | None = None
    """``pulsar://host:port``."""
    broker_service_url_tls: str | None = None
    """``pulsar+ssl://host:port``."""
    broker_http_url: str | None = None
    """``http://host:port``."""
    broker_https_url: str | None = None
    """``https://host:port``."""


_SCHEMES = {
    "pulsar": "broker_service_url",
    "pulsar+ssl": "broker_service_url_tls",
    "http": "broker_http_url",
    "https": "broker_https_url",
}


def parse_advertised_listeners(text: str) -> dict[str, ListenerUrls]:
    """Pulsar's ``advertisedListeners`` value, ``name:scheme://host:port`` entries separated by
    commas (``internal:pulsar://10.0.0.1:6650,external:pulsar://broker.example:6650``), as a
    map in the order the names first appear. A name may repeat once per scheme (``pulsar``,
    ``pulsar+ssl``, ``http``, ``https``). ``ConfigError`` with Pulsar's messages
    (``MultipleListenerValidator``): an entry without a name, a scheme twice for one listener,
    one ``host:port`` under two listeners, a URL without host or port.

    >>> parse_advertised_listeners("external:pulsar://h:6650, external:pulsar+ssl://h:6651")
    {'external': ListenerUrls(broker_service_url='pulsar://h:6650', broker_service_url_tls='pulsar+ssl://h:6651', \
broker_http_url=None, broker_https_url=None)}
    """
    urls: dict[str, dict[str, str]] = {}
    owners: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        index = entry.find(":")
        if index <= 0:
            raise ConfigError(
                f"the configure entry `advertisedListeners` is invalid. because {entry} do not contain listener name"
            )
        name, url = entry[:index].strip(), entry[index + 1 :].strip()
        slot = _listener_slot(url)
        listener = urls.setdefault(name, {})
        if slot in listener:
            raise ConfigError(f"there are redundant configure for listener `{name}`")
        listener[slot] = url
        parts = urlsplit(url)
        host_port = f"{parts.hostname}:{parts.port}"
        if owners.setdefault(host_port, name) != name:
            raise ConfigError(f"must not specify `{host_port}` to different listener.")
    return {name: ListenerUrls(**slots) for name, slots in urls.items()}


def _listener_slot(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port = None
        parts = urlsplit("")
    slot = _SCHEMES.get(parts.scheme.lower())
    if slot is None or not parts.hostname or port is None:
        raise ConfigError(f"the value {url} in the `advertisedListeners` configure is invalid")
    return slot


def lookup_urls(
    config: ProtocolConfig, service_url: str, listener_name: str | None = None, tls_service_url: str | None = None
) -> ListenerUrls:
    """What a lookup naming ``listener_name`` answers (Pulsar's ``NamespaceService``): that
    advertised listener's addresses; with no name (None or blank), the internal listener's, or
    ``service_url`` and ``tls_service_url`` (the bound ``pulsar://`` and ``pulsar+ssl://``
    addresses) when no listeners are configured.
    :class:`~mledger.protocol.UnknownListenerError` (Pulsar's ``the broker do not have
    {name} listener``) for a name the broker does not advertise."""
    listeners = config.advertised_listeners
    if listener_name is None or not listener_name.strip():
        internal = listeners.get(config.internal_listener_name or "")
        if internal is not None:
            return internal
        return ListenerUrls(broker_service_url=service_url, broker_service_url_tls=tls_service_url)
    found = listeners.get(listener_name)
    if found is None:
        raise UnknownListenerError(f"the broker do not have {listener_name} listener")
    return found


MAX_MESSAGE_SIZE_LIMIT = INT32_MAX - FRAME_PADDING
"""The largest ``maxMessageSize``: Pulsar's ``@FieldContext(maxValue = Integer.MAX_VALUE -
Commands.MESSAGE_SIZE_FRAME_PADDING)``, so that the frame limit and CONNECTED's
``max_message_size`` (an int32) hold it."""


@dataclass(frozen=True)
class ProtocolConfig:
    """Settings of a :class:`~mledger.protocol.ProtocolServer` (Pulsar's names in
    snake_case where it has them)."""

    host: str = "127.0.0.1"
    """Address to bind."""
    port: int = 6650
    """TCP port; 0 picks a free one (tests)."""
    tls_port: int | None = None
    """TLS port (``pulsar+ssl://``, Pulsar's ``brokerServicePortTls``) beside ``port``; None: no
    TLS listener; 0 picks a free one. Needs ``tls``."""
    tls: TlsSettings | None = None
    """Certificate, key and trust files of the TLS port (Pulsar's ``tls*`` settings)."""
    advertised_address: str | None = None
    """Host clients are told to connect to in LOOKUP answers (default: ``host``)."""
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    """Largest message accepted, advertised in CONNECTED (Pulsar's ``maxMessageSize``)."""
    keep_alive_interval_seconds: float = 30.0
    """Idle time before the server pings a connection; one without an answer by the next
    check is closed (Pulsar's ``keepAliveIntervalSeconds``)."""
    max_pending_sends: int = 1000
    """Appends in flight per connection before the server stops reading it
    (``maxPendingPublishRequestsPerConnection``)."""
    server_version: str = f"mledger-{__version__}"
    advertised_listeners: Mapping[str, ListenerUrls] = field(default_factory=dict)
    """Named addresses a lookup may ask for (Pulsar's ``advertisedListeners``; clients name one
    with ``listenerName``); :func:`parse_advertised_listeners` reads Pulsar's text form."""
    internal_listener_name: str | None = None
    """The listener a lookup naming none answers with (Pulsar's ``internalListenerName``;
    default: the first of ``advertised_listeners``)."""
    broker_max_connections: int = 0
    """Client connections open at most, both ports together; one more is answered ERROR
    ``NotAllowedError`` ("Reached the maximum number of connections") and closed, as Pulsar's
    ``ServerCnx.channelActive`` answers (``brokerMaxConnections``; 0: no limit)."""
    broker_max_connections_per_ip: int = 0
    """Client connections open at most from one IP address, likewise
    (``brokerMaxConnectionsPerIp``; 0: no limit)."""
    first_byte_timeout_seconds: float = 10.0
    """A connection that sends nothing within this many seconds of being accepted (of its TLS
    handshake, on the TLS port) is closed (mledger's; Pulsar closes one whose CONNECT has not
    completed within ``keepAliveIntervalSeconds``). Real time, never the broker's test clock."""
    tls_handshake_timeout_seconds: float = 5.0
    """A TLS handshake not done within this many seconds is dropped (mledger's; real time)."""
    max_concurrent_tls_handshakes: int = 64
    """TLS handshakes in progress at most on the TLS port: at the limit the port stops
    accepting until one ends, and new connections wait in the backlog (mledger's; each pending
    handshake holds about 300 KB)."""

    def __post_init__(self) -> None:
        if self.advertised_listeners:
            if not self.internal_listener_name:  # Pulsar's default: the first listener
                object.__setattr__(self, "internal_listener_name", next(iter(self.advertised_listeners)))
            if self.internal_listener_name not in self.advertised_listeners:
                raise ConfigError(
                    "the `advertisedListeners` configure do not contain `internalListenerName` entry "
                    f"({self.internal_listener_name!r})"
                )
        if not isinstance(self.port, int) or not 0 <= self.port <= MAX_PORT:
            raise ConfigError(f"port must be an integer in [0, {MAX_PORT}], got {self.port!r}")
        if self.tls_port is not None:
            if not isinstance(self.tls_port, int) or not 0 <= self.tls_port <= MAX_PORT:
                raise ConfigError(f"tls_port must be an integer in [0, {MAX_PORT}], got {self.tls_port!r}")
            if self.tls is None:
                raise ConfigError("tls_port needs tls (tlsCertificateFilePath and tlsKeyFilePath)")
        if not isinstance(self.max_message_size, int) or not 1024 <= self.max_message_size <= MAX_MESSAGE_SIZE_LIMIT:
            raise ConfigError(
                f"max_message_size must be an integer in [1024, {MAX_MESSAGE_SIZE_LIMIT}] (the frame, "
                f"max_message_size + {FRAME_PADDING} bytes, is a Java int), got {self.max_message_size!r}"
            )
        if self.keep_alive_interval_seconds <= 0:
            raise ConfigError(f"keep_alive_interval_seconds must be > 0, got {self.keep_alive_interval_seconds!r}")
        if not isinstance(self.max_pending_sends, int) or self.max_pending_sends < 1:
            raise ConfigError(f"max_pending_sends must be an integer >= 1, got {self.max_pending_sends!r}")
        for name in ("broker_max_connections", "broker_max_connections_per_ip"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0 (0: no limit), got {value!r}")
        for name in ("first_byte_timeout_seconds", "tls_handshake_timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not isinstance(self.max_concurrent_tls_handshakes, int) or self.max_concurrent_tls_handshakes < 1:
            raise ConfigError(
                f"max_concurrent_tls_handshakes must be an integer >= 1, got {self.max_concurrent_tls_handshakes!r}"
            )


@dataclass(frozen=True)
class ProtocolStats:
    """A snapshot of a protocol server's counters (Pulsar's ``pulsar_in_messages_total``-style
    metrics), from :meth:`ProtocolServer.stats() <mledger.protocol.ProtocolServer.stats>`.

    Messages are counted as Pulsar counts them: a batch of N messages in one SEND (or one
    MESSAGE) counts N; bytes are the entries' bytes (metadata and payload)."""

    connections: int = 0
    """Client connections open now."""
    connections_opened: int = 0
    """Connections accepted since the start."""
    producers: int = 0
    """Producers open now."""
    consumers: int = 0
    """Consumers open now."""
    messages_in: int = 0
    """Messages received from producers (``num_messages`` of each SEND)."""
    bytes_in: int = 0
    """Bytes of the entries received from producers."""
    messages_out: int = 0
    """Messages delivered to consumers."""
    bytes_out: int = 0
    """Bytes of the entries delivered to consumers."""
    checksum_errors: int = 0
    """SENDs refused with ChecksumError."""
    validation_errors: int = 0
    """Messages consumers reported they could not validate (ACK with a validation error)."""
    protocol_errors: int = 0
    """Connections closed for breaking the protocol."""
    connections_refused: int = 0
    """Connections refused over ``broker_max_connections`` or ``broker_max_connections_per_ip``."""
    connections_timed_out: int = 0
    """Connections closed for sending nothing within ``first_byte_timeout_seconds``."""
    tls_handshakes_in_progress: int = 0
    """TLS handshakes in progress now (at most ``max_concurrent_tls_handshakes``)."""
    tls_handshakes_failed: int = 0
    """TLS handshakes that failed or timed out."""
    accept_pauses: int = 0
    """Times a port stopped accepting for want of file descriptors (or ``EMFILE``)."""
