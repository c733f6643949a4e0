"""Pulsar's binary protocol: real Pulsar clients produce to and consume from mledger's broker.

>>> from mledger.protocol import EmbeddedBroker
>>> with EmbeddedBroker() as broker:        # doctest: +SKIP
...     client = pulsar.Client(broker.service_url)

Layers (docs/architecture.md), each module importing only modules named before it:
:mod:`~mledger.protocol._framing` and :mod:`~mledger.protocol._codec` (bytes <-> frames and
commands), :mod:`~mledger.protocol._connection` (sans-I/O handshake and command table),
:mod:`~mledger.protocol._config` (settings and counters), :mod:`~mledger.protocol._access`
(producer access modes, tokens), :mod:`~mledger.protocol._session` (commands -> broker calls,
SENDs through the broker's pipelined publish; no sockets, no
event loop: it reaches its server through the :class:`~mledger.protocol._session.SessionHost`
protocol; split by job into private modules, see its docstring),
:mod:`~mledger.protocol._acceptor` (accepting within the file descriptors, for both servers'
ports), :mod:`~mledger.protocol._server` (the asyncio shell) and
:mod:`~mledger.protocol._embedded` (a server on its own loop in a background thread). The pytest
fixture is in :mod:`mledger_pytest`.
The coverage of every command is in ``docs/protocol-coverage.md``.
"""

from typing import TYPE_CHECKING

from ..core import lazy_getattr
from ._acceptor import (
    DESCRIPTORS as DESCRIPTORS,
    Acceptor as Acceptor,
    fit_to_descriptors as fit_to_descriptors,
    listening_socket as listening_socket,
    raise_descriptor_limit as raise_descriptor_limit,
)
from ._access import ClientAuth as ClientAuth
from ._commands import COMMANDS as COMMANDS, CommandSpec as CommandSpec
from ._config import (
    ListenerUrls as ListenerUrls,
    ProtocolConfig as ProtocolConfig,
    ProtocolStats as ProtocolStats,
    parse_advertised_listeners as parse_advertised_listeners,
)
from ._connection import (
    PROTOCOL_VERSION as PROTOCOL_VERSION,
    Connection as Connection,
    ConnectionEvent as ConnectionEvent,
    ConnectionState as ConnectionState,
    Request as Request,
)
from ._embedded import (
    AsyncBroker as AsyncBroker,
    AsyncBrokerClock as AsyncBrokerClock,
    BrokerClock as BrokerClock,
    EmbeddedBroker as EmbeddedBroker,
)
from ._errors import (
    FrameTooLargeError as FrameTooLargeError,
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    StateTransitionError as StateTransitionError,
    UnknownListenerError as UnknownListenerError,
)
from ._server import (
    ProtocolServer as ProtocolServer,
    freeze_startup_heap as freeze_startup_heap,
    stop_event_on_signals as stop_event_on_signals,
)

if TYPE_CHECKING:
    from ._replay import (
        BrokerFrame as BrokerFrame,
        CapturingProxy as CapturingProxy,
        ClientRead as ClientRead,
        replay_reads as replay_reads,
    )

# imported on first use (PEP 562): capturing and replaying client commands (deterministic runs);
# a broker that replays nothing, the pytest fixture's, never loads it
_LAZY = {
    "._replay": ("BrokerFrame", "CapturingProxy", "ClientRead", "replay_reads"),
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "DESCRIPTORS",
    "Acceptor",
    "ClientAuth",
    "COMMANDS",
    "PROTOCOL_VERSION",
    "AsyncBroker",
    "AsyncBrokerClock",
    "BrokerClock",
    "BrokerFrame",
    "CapturingProxy",
    "ClientRead",
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
    "fit_to_descriptors",
    "freeze_startup_heap",
    "stop_event_on_signals",
    "listening_socket",
    "ProtocolStats",
    "RemoteProtocolError",
    "Request",
    "replay_reads",
    "StateTransitionError",
    "UnknownListenerError",
    "parse_advertised_listeners",
    "raise_descriptor_limit",
]
