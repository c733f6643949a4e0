"""Shared fixtures."""

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for the whole test run (REFERENCE-spark.md §6)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers must use this venv
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("tests")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.adaptive.enabled", "false")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("wh")))
         .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()
