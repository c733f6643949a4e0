"""The prepared log (layout + manifest), the in-process prepare, sweeps, task placement and commit."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mledger import ConfigError
from mledger.replay import (
    GeneratorConfig,
    InputSchemaError,
    PreparedLayoutError,
    ReplaySettings,
    SweepSummary,
    format_sweep,
    generate,
    open_prepared,
    parse_sweep,
    prepare_in_process,
    run_single_process,
)
from mledger.replay._checks import OutputPathError
from mledger.replay._events import write_logs
from mledger.replay._inputs import plan_inputs
from mledger.replay._layout import (
    MANIFEST_FILE,
    ManifestMismatchError,
    PreparedPartition,
    partition_directory,
    read_partition,
)
from mledger.replay._sweep import variants
from mledger.replay._tasks import TaskResult, commit_outputs, plan_tasks, start_outputs

CFG = GeneratorConfig(topics=3, partitions=3, events=40_000, max_entries_per_ledger=300, rate_per_s=300, seed=4,
                      chunk_entries=1_500)
SWEEP_CFG = GeneratorConfig(topics=2, partitions=2, events=3_000, max_entries_per_ledger=300, rate_per_s=300, seed=4,
                            chunk_entries=1_500, lost_ack_fraction=0.02)
"""A log small enough to replay five times, whose lost acks leave holes enough (19 ranges dropped at
a limit of 4) for the swept settings to persist different states."""
SORT = {
    "cursors": ["topic", "partition", "subscription"],
    "anomalies": ["topic", "partition", "event", "ts_ms", "ledger_id", "entry_id", "batch_index", "subscription",
                  "reason", "detail"],
    "partitions": ["topic", "partition"],
}


def outputs(out_dir: str, extra: tuple[str, ...] = ()) -> dict[str, list[dict[str, Any]]]:
    return {name: pq.read_table(os.path.join(out_dir, name)).sort_by([(k, "ascending") for k in (*extra, *keys)])
            .to_pylist() for name, keys in SORT.items()}


def prepared_and_raw(base: Any, cfg: GeneratorConfig) -> dict[str, str]:
    """The log of ``cfg`` generated under ``base`` twice: laid out (``prepared``) and ``raw``."""
    prepared, raw = str(base / "prepared"), str(base / "raw")
    generate(prepared, cfg)
    generate(raw, GeneratorConfig(**{**cfg.__dict__, "raw": True}))
    return {"prepared": prepared, "raw": raw}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return prepared_and_raw(tmp_path_factory.mktemp("logs"), CFG)


@pytest.fixture(scope="module")
def sweep_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return prepared_and_raw(tmp_path_factory.mktemp("sweep"), SWEEP_CFG)


def copy_of(path: str, tmp_path: Any) -> str:
    target = str(tmp_path / "copy")
    shutil.copytree(path, target)
    return target


# -- prepared and raw ---------------------------------------------------------------------------
def test_prepared_and_raw_inputs_give_identical_results(logs: dict[str, str], tmp_path: Any) -> None:
    a = run_single_process(logs["prepared"], str(tmp_path / "a"), ReplaySettings(emit_state=True))
    b = run_single_process(logs["raw"], str(tmp_path / "b"), ReplaySettings(emit_state=True))
    assert outputs(str(tmp_path / "a")) == outputs(str(tmp_path / "b"))
    assert a.events == b.events > 30_000 and a.topic_partitions == 9 and a.anomaly_total > 0
    assert not os.path.exists(tmp_path / "b" / "_prepared")  # the temporary prepared log is gone


def test_the_in_process_prepare_spills_and_gives_the_same_layout(logs: dict[str, str], tmp_path: Any) -> None:
    whole = prepare_in_process(plan_inputs(logs["raw"]), str(tmp_path / "whole"))
    spilled = prepare_in_process(plan_inputs(logs["raw"]), str(tmp_path / "spilled"), spill_bytes=64 << 10)
    generated = open_prepared(logs["prepared"])
    assert [p.key for p in whole.partitions] == [p.key for p in spilled.partitions] == \
        [p.key for p in generated.manifest.partitions]
    for a, b, c in zip(whole.partitions, spilled.partitions, generated.manifest.partitions, strict=True):
        ta = pa.Table.from_batches(list(read_partition(open_prepared(str(tmp_path / "whole")), a)))
        tb = pa.Table.from_batches(list(read_partition(open_prepared(str(tmp_path / "spilled")), b)))
        tc = pa.Table.from_batches(list(read_partition(generated, c)))
        assert ta.equals(tb) and ta.equals(tc)
        assert a.rows == ta.num_rows and a.first_ts == ta["ts"][0].as_py() and a.last_ts == ta["ts"][-1].as_py()
    assert not [n for n in os.listdir(tmp_path / "spilled") if n.startswith(".")]  # no spill left


def test_layout_files_are_bounded_and_named_by_topic_partition(tmp_path: Any) -> None:
    cfg = GeneratorConfig(topics=1, partitions=1, events=30_000, seed=2)
    generate(str(tmp_path / "raw"), GeneratorConfig(**{**cfg.__dict__, "raw": True}))
    from mledger.replay import _layout as layout, _prepare as prepare

    manifest = prepare.prepare_in_process(plan_inputs(str(tmp_path / "raw")), str(tmp_path / "p"))
    part = manifest.partitions[0]
    assert part.directory == "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Ftopic-0/partition=0"
    assert len(part.files) == 1 and part.rows == manifest.events
    meta = pq.ParquetFile(os.path.join(str(tmp_path / "p"), part.files[0].path)).metadata
    assert meta.num_row_groups == -(-part.rows // layout.ROW_GROUP_ROWS)
    assert partition_directory(None, None).endswith("partition=__HIVE_DEFAULT_PARTITION__")
    assert partition_directory("_x", 1) == "topic=%5Fx/partition=1"  # never a hidden directory
    long = partition_directory("t" * 1000, 0)
    assert len(long.split("/")[0]) < 200 and long != partition_directory("t" * 999 + "u", 0)


# -- the manifest --------------------------------------------------------------------------------
def test_a_manifest_that_no_longer_matches_its_files_names_the_file(logs: dict[str, str], tmp_path: Any) -> None:
    root = copy_of(logs["prepared"], tmp_path)
    first = open_prepared(root).manifest.partitions[0].files[0].path
    path = os.path.join(root, first)
    data = open(path, "rb").read()
    # a file removed
    os.remove(path)
    with pytest.raises(ManifestMismatchError, match=f"{first}: listed in the manifest but missing"):
        open_prepared(root)
    # a file changed (its size)
    with open(path, "wb") as f:
        f.write(data + b"x")
    with pytest.raises(ManifestMismatchError, match=f"{first}: .* bytes, the manifest says"):
        run_single_process(root, str(tmp_path / "out"))
    # a file changed in place, same size: the task sees its footer differ
    changed = bytearray(data)
    changed[-20] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(changed))
    with pytest.raises(ManifestMismatchError, match=f"{first}: the file changed after prepare"):
        run_single_process(root, str(tmp_path / "out"))
    with open(path, "wb") as f:
        f.write(data)
    run_single_process(root, str(tmp_path / "out"))  # restored: fine again
    # a file added
    extra = os.path.join(os.path.dirname(path), "part-extra.parquet")
    shutil.copy(path, extra)
    with pytest.raises(ManifestMismatchError, match="part-extra.parquet: not in the manifest"):
        open_prepared(root)
    os.remove(extra)
    # a manifest of another version, or none
    manifest = os.path.join(root, MANIFEST_FILE)
    text = open(manifest).read()
    with open(manifest, "w") as f:
        f.write(text.replace('"version": 1', '"version": 99'))
    with pytest.raises(PreparedLayoutError, match="prepared-log version 99"):
        open_prepared(root)
    os.remove(manifest)
    with pytest.raises(PreparedLayoutError, match="not a prepared log"):
        open_prepared(root)


# -- bad rows and files through prepare ---------------------------------------------------------
def test_bad_rows_go_through_prepare_to_the_anomalies_and_none_is_lost(tmp_path: Any) -> None:
    rows = [
        {"log": "produced", "topic": "t", "partition": 0, "ledger_id": 1, "entry_id": 0, "publish_time_ms": 1},
        {"log": "produced", "topic": None, "partition": 0, "ledger_id": 1, "entry_id": 1, "publish_time_ms": 2},
        {"log": "produced", "topic": "t", "partition": None, "ledger_id": 1, "entry_id": 1, "publish_time_ms": 2},
        {"log": "produced", "topic": "t", "partition": -7, "ledger_id": 1, "entry_id": 1, "publish_time_ms": 2},
        {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 1, "entry_id": 0,
         "ts_ms": None},
        {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 1, "entry_id": 0, "ts_ms": 5},
        {"log": "subscriptions", "topic": "t", "subscription": "x", "type": "FIFO"},
    ]
    write_logs(str(tmp_path / "raw"), rows)
    with open(os.path.join(str(tmp_path / "raw"), "acked", "part-00001.csv"), "w") as f:
        f.write("topic,partition,subscription,ledger_id,entry_id,batch_index,ack_type,ts_ms\n"
                "t,zero,s,1,0,,individual,6\n")
    manifest = prepare_in_process(plan_inputs(str(tmp_path / "raw")), str(tmp_path / "p"))
    assert manifest.events == 7 and manifest.anomalies == 1
    assert {p.key for p in manifest.partitions} == {("t", 0), (None, 0), ("t", None), ("t", -7)}
    summary = run_single_process(str(tmp_path / "p"), str(tmp_path / "out"))
    assert summary.events == 7
    details = sorted(r["detail"] for r in pq.read_table(str(tmp_path / "out" / "anomalies")).to_pylist())
    assert details == ["partition is below -1", "partition is missing", "partition is not an integer: 'zero'",
                       "topic is missing", "ts_ms is missing",
                       "unknown subscription type 'FIFO'; expected one of EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED "
                       "(subscriptions/part-00000.parquet)"]


def test_bad_files_stop_prepare_naming_file_and_column(tmp_path: Any) -> None:
    write_logs(str(tmp_path / "raw"), [
        {"log": "produced", "topic": "t", "partition": 0, "ledger_id": 1, "entry_id": 0, "publish_time_ms": 1},
        {"log": "acked", "topic": "t", "partition": 0, "subscription": "s", "ledger_id": 1, "entry_id": 0, "ts_ms": 5}])
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "ledger_id": [1.5], "entry_id": [0],
                             "publish_time_ms": [1]}), str(tmp_path / "raw" / "produced" / "part-00001.parquet"))
    with pytest.raises(InputSchemaError, match=r"part-00001.parquet: column 'ledger_id' has type double"):
        prepare_in_process(plan_inputs(str(tmp_path / "raw")), str(tmp_path / "p"))
    os.makedirs(tmp_path / "busy")
    open(tmp_path / "busy" / "mine.txt", "w").close()
    os.remove(str(tmp_path / "raw" / "produced" / "part-00001.parquet"))
    with pytest.raises(PreparedLayoutError, match="exists and is not a prepared log"):
        prepare_in_process(plan_inputs(str(tmp_path / "raw")), str(tmp_path / "busy"))


# -- sweeps -----------------------------------------------------------------------------------------
def test_every_sweep_combination_equals_a_separate_replay(sweep_logs: dict[str, str], tmp_path: Any) -> None:
    sweep_log = sweep_logs["prepared"]
    sweep = ["max_unacked_ranges_to_persist=4,10000", "persist_individual_ack_as_long_array=false,true"]
    swept = run_single_process(sweep_log, str(tmp_path / "sweep"), ReplaySettings(emit_state=True), sweep=sweep)
    assert isinstance(swept, SweepSummary) and len(swept.summaries) == 4
    keys = ("max_unacked_ranges_to_persist", "persist_individual_ack_as_long_array")
    tables = {name: pq.read_table(str(tmp_path / "sweep" / name)) for name in SORT}
    assert tables["cursors"].schema.field("max_unacked_ranges_to_persist").type == pa.int64()
    assert tables["cursors"].schema.field("persist_individual_ack_as_long_array").type == pa.bool_()
    seen_bytes = set()
    truncated: dict[int, int] = {}
    for limit in (4, 10000):
        for long_array in (False, True):
            alone = str(tmp_path / f"alone-{limit}-{long_array}")
            summary = run_single_process(sweep_log, alone, ReplaySettings.from_pairs(
                [f"max_unacked_ranges_to_persist={limit}", f"persist_individual_ack_as_long_array={long_array}",
                 "emit_state=true"]))
            expected = outputs(alone)
            for name, key_cols in SORT.items():
                mine = tables[name].filter(pc.and_(pc.equal(tables[name][keys[0]], limit),
                                                   pc.equal(tables[name][keys[1]], long_array)))
                got = mine.drop_columns(list(keys)).sort_by([(k, "ascending") for k in key_cols]).to_pylist()
                assert got == expected[name], (limit, long_array, name)
            assert swept.summary_for(max_unacked_ranges_to_persist=limit,
                                     persist_individual_ack_as_long_array=long_array) == \
                summary.__class__(**{**summary.__dict__, "seconds": swept.seconds, "engine": "single process",
                                     "out_dir": str(tmp_path / "sweep")})
            seen_bytes.add(summary.persisted_state_bytes)
            truncated[limit] = truncated.get(limit, 0) + summary.truncated_ranges
    assert len(seen_bytes) > 1  # the settings really differ in what they persist
    assert truncated[4] > truncated[10000] == 0  # the limit of 4 dropped ranges


def test_a_sweep_of_the_ack_format_says_how_each_format_applies_the_limit(logs: dict[str, str],
                                                                         tmp_path: Any) -> None:
    # The long-array format counts acked entries per ledger against max_unacked_ranges_to_persist
    # (Pulsar's toRanges), so at one limit it may truncate where the range format does not; the
    # summary said nothing of why.
    swept = run_single_process(logs["prepared"], str(tmp_path / "sweep"), sweep=[
        "max_unacked_ranges_to_persist=300,10000", "persist_individual_ack_as_long_array=false,true"])
    assert isinstance(swept, SweepSummary)
    assert swept.formats == ("range", "long_array", "range", "long_array")
    text = " ".join(format_sweep(swept).split())  # wrapped lines joined again
    assert "how max_unacked_ranges_to_persist applies in each individual-ack format of this sweep:" in text
    assert "range format (the default): max_unacked_ranges_to_persist caps the number of ack ranges" in text
    assert "the same N caps acked entries, not ranges" in text
    assert "ManagedCursorImpl.buildIndividualDeletedMessageRanges" in text and "OpenLongPairRangeSet.toRanges" in text
    by_format = {swept.values[i]: s.truncated_ranges for i, s in enumerate(swept.summaries)}
    assert by_format[(300, True)] > by_format[(300, False)] == 0  # what the note explains
    other = run_single_process(logs["prepared"], str(tmp_path / "dedup"), sweep=["deduplication=true,false"])
    assert isinstance(other, SweepSummary) and "individual-ack format" not in format_sweep(other)


def test_sweep_specs_are_checked() -> None:
    assert parse_sweep(["a=1,2", "b=x"]) == [("a", ["1", "2"]), ("b", ["x"])]
    for bad, message in ((["a"], "KEY=V1,V2"), (["a=1,,2"], "KEY=V1,V2"), (["a=1", "a=2"], "swept twice"),
                         (["a=1,1"], "listed twice"), (["tasks=1,2"], "does not change"),
                         (["topic=1,2"], "output column")):
        with pytest.raises(ConfigError, match=message):
            parse_sweep(bad)
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        variants(ReplaySettings(), ["nope=1,2"])
    with pytest.raises(ConfigError, match="expects an integer"):
        variants(ReplaySettings(), ["max_unacked_ranges_to_persist=1,many"])
    with pytest.raises(ConfigError, match="both --set and --sweep"):
        variants(ReplaySettings(), ["throttle_mark_delete=0,1"], fixed=["throttle_mark_delete"])
    combos = variants(ReplaySettings(), ["throttle_mark_delete=0,1", "deduplication=false,true"])
    assert [v.label for v in combos] == ["throttle_mark_delete=0.0, deduplication=False",
                                         "throttle_mark_delete=0.0, deduplication=True",
                                         "throttle_mark_delete=1.0, deduplication=False",
                                         "throttle_mark_delete=1.0, deduplication=True"]


# -- tasks ------------------------------------------------------------------------------------------
def _part(topic: str, rows: int) -> PreparedPartition:
    from mledger.replay._layout import PreparedFile

    return PreparedPartition(topic, 0, (PreparedFile(f"{topic}.parquet", rows, rows, 0, 0, ""),))


def test_tasks_are_balanced_largest_first() -> None:
    parts = [_part(f"t{i}", rows) for i, rows in enumerate([10, 70, 30, 30, 20, 40])]
    tasks = plan_tasks(parts, 2)
    assert [t.rows for t in tasks] == [100, 100]
    assert [p.topic for p in tasks[0].partitions] == ["t1", "t3"]  # ties go to the lower task
    assert len(plan_tasks(parts, 50)) == 6 and plan_tasks([], 3) == []
    with pytest.raises(ValueError):
        plan_tasks(parts, 0)


def test_commit_keeps_exactly_the_collected_attempts_parts(tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    start_outputs(out)
    for name in ("cursors", "anomalies", "partitions"):
        for f in ("part-00000-a1.parquet", "part-00000-a4.parquet", ".part-00001-a2.parquet.inprogress",
                  "part-00001-a3.parquet"):
            open(os.path.join(out, name, f), "w").close()
    kept = TaskResult(0, "a4", tuple(f"{n}/part-00000-a4.parquet" for n in ("cursors", "anomalies", "partitions")), 1)
    other = TaskResult(1, "a3", tuple(f"{n}/part-00001-a3.parquet" for n in ("cursors", "anomalies", "partitions")), 1)
    commit_outputs(out, [kept, other], ["anomalies/part-prepare.parquet"])
    for name in ("cursors", "anomalies", "partitions"):
        assert sorted(os.listdir(os.path.join(out, name))) == ["part-00000-a4.parquet", "part-00001-a3.parquet"]


# -- the CLI ----------------------------------------------------------------------------------------
def test_cli_prepare_then_replay_and_checks_before_any_jvm(sweep_logs: dict[str, str], tmp_path: Any, capsys: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from mledger.cli import main
    from mledger.replay.spark import _session as session

    def no_jvm(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a command started a JVM")

    monkeypatch.setattr(session, "build_session", no_jvm)

    assert main(["prepare", sweep_logs["raw"], str(tmp_path / "p"), "--quiet"]) == 0
    assert "in this process" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "p"), str(tmp_path / "out"), "--single-process", "--quiet",
                 "--sweep", "max_unacked_ranges_to_persist=5,10000"]) == 0
    out = capsys.readouterr().out
    assert "under 2 settings" in out and "max_unacked_ranges_to_persist" in out
    for argv, message in (
        (["replay", str(tmp_path / "nope"), str(tmp_path / "o")], "no such directory"),
        (["replay", str(tmp_path / "p"), str(tmp_path / "p" / "o")], "overlaps the input"),
        (["replay", str(tmp_path / "p"), str(tmp_path / "o"), "--sweep", "bogus=1,2"], "unknown setting 'bogus'"),
        (["replay", str(tmp_path / "p"), str(tmp_path / "o"), "--prepared", str(tmp_path / "x")], "already a prepared"),
        (["prepare", str(tmp_path / "p"), str(tmp_path / "q")], "already a prepared log"),
        (["replay", sweep_logs["raw"], str(tmp_path / "missing-parent" / "o")], "does not exist"),
    ):
        assert main(argv) == 2, argv  # each fails before any JVM would start (no_jvm above)
        assert message in capsys.readouterr().err, argv


def test_output_path_checks(tmp_path: Any, logs: dict[str, str]) -> None:
    with pytest.raises(OutputPathError, match="overlaps the input"):
        run_single_process(logs["prepared"], logs["prepared"])
    open(tmp_path / "file", "w").close()
    with pytest.raises(OutputPathError, match="is a file"):
        run_single_process(logs["prepared"], str(tmp_path / "file"))
