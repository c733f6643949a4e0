"""Argument checks shared by the cursor's public methods: positions, position arrays, properties.

Each raises :class:`~mledger.core.InvalidPositionError` naming the bad value and changes
nothing, so a bad argument never leaves a cursor half-changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import cast

import numpy as np

from ..core import INT64_MAX, INT64_MIN, InvalidPositionError, Position, moved_names

__all__ = [
    "ack_set_of",
    "check_ack_set",
    "checked_properties",
    "lowest_bit",
    "positions_array",
    "to_position",
]


def to_position(position: object) -> Position:
    """``position`` as a :class:`Position` (any ``(ledger_id, entry_id)`` pair of int64s). O(1)."""
    if type(position) is Position:
        return position
    try:
        ledger_id, entry_id = cast("tuple[int, int]", position)
    except (TypeError, ValueError):
        raise InvalidPositionError(f"not a position: {position!r}") from None
    return Position.of(ledger_id, entry_id)


def positions_array(positions: Iterable[Position] | np.ndarray) -> np.ndarray:
    """Positions (or an ``(n, 2)`` array) as an ``(n, 2)`` int64 array of rows. O(n)."""
    if isinstance(positions, np.ndarray):
        arr = positions.astype(np.int64, copy=False)
        if arr.ndim != 2 or (arr.size and arr.shape[1] != 2):
            raise InvalidPositionError(f"expected an (n, 2) array of positions, got shape {arr.shape}")
        return arr.reshape(-1, 2)
    items = positions if isinstance(positions, (list, tuple)) else list(positions)
    if not items:
        return np.empty((0, 2), dtype=np.int64)
    try:
        flat = np.fromiter(chain.from_iterable(items), dtype=np.int64, count=2 * len(items))
    except (TypeError, ValueError):
        for p in items:
            to_position(p)
        raise
    return flat.reshape(-1, 2)


def checked_properties(properties: Mapping[str, int]) -> dict[str, int]:
    """Mark-delete properties (PIP-6 ``LongProperty``): non-empty names, int64 values; a copy."""
    out: dict[str, int] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidPositionError(f"invalid mark-delete property name {key!r}")
        if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
            raise InvalidPositionError(f"mark-delete property {key!r} must be a 64-bit integer, got {value!r}")
        out[key] = int(value)
    return out


def lowest_bit(bits: int) -> int:
    """Index of the lowest set bit of an ack set; a huge index for an empty one."""
    return (bits & -bits).bit_length() - 1 if bits else 1 << 62


def check_ack_set(position: Position, ack_set: int) -> None:
    """An ack set (set bit = batch index still un-acked) is a non-negative int. O(1)."""
    if ack_set < 0:
        raise InvalidPositionError(f"invalid ack set {ack_set} for {position}")


def ack_set_of(position: Position, indexes: Iterable[int], batch_size: int) -> int:
    """The ack set of a ``batch_size``-message entry once ``indexes`` are acked (every other
    bit set); raises ``InvalidPositionError`` for a size < 1 or an index outside
    ``[0, batch_size)``. O(indexes)."""
    if batch_size <= 0:
        raise InvalidPositionError(f"invalid batch size {batch_size} for {position}")
    ack_set = (1 << batch_size) - 1
    for i in indexes:
        if not 0 <= i < batch_size:
            raise InvalidPositionError(f"batch index {i} out of range [0, {batch_size}) for {position}")
        ack_set &= ~(1 << i)
    return ack_set


__getattr__ = moved_names(__name__, {"AckPlan": "mledger.managed_ledger:AckPlan"})
