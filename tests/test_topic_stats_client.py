"""``topics stats`` with the real Pulsar client (pulsar-client 3.13.0) against mledger's protocol
server: the publishers, the Shared subscription's backlog, unacked and delayed messages and its
consumer as Pulsar's ``TopicStats`` report them, through the admin library and the REST route."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import httpx
import pulsar
import pytest

from mledger.admin import Admin, TopicStatsData
from mledger.protocol import EmbeddedBroker
from mledger.rest import AdminServer

pytestmark = pytest.mark.timeout(60)

TOPIC = "persistent://public/default/stats"


@pytest.fixture
def client(pulsar_broker: EmbeddedBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        pulsar_broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    yield c
    c.close()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Until the broker saw what the client sent asynchronously (acks are grouped, flows batched)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.005)


def test_stats_of_a_shared_subscription_with_unacked_and_delayed(
    pulsar_broker: EmbeddedBroker, client: pulsar.Client
) -> None:
    consumer = client.subscribe(
        TOPIC, "work", consumer_type=pulsar.ConsumerType.Shared, consumer_name="worker-1", receiver_queue_size=50
    )
    producer = client.create_producer(TOPIC, producer_name="orders-producer", batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    producer.send(b"later", deliver_after=timedelta(hours=1))
    got = [consumer.receive(5000) for _ in range(5)]
    assert sorted(m.data() for m in got) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    for m in got[:2]:
        consumer.acknowledge(m)

    admin = Admin(pulsar_broker.broker)

    def stats() -> TopicStatsData:
        return admin.topics.stats(TOPIC)

    wait_for(lambda: stats().subscriptions["work"].unacked_messages == 3)
    s = stats()
    assert s.msg_in_counter == 6 and s.msg_out_counter == 5 and s.bytes_in_counter > 0
    [publisher] = s.publishers
    assert publisher.producer_name == "orders-producer" and publisher.access_mode == "Shared"
    assert publisher.address and publisher.address.startswith("127.0.0.1:")
    assert publisher.client_version and publisher.connected_since
    sub = s.subscriptions["work"]
    assert sub.type == "Shared" and sub.is_durable
    assert (sub.msg_backlog, sub.unacked_messages, sub.msg_delayed, sub.msg_backlog_no_delayed) == (4, 3, 1, 3)
    [c] = sub.consumers
    assert c.consumer_name == "worker-1" and c.unacked_messages == 3 and c.msg_out_counter == 5
    assert c.address and c.address.startswith("127.0.0.1:") and c.client_version
    # the client granted 50 permits; 5 messages went out (the delayed one is held by the broker)
    wait_for(lambda: stats().subscriptions["work"].consumers[0].available_permits == 45)

    # the same over REST, as pulsar-admin reads it
    with AdminServer(admin, port=0) as server:
        r = httpx.get(f"{server.url}/admin/v2/persistent/public/default/stats/stats", timeout=10)
    assert r.status_code == 200
    data = r.json()
    assert data["publishers"][0]["producerName"] == "orders-producer"
    work = data["subscriptions"]["work"]
    assert (work["type"], work["msgBacklog"], work["unackedMessages"], work["msgDelayed"]) == ("Shared", 4, 3, 1)
    assert work["consumers"][0]["consumerName"] == "worker-1"
    consumer.close()
    producer.close()
