"""The operator's answers (issue 25 item 5): what a restart would redeliver, state that cannot
be stored, Pulsar's #25548 truncation counters, and the ``--defaults`` presets."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from mledger.replay.local import output_tables, replay_table
from mledger.replay.model import SubscriptionSpec
from mledger.replay.schema import EVENT_SCHEMA, KIND_ACKED, KIND_PRODUCED
from mledger.replay.settings import ReplaySettings

SUBS = {"t": [SubscriptionSpec("s", "SHARED", "earliest")]}


def events(acks: list[int], batch: dict[int, int] | None = None, index_acks: list[tuple[int, int]] = ()) -> pa.Table:
    """Entries 0-9 of ledger 1 produced at ts 0..9, then individual acks at ts 100, 101, ..."""
    batch = batch or {}
    rows: list[dict[str, Any]] = []
    for e in range(10):
        rows.append({"ts": e, "kind": KIND_PRODUCED, "name": "p", "ledger_id": 1, "entry_id": e,
                     "batch": batch.get(e, 1), "sequence_id": e})
    for i, e in enumerate(acks):
        rows.append({"ts": 100 + i, "kind": KIND_ACKED, "name": "s", "ledger_id": 1, "entry_id": e, "ack_type": 0})
    for i, (e, b) in enumerate(index_acks):
        rows.append({"ts": 200 + i, "kind": KIND_ACKED, "name": "s", "ledger_id": 1, "entry_id": e, "batch": b,
                     "ack_type": 0})
    for i, r in enumerate(rows):
        r.update(topic="t", partition=0, seq=i)
    return pa.Table.from_pylist(rows, EVENT_SCHEMA)


def cursor(table: pa.Table, **settings: str) -> dict[str, Any]:
    s = ReplaySettings().with_values({"throttle_mark_delete": "0", "segment_rows": "1", **settings})
    rows = output_tables(replay_table(table, s, SUBS))["cursors"].to_pylist()
    assert len(rows) == 1
    return rows[0]


ACKS_2_4_6 = events([2, 4, 6])


@pytest.mark.parametrize(
    ("settings", "redelivered", "truncating_persists"),
    [
        # {2} kept, 4 and 6 lost; the persists after the acks of 4 and 6 and the final one truncated
        ({"max_unacked_ranges_to_persist": "1"}, 2, 3),
        ({"max_unacked_ranges_to_persist": "10"}, 0, 0),
        ({"max_unacked_ranges_to_persist": "1", "unacked_ranges_limit_off_by_one": "true"}, 1, 2),  # pre-#25548
        ({"max_unacked_ranges_to_persist": "10", "persist_individual_ack_as_long_array": "true"}, 0, 0),
        # Pulsar's toRanges keeps no ledger when the first one has more acked entries than the
        # limit, and persistPositionToLedger then writes the range format, capped: as the range format.
        ({"max_unacked_ranges_to_persist": "1", "persist_individual_ack_as_long_array": "true"}, 2, 3),
    ],
)
def test_restart_would_redeliver_what_the_persisted_state_does_not_hold(
    settings: dict[str, str], redelivered: int, truncating_persists: int
) -> None:
    row = cursor(ACKS_2_4_6, **settings)
    assert row["redelivered_after_restart"] == redelivered
    assert row["redelivered_after_restart_max"] == redelivered
    assert row["persist_unacked_ranges_truncated"] == truncating_persists
    assert row["redelivered_after_restart_max_at_ms"] == (None if redelivered == 0 else 102)
    assert row["state_over_limit_at_ms"] is None


def test_maximum_counts_acks_waiting_for_a_throttled_persist() -> None:
    # one persist a second: the ack at 100 ms is persisted, those at 101 and 102 ms wait for
    # the final persist; a crash after 102 ms would redeliver both, after the end none.
    s = ReplaySettings().with_values({"throttle_mark_delete": "1", "segment_rows": "1"})
    row = output_tables(replay_table(ACKS_2_4_6, s, SUBS))["cursors"].to_pylist()[0]
    assert row["redelivered_after_restart"] == 0
    assert row["redelivered_after_restart_max"] == 2
    assert row["redelivered_after_restart_max_at_ms"] == 102


def test_batch_indexes_count_as_messages() -> None:
    table = events([], batch={3: 5}, index_acks=[(3, 0), (3, 1), (3, 4)])
    assert cursor(table)["redelivered_after_restart"] == 0
    row = cursor(table, max_batch_deleted_index_to_persist="0")
    assert row["redelivered_after_restart"] == 3
    assert row["persist_batch_deleted_indexes_truncated"] == 4  # three acks and the final persist


def test_state_over_the_frame_limit_or_jute_maxbuffer_is_flagged_with_its_time() -> None:
    row = cursor(ACKS_2_4_6, netty_max_frame_size_bytes="8")
    assert row["state_over_limit_at_ms"] == 100  # the first cursor-ledger entry: the ack of 2
    row = cursor(ACKS_2_4_6, jute_maxbuffer="8")
    assert row["state_over_limit_at_ms"] == 0
    assert cursor(ACKS_2_4_6)["state_over_limit_at_ms"] is None
