"""The managed ledger's state has one owner, ``LedgerState``, and its write state is one machine,
the table ``WRITE_TRANSITIONS`` (issue 32 item 3): every row walked on a live state with
``_check()`` after each move, every missing pair refused, and the machine seen through a real
ledger (a failed write, termination, close, recovery)."""

from __future__ import annotations

from collections import deque

import pytest

from mledger import (
    ManagedLedgerClosedError,
    ManagedLedgerFactory,
    ManagedLedgerFactoryConfig,
    ManagedLedgerTerminatedError,
    ManualClock,
    MemoryStore,
    MLedgerError,
    Position,
)
from mledger.managed_ledger import ManagedLedger, WriteEvent, WriteState, WriteStateError
from mledger.managed_ledger._ledger_state import WRITE_TRANSITIONS, LedgerState
from mledger.storage import FaultInjectingStore, InjectedFault

pytestmark = [pytest.mark.timeout(60)]  # the failure test waits on a writer thread

# The module docstring's diagram, by value: the specification the table is checked against.
DIAGRAM = {
    ("LedgerOpened", "add"): "LedgerOpened",
    ("LedgerOpened", "write failed"): "WriteFailed",
    ("LedgerOpened", "terminate"): "Terminated",
    ("LedgerOpened", "close"): "Closing",
    ("WriteFailed", "add"): "WriteFailed",
    ("WriteFailed", "failure reported"): "LedgerOpened",
    ("WriteFailed", "terminate"): "Terminated",
    ("WriteFailed", "close"): "Closing",
    ("Terminated", "write failed"): "Terminated",
    ("Terminated", "failure reported"): "Terminated",
    ("Terminated", "terminate"): "Terminated",
    ("Terminated", "close"): "Closing",
    ("Closing", "write failed"): "Closing",
    ("Closing", "failure reported"): "Closing",
    ("Closing", "close"): "Closing",
    ("Closing", "close done"): "Closed",
    ("Closed", "write failed"): "Closed",
    ("Closed", "failure reported"): "Closed",
    ("Closed", "close"): "Closed",
    ("Closed", "close done"): "Closed",
}

# What a caller of the ledger's API gets for a refused move; every other refusal is a bug.
CALLER_REFUSALS = {
    (WriteState.TERMINATED, WriteEvent.ADD): ManagedLedgerTerminatedError,
    (WriteState.CLOSING, WriteEvent.ADD): ManagedLedgerClosedError,
    (WriteState.CLOSED, WriteEvent.ADD): ManagedLedgerClosedError,
    (WriteState.CLOSING, WriteEvent.TERMINATE): ManagedLedgerClosedError,
    (WriteState.CLOSED, WriteEvent.TERMINATE): ManagedLedgerClosedError,
}

MISSING = [(s, e) for s in WriteState for e in WriteEvent if (s, e) not in WRITE_TRANSITIONS]


def path_to(target: WriteState) -> list[WriteEvent]:
    """The shortest run of events from ``LedgerOpened`` to ``target`` (breadth-first)."""
    paths: dict[WriteState, list[WriteEvent]] = {WriteState.OPEN: []}
    todo = deque([WriteState.OPEN])
    while todo:
        state = todo.popleft()
        for (source, event), new in WRITE_TRANSITIONS.items():
            if source is state and new not in paths:
                paths[new] = [*paths[state], event]
                todo.append(new)
    return paths[target]


def state_in(target: WriteState) -> LedgerState:
    state = LedgerState("s", MemoryStore(), ManualClock(0), ManagedLedgerFactoryConfig())
    state.initialize()
    for event in path_to(target):
        state.fire(event)
    assert state.write is target
    return state


def check(state: LedgerState) -> None:
    with state.append_lock, state.lock:
        state._check()


def test_the_table_is_the_diagram_and_enters_every_state_using_every_event() -> None:
    assert {(s.value, e.value): new.value for (s, e), new in WRITE_TRANSITIONS.items()} == DIAGRAM
    assert WRITE_TRANSITIONS.entered() == set(WriteState)
    assert {event for _, event in WRITE_TRANSITIONS} == set(WriteEvent)


@pytest.mark.parametrize("row", list(WRITE_TRANSITIONS), ids=lambda r: f"{r[0].value}-{r[1].value}")
def test_every_row_moves_a_live_state_and_keeps_its_invariants(row: tuple[WriteState, WriteEvent]) -> None:
    source, event = row
    state = state_in(source)
    state.fire(event)
    assert state.write is WRITE_TRANSITIONS[row]
    check(state)


@pytest.mark.parametrize("pair", MISSING, ids=lambda p: f"{p[0].value}-{p[1].value}")
def test_a_pair_the_table_lacks_is_refused_naming_state_and_event_and_changes_nothing(
    pair: tuple[WriteState, WriteEvent],
) -> None:
    source, event = pair
    state = state_in(source)
    expected = CALLER_REFUSALS.get(pair, WriteStateError)
    with pytest.raises(MLedgerError) as raised:
        state.fire(event)
    assert type(raised.value) is expected
    refusal = raised.value if expected is WriteStateError else raised.value.__cause__
    assert isinstance(refusal, WriteStateError) and (refusal.state, refusal.event) == pair
    assert state.write is source
    check(state)


@pytest.mark.parametrize("source", list(WriteState))
def test_an_add_is_admitted_exactly_where_the_table_has_its_row(source: WriteState) -> None:
    state = state_in(source)
    expected = CALLER_REFUSALS.get((source, WriteEvent.ADD))
    if expected is None:
        state.check_add()
        return
    with pytest.raises(expected, match="[Mm]anaged ledger s (is closed|was already terminated)") as raised:
        state.check_add()
    assert isinstance(raised.value.__cause__, WriteStateError)


def open_ledger() -> tuple[ManagedLedgerFactory, FaultInjectingStore, ManagedLedger]:
    store = FaultInjectingStore(MemoryStore())
    factory = ManagedLedgerFactory(store, clock=ManualClock(0))
    return factory, store, factory.open("ledger-state")


def test_a_failed_write_is_reported_in_write_failed_and_the_ledger_opens_again() -> None:
    factory, store, ml = open_ledger()
    assert ml.write_state is WriteState.OPEN
    ml.add_entry(b"a")
    seen: list[tuple[str, WriteState]] = []
    late: list[BaseException | None] = []

    def failed(positions: list[Position] | None, error: BaseException | None) -> None:
        seen.append(("callback", ml.write_state))
        assert isinstance(error, InjectedFault) and ml.adds_failing
        # Queued while the failure is reported: admitted (the WriteFailed row), failed with it.
        ml.add_entries_with_callback([b"late"], lambda _, e: late.append(e), start_writing=False)

    ml.set_failure_listener(lambda: seen.append(("listener", ml.write_state)))
    store.fail_at = store.writes
    ml.add_entries_with_callback([b"b"], failed)
    assert ml.wait_for_adds(30)
    assert seen == [("callback", WriteState.WRITE_FAILED), ("listener", WriteState.OPEN)]
    assert len(late) == 1 and isinstance(late[0], InjectedFault)
    assert ml.write_state is WriteState.OPEN and not ml.adds_failing
    assert ml.add_entry(b"c").entry_id == 1
    ml._check()
    factory.close()


def test_terminate_close_and_recovery_move_the_machine_and_refuse_adds_with_pulsars_errors() -> None:
    factory, _, ml = open_ledger()
    last = ml.add_entry(b"a")
    assert ml.terminate() == last and ml.write_state is WriteState.TERMINATED and ml.is_terminated
    assert ml.terminate() == last  # idempotent: the (Terminated, terminate) row
    with pytest.raises(ManagedLedgerTerminatedError, match="was already terminated") as refused:
        ml.add_entry(b"b")
    cause = refused.value.__cause__
    assert isinstance(cause, WriteStateError) and (cause.state, cause.event) == (WriteState.TERMINATED, WriteEvent.ADD)
    ml._check()
    ml.close()
    assert ml.write_state is WriteState.CLOSED and ml.is_closed and ml.is_terminated
    ml.close()  # idempotent
    with pytest.raises(ManagedLedgerClosedError):
        ml.add_entry(b"b")
    with pytest.raises(ManagedLedgerClosedError):
        ml.terminate()
    again = factory.open("ledger-state")  # the closed ledger left the cache: recovered from the store
    assert again.write_state is WriteState.TERMINATED and again.terminated_position == last
    with pytest.raises(ManagedLedgerTerminatedError):
        again.add_entry(b"b")
    again._check()
    factory.close()


def test_a_ledger_closed_while_open_refuses_terminate_and_adds_as_closed() -> None:
    factory, _, ml = open_ledger()
    ml.close()
    assert ml.write_state is WriteState.CLOSED and not ml.is_terminated
    with pytest.raises(ManagedLedgerClosedError, match="managed ledger ledger-state is closed"):
        ml.terminate()
    with pytest.raises(ManagedLedgerClosedError):
        ml.add_entries_async([b"x"])
    factory.close()
