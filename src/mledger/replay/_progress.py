"""Progress displays for ``mledger generate`` / ``prepare`` / ``replay``, drawn by rich on stderr.

A :class:`Progress` is off when stderr is not a terminal (pipes, CI logs, tests) unless
``enabled=True``; library functions take ``progress: Progress | None`` and call
:meth:`Progress.update` as they go. Updates are cheap: rich redraws at most ten times a second
from its own thread.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress as _RichProgress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Progress:
    """``Progress(total, "replay", unit="events")``; ``update(done, note)``; ``close()`` (or
    ``with``). ``total`` 0 means unknown (no bar, a count). ``enabled=None``: when stderr is a
    terminal."""

    def __init__(
        self, total: int, label: str, unit: str = "events", enabled: bool | None = None, console: Console | None = None
    ) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal if enabled is None else enabled
        self.unit = unit
        self.total = total
        self.done = 0
        self._bar: _RichProgress | None = None
        self._task: Any = None
        if self.enabled:
            self._bar = _RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                MofNCompleteColumn(),
                TextColumn(unit),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[note]}"),
                console=self.console,
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(label, total=total or None, note="")

    def update(self, done: int, note: str | None = None) -> None:
        """Set the count done (and, optionally, a note after the bar)."""
        self.done = done
        if self._bar is not None:
            fields: dict[str, Any] = {} if note is None else {"note": note}
            self._bar.update(self._task, completed=done, **fields)

    def advance(self, n: int) -> None:
        self.update(self.done + n)

    def set_total(self, total: int, label: str | None = None) -> None:
        """Change the total (and the label), e.g. when a phase with another unit starts."""
        self.total = total
        if self._bar is not None:
            extra: dict[str, Any] = {} if label is None else {"description": label}
            self._bar.update(self._task, total=total or None, **extra)

    def close(self) -> None:
        """Draw the final state and stop redrawing."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:  # noqa: PYI034 - final class
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
