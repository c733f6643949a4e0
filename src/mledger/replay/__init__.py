"""Replay of produced / acked / cancelled event logs through mledger's broker and cursors.

Nothing in this package imports pyspark; the Spark driver glue is :mod:`mledger.replay.spark`.

* :mod:`.schema`    input, event and output schemas, file and row checks
* :mod:`.inputs`    finding, checking and reading raw event logs
* :mod:`.generate`  ``mledger generate``: seeded synthetic logs, streamed to disk
* :mod:`.engine`    :class:`PartitionReplayer`: one topic-partition's events, vectorised
* :mod:`.columns`, :mod:`.entries`  the engine's event columns and produced-position index
* :mod:`.model`     the seam between the engine and the semantics it drives
* :mod:`.broker_model`, :mod:`.store`  that seam on ``mledger.broker`` (topic, subscriptions, dedup, delayed delivery)
* :mod:`.local`     the single-process replay
* :mod:`.settings`, :mod:`.summary`, :mod:`.events`  settings, the printed summary, hand-written logs for tests
"""

from .engine import EventOrderError as EventOrderError, PartitionReplayer as PartitionReplayer
from .model import PartitionModel as PartitionModel, SubscriptionSpec as SubscriptionSpec
from .schema import InputSchemaError as InputSchemaError
from .settings import ReplaySettings as ReplaySettings

__all__ = [
    "EventOrderError",
    "InputSchemaError",
    "PartitionModel",
    "PartitionReplayer",
    "ReplaySettings",
    "SubscriptionSpec",
]
