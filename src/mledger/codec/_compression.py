"""Pulsar's metadata compression envelope (magic ``0x4778``) and its five codecs.

Layout (Pulsar's ``MetaStoreImpl``, ``MAGIC_MANAGED_INFO_METADATA``), used by Pulsar for
``ManagedCursorInfo`` / ``ManagedLedgerInfo`` in the metadata store::

    0x47 0x78 | int32 BE: n | n bytes: Managed{Cursor,Ledger}InfoMetadata | compressed body

``ManagedCursorInfoMetadata`` holds ``compressionType`` and ``uncompressedSize``. Codecs:
LZ4 raw block (no frame, no size prefix), ZLIB stream as ``java.util.zip.Deflater`` writes it
(default level, ended by a SYNC_FLUSH, no trailer), ZSTD frame at level 3, SNAPPY raw block.
LZ4, ZSTD and SNAPPY come from the optional ``mledger[compression]`` extra, imported only when
asked for; without it, :class:`~mledger.core.MissingExtraError` names the extra.

Compressed cursor-ledger entries (PIP-381's optional compression of the chunked payload)
reuse the same envelope: a ``PositionInfo`` starts with a field tag, and ``0x47`` would be
field 8 with wire type 7, which cannot exist, so a reader tells a compressed payload from a
plain one by its first two bytes, whatever the writer's configuration was. Ledger entries use
the strict reader :func:`decompress_payload` (a corrupt entry is an error, so recovery can
fall back to an older state); metadata-store blobs use :func:`decompress_metadata`, which
falls back to the raw bytes as Pulsar does.
"""

from __future__ import annotations

import enum
import importlib
import logging
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Literal

from ..core import INT32_MAX, ConfigError, MissingExtraError, StateCorruptedError
from .proto import MLDataFormats_pb2 as pb

__all__ = [
    "MAGIC",
    "CompressionType",
    "compress_metadata",
    "compress_payload",
    "decompress_message",
    "decompress_metadata",
    "decompress_payload",
    "is_compressed",
    "parse_compression_type",
]

_log = logging.getLogger(__name__)

MAGIC = b"\x47\x78"
"""The first two bytes of a compressed blob (``MetaStoreImpl.MAGIC_MANAGED_INFO_METADATA``)."""

_EXTRA = "mledger[compression]"
_HEADER = len(MAGIC) + 4
_INFLATE_STEP = 1 << 20


class CompressionType(enum.IntEnum):
    """``MLDataFormats.CompressionType``, with Pulsar's numbers."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


def parse_compression_type(name: str | CompressionType | None) -> CompressionType:
    """Pulsar's ``MetadataCompressionConfig`` type string -> :class:`CompressionType`.

    ``None`` and ``""`` mean NONE; names are case-sensitive, as Java's ``valueOf``. Anything
    else raises ``ConfigError`` with Java's message.

    >>> parse_compression_type("ZSTD"), parse_compression_type(None)
    (<CompressionType.ZSTD: 3>, <CompressionType.NONE: 0>)
    """
    if isinstance(name, CompressionType):
        return name
    if name is None or name == "":
        return CompressionType.NONE
    if isinstance(name, str) and name in CompressionType.__members__:
        return CompressionType[name]
    raise ConfigError(f"No enum constant org.apache.bookkeeper.mledger.proto.CompressionType.{name}")


def _module(ctype: CompressionType, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtraError(
            f"{ctype.name} compression needs the '{name.split('.')[0]}' package: install {_EXTRA}"
        ) from exc


def _compress(ctype: CompressionType, raw: bytes) -> bytes:
    if ctype is CompressionType.LZ4:
        return bytes(_module(ctype, "lz4.block").compress(raw, mode="default", store_size=False))
    if ctype is CompressionType.ZLIB:
        deflater = zlib.compressobj()
        return deflater.compress(raw) + deflater.flush(zlib.Z_SYNC_FLUSH)
    if ctype is CompressionType.ZSTD:
        return bytes(_module(ctype, "zstandard").ZstdCompressor(level=3).compress(raw))
    if ctype is CompressionType.SNAPPY:
        return bytes(_module(ctype, "snappy").compress(raw))
    return bytes(raw)


def _snappy_length(body: bytes) -> int:
    """The uncompressed length a raw snappy block announces (its varint preamble)."""
    result = shift = 0
    for b in body[:5]:
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise ValueError("bad snappy length preamble")


def _inflate(body: bytes, size: int) -> bytearray:
    """ZLIB-inflate ``body`` into exactly ``size`` bytes, in 1 MiB steps into one buffer.

    Never holds more than ``size`` bytes of output plus one step: a stream that would inflate
    past ``size`` is refused as soon as it does (zlib's own bounded call would grow a block
    list and then join it, twice the output at the peak)."""
    inflater = zlib.decompressobj()
    out = bytearray(size)
    pos = 0
    data = body
    while True:
        room = size - pos
        chunk = inflater.decompress(data, min(_INFLATE_STEP, room + 1))
        if len(chunk) > room:
            raise ValueError(f"ZLIB body inflates past the {size} bytes the metadata announces")
        out[pos : pos + len(chunk)] = chunk
        pos += len(chunk)
        data = inflater.unconsumed_tail
        if (not chunk and not data) or inflater.eof:
            break
    if pos != size:
        raise ValueError(f"ZLIB body inflated to {pos} bytes, metadata says {size}")
    return out


def _decompress(ctype: CompressionType, body: bytes, size: int) -> bytes | bytearray:
    """Decompress to exactly ``size`` bytes, never allocating more than ``size`` for the output.

    Raises ``MissingExtraError`` for a missing codec and anything else for corrupt input
    (including a body that would inflate past ``size``).
    """
    if ctype is CompressionType.NONE:
        return body  # Pulsar's CompressionCodecNone hands the body back unchecked
    if ctype is CompressionType.LZ4:
        lz4_block = _module(ctype, "lz4.block")
        # One output buffer of exactly `size`; a block that needs more fails to decode.
        out: bytes | bytearray = lz4_block.decompress(body, uncompressed_size=size) if size else b""
    elif ctype is CompressionType.ZLIB:
        out = _inflate(body, size)
    elif ctype is CompressionType.ZSTD:
        zstd = _module(ctype, "zstandard")
        # A frame that declares its size makes zstandard allocate that size: check it first;
        # one without gets a buffer of `size` and fails if the frame needs more.
        declared = zstd.frame_content_size(body)
        if declared not in (-1, size):
            raise ValueError(f"zstd frame declares {declared} bytes, metadata says {size}")
        out = zstd.ZstdDecompressor().decompress(body, max_output_size=size) if size or declared == 0 else b""
    elif ctype is CompressionType.SNAPPY:
        snappy = _module(ctype, "snappy")
        declared = _snappy_length(body)
        if declared != size:
            raise ValueError(f"snappy block declares {declared} bytes, metadata says {size}")
        out = snappy.decompress(body)
    else:  # pragma: no cover - the enum is closed
        raise ValueError(f"unknown compression type {ctype!r}")
    if len(out) != size:
        raise ValueError(f"{ctype.name} body inflated to {len(out)} bytes, metadata says {size}")
    return out


def is_compressed(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts with the envelope magic (a valid protobuf never does). O(1)."""
    return len(data) >= 2 and data[0] == MAGIC[0] and data[1] == MAGIC[1]


def compress_metadata(
    raw: bytes,
    ctype: CompressionType | str | None,
    threshold_bytes: int,
    kind: Literal["cursor", "ledger"] = "cursor",
) -> bytes:
    """Wrap ``raw`` (a serialized ``ManagedCursorInfo`` / ``ManagedLedgerInfo``) as Pulsar does.

    With NONE, or when ``len(raw) <= threshold_bytes`` (strictly greater compresses; 0 means
    always), returns ``raw`` unchanged; otherwise the envelope with a
    ``ManagedCursorInfoMetadata`` (``kind="cursor"``) or ``ManagedLedgerInfoMetadata``
    (``kind="ledger"``). Raises ``ConfigError`` for an unknown type name or kind and
    ``MissingExtraError`` when the codec's package is missing. O(len(raw)).
    """
    ctype = parse_compression_type(ctype)
    if kind not in ("cursor", "ledger"):
        raise ConfigError(f"unknown metadata kind {kind!r}: expected 'cursor' or 'ledger'")
    raw = bytes(raw)
    # uncompressedSize is an int32: a blob beyond it cannot be described, so it stays raw
    # (which every reader accepts) rather than being refused.
    if ctype is CompressionType.NONE or len(raw) <= threshold_bytes or len(raw) > INT32_MAX:
        return raw
    meta_cls = pb.ManagedCursorInfoMetadata if kind == "cursor" else pb.ManagedLedgerInfoMetadata
    meta = meta_cls(compressionType=pb.CompressionType.Value(ctype.name), uncompressedSize=len(raw)).SerializeToString()
    return b"".join((MAGIC, len(meta).to_bytes(4, "big"), meta, _compress(ctype, raw)))


def _open(
    data: bytes | bytearray | memoryview, max_uncompressed: int, on_error: Callable[[str], bytes]
) -> bytes | bytearray:
    if not is_compressed(data):
        return data if isinstance(data, bytes | bytearray) else bytes(data)  # plain: never copied
    raw = data if isinstance(data, bytes) else bytes(data)
    if len(raw) < _HEADER:
        return on_error(f"{len(raw)}-byte blob is too short for the compression header")
    meta_len = int.from_bytes(raw[2:_HEADER], "big", signed=True)
    if meta_len < 0 or _HEADER + meta_len > len(raw):
        return on_error(f"metadata length {meta_len} does not fit in {len(raw)} bytes")
    try:
        meta = pb.ManagedCursorInfoMetadata.FromString(raw[_HEADER : _HEADER + meta_len])
    except Exception as exc:  # protobuf's DecodeError
        return on_error(f"unreadable compression metadata: {exc}")
    if not meta.IsInitialized():  # an unknown compressionType also lands here (closed enum)
        return on_error("compression metadata lacks compressionType or uncompressedSize")
    size = meta.uncompressedSize
    if size < 0:
        return on_error(f"negative uncompressedSize {size}")
    if size > max_uncompressed:
        raise StateCorruptedError(
            f"compressed blob claims {size} uncompressed bytes, above the {max_uncompressed}-byte limit"
        )
    ctype = CompressionType(meta.compressionType)
    try:
        return _decompress(ctype, raw[_HEADER + meta_len :], size)
    except MissingExtraError:
        raise
    except Exception as exc:  # each codec raises its own error type on corrupt input
        return on_error(f"{ctype.name} body does not decompress: {exc}")


def decompress_metadata(data: bytes | bytearray | memoryview, max_uncompressed: int) -> bytes | bytearray:
    """Unwrap a metadata-store blob written by :func:`compress_metadata` (or by Pulsar).

    Data without the magic is returned as is. When the envelope is malformed or its body does
    not decompress, the failure is logged and ``data`` is returned unchanged, as Pulsar falls
    back to parsing the whole blob raw. A claimed ``uncompressedSize`` above
    ``max_uncompressed`` raises ``StateCorruptedError`` before anything is allocated (a
    decompression bomb); a body that inflates past its claimed size is refused once it has
    filled that size, so no codec ever allocates more than ``max_uncompressed`` (plus 1 MiB
    for ZLIB's steps) for the output. ``MissingExtraError`` when the codec's package is
    missing. O(len(data) + uncompressed size).
    """

    def fall_back(reason: str) -> bytes:
        _log.warning("cannot decompress metadata (%s); parsing it as raw protobuf", reason)
        return bytes(data)

    return _open(data, max_uncompressed, fall_back)


def compress_payload(raw: bytes, ctype: CompressionType | str | None, threshold_bytes: int = 0) -> bytes:
    """Compress a cursor-ledger payload (a ``PositionInfo``, chunked or not) in the envelope.

    Same rules as :func:`compress_metadata` with ``kind="cursor"``.
    """
    return compress_metadata(raw, ctype, threshold_bytes, "cursor")


def decompress_payload(data: bytes | bytearray | memoryview, max_uncompressed: int) -> bytes | bytearray:
    """Strict inverse of :func:`compress_payload`: data without the magic comes back as is.

    Raises ``StateCorruptedError`` for a malformed envelope, a corrupt body or a bomb
    (``uncompressedSize > max_uncompressed``, refused before allocating; a body inflating past
    its claim, refused before allocating more), and ``MissingExtraError`` when the codec's
    package is missing.
    """

    def refuse(reason: str) -> bytes:
        raise StateCorruptedError(f"corrupt compressed cursor entry: {reason}")

    return _open(data, max_uncompressed, refuse)


def decompress_message(ctype: int, body: bytes, uncompressed_size: int) -> bytes | bytearray:
    """A message payload compressed by a producer (``MessageMetadata.compression`` ``ctype``,
    ``uncompressed_size``), decompressed; NONE returns ``body``. Raises ``StateCorruptedError``
    when it does not decompress, ``MissingExtraError`` when the codec's package is missing."""
    kind = CompressionType(ctype)
    if kind is CompressionType.NONE:
        return body
    try:
        return _decompress(kind, body, uncompressed_size)
    except MissingExtraError:
        raise
    except Exception as exc:  # each codec raises its own error type on corrupt input
        raise StateCorruptedError(f"{kind.name} message payload does not decompress: {exc}") from None
