"""Pulsar's batch payload: several messages in one entry.

A batched entry's ``MessageMetadata`` has ``num_messages_in_batch = N`` and its payload is N
records, each ``[size: 4 bytes big-endian][SingleMessageMetadata][payload]`` (Pulsar's
``Commands.serializeSingleMessageInBatchWithPayload``). ``SingleMessageMetadata``
(PulsarApi.proto) is encoded here by hand because mledger's generated ``PulsarApi_pb2`` keeps
only the messages the core needs; the fields written are ``properties`` (1), ``partition_key``
(2), ``payload_size`` (3, required) and ``sequence_id`` (8). The reader skips every other field
but ``compacted_out`` (4), so batches written by real Pulsar clients parse.

:func:`compact_batch` is compaction's re-batching (Pulsar's ``RawBatchConverter.rebatchMessage``):
kept records are copied byte for byte, the others become empty ``compacted_out`` records, so
the batch keeps its size and every kept message its batch index.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..core import StateCorruptedError, as_int64
from ._varint import get_varint, put_varint

__all__ = ["SingleMessage", "compact_batch", "decode_batch", "encode_batch"]

_SIZE = struct.Struct(">I")
_COMPACTED_OUT_RECORD = _SIZE.pack(4) + bytes((3 << 3, 0, 4 << 3, 1))
"""A removed message of a compacted batch: ``payload_size = 0``, ``compacted_out = true``."""


@dataclass(frozen=True, slots=True)
class SingleMessage:
    """One message of a batch: payload and its ``SingleMessageMetadata`` fields."""

    payload: bytes
    key: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    sequence_id: int | None = None
    compacted_out: bool = False
    """Removed by compaction (an empty placeholder that keeps the batch's indexes)."""


def encode_batch(messages: Sequence[SingleMessage]) -> bytes:
    """The batch payload of ``messages``. O(total size)."""
    out = bytearray()
    for m in messages:
        meta = bytearray()
        for k, v in m.properties:
            kv = bytearray()
            _put_bytes(kv, 1, k.encode())
            _put_bytes(kv, 2, v.encode())
            _put_bytes(meta, 1, bytes(kv))
        if m.key is not None:
            _put_bytes(meta, 2, m.key.encode())
        meta.append(3 << 3)
        put_varint(meta, len(m.payload))
        if m.sequence_id is not None:
            meta.append(8 << 3)
            put_varint(meta, m.sequence_id)
        out += _SIZE.pack(len(meta))
        out += meta
        out += m.payload
    return bytes(out)


def decode_batch(data: bytes, num_messages: int) -> list[SingleMessage]:
    """Split a batch payload into its ``num_messages`` messages.

    Raises :class:`~mledger.core.StateCorruptedError` naming the offset when a record is cut
    short, a size runs past the end, or ``payload_size`` is missing. O(len(data)).
    """
    out: list[SingleMessage] = []
    pos = 0
    end = len(data)
    for i in range(num_messages):
        if pos + 4 > end:
            raise StateCorruptedError(f"batch message {i} of {num_messages}: metadata size cut short at byte {pos}")
        size = _SIZE.unpack_from(data, pos)[0]
        start = pos + 4
        stop = start + size
        if stop > end:
            raise StateCorruptedError(f"batch message {i}: metadata of {size} bytes at byte {pos} runs past the end")
        key, props, payload_size, seq, compacted_out = _parse_single(data, start, stop, i)
        if stop + payload_size > end:
            raise StateCorruptedError(f"batch message {i}: payload of {payload_size} bytes runs past the end")
        out.append(SingleMessage(bytes(data[stop : stop + payload_size]), key, props, seq, compacted_out))
        pos = stop + payload_size
    return out


def compact_batch(data: bytes, num_messages: int, keep: Sequence[bool]) -> bytes:
    """The batch payload ``data`` with the messages whose ``keep`` is false replaced by empty
    ``compacted_out`` records (kept records copied unchanged). Raises as :func:`decode_batch`
    does. O(len(data))."""
    out = bytearray()
    pos = 0
    end = len(data)
    for i in range(num_messages):
        if pos + 4 > end:
            raise StateCorruptedError(f"batch message {i} of {num_messages}: metadata size cut short at byte {pos}")
        stop = pos + 4 + _SIZE.unpack_from(data, pos)[0]
        if stop > end:
            raise StateCorruptedError(f"batch message {i}: metadata at byte {pos} runs past the end")
        payload_size = _parse_single(data, pos + 4, stop, i)[2]
        record_end = stop + payload_size
        if record_end > end:
            raise StateCorruptedError(f"batch message {i}: payload of {payload_size} bytes runs past the end")
        out += data[pos:record_end] if keep[i] else _COMPACTED_OUT_RECORD
        pos = record_end
    return bytes(out)


def _parse_single(
    data: bytes, pos: int, end: int, index: int
) -> tuple[str | None, tuple[tuple[str, str], ...], int, int | None, bool]:
    compacted_out = False
    key: str | None = None
    props: list[tuple[str, str]] = []
    payload_size: int | None = None
    seq: int | None = None
    while pos < end:
        tag, pos = _varint(data, pos, end, index)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos, end, index)
            if number == 3:
                payload_size = value & 0xFFFFFFFF
            elif number == 8:
                seq = as_int64(value)
            elif number == 4:
                compacted_out = value != 0
        elif wire == 2:
            length, pos = _varint(data, pos, end, index)
            if pos + length > end:
                raise StateCorruptedError(f"batch message {index}: field {number} runs past its metadata")
            chunk = data[pos : pos + length]
            pos += length
            if number == 1:
                props.append(_parse_key_value(chunk, index))
            elif number == 2:
                key = bytes(chunk).decode("utf-8", "replace")
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise StateCorruptedError(f"batch message {index}: unsupported wire type {wire} for field {number}")
    if pos > end:
        raise StateCorruptedError(f"batch message {index}: metadata cut short")
    if payload_size is None:
        raise StateCorruptedError(f"batch message {index}: missing required payload_size")
    return key, tuple(props), payload_size, seq, compacted_out


def _parse_key_value(data: bytes, index: int) -> tuple[str, str]:
    key = value = ""
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos, end, index)
        if tag & 7 != 2:
            raise StateCorruptedError(f"batch message {index}: malformed property")
        length, pos = _varint(data, pos, end, index)
        text = bytes(data[pos : pos + length]).decode("utf-8", "replace")
        pos += length
        if tag >> 3 == 1:
            key = text
        elif tag >> 3 == 2:
            value = text
    return key, value


def _varint(data: bytes, pos: int, end: int, index: int) -> tuple[int, int]:
    try:
        return get_varint(memoryview(data), pos, end)
    except StateCorruptedError as exc:
        raise StateCorruptedError(f"batch message {index}: {exc}") from None


def _put_bytes(out: bytearray, number: int, data: bytes) -> None:
    out.append((number << 3) | 2)
    put_varint(out, len(data))
    out += data
