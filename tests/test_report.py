"""mledger report: the replay output (Parquet cursors/anomalies) as a self-contained HTML page with
matplotlib charts (inline SVG, PNG files beside it); rendered by headless Chromium and each chart's
region checked pixel by pixel (never skipped: `make test` installs Chromium with
scripts/ensure_chromium.sh)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from browser import browser as _browser
from PIL import Image

from mledger.replay._schema import ANOMALY_SCHEMA, CURSOR_SCHEMA
from mledger.report import DEFAULT_LIMIT, ReplayReportInputError, build_report
from mledger.report._chart import PALETTE, Chart, LegendItem, Panel, Reference, Series, Unit, format_bytes
from mledger.report._render import draw_chart, render_chart

LIMIT = 100
ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"
WEIRD = "<script>alert('x')</script>"
CHART_KEYS = ["ack-holes", "state-size", "chunks", "anomalies"]

def rgb(name: str) -> tuple[int, int, int]:
    value = PALETTE[name].lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


BLUE, PURPLE, RED, AMBER, SLATE, TEAL, INK = map(rgb, ("blue", "purple", "red", "amber", "slate", "teal", "ink"))


# -- a replay output with every case the page distinguishes -----------------------------------------


def _cursor(topic: str, partition: int, sub: str, kind: str, holes: int, size: int, chunks: int,
            truncated: int = 0, backlog: int = 10) -> dict[str, Any]:
    return {
        "topic": topic, "partition": partition, "subscription": sub, "subscription_type": kind,
        "mark_delete_ledger_id": 7, "mark_delete_entry_id": 41, "read_ledger_id": 7, "read_entry_id": 99,
        "ack_hole_ranges": holes, "backlog": backlog, "acked": 1000 + holes, "cancelled": holes // 10,
        "delayed_delivered": 5, "delayed_pending": 1, "persisted_state_bytes": size, "state_chunks": chunks,
        "truncated_ranges": truncated, "truncated_batch_indexes": 0, "state_record": None, "state": None,
    }


CURSORS = [
    _cursor(ORDERS, 0, "billing", "SHARED", 130, 5200, 3, truncated=30, backlog=150),  # over the limit
    _cursor(ORDERS, 0, "audit", "KEY_SHARED", 95, 3900, 2),                            # near it
    _cursor(ORDERS, 1, "billing", "SHARED", 40, 1700, 1),
    _cursor(ORDERS, 1, "audit", "KEY_SHARED", 12, 600, 1),
    _cursor(ORDERS, 2, "billing", "SHARED", 81, 3300, 2, backlog=90),                  # near it
    _cursor(ORDERS, 2, "tail", "EXCLUSIVE", 0, 7, 1),
    _cursor(PAYMENTS, -1, WEIRD, "FAILOVER", 0, 0, 0),                                 # never persisted
    _cursor(PAYMENTS, -1, "ledger", "SHARED", 55, 2300, 1),
]


def _anomaly(reason: str, i: int, topic: str = ORDERS, partition: int = 1) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "subscription": "billing", "event": "cancelled",
            "ts_ms": 1_700_000_000_000 + i, "ledger_id": 7, "entry_id": i, "batch_index": None,
            "reason": reason, "detail": f"detail {i} <b>"}


ANOMALIES = ([_anomaly("delivered_before_cancel", i) for i in range(12)]
             + [_anomaly("invalid_row", i, PAYMENTS, -1) for i in range(5)]
             + [_anomaly("dedup_duplicate", i, ORDERS, 2) for i in range(3)])


def write_output(out: Path, cursors: list[dict[str, Any]], anomalies: list[dict[str, Any]] | None) -> Path:
    """Spark's layout: part files, a _SUCCESS marker and .crc files next to them."""
    (out / "cursors").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(cursors[:3], schema=CURSOR_SCHEMA), out / "cursors" / "part-00000.parquet")
    pq.write_table(pa.Table.from_pylist(cursors[3:], schema=CURSOR_SCHEMA), out / "cursors" / "part-00001.parquet")
    (out / "cursors" / "_SUCCESS").write_bytes(b"")
    (out / "cursors" / ".part-00000.parquet.crc").write_bytes(b"junk")
    if anomalies is not None:
        (out / "anomalies").mkdir()
        pq.write_table(pa.Table.from_pylist(anomalies, schema=ANOMALY_SCHEMA), out / "anomalies" / "part-0.parquet")
    return out


@pytest.fixture
def output(tmp_path: Path) -> Path:
    return write_output(tmp_path / "out", CURSORS, ANOMALIES)


# -- pixels -----------------------------------------------------------------------------------------------


def read_png(data: bytes) -> np.ndarray:
    """An (h, w, 3) uint8 array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def count_color(image: np.ndarray, color: tuple[int, int, int], tolerance: int = 0) -> int:
    """Pixels within ``tolerance`` of ``color`` on every channel (bar interiors are exact)."""
    return int((np.abs(image[:, :, :3].astype(np.int16) - np.array(color, np.int16)) <= tolerance).all(axis=2).sum())


# -- the model and the files ------------------------------------------------------------------------------


def test_model(output: Path) -> None:
    report = build_report(output, max_unacked_ranges_to_persist=LIMIT)
    m = report.model
    assert m.limit == LIMIT and m.source == str(output.resolve())
    assert m.totals["subscriptions"] == 8 and m.totals["topic_partitions"] == 4
    assert m.totals["over_limit"] == 1 and m.totals["near_limit"] == 2
    assert m.totals["truncated_ranges"] == 30 and m.totals["anomalies"] == 20
    assert m.totals["max_persisted_bytes"] == 5200 and m.totals["max_chunks"] == 3 and m.totals["chunked"] == 3
    assert [s.subscription for s in m.subscriptions[:2]] == ["billing", "audit"]  # most holes first
    assert [p.topic_partition for p in m.partitions[:3]] == [
        f"{ORDERS}-partition-0", f"{ORDERS}-partition-2", PAYMENTS]  # truncated, then share of the limit
    assert m.partitions[0].truncated_ranges == 30 and m.partitions[0].max_utilisation == 1.3
    kinds = [(k.reason, k.count, len(k.examples)) for k in m.anomalies]
    assert kinds == [("delivered_before_cancel", 12, 3), ("invalid_row", 5, 3), ("dedup_duplicate", 3, 3)]
    assert m.anomalies[0].meaning.startswith("delayed message delivered")
    assert m.common_prefix == "persistent://public/default/"


def test_anomalies_without_a_partition_are_no_topic_partition(tmp_path: Path) -> None:
    # A bad row of the subscriptions log has a topic but no partition; a bad event row may
    # have neither. The replay counts no topic-partition for them (no partitions/ row), and
    # neither may the report: it counted 13 where the replay said 12 and ranked the topic.
    ghost = "persistent://public/default/ghost"
    unplaced = [{**_anomaly("invalid_row", 90, ghost), "partition": None, "event": "subscriptions"},
                {**_anomaly("invalid_row", 91), "topic": None, "partition": None, "event": "produced"}]
    out = write_output(tmp_path / "out", CURSORS, ANOMALIES + unplaced)
    report = build_report(out, tmp_path / "site", max_unacked_ranges_to_persist=LIMIT)
    m = report.model
    assert m.totals["topic_partitions"] == 4 and m.totals["anomalies"] == 22
    assert m.totals["unplaced_anomalies"] == 2
    assert len(m.partitions) == 4 and not any(p.topic_partition.startswith(ghost) for p in m.partitions)
    assert sum(p.anomalies for p in m.partitions) == 20
    html = report.html_path.read_text(encoding="utf-8")
    assert "2 anomaly rows name no topic-partition" in html
    assert "ghost" not in html.split("<h2>Worst topic-partitions</h2>")[1].split("</section>")[0]


def test_page_and_png_files(output: Path, tmp_path: Path) -> None:
    report = build_report(output, tmp_path / "site", max_unacked_ranges_to_persist=LIMIT)
    assert report.html_path == tmp_path / "site" / "index.html"
    assert sorted(report.charts) == sorted(CHART_KEYS)
    html = report.html_path.read_text(encoding="utf-8")
    svgs = re.findall(r"<svg\b[^>]*>.*?</svg>", html, flags=re.S)
    assert [re.search(r'data-chart="([a-z-]+)"', svg).group(1) for svg in svgs] == CHART_KEYS  # type: ignore[union-attr]
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html and "<metadata" not in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert ids and len(ids) == len(set(ids)), "element ids must be unique across the inlined charts"
    for svg, key in zip(svgs, CHART_KEYS, strict=True):
        own = set(re.findall(r'\bid="([^"]+)"', svg))
        assert all(i.startswith(f"{key}-") for i in own)
        # every reference (glyphs, clip paths) points at an element of the same chart
        refs = re.findall(r'(?:href="#|url\(#)([^")]+)', svg)
        assert refs and set(refs) <= own
        assert 'role="img"' in svg and 'aria-label="' in svg
    holes_svg = svgs[0]
    for name in ("red", "amber", "blue"):
        assert f"fill: {PALETTE[name]}" in holes_svg  # the bars' colors, as in the PNG
    assert "orders-partition-0 / billing 130" in holes_svg  # the accessible label lists the bars
    for key in CHART_KEYS:
        pixels = read_png(report.charts[key].read_bytes())
        width = re.search(rf'<figure style="max-width:(\d+)px"><svg[^>]*data-chart="{key}"', html)
        assert width and pixels.shape[1] == 2 * int(width.group(1))  # drawn at 2x for sharp text
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) >= 50  # anti-aliased text and bars
    # self-contained and escaped
    assert "<script" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "detail 0 &lt;b&gt;" in html
    assert "max_unacked_ranges_to_persist = 100." in html
    holes = read_png(report.charts["ack-holes"].read_bytes())
    assert count_color(holes, RED) > 1000 and count_color(holes, AMBER) > 1000 and count_color(holes, BLUE) > 1000
    state = read_png(report.charts["state-size"].read_bytes())
    assert count_color(state, PURPLE) > 1000 and count_color(state, RED) > 1000


def test_defaults_and_empty_output(tmp_path: Path) -> None:
    out = write_output(tmp_path / "empty", [], None)
    report = build_report(out)
    assert report.model.limit == DEFAULT_LIMIT == 10_000
    assert report.model.totals["subscriptions"] == 0 and report.model.anomalies == []
    html = report.html_path.read_text(encoding="utf-8")
    assert "The replay found no anomalies." in html and html.count("<svg") == 4
    assert 'aria-label="Anomalies by kind: No anomalies"' in html
    for path in report.charts.values():
        assert read_png(path.read_bytes()).shape[1] > 1000


def test_progress_steps(output: Path, tmp_path: Path) -> None:
    steps: list[tuple[str, int, int]] = []
    build_report(output, tmp_path / "site", progress=lambda step, done, total: steps.append((step, done, total)))
    assert steps == [("reading the replay output", 0, 1), *((f"drawing {k}", i, 4) for i, k in enumerate(CHART_KEYS)),
                     ("writing index.html", 4, 4)]


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ReplayReportInputError, match="no cursors/ directory"):
        build_report(tmp_path)
    (tmp_path / "cursors").mkdir()
    (tmp_path / "cursors" / "part-0.parquet").write_bytes(b"not parquet")
    with pytest.raises(ReplayReportInputError, match="not a readable Parquet dataset"):
        build_report(tmp_path)
    with pytest.raises(ValueError):
        build_report(tmp_path, top=0)


def test_command_line(output: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mledger.report", str(output), "-o", str(site),
                           "--max-unacked-ranges-to-persist", str(LIMIT), "--top", "5"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress display when stderr is not a terminal
    assert done.stdout.startswith(f"wrote {site / 'index.html'} (8 subscriptions, 20 anomalies, 1 over the limit)")
    assert sorted(p.name for p in site.iterdir()) == sorted([*(f"{k}.png" for k in CHART_KEYS), "index.html"])
    done = subprocess.run([sys.executable, "-m", "mledger.report", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no cursors/ directory" in done.stderr


# -- the chart description and its renderer -------------------------------------------------------------


def test_chart_axes_labels_and_limit_line(output: Path) -> None:
    from mledger.report._data import load_model
    from mledger.report._figures import report_charts

    charts = {c.key: c for c in report_charts(load_model(str(output), LIMIT), top=25)}
    fig = draw_chart(charts["ack-holes"])
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("ack-hole ranges")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:2] == ["orders-partition-0 / billing", "orders-partition-0 / audit"]  # most holes on top
    assert [line.get_xdata()[0] for line in ax.get_lines()] == [LIMIT]  # the dashed limit
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[-1] == "max_unacked_ranges_to_persist = 100"
    values = [t.get_text() for t in ax.texts]
    assert values[0] == "130  (130.0%) truncated 30"
    # every value label ends inside the axes (the x range was widened to fit them)
    fig.canvas.draw()
    right = ax.get_window_extent().x1
    assert all(t.get_window_extent().x1 <= right + 1 for t in ax.texts)
    size = draw_chart(charts["state-size"]).axes[0]
    assert size.get_xlabel() == "persisted state (KiB)"
    assert [t.get_text() for t in size.get_xticklabels()][:3] == ["0", "2", "4"]  # ticks in the unit


def test_limit_far_beyond_the_bars_is_named_not_drawn() -> None:
    chart = Chart("far", "t", "s", ("a",), (Panel((Series((5.0,), ("blue",)),), "x",
                                                   reference=Reference(1e6, "the limit")),))
    fig = draw_chart(chart)
    assert fig.axes[0].get_lines() == [] and fig.axes[0].get_xlim()[1] < 100
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["the limit (beyond every bar: not drawn to scale)"]


def test_grouped_series_and_panels_side_by_side() -> None:
    """The shape of a sweep comparison: settings as categories, one panel per measure, a series
    per run; long labels are shortened in the middle."""
    settings = ("max_unacked_ranges_to_persist=1000", "max_unacked_ranges_to_persist=10000 and a long tail end")
    spark, single = Series((3.0, 0.0), ("blue",), name="spark"), Series((2.0, 1.0), ("teal",), name="single")
    chart = Chart(
        "sweep", "Sweep", "", settings,
        (Panel((spark, single), "truncated ranges", title="Truncated"),
         Panel((Series((2048.0, 4096.0), ("purple",), name="state"),), "state (KiB)", format_bytes,
               Unit(1024, "KiB"), title="State")),
    )
    fig = draw_chart(chart)
    first, second = fig.axes
    assert len(first.patches) == 4 and len(second.patches) == 2
    assert {tuple(round(c, 3) for c in p.get_facecolor()[:3]) for p in first.patches} == {
        tuple(round(c / 255, 3) for c in rgb("blue")), tuple(round(c / 255, 3) for c in rgb("teal"))}
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["spark", "single"]
    assert second.get_xlim()[1] >= 4.0 and [t.get_text() for t in second.texts] == ["2.0 KiB", "4.0 KiB"]
    label = first.get_yticklabels()[1].get_text()
    assert len(label) == 44 and "..." in label and label.endswith("tail end")
    assert first.get_title(loc="left") == "Truncated"
    drawn = render_chart(chart)
    assert drawn.svg.startswith("<svg") and drawn.width == 1080 and read_png(drawn.png).shape[1] == 2160


def test_chart_description_is_checked() -> None:
    with pytest.raises(ValueError, match="2 values for 1 categories"):
        Chart("k", "t", "s", ("a",), (Panel((Series((1.0, 2.0), ("blue",)),), "x"),))
    with pytest.raises(ValueError, match="not in the palette"):
        Series((1.0,), ("chartreuse",))
    with pytest.raises(ValueError, match="file stem"):
        Chart("../x", "t", "s", (), (Panel((), "x"),))
    with pytest.raises(ValueError, match="3 colors for 2 bars"):
        Series((1.0, 2.0), ("blue", "red", "red"))
    assert LegendItem("red", "bad").color == "red"


# -- rendered by a real browser -----------------------------------------------------------------------------


def screenshot(html: Path, png: Path, profile: Path, size: str = "1280,2400") -> np.ndarray:
    done = _browser(f"--screenshot={png}", f"--window-size={size}", html.as_uri(), profile=profile)
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    return read_png(png.read_bytes())


_PROBE = """<script>addEventListener("load", () => { document.body.dataset.rects = [...document.querySelectorAll(
"svg[data-chart]")].map(e => { const b = e.getBoundingClientRect(); return [e.dataset.chart, b.left, b.top,
b.width, b.height].join(","); }).join(";"); });</script>"""


def chart_regions(html: Path, profile: Path, size: str = "1280,2400") -> dict[str, tuple[int, int, int, int]]:
    """Where Chromium lays out each chart: key -> (left, top, right, bottom) in CSS pixels, from a
    copy of the page with a script that records the charts' bounding boxes (same window size)."""
    probe = html.with_name("probe.html")
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    done = _browser("--dump-dom", "--virtual-time-budget=5000", f"--window-size={size}", probe.as_uri(),
                    profile=profile)
    found = re.search(r'data-rects="([^"]*)"', done.stdout)
    assert done.returncode == 0 and found, done.stderr[-2000:]
    regions = {}
    for item in found.group(1).split(";"):
        key, left, top, width, height = item.split(",")
        x, y = float(left), float(top)
        regions[key] = (int(x), int(y), int(x + float(width)), int(y + float(height)))
    return regions


CHART_COLORS = {"ack-holes": (RED, AMBER, BLUE), "state-size": (RED, PURPLE, BLUE), "chunks": (SLATE, BLUE, PURPLE),
                "anomalies": (RED, SLATE, TEAL)}


@pytest.mark.browser
def test_rendered_by_headless_chromium(output: Path, tmp_path: Path) -> None:
    report = build_report(output, max_unacked_ranges_to_persist=LIMIT)
    shot = tmp_path / "shot.png"
    image = screenshot(report.html_path, shot, tmp_path / "profile")
    assert image.shape[:2] == (2400, 1280)
    header = image[:60]
    assert count_color(header, (0x11, 0x18, 0x27)) > 20_000  # the dark title band
    regions = chart_regions(report.html_path, tmp_path / "profile")
    assert list(regions) == CHART_KEYS
    for key, (left, top, right, bottom) in regions.items():
        assert right - left >= 400 and bottom - top >= 150 and bottom <= image.shape[0], (key, regions[key])
        region = image[top:bottom, left:right]
        # not blank: bars and text cover a good share of the chart's box (the card is white)
        drawn = (region < 235).any(axis=2).mean()
        assert drawn > 0.06, f"{key}: only {drawn:.1%} of the chart is drawn"
        # bars in their colors (solid interiors, a little tolerance for the browser's color handling)
        for color in CHART_COLORS[key]:
            assert count_color(region, color, tolerance=3) > 400, (key, color)
        # text: category and tick labels and values in dark ink (lines alone make about 300 pixels)
        assert count_color(region, INK, tolerance=40) > 800, key


_TABLE_PROBE = """<script>addEventListener("load", () => { document.body.dataset.tables = [...document.querySelectorAll(
"section.card")].filter(c => c.querySelector("table")).map(c => [c.querySelector("h2").textContent,
c.clientWidth, c.querySelector("table").getBoundingClientRect().width].join(",")).join(";"); });</script>"""


def table_widths(html: Path, profile: Path, size: str) -> dict[str, tuple[float, float]]:
    """Each table's card heading -> (the card's inner width, the table's laid-out width) in CSS pixels."""
    probe = html.with_name("probe-tables.html")
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", _TABLE_PROBE + "</body>"), encoding="utf-8")
    done = _browser("--dump-dom", "--virtual-time-budget=5000", f"--window-size={size}", probe.as_uri(),
                    profile=profile)
    found = re.search(r'data-tables="([^"]*)"', done.stdout)
    assert done.returncode == 0 and found, done.stderr[-2000:]
    return {h: (float(card), float(table)) for h, card, table in (t.split(",") for t in found.group(1).split(";"))}


@pytest.mark.parametrize("width", [1400, 1280])
def test_every_table_fits_its_card(tmp_path: Path, width: int) -> None:
    # The subscriptions table was 1,221 px wide in its 1,130 px card at 1400 px (its columns
    # could not wrap): the last column hung out of the card. Long unprefixed names too.
    cursors = [*CURSORS, _cursor("persistent://tenant-with-a-long-name/namespace/a-rather-long-topic-name", 11,
                                 "a-subscription-with-a-long-name", "KEY_SHARED", 5, 200, 1)]
    out = write_output(tmp_path / "out", cursors, ANOMALIES)
    report = build_report(out, tmp_path / "site", max_unacked_ranges_to_persist=LIMIT)
    widths = table_widths(report.html_path, tmp_path / "profile", f"{width},2000")
    assert sorted(widths) == ["Anomalies", "Subscriptions", "Worst topic-partitions"]
    for heading, (card, table) in widths.items():
        assert table <= card - 2 * 24 + 1, (heading, card, table)  # within the card's 24 px padding


# -- a real replay output ----------------------------------------------------------------------------------


def test_report_of_a_real_replay(tmp_path: Path) -> None:
    from mledger.replay import GeneratorConfig, ReplaySettings, generate, run_single_process

    generate(str(tmp_path / "events"), GeneratorConfig(events=20_000, topics=2, partitions=2, seed=11))
    summary = run_single_process(str(tmp_path / "events"), str(tmp_path / "out"),
                                 ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=5"]))
    report = build_report(tmp_path / "out")  # the limit the replay recorded in settings.json
    assert report.model.limit == 5
    totals = report.model.totals
    assert totals["subscriptions"] == summary.subscriptions
    assert totals["backlog"] == summary.backlog
    assert totals["hole_ranges"] == summary.ack_hole_ranges
    assert totals["anomalies"] == summary.anomaly_total
    assert {k.reason: k.count for k in report.model.anomalies} == summary.anomalies
    for figure in ("crash", "crash_limits", "unload"):
        for part in ("", "_max"):
            name = f"redelivered_after_{figure}{part}"
            assert totals[name] == getattr(summary, name), name
    assert report.html_path.read_text(encoding="utf-8").count("<svg") == 5
    # the worst moment over time: the subscriptions a stop hurts, in the order their worst moment
    # came, each worst value at least the value at the end
    from mledger.report._figures import worst_moments

    chart = worst_moments(report.model, 25)
    assert chart is not None and list(report.charts)[0] == "worst-moments"
    times = [label.split(" · ")[0] for label in chart.categories]  # ISO times of the log sort as text
    hurt = [s for s in report.model.subscriptions if s.worst]
    assert times == sorted(times) and len(times) == min(25, len(hurt))
    for panel in chart.panels:
        worst, end = panel.series
        assert all(w >= e for w, e in zip(worst.values, end.values, strict=True))
    assert sum(chart.panels[0].series[0].values) <= summary.redelivered_after_crash_limits_max


def test_limit_from_the_recorded_settings(output: Path, tmp_path: Path) -> None:
    import json

    out = tmp_path / "recorded"
    shutil.copytree(output, out)
    (out / "settings.json").write_text(json.dumps({"format": 1, "ledger": {"max_unacked_ranges_to_persist": 120}}))
    assert build_report(out, tmp_path / "r1").model.limit == 120
    assert build_report(out, tmp_path / "r2", max_unacked_ranges_to_persist=7).model.limit == 7  # explicit wins
    done = subprocess.run([sys.executable, "-m", "mledger.report", str(out), "-o", str(tmp_path / "r3")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "(8 subscriptions, 20 anomalies, 1 over the limit)" in done.stdout, done.stderr
    (out / "settings.json").write_text("{not json")
    with pytest.raises(ReplayReportInputError, match="settings.json: not a replay settings file"):
        build_report(out, tmp_path / "r4")
    (out / "settings.json").write_text(json.dumps({"ledger": {"max_unacked_ranges_to_persist": "many"}}))
    with pytest.raises(ReplayReportInputError, match="not a count"):
        build_report(out, tmp_path / "r5")
