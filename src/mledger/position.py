"""Deprecated alias of :mod:`mledger.core.position` (kept for one release; import from there)."""

from .core.position import (
    EARLIEST as EARLIEST,
    LATEST as LATEST,
    Position as Position,
)
