"""Deprecated alias of :mod:`mledger.replay.generate` (kept for one release; import from there)."""

from ..core.deprecation import warn_moved
from ..replay.generate import *  # noqa: F403

warn_moved("mledger.spark.generate", "mledger.replay.generate")
