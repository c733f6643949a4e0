"""Positions in a managed ledger: ``(ledger_id, entry_id)``.

A :class:`Position` is a ``NamedTuple`` so that comparison, hashing and unpacking run at C
speed on the hot ack path. Ordering is lexicographic on ``(ledger_id, entry_id)``, exactly as
Pulsar's ``PositionImpl.compareTo``. ``entry_id == -1`` names the position *before* the first
entry of a ledger (Pulsar's ``L:-1``), which is where an empty cursor's mark-delete sits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ._errors import InvalidPositionError
from ._ints import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np


class Position(NamedTuple):
    """An immutable, ordered, hashable ``ledger_id:entry_id`` pair.

    >>> Position(3, 5) < Position(4, -1)
    True
    >>> str(Position(3, 5)), Position.parse("3:5")
    ('3:5', Position(ledger_id=3, entry_id=5))
    """

    ledger_id: int
    entry_id: int

    def next(self) -> Position:
        """The position of the next entry in the same ledger (``L:E+1``). O(1)."""
        return Position(self[0], self[1] + 1)

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse ``"L:E"``; raises :class:`InvalidPositionError` naming the bad text."""
        parts = text.strip().split(":")
        if len(parts) != 2:
            raise InvalidPositionError(f"invalid position {text!r}: expected 'ledgerId:entryId'")
        try:
            ledger_id, entry_id = int(parts[0]), int(parts[1])
        except ValueError:
            raise InvalidPositionError(f"invalid position {text!r}: ids must be integers") from None
        return cls.of(ledger_id, entry_id)

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> Iterator[Position]:
        """The positions of an ``(n, 2)`` int64 array of ``(ledger_id, entry_id)`` rows, one by
        one (ids a position array already holds: not checked again). O(n).

        >>> import numpy as np
        >>> list(Position.from_rows(np.array([[3, 5], [4, 0]])))
        [Position(ledger_id=3, entry_id=5), Position(ledger_id=4, entry_id=0)]
        """
        return map(cls._make, zip(rows[:, 0].tolist(), rows[:, 1].tolist()))  # noqa: B905 (equal columns)

    @classmethod
    def of(cls, ledger_id: int, entry_id: int) -> Position:
        """Build a position after checking that both ids are 64-bit signed integers."""
        for name, value in (("ledger_id", ledger_id), ("entry_id", entry_id)):
            if type(value) is not int and not isinstance(value, int):
                raise InvalidPositionError(f"invalid {name} {value!r}: not an integer")
            if not INT64_MIN <= value <= INT64_MAX:
                raise InvalidPositionError(f"invalid {name} {value}: outside the int64 range")
        return cls(int(ledger_id), int(entry_id))


EARLIEST = Position(-1, -1)
"""Pulsar's ``PositionImpl.EARLIEST``: before every entry."""

LATEST = Position(INT64_MAX, INT64_MAX)
"""Pulsar's ``PositionImpl.LATEST``: after every entry."""
