"""Deprecated alias of :mod:`mledger.core.clock` (kept for one release; import from there)."""

from .core.clock import (
    Clock as Clock,
    ManualClock as ManualClock,
    SystemClock as SystemClock,
)
