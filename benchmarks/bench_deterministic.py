"""Runs that repeat exactly: one real client session, captured once, replayed N times.

    python benchmarks/bench_deterministic.py [--runs 20] [--seed 7]

The session (``tests/determinism.py``: a producer, two Key_Shared consumers and a Shared
subscription with a negative acknowledgement, through the real pulsar-client) is captured once
through :class:`~mledger.protocol.CapturingProxy`; then it is replayed into ``--runs`` fresh
deterministic brokers (``deterministic=True``, one seed, recording), each in a fresh Python
process with its own ``PYTHONHASHSEED`` (run ``n`` hashes strings with seed ``n``), and each
run's broker frames and recorded rows are compared with the first run's, frame by frame and row
by row. As a control, the same is done in this process with deterministic mode off: its rows
differ (the clock starts at the wall clock's time), so the comparison is not vacuous. Prints
the counts, the seconds per replay (a process's start included for the first) and the load
average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the captured session's scenario

from determinism import capture_session, delivered, replay_in_a_process, replay_run  # noqa: E402

from mledger.protocol import ClientRead  # noqa: E402


def repeats(
    reads: list[ClientRead], runs: int, seed: int, deterministic: bool, root: Path
) -> tuple[int, int, list[float]]:
    """Replay ``runs`` times; how many runs equal the first in frames and in rows, and the seconds of each."""
    first = None
    same_frames = same_rows = 0
    seconds = []
    for n in range(runs):
        started = time.perf_counter()
        where = root / f"{deterministic}-{n}"
        if deterministic:
            frames, rows = replay_in_a_process(reads, where, seed=seed, hash_seed=n)
        else:
            frames, rows = replay_run(reads, where, seed=seed, deterministic=False)
        seconds.append(time.perf_counter() - started)
        if first is None:
            first = (frames, rows)
            print(
                f"  run 0: {len(frames)} frames, {len(delivered(frames))} MESSAGE, "
                f"{sum(len(r) for r in rows.values())} rows",
                flush=True,
            )
        same_frames += frames == first[0]
        same_rows += rows == first[1]
    return same_frames, same_rows, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    reads = capture_session()
    print(f"captured {len(reads)} client reads on {len({r.connection for r in reads})} connection(s)")
    with tempfile.TemporaryDirectory() as tmp:
        for deterministic in (True, False):
            where = "a fresh process each" if deterministic else "this process"
            print(f"deterministic={deterministic}, seed {args.seed}, {where}:")
            frames, rows, seconds = repeats(reads, args.runs, args.seed, deterministic, Path(tmp))
            print(
                f"  same frames as run 0: {frames} of {args.runs}; same rows: {rows} of {args.runs}; "
                f"{statistics.median(seconds):.2f} s per replay (median)"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
