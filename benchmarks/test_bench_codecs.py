"""Cursor-state codecs under pytest-benchmark, on the states of ``bench_codecs.py``.

PositionInfo encode / decode in both individual-ack formats (ranges; long-array BitSet words)
for alternating and random holes, ManagedCursorInfo encode / decode (the metadata-store
record, range format), the 0x4778 compression envelope per codec, and PIP-381 chunking (split
a PositionInfo into 1 MiB entries plus the JSON footer; parse the footer and reassemble).
Every result is checked against its input, outside the timed call.
"""

from __future__ import annotations

from typing import Any

import pytest
from bench_codecs import acked_bitmap, to_state

from mledger import ManagedLedgerConfig
from mledger.codec import (
    CompressionType,
    PersistedCursorState,
    compress_payload,
    decode_managed_cursor_info,
    decode_position_info,
    decompress_payload,
    encode_managed_cursor_info,
    encode_position_info,
    parse_footer,
    reassemble,
    split_chunks,
)

MAX_ENTRY_SIZE = ManagedLedgerConfig().persistent_unacked_ranges_max_entry_size
COMPRESSED_HOLES = 100_000
"""Holes of the (random, range-format) PositionInfo the compression benchmarks compress."""


@pytest.fixture(scope="module")
def states(bench_holes: int) -> dict[tuple[str, str], PersistedCursorState]:
    """(pattern, format) -> the cursor state of ``--bench-holes`` holes."""
    out = {}
    for pattern in ("alternating", "random"):
        acked = acked_bitmap(bench_holes, pattern)
        for fmt in ("range", "long-array"):
            out[pattern, fmt] = to_state(acked, fmt)
    return out


def _sizes(benchmark: Any, state: PersistedCursorState, data: bytes) -> None:
    benchmark.extra_info["ranges"] = 0 if state.ranges is None else state.ranges.size
    benchmark.extra_info["ledgers"] = len(state.long_arrays or {})
    benchmark.extra_info["bytes"] = len(data)


@pytest.mark.parametrize("fmt", ["range", "long-array"])
@pytest.mark.parametrize("pattern", ["alternating", "random"])
def test_position_info_encode(benchmark: Any, states: dict[tuple[str, str], PersistedCursorState], pattern: str,
                              fmt: str) -> None:
    state = states[pattern, fmt]
    data = benchmark(encode_position_info, state)
    assert decode_position_info(data) == state
    _sizes(benchmark, state, data)


@pytest.mark.parametrize("fmt", ["range", "long-array"])
@pytest.mark.parametrize("pattern", ["alternating", "random"])
def test_position_info_decode(benchmark: Any, states: dict[tuple[str, str], PersistedCursorState], pattern: str,
                              fmt: str) -> None:
    state = states[pattern, fmt]
    data = encode_position_info(state)
    assert benchmark(decode_position_info, data) == state
    _sizes(benchmark, state, data)


@pytest.fixture(scope="module")
def cursor_info_state(states: dict[tuple[str, str], PersistedCursorState]) -> PersistedCursorState:
    base = states["random", "range"]
    return PersistedCursorState(base.mark_delete, {"k": 1}, ranges=base.ranges, cursors_ledger_id=7,
                       cursor_properties={"owner": "bench"})


def test_managed_cursor_info_encode(benchmark: Any, cursor_info_state: PersistedCursorState) -> None:
    data = benchmark(encode_managed_cursor_info, cursor_info_state)
    assert decode_managed_cursor_info(data) == cursor_info_state
    _sizes(benchmark, cursor_info_state, data)


def test_managed_cursor_info_decode(benchmark: Any, cursor_info_state: PersistedCursorState) -> None:
    data = encode_managed_cursor_info(cursor_info_state)
    assert benchmark(decode_managed_cursor_info, data) == cursor_info_state
    _sizes(benchmark, cursor_info_state, data)


@pytest.fixture(scope="module")
def compressible() -> bytes:
    return encode_position_info(to_state(acked_bitmap(COMPRESSED_HOLES, "random"), "range"))


CODECS = [c for c in CompressionType if c is not CompressionType.NONE]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_compress_envelope(benchmark: Any, compressible: bytes, codec: CompressionType) -> None:
    blob = benchmark(compress_payload, compressible, codec)
    assert decompress_payload(blob, len(compressible)) == compressible
    benchmark.extra_info.update(raw_bytes=len(compressible), stored_bytes=len(blob))


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_decompress_envelope(benchmark: Any, compressible: bytes, codec: CompressionType) -> None:
    blob = compress_payload(compressible, codec)
    assert benchmark(decompress_payload, blob, len(compressible)) == compressible
    benchmark.extra_info.update(raw_bytes=len(compressible), stored_bytes=len(blob))


@pytest.fixture(scope="module")
def large_payload(states: dict[tuple[str, str], PersistedCursorState]) -> bytes:
    return encode_position_info(states["alternating", "range"])


def test_pip381_split_chunks(benchmark: Any, large_payload: bytes) -> None:
    entries = benchmark(split_chunks, large_payload, MAX_ENTRY_SIZE)
    assert len(entries) > 2 and all(len(e) <= MAX_ENTRY_SIZE for e in entries)
    benchmark.extra_info.update(bytes=len(large_payload), entries=len(entries))


def test_pip381_reassemble(benchmark: Any, large_payload: bytes) -> None:
    entries = split_chunks(large_payload, MAX_ENTRY_SIZE)

    def read_back() -> bytes:
        footer = parse_footer(entries[-1], max_parts=len(entries), max_length=len(large_payload))
        assert footer is not None
        return reassemble(footer, entries[:-1])

    assert benchmark(read_back) == large_payload
    benchmark.extra_info.update(bytes=len(large_payload), entries=len(entries))
