"""Old path of :mod:`mledger.replay.generate` (kept for one release; re-exports only)."""

from ..replay.generate import *  # noqa: F403
