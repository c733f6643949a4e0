"""PositionInfo / ManagedCursorInfo codecs: byte identity with protobuf, tolerance, bad input."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from mledger import Position, StateCorruptedError
from mledger.codec import (
    PersistedCursorState,
    PositionInfoEntry,
    PositionInfoRanges,
    RangeArrays,
    _cursor_info as codec,
    _varint_arrays as vx,
    decode_managed_cursor_info,
    decode_position_info,
    encode_managed_cursor_info,
    encode_position_info,
)
from mledger.codec.proto import MLDataFormats_pb2 as pb

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

# ---------------------------------------------------------------------------------------------
# The oracle: the generated protobuf classes, state <-> message.


def _set_pos(msg, pos) -> None:
    msg.ledgerId, msg.entryId = int(pos[0]), int(pos[1])


def _fill_common(m, state: PersistedCursorState, ranges_attr: str) -> None:
    if state.ranges is not None:
        for ll, le, ul, ue in zip(*(c.tolist() for c in state.ranges), strict=True):
            r = getattr(m, ranges_attr).add()
            _set_pos(r.lowerEndpoint, (ll, le))
            _set_pos(r.upperEndpoint, (ul, ue))
    for name, value in state.properties.items():
        m.properties.add(name=name, value=value)
    for pos, words in state.batch_deleted:
        b = m.batchedEntryDeletionIndexInfo.add()
        _set_pos(b.position, pos)
        b.deleteSet.extend(np.asarray(words).tolist())


def to_pb_position_info(state: PersistedCursorState) -> pb.PositionInfo:
    m = pb.PositionInfo()
    _set_pos(m, state.mark_delete)
    _fill_common(m, state, "individualDeletedMessages")
    for key, words in (state.long_arrays or {}).items():
        m.individualDeletedMessageRanges.add(key=key, values=np.asarray(words).tolist())
    return m


def to_pb_cursor_info(state: PersistedCursorState) -> pb.ManagedCursorInfo:
    m = pb.ManagedCursorInfo(cursorsLedgerId=state.cursors_ledger_id)
    m.markDeleteLedgerId, m.markDeleteEntryId = state.mark_delete
    _fill_common(m, state, "individualDeletedMessages")
    if state.last_active is not None:
        m.lastActive = state.last_active
    for name, value in state.cursor_properties.items():
        m.cursorProperties.add(name=name, value=value)
    return m


def _text(value: str | bytes) -> str:
    # Python's upb hands back invalid UTF-8 in proto2 strings as bytes; Java (and we) replace.
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _common_from_pb(m, ranges_attr: str) -> dict:
    rng = getattr(m, ranges_attr)
    ranges = None
    if len(rng):
        ranges = RangeArrays.from_pairs(
            [
                (Position(r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId),
                 Position(r.upperEndpoint.ledgerId, r.upperEndpoint.entryId))
                for r in rng
            ]
        )
    return dict(
        properties={_text(p.name): p.value for p in m.properties},
        ranges=ranges,
        batch_deleted=[
            (Position(b.position.ledgerId, b.position.entryId), np.array(list(b.deleteSet), dtype=np.int64))
            for b in m.batchedEntryDeletionIndexInfo
        ],
    )


def from_pb_position_info(m: pb.PositionInfo) -> PersistedCursorState:
    longs = None
    if len(m.individualDeletedMessageRanges):
        longs = {}
        for lm in m.individualDeletedMessageRanges:
            longs[lm.key] = np.array(list(lm.values), dtype=np.int64)
    return PersistedCursorState(Position(m.ledgerId, m.entryId), long_arrays=longs, **_common_from_pb(m, "individualDeletedMessages"))


def from_pb_cursor_info(m: pb.ManagedCursorInfo) -> PersistedCursorState:
    return PersistedCursorState(
        Position(m.markDeleteLedgerId, m.markDeleteEntryId),
        cursor_properties={_text(p.name): _text(p.value) for p in m.cursorProperties},
        cursors_ledger_id=m.cursorsLedgerId,
        last_active=m.lastActive if m.HasField("lastActive") else None,
        **_common_from_pb(m, "individualDeletedMessages"),
    )


# ---------------------------------------------------------------------------------------------
# Strategies

int64s = st.one_of(
    st.integers(-3, 300),
    st.integers(I64_MIN, I64_MAX),
    st.sampled_from([I64_MIN, I64_MAX, -1, 0, 127, 128, 16383, 16384, (1 << 31) - 1, 1 << 62, (1 << 56) - 1]),
)
words = st.lists(int64s, max_size=8).map(lambda xs: np.array(xs, dtype=np.int64))
positions = st.builds(Position, int64s, int64s)
names = st.text(max_size=12)


@st.composite
def range_arrays(draw) -> RangeArrays:
    rows = draw(st.lists(st.tuples(int64s, int64s, int64s, int64s), max_size=30))
    if not rows:
        return RangeArrays.empty()
    a = np.array(rows, dtype=np.int64)
    return RangeArrays(*(a[:, i].copy() for i in range(4)))


@st.composite
def cursor_states(draw, long_arrays: bool = True, cursor_info: bool = False) -> PersistedCursorState:
    return PersistedCursorState(
        mark_delete=draw(positions),
        properties=draw(st.dictionaries(names, int64s, max_size=4)),
        ranges=draw(st.none() | range_arrays()),
        long_arrays=draw(st.none() | st.dictionaries(int64s, words, max_size=5)) if long_arrays else None,
        batch_deleted=draw(st.lists(st.tuples(positions, words), max_size=5)),
        cursor_properties=draw(st.dictionaries(names, names, max_size=3)) if cursor_info else {},
        cursors_ledger_id=draw(int64s) if cursor_info else -1,
        last_active=draw(st.none() | int64s) if cursor_info else None,
    )


# ---------------------------------------------------------------------------------------------
# Byte identity and round trips


@settings(max_examples=400, deadline=None)
@given(cursor_states())
def test_position_info_is_byte_identical_to_protobuf(state: PersistedCursorState) -> None:
    expected = to_pb_position_info(state).SerializeToString()
    assert encode_position_info(state) == expected
    assert decode_position_info(expected) == state
    assert from_pb_position_info(pb.PositionInfo.FromString(expected)) == state


@settings(max_examples=300, deadline=None)
@given(cursor_states(long_arrays=False, cursor_info=True))
def test_managed_cursor_info_is_byte_identical_to_protobuf(state: PersistedCursorState) -> None:
    expected = to_pb_cursor_info(state).SerializeToString()
    assert encode_managed_cursor_info(state) == expected
    assert decode_managed_cursor_info(expected) == state


@settings(max_examples=300, deadline=None)
@given(cursor_states())
def test_position_info_entry_is_sized_before_it_is_encoded(state: PersistedCursorState) -> None:
    """A PositionInfoEntry's size is the record's, known without building it (the ranges
    sized, not encoded); its bytes are protobuf's, built once when asked."""
    expected = to_pb_position_info(state).SerializeToString()
    ranges = PositionInfoRanges()
    entry = PositionInfoEntry(state, ranges)
    if state.ranges is not None:
        assert ranges.size(state.ranges) == len(ranges.encode(state.ranges))
    assert len(entry) == len(expected)
    assert bytes(entry) == expected
    assert bytes(entry) is bytes(entry)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_position_info_ranges_reused_between_records_are_byte_identical(data) -> None:
    """Successive records through one PositionInfoRanges (ranges changed, inserted, dropped at
    the start, end or middle; more and fewer than the Python path's records) equal protobuf's,
    and another one sizes them exactly, reusing its own last sizes."""
    value = st.integers(I64_MIN, I64_MAX) | st.integers(-2, 1 << 20)
    rows = data.draw(st.lists(st.tuples(value, value, value, value), max_size=80))
    ranges, sizer = PositionInfoRanges(), PositionInfoRanges()
    reused_from = data.draw(st.sampled_from([0, 20, codec._REUSED_FROM]))  # the default reuses long lists only
    for _ in range(data.draw(st.integers(1, 6))):
        op, at, count = data.draw(st.sampled_from("keep change insert drop".split())), data.draw(st.integers(0, 80)), data.draw(st.integers(1, 40))
        at = min(at, len(rows))
        if op == "change" and rows:
            rows[min(at, len(rows) - 1)] = data.draw(st.tuples(value, value, value, value))
        elif op == "insert":
            rows[at:at] = data.draw(st.lists(st.tuples(value, value, value, value), min_size=1, max_size=count))
        elif op == "drop":
            del rows[at : at + count]
        cols = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(4)]
        state = PersistedCursorState(Position(1, 2), {"p": 3}, RangeArrays(*cols))
        expected = to_pb_position_info(state).SerializeToString()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(codec, "_REUSED_FROM", reused_from)
            ranges_bytes = ranges.encode(state.ranges)
            assert encode_position_info(state, ranges_bytes=ranges_bytes) == expected
            assert sizer.size(state.ranges) == len(ranges_bytes)  # sized from its own last call


@pytest.mark.parametrize("seed", [1, 2])
def test_large_random_state_spans_many_scan_windows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40_000  # ~1 MB of ranges: many 64 KiB first windows and window boundaries mid-record
    cols = [rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64, endpoint=True) >> rng.integers(0, 64, n) for _ in range(4)]
    longs = {int(k): rng.integers(I64_MIN, I64_MAX, int(c), dtype=np.int64) for k, c in zip(rng.integers(-5, 1 << 40, 30), rng.integers(0, 20_000, 30), strict=True)}
    batch = [(Position(int(a), int(b)), rng.integers(-9, 1 << 62, int(c) % 50, dtype=np.int64)) for a, b, c in rng.integers(0, 1 << 20, (500, 3))]
    state = PersistedCursorState(Position(7, 9), {"x": 1}, RangeArrays(*cols), longs, batch)
    data = encode_position_info(state)
    assert data == to_pb_position_info(state).SerializeToString()
    assert decode_position_info(data) == state
    state.long_arrays = None
    state.cursors_ledger_id = 12
    data = encode_managed_cursor_info(state)
    assert data == to_pb_cursor_info(state).SerializeToString()
    assert decode_managed_cursor_info(data) == state


def test_canonical_input_never_takes_the_protobuf_path(monkeypatch) -> None:
    def boom(self, raw):
        raise AssertionError("slow path used for canonical input")

    monkeypatch.setattr(codec._Ranges, "_slow", boom)
    monkeypatch.setattr(codec._PairRecords, "_slow", boom)
    k = np.arange(100_000, dtype=np.int64)
    state = PersistedCursorState(
        Position(3, 1),
        ranges=RangeArrays(3 + k // 5000, 2 * k, 3 + k // 5000, 2 * k + 1),
        long_arrays={3: np.full(50_000, 0x5555555555555555, dtype=np.int64), 4: np.array([1023])},
        batch_deleted=[(Position(3, i), np.array([i, -i])) for i in range(2000)],
    )
    assert decode_position_info(encode_position_info(state)) == state


def test_records_larger_than_a_window_are_streamed(monkeypatch) -> None:
    def boom(self, raw):
        raise AssertionError("slow path used for canonical input")

    rng = np.random.default_rng(3)
    n = codec._MAX_WINDOW // 4  # ~10-byte values: records of ~2.5 windows
    state = PersistedCursorState(
        Position(1, 1),
        long_arrays={5: rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64), 6: np.arange(3), 7: np.arange(n) % 3},
        batch_deleted=[(Position(1, 2), rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64)), (Position(1, 3), np.arange(2))],
    )
    data = encode_position_info(state)
    assert data == to_pb_position_info(state).SerializeToString()
    monkeypatch.setattr(codec._PairRecords, "_slow", boom)
    assert decode_position_info(data) == state


def test_large_odd_records_fall_back_to_protobuf() -> None:
    n = codec._MAX_WINDOW // 2
    values = b"".join(_varint(i) for i in range(n))
    packed = b"\x08\x05" + b"\x12" + _varint(len(values)) + values  # LongListMap, packed values
    half = b"".join(b"\x10" + _varint(i) for i in range(n // 4))
    mixed = b"\x08\x06" + half + b"\x12\x02\x01\x02" + half  # unpacked, then packed, then unpacked
    junk = b"\x4a" + _varint(codec._MAX_WINDOW * 2) + bytes(codec._MAX_WINDOW * 2)  # unknown field 9
    big_range = bytes.fromhex("0a04" "0803" "1005" "1204" "0803" "1007") + junk
    batch = bytes.fromhex("0a04" "0801" "1002") + b"\x10\x07" * n + b"\x15\x00\x00\x00\x00"  # unknown fixed32 at the end
    data = b"\x08\x01\x10\x02" + b"".join(
        tag + _varint(len(body)) + body for tag, body in ((b"\x32", packed), (b"\x32", mixed), (b"\x1a", big_range), (b"\x2a", batch))
    )
    expected = from_pb_position_info(pb.PositionInfo.FromString(data))
    got = decode_position_info(data)
    assert got == expected
    assert got.long_arrays[6].size == 2 * (n // 4) + 2 and got.batch_deleted[0][1].size == n


def test_ten_thousand_alternating_holes_round_trip() -> None:
    k = np.arange(10_000, dtype=np.int64)
    ranges = RangeArrays(np.full_like(k, 5), 2 * k, np.full_like(k, 5), 2 * k + 1)
    state = PersistedCursorState(Position(5, -1), {}, ranges)
    assert decode_position_info(encode_position_info(state)).ranges == ranges


def test_empty_parts_equal_absent_parts() -> None:
    a = PersistedCursorState(Position(1, 2), ranges=RangeArrays.empty(), long_arrays={})
    b = PersistedCursorState(Position(1, 2))
    assert a == b
    assert encode_position_info(a) == encode_position_info(b) == bytes.fromhex("08011002")
    assert decode_position_info(encode_position_info(a)) == a
    assert a != PersistedCursorState(Position(1, 3))
    assert a != PersistedCursorState(Position(1, 2), ranges=RangeArrays.from_pairs([(Position(1, 2), Position(1, 3))]))
    assert a != PersistedCursorState(Position(1, 2), long_arrays={1: np.array([1])})
    assert PersistedCursorState(Position(1, 2), long_arrays={1: np.array([1])}) != PersistedCursorState(Position(1, 2), long_arrays={1: np.array([2])})
    assert a != PersistedCursorState(Position(1, 2), batch_deleted=[(Position(1, 3), np.array([1]))])
    one = [(Position(1, 3), np.array([1]))]
    assert PersistedCursorState(Position(1, 2), batch_deleted=one) != PersistedCursorState(Position(1, 2), batch_deleted=[(Position(1, 3), np.array([2]))])
    assert PersistedCursorState(Position(1, 2), {"a": 1, "b": 2}) != PersistedCursorState(Position(1, 2), {"b": 2, "a": 1})  # order kept
    assert a != "not a state" and RangeArrays.empty() != (1, 2, 3, 4)


def test_range_arrays_helpers() -> None:
    pairs = [(Position(3, 5), Position(3, 7)), (Position(4, -1), Position(4, 0))]
    r = RangeArrays.from_pairs(pairs)
    assert r.size == 2 and r.pairs() == pairs
    assert r == RangeArrays.from_pairs(pairs) and r != RangeArrays.empty()
    assert all(c.dtype == np.int64 for c in r)


# ---------------------------------------------------------------------------------------------
# Byte-level layout, built by hand (REFERENCE.md §1)


def test_position_info_layout_by_hand() -> None:
    state = PersistedCursorState(
        Position(3, 5),
        {"k": 1},
        RangeArrays.from_pairs([(Position(3, 5), Position(3, 7))]),
        {3: np.array([1023, -1])},
        [(Position(3, 9), np.array([10]))],
    )
    expected = bytes.fromhex(
        "0803" "1005"  # ledgerId 3, entryId 5
        "1a0c" "0a04" "0803" "1005" "1204" "0803" "1007"  # MessageRange (3:5..3:7]
        "2205" "0a016b" "1001"  # LongProperty k=1
        "2a08" "0a04" "0803" "1009" "100a"  # batch 3:9, deleteSet [10]
        "3210" "0803" "10ff07" "10ffffffffffffffffff01"  # LongListMap 3 -> [1023, -1], unpacked
    )
    assert encode_position_info(state) == expected
    assert decode_position_info(expected) == state


def test_managed_cursor_info_layout_by_hand() -> None:
    state = PersistedCursorState(
        Position(3, 5),
        {"k": 1},
        RangeArrays.from_pairs([(Position(3, 5), Position(3, 7))]),
        batch_deleted=[(Position(3, 9), np.array([10, 11]))],
        cursor_properties={"a": "b"},
        cursors_ledger_id=-1,
        last_active=1000,
    )
    expected = bytes.fromhex(
        "08ffffffffffffffffff01"  # cursorsLedgerId -1
        "1003" "1805"  # markDelete 3:5
        "220c" "0a04" "0803" "1005" "1204" "0803" "1007"  # field 4: MessageRange
        "2a05" "0a016b" "1001"  # field 5: LongProperty
        "30e807"  # field 6: lastActive 1000
        "3a0a" "0a04" "0803" "1009" "100a" "100b"  # field 7: batch
        "4206" "0a0161" "120162"  # field 8: StringProperty a=b
    )
    assert encode_managed_cursor_info(state) == expected
    assert decode_managed_cursor_info(expected) == state


def test_managed_cursor_info_defaults() -> None:
    state = decode_managed_cursor_info(bytes.fromhex("0807"))
    assert state == PersistedCursorState(Position(0, 0), cursors_ledger_id=7)
    assert state.last_active is None


# ---------------------------------------------------------------------------------------------
# Tolerance: any valid protobuf encoding decodes like protobuf does


def _varint(value: int, overlong: bool = False) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    if overlong and len(out) < 10:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


class OddWriter:
    """Writes valid protobuf the way no Pulsar writer does: shuffled fields, unknown fields of
    every wire type, packed repeated int64, overlong varints, duplicated scalars."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd

    def v(self, value: int) -> bytes:
        return _varint(value, overlong=self.rnd.random() < 0.1)

    def tag(self, field: int, wt: int) -> bytes:
        return self.v((field << 3) | wt)

    def unknown(self) -> bytes:
        f = self.rnd.choice([9, 15, 100, 5000])
        kind = self.rnd.randrange(5)
        if kind == 0:
            return self.tag(f, 0) + self.v(self.rnd.getrandbits(64))
        if kind == 1:
            return self.tag(f, 1) + self.rnd.randbytes(8)
        if kind == 2:
            body = self.rnd.randbytes(self.rnd.randrange(6))
            return self.tag(f, 2) + self.v(len(body)) + body
        if kind == 3:
            return self.tag(f, 5) + self.rnd.randbytes(4)
        return self.tag(f, 3) + self.tag(1, 0) + self.v(5) + self.tag(f, 4)

    def msg(self, fields: list[bytes]) -> bytes:
        fields = list(fields)
        for _ in range(self.rnd.randrange(3) if self.rnd.random() < 0.3 else 0):
            fields.insert(self.rnd.randrange(len(fields) + 1), self.unknown())
        return b"".join(fields)

    def lenf(self, field: int, body: bytes) -> bytes:
        return self.tag(field, 2) + self.v(len(body)) + body

    def scalar(self, field: int, value: int) -> list[bytes]:
        out = []
        if self.rnd.random() < 0.1:  # an earlier value that the later one overrides
            out.append(self.tag(field, 0) + self.v(self.rnd.getrandbits(64)))
        out.append(self.tag(field, 0) + self.v(value))
        return out

    def pos(self, field: int, p) -> bytes:
        inner = [self.scalar(1, int(p[0])), self.scalar(2, int(p[1]))]
        if self.rnd.random() < 0.3:
            inner.reverse()  # field order, not the order of one field's occurrences
        return self.lenf(field, self.msg(inner[0] + inner[1]))

    def ints(self, field: int, values: list[int]) -> list[bytes]:
        if values and self.rnd.random() < 0.4:
            body = b"".join(self.v(x) for x in values)
            return [self.lenf(field, body)]
        return [self.tag(field, 0) + self.v(x) for x in values]


def odd_encoding(state: PersistedCursorState, rnd: random.Random, cursor_info: bool) -> bytes:
    w = OddWriter(rnd)
    groups: list[list[bytes]] = []  # per field: its occurrences, whose order must be kept
    if cursor_info:
        groups.append(w.scalar(1, state.cursors_ledger_id))
        groups += [w.scalar(2, state.mark_delete[0]), w.scalar(3, state.mark_delete[1])]
        if state.last_active is not None:
            groups.append(w.scalar(6, state.last_active))
        f_ranges, f_props, f_batch = 4, 5, 7
    else:
        groups += [w.scalar(1, state.mark_delete[0]), w.scalar(2, state.mark_delete[1])]
        f_ranges, f_props, f_batch = 3, 4, 5
    if state.ranges is not None:
        recs = []
        for ll, le, ul, ue in zip(*(c.tolist() for c in state.ranges), strict=True):
            parts = [w.pos(1, (ll, le)), w.pos(2, (ul, ue))]
            if rnd.random() < 0.2:
                parts.reverse()
            recs.append(w.lenf(f_ranges, w.msg(parts)))
        groups.append(recs)
    groups.append([w.lenf(f_props, w.msg([w.lenf(1, k.encode()), *w.scalar(2, v)])) for k, v in state.properties.items()])
    groups.append(
        [w.lenf(f_batch, w.msg([w.pos(1, p), *w.ints(2, np.asarray(ws).tolist())])) for p, ws in state.batch_deleted]
    )
    if cursor_info:
        groups.append([w.lenf(8, w.msg([w.lenf(1, k.encode()), w.lenf(2, v.encode())])) for k, v in state.cursor_properties.items()])
    elif state.long_arrays:
        groups.append(
            [w.lenf(6, w.msg([*w.scalar(1, k), *w.ints(2, np.asarray(ws).tolist())])) for k, ws in state.long_arrays.items()]
        )
    # Interleave the fields at random, keeping each field's own order.
    queues = [g for g in groups if g]
    out = []
    while queues:
        q = rnd.choice(queues)
        out.append(q.pop(0))
        if rnd.random() < 0.05:
            out.append(w.unknown())
        queues = [g for g in queues if g]
    return b"".join(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cursor_states(), st.randoms(use_true_random=False))
def test_position_info_decodes_any_valid_encoding_like_protobuf(state: PersistedCursorState, rnd: random.Random) -> None:
    data = odd_encoding(state, rnd, cursor_info=False)
    expected = from_pb_position_info(pb.PositionInfo.FromString(data))
    assert decode_position_info(data) == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cursor_states(long_arrays=False, cursor_info=True), st.randoms(use_true_random=False))
def test_cursor_info_decodes_any_valid_encoding_like_protobuf(state: PersistedCursorState, rnd: random.Random) -> None:
    data = odd_encoding(state, rnd, cursor_info=True)
    expected = from_pb_cursor_info(pb.ManagedCursorInfo.FromString(data))
    assert decode_managed_cursor_info(data) == expected


def test_odd_records_inside_long_canonical_runs() -> None:
    # Canonical runs broken by odd records, many times: the fast path must resume each time.
    rnd = random.Random(7)
    w = OddWriter(rnd)
    k = np.arange(20_000, dtype=np.int64)
    state = PersistedCursorState(Position(1, 1), ranges=RangeArrays(k, k, k, k + 1))
    canonical = encode_position_info(state)
    body = canonical[4:]
    cut_points = sorted(rnd.sample(range(20_000), 300))
    # Re-encode the chosen records oddly, in place.
    rec_len = [len(encode_position_info(PersistedCursorState(Position(1, 1), ranges=RangeArrays(k[i : i + 1], k[i : i + 1], k[i : i + 1], k[i : i + 1] + 1)))) - 4 for i in range(20_000)]
    offsets = np.concatenate([[0], np.cumsum(rec_len)])
    pieces, last = [], 0
    for i in cut_points:
        pieces.append(body[last : offsets[i]])
        pieces.append(w.lenf(3, w.msg([w.pos(2, (i, i + 1)), w.pos(1, (i, i))])))
        last = offsets[i + 1]
    pieces.append(body[last:])
    data = canonical[:4] + b"".join(pieces)
    assert decode_position_info(data) == from_pb_position_info(pb.PositionInfo.FromString(data)) == state


def test_packed_values_are_accepted() -> None:
    # LongListMap{key 3, values [1, 2, 300]} with values packed (field 2, wire type 2).
    data = bytes.fromhex("08011002" "3209" "0803" "1205" "0102ac0201") + bytes.fromhex("3a00")
    got = decode_position_info(data)
    assert list(got.long_arrays) == [3] and got.long_arrays[3].tolist() == [1, 2, 300, 1]


def test_last_scalar_wins_and_fields_any_order() -> None:
    data = bytes.fromhex("1005" "0801" "0802")
    assert decode_position_info(data).mark_delete == Position(2, 5)


def test_duplicate_map_keys_last_wins() -> None:
    data = bytes.fromhex("08011002" "32040801" "1005" "32040802" "1006" "32040801" "1007")
    assert {k: v.tolist() for k, v in decode_position_info(data).long_arrays.items()} == {1: [7], 2: [6]}


def test_invalid_utf8_names_are_replaced_like_java() -> None:
    data = bytes.fromhex("08011002" "2205" "0a01ff" "1001")
    assert decode_position_info(data).properties == {"\ufffd": 1}


def test_memoryview_and_bytearray_input() -> None:
    state = PersistedCursorState(Position(1, 2), {"a": 3}, RangeArrays.from_pairs([(Position(1, 2), Position(1, 4))]))
    data = encode_position_info(state)
    assert decode_position_info(memoryview(data)) == state
    assert decode_position_info(bytearray(data)) == state
    assert decode_position_info(memoryview(b"xx" + data)[2:]) == state
    import array

    assert decode_position_info(memoryview(array.array("b", data))) == state  # format 'b', not 'B'


# ---------------------------------------------------------------------------------------------
# Malformed input


@pytest.mark.parametrize(
    "hexdata, why",
    [
        ("", "empty: required fields missing"),
        ("0801", "entryId missing"),
        ("1001", "ledgerId missing"),
        ("08011002" "1a05" "0a04", "length past the end"),
        ("08011002" "08", "truncated varint"),
        ("08" + "ff" * 10 + "01" "1002", "11-byte varint"),
        ("08011002" "0e", "wire type 6"),
        ("08011002" "0f", "wire type 7"),
        ("08011002" "00", "field number 0"),
        ("08011002" "0c", "end-group without start"),
        ("08011002" "7b0801", "group never closed"),
        ("08011002" "7b0801" "84", "group closed by another field"),
        ("08011002" "1a0a" "0a04" "0803" "1005" "1202" "0803", "MessageRange missing upper.entryId"),
        ("08011002" "1a06" "0a04" "0803" "1005", "MessageRange missing upperEndpoint"),
        ("08011002" "2203" "0a016b", "LongProperty missing value"),
        ("08011002" "3202" "1001", "LongListMap missing key"),
        ("08011002" "2a02" "1001", "batch missing position"),
        ("08011002" "0d0102", "truncated fixed32"),
        ("08011002" "090102030405", "truncated fixed64"),
    ],
)
def test_malformed_position_info(hexdata: str, why: str) -> None:
    data = bytes.fromhex(hexdata)
    with pytest.raises(StateCorruptedError):
        decode_position_info(data)


def test_malformed_cursor_info() -> None:
    with pytest.raises(StateCorruptedError):
        decode_managed_cursor_info(bytes.fromhex("1001"))  # cursorsLedgerId missing
    with pytest.raises(StateCorruptedError):
        decode_managed_cursor_info(bytes.fromhex("08ff"))


def _pb_verdict(parse, convert, data: bytes):
    try:
        m = parse(data)
    except Exception:
        return "error"
    if not m.IsInitialized():
        return "error"
    return convert(m)


@settings(max_examples=300, deadline=None)
@given(cursor_states(), st.data())
def test_corrupted_bytes_fail_or_agree_with_protobuf(state: PersistedCursorState, data) -> None:
    raw = bytearray(encode_position_info(state))
    assume(len(raw) > 0)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    mutated = bytes(raw[:cut])
    expected = _pb_verdict(pb.PositionInfo.FromString, from_pb_position_info, mutated)
    if expected == "error":
        with pytest.raises(StateCorruptedError):
            decode_position_info(mutated)
    else:
        assert decode_position_info(mutated) == expected


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_fail_or_agree_with_protobuf(blob: bytes) -> None:
    for parse, convert, decode in (
        (pb.PositionInfo.FromString, from_pb_position_info, decode_position_info),
        (pb.ManagedCursorInfo.FromString, from_pb_cursor_info, decode_managed_cursor_info),
    ):
        expected = _pb_verdict(parse, convert, blob)
        if expected == "error":
            with pytest.raises(StateCorruptedError):
                decode(blob)
        else:
            assert decode(blob) == expected


def test_mutations_inside_long_runs_fail_or_agree_with_protobuf() -> None:
    # Single-byte damage in the middle of long canonical runs: the bulk scanner must either
    # reject the damaged record or read it exactly as protobuf does.
    rnd = random.Random(11)
    k = np.arange(2000, dtype=np.int64)
    state = PersistedCursorState(
        Position(1, 1),
        ranges=RangeArrays(k, k * 1000, k, k * 1000 + 7),
        long_arrays={int(i): k[: 50 + i] * -3 for i in range(20)},
        batch_deleted=[(Position(2, int(i)), k[: i % 7]) for i in range(300)],
    )
    data = encode_position_info(state)
    for _ in range(400):
        raw = bytearray(data)
        raw[rnd.randrange(4, len(raw))] = rnd.randrange(256)
        mutated = bytes(raw)
        expected = _pb_verdict(pb.PositionInfo.FromString, from_pb_position_info, mutated)
        if expected == "error":
            with pytest.raises(StateCorruptedError):
                decode_position_info(mutated)
        else:
            assert decode_position_info(mutated) == expected


def test_every_truncation_of_a_large_message_is_handled() -> None:
    k = np.arange(3000, dtype=np.int64)
    state = PersistedCursorState(Position(1, 1), ranges=RangeArrays(k, k, k, k + 1), long_arrays={1: k * 977}, batch_deleted=[(Position(1, 2), k[:10])])
    data = encode_position_info(state)
    for cut in range(5, len(data), 97):
        expected = _pb_verdict(pb.PositionInfo.FromString, from_pb_position_info, data[:cut])
        if expected == "error":
            with pytest.raises(StateCorruptedError):
                decode_position_info(data[:cut])
        else:
            assert decode_position_info(data[:cut]) == expected


# ---------------------------------------------------------------------------------------------
# Encoder argument checks


def test_cursor_info_refuses_long_arrays() -> None:
    with pytest.raises(ValueError, match="long-array"):
        encode_managed_cursor_info(PersistedCursorState(Position(1, 1), long_arrays={1: np.array([1])}))


def test_encoder_argument_checks() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        encode_position_info(PersistedCursorState(Position(1, 1), ranges=RangeArrays(np.array([1]), np.array([1]), np.array([1]), np.array([], dtype=np.int64))))
    with pytest.raises(ValueError, match="int64"):
        encode_position_info(PersistedCursorState(Position(1, 1), {"p": 1 << 63}))
    with pytest.raises(ValueError, match="int64"):
        encode_position_info(PersistedCursorState(Position(1 << 64, 1)))
    with pytest.raises(TypeError):
        encode_position_info(PersistedCursorState(Position(1, 1), ranges=RangeArrays(*(np.array([1.5]),) * 4)))
    with pytest.raises(ValueError, match="int64"):
        encode_position_info(PersistedCursorState(Position(1, 1), long_arrays={1: np.array([1 << 63], dtype=np.uint64)}))
    # Other integer dtypes are widened.
    state = PersistedCursorState(Position(1, 1), long_arrays={1: np.array([7], dtype=np.int32)})
    assert decode_position_info(encode_position_info(state)).long_arrays[1].tolist() == [7]
    with pytest.raises(TypeError):
        decode_position_info("08011002")  # type: ignore[arg-type]


def test_varint_sizes_at_every_boundary() -> None:
    values = [0, 1, 127, 128, 16383, 16384] + [(1 << (7 * k)) + d for k in range(2, 10) for d in (-1, 0)] + [(1 << 64) - 1]
    u = np.array(values, dtype=np.uint64)
    assert vx.varint_sizes(u).tolist() == [len(_varint(v)) for v in values]
