"""A one-line progress bar on stderr, redrawn in place; silent when stderr is not a TTY."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _human(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


class Progress:
    """``Progress(total, "generate", unit="events")``; ``update(done)``; ``close()``.

    Draws at most ten times a second. ``enabled=None`` means "when the stream is a TTY".
    ``total`` may be 0 (unknown): the bar then shows the count and rate only.
    """

    def __init__(
        self, total: int, label: str, unit: str = "events", stream: TextIO | None = None,
        enabled: bool | None = None, width: int = 30, show_rate: bool = True,
    ) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.show_rate = show_rate
        self.done = 0
        self._start = time.monotonic()
        self._drawn = 0.0
        self._text = ""

    def update(self, done: int, text: str = "", force: bool = False) -> None:
        """Set the count (and an optional note) and redraw if due."""
        self.done = done
        self._text = text
        now = time.monotonic()
        if self.enabled and (force or now - self._drawn >= 0.1):
            self._drawn = now
            self._draw(now)

    def advance(self, n: int) -> None:
        """Add ``n`` to the count."""
        self.update(self.done + n)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        if self.total > 0:
            frac = min(self.done / self.total, 1.0)
            filled = int(frac * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            line = f"\r{self.label} [{bar}] {frac:4.0%} {_human(self.done)}/{_human(self.total)} {self.unit}"
        else:
            line = f"\r{self.label} {_human(self.done)} {self.unit}"
        if self.show_rate:
            line += f"  {_human(rate)}/s"
        line += f"  {elapsed:5.1f}s"
        if self._text:
            line += f"  {self._text}"
        self.stream.write(line + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:  # noqa: PYI034 - final class
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
