"""A real pulsar-client session captured once and replayed into fresh brokers: the determinism
tests and benchmarks/bench_deterministic.py share it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulsar

from mledger import ManagedLedgerConfig
from mledger.admin import Admin
from mledger.broker import BrokerConfig
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import (
    BrokerFrame,
    CapturingProxy,
    ClientRead,
    ListenerUrls,
    ProtocolConfig,
    replay_reads,
)
from mledger.protocol._codec import decode_command
from mledger.replay import read_recorded_rows
from mledger.standalone import EmbeddedStandalone

TOPIC = "persistent://public/default/determinism"
MESSAGES = 24
KEYS = 6

# Small ledgers: the session rolls ledgers over and trims the ones both subscriptions consumed.
BROKER_CONFIG = BrokerConfig(managed_ledger_config=ManagedLedgerConfig(max_entries_per_ledger=4))

# Every broker compared advertises one URL (it is in LOOKUP answers) and pings nobody meanwhile.
REPLAY_CONFIG = ProtocolConfig(
    port=0,
    advertised_listeners={"replay": ListenerUrls(broker_service_url="pulsar://127.0.0.1:6650")},
    internal_listener_name="replay",
    keep_alive_interval_seconds=3600,
)


def _drain(consumers: list[Any], expected: int) -> list[tuple[str, str]]:
    """Receive ``expected`` messages from ``consumers``, acknowledging each; (consumer, data)."""
    got: list[tuple[str, str]] = []
    while len(got) < expected:
        for consumer in consumers:
            try:
                message = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(message)
            got.append((consumer.consumer_name(), message.data().decode()))
    return got


def capture_session() -> list[ClientRead]:
    """Run one real client session (a producer, two Key_Shared consumers, a Shared subscription
    with a redelivery, and on a second connection an Exclusive subscription) against a deterministic broker through a :class:`CapturingProxy`; return
    what the client sent."""
    with CapturingProxy() as proxy:
        config = ProtocolConfig(
            port=0,
            advertised_listeners={"capture": ListenerUrls(broker_service_url=f"pulsar://127.0.0.1:{proxy.port}")},
            internal_listener_name="capture",
        )
        with EmbeddedStandalone(
            deterministic=True, seed=1, protocol_config=config, broker_config=BROKER_CONFIG
        ) as broker:
            proxy.start(("127.0.0.1", broker.port))
            client = pulsar.Client(f"pulsar://127.0.0.1:{proxy.port}", operation_timeout_seconds=30)
            other = pulsar.Client(f"pulsar://127.0.0.1:{proxy.port}", operation_timeout_seconds=30)
            try:
                producer = client.create_producer(TOPIC, producer_name="p", batching_enabled=False)
                key_shared = [
                    client.subscribe(TOPIC, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"k{i}")
                    for i in range(2)
                ]
                shared = client.subscribe(
                    TOPIC,
                    "sh",
                    consumer_type=pulsar.ConsumerType.Shared,
                    consumer_name="s",
                    negative_ack_redelivery_delay_ms=100,
                )
                exclusive = other.subscribe(TOPIC, "ex", consumer_name="e")  # on a connection of its own
                for i in range(MESSAGES):
                    producer.send(f"m{i}".encode(), partition_key=f"key{i % KEYS}")
                _drain(key_shared, MESSAGES)
                first = shared.receive(timeout_millis=30_000)
                shared.negative_acknowledge(first)
                _drain([shared], MESSAGES)  # the other 23 and the first once more
                _drain([exclusive], MESSAGES)
            finally:
                client.close()
                other.close()
    return proxy.reads()


def replay_run(
    reads: list[ClientRead], record: Path, *, seed: int, deterministic: bool = True
) -> tuple[list[BrokerFrame], dict[str, list[dict[str, Any]]]]:
    """Replay ``reads`` into a fresh broker recording into ``record``; its frames and rows."""
    with EmbeddedStandalone(
        deterministic=deterministic,
        seed=seed,
        protocol_config=REPLAY_CONFIG,
        broker_config=BROKER_CONFIG,
        record=record,
    ) as broker:
        frames = replay_reads(broker, reads)
        if deterministic:  # trimmed inline, before the last read returned
            ledgers = Admin(broker.broker).topics.internal_stats(TOPIC).ledgers
            assert len(ledgers) < MESSAGES // 4, f"nothing trimmed: {ledgers}"
    return frames, read_recorded_rows(record)


def delivered(frames: list[BrokerFrame]) -> list[tuple[int, int, int, int]]:
    """The MESSAGE frames: (connection, consumer id, ledger id, entry id), in order."""
    out = []
    for frame in frames:
        command = decode_command(frame.command)
        if command.type == api.BaseCommand.MESSAGE:
            m = command.message
            out.append((frame.connection, m.consumer_id, m.message_id.ledgerId, m.message_id.entryId))
    return out


Run = tuple[list[BrokerFrame], dict[str, list[dict[str, Any]]]]


def replay_in_a_process(reads: list[ClientRead], directory: Path, *, seed: int, hash_seed: int) -> Run:
    """:func:`replay_run` in a fresh Python process whose string hashes are seeded with
    ``hash_seed`` (``PYTHONHASHSEED``): a broker iterating a set of names would order it
    differently there. Its frames and rows come back through a pickle in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "reads.pickle").write_bytes(pickle.dumps(reads))
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    subprocess.run(
        [sys.executable, __file__, str(directory), str(seed)], env=env, check=True, timeout=120, capture_output=True
    )
    run: Run = pickle.loads((directory / "run.pickle").read_bytes())
    return run


if __name__ == "__main__":  # replay_in_a_process's child: DIRECTORY SEED
    where, broker_seed = Path(sys.argv[1]), int(sys.argv[2])
    frames, rows = replay_run(pickle.loads((where / "reads.pickle").read_bytes()), where / "record", seed=broker_seed)
    (where / "run.pickle").write_bytes(pickle.dumps((frames, rows)))
