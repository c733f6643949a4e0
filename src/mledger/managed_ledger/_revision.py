"""The cursor state revision controller (docs/library.md): resets that in-flight reads cannot undo.

Theory of operation
-------------------
A *cursor position reset* (reset-cursor, seek, rewind, skip, clear-backlog, a dispatcher
reset) changes the read and mark-delete positions behind the back of reads that are waiting
for storage. Without care, a read that completes after the reset delivers entries from before
it (out-of-order delivery, Scenario-1) or moves the read position past the reset target
(stuck consumption, Scenario-2).

The controller holds two facts, both changed only under the cursor's one lock:

* ``is_under_revision`` - a reset is running: new reads are refused
  (``CursorModifyingError``) and a second reset fails fast (``start_revision() == -1``);
* ``revision_num`` - how many resets completed. A read records the number when it starts;
  when it completes, :meth:`is_revision_num_outdated` tells it whether a reset started or
  ended meanwhile, in which case its entries are discarded and the read position untouched.

``start_revision`` is a non-reentrant try-lock. ``end_revision(editor)`` clears the flag,
increments the number and runs ``editor`` (which changes the positions) in one critical
section, so no read can observe a half-applied reset.

State table (``under`` = is_under_revision)::

    call                 | under=False                   | under=True
    ---------------------+-------------------------------+-------------------------------------
    start_revision()     | under=True, return num        | return -1 (refused, counted)
    end_revision(edit)   | return -1                     | under=False, num+=1, edit(), return num
    is_outdated(n)       | n != num                      | True
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..core import Clock, SystemClock

log = logging.getLogger(__name__)

DEFAULT_REVISION_WARN_MS = 30_000
"""A revision open longer than this is logged as probably stuck (an alert)."""


@dataclass(frozen=True)
class RevisionStats:
    """Counters of one controller (the ``pulsar_cursor_epoch_*`` metrics, docs/metrics.md)."""

    revision_num: int
    is_under_revision: bool
    epoch_increase_count: int
    """``pulsar_cursor_epoch_increase_count``: completed revisions."""
    epoch_increase_task_state: int
    """``pulsar_cursor_epoch_increase_task_state``: 1 while a revision runs, else 0."""
    refused_revisions: int
    """``start_revision`` calls refused because another revision was running."""
    discarded_reads: int
    """Reads discarded or refused because of a revision."""
    open_revision_ms: int
    """How long the running revision has been open (0 when none)."""


class CursorStateRevisionController:
    """Makes cursor position resets atomic with respect to reads (docs/library.md, "Safe cursor resets").

    All methods are thread-safe and never block beyond the cursor lock they share.
    """

    def __init__(
        self,
        lock: threading.RLock | None = None,
        clock: Clock | None = None,
        warn_after_ms: int = DEFAULT_REVISION_WARN_MS,
        name: str = "",
    ) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._clock = clock or SystemClock()
        self._warn_after_ms = warn_after_ms
        self._name = name
        self._revision_num = 0
        self._under_revision = False
        self._started_ms = 0
        self._warned = False
        self._increase_count = 0
        self._refused = 0
        self._discarded_reads = 0

    @property
    def lock(self) -> threading.RLock:
        """The cursor lock the controller's transitions run under."""
        return self._lock

    @property
    def revision_num(self) -> int:
        """How many revisions have completed."""
        return self._revision_num

    @property
    def is_under_revision(self) -> bool:
        """Whether a revision (a position reset) is running."""
        return self._under_revision

    def start_revision(self) -> int:
        """Begin a revision; return the current revision number, or -1 if one is running.

        Non-reentrant: a second call before :meth:`end_revision` returns -1.
        """
        with self._lock:
            if self._under_revision:
                self._refused += 1
                return -1
            self._under_revision = True
            self._started_ms = self._clock.now_ms()
            self._warned = False
            return self._revision_num

    def end_revision(self, editor: Callable[[], None] | None = None) -> int:
        """End the running revision: clear the flag, increment the number, run ``editor``.

        All three happen under the cursor lock. Returns the new revision number, or -1 (and
        does not run ``editor``) if no revision was running. If ``editor`` raises, the
        revision is still ended (reads that overlapped it stay outdated) and the error
        propagates.
        """
        with self._lock:
            if not self._under_revision:
                return -1
            self._under_revision = False
            self._revision_num += 1
            self._increase_count += 1
            elapsed = self._clock.now_ms() - self._started_ms
            if elapsed > self._warn_after_ms:
                log.warning("cursor %s: revision %d was open for %d ms", self._name, self._revision_num, elapsed)
            if editor is not None:
                editor()
            return self._revision_num

    def abort_revision(self) -> int:
        """End the running revision without editing (the reset failed validation).

        The number is still incremented: reads that overlapped the attempt stay outdated.
        """
        return self.end_revision(None)

    def is_revision_num_outdated(self, revision_num: int) -> bool:
        """True if a revision is running or ``revision_num`` is not the current number."""
        return self._under_revision or revision_num != self._revision_num

    def record_discarded_read(self) -> None:
        """Count a read refused or discarded because of a revision."""
        with self._lock:
            self._discarded_reads += 1

    def check_stuck(self) -> bool:
        """Log (once per revision) and return True if the running revision is open too long."""
        with self._lock:
            if not self._under_revision:
                return False
            elapsed = self._clock.now_ms() - self._started_ms
            if elapsed <= self._warn_after_ms:
                return False
            if not self._warned:
                self._warned = True
                log.warning("cursor %s: revision open for %d ms; consumption may be stuck", self._name, elapsed)
            return True

    def stats(self) -> RevisionStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            under = self._under_revision
            return RevisionStats(
                revision_num=self._revision_num,
                is_under_revision=under,
                epoch_increase_count=self._increase_count,
                epoch_increase_task_state=1 if under else 0,
                refused_revisions=self._refused,
                discarded_reads=self._discarded_reads,
                open_revision_ms=(self._clock.now_ms() - self._started_ms) if under else 0,
            )
