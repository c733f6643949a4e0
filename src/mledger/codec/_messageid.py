"""Pulsar message ids and their byte form (``MessageIdData``, PulsarApi.proto).

A :class:`MessageId` is what a Pulsar client hands to an application: the entry's position
(ledger id, entry id), the partition of the topic it came from, and its index inside a batched
entry. Its byte form is the one every Pulsar client and the admin REST API exchange.

Theory of operation
-------------------
*Writing* follows the C++ client (and therefore the Python ``pulsar-client``) byte for byte:
ledgerId and entryId always, partition only when it is not -1, batch_index only when it is not
-1, batch_size only when it is not 0, ``first_chunk_message_id`` for a chunked id, never
``ack_set``; fields in field-number order; canonical varints. Negative values are sign-extended
to 64 bits, so -1 costs ten bytes, exactly as protobuf does it.

*Reading* accepts everything a protobuf parser of ``MessageIdData`` accepts, and rejects what it
rejects. The rules below were checked against the C++ parser bundled in ``pulsar-client`` 3.13.0
(tests/test_messageid.py replays them against it):

- fields in any order; the last occurrence of a scalar wins; several occurrences of the nested
  ``first_chunk_message_id`` are each parsed within their own bounds and merged field by field;
- padded varints (up to 10 bytes for a value, 5 for a tag or a length); bits above 64 (values)
  or 32 (tags) are dropped; int32 fields keep their low 32 bits; a uint64 >= 2**63 reads back
  negative, as every client keeps ledger and entry ids in a signed 64-bit integer;
- unknown fields of every wire type are skipped, groups included (nested to the same depth
  limit of 100 as protobuf); a known field with the wrong wire type is an unknown field;
- ``ack_set`` unpacked or packed; its values are checked and dropped, as the clients drop them;
- the Java form of a plain id (trailing ``30 00``, batch_size = 0) reads as the plain id.

Rejected, with :class:`InvalidMessageIdError`: empty or truncated input, a missing ledgerId or
entryId (at the top level or in ``first_chunk_message_id``), field number 0, wire types 6 and 7,
an end-group without its start, an over-long varint, and nesting deeper than 100.

Ordering is Pulsar's ``MessageIdAdv.compareTo`` (the Java client): ``(ledger_id, entry_id,
partition, batch_index)`` compared as signed integers. So a non-batched id (batch_index -1) sorts
before every message of its own batch, and ids of different partitions of the same entry
position are ordered by partition. ``batch_size`` and ``first_chunk_message_id`` take no part in
equality, hashing or ordering, as in Java's ``MessageIdAdvUtils.equals``.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core import (
    INT32_MAX,
    INT32_MIN,
    INT32_SIGN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MASK,
    InvalidMessageIdError,
    InvalidRequestError,
    Position,
    StateCorruptedError,
    as_int64,
    check_int,
)
from ._varint import get_varint, put_varint

__all__ = ["InvalidMessageIdError", "MessageId"]

_MAX_DEPTH = 100  # protobuf's default recursion limit, for nested messages and groups alike

_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*={0,2}")


_Fields = tuple[int, int, int, int, int, "MessageId | None"]


class _Malformed(Exception):
    """Internal: the bytes are not a valid ``MessageIdData``; carries the reason."""


@dataclass(frozen=True, slots=True, order=True)
class MessageId:
    """An immutable, ordered, hashable Pulsar message id.

    ``partition`` is -1 for a non-partitioned topic, ``batch_index`` is -1 for a message that is
    not part of a batch. ``batch_size`` (the number of messages of the batch, 0 when unknown) and
    ``first_chunk_message_id`` (set on the id of a chunked message) are carried so that bytes
    written by any client survive a read-write round trip; they are not part of the identity.

    Construction raises :class:`InvalidMessageIdError` naming the bad value when ledger_id or
    entry_id is not an int64, partition, batch_index or batch_size is not an int32, or a chunked
    id (one with ``first_chunk_message_id``) has a batch_index or batch_size.

    >>> m = MessageId(12345, 4)
    >>> m.to_base64(), str(m), m.position
    ('CLlgEAQ=', '12345:4:-1', Position(ledger_id=12345, entry_id=4))
    >>> MessageId.from_base64("CLlgEAQwAA==") == m   # the Java client's form of the same id
    True
    >>> MessageId(3, 5) < MessageId(3, 5, batch_index=0) < MessageId(3, 6)
    True
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1
    batch_size: int = field(default=0, compare=False)
    first_chunk_message_id: MessageId | None = field(default=None, compare=False)

    EARLIEST: ClassVar[MessageId]
    """Pulsar's ``MessageId.earliest``: ``(-1, -1)``, before every message."""
    LATEST: ClassVar[MessageId]
    """Pulsar's ``MessageId.latest``: ``(2**63-1, 2**63-1)``, after every message."""

    def __post_init__(self) -> None:
        check_int("ledger_id", self.ledger_id, INT64_MIN, INT64_MAX, InvalidMessageIdError)
        check_int("entry_id", self.entry_id, INT64_MIN, INT64_MAX, InvalidMessageIdError)
        check_int("partition", self.partition, INT32_MIN, INT32_MAX, InvalidMessageIdError)
        check_int("batch_index", self.batch_index, INT32_MIN, INT32_MAX, InvalidMessageIdError)
        check_int("batch_size", self.batch_size, INT32_MIN, INT32_MAX, InvalidMessageIdError)
        first = self.first_chunk_message_id
        if first is not None:
            if not isinstance(first, MessageId):
                raise InvalidMessageIdError(f"invalid first_chunk_message_id {first!r}: expected a MessageId or None")
            if self.batch_index != -1 or self.batch_size != 0:
                raise InvalidMessageIdError(
                    f"invalid message id {self.ledger_id}:{self.entry_id}: a chunked id has no"
                    f" batch_index or batch_size (got {self.batch_index}, {self.batch_size})"
                )

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_position(
        cls, position: Position, partition: int = -1, batch_index: int = -1, batch_size: int = 0
    ) -> MessageId:
        """The id of ``position`` (a whole entry, or one message of it when batch_index >= 0).

        Raises :class:`InvalidMessageIdError` like the constructor.
        """
        return cls(position[0], position[1], partition, batch_index, batch_size)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> MessageId:
        """Parse a serialized ``MessageIdData``, written by any Pulsar client.

        Accepts everything protobuf accepts (see the module docstring); raises
        :class:`InvalidMessageIdError` for anything else, and for a ``str`` (base64 text must go
        through :meth:`from_base64`). O(len(data)).
        """
        if isinstance(data, str):
            raise InvalidMessageIdError("invalid message id: got text, expected bytes (use MessageId.from_base64)")
        if not isinstance(data, bytes):
            try:
                data = bytes(data)
            except TypeError:
                raise InvalidMessageIdError(f"invalid message id: expected bytes, got {type(data).__name__}") from None
        try:
            ledger_id, entry_id, partition, batch_index, batch_size, first = _parse([data], 0)
        except (_Malformed, StateCorruptedError) as e:  # the varint reader's errors are the codec's
            shown = data[:64].hex() + ("..." if len(data) > 64 else "")
            raise InvalidMessageIdError(f"invalid message id bytes {shown!r}: {e}") from None
        if first is not None:
            # Like the C++ client, a chunked id keeps no batch fields of its own. (Java's reader
            # does the opposite: an id with a batch_index becomes a batched id and loses its
            # first chunk. Ids that clients write never carry both.)
            batch_index, batch_size = -1, 0
        return _new(ledger_id, entry_id, partition, batch_index, batch_size, first)

    @classmethod
    def from_base64(cls, text: str | bytes) -> MessageId:
        """Parse the standard-alphabet base64 of a serialized id, as the admin API receives it.

        Follows Java's ``Base64.getDecoder()``: the standard alphabet only (``-`` and ``_``
        are rejected, and so is whitespace), padding optional but correct when present. Raises
        :class:`InvalidMessageIdError` for bad text, text that decodes to no bytes, or bytes
        that :meth:`from_bytes` rejects.
        """
        if isinstance(text, bytes):
            try:
                text = text.decode("ascii")
            except UnicodeDecodeError:
                raise InvalidMessageIdError(f"invalid base64 message id {text!r}") from None
        if not isinstance(text, str):
            raise InvalidMessageIdError(f"invalid base64 message id: expected str, got {type(text).__name__}")
        if not _BASE64_TEXT.fullmatch(text):
            raise InvalidMessageIdError(f"invalid base64 message id {text!r}: not standard base64 (A-Z a-z 0-9 + /)")
        if "=" not in text:
            rest = len(text) % 4
            if rest == 1:
                raise InvalidMessageIdError(f"invalid base64 message id {text!r}: bad length")
            text += "=" * ((4 - rest) % 4)
        try:
            data = binascii.a2b_base64(text, strict_mode=True)
        except binascii.Error as e:
            raise InvalidMessageIdError(f"invalid base64 message id {text!r}: {e}") from None
        if not data:
            raise InvalidMessageIdError(f"invalid base64 message id {text!r}: decodes to no bytes")
        return cls.from_bytes(data)

    # -- serialization -----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The bytes the C++/Python client's ``MessageId.serialize()`` writes for this id. O(1)."""
        out = _ids_bytes(self.ledger_id, self.entry_id)
        if self.partition != -1:
            out.append(0x18)
            put_varint(out, self.partition)
        if self.batch_index != -1:
            out.append(0x20)
            put_varint(out, self.batch_index)
        if self.batch_size != 0:
            out.append(0x30)
            put_varint(out, self.batch_size)
        first = self.first_chunk_message_id
        if first is not None:
            nested = _ids_bytes(first.ledger_id, first.entry_id)
            # The C++ client writes the first chunk's partition when the id's own partition is
            # set, and leaves it out otherwise (even when the first chunk has one).
            if self.partition != -1:
                nested.append(0x18)
                put_varint(nested, first.partition)
            out.append(0x3A)
            put_varint(out, len(nested))
            out += nested
        return bytes(out)

    def to_base64(self) -> str:
        """:meth:`to_bytes` as padded standard base64, the form the admin API takes."""
        return binascii.b2a_base64(self.to_bytes(), newline=False).decode("ascii")

    # -- views -------------------------------------------------------------------------------

    @property
    def position(self) -> Position:
        """The entry this id points into, as a :class:`~mledger.core.Position`."""
        return Position(self.ledger_id, self.entry_id)

    @property
    def is_batched(self) -> bool:
        """True when the id names one message inside a batched entry (batch_index >= 0)."""
        return self.batch_index >= 0

    def __str__(self) -> str:
        # Java's MessageIdImpl / BatchMessageIdImpl toString: "L:E:P" and "L:E:P:B".
        text = f"{self.ledger_id}:{self.entry_id}:{self.partition}"
        if self.batch_index != -1:
            text += f":{self.batch_index}"
        if self.first_chunk_message_id is not None:
            text = f"{self.first_chunk_message_id};{text}"
        return text


def _new(
    ledger_id: int,
    entry_id: int,
    partition: int,
    batch_index: int,
    batch_size: int,
    first: MessageId | None,
) -> MessageId:
    # Decoded values are in range by construction: skip __post_init__ on the read path.
    m = _object_new(MessageId)
    _set_ledger_id(m, ledger_id)
    _set_entry_id(m, entry_id)
    _set_partition(m, partition)
    _set_batch_index(m, batch_index)
    _set_batch_size(m, batch_size)
    _set_first_chunk(m, first)
    return m


# -- the decoder ---------------------------------------------------------------------------
#
# Hand-written rather than the generated PulsarApi_pb2 because Python's protobuf (upb) differs
# from the C++ parser in the real clients: it does not check required fields on parse, and it
# rejects 5-byte tags with bits above 32 set where C++ drops those bits. Every branch here
# mirrors the C++ parser; the tests replay each case against it and against PulsarApi_pb2.


def _ids_bytes(ledger_id: int, entry_id: int) -> bytearray:
    """A ``MessageIdData`` begun with its required ``ledgerId`` (1) and ``entryId`` (2) fields."""
    out = bytearray(b"\x08")
    put_varint(out, ledger_id)
    out.append(0x10)
    put_varint(out, entry_id)
    return out


def _tag(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """A tag varint (at most 5 bytes, reduced mod 2**32) -> (field number, wire type, pos)."""
    b = data[pos]
    if b < 0x80:
        tag, pos = b, pos + 1
    else:
        tag, pos = get_varint(data, pos, end, 5, "tag")
        tag &= UINT32_MASK
    if tag < 8:
        raise _Malformed(f"field number 0 at byte {pos - 1}")
    return tag >> 3, tag & 7, pos


def _length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length prefix (at most 5 bytes, below 2**31) -> (end of the payload, pos)."""
    start = pos
    size, pos = get_varint(data, pos, end, 5, "length")
    if size >= 1 << 31:
        raise _Malformed(f"length {size} at byte {start} is 2 GiB or more")
    if pos + size > end:
        raise _Malformed(f"length {size} at byte {start} runs past the end")
    return pos + size, pos


def _skip(data: bytes, pos: int, end: int, number: int, wire: int, depth: int) -> int:
    """Skip the value of an unknown field; returns the position after it."""
    if wire == 0:
        return get_varint(data, pos, end)[1]
    if wire == 2:
        return _length(data, pos, end)[0]
    if wire == 1 or wire == 5:
        pos += 8 if wire == 1 else 4
        if pos > end:
            raise _Malformed("truncated fixed-width field")
        return pos
    if wire == 3:
        if depth + 1 > _MAX_DEPTH:
            raise _Malformed(f"nesting deeper than {_MAX_DEPTH}")
        while pos < end:
            inner, inner_wire, pos = _tag(data, pos, end)
            if inner_wire == 4:
                if inner != number:
                    raise _Malformed(f"group {number} closed by end-group {inner}")
                return pos
            pos = _skip(data, pos, end, inner, inner_wire, depth + 1)
        raise _Malformed(f"group {number} is never closed")
    if wire == 4:
        raise _Malformed(f"end-group {number} without a start-group at byte {pos - 1}")
    raise _Malformed(f"invalid wire type {wire} at byte {pos - 1}")


def _parse(parts: list[bytes], depth: int) -> _Fields:
    """The merged fields of the ``MessageIdData`` occurrences in ``parts``, as written.

    A message is one part; a nested message field that occurs several times is several parts,
    which protobuf parses one by one into the same message (each within its own bounds).
    """
    fields: list[Any] = [None, None, -1, -1, 0]  # ledger, entry: None until seen
    chunk_parts: list[bytes] = []
    for data in parts:
        _parse_into(fields, chunk_parts, data, depth)
    ledger_id, entry_id, partition, batch_index, batch_size = fields
    if ledger_id is None or entry_id is None:
        missing = "ledgerId" if ledger_id is None else "entryId"
        where = "first_chunk_message_id" if depth else "message id"
        raise _Malformed(f"{where} is missing the required field {missing}")
    ledger_id = as_int64(ledger_id)
    entry_id = as_int64(entry_id)
    first = None
    if chunk_parts:
        if depth + 1 > _MAX_DEPTH:
            raise _Malformed(f"nesting deeper than {_MAX_DEPTH}")
        nested = _parse(chunk_parts, depth + 1)
        # The C++ client keeps the first chunk's ledger, entry, partition and batch index as
        # written, not its batch size nor its own first chunk.
        first = _new(nested[0], nested[1], nested[2], nested[3], 0, None)
    return ledger_id, entry_id, partition, batch_index, batch_size, first


def _parse_into(fields: list[Any], chunk_parts: list[bytes], data: bytes, depth: int) -> None:
    """Parse one occurrence, updating ``fields`` (last one wins) and collecting chunk parts."""
    ledger_id, entry_id, partition, batch_index, batch_size = fields
    pos = 0
    end = len(data)
    while pos < end:
        b = data[pos]
        if b < 0x80 and b >= 8:  # one-byte tag: the only kind a Pulsar client writes
            number, wire, pos = b >> 3, b & 7, pos + 1
        else:
            number, wire, pos = _tag(data, pos, end)
        if wire == 0 and number <= 6:
            if pos < end and data[pos] < 0x80:
                value = data[pos]
                pos += 1
            else:
                value, pos = get_varint(data, pos, end)
            if number == 1:
                ledger_id = value
            elif number == 2:
                entry_id = value
            elif number == 3:
                value &= UINT32_MASK
                partition = value - (1 << 32) if value & INT32_SIGN else value
            elif number == 4:
                value &= UINT32_MASK
                batch_index = value - (1 << 32) if value & INT32_SIGN else value
            elif number == 6:
                value &= UINT32_MASK
                batch_size = value - (1 << 32) if value & INT32_SIGN else value
            # number == 5: an unpacked ack_set word, dropped as every client drops it
        elif wire == 2 and number == 5:  # packed ack_set
            stop, pos = _length(data, pos, end)
            while pos < stop:
                pos = get_varint(data, pos, stop)[1]
        elif wire == 2 and number == 7:
            stop, start = _length(data, pos, end)
            chunk_parts.append(data[start:stop])
            pos = stop
        else:
            pos = _skip(data, pos, end, number, wire, depth)
    fields[:] = ledger_id, entry_id, partition, batch_index, batch_size


# Slot descriptors of the frozen class, called directly: the cheapest way to fill an instance.
_object_new = object.__new__
_slots = vars(MessageId)
_set_ledger_id = _slots["ledger_id"].__set__
_set_entry_id = _slots["entry_id"].__set__
_set_partition = _slots["partition"].__set__
_set_batch_index = _slots["batch_index"].__set__
_set_batch_size = _slots["batch_size"].__set__
_set_first_chunk = _slots["first_chunk_message_id"].__set__

MessageId.EARLIEST = MessageId(-1, -1)
MessageId.LATEST = MessageId(INT64_MAX, INT64_MAX)


def as_position(value: Position | MessageId | tuple[int, int]) -> Position:
    """The position a reset or ack refers to: a Position, a MessageId (EARLIEST / LATEST map
    to the position constants of the same values) or a ``(ledger_id, entry_id)`` pair.

    Raises :class:`~mledger.core.InvalidRequestError` for anything else.
    """
    if isinstance(value, MessageId):
        return value.position
    if isinstance(value, tuple) and len(value) == 2:
        return Position.of(value[0], value[1])
    raise InvalidRequestError(f"invalid position {value!r}: expected a Position or a MessageId")
