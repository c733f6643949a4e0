"""A client's side of a broker restart, for the restart, preset and differential tests.

* :class:`Run`: ten messages on a Shared subscription of the in-process fixture, acknowledged
  and waited for, and what the consumer receives again;
* :class:`Standalone` and :class:`Workload`: ``mledger standalone`` in a subprocess over a data
  directory, stopped with SIGKILL or SIGTERM, and the seeded workload the real client drives
  through it (plain and batched messages, acknowledgements with holes and partial batches);
  :func:`recorded_acks` reads what its recording says was acknowledged and
  :func:`received_again` collects what a subscription receives after the restart.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pyarrow.parquet as pq

from mledger.broker import BrokerConfig
from mledger.core import Position
from mledger.standalone import EmbeddedStandalone

TOPIC = "persistent://public/default/restarts"
MessageKey = tuple[int, int, int]
"""(ledger id, entry id, batch index; -1 when not batched): a message."""
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def throttled(**changes: object) -> BrokerConfig:
    """Pulsar's mark-delete rate (1/s) on the fixture's clock, which stands still: after the
    first persist every acknowledgement is held back until a close or a flush writes it."""
    return BrokerConfig(
        managed_ledger_config=BrokerConfig().ledger_config.with_changes(throttle_mark_delete=1.0, **changes)
    )


class Run:
    """A producer and a Shared consumer on :data:`TOPIC` with ten messages, all received."""

    def __init__(self, broker: EmbeddedStandalone, client: pulsar.Client) -> None:
        self.broker = broker
        self.consumer = client.subscribe(TOPIC, "billing", consumer_type=pulsar.ConsumerType.Shared)
        self.producer = client.create_producer(TOPIC, batching_enabled=False)
        ids = [self.producer.send(b"m%d" % i) for i in range(10)]
        self.positions = [Position(m.ledger_id(), m.entry_id()) for m in ids]
        self.messages = [self.consumer.receive(30_000) for _ in ids]

    def ack(self, *indexes: int) -> None:
        """Acknowledge messages and wait until the broker applied them (the client groups acks
        for 100 ms and asks no receipt)."""
        for i in indexes:
            self.consumer.acknowledge(self.messages[i])
        wait_for(lambda: all(self.cursor().is_message_deleted(self.positions[i]) for i in indexes))

    def cursor(self):  # noqa: ANN201 - the broker's cursor of the subscription
        return self.broker.broker.get_topic(TOPIC).get_subscription("billing").cursor

    def received_again(self) -> list[int]:
        """The messages the consumer receives again: those before a marker sent now (after a
        reconnection the dispatcher reads from the mark-delete on, in order), which is
        acknowledged."""
        self.producer.send(b"marker")
        again = []
        while (message := self.consumer.receive(30_000)).data() != b"marker":
            again.append(int(message.data()[1:]))
        self.consumer.acknowledge(message)
        return sorted(again)


def wait_for(condition: Callable[[], bool], what: str = "the condition", timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Standalone:
    """``mledger standalone`` in a subprocess over ``data`` (free ports) with ``options``."""

    def __init__(self, data: Path, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mledger.cli", "standalone", "--data-dir", str(data), "--bind", "127.0.0.1:0",
             "--admin-bind", "127.0.0.1:0", *options],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        urls = json.loads(self.proc.stdout.readline())
        self.service_url: str = urls["service_url"]
        self.admin_url: str = urls["admin_url"]
        self._admin_ready: threading.Thread | None = None

    def warm_admin(self) -> None:
        """Build the admin app now, in the background (its first request takes about a second):
        :meth:`admin_get` waits for it."""
        self._admin_ready = threading.Thread(
            target=lambda: httpx.get(f"{self.admin_url}/admin/v2/clusters", timeout=60)
        )
        self._admin_ready.start()

    def admin_get(self, path: str) -> Any:
        """The JSON answer of the admin REST API to ``GET path``."""
        if self._admin_ready is not None:
            self._admin_ready.join()
        response = httpx.get(f"{self.admin_url}{path}", timeout=30)
        response.raise_for_status()
        return response.json()

    def stop(self, crash: bool) -> None:
        """SIGKILL (``crash``) or SIGTERM (every topic closed, each cursor through its close path)."""
        self.proc.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        assert code == (-signal.SIGKILL if crash else 0), code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)


@dataclass
class Subscription:
    """One subscription of the workload and what the client acknowledged on it."""

    name: str
    kind: pulsar.ConsumerType
    acked: set[MessageKey] = field(default_factory=set)
    cumulative: MessageKey | None = None


class Workload:
    """A seeded workload against one broker, on ``topic``: :attr:`PLAIN` plain messages,
    :attr:`BATCHES` batches of :attr:`BATCH`, :attr:`PLAIN` plain messages; a Shared and an
    Exclusive subscription (``batch_index_ack_enabled=True``: the Python client's default sends
    no batch-index acks)."""

    PLAIN = 6
    BATCHES = 3
    BATCH = 4

    def __init__(self, service_url: str, seed: int, topic: str = TOPIC) -> None:
        self.topic = topic
        self.rng = random.Random(seed)
        self.client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=QUIET)
        self.subscriptions = [
            Subscription("shared", pulsar.ConsumerType.Shared),
            Subscription("exclusive", pulsar.ConsumerType.Exclusive),
        ]
        self.consumers = {s.name: self.subscribe(self.client, s) for s in self.subscriptions}
        self.produced: list[MessageKey] = []

    def produce(self) -> None:
        plain = self.client.create_producer(self.topic, batching_enabled=False)
        batched = self.client.create_producer(
            self.topic, batching_enabled=True, batching_max_messages=self.BATCH, batching_max_publish_delay_ms=60_000
        )
        ids = [plain.send(b"plain") for _ in range(self.PLAIN)]
        receipts: list[pulsar.MessageId] = []
        for batch in range(1, self.BATCHES + 1):
            for _ in range(self.BATCH):
                batched.send_async(b"batched", lambda result, mid: receipts.append(mid))
            batched.flush()
            wait_for(lambda: len(receipts) == batch * self.BATCH, "a batch's receipts")  # noqa: B023
        ids.extend(receipts)
        ids.extend(plain.send(b"plain") for _ in range(self.PLAIN))
        self.produced = sorted(message_key(m) for m in ids)
        assert len({(m[0], m[1]) for m in self.produced}) == 2 * self.PLAIN + self.BATCHES

    def consume(self, settle: Callable[[], None] | None = None, per_settle: int = 1) -> None:
        """Receive everything on both subscriptions, then acknowledge: the shared subscription
        about half the messages, some batches partly; the exclusive one cumulatively up to a
        plain message, then individually above it. Without ``settle`` the acknowledgements go
        as the client groups them (one ACK command every 100 ms); with it, ``per_settle``
        messages per subscription at a time, and ``settle()`` after each group (it waits until
        the broker applied them), so that the client sends each group's individual
        acknowledgements of a subscription as one ACK command."""
        steps: dict[str, list[tuple[pulsar.Message, bool]]] = {}
        for sub in self.subscriptions:
            messages = [self.consumers[sub.name].receive(30_000) for _ in self.produced]
            assert sorted(message_key(m.message_id()) for m in messages) == self.produced
            plan = steps[sub.name] = []
            if sub.kind == pulsar.ConsumerType.Exclusive:
                upto = messages[self.rng.randrange(1, self.PLAIN)]
                plan.append((upto, True))
                messages = [m for m in messages if message_key(m.message_id()) > message_key(upto.message_id())]
            plan.extend((m, False) for m in messages if self.rng.random() < 0.5)
        for step in range(0, max(len(plan) for plan in steps.values()), per_settle):
            for sub in self.subscriptions:
                for ack in steps[sub.name][step : step + per_settle]:
                    self._ack(sub, *ack)
            if settle is not None:
                settle()

    def _ack(self, sub: Subscription, message: pulsar.Message, cumulative: bool) -> None:
        key = message_key(message.message_id())
        if cumulative:
            self.consumers[sub.name].acknowledge_cumulative(message)
            sub.cumulative = key
        else:
            self.consumers[sub.name].acknowledge(message)
            sub.acked.add(key)

    def acknowledged(self, sub: Subscription) -> set[MessageKey]:
        """Every message the client acknowledged on ``sub``, by cumulative acks too."""
        return covered_by_cumulative(sub.cumulative, self.produced) | sub.acked

    def applied(self, sub: Subscription, batch_index_acks: bool) -> set[MessageKey]:
        """The acknowledged messages whose acknowledgement changes the broker's cursor (and so
        is recorded): all of them, or without ``batch_index_acks`` (the broker ignores ack
        sets) those of entries acknowledged whole."""
        acked = self.acknowledged(sub)
        if batch_index_acks:
            return acked
        return {m for m in acked if entry_of(m, self.produced) <= acked}

    def subscribe(self, client: pulsar.Client, sub: Subscription) -> pulsar.Consumer:
        return client.subscribe(self.topic, sub.name, consumer_type=sub.kind, batch_index_ack_enabled=True)

    def close(self) -> None:
        self.client.close()


def message_key(mid: pulsar.MessageId) -> MessageKey:
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


def entry_of(message: MessageKey, produced: list[MessageKey]) -> set[MessageKey]:
    """Every produced message of ``message``'s entry."""
    return {m for m in produced if m[:2] == message[:2]}


def covered_by_cumulative(upto: MessageKey | None, produced: list[MessageKey]) -> set[MessageKey]:
    """The produced messages a cumulative acknowledgement of ``upto`` acknowledges."""
    return set() if upto is None else {m for m in produced if m[:2] <= upto[:2]}


def recorded_acks(record: Path, produced: list[MessageKey], topic: str = TOPIC) -> dict[str, set[MessageKey]]:
    """Each subscription's acknowledged messages on ``topic`` as the recording has them: an
    individual row of a whole entry (batch index null) acknowledges every message of the entry,
    a batch-index row one message, a cumulative row every message up to its entry."""
    out: dict[str, set[MessageKey]] = {}
    for row in pq.read_table(record / "acked").to_pylist():
        if row["topic"] != topic:
            continue
        acked = out.setdefault(row["subscription"], set())
        key = (row["ledger_id"], row["entry_id"], -1 if row["batch_index"] is None else row["batch_index"])
        if row["ack_type"] == "cumulative":
            acked |= covered_by_cumulative(key, produced)
        elif key[2] == -1:
            acked |= entry_of(key, produced)
        else:
            acked.add(key)
    return out


def received_again(service_url: str, work: Workload) -> dict[str, list[MessageKey]]:
    """Every message each subscription receives after the restart: those before a marker sent
    once the consumers are back (the dispatcher reads from the recovered mark-delete in order)."""
    client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=QUIET)
    try:
        consumers = {s.name: work.subscribe(client, s) for s in work.subscriptions}
        client.create_producer(work.topic, batching_enabled=False).send(b"marker")
        out: dict[str, list[MessageKey]] = {}
        for name, consumer in consumers.items():
            out[name] = []
            while (message := consumer.receive(30_000)).data() != b"marker":
                out[name].append(message_key(message.message_id()))
        return out
    finally:
        client.close()
