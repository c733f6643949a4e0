"""Workloads of steadily growing ack state and the error of ``mledger watch``'s forecast on
them (issue 35 item 5): ``tests/test_watch.py`` checks one, ``benchmarks/bench_watch_forecast.py``
prints all three.

Each workload is the events a poller would hand :class:`mledger.replay.Watch` every poll
(seeded): entries keep coming, one subscription acks some of them apart from each other (each
such ack a new hole: an individually deleted range) and never the first, so the ranges grow
until they pass the persist limit. :func:`forecast_errors` feeds it to one watch; the *truth*
is the first poll at which the replay's state passes the limit (``truncated_ranges`` above 0:
the persist leaves ranges out); at the polls where the ranges first reach 25, 50 and 75 % of the
limit, the watch's ``persist_limit_at_ms`` is compared with it, the error being the difference
divided by the time that was left then.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from mledger.broker import AckRecord
from mledger.core import Position
from mledger.replay import (
    Acked,
    CaptureEvent,
    EntrySeen,
    ObservedEntry,
    PollSummary,
    ReplaySettings,
    SubscriptionCreated,
    Watch,
    WatchSettings,
)

TOPIC = "persistent://public/default/forecast"
SUMMARY = PollSummary(number=0, topic_partitions=1, polled=1, events=0, anomalies=0, wall_s=0.0)
Growth = Callable[[random.Random, int], int]
"""New ranges at poll ``n``."""

WORKLOADS: dict[str, Growth] = {
    "slow": lambda rng, n: rng.randint(1, 3),
    "fast": lambda rng, n: rng.randint(10, 30),
    "bursty": lambda rng, n: rng.randint(40, 60) if n % 5 == 4 else 0,
}


def polls(growth: Growth, seed: int, interval_ms: int) -> Iterator[tuple[int, list[CaptureEvent]]]:
    """Each poll's time and events: ``2 * k + 2`` new entries, of which ``k = growth(...)`` are
    acked one apart (a new range each), forever."""
    rng = random.Random(seed)
    next_entry = 0
    for n in range(1_000_000):
        at_ms = interval_ms * (n + 1)
        events: list[CaptureEvent] = []
        k = growth(rng, n)
        first = next_entry
        next_entry += 2 * k + 2
        for e in range(first, next_entry):
            events.append(EntrySeen(TOPIC, -1, Position(1, e), ObservedEntry(at_ms - 1)))
        if n == 0:
            events.append(SubscriptionCreated(TOPIC, -1, "s", "SHARED", Position(1, -1), at_ms - 1))
        if k:
            acks = tuple(AckRecord(1, first + 1 + 2 * i) for i in range(k))  # never the first entry: it stays
            events.append(Acked(TOPIC, -1, "s", acks, at_ms - 1))
        yield at_ms, events


def forecast_errors(growth: Growth, seed: int, limit: int, interval_ms: int) -> dict[str, float]:
    """The forecast's relative error at 25, 50 and 75 % of the limit, and the truth's time."""
    settings = WatchSettings(
        namespaces=("public/default",),
        replay=ReplaySettings().with_values({"max_unacked_ranges_to_persist": str(limit)}),
        max_history=120,
    )
    watch = Watch(None, None, settings)
    forecasts: dict[str, tuple[int, int]] = {}  # fraction: (at_ms, forecast)
    for at_ms, events in polls(growth, seed, interval_ms):
        watch.events(events)
        row = watch.feed(SUMMARY, at_ms).subscriptions[0]
        for fraction in (0.25, 0.5, 0.75):
            name = f"{fraction:.0%}"
            if name not in forecasts and row.unacked_ranges >= fraction * limit and row.persist_limit_at_ms:
                forecasts[name] = (at_ms, row.persist_limit_at_ms)
        if row.truncated_ranges > 0:
            truth = at_ms
            break
    else:
        raise AssertionError("the workload never passed the limit")
    out = {name: (forecast - truth) / (truth - at) for name, (at, forecast) in forecasts.items()}
    out["truth_s"] = truth / 1000
    return out


