"""Peak memory while a reopened cursor refuses bad stored state (issue 17, items 6 and 7).

Every case writes crafted bytes where a cursor's state lives (the ``ManagedCursorInfo`` node, or
the last entries of its cursor ledger), then reopens the managed ledger in a fresh interpreter
and reports the peak resident memory the recovery added (Linux ``VmHWM`` after resetting it
through ``/proc/self/clear_refs``, minus the resident memory before). The limit is the
factory's ``max_state_size_in_bytes`` (64 MiB by default); the target is a peak under the
limit plus 64 MiB for every bomb, and a small multiple of the entry size for long-array
recovery.

Run: .venv/bin/python benchmarks/bench_bad_state.py [--cases zstd-claims-2gib ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zlib

MiB = 1024 * 1024
ML = "bench/bad-state"
NODE = f"/managed-ledgers/{ML}/sub"


def _envelope(ctype: int, claimed: int, body: bytes) -> bytes:
    from mledger.codec.proto import MLDataFormats_pb2 as pb

    meta = pb.ManagedCursorInfoMetadata(compressionType=ctype, uncompressedSize=claimed).SerializeToString()
    return b"\x47\x78" + len(meta).to_bytes(4, "big") + meta + body


def _zeros_body(ctype: int, size: int) -> bytes:
    """A body inflating to ``size`` zero bytes in codec ``ctype`` (1 LZ4, 2 ZLIB, 3 ZSTD, 4 SNAPPY)."""
    block = bytes(64 * MiB)
    if ctype == 2:  # streamed: 2 GiB of zeros is never held in memory
        deflater = zlib.compressobj()
        parts = [deflater.compress(block) for _ in range(size // len(block))]
        parts.append(deflater.compress(bytes(size % len(block))))
        return b"".join(parts) + deflater.flush(zlib.Z_SYNC_FLUSH)
    if ctype == 3:  # streamed too, with the content size in the frame header (as Pulsar writes it)
        import io

        import zstandard

        out = io.BytesIO()
        with zstandard.ZstdCompressor(level=3).stream_writer(out, size=size, closefd=False) as writer:
            for _ in range(size // len(block)):
                writer.write(block)
            writer.write(bytes(size % len(block)))
        return out.getvalue()
    from mledger.codec import CompressionType, compress_metadata

    blob = compress_metadata(bytes(size), CompressionType(ctype), 0)
    meta_len = int.from_bytes(blob[2:6], "big")
    return blob[6 + meta_len :]


def _store_with_ml(entries: int):  # -> MemoryStore, ledger id
    from mledger import MemoryStore
    from mledger.codec.proto import MLDataFormats_pb2 as pb

    store = MemoryStore(max_entry_size=1 << 30)
    info = pb.ManagedLedgerInfo()
    ledger = store.create_ledger()
    store.seal_ledger(ledger)
    info.ledgerInfo.add(ledgerId=ledger, entries=entries, size=entries, timestamp=1)
    info.ledgerInfo.add(ledgerId=store.create_ledger(), timestamp=0)
    store.put(f"/managed-ledgers/{ML}", info.SerializeToString())
    return store, ledger


def _cursor_ledger(store, entries: list[bytes]) -> None:
    from mledger import Position
    from mledger.codec import PersistedCursorState, encode_managed_cursor_info

    ledger = store.create_ledger()
    store.append_many(ledger, entries)
    state = PersistedCursorState(mark_delete=Position(1, -1), cursors_ledger_id=ledger)
    store.put(NODE, encode_managed_cursor_info(state))


def _good_entry(ledger: int) -> bytes:
    from mledger import Position
    from mledger.codec import PersistedCursorState, encode_position_info

    return encode_position_info(PersistedCursorState(mark_delete=Position(ledger, 0)))


CODECS = {"lz4": 1, "zlib": 2, "zstd": 3, "snappy": 4}


def build(case: str):  # -> (store, stored bytes, what the case is)
    store, ledger = _store_with_ml(100)
    if case == "pip381-footer-claims-2gib":
        footer = json.dumps({"numParts": 4, "length": (1 << 31) - 1}).encode()
        _cursor_ledger(store, [_good_entry(ledger), *[b"p" * MiB] * 4, footer])
        return store, 4 * MiB, "PIP-381 footer announcing 2**31-1 bytes after 4 parts of 1 MiB"
    if case == "pip381-parts-overflow":
        footer = json.dumps({"numParts": 16, "length": 1000}).encode()
        _cursor_ledger(store, [_good_entry(ledger), *[b"q" * (4 * MiB)] * 16, footer])
        return store, 64 * MiB, "PIP-381 footer announcing 1000 bytes after 16 parts of 4 MiB"
    if case.endswith("-claims-2gib"):
        # The records: a ZSTD frame of 2**31-1 zero bytes (65 KB) and a ZLIB stream of
        # as many (2 MB), honest about their size; LZ4 and SNAPPY blocks cannot be built without
        # the whole input, so theirs inflate to 8 MiB while claiming 2**31-1.
        ctype = CODECS[case.split("-")[0]]
        honest = ctype in (2, 3)
        blob = _envelope(ctype, (1 << 31) - 1, _zeros_body(ctype, (1 << 31) - 1 if honest else 8 * MiB))
        store.put(NODE, blob)
        return store, len(blob), "ManagedCursorInfo claiming 2**31-1 bytes"
    if case.endswith("-inflates-past-claim"):
        ctype = CODECS[case.split("-")[0]]
        size = 2 * 1024 * MiB if ctype == 2 else 1024 * MiB  # zlib: the 2 MB record
        blob = _envelope(ctype, 64 * MiB, _zeros_body(ctype, size))
        store.put(NODE, blob)
        return store, len(blob), f"ManagedCursorInfo claiming 64 MiB, inflating to {size // MiB} MiB"
    if case.endswith("-entry-bomb"):
        ctype = CODECS[case.split("-")[0]]
        blob = _envelope(ctype, 64 * MiB, _zeros_body(ctype, 1024 * MiB))
        _cursor_ledger(store, [_good_entry(ledger), blob])
        return store, len(blob), "cursor-ledger PositionInfo claiming 64 MiB, inflating to 1 GiB"
    if case.startswith("long-array-"):
        import numpy as np

        from mledger import Position
        from mledger.codec import PersistedCursorState, encode_position_info

        words = int(case.split("-")[-1])
        values = np.random.default_rng(7).integers(-(1 << 63), (1 << 63) - 1, size=words, dtype=np.int64)
        store, ledger = _store_with_ml(64 * words)
        entry = encode_position_info(PersistedCursorState(mark_delete=Position(ledger, -1), long_arrays={ledger: values}))
        _cursor_ledger(store, [entry])
        return store, len(entry), f"long-array PositionInfo of {words:,} random words"
    raise SystemExit(f"unknown case {case}")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(field)


def run_one(case: str) -> None:
    """In a fresh interpreter: build the case, then measure the recovery's peak."""
    from mledger import ManagedLedgerFactory

    store, stored, what = build(case)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM to the current RSS
    before = _rss_kib("VmRSS")
    try:
        ManagedLedgerFactory(store).open(ML)
        outcome = "recovered"
    except Exception as exc:  # an older tree (--before runs) may refuse with another error
        outcome = f"refused ({type(exc).__name__}): {str(exc)[:70]}"
    peak = _rss_kib("VmHWM") - before
    print(json.dumps({"case": case, "what": what, "stored": stored, "peak_kib": peak, "outcome": outcome}))


CASES = [
    *(f"{c}-claims-2gib" for c in CODECS),
    *(f"{c}-inflates-past-claim" for c in ("lz4", "zlib", "zstd")),
    *(f"{c}-entry-bomb" for c in ("lz4", "zlib", "zstd")),
    "pip381-footer-claims-2gib",
    "pip381-parts-overflow",
    "long-array-1000000",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", nargs="+", default=CASES)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    limit = 64 * MiB
    print(f"{'case':<28} {'stored':>10} {'peak RSS added':>15}  outcome")
    for case in args.cases:
        out = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        peak = row["peak_kib"] * 1024
        if case.startswith("long-array"):
            verdict = f"{peak / row['stored']:.1f}x the entry"
        else:
            verdict = "under limit + 64 MiB" if peak < limit + 64 * MiB else "OVER limit + 64 MiB"
        print(f"{case:<28} {row['stored'] / MiB:>8.2f} MiB {peak / MiB:>11.1f} MiB  {verdict}; {row['outcome']}")


if __name__ == "__main__":
    main()
