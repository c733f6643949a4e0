"""Issue 24 item 6 (the protocol's part): the connection moves only through its transition table.

h11's ``_state.py`` shape: one dict of ``(state, event) -> state`` and one function that looks a
move up and refuses, with a typed error, any move the table does not have.
"""

from __future__ import annotations

import pytest

from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import (
    Connection,
    ConnectionEvent,
    ConnectionState,
    LocalProtocolError,
    RemoteProtocolError,
    StateTransitionError,
)
from mledger.protocol._codec import encode_command
from mledger.protocol._connection import TRANSITIONS, next_state
from mledger.protocol._framing import encode_frame

_T = api.BaseCommand


def connect_frame() -> bytes:
    return encode_frame(
        encode_command(_T(type=_T.CONNECT, connect=api.CommandConnect(client_version="t", protocol_version=20)))
    )


def test_every_state_is_entered_and_every_move_is_in_the_table() -> None:
    entered = {ConnectionState.AWAITING_CONNECT} | set(TRANSITIONS.values())
    assert entered == set(ConnectionState)
    assert next_state(ConnectionState.AWAITING_CONNECT, ConnectionEvent.CONNECT) is ConnectionState.CONNECTING
    for state in ConnectionState:
        assert next_state(state, ConnectionEvent.CLOSE) is ConnectionState.CLOSED


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (ConnectionState.AWAITING_CONNECT, ConnectionEvent.ACCEPT),
        (ConnectionState.CONNECTED, ConnectionEvent.ACCEPT),
        (ConnectionState.CONNECTED, ConnectionEvent.CONNECT),
        (ConnectionState.CLOSED, ConnectionEvent.REFUSE),
    ],
)
def test_a_move_the_table_does_not_have_is_refused_with_a_typed_error(
    state: ConnectionState, event: ConnectionEvent
) -> None:
    assert (state, event) not in TRANSITIONS
    with pytest.raises(StateTransitionError) as refused:
        next_state(state, event)
    assert refused.value.state is state and refused.value.event is event
    assert isinstance(refused.value, LocalProtocolError)


def test_the_connection_refuses_a_local_move_out_of_place_and_keeps_its_state() -> None:
    conn = Connection()
    with pytest.raises(StateTransitionError, match="accept_connect in state awaiting connect"):
        conn.accept_connect("mledger-test")
    conn.receive_data(connect_frame())
    conn.accept_connect("mledger-test")
    conn.data_to_send()
    with pytest.raises(StateTransitionError, match="refuse_connect in state connected"):
        conn.refuse_connect(api.AuthenticationError, "late")
    assert conn.state is ConnectionState.CONNECTED and not conn.has_data_to_send  # no ERROR queued


def test_a_second_connect_from_the_client_is_the_clients_protocol_error() -> None:
    conn = Connection()
    conn.receive_data(connect_frame())
    with pytest.raises(RemoteProtocolError, match="already sent one") as refused:
        conn.receive_data(connect_frame())
    assert not isinstance(refused.value, LocalProtocolError)
    assert conn.state is ConnectionState.CONNECTING
