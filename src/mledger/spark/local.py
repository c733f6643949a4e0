"""Deprecated alias of :mod:`mledger.replay.local` (kept for one release; import from there)."""

from ..core.deprecation import warn_moved
from ..replay.local import *  # noqa: F403

warn_moved("mledger.spark.local", "mledger.replay.local")
