"""The report of a sweep's output: the settings side by side, and the per-subscription charts
of the first setting only (never one subscription counted once per setting)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from mledger.replay import GeneratorConfig, generate, run_single_process
from mledger.report import ReplayReportInputError, build_report
from mledger.report._data import load_model
from mledger.report._figures import report_charts


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The event log both sweeps replay."""
    path = str(tmp_path_factory.mktemp("log") / "log")
    generate(path, GeneratorConfig(topics=2, partitions=2, events=20_000, seed=8, max_entries_per_ledger=300))
    return path


@pytest.fixture(scope="module")
def swept(log: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("sweep")
    out = str(base / "out")
    run_single_process(log, out, sweep=["max_unacked_ranges_to_persist=4,10000", "deduplication=true,false"])
    run_single_process(log, str(base / "alone"), fixed=(), sweep=())
    return out


def test_the_sweep_model_has_every_combination_and_the_first_ones_subscriptions(swept: str) -> None:
    model = load_model(swept, 10_000)
    assert [s.label for s in model.sweep] == [
        "max_unacked_ranges_to_persist=4, deduplication=True", "max_unacked_ranges_to_persist=4, deduplication=False",
        "max_unacked_ranges_to_persist=10000, deduplication=True",
        "max_unacked_ranges_to_persist=10000, deduplication=False"]
    assert [s.limit for s in model.sweep] == [4, 4, 10_000, 10_000]
    assert model.shown == model.sweep[0].label and model.limit == 4
    first = model.sweep[0]
    assert first.subscriptions == len(model.subscriptions)  # one row per subscription, not per setting
    assert first.truncated_ranges == sum(s.truncated_ranges for s in model.subscriptions) > 0
    assert model.sweep[2].truncated_ranges == 0 and model.sweep[2].persisted_bytes > first.persisted_bytes
    assert first.anomalies == model.totals["anomalies"]
    # without deduplication a producer's retry is still an anomaly: a second row for its position
    assert model.sweep[1].anomalies == first.anomalies > 0
    alone = load_model(os.path.join(os.path.dirname(swept), "alone"), 10_000)
    assert alone.sweep == () and alone.shown == ""
    assert {(s.topic_partition, s.subscription, s.hole_ranges) for s in alone.subscriptions} == \
        {(s.topic_partition, s.subscription, s.hole_ranges) for s in load_model(swept, 1).subscriptions}


def test_the_sweep_chart_is_drawn_first(swept: str, tmp_path: Any) -> None:
    report = build_report(swept, tmp_path / "r")
    assert list(report.charts)[0] == "sweep"
    page = report.html_path.read_text(encoding="utf-8")
    assert "Settings compared" in page and "10000 · False" in page  # rows named by their values (aria-label)
    alone = report_charts(load_model(os.path.join(os.path.dirname(swept), "alone"), 10_000), 25)
    assert "sweep" not in [chart.key for chart in alone]  # what build_report draws


def test_a_bad_sweep_record_is_an_input_error(swept: str, tmp_path: Any) -> None:
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(swept, copy)
    with open(os.path.join(copy, "settings.json"), encoding="utf-8") as f:
        record = json.load(f)
    record["sweep"] = {"max_unacked_ranges_to_persist": []}
    with open(os.path.join(copy, "settings.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)
    with pytest.raises(ReplayReportInputError, match="not lists of values"):
        load_model(copy, 10)


def test_the_sweep_chart_labels_rows_by_the_values_that_differ(swept: str) -> None:
    # The rows were labelled "max_unacked_ranges_to_persist=4, deduplication=True" and the
    # renderer cut such labels in the middle: exactly the swept values were hidden.
    from mledger.report._figures import sweep_comparison
    from mledger.report._render import _shorten

    chart = sweep_comparison(load_model(swept, 10_000), 25)
    assert chart is not None
    assert chart.categories == ("4 · True", "4 · False", "10000 · True", "10000 · False")
    assert all(_shorten(c) == c for c in chart.categories)  # drawn whole
    assert "Rows: max_unacked_ranges_to_persist · deduplication" in chart.subtitle


@pytest.fixture(scope="module")
def formats_swept(log: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("formats") / "out")
    run_single_process(log, out, sweep=["max_unacked_ranges_to_persist=200", "persist_individual_ack_as_long_array=false,true"])
    return out


def test_a_sweep_of_the_ack_format_says_how_each_format_applies_the_limit(formats_swept: str, tmp_path: Any) -> None:
    model = load_model(formats_swept, 10_000)
    assert [s.ack_format for s in model.sweep] == ["range", "long_array"]
    assert model.sweep[1].truncated_ranges > model.sweep[0].truncated_ranges == 0  # the same limit, two meanings
    from mledger.report._figures import sweep_comparison

    chart = sweep_comparison(model, 25)
    assert chart is not None and chart.categories == ("False", "True")  # the one limit is not repeated per row
    assert "every row: max_unacked_ranges_to_persist=200" in chart.subtitle
    page = build_report(formats_swept, tmp_path / "r").html_path.read_text(encoding="utf-8")
    assert "range format (the default): max_unacked_ranges_to_persist caps the number of ack ranges" in page
    assert "the same N caps acked entries, not ranges" in page
    assert "ManagedCursorImpl.buildIndividualDeletedMessageRanges" in page and "OpenLongPairRangeSet.toRanges" in page
