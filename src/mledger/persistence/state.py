"""Deprecated alias of :mod:`mledger.codec.cursor_state` (kept for one release; import from there)."""

from ..codec.cursor_state import (
    PersistedCursorState as PersistedCursorState,
    RangeArrays as RangeArrays,
)

CursorState = PersistedCursorState
"""The old name of :class:`PersistedCursorState`."""
