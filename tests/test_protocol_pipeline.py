"""The protocol server publishes through the pipelined path: the event loop never waits on a
store write, and SEND_RECEIPTs go out in order as each write completes."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from protocol_raw import RawClient

from mledger.broker import Broker, BrokerConfig
from mledger.codec import EntryMetadata, encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.managed_ledger import ManagedLedgerFactory
from mledger.protocol import ProtocolConfig, ProtocolServer
from mledger.protocol._framing import crc32c
from mledger.storage import HeldWriteStore, SqliteStore

pytestmark = pytest.mark.timeout(60)

_T = api.BaseCommand
TOPIC = "persistent://public/default/pipelined"


class Running:
    """A protocol server on its own loop thread, over a store whose writes the test can hold."""

    def __init__(self, store: HeldWriteStore, dedup: bool) -> None:
        self.store = store
        self.broker = Broker(ManagedLedgerFactory(store), BrokerConfig(deduplication_enabled=dedup))
        self.server = ProtocolServer(self.broker, ProtocolConfig(port=0))
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            self.loop.run_until_complete(self.server.start())
            started.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self.server.stop())
            self.loop.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(10)

    def stop(self) -> None:
        self.store.release()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.broker.close()


@pytest.fixture
def running(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Running]:
    r = Running(HeldWriteStore(SqliteStore(tmp_path / "data")), dedup=getattr(request, "param", False))
    yield r
    r.stop()


def send(raw: RawClient, sequence_id: int, producer_name: str = "p") -> None:
    body = encode_entry(b"m%d" % sequence_id, EntryMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time_ms=1))
    payload = b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
    raw.send(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id)), payload)


def open_producer(raw: RawClient, name: str = "p") -> None:
    raw.send(_T(type=_T.PRODUCER, producer=api.CommandProducer(topic=TOPIC, producer_id=1, request_id=1, producer_name=name)))
    assert raw.next_command().type == _T.PRODUCER_SUCCESS


def test_the_loop_keeps_serving_while_a_write_is_held_and_receipts_follow_in_order(running: Running) -> None:
    raw = RawClient(running.server.port)
    open_producer(raw)
    writes = running.store.writes
    running.store.hold_writes()
    send(raw, 0)
    running.store.wait_until_held(1)  # the ledger's writer thread is inside the store write
    send(raw, 1)
    send(raw, 2)
    # The loop is free: it answers a PING and a second client's lookup meanwhile.
    raw.send(_T(type=_T.PING, ping=api.CommandPing()))
    assert raw.next_command().type == _T.PONG
    other = RawClient(running.server.port)
    other.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic=TOPIC, request_id=7)))
    assert other.next_command().type == _T.LOOKUP_RESPONSE
    running.store.release_one()
    running.store.wait_until_held(1)  # sends 1 and 2: queued together, one store write
    running.store.release()
    receipts = [raw.next_command() for _ in range(3)]
    assert [r.type for r in receipts] == [_T.SEND_RECEIPT] * 3
    assert [r.send_receipt.sequence_id for r in receipts] == [0, 1, 2]
    ids = [(r.send_receipt.message_id.ledgerId, r.send_receipt.message_id.entryId) for r in receipts]
    assert [e for _, e in ids] == [0, 1, 2] and len({lid for lid, _ in ids}) == 1
    assert running.store.writes - writes == 2
    raw.close()
    other.close()


@pytest.mark.parametrize("running", [True], indirect=True)
def test_a_resend_during_a_pending_write_is_refused_and_a_failed_write_is_retried(running: Running) -> None:
    """PIP-6 through the protocol: a SEND repeating one whose write is pending gets SEND_ERROR
    (Unknown: the client reconnects and resends); after a failed write the producer is
    disconnected, and the resend of its reconnection is stored."""
    raw = RawClient(running.server.port)
    open_producer(raw, "dedup-p")
    send(raw, 0, "dedup-p")
    assert raw.next_command().type == _T.SEND_RECEIPT
    running.store.hold_writes()
    send(raw, 1, "dedup-p")
    running.store.wait_until_held(1)
    send(raw, 1, "dedup-p")  # the client's resend while the first is in flight
    refused = raw.next_command()
    assert refused.type == _T.SEND_ERROR and refused.send_error.sequence_id == 1
    assert "Cannot determine whether the message is a duplicate" in refused.send_error.message
    running.store.release_one(fail=True)
    # Pulsar's addFailed: the producer is disconnected and the send fails with PersistenceError.
    answers = {c.type: c for c in (raw.next_command(), raw.next_command())}
    assert set(answers) == {_T.CLOSE_PRODUCER, _T.SEND_ERROR}
    failed = answers[_T.SEND_ERROR].send_error
    assert failed.sequence_id == 1 and failed.error == api.PersistenceError
    running.store.release()
    topic = running.broker.get_topic(TOPIC)
    deadline = time.monotonic() + 10
    while topic.is_fenced:  # type: ignore[union-attr]  # lifted once the failure is reported
        assert time.monotonic() < deadline
        time.sleep(0.001)
    open_producer(raw, "dedup-p")  # the client reconnects: the store writes again, admitted
    send(raw, 1, "dedup-p")  # pushed was reset to persisted: accepted again
    stored = raw.next_command()
    assert stored.type == _T.SEND_RECEIPT and stored.send_receipt.message_id.entryId == 1
    send(raw, 1, "dedup-p")  # now a duplicate: a receipt with id (-1, -1)
    dup = raw.next_command()
    assert dup.type == _T.SEND_RECEIPT and dup.send_receipt.message_id.entryId == (1 << 64) - 1
    raw.close()
