"""Issue 31 item 5: a store failure while one topic loads fails that request only.

Pulsar's answers: ``BrokerService.createPersistentTopic`` completes a failed managed-ledger open
with a ``PersistenceException``, and ``PersistentTopic.getDurableSubscription`` a failed cursor
open the same way, which ``ServerCnx.handleProducer`` / ``handleSubscribe`` answer with
``BrokerServiceException.getClientErrorCode``: ``PersistenceError``; a partitioned-metadata
request whose metadata read fails is answered ``ServiceNotReady``
(``ServerCnx.handlePartitionMetadataRequest``). In every case the connection, and each producer
and consumer on it, carries on: the client library retries the request on the same connection.
"""

from __future__ import annotations

import logging
import sqlite3
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
from protocol_raw import RawClient, producer_command, subscribe_command

from mledger import EntryMetadata
from mledger.codec import encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import EmbeddedBroker
from mledger.protocol._framing import crc32c
from mledger.storage import FaultInjectingStore, Store, Versioned

pytestmark = pytest.mark.timeout(60)

_T = api.BaseCommand
IO_ERROR = "disk I/O error"
"""The message of SQLite's ``SQLITE_IOERR``."""


class BrokenPathStore(FaultInjectingStore):
    """Fails the metadata writes (``break_writes``) or reads (``break_reads``) of every path
    holding ``"broken"`` with SQLite's own error; every other path works."""

    break_writes = False
    break_reads = False

    def _check(self, path: str, armed: bool) -> None:
        if armed and "broken" in path:
            raise sqlite3.OperationalError(IO_ERROR)

    def put(self, path: str, data: bytes, expected_version: int | None = None) -> int:
        self._check(path, self.break_writes)
        return super().put(path, data, expected_version)

    def get(self, path: str) -> Versioned | None:
        self._check(path, self.break_reads)
        return super().get(path)

    def children(self, path: str) -> list[str]:
        self._check(path, self.break_reads)
        return super().children(path)


class BrokenPathBroker(EmbeddedBroker):
    """An embedded broker over SQLite whose ``broken`` paths the test can break."""

    broken: BrokenPathStore

    def _open_store(self) -> Store:
        self.broken = BrokenPathStore(super()._open_store())
        return self.broken


@pytest.fixture
def broker(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[BrokenPathBroker]:
    caplog.set_level(logging.INFO, logger="mledger")
    with BrokenPathBroker(tmp_path / "data") as running:
        yield running
    # a warning line per failed request, never the traceback of an unexpected error
    records = caplog.get_records("call")
    assert not [r.getMessage() for r in records if r.exc_info]
    failures = [r for r in records if IO_ERROR in r.getMessage()]
    assert failures and {r.levelno for r in failures} == {logging.WARNING}


def test_a_producer_keeps_sending_while_another_topic_fails_to_load_on_its_connection(
    broker: BrokenPathBroker,
) -> None:
    # The client takes PersistenceError as retryable: it asks again, on the same connection,
    # until its operation timeout, and then reports Timeout (the raw-frame test below checks the
    # code itself).
    client = pulsar.Client(
        broker.service_url, operation_timeout_seconds=3, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    producer = client.create_producer("orders")
    consumer = client.subscribe("orders", "billing")
    producer.send(b"before")
    opened = broker.stats().connections_opened
    broker.broken.break_writes = True
    stop = threading.Event()
    sent: list[pulsar.MessageId] = []

    def keep_sending() -> None:
        while not stop.is_set():
            sent.append(producer.send(b"during"))
            stop.wait(0.05)

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        with pytest.raises(pulsar.Timeout):
            client.create_producer("broken-topic")
    finally:
        stop.set()
        sender.join(30)
    assert sent  # the first producer's sends went on while the other topic failed to load
    received = [consumer.receive(5000).data() for _ in range(len(sent) + 1)]
    assert received == [b"before"] + [b"during"] * len(sent)
    broker.broken.break_writes = False
    client.create_producer("broken-topic").send(b"after")  # a later try loads it
    assert broker.stats().connections_opened == opened  # one connection all along
    assert producer.is_connected() and consumer.is_connected()
    client.close()


def test_producer_subscribe_and_lookups_answer_a_store_failure_and_the_connection_carries_on(
    broker: BrokenPathBroker,
) -> None:
    raw = RawClient(broker.port)
    try:
        raw.send(producer_command("orders", 1, 1))
        assert raw.next_command().type == _T.PRODUCER_SUCCESS
        broker.broken.break_writes = True
        for command in (
            producer_command("broken-topic", 2, 2),  # the topic's managed ledger cannot be created
            subscribe_command("broken-topic", "s", 3, 3),
            subscribe_command("orders", "broken-sub", 4, 4),  # the topic loads, the cursor cannot be stored
        ):
            raw.send(command)
            error = raw.next_command().error
            request_id = command.producer.request_id or command.subscribe.request_id
            assert (error.request_id, error.error) == (request_id, api.PersistenceError)
            assert IO_ERROR in error.message
        broker.broken.break_writes = False
        broker.broken.break_reads = True
        request = api.CommandPartitionedTopicMetadata(topic="persistent://public/default/broken-topic", request_id=5)
        raw.send(_T(type=_T.PARTITIONED_METADATA, partitionMetadata=request))
        metadata = raw.next_command().partitionMetadataResponse
        assert metadata.response == api.CommandPartitionedTopicMetadataResponse.Failed
        assert (metadata.request_id, metadata.error) == (5, api.ServiceNotReady) and IO_ERROR in metadata.message
        raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="broken-topic", request_id=6)))
        lookup = raw.next_command().lookupTopicResponse
        assert lookup.response == api.CommandLookupTopicResponse.Failed
        assert (lookup.request_id, lookup.error) == (6, api.ServiceNotReady) and IO_ERROR in lookup.message
        broker.broken.break_reads = False
        # the same connection: its producer is still there, and new requests succeed
        raw.send(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0)), _payload())
        assert raw.next_command().type == _T.SEND_RECEIPT
        raw.send(subscribe_command("orders", "broken-sub", 7, 7))
        assert raw.next_command().type == _T.SUCCESS
        assert broker.stats().connections_opened == 1
    finally:
        raw.close()


def _payload() -> bytes:
    body = encode_entry(b"x", EntryMetadata(producer_name="raw", sequence_id=0, publish_time_ms=1))
    return b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
