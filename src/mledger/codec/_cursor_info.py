"""``PositionInfo`` and ``ManagedCursorInfo`` codecs, byte-identical to protobuf's, at numpy speed.

Encoders write fields in field-number order with every ``repeated int64`` unpacked, exactly as
the generated protobuf serializer (and Pulsar's Java one) does, so
``encode_position_info(s) == <PositionInfo built from s>.SerializeToString()``. The repeated
records go through :mod:`.varint_arrays` (whole-array numpy work, no object per range); scalars,
strings and the walk over top-level fields are plain Python.

Decoders are as tolerant as protobuf: fields in any order, unknown fields (groups included)
skipped, known fields with an unexpected wire type treated as unknown, packed or unpacked
repeated int64, last-one-wins scalars and map keys. Records in the canonical layout are
decoded in bulk; any other record is decoded with the generated classes, with an exponential
back-off so that odd input costs at most a constant factor. Malformed input (truncation,
bad lengths or wire types, a missing required field) raises ``StateCorruptedError``. A
decoder's time and memory are linear in the input size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from ..core import Position, RangeRuns, StateCorruptedError, as_int64
from . import _varint_arrays as vx
from ._cursor_state import PersistedCursorState, RangeArrays
from ._varint import (
    LEN,
    VARINT,
    check_int64,
    decode_utf8,
    get_len,
    get_varint,
    parse_flat,
    put_bytes_field,
    put_tag,
    put_varint,
    read_tag,
    skip_field,
)
from .proto import MLDataFormats_pb2 as pb

__all__ = [
    "decode_managed_cursor_info",
    "decode_position_info",
    "encode_managed_cursor_info",
    "encode_position_info",
    "PositionInfoEntry",
    "PositionInfoRanges",
    "long_list_size",
    "range_record_sizes",
]

_MIN_WINDOW = 1 << 16
_MAX_WINDOW = 1 << 20  # bytes scanned at once: cache-friendly, token arrays ~30 MiB
_MAX_BACKOFF = 1 << 12

# PositionInfo fields
_PI_LEDGER, _PI_ENTRY, _PI_RANGES, _PI_PROPS, _PI_BATCH, _PI_LONGS = 1, 2, 3, 4, 5, 6
# ManagedCursorInfo fields
_MCI_CURSORS_LEDGER, _MCI_MD_LEDGER, _MCI_MD_ENTRY, _MCI_RANGES = 1, 2, 3, 4
_MCI_PROPS, _MCI_LAST_ACTIVE, _MCI_BATCH, _MCI_CURSOR_PROPS = 5, 6, 7, 8

_Buffer = bytes | bytearray | memoryview


# ---------------------------------------------------------------------------------------------
# Encoding


def _int64_array(values: object, what: str) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        return np.empty(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers, got dtype {a.dtype}")
    if a.dtype != np.int64:
        if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{what} holds values outside the int64 range")
        a = a.astype(np.int64)
    return a


def _u64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint64)


def _encode_ranges(field: int, ranges: RangeArrays | None) -> list[np.ndarray]:
    if ranges is None:
        return []
    cols = [_int64_array(c, f"ranges.{name}") for c, name in zip(ranges, RangeArrays._fields, strict=True)]
    n = cols[0].size
    if any(c.size != n for c in cols):
        raise ValueError(f"ranges arrays have different lengths: {[c.size for c in cols]}")
    if n == 0:
        return []
    ll, le, ul, ue = (_u64(c) for c in cols)
    layout = (
        vx.Nested(1, (vx.Scalar(1, ll), vx.Scalar(2, le))),
        vx.Nested(2, (vx.Scalar(1, ul), vx.Scalar(2, ue))),
    )
    return vx.encode_records(field, n, layout)


_REUSED_FROM = 1024
"""Lists of fewer ranges are encoded whole: reusing records saves less than finding them costs
(a cursor with a few hundred holes changes a good part of them between two persists)."""

_PYTHON_RECORDS = 32
"""Up to this many changed ``MessageRange`` records are encoded one by one in Python: below
it the whole-array encoder's fixed cost is the larger."""


def _rows_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row of two ``(n, 4)`` arrays, whether any value differs: the four comparison bytes
    of a row read as one int32 (``any(axis=1)`` over four columns is several times slower)."""
    return (a != b).view(np.int32).ravel()


def _range_record(field: int, ll: int, le: int, ul: int, ue: int) -> bytes:
    """One ``MessageRange`` record of a repeated ``field``, as protobuf writes it."""
    lower = bytearray(b"\x08")
    put_varint(lower, ll)
    lower.append(0x10)
    put_varint(lower, le)
    upper = bytearray(b"\x08")
    put_varint(upper, ul)
    upper.append(0x10)
    put_varint(upper, ue)
    body = b"".join((b"\x0a", bytes((len(lower),)), lower, b"\x12", bytes((len(upper),)), upper))
    out = bytearray()
    put_tag(out, field, LEN)
    put_varint(out, len(body))
    out += body
    return bytes(out)


class PositionInfoRanges:
    """Encodes the ``individualDeletedMessages`` field of successive ``PositionInfo`` records
    of one cursor (:func:`encode_position_info`'s ``ranges_bytes``), reusing the bytes of the
    records the last call's ranges share with these at their start and at their end: a
    persist often changes a few ranges of a long list, so only those are encoded again.

    The bytes equal those :func:`encode_position_info` writes for the same ranges (each
    record's encoding depends on its own four values only). O(n) comparisons plus O(changed
    records) encoding; keeps a copy of the last ranges (32 bytes a range) and their bytes.
    :meth:`size` sizes the field the same way, from the last ranges it sized, and
    :meth:`size_runs` from a range set's runs, per ledger; :meth:`size_others` sizes the
    other fields of a record, keeping the sizes of its batch records."""

    __slots__ = (
        "_batch_list",
        "_batch_sized",
        "_data",
        "_rows",
        "_runs_sized",
        "_sized_records",
        "_sized_rows",
        "_sizes",
    )

    def __init__(self) -> None:
        self._rows = np.empty((0, 4), dtype=np.int64)
        self._data = b""
        self._sizes: np.ndarray | None = np.empty(0, dtype=np.int64)  # bytes per record; None: not counted
        self._sized_rows = np.empty((0, 4), dtype=np.int64)  # the last ranges sized, and their records' bytes
        self._sized_records = np.empty(0, dtype=np.int64)
        # the RangeRuns last sized: its ledgers and parts (shared by the range set), the bytes of
        # each part's records, what decides its one- and ten-byte varints (_sized_part) and the total
        self._runs_sized: tuple[tuple[int, ...], tuple[object, ...], list[int], list[_Head | None], int] | None = None
        # (ledger id, entry id, id(words)) -> (words, its record's bytes): the batch states last sized
        self._batch_sized: dict[tuple[int, int, int], tuple[np.ndarray, int]] = {}
        # the batch_deleted list last sized and its records' bytes (records share a list while
        # their batch states stay the same)
        self._batch_list: tuple[list[tuple[Position, np.ndarray]], int] | None = None

    def encode(self, ranges: RangeArrays) -> bytes:
        """The field's bytes for ``ranges`` (raises like :func:`encode_position_info`)."""
        cols = _range_columns(ranges)
        n = cols[0].size
        if n < _REUSED_FROM:
            self._rows, self._data, self._sizes = np.empty((0, 4), dtype=np.int64), b"", None
            return b"".join(_encode_ranges(_PI_RANGES, RangeArrays(*cols)))  # type: ignore[arg-type]
        rows = np.column_stack(cols)
        prev = self._rows
        m = prev.shape[0]
        head, tail = _shared_ends(rows, prev)
        middle = rows[head : n - tail]
        sizes: np.ndarray | None = None
        if middle.shape[0] > max(n // 2, _PYTHON_RECORDS):  # mostly changed: encoded whole
            head = tail = 0
            middle = rows
        if middle is rows:
            encoded = b"".join(_encode_ranges(_PI_RANGES, RangeArrays(*cols)))  # type: ignore[arg-type]
        elif middle.shape[0] <= _PYTHON_RECORDS:
            records = [_range_record(_PI_RANGES, *r) for r in middle.tolist()]
            encoded = b"".join(records)
            sizes = np.array([len(r) for r in records], dtype=np.int64)
        else:  # sizes counted only if a later call reuses some of these records
            columns = RangeArrays(*(np.ascontiguousarray(middle[:, j]) for j in range(4)))
            encoded = b"".join(_encode_ranges(_PI_RANGES, columns))  # type: ignore[arg-type]
        data = encoded
        if head or tail:
            known = self._sizes if self._sizes is not None else _record_sizes(prev)
            start, end = int(known[:head].sum()), len(self._data) - int(known[m - tail :].sum())
            data = b"".join((self._data[:start], encoded, self._data[end:]))
            if sizes is not None:
                sizes = np.concatenate((known[:head], sizes, known[m - tail :]))
        self._rows, self._data, self._sizes = rows, data, sizes
        return data

    def size(self, ranges: RangeArrays) -> int:
        """The bytes of the field :meth:`encode` would return for ``ranges``, without encoding
        them (raises like it): the records' sizes the last call's ranges share with these at
        their start and at their end reused, like :meth:`encode`'s bytes. O(n) comparisons
        plus O(changed records) varint sizes."""
        cols = _range_columns(ranges)
        n = cols[0].size
        rows = np.column_stack(cols) if n else np.empty((0, 4), dtype=np.int64)
        if n < _REUSED_FROM:
            self._sized_rows, self._sized_records = np.empty((0, 4), dtype=np.int64), np.empty(0, dtype=np.int64)
            return int(_record_sizes(rows).sum())
        prev, known = self._sized_rows, self._sized_records
        m = prev.shape[0]
        head, tail = _shared_ends(rows, prev)
        if head or tail:
            records = np.concatenate((known[:head], _record_sizes(rows[head : n - tail]), known[m - tail :]))
        else:
            records = _record_sizes(rows)
        self._sized_rows, self._sized_records = rows, records
        return int(records.sum())

    def size_runs(self, runs: RangeRuns, run_count: Callable[[int], int] | None = None) -> int:
        """:meth:`size` of the ranges of ``runs`` (:meth:`RangeRuns.arrays`), without deriving
        them: each ledger's records sized from its run bounds (:meth:`RangeRuns.run_bounds`),
        and kept while its part is the same object (a range set shares a ledger's part until
        the ledger changes). O(ledgers) identity checks plus O(containers) per ledger changed.

        ``run_count``: the runs of a ledger whose part is whole (what the range set that just
        exported ``runs`` keeps counted: :meth:`AckRangeSet.ledger_size
        <mledger.core.AckRangeSet.ledger_size>`). With it, a changed ledger whose entries all
        lie below 16,384 is sized in O(1) bitmap calls (:func:`_sized_part`)."""
        last = self._runs_sized
        parts = runs.parts
        if last is not None and last[0] == runs.ledgers:
            sizes, heads, total = last[2], last[3], last[4]
            changed = [i for i, (part, before) in enumerate(zip(parts, last[1], strict=True)) if part is not before]
            if changed:
                sizes, heads = list(sizes), list(heads)
                for i in changed:
                    size, heads[i] = _sized_part(runs, i, last[1][i], heads[i], run_count)
                    total += size - sizes[i]
                    sizes[i] = size
        else:
            known = {} if last is None else {k[0]: k[1:] for k in zip(last[0], last[1], last[2], last[3], strict=True)}
            sizes, heads = [], []
            for i, (ledger_id, part) in enumerate(zip(runs.ledgers, parts, strict=True)):
                hit = known.get(ledger_id)
                if hit is None:
                    size, head = _sized_part(runs, i, None, None, run_count)
                elif hit[0] is part:
                    size, head = hit[1], hit[2]
                else:
                    size, head = _sized_part(runs, i, hit[0], hit[2], run_count)
                sizes.append(size)
                heads.append(head)
            total = sum(sizes)
        self._runs_sized = (runs.ledgers, parts, sizes, heads, total)
        return total

    def size_others(self, state: PersistedCursorState) -> int:
        """The bytes of every field of ``state``'s ``PositionInfo`` but the ranges: the
        length of :func:`encode_position_info` with ``ranges_bytes=b""`` (raises like it).
        O(batch states) dictionary lookups for batch states given as the same word arrays as
        the last call's (a cursor's persists write the same partly acknowledged batches again
        and again), O(1) for the very list of the last call (records are never changed); the
        properties and long arrays are encoded."""
        batch = state.batch_deleted
        if state.long_arrays or len(batch) > _SMALL_BATCH:
            return len(encode_position_info(state, ranges_bytes=b""))
        ledger, entry = state.mark_delete
        size = 2 + _varint_len(check_int64(ledger, "mark_delete ledger id"))
        size += _varint_len(check_int64(entry, "mark_delete entry id"))
        if state.properties:
            props = bytearray()
            _encode_long_properties(props, _PI_PROPS, state.properties)
            size += len(props)
        last_list = self._batch_list
        if last_list is not None and last_list[0] is batch:
            return size + last_list[1]
        batch_bytes = self._size_batch(batch)
        if batch_bytes is None:
            return len(encode_position_info(state, ranges_bytes=b""))
        self._batch_list = (batch, batch_bytes)
        return size + batch_bytes

    def _size_batch(self, batch: list[tuple[Position, np.ndarray]]) -> int | None:
        """The bytes of the batch records of ``batch`` (:meth:`size_others`), or None for words
        that are not a 1-d int64 array (then encoded). Raises like :func:`encode_position_info`."""
        size = 0
        known = self._batch_sized
        sized: dict[tuple[int, int, int], tuple[np.ndarray, int]] = {}
        tag = (_PI_BATCH << 3) | LEN
        for position, words in batch:
            key = (position[0], position[1], id(words))
            last = known.get(key)
            if last is None or last[0] is not words:
                if not (isinstance(words, np.ndarray) and words.dtype == np.int64 and words.ndim == 1):
                    return None
                le = words.astype("<i8", copy=False).tobytes()
                ledger_id = check_int64(position[0], "batch position ledger id")
                last = (
                    words,
                    len(_batch_record(tag, ledger_id, check_int64(position[1], "batch position entry id"), le)),
                )
            sized[key] = last
            size += last[1]
        self._batch_sized = sized
        return size


_VARINT_STEPS = [0] + [1 << (7 * k) for k in range(1, 9)]
"""0, then the smallest non-negative int64 of each varint length from 2 bytes to 9."""
_STEPS = len(_VARINT_STEPS)


_HEAD = 129
"""Entries 0 .. 128 of a ledger: they decide which run bounds of a ledger whose entries all lie
below 16,384 take one byte or ten (a first entry 0: ``first - 1`` is -1) rather than two."""
_HEAD_STEPS = _VARINT_STEPS[:2]


class _Head(NamedTuple):
    """What a part's entries 0 .. 128 decide of its records' bytes (:func:`_sized_part`)."""

    cardinality: int
    """Its entries among 0 .. 128."""
    from_zero: int
    """1 when a run starts at entry 0 (its ``first - 1`` takes ten bytes), else 0."""
    one_byte_firsts: int
    """Runs starting at entries 1 .. 128 (``first - 1`` below 128: one byte)."""
    one_byte_lasts: int
    """Runs ending below entry 128 (one byte)."""


def _sized_part(
    runs: RangeRuns,
    index: int,
    before: object,
    before_head: _Head | None,
    run_count: Callable[[int], int] | None,
) -> tuple[int, _Head | None]:
    """:func:`_part_size` of ``ledgers[index]``, and its :class:`_Head` where it applies.

    A whole ledger's part whose entries all lie below 16,384 (every bound ``first - 1`` and
    ``last`` a varint of at most two bytes) with ``run_count``: each of its ``n`` records takes
    10 bytes of tags and lengths, the ledger id twice and two bytes per bound, less one per
    bound below 128, plus eight for a first entry 0 (-1 takes ten): ``n * (14 + 2 * ledger
    bytes) - one_byte_firsts - one_byte_lasts + 8 * from_zero``. Those counts depend on entries
    0 .. 128 only: kept from the ledger's part sized ``before`` when that part is a subset of
    this one with as many entries there (then the same ones), else counted
    (:meth:`RangeRuns.run_bounds` up to 128). O(1) bitmap calls when kept."""
    part = runs.parts[index]
    if run_count is None or isinstance(part, tuple) or not part or part.max() >= _VARINT_STEPS[2]:
        return _part_size(runs, index), None
    cardinality = part.range_cardinality(0, _HEAD)
    head = before_head
    if head is None or head.cardinality != cardinality or isinstance(before, tuple) or not before.issubset(part):  # type: ignore[attr-defined]
        _, firsts_below, lasts_below = runs.run_bounds(index, _HEAD_STEPS)
        head = _Head(cardinality, firsts_below[0], firsts_below[1] - firsts_below[0], lasts_below[1])
    ledger_id = runs.ledgers[index]
    ledger_bytes = _varint_len(check_int64(ledger_id, "ranges.lower_ledger"))
    n = run_count(ledger_id)
    return n * (14 + 2 * ledger_bytes) - head.one_byte_firsts - head.one_byte_lasts + 8 * head.from_zero, head


def _part_size(runs: RangeRuns, index: int) -> int:
    """Bytes of the ``MessageRange`` records of the runs ``runs`` keeps of ``ledgers[index]``:
    ten of tags and one-byte lengths each and four varints (:func:`_record_sizes`)."""
    n, firsts_below, lasts_below = runs.run_bounds(index, _VARINT_STEPS)
    ledger_bytes = _varint_len(check_int64(runs.ledgers[index], "ranges.lower_ledger"))
    # varint bytes of the n firsts - 1 and of the n lasts: a negative takes 10 bytes, a
    # non-negative one more for each step from the second that it reaches, that is per column
    # 10 * below[0] + (n - below[0]) + the sum over k >= 1 of (n - below[k])
    values = n * (10 + 2 * ledger_bytes + 2 * _STEPS)
    return values + 10 * (firsts_below[0] + lasts_below[0]) - sum(firsts_below) - sum(lasts_below)


def _varint_len(value: int) -> int:
    """Bytes of one int64 as a varint (a negative takes 10)."""
    return 10 if value < 0 else max(1, -(-value.bit_length() // 7))


def _record_sizes(rows: np.ndarray) -> np.ndarray:
    """Bytes of the ``MessageRange`` record of each row of a C-contiguous ``(n, 4)`` int64
    array: ten of tags and one-byte lengths (two positions of two varints each stay below
    0x80) and its four varints. O(n), one varint sizing for the four columns."""
    n = rows.shape[0]
    return 10 + vx.varint_sizes(rows.view(np.uint64).ravel()).reshape(n, 4).sum(axis=1)


def _shared_ends(rows: np.ndarray, prev: np.ndarray) -> tuple[int, int]:
    """How many rows two ``(n, 4)`` arrays share at their start and then at their end (the
    head first: the two never overlap). O(n)."""
    n, m = rows.shape[0], prev.shape[0]
    k = min(n, m)
    head = tail = 0
    if k and (rows[0] == prev[0]).all():
        found = np.flatnonzero(_rows_differ(rows[:k], prev[:k]))
        head = int(found[0]) if found.size else k
        k -= head
    if k and (rows[-1] == prev[-1]).all():
        found = np.flatnonzero(_rows_differ(rows[n - k :], prev[m - k :]))
        tail = k - int(found[-1]) - 1 if found.size else k
    return head, tail


def _range_columns(ranges: RangeArrays) -> list[np.ndarray]:
    """The four columns of ``ranges`` as checked int64 arrays of one length."""
    cols = [_int64_array(c, f"ranges.{name}") for c, name in zip(ranges, RangeArrays._fields, strict=True)]
    if any(c.size != cols[0].size for c in cols):
        raise ValueError(f"ranges arrays have different lengths: {[c.size for c in cols]}")
    return cols


_RANGE_RECORD_MAX = 50
"""The most bytes of one ``MessageRange`` record: ten of tags and one-byte lengths
(:func:`_record_sizes`) and four int64 varints of at most ten bytes each."""

_POSITION_MAX = 24
"""The most bytes of a ``NestedPositionInfo`` field inside a record, tag and length included:
two one-byte tags and two int64 varints of at most ten bytes, one-byte tag and length."""


def _others_bound(state: PersistedCursorState) -> int | None:
    """An upper bound of :meth:`PositionInfoRanges.size_others`, O(batch states) at C speed, or
    None for a state with properties or long arrays (then sized). The mark-delete takes two
    one-byte tags and two varints of at most ten bytes; a batch record (:func:`_batch_record`)
    a one-byte tag, the varint of its body's length and the body: the position
    (:data:`_POSITION_MAX`) and a one-byte tag and a varint of at most ten bytes per word, so
    no more than the body of the record with the most words, whose length's varint is the
    longest."""
    if state.properties or state.long_arrays:
        return None
    batch = state.batch_deleted
    if not batch:
        return 22
    words = [len(w) for _, w in batch]
    most = _POSITION_MAX + 11 * max(words)
    return 22 + len(words) * (1 + _varint_len(most) + _POSITION_MAX) + 11 * sum(words)


class PositionInfoEntry:
    """A ``PositionInfo`` record whose size is known, or bounded, before its bytes:
    ``bytes()`` encodes the record once, the ranges through the cursor's
    :class:`PositionInfoRanges`, byte for byte what :func:`encode_position_info` writes.

    For a store that keeps few of the records it is given (a replay's store keeps the last of
    a cursor ledger): a record nobody reads is never encoded, and a record given as ``runs``
    is not even sized until someone asks. :meth:`bound` is an upper bound of the size in O(1);
    :meth:`fits` checks a limit against it and sizes the record exactly only when the bound
    reaches the limit; ``len()`` is exact (the ranges sized per ledger changed since the last
    record sized, :meth:`PositionInfoRanges.size_runs`; the other fields by
    :meth:`PositionInfoRanges.size_others`). ``runs``: the record's ranges as a range
    set's runs (``state.ranges`` is then None; immutable, whatever the set does next), derived
    only when the record is built; ``run_count``: that set's run count per ledger, read only by
    :meth:`fits`, which must therefore run while the set is as it was when it exported
    ``runs`` (``len()`` never reads it). ``state`` must not change afterwards. Raises like
    :func:`encode_position_info`, when built."""

    __slots__ = ("_bound", "_data", "_ranges", "_run_count", "_runs", "_size", "_state")

    def __init__(
        self,
        state: PersistedCursorState,
        ranges: PositionInfoRanges,
        runs: RangeRuns | None = None,
        run_count: Callable[[int], int] | None = None,
    ) -> None:
        if runs is not None and state.ranges is not None:
            raise ValueError("a PositionInfoEntry takes its ranges from the state or from runs, not both")
        self._state = state
        self._ranges = ranges
        self._runs = runs
        self._run_count = run_count
        self._data: bytes | None = None
        self._size: int | None = None
        if runs is None:  # sized at once
            others = ranges.size_others(state)  # every field but the ranges
            self._size = self._bound = others if state.ranges is None else others + ranges.size(state.ranges)
        else:
            others_bound = _others_bound(state)
            if others_bound is None:
                others_bound = ranges.size_others(state)
            self._bound = others_bound + _RANGE_RECORD_MAX * runs.count

    def bound(self) -> int:
        """An upper bound of ``len()``, O(1) (worked out with the record, O(batch states)):
        the other fields' bound (:func:`_others_bound`, or their bytes) and
        :data:`_RANGE_RECORD_MAX` per range (each of the ``runs.count`` ranges is one
        ``MessageRange`` record, and none takes more), or the exact size once known."""
        return self._bound if self._size is None else self._size

    def fits(self, limit: int) -> bool:
        """``len(self) <= limit``: decided by :meth:`bound` when it is within ``limit``, else
        by the exact size (sized with ``run_count``: call it while the range set is as it was
        when it exported the record's runs)."""
        return self.bound() <= limit or self._sized(self._run_count) <= limit

    def __len__(self) -> int:
        return self._sized(None)

    def _sized(self, run_count: Callable[[int], int] | None) -> int:
        if self._size is None:
            assert self._runs is not None  # a record of the state's ranges is sized at once
            self._size = self._ranges.size_others(self._state) + self._ranges.size_runs(self._runs, run_count)
        return self._size

    def __bytes__(self) -> bytes:
        if self._data is None:
            state, runs = self._state, self._runs
            ranges = state.ranges
            if runs is not None:
                ledgers, lowers, uppers = runs.arrays()
                ranges = RangeArrays(ledgers, lowers, ledgers, uppers)
            ranges_bytes = None if ranges is None else self._ranges.encode(ranges)
            self._data = encode_position_info(state, ranges_bytes=ranges_bytes)
            if self._size is not None and len(self._data) != self._size:
                raise AssertionError(f"PositionInfo sized {self._size} bytes, encoded {len(self._data)}")
            self._size = len(self._data)
        return self._data


def _flatten_words(words: list[np.ndarray], what: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = [_int64_array(w, what) for w in words]
    counts = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    return _u64(flat), counts


_SMALL_BATCH = 64
"""Up to this many batch-deletion records are encoded one by one: a persisted state usually
has a few, and the whole-array encoder's fixed cost is that of dozens of records."""


def _encode_batch(field: int, batch: list[tuple[Position, np.ndarray]]) -> list[bytes | np.ndarray]:
    if not batch:
        return []
    if len(batch) <= _SMALL_BATCH and all(
        isinstance(w, np.ndarray) and w.dtype == np.int64 and w.ndim == 1 for _, w in batch
    ):
        return [_small_batch(field, batch)]
    ledgers = np.array([check_int64(p[0], "batch position ledger id") for p, _ in batch], dtype=np.int64)
    entries = np.array([check_int64(p[1], "batch position entry id") for p, _ in batch], dtype=np.int64)
    flat, counts = _flatten_words([w for _, w in batch], "batch_deleted words")
    layout = (vx.Nested(1, (vx.Scalar(1, _u64(ledgers)), vx.Scalar(2, _u64(entries)))),)
    chunks: list[bytes | np.ndarray] = [*vx.encode_records(field, len(batch), layout, 2, flat, counts)]
    return chunks


def _small_batch(field: int, batch: list[tuple[Position, np.ndarray]]) -> bytes:
    """``BatchedEntryDeletionIndexInfo`` records one by one (int64 word arrays only): the same
    bytes as the whole-array path."""
    tag = (field << 3) | 2
    return b"".join(
        _batch_record(
            tag,
            check_int64(p[0], "batch position ledger id"),
            check_int64(p[1], "batch position entry id"),
            words.astype("<i8", copy=False).tobytes(),
        )
        for p, words in batch
    )


@functools.lru_cache(maxsize=1 << 14)
def _batch_record(tag: int, ledger_id: int, entry_id: int, words_le: bytes) -> bytes:
    """One ``BatchedEntryDeletionIndexInfo`` record, tag and length included, of the int64
    words whose little-endian bytes are ``words_le``. Memoised: a cursor persists the same
    partly acknowledged batches again and again (every persist writes them all, and most
    change less often than the cursor persists)."""
    words = np.frombuffer(words_le, dtype="<i8").tolist()
    position = bytearray(b"\x08")
    put_varint(position, ledger_id)
    position.append(0x10)
    put_varint(position, entry_id)
    body = bytearray((0x0A, len(position)))  # at most 22 bytes: a one-byte length
    body += position
    for word in words:
        body.append(0x10)
        put_varint(body, word)
    out = bytearray((tag,))
    put_varint(out, len(body))
    out += body
    return bytes(out)


def _encode_long_arrays(field: int, long_arrays: Mapping[int, np.ndarray] | None) -> list[np.ndarray]:
    if not long_arrays:
        return []
    keys = np.array([check_int64(k, "long_arrays ledger id") for k in long_arrays], dtype=np.int64)
    flat, counts = _flatten_words(list(long_arrays.values()), "long_arrays words")
    return vx.encode_records(field, keys.size, (vx.Scalar(1, _u64(keys)),), 2, flat, counts)


def _encode_long_properties(out: bytearray, field: int, props: Mapping[str, int]) -> None:
    for name, value in props.items():
        body = bytearray()
        put_bytes_field(body, 1, name.encode("utf-8"))
        put_tag(body, 2, VARINT)
        put_varint(body, check_int64(value, f"property {name!r}"))
        put_bytes_field(out, field, bytes(body))


def _encode_string_properties(out: bytearray, field: int, props: Mapping[str, str]) -> None:
    for name, value in props.items():
        body = bytearray()
        put_bytes_field(body, 1, name.encode("utf-8"))
        put_bytes_field(body, 2, value.encode("utf-8"))
        put_bytes_field(out, field, bytes(body))


def _put_int64_field(out: bytearray, field: int, value: int, what: str) -> None:
    put_tag(out, field, VARINT)
    put_varint(out, check_int64(value, what))


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Varint bytes of each int64 (negative ones take 10, as int64 on the wire)."""
    return vx.varint_sizes(np.asarray(values, dtype=np.int64).view(np.uint64))


def range_record_sizes(ledger_id: int, lowers: np.ndarray, uppers: np.ndarray) -> np.ndarray:
    """Bytes each ``MessageRange`` of one ledger takes in ``individualDeletedMessages``
    (tag and length included), for ranges ``(ledger_id:lower..ledger_id:upper]``. O(n)."""
    lid = int(_varint_sizes(np.array([ledger_id]))[0])
    lower_npi = 2 + lid + _varint_sizes(lowers)
    upper_npi = 2 + lid + _varint_sizes(uppers)
    body = 2 + lower_npi + 2 + upper_npi
    return 1 + _varint_sizes(body) + body


def long_list_size(ledger_id: int, words: np.ndarray) -> int:
    """Bytes one ``LongListMap`` of ``individualDeletedMessageRanges`` takes (tag and length
    included): a ledger id and its BitSet words, unpacked as Pulsar writes them. O(words)."""
    body = 1 + int(_varint_sizes(np.array([ledger_id]))[0]) + int((1 + _varint_sizes(words)).sum())
    return 1 + int(_varint_sizes(np.array([body]))[0]) + body


def encode_position_info(state: PersistedCursorState, ranges_bytes: bytes | None = None) -> bytes:
    """Serialize ``state`` as a ``PositionInfo`` (a cursor-ledger entry).

    Writes fields 1, 2 (mark-delete), 3 (``ranges``, when not None), 4 (``properties``), 5
    (``batch_deleted``) and 6 (``long_arrays``, when not None), each repeated record in the
    given order. ``cursor_properties``, ``cursors_ledger_id`` and ``last_active`` have no place
    in a ``PositionInfo`` and are not written. O(total values), numpy-vectorised.
    ``ranges_bytes``: field 3 already encoded (:class:`PositionInfoRanges`), written instead of
    ``state.ranges``. Raises ``ValueError``/``TypeError`` for values that are not int64 or
    arrays of unequal length.
    """
    head = bytearray()
    _put_int64_field(head, _PI_LEDGER, state.mark_delete[0], "mark_delete ledger id")
    _put_int64_field(head, _PI_ENTRY, state.mark_delete[1], "mark_delete entry id")
    props = bytearray()
    _encode_long_properties(props, _PI_PROPS, state.properties)
    parts: list[bytes | bytearray | np.ndarray] = [head]
    if ranges_bytes is None:
        parts += _encode_ranges(_PI_RANGES, state.ranges)
    else:
        parts.append(ranges_bytes)
    parts.append(props)
    parts += _encode_batch(_PI_BATCH, state.batch_deleted)
    parts += _encode_long_arrays(_PI_LONGS, state.long_arrays)
    return b"".join(parts)  # type: ignore[arg-type]  # numpy arrays are buffers


def encode_managed_cursor_info(state: PersistedCursorState) -> bytes:
    """Serialize ``state`` as a ``ManagedCursorInfo`` (the metadata-store node).

    Writes ``cursors_ledger_id`` (1), the mark-delete position (2, 3), ``ranges`` (4),
    ``properties`` (5), ``last_active`` (6, when not None), ``batch_deleted`` (7) and
    ``cursor_properties`` (8). Raises ``ValueError`` when ``long_arrays`` is not empty: the
    message has no field for it and state is never dropped silently. O(total values).
    """
    if state.long_arrays:
        raise ValueError("ManagedCursorInfo has no long-array field: convert long_arrays to ranges first")
    head = bytearray()
    _put_int64_field(head, _MCI_CURSORS_LEDGER, state.cursors_ledger_id, "cursors_ledger_id")
    _put_int64_field(head, _MCI_MD_LEDGER, state.mark_delete[0], "mark_delete ledger id")
    _put_int64_field(head, _MCI_MD_ENTRY, state.mark_delete[1], "mark_delete entry id")
    middle = bytearray()
    _encode_long_properties(middle, _MCI_PROPS, state.properties)
    if state.last_active is not None:
        _put_int64_field(middle, _MCI_LAST_ACTIVE, state.last_active, "last_active")
    tail = bytearray()
    _encode_string_properties(tail, _MCI_CURSOR_PROPS, state.cursor_properties)
    parts: list[bytes | bytearray | np.ndarray] = [head]
    parts += _encode_ranges(_MCI_RANGES, state.ranges)
    parts.append(middle)
    parts += _encode_batch(_MCI_BATCH, state.batch_deleted)
    parts.append(tail)
    return b"".join(parts)  # type: ignore[arg-type]  # numpy arrays are buffers


# ---------------------------------------------------------------------------------------------
# Decoding


def _parse_pb(cls: Callable[[bytes], object], raw: bytes, what: str) -> object:
    try:
        msg = cls(raw)
    except Exception as exc:  # protobuf raises DecodeError, and RecursionError on deep groups
        raise StateCorruptedError(f"malformed {what}: {exc}") from exc
    if not msg.IsInitialized():  # type: ignore[attr-defined]
        raise StateCorruptedError(f"{what} is missing required fields")
    return msg


class _Repeated:
    """One repeated message field: bulk scans of canonical runs, protobuf for the rest."""

    what = "record"

    def __init__(self, field: int) -> None:
        self.tag = (field << 3) | LEN
        self._skip = 0
        self._backoff = 1

    def take(self, mv: memoryview, arr: np.ndarray, tag_pos: int, pos: int, end: int) -> int:
        """Consume the record whose tag starts at ``tag_pos`` (and any canonical run after it)."""
        if self._skip == 0 and pos == tag_pos + 1:
            new_pos = self._fast(mv, arr, tag_pos, end)
            if new_pos > tag_pos:
                self._backoff = 1
                return new_pos
            self._skip = self._backoff
            self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
        elif self._skip:
            self._skip -= 1
        stop, start = get_len(mv, pos, end)
        self._slow(bytes(mv[start:stop]))
        return stop

    def _fast(self, mv: memoryview, arr: np.ndarray, pos: int, end: int) -> int:
        window = _MIN_WINDOW
        while pos < end and mv[pos] == self.tag:
            stop, _ = get_len(mv, pos + 1, end)
            if stop - pos > _MAX_WINDOW:
                # Tokenizing costs tens of bytes of index arrays per input byte: a record this
                # big is streamed instead, so that memory stays bounded whatever the input.
                consumed = self._scan_big(mv, arr, pos, stop)
            else:
                consumed = self._scan(arr, pos, min(end, pos + max(window, stop - pos)))
            if not consumed:
                break
            pos += consumed
            window = min(window * 2, _MAX_WINDOW)
        return pos

    def _scan(self, arr: np.ndarray, lo: int, hi: int) -> int:
        """Bulk-decode canonical records from ``lo``; return the bytes consumed (0: none)."""
        raise NotImplementedError

    def _scan_big(self, mv: memoryview, arr: np.ndarray, pos: int, stop: int) -> int:
        """Decode the one canonical record ``[pos, stop)`` larger than a window, or return 0."""
        return 0

    def _slow(self, raw: bytes) -> None:
        raise NotImplementedError


class _Ranges(_Repeated):
    what = "MessageRange"
    _MIN_RECORD = 14  # tag, length and two embedded positions of one-byte varints

    def __init__(self, field: int) -> None:
        super().__init__(field)
        self._cols: np.ndarray | None = None
        self._n = 0
        self.seen = False

    def _room(self, arr: np.ndarray, lo: int) -> np.ndarray:
        # Every record of the field lies after the first one and takes at least 14 bytes, so
        # one allocation sized from there holds them all: no chunk list, no final concatenate
        # (pages never written are never touched).
        if self._cols is None:
            self._cols = np.empty((4, (arr.size - lo) // self._MIN_RECORD + 1), dtype=np.int64)
        return self._cols

    def _scan(self, arr: np.ndarray, lo: int, hi: int) -> int:
        cols = self._room(arr, lo)
        run = vx.scan_ranges(arr, lo, hi, self.tag, cols[:, self._n :])
        if run is None:
            return 0
        self._n += run.lower_ledger.size
        self.seen = True
        return run.consumed

    def _slow(self, raw: bytes) -> None:
        m = _parse_pb(pb.MessageRange.FromString, raw, self.what)
        lo, up = m.lowerEndpoint, m.upperEndpoint  # type: ignore[attr-defined]
        assert self._cols is not None
        if self._n == self._cols.shape[1]:  # cannot happen for valid records; cheap insurance
            self._cols = np.concatenate([self._cols, np.empty_like(self._cols)], axis=1)
        self._cols[:, self._n] = (lo.ledgerId, lo.entryId, up.ledgerId, up.entryId)
        self._n += 1
        self.seen = True

    def take(self, mv: memoryview, arr: np.ndarray, tag_pos: int, pos: int, end: int) -> int:
        self._room(arr, tag_pos)
        return super().take(mv, arr, tag_pos, pos, end)

    def result(self) -> RangeArrays | None:
        if not self.seen or self._cols is None:
            return None
        cols = [self._cols[i, : self._n] for i in range(4)]
        if 2 * self._n < self._cols.shape[1]:  # mostly other fields: do not pin the spare room
            cols = [c.copy() for c in cols]
        return RangeArrays(*cols)


class _PairRecords(_Repeated):
    """``LongListMap`` (``nested=False``) or ``BatchedEntryDeletionIndexInfo`` (``nested=True``)."""

    def __init__(self, field: int, nested: bool) -> None:
        super().__init__(field)
        self.nested = nested
        self.what = "BatchedEntryDeletionIndexInfo" if nested else "LongListMap"
        self.head_tags = (0x0A, 0x08, 0x10) if nested else (0x08,)
        self.items: list[tuple[tuple[int, ...], np.ndarray]] = []

    def _scan(self, arr: np.ndarray, lo: int, hi: int) -> int:
        run = vx.scan_pair_records(arr, lo, hi, self.tag, self.head_tags, self.nested, 0x10)
        if run is None:
            return 0
        heads = zip(*(h.tolist() for h in run.head), strict=True)
        bounds = np.cumsum(run.counts)[:-1]
        self.items += zip(heads, np.split(run.tail, bounds), strict=True)
        return run.consumed

    def _scan_big(self, mv: memoryview, arr: np.ndarray, pos: int, stop: int) -> int:
        _, p = get_varint(mv, pos + 1, stop)
        head: list[int] = []
        if self.nested:
            if p >= stop or mv[p] != 0x0A:
                return 0
            inner_stop, p = get_len(mv, p + 1, stop)
            for tag in (0x08, 0x10):
                if p >= inner_stop or mv[p] != tag:
                    return 0
                value, p = get_varint(mv, p + 1, inner_stop)
                head.append(as_int64(value))
            if p != inner_stop:
                return 0
        else:
            if p >= stop or mv[p] != 0x08:
                return 0
            value, p = get_varint(mv, p + 1, stop)
            head.append(as_int64(value))
        chunks = []
        while p < stop:
            values, consumed = vx.scan_tail_pairs(arr, p, min(stop, p + _MAX_WINDOW), 0x10)
            if not consumed:
                return 0
            chunks.append(values)
            p += consumed
        self.items.append((tuple(head), np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)))
        return stop - pos

    def _slow(self, raw: bytes) -> None:
        if self.nested:
            m = _parse_pb(pb.BatchedEntryDeletionIndexInfo.FromString, raw, self.what)
            p = m.position  # type: ignore[attr-defined]
            head: tuple[int, ...] = (p.ledgerId, p.entryId)
            words = m.deleteSet  # type: ignore[attr-defined]
        else:
            m = _parse_pb(pb.LongListMap.FromString, raw, self.what)
            head = (m.key,)  # type: ignore[attr-defined]
            words = m.values  # type: ignore[attr-defined]
        self.items.append((head, np.fromiter(words, dtype=np.int64, count=len(words))))


class _Walk(NamedTuple):
    scalars: dict[int, int]
    ranges: RangeArrays | None
    long_props: dict[str, int]
    string_props: dict[str, str]
    batch: list[tuple[Position, np.ndarray]]
    long_arrays: dict[int, np.ndarray] | None


def _view(data: _Buffer) -> memoryview:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes-like data, got {type(data).__name__}")
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def _walk(
    data: _Buffer,
    scalar_fields: frozenset[int],
    ranges_field: int,
    props_field: int,
    batch_field: int,
    longs_field: int | None,
    string_props_field: int | None,
) -> _Walk:
    mv = _view(data)
    arr = np.frombuffer(mv, dtype=np.uint8)
    end = len(mv)
    scalars: dict[int, int] = {}
    long_props: dict[str, int] = {}
    string_props: dict[str, str] = {}
    ranges = _Ranges(ranges_field)
    batch = _PairRecords(batch_field, nested=True)
    longs = _PairRecords(longs_field, nested=False) if longs_field is not None else None
    repeated: dict[int, _Repeated] = {ranges_field: ranges, batch_field: batch}
    if longs is not None and longs_field is not None:
        repeated[longs_field] = longs
    pos = 0
    while pos < end:
        tag_pos = pos
        field, wire_type, pos = read_tag(mv, pos, end)
        if wire_type == VARINT and field in scalar_fields:
            scalars[field], pos = get_varint(mv, pos, end)
        elif wire_type != LEN:
            pos = skip_field(mv, pos, end, field, wire_type)
        elif field in repeated:
            pos = repeated[field].take(mv, arr, tag_pos, pos, end)
        elif field == props_field or field == string_props_field:
            stop, start = get_len(mv, pos, end)
            is_long = field == props_field
            what = "LongProperty" if is_long else "StringProperty"
            found = parse_flat(mv, start, stop, {1: LEN, 2: VARINT if is_long else LEN}, what)
            if 1 not in found or 2 not in found:
                raise StateCorruptedError(f"{what} at offset {start} is missing required fields")
            name = decode_utf8(found[1])  # type: ignore[arg-type]
            if is_long:
                long_props[name] = as_int64(found[2])  # type: ignore[arg-type]
            else:
                string_props[name] = decode_utf8(found[2])  # type: ignore[arg-type]
            pos = stop
        else:
            pos = skip_field(mv, pos, end, field, wire_type)
    batch_list = [(Position(h[0], h[1]), w) for h, w in batch.items]
    long_arrays: dict[int, np.ndarray] | None = None
    if longs is not None and longs.items:
        long_arrays = {}
        for h, w in longs.items:
            long_arrays[h[0]] = w
    return _Walk(
        {k: as_int64(v) for k, v in scalars.items()},
        ranges.result(),
        long_props,
        string_props,
        batch_list,
        long_arrays,
    )


def decode_position_info(data: _Buffer) -> PersistedCursorState:
    """Parse a ``PositionInfo``; the inverse of :func:`encode_position_info`.

    ``ranges`` / ``long_arrays`` are ``None`` when the message has no such record. Tolerant as
    protobuf is (see the module docstring); raises ``StateCorruptedError`` on malformed input
    or when ``ledgerId`` / ``entryId`` is missing. O(len(data)); never copies ``data``.
    """
    w = _walk(data, frozenset({_PI_LEDGER, _PI_ENTRY}), _PI_RANGES, _PI_PROPS, _PI_BATCH, _PI_LONGS, None)
    if _PI_LEDGER not in w.scalars or _PI_ENTRY not in w.scalars:
        raise StateCorruptedError("PositionInfo is missing its required ledgerId/entryId")
    return PersistedCursorState(
        mark_delete=Position(w.scalars[_PI_LEDGER], w.scalars[_PI_ENTRY]),
        properties=w.long_props,
        ranges=w.ranges,
        long_arrays=w.long_arrays,
        batch_deleted=w.batch,
    )


def decode_managed_cursor_info(data: _Buffer) -> PersistedCursorState:
    """Parse a ``ManagedCursorInfo``; the inverse of :func:`encode_managed_cursor_info`.

    An absent mark-delete reads as ``0:0`` (proto2 defaults, as Pulsar reads it) and an absent
    ``lastActive`` as ``None``. Raises ``StateCorruptedError`` on malformed input or when
    ``cursorsLedgerId`` is missing. O(len(data)).
    """
    scalar_fields = frozenset({_MCI_CURSORS_LEDGER, _MCI_MD_LEDGER, _MCI_MD_ENTRY, _MCI_LAST_ACTIVE})
    w = _walk(data, scalar_fields, _MCI_RANGES, _MCI_PROPS, _MCI_BATCH, None, _MCI_CURSOR_PROPS)
    if _MCI_CURSORS_LEDGER not in w.scalars:
        raise StateCorruptedError("ManagedCursorInfo is missing its required cursorsLedgerId")
    return PersistedCursorState(
        mark_delete=Position(w.scalars.get(_MCI_MD_LEDGER, 0), w.scalars.get(_MCI_MD_ENTRY, 0)),
        properties=w.long_props,
        ranges=w.ranges,
        batch_deleted=w.batch,
        cursor_properties=w.string_props,
        cursors_ledger_id=w.scalars[_MCI_CURSORS_LEDGER],
        last_active=w.scalars.get(_MCI_LAST_ACTIVE),
    )
