"""PIP-381 chunking: split, footer parsing and validation, reassembly, compressed payloads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mledger import ConfigError, Position, StateCorruptedError
from mledger.codec import (
    ChunkFooter,
    CompressionType,
    PersistedCursorState,
    RangeArrays,
    compress_payload,
    decode_position_info,
    encode_position_info,
    is_compressed,
    pack_entries,
    parse_footer,
    reassemble,
    split_chunks,
    unpack_payload,
)
from mledger.codec._chunking import FOOTER_MAX_BYTES, part_entry_ids
from mledger.codec._compression import MAGIC

LIMITS = dict(max_parts=1000, max_length=1 << 30)


def _read_back(entries: list[bytes], **limits) -> bytes:
    """What a reader does with a cursor ledger whose last entries are ``entries``."""
    footer = parse_footer(entries[-1], **(limits or LIMITS))
    if footer is None:
        return entries[-1]
    ids = part_entry_ids(footer, len(entries) - 1)
    return reassemble(footer, [entries[i] for i in ids])


# ---------------------------------------------------------------------------------------------
# Writing


def test_small_payload_is_one_entry() -> None:
    payload = encode_position_info(PersistedCursorState(Position(1, 2)))
    assert split_chunks(payload, 100) == [payload]
    assert split_chunks(payload, len(payload)) == [payload]


def test_footer_layout() -> None:
    entries = split_chunks(bytes(range(75)), 30)
    assert entries[:-1] == [bytes(range(30)), bytes(range(30, 60)), bytes(range(60, 75))]
    assert entries[-1] == b'{"numParts":3,"length":75}'
    assert json.loads(entries[-1]) == {"numParts": 3, "length": 75}
    assert ChunkFooter(3, 75).to_json() == entries[-1]


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=3000), st.integers(32, 700))
def test_split_then_read_back(payload: bytes, max_entry_size: int) -> None:
    payload = b"\x08" + payload  # a PositionInfo starts with a field tag, never '{'
    entries = split_chunks(payload, max_entry_size)
    assert all(len(e) <= max_entry_size for e in entries)
    if len(payload) <= max_entry_size:
        assert entries == [payload]
    else:
        assert len(entries) == -(-len(payload) // max_entry_size) + 1
    assert _read_back(entries) == payload


def test_split_accepts_memoryview() -> None:
    payload = b"\x08" + bytes(100)
    assert split_chunks(memoryview(payload), 30)[:-1] == split_chunks(payload, 30)[:-1]


def test_single_entry_starting_with_brace_is_refused() -> None:
    with pytest.raises(ValueError, match="footer"):
        split_chunks(b'{"numParts":1,"length":1}', 100)


def test_entry_size_too_small_for_the_footer() -> None:
    with pytest.raises(ConfigError):
        split_chunks(b"\x08" * 100, 5)


# ---------------------------------------------------------------------------------------------
# Footer parsing


@pytest.mark.parametrize("entry", [b"", b"\x08\x01\x10\x02", MAGIC + b"\x00\x00\x00\x00", b" {", b"[1]"])
def test_not_a_footer(entry: bytes) -> None:
    assert parse_footer(entry, **LIMITS) is None


@pytest.mark.parametrize(
    "entry, expected",
    [
        (b'{"numParts":2,"length":10}', ChunkFooter(2, 10)),
        (b'{"numParts": 2, "length": 10}', ChunkFooter(2, 10)),
        (b'{ "length" : 10 ,\n "numParts" : 2 }', ChunkFooter(2, 10)),
        (b'{"numParts":1000,"length":1073741824}', ChunkFooter(1000, 1 << 30)),
    ],
)
def test_footer_accepted(entry: bytes, expected: ChunkFooter) -> None:
    assert parse_footer(entry, **LIMITS) == expected
    assert parse_footer(memoryview(entry), **LIMITS) == expected


BOGUS = [
    b'{"numParts":1001,"length":5000}',  # above max_parts
    b'{"numParts":2147483647,"length":2147483647}',  # huge numParts
    b'{"numParts":' + b"9" * 200 + b',"length":5}',  # absurd number
    b'{"numParts":2,"length":-5}',  # negative length
    b'{"numParts":-2,"length":5}',  # negative parts
    b'{"numParts":0,"length":0}',  # NOT_CHUNKED is never written as a footer
    b'{"numParts":5,"length":3}',  # fewer bytes than parts
    b'{"numParts":2,"length":1073741825}',  # above max_length
    b'{"numParts":2.0,"length":10}',  # float
    b'{"numParts":2,"length":1e3}',  # float
    b'{"numParts":"2","length":10}',  # string
    b'{"numParts":true,"length":10}',  # bool
    b'{"numParts":null,"length":10}',  # null
    b'{"numParts":NaN,"length":10}',  # not JSON
    b'{"numParts":2}',  # missing key
    b'{"numParts":2,"length":10,"extra":1}',  # unknown key
    b'{"numParts":2,"numParts":3,"length":10}',  # duplicate key
    b'{"numParts":[2],"length":10}',  # array
    b"{garbage",  # junk starting with '{'
    b"{",
    b"{}",
    b'{"numParts":2,"length":10}trailing',
    b"{\xff\xfe}",  # not UTF-8
    b"{" + b"[" * 200,  # deep nesting within the size limit
    b"{" + b" " * FOOTER_MAX_BYTES + b"}",  # too long to be a footer
    b"{" + b"x" * (8 << 20),  # a large junk entry: refused by size, not parsed
]


@pytest.mark.parametrize("entry", BOGUS, ids=range(len(BOGUS)))
def test_bogus_footer(entry: bytes) -> None:
    with pytest.raises(StateCorruptedError):  # refused by size before any parsing: no hang
        parse_footer(entry, **LIMITS)


def test_footer_bounds_are_checked_against_the_ledger() -> None:
    footer = ChunkFooter(3, 30)
    assert part_entry_ids(footer, 3) == range(0, 3)
    assert part_entry_ids(footer, 10) == range(7, 10)
    with pytest.raises(StateCorruptedError):
        part_entry_ids(footer, 2)


def test_reassemble_checks_count_and_length() -> None:
    footer = ChunkFooter(2, 6)
    assert reassemble(footer, [b"abc", memoryview(b"def")]) == b"abcdef"
    with pytest.raises(StateCorruptedError, match="parts"):
        reassemble(footer, [b"abc"])
    with pytest.raises(StateCorruptedError, match="bytes"):
        reassemble(footer, [b"abc", b"de"])
    with pytest.raises(StateCorruptedError, match="bytes"):
        reassemble(footer, [b"abc", b"defg"])


def test_torn_sequence_last_entry_is_never_taken_for_a_footer() -> None:
    # A crash between parts leaves a part as the last entry: it must not read as a footer.
    # (Whether it parses as a PositionInfo is up to chance; writers append parts and footer
    # in one atomic append_many so that this cannot happen.)
    payload = encode_position_info(
        PersistedCursorState(Position(1, 1), ranges=RangeArrays.from_pairs([(Position(1, i), Position(1, i + 1)) for i in range(0, 4000, 2)]))
    )
    entries = split_chunks(payload, 512)
    for part in entries[:-1]:
        try:
            assert parse_footer(part, **LIMITS) is None
        except StateCorruptedError:
            pass
    footer = parse_footer(entries[-1], **LIMITS)
    assert footer == ChunkFooter(len(entries) - 1, len(payload))
    # Parts from another write (a different state) under this footer: the length check fails.
    other = split_chunks(payload[:-7], 512)[:-1]
    with pytest.raises(StateCorruptedError):
        reassemble(footer, other)


# ---------------------------------------------------------------------------------------------
# Compressed chunked payloads


@pytest.mark.parametrize("ctype", list(CompressionType))
def test_compressed_chunked_state_round_trip(ctype: CompressionType) -> None:
    k = np.arange(50_000, dtype=np.int64)
    state = PersistedCursorState(Position(4, 0), {"p": 1}, RangeArrays(k // 1000 + 4, 2 * k, k // 1000 + 4, 2 * k + 1))
    raw = encode_position_info(state)
    entries = pack_entries(raw, 64 * 1024, ctype, threshold_bytes=0)
    assert all(len(e) <= 64 * 1024 for e in entries)
    payload = _read_back(entries)
    assert is_compressed(payload) == (ctype is not CompressionType.NONE)
    assert decode_position_info(unpack_payload(payload, 64 << 20)) == state


@pytest.mark.parametrize("ctype", list(CompressionType))
def test_small_compressed_state_is_a_single_entry(ctype: CompressionType) -> None:
    state = PersistedCursorState(Position(4, 0), {"p": 1})
    raw = encode_position_info(state)
    entries = pack_entries(raw, 1 << 20, ctype)
    assert len(entries) == 1 and parse_footer(entries[0], **LIMITS) is None
    assert decode_position_info(unpack_payload(entries[0], 1 << 20)) == state


def test_plain_payload_passes_through_unpack() -> None:
    raw = encode_position_info(PersistedCursorState(Position(4, 0)))
    assert unpack_payload(raw, 0) == raw


def test_compressed_payload_bomb_is_refused() -> None:
    blob = compress_payload(bytes(32 << 20), "ZSTD")
    with pytest.raises(StateCorruptedError):
        unpack_payload(blob, 1 << 20)
