"""Replay of produced / acked / cancelled event logs through mledger cursors, on Spark or not.

Layout (only :mod:`.job`, :mod:`.session` and :mod:`.submit_job` need pyspark, imported
lazily):

* :mod:`.schema`    input, event and output schemas (pyarrow and Spark), file and row checks
* :mod:`.inputs`    finding, checking and reading the log files
* :mod:`.generate`  ``mledger generate``: seeded synthetic logs, streamed to disk
* :mod:`.engine`    :class:`PartitionReplayer`: one topic-partition's events, vectorised
* :mod:`.columns`, :mod:`.entries`  the engine's event columns and produced-position index
* :mod:`.model`     the seam between the engine and the semantics it drives
* :mod:`.broker_model`, :mod:`.store`  that seam on ``mledger.broker`` (topic, subscriptions, dedup, delayed delivery)
* :mod:`.local`     the single-process replay over the same files with the same engine
* :mod:`.job`, :mod:`.session`, :mod:`.submit_job`  the Spark job and its entry points
* :mod:`.class_archive`  the local driver JVM's class-data-sharing archive (faster starts)
* :mod:`.settings`, :mod:`.summary`, :mod:`.progress`, :mod:`.events`  settings, the printed
  summary, the progress bar, hand-written logs for tests
"""

from .engine import EventOrderError as EventOrderError
from .engine import PartitionReplayer as PartitionReplayer
from .model import PartitionModel as PartitionModel
from .model import SubscriptionSpec as SubscriptionSpec
from .schema import InputSchemaError as InputSchemaError
from .settings import ReplaySettings as ReplaySettings

__all__ = ["EventOrderError", "InputSchemaError", "PartitionModel", "PartitionReplayer", "ReplaySettings",
           "SubscriptionSpec"]
