"""The Spark prepare and replay: equal to the in-process ones row for row, plan shape, bad inputs.

All tests share the session-scoped ``spark`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mledger.replay import (
    GeneratorConfig,
    InputSchemaError,
    ReplaySettings,
    SweepSummary,
    generate,
    open_prepared,
    prepare_in_process,
    run_single_process,
)
from mledger.replay._events import write_logs
from mledger.replay._inputs import plan_inputs
from mledger.replay._layout import read_partition
from mledger.replay.spark._job import run_replay
from mledger.replay.spark._prepare import prepare_dataframe, prepare_on_spark

pytestmark = pytest.mark.spark

SORT = {
    "cursors": ["topic", "partition", "subscription"],
    "anomalies": ["topic", "partition", "event", "ts_ms", "ledger_id", "entry_id", "batch_index", "subscription",
                  "reason", "detail"],
    "partitions": ["topic", "partition"],
}


def read_outputs(out_dir: str, extra: tuple[str, ...] = ()) -> dict[str, pa.Table]:
    tables = {}
    for name, keys in SORT.items():
        table = pq.read_table(os.path.join(out_dir, name))
        tables[name] = table.sort_by([(k, "ascending") for k in (*extra, *keys)])
    return tables


def assert_same_rows(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> None:
    for name in SORT:
        left, right = a[name].to_pylist(), b[name].to_pylist()
        assert len(left) == len(right), name
        for i, (x, y) in enumerate(zip(left, right, strict=True)):
            assert x == y, f"{name} row {i}: {x} != {y}"


CFG = GeneratorConfig(topics=6, partitions=4, events=120_000, max_entries_per_ledger=300, rate_per_s=300, seed=11)
SWEEP_CFG = GeneratorConfig(topics=6, partitions=4, events=12_000, max_entries_per_ledger=300, rate_per_s=300, seed=11,
                            lost_ack_fraction=0.02)
"""The sweep's log: a tenth of :data:`CFG` (a sweep that persists at every ack with a limit of 3
replays many times slower than one replay), its lost acks leaving holes enough to truncate."""


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("generated"))
    generate(path, CFG)
    return path


@pytest.fixture(scope="module")
def sweep_generated(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("sweep"))
    generate(path, SWEEP_CFG)
    return path


@pytest.fixture(scope="module")
def generated_raw(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("raw"))
    generate(path, GeneratorConfig(**{**CFG.__dict__, "raw": True}))
    return path


def test_spark_replay_equals_single_process_row_by_row(spark: Any, generated: str, tmp_path: Any) -> None:
    settings = ReplaySettings(tasks=5, emit_state=True)
    on_spark = run_replay(spark, generated, str(tmp_path / "spark"), settings)
    alone = run_single_process(generated, str(tmp_path / "local"), settings)
    a, b = read_outputs(str(tmp_path / "spark")), read_outputs(str(tmp_path / "local"))
    assert_same_rows(a, b)
    assert on_spark.topic_partitions == alone.topic_partitions == 24
    assert on_spark.events == alone.events > 100_000
    assert on_spark.anomalies == alone.anomalies
    assert {"delivered_before_cancel", "cancel_after_delivery", "dedup_duplicate", "invalid_row",
            "unknown_position", "produced_gap"} <= set(on_spark.anomalies)
    cursors = a["cursors"]
    assert cursors.num_rows > 60 and all(s is not None for s in cursors["state"].to_pylist())
    assert sum(cursors["ack_hole_ranges"].to_pylist()) > 0 and max(cursors["backlog"].to_pylist()) > 0
    # five tasks wrote one part per output each, nothing else is left
    assert sorted(os.listdir(tmp_path / "spark" / "cursors")) == sorted(
        f for f in os.listdir(tmp_path / "spark" / "cursors") if re.fullmatch(r"part-0000[0-4]-a\d+\.parquet", f))
    assert len(os.listdir(tmp_path / "spark" / "cursors")) == 5
    # both record the settings they ran with, for `mledger report`
    for name, engine in (("spark", "spark"), ("local", "single process")):
        with open(tmp_path / name / "settings.json", encoding="utf-8") as f:
            recorded = json.load(f)
        assert recorded["engine"] == engine and recorded["tasks"] == 5 and recorded["emit_state"] is True
        assert recorded["ledger"]["max_unacked_ranges_to_persist"] == settings.ledger.max_unacked_ranges_to_persist


def test_spark_sweep_equals_single_process_sweep(spark: Any, sweep_generated: str, tmp_path: Any) -> None:
    sweep = ["max_unacked_ranges_to_persist=3,1000", "throttle_mark_delete=0,1"]
    on_spark = run_replay(spark, sweep_generated, str(tmp_path / "spark"), sweep=sweep)
    alone = run_single_process(sweep_generated, str(tmp_path / "local"), sweep=sweep)
    assert isinstance(on_spark, SweepSummary) and isinstance(alone, SweepSummary)
    keys = ("max_unacked_ranges_to_persist", "throttle_mark_delete")
    assert_same_rows(read_outputs(str(tmp_path / "spark"), keys), read_outputs(str(tmp_path / "local"), keys))
    assert len(on_spark.summaries) == 4
    assert on_spark.summary_for(max_unacked_ranges_to_persist=3, throttle_mark_delete=0.0).truncated_ranges > 0


def test_prepare_plan_is_one_shuffle_then_sorted_streaming_groups(spark: Any, generated_raw: str, tmp_path: Any) -> None:
    df = prepare_dataframe(spark, plan_inputs(generated_raw), str(tmp_path / "p"), partitions=3)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "FlatMapGroupsInArrow [topic_key#" in plan
    assert plan.count("Exchange ") == 1 and "hashpartitioning(topic_key#" in plan and ", 3)" in plan
    # one sort, and the group keys are its prefix: Spark adds no second sort
    assert plan.count("Sort [") == 1
    assert re.search(r"Sort \[topic_key#\d+L ASC NULLS FIRST, partition#\d+L ASC NULLS FIRST, ts#\d+L ASC NULLS FIRST, "
                     r"kind_seq#\d+L ASC NULLS FIRST\]", plan)


def test_spark_prepare_writes_the_rows_of_the_in_process_prepare_and_the_generator(
        spark: Any, generated: str, generated_raw: str, tmp_path: Any) -> None:
    on_spark = prepare_on_spark(spark, plan_inputs(generated_raw), str(tmp_path / "spark"), partitions=4)
    local = prepare_in_process(plan_inputs(generated_raw), str(tmp_path / "local"))
    logs = [open_prepared(str(tmp_path / "spark")), open_prepared(str(tmp_path / "local")), open_prepared(generated)]
    assert [p.key for p in on_spark.partitions] == [p.key for p in local.partitions] == \
        [p.key for p in logs[2].manifest.partitions]
    assert on_spark.events == local.events == logs[2].manifest.events
    for parts in zip(*(log.manifest.partitions for log in logs), strict=True):
        tables = [pa.Table.from_batches(list(read_partition(log, p))) for log, p in zip(logs, parts, strict=True)]
        assert tables[0].equals(tables[1]) and tables[0].equals(tables[2]), parts[0].key
        assert parts[0].first_ts == parts[1].first_ts and parts[0].last_ts == parts[1].last_ts
    assert logs[0].subscriptions() == logs[1].subscriptions() == logs[2].subscriptions()
    assert logs[0].anomalies().equals(logs[2].anomalies())


def test_driver_topic_keys_equal_sparks_xxhash64(spark: Any) -> None:
    from pyspark.sql import functions as F

    from mledger.replay.spark._prepare import spark_xxhash64

    words = ["", "a", "persistent://public/default/orders", "é漢字🙂", *("x" * k for k in range(3, 70, 7))]
    rows = spark.createDataFrame([(w,) for w in words], "t string").select("t", F.xxhash64("t").alias("h")).collect()
    assert [(r["t"], r["h"]) for r in rows] == [(w, spark_xxhash64(w)) for w in words]


def test_raw_input_is_prepared_first_and_kept_with_prepared(spark: Any, generated: str, generated_raw: str,
                                                            tmp_path: Any) -> None:
    kept = str(tmp_path / "kept")
    run_replay(spark, generated_raw, str(tmp_path / "raw-out"), prepared=kept)
    run_replay(spark, generated, str(tmp_path / "out"))
    assert_same_rows(read_outputs(str(tmp_path / "raw-out")), read_outputs(str(tmp_path / "out")))
    assert open_prepared(kept).manifest.events > 100_000
    run_replay(spark, generated_raw, str(tmp_path / "again"))  # a temporary prepared log, removed after
    assert sorted(os.listdir(tmp_path / "again")) == ["anomalies", "cursors", "partitions", "settings.json"]


# -- hand-made cases --------------------------------------------------------------------------------
def _case_rows() -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    rows: list[dict[str, Any]] = []
    expected: set[tuple[str, str]] = set()

    def P(t: str, e: int, ts: int, **kw: Any) -> None:
        rows.append({"log": "produced", "topic": t, "partition": 0, "ledger_id": 3, "entry_id": e,
                     "publish_time_ms": ts, **kw})

    def A(t: str, sub: str, e: int, ts: int | None, **kw: Any) -> None:
        rows.append({"log": "acked", "topic": t, "partition": 0, "subscription": sub, "ledger_id": 3,
                     "entry_id": e, "ts_ms": ts, **kw})

    def C(t: str, sub: str | None, e: int, ts: int, **kw: Any) -> None:
        rows.append({"log": "cancelled", "topic": t, "partition": 0, "subscription": sub, "ledger_id": 3,
                     "entry_id": e, "ts_ms": ts, **kw})

    def S(t: str, sub: str, type_: str) -> None:
        rows.append({"log": "subscriptions", "topic": t, "subscription": sub, "type": type_,
                     "initial_position": "earliest"})

    P("unknown", 0, 1), A("unknown", "s", 5, 2)
    expected.add(("unknown", "unknown_position"))
    P("dedup", 0, 1, producer_name="p", sequence_id=7), P("dedup", 0, 1, producer_name="p", sequence_id=7)
    expected.add(("dedup", "dedup_duplicate"))
    S("late", "s", "SHARED"), P("late", 0, 1, deliver_at_ms=100), A("late", "s", 0, 120), C("late", None, 0, 500)
    expected.add(("late", "delivered_before_cancel"))
    S("plain", "s", "SHARED"), P("plain", 0, 1), C("plain", "s", 0, 5)
    expected.add(("plain", "cancel_after_delivery"))
    S("refused", "f", "FAILOVER"), P("refused", 0, 1, deliver_at_ms=100), C("refused", "f", 0, 5)
    expected.add(("refused", "cancel_refused"))
    S("cumul", "s", "KEY_SHARED"), P("cumul", 0, 1), A("cumul", "s", 0, 5, ack_type="cumulative")
    expected.add(("cumul", "cumulative_ack_refused"))
    P("gap", 0, 1), P("gap", 4, 2)
    expected.add(("gap", "produced_gap"))
    # every chunk of a chunked message carries its sequence id and only the last is deduplicated
    # (issue 31 item 11): 3 chunks are 3 entries, and the next message follows them with no gap;
    # the last chunk sent again (a retry, at its position) is a duplicate
    for chunk in range(3):
        P("chunks", chunk, 1, producer_name="p", sequence_id=4, chunk_id=chunk, num_chunks=3, uuid="p-4")
    P("chunks", 2, 1, producer_name="p", sequence_id=4, chunk_id=2, num_chunks=3, uuid="p-4")
    P("chunks", 3, 2, producer_name="p", sequence_id=5)
    expected.add(("chunks", "dedup_duplicate"))
    P("ghost", 0, 1, deliver_at_ms=100), C("ghost", "nobody", 0, 5)
    expected.add(("ghost", "unknown_subscription"))
    S("nosub", "x", "EXCLUSIVE"), P("nosub", 0, 1, deliver_at_ms=100), C("nosub", None, 0, 5)
    expected.add(("nosub", "cancel_without_subscription"))
    P("bad", 0, 1, batch_size=2), A("bad", "s", 0, 5, batch_index=4), A("bad", "s", -1, 6),
    A("bad", "s", 0, 7, ack_type="maybe"), A("bad", "s", 0, None), A("bad", "s", 0, -5)
    # ASCII case and spaces are ignored; other letters are not folded (U+0130 is not "I")
    A("bad", "s", 0, 8, ack_type=" Individual "), A("bad", "s", 0, 9, ack_type="\u0130NDIVIDUAL")
    expected.add(("bad", "invalid_row"))
    S("bad", "weird", "BOGUS")
    return rows, expected


def test_each_anomaly_case_is_found_with_its_reason(spark: Any, tmp_path: Any) -> None:
    rows, expected = _case_rows()
    events = str(tmp_path / "events")
    write_logs(events, rows)
    on_spark = run_replay(spark, events, str(tmp_path / "spark"), ReplaySettings(tasks=2), prepare_partitions=2)
    out = read_outputs(str(tmp_path / "spark"))
    found = {(r["topic"], r["reason"]) for r in out["anomalies"].to_pylist()}
    assert found == expected
    bad = [r for r in out["anomalies"].to_pylist() if r["topic"] == "bad"]
    assert {r["detail"] for r in bad if r["event"] == "acked"} == {
        "batch_index 4 is out of range for the produced batch_size 2", "entry_id is negative",
        "unknown ack_type 'maybe'", "unknown ack_type '\u0130NDIVIDUAL'", "ts_ms is missing", "ts_ms is negative"}
    assert next(r["detail"] for r in bad if r["event"] == "subscriptions").startswith("unknown subscription type 'BOGUS'")
    alone = run_single_process(events, str(tmp_path / "local"), ReplaySettings())
    assert_same_rows(out, read_outputs(str(tmp_path / "local")))
    assert on_spark.anomalies == alone.anomalies
    assert on_spark.anomalies["invalid_row"] == sum(1 for r in bad if r["reason"] == "invalid_row") == 7


def test_a_log_without_anomalies_writes_an_empty_anomalies_output(spark: Any, tmp_path: Any) -> None:
    rows = [{"log": "produced", "topic": "clean", "partition": 0, "ledger_id": 3, "entry_id": e,
             "publish_time_ms": e} for e in range(5)]
    rows.append({"log": "acked", "topic": "clean", "partition": 0, "subscription": "s", "ledger_id": 3,
                 "entry_id": 2, "ts_ms": 9})
    write_logs(str(tmp_path / "events"), rows)
    summary = run_replay(spark, str(tmp_path / "events"), str(tmp_path / "out"), ReplaySettings(tasks=2))
    assert summary.anomalies == {}
    out = read_outputs(str(tmp_path / "out"))
    assert out["anomalies"].num_rows == 0 and out["cursors"].num_rows == 1


def test_json_lines_and_csv_inputs(spark: Any, tmp_path: Any) -> None:
    rows, _ = _case_rows()
    write_logs(str(tmp_path / "parquet"), rows)
    mixed = str(tmp_path / "mixed")
    write_logs(mixed, [r for r in rows if r["log"] in ("produced", "subscriptions")], fmt="jsonl")
    write_logs(mixed, [r for r in rows if r["log"] in ("acked", "cancelled")], fmt="csv")
    with open(os.path.join(mixed, "acked", "part-00001.csv"), "w") as f:  # text that is not a number
        f.write("topic,partition,subscription,ledger_id,entry_id,batch_index,ack_type,ts_ms\n"
                "extra,0,s,3,abc,,individual,9\n")
    run_replay(spark, mixed, str(tmp_path / "out"), ReplaySettings(tasks=2), prepare_partitions=2)
    run_single_process(str(tmp_path / "parquet"), str(tmp_path / "ref"))
    got, ref = read_outputs(str(tmp_path / "out")), read_outputs(str(tmp_path / "ref"))
    extra = [r for r in got["anomalies"].to_pylist() if r["topic"] == "extra"]
    assert [r["detail"] for r in extra] == ["entry_id is not an integer: 'abc'"]
    got["anomalies"] = got["anomalies"].filter(pa.compute.not_equal(got["anomalies"]["topic"], "extra"))
    got["partitions"] = got["partitions"].filter(pa.compute.not_equal(got["partitions"]["topic"], "extra"))
    assert got["cursors"].to_pylist() == ref["cursors"].to_pylist()
    # details name the subscriptions file, whose name differs between the two directories
    assert got["anomalies"].drop_columns(["detail"]).to_pylist() == ref["anomalies"].drop_columns(["detail"]).to_pylist()


def test_bad_input_files_fail_before_any_spark_job(spark: Any, tmp_path: Any) -> None:
    good = [{"log": "produced", "topic": "t", "partition": 0, "ledger_id": 1, "entry_id": 0, "publish_time_ms": 1},
            {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 1, "entry_id": 0,
             "ts_ms": 2}]
    base = str(tmp_path / "ev")
    write_logs(base, good)
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "subscription": ["s"], "ledger_id": [1],
                             "ts_ms": [3]}), os.path.join(base, "acked", "part-00009.parquet"))
    with pytest.raises(InputSchemaError, match=r"acked/part-00009.parquet: column 'entry_id' is missing"):
        run_replay(spark, base, str(tmp_path / "out"))
    os.remove(os.path.join(base, "acked", "part-00009.parquet"))
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "ledger_id": ["one"], "entry_id": [0],
                             "publish_time_ms": [1]}), os.path.join(base, "produced", "part-00001.parquet"))
    with pytest.raises(InputSchemaError, match=r"produced/part-00001.parquet: column 'ledger_id' has type string"):
        run_replay(spark, base, str(tmp_path / "out"))
    os.remove(os.path.join(base, "produced", "part-00001.parquet"))
    with open(os.path.join(base, "acked", "notes.txt"), "w") as f:
        f.write("hello")
    with pytest.raises(InputSchemaError, match=r"notes.txt: unsupported file type '.txt'"):
        run_replay(spark, base, str(tmp_path / "out"))
    os.remove(os.path.join(base, "acked", "notes.txt"))
    open(os.path.join(base, "produced", "part-00002.parquet"), "wb").close()  # Spark's scan would fail later
    with pytest.raises(InputSchemaError, match=r"produced/part-00002.parquet: the file is empty \(0 bytes\)"):
        run_replay(spark, base, str(tmp_path / "out"))
    os.makedirs(str(tmp_path / "empty"))
    with pytest.raises(InputSchemaError, match="the produced log is missing"):
        run_replay(spark, str(tmp_path / "empty"), str(tmp_path / "out"))
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs
