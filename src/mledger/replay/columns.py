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


class Rows:
    """A run of events as numpy columns (string columns as integer codes, -1 = null)."""

    __slots__ = _FIELDS

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

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, index: Any) -> Rows:
        """Rows selected by a slice, a boolean mask or an index array."""
        if isinstance(index, np.ndarray) and index.dtype == np.bool_:
            index = np.flatnonzero(index)  # once, not once per column
        out = Rows.__new__(Rows)
        for name in _FIELDS:
            setattr(out, name, getattr(self, name)[index])
        return out

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
        indices = encoded.indices
        idx = np.asarray(pc.fill_null(indices, 0).to_numpy(zero_copy_only=False))
        out = lookup[idx] if len(lookup) else np.full(n, -1, np.int32)
        if indices.null_count:
            out = np.where(np.asarray(indices.is_null().to_numpy(zero_copy_only=False)), -1, out)
        return out.astype(np.int32, copy=False)
