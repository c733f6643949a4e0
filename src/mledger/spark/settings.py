"""Old path of :mod:`mledger.replay.settings` (kept for one release; re-exports only)."""

from ..replay.settings import *  # noqa: F403
