"""Settings and counters of a protocol server: :class:`ProtocolConfig` and :class:`ProtocolStats`.

Plain data, below every part of the server that reads them: the session answers CONNECT with
the configured limits and counts into the stats; the asyncio shell binds and paces with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import __version__
from ..core.errors import ConfigError
from ..core.tls import TlsSettings
from .framing import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["ProtocolConfig", "ProtocolStats"]


@dataclass(frozen=True)
class ProtocolConfig:
    """Settings of a :class:`~mledger.protocol.server.ProtocolServer` (Pulsar's names in
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

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be an integer in [0, 65535], got {self.port!r}")
        if self.tls_port is not None:
            if not isinstance(self.tls_port, int) or not 0 <= self.tls_port <= 65535:
                raise ConfigError(f"tls_port must be an integer in [0, 65535], got {self.tls_port!r}")
            if self.tls is None:
                raise ConfigError("tls_port needs tls (tlsCertificateFilePath and tlsKeyFilePath)")
        if not isinstance(self.max_message_size, int) or self.max_message_size < 1024:
            raise ConfigError(f"max_message_size must be an integer >= 1024, got {self.max_message_size!r}")
        if self.keep_alive_interval_seconds <= 0:
            raise ConfigError(f"keep_alive_interval_seconds must be > 0, got {self.keep_alive_interval_seconds!r}")
        if not isinstance(self.max_pending_sends, int) or self.max_pending_sends < 1:
            raise ConfigError(f"max_pending_sends must be an integer >= 1, got {self.max_pending_sends!r}")


@dataclass(frozen=True)
class ProtocolStats:
    """A snapshot of a protocol server's counters (Pulsar's ``pulsar_in_messages_total``-style
    metrics), from :meth:`ProtocolServer.stats() <mledger.protocol.server.ProtocolServer.stats>`.

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
