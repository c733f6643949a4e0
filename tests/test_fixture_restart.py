"""Issue 33 item 6: the fixture rehearses a broker restart and a topic unload with the real
client. ``pulsar_broker.restart(crash=True)`` loses what a SIGKILL loses (the cursor state the
mark-delete throttle had not persisted), a clean restart and an unload go through the cursors'
close path; the client reconnects by itself (same port and URLs) and receives again what the
stop did not keep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest
from rehearsal import TOPIC, Run, throttled, wait_for

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture
def held_back(pulsar_broker_factory, client_for) -> Iterator[Run]:
    """A run where message 0 is acknowledged and persisted, 1, 3, 4 and 5 acknowledged and held
    back by the throttle, 2 and 6-9 not acknowledged."""
    broker = pulsar_broker_factory(broker_config=throttled())
    run = Run(broker, client_for(broker))
    run.ack(0)
    wait_for(lambda: run.cursor().persistent_mark_delete_position == run.positions[0])
    run.ack(1, 3, 4, 5)
    assert run.cursor().persistent_mark_delete_position == run.positions[0]
    yield run


def test_a_crash_loses_what_the_throttle_held_back(held_back: Run) -> None:
    url = held_back.broker.service_url
    held_back.broker.restart(crash=True)
    assert held_back.received_again() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert held_back.broker.service_url == url


def test_a_clean_restart_keeps_every_acknowledgement(held_back: Run) -> None:
    held_back.broker.restart()
    assert held_back.received_again() == [2, 6, 7, 8, 9]


def test_an_unload_keeps_every_acknowledgement_and_the_clients_reconnect(held_back: Run) -> None:
    before = held_back.broker.broker.get_topic(TOPIC)
    response = httpx.put(f"{held_back.broker.admin_url}/admin/v2/persistent/public/default/restarts/unload", timeout=30)
    assert response.status_code == 204
    assert held_back.received_again() == [2, 6, 7, 8, 9]
    assert held_back.broker.broker.get_topic(TOPIC) is not before  # loaded again by the lookup


def test_an_unload_redelivers_what_the_close_path_truncates(pulsar_broker_factory, client_for) -> None:
    """With at most one range persisted, the close path keeps the first hole's range only."""
    broker = pulsar_broker_factory(broker_config=throttled(max_unacked_ranges_to_persist=1))
    run = Run(broker, client_for(broker))
    run.ack(0, 1, 3, 5, 7)  # ranges (2..3] (4..5] (6..7] above the mark-delete 1
    broker.call(lambda: broker.broker.unload_topic(TOPIC))
    assert run.received_again() == [2, 4, 5, 6, 7, 8, 9]


def test_a_crash_over_a_data_directory(tmp_path: Path, pulsar_broker_factory, client_for) -> None:
    broker = pulsar_broker_factory(data_dir=tmp_path / "data", broker_config=throttled())
    run = Run(broker, client_for(broker))
    run.ack(0)
    run.ack(2)
    broker.restart(crash=True)  # the data directory's lock is released and taken again
    assert run.received_again() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    broker.restart()
    assert run.received_again() == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_the_urls_stay_and_the_clock_goes_on_across_a_restart(pulsar_broker) -> None:
    urls = (pulsar_broker.service_url, pulsar_broker.admin_url)
    clock = pulsar_broker.clock
    later = clock.advance(3_600_000)
    pulsar_broker.restart(crash=True)
    assert (pulsar_broker.service_url, pulsar_broker.admin_url) == urls
    assert httpx.get(f"{urls[1]}/admin/v2/clusters", timeout=30).json() == ["standalone"]
    assert pulsar_broker.clock is clock and clock.now_ms() == later
    with pytest.raises(RuntimeError, match="not running"):
        pulsar_broker.stop()
        pulsar_broker.restart()


def test_a_consumer_leaving_persists_nothing(held_back: Run, client_for) -> None:
    """The dispatcher rewinds when a consumer leaves (its messages go back), and a rewind moves
    the read position only: Pulsar's ``ManagedCursorImpl.rewind`` persists nothing, so what the
    throttle held back is still lost by a crash."""
    held_back.consumer.close()
    wait_for(lambda: not held_back.broker.broker.get_topic(TOPIC).get_subscription("billing").consumers)
    assert held_back.cursor().persistent_mark_delete_position == held_back.positions[0]
    held_back.broker.restart(crash=True)
    held_back.consumer = client_for(held_back.broker).subscribe(
        TOPIC, "billing", consumer_type=pulsar.ConsumerType.Shared
    )
    assert held_back.received_again() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
