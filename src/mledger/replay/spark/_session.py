"""Building a quiet SparkSession for the replay (imports pyspark lazily).

Local runs (``local``, ``local[N]``, ``local[*]``) point ``PYSPARK_PYTHON`` at this
interpreter so the Python workers import the same mledger and pyarrow, keep the web UI off,
and give the driver JVM the memory the shuffle sort needs. Spark's own console output
(startup banner, log4j warnings, the stage progress bar, structured JSON error logs) is off
unless ``quiet=False``: errors still reach the caller as exceptions.

A local JVM this module starts maps the classes of a previous run from a class-data-sharing
archive (:mod:`.class_archive`); a session built with ``write_class_archive=True`` makes
that archive when there is none, and must then be ended with :func:`stop_session`.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from . import _class_archive as class_archive
from ._class_archive import ClassArchive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex{3}
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.queryContext.name = DataFrameQueryContextLogger
logger.queryContext.level = off
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""


SHORT_JOB_JIT_OPTIONS = (
    "-XX:FreqInlineSize=120 -XX:InlineSmallCode=1000 "
    "-XX:Tier4InvocationThreshold=20000 -XX:Tier4CompileThreshold=30000 -XX:Tier4BackEdgeThreshold=160000"
)
"""HotSpot JIT settings for a driver JVM that lives for one replay. A fresh Spark JVM spends
more CPU in its C2 compiler than in the replay's tasks (15 of 40 CPU-seconds for 10M events
on 2 cores), mostly optimising code that runs a few thousand times: C2 waits 4x longer
before compiling a method and inlines less (the defaults are 5,000 / 15,000 / 40,000 and
325 / 2,500 bytes). Measured: the compiler's CPU time 15.5 -> 8.8 s, the tasks' unchanged,
the replay 2-3 s shorter."""


SCHEDULER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""HotSpot settings for a driver JVM that only schedules (a replay of a prepared log: the
Python tasks read, replay and write; the JVM ships a few hundred bytes per task). Its CPU is
start-up and class loading, where C2 compiles and the parallel collector's threads are pure
overhead: C1 only and the serial collector took the JVM of a 1M-event replay from 5.2 to
3.4 CPU-seconds. A prepare (a shuffle and a sort in the JVM) keeps :data:`SHORT_JOB_JIT_OPTIONS`."""


def is_local(master: str) -> bool:
    """Whether ``master`` runs everything in this machine's processes."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def quiet_log4j_file() -> str:
    """A log4j2 configuration that only prints errors (written once per process)."""
    path = os.path.join(
        tempfile.gettempdir(), f"mledger-log4j2-{os.getuid() if hasattr(os, 'getuid') else 0}.properties"
    )
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == _LOG4J2:
                return path
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(_LOG4J2)
    return path


def build_session(
    master: str = "local[*]",
    app_name: str = "mledger-replay",
    conf: dict[str, Any] | None = None,
    quiet: bool = True,
    driver_memory: str = "2g",
    write_class_archive: bool = False,
    jvm_options: str = SHORT_JOB_JIT_OPTIONS,
) -> SparkSession:
    """A SparkSession for the replay (or the running one, whose settings then stay).

    A local JVM started here uses the class archive of an earlier run; with
    ``write_class_archive`` and no archive yet, it writes one, and the caller ends the
    session with :func:`stop_session` (which publishes it). ``jvm_options``: HotSpot settings
    for a local JVM started here (:data:`SHORT_JOB_JIT_OPTIONS`, or
    :data:`SCHEDULER_JVM_OPTIONS` when the JVM only schedules Python tasks). Raises
    ``mledger.core.MissingExtraError`` without pyspark.
    """
    global _writing_archive
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        from ...core import MissingExtraError

        raise MissingExtraError("the Spark replay needs pyspark: pip install 'mledger[spark]'") from exc
    local = is_local(master)
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings: dict[str, Any] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.log.structuredLogging.enabled": "false",
    }
    if local:
        settings["spark.ui.enabled"] = "false"
        settings["spark.driver.memory"] = driver_memory
    java_options = [f"-Dlog4j2.configurationFile=file:{quiet_log4j_file()}"] if quiet else []
    archive = None
    if local and not _jvm_running() and not (conf or {}).get("spark.driver.extraJavaOptions"):
        java_options.append(jvm_options)
        archive = class_archive.prepare({**settings, **(conf or {})}, write=write_class_archive)
        if archive is not None:
            java_options.append(archive.java_options())
    if java_options:
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if archive is not None and archive.dump_to is not None:
        _writing_archive = archive
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
        # PySpark's own JSON error log; the exception itself still reaches the caller.
        logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL + 1)
    return spark


_writing_archive: ClassArchive | None = None
"""The archive this process's JVM writes when it exits (see :func:`stop_session`)."""


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None  # noqa: SLF001 - PySpark keeps its JVM here


def writes_class_archive() -> bool:
    """Whether this process's JVM writes a class archive when the session stops."""
    return _writing_archive is not None


def stop_session(spark: SparkSession) -> None:
    """Stop ``spark``; if its JVM writes a class archive, end the JVM, wait for the archive
    (15-20 s on 2 cores, once per Spark installation) and publish it. A later session in
    this process starts a new JVM."""
    global _writing_archive
    spark.stop()
    archive, _writing_archive = _writing_archive, None
    if archive is None:
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway  # noqa: SLF001
    SparkContext._gateway = None  # noqa: SLF001
    SparkContext._jvm = None  # noqa: SLF001
    class_archive.finish(archive, gateway)
