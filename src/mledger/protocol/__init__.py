"""Pulsar's binary protocol: real Pulsar clients produce to and consume from mledger's broker.

>>> from mledger.protocol import EmbeddedBroker
>>> with EmbeddedBroker() as broker:        # doctest: +SKIP
...     client = pulsar.Client(broker.service_url)

Layers (DESIGN.md "Binary protocol"): :mod:`~mledger.protocol.framing` and
:mod:`~mledger.protocol.codec` (bytes <-> frames and commands), :mod:`~mledger.protocol.connection`
(sans-I/O handshake and command table), :mod:`~mledger.protocol.session` (commands -> broker
calls), :mod:`~mledger.protocol.server` (the asyncio shell), :mod:`~mledger.protocol.embedded`
(a server in a background thread) and :mod:`~mledger.protocol.pytest_plugin` (the fixture).
The coverage of every command is in ``docs/protocol-coverage.md``.
"""

from .access import TokenAuth as TokenAuth
from .access import load_tokens as load_tokens
from .commands import COMMANDS as COMMANDS
from .commands import CommandSpec as CommandSpec
from .connection import PROTOCOL_VERSION as PROTOCOL_VERSION
from .connection import Connection as Connection
from .connection import ConnectionState as ConnectionState
from .connection import Request as Request
from .embedded import BrokerClock as BrokerClock
from .embedded import EmbeddedBroker as EmbeddedBroker
from .errors import FrameTooLargeError as FrameTooLargeError
from .errors import LocalProtocolError as LocalProtocolError
from .errors import ProtocolError as ProtocolError
from .errors import RemoteProtocolError as RemoteProtocolError
from .server import ProtocolConfig as ProtocolConfig
from .server import ProtocolServer as ProtocolServer
from .server import ProtocolStats as ProtocolStats

__all__ = [
    "COMMANDS",
    "PROTOCOL_VERSION",
    "BrokerClock",
    "CommandSpec",
    "Connection",
    "ConnectionState",
    "EmbeddedBroker",
    "FrameTooLargeError",
    "LocalProtocolError",
    "ProtocolConfig",
    "ProtocolError",
    "ProtocolServer",
    "ProtocolStats",
    "RemoteProtocolError",
    "Request",
    "TokenAuth",
    "load_tokens",
]
