"""Scalar protobuf wire-format helpers: one varint, one field at a time.

Used for the few scalar and string fields of a cursor state, Pulsar's batch payloads and the
message-id writer, and to walk top-level fields; the repeated parts of a cursor state go through
the vectorised :mod:`mledger.codec._varint_arrays`. Readers take a ``memoryview`` of unsigned
bytes and raise :class:`~mledger.core.StateCorruptedError` on malformed input.
"""

from __future__ import annotations

from ..core import INT64_MAX, INT64_MIN, UINT64_MASK, StateCorruptedError

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_MAX_GROUP_DEPTH = 100  # protobuf's default recursion limit


def check_int64(value: int, what: str) -> int:
    """Return ``value`` if it is an int in the int64 range; else raise ``ValueError`` naming it."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} {value} is outside the int64 range")
    return value


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a varint; negative values take 10 bytes (two's complement), as int64."""
    value &= UINT64_MASK
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def put_tag(out: bytearray, field: int, wire_type: int) -> None:
    put_varint(out, (field << 3) | wire_type)


def put_bytes_field(out: bytearray, field: int, payload: bytes) -> None:
    put_tag(out, field, LEN)
    put_varint(out, len(payload))
    out += payload


def get_varint(
    mv: bytes | memoryview, pos: int, end: int, max_bytes: int = 10, what: str = "varint"
) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; return ``(value mod 2**64, next position)``.

    Bits beyond 64 in the tenth byte are dropped, as protobuf does; a varint longer than
    ``max_bytes`` (10 for a value; 5 where a reader takes a tag or a length as protobuf's
    32-bit varint) or running past ``end`` raises ``StateCorruptedError`` naming ``what``.
    """
    result = 0
    shift = 0
    limit = 7 * max_bytes
    while True:
        if pos >= end:
            raise StateCorruptedError(f"truncated {what} at offset {pos}")
        b = mv[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & UINT64_MASK, pos
        shift += 7
        if shift == limit:
            raise StateCorruptedError(f"{what} longer than {max_bytes} bytes ending at offset {pos}")


def get_len(mv: memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read a length prefix and check that the payload fits; return ``(payload end, payload start)``."""
    n, pos = get_varint(mv, pos, end)
    if n > end - pos:
        raise StateCorruptedError(f"length {n} at offset {pos} runs past the end of the message ({end})")
    return pos + n, pos


def skip_field(mv: memoryview, pos: int, end: int, field: int, wire_type: int, depth: int = 0) -> int:
    """Skip the value of an unknown field whose tag was just read; return the next position.

    Groups are skipped to their matching end tag (protobuf keeps unknown groups); wire types 6
    and 7, a stray end-group and a group left open raise ``StateCorruptedError``.
    """
    if wire_type == VARINT:
        return get_varint(mv, pos, end)[1]
    if wire_type == LEN:
        return get_len(mv, pos, end)[0]
    if wire_type == I64 or wire_type == I32:
        nxt = pos + (8 if wire_type == I64 else 4)
        if nxt > end:
            raise StateCorruptedError(f"truncated fixed-width field {field} at offset {pos}")
        return nxt
    if wire_type == SGROUP:
        if depth >= _MAX_GROUP_DEPTH:
            raise StateCorruptedError(f"groups nested deeper than {_MAX_GROUP_DEPTH} at offset {pos}")
        while True:
            tag, pos = get_varint(mv, pos, end)
            inner_field, inner_type = tag >> 3, tag & 7
            if inner_type == EGROUP:
                if inner_field != field:
                    raise StateCorruptedError(f"end-group {inner_field} closes group {field} at offset {pos}")
                return pos
            pos = skip_field(mv, pos, end, inner_field, inner_type, depth + 1)
    raise StateCorruptedError(f"invalid wire type {wire_type} for field {field} at offset {pos}")


def read_tag(mv: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """Read a tag; return ``(field number, wire type, next position)``; field 0 is corrupt."""
    tag, pos = get_varint(mv, pos, end)
    field = tag >> 3
    if field == 0 or field > 0x1FFFFFFF:
        raise StateCorruptedError(f"invalid field number {field} at offset {pos}")
    return field, tag & 7, pos


def decode_utf8(raw: bytes) -> str:
    """Decode a proto2 string as Java does: malformed UTF-8 becomes U+FFFD, never an error."""
    return raw.decode("utf-8", errors="replace")


def parse_flat(mv: memoryview, pos: int, end: int, schema: dict[int, int], what: str) -> dict[int, int | bytes]:
    """Parse a small message of scalar fields; ``schema`` maps field number -> VARINT or LEN.

    Returns ``{field: value}`` (varints as unsigned ints, LEN fields as bytes), last one wins.
    A field absent from ``schema`` or carrying another wire type is skipped as unknown, as
    protobuf does. Linear in the message size; raises ``StateCorruptedError``.
    """
    found: dict[int, int | bytes] = {}
    while pos < end:
        field, wire_type, pos = read_tag(mv, pos, end)
        if schema.get(field) != wire_type:
            pos = skip_field(mv, pos, end, field, wire_type)
        elif wire_type == LEN:
            stop, start = get_len(mv, pos, end)
            found[field] = bytes(mv[start:stop])
            pos = stop
        else:
            found[field], pos = get_varint(mv, pos, end)
    return found
