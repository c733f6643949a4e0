"""The error of ``mledger watch``'s forecast against the crossing the replay finds (issue 35 item 5).

    python benchmarks/bench_watch_forecast.py [--limit 1000] [--interval 30] [--seed 7]

Three workloads of different growth, as the events a poller hands :class:`mledger.replay.Watch`
every ``--interval`` seconds (seeded): entries keep coming, one subscription acks some of them
apart from each other (each such ack is a new hole: an individually deleted range) and never
the first, so the ranges grow until they pass the persist limit ``--limit``
(``max_unacked_ranges_to_persist``):

* ``slow``: about 2 new ranges a poll (1 to 3, uniformly);
* ``fast``: about 20 a poll (10 to 30);
* ``bursty``: nothing for four polls, then 40 to 60 at once.

The whole workload is fed, poll after poll, to one watch; the *truth* is the first poll at which
the replay's state passes the limit (its ``truncated_ranges`` above 0: the persist leaves ranges
out). At the polls where the ranges first reach 25 %, 50 % and 75 % of the limit, the watch's
forecast (``persist_limit_at_ms``) is compared with it: the error is the difference divided by
the time that was left. The target (issue 35): within 20 %.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the workloads the test checks too
from forecast_workloads import WORKLOADS, forecast_errors  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"forecast error (forecast - replay) / time left, persist limit {args.limit} ranges, a poll every "
          f"{args.interval:g} s, seed {args.seed}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"{'workload':10} {'crosses at':>12} {'at 25 %':>9} {'at 50 %':>9} {'at 75 %':>9}")
    worst = 0.0
    for name, growth in WORKLOADS.items():
        started = time.perf_counter()
        errors = forecast_errors(growth, args.seed, args.limit, int(args.interval * 1000))
        truth = errors.pop("truth_s")
        worst = max([worst, *(abs(e) for e in errors.values())])
        cells = " ".join(f"{errors[f]:+9.1%}" for f in ("25%", "50%", "75%"))
        print(f"{name:10} {truth / 60:10.0f} m {cells}   ({time.perf_counter() - started:.1f} s)")
    print(f"worst {worst:.1%}: {'within' if worst <= 0.2 else 'NOT within'} 20 %")
    return 0 if worst <= 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
