"""Composite cursor resets: a revision held open while the caller changes its own state.

A :class:`PositionReset` is the context manager :meth:`ManagedCursor.position_reset
<mledger.managed_ledger.ManagedCursor.position_reset>` returns. Entering starts a revision
of the cursor's :class:`~mledger.managed_ledger.CursorStateRevisionController` (reads
are refused, other resets fail fast); the block chooses one cursor change; leaving ends the
revision and applies the change in the same critical section, so no read ever sees half of it.

The reset drives the cursor only through :class:`ResetHooks`, the operations the cursor hands
it when it creates the reset.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..core import ConcurrentResetError, InvalidPositionError, Position
from ._cursor_snapshot import IndividualDeletedEntries
from ._revision import CursorStateRevisionController

__all__ = ["PositionReset", "ResetHooks"]


class ResetHooks(NamedTuple):
    """The cursor operations a :class:`PositionReset` drives, handed over by the cursor.

    ``choose_*`` validate a change when it is chosen (they may raise and change nothing) and
    return the action that applies it; actions run under ``lock`` when the revision ends,
    followed by ``after_change`` (persist the state) unless the change was a rewind or a seek,
    which move the read position alone.
    """

    name: str
    cursor: Any
    """What an ``edit`` editor receives (the cursor itself)."""
    lock: threading.RLock
    revision: CursorStateRevisionController
    check_open: Callable[[], None]
    after_change: Callable[[], None]
    mark_settling: Callable[[bool], None]
    """Told True before the revision ends and False once ``after_change`` returned: between
    the two the cursor's new state is applied but not yet persisted, and trimming must still
    give way (it follows persisted mark-deletes, and a reset may have moved this one back)."""
    choose_rewind: Callable[[], Callable[[], None]]
    choose_seek: Callable[[Position, bool], Callable[[], None]]
    choose_reset_to: Callable[[Position], Callable[[], None]]
    choose_skip: Callable[[int, IndividualDeletedEntries], Callable[[], None]]
    choose_clear_backlog: Callable[[], Callable[[], None]]
    choose_mark_delete: Callable[[Position, Mapping[str, int] | None], Callable[[], None]]


class PositionReset:
    """A composite cursor reset, used as a context manager from ``ManagedCursor.position_reset``.

    Inside the ``with`` block a revision is running: reads are refused and other resets fail
    fast, so the caller can change its own state (e.g. a dispatcher's redelivery queue) knowing
    no read will interleave. Choose the cursor change with one of :meth:`rewind`, :meth:`seek`,
    :meth:`reset_to`, :meth:`mark_delete` or :meth:`edit`; it is applied when the block exits,
    atomically with ending the revision. If the block raises, nothing is applied to the
    cursor (the revision still ends, outdating in-flight reads).
    """

    def __init__(self, hooks: ResetHooks) -> None:
        self._hooks = hooks
        self._action: Callable[[], None] | None = None
        self._persists = True
        self.revision_num = -1

    def _set(self, action: Callable[[], None], persists: bool = True) -> None:
        if self._action is not None:
            raise ConcurrentResetError("a position reset applies one cursor change; one was already chosen")
        self._action = action
        self._persists = persists

    def rewind(self) -> None:
        """Read again from the entry after the mark-delete position. Writes nothing, as Pulsar's
        ``ManagedCursorImpl.rewind`` (only the read position moves): state the rate limiter
        held back stays unpersisted, so a crash after a consumer left still redelivers it."""
        self._set(self._hooks.choose_rewind(), persists=False)

    def seek(self, position: Position, force: bool = False) -> None:
        """Move the read position (never to or below the mark-delete position). Writes nothing,
        as Pulsar's ``ManagedCursorImpl.seek(Position, boolean)`` (only the read position
        moves; a reset by message id or publish time persists: :meth:`reset_to`)."""
        self._set(self._hooks.choose_seek(position, force), persists=False)

    def reset_to(self, position: Position) -> None:
        """Reset like ``reset_cursor``: read from ``position``, mark-delete just before it."""
        self._set(self._hooks.choose_reset_to(position))

    def skip_entries(self, n: int, deleted: IndividualDeletedEntries = IndividualDeletedEntries.EXCLUDE) -> None:
        """Mark-delete ``n`` more entries as part of the reset (see ``ManagedCursor.skip_entries``)."""
        if n < 0:
            raise InvalidPositionError(f"cannot skip a negative number of entries: {n}")
        self._set(self._hooks.choose_skip(n, deleted))

    def clear_backlog(self) -> None:
        """Mark-delete everything up to the last confirmed entry as part of the reset."""
        self._set(self._hooks.choose_clear_backlog())

    def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Move the mark-delete position (forward only) as part of the reset."""
        self._set(self._hooks.choose_mark_delete(position, properties))

    def edit(self, editor: Callable[[Any], None]) -> None:
        """Run ``editor(cursor)`` under the cursor lock when the revision ends."""
        cursor = self._hooks.cursor
        self._set(lambda: editor(cursor))

    def __enter__(self) -> PositionReset:
        hooks = self._hooks
        hooks.check_open()
        num = hooks.revision.start_revision()
        if num == -1:
            raise ConcurrentResetError(
                f"cursor {hooks.name}: a position reset is already in progress; this one was not applied"
            )
        self.revision_num = num
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        hooks = self._hooks
        action = self._action if exc_type is None else None
        with hooks.lock:
            hooks.mark_settling(True)
            try:
                hooks.revision.end_revision(action)
                if action is not None and self._persists:
                    hooks.after_change()
            finally:
                hooks.mark_settling(False)
