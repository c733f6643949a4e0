"""The cursor lifecycle moves only through its transition table (issue 24 item 6)."""

from __future__ import annotations

import pytest

from mledger import InitialPosition, ManagedLedgerFactory
from mledger.managed_ledger import CursorEvent, CursorLifecycle, CursorLifecycleError
from mledger.managed_ledger._cursor_snapshot import LIFECYCLE_TRANSITIONS, lifecycle_transition
from mledger.storage import MemoryStore


def test_the_table_refuses_a_transition_it_does_not_have() -> None:
    assert (CursorLifecycle.CLOSED, CursorEvent.OPENED_DURABLE) not in LIFECYCLE_TRANSITIONS
    with pytest.raises(CursorLifecycleError, match="from Closed on opened durable") as info:
        lifecycle_transition(CursorLifecycle.CLOSED, CursorEvent.OPENED_DURABLE)
    assert (info.value.state, info.value.event) == (CursorLifecycle.CLOSED, CursorEvent.OPENED_DURABLE)


def test_every_state_is_entered_and_every_event_used() -> None:
    entered = {CursorLifecycle.UNINITIALIZED, *LIFECYCLE_TRANSITIONS.values()}
    assert entered == set(CursorLifecycle)
    assert {event for _, event in LIFECYCLE_TRANSITIONS} == set(CursorEvent)


def test_a_cursor_walks_the_table_and_a_second_delete_is_refused() -> None:
    ml = ManagedLedgerFactory(MemoryStore()).open("lifecycle")
    ml.add_entry(b"m")
    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    assert cursor.state is CursorLifecycle.NO_LEDGER
    reader = ml.open_non_durable_cursor(initial_position=InitialPosition.EARLIEST)
    assert reader.state is CursorLifecycle.OPEN
    cursor.close()
    cursor.close()  # idempotent: no second move
    assert cursor.state is CursorLifecycle.CLOSED and cursor.is_closed
    cursor.discard()
    assert cursor.state is CursorLifecycle.DELETED
    with pytest.raises(CursorLifecycleError, match="from Deleted on delete"):
        cursor.discard()
