"""Shared fixtures."""

import contextlib
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# CI machines are shared and slow at times: no per-example deadline (a slow example is not a
# failure), and data generation may be slow without failing the health check.
settings.register_profile("mledger", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mledger")


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


@pytest.fixture
def client_for():
    """``client_for(broker)``: a ``pulsar.Client`` of an embedded broker (10 s operation timeout,
    errors-only logging), closed after the test."""
    import pulsar

    clients = []

    def make(broker):
        client = pulsar.Client(
            broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        with contextlib.suppress(pulsar.AlreadyClosed):  # a test may close its client itself
            client.close()


@pytest.fixture
def standalone_process():
    """``standalone_process(data_dir, *options)``: ``mledger standalone`` in a subprocess over a
    data directory (``rehearsal.Standalone``), killed after the test if still running."""
    from rehearsal import Standalone

    started = []

    def start(data_dir, *options):
        started.append(Standalone(data_dir, *options))
        return started[-1]

    yield start
    for standalone in started:
        standalone.kill()
