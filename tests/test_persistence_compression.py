"""Pulsar's 0x4778 metadata envelope and its codecs: layout, round trips, fallbacks, bombs."""

from __future__ import annotations

import logging
import sys
import tracemalloc
import zlib

import lz4.block
import numpy as np
import pytest
import snappy
import zstandard
from hypothesis import assume, given, settings, strategies as st

from mledger import ConfigError, MissingExtraError, Position, StateCorruptedError
from mledger.codec import (
    CompressionType,
    PersistedCursorState,
    RangeArrays,
    compress_metadata,
    compress_payload,
    decode_managed_cursor_info,
    decompress_metadata,
    decompress_payload,
    encode_managed_cursor_info,
    encode_position_info,
    is_compressed,
    parse_compression_type,
)
from mledger.codec._compression import MAGIC
from mledger.codec.proto import MLDataFormats_pb2 as pb

ALL = list(CompressionType)
COMPRESSING = [t for t in CompressionType if t is not CompressionType.NONE]
MiB = 1 << 20


def _envelope(ctype: int, size: int, body: bytes, meta: bytes | None = None) -> bytes:
    if meta is None:
        meta = pb.ManagedCursorInfoMetadata(compressionType=ctype, uncompressedSize=size).SerializeToString()
    return MAGIC + len(meta).to_bytes(4, "big") + meta + body


# ---------------------------------------------------------------------------------------------
# Type names


def test_enum_numbers_are_pulsars() -> None:
    assert [(t.name, int(t)) for t in CompressionType] == [("NONE", 0), ("LZ4", 1), ("ZLIB", 2), ("ZSTD", 3), ("SNAPPY", 4)]
    for t in CompressionType:
        assert pb.CompressionType.Value(t.name) == int(t)


@pytest.mark.parametrize("name", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_parse_known_names(name: str) -> None:
    assert parse_compression_type(name) is CompressionType[name]
    assert parse_compression_type(CompressionType[name]) is CompressionType[name]


@pytest.mark.parametrize("name", [None, ""])
def test_parse_empty_means_none(name) -> None:
    assert parse_compression_type(name) is CompressionType.NONE


@pytest.mark.parametrize("name", ["lz4", "GZIP", " LZ4", "none"])
def test_parse_unknown_name_uses_javas_message(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_compression_type(name)
    assert str(err.value) == f"No enum constant org.apache.bookkeeper.mledger.proto.CompressionType.{name}"
    with pytest.raises(ConfigError):
        compress_metadata(b"x" * 100, name, 0)


# ---------------------------------------------------------------------------------------------
# Writing: threshold, layout and codec formats (REFERENCE.md §2.6)


@pytest.mark.parametrize("ctype", ALL)
def test_threshold_is_strictly_greater(ctype: CompressionType) -> None:
    raw = bytes(range(100))
    assert compress_metadata(raw, ctype, 100) == raw
    out = compress_metadata(raw, ctype, 99)
    if ctype is CompressionType.NONE:
        assert out == raw
    else:
        assert out[:2] == b"\x47\x78"
    assert compress_metadata(b"", ctype, 0) == b""  # 0 bytes is never > 0


@pytest.mark.parametrize("ctype", COMPRESSING)
@pytest.mark.parametrize("kind, meta_cls", [("cursor", pb.ManagedCursorInfoMetadata), ("ledger", pb.ManagedLedgerInfoMetadata)])
def test_envelope_layout(ctype: CompressionType, kind: str, meta_cls) -> None:
    raw = b"cursor state " * 50
    out = compress_metadata(raw, ctype, 0, kind)  # type: ignore[arg-type]
    assert out[:2] == bytes([0x47, 0x78])
    meta_len = int.from_bytes(out[2:6], "big")
    meta = meta_cls.FromString(out[6 : 6 + meta_len])
    assert (meta.compressionType, meta.uncompressedSize) == (int(ctype), len(raw))
    # The metadata is the hand-built protobuf: 08 <type> 10 <varint size>.
    assert out[6 : 6 + meta_len] == bytes([0x08, int(ctype), 0x10]) + bytes([len(raw) & 0x7F | 0x80, len(raw) >> 7])
    body = out[6 + meta_len :]
    if ctype is CompressionType.LZ4:
        assert body == lz4.block.compress(raw, store_size=False)  # raw block, no size prefix
        assert lz4.block.decompress(body, uncompressed_size=len(raw)) == raw
    elif ctype is CompressionType.ZLIB:
        assert body[0] == 0x78  # zlib header
        assert body.endswith(b"\x00\x00\xff\xff")  # ended by SYNC_FLUSH, no adler32 trailer
        assert zlib.decompressobj().decompress(body) == raw
    elif ctype is CompressionType.ZSTD:
        assert body[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
        assert zstandard.frame_content_size(body) == len(raw)
        assert zstandard.ZstdDecompressor().decompress(body) == raw
        assert body == zstandard.ZstdCompressor(level=3).compress(raw)
    else:
        assert body[:2] == bytes([len(raw) & 0x7F | 0x80, len(raw) >> 7])  # raw block preamble
        assert snappy.decompress(body) == raw
    assert decompress_metadata(out, MiB) == raw


def test_bad_kind() -> None:
    with pytest.raises(ConfigError):
        compress_metadata(b"abc", "LZ4", 0, "topic")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Round trips


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=5000) | st.binary(max_size=50).map(lambda b: b * 200), st.sampled_from(ALL), st.integers(0, 3000))
def test_round_trip_every_type(raw: bytes, ctype: CompressionType, threshold: int) -> None:
    assume(not raw.startswith(MAGIC))  # not a protobuf: no writer hands such bytes over
    out = compress_metadata(raw, ctype, threshold)
    assert is_compressed(out) == (ctype is not CompressionType.NONE and len(raw) > threshold)
    assert decompress_metadata(out, len(raw)) == raw
    assert decompress_payload(compress_payload(raw, ctype, threshold), len(raw)) == raw


@pytest.mark.parametrize("ctype", ALL)
def test_cursor_info_round_trip_through_envelope(ctype: CompressionType) -> None:
    k = np.arange(5000, dtype=np.int64)
    state = PersistedCursorState(
        Position(3, 10), {"seq": 7}, RangeArrays(k * 0 + 3, 2 * k + 10, k * 0 + 3, 2 * k + 11),
        cursor_properties={"a": "b"}, cursors_ledger_id=-1, last_active=123,
    )
    raw = encode_managed_cursor_info(state)
    blob = compress_metadata(raw, ctype, 16384)
    if ctype is not CompressionType.NONE:
        assert len(blob) < len(raw)
    assert decode_managed_cursor_info(decompress_metadata(blob, 16 * MiB)) == state


def test_raw_protobuf_never_looks_compressed() -> None:
    # 0x47 would be field 8 with wire type 7: no valid protobuf starts with it.
    assert not is_compressed(encode_position_info(PersistedCursorState(Position(1, 2))))
    assert not is_compressed(encode_managed_cursor_info(PersistedCursorState(Position(1, 2))))
    assert not is_compressed(b"") and not is_compressed(b"\x47")


def test_zlib_accepts_a_finished_stream_too() -> None:
    raw = b"abc" * 1000
    assert decompress_metadata(_envelope(2, len(raw), zlib.compress(raw)), MiB) == raw


def test_none_inside_an_envelope_returns_the_body() -> None:
    assert decompress_metadata(_envelope(0, 3, b"xyz"), MiB) == b"xyz"


def test_data_without_magic_is_returned_unchanged() -> None:
    raw = encode_position_info(PersistedCursorState(Position(1, 2)))
    assert decompress_metadata(raw, 0) == raw
    assert decompress_payload(memoryview(raw), 0) == raw


# ---------------------------------------------------------------------------------------------
# Bad input: Pulsar's fallback, strict payloads, bombs

_GOOD = b"some cursor info " * 20

BAD_ENVELOPES = {
    "header cut short": MAGIC + b"\x00\x00",
    "negative metadata length": MAGIC + b"\xff\xff\xff\xfe" + b"abc",
    "metadata length past the end": MAGIC + b"\x00\x00\x10\x00" + b"abc",
    "metadata not protobuf": _envelope(0, 0, b"", meta=b"\x0f\x0f"),
    "metadata missing size": _envelope(0, 0, b"", meta=bytes.fromhex("0801")),
    "unknown compression type": _envelope(0, 0, b"body", meta=bytes.fromhex("08091005")),
    "negative uncompressedSize": _envelope(0, 0, b"", meta=bytes.fromhex("0801") + b"\x10" + b"\xff" * 9 + b"\x01"),
    "lz4 garbage": _envelope(1, 100, b"\xff" * 20),
    "lz4 short output": _envelope(1, len(_GOOD) + 5, lz4.block.compress(_GOOD, store_size=False)),
    "zlib garbage": _envelope(2, 100, b"\x00garbage"),
    "zlib short output": _envelope(2, len(_GOOD) + 5, zlib.compress(_GOOD)),
    "zstd garbage": _envelope(3, 100, b"\x28\xb5\x2f\xfd" + b"\x00" * 10),
    "zstd wrong declared size": _envelope(3, 10, zstandard.ZstdCompressor().compress(_GOOD)),
    "snappy garbage": _envelope(4, 100, b"\x64" + b"\xff" * 10),
    "snappy wrong declared size": _envelope(4, 10, snappy.compress(_GOOD)),
    "snappy empty body": _envelope(4, 10, b""),
}


@pytest.mark.parametrize("name", list(BAD_ENVELOPES))
def test_bad_envelope_falls_back_to_raw_like_pulsar(name: str, caplog) -> None:
    blob = BAD_ENVELOPES[name]
    with caplog.at_level(logging.WARNING, logger="mledger.codec._compression"):
        assert decompress_metadata(blob, MiB) == blob
    assert "parsing it as raw protobuf" in caplog.text
    # ...which then fails to parse: the envelope can never be a valid protobuf.
    with pytest.raises(StateCorruptedError):
        decode_managed_cursor_info(blob)


@pytest.mark.parametrize("name", list(BAD_ENVELOPES))
def test_bad_envelope_is_an_error_for_ledger_payloads(name: str) -> None:
    with pytest.raises(StateCorruptedError):
        decompress_payload(BAD_ENVELOPES[name], MiB)


def _honest_bomb(ctype: CompressionType, size: int) -> bytes:
    return compress_metadata(bytes(size), ctype, 0)


@pytest.mark.parametrize("ctype", COMPRESSING)
def test_decompression_bomb_is_refused_before_allocating(ctype: CompressionType) -> None:
    # 64 MiB of zeros compresses to a few KiB (snappy: 3 MiB); the reader's limit is 1 MiB.
    blob = _honest_bomb(ctype, 64 * MiB)
    assert len(blob) < 4 * MiB
    tracemalloc.start()
    try:
        for reader in (decompress_metadata, decompress_payload):
            with pytest.raises(StateCorruptedError, match="limit"):
                reader(blob, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB


@pytest.mark.parametrize("ctype", [0, 1, 2, 3, 4])
def test_claimed_size_far_above_limit_is_refused(ctype: int) -> None:
    blob = _envelope(ctype, (1 << 31) - 1, b"tiny")
    with pytest.raises(StateCorruptedError, match="2147483647"):
        decompress_metadata(blob, 16 * MiB)


@pytest.mark.parametrize("ctype", COMPRESSING)
def test_lying_small_size_never_inflates_past_it(ctype: CompressionType) -> None:
    # The metadata claims 1000 bytes but the body holds 64 MiB: no codec may produce more
    # than the claimed size (zlib stops there, as Java's Inflater does; the others refuse).
    real = _honest_bomb(ctype, 64 * MiB)
    meta_len = int.from_bytes(real[2:6], "big")
    blob = _envelope(int(ctype), 1000, real[6 + meta_len :])
    tracemalloc.start()
    try:
        out = decompress_metadata(blob, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out in (blob, bytes(1000))
    assert peak < 4 * MiB


# ---------------------------------------------------------------------------------------------
# The optional extra


@pytest.mark.parametrize(
    "ctype, modules",
    [
        (CompressionType.LZ4, ["lz4", "lz4.block"]),
        (CompressionType.ZSTD, ["zstandard"]),
        (CompressionType.SNAPPY, ["snappy"]),
    ],
)
def test_missing_extra_names_it(monkeypatch, ctype: CompressionType, modules: list[str]) -> None:
    blob = compress_metadata(_GOOD, ctype, 0)
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)  # makes `import m` raise ImportError
    with pytest.raises(MissingExtraError, match=r"mledger\[compression\]"):
        compress_metadata(_GOOD, ctype, 0)
    # Reading needs the codec too: an explicit error, not a silent fallback.
    with pytest.raises(MissingExtraError, match=r"mledger\[compression\]"):
        decompress_metadata(blob, MiB)
    with pytest.raises(ImportError):
        decompress_payload(blob, MiB)
    # ZLIB and NONE need nothing beyond the standard library.
    assert decompress_metadata(compress_metadata(_GOOD, "ZLIB", 0), MiB) == _GOOD
    assert compress_metadata(_GOOD, "NONE", 0) == _GOOD
