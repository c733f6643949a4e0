"""Deprecated alias of :mod:`mledger.managed_ledger.revision` (kept for one release; import from there)."""

from .managed_ledger.revision import (
    DEFAULT_REVISION_WARN_MS as DEFAULT_REVISION_WARN_MS,
    CursorStateRevisionController as CursorStateRevisionController,
    RevisionStats as RevisionStats,
)
