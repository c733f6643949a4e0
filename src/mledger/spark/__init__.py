"""Replay of produced / acked / cancelled event logs through mledger cursors, on Spark or not.

Layout (every module but :mod:`.job`, :mod:`.session` and :mod:`.submit_job` works without
pyspark; those import it lazily):

* :mod:`.schema`    input and output schemas (pyarrow and Spark), row validation, reasons
* :mod:`.inputs`    finding, checking and reading the log files (one reader for every path)
* :mod:`.generate`  ``mledger generate``: seeded synthetic logs, streamed to disk
* :mod:`.engine`    :class:`PartitionReplayer`: one topic-partition's event stream, vectorised
* :mod:`.model`     the seam between the engine and the semantics it drives
* :mod:`.ledger_model`  that seam implemented with ``ManagedLedger`` + ``ManagedCursor``
* :mod:`.local`     the single-process replay over the same files with the same engine
* :mod:`.job`       ``run_replay(spark, ...)``: the Spark job
"""

from .engine import EventOrderError as EventOrderError
from .engine import PartitionReplayer as PartitionReplayer
from .schema import InputSchemaError as InputSchemaError
from .settings import ReplaySettings as ReplaySettings

__all__ = ["EventOrderError", "InputSchemaError", "PartitionReplayer", "ReplaySettings"]
