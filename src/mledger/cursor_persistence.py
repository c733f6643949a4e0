"""Deprecated alias of :mod:`mledger.managed_ledger.cursor_store` (kept for one release).

``CursorPersistence`` is now :class:`~mledger.managed_ledger.cursor_store.CursorStateStore`; it
takes a :class:`~mledger.managed_ledger.cursor_snapshot.CursorSnapshot` instead of a cursor.
"""

from .managed_ledger.cursor_store import (
    BACKWARD_SCAN_LIMIT as BACKWARD_SCAN_LIMIT,
    MAX_STATE_BYTES as MAX_STATE_BYTES,
    NO_LEDGER as NO_LEDGER,
    CursorStateStore as CursorStateStore,
)
