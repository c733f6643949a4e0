"""The replay engine without Spark: hand-built event logs, one behaviour per test."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import mledger.replay._broker_model
import mledger.replay._events
from mledger.codec import decode_managed_cursor_info, decode_position_info
from mledger.replay import EventOrderError, PartitionReplayer, ReplaySettings, SubscriptionSpec
from mledger.replay._entries import EntryIndex
from mledger.replay._events import event_table, replay_rows
from mledger.replay._local import replay_table
from mledger.replay._schema import EVENT_SCHEMA, OUTPUT_SCHEMA

T = "persistent://public/default/orders"


def P(ledger: int, entry: int, ts: int, **kw: Any) -> dict[str, Any]:
    return {"log": "produced", "topic": T, "partition": 0, "ledger_id": ledger, "entry_id": entry,
            "publish_time_ms": ts, **kw}


def A(sub: str, ledger: int, entry: int, ts: int, **kw: Any) -> dict[str, Any]:
    return {"log": "acked", "topic": T, "partition": 0, "subscription": sub, "ledger_id": ledger,
            "entry_id": entry, "ts_ms": ts, **kw}


def C(sub: str | None, ledger: int, entry: int, ts: int, **kw: Any) -> dict[str, Any]:
    return {"log": "cancelled", "topic": T, "partition": 0, "subscription": sub, "ledger_id": ledger,
            "entry_id": entry, "ts_ms": ts, **kw}


def S(sub: str, type_: str = "SHARED", initial: str = "earliest") -> dict[str, Any]:
    return {"log": "subscriptions", "topic": T, "subscription": sub, "type": type_, "initial_position": initial}


def cursor(out: dict[str, pa.Table], sub: str) -> dict[str, Any]:
    rows = [r for r in out["cursors"].to_pylist() if r["subscription"] == sub]
    assert len(rows) == 1, out["cursors"].to_pylist()
    return rows[0]


def reasons(out: dict[str, pa.Table]) -> list[tuple[str | None, str]]:
    return [(r["subscription"], r["reason"]) for r in out["anomalies"].to_pylist()]


def produce(n: int, ledger: int = 5, ts0: int = 0, **kw: Any) -> list[dict[str, Any]]:
    return [P(ledger, i, ts0 + i, **kw) for i in range(n)]


# -- positions and ledgers ----------------------------------------------------------------------
def test_entries_land_at_the_logged_positions_across_ledger_rollovers() -> None:
    rows = [*produce(3, ledger=7), *produce(2, ledger=12, ts0=10), A("s", 12, 1, 20), A("s", 7, 0, 21)]
    out = replay_rows(rows)
    c = cursor(out, "s")
    assert (c["mark_delete_ledger_id"], c["mark_delete_entry_id"]) == (7, 0)
    assert (c["read_ledger_id"], c["read_entry_id"]) == (7, 1)  # idle: the one after the mark-delete
    assert c["backlog"] == 3 and c["ack_hole_ranges"] == 1 and c["acked"] == 2
    part = out["partitions"].to_pylist()[0]
    assert part["entries"] == 5 and part["ledgers"] == 2
    assert (part["last_ledger_id"], part["last_entry_id"]) == (12, 1)


def test_ledgers_before_the_first_subscription_are_kept_whatever_the_cursors() -> None:
    # The broker follows Pulsar and trims the closed ledgers of a topic without durable cursors
    # (here: no subscription yet and, without deduplication, no pulsar.dedup cursor); the replay
    # keeps the log's ledgers (retain_without_subscriptions), so a subscription the log
    # mentions later still starts at the earliest entry, and results do not depend on when a
    # background pass ran.
    rows = [*produce(3, ledger=7), *produce(2, ledger=12, ts0=10), *produce(1, ledger=13, ts0=20), A("s", 13, 0, 30)]
    for settings in (ReplaySettings(), ReplaySettings(deduplication=False)):
        c = cursor(replay_rows(rows, settings), "s")
        assert (c["mark_delete_ledger_id"], c["mark_delete_entry_id"]) == (7, -1)
        assert c["backlog"] == 5 and c["ack_hole_ranges"] == 1


def test_a_topic_in_any_namespace_is_replayed() -> None:
    # The broker creates topics only in namespaces that exist; the replay creates the log's.
    topic = "persistent://acme/prod/orders"
    rows = [{**r, "topic": topic} for r in [*produce(3), A("s", 5, 0, 10)]]
    out = replay_rows(rows)
    assert [(r["topic"], r["backlog"]) for r in out["cursors"].to_pylist()] == [(topic, 2)]
    assert reasons(out) == []


def test_out_of_order_acks_leave_holes_that_absorb_into_the_mark_delete() -> None:
    rows = [*produce(6), A("s", 5, 2, 10), A("s", 5, 4, 11), A("s", 5, 0, 12)]
    c = cursor(replay_rows(rows), "s")
    assert (c["mark_delete_entry_id"], c["ack_hole_ranges"], c["backlog"]) == (0, 2, 3)
    c = cursor(replay_rows([*rows, A("s", 5, 1, 13), A("s", 5, 3, 14)]), "s")
    assert (c["mark_delete_entry_id"], c["ack_hole_ranges"], c["backlog"]) == (4, 0, 1)


def test_gap_in_produced_log_gets_placeholders_and_an_anomaly() -> None:
    rows = [P(5, 0, 1), P(5, 3, 2), P(9, 2, 3), A("s", 5, 3, 10)]
    out = replay_rows(rows)
    assert [r for r in reasons(out)] == [(None, "produced_gap"), (None, "produced_gap")]
    part = out["partitions"].to_pylist()[0]
    assert part["entries"] == 7 and part["placeholder_entries"] == 4
    assert cursor(out, "s")["backlog"] == 6


def test_positions_that_cannot_be_placed_are_reported() -> None:
    rows = [P(5, 0, 1), P(5, 1, 2), P(5, 1, 3), P(5, 0, 4), P(4, 0, 5)]
    got = [(r["reason"], r["entry_id"]) for r in replay_rows(rows)["anomalies"].to_pylist()]
    assert got == [("duplicate_position", 1), ("duplicate_position", 0), ("position_out_of_order", 0)]


def test_dedup_drops_repeated_sequence_ids() -> None:
    rows = [P(5, 0, 1, producer_name="p", sequence_id=1), P(5, 1, 2, producer_name="p", sequence_id=2),
            P(5, 1, 2, producer_name="p", sequence_id=2), P(5, 2, 3, producer_name="q", sequence_id=1),
            P(5, 3, 4, producer_name="p", sequence_id=1), P(5, 4, 5, producer_name="p", sequence_id=3)]
    out = replay_rows(rows)
    assert [r["reason"] for r in out["anomalies"].to_pylist()] == ["dedup_duplicate", "dedup_duplicate", "produced_gap"]
    assert "sequence_id 2 of producer p" in out["anomalies"].to_pylist()[0]["detail"]
    part = out["partitions"].to_pylist()[0]
    assert part["entries"] == 5 and part["placeholder_entries"] == 1
    plain = replay_rows(rows, ReplaySettings(deduplication=False))
    assert [r["reason"] for r in plain["anomalies"].to_pylist()] == ["duplicate_position"]


# -- acks ---------------------------------------------------------------------------------------
def test_ack_of_unknown_or_not_yet_produced_position() -> None:
    rows = [A("s", 5, 0, 0), *produce(2, ts0=1), A("s", 5, 7, 5), A("s", 6, 0, 5)]
    out = replay_rows(rows)
    got = [(r["reason"], r["entry_id"], r["detail"]) for r in out["anomalies"].to_pylist()]
    assert [g[:2] for g in got] == [("unknown_position", 0), ("unknown_position", 7), ("unknown_position", 0)]
    assert got[0][2] == "no entry 5:0 was produced before this ack"


def test_ack_before_its_produce_in_the_same_step_is_unknown() -> None:
    # same step: the ack at ts 1 sorts before the produce at ts 2
    rows = [P(5, 0, 0), A("s", 5, 1, 1), P(5, 1, 2)]
    out = replay_rows(rows)
    assert reasons(out) == [("s", "unknown_position")]
    assert cursor(out, "s")["backlog"] == 2


def test_cumulative_acks_on_failover_and_refused_on_shared() -> None:
    rows = [S("f", "FAILOVER"), S("s", "SHARED"), *produce(10),
            A("f", 5, 3, 20, ack_type="cumulative"), A("f", 5, 6, 21, ack_type="cumulative"),
            A("f", 5, 2, 22, ack_type="cumulative"), A("s", 5, 6, 23, ack_type="cumulative")]
    out = replay_rows(rows)
    f = cursor(out, "f")
    assert (f["mark_delete_entry_id"], f["backlog"], f["acked"]) == (6, 3, 7)
    assert reasons(out) == [("s", "cumulative_ack_refused")]
    assert cursor(out, "s")["backlog"] == 10


def test_cumulative_ack_inside_a_batch() -> None:
    rows = [S("f", "FAILOVER"), P(5, 0, 1, batch_size=4), P(5, 1, 2, batch_size=4),
            A("f", 5, 1, 10, ack_type="cumulative", batch_index=1)]
    c = cursor(replay_rows(rows), "f")
    assert (c["mark_delete_entry_id"], c["backlog"]) == (0, 1)
    rows.append(A("f", 5, 1, 11, ack_type="cumulative", batch_index=3))
    c = cursor(replay_rows(rows), "f")
    assert (c["mark_delete_entry_id"], c["backlog"]) == (1, 0)


def test_batch_index_acks_delete_the_entry_when_complete() -> None:
    rows = [P(5, 0, 1, batch_size=3), P(5, 1, 2), A("s", 5, 0, 10, batch_index=0), A("s", 5, 0, 11, batch_index=2)]
    assert cursor(replay_rows(rows), "s")["backlog"] == 2
    out = replay_rows([*rows, A("s", 5, 0, 12, batch_index=1), A("s", 5, 0, 13, batch_index=3)])
    c = cursor(out, "s")
    assert (c["backlog"], c["mark_delete_entry_id"], c["acked"]) == (1, 0, 1)
    assert [(r["reason"], r["batch_index"]) for r in out["anomalies"].to_pylist()] == [("invalid_row", 3)]
    assert "out of range" in out["anomalies"].to_pylist()[0]["detail"]


def test_batch_index_acks_split_over_steps() -> None:
    rows = [P(5, 0, 1, batch_size=3), *[A("s", 5, 0, 10 + i, batch_index=i) for i in range(3)], P(5, 1, 20)]
    for step in (1, 2, 100):
        c = cursor(replay_rows(rows, ReplaySettings(segment_rows=step)), "s")
        assert (c["backlog"], c["mark_delete_entry_id"]) == (1, 0), step


# -- subscriptions ------------------------------------------------------------------------------
def test_declared_and_default_subscriptions() -> None:
    rows = [S("k", "KEY_SHARED"), S("never", "EXCLUSIVE"), *produce(4), A("adhoc", 5, 0, 10)]
    out = replay_rows(rows)
    by_name = {r["subscription"]: r for r in out["cursors"].to_pylist()}
    assert {k: v["subscription_type"] for k, v in by_name.items()} == {
        "k": "KEY_SHARED", "never": "EXCLUSIVE", "adhoc": "SHARED"}
    assert by_name["never"]["backlog"] == 4 and by_name["adhoc"]["backlog"] == 3


def test_latest_subscription_starts_at_its_first_event() -> None:
    rows = [S("tail", "SHARED", "latest"), *produce(5), A("tail", 5, 4, 10), P(5, 5, 11), P(5, 6, 12)]
    c = cursor(replay_rows(rows), "tail")
    assert (c["mark_delete_entry_id"], c["backlog"], c["acked"]) == (4, 2, 0)
    unnamed = cursor(replay_rows([S("tail", "SHARED", "latest"), *produce(5)]), "tail")
    assert (unnamed["mark_delete_entry_id"], unnamed["backlog"]) == (4, 0)


# -- delayed delivery and PIP-423 cancels -----------------------------------------------------------
def test_delayed_message_delivered_unless_acked_before_its_time() -> None:
    rows = [P(5, 0, 0, deliver_at_ms=100), P(5, 1, 1, deliver_at_ms=100), A("s", 5, 0, 50), A("s", 5, 1, 150)]
    c = cursor(replay_rows(rows), "s")
    assert (c["delayed_delivered"], c["delayed_pending"], c["backlog"]) == (1, 0, 0)


def test_ack_at_exactly_the_deliver_time_prevents_delivery() -> None:
    rows = [P(5, 0, 0, deliver_at_ms=100), A("s", 5, 0, 100), P(5, 1, 200)]
    assert cursor(replay_rows(rows), "s")["delayed_delivered"] == 0


def test_delivery_inside_a_bulk_step_sees_only_earlier_acks() -> None:
    # One step holds the produce, the deliver time and later acks: delivery must be decided
    # with the state at its own time (split at the deliver time).
    rows = [P(5, 0, 0, deliver_at_ms=10), P(5, 1, 1, deliver_at_ms=30), A("s", 5, 1, 5), A("s", 5, 0, 20),
            P(5, 2, 40)]
    c = cursor(replay_rows(rows), "s")
    assert c["delayed_delivered"] == 1  # 5:0 delivered at 10 (acked at 20); 5:1 acked before 30


def test_pending_delayed_messages_at_the_end() -> None:
    rows = [S("f", "FAILOVER"), P(5, 0, 0, deliver_at_ms=1000), P(5, 1, 1)]
    out = replay_rows(rows)
    assert cursor(out, "s" if False else "f")["delayed_pending"] == 0  # failover delivers at once
    out = replay_rows([*rows, A("s", 5, 1, 2)])
    assert cursor(out, "s")["delayed_pending"] == 1


def test_cancel_before_deliver_time_is_in_time() -> None:
    rows = [S("a"), S("b"), P(5, 0, 0, deliver_at_ms=100), C("a", 5, 0, 40), P(5, 1, 200)]
    out = replay_rows(rows)
    a, b = cursor(out, "a"), cursor(out, "b")
    assert (a["cancelled"], a["delayed_delivered"], a["backlog"]) == (1, 0, 1)
    assert (b["cancelled"], b["delayed_delivered"], b["backlog"]) == (0, 1, 2)
    assert reasons(out) == []


def test_cancel_after_deliver_time_reports_the_delivery() -> None:
    rows = [S("a"), S("b"), P(5, 0, 0, deliver_at_ms=100), A("a", 5, 0, 120), C(None, 5, 0, 150)]
    out = replay_rows(rows)
    assert sorted(reasons(out)) == [("a", "delivered_before_cancel"), ("b", "delivered_before_cancel")]
    assert "50 ms later" in out["anomalies"].to_pylist()[0]["detail"]
    assert cursor(out, "a")["cancelled"] == 0 and cursor(out, "b")["cancelled"] == 1
    assert cursor(out, "b")["backlog"] == 0


def test_cancel_of_a_message_that_was_not_delayed() -> None:
    out = replay_rows([*produce(2), A("s", 5, 1, 5), C("s", 5, 0, 10)])
    assert reasons(out) == [("s", "cancel_after_delivery")]
    assert cursor(out, "s")["cancelled"] == 1 and cursor(out, "s")["backlog"] == 0


def test_cancel_for_every_subscription_skips_cumulative_types() -> None:
    rows = [S("sh"), S("fo", "FAILOVER"), P(5, 0, 0, deliver_at_ms=100), C(None, 5, 0, 10)]
    out = replay_rows(rows)
    assert cursor(out, "sh")["cancelled"] == 1 and cursor(out, "fo")["cancelled"] == 0
    assert reasons(out) == []
    only = replay_rows([S("fo", "FAILOVER"), P(5, 0, 0, deliver_at_ms=100), C(None, 5, 0, 10)])
    assert reasons(only) == [(None, "cancel_without_subscription")]


def test_cancel_refused_unknown_subscription_and_unknown_position() -> None:
    rows = [S("fo", "FAILOVER"), P(5, 0, 0, deliver_at_ms=100), C("fo", 5, 0, 10), C("ghost", 5, 0, 11),
            C("fo", 5, 9, 12), C(None, 6, 0, 13)]
    got = sorted((r["ts_ms"], str(r["subscription"]), r["reason"]) for r in replay_rows(rows)["anomalies"].to_pylist())
    assert got == [(10, "fo", "cancel_refused"), (11, "ghost", "unknown_subscription"),
                   (12, "fo", "unknown_position"), (13, "None", "unknown_position")]


def test_batch_index_cancel() -> None:
    rows = [S("s"), P(5, 0, 0, batch_size=2, deliver_at_ms=100), C("s", 5, 0, 10, batch_index=0),
            A("s", 5, 0, 200, batch_index=1),
            C("s", 5, 0, 11, batch_index=5)]
    out = replay_rows(rows)
    c = cursor(out, "s")
    assert c["backlog"] == 0 and c["acked"] == 1
    assert reasons(out) == [("s", "invalid_row")]


# -- invalid rows and ordering ----------------------------------------------------------------------
def test_invalid_rows_become_anomalies_and_are_not_applied() -> None:
    rows = [*produce(3), A("s", 5, -1, 5), A("s", 5, 0, 6, ack_type="sometimes"), A("s", 5, 1, 7, batch_index=-2),
            P(5, 3, 8, batch_size=0), A("s", 5, 2, 9)]
    out = replay_rows(rows)
    details = {r["detail"] for r in out["anomalies"].to_pylist() if r["reason"] == "invalid_row"}
    assert details == {"entry_id is negative", "unknown ack_type 'sometimes'", "batch_index is negative",
                       "batch_size must be at least 1"}
    c = cursor(out, "s")
    assert c["acked"] == 1 and c["backlog"] == 2


def test_rows_without_topic_go_to_anomalies() -> None:
    rows = [P(5, 0, 0), {**P(5, 1, 1), "topic": None}, {**A("s", 5, 0, 3), "partition": None}]
    out = replay_rows(rows)
    got = sorted((str(r["topic"]), r["detail"]) for r in out["anomalies"].to_pylist())
    assert got == [("None", "topic is missing"), (T, "partition is missing")]
    # Issue 17 item 9: they create no phantom topic-partition row.
    assert [(r["topic"], r["partition"], r["events"]) for r in out["partitions"].to_pylist()] == [(T, 0, 1)]


def test_events_out_of_order_raise() -> None:
    table = event_table([*produce(3), A("s", 5, 0, 10)])
    rev = table.take(pa.array([3, 0, 1, 2]))
    replayer = PartitionReplayer(T, 0)
    with pytest.raises(EventOrderError, match="out of order"):
        replayer.feed(rev.to_batches()[0])
    replayer = PartitionReplayer(T, 0)
    sorted_rows = table.sort_by([("ts", "ascending"), ("kind", "ascending"), ("seq", "ascending")])
    replayer.feed(sorted_rows.slice(2).to_batches()[0])
    with pytest.raises(EventOrderError):  # across batches too
        replayer.feed(sorted_rows.slice(0, 2).to_batches()[0])


# -- determinism ---------------------------------------------------------------------------------
def _generated_events(tmp_path: Any, events: int = 40_000) -> tuple[pa.Table, dict]:
    from mledger.replay import GeneratorConfig, generate
    from mledger.replay._inputs import plan_inputs, read_all

    generate(str(tmp_path), GeneratorConfig(topics=2, partitions=2, events=events, max_entries_per_ledger=300,
                                            rate_per_s=200, seed=3, cancel_fraction=0.3, invalid_fraction=0.002,
                                            raw=True))
    plan = plan_inputs(str(tmp_path))
    return pa.Table.from_batches(list(read_all(plan)), EVENT_SCHEMA), plan.subscriptions


def _sorted_union(batches: Any) -> pa.Table:
    union = pa.Table.from_batches(list(batches), OUTPUT_SCHEMA)
    return union.sort_by([(c, "ascending") for c in ("record", "topic", "partition", "subscription", "ts_ms",
                                                       "ledger_id", "entry_id", "batch_index", "reason", "detail")])


def test_results_do_not_depend_on_how_input_is_batched(tmp_path: Any) -> None:
    events, subs = _generated_events(tmp_path)
    reference = None
    for feed_rows in (10_000, 997, 64):
        union = _sorted_union(replay_table(events, ReplaySettings(emit_state=True), subs, feed_rows))
        if reference is None:
            reference = union
        else:
            assert union.equals(reference), feed_rows
    assert reference is not None and reference.num_rows > 20


def test_bulk_steps_equal_one_event_at_a_time(tmp_path: Any) -> None:
    """Steps of one event are the sequential reference for everything the engine does in bulk."""
    events, subs = _generated_events(tmp_path, events=12_000)
    bulk = _sorted_union(replay_table(events, ReplaySettings(emit_state=True), subs))
    single = _sorted_union(replay_table(events, ReplaySettings(emit_state=True, segment_rows=1), subs))
    assert {"delivered_before_cancel", "cancel_after_delivery", "invalid_row"} <= set(
        bulk.column("reason").drop_null().to_pylist())
    # every column, the worst moment for a restart and its time included
    for x, y in zip(bulk.to_pylist(), single.to_pylist(), strict=True):
        assert x == y
    assert bulk.num_rows == single.num_rows


def test_cancel_and_ack_of_one_entry_in_one_step() -> None:
    base = [S("a"), S("b"), P(5, 0, 0, deliver_at_ms=100), P(5, 1, 1, deliver_at_ms=100)]
    out = replay_rows([*base, A("a", 5, 0, 10), C(None, 5, 0, 20), C("b", 5, 1, 30), A("b", 5, 1, 40), P(5, 2, 200)])
    a, b = cursor(out, "a"), cursor(out, "b")
    assert (a["acked"], a["cancelled"], b["acked"], b["cancelled"]) == (1, 0, 0, 2)
    assert (a["backlog"], b["backlog"]) == (2, 1)  # a still has 5:1 and 5:2
    assert reasons(out) == []


# -- persisted state ---------------------------------------------------------------------------------
def _holes(n: int) -> list[dict[str, Any]]:
    return [*produce(2 * n), *[A("s", 5, 2 * i + 1, 10_000 + i) for i in range(n)]]


def _every_ack_persisted(values: dict[str, str] | None = None, **fields: Any) -> ReplaySettings:
    """No mark-delete limiter: every ack persists (the end's rewind writes nothing, so under
    the default 1/s limiter the last persist would hold the first hole alone)."""
    return ReplaySettings(**fields).with_values({"throttle_mark_delete": "0", **(values or {})})


def test_persisted_state_matches_the_cursor() -> None:
    out = replay_rows(_holes(50), _every_ack_persisted(emit_state=True))
    c = cursor(out, "s")
    assert c["state_record"] == "PositionInfo" and c["state_chunks"] == 1
    assert len(c["state"]) == c["persisted_state_bytes"]
    state = decode_position_info(c["state"])
    assert tuple(state.mark_delete) == (5, -1)
    assert state.ranges is not None and state.ranges.size == 50 == c["ack_hole_ranges"]


def test_fully_acked_cursor_persists_to_the_metadata_store() -> None:
    # The cursor's first persist finds nothing after the mark-delete: the node, no cursor ledger.
    # (Three individual acks would persist at the first, 5:1 and 5:2 still unacknowledged:
    # a cursor ledger, whose last entry the final persist then appends to.)
    out = replay_rows([S("s", "EXCLUSIVE"), *produce(3), A("s", 5, 2, 10, ack_type="cumulative")],
                      ReplaySettings(emit_state=True))
    c = cursor(out, "s")
    assert c["state_record"] == "ManagedCursorInfo" and c["backlog"] == 0
    assert tuple(decode_managed_cursor_info(c["state"]).mark_delete) == (5, 2)


def test_persistence_settings_truncate_and_chunk() -> None:
    truncated = cursor(replay_rows(_holes(50), _every_ack_persisted({"max_unacked_ranges_to_persist": "10"})), "s")
    assert truncated["truncated_ranges"] == 40
    chunked = cursor(replay_rows(_holes(2000), _every_ack_persisted({
        "persistent_unacked_ranges_with_multiple_entries_enabled": "true",
        "max_unacked_ranges_to_persist": "0",
        "persistent_unacked_ranges_max_entry_size": "4096",
    })), "s")  # fmt: skip
    assert chunked["truncated_ranges"] == 0 and chunked["state_chunks"] > 2
    long_array = cursor(replay_rows(_holes(50), _every_ack_persisted({"individual_ack_format": "long_array"})), "s")
    assert long_array["persisted_state_bytes"] < cursor(replay_rows(_holes(50), _every_ack_persisted()), "s")[
        "persisted_state_bytes"
    ]


# -- pieces --------------------------------------------------------------------------------------------
def test_entry_index_lookup() -> None:
    index = EntryIndex()
    index.append(3, np.array([1, 2], np.int32), np.array([-1, 50]))
    index.append(3, np.array([1], np.int32), np.array([-1]))
    index.append(9, np.ones(2000, np.int32), np.full(2000, -1))
    g = index.lookup(np.array([3, 3, 3, 9, 9, 4, 10, 3]), np.array([0, 2, 3, 1999, 2000, 0, 0, -1]))
    assert g.tolist() == [0, 2, -1, 2002, -1, -1, -1, -1]
    assert index.batch_size(np.array([1])).tolist() == [2] and index.deliver_at(np.array([1])).tolist() == [50]
    assert (index.last_ledger, index.next_entry, index.size, index.ledgers) == (9, 2000, 2003, 2)


def test_custom_model_factory_is_used() -> None:
    from mledger.replay import BrokerModel

    made = []

    def factory(topic: str, partition: int, settings: ReplaySettings) -> BrokerModel:
        made.append((topic, partition))
        return BrokerModel(topic, partition, settings)

    replay_rows([*produce(2), A("s", 5, 0, 5)], model_factory=factory)
    assert made == [(T, 0)]


def test_declared_spec_objects() -> None:
    r = PartitionReplayer(T, 0, declared=[SubscriptionSpec("x", "FAILOVER")])
    out = r.finish()
    assert out[-1].num_rows == 1  # the partition row


def test_module_doctests() -> None:
    for module in (mledger.replay._events, mledger.replay._broker_model):
        assert doctest.testmod(module).failed == 0


def test_ledger_ids_beyond_the_replayable_range_are_invalid_rows() -> None:
    big = 1 << 62
    out = replay_rows([P(1 << 41, 0, 1), P(big, 0, 2), A("s", 1 << 41, 0, 3)])
    assert [(r["reason"], r["ledger_id"], r["detail"]) for r in out["anomalies"].to_pylist()] == [
        ("invalid_row", big, "ledger_id is 2^62 or more, beyond the replayable range")]
    assert (cursor(out, "s")["mark_delete_ledger_id"], cursor(out, "s")["backlog"]) == (1 << 41, 0)
