"""One state-machine helper serves every table (issue 32 item 3): ``mledger.core.TransitionTable``
looks moves up and refuses the rest with an error carrying the state and the event, from which
each machine's own error class derives."""

from __future__ import annotations

import doctest
from enum import Enum

import pytest

import mledger.core._state_machine
from mledger import MLedgerError
from mledger.broker import DedupStatus
from mledger.broker._dedup import _TRANSITIONS as DEDUP_TRANSITIONS, DedupEvent, DedupTransitionError
from mledger.core import TransitionRefusedError, TransitionTable
from mledger.managed_ledger import (
    CursorEvent,
    CursorLifecycle,
    CursorLifecycleError,
    WriteEvent,
    WriteState,
    WriteStateError,
)
from mledger.managed_ledger._cursor_snapshot import LIFECYCLE_TRANSITIONS
from mledger.managed_ledger._ledger_state import WRITE_TRANSITIONS
from mledger.protocol import ConnectionEvent, ConnectionState, LocalProtocolError, StateTransitionError
from mledger.protocol._connection import TRANSITIONS as CONNECTION_TRANSITIONS


class Light(Enum):
    OFF = "off"
    ON = "on"


class Flip(Enum):
    UP = "up"
    DOWN = "down"


def test_the_module_doctest_runs() -> None:
    result = doctest.testmod(mledger.core._state_machine)
    assert result.failed == 0 and result.attempted > 0


def test_a_table_is_a_read_only_mapping_with_one_lookup() -> None:
    table = TransitionTable({(Light.OFF, Flip.UP): Light.ON, (Light.ON, Flip.DOWN): Light.OFF}, TransitionRefusedError)
    assert len(table) == 2 and set(table) == {(Light.OFF, Flip.UP), (Light.ON, Flip.DOWN)}
    assert (Light.ON, Flip.UP) not in table and table[Light.OFF, Flip.UP] is Light.ON
    assert table.entered() == frozenset(Light)
    assert table.next_state(Light.ON, Flip.DOWN) is Light.OFF
    with pytest.raises(TypeError):
        table[Light.ON, Flip.UP] = Light.ON  # type: ignore[index]


def test_a_refused_move_raises_the_machines_error_naming_state_and_event() -> None:
    class BulbError(TransitionRefusedError):
        def __init__(self, state: Light, event: Flip) -> None:
            super().__init__(state, event, f"bulb {state.value} cannot go {event.value}")

    table = TransitionTable({(Light.OFF, Flip.UP): Light.ON}, BulbError)
    with pytest.raises(BulbError, match="bulb on cannot go up") as refused:
        table.next_state(Light.ON, Flip.UP)
    assert (refused.value.state, refused.value.event) == (Light.ON, Flip.UP)
    assert isinstance(refused.value, MLedgerError)
    default = TransitionTable({}, TransitionRefusedError)
    with pytest.raises(TransitionRefusedError, match="no transition from off on down"):
        default.next_state(Light.OFF, Flip.DOWN)


@pytest.mark.parametrize(
    ("table", "error", "state", "event"),
    [
        (LIFECYCLE_TRANSITIONS, CursorLifecycleError, CursorLifecycle.DELETED, CursorEvent.DELETE),
        (CONNECTION_TRANSITIONS, StateTransitionError, ConnectionState.CONNECTED, ConnectionEvent.CONNECT),
        (DEDUP_TRANSITIONS, DedupTransitionError, DedupStatus.ENABLED, DedupEvent.REPLAYED),
        (WRITE_TRANSITIONS, WriteStateError, WriteState.OPEN, WriteEvent.CLOSE_DONE),
    ],
    ids=["cursor lifecycle", "connection", "dedup status", "ledger write state"],
)
def test_every_machine_is_a_table_of_the_helper_and_its_error_derives_from_the_refusal(
    table: TransitionTable[Enum, Enum], error: type[TransitionRefusedError], state: Enum, event: Enum
) -> None:
    assert isinstance(table, TransitionTable)
    assert (state, event) not in table
    with pytest.raises(error) as refused:
        table.next_state(state, event)
    assert isinstance(refused.value, TransitionRefusedError)
    assert (refused.value.state, refused.value.event) == (state, event)


def test_the_connection_refusal_stays_a_local_protocol_error() -> None:
    refused = StateTransitionError(ConnectionState.CLOSED, ConnectionEvent.ACCEPT)
    assert isinstance(refused, LocalProtocolError) and isinstance(refused, TransitionRefusedError)
    assert str(refused) == "no transition for accept_connect in state closed"


def test_a_machine_named_by_its_class_prefixes_the_default_message_with_its_name() -> None:
    class BulbError(TransitionRefusedError):
        machine = "bulb"

    table = TransitionTable({}, BulbError)
    with pytest.raises(BulbError, match="^bulb: no transition from off on down$"):
        table.next_state(Light.OFF, Flip.DOWN)
    assert str(CursorLifecycleError(CursorLifecycle.DELETED, CursorEvent.DELETE)) == (
        "cursor lifecycle: no transition from Deleted on delete"
    )
    assert str(WriteStateError(WriteState.OPEN, WriteEvent.CLOSE_DONE)) == (
        "managed ledger write state: no transition from LedgerOpened on close done"
    )
