"""Transition tables: a state machine's moves kept as data, looked up, never assigned by hand.

h11's ``_state.py`` keeps each machine as a table ``(state, event) -> next state`` and one
function that looks a move up and refuses a pair the table does not have, naming both.
:class:`TransitionTable` is that table and that function, shared by every machine in mledger
(a cursor's lifecycle, a managed ledger's write state, deduplication's status, the protocol
connection's handshake). A state no row enters does not exist; a move no row has is refused.

Each machine keeps its own refusal class, part of its API, derived from
:class:`TransitionRefusedError` (which carries ``state`` and ``event``); the table raises it.
Pure: no I/O, no locks; the owner of a machine holds its current state and serialises moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from typing import ClassVar, Generic, TypeVar

from ._errors import MLedgerError

__all__ = ["TransitionRefusedError", "TransitionTable"]

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


class TransitionRefusedError(MLedgerError):
    """A transition table has no move for ``event`` in ``state`` (both kept as attributes).

    A machine derives its own class from this one, naming itself in :attr:`machine` or passing
    its own message; without a message the text is ``<machine>: no transition from <state> on
    <event>`` (the enums' values; no prefix when ``machine`` is empty)."""

    machine: ClassVar[str] = ""
    """The machine's name, the prefix of the default message (``"cursor lifecycle"``)."""

    def __init__(self, state: Enum, event: Enum, message: str | None = None) -> None:
        if message is None:
            prefix = f"{self.machine}: " if self.machine else ""
            message = f"{prefix}no transition from {state.value} on {event.value}"
        super().__init__(message)
        self.state = state
        self.event = event


class TransitionTable(Mapping[tuple[S, E], S], Generic[S, E]):
    """An immutable ``(state, event) -> next state`` table and its lookup.

    A read-only mapping (``(state, event) in table``, ``table.values()``, iteration over the
    pairs); :meth:`next_state` is the one lookup. ``refused(state, event)`` builds the error
    :meth:`next_state` raises for a pair the table lacks. Every operation is O(1) but
    iteration, O(rows).

    >>> from enum import Enum
    >>> class Door(Enum):
    ...     OPEN = "open"
    ...     SHUT = "shut"
    >>> class Push(Enum):
    ...     CLOSE = "close"
    >>> table = TransitionTable({(Door.OPEN, Push.CLOSE): Door.SHUT}, TransitionRefusedError)
    >>> table.next_state(Door.OPEN, Push.CLOSE)
    <Door.SHUT: 'shut'>
    >>> (Door.SHUT, Push.CLOSE) in table
    False
    >>> try:
    ...     table.next_state(Door.SHUT, Push.CLOSE)
    ... except TransitionRefusedError as refused:
    ...     print(f"{refused} ({refused.state.name}, {refused.event.name})")
    no transition from shut on close (SHUT, CLOSE)
    """

    __slots__ = ("_moves", "_refused")

    def __init__(self, moves: Mapping[tuple[S, E], S], refused: Callable[[S, E], TransitionRefusedError]) -> None:
        self._moves: dict[tuple[S, E], S] = dict(moves)
        self._refused = refused

    def next_state(self, state: S, event: E) -> S:
        """The state ``event`` moves ``state`` to. O(1). Raises ``refused(state, event)`` when
        the table has no such move."""
        try:
            return self._moves[state, event]
        except KeyError:
            raise self._refused(state, event) from None

    def entered(self) -> frozenset[S]:
        """The states some move leads to. O(rows)."""
        return frozenset(self._moves.values())

    def __getitem__(self, key: tuple[S, E]) -> S:
        return self._moves[key]

    def __contains__(self, key: object) -> bool:
        return key in self._moves

    def __iter__(self) -> Iterator[tuple[S, E]]:
        return iter(self._moves)

    def __len__(self) -> int:
        return len(self._moves)

    def __repr__(self) -> str:
        return f"TransitionTable({len(self._moves)} moves)"
