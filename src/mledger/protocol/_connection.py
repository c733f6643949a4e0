"""One client connection, sans I/O: bytes in -> requests out, replies in -> bytes out.

Theory of operation
-------------------
:class:`Connection` knows Pulsar's framing, the handshake and the command table; it knows
nothing of sockets, the event loop or the broker. The server shell feeds it what the socket
read (:meth:`Connection.receive_data`) and gets back the :class:`Request` objects the session
must handle; everything to send (replies, MESSAGE frames, what the connection answers by
itself) accumulates in an outbox the shell drains with :meth:`Connection.data_to_send`.

States, moved only by :func:`next_state` over :data:`TRANSITIONS` (h11's ``_state.py``: a
missing ``(state, event)`` pair is refused with
:class:`~mledger.protocol.StateTransitionError`, never assigned by hand)::

    AWAITING_CONNECT --CONNECT--> CONNECTING --accept_connect--> CONNECTED --close--> CLOSED
                                             --refuse_connect--> CLOSED
    (close from any state -> CLOSED)

What the connection answers by itself, without the session:

* PING -> PONG; PONG and AUTH_RESPONSE only mark the connection alive;
* a request the table marks unsupported -> ERROR with its request id and Pulsar's error;
* anything before CONNECT, a second CONNECT, a command only servers send, a frame over the
  size limit, a frame that does not parse or a type number v20 does not define ->
  :class:`~mledger.protocol.RemoteProtocolError`; the shell closes the socket.

Payload commands (SEND) come out with their payload split and the checksum verified
(:class:`Request.payload`); the session answers ``ChecksumError`` when it is wrong.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import NamedTuple

from ..codec.proto import PulsarApi_pb2 as api
from ..core import TransitionTable
from ._codec import decode_command, encode_command
from ._commands import COMMANDS, Direction, Support
from ._errors import LocalProtocolError, RemoteProtocolError, StateTransitionError
from ._framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    FrameDecoder,
    Payload,
    encode_frame,
    parse_payload,
    payload_frame_parts,
)

__all__ = [
    "PROTOCOL_VERSION",
    "TRANSITIONS",
    "Connection",
    "ConnectionEvent",
    "ConnectionState",
    "Request",
    "next_state",
]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 20
"""The newest protocol version the server speaks (v20: topic migration)."""

_T = api.BaseCommand
_PING = encode_frame(encode_command(api.BaseCommand(type=_T.PING, ping=api.CommandPing())))
_PONG = encode_frame(encode_command(api.BaseCommand(type=_T.PONG, pong=api.CommandPong())))
_QUIET = frozenset({_T.PONG, _T.AUTH_RESPONSE})
_SEND = _T.SEND
_new_tuple = tuple.__new__  # a named tuple without its Python-level __new__ (one per SEND)


class ConnectionState(Enum):
    """Where the handshake stands."""

    AWAITING_CONNECT = "awaiting connect"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"


class ConnectionEvent(Enum):
    """What moves the connection from one state to another."""

    CONNECT = "CONNECT"
    """The client's CONNECT arrived."""
    ACCEPT = "accept_connect"
    """The session answered CONNECTED."""
    REFUSE = "refuse_connect"
    """The session answered the CONNECT with ERROR (failed authentication)."""
    CLOSE = "close"
    """The connection is gone."""


_S, _E = ConnectionState, ConnectionEvent
TRANSITIONS: TransitionTable[ConnectionState, ConnectionEvent] = TransitionTable(
    {
        (_S.AWAITING_CONNECT, _E.CONNECT): _S.CONNECTING,
        (_S.CONNECTING, _E.ACCEPT): _S.CONNECTED,
        (_S.CONNECTING, _E.REFUSE): _S.CLOSED,
        (_S.AWAITING_CONNECT, _E.CLOSE): _S.CLOSED,
        (_S.CONNECTING, _E.CLOSE): _S.CLOSED,
        (_S.CONNECTED, _E.CLOSE): _S.CLOSED,
        (_S.CLOSED, _E.CLOSE): _S.CLOSED,
    },
    StateTransitionError,
)
"""(state, event) -> the next state: every move the connection makes."""

next_state = TRANSITIONS.next_state
"""The state :data:`TRANSITIONS` moves a state to on an event; raises
:class:`~mledger.protocol.StateTransitionError` when the table has no such move. O(1)."""


class Request(NamedTuple):
    """One command for the session: the parsed ``BaseCommand`` and, for SEND, its payload
    (a named tuple: one per command on the hot path)."""

    type: api.BaseCommand.Type.ValueType
    command: api.BaseCommand
    payload: Payload | None = None

    @property
    def name(self) -> str:
        """The command's type name (``SEND``, ``FLOW``, ...)."""
        return _T.Type.Name(self.type)


class Connection:
    """The protocol state of one client connection (see the module docstring). Not thread-safe:
    the server shell drives it from its event loop."""

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self.max_message_size = max_message_size
        self.state = ConnectionState.AWAITING_CONNECT
        self.protocol_version = 0
        self.client_version = ""
        self._client_protocol_version = 0
        self._decoder = FrameDecoder(max_message_size + FRAME_PADDING)
        self._out: list[bytes] = []
        self.received_since_ping = True

    # -- input -----------------------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Request]:
        """Feed bytes read from the socket; return the requests the session must handle.

        Raises :class:`RemoteProtocolError` when the client broke the protocol (the shell then
        closes the connection); requests parsed before the bad frame are lost with it.
        """
        if self.state is ConnectionState.CLOSED:
            raise LocalProtocolError("receive_data on a closed connection")
        out: list[Request] = []
        self.received_since_ping = True
        connected = self.state is ConnectionState.CONNECTED
        append = out.append
        for command_bytes, payload_bytes in self._decoder.feed(data):
            cmd = decode_command(command_bytes)
            type_ = cmd.type
            if type_ == _SEND and connected:  # the hot path: a SEND on an open connection
                payload = parse_payload(payload_bytes) if payload_bytes is not None else None
                append(_new_tuple(Request, (type_, cmd, payload)))
                continue
            spec = COMMANDS.get(type_)
            if spec is None:  # pragma: no cover - decode_command refuses unknown types
                raise RemoteProtocolError(f"unknown command type {type_}")
            if type_ == _T.CONNECT:
                try:
                    self.state = next_state(self.state, ConnectionEvent.CONNECT)
                except StateTransitionError as exc:
                    raise RemoteProtocolError(f"CONNECT on a connection that already sent one ({exc})") from None
                self.client_version = cmd.connect.client_version
                self._client_protocol_version = max(cmd.connect.protocol_version, 0)
                out.append(Request(type_, cmd))
                continue
            if self.state is ConnectionState.AWAITING_CONNECT:
                raise RemoteProtocolError(f"{spec.name} before CONNECT")
            if self.state is not ConnectionState.CONNECTED:
                raise RemoteProtocolError(f"{spec.name} before the CONNECT was answered")
            if type_ == _T.PING:
                self._out.append(_PONG)
                continue
            if type_ in _QUIET:
                continue
            if spec.direction is Direction.SERVER:
                raise RemoteProtocolError(f"{spec.name} is sent by servers only")
            if spec.support is Support.ANSWERED_WITH_ERROR:
                self._answer_unsupported(cmd, spec.field, spec.request_id_field, spec.error, spec.name)
                continue
            payload = None
            if payload_bytes is not None and type_ == _T.SEND:
                payload = parse_payload(payload_bytes)
            out.append(Request(type_, cmd, payload))
        return out

    def _answer_unsupported(
        self,
        cmd: api.BaseCommand,
        field: str,
        request_id_field: str | None,
        error: api.ServerError.ValueType | None,
        name: str,
    ) -> None:
        body = getattr(cmd, field)
        if request_id_field is None or not body.HasField(request_id_field):
            log.info("ignoring unsupported %s without a request id", name)
            return
        self.send_error(
            getattr(body, request_id_field),
            error if error is not None else api.UnknownError,
            f"{name} is not supported by mledger",
        )

    # -- handshake ---------------------------------------------------------------------------
    def accept_connect(self, server_version: str) -> None:
        """Answer the client's CONNECT with CONNECTED: protocol version min(client, 20) and
        ``max_message_size``."""
        self.state = next_state(self.state, ConnectionEvent.ACCEPT)
        self.protocol_version = min(self._client_protocol_version, PROTOCOL_VERSION)
        self.send(
            api.BaseCommand(
                type=_T.CONNECTED,
                connected=api.CommandConnected(
                    server_version=server_version,
                    protocol_version=self.protocol_version,
                    max_message_size=self.max_message_size,
                ),
            )
        )

    def refuse_connect(self, error: api.ServerError.ValueType, message: str) -> None:
        """Answer CONNECT with ERROR (request id 0, as Pulsar does) and close."""
        state = next_state(self.state, ConnectionEvent.REFUSE)  # refused before the ERROR is queued
        self.send_error(0, error, message)
        self.state = state

    # -- output ------------------------------------------------------------------------------
    def send(self, cmd: api.BaseCommand) -> None:
        """Queue a command."""
        self._out.append(encode_frame(encode_command(cmd)))

    def send_bytes(self, command: bytes, checksummed: bytes | None = None) -> None:
        """Queue pre-serialized ``BaseCommand`` bytes, with a payload part for MESSAGE."""
        if checksummed is None:
            self._out.append(encode_frame(command))
        else:
            self._out += payload_frame_parts(command, checksummed)

    def send_frames(self, frames: list[bytes]) -> None:
        """Queue whole frames, already encoded (``[totalSize][commandSize]...``; a frame may
        come in consecutive parts, see :func:`~mledger.protocol._framing.payload_frame_parts`)."""
        self._out += frames

    def send_error(self, request_id: int, error: api.ServerError.ValueType, message: str) -> None:
        """Queue ERROR for a request."""
        self.send(
            api.BaseCommand(type=_T.ERROR, error=api.CommandError(request_id=request_id, error=error, message=message))
        )

    def send_ping(self) -> None:
        """Queue PING (keep-alive probe); the client answers PONG."""
        self.received_since_ping = False
        self._out.append(_PING)

    def data_to_send(self) -> bytes:
        """Everything queued since the last call, as one buffer (empty when nothing is)."""
        if not self._out:
            return b""
        out = self._out
        self._out = []
        return out[0] if len(out) == 1 else b"".join(out)

    @property
    def has_data_to_send(self) -> bool:
        """Whether anything is queued."""
        return bool(self._out)

    @property
    def buffered_input(self) -> int:
        """Bytes of a partial frame held."""
        return self._decoder.buffered

    def close(self) -> None:
        """Mark the connection closed (the shell closes the socket); from any state."""
        self.state = next_state(self.state, ConnectionEvent.CLOSE)
