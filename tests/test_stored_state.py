"""Bad stored state: what a reopened cursor refuses, and what refusing may cost.

Crafted bytes, written where a cursor's state lives, as an attacker (or a flipped bit) would
leave them: decompression bombs in every codec and in PIP-381 parts (refused without
allocating past ``max_state_size_in_bytes``), long-array entries (recovered in a small multiple
of their stored size), and states that decode but do not fit the ledger (a mark-delete entry
id below -1, acknowledgements outside every ledger) refused with ``StateCorruptedError`` naming
the managed ledger, the cursor and the stored record. Pulsar's formats carry no checksum, so a
flipped bit can also decode to another *valid* state: that cannot be detected, as in Pulsar.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mledger import ManagedLedgerFactory, ManagedLedgerFactoryConfig, MemoryStore, Position, StateCorruptedError
from mledger.codec import (
    CompressionType,
    PersistedCursorState as CursorState,
    RangeArrays,
    compress_metadata,
    encode_managed_cursor_info,
    encode_position_info,
)
from mledger.codec.proto import MLDataFormats_pb2 as pb
from mledger.core import ManagedLedgerConfig

MiB = 1024 * 1024
ML = "public/default/persistent/orders"
NODE = f"/managed-ledgers/{ML}/sub"
COMPRESSING = [CompressionType.LZ4, CompressionType.ZLIB, CompressionType.ZSTD, CompressionType.SNAPPY]


def stored_ml(entries: list[int]) -> tuple[MemoryStore, list[int]]:
    """A store holding the managed ledger ``ML`` with closed ledgers of these entry counts
    (the counts come from ``ManagedLedgerInfo``; the ledgers hold no entries)."""
    store = MemoryStore()
    info = pb.ManagedLedgerInfo()
    ids = []
    for n in entries:
        ledger_id = store.create_ledger()
        store.seal_ledger(ledger_id)
        ids.append(ledger_id)
        info.ledgerInfo.add(ledgerId=ledger_id, entries=n, size=10 * n, timestamp=1)
    info.ledgerInfo.add(ledgerId=store.create_ledger(), timestamp=0)  # the open one, empty
    store.put(f"/managed-ledgers/{ML}", info.SerializeToString())
    return store, ids


def with_cursor_node(store: MemoryStore, state: CursorState, ledger_id: int = -1) -> None:
    state.cursors_ledger_id = ledger_id
    store.put(NODE, encode_managed_cursor_info(state))


def with_cursor_ledger(store: MemoryStore, entries: list[bytes]) -> int:
    """A cursor ledger holding ``entries`` and the node pointing at it."""
    ledger_id = store.create_ledger()
    store.append_many(ledger_id, entries)
    with_cursor_node(store, CursorState(mark_delete=Position(1, -1)), ledger_id)
    return ledger_id


def reopen(store: MemoryStore, limit: int | None = None, **config: Any) -> Any:
    fconfig = ManagedLedgerFactoryConfig() if limit is None else ManagedLedgerFactoryConfig(max_state_size_in_bytes=limit)
    return ManagedLedgerFactory(store, fconfig).open(ML, ManagedLedgerConfig(**config))


def peak_while(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        try:
            action()
        except StateCorruptedError:
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def envelope(ctype: CompressionType, claimed: int, body: bytes) -> bytes:
    meta = pb.ManagedCursorInfoMetadata(compressionType=int(ctype), uncompressedSize=claimed).SerializeToString()
    return b"\x47\x78" + len(meta).to_bytes(4, "big") + meta + body


def bomb_body(ctype: CompressionType, size: int) -> bytes:
    """A body that inflates to ``size`` zero bytes (a few KiB of input for most codecs)."""
    blob = compress_metadata(bytes(size), ctype, 0)
    meta_len = int.from_bytes(blob[2:6], "big")
    return blob[6 + meta_len :]


# -- the limit ----------------------------------------------------------------------------------


def test_state_size_limit_default_and_validation() -> None:
    assert ManagedLedgerFactoryConfig().max_state_size_in_bytes == 64 * MiB
    with pytest.raises(ValueError, match="max_state_size_in_bytes"):
        ManagedLedgerFactoryConfig(max_state_size_in_bytes=0)


# -- item 6: decompression bombs --------------------------------------------------------------


@pytest.mark.parametrize("ctype", COMPRESSING, ids=lambda c: c.name)
def test_cursor_info_claiming_2_gib_is_refused_before_allocating(ctype: CompressionType) -> None:
    # The ZSTD record: 65 KB claiming 2**31 - 1 bytes took 2.1 GB to refuse.
    store, ids = stored_ml([10])
    store.put(NODE, envelope(ctype, (1 << 31) - 1, bomb_body(ctype, 4 * MiB)))
    peak = peak_while(lambda: reopen(store))
    with pytest.raises(StateCorruptedError, match=f"{ML}.*cursor sub.*ManagedCursorInfo {NODE}.*limit"):
        reopen(store)
    assert peak < 8 * MiB


@pytest.mark.parametrize("ctype", COMPRESSING, ids=lambda c: c.name)
def test_cursor_info_inflating_past_its_claim_never_allocates_past_the_limit(ctype: CompressionType) -> None:
    # Claims the whole limit, inflates to 16 times more (the 2 MB ZLIB record inflated
    # to 4.1 GB): the reader stops at the claim, falls back to raw parsing as Pulsar does, and
    # the raw bytes are no ManagedCursorInfo.
    limit = 4 * MiB
    store, _ = stored_ml([10])
    store.put(NODE, envelope(ctype, limit, bomb_body(ctype, 16 * limit)))
    peak = peak_while(lambda: reopen(store, limit))
    with pytest.raises(StateCorruptedError, match=f"cursor sub.*ManagedCursorInfo {NODE}"):
        reopen(store, limit)
    assert peak < limit + 4 * MiB


@pytest.mark.parametrize("ctype", COMPRESSING, ids=lambda c: c.name)
def test_compressed_cursor_ledger_entry_bomb_falls_back_to_an_older_state(ctype: CompressionType) -> None:
    # PositionInfo entries in the cursor ledger: a corrupt newest entry is skipped (the older
    # complete state is recovered, as after a torn write) without inflating it.
    limit = 4 * MiB
    store, ids = stored_ml([10])
    good = encode_position_info(CursorState(mark_delete=Position(ids[0], 3)))
    with_cursor_ledger(store, [good, envelope(ctype, (1 << 31) - 1, bomb_body(ctype, MiB)),
                               envelope(ctype, limit, bomb_body(ctype, 16 * limit))])
    holder: list[Any] = []
    peak = peak_while(lambda: holder.append(reopen(store, limit)))
    assert holder[0].get_cursor("sub").mark_delete_position == Position(ids[0], 3)
    assert peak < limit + 4 * MiB


def test_pip381_footer_claiming_more_than_the_limit_reads_no_part() -> None:
    # 8 parts of 1 MiB behind a footer announcing 8 MiB, with a 4 MiB limit: the footer is
    # refused before its parts are read; recovery then scans back entry by entry (each part is
    # no complete state) to the last good one. Never more than a part or two in memory.
    limit = 4 * MiB
    store, ids = stored_ml([10])
    good = encode_position_info(CursorState(mark_delete=Position(ids[0], 5)))
    parts = [b"p" * MiB] * 8
    footer = json.dumps({"numParts": 8, "length": 8 * MiB}).encode()
    with_cursor_ledger(store, [good, *parts, footer])
    holder: list[Any] = []
    config = {"persistent_unacked_ranges_with_multiple_entries_enabled": True}
    peak = peak_while(lambda: holder.append(reopen(store, limit, **config)))
    assert holder[0].get_cursor("sub").mark_delete_position == Position(ids[0], 5)
    assert peak < 3 * MiB


def test_pip381_parts_overflowing_their_footer_stop_at_the_announced_length() -> None:
    # A footer that claims little but sits after huge parts: parts are read one at a time and
    # refused as soon as they pass the announced length.
    store, ids = stored_ml([10])
    good = encode_position_info(CursorState(mark_delete=Position(ids[0], 2)))
    parts = [b"q" * (4 * MiB)] * 6
    footer = json.dumps({"numParts": 6, "length": 1000}).encode()
    with_cursor_ledger(store, [good, *parts, footer])
    holder: list[Any] = []
    peak = peak_while(lambda: holder.append(reopen(store, 64 * MiB, persistent_unacked_ranges_with_multiple_entries_enabled=True)))
    assert holder[0].get_cursor("sub").mark_delete_position == Position(ids[0], 2)
    assert peak < 12 * MiB  # one part read, never the 24 MiB sequence


def test_a_writer_never_stores_a_state_its_reader_would_refuse(caplog: pytest.LogCaptureFixture) -> None:
    # 300k alternating holes take ~5 MiB as ranges; with a 1 MiB limit the ranges nearest the
    # mark-delete that fit are persisted and the rest counted as truncated, like the range limit.
    store = MemoryStore()
    config = ManagedLedgerConfig(max_unacked_ranges_to_persist=0,
                                 persistent_unacked_ranges_with_multiple_entries_enabled=True)
    fconfig = ManagedLedgerFactoryConfig(max_state_size_in_bytes=MiB)
    ml = ManagedLedgerFactory(store, fconfig).open(ML, config)
    cursor = ml.open_cursor("sub")
    positions = ml.add_entries([b"x"] * 600_001)
    cursor.delete(positions[1::2])
    stats = cursor.stats().persistence
    assert 0 < stats.persisted_state_bytes <= MiB
    assert stats.truncated_ranges > 0
    assert any("max_state_size_in_bytes" in r.getMessage() for r in caplog.records)
    ml.close()
    recovered = ManagedLedgerFactory(store, fconfig).open(ML, config).get_cursor("sub")
    kept = recovered.total_non_contiguous_deleted_messages_range()
    assert kept + stats.truncated_ranges == 300_000
    assert recovered.is_message_deleted(positions[1]) and not recovered.is_message_deleted(positions[0])


# -- item 7: long-array entries -----------------------------------------------------------------


def test_long_array_entry_recovers_in_a_small_multiple_of_its_size() -> None:
    # The issue: a 10 MB entry of 1M words peaked at 1.04 GB (every acked entry expanded to an
    # int64 at once). 200k random words: a 2 MB entry, 6.4M acked entries.
    words = np.random.default_rng(7).integers(-(1 << 63), (1 << 63) - 1, size=200_000, dtype=np.int64)
    store, ids = stored_ml([64 * words.size])
    entry = encode_position_info(CursorState(mark_delete=Position(ids[0], -1), long_arrays={ids[0]: words}))
    assert len(entry) > 1.9 * MiB
    with_cursor_ledger(store, [entry])
    holder: list[Any] = []
    peak = peak_while(lambda: holder.append(reopen(store)))
    cursor = holder[0].get_cursor("sub")
    expected = int(np.unpackbits(words.view(np.uint8)).sum())
    assert cursor.stats().individually_deleted_entries == expected - (words[0] & 1)  # entry 0 absorbed
    assert peak < 4 * len(entry)


# -- item 8: states that do not fit the ledger ----------------------------------------------------


def test_mark_delete_entry_id_below_minus_one_is_refused() -> None:
    # The issue: 1:-2 stalled the cursor (reads returned nothing while the backlog said 100).
    store, ids = stored_ml([100])
    with_cursor_node(store, CursorState(mark_delete=Position(ids[0], -2)))
    with pytest.raises(StateCorruptedError) as err:
        reopen(store)
    message = str(err.value)
    assert ML in message and "cursor sub" in message and f"ManagedCursorInfo {NODE}" in message
    assert f"{ids[0]}:-2" in message


def test_mark_delete_below_minus_one_in_a_cursor_ledger_entry_is_refused() -> None:
    store, ids = stored_ml([100])
    cursor_ledger = with_cursor_ledger(store, [encode_position_info(CursorState(mark_delete=Position(ids[0], -9)))])
    with pytest.raises(StateCorruptedError, match=f"cursor sub.*PositionInfo in cursor ledger {cursor_ledger} entry 0"):
        reopen(store)


@pytest.mark.parametrize(
    "ranges, problem",
    [
        ([(999, 0, 999, 5)], "no ledger 999"),
        ([("L", 3, "L", 20)], "holds entries 0..9"),
        ([("L", -7, "L", 3)], "outside \\[0, "),
        ([("L", 5, "L", 5)], "empty or inverted"),
        ([("L", 1, "L", 2), ("L", 4, "L", 12)], "\\(L:4..L:12\\]"),
    ],
)
def test_ranges_outside_every_ledger_are_refused(ranges: list[tuple[Any, ...]], problem: str) -> None:
    store, ids = stored_ml([10])
    rows = [tuple(ids[0] if v == "L" else v for v in r) for r in ranges]
    state = CursorState(mark_delete=Position(ids[0], -1),
                        ranges=RangeArrays.from_pairs((Position(a, b), Position(c, d)) for a, b, c, d in rows))
    with_cursor_node(store, state)
    with pytest.raises(StateCorruptedError, match=problem.replace("L", str(ids[0]))) as err:
        reopen(store)
    assert "cursor sub" in str(err.value) and "individualDeletedMessages" in str(err.value)


def test_long_array_outside_every_ledger_is_refused() -> None:
    store, ids = stored_ml([10])
    entry = encode_position_info(CursorState(mark_delete=Position(ids[0], -1),
                                             long_arrays={ids[0]: np.array([1 << 12], dtype=np.int64)}))
    with_cursor_ledger(store, [entry])
    with pytest.raises(StateCorruptedError, match=f"entry {ids[0]}:12 .*individualDeletedMessageRanges.*0..9"):
        reopen(store)


def test_acknowledgements_at_or_below_the_mark_delete_are_not_refused() -> None:
    # A ledger trimmed under the mark-delete may still be named by what lies below it: those
    # entries are dropped on restore, never a reason to refuse.
    store, ids = stored_ml([10, 10])
    state = CursorState(
        mark_delete=Position(ids[1], 2),
        ranges=RangeArrays.from_pairs([(Position(ids[0] - 1, 0), Position(ids[0] - 1, 4)),
                                       (Position(ids[1], 0), Position(ids[1], 1)),
                                       (Position(ids[1], 4), Position(ids[1], 6))]),
    )
    with_cursor_node(store, state)
    cursor = reopen(store).get_cursor("sub")
    assert str(cursor.individually_deleted_messages()) == f"[({ids[1]}:4..{ids[1]}:6]]"
