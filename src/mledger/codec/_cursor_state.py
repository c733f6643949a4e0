"""The format-neutral cursor state that the codecs read and write.

:class:`PersistedCursorState` holds what Pulsar persists for a durable cursor, in either of its two
records: ``PositionInfo`` (a cursor-ledger entry) and ``ManagedCursorInfo`` (the
metadata-store node). Repeated numeric parts are numpy ``int64`` arrays so that millions of
ranges cost a few arrays, not millions of objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core import Position


class RangeArrays(NamedTuple):
    """Open-closed ranges ``(lower..upper]``, one per index, as four equal-length int64 arrays.

    The order is the caller's (Pulsar writes ascending ranges); codecs keep it as is.

    >>> r = RangeArrays.from_pairs([(Position(3, 5), Position(3, 7))])
    >>> r.size, r.pairs()
    (1, [(Position(ledger_id=3, entry_id=5), Position(ledger_id=3, entry_id=7))])
    """

    lower_ledger: np.ndarray
    lower_entry: np.ndarray
    upper_ledger: np.ndarray
    upper_entry: np.ndarray

    @classmethod
    def empty(cls) -> RangeArrays:
        """No ranges."""
        z = np.empty(0, dtype=np.int64)
        return cls(z, z, z, z)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[Position, Position]]) -> RangeArrays:
        """Build from ``(lower, upper)`` position pairs. O(n) Python objects: not for millions."""
        rows = [(lo[0], lo[1], up[0], up[1]) for lo, up in pairs]
        if not rows:
            return cls.empty()
        a = np.array(rows, dtype=np.int64)
        return cls(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(), a[:, 3].copy())

    @property
    def size(self) -> int:
        """The number of ranges."""
        return int(self.lower_ledger.size)

    def pairs(self) -> list[tuple[Position, Position]]:
        """The ranges as ``(lower, upper)`` position pairs. O(n) Python objects."""
        cols = [c.tolist() for c in self]
        return [(Position(a, b), Position(c, d)) for a, b, c, d in zip(*cols, strict=True)]

    def __eq__(self, other: object) -> bool:
        # Never NotImplemented: tuple's own comparison would then compare arrays element-wise.
        if not isinstance(other, RangeArrays):
            return False
        return all(np.array_equal(a, b) for a, b in zip(self, other, strict=True))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    # Unhashable: tuple's hash would hash the (mutable) arrays, which raises TypeError.


@dataclass(eq=False)
class PersistedCursorState:
    """What Pulsar persists for a cursor, independent of which record carries it.

    * ``mark_delete``: the mark-delete position.
    * ``properties``: mark-delete properties (``LongProperty``), in order.
    * ``ranges``: ``individualDeletedMessages``, the range format.
    * ``long_arrays``: ``individualDeletedMessageRanges``, ledger id -> the words of
      ``BitSet.toLongArray()`` of its acked entries (int64), in the order given; only
      ``PositionInfo`` has this field.
    * ``batch_deleted``: position -> BitSet words of the *remaining* (un-acked) batch indexes.
    * ``cursor_properties``, ``cursors_ledger_id``, ``last_active``: ``ManagedCursorInfo``
      only (fields 8, 1 and 6).

    Equality compares array contents and treats an empty ``ranges`` / ``long_arrays`` like
    ``None``: both serialize to the same bytes.
    """

    mark_delete: Position
    properties: dict[str, int] = field(default_factory=dict)
    ranges: RangeArrays | None = None
    long_arrays: dict[int, np.ndarray] | None = None
    batch_deleted: list[tuple[Position, np.ndarray]] = field(default_factory=list)
    cursor_properties: dict[str, str] = field(default_factory=dict)
    cursors_ledger_id: int = -1
    last_active: int | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PersistedCursorState):
            return NotImplemented
        if (
            tuple(self.mark_delete) != tuple(other.mark_delete)
            or list(self.properties.items()) != list(other.properties.items())
            or list(self.cursor_properties.items()) != list(other.cursor_properties.items())
            or self.cursors_ledger_id != other.cursors_ledger_id
            or self.last_active != other.last_active
        ):
            return False
        mine, theirs = self.ranges or RangeArrays.empty(), other.ranges or RangeArrays.empty()
        if mine != theirs:
            return False
        la, lb = self.long_arrays or {}, other.long_arrays or {}
        if list(la) != list(lb) or not all(np.array_equal(la[k], lb[k]) for k in la):
            return False
        if len(self.batch_deleted) != len(other.batch_deleted):
            return False
        return all(
            tuple(pa) == tuple(pb) and np.array_equal(wa, wb)
            for (pa, wa), (pb, wb) in zip(self.batch_deleted, other.batch_deleted, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]
