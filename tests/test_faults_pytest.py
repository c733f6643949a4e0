"""Issue 34 item 5: the pytest ergonomics of faults, run by pytest's own ``pytester`` (one
subprocess for all of them): the ``pulsar_faults`` marker (faults, a scenario file, the seed),
the factory's options, faults cleared between tests, a failing test's report naming the faults
that fired and the seed, and the asyncio variant of the fixture (its clock, stats and restart
awaited) with the client's ``pulsar.asyncio`` API."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(120)

TESTS = """
import asyncio, pulsar, pytest
from pulsar.asyncio import Client, PulsarException

def client(broker):
    return pulsar.Client(broker.service_url, operation_timeout_seconds=1,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

SEEN = []

@pytest.mark.pulsar_faults({"action": "error", "command": "PRODUCER", "error": "TopicNotFound"}, seed=1234)
def test_marked(pulsar_broker):
    SEEN.append(pulsar_broker)
    assert pulsar_broker.faults.seed == 1234
    c = client(pulsar_broker)
    with pytest.raises(pulsar.TopicNotFound):
        c.create_producer("orders")
    c.close()

def test_cleared_between_tests(pulsar_broker):
    assert SEEN[0].faults.armed() == [] and SEEN[0].faults.stats().fired == 1
    assert pulsar_broker.faults.armed() == [] and pulsar_broker.faults.fired() == []

@pytest.mark.pulsar_faults({"action": "delay", "command": "LOOKUP", "delay_ms": [1, 5]},
                           {"action": "error", "command": "SUBSCRIBE", "error": "ConsumerBusy", "count": 9},
                           seed=99)
def test_fails(pulsar_broker):
    c = client(pulsar_broker)
    c.create_producer("orders")
    c.close()
    assert False, "the test's own failure"

@pytest.mark.pulsar_faults("scenario.yaml")
def test_scenario(pulsar_broker):
    c = client(pulsar_broker)
    with pytest.raises(pulsar.ProducerBusy):
        c.create_producer("orders")
    c.close()
    assert pulsar_broker.faults.seed == 5

def test_factory(pulsar_broker_factory):
    broker = pulsar_broker_factory(faults=[{"action": "terminate_topic", "command": "SEND"}], fault_seed=3)
    assert broker.faults.seed == 3 and [a.spec.action for a in broker.faults.armed()] == ["terminate_topic"]

@pytest.mark.pulsar_faults("scenario.yaml", {"action": "close"})
def test_mixed(pulsar_broker):
    pass

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_async(async_pulsar_broker):
    client = Client(async_pulsar_broker.service_url, operation_timeout_seconds=1,
                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    async_pulsar_broker.faults.fail_next("PRODUCER", error="TopicNotFound")
    with pytest.raises(PulsarException, match="TopicNotFound"):
        await client.create_producer("orders")
    producer = await client.create_producer("orders")
    async_pulsar_broker.faults.delay("SEND", 60_000, clock="broker")
    sending = asyncio.ensure_future(producer.send(b"held"))
    while len(async_pulsar_broker.faults.fired()) < 2:   # the SEND is held by the broker
        await asyncio.sleep(0.01)
    assert not sending.done()
    await async_pulsar_broker.clock.advance(60_000)   # awaited: the loop runs on meanwhile
    await asyncio.wait_for(sending, 10)
    stats = await async_pulsar_broker.stats()
    assert stats.messages_in == 1
    await async_pulsar_broker.restart(crash=True)     # awaited too; the client reconnects
    await asyncio.wait_for(producer.send(b"after"), 10)
    assert (await async_pulsar_broker.stats()).messages_in == 1   # the new server's counters
    await client.close()
"""


def test_markers_factory_options_the_failure_report_and_the_asyncio_fixture(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", scenario="seed: 5\nfaults:\n  - {action: error, command: PRODUCER, error: ProducerBusy}\n")
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*- mledger faults -*",
            "seed 99 (the same draws again: pulsar_faults(..., seed=99))",
            "  fired #1 delay on LOOKUP topic=persistent://public/default/orders client=*: held * ms (real time)",
            "  still armed #2 error (0 matches)",
        ]
    )
    assert "seed 1234" not in result.stdout.str()  # passing tests report nothing
    result.stdout.fnmatch_lines(["*pulsar_faults: a scenario file (scenario.yaml) stands alone in the marker*"])
