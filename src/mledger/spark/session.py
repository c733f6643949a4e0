"""Building a quiet SparkSession for the replay (imports pyspark lazily).

Local runs (``local``, ``local[N]``, ``local[*]``) point ``PYSPARK_PYTHON`` at this
interpreter so the Python workers import the same mledger and pyarrow, keep the web UI off,
and give the driver JVM the memory the shuffle sort needs. Spark's own console output
(startup banner, log4j warnings, the stage progress bar, structured JSON error logs) is off
unless ``quiet=False``: errors still reach the caller as exceptions.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

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


def is_local(master: str) -> bool:
    """Whether ``master`` runs everything in this machine's processes."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def quiet_log4j_file() -> str:
    """A log4j2 configuration that only prints errors (written once per process)."""
    path = os.path.join(tempfile.gettempdir(), f"mledger-log4j2-{os.getuid() if hasattr(os, 'getuid') else 0}.properties")
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
) -> SparkSession:
    """A SparkSession for the replay (or the running one, whose settings then stay).

    Raises ``mledger.errors.MissingExtraError`` without pyspark.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        from ..errors import MissingExtraError

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
    if quiet:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{quiet_log4j_file()}"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
        # PySpark's own JSON error log; the exception itself still reaches the caller.
        logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL + 1)
    return spark
