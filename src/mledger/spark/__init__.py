"""Deprecated alias of :mod:`mledger.replay` (kept for one release; import from there).

``mledger.spark.schema``, ``.generate``, ``.local`` and ``.settings`` still import, as aliases
of the modules of the same name in :mod:`mledger.replay`; every other old module path is gone.
Importing any of them emits a :class:`DeprecationWarning` naming the new path.
"""

from ..core.deprecation import warn_moved
from ..replay import (
    EventOrderError as EventOrderError,
    InputSchemaError as InputSchemaError,
    PartitionModel as PartitionModel,
    PartitionReplayer as PartitionReplayer,
    ReplaySettings as ReplaySettings,
    SubscriptionSpec as SubscriptionSpec,
)

__all__ = [
    "EventOrderError",
    "InputSchemaError",
    "PartitionModel",
    "PartitionReplayer",
    "ReplaySettings",
    "SubscriptionSpec",
]

warn_moved("mledger.spark", "mledger.replay")
