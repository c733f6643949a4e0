"""Pulsar's binary protocol: real Pulsar clients produce to and consume from mledger's broker.

>>> from mledger.protocol import EmbeddedBroker
>>> with EmbeddedBroker() as broker:        # doctest: +SKIP
...     client = pulsar.Client(broker.service_url)

Layers (docs/architecture.md), each module importing only modules named before it:
:mod:`~mledger.protocol.framing` and :mod:`~mledger.protocol.codec` (bytes <-> frames and
commands), :mod:`~mledger.protocol.connection` (sans-I/O handshake and command table),
:mod:`~mledger.protocol.config` (settings and counters), :mod:`~mledger.protocol.access`
(producer access modes, tokens), :mod:`~mledger.protocol.session` (commands -> broker calls,
SENDs through the broker's pipelined publish; no sockets, no
event loop: it reaches its server through the :class:`~mledger.protocol.session.SessionHost`
protocol; split by job into private modules, see its docstring), :mod:`~mledger.protocol.server` (the asyncio shell) and
:mod:`~mledger.protocol.embedded` (a server on its own loop in a background thread). The pytest
fixture is in :mod:`mledger_pytest`.
The coverage of every command is in ``docs/protocol-coverage.md``.
"""

from .access import ClientAuth as ClientAuth
from .commands import COMMANDS as COMMANDS, CommandSpec as CommandSpec
from .config import (
    ListenerUrls as ListenerUrls,
    ProtocolConfig as ProtocolConfig,
    ProtocolStats as ProtocolStats,
    parse_advertised_listeners as parse_advertised_listeners,
)
from .connection import (
    PROTOCOL_VERSION as PROTOCOL_VERSION,
    Connection as Connection,
    ConnectionEvent as ConnectionEvent,
    ConnectionState as ConnectionState,
    Request as Request,
)
from .embedded import BrokerClock as BrokerClock, EmbeddedBroker as EmbeddedBroker
from .errors import (
    FrameTooLargeError as FrameTooLargeError,
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    StateTransitionError as StateTransitionError,
    UnknownListenerError as UnknownListenerError,
)
from .server import ProtocolServer as ProtocolServer

__all__ = [
    "ClientAuth",
    "COMMANDS",
    "PROTOCOL_VERSION",
    "BrokerClock",
    "CommandSpec",
    "Connection",
    "ConnectionEvent",
    "ConnectionState",
    "EmbeddedBroker",
    "FrameTooLargeError",
    "ListenerUrls",
    "LocalProtocolError",
    "ProtocolConfig",
    "ProtocolError",
    "ProtocolServer",
    "ProtocolStats",
    "RemoteProtocolError",
    "Request",
    "StateTransitionError",
    "UnknownListenerError",
    "parse_advertised_listeners",
]
