"""PIP-381: a cursor state too large for one ledger entry, written as parts plus a JSON footer.

Write: a payload of at most ``max_entry_size`` bytes is one entry, as before PIP-381.
A larger one is cut into parts of ``max_entry_size`` bytes, appended as consecutive entries,
then the footer ``{"numParts":N,"length":L}`` (PR #22799's ``ChunkSequenceFooter``) is
appended as the last entry. Read: a last entry that is empty or does not start with ``{`` is a
plain payload; otherwise it is a footer, and the ``N`` entries before it are the parts.

A payload is a serialized ``PositionInfo`` or the same compressed in the 0x4778 envelope
(:func:`~mledger.codec.compress_payload`); neither can start with ``{``, so
footers, plain and compressed payloads are told apart by their first byte. A footer is
validated (size, JSON shape, bounds, then the parts' count and total length) before anything
is allocated for the parts, so a corrupt or hostile footer costs O(1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..core import INT32_MAX, ConfigError, EntryTooLargeError, StateCorruptedError
from ._compression import CompressionType, compress_payload, decompress_payload

__all__ = [
    "FOOTER_MAX_BYTES",
    "ChunkFooter",
    "pack_entries",
    "parse_footer",
    "part_entry_ids",
    "reassemble",
    "reassemble_stream",
    "split_chunks",
    "unpack_payload",
]

FOOTER_MAX_BYTES = 256
"""The longest entry read as a footer; a real one is under 50 bytes. Bounds the JSON parse."""

_OPEN_BRACE = 0x7B


class ChunkFooter(NamedTuple):
    """``ChunkSequenceFooter``: how many part entries precede it and their total length."""

    num_parts: int
    length: int

    def to_json(self) -> bytes:
        """The footer entry, compact as Jackson writes it: ``{"numParts":N,"length":L}``."""
        return json.dumps({"numParts": self.num_parts, "length": self.length}, separators=(",", ":")).encode()


def split_chunks(payload: bytes | bytearray | memoryview, max_entry_size: int) -> list[bytes]:
    """The entries to append for ``payload``: ``[payload]``, or the parts then the footer.

    Every entry is at most ``max_entry_size`` bytes. Raises ``ConfigError`` when
    ``max_entry_size`` cannot hold a footer, ``ValueError`` for a single-entry payload
    starting with ``{`` (it would read back as a footer) and ``EntryTooLargeError`` beyond
    the 2 GiB a footer's Java ``int`` length can describe. O(len(payload)).
    """
    data = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
    n = len(data)
    if n <= max_entry_size:
        if n and data[0] == _OPEN_BRACE:
            raise ValueError("a single-entry payload must not start with '{': it would be read as a chunk footer")
        return [bytes(data)]
    if n > INT32_MAX:
        raise EntryTooLargeError(f"payload of {n} bytes exceeds the {INT32_MAX} bytes a chunk footer can describe")
    parts = [bytes(data[i : i + max_entry_size]) for i in range(0, n, max_entry_size)]
    footer = ChunkFooter(len(parts), n).to_json()
    if len(footer) > max_entry_size:
        raise ConfigError(f"max_entry_size {max_entry_size} cannot hold the {len(footer)}-byte chunk footer")
    parts.append(footer)
    return parts


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def _reject_float(text: str) -> Any:
    raise ValueError(f"non-integer number {text}")


def parse_footer(entry: bytes | bytearray | memoryview, *, max_parts: int, max_length: int) -> ChunkFooter | None:
    """Read a last cursor-ledger entry as a footer; ``None`` when it is a plain payload.

    ``None`` when ``entry`` is empty or does not start with ``{``. Otherwise it must be at
    most :data:`FOOTER_MAX_BYTES` of UTF-8 JSON holding exactly the integer keys
    ``numParts`` (1..``max_parts``) and ``length`` (``numParts``..``max_length``), both
    within Java's ``int``; anything else raises ``StateCorruptedError``. O(1): the entry's
    size is checked before it is decoded.
    """
    if len(entry) == 0 or entry[0] != _OPEN_BRACE:
        return None
    if len(entry) > FOOTER_MAX_BYTES:
        raise StateCorruptedError(f"chunk footer of {len(entry)} bytes exceeds {FOOTER_MAX_BYTES} bytes")
    raw = bytes(entry)
    try:
        obj = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicate_keys,
            parse_float=_reject_float,
            parse_constant=_reject_float,
        )
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise StateCorruptedError(f"chunk footer {raw!r} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict) or set(obj) != {"numParts", "length"}:
        raise StateCorruptedError(f"chunk footer {raw!r} must hold exactly numParts and length")
    num_parts, length = obj["numParts"], obj["length"]
    if type(num_parts) is not int or type(length) is not int:
        raise StateCorruptedError(f"chunk footer {raw!r}: numParts and length must be integers")
    if not 1 <= num_parts <= min(max_parts, INT32_MAX):
        raise StateCorruptedError(f"chunk footer numParts {num_parts} outside 1..{max_parts}")
    if not num_parts <= length <= min(max_length, INT32_MAX):
        raise StateCorruptedError(f"chunk footer length {length} outside {num_parts}..{max_length}")
    return ChunkFooter(num_parts, length)


def part_entry_ids(footer: ChunkFooter, footer_entry_id: int) -> range:
    """The entry ids of the parts: ``footer_entry_id - numParts .. footer_entry_id - 1``.

    Raises ``StateCorruptedError`` when they would start before entry 0.
    """
    first = footer_entry_id - footer.num_parts
    if first < 0:
        raise StateCorruptedError(
            f"chunk footer at entry {footer_entry_id} announces {footer.num_parts} parts: more than precede it"
        )
    return range(first, footer_entry_id)


def reassemble(footer: ChunkFooter, parts: Sequence[bytes | bytearray | memoryview]) -> bytes:
    """Concatenate the parts after checking their count and total length against ``footer``.

    Raises ``StateCorruptedError`` on a mismatch (a torn or overwritten sequence). Lengths are
    checked before the result is allocated. O(total length).
    """
    if len(parts) != footer.num_parts:
        raise StateCorruptedError(f"chunk footer announces {footer.num_parts} parts, found {len(parts)}")
    total = sum(len(p) for p in parts)
    if total != footer.length:
        raise StateCorruptedError(f"chunk footer announces {footer.length} bytes, parts hold {total}")
    return b"".join(parts)


def reassemble_stream(footer: ChunkFooter, parts: Iterable[bytes | bytearray | memoryview]) -> bytearray:
    """Concatenate parts taken one at a time from ``parts`` into one buffer of ``footer.length``.

    Reads no further than the footer allows: more parts than announced, or parts that would
    overflow the announced length, raise ``StateCorruptedError`` as soon as they appear, so
    memory stays at ``footer.length`` plus one part whatever the stored sequence holds (the
    footer's length is bounded by :func:`parse_footer`'s ``max_length``). Fewer parts or
    bytes than announced raise too. O(footer.length).
    """
    out = bytearray(footer.length)
    pos = count = 0
    for part in parts:
        count += 1
        if count > footer.num_parts:
            raise StateCorruptedError(f"chunk footer announces {footer.num_parts} parts, found more")
        if pos + len(part) > footer.length:
            raise StateCorruptedError(f"chunk footer announces {footer.length} bytes, parts hold more")
        out[pos : pos + len(part)] = part
        pos += len(part)
    if count != footer.num_parts:
        raise StateCorruptedError(f"chunk footer announces {footer.num_parts} parts, found {count}")
    if pos != footer.length:
        raise StateCorruptedError(f"chunk footer announces {footer.length} bytes, parts hold {pos}")
    return out


def pack_entries(
    payload: bytes,
    max_entry_size: int,
    compression: CompressionType | str | None = CompressionType.NONE,
    threshold_bytes: int = 0,
) -> list[bytes]:
    """Compress (optionally, in the 0x4778 envelope) then :func:`split_chunks` a payload."""
    return split_chunks(compress_payload(payload, compression, threshold_bytes), max_entry_size)


def unpack_payload(payload: bytes | bytearray | memoryview, max_uncompressed: int) -> bytes | bytearray:
    """The inverse of :func:`pack_entries` once the parts are reassembled (or for one entry).

    Plain payloads come back unchanged; compressed ones are decompressed strictly
    (:func:`~mledger.codec.decompress_payload`).
    """
    return decompress_payload(payload, max_uncompressed)
