"""Reading the logs without Spark: file checks, row problems, formats, generator, settings, CLI."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mledger import ConfigError
from mledger.replay import GeneratorConfig, InputSchemaError, ReplaySettings, generate, run_single_process
from mledger.replay._events import write_logs
from mledger.replay._inputs import plan_inputs, read_all
from mledger.replay._store import CURSOR_LEDGER_BASE, ReplayStore

GOOD = [
    {"log": "produced", "topic": "t", "partition": 0, "ledger_id": 1, "entry_id": 0, "publish_time_ms": 1},
    {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 1, "entry_id": 0, "ts_ms": 2},
]


def _events(tmp_path: Any, rows: list[dict[str, Any]] = GOOD, fmt: str = "parquet") -> str:
    path = str(tmp_path / "ev")
    write_logs(path, rows, fmt)
    return path


# -- file checks ---------------------------------------------------------------------------------
def test_missing_directory_and_logs(tmp_path: Any) -> None:
    with pytest.raises(InputSchemaError, match="no such directory"):
        plan_inputs(str(tmp_path / "nope"))
    os.makedirs(tmp_path / "empty" / "produced")
    with pytest.raises(InputSchemaError, match="the produced log is missing"):
        plan_inputs(str(tmp_path / "empty"))


def test_file_problems_name_file_column_and_problem(tmp_path: Any) -> None:
    base = _events(tmp_path)
    bad = os.path.join(base, "acked", "part-00001.parquet")
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "subscription": ["s"], "ledger_id": [1.5],
                             "entry_id": [0], "ts_ms": [1]}), bad)
    with pytest.raises(InputSchemaError, match=r"part-00001.parquet: column 'ledger_id' has type double; expected integer"):
        plan_inputs(base)
    os.remove(bad)
    with open(os.path.join(base, "produced", "extra.csv"), "w") as f:
        f.write("topic,partition,ledger_id,publish_time_ms\nt,0,1,5\n")
    with pytest.raises(InputSchemaError, match=r"extra.csv: column 'entry_id' is missing \(required in the produced log"):
        plan_inputs(base)
    os.remove(os.path.join(base, "produced", "extra.csv"))
    with open(os.path.join(base, "cancelled.xml"), "w") as f:
        f.write("<x/>")
    with pytest.raises(InputSchemaError, match=r"cancelled.xml: unsupported file type '.xml'"):
        plan_inputs(base)


@pytest.mark.parametrize("name", ["part-00000.csv", "part-00000.parquet", "part-00000.csv.gz"])
def test_a_zero_byte_file_is_no_log_and_fails_naming_the_file(tmp_path: Any, name: str) -> None:
    # A 0-byte produced file used to be skipped: the replay went on without it and reported
    # every ack as unknown_position. A CSV needs its header row and Parquet its footer.
    base = str(tmp_path / "ev")
    rows = [r for r in GOOD if r["log"] == "acked"]
    write_logs(base, rows)
    os.makedirs(os.path.join(base, "produced"))
    empty = os.path.join(base, "produced", name)
    open(empty, "wb").close()
    with pytest.raises(InputSchemaError, match=rf"{re.escape(empty)}: the file is empty \(0 bytes\)"):
        plan_inputs(base)
    with open(os.path.join(base, "cancelled.csv"), "wb"):  # optional logs too: the same file is no CSV
        pass
    os.remove(empty)
    write_logs(base, [r for r in GOOD if r["log"] == "produced"])
    with pytest.raises(InputSchemaError, match=r"cancelled.csv: the file is empty \(0 bytes\)"):
        plan_inputs(base)


def test_a_log_without_rows_is_a_valid_empty_log(tmp_path: Any) -> None:
    base = str(tmp_path / "ev")
    write_logs(base, [r for r in GOOD if r["log"] == "acked"])
    os.makedirs(os.path.join(base, "produced"))
    with open(os.path.join(base, "produced", "header.csv"), "w") as f:
        f.write("topic,partition,ledger_id,entry_id,publish_time_ms\n")
    pq.write_table(pa.table({"topic": pa.array([], pa.string()), "partition": pa.array([], pa.int32()),
                             "ledger_id": pa.array([], pa.int64()), "entry_id": pa.array([], pa.int64()),
                             "publish_time_ms": pa.array([], pa.int64())}),
                   os.path.join(base, "produced", "no-rows.parquet"))
    open(os.path.join(base, "produced", "nothing.jsonl"), "wb").close()  # JSON Lines: zero records
    summary = run_single_process(base, str(tmp_path / "out"))
    assert summary.anomalies == {"unknown_position": 1}  # the ack names a position never produced


def test_json_with_a_column_changing_type_fails_naming_the_file(tmp_path: Any) -> None:
    base = _events(tmp_path)
    with open(os.path.join(base, "acked", "more.jsonl"), "w") as f:
        f.write('{"topic":"t","partition":0,"subscription":"s","ledger_id":1,"entry_id":0,"ts_ms":3}\n')
        f.write('{"topic":"t","partition":0,"subscription":"s","ledger_id":1,"entry_id":0.5,"ts_ms":4}\n')
    plan = plan_inputs(base)
    with pytest.raises(InputSchemaError, match=r"more.jsonl: .*entry_id|more.jsonl: column 'entry_id'"):
        list(read_all(plan))


def test_hidden_and_underscore_files_are_skipped_and_order_is_by_path(tmp_path: Any) -> None:
    base = _events(tmp_path)
    open(os.path.join(base, "produced", "_SUCCESS"), "w").close()
    open(os.path.join(base, "produced", ".part-0.crc"), "w").close()
    plan = plan_inputs(base)
    assert [os.path.basename(p) for p in plan.files["produced"]] == ["part-00000.parquet"]
    assert plan.relative("produced", plan.files["produced"][0]) == "part-00000.parquet"
    assert plan.uri(plan.files["produced"][0]).startswith("file:///")


# -- rows ------------------------------------------------------------------------------------------
def test_csv_text_problems_become_invalid_rows(tmp_path: Any) -> None:
    base = _events(tmp_path)
    with open(os.path.join(base, "acked", "part-00001.csv"), "w") as f:
        f.write("topic,partition,subscription,ledger_id,entry_id,batch_index,ack_type,ts_ms\n"
                "t,0,s,1,x7,,individual,5\n"
                "t,0,s,1,0,, Cumulative ,6\n"
                "t,0,,1,0,,individual,7\n"
                "t,0,s,1,0,,individual,99999999999999999999\n")
    summary = run_single_process(base, str(tmp_path / "out"))
    rows = pq.read_table(str(tmp_path / "out" / "anomalies")).to_pylist()
    details = sorted(r["detail"] for r in rows)
    assert details == ["cumulative acks are not allowed on Shared and Key_Shared subscriptions",
                       "entry_id is not an integer: 'x7'", "subscription is missing",
                       "ts_ms is not an integer: '99999999999999999999'"]
    assert summary.anomalies == {"invalid_row": 3, "cumulative_ack_refused": 1}


def test_subscriptions_log_problems_are_anomalies(tmp_path: Any) -> None:
    rows = [*GOOD,
            {"log": "subscriptions", "topic": "t", "subscription": "s", "type": "Key_Shared"},
            {"log": "subscriptions", "topic": "t", "subscription": "s", "type": "SHARED"},
            {"log": "subscriptions", "topic": "t", "subscription": "x", "type": "FIFO"},
            {"log": "subscriptions", "topic": "t", "subscription": "y", "initial_position": "middle"}]
    plan = plan_inputs(_events(tmp_path, rows))
    assert [s.type for s in plan.subscriptions["t"]] == ["KEY_SHARED"]
    got = [(r["subscription"], r["detail"].split(" (")[0]) for r in plan.subscription_anomalies.to_pylist()]
    assert got == [("s", "subscription declared again; the first declaration counts"),
                   ("x", "unknown subscription type 'FIFO'; expected one of EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED"),
                   ("y", "unknown initial_position 'middle'; expected earliest or latest")]


# -- formats and the generator ---------------------------------------------------------------------
def _digest(path: str) -> str:
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(path)):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


def test_generator_is_deterministic_and_bounded(tmp_path: Any) -> None:
    cfg = GeneratorConfig(topics=2, partitions=2, events=30_000, seed=5, chunk_entries=1_000, row_group_rows=4_096,
                          file_rows=10_000, raw=True)
    a = generate(str(tmp_path / "a"), cfg)
    b = generate(str(tmp_path / "b"), cfg)
    assert _digest(str(tmp_path / "a")) == _digest(str(tmp_path / "b"))
    assert a.events == b.events and 25_000 < a.events < 40_000 and a.topic_partitions == 4
    assert len(os.listdir(tmp_path / "a" / "acked")) > 1  # files rotate
    assert pq.ParquetFile(str(tmp_path / "a" / "acked" / "part-00000.parquet")).metadata.num_row_groups > 1
    c = generate(str(tmp_path / "c"), GeneratorConfig(topics=2, partitions=0, events=5_000, seed=6, raw=True))
    assert c.topic_partitions == 2
    parts = pq.read_table(str(tmp_path / "c" / "produced"))["partition"].unique().to_pylist()
    assert parts == [-1]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_text_formats_replay_like_parquet(tmp_path: Any, fmt: str) -> None:
    cfg = GeneratorConfig(topics=2, partitions=1, events=8_000, seed=9, max_entries_per_ledger=200, raw=True)
    generate(str(tmp_path / "pq"), cfg)
    generate(str(tmp_path / fmt), GeneratorConfig(**{**cfg.__dict__, "format": fmt}))
    a = run_single_process(str(tmp_path / "pq"), str(tmp_path / "out-pq"))
    b = run_single_process(str(tmp_path / fmt), str(tmp_path / f"out-{fmt}"))
    assert a.events == b.events and a.anomalies == b.anomalies
    keys = [("topic", "ascending"), ("partition", "ascending"), ("subscription", "ascending")]
    ca = pq.read_table(str(tmp_path / "out-pq" / "cursors")).sort_by(keys)
    cb = pq.read_table(str(tmp_path / f"out-{fmt}" / "cursors")).sort_by(keys)
    assert ca.to_pylist() == cb.to_pylist()


# -- settings, store, CLI ---------------------------------------------------------------------------
def test_settings_from_pairs() -> None:
    s = ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=5", "throttle_mark_delete=0",
                                   "individual_ack_format=auto", "emit_state=yes", "tasks=7",
                                   "managed_cursor_info_compression_type=ZSTD"])
    assert s.ledger.max_unacked_ranges_to_persist == 5 and s.ledger.throttle_mark_delete == 0.0
    assert s.ledger.individual_ack_format == "auto" and s.emit_state and s.tasks == 7
    assert s.factory.managed_cursor_info_compression_type == "ZSTD"
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        ReplaySettings.from_pairs(["nope=1"])
    with pytest.raises(ConfigError, match="expects an integer"):
        ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=many"])
    with pytest.raises(ConfigError, match="key=value"):
        ReplaySettings.from_pairs(["oops"])
    assert "throttle_mark_delete" in ReplaySettings.known_keys()


def test_a_set_typo_gets_did_you_mean(tmp_path: Any, capsys: Any) -> None:
    """``--set throtle_mark_delete=1`` listed all 34 settings, none marked as the one meant."""
    from mledger.cli import main

    with pytest.raises(ConfigError, match=r"^unknown setting 'throtle_mark_delete' \(did you mean 'throttle_mark_delete'\?\)$"):
        ReplaySettings.from_pairs(["throtle_mark_delete=1"])
    with pytest.raises(ConfigError, match=r"did you mean 'max_unacked_ranges_to_persist'"):
        ReplaySettings().value("max_unacked_range_to_persist")
    assert main(["replay", str(tmp_path / "ev"), str(tmp_path / "o"), "--single-process", "--set",
                 "Throttle_Mark_Delete=1"]) == 2
    assert "did you mean 'throttle_mark_delete'?" in capsys.readouterr().err


def test_the_configuration_page_gives_the_replays_mark_delete_rate() -> None:
    """docs/configuration.md gave ``throttle_mark_delete`` a default of 0, the library's, where the
    replay (and every ``--defaults`` preset) persists at most once a second."""
    from pathlib import Path

    from mledger import ManagedLedgerConfig
    from mledger.replay._settings import REPLAY_DEFAULT_LEDGER_CONFIG

    page = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
    row = next(line for line in page.read_text().splitlines() if line.startswith("| `throttle_mark_delete` |"))
    default = row.split("|")[2].strip()
    assert default == f"{ManagedLedgerConfig().throttle_mark_delete:g} (the replay: " \
                      f"{REPLAY_DEFAULT_LEDGER_CONFIG.throttle_mark_delete})"
    assert ReplaySettings().ledger.throttle_mark_delete == REPLAY_DEFAULT_LEDGER_CONFIG.throttle_mark_delete == 1.0


def test_a_replay_into_an_old_output_removes_the_old_report(tmp_path: Any) -> None:
    """``mledger report OUT`` writes OUT/report; replaying into OUT again left that report of the
    old outputs beside the new ones."""
    events, out = _events(tmp_path), str(tmp_path / "out")
    run_single_process(events, out)
    (tmp_path / "out" / "report").mkdir()
    (tmp_path / "out" / "report" / "index.html").write_text("the report of the first replay")
    run_single_process(events, out)
    assert not (tmp_path / "out" / "report").exists()
    assert pq.read_table(os.path.join(out, "cursors")).num_rows == 1


def test_replay_store_ledger_ids() -> None:
    store = ReplayStore()
    store.expect_ledger(17)
    assert store.create_ledger() == 17
    assert store.create_ledger() == CURSOR_LEDGER_BASE
    assert store.append_many(17, [b"a", b"b"]) == 0 and store.last_entry_id(17) == 1
    assert store.read(17, 0, 5) == [store.read(17, 0, 0)[0]] * 2
    store.append_many(CURSOR_LEDGER_BASE, [b"x"])
    store.append_many(CURSOR_LEDGER_BASE, [b"y", b"z"])
    assert store.read(CURSOR_LEDGER_BASE, 0, 2) == [b"y", b"z"]  # only the last state is kept
    with pytest.raises(ValueError, match="not above"):
        store.expect_ledger(3)


def test_cli_generate_and_single_process_replay(tmp_path: Any, capsys: Any) -> None:
    from mledger.cli import main

    assert main(["generate", str(tmp_path / "ev"), "--events", "5000", "--topics", "2", "--quiet"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "ev"), str(tmp_path / "out"), "--single-process", "--quiet",
                 "--set", "max_unacked_ranges_to_persist=3", "--emit-state"]) == 0
    out = capsys.readouterr().out
    assert "replayed" in out and "cursors by subscription type" in out
    assert pq.read_table(str(tmp_path / "out" / "cursors"))["state"].null_count == 0
    with open(tmp_path / "out" / "settings.json", encoding="utf-8") as f:
        recorded = json.load(f)
    assert recorded["engine"] == "single process" and recorded["emit_state"] is True
    assert recorded["ledger"]["max_unacked_ranges_to_persist"] == 3
    assert main(["replay", str(tmp_path / "missing"), str(tmp_path / "out"), "--single-process"]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "ev"), str(tmp_path / "o"), "--single-process", "--set", "bad=1"]) == 2


def test_the_demo_says_its_anomalies_are_planted_by_the_generator(tmp_path: Any, capsys: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # `mledger demo` printed "anomalies: 879" and a table of reasons as if the replay had found
    # problems; the generator plants every one of them on purpose. Spark is replaced by the
    # single-process replay (the same rows, tested elsewhere) to keep this test fast.
    from mledger.cli import main
    from mledger.replay._generate import PLANTED_ANOMALIES
    from mledger.replay.spark import _job as job, _session as session

    monkeypatch.setattr(session, "build_session", lambda *a, **k: object())
    monkeypatch.setattr(session, "writes_class_archive", lambda: False)
    monkeypatch.setattr(job, "run_replay", lambda spark, plan, out_dir, settings, progress, prepared:
                        run_single_process(plan.root, out_dir, settings))
    assert main(["demo", "--events", "60000", "--quiet", "--keep", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    summary = pq.read_table(str(tmp_path / "demo" / "out" / "anomalies"), columns=["reason"])
    counts = {r: summary["reason"].to_pylist().count(r) for r in set(summary["reason"].to_pylist())}
    assert counts and set(counts) <= set(PLANTED_ANOMALIES)  # nothing the generator did not plant
    assert f"anomalies: {sum(counts.values()):,}, all planted on purpose by the generator" in out
    lines = out.splitlines()
    for reason, count in counts.items():
        row = next(line for line in lines if line.startswith(reason + " "))
        assert f" {count:,} " in row and PLANTED_ANOMALIES[reason][:30] in row, row


def test_the_demo_prints_no_path_it_has_deleted(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``--keep`` the demo's files are in a temporary directory, gone when it ends: it
    printed their paths (``outputs: /tmp/mledger-demo-.../out/cursors``) all the same."""
    from mledger.cli import main
    from mledger.replay.spark import _job as job, _session as session

    monkeypatch.setattr(session, "build_session", lambda *a, **k: object())
    monkeypatch.setattr(session, "writes_class_archive", lambda: False)
    monkeypatch.setattr(job, "run_replay", lambda spark, plan, out_dir, settings, progress, prepared:
                        run_single_process(plan.root, out_dir, settings))
    assert main(["demo", "--events", "3000", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "replayed" in out and "a temporary directory" in out
    printed = re.findall(r"(/\S*mledger-demo-\S*)", out)
    assert not [path for path in printed if not os.path.exists(path.rstrip(",:"))], printed


def test_a_summary_names_anomalies_the_generator_did_not_plant() -> None:
    from mledger.replay import ReplaySummary, format_summary
    from mledger.replay._generate import PLANTED_ANOMALIES

    summary = ReplaySummary(1, 1, 1, 0, 1, 1, 0, 0, 0, 0, anomalies={"dedup_duplicate": 2, "position_out_of_order": 1})
    text = format_summary(summary, planted=PLANTED_ANOMALIES)
    assert "anomalies: 3, 2 planted on purpose by the generator" in text
    assert "not planted by the generator" in next(line for line in text.splitlines()
                                                  if line.startswith("position_out_of_order"))
    assert "planted" not in format_summary(summary)  # a replay of real logs says nothing of the kind


def test_a_summary_names_the_outputs_under_an_out_dir_given_with_a_slash() -> None:
    """``mledger replay prepared/ out/`` printed ``out//cursors``; the README's sweep shows it."""
    from mledger.replay import ReplaySummary, SweepSummary, format_summary, format_sweep

    summary = ReplaySummary(1, 1, 1, 0, 1, 1, 0, 0, 0, 0, out_dir="out/")
    assert format_summary(summary).splitlines()[-1] == "outputs: out/cursors, out/anomalies, out/partitions (Parquet)"
    sweep = SweepSummary(("defaults",), (("pulsar-4.0",),), (summary,), out_dir="s3a://bucket/out/")
    last = format_sweep(sweep).splitlines()[-1]
    assert last.startswith("outputs: s3a://bucket/out/cursors, s3a://bucket/out/anomalies"), last


def test_wire_batches_unpack_to_events_and_topic_collisions_fail(tmp_path: Any) -> None:
    from mledger.replay._layout import PREPARED_SCHEMA
    from mledger.replay.spark._prepare import TopicKeyCollisionError, _group_topic, _wire_events, _writer

    n = 4
    wire = pa.RecordBatch.from_pydict({
        "topic_key": [7] * n, "partition": [0] * n, "ts": [None, 1, 2, 2],
        "kind_seq": [0 << 61 | 5, 2 << 61 | 3, 1 << 61 | (9 << 40 | 1), 2 << 61 | 7],
        "name": ["p", "s", None, "s"], "ledger_id": [1] * n, "entry_id": [0, 0, 0, 1], "batch": [2, 1, None, None],
        "aux": [100, 1, None, -1], "sequence_id": [4, None, None, None], "problem": [None, None, None, "x"],
        "topic": [None, None, "t", None]})
    events = _wire_events(wire)
    assert events.schema == PREPARED_SCHEMA
    assert events.column("kind").to_pylist() == [0, 2, 1, 2]
    assert events.column("seq").to_pylist() == [5, 3, 9 << 40 | 1, 7]
    assert events.column("deliver_at_ms").to_pylist() == [100, None, None, None]
    assert events.column("ack_type").to_pylist() == [None, 1, None, -1]
    nulls = _wire_events(wire.set_column(3, "kind_seq", pa.nulls(n, pa.int64())))
    assert nulls.column("seq").null_count == n  # the engine refuses rows of unknown order
    assert _group_topic(7, {7: "t"}, wire, None, False) == "t"
    assert _group_topic(7, {}, wire, None, False) == "t"  # a text file's rows carry the name
    assert _group_topic(None, {}, wire, None, False) is None
    with pytest.raises(TopicKeyCollisionError, match="'u' and 't' have the same topic_key 7"):
        _group_topic(7, {7: "u"}, wire, None, False)
    with pytest.raises(TopicKeyCollisionError, match="no topic name for topic_key 8"):
        _group_topic(8, {}, wire.set_column(11, "topic", pa.nulls(n, pa.string())), None, False)
    # a whole group through the applyInArrow function, without Spark: rows in replay order
    ordered = wire.take(pa.array([0, 1, 3]))
    rows = pa.Table.from_batches(list(_writer(str(tmp_path), {7: "t"})((pa.scalar(7), pa.scalar(0)), iter([ordered]))))
    assert rows["rows"].to_pylist() == [3] and rows["topic"].to_pylist() == ["t"]
    written = pq.read_table(os.path.join(str(tmp_path), rows["path"][0].as_py()))
    assert written["seq"].to_pylist() == [5, 3, 7]
    # out of order: the writer refuses it (Spark does not promise the sorted order)
    from mledger.replay import EventOrderError

    with pytest.raises(EventOrderError, match="not in replay order"):
        list(_writer(str(tmp_path / "x"), {7: "t"})((pa.scalar(7), pa.scalar(0)), iter([wire.take(pa.array([1, 0]))])))


def test_spark_xxhash64_reference_values() -> None:
    from mledger.replay.spark._prepare import spark_xxhash64

    # Values of Spark's xxhash64(string) (seed 42), checked against Spark in test_spark_prepare.
    assert spark_xxhash64("a") == spark_xxhash64("a") and isinstance(spark_xxhash64("a"), int)
    assert spark_xxhash64("") == -7444071767201028348  # XXH64("", seed 42) as a signed long
    assert len({spark_xxhash64(f"persistent://public/default/topic-{i}") for i in range(1000)}) == 1000
    assert all(-(1 << 63) <= spark_xxhash64("x" * k) < 1 << 63 for k in range(70))
