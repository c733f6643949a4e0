"""Event columns as numpy arrays: :class:`Rows` (a run of events) and :class:`Codes` (strings
to dense integer codes), the engine's working representation of Arrow batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_FIELDS = (
    "ts",
    "kind",
    "seq",
    "sub",
    "ledger",
    "entry",
    "bidx",
    "bsize",
    "deliver",
    "ack",
    "producer",
    "seqid",
    "problem",
)
_FIELD_SET = frozenset(_FIELDS)


class Rows:
    """A run of events as numpy columns (string columns as integer codes, -1 = null).

    Each column is a plain attribute (a slot): reading one that is there costs an attribute
    read, no lookup. :meth:`take` is lazy: a column of the selection is gathered from the
    source the first time it is read (``__getattr__``, reached only while the slot is empty: a
    step's produced rows never read the ack columns, its acks never the producer's), then kept
    in the slot. :meth:`assign` replaces columns.
    """

    __slots__ = (*_FIELDS, "_index", "_n", "_source")

    ts: np.ndarray
    kind: np.ndarray
    seq: np.ndarray
    sub: np.ndarray
    ledger: np.ndarray
    entry: np.ndarray
    bidx: np.ndarray
    bsize: np.ndarray
    deliver: np.ndarray
    ack: np.ndarray
    producer: np.ndarray
    seqid: np.ndarray
    problem: np.ndarray

    def __init__(self, **columns: np.ndarray) -> None:
        for name in _FIELDS:
            setattr(self, name, columns[name])
        self._source: Rows | None = None
        self._index: Any = None
        self._n = len(self.ts)

    def __len__(self) -> int:
        return self._n

    def __getattr__(self, name: str) -> np.ndarray:
        """A column not gathered yet (its slot is empty): gathered from the source, kept."""
        if name not in _FIELD_SET or self._source is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        column: np.ndarray = getattr(self._source, name)[self._index]
        setattr(self, name, column)
        return column

    def take(self, index: Any) -> Rows:
        """Rows selected by a slice, a boolean mask or an index array."""
        if isinstance(index, slice):
            n = len(range(*index.indices(self._n)))
        else:
            index = np.asarray(index)
            if index.dtype == np.bool_:
                index = np.flatnonzero(index)  # once, not once per column
            n = len(index)
        out = Rows.__new__(Rows)
        out._source = self
        out._index = index
        out._n = n
        return out

    def assign(self, **columns: np.ndarray) -> None:
        """Replace columns (arrays of this selection's length); selections taken from this one
        that have not read those columns yet read the new ones."""
        for name, values in columns.items():
            if name not in _FIELD_SET:
                raise KeyError(f"no column {name!r}")
            setattr(self, name, values)

    @staticmethod
    def concat(parts: Sequence[Rows]) -> Rows:
        if len(parts) == 1:
            return parts[0]
        return Rows(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS})


class Codes:
    """Strings to dense integer codes, stable for the life of a replayer."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, name: str) -> int:
        code = self.ids.get(name)
        if code is None:
            code = self.ids[name] = len(self.names)
            self.names.append(name)
        return code

    def encode(self, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
        n = len(arr)
        if arr.null_count == n:
            return np.full(n, -1, np.int32)
        encoded = pc.dictionary_encode(arr)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        lookup = np.array([self.code(v) for v in encoded.dictionary.to_pylist()], np.int32)
        index, present = int_values(encoded.indices)
        out = lookup[index] if len(lookup) else np.full(n, -1, np.int32)
        if encoded.indices.null_count:
            out = np.where(present, out, -1)
        return out.astype(np.int32, copy=False)


def int_values(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, present mask) of an integer array. With nulls, the values and
    the validity bitmap are read from the array's buffers as they are (zero-copy views, one
    unpacking of the bitmap), a null's slot, whatever it holds, replaced by 0."""
    n = len(arr)
    if arr.null_count == 0:
        return np.asarray(arr.to_numpy(zero_copy_only=False)), np.ones(n, bool)
    validity, data = arr.buffers()[:2]
    start = arr.offset
    values = np.frombuffer(data, np.dtype(arr.type.to_pandas_dtype()), count=start + n)[start:]
    has = np.unpackbits(np.frombuffer(validity, np.uint8), count=start + n, bitorder="little")[start:].view(bool)
    return np.where(has, values, 0), has
