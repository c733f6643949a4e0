"""MessageId: byte compatibility with the real Pulsar clients (REFERENCE-messageid.md)."""

from __future__ import annotations

import base64
import pickle

import pulsar  # pulsar-client, the [test] extra: the interoperability oracle
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mledger import InvalidMessageIdError, InvalidRequestError, MessageId, Position
from mledger.codec.proto.PulsarApi_pb2 import MessageIdData

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def real_parse(data: bytes) -> tuple[bytes, str] | None:
    """What pulsar-client makes of ``data``: (its re-serialization, its str), or None if refused."""
    try:
        m = pulsar.MessageId.deserialize(data)
    except ValueError:
        return None
    return m.serialize(), str(m)


def ours_parse(data: bytes) -> bytes | None:
    try:
        return MessageId.from_bytes(data).to_bytes()
    except InvalidMessageIdError:
        return None


def fields(m: MessageId) -> tuple[int, int, int, int]:
    return (m.ledger_id, m.entry_id, m.partition, m.batch_index)


# -- the reference's fixed cases ---------------------------------------------------------------


def test_special_ids_have_the_reference_bytes() -> None:
    assert MessageId.EARLIEST.to_bytes() == h("08 ffffffffffffffffff01 10 ffffffffffffffffff01")
    assert MessageId.EARLIEST.to_base64() == "CP///////////wEQ////////////AQ=="
    assert MessageId.LATEST.to_bytes() == h("08 ffffffffffffffff7f 10 ffffffffffffffff7f")
    assert MessageId.LATEST.to_base64() == "CP//////////fxD//////////38="
    assert MessageId(-1, -1, -1, -1).to_bytes() == MessageId.EARLIEST.to_bytes()
    assert MessageId.EARLIEST.to_bytes() == pulsar.MessageId.earliest.serialize()
    assert MessageId.LATEST.to_bytes() == pulsar.MessageId.latest.serialize()
    assert MessageId.from_bytes(MessageId.EARLIEST.to_bytes()) == MessageId.EARLIEST
    assert MessageId.from_bytes(MessageId.LATEST.to_bytes()) == MessageId.LATEST


@pytest.mark.parametrize(
    ("java", "cpp", "entry"),
    [("CLlgEAQwAA==", "CLlgEAQ=", 4), ("CLlgEAYwAA==", "CLlgEAY=", 6)],
)
def test_java_form_reads_as_the_plain_id(java: str, cpp: str, entry: int) -> None:
    m = MessageId.from_base64(java)
    assert fields(m) == (12345, entry, -1, -1)
    assert not m.is_batched
    assert m.batch_size == 0
    assert m == MessageId(12345, entry)
    assert m.to_base64() == cpp
    assert MessageId.from_base64(cpp) == m
    assert base64.b64decode(java) == h(f"08 b960 10 0{entry} 30 00")
    real = pulsar.MessageId.deserialize(base64.b64decode(java))
    assert real.serialize() == m.to_bytes()


def test_partition_minus_two_bytes() -> None:
    m = MessageId(1, 4, partition=-2)
    assert m.to_bytes() == h("0801 1004 18 feffffffffffffffff01")
    assert m.to_bytes() == pulsar.MessageId(-2, 1, 4, -1).serialize()
    assert MessageId.from_bytes(m.to_bytes()) == m


def test_ledger_two_to_the_64_minus_one_reads_as_minus_one() -> None:
    m = MessageId.from_bytes(h("08 ffffffffffffffffff01 10 04"))
    assert (m.ledger_id, m.entry_id) == (-1, 4)
    assert m.to_bytes() == h("08 ffffffffffffffffff01 10 04")


def test_uint64_at_or_above_two_to_the_63_reads_negative() -> None:
    assert MessageId.from_bytes(h("08 80808080808080808001 1004")).ledger_id == -(1 << 63)
    assert MessageId.from_bytes(h("0801 10 feffffffffffffffff01")).entry_id == -2


# Each case: hex input -> expected (ledger, entry, partition, batch_index), or None if rejected.
ACCEPT_REJECT = {
    "plain": ("08b960 1004", (12345, 4, -1, -1)),
    "java batch_size 0": ("08b960 1004 3000", (12345, 4, -1, -1)),
    "any field order": ("1004 2002 1803 08b960", (12345, 4, 3, 2)),
    "last one wins": ("0801 1004 1005 0807", (7, 5, -1, -1)),
    "padded varint": ("08 b9e0808000 1004", (12345, 4, -1, -1)),
    "padded 10-byte varint": ("08 81808080808080808000 1004", (1, 4, -1, -1)),
    "10th byte bits above 64 dropped": ("08 80808080808080808002 1004", (0, 4, -1, -1)),
    "padded tag": ("88 00 01 1004", (1, 4, -1, -1)),
    "5-byte padded tag": ("88 80 80 80 00 01 1004", (1, 4, -1, -1)),
    "5-byte tag with bits above 32": ("0801 1004 f8ffffff1f 01", (1, 4, -1, -1)),
    "largest field number": ("0801 1004 f8ffffff0f 01", (1, 4, -1, -1)),
    "unknown varint field": ("0801 1004 4005", (1, 4, -1, -1)),
    "unknown fixed64": ("0801 1004 41 0102030405060708", (1, 4, -1, -1)),
    "unknown fixed32": ("0801 1004 45 01020304", (1, 4, -1, -1)),
    "unknown length-delimited": ("0801 1004 52 03 616263", (1, 4, -1, -1)),
    "5-byte padded length": ("0801 1004 52 8380808000 616263", (1, 4, -1, -1)),
    "java topic name field 8": ("0801 1004 42 03 616263", (1, 4, -1, -1)),
    "empty group": ("0801 1004 4b 4c", (1, 4, -1, -1)),
    "group with content": ("0801 1004 4b 5001 5203616263 4c", (1, 4, -1, -1)),
    "nested groups": ("0801 1004 4b 53 5b 5c 54 4c", (1, 4, -1, -1)),
    "known field number as a group": ("0801 1004 0b 0805 0c", (1, 4, -1, -1)),
    "unpacked ack_set": ("0801 1004 2801 2802", (1, 4, -1, -1)),
    "packed ack_set": ("0801 1004 2a 02 0102", (1, 4, -1, -1)),
    "packed ack_set empty": ("0801 1004 2a00", (1, 4, -1, -1)),
    "packed ack_set 10-byte word": ("0801 1004 2a0a ffffffffffffffffff01", (1, 4, -1, -1)),
    "partition as fixed32 is unknown": ("0801 1004 1d 05000000", (1, 4, -1, -1)),
    "partition as length-delimited is unknown": ("0801 1004 1a 01 05", (1, 4, -1, -1)),
    "ledger as fixed64 is unknown": ("09 0100000000000000 0805 1004", (5, 4, -1, -1)),
    "int32 keeps low 32 bits": ("0801 1004 18 8780808010", (1, 4, 7, -1)),
    "partition -2": ("0801 1004 18 feffffffffffffffff01", (1, 4, -2, -1)),
    "partition -2 as 5 bytes": ("0801 1004 18 feffffff0f", (1, 4, -2, -1)),
    "batch_index 2**31 wraps": ("0801 1004 20 8080808008", (1, 4, -1, -(1 << 31))),
    "batched": ("0801 1004 2003 3005", (1, 4, -1, 3)),
    "batch_size only": ("0801 1004 3005", (1, 4, -1, -1)),
    "batch_size -1": ("0801 1004 30 ffffffffffffffffff01", (1, 4, -1, -1)),
    "chunk": ("0801 1004 3a 04 0802 1003", (1, 4, -1, -1)),
    "chunk in two parts is merged": ("0801 1004 3a 02 0802 3a 02 1003", (1, 4, -1, -1)),
    "chunk with its own chunk": ("0801 1004 3a 0a 0802 1003 3a04 08051006", (1, 4, -1, -1)),
    "chunk drops batch fields": ("0801 1004 2003 3005 3a 04 0802 1003", (1, 4, -1, -1)),
    "earliest": ("08ffffffffffffffffff01 10ffffffffffffffffff01", (-1, -1, -1, -1)),
    "latest": ("08ffffffffffffffff7f 10ffffffffffffffff7f", (2**63 - 1, 2**63 - 1, -1, -1)),
    # rejected
    "empty": ("", None),
    "missing entryId": ("0801", None),
    "missing ledgerId": ("1004", None),
    "ledger only as wrong wire type": ("0a 01 01 1004", None),
    "truncated varint": ("08 80", None),
    "truncated after tag": ("0801 10", None),
    "11-byte varint": ("08 8080808080808080808001 1004", None),
    "6-byte tag": ("88 80 80 80 80 00 01 1004", None),
    "6-byte length": ("0801 1004 52 8380808080 00 616263", None),
    "length of 2 GiB": ("0801 1004 52 8080808008 00", None),
    "length past the end": ("0801 1004 52 05 6162", None),
    "fixed32 cut short": ("0801 1004 55 0102", None),
    "fixed64 cut short": ("0801 1004 51 01020304050607", None),
    "field number 0": ("00 01 0801 1004", None),
    "field number 0 length-delimited": ("02 00 0801 1004", None),
    "wire type 6": ("0801 1004 4e", None),
    "wire type 7": ("0801 1004 4f", None),
    "end-group at top level": ("0801 1004 0c", None),
    "group closed by another field": ("0801 1004 4b 5001 54", None),
    "group never closed": ("0801 1004 4b", None),
    "group with a bad wire type inside": ("0801 1004 4b 57 4c", None),
    "packed ack_set truncated word": ("0801 1004 2a 02 0180", None),
    "chunk missing entryId": ("0801 1004 3a 02 0802", None),
    "empty chunk": ("0801 1004 3a 00", None),
    "chunk's own chunk invalid": ("0801 1004 3a 06 0802 1003 3a 00", None),
    "chunk past the end": ("0801 1004 3a 09 0802 1003", None),
    # Each occurrence is parsed within its own bounds, even though the two would join up.
    "chunk part cut short on its own": ("0801 1004 3a 01 08 3a 03 02 1003", None),
    "end-group inside a chunk": ("0801 1004 3a 05 0802 1003 3c", None),
}


@pytest.mark.parametrize("name", list(ACCEPT_REJECT))
def test_accept_reject_cases(name: str) -> None:
    data, expected = ACCEPT_REJECT[name]
    raw = h(data)
    if expected is None:
        with pytest.raises(InvalidMessageIdError):
            MessageId.from_bytes(raw)
        assert real_parse(raw) is None, "the real client accepts it"
    else:
        m = MessageId.from_bytes(raw)
        assert fields(m) == expected
        real = real_parse(raw)
        assert real is not None, "the real client refuses it"
        assert m.to_bytes() == real[0]


def _chunks(depth: int) -> bytes:
    body = h("0802 1003")
    for _ in range(depth):
        size = bytearray()
        n = len(body)
        while n >= 0x80:
            size.append(n & 0x7F | 0x80)
            n >>= 7
        size.append(n)
        body = h("0802 1003") + b"\x3a" + bytes(size) + body
    return body


@pytest.mark.parametrize(
    ("chunks", "groups", "accepted"),
    [
        (100, 0, True),
        (101, 0, False),
        (0, 100, True),
        (0, 101, False),
        (50, 50, True),
        (50, 51, False),
    ],
)
def test_nesting_limit_is_protobufs(chunks: int, groups: int, accepted: bool) -> None:
    # The groups sit inside the innermost chunk, so both kinds count toward one depth.
    inner = h("0802 1003") + b"\x4b" * groups + b"\x4c" * groups
    data = inner
    for _ in range(chunks):
        data = h("0802 1003") + b"\x3a" + _varint(len(data)) + data
    assert (real_parse(data) is not None) is accepted
    assert (ours_parse(data) is not None) is accepted
    assert (ours_parse(_chunks(chunks)) is not None) is (chunks <= 100)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_chunked_id_round_trips_like_the_client() -> None:
    m = MessageId.from_bytes(h("0801 1004 1807 3a 06 0802 1003 1805"))
    assert m.first_chunk_message_id == MessageId(2, 3, 5)
    assert str(m) == "2:3:5;1:4:7"
    # Outer partition unset: the client drops the first chunk's partition when writing.
    m = MessageId.from_bytes(h("0801 1004 3a 06 0802 1003 1805"))
    assert m.to_bytes() == h("0801 1004 3a 04 0802 1003")
    # Outer partition set: the client writes the first chunk's partition, even -1.
    m = MessageId(1, 4, 7, first_chunk_message_id=MessageId(2, 3))
    assert m.to_bytes() == h("0801 1004 1807 3a 0f 0802 1003 18 ffffffffffffffffff01")
    real = pulsar.MessageId.deserialize(m.to_bytes())
    assert real.serialize() == m.to_bytes()
    assert str(real) == "(2,3,-1,-1);(1,4,7,-1)"


def test_batch_size_round_trips_but_is_not_identity() -> None:
    m = MessageId.from_bytes(h("0801 1004 2003 3005"))
    assert (m.batch_index, m.batch_size) == (3, 5)
    assert m.to_bytes() == h("0801 1004 2003 3005")
    assert m == MessageId(1, 4, batch_index=3)
    assert hash(m) == hash(MessageId(1, 4, batch_index=3))


# -- the real client as the oracle -------------------------------------------------------------


@given(ledger=INT64, entry=INT64, partition=INT32, batch_index=INT32)
def test_to_bytes_is_the_clients_serialize(
    ledger: int, entry: int, partition: int, batch_index: int
) -> None:
    ours = MessageId(ledger, entry, partition, batch_index)
    theirs = pulsar.MessageId(partition, ledger, entry, batch_index)
    assert ours.to_bytes() == theirs.serialize()
    back = pulsar.MessageId.deserialize(ours.to_bytes())
    assert (back.ledger_id(), back.entry_id(), back.partition(), back.batch_index()) == fields(ours)
    assert MessageId.from_bytes(theirs.serialize()) == ours
    assert MessageId.from_base64(ours.to_base64()) == ours
    assert str(theirs) == f"({ledger},{entry},{partition},{batch_index})"


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _message_fields(depth: int) -> st.SearchStrategy[bytes]:
    """One field of a message: mostly well-formed, sometimes not (field 0, bad wire types)."""
    varint_value = st.one_of(
        st.integers(0, 300),
        st.integers(0, (1 << 64) - 1),
        st.sampled_from([(1 << 64) - 1, 1 << 63, (1 << 32) + 7]),
    ).map(_varint)
    padded = st.binary(min_size=1, max_size=11).map(
        lambda b: bytes(x | 0x80 for x in b[:-1]) + b[-1:]
    )
    number = st.one_of(st.integers(1, 9), st.integers(1, (1 << 29) - 1))
    length_delimited = st.tuples(number, st.binary(max_size=12)).map(
        lambda t: _field(t[0], 2, _varint(len(t[1])) + t[1])
    )
    fields = [
        st.tuples(number, st.just(0), varint_value).map(lambda t: _field(*t)),
        st.tuples(number, st.just(0), padded).map(lambda t: _field(*t)),
        st.tuples(number, st.just(1), st.binary(min_size=8, max_size=8)).map(lambda t: _field(*t)),
        st.tuples(number, st.just(5), st.binary(min_size=4, max_size=4)).map(lambda t: _field(*t)),
        length_delimited,
        st.integers(1, 9).map(lambda n: _field(n, 3, b"") + _field(n, 4, b"")),
        st.lists(varint_value, max_size=3)
        .map(b"".join)
        .map(lambda body: b"\x2a" + _varint(len(body)) + body),
    ]
    if depth:
        fields.append(
            _bodies(_message_fields(depth - 1), 3).map(
                lambda body: b"\x3a" + _varint(len(body)) + body
            )
        )
    broken = st.one_of(
        st.tuples(st.integers(0, 9), st.integers(0, 7), st.binary(max_size=3)).map(
            lambda t: _field(*t)
        ),
        st.binary(min_size=1, max_size=4),
    )
    return st.one_of(*fields, *fields, *fields, broken)


def _bodies(field: st.SearchStrategy[bytes], max_fields: int) -> st.SearchStrategy[bytes]:
    @st.composite
    def body(draw: st.DrawFn) -> bytes:
        parts = draw(st.lists(field, max_size=max_fields))
        # Usually add the required fields somewhere, so that most inputs get past that check.
        if draw(st.sampled_from([True, True, True, True, False])):
            for number in (1, 2):
                value = draw(st.integers(0, (1 << 64) - 1))
                parts.insert(draw(st.integers(0, len(parts))), _field(number, 0, _varint(value)))
        return b"".join(parts)

    return body()


_BODIES = _bodies(_message_fields(2), 6)


@st.composite
def wire_messages(draw: st.DrawFn) -> bytes:
    data = draw(_BODIES)
    if data and draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data) - 1))]
    return data


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(wire_messages())
def test_accepts_and_rejects_exactly_what_the_client_does(data: bytes) -> None:
    real = real_parse(data)
    ours = ours_parse(data)
    assert (ours is None) == (real is None), f"{data.hex()}: client {real}, ours {ours!r}"
    if real is not None:
        assert ours == real[0], data.hex()


@settings(max_examples=1000)
@given(st.binary(max_size=24))
def test_random_bytes_agree_with_the_client(data: bytes) -> None:
    assert ours_parse(data) == (None if (r := real_parse(data)) is None else r[0]), data.hex()


@settings(max_examples=1000)
@given(wire_messages())
def test_agrees_with_the_generated_module(data: bytes) -> None:
    # Python's protobuf does not check required fields on parse: IsInitialized() does. It also
    # refuses 5-byte tags with bits above 32 set, which the C++ parser (and ours) truncates:
    # where the two disagree, the real client must side with us.
    msg = MessageIdData()
    try:
        msg.ParseFromString(data)
        pb_ok = msg.IsInitialized() and (
            not msg.HasField("first_chunk_message_id") or msg.first_chunk_message_id.IsInitialized()
        )
    except Exception:
        pb_ok = False
    try:
        m = MessageId.from_bytes(data)
    except InvalidMessageIdError:
        assert not pb_ok, data.hex()
        return
    if not pb_ok:
        real = real_parse(data)
        assert real is not None and real[0] == m.to_bytes(), data.hex()
        return
    signed = lambda v: v - (1 << 64) if v >= 1 << 63 else v  # noqa: E731
    if msg.HasField("first_chunk_message_id"):
        first = msg.first_chunk_message_id
        assert m.first_chunk_message_id is not None
        assert fields(m.first_chunk_message_id) == (
            signed(first.ledgerId),
            signed(first.entryId),
            first.partition,
            first.batch_index,
        )
        # Like the C++ client, a chunked id keeps no batch fields of its own.
        expected_batch = (-1, 0)
    else:
        assert m.first_chunk_message_id is None
        expected_batch = (msg.batch_index, msg.batch_size)
    assert fields(m)[:3] == (signed(msg.ledgerId), signed(msg.entryId), msg.partition)
    assert (m.batch_index, m.batch_size) == expected_batch


# -- construction, ordering, text --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"ledger_id": 1 << 63, "entry_id": 0}, str(1 << 63)),
        ({"ledger_id": 0, "entry_id": -(1 << 63) - 1}, str(-(1 << 63) - 1)),
        ({"ledger_id": 0, "entry_id": 0, "partition": 1 << 31}, str(1 << 31)),
        ({"ledger_id": 0, "entry_id": 0, "batch_index": -(1 << 31) - 1}, str(-(1 << 31) - 1)),
        ({"ledger_id": 0, "entry_id": 0, "batch_size": 1 << 31}, str(1 << 31)),
        ({"ledger_id": "1", "entry_id": 0}, "'1'"),
        ({"ledger_id": 1.0, "entry_id": 0}, "1.0"),
        ({"ledger_id": True, "entry_id": 0}, "True"),
        ({"ledger_id": 0, "entry_id": 0, "first_chunk_message_id": (1, 2)}, "(1, 2)"),
        (
            {
                "ledger_id": 0,
                "entry_id": 0,
                "batch_index": 3,
                "first_chunk_message_id": MessageId(0, 0),
            },
            "no batch_index",
        ),
    ],
)
def test_out_of_range_is_a_typed_error_naming_the_value(kwargs: dict, bad: str) -> None:
    with pytest.raises(InvalidMessageIdError, match=__import__("re").escape(bad)):
        MessageId(**kwargs)


def test_error_is_an_invalid_request() -> None:
    assert issubclass(InvalidMessageIdError, InvalidRequestError)
    assert InvalidMessageIdError.http_status == 400


def test_the_client_rejects_the_same_ranges() -> None:
    for args in [(0, 1 << 63, 0, -1), (1 << 31, 0, 0, -1), (0, 0, 0, 1 << 31)]:
        with pytest.raises(TypeError):
            pulsar.MessageId(*args)


def test_ordering_is_javas_compare_to() -> None:
    ids = [
        MessageId(3, 5, 1),
        MessageId(3, 5),
        MessageId(3, 5, batch_index=0),
        MessageId.LATEST,
        MessageId(3, 4, 9, 9),
        MessageId(0, 0),
        MessageId.EARLIEST,
        MessageId(3, 5, batch_index=2),
        MessageId(-5, 100),
    ]
    assert sorted(ids) == [
        MessageId(-5, 100),  # signed, as Java's Long.compare
        MessageId.EARLIEST,
        MessageId(0, 0),
        MessageId(3, 4, 9, 9),
        MessageId(3, 5),
        MessageId(3, 5, batch_index=0),
        MessageId(3, 5, batch_index=2),
        MessageId(3, 5, 1),
        MessageId.LATEST,
    ]


@given(a=st.tuples(INT64, INT64, INT32, INT32), b=st.tuples(INT64, INT64, INT32, INT32))
def test_ordering_and_equality_follow_the_field_tuple(a: tuple, b: tuple) -> None:
    ma, mb = MessageId(*a), MessageId(*b)
    assert (ma < mb) == (a < b)
    assert (ma == mb) == (a == b)
    if a == b:
        assert hash(ma) == hash(mb)


def test_is_frozen_and_slotted() -> None:
    m = MessageId(1, 2)
    with pytest.raises(AttributeError):
        m.ledger_id = 3  # type: ignore[misc]
    assert not hasattr(m, "__dict__")
    assert {m, MessageId(1, 2)} == {m}
    chunked = MessageId(1, 2, 3, first_chunk_message_id=MessageId(0, 1))
    back = pickle.loads(pickle.dumps(chunked))
    assert back == chunked and back.first_chunk_message_id == MessageId(0, 1)


def test_str_position_and_helpers() -> None:
    assert str(MessageId(3, 5)) == "3:5:-1"
    assert str(MessageId(3, 5, 2, 7)) == "3:5:2:7"
    assert MessageId(3, 5, 2, 7).position == Position(3, 5)
    assert MessageId.from_position(Position(3, 5), partition=2) == MessageId(3, 5, 2)
    assert MessageId(3, 5, batch_index=0).is_batched
    assert not MessageId(3, 5).is_batched


# -- base64 and input types --------------------------------------------------------------------


@pytest.mark.parametrize("text", ["CLlgEAQ=", "CLlgEAQ", "CLlgEAQwAA==", "CLlgEAQwAA", b"CLlgEAQ="])
def test_base64_padding_is_optional(text: str | bytes) -> None:
    assert MessageId.from_base64(text) == MessageId(12345, 4)


@pytest.mark.parametrize(
    "text",
    [
        "",  # decodes to no bytes
        "====",
        "CLlgEAQ-",  # URL-safe alphabet
        "CLlgEAQ_",
        "CP-_____",
        "CLlg EAQ=",  # whitespace
        "CLlgEAQ=\n",
        "CLlgEAQ==",  # wrong padding
        "CLlgE",  # impossible length
        "CLlgEAQ=A",  # data after padding
        "=CLlgEAQ",
        "CLlgEAQé",
        "AAAA",  # decodes, but to an invalid message id
        b"\xff\xfe",
    ],
)
def test_bad_base64_is_rejected(text: str | bytes) -> None:
    with pytest.raises(InvalidMessageIdError):
        MessageId.from_base64(text)


def test_from_bytes_input_types() -> None:
    raw = MessageId(12345, 4).to_bytes()
    assert MessageId.from_bytes(bytearray(raw)) == MessageId(12345, 4)
    assert MessageId.from_bytes(memoryview(raw)) == MessageId(12345, 4)
    with pytest.raises(InvalidMessageIdError, match="from_base64"):
        MessageId.from_bytes("CLlgEAQ=")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageIdError):
        MessageId.from_bytes(12)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageIdError):
        MessageId.from_base64(12)  # type: ignore[arg-type]


def test_error_message_shows_the_bytes_and_the_reason() -> None:
    with pytest.raises(InvalidMessageIdError, match=r"'0801'.*missing the required field entryId"):
        MessageId.from_bytes(h("0801"))
