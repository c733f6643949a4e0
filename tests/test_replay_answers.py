"""The operator's answers (issue 25 item 5): what a restart would redeliver, state that cannot
be stored, Pulsar's #25548 truncation counters, and the ``--defaults`` presets."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from mledger.replay import ReplaySettings, SubscriptionSpec
from mledger.replay._local import output_tables, replay_table
from mledger.replay._schema import ANSWER_FIELDS, EVENT_SCHEMA, KIND_ACKED, KIND_PRODUCED

SUBS = {"t": [SubscriptionSpec("s", "SHARED", "earliest")]}


def events(acks: list[int], batch: dict[int, int] | None = None, index_acks: list[tuple[int, int]] = ()) -> pa.Table:
    """Entries 0-9 of ledger 1 produced at ts 0..9, then individual acks at ts 100, 101, ..."""
    batch = batch or {}
    rows: list[dict[str, Any]] = []
    for e in range(10):
        rows.append(
            {
                "ts": e,
                "kind": KIND_PRODUCED,
                "name": "p",
                "ledger_id": 1,
                "entry_id": e,
                "batch": batch.get(e, 1),
                "sequence_id": e,
            }
        )
    for i, e in enumerate(acks):
        rows.append({"ts": 100 + i, "kind": KIND_ACKED, "name": "s", "ledger_id": 1, "entry_id": e, "ack_type": 0})
    for i, (e, b) in enumerate(index_acks):
        rows.append(
            {"ts": 200 + i, "kind": KIND_ACKED, "name": "s", "ledger_id": 1, "entry_id": e, "batch": b, "ack_type": 0}
        )
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
        # {2} kept, 4 and 6 lost; the persists after the acks of 4 and 6 truncated (the end's
        # rewind writes nothing)
        ({"max_unacked_ranges_to_persist": "1"}, 2, 2),
        ({"max_unacked_ranges_to_persist": "10"}, 0, 0),
        ({"max_unacked_ranges_to_persist": "1", "unacked_ranges_limit_off_by_one": "true"}, 1, 1),  # pre-#25548
        ({"max_unacked_ranges_to_persist": "10", "persist_individual_ack_as_long_array": "true"}, 0, 0),
        # Pulsar's toRanges keeps no ledger when the first one has more acked entries than the
        # limit, and persistPositionToLedger then writes the range format, capped: as the range format.
        ({"max_unacked_ranges_to_persist": "1", "persist_individual_ack_as_long_array": "true"}, 2, 2),
    ],
)
def test_restart_would_redeliver_what_the_persisted_state_does_not_hold(
    settings: dict[str, str], redelivered: int, truncating_persists: int
) -> None:
    row = cursor(ACKS_2_4_6, **settings)
    assert row["redelivered_after_restart"] == redelivered
    assert row["redelivered_after_restart_max"] == redelivered  # every change persisted: reached at the end
    assert row["persist_unacked_ranges_truncated"] == truncating_persists
    assert row["redelivered_after_restart_max_at_ms"] == (None if redelivered == 0 else 102)  # after the ack of 6
    assert row["state_over_limit_at_ms"] is None


def test_maximum_counts_acks_waiting_for_a_throttled_persist() -> None:
    # one persist a second: the ack at 100 ms is persisted, those at 101 and 102 ms wait for a
    # persist the log never reaches; a crash after 102 ms, the end included, redelivers both.
    s = ReplaySettings().with_values({"throttle_mark_delete": "1", "segment_rows": "1"})
    row = output_tables(replay_table(ACKS_2_4_6, s, SUBS))["cursors"].to_pylist()[0]
    assert row["redelivered_after_restart"] == 2
    assert row["redelivered_after_restart_max"] == 2
    assert row["redelivered_after_restart_max_at_ms"] == 102


def test_batch_indexes_count_as_messages() -> None:
    table = events([], batch={3: 5}, index_acks=[(3, 0), (3, 1), (3, 4)])
    assert cursor(table)["redelivered_after_restart"] == 0
    row = cursor(table, max_batch_deleted_index_to_persist="0")
    assert row["redelivered_after_restart"] == 3
    assert row["persist_batch_deleted_indexes_truncated"] == 3  # one per ack


def test_state_over_the_frame_limit_or_jute_maxbuffer_is_flagged_with_its_time() -> None:
    row = cursor(ACKS_2_4_6, netty_max_frame_size_bytes="8")
    assert row["state_over_limit_at_ms"] == 100  # the first cursor-ledger entry: the ack of 2
    row = cursor(ACKS_2_4_6, jute_maxbuffer="8")
    assert row["state_over_limit_at_ms"] == 0
    assert cursor(ACKS_2_4_6)["state_over_limit_at_ms"] is None


# Pulsar's broker defaults per release (ServiceConfiguration / conf/broker.conf):
# managedLedgerMaxUnackedRangesToPersist 10000 -> 200000, managedLedgerMaxUnackedRangesToPersistInMetadataStore
# 1000 -> 200000, managedLedgerMaxBatchDeletedIndexToPersist 10000 -> 200000 (apache/pulsar#25992, 2026-06);
# managedLedgerPersistIndividualAckAsLongArray false in 3.0 / 4.0, true since 4.1 (apache/pulsar#25985);
# N + 1 ranges kept before apache/pulsar#25548 (2026-04); managedLedgerDefaultMarkDeleteRateLimit=1.0;
# maxMessageSize=5242880 (frame limit + Commands.MESSAGE_SIZE_FRAME_PADDING = 10 KB).
PULSAR = {
    "pulsar-3.0": (10_000, 1_000, 10_000, False, True),
    "pulsar-4.0": (10_000, 1_000, 10_000, False, True),
    "pulsar-4.1": (10_000, 1_000, 10_000, True, True),
    "pulsar-newest": (200_000, 200_000, 200_000, True, False),
}


@pytest.mark.parametrize("name", list(PULSAR))
def test_presets_hold_pulsars_documented_defaults(name: str) -> None:
    s = ReplaySettings().with_values({"defaults": name})
    ranges, in_metadata, batch, long_array, off_by_one = PULSAR[name]
    assert s.defaults == name
    assert s.ledger.max_unacked_ranges_to_persist == ranges
    assert s.ledger.max_unacked_ranges_to_persist_in_metadata_store == in_metadata
    assert s.ledger.max_batch_deleted_index_to_persist == batch
    assert s.ledger.persist_individual_ack_as_long_array is long_array
    assert s.ledger.unacked_ranges_limit_off_by_one is off_by_one
    assert s.ledger.throttle_mark_delete == 1.0
    assert s.factory.frame_limit == 5 * 1024 * 1024 + 10 * 1024
    assert s.factory.jute_maxbuffer == 10 * 1024 * 1024


def test_set_applies_on_top_of_a_preset_also_when_the_preset_is_swept() -> None:
    from mledger import ConfigError
    from mledger.replay._sweep import variants

    base = ReplaySettings.from_pairs(["defaults=pulsar-4.0", "max_unacked_ranges_to_persist=7"])
    assert (base.ledger.max_unacked_ranges_to_persist, base.ledger.max_batch_deleted_index_to_persist) == (7, 10_000)
    fixed = ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=7"])
    swept = variants(fixed, ["defaults=pulsar-4.0,pulsar-newest"], ["max_unacked_ranges_to_persist"])
    assert [v.values for v in swept] == [(("defaults", "pulsar-4.0"),), (("defaults", "pulsar-newest"),)]
    assert [v.settings.ledger.max_unacked_ranges_to_persist for v in swept] == [7, 7]
    assert [v.settings.ledger.max_batch_deleted_index_to_persist for v in swept] == [10_000, 200_000]
    with pytest.raises(ConfigError, match="pulsar-newest"):
        ReplaySettings().with_values({"defaults": "pulsar-2.11"})


def test_upgrade_is_one_sweep_over_the_preset() -> None:
    """Acks of 2, 4, 6 with a limit of one, every ack persisted (no limiter): 4.0 keeps N + 1
    ranges (6 lost), newest exactly N."""
    table = ACKS_2_4_6
    rows = {}
    for name in ("pulsar-4.0", "pulsar-newest"):
        values = {"defaults": name, "max_unacked_ranges_to_persist": "1", "throttle_mark_delete": "0"}
        s = ReplaySettings().with_values(values)
        rows[name] = output_tables(replay_table(table, s, SUBS))["cursors"].to_pylist()[0]
    assert rows["pulsar-4.0"]["redelivered_after_restart"] == 1
    # the long-array format keeps no ledger (3 acked entries > 1) and falls back to one range
    assert rows["pulsar-newest"]["redelivered_after_restart"] == 2


@pytest.mark.spark
def test_spark_and_single_process_give_the_same_answers(spark: Any, tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from mledger.replay import GeneratorConfig, generate, run_single_process
    from mledger.replay.spark._job import run_replay

    generate(
        str(tmp_path / "log"),
        GeneratorConfig(topics=2, partitions=2, events=8_000, max_entries_per_ledger=200, rate_per_s=300, seed=5),
    )
    base = ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=3"])
    sweep = ["defaults=pulsar-4.0,pulsar-newest"]
    kw: dict[str, Any] = {"sweep": sweep, "fixed": ["max_unacked_ranges_to_persist"]}
    run_replay(spark, str(tmp_path / "log"), str(tmp_path / "spark"), base, **kw)
    run_single_process(str(tmp_path / "log"), str(tmp_path / "local"), base, **kw)
    keys = ["defaults", "topic", "partition", "subscription"]
    tables = [
        pq.read_table(str(tmp_path / d / "cursors")).sort_by([(k, "ascending") for k in keys])
        for d in ("spark", "local")
    ]
    columns = ["defaults", *[f.name for f in ANSWER_FIELDS]]
    assert tables[0].select(columns).to_pylist() == tables[1].select(columns).to_pylist()
    rows = tables[0].to_pylist()
    assert any(r["redelivered_after_restart_max"] > 0 for r in rows)
    assert any(r["persist_unacked_ranges_truncated"] > 0 for r in rows)


def test_summary_and_sweep_table_print_the_answers() -> None:
    from mledger.replay import SweepSummary, format_summary, format_sweep, summarize

    s = ReplaySettings().with_values(
        {"throttle_mark_delete": "0", "segment_rows": "1", "max_unacked_ranges_to_persist": "1"}
    )
    tables = output_tables(replay_table(ACKS_2_4_6, s, SUBS))
    summary = summarize(tables["cursors"], tables["partitions"], {})
    assert (summary.redelivered_after_restart, summary.redelivered_after_restart_max) == (2, 2)
    assert summary.persist_unacked_ranges_truncated == 2 and summary.cursors_over_limit == 0
    text = format_summary(summary)
    assert "  crash (after the last persist): 2 (2) at the end, 2 (2) at each cursor's worst moment" in text
    assert "persists that truncated: 2 (ack ranges), 0 (batch indexes), 0 (long-array cut-off)" in text
    assert "cursors a stop hurts most" in text
    sweep = format_sweep(SweepSummary(("defaults",), (("pulsar-4.0",),), (summary,)))
    for header in ("limits max", "unload max", "truncating", "over-limit"):
        assert header in sweep


def test_cli_defaults_option_and_a_preset_sweep_sharing_one_replay(tmp_path: Any) -> None:
    import json

    from mledger.cli import main
    from mledger.replay import GeneratorConfig, generate
    from mledger.replay._mirror import shared_groups

    generate(str(tmp_path / "log"), GeneratorConfig(topics=1, partitions=1, events=2_000, seed=3))
    out = tmp_path / "out"
    args = ["replay", str(tmp_path / "log"), str(out), "--single-process", "--quiet", "--defaults", "pulsar-4.1"]
    assert main([*args, "--set", "max_unacked_ranges_to_persist=5"]) == 0
    recorded = json.loads((out / "settings.json").read_text())
    assert recorded["defaults"] == "pulsar-4.1"
    assert recorded["ledger"]["persist_individual_ack_as_long_array"] is True
    assert recorded["ledger"]["max_unacked_ranges_to_persist"] == 5
    presets = [ReplaySettings().with_values({"defaults": name}) for name in PULSAR]
    # 3.0 and 4.0 ship acknowledgmentAtBatchIndexLevelEnabled=false, 4.1 and newest true: that
    # changes what an ack does, so two replays; within each pair only persistence differs
    assert shared_groups(presets) == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    ("preset", "crash", "unload", "long_array_cuts"),
    [
        # 4.1: long arrays, the first ledger always kept (getAndAdd): a crash loses nothing; a
        # close writes the node, range format N + 1 = 2 of 3 ranges (entry 6 lost) and the
        # batch state, which 4.1 does not read back (entry 3's two acked messages lost)
        ("pulsar-4.1", (0, 0), (3, 2), 0),
        # master: not even the first ledger fits (addAndGet), the range format capped at 1
        # (entries 4 and 6 lost); the node's batch state is read back (#26474)
        ("pulsar-newest", (2, 2), (2, 2), 0),
    ],
)
def test_crash_and_unload_figures_per_preset_in_messages_and_entries(
    preset: str, crash: tuple[int, int], unload: tuple[int, int], long_array_cuts: int
) -> None:
    table = events([2, 4, 6], batch={3: 5}, index_acks=[(3, 0), (3, 1)])
    row = cursor(table, defaults=preset, max_unacked_ranges_to_persist="1")
    assert (row["redelivered_after_crash"], row["redelivered_after_crash_entries"]) == crash
    assert (row["redelivered_after_crash_limits"], row["redelivered_after_crash_limits_entries"]) == crash
    assert row["redelivered_after_crash"] == row["redelivered_after_restart"]  # the old name, one release
    assert (row["redelivered_after_unload"], row["redelivered_after_unload_entries"]) == unload
    assert row["redelivered_after_unload_max"] >= unload[0] and row["redelivered_after_unload_max_at_ms"] is not None
    assert row["persist_long_array_truncated"] == long_array_cuts


def test_summary_prints_event_times_plainly() -> None:
    """The restart table's times: ISO 8601 UTC for a recording's wall-clock times, plain
    milliseconds for a log's own clock, never thousands separators (issue 33 item 8)."""
    from mledger.replay import format_event_time as when

    assert when(1_796_000_000_123) == "2026-11-30T00:53:20.123Z"
    assert when(102) == "102 ms" and when(12_345) == "12345 ms"
    assert when(None) == "-" and when(-1) == "-"


def test_the_end_figures_are_what_a_crash_at_the_end_would_redeliver() -> None:
    """Pulsar 4.1's limiter (``RateLimiter.create(1.0)``, ``tryAcquire`` in ``asyncDelete``): the
    ack of 2 at 100 ms is granted (N = 1 s), those of 4 and 6 at 101 and 102 ms are refused and
    leave the cursor dirty; the log ends before the flush tick. The replay leaves the subscription
    idle with a rewind, which persists nothing (``ManagedCursorImpl.rewind`` moves the read
    position alone), so a crash at the end redelivers 4 and 6 (none of it the limits' doing) and
    a clean unload (``persistPositionWhenClosing``) writes them."""
    row = cursor(ACKS_2_4_6, defaults="pulsar-4.1", throttle_mark_delete="1")
    assert row["redelivered_after_crash"] == row["redelivered_after_restart"] == 2
    assert (row["redelivered_after_crash_max"], row["redelivered_after_crash_max_at_ms"]) == (2, 102)
    assert row["redelivered_after_crash_limits"] == 0
    assert row["redelivered_after_unload"] == 0
