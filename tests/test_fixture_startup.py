"""Issue 34's start-up measure: the pytest fixture's broker loads only what a broker that arms
no fault, follows no Pulsar version's rules, replays nothing and serves no REST request needs
(benchmarks/bench_startup.py times it). Everything else is imported on first use, through the
faces' lazy names or at the one place that needs it; this test fails when someone imports one
of them eagerly again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

NOT_AT_START = (
    "mledger._standalone_config",  # broker.conf keys: mledger standalone --config only
    "mledger._pulsar_keys",
    "mledger.broker._fault_specs",  # the fault models (pydantic), scenario files (yaml)
    "pydantic",
    "yaml",
    "mledger.protocol._faulting",  # a session's fault filter
    "mledger.protocol._replay",  # capturing and replaying client commands
    "mledger.core._rate_limiter",  # Guava's limiter: under a Pulsar version's rules only
    "mledger.replay",  # the recorder
    "uvicorn",  # the admin REST server: started when a test first asks for admin_url
    "starlette",
    "fastapi",
)

FIXTURE_START = textwrap.dedent(
    """
    import sys
    import pulsar
    from mledger.standalone import EmbeddedStandalone

    def loaded(names):
        return [n for n in names if n in sys.modules]

    broker = EmbeddedStandalone().start()  # what pulsar_broker starts
    client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = client.subscribe("persistent://public/default/t", "s")
    client.create_producer("persistent://public/default/t").send(b"first")
    message = consumer.receive(30_000)
    assert message.data() == b"first"
    consumer.acknowledge(message)
    print("started", loaded(sys.argv[1:]))
    print("serving", loaded(["mledger.broker._faults", "mledger.protocol._session"]))
    broker.faults.delay("SEND", 1)  # arming loads what faults need, through the same faces
    import mledger.protocol
    mledger.protocol.CapturingProxy
    client.create_producer("persistent://public/default/t").send(b"delayed")
    print("armed", loaded(["mledger.broker._fault_specs", "mledger.protocol._faulting", "mledger.protocol._replay"]))
    client.close()
    broker.stop()
    """
)


def test_the_fixture_broker_starts_without_faults_presets_replay_or_rest_modules() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FIXTURE_START, *NOT_AT_START], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["started"] == "[]", f"imported at the fixture's start: {lines['started']}"
    # the run really went through the broker and the protocol session, and the lazy names work
    assert lines["serving"] == "['mledger.broker._faults', 'mledger.protocol._session']"
    assert lines["armed"] == "['mledger.broker._fault_specs', 'mledger.protocol._faulting', 'mledger.protocol._replay']"
