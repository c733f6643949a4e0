"""Deprecated alias of :mod:`mledger.replay.settings` (kept for one release; import from there)."""

from ..core.deprecation import warn_moved
from ..replay.settings import *  # noqa: F403

warn_moved("mledger.spark.settings", "mledger.replay.settings")
