"""Deprecated alias of :mod:`mledger.replay.schema` (kept for one release; import from there)."""

from ..core.deprecation import warn_moved
from ..replay.schema import *  # noqa: F403

warn_moved("mledger.spark.schema", "mledger.replay.schema")
