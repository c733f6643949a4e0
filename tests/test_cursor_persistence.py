"""Durable cursors: every persistence path survives a reopen, with SqliteStore and MemoryStore."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mledger import (
    ConfigError,
    InitialPosition,
    InvalidRequestError,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    ManagedLedgerFactoryConfig,
    ManualClock,
    MemoryStore,
    Position,
    SqliteStore,
)
from mledger.codec import (
    PersistedCursorState,
    RangeArrays,
    decode_managed_cursor_info,
    decode_position_info,
    decompress_metadata,
    encode_position_info,
    split_chunks,
)
from mledger.core._ranges import words_to_ack_set
from mledger.managed_ledger._cursor import CURSOR_INTERNAL_PROPERTY_PREFIX
from mledger.storage import FaultInjectingStore, InjectedFault, Store

ML_NAME = "public/default/persistent/orders"

OpenStore = Callable[[], Store]


@pytest.fixture(params=["sqlite", "memory"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens the same store again after the previous handle was closed (a restart)."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "data")
    else:
        shared = MemoryStore()

        class Reopenable:
            def __call__(self) -> Store:
                return _Unclosable(shared)  # type: ignore[return-value]

        yield Reopenable()


class _Unclosable:
    """A MemoryStore handle whose close() does not close the shared store (a 'restart')."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def close(self) -> None:
        pass


def _open(store: Store, config: ManagedLedgerConfig, clock: ManualClock | None = None,
          fconfig: ManagedLedgerFactoryConfig | None = None) -> tuple[ManagedLedgerFactory, ManagedLedger]:
    factory = ManagedLedgerFactory(store, config=fconfig, clock=clock or ManualClock(1_000))
    return factory, factory.open(ML_NAME, config)


def _fill(ml: ManagedLedger, n: int) -> list[Position]:
    return ml.add_entries([b"m%d" % i for i in range(n)])


def _state(cursor: ManagedCursor) -> tuple[Position, str, dict[str, int], dict[str, str]]:
    return (cursor.mark_delete_position, str(cursor.individually_deleted_messages()),
            cursor.properties, cursor.cursor_properties)


def _crash(factory: ManagedLedgerFactory) -> None:
    """Drop the factory without closing cursors: only what was persisted survives."""
    factory.store.close()


def _cursor_info(store: Store, cursor_name: str = "sub") -> object:
    node = store.get(f"/managed-ledgers/{ML_NAME}/{cursor_name}")
    assert node is not None
    return decode_managed_cursor_info(decompress_metadata(node.data, 1 << 30))


def test_holes_persist_to_the_cursor_ledger_and_survive_a_crash(open_store: OpenStore) -> None:
    config = ManagedLedgerConfig(max_entries_per_ledger=7)
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 30)
    cursor.delete([ps[3], ps[4], ps[10], ps[20]])
    cursor.mark_delete(ps[1], {"seq": 7})
    cursor.set_cursor_property("owner", "billing")
    expected = _state(cursor)
    info = _cursor_info(ml.store)
    assert info.cursors_ledger_id >= 0  # state lives in the cursor ledger
    _crash(factory)

    factory, ml = _open(open_store(), config)
    cursor = ml.get_cursor("sub")
    assert _state(cursor) == expected
    assert cursor.number_of_entries_in_backlog() == 30 - 2 - 4
    cursor._check()
    factory.close()


def test_cursor_with_nothing_after_mark_delete_persists_to_the_metadata_store(open_store: OpenStore) -> None:
    config = ManagedLedgerConfig()
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 5)
    cursor.mark_delete(ps[-1], {"k": 1})
    info = _cursor_info(ml.store)
    assert info.cursors_ledger_id == -1
    assert tuple(info.mark_delete) == tuple(ps[-1])
    assert info.properties == {"k": 1}
    _crash(factory)
    factory, ml = _open(open_store(), config)
    assert ml.get_cursor("sub").mark_delete_position == ps[-1]
    assert ml.get_cursor("sub").properties == {"k": 1}
    factory.close()


@pytest.mark.parametrize("ranges, in_ledger", [(3, False), (12, True)])
def test_close_chooses_ledger_or_metadata_store_by_range_count(open_store: OpenStore, ranges: int, in_ledger: bool) -> None:
    config = ManagedLedgerConfig(max_unacked_ranges_to_persist_in_metadata_store=10)
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 2 * ranges + 2)
    cursor.delete(ps[2 : 2 * ranges + 2 : 2])
    expected = _state(cursor)
    assert cursor.total_non_contiguous_deleted_messages_range() == ranges
    factory.close()

    store = open_store()
    info = _cursor_info(store)
    assert (info.cursors_ledger_id >= 0) is in_ledger
    if not in_ledger:
        assert info.ranges is not None and info.ranges.size == ranges
    factory, ml = _open(store, config)
    assert _state(ml.get_cursor("sub")) == expected
    factory.close()


def test_cursor_ledger_rolls_over_by_entries_and_deletes_the_old_one(open_store: OpenStore) -> None:
    config = ManagedLedgerConfig(metadata_max_entries_per_ledger=4)
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 40)
    seen = set()
    for i in range(2, 30, 2):
        cursor.delete(ps[i])
        seen.add(cursor.stats().persistence.cursor_ledger_id)
    assert len(seen) >= 3
    current = cursor.stats().persistence.cursor_ledger_id
    for old in seen - {current}:
        assert not ml.store.ledger_exists(old)
    expected = _state(cursor)
    _crash(factory)
    factory, ml = _open(open_store(), config)
    assert _state(ml.get_cursor("sub")) == expected
    factory.close()


def test_cursor_ledger_rolls_over_by_age() -> None:
    clock = ManualClock(1_000)
    config = ManagedLedgerConfig(ledger_rollover_timeout=60)
    factory, ml = _open(MemoryStore(), config, clock)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 10)
    cursor.delete(ps[3])
    first = cursor.stats().persistence.cursor_ledger_id
    cursor.delete(ps[5])
    assert cursor.stats().persistence.cursor_ledger_id == first
    clock.advance(61_000)
    cursor.delete(ps[7])
    assert cursor.stats().persistence.cursor_ledger_id != first
    assert not ml.store.ledger_exists(first)


def test_truncation_keeps_ranges_nearest_mark_delete_counts_and_logs_once(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    config = ManagedLedgerConfig(max_unacked_ranges_to_persist=3)
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 30)
    with caplog.at_level(logging.WARNING, logger="mledger.managed_ledger._cursor_store"):
        for i in range(2, 22, 2):
            cursor.delete(ps[i])
    stats = cursor.stats().persistence
    assert stats.truncated_ranges == 7
    assert stats.truncated_ranges_total > 0
    warnings = [r for r in caplog.records if "beyond the persistence limit" in r.getMessage()]
    assert len(warnings) == 1
    _crash(factory)
    factory, ml = _open(open_store(), config)
    recovered = ml.get_cursor("sub").individually_deleted_messages()
    assert [str(hi) for _, hi in recovered] == [str(ps[2]), str(ps[4]), str(ps[6])]
    factory.close()


@pytest.mark.parametrize("compression", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_chunked_state_persists_as_parts_and_footer(open_store: OpenStore, compression: str) -> None:
    config = ManagedLedgerConfig(
        persistent_unacked_ranges_with_multiple_entries_enabled=True,
        persistent_unacked_ranges_max_entry_size=512,
        max_unacked_ranges_to_persist=0,  # no limit with chunking on
        cursor_info_compression_type=compression,
        max_unacked_ranges_to_persist_in_metadata_store=10,
    )
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 4000)
    cursor.delete(ps[1::2])
    stats = cursor.stats().persistence
    assert stats.truncated_ranges == 0
    if compression == "NONE":
        assert stats.last_persist_chunks > 2
    assert stats.last_persist_chunks >= 2  # at least one part and the footer
    expected = _state(cursor)
    _crash(factory)
    factory, ml = _open(open_store(), config)
    assert _state(ml.get_cursor("sub")) == expected
    assert ml.get_cursor("sub").total_non_contiguous_deleted_messages_range() == 2000
    factory.close()


@pytest.mark.parametrize("fmt", ["long_array", "auto", "range"])
def test_individual_ack_formats_round_trip(open_store: OpenStore, fmt: str) -> None:
    config = ManagedLedgerConfig(individual_ack_format=fmt, max_entries_per_ledger=500)
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 2000)
    cursor.delete(ps[1:700:2])  # dense alternating holes: long arrays win
    cursor.delete(ps[1200:1900])  # one long run: ranges win
    cursor.delete(ps[1950])
    expected = _state(cursor)
    info = _cursor_info(ml.store)
    raw = ml.store.read(info.cursors_ledger_id, 0, ml.store.last_entry_id(info.cursors_ledger_id))[-1]
    state = decode_position_info(raw)
    if fmt == "range":
        assert state.long_arrays in (None, {}) and state.ranges.size > 0
    elif fmt == "long_array":
        assert state.ranges is None or state.ranges.size == 0
        assert state.long_arrays
    else:
        assert state.long_arrays and state.ranges is not None and state.ranges.size > 0
    _crash(factory)
    factory, ml = _open(open_store(), config)
    assert _state(ml.get_cursor("sub")) == expected
    factory.close()


def _persisted_position_info(ml: ManagedLedger) -> PersistedCursorState:
    info = _cursor_info(ml.store)
    return decode_position_info(ml.store.read(info.cursors_ledger_id, 0,
                                              ml.store.last_entry_id(info.cursors_ledger_id))[-1])


@pytest.mark.parametrize(("limit", "words", "ranges", "truncated"), [
    (8, [0, 1], 0, 0),  # 4 + 4 acked entries: both ledgers fit
    (6, [0], 0, 2),  # the second ledger passes 6 entries: it and its 2 ranges are left out
    (3, [], 3, 1),  # even the first ledger (4 entries) passes 3: the range format, 3 of 4 ranges
    (0, [], 0, 4),
])
def test_long_array_format_limits_acked_entries_by_ledger_and_falls_back_to_ranges(
    limit: int, words: list[int], ranges: int, truncated: int
) -> None:
    # Pulsar (persistPositionToLedger with persistIndividualAckAsLongArray): the long-array
    # map comes from individualDeletedMessages.toRanges(maxUnackedRangesToPersist), which keeps
    # whole ledgers while the running sum of their acked entries stays <= the limit; when it
    # returns no ledger at all, individualDeletedMessages (the range format) is written instead,
    # truncated to maxUnackedRangesToPersist ranges.
    config = ManagedLedgerConfig(persist_individual_ack_as_long_array=True, max_entries_per_ledger=10,
                                 max_unacked_ranges_to_persist=limit)
    factory, ml = _open(MemoryStore(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 20)
    ledgers = sorted({p.ledger_id for p in ps})
    cursor.delete([ps[1], ps[2], ps[4], ps[5], ps[11], ps[12], ps[14], ps[15]])  # 2 ranges in each ledger
    state = _persisted_position_info(ml)
    assert sorted(state.long_arrays or {}) == [ledgers[i] for i in words]
    assert (state.ranges.size if state.ranges is not None else 0) == ranges
    assert cursor.stats().persistence.truncated_ranges == truncated
    factory.close()


def test_auto_format_is_never_larger_than_either_pulsar_format() -> None:
    sizes = {}
    for fmt in ("range", "long_array", "auto"):
        config = ManagedLedgerConfig(individual_ack_format=fmt, max_entries_per_ledger=1000)
        factory, ml = _open(MemoryStore(), config)
        cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
        ps = _fill(ml, 5000)
        cursor.delete(ps[1:1000:2] + ps[2000:3500] + ps[4001:5000:3])
        sizes[fmt] = cursor.stats().persistence.persisted_state_bytes
    assert sizes["auto"] <= min(sizes["range"], sizes["long_array"])


def test_batch_indexes_and_properties_survive_both_tiers(open_store: OpenStore) -> None:
    config = ManagedLedgerConfig()
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 10)
    cursor.delete_batch_indexes(ps[4], [0, 2], batch_size=5)
    cursor.mark_delete(ps[1], {"a": -5, "b": 1 << 62})
    _crash(factory)
    factory, ml = _open(open_store(), config)
    cursor = ml.get_cursor("sub")
    assert cursor.batch_ack_set(ps[4]) == 0b11010
    assert cursor.properties == {"a": -5, "b": 1 << 62}
    factory.close()  # close path: metadata store (few ranges)
    factory, ml = _open(open_store(), config)
    assert ml.get_cursor("sub").batch_ack_set(ps[4]) == 0b11010


def test_compressed_managed_cursor_info_in_the_metadata_store(open_store: OpenStore) -> None:
    fconfig = ManagedLedgerFactoryConfig(managed_cursor_info_compression_type="ZSTD",
                                         managed_cursor_info_compression_threshold_in_bytes=0)
    config = ManagedLedgerConfig()
    factory, ml = _open(open_store(), config, fconfig=fconfig)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 100)
    cursor.delete(ps[5:90:3])
    expected = _state(cursor)
    factory.close()
    store = open_store()
    node = store.get(f"/managed-ledgers/{ML_NAME}/sub")
    assert node is not None and node.data[:2] == b"\x47\x78"
    factory, ml = _open(store, config)  # a reader without the setting still decodes it
    assert _state(ml.get_cursor("sub")) == expected
    factory.close()


def test_torn_chunk_sequence_recovers_the_previous_complete_state() -> None:
    store = _Unclosable(MemoryStore())
    config = ManagedLedgerConfig(
        persistent_unacked_ranges_with_multiple_entries_enabled=True,
        persistent_unacked_ranges_max_entry_size=256,
        max_unacked_ranges_to_persist=0,
    )
    factory, ml = _open(store, config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 1000)
    cursor.delete(ps[1:400:2])
    expected = _state(cursor)
    ledger_id = cursor.stats().persistence.cursor_ledger_id
    # A crash mid-sequence (a writer without our atomic append): every part of a newer,
    # larger state is written, its footer never. The last part alone may even parse.
    newer = PersistedCursorState(mark_delete=Position(1, -1), ranges=RangeArrays.from_pairs(
        (Position(1, e - 1), Position(1, e)) for e in range(1, 900, 2)))
    parts = split_chunks(encode_position_info(newer), 256)[:-1]
    assert len(parts) > 2
    for torn in (parts[:2], parts[2:]):
        store.append_many(ledger_id, torn)
        _crash(factory)
        factory, ml = _open(store, config)
        assert _state(ml.get_cursor("sub")) == expected
        ledger_id = ml.get_cursor("sub").stats().persistence.cursor_ledger_id
        if ledger_id < 0:
            ledger_id = _cursor_info(store).cursors_ledger_id


@pytest.mark.parametrize("junk", [b"{not json", b'{"numParts": 100000000, "length": 5}',
                                  b'{"numParts": 2, "length": -1}', b"\xff\xff\xff", b""])
def test_corrupt_last_cursor_entry_falls_back_to_an_earlier_one(junk: bytes) -> None:
    store = _Unclosable(MemoryStore())
    config = ManagedLedgerConfig()
    factory, ml = _open(store, config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 50)
    cursor.delete([ps[5], ps[9]])
    expected = _state(cursor)
    store.append(cursor.stats().persistence.cursor_ledger_id, junk)
    _crash(factory)
    factory, ml = _open(store, config)
    assert _state(ml.get_cursor("sub")) == expected


def test_unreadable_cursor_ledger_falls_back_to_the_metadata_snapshot() -> None:
    store = _Unclosable(MemoryStore())
    config = ManagedLedgerConfig()
    factory, ml = _open(store, config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = _fill(ml, 50)
    cursor.mark_delete(ps[3], {"p": 1})
    cursor.delete(ps[7])
    store.delete_ledger(cursor.stats().persistence.cursor_ledger_id)
    _crash(factory)
    factory, ml = _open(store, config)
    cursor = ml.get_cursor("sub")
    # Pulsar: the snapshot in ManagedCursorInfo (written when the ledger was created), no properties.
    assert cursor.mark_delete_position <= ps[3]
    assert cursor.properties == {}
    cursor._check()


def test_lossless_large_state_one_million_holes() -> None:
    config = ManagedLedgerConfig(
        persistent_unacked_ranges_with_multiple_entries_enabled=True,
        max_unacked_ranges_to_persist=0,
        individual_ack_format="auto",
        max_entries_per_ledger=500_000,
    )
    store = _Unclosable(MemoryStore())
    factory, ml = _open(store, config)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    ps = ml.add_entries([b""] * 2_000_000)
    cursor.delete(ps[1::2])
    assert cursor.total_non_contiguous_deleted_messages_range() == 1_000_000
    expected = cursor.individually_deleted_messages().as_range_set()
    _crash(factory)
    factory, ml = _open(store, config)
    assert ml.get_cursor("sub").individually_deleted_messages().as_range_set() == expected


# ManagedCursorBatchAckRecoveryTest.testPartialBatchAckPersistenceRetainsConfiguredCount
@pytest.mark.parametrize("batch_count", [1, 2, 3])
@pytest.mark.parametrize("metadata_store", [False, True])
def test_partial_batch_ack_persistence_retains_configured_count(
    open_store: OpenStore, batch_count: int, metadata_store: bool
) -> None:
    # -1 (as Pulsar's own test uses it): a closing cursor with a cursor ledger always writes
    # its last state there, whatever its number of ranges.
    config = ManagedLedgerConfig(
        max_unacked_ranges_to_persist_in_metadata_store=20 if metadata_store else -1,
        deletion_at_batch_index_level_enabled=True,
        max_batch_deleted_index_to_persist=2,
    )
    factory, ml = _open(open_store(), config)
    cursor = ml.open_cursor("sub")
    positions = _fill(ml, batch_count + 1)
    ack_sets = [[2], [-(1 << 63), 1], [5, 0, 3]]  # BitSet words of the remaining indexes
    for i in range(1, len(positions)):
        cursor.delete_with_ack_set(positions[i], words_to_ack_set(ack_sets[i - 1]))
    cursor.delete(positions[0])  # advance the mark-delete, then close to persist
    factory.close()

    store = open_store()
    persisted = _cursor_info(store)
    if metadata_store:
        assert persisted.cursors_ledger_id == -1
        kept = min(batch_count, 2)
        assert [(p, list(words)) for p, words in persisted.batch_deleted] == [
            (positions[i + 1], ack_sets[i]) for i in range(kept)
        ]
    else:
        assert persisted.cursors_ledger_id >= 0
    factory, ml = _open(store, config)
    recovered = ml.get_cursor("sub")
    for i in range(1, batch_count + 1):
        expected = words_to_ack_set(ack_sets[i - 1]) if i <= 2 else None  # above the cap: truncated
        assert recovered.batch_ack_set(positions[i]) == expected
    factory.close()


def test_max_unacked_ranges_in_metadata_store_accepts_only_minus_one_below_zero() -> None:
    assert ManagedLedgerConfig(max_unacked_ranges_to_persist_in_metadata_store=-1)
    with pytest.raises(ConfigError, match="max_unacked_ranges_to_persist_in_metadata_store must be >= -1"):
        ManagedLedgerConfig(max_unacked_ranges_to_persist_in_metadata_store=-2)


# ManagedCursorPropertiesTest.testUpdateCursorProperties
def test_set_cursor_properties_keeps_internal_ones_and_refuses_setting_them(open_store: OpenStore) -> None:
    config = ManagedLedgerConfig()
    factory, ml = _open(open_store(), config)
    c1 = ml.open_cursor("c1", cursor_properties={"custom1": "one", "custom2": "two"})
    c1.set_cursor_property(f"{CURSOR_INTERNAL_PROPERTY_PREFIX}test", "test")
    c1.set_cursor_property("custom4", "custom4")
    updated = {"custom1": "one-updated", "custom3": "three"}
    c1.set_cursor_properties(updated)
    expected = {**updated, f"{CURSOR_INTERNAL_PROPERTY_PREFIX}test": "test"}
    assert c1.cursor_properties == expected
    with pytest.raises(InvalidRequestError, match="The property key can't start with #pulsar.internal."):
        c1.set_cursor_properties({**updated, f"{CURSOR_INTERNAL_PROPERTY_PREFIX}test": "changed", "more": "x"})
    assert c1.cursor_properties == expected  # a refused map changes nothing
    factory.close()

    store = open_store()
    assert _cursor_info(store, "c1").cursor_properties == expected  # persisted like putCursorProperty
    factory, ml = _open(store, config)
    c1 = ml.get_cursor("c1")
    assert c1.cursor_properties == expected
    c1.set_cursor_properties(None)  # clears the user properties only
    assert c1.cursor_properties == {f"{CURSOR_INTERNAL_PROPERTY_PREFIX}test": "test"}
    factory.close()


def test_set_cursor_properties_changes_nothing_when_persisting_fails() -> None:
    store = FaultInjectingStore(MemoryStore())
    factory, ml = _open(store, ManagedLedgerConfig())  # type: ignore[arg-type]
    cursor = ml.open_cursor("sub", cursor_properties={"a": "1"})
    store.fail_at = store.writes  # the next write: the ManagedCursorInfo put
    with pytest.raises(InjectedFault):
        cursor.set_cursor_properties({"b": "2"})
    assert cursor.cursor_properties == {"a": "1"}
    store.fail_at = store.writes
    with pytest.raises(InjectedFault):
        cursor.set_cursor_property("a", "changed")
    assert cursor.cursor_properties == {"a": "1"}


def test_a_lazy_entries_store_gets_records_sized_and_built_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store declaring ``lazy_entries`` (the replay's) is given PositionInfo records neither
    sized nor encoded: the persists' figures and the record it returns when read are those the
    same store gets encoded, no range is encoded before a read, and the ranges are sized once,
    when the stats ask (every limit is far above the records' bound)."""
    from mledger.codec import PositionInfoRanges
    from mledger.replay._store import ReplayStore

    encoded: list[int] = []
    encode = PositionInfoRanges.encode
    monkeypatch.setattr(PositionInfoRanges, "encode", lambda self, r: encoded.append(1) or encode(self, r))
    sized: list[int] = []
    size_runs = PositionInfoRanges.size_runs
    monkeypatch.setattr(PositionInfoRanges, "size_runs", lambda self, *a: sized.append(1) or size_runs(self, *a))
    config = ManagedLedgerConfig(throttle_mark_delete=0)
    outcomes = []
    for lazy in (False, True):
        store = ReplayStore()
        store.lazy_entries = lazy
        factory, ml = _open(store, config)
        cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
        ps = _fill(ml, 200)
        for i in range(3, 200, 3):
            cursor.delete(ps[i])
        cursor.delete_batch_indexes(ps[1], [0, 2], batch_size=5)
        cursor.mark_delete(ps[0], {"k": 9})
        persistence = cursor.stats().persistence
        ledger_id = _cursor_info(ml.store).cursors_ledger_id
        assert ledger_id >= 0 and persistence.persist_count > 60
        built_before_read = len(encoded)
        last = store.read(ledger_id, store.last_entry_id(ledger_id), store.last_entry_id(ledger_id))
        outcomes.append((persistence, last, built_before_read))
        assert len(sized) == (1 if lazy else 0)
        encoded.clear()
    (encoded_stats, encoded_last, encoded_built), (lazy_stats, lazy_last, lazy_built) = outcomes
    assert encoded_built > 60 and lazy_built == 0
    assert lazy_stats == encoded_stats
    assert lazy_stats.persisted_state_bytes == len(lazy_last[0])
    assert lazy_last == encoded_last
    assert decode_position_info(lazy_last[0]).properties == {"k": 9}
