"""The replay's Spark driver glue: sessions, the Spark job and its ``spark-submit`` entry file.

pyspark is imported lazily (inside functions), so importing this package needs no pyspark; its
names are served lazily too (PEP 562), so a command imports only the module it runs.
"""

from typing import TYPE_CHECKING

from ...core import lazy_getattr

if TYPE_CHECKING:
    from ._job import run_replay as run_replay
    from ._prepare import executor_path as executor_path, prepare_on_spark as prepare_on_spark
    from ._session import (
        SCHEDULER_JVM_OPTIONS as SCHEDULER_JVM_OPTIONS,
        SHORT_JOB_JIT_OPTIONS as SHORT_JOB_JIT_OPTIONS,
        build_session as build_session,
        stop_session as stop_session,
        writes_class_archive as writes_class_archive,
    )

_LAZY = {
    "._job": ("run_replay",),
    "._prepare": ("executor_path", "prepare_on_spark"),
    "._session": (
        "SCHEDULER_JVM_OPTIONS",
        "SHORT_JOB_JIT_OPTIONS",
        "build_session",
        "stop_session",
        "writes_class_archive",
    ),
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())
