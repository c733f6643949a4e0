"""Old path of :mod:`mledger.replay.schema` (kept for one release; re-exports only)."""

from ..replay.schema import *  # noqa: F403
