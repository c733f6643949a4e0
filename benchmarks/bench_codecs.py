"""Cursor-state codec benchmark: encode / decode time and bytes for large ack-hole sets.

For 1M and 10M holes, alternating (every other entry acked) and random (acked runs and gaps
of geometric length, mean 2), in the range format (``individualDeletedMessages``) and the
long-array format (``individualDeletedMessageRanges``), without compression and with each
codec of the 0x4778 envelope. Entries per ledger: 50,000 (Pulsar's default
``maxEntriesPerLedger``); ledger ids start at 1,000,000. Codec only: no store.

    .venv/bin/python benchmarks/bench_codecs.py [--sizes 1000000,10000000] [--no-baseline]

Prints one row per (holes, pattern, format, compression): records are ranges (range format)
or ledgers (long-array format), ``PI MiB`` the serialized PositionInfo, ``stored MiB`` after
compression; times are wall-clock seconds, best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mledger import Position
from mledger.codec import (
    CompressionType,
    PersistedCursorState,
    RangeArrays,
    compress_payload,
    decode_position_info,
    decompress_payload,
    encode_position_info,
)
from mledger.codec.proto import MLDataFormats_pb2 as pb

ENTRIES_PER_LEDGER = 50_000
FIRST_LEDGER = 1_000_000


def acked_bitmap(holes: int, pattern: str, seed: int = 42) -> np.ndarray:
    """Acked flags over consecutive entries, leaving about ``holes`` un-acked gaps."""
    if pattern == "alternating":
        return np.arange(2 * holes) % 2 == 1
    rng = np.random.default_rng(seed)
    runs = rng.geometric(0.5, size=2 * holes)  # gap, acked run, gap, acked run, ...
    flags = np.zeros(runs.size, dtype=bool)
    flags[1::2] = True
    return np.repeat(flags, runs)


def to_state(acked: np.ndarray, fmt: str) -> PersistedCursorState:
    """The cursor state for ``acked``: per-ledger ranges or per-ledger BitSet words."""
    span = acked.size
    padded = np.zeros(-(-span // ENTRIES_PER_LEDGER) * ENTRIES_PER_LEDGER, dtype=bool)
    padded[:span] = acked
    grid = padded.reshape(-1, ENTRIES_PER_LEDGER)
    md = Position(FIRST_LEDGER, -1)
    if fmt == "range":
        edges = np.diff(grid.astype(np.int8), axis=1, prepend=0, append=0)
        led_s, start = np.nonzero(edges == 1)
        _, end = np.nonzero(edges == -1)
        ledgers = led_s.astype(np.int64) + FIRST_LEDGER
        ranges = RangeArrays(ledgers, start.astype(np.int64) - 1, ledgers.copy(), end.astype(np.int64) - 1)
        return PersistedCursorState(md, ranges=ranges)
    words = np.packbits(grid, axis=1, bitorder="little")
    words = np.pad(words, ((0, 0), (0, -words.shape[1] % 8))).view("<i8")
    longs = {}
    for i, row in enumerate(words):
        nz = np.flatnonzero(row)
        if nz.size:
            longs[FIRST_LEDGER + i] = row[: nz[-1] + 1].copy()  # BitSet.toLongArray() trims
    return PersistedCursorState(md, long_arrays=longs)


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def protobuf_baseline(state: PersistedCursorState) -> tuple[float, float]:
    """Encode and decode with the generated classes, one object per range (the slow way)."""
    t = time.perf_counter()
    m = pb.PositionInfo(ledgerId=state.mark_delete[0], entryId=state.mark_delete[1])
    assert state.ranges is not None
    for ll, le, ul, ue in zip(*(c.tolist() for c in state.ranges), strict=True):
        r = m.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = ll, le
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = ul, ue
    data = m.SerializeToString()
    enc = time.perf_counter() - t
    t = time.perf_counter()
    m2 = pb.PositionInfo.FromString(data)
    cols = [[], [], [], []]
    for r in m2.individualDeletedMessages:
        cols[0].append(r.lowerEndpoint.ledgerId)
        cols[1].append(r.lowerEndpoint.entryId)
        cols[2].append(r.upperEndpoint.ledgerId)
        cols[3].append(r.upperEndpoint.entryId)
    RangeArrays(*(np.array(c, dtype=np.int64) for c in cols))
    return enc, time.perf_counter() - t


def mib(n: int) -> str:
    return f"{n / (1 << 20):9.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--patterns", default="alternating,random")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-baseline", action="store_true", help="skip the per-object protobuf baseline (1M only)")
    args = ap.parse_args()

    print(
        f"python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cpu, {platform.processor() or platform.platform()}"
    )
    head = (
        f"{'holes':>10} {'pattern':>11} {'format':>10} {'records':>10} {'codec':>6} {'PI MiB':>9} "
        f"{'stored MiB':>10} {'enc s':>6} {'dec s':>6} {'comp s':>6} {'decomp s':>8} {'total s':>7}"
    )
    print(head)
    print("-" * len(head))
    for holes in (int(s) for s in args.sizes.split(",")):
        for pattern in args.patterns.split(","):
            acked = acked_bitmap(holes, pattern)
            for fmt in ("range", "long-array"):
                state = to_state(acked, fmt)
                n_ranges = state.ranges.size if state.ranges is not None else 0
                enc_s, data = best(lambda state=state: encode_position_info(state), args.repeat)
                dec_s, back = best(lambda data=data: decode_position_info(data), args.repeat)
                if back != state:
                    raise SystemExit(f"round trip mismatch: {holes} {pattern} {fmt}")
                for ctype in CompressionType:
                    if ctype is CompressionType.NONE:
                        comp_s, decomp_s, stored = 0.0, 0.0, len(data)
                    else:
                        comp_s, blob = best(
                            lambda data=data, ctype=ctype: compress_payload(data, ctype, 0), args.repeat
                        )
                        decomp_s, raw = best(
                            lambda blob=blob, data=data: decompress_payload(blob, len(data)), args.repeat
                        )
                        if raw != data:
                            raise SystemExit(f"compression mismatch: {ctype.name}")
                        stored = len(blob)
                        del blob, raw
                    total = enc_s + dec_s + comp_s + decomp_s
                    ranges_col = f"{n_ranges:>6} rng" if fmt == "range" else f"{len(state.long_arrays or {}):>6} led"
                    print(
                        f"{holes:>10} {pattern:>11} {fmt:>10} {ranges_col} {ctype.name:>6} {mib(len(data))} "
                        f"{mib(stored):>10} {enc_s:6.2f} {dec_s:6.2f} {comp_s:6.2f} {decomp_s:8.2f} {total:7.2f}",
                        flush=True,
                    )
                if fmt == "range" and holes <= 1_000_000 and not args.no_baseline:
                    enc, dec = protobuf_baseline(state)
                    print(
                        f"{'':>10} {'':>11} {'':>10} {'':>10} {'upb':>6} {'':>9} {'':>10} {enc:6.2f} {dec:6.2f}"
                        "   (generated protobuf, one object per range)",
                        flush=True,
                    )
                del state, data, back


if __name__ == "__main__":
    main()
