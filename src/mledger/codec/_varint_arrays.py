"""Vectorised protobuf varints: repeated records encoded and decoded with numpy, not per object.

Theory of operation
-------------------
Every repeated record a cursor state holds (``MessageRange``, ``LongListMap``,
``BatchedEntryDeletionIndexInfo``) is, once serialized, nothing but varints: single-byte tags,
lengths and int64 values. That makes both directions expressible as whole-array operations.

*Encoding* builds, per block of records, an ``n x W`` byte matrix whose columns are the tag
bytes and the varint bytes of each value padded to the widest value of the block, plus a mask
of the bytes that exist; ``matrix[mask]`` is then the records' bytes, in order. Records with a
variable-length tail (``repeated int64`` values, unpacked as Pulsar writes them) get the tail
pairs encoded the same way and scattered after their heads.

*Decoding* splits a window of bytes into varint tokens at the bytes below 0x80 (every varint
ends with one), then checks in bulk that the tokens form records of the exact layout the
encoder (and protobuf, and Pulsar) emits: expected tag bytes, length prefixes matching the
measured sizes. Scanners return the longest verified prefix of records starting at a field
boundary; anything they do not recognise (packed values, unknown fields, another field order)
is left to the caller, which decodes that record with the generated protobuf classes. A
verified record is byte-for-byte the canonical encoding, so the fast path can never read a
record differently from protobuf. Windows are small (the caller uses 1 MiB, cache-sized); a
single record larger than a window has its tail of value pairs streamed window by window
(:func:`scan_tail_pairs`), so temporary memory never grows with the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

_U64 = np.uint64
_THRESHOLDS = [_U64(1 << (7 * k)) for k in range(1, 10)]
_SHIFTS = [_U64(7 * k) for k in range(10)]

ENCODE_BLOCK_ROWS = 1 << 15
"""Records encoded per block: keeps the temporary byte matrix (~1 MiB) in cache."""


_SMALL_SIZES = 4096
"""Up to this many values are sized by one binary search over the thresholds: a constant
number of whole-array operations whatever the widest value (a negative int64 takes ten)."""
_THRESHOLD_ARRAY = np.array(_THRESHOLDS, dtype=_U64)
_NEGATIVE = _U64(1 << 63)


def varint_sizes(u: np.ndarray) -> np.ndarray:
    """Bytes taken by each uint64 of ``u`` as a varint (1..10), as int64. O(n)."""
    if u.size <= _SMALL_SIZES:
        return np.searchsorted(_THRESHOLD_ARRAY, u, side="right").astype(np.int64) + 1
    sizes = np.ones(u.size, dtype=np.int64)
    top = u.max()
    # negative int64s (a -1 entry id) take ten bytes: once only they pass a threshold, stop
    negatives = int(np.count_nonzero(u >= _NEGATIVE)) if top >= _NEGATIVE else 0
    for t in _THRESHOLDS:
        if top < t:
            break
        above = u >= t
        sizes += above
        if negatives and np.count_nonzero(above) == negatives:
            sizes[u >= _NEGATIVE] = 10
            break
    return sizes


# A column of a row layout: a constant single byte (a tag below 0x80), or varint values with
# their sizes.
Column = int | tuple[np.ndarray, np.ndarray]


def pack_rows(cols: list[Column], n: int) -> np.ndarray:
    """Concatenate, row by row, the bytes of ``n`` rows made of ``cols``; return uint8. O(n*W).

    A column whose values all take the same number of bytes needs no mask and a constant
    continuation bit (the common case: tags, lengths and ids of one size), a one-byte one
    only its values copied."""
    widths: list[tuple[int, bool]] = []
    width = 0
    ragged = False
    for c in cols:
        if isinstance(c, int):
            width += 1
        else:
            w = int(c[1].max()) if n else 1
            uniform = not n or int(c[1].min()) == w
            ragged |= not uniform
            widths.append((w, uniform))
            width += w
    matrix = np.empty((n, width), dtype=np.uint8)
    mask = np.ones((n, width), dtype=bool) if ragged else None
    off = 0
    shape = iter(widths)
    for c in cols:
        if isinstance(c, int):
            matrix[:, off] = c
            off += 1
            continue
        values, sizes = c
        w, uniform = next(shape)
        if w == 1:  # every value below 0x80: its own byte
            matrix[:, off] = values
            off += 1
            continue
        for k in range(w):
            b = (values >> _SHIFTS[k]).astype(np.uint8) & np.uint8(0x7F)
            if k + 1 < w:
                b |= np.uint8(0x80) if uniform else (sizes > k + 1).view(np.uint8) << np.uint8(7)
            if mask is not None and k and not uniform:
                mask[:, off + k] = sizes > k
            matrix[:, off + k] = b
        off += w
    return matrix.ravel() if mask is None else matrix[mask]


@dataclass(frozen=True)
class Scalar:
    """An int64 field of a record layout: one value per record, as uint64 (two's complement)."""

    field: int
    values: np.ndarray


@dataclass(frozen=True)
class Nested:
    """An embedded message field of a record layout (one per record)."""

    field: int
    items: tuple[Scalar | Nested, ...]


def _columns(items: tuple[Scalar | Nested, ...], lo: int, hi: int) -> tuple[list[Column], np.ndarray]:
    cols: list[Column] = []
    total = np.zeros(hi - lo, dtype=np.int64)
    for it in items:
        if isinstance(it, Scalar):
            v = it.values[lo:hi]
            sz = varint_sizes(v)
            cols += [it.field << 3, (v, sz)]
            total += 1 + sz
        else:
            sub_cols, sub_total = _columns(it.items, lo, hi)
            lsz = varint_sizes(sub_total.view(_U64))
            cols += [(it.field << 3) | 2, (sub_total.view(_U64), lsz), *sub_cols]
            total += 1 + lsz + sub_total
    return cols, total


def _exclusive_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.empty(a.size + 1, dtype=np.int64)
    out[0] = 0
    np.cumsum(a, out=out[1:])
    return out


def encode_records(
    field: int,
    n: int,
    head: tuple[Scalar | Nested, ...],
    tail_field: int | None = None,
    tail_values: np.ndarray | None = None,
    tail_counts: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Encode ``n`` records of a repeated message ``field``; return uint8 chunks, in order.

    Record ``i`` is ``head`` (the i-th value of each column, nested messages included) followed
    by ``tail_counts[i]`` unpacked ``repeated int64 tail_field`` values taken in order from
    ``tail_values`` (uint64). Field numbers must be below 16 (single-byte tags). Byte-identical
    to protobuf's serializer. O(total values), memory bounded by :data:`ENCODE_BLOCK_ROWS`.
    """
    chunks: list[np.ndarray] = []
    voff = _exclusive_cumsum(tail_counts) if tail_counts is not None else None
    for lo in range(0, n, ENCODE_BLOCK_ROWS):
        hi = min(n, lo + ENCODE_BLOCK_ROWS)
        cols, content = _columns(head, lo, hi)
        tail = None
        if voff is not None and tail_values is not None and tail_field is not None:
            tv = tail_values[voff[lo] : voff[hi]]
            tsz = varint_sizes(tv)
            per_value = _exclusive_cumsum(1 + tsz)
            rel = voff[lo : hi + 1] - voff[lo]
            tail_len = per_value[rel[1:]] - per_value[rel[:-1]]
            content = content + tail_len
            tail = pack_rows([tail_field << 3, (tv, tsz)], tv.size)
        lsz = varint_sizes(content.view(_U64))
        heads = pack_rows([(field << 3) | 2, (content.view(_U64), lsz), *cols], hi - lo)
        if tail is None or tail.size == 0:
            chunks.append(heads)
            continue
        head_len = 1 + lsz + content - tail_len
        rec_off = _exclusive_cumsum(head_len + tail_len)[:-1]
        out = np.empty(heads.size + tail.size, dtype=np.uint8)
        h_src = _exclusive_cumsum(head_len)[:-1]
        out[np.repeat(rec_off - h_src, head_len) + np.arange(heads.size)] = heads
        t_src = _exclusive_cumsum(tail_len)[:-1]
        out[np.repeat(rec_off + head_len - t_src, tail_len) + np.arange(tail.size)] = tail
        chunks.append(out)
    return chunks


# ---------------------------------------------------------------------------------------------
# Decoding


def gather_varints(
    seg: np.ndarray, starts: np.ndarray, widths: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """Values (uint64, bits past 64 dropped as protobuf does) of the varints at ``starts``.

    ``widths`` (1..10) are the token sizes, already known from the terminator bytes. Writes
    into ``out`` (any 8-byte integer array of the same length) when given. O(n*w).
    """
    if out is None:
        out = np.empty(starts.size, dtype=_U64)
    else:
        out = out.view(_U64)
    if starts.size == 0:
        return out
    np.bitwise_and(seg[starts], np.uint8(0x7F), out=out, casting="unsafe")
    top = seg.size - 1
    for k in range(1, int(widths.max())):
        more = widths > k
        # Whole-array work beats selecting the longer tokens: no index arrays to build.
        if more.all():
            b = seg[starts + k]
        else:
            b = np.where(more, seg[np.minimum(starts + k, top)], np.uint8(0))
        b &= np.uint8(0x7F)
        out |= b.astype(_U64) << _SHIFTS[k]
    return out


class RangeRun(NamedTuple):
    """Verified ``MessageRange`` records: int64 columns and the bytes they took."""

    lower_ledger: np.ndarray
    lower_entry: np.ndarray
    upper_ledger: np.ndarray
    upper_entry: np.ndarray
    consumed: int


# The 14 tokens of a canonical MessageRange record: tag, len, 0x0A, len, 0x08, ll, 0x10, le,
# 0x12, len, 0x08, ul, 0x10, ue. Only the four values may take more than one byte.
_VALUE_COLS = (5, 7, 11, 13)
_TAG_COLS = ((2, 0x0A), (4, 0x08), (6, 0x10), (8, 0x12), (10, 0x08), (12, 0x10))


def scan_ranges(buf: np.ndarray, lo: int, hi: int, tag: int, out: np.ndarray | None = None) -> RangeRun | None:
    """Decode the longest run of canonical ``MessageRange`` records (field tag byte ``tag``).

    ``buf[lo]`` must start a record. Returns ``None`` when the first record is not canonical
    or not complete before ``hi``. With ``out`` (int64, shape ``(4, m)``, m >= (hi-lo) // 14)
    the columns are written there and returned as views of it. O(hi - lo).
    """
    seg = buf[lo:hi]
    # last[i, c]: offset of the last byte of token c of row i (a byte below 0x80).
    ends = np.flatnonzero(seg < 0x80)
    k = ends.size // 14
    if k == 0:
        return None
    last = ends[: k * 14].reshape(k, 14)
    row_first = np.empty(k, dtype=np.int64)
    row_first[0] = 0
    np.add(last[:-1, 13], 1, out=row_first[1:])
    widths = [last[:, c] - last[:, c - 1] for c in _VALUE_COLS]
    # Every token is at least one byte, so this length leaves exactly one byte to each of
    # the ten tag and length tokens: their last byte is also their only byte.
    ok = last[:, 13] - row_first + 1 == 10 + widths[0] + widths[1] + widths[2] + widths[3]
    for w in widths:
        ok &= w <= 10
    ok &= seg[row_first] == tag
    for col, expected in _TAG_COLS:
        ok &= seg[last[:, col]] == expected
    ok &= seg[last[:, 1]] == last[:, 13] - last[:, 1]
    ok &= seg[last[:, 3]] == last[:, 7] - last[:, 3]
    ok &= seg[last[:, 9]] == last[:, 13] - last[:, 9]
    good = k if ok.all() else int(np.argmin(ok))
    if good == 0:
        return None
    cols = [
        gather_varints(seg, last[:good, c - 1] + 1, w[:good], None if out is None else out[i, :good]).view(np.int64)
        for i, (c, w) in enumerate(zip(_VALUE_COLS, widths, strict=True))
    ]
    return RangeRun(cols[0], cols[1], cols[2], cols[3], int(last[good - 1, 13]) + 1)


class PairRun(NamedTuple):
    """Verified records with a fixed head and an unpacked ``repeated int64`` tail."""

    head: list[np.ndarray]  # one int64 array per head value
    tail: np.ndarray  # int64, every record's tail values in order
    counts: np.ndarray  # int64, tail values per record
    consumed: int


def scan_pair_records(
    buf: np.ndarray, lo: int, hi: int, tag: int, head_tags: tuple[int, ...], nested: bool, tail_tag: int
) -> PairRun | None:
    """Decode the longest run of canonical records made of (tag, varint) pairs.

    A record is ``tag len`` then the pairs whose tag bytes are ``head_tags`` then any number of
    ``tail_tag`` pairs. With ``nested`` the first head pair is the length of an embedded
    message holding the next two pairs (``BatchedEntryDeletionIndexInfo.position``); its
    value is checked, not returned. ``LongListMap`` is ``head_tags=(0x08,)``.
    ``buf[lo]`` must start a record; returns ``None`` when the first one is not canonical or
    not complete before ``hi``. O(hi - lo).
    """
    seg = buf[lo:hi]
    term = np.flatnonzero(seg < 0x80)
    ntok = term.size & ~1
    if ntok < 4:
        return None
    ends = term[:ntok] + 1
    pair_end = ends[1::2]
    tag_end = ends[0::2]
    pair_start = np.empty_like(pair_end)
    pair_start[0] = 0
    pair_start[1:] = pair_end[:-1]
    value_width = pair_end - tag_end
    # 0xFF can be no canonical tag: it marks tags that are not a single byte.
    tag_byte = np.where(tag_end - pair_start == 1, seg[pair_start], np.uint8(0xFF))

    rec = np.flatnonzero(tag_byte == tag)
    if rec.size == 0 or rec[0] != 0:
        return None
    lens = gather_varints(seg, tag_end[rec], np.minimum(value_width[rec], 10))
    lens = np.minimum(lens, _U64(hi - lo + 1)).astype(np.int64)
    rec_end = pair_end[rec] + lens
    # Each record must end exactly where the next one starts; the last one where a pair ends.
    nxt = np.empty_like(rec)
    nxt[:-1] = rec[1:]
    q = int(np.searchsorted(pair_end, rec_end[-1]))
    nxt[-1] = q + 1 if q < pair_end.size and pair_end[q] == rec_end[-1] else -1
    boundary = np.empty_like(rec_end)
    boundary[:-1] = pair_start[rec[1:]]
    boundary[-1] = rec_end[-1] if nxt[-1] > 0 else -1
    ok = (rec_end == boundary) & (value_width[rec] <= 10)
    nrec = rec.size if ok.all() else int(np.argmin(ok))
    if nrec == 0:
        return None
    rec, nxt = rec[:nrec], nxt[:nrec]
    count = nxt - rec
    npairs = int(nxt[-1])

    # Expected tag byte of every pair, by its place in its record.
    place = np.arange(npairs) - np.repeat(rec, count)
    expected = np.full(npairs, tail_tag, dtype=np.int64)
    expected[place == 0] = tag
    for i, t in enumerate(head_tags):
        expected[place == i + 1] = t
    bad = (tag_byte[:npairs] != expected) | (value_width[:npairs] > 10)
    rec_ok = count >= 1 + len(head_tags)
    rec_ok[np.repeat(np.arange(nrec), count)[bad]] = False
    values = gather_varints(seg, tag_end[:npairs], np.minimum(value_width[:npairs], 10)).view(np.int64)
    if nested:
        # The embedded message spans the two pairs after its length pair.
        inner = np.minimum(rec + 3, npairs - 1)
        rec_ok &= values[np.minimum(rec + 1, npairs - 1)] == pair_end[inner] - pair_end[rec + 1]
    good = nrec if rec_ok.all() else int(np.argmin(rec_ok))
    if good == 0:
        return None
    rec, count = rec[:good], count[:good]
    npairs = int(rec[-1] + count[-1])
    place = place[:npairs]
    skip = 1 + len(head_tags)
    first_value = 2 if nested else 1
    head = [values[rec + i] for i in range(first_value, skip)]
    tail = values[:npairs][place >= skip]
    return PairRun(head, tail, count - skip, int(pair_end[npairs - 1]))


def scan_tail_pairs(buf: np.ndarray, lo: int, hi: int, tag: int) -> tuple[np.ndarray, int]:
    """Decode the longest run of ``tag value`` pairs (one-byte tag) starting at ``buf[lo]``.

    Used for the tail of a record too large for one window. Returns the int64 values and
    the bytes they took (0 when the first pair does not qualify). O(hi - lo).
    """
    seg = buf[lo:hi]
    ends = np.flatnonzero(seg < 0x80)
    ntok = ends.size & ~1
    if ntok == 0:
        return np.empty(0, dtype=np.int64), 0
    last = ends[:ntok].reshape(-1, 2)
    first = np.empty(last.shape[0], dtype=np.int64)
    first[0] = 0
    np.add(last[:-1, 1], 1, out=first[1:])
    widths = last[:, 1] - last[:, 0]
    ok = (last[:, 0] == first) & (seg[first] == tag) & (widths <= 10)
    good = last.shape[0] if ok.all() else int(np.argmin(ok))
    if good == 0:
        return np.empty(0, dtype=np.int64), 0
    values = gather_varints(seg, last[:good, 0] + 1, widths[:good]).view(np.int64)
    return values, int(last[good - 1, 1]) + 1
