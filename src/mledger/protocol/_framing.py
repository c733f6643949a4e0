"""Pulsar's framing, sans I/O: bytes in -> frames out, frames in -> bytes out.

Wire format (Pulsar's binary protocol docs, all integers big-endian)::

    simple command:   [totalSize: u32][commandSize: u32][BaseCommand]
    payload command:  [totalSize: u32][commandSize: u32][BaseCommand]
                      [0x0e01: u16][CRC32C: u32][metadataSize: u32][MessageMetadata][payload]

``totalSize`` counts everything after itself. The CRC32C covers everything after the checksum
field. A broker-entry-metadata block ``[0x0e02: u16][size: u32][BrokerEntryMetadata]`` may come
first in the payload part; it is accepted and skipped.

An entry is stored as the producer framed it, from the checksum magic on (or from the
metadata size when the producer sent no checksum): :func:`mledger.codec.decode_entry` reads
both forms, and a MESSAGE frame carries the stored bytes back unchanged
(:func:`checksummed_entry`), so the broker never decodes or re-encodes a payload.

CRC32C comes from the ``crc32c`` package (a C extension with SSE4.2 / ARMv8 instructions and a
software fallback, taking any buffer without a copy), a core dependency (the codec checks
stored entries with it too).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from ._errors import FrameTooLargeError, RemoteProtocolError

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "FrameDecoder",
    "Payload",
    "checksummed_entry",
    "crc32c",
    "encode_frame",
    "encode_payload_frame",
    "parse_payload",
    "payload_frame_parts",
]

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's ``maxMessageSize`` default (5 MiB), advertised in CONNECTED."""
FRAME_PADDING = 10 * 1024
"""Room for the command and metadata beyond ``max_message_size`` (Pulsar's
``Commands.MESSAGE_SIZE_FRAME_PADDING``)."""

_U32 = struct.Struct(">I")
_U32_PAIR = struct.Struct(">II")
_U16 = struct.Struct(">H")
_CRC_MAGIC = _U16.pack(MAGIC_CRC32C)
_BEM_MAGIC = _U16.pack(MAGIC_BROKER_ENTRY_METADATA)
_MIN_COMPACT = 64 * 1024
_PAYLOAD_HEAD = struct.Struct(">HII")  # checksum magic, CRC32C, metadata size
_COPY_TO_CHECK = 1024
_new_tuple = tuple.__new__  # a named tuple without its Python-level __new__ (one per SEND)


class FrameDecoder:
    """Splits a byte stream into ``(command bytes, payload bytes or None)`` frames.

    ``max_frame_size`` bounds ``totalSize``; a larger announced frame raises
    :class:`FrameTooLargeError` at once, before its bytes arrive, so memory stays bounded by
    one frame. A frame whose ``commandSize`` does not fit its ``totalSize`` raises
    :class:`RemoteProtocolError`. A partial frame is kept until the rest arrives.
    O(bytes fed) overall.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames (a partial frame)."""
        return len(self._buffer) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[bytes, bytes | None]]:
        """Add received bytes; return every frame now complete, in order."""
        buf = self._buffer
        held = bool(buf) or type(data) is not bytes
        if held:
            buf += data
            src: bytes | bytearray = buf
            pos = self._pos
        else:
            # Nothing held back (the common case): frames are sliced out of ``data`` itself,
            # one copy each; only a trailing partial frame is kept.
            src = data  # type: ignore[assignment]
            pos = 0
        end = len(src)
        out: list[tuple[bytes, bytes | None]] = []
        try:
            pos = self._split(src, pos, end, out)
        finally:
            if not held and pos < end:
                buf += src[pos:]  # a partial frame (or a bad one: kept, as the held path does)
        if not held:
            return out
        if pos == end:
            buf.clear()
            pos = 0
        elif pos >= _MIN_COMPACT and pos * 2 >= end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out

    def _split(self, src: bytes | bytearray, pos: int, end: int, out: list[tuple[bytes, bytes | None]]) -> int:
        """Append the complete frames of ``src[pos:end]`` to ``out``; return where they end.
        Raises on a bad frame (the shell then closes the connection)."""
        limit = self.max_frame_size
        with memoryview(src) as view:
            # a slice of bytes is bytes already (bytes() of it returns it): one copy, no view
            cut = src if type(src) is bytes else view
            while end - pos >= 4:
                total = _U32.unpack_from(src, pos)[0]
                if total > limit:
                    raise FrameTooLargeError(f"frame of {total} bytes exceeds the limit of {limit} bytes")
                if end - pos - 4 < total:
                    break
                if total < 4:
                    raise RemoteProtocolError(f"frame of {total} bytes is too short to hold a command size")
                command_size = _U32.unpack_from(src, pos + 4)[0]
                if command_size > total - 4:
                    raise RemoteProtocolError(f"command size {command_size} does not fit the frame of {total} bytes")
                start = pos + 8
                stop = start + command_size
                frame_end = pos + 4 + total
                out.append((bytes(cut[start:stop]), bytes(cut[stop:frame_end]) if frame_end > stop else None))
                pos = frame_end
        return pos


def encode_frame(command: bytes) -> bytes:
    """A simple command frame around serialized ``BaseCommand`` bytes."""
    n = len(command)
    return _U32_PAIR.pack(n + 4, n) + command


def encode_payload_frame(command: bytes, checksummed: bytes) -> bytes:
    """A payload command frame: ``command`` then ``checksummed`` (from the 0x0e01 magic on)."""
    return b"".join(payload_frame_parts(command, checksummed))


def payload_frame_parts(command: bytes, checksummed: bytes) -> tuple[bytes, bytes, bytes]:
    """:func:`encode_payload_frame` as its three parts (sizes, command, payload), for a writer
    that joins many frames into one buffer: the payload is copied once, not twice."""
    n = len(command)
    return _U32_PAIR.pack(n + 4 + len(checksummed), n), command, checksummed


def checksummed_entry(raw: bytes) -> bytes:
    """A stored entry as a MESSAGE frame carries it: from the ``0x0e01`` magic on.

    An entry stored with the producer's checksum (verified when it was sent) is returned as
    it is; one stored without (written by the library) gets the CRC32C of its bytes in front;
    a broker-entry-metadata prefix is dropped. O(len(raw)) at most.
    """
    if raw[:2] == _BEM_MAGIC:
        raw = raw[6 + _U32.unpack_from(raw, 2)[0] :]
    if raw[:2] == _CRC_MAGIC:
        return raw
    return _CRC_MAGIC + _U32.pack(crc32c(raw)) + raw


class Payload(NamedTuple):
    """The payload part of a SEND frame (a named tuple: one per SEND on the hot path).

    ``entry`` is what gets stored: the bytes from the checksum magic on (from the metadata
    size when no checksum was sent). ``metadata`` is the serialized ``MessageMetadata``.
    ``checksum_ok`` is None when the producer sent no checksum.
    """

    entry: bytes
    metadata: bytes
    checksum_ok: bool | None


def parse_payload(data: bytes) -> Payload:
    """Split a SEND frame's payload part; verifies the CRC32C when one is present.

    Raises :class:`RemoteProtocolError` when the framing is cut short or a size runs past the
    end. O(len(data)) for the checksum.
    """
    end = len(data)
    if end >= 10:
        magic, expected, size = _PAYLOAD_HEAD.unpack_from(data)
        if magic == MAGIC_CRC32C:
            # The common case (a client's checksummed SEND, no broker entry metadata).
            stop = 10 + size
            if stop > end:
                raise RemoteProtocolError(f"message metadata of {size} bytes runs past the end of the frame")
            # a small payload's copy costs less than a view of it
            checked = data[6:] if end <= _COPY_TO_CHECK else memoryview(data)[6:]
            return _new_tuple(Payload, (data, data[10:stop], crc32c(checked) == expected))
    pos = 0
    if data[:2] == _BEM_MAGIC:
        if end < 6:
            raise RemoteProtocolError("broker entry metadata cut short")
        pos = 6 + _U32.unpack_from(data, 2)[0]
        if pos > end:
            raise RemoteProtocolError("broker entry metadata runs past the end of the frame")
    checksum_ok: bool | None = None
    entry_start = pos
    if data[pos : pos + 2] == _CRC_MAGIC:
        if end < pos + 6:
            raise RemoteProtocolError("checksum cut short")
        expected = _U32.unpack_from(data, pos + 2)[0]
        pos += 6
        checksum_ok = crc32c(memoryview(data)[pos:]) == expected
    if end < pos + 4:
        raise RemoteProtocolError("message metadata size cut short")
    size = _U32.unpack_from(data, pos)[0]
    stop = pos + 4 + size
    if stop > end:
        raise RemoteProtocolError(f"message metadata of {size} bytes runs past the end of the frame")
    entry = data if entry_start == 0 else data[entry_start:]
    return Payload(entry, data[pos + 4 : stop], checksum_ok)
