"""Hostile input over real sockets: each gets Pulsar's error or a clean close, the server stays
up with bounded memory, and no stored data changes."""

from __future__ import annotations

import resource
import socket
import struct
import time
from collections.abc import Iterator

import psutil
import pulsar
import pytest
from protocol_raw import RawClient

from mledger import EntryMetadata
from mledger.codec import encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import EmbeddedBroker
from mledger.protocol._framing import crc32c, encode_frame

pytestmark = pytest.mark.timeout(120)

_T = api.BaseCommand


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def seed(broker: EmbeddedBroker, n: int = 3, size: int = 10) -> int:
    client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    producer = client.create_producer("victim")
    for i in range(n):
        producer.send(bytes([i % 256]) * size)
    client.close()
    return broker.broker.get_topic("victim").stats().entries


def still_serves(broker: EmbeddedBroker) -> None:
    client = pulsar.Client(
        broker.service_url, operation_timeout_seconds=5, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    consumer = client.subscribe("alive", "sub")
    client.create_producer("alive").send(b"still here")
    assert consumer.receive(5000).data() == b"still here"
    client.close()


def producer_on(raw: RawClient, topic: str = "victim") -> None:
    raw.send(_T(type=_T.PRODUCER, producer=api.CommandProducer(topic=topic, producer_id=1, request_id=1)))
    assert raw.next_command().type == _T.PRODUCER_SUCCESS


def test_oversize_frame_closes_the_connection(broker: EmbeddedBroker) -> None:
    entries = seed(broker)
    raw = RawClient(broker.port)
    raw.sock.sendall(struct.pack(">II", 200 * 1024 * 1024, 10))
    assert raw.is_closed_by_server()
    still_serves(broker)
    assert broker.broker.get_topic("victim").stats().entries == entries


def test_truncated_frame_then_hang_up(broker: EmbeddedBroker) -> None:
    entries = seed(broker)
    raw = RawClient(broker.port)
    producer_on(raw)
    frame = encode_frame(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0)).SerializeToString())
    raw.sock.sendall(frame[:-2])
    raw.close()
    still_serves(broker)
    assert broker.broker.get_topic("victim").stats().entries == entries


def test_bad_checksum_is_answered_with_checksum_error_and_not_stored(broker: EmbeddedBroker) -> None:
    entries = seed(broker)
    raw = RawClient(broker.port)
    producer_on(raw)
    body = encode_entry(b"tampered", EntryMetadata(producer_name="raw", sequence_id=0, publish_time_ms=1))
    payload = b"\x0e\x01" + struct.pack(">I", crc32c(body) ^ 1) + body
    raw.send(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0)), payload)
    reply = raw.next_command()
    assert reply.type == _T.SEND_ERROR and reply.send_error.error == api.ChecksumError
    assert broker.broker.get_topic("victim").stats().entries == entries
    # the connection stays usable: a correct message is stored
    good = b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body
    raw.send(_T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=1)), good)
    assert raw.next_command().type == _T.SEND_RECEIPT
    assert broker.broker.get_topic("victim").stats().entries == entries + 1
    assert broker.stats().checksum_errors == 1


def test_garbage_protobuf_closes_the_connection(broker: EmbeddedBroker) -> None:
    entries = seed(broker)
    raw = RawClient(broker.port)
    raw.sock.sendall(encode_frame(b"\xff\xfe\xfd\xfc\x00garbage"))
    assert raw.is_closed_by_server()
    still_serves(broker)
    assert broker.broker.get_topic("victim").stats().entries == entries


def test_unknown_command_type_closes_the_connection(broker: EmbeddedBroker) -> None:
    raw = RawClient(broker.port)
    raw.sock.sendall(encode_frame(b"\x08\x63"))  # type 99
    assert raw.is_closed_by_server()
    still_serves(broker)


def test_unsupported_command_is_answered_not_left_hanging(broker: EmbeddedBroker) -> None:
    raw = RawClient(broker.port)
    raw.send(_T(type=_T.TC_CLIENT_CONNECT_REQUEST, tcClientConnectRequest=api.CommandTcClientConnectRequest(request_id=5, tc_id=0)))
    reply = raw.next_command()
    assert reply.type == _T.ERROR and reply.error.request_id == 5 and reply.error.error == api.NotAllowedError


def test_command_before_connect_closes_the_connection(broker: EmbeddedBroker) -> None:
    raw = RawClient(broker.port, connect=False)
    raw.send(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="victim", request_id=1)))
    assert raw.is_closed_by_server()


def test_flow_of_2_pow_31_permits_keeps_memory_bounded(broker: EmbeddedBroker) -> None:
    n, size = 20_000, 1024
    entries = seed(broker, n, size)
    raw = RawClient(broker.port)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.send(
        _T(
            type=_T.SUBSCRIBE,
            subscribe=api.CommandSubscribe(
                topic="victim", subscription="s", subType=api.CommandSubscribe.Shared, consumer_id=1, request_id=1,
                initialPosition=api.CommandSubscribe.Earliest,
            ),
        )
    )
    assert raw.next_command().type == _T.SUCCESS
    raw.send(_T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=1 << 31)))
    time.sleep(1.0)  # the client reads nothing: the server must stop at its write buffer's mark
    stats = broker.stats()
    assert stats.messages_out < n / 2, stats
    still_serves(broker)
    # Reading drains the rest, still in order.
    raw.sock.settimeout(10)
    seen = 0
    expected = 0
    while seen < n:
        cmd = raw.next_command()
        if cmd.type == _T.MESSAGE:
            assert cmd.message.message_id.entryId == expected
            expected += 1
            seen += 1
    assert broker.broker.get_topic("victim").stats().entries == entries


def test_a_thousand_idle_connections(broker: EmbeddedBroker) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2300:
        pytest.skip(f"the file descriptor limit ({hard}) is too low for 2,000 sockets in one process")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2300), hard))
    try:
        entries = seed(broker)
        rss_before = psutil.Process().memory_info().rss
        idle = [RawClient(broker.port, connect=i % 2 == 0) for i in range(1000)]
        still_serves(broker)
        grown = psutil.Process().memory_info().rss - rss_before
        assert grown < 64 * 1024 * 1024, f"1,000 idle connections took {grown / 1e6:.0f} MB"
        for raw in idle:
            raw.close()
        assert broker.broker.get_topic("victim").stats().entries == entries
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
