"""Pulsar's framing, codec and the sans-I/O connection, frame by frame (no sockets)."""

from __future__ import annotations

import struct

import pytest

from mledger import EntryMetadata
from mledger.codec import decode_entry, encode_entry
from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol import COMMANDS, Connection, ConnectionState, FrameTooLargeError, RemoteProtocolError
from mledger.protocol._codec import (
    decode_command,
    encode_command,
    message_command,
    send_receipt_command,
    send_receipt_frame,
)
from mledger.protocol._commands import Direction, Support
from mledger.protocol._framing import (
    FrameDecoder,
    checksummed_entry,
    crc32c,
    encode_frame,
    encode_payload_frame,
    parse_payload,
)
from mledger.protocol._session import Session

_T = api.BaseCommand


def frame(cmd: api.BaseCommand, payload: bytes | None = None) -> bytes:
    data = cmd.SerializeToString()
    return encode_frame(data) if payload is None else encode_payload_frame(data, payload)


def connect_cmd(version: int = 20) -> api.BaseCommand:
    return _T(type=_T.CONNECT, connect=api.CommandConnect(client_version="Pulsar-CPP-v4.2.0", protocol_version=version))


def producer_payload(metadata: EntryMetadata, payload: bytes, checksum: bool = True) -> bytes:
    body = encode_entry(payload, metadata)
    if not checksum:
        return body
    return b"\x0e\x01" + struct.pack(">I", crc32c(body)) + body


def parse_frames(data: bytes) -> list[tuple[api.BaseCommand, bytes | None]]:
    return [(decode_command(c), p) for c, p in FrameDecoder().feed(data)]


# -- framing -----------------------------------------------------------------------------------


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_decoder_splits_frames_fed_byte_by_byte() -> None:
    data = frame(_T(type=_T.PING, ping=api.CommandPing())) + frame(_T(type=_T.PONG, pong=api.CommandPong()))
    decoder = FrameDecoder()
    frames = []
    for i in range(len(data)):
        frames += decoder.feed(data[i : i + 1])
    assert [decode_command(c).type for c, _ in frames] == [_T.PING, _T.PONG]
    assert decoder.buffered == 0


def test_decoder_keeps_a_truncated_frame_until_the_rest_arrives() -> None:
    data = frame(_T(type=_T.PING, ping=api.CommandPing()))
    decoder = FrameDecoder()
    assert decoder.feed(data[:-1]) == []
    assert decoder.buffered == len(data) - 1
    assert len(decoder.feed(data[-1:])) == 1


def test_decoder_refuses_an_oversize_frame_from_its_header() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLargeError, match="1025 bytes exceeds the limit of 1024"):
        decoder.feed(struct.pack(">I", 1025))
    assert decoder.buffered == 4  # nothing beyond the header was ever buffered


def test_decoder_refuses_a_command_size_past_the_frame() -> None:
    with pytest.raises(RemoteProtocolError, match="does not fit"):
        FrameDecoder().feed(struct.pack(">II", 8, 100) + b"1234")


def test_payload_frame_carries_the_producer_bytes_and_checks_the_crc() -> None:
    md = EntryMetadata(producer_name="p", sequence_id=3, publish_time_ms=7)
    sent = producer_payload(md, b"hello")
    parsed = parse_payload(sent)
    assert parsed.checksum_ok is True
    assert parsed.entry == sent  # stored from the magic on, byte for byte
    assert EntryMetadata.from_bytes(parsed.metadata) == md
    assert decode_entry(parsed.entry, verify_checksum=True) == (md, b"hello")


def test_payload_with_a_flipped_bit_fails_the_checksum() -> None:
    sent = bytearray(producer_payload(EntryMetadata(producer_name="p"), b"hello"))
    sent[-1] ^= 1
    assert parse_payload(bytes(sent)).checksum_ok is False


def test_payload_without_checksum_and_behind_broker_entry_metadata() -> None:
    md = EntryMetadata(producer_name="p")
    plain = producer_payload(md, b"x", checksum=False)
    assert parse_payload(plain).checksum_ok is None
    bem = api.BrokerEntryMetadata(broker_timestamp=5).SerializeToString()
    prefixed = b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + producer_payload(md, b"x")
    parsed = parse_payload(prefixed)
    assert parsed.checksum_ok is True and parsed.entry.startswith(b"\x0e\x01")


@pytest.mark.parametrize("cut", [1, 3, 8, 11])
def test_payload_cut_short_is_a_protocol_error(cut: int) -> None:
    sent = producer_payload(EntryMetadata(producer_name="p"), b"")
    with pytest.raises(RemoteProtocolError):
        parse_payload(sent[:cut])


def test_checksummed_entry_keeps_the_producer_checksum_and_adds_one_when_missing() -> None:
    md = EntryMetadata(producer_name="p", sequence_id=1)
    with_crc = producer_payload(md, b"data")
    assert checksummed_entry(with_crc) == with_crc
    plain = encode_entry(b"data", md)
    out = checksummed_entry(plain)
    assert out == with_crc  # the same bytes a producer would have sent
    bem = b"\x0e\x02" + struct.pack(">I", 2) + b"\x08\x01"
    assert checksummed_entry(bem + with_crc) == with_crc


# -- codec: the hand-written hot frames equal the generated code's bytes -------------------------


@pytest.mark.parametrize(
    ("consumer_id", "ledger", "entry", "partition", "redeliveries", "ack_set"),
    [
        (0, 0, 0, -1, 0, None),
        (7, 12345, 4, -1, 0, None),
        (1 << 40, (1 << 63) - 1, 1 << 62, 3, 2, [1008]),
        (1, 5, 6, 0, 0, [-1, 1 << 62, -(1 << 63)]),
    ],
)
def test_message_command_bytes_equal_protobuf(
    consumer_id: int, ledger: int, entry: int, partition: int, redeliveries: int, ack_set: list[int] | None
) -> None:
    mid = api.MessageIdData(ledgerId=ledger, entryId=entry)
    if partition >= 0:
        mid.partition = partition
    msg = api.CommandMessage(consumer_id=consumer_id, message_id=mid)
    if redeliveries:
        msg.redelivery_count = redeliveries
    if ack_set:
        msg.ack_set.extend(ack_set)
    expected = _T(type=_T.MESSAGE, message=msg).SerializeToString()
    assert message_command(consumer_id, ledger, entry, partition, redeliveries, ack_set) == expected


@pytest.mark.parametrize("seq", [0, 1, 300, (1 << 64) - 1])
def test_send_receipt_bytes_equal_protobuf(seq: int) -> None:
    receipt = api.CommandSendReceipt(
        producer_id=3, sequence_id=seq, message_id=api.MessageIdData(ledgerId=9, entryId=1000), highest_sequence_id=seq
    )
    expected = _T(type=_T.SEND_RECEIPT, send_receipt=receipt).SerializeToString()
    assert send_receipt_command(3, seq, seq, 9, 1000) == expected


@pytest.mark.parametrize(
    ("producer", "seq", "highest", "ledger", "entry", "partition"),
    [
        (0, 0, 0, 0, 0, -1),
        (3, 127, 127, 9, 1000, -1),
        (3, 128, 16_384, 1 << 21, 16_383, 0),
        ((1 << 64) - 1, (1 << 64) - 1, (1 << 64) - 1, (1 << 63) - 1, (1 << 63) - 1, 300),
        (1 << 40, 5, 2_097_152, 12, 0, 7),
        (7, 20_000, 20_000, 5, 2_097_151, -1),  # three-byte varints, the largest one
        (7, 16_384, 16_385, 5, 16_383, -1),
    ],
)
def test_send_receipt_frame_is_the_framed_protobuf_command(
    producer: int, seq: int, highest: int, ledger: int, entry: int, partition: int
) -> None:
    mid = api.MessageIdData(ledgerId=ledger, entryId=entry)
    if partition >= 0:
        mid.partition = partition
    receipt = api.CommandSendReceipt(producer_id=producer, sequence_id=seq, message_id=mid, highest_sequence_id=highest)
    command = _T(type=_T.SEND_RECEIPT, send_receipt=receipt).SerializeToString()
    frame = send_receipt_frame(producer, seq, highest, ledger, entry, partition)
    assert frame == struct.pack(">II", len(command) + 4, len(command)) + command


def test_decode_command_refuses_garbage_and_unknown_types() -> None:
    with pytest.raises(RemoteProtocolError, match="does not parse"):
        decode_command(b"\xff\xff\xff")
    # type 99 is not in protocol v20: proto2 keeps it as an unknown field, so no type
    with pytest.raises(RemoteProtocolError, match="no known type"):
        decode_command(b"\x08\x63")


# -- the command table -------------------------------------------------------------------------


def test_table_covers_every_base_command_type() -> None:
    assert sorted(COMMANDS) == sorted(v.number for v in _T.Type.DESCRIPTOR.values)


def test_every_handled_client_command_has_a_session_handler_and_nothing_else_does() -> None:
    handled = {
        spec.handler_name
        for spec in COMMANDS.values()
        if spec.support is Support.HANDLED and spec.direction is not Direction.SERVER
    }
    handlers = {name for name in dir(Session) if name.startswith("handle_")}
    assert handlers == handled


def test_unsupported_requests_carry_a_request_id_and_an_error() -> None:
    for spec in COMMANDS.values():
        if spec.support is Support.ANSWERED_WITH_ERROR:
            assert spec.error is not None and spec.request_id_field is not None
            message_type = _T.DESCRIPTOR.fields_by_name[spec.field].message_type
            assert spec.request_id_field in message_type.fields_by_name


# -- the connection state machine ----------------------------------------------------------------


def connected() -> Connection:
    conn = Connection()
    [req] = conn.receive_data(frame(connect_cmd(15)))
    assert req.type == _T.CONNECT and conn.state is ConnectionState.CONNECTING
    conn.accept_connect("mledger-test")
    return conn


def test_connect_negotiates_the_protocol_version_down_and_advertises_the_size_limit() -> None:
    conn = Connection(max_message_size=1 << 20)
    conn.receive_data(frame(connect_cmd(25)))
    conn.accept_connect("mledger-test")
    [(reply, _)] = parse_frames(conn.data_to_send())
    assert reply.type == _T.CONNECTED
    assert reply.connected.protocol_version == 20 and reply.connected.max_message_size == 1 << 20
    assert connected().protocol_version == 15


def test_commands_before_connect_close_the_connection() -> None:
    conn = Connection()
    with pytest.raises(RemoteProtocolError, match="LOOKUP before CONNECT"):
        conn.receive_data(frame(_T(type=_T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="t", request_id=1))))


def test_a_second_connect_is_a_protocol_error() -> None:
    conn = connected()
    with pytest.raises(RemoteProtocolError, match="already"):
        conn.receive_data(frame(connect_cmd()))


def test_ping_is_answered_by_the_connection_itself() -> None:
    conn = connected()
    conn.data_to_send()
    assert conn.receive_data(frame(_T(type=_T.PING, ping=api.CommandPing()))) == []
    [(reply, _)] = parse_frames(conn.data_to_send())
    assert reply.type == _T.PONG


def test_unsupported_request_is_answered_at_once_with_its_request_id() -> None:
    conn = connected()
    conn.data_to_send()
    new_txn = _T(type=_T.NEW_TXN, newTxn=api.CommandNewTxn(request_id=42))
    assert conn.receive_data(frame(new_txn)) == []
    [(reply, _)] = parse_frames(conn.data_to_send())
    assert reply.type == _T.ERROR
    assert reply.error.request_id == 42 and reply.error.error == api.NotAllowedError
    assert "NEW_TXN" in reply.error.message


def test_a_server_only_command_from_a_client_closes_the_connection() -> None:
    conn = connected()
    receipt = _T(type=_T.SEND_RECEIPT, send_receipt=api.CommandSendReceipt(producer_id=1, sequence_id=1))
    with pytest.raises(RemoteProtocolError, match="servers only"):
        conn.receive_data(frame(receipt))


def test_send_comes_out_with_its_payload_split() -> None:
    conn = connected()
    md = EntryMetadata(producer_name="p", sequence_id=9)
    send = _T(type=_T.SEND, send=api.CommandSend(producer_id=1, sequence_id=9))
    [req] = conn.receive_data(frame(send, producer_payload(md, b"v")))
    assert req.name == "SEND" and req.payload is not None
    assert req.payload.checksum_ok and EntryMetadata.from_bytes(req.payload.metadata) == md


def test_refused_connect_answers_an_error_and_closes() -> None:
    conn = Connection()
    conn.receive_data(frame(connect_cmd()))
    conn.refuse_connect(api.AuthenticationError, "bad token")
    [(reply, _)] = parse_frames(conn.data_to_send())
    assert reply.type == _T.ERROR and reply.error.error == api.AuthenticationError
    assert conn.state is ConnectionState.CLOSED


def test_encode_command_round_trips() -> None:
    cmd = _T(type=_T.FLOW, flow=api.CommandFlow(consumer_id=1, messagePermits=(1 << 32) - 1))
    assert decode_command(encode_command(cmd)) == cmd
