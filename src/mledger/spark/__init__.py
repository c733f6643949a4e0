"""Old name of :mod:`mledger.replay` (kept for one release; re-exports only).

``mledger.spark.schema``, ``.generate``, ``.local`` and ``.settings`` still import, as aliases
of the modules of the same name in :mod:`mledger.replay`; every other old module path is gone.
"""

from ..replay import (
           EventOrderError as EventOrderError,
           InputSchemaError as InputSchemaError,
           PartitionModel as PartitionModel,
           PartitionReplayer as PartitionReplayer,
           ReplaySettings as ReplaySettings,
           SubscriptionSpec as SubscriptionSpec,
)

__all__ = ["EventOrderError", "InputSchemaError", "PartitionModel", "PartitionReplayer", "ReplaySettings",
           "SubscriptionSpec"]
