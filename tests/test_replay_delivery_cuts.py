"""A delayed message's delivery inside a bulk step cuts only the calls that must see it
(``PartitionReplayer._ack_with_deliveries``, ``_delivery_cut``): every output equals that of
steps of one event, with fewer acknowledgement calls than a cut of every subscription."""

from __future__ import annotations

from typing import Any

import pytest
from replay_logs import T
from test_replay_exact_steps import _steps_and_bulk_calls, settings_of

from mledger.replay._events import replay_rows


def _produced(entry: int, ts: int, deliver_at: int | None = None) -> dict[str, Any]:
    row = {"log": "produced", "topic": T, "partition": 0, "ledger_id": 7, "entry_id": entry, "publish_time_ms": ts}
    return row if deliver_at is None else {**row, "deliver_at_ms": deliver_at}


def _acked(sub: str, entry: int, ts: int) -> dict[str, Any]:
    return {"log": "acked", "topic": T, "partition": 0, "subscription": sub, "ledger_id": 7, "entry_id": entry,
            "ts_ms": ts}


def _shared(sub: str) -> dict[str, Any]:
    return {"log": "subscriptions", "topic": T, "subscription": sub, "type": "SHARED", "initial_position": "earliest"}


def _delivered(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = replay_rows(rows, settings_of(None, {}))
    return {r["subscription"]: r["delayed_delivered"] for r in out["cursors"].to_pylist()}


# Entries 0..9 at 0..9 ms, entry 5 delayed to 500 ms. "a" acks 0 at 20 ms and "b" 8 at 30 ms: their
# first changes, persisted (each a step of its own: the first persist creates the cursor ledger).
# Then one step: b acks 5 at 100 ms, before its delivery, which cuts the step at 500 ms; a acks 1,
# 2 at 300, 400 and more after the delivery, all within the throttle's second.
_BASE = [_shared("a"), _shared("b"), *[_produced(i, i, 500 if i == 5 else None) for i in range(10)],
         _acked("a", 0, 20), _acked("b", 8, 30), _acked("b", 5, 100), _acked("a", 1, 300), _acked("a", 2, 400)]


@pytest.mark.parametrize(
    ("more", "bulk_calls", "delivered"),
    [
        # a never names entry 5: its run 300..700 spans the delivery in one call (a cut of every
        # subscription made it two)
        ([_acked("a", 3, 600), _acked("a", 4, 700)], 4, {"a": 1, "b": 0}),
        # a acks 5 after its delivery, within the run: the call runs at 700 ms, after the
        # delivery, and its rows before the cut do not name 5: still one call, 5 delivered to a
        ([_acked("a", 5, 600), _acked("a", 4, 700)], 4, {"a": 1, "b": 0}),
        # a acks 5 before its delivery (at 450 ms) and more after it: a call at 700 ms would
        # hide that ack from the delivery, so the run ends at the cut
        ([_acked("a", 5, 450), _acked("a", 3, 600), _acked("a", 4, 700)], 5, {"a": 0, "b": 0}),
    ],
)
def test_a_delivery_cuts_only_the_calls_whose_rows_it_must_see(
    more: list[dict[str, Any]], bulk_calls: int, delivered: dict[str, int]
) -> None:
    rows = [*_BASE, *more]
    steps, bulk = _steps_and_bulk_calls(rows, settings_of(None, {}, throttle_mark_delete="1"))
    assert (steps, bulk) == (len([r for r in rows if r["log"] == "acked"]), bulk_calls)
    assert _delivered(rows) == delivered
