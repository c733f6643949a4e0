"""The replay submitted to a real Spark standalone cluster (REFERENCE-spark.md section 8).

A master and one worker start on 127.0.0.1 from the installed pyspark (``spark-class``), on
free ports; a virtualenv with mledger installed from a wheel (not the editable source) is
packed with venv-pack and shipped with ``--archives``; the replay is submitted in client
mode with ``spark-submit``, and its outputs must equal the single-process replay row for row.
Before the replay, the same application asks an executor where it imports mledger from: it
must be the unpacked archive, or the test would prove nothing about it.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest

from mledger.replay import GeneratorConfig, SweepSummary, generate, run_single_process

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SORT = {
    "cursors": ["topic", "partition", "subscription"],
    "anomalies": ["topic", "partition", "event", "ts_ms", "ledger_id", "entry_id", "batch_index", "subscription",
                  "reason", "detail"],
    "partitions": ["topic", "partition"],
}
PROBE = '''
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("mledger-cluster-test").getOrCreate()
where = spark.sparkContext.parallelize([0], 1).map(lambda _: (__import__("mledger").__file__, sys.executable)).collect()
print("EXECUTOR", where[0][0], where[0][1], flush=True)
from mledger.replay.spark._job import main_submit

sys.exit(main_submit(sys.argv[1:]))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> str:
    """mledger (a wheel of this checkout) and the replay extra in a fresh venv, packed."""
    base = tmp_path_factory.mktemp("env")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
          str(base / "dist"), ROOT])
    wheel = glob.glob(str(base / "dist" / "mledger-*.whl"))[0]
    env = str(base / "venv")
    _run([sys.executable, "-m", "venv", "--copies", env])  # no links out of the archive
    _run([os.path.join(env, "bin", "python"), "-m", "pip", "install", "--quiet", f"{wheel}[replay]"])
    # .tar.gz, not .tar: Spark unpacks a .tar in Java without file modes (SPARK-38632), so
    # bin/python would not be executable; a .tar.gz goes through tar and keeps them
    out = str(base / "mledger-env.tar.gz")
    import venv_pack

    venv_pack.pack(prefix=env, output=out, format="tar.gz", compress_level=1, verbose=False)
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one 2-core worker on 127.0.0.1; yields the master URL."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    base = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOG_DIR": str(base / "logs"), "SPARK_LOCAL_DIRS": str(base),
           "SPARK_NO_DAEMONIZE": "1"}
    env.pop("PYTHONPATH", None)
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    spark_class = os.path.join(home, "bin", "spark-class")
    logs = [open(base / "master.log", "w"), open(base / "worker.log", "w")]  # noqa: SIM115 - closed below
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)],
                              env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True)]
    url = f"spark://127.0.0.1:{port}"
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--webui-port",
             str(worker_ui), "--cores", "2", "--memory", "2g", "--work-dir", str(base / "work")],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    state = json.load(r)
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (base / "master.log").read_text()[-2000:] + \
                (base / "worker.log").read_text()[-2000:]
            assert all(p.poll() is None for p in procs), "a Spark daemon exited"
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for f in logs:
            f.close()


def test_replay_submitted_to_a_standalone_cluster_equals_the_single_process(
        cluster: str, packed_env: str, tmp_path: Any) -> None:
    import pyspark

    events = str(tmp_path / "events")
    # 8,000 events whose lost acks leave holes (the limit of 5 truncates): a sweep that truncates
    # replays many times slower than one that does not, and it runs twice here
    generate(events, GeneratorConfig(topics=4, partitions=3, events=8_000, max_entries_per_ledger=300, seed=21,
                                     lost_ack_fraction=0.015))
    probe = tmp_path / "submit_with_probe.py"
    probe.write_text(PROBE)
    out = str(tmp_path / "cluster-out")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    proc = _run([submit, "--master", cluster, "--deploy-mode", "client",
                 "--archives", f"{packed_env}#env", "--conf", "spark.pyspark.python=./env/bin/python",
                 "--conf", f"spark.pyspark.driver.python={sys.executable}",
                 "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false",
                 str(probe), events, out, "--tasks", "3", "--sweep", "max_unacked_ranges_to_persist=5,10000"],
                env=env, cwd=str(tmp_path), timeout=600)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("EXECUTOR "))
    module, python = line.split()[1:3]
    assert "/env/" in module and "site-packages/mledger/__init__.py" in module, line
    assert not module.startswith(ROOT) and python.endswith("env/bin/python"), line
    assert "under 2 settings" in proc.stdout
    ref = str(tmp_path / "ref")
    summary = run_single_process(events, ref, sweep=["max_unacked_ranges_to_persist=5,10000"])
    assert isinstance(summary, SweepSummary) and summary.summary_for(max_unacked_ranges_to_persist=5).truncated_ranges > 0
    keys = ["max_unacked_ranges_to_persist"]
    for name, cols in SORT.items():
        got = pq.read_table(os.path.join(out, name)).sort_by([(k, "ascending") for k in (*keys, *cols)]).to_pylist()
        want = pq.read_table(os.path.join(ref, name)).sort_by([(k, "ascending") for k in (*keys, *cols)]).to_pylist()
        assert got == want, name
    assert len(os.listdir(os.path.join(out, "cursors"))) == 3  # one part per task, retries left nothing
