"""Old name of :mod:`mledger.replay` (kept for one release; re-exports only).

``mledger.spark.schema``, ``.generate``, ``.local`` and ``.settings`` still import, as aliases
of the modules of the same name in :mod:`mledger.replay`; every other old module path is gone.
"""

from ..replay import EventOrderError as EventOrderError
from ..replay import InputSchemaError as InputSchemaError
from ..replay import PartitionModel as PartitionModel
from ..replay import PartitionReplayer as PartitionReplayer
from ..replay import ReplaySettings as ReplaySettings
from ..replay import SubscriptionSpec as SubscriptionSpec

__all__ = ["EventOrderError", "InputSchemaError", "PartitionModel", "PartitionReplayer", "ReplaySettings",
           "SubscriptionSpec"]
