"""Fifty-eight fault scenarios against the in-process broker with the official client: CPU and wall time.

    python benchmarks/bench_faults.py [--only NAME]

Each scenario is a question a team asks of its client code (issue 34's recipes and their
variations: an error on each command that has one, a slow broker and the send timeout, a
connection closed after N frames, a half-open connection, a stalled broker, a full or slow
disk, a topic unloaded, a crash or clean restart of the broker, a terminated topic, a
subscription deleted under its consumer, a duplicate or redelivered
message, dead-lettering after N redeliveries, a Key_Shared consumer leaving mid-stream, a delayed
message at its deadline), run against a fresh ``EmbeddedBroker`` with the client's timeouts at
their minimum (operation timeout 1 s, send timeout 500 ms). Each asserts what the client saw, so
a scenario that stops working fails loudly. Printed: each scenario's wall time and the process's
CPU seconds (client and broker share the process), the totals, the slowest, and the load
average. Most of the wall time is the client's own timeouts and back-offs, which the scenarios
wait out on purpose.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pulsar

from mledger.protocol import EmbeddedBroker

SEND_TIMEOUT_MS = 500
TOPIC = "persistent://public/default/orders"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[EmbeddedBroker, pulsar.Client], None]


def expect(exception: type[BaseException], work: Callable[[], object]) -> None:
    try:
        work()
    except exception:
        return
    raise AssertionError(f"expected {exception.__name__}")


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


# -- the scenarios ---------------------------------------------------------------------------------


def producer_error(error: str, exception: type[BaseException]) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        broker.faults.fail_next("PRODUCER", error=error)
        expect(exception, lambda: client.create_producer("orders"))
        client.create_producer("orders").send(b"then")

    return Scenario(f"producer {error}", run)


def consumer_error(error: str, exception: type[BaseException]) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        client.create_producer("orders")
        broker.faults.fail_next("SUBSCRIBE", error=error)
        expect(exception, lambda: client.subscribe("orders", "billing"))
        client.subscribe("orders", "billing")

    return Scenario(f"subscribe {error}", run)


def send_error(error: str) -> Scenario:
    """A SEND refused: the client reconnects and sends again; stored once."""

    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing")
        producer = client.create_producer("orders", send_timeout_millis=5000)
        broker.faults.fail_next("SEND", error=error)
        producer.send(b"pay")
        assert consumer.receive(5000).data() == b"pay"
        expect(pulsar.Timeout, lambda: consumer.receive(100))

    return Scenario(f"send {error}, resent", run)


def lookup_error(command: str, error: str, exception: type[BaseException] | None) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        broker.faults.fail_next(command, error=error)
        if exception is None:
            client.create_producer("orders").send(b"retried")
        else:
            expect(exception, lambda: client.create_producer("orders"))

    return Scenario(f"{command.lower()} {error}", run)


def slow_send(delay_ms: int, times_out: bool, clock: str = "real") -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        timeout = SEND_TIMEOUT_MS if times_out else 30_000
        producer = client.create_producer("orders", send_timeout_millis=timeout)
        broker.faults.delay("SEND", delay_ms, clock=clock)
        if clock == "broker":
            done = threading.Event()
            producer.send_async(b"held", lambda result, mid: done.set())
            wait_for(lambda: bool(broker.faults.fired()))
            broker.clock.advance(delay_ms)
            assert done.wait(10)
        elif times_out:
            expect(pulsar.Timeout, lambda: producer.send(b"late"))
        else:
            producer.send(b"in time")

    return Scenario(f"send {delay_ms} ms late ({clock}{', times out' if times_out else ''})", run)


def random_delays() -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        producer = client.create_producer("orders", send_timeout_millis=5000)
        broker.faults.delay("SEND", (10, 100), count=5)
        for i in range(5):
            producer.send(b"%d" % i)

    return Scenario("five sends, seeded random delays", run)


def close_after(sends: int) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing")
        producer = client.create_producer("orders", send_timeout_millis=5000)
        broker.faults.close_connection("SEND", after=sends)
        for i in range(sends + 2):
            producer.send(b"%d" % i)
        assert len({consumer.receive(5000).data() for _ in range(sends + 2)}) == sends + 2

    return Scenario(f"connection closed at send {sends + 1}", run)


def close_now(by: str) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing", consumer_name="c1")
        opened = broker.stats().connections_opened
        broker.faults.close_connection(**({"topic": "orders"} if by == "topic" else {"client": "c1"}))
        wait_for(lambda: broker.stats().connections_opened > opened)
        client.create_producer("orders").send(b"after")
        assert consumer.receive(5000).data() == b"after"

    return Scenario(f"connections closed now, by {by}", run)


def half_open(command: str, direction: str) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        if command == "PRODUCER":
            broker.faults.half_open("PRODUCER", direction=direction)
            expect(pulsar.Timeout, lambda: client.create_producer("orders"))
        else:
            producer = client.create_producer("orders", send_timeout_millis=SEND_TIMEOUT_MS)
            broker.faults.half_open("SEND", direction=direction)
            expect(pulsar.Timeout, lambda: producer.send(b"unanswered"))
        broker.faults.clear()
        client.create_producer("healed").send(b"ok")

    return Scenario(f"half-open ({direction}) at {command}", run)


def pause(ms: int | None, at_command: bool) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        timeout = SEND_TIMEOUT_MS if ms and at_command else 30_000
        producer = client.create_producer("orders", send_timeout_millis=timeout)
        if at_command:
            broker.faults.pause(ms, command="SEND")
            expect(pulsar.Timeout, lambda: producer.send(b"paused"))
            wait_for(lambda: not broker.server.paused)
        else:
            broker.faults.pause(ms)
            if ms is None:
                threading.Timer(0.3, broker.faults.resume).start()
            producer.send(b"after the pause")

    what = "until resumed" if ms is None else f"{ms} ms"
    return Scenario(f"broker paused {what}{' at a send' if at_command else ''}", run)


def disk_full(count: int | None) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing")
        producer = client.create_producer("orders", send_timeout_millis=SEND_TIMEOUT_MS if count is None else 5000)
        fault = broker.faults.disk_full(count=count)
        if count is None:
            expect(pulsar.Timeout, lambda: producer.send(b"refused"))
            broker.faults.remove(fault)
            producer = client.create_producer("orders", send_timeout_millis=5000)
        producer.send(b"stored")
        assert consumer.receive(5000).data() == b"stored"

    return Scenario(f"disk full ({'until freed' if count is None else f'{count} writes'})", run)


def slow_disk(ms: int, times_out: bool) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        producer = client.create_producer("orders", send_timeout_millis=SEND_TIMEOUT_MS if times_out else 30_000)
        broker.faults.slow_writes(ms, count=1)
        if times_out:
            expect(pulsar.Timeout, lambda: producer.send(b"slow"))
        else:
            producer.send(b"slow but in time")

    return Scenario(f"slow disk {ms} ms{' beyond the send timeout' if times_out else ''}", run)


def unload(command: str | None) -> Scenario:
    """The topic unloaded under its clients (now, or at a command): they reconnect and go on."""

    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        producer = client.create_producer("orders", send_timeout_millis=5000)
        if command is None:
            consumer = client.subscribe("orders", "billing")
            broker.faults.unload_topic("orders")
        else:
            broker.faults.unload_topic(command=command, topic="orders")
            consumer = client.subscribe("orders", "billing")
        producer.send(b"after")
        assert consumer.receive(5000).data() == b"after"

    return Scenario(f"topic unloaded {'now' if command is None else f'at {command}'}", run)


def restart(crash: bool, at_send: int | None) -> Scenario:
    """A crash or clean restart, now or at the Nth SEND (not handled: sent again); nothing lost."""

    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing")
        producer = client.create_producer("orders", batching_enabled=False, send_timeout_millis=30_000)
        if at_send is None:
            broker.faults.restart(crash=crash)  # returns at once: the send below waits for the reconnection
            sent = [b"after"]
        else:
            broker.faults.restart(crash=crash, command="SEND", after=at_send)
            sent = [b"%d" % i for i in range(at_send + 1)]
        for data in sent:
            producer.send(data)
        assert [consumer.receive(10_000).data() for _ in sent] == sent
        expect(pulsar.Timeout, lambda: consumer.receive(100))

    kind = "crash" if crash else "clean restart"
    return Scenario(f"{kind} {'now' if at_send is None else f'at send {at_send + 1}'}", run)


def terminate(at_send: int | None) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        producer = client.create_producer("orders")
        producer.send(b"first")
        if at_send is None:
            broker.faults.terminate_topic("orders")
        else:
            broker.faults.terminate_topic(command="SEND", after=at_send)
            for i in range(at_send):
                producer.send(b"%d" % i)
        expect(pulsar.TopicTerminated, lambda: producer.send(b"too late"))

    return Scenario(f"topic terminated {'now' if at_send is None else f'at send {at_send + 1}'}", run)


def delete_subscription(kind: pulsar.ConsumerType) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        producer = client.create_producer("orders")
        consumer = client.subscribe("orders", "billing", consumer_type=kind)
        producer.send(b"unacked")
        consumer.receive(5000)
        broker.faults.delete_subscription("orders", "billing")
        wait_for(lambda: broker.stats().consumers == 1 and _has_subscription(broker))
        producer.send(b"after")
        assert consumer.receive(5000).data() == b"after"

    return Scenario(f"subscription deleted under its {kind.name} consumer", run)


def _has_subscription(broker: EmbeddedBroker) -> bool:
    return "billing" in broker.call(lambda: broker.broker.get_topic(TOPIC).subscription_names())


def duplicate(batched: bool) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing")
        broker.faults.duplicate(topic="orders")
        producer = client.create_producer("orders", batching_enabled=batched)
        producer.send(b"once")
        first, again = consumer.receive(5000), consumer.receive(5000)
        assert first.message_id() == again.message_id()

    return Scenario(f"a message delivered twice{' (batched)' if batched else ''}", run)


def redeliver(kind: pulsar.ConsumerType) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        consumer = client.subscribe("orders", "billing", consumer_type=kind)
        broker.faults.redeliver(topic="orders")
        client.create_producer("orders").send(b"again")
        first, again = consumer.receive(5000), consumer.receive(5000)
        assert (first.redelivery_count(), again.redelivery_count()) == (0, 1)

    return Scenario(f"a message redelivered ({kind.name})", run)


def dead_letter(max_redeliveries: int) -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        dlq = client.subscribe("orders-dlq", "audit")
        policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=max_redeliveries, dead_letter_topic="orders-dlq")
        consumer = client.subscribe(
            "orders", "billing", consumer_type=pulsar.ConsumerType.Shared, dead_letter_policy=policy
        )
        broker.faults.redeliver(topic="orders", count=max_redeliveries + 1)
        client.create_producer("orders").send(b"poison")
        for _ in range(max_redeliveries + 1):
            consumer.receive(5000)
        assert dlq.receive(10_000).data() == b"poison"

    return Scenario(f"dead-lettered after {max_redeliveries} redeliveries", run)


def key_shared_consumer_leaves() -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        kind = pulsar.ConsumerType.KeyShared
        staying = client.subscribe("orders", "billing", consumer_type=kind, consumer_name="staying")
        leaving_client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            leaving_client.subscribe("orders", "billing", consumer_type=kind, consumer_name="leaving")
            producer = client.create_producer("orders")
            for i in range(20):
                producer.send(b"%d" % i, partition_key=f"k{i}")
            broker.faults.close_connection(client="leaving")  # its client goes away mid-stream
            leaving_client.close()
        except pulsar.PulsarException:
            pass
        got = set()
        while len(got) < 20:
            message = staying.receive(5000)
            staying.acknowledge(message)
            got.add(message.data())

    return Scenario("a Key_Shared consumer leaves mid-stream", run)


def delayed_at_deadline() -> Scenario:
    def run(broker: EmbeddedBroker, client: pulsar.Client) -> None:
        import datetime

        consumer = client.subscribe("orders", "billing", consumer_type=pulsar.ConsumerType.Shared)
        client.create_producer("orders").send(b"later", deliver_after=datetime.timedelta(minutes=5))
        broker.clock.advance(5 * 60_000 - 1000)
        expect(pulsar.Timeout, lambda: consumer.receive(100))
        broker.clock.advance(1000)
        assert consumer.receive(5000).data() == b"later"

    return Scenario("a delayed message at its deadline", run)


SCENARIOS: list[Scenario] = [
    producer_error("TopicNotFound", pulsar.TopicNotFound),
    producer_error("ProducerBusy", pulsar.ProducerBusy),
    producer_error("AuthorizationError", pulsar.AuthorizationError),
    producer_error("NotAllowedError", pulsar.NotAllowedError),
    producer_error("TopicTerminatedError", pulsar.TopicTerminated),
    producer_error("ProducerFenced", pulsar.ProducerFenced),
    consumer_error("ConsumerBusy", pulsar.ConsumerBusy),
    consumer_error("AuthorizationError", pulsar.AuthorizationError),
    consumer_error("TopicNotFound", pulsar.TopicNotFound),
    consumer_error("ServiceNotReady", pulsar.Timeout),  # apache/pulsar-client-cpp#577
    consumer_error("TooManyRequests", pulsar.TooManyLookupRequestException),
    send_error("PersistenceError"),
    send_error("ServiceNotReady"),
    send_error("TooManyRequests"),
    send_error("UnknownError"),
    lookup_error("LOOKUP", "ServiceNotReady", None),
    lookup_error("LOOKUP", "TopicNotFound", pulsar.TopicNotFound),
    lookup_error("LOOKUP", "TooManyRequests", pulsar.TooManyLookupRequestException),
    lookup_error("PARTITIONED_METADATA", "ServiceNotReady", None),
    lookup_error("PARTITIONED_METADATA", "TopicNotFound", pulsar.TopicNotFound),
    lookup_error("CONNECT", "ServiceNotReady", None),
    slow_send(200, times_out=False),
    slow_send(1500, times_out=True),
    slow_send(60_000, times_out=False, clock="broker"),
    random_delays(),
    close_after(0),
    close_after(1),
    close_after(5),
    close_now("topic"),
    close_now("client"),
    half_open("PRODUCER", "write"),
    half_open("PRODUCER", "both"),
    half_open("SEND", "read"),
    half_open("SEND", "write"),
    pause(None, at_command=False),
    pause(300, at_command=False),
    pause(1500, at_command=True),
    disk_full(1),
    disk_full(3),
    disk_full(None),
    slow_disk(100, times_out=False),
    slow_disk(1500, times_out=True),
    unload(None),
    unload("SUBSCRIBE"),
    restart(crash=True, at_send=None),
    restart(crash=True, at_send=2),
    restart(crash=False, at_send=None),
    restart(crash=False, at_send=2),
    terminate(None),
    terminate(3),
    delete_subscription(pulsar.ConsumerType.Exclusive),
    delete_subscription(pulsar.ConsumerType.Shared),
    duplicate(batched=False),
    redeliver(pulsar.ConsumerType.Shared),
    redeliver(pulsar.ConsumerType.Exclusive),
    dead_letter(2),
    key_shared_consumer_leaves(),
    delayed_at_deadline(),
]


def run_one(scenario: Scenario) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one scenario on a fresh broker."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with EmbeddedBroker() as broker:
        client = pulsar.Client(
            broker.service_url, operation_timeout_seconds=1, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        try:
            scenario.run(broker, client)
        finally:
            broker.faults.clear()
            try:
                client.close()
            except pulsar.PulsarException:  # a producer a fault closed, a close held by a delay
                pass
    return time.perf_counter() - wall0, time.process_time() - cpu0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the scenarios whose name holds this text")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if args.only is None or args.only in s.name]
    print(f"{len(chosen)} scenarios; load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    results = []
    for scenario in chosen:
        wall, cpu = run_one(scenario)
        results.append((scenario.name, wall, cpu))
        print(f"  {scenario.name:58s} {wall:6.2f} s wall {cpu:6.2f} s CPU", flush=True)
    walls = [r[1] for r in results]
    cpus = [r[2] for r in results]
    print(f"\nscenarios: {len(results)}")
    print(f"wall seconds in all: {sum(walls):.1f}")
    print(f"CPU seconds in all: {sum(cpus):.1f}")
    print(f"median wall seconds per scenario: {statistics.median(walls):.2f}")
    print(f"median CPU seconds per scenario: {statistics.median(cpus):.3f}")
    slowest = sorted(results, key=lambda r: -r[1])[:3]
    print("slowest: " + "; ".join(f"{name} {wall:.1f} s" for name, wall, _ in slowest))
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
