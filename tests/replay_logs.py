"""Random event logs for the replay's invariance tests: small, with holes, batches, duplicates,
cumulative acks and busy seconds, so that small limits truncate and the limiter refuses."""

from __future__ import annotations

import random
from typing import Any

T = "persistent://public/default/steps"

SUBSCRIPTION_TYPES = ("SHARED", "FAILOVER", "KEY_SHARED")


def random_log(
    seed: int, entries: int = 40, acks: int = 80, subscriptions: int = 2, delays: bool = False
) -> list[dict[str, Any]]:
    """A log of ``entries`` produced entries (some batched) and about ``acks`` acks and cancels
    over a few seconds, bunched so that several land in one limiter second. ``delays``: about a
    quarter of the entries are delayed (``deliver_at_ms`` 1 ms to 5 s after their publish
    time), drawn from a generator of their own, so that the log is otherwise the one without
    (the examples the tests pin stay the same logs). O(entries + acks)."""
    rnd = random.Random(seed)
    delay_rnd = random.Random(seed ^ 0x5EED)
    rows: list[dict[str, Any]] = []
    subs = [(f"s{i}", rnd.choice(SUBSCRIPTION_TYPES)) for i in range(subscriptions)]
    for name, kind in subs:
        rows.append({"log": "subscriptions", "topic": T, "subscription": name, "type": kind,
                     "initial_position": "earliest"})
    t = rnd.randrange(0, 3000)
    sizes: list[int] = []
    ledger, entry = 3, 0
    events: list[tuple[int, dict[str, Any]]] = []
    for _ in range(entries):
        t += rnd.choice((0, 1, 7, 150, 400, 1100, 2500))
        if rnd.random() < 0.05:
            ledger, entry = ledger + 1 + rnd.randrange(2), 0
        size = rnd.choice((1, 1, 1, 2, 3, 5))
        row: dict[str, Any] = {"log": "produced", "topic": T, "partition": 0, "ledger_id": ledger,
                               "entry_id": entry, "publish_time_ms": t}
        if size > 1:
            row["batch_size"] = size
        if delays and delay_rnd.random() < 0.25:
            row["deliver_at_ms"] = t + delay_rnd.choice((1, 40, 300, 1200, 5000))
        events.append((t, row))
        sizes.append(size)
        entry += 1
    produced = [(r["ledger_id"], r["entry_id"], s, ts) for (ts, r), s in zip(events, sizes, strict=True)]
    t_ack = produced[0][3]
    for _ in range(acks):
        t_ack += rnd.choice((0, 1, 3, 60, 300, 700, 1000, 1500, 4000, 61_000 if rnd.random() < 0.05 else 10))
        known = [p for p in produced if p[3] <= t_ack] or produced[:1]
        lid, eid, size, _ = rnd.choice(known[-12:] if rnd.random() < 0.6 else known)
        name, kind = rnd.choice(subs)
        row = {"log": "acked", "topic": T, "partition": 0, "subscription": name, "ledger_id": lid,
               "entry_id": eid, "ts_ms": t_ack}
        r = rnd.random()
        if kind == "FAILOVER" and r < 0.5:
            row["ack_type"] = "cumulative"
            if size > 1 and rnd.random() < 0.5:
                row["batch_index"] = rnd.randrange(size)
        elif size > 1 and r < 0.6:
            row["batch_index"] = rnd.randrange(size)
        elif r > 0.97 and kind != "FAILOVER":
            row = {"log": "cancelled", "topic": T, "partition": 0, "subscription": name, "ledger_id": lid,
                   "entry_id": eid, "ts_ms": t_ack}
        events.append((t_ack, row))
    rows.extend(r for _, r in sorted(events, key=lambda e: e[0]))
    return rows


SMALL_LIMITS = (
    {},
    {"max_unacked_ranges_to_persist": "2", "max_unacked_ranges_to_persist_in_metadata_store": "1",
     "max_batch_deleted_index_to_persist": "1"},
    {"max_unacked_ranges_to_persist": "3", "max_unacked_ranges_to_persist_in_metadata_store": "2",
     "netty_max_frame_size_bytes": "220"},
)
"""Limits small enough for the random logs to truncate ranges and batch states and to pass the
frame limit."""


def comparable(out: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every output table as sorted rows (the order of rows within a table is free)."""
    return {name: sorted(table.to_pylist(), key=repr) for name, table in sorted(out.items())}
