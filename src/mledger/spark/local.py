"""Old path of :mod:`mledger.replay.local` (kept for one release; re-exports only)."""

from ..replay.local import *  # noqa: F403
