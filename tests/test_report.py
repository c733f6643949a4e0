"""mledger report: the replay output (Parquet cursors/anomalies) as a self-contained HTML page with
PNG charts; rendered by headless Chromium and checked pixel by pixel (never skipped: `make test`
installs Chromium with scripts/ensure_chromium.sh)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mledger._report.charts import Bar, BarChart, nice_ticks, render_bar_chart
from mledger._report.data import ReplayReportInputError
from mledger._report.png import Canvas
from mledger.report import DEFAULT_LIMIT, build_report
from mledger.spark.schema import ANOMALY_SCHEMA, CURSOR_SCHEMA

LIMIT = 100
ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"
WEIRD = "<script>alert('x')</script>"
CHART_KEYS = ["ack-holes", "state-size", "chunks", "anomalies"]
BLUE, PURPLE, RED, AMBER = (0x3B, 0x82, 0xF6), (0x8B, 0x5C, 0xF6), (0xEF, 0x44, 0x44), (0xF5, 0x9E, 0x0B)


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


# -- PNG reading for the checks (numpy; handles Chromium's filtered RGBA) ---------------------------------


def decode_png(data: bytes) -> np.ndarray:
    """An (h, w, channels) uint8 array of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6) and header[12] == 0, "only 8-bit RGB/RGBA, not interlaced"
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), np.uint8)
    prev = np.zeros(width * bpp, np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 1:
            line = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 255
        elif kind == 2:
            line = (line + prev) & 255
        elif kind in (3, 4):
            line = line.copy()
            for x in range(width * bpp):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                if kind == 3:
                    line[x] = (line[x] + (a + b) // 2) & 255
                else:
                    c = prev[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa_, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[x] = (line[x] + (a if pa_ <= pb and pa_ <= pc else b if pb <= pc else c)) & 255
        out[y] = line
        prev = line
    return out.reshape(height, width, bpp)


def count_color(image: np.ndarray, rgb: tuple[int, int, int]) -> int:
    return int(np.all(image[:, :, :3] == np.array(rgb, np.uint8), axis=2).sum())


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


def test_page_and_png_files(output: Path, tmp_path: Path) -> None:
    report = build_report(output, tmp_path / "site", max_unacked_ranges_to_persist=LIMIT)
    assert report.html_path == tmp_path / "site" / "index.html"
    assert sorted(report.charts) == sorted(CHART_KEYS)
    html = report.html_path.read_text(encoding="utf-8")
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" width="(\d+)" height="(\d+)" '
                        r'alt="[^"]*" data-chart="([a-z-]+)">', html)
    assert [key for *_, key in images] == CHART_KEYS
    for data, width, height, key in images:
        png = base64.b64decode(data)
        assert png == report.charts[key].read_bytes()
        pixels = decode_png(png)
        assert pixels.shape == (2 * int(height), 2 * int(width), 3)  # drawn at 2x for sharp text
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) >= 5
    # self-contained and escaped
    assert "<script" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "detail 0 &lt;b&gt;" in html
    assert "max_unacked_ranges_to_persist</code> = 100" in html
    holes = decode_png(report.charts["ack-holes"].read_bytes())
    assert count_color(holes, RED) > 1000 and count_color(holes, AMBER) > 1000 and count_color(holes, BLUE) > 1000


def test_defaults_and_empty_output(tmp_path: Path) -> None:
    out = write_output(tmp_path / "empty", [], None)
    report = build_report(out)
    assert report.model.limit == DEFAULT_LIMIT == 10_000
    assert report.model.totals["subscriptions"] == 0 and report.model.anomalies == []
    html = report.html_path.read_text(encoding="utf-8")
    assert "The replay found no anomalies." in html and html.count("data:image/png;base64,") == 4


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
    assert done.stdout.startswith(f"wrote {site / 'index.html'} (8 subscriptions, 20 anomalies, 1 over the limit)")
    assert sorted(p.name for p in site.iterdir()) == sorted([*(f"{k}.png" for k in CHART_KEYS), "index.html"])
    done = subprocess.run([sys.executable, "-m", "mledger.report", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no cursors/ directory" in done.stderr


# -- drawing primitives ----------------------------------------------------------------------------------


def test_canvas_png_and_ticks() -> None:
    canvas = Canvas(40, 20)
    canvas.fill_rect(-5, -5, 10, 10, (255, 0, 0))
    canvas.text(10, 2, "Ab1", (0, 0, 255), scale=1)
    canvas.hline(0, 40, 19, (0, 128, 0), dash=3)
    pixels = decode_png(canvas.to_png())
    assert pixels.shape == (20, 40, 3)
    assert tuple(pixels[0, 0]) == (255, 0, 0) and tuple(pixels[10, 10]) == (255, 255, 255)
    assert count_color(pixels, (0, 0, 255)) > 10 and count_color(pixels, (0, 128, 0)) > 10
    assert Canvas.text_width("abc", 2) == (3 * 6 - 1) * 2
    assert nice_ticks(0) == [0.0, 1.0]
    assert nice_ticks(95) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(1300)[-1] >= 1300
    big = BarChart("t", "s", [Bar("x" * 200, 5, BLUE)], reference=(1e6, "limit"))
    assert render_bar_chart(big).png.startswith(b"\x89PNG")  # long labels shortened, limit off scale


# -- rendered by a real browser -----------------------------------------------------------------------------


def chromium() -> str:
    for candidate in (os.environ.get("MLEDGER_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("Chromium is missing: run scripts/ensure_chromium.sh (`make test` does) or set MLEDGER_CHROMIUM")


def screenshot(html: Path, png: Path, profile: Path, size: str = "1280,2000") -> np.ndarray:
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}", html.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    return decode_png(png.read_bytes())


def test_rendered_by_headless_chromium(output: Path, tmp_path: Path) -> None:
    report = build_report(output, max_unacked_ranges_to_persist=LIMIT)
    shot = tmp_path / "shot.png"
    image = screenshot(report.html_path, shot, tmp_path / "profile")
    assert shot.stat().st_size > 20_000
    assert image.shape[:2] == (2000, 1280)
    assert len(np.unique(image[:, :, :3].reshape(-1, 3), axis=0)) > 200  # text, tiles, charts: not blank
    header, body = image[:60], image[400:]
    assert count_color(header, (0x11, 0x18, 0x27)) > 20_000  # the dark title band
    # chart bars are solid fills in the chart colors, far larger than any tile border
    assert count_color(body, BLUE) > 5_000
    assert count_color(body, PURPLE) > 5_000
    assert count_color(body, RED) > 2_000
    assert count_color(body, AMBER) > 2_000


# -- a real replay output ----------------------------------------------------------------------------------


def test_report_of_a_real_replay(tmp_path: Path) -> None:
    from mledger.spark.generate import GeneratorConfig, generate
    from mledger.spark.local import run_single_process
    from mledger.spark.settings import ReplaySettings

    generate(str(tmp_path / "events"), GeneratorConfig(events=20_000, topics=2, partitions=2, seed=11))
    summary = run_single_process(str(tmp_path / "events"), str(tmp_path / "out"),
                                 ReplaySettings.from_pairs(["max_unacked_ranges_to_persist=500"]))
    report = build_report(tmp_path / "out")  # the limit the replay recorded in settings.json
    assert report.model.limit == 500
    totals = report.model.totals
    assert totals["subscriptions"] == summary.subscriptions
    assert totals["backlog"] == summary.backlog
    assert totals["hole_ranges"] == summary.ack_hole_ranges
    assert totals["anomalies"] == summary.anomaly_total
    assert {k.reason: k.count for k in report.model.anomalies} == summary.anomalies
    assert report.html_path.read_text(encoding="utf-8").count("data:image/png;base64,") == 4


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
