"""EntryMetadata, Entry, and Pulsar's stored-entry framing."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import pytest
from hypothesis import given, strategies as st

from mledger import Entry, EntryMetadata, InvalidRequestError, Position, StateCorruptedError
from mledger.codec import decode_entry, encode_entry, stored_entry
from mledger.codec._entry import crc32c
from mledger.codec.proto.PulsarApi_pb2 import MessageMetadata

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
TEXT = st.text(max_size=20)


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.none() | strategy


metadata = st.builds(
    EntryMetadata,
    producer_name=TEXT,
    sequence_id=INT64,
    publish_time_ms=INT64,
    num_messages=INT32,
    deliver_at_ms=optional(INT64),
    partition_key=optional(TEXT),
    highest_sequence_id=optional(INT64),
    properties=st.lists(st.tuples(TEXT, TEXT), max_size=4).map(tuple),
    event_time_ms=optional(INT64),
    uuid=optional(TEXT),
    chunk_id=optional(INT32),
    num_chunks=optional(INT32),
    total_chunk_msg_size=optional(INT32),
)


def checksummed(plain: bytes) -> bytes:
    return b"\x0e\x01" + struct.pack(">I", crc32c(plain)) + plain


def with_broker_metadata(frame: bytes, broker_metadata: bytes = b"\x08\x01\x10\x02") -> bytes:
    return b"\x0e\x02" + struct.pack(">I", len(broker_metadata)) + broker_metadata + frame


# -- EntryMetadata -----------------------------------------------------------------------------


@given(metadata)
def test_metadata_round_trips(md: EntryMetadata) -> None:
    assert EntryMetadata.from_bytes(md.to_bytes()) == md


@given(metadata, st.binary(max_size=64))
def test_entry_framing_round_trips_in_every_form(md: EntryMetadata, payload: bytes) -> None:
    plain = encode_entry(payload, md)
    for raw in (
        plain,
        checksummed(plain),
        with_broker_metadata(checksummed(plain)),
        with_broker_metadata(plain),
    ):
        assert decode_entry(raw) == (md, payload)
        assert decode_entry(raw, verify_checksum=True) == (md, payload)
        assert stored_entry(Position(4, 9), raw) == Entry(Position(4, 9), payload, md, raw)


def test_metadata_bytes_are_pulsars() -> None:
    md = EntryMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time_ms=2,
        properties={"k": "v"},
        partition_key="x",
        num_messages=3,
        event_time_ms=4,
        deliver_at_ms=5,
        highest_sequence_id=6,
        uuid="u",
        num_chunks=7,
        total_chunk_msg_size=8,
        chunk_id=9,
    )
    assert md.to_bytes() == bytes.fromhex(
        "0a01701001180222060a016b12017632017858036004980105c00106d2010175d80107e00108e80109"
    )


def test_minimal_metadata_writes_only_the_required_fields() -> None:
    md = EntryMetadata(producer_name="p", sequence_id=1, publish_time_ms=2)
    assert md.to_bytes() == bytes.fromhex("0a017010011802")
    # num_messages_in_batch defaults to 1 on the wire, so 1 is not written.
    assert EntryMetadata.from_bytes(bytes.fromhex("0a017010011802")).num_messages == 1
    # An explicit num_messages_in_batch = 1 is a batch of one: its payload is in batch format.
    one = EntryMetadata.from_bytes(bytes.fromhex("0a0170100118025801"))
    assert one.num_messages == 1 and one.batched
    assert one.to_bytes() == bytes.fromhex("0a0170100118025801")
    assert not md.batched


def test_uint64_fields_keep_javas_signed_view() -> None:
    md = EntryMetadata(sequence_id=-1, publish_time_ms=0, highest_sequence_id=-1, event_time_ms=-2)
    msg = MessageMetadata.FromString(md.to_bytes())
    assert msg.sequence_id == (1 << 64) - 1
    assert msg.highest_sequence_id == (1 << 64) - 1
    assert EntryMetadata.from_bytes(md.to_bytes()) == md


def test_zero_valued_optional_fields_stay_set() -> None:
    md = EntryMetadata(event_time_ms=0, highest_sequence_id=0, deliver_at_ms=0, chunk_id=0)
    back = EntryMetadata.from_bytes(md.to_bytes())
    assert (back.event_time_ms, back.highest_sequence_id, back.deliver_at_ms, back.chunk_id) == (
        0,
        0,
        0,
        0,
    )
    assert EntryMetadata.from_bytes(EntryMetadata().to_bytes()).event_time_ms is None


def test_fields_mledger_does_not_model_are_skipped() -> None:
    md = EntryMetadata(producer_name="standalone-0-1", sequence_id=9, publish_time_ms=10)
    # replicated_from (5), replicate_to (7), compression (8), uncompressed_size (9),
    # schema_version (16), marker_type (20), null_value (25): written by real brokers/clients.
    extra = bytes.fromhex("2a0263313a0263324001486482010101a00101c80101")
    assert EntryMetadata.from_bytes(md.to_bytes() + extra) == md
    assert EntryMetadata.from_bytes(extra + md.to_bytes()) == md


def test_properties_keep_order_and_accept_a_mapping() -> None:
    assert EntryMetadata(properties={"b": "1", "a": "2"}).properties == (("b", "1"), ("a", "2"))
    pairs = [["k", "v"]]
    assert EntryMetadata(properties=pairs).properties == (("k", "v"),)  # type: ignore[arg-type]
    md = EntryMetadata(properties=(("k", "1"), ("k", "2")))  # repeated keys are Pulsar's too
    assert EntryMetadata.from_bytes(md.to_bytes()).properties == (("k", "1"), ("k", "2"))


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    raw = bytes.fromhex("0a0361ff62100118023202ff63")
    md = EntryMetadata.from_bytes(raw)
    assert md.producer_name == "a\ufffdb"
    assert md.partition_key == "\ufffdc"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "producer_name"),
        ("0a01701001", "publish_time"),
        ("10011802", "producer_name"),
        ("0a01701001180222030a016b", "value"),  # a property without its value
        ("0a0570", "invalid entry metadata"),  # string runs past the end
        ("0a0170100118", "invalid entry metadata"),  # truncated varint
        ("0a01701001180207", "invalid entry metadata"),  # wire type 7
    ],
)
def test_bad_metadata_is_state_corrupted(raw: str, reason: str) -> None:
    with pytest.raises(StateCorruptedError, match=reason):
        EntryMetadata.from_bytes(bytes.fromhex(raw))


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"producer_name": None}, "None"),
        ({"sequence_id": 1 << 63}, str(1 << 63)),
        ({"publish_time_ms": 1.5}, "1.5"),
        ({"num_messages": 1 << 31}, str(1 << 31)),
        ({"deliver_at_ms": "soon"}, "'soon'"),
        ({"highest_sequence_id": -(1 << 63) - 1}, str(-(1 << 63) - 1)),
        ({"event_time_ms": True}, "True"),
        ({"chunk_id": 1 << 31}, str(1 << 31)),
        ({"num_chunks": -(1 << 31) - 1}, str(-(1 << 31) - 1)),
        ({"total_chunk_msg_size": None, "uuid": 5}, "5"),
        ({"partition_key": b"k"}, "b'k'"),
        ({"properties": "k=v"}, "'k=v'"),
        ({"properties": [("k",)]}, "('k',)"),
        ({"properties": {"k": 1}}, "('k', 1)"),
    ],
)
def test_bad_values_are_rejected_naming_them(kwargs: dict, bad: str) -> None:
    with pytest.raises(InvalidRequestError, match=__import__("re").escape(bad)):
        EntryMetadata(**kwargs)


def test_metadata_is_frozen_and_hashable() -> None:
    md = EntryMetadata(properties={"k": "v"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        md.sequence_id = 3  # type: ignore[misc]
    assert hash(md) == hash(EntryMetadata(properties=(("k", "v"),)))
    assert not hasattr(md, "__dict__")


# -- Entry -------------------------------------------------------------------------------------


def test_entry() -> None:
    e = Entry(Position(3, 5), b"data", EntryMetadata(num_messages=2))
    assert (e.ledger_id, e.entry_id) == (3, 5)
    assert e.metadata.num_messages == 2
    assert Entry(Position(3, 5), b"x").metadata == EntryMetadata()
    assert not hasattr(e, "__dict__")
    assert pickle.loads(pickle.dumps(e)) == e
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.data = b"y"  # type: ignore[misc]


# -- framing -----------------------------------------------------------------------------------


def test_encode_entry_layout() -> None:
    md = EntryMetadata(producer_name="p", sequence_id=1, publish_time_ms=2)
    raw = encode_entry(b"payload", md)
    assert raw == b"\x00\x00\x00\x07" + bytes.fromhex("0a017010011802") + b"payload"
    assert encode_entry(memoryview(b"payload"), md) == raw
    assert decode_entry(bytearray(raw)) == (md, b"payload")
    assert decode_entry(memoryview(raw)) == (md, b"payload")


def test_checksummed_form_matches_pulsars_layout() -> None:
    md = EntryMetadata(producer_name="p", sequence_id=1, publish_time_ms=2)
    plain = encode_entry(b"payload", md)
    raw = checksummed(plain)
    assert raw[:2] == b"\x0e\x01"
    # The CRC covers everything after it: size, metadata and payload.
    assert int.from_bytes(raw[2:6], "big") == crc32c(raw[6:])
    assert decode_entry(raw, verify_checksum=True) == (md, b"payload")


def test_checksum_is_only_checked_when_asked() -> None:
    md = EntryMetadata(producer_name="p")
    raw = bytearray(checksummed(encode_entry(b"payload", md)))
    raw[-1] ^= 0xFF
    assert decode_entry(bytes(raw)) == (md, b"payloa" + bytes([ord("d") ^ 0xFF]))
    with pytest.raises(StateCorruptedError, match="checksum mismatch"):
        decode_entry(bytes(raw), verify_checksum=True)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "metadata size cut short"),
        (b"\x00\x00\x00", "metadata size cut short"),
        (b"\x00\x00\x00\x09" + b"\x0a\x01p", "runs past the end"),
        (b"\xff\xff\xff\xff", "runs past the end"),
        (b"\x0e\x01\x00\x00", "checksum cut short"),
        (b"\x0e\x01\x00\x00\x00\x00", "metadata size cut short"),
        (b"\x0e\x02\x00\x00", "broker entry metadata cut short"),
        (b"\x0e\x02\x00\x00\x00\x09\x08\x01", "broker entry metadata runs past the end"),
        (b"\x00\x00\x00\x00payload", "missing required"),
        (b"\x00\x00\x00\x03\x0a\x05pay", "invalid entry metadata"),
    ],
)
def test_malformed_entries_are_state_corrupted(raw: bytes, reason: str) -> None:
    with pytest.raises(StateCorruptedError, match=reason):
        decode_entry(raw)
    with pytest.raises(StateCorruptedError, match=reason):
        stored_entry(Position(1, 0), raw)


def test_crc32c_known_values() -> None:
    # RFC 3720 (iSCSI) appendix B.4 test vectors, and the classic check value.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(b"") == 0


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_crc32c_resumes(a: bytes, b: bytes) -> None:
    assert crc32c(b, crc32c(a)) == crc32c(a + b)
