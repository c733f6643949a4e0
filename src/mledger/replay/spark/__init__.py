"""The replay's Spark driver glue: sessions, the Spark job and its ``spark-submit`` entry file.

pyspark is imported lazily (inside functions), so importing this package needs no pyspark.
"""

from ._job import run_replay as run_replay
from ._prepare import executor_path as executor_path, prepare_on_spark as prepare_on_spark
from ._session import (
    SCHEDULER_JVM_OPTIONS as SCHEDULER_JVM_OPTIONS,
    SHORT_JOB_JIT_OPTIONS as SHORT_JOB_JIT_OPTIONS,
    build_session as build_session,
    stop_session as stop_session,
    writes_class_archive as writes_class_archive,
)
