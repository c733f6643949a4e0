"""The command codec: ``BaseCommand`` bytes <-> protobuf objects, and the hot frames by hand.

Everything goes through the generated ``PulsarApi_pb2`` except the two commands sent once per
message, MESSAGE and SEND_RECEIPT, which are written here field by field (a few varints)
because building protobuf objects costs more than the rest of the send. They produce exactly
the bytes the generated code produces for the same fields, in field-number order;
``tests/test_protocol_codec.py`` checks that.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from ..codec.proto import PulsarApi_pb2 as api
from ._errors import RemoteProtocolError

__all__ = [
    "CommandType",
    "decode_command",
    "encode_command",
    "message_command",
    "send_receipt_command",
    "send_receipt_frame",
]

CommandType = api.BaseCommand.Type
"""``BaseCommand.Type`` (an int enum wrapper: ``CommandType.Name(n)``, ``CommandType.Value(name)``)."""

_MASK64 = (1 << 64) - 1
_TYPE_MESSAGE = api.BaseCommand.MESSAGE
_TYPE_SEND_RECEIPT = api.BaseCommand.SEND_RECEIPT


def decode_command(data: bytes) -> api.BaseCommand:
    """Parse serialized ``BaseCommand`` bytes.

    Raises :class:`RemoteProtocolError` when they do not parse or the required ``type`` is
    missing (which includes a type number this protocol version does not define: proto2 keeps
    an unknown enum value as an unknown field).
    """
    cmd = api.BaseCommand()
    try:
        cmd.MergeFromString(data)
    except DecodeError as exc:
        raise RemoteProtocolError(f"command of {len(data)} bytes does not parse: {exc}") from None
    if not cmd.HasField("type"):
        raise RemoteProtocolError(f"command of {len(data)} bytes has no known type")
    return cmd


def encode_command(cmd: api.BaseCommand) -> bytes:
    """Serialize a ``BaseCommand`` (required fields are the caller's business)."""
    data: bytes = cmd.SerializePartialToString()
    return data


def _encode_varint(value: int) -> bytes:
    value &= _MASK64  # a negative int64 is written as its two's complement, 10 bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS = [_encode_varint(i) for i in range(1 << 14)]
"""Every one- and two-byte varint, encoded (ids, sequence ids, sizes below 16384)."""
_SMALL = _VARINTS[:128]


def _varint_bytes(value: int) -> bytes:
    """``value`` as a protobuf varint."""
    if 0 <= value < 16384:
        return _VARINTS[value]
    if 0 < value < 1 << 21:
        return _CONTINUED[value & 0x3FFF] + _SMALL[value >> 14]
    return _encode_varint(value)


_CONTINUED = [bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14)]
"""The low two bytes of every three-byte varint (both with the continuation bit), by its
low 14 bits (entry and sequence ids up to two million: one concatenation each)."""


def _varint(out: bytearray, value: int) -> None:
    out += _varint_bytes(value)


_LEDGER_PREFIXES: dict[int, bytes] = {}


def _ledger_prefix(ledger_id: int) -> bytes:
    """``ledgerId`` field plus the ``entryId`` tag: the same for every entry of a ledger."""
    prefix = _LEDGER_PREFIXES.get(ledger_id)
    if prefix is None:
        if len(_LEDGER_PREFIXES) > 4096:
            _LEDGER_PREFIXES.clear()
        out = bytearray(b"\x08")
        _varint(out, ledger_id)
        out.append(0x10)
        prefix = _LEDGER_PREFIXES[ledger_id] = bytes(out)
    return prefix


def _message_id(ledger_id: int, entry_id: int, partition: int) -> bytearray:
    mid = bytearray(_ledger_prefix(ledger_id))
    _varint(mid, entry_id)
    if partition >= 0:
        mid.append(0x18)
        _varint(mid, partition)
    return mid


def message_command(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int = -1,
    redelivery_count: int = 0,
    ack_set: list[int] | None = None,
) -> bytes:
    """``BaseCommand{type: MESSAGE, message: CommandMessage{...}}`` bytes.

    ``partition`` is written when >= 0, ``redelivery_count`` when > 0, ``ack_set`` (int64
    words, a set bit = still unacknowledged) when given. O(1) plus the ack-set words.
    """
    body = bytearray(b"\x08")
    _varint(body, consumer_id)
    mid = _message_id(ledger_id, entry_id, partition)
    body.append(0x12)
    _varint(body, len(mid))
    body += mid
    if redelivery_count > 0:
        body.append(0x18)
        _varint(body, redelivery_count)
    if ack_set:
        for word in ack_set:
            body.append(0x20)
            _varint(body, word)
    out = bytearray(b"\x08")
    _varint(out, _TYPE_MESSAGE)
    out.append(0x4A)  # field 9, length-delimited
    _varint(out, len(body))
    out += body
    return bytes(out)


def send_receipt_command(
    producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int, partition: int = -1
) -> bytes:
    """``BaseCommand{type: SEND_RECEIPT, send_receipt: CommandSendReceipt{...}}`` bytes.

    The message id carries ledger and entry (and the partition when >= 0);
    ``highest_sequence_id`` is always written, as Pulsar's broker does.
    """
    v = _varint_bytes
    mid = _ledger_prefix(ledger_id) + v(entry_id)
    if partition >= 0:
        mid += b"\x18" + v(partition)
    body = (
        b"\x08"
        + v(producer_id)
        + b"\x10"
        + v(sequence_id)
        + b"\x1a"
        + v(len(mid))
        + mid
        + b"\x20"
        + v(highest_sequence_id)
    )
    return _SEND_RECEIPT_HEAD + v(len(body)) + body


def send_receipt_frame(
    producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int, partition: int = -1
) -> bytes:
    """:func:`send_receipt_command` in its frame (``[totalSize][commandSize]`` in front).

    One per stored message on the produce path: the sizes are computed from the parts (every
    length here is below 128: a one-byte varint) and the frame is written with one join, the
    producer's and the ledger's prefixes come from caches, and the sequence id's varint is
    written once when it is also the highest (a non-batched SEND).
    """
    v = _varint_bytes
    head = _PRODUCER_HEADS.get(producer_id)
    if head is None:
        head = _producer_head(producer_id)
    ledger = _LEDGER_PREFIXES.get(ledger_id)
    if ledger is None:
        ledger = _ledger_prefix(ledger_id)
    entry = _VARINTS[entry_id] if 0 <= entry_id < 16384 else v(entry_id)
    seq = _VARINTS[sequence_id] if 0 <= sequence_id < 16384 else v(sequence_id)
    highest = seq if highest_sequence_id == sequence_id else v(highest_sequence_id)
    if partition >= 0:
        entry += b"\x18" + v(partition)
    mid_size = len(ledger) + len(entry)
    body_size = len(head) + len(seq) + len(highest) + mid_size + 3
    n = _SEND_RECEIPT_HEAD_SIZE + 1 + body_size
    return b"".join(
        (
            _U32_PAIR.pack(n + 4, n),
            _SEND_RECEIPT_HEAD,
            _SMALL[body_size],
            head,
            seq,
            b"\x1a",
            _SMALL[mid_size],
            ledger,
            entry,
            b"\x20",
            highest,
        )
    )


def _producer_head(producer_id: int) -> bytes:
    """``producerId`` field plus the ``sequenceId`` tag: the same for every receipt of a producer."""
    if len(_PRODUCER_HEADS) > 4096:
        _PRODUCER_HEADS.clear()
    head = _PRODUCER_HEADS[producer_id] = b"\x08" + _varint_bytes(producer_id) + b"\x10"
    return head


_PRODUCER_HEADS: dict[int, bytes] = {}
_SEND_RECEIPT_HEAD = b"\x08" + _encode_varint(_TYPE_SEND_RECEIPT) + b"\x3a"  # type, then field 7 (length-delimited)
_SEND_RECEIPT_HEAD_SIZE = len(_SEND_RECEIPT_HEAD)
_U32_PAIR = struct.Struct(">II")
