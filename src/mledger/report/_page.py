"""The report's HTML: one self-contained page (inline CSS, charts as inline SVG, no scripts).

Every value from the data is HTML-escaped. Tables are limited to ``rows`` lines each; the page
says how many more the Parquet output holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from ._chart import Chart, RenderedChart, format_bytes
from ._data import NEAR_LIMIT, ReportModel, SubscriptionState

__all__ = ["render_page"]

_CSS = """
:root { --ink:#111827; --muted:#6b7280; --line:#e5e7eb; --bg:#f3f4f6; --card:#fff; --blue:#3b82f6;
        --amber:#f59e0b; --red:#ef4444; --purple:#8b5cf6; --teal:#14b8a6; --slate:#64748b; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.5 -apple-system, BlinkMacSystemFont,
       "Segoe UI", Roboto, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; }
header.top { background:#111827; color:#f9fafb; padding:28px 0 24px; }
.wrap { max-width:1180px; margin:0 auto; padding:0 24px; }
.brand { font-size:12px; letter-spacing:.12em; text-transform:uppercase; color:#9ca3af; }
h1 { margin:4px 0 6px; font-size:26px; font-weight:650; }
.meta { color:#d1d5db; font-size:13px; }
.meta code { color:#f9fafb; }
main { padding:24px 0 40px; }
.kpis { display:grid; grid-template-columns:repeat(4, 1fr); gap:14px; margin-bottom:20px; }
.kpi { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px;
       border-top:4px solid var(--blue); }
.kpi.warn { border-top-color:var(--amber); } .kpi.bad { border-top-color:var(--red); }
.kpi.ok { border-top-color:var(--teal); } .kpi.neutral { border-top-color:var(--slate); }
.kpi .label { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.06em; }
.kpi .value { font-size:26px; font-weight:650; font-variant-numeric:tabular-nums; margin-top:2px; }
.kpi .note { color:var(--muted); font-size:12px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:20px 24px;
        margin-bottom:20px; }
.card h2 { margin:0 0 4px; font-size:18px; font-weight:650; }
.lede { margin:0 0 14px; color:var(--muted); }
.grid2 { display:grid; grid-template-columns:1fr 1fr; gap:20px; }
.grid2 .card { margin-bottom:0; }
.row { margin-bottom:20px; }
figure { margin:0; }
figure svg.chart { display:block; width:100%; height:auto; }
figcaption { color:var(--muted); font-size:12.5px; margin-top:8px; }
table { width:100%; border-collapse:collapse; font-size:13px; }
th { text-align:left; font-weight:600; color:var(--muted); font-size:11.5px; text-transform:uppercase;
     letter-spacing:.04em; border-bottom:1px solid var(--line); padding:8px 8px; vertical-align:bottom; }
td { border-bottom:1px solid var(--line); padding:7px 8px; vertical-align:top; }
tbody tr:nth-child(even) td { background:#fafafa; }
th.num { text-align:right; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.name { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
          font-size:12.5px; overflow-wrap:anywhere; min-width:22ch; }
td.nowrap { white-space:nowrap; }
.scroll { overflow-x:auto; }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:11px; font-weight:600;
         background:#eef2ff; color:#3730a3; white-space:nowrap; }
.badge.SHARED { background:#dbeafe; color:#1e40af; } .badge.KEY_SHARED { background:#ccfbf1; color:#115e59; }
.badge.EXCLUSIVE { background:#f3f4f6; color:#374151; } .badge.FAILOVER { background:#ede9fe; color:#5b21b6; }
.meter { display:inline-block; width:48px; height:8px; border-radius:4px; background:#e5e7eb;
         vertical-align:middle; margin-right:6px; overflow:hidden; }
.meter span { display:block; height:100%; background:var(--blue); }
.meter span.warn { background:var(--amber); } .meter span.bad { background:var(--red); }
.pill { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:6px; vertical-align:-1px; }
.more { color:var(--muted); font-size:12.5px; margin:10px 0 0; }
ul.notes { margin:12px 0 0; padding-left:18px; font-size:13px; max-width:1080px; }
ul.notes li { margin:4px 0; }
.detail { color:var(--muted); font-size:12px; }
footer { color:var(--muted); font-size:12px; padding:0 0 32px; }
@media (max-width: 900px) { .kpis { grid-template-columns:repeat(2, 1fr); } .grid2 { grid-template-columns:1fr; } }
"""


def _n(value: int | float) -> str:
    return f"{value:,}"


def _kpi(label: str, value: str, note: str, tone: str = "") -> str:
    return (
        f'<div class="kpi {tone}"><div class="label">{escape(label)}</div>'
        f'<div class="value">{escape(value)}</div><div class="note">{escape(note)}</div></div>'
    )


def _kpis(model: ReportModel) -> str:
    t = model.totals
    over, near = t.get("over_limit", 0), t.get("near_limit", 0)
    limit_tone = "bad" if over else ("warn" if near else "ok")
    anomalies = t.get("anomalies", 0)
    tiles = [
        _kpi(
            "Topic-partitions",
            _n(t.get("topic_partitions", 0)),
            f"{_n(t.get('subscriptions', 0))} subscriptions",
            "neutral",
        ),
        _kpi("Backlog", _n(t.get("backlog", 0)), "unacknowledged entries", "neutral"),
        _kpi(
            "Acked / cancelled",
            f"{_n(t.get('acked', 0))} / {_n(t.get('cancelled', 0))}",
            "messages acknowledged and cancelled",
            "neutral",
        ),
        _kpi("Anomalies", _n(anomalies), f"{len(model.anomalies)} kinds", "warn" if anomalies else "ok"),
        _kpi(
            "Ack-hole ranges",
            _n(t.get("hole_ranges", 0)),
            f"largest {_n(t.get('max_hole_ranges', 0))} on one subscription",
            "neutral",
        ),
        _kpi("Over the limit", _n(over), f"{_n(near)} more at >= {NEAR_LIMIT:.0%} of {_n(model.limit)}", limit_tone),
        _kpi(
            "Largest state",
            format_bytes(t.get("max_persisted_bytes", 0)),
            f"up to {t.get('max_chunks', 0)} chunk(s); {_n(t.get('chunked', 0))} chunked",
            "neutral",
        ),
        _kpi(
            "Truncated ranges",
            _n(t.get("truncated_ranges", 0)),
            "kept in memory only at the end",
            "bad" if t.get("truncated_ranges", 0) else "ok",
        ),
        _kpi(
            "Lost to the limits on a crash",
            _n(t.get("redelivered_after_crash_limits_max", 0)),
            f"at each subscription's worst moment ({_n(t.get('redelivered_after_crash_limits', 0))} at the end); "
            f"an unload {_n(t.get('redelivered_after_unload_max', 0))}; a crash in all "
            f"{_n(t.get('redelivered_after_crash_max', 0))} with the acks not yet persisted; "
            f"{_n(t.get('state_over_store_limit', 0))} states over the store's limit",
            "bad"
            if t.get("redelivered_after_crash_limits_max", 0)
            or t.get("redelivered_after_unload_max", 0)
            or t.get("state_over_store_limit", 0)
            else "ok",
        ),
    ]
    return '<section class="kpis">' + "".join(tiles) + "</section>"


def _figure(chart: Chart, drawn: RenderedChart) -> str:
    caption = f"{escape(chart.caption)} " if chart.caption else ""
    notes = "".join(f"<li>{escape(note)}</li>" for note in chart.notes)
    return (
        f'<figure style="max-width:{drawn.width}px">{drawn.svg}'
        f'<figcaption>{caption}<span class="detail">({escape(chart.key)}.png)</span></figcaption></figure>'
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
    )


def _charts(charts: Sequence[tuple[Chart, RenderedChart]]) -> str:
    """Full-width charts in a card each (under their heading); consecutive half-width ones in
    pairs."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            cells = "".join(f'<section class="card">{block}</section>' for block in pending)
            out.append(f'<div class="grid2 row">{cells}</div>')
            pending.clear()

    for chart, drawn in charts:
        block = _figure(chart, drawn)
        if chart.width == "half":
            pending.append(block)
            if len(pending) == 2:
                flush()
            continue
        flush()
        heading = f"<h2>{escape(chart.heading)}</h2>" if chart.heading else ""
        lede = f'<p class="lede">{escape(chart.lede)}</p>' if chart.lede else ""
        out.append(f'<section class="card">{heading}{lede}{block}</section>')
    flush()
    return "".join(out)


def _meter(share: float) -> str:
    tone = "bad" if share > 1 else ("warn" if share >= NEAR_LIMIT else "")
    width = max(0.0, min(share, 1.0)) * 100
    return f'<span class="meter"><span class="{tone}" style="width:{width:.1f}%"></span></span>{share:.1%}'


def _table(headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f'<th class="num">{escape(h)}</th>' if num else f"<th>{escape(h)}</th>" for h, num in headers)
    body = "".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _td(text: str, cls: str = "") -> str:
    return f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>"


def _more(shown: int, total: int, what: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="more">{_n(total - shown)} more {escape(what)} in the Parquet output.</p>'


def _anomaly_section(model: ReportModel, rows: int) -> str:
    if not model.anomalies:
        return '<section class="card"><h2>Anomalies</h2><p class="lede">The replay found no anomalies.</p></section>'
    lines = []
    for kind in model.anomalies[:rows]:
        example = ""
        if kind.examples:
            e = kind.examples[0]
            where = f"{e.get('topic') or ''}"
            if e.get("partition") is not None and e.get("partition", -1) >= 0:
                where += f"-partition-{e['partition']}"
            sub = f" / {e['subscription']}" if e.get("subscription") else ""
            at = f" at {e.get('ledger_id')}:{e.get('entry_id')}" if e.get("ledger_id") is not None else ""
            example = f"{model.short(where)}{sub}{at}"
            if e.get("detail"):
                example += f" - {e['detail']}"
        lines.append(
            [
                _td(f"<code>{escape(kind.reason)}</code>"),
                _td(_n(kind.count), "num"),
                _td(escape(kind.meaning)),
                _td(escape(example), "detail"),
            ]
        )
    table = _table((("Kind", False), ("Rows", True), ("Meaning", False), ("Example", False)), lines)
    return (
        '<section class="card"><h2>Anomalies</h2><p class="lede">What the replay could not apply or found '
        f"suspicious, by kind, with one example each.</p>{table}"
        f"{_more(min(rows, len(model.anomalies)), len(model.anomalies), 'kinds')}</section>"
    )


def _partition_section(model: ReportModel, rows: int) -> str:
    shown = model.partitions[:rows]
    lines = [
        [
            _td(escape(model.short(p.topic_partition)), "name"),
            _td(_n(p.subscriptions), "num"),
            _td(_n(p.max_hole_ranges), "num"),
            _td(_meter(p.max_utilisation), "nowrap"),
            _td(_n(p.truncated_ranges), "num"),
            _td(format_bytes(p.max_persisted_bytes), "num"),
            _td(_n(p.max_chunks), "num"),
            _td(_n(p.backlog), "num"),
            _td(_n(p.anomalies), "num"),
        ]
        for p in shown
    ]
    table = _table(
        (
            ("Topic-partition", False),
            ("Subs", True),
            ("Max holes", True),
            ("Of limit", False),
            ("Truncated", True),
            ("Max state", True),
            ("Chunks", True),
            ("Backlog", True),
            ("Anomalies", True),
        ),
        lines,
    )
    unplaced = model.totals.get("unplaced_anomalies", 0)
    note = (
        f'<p class="more">{_n(unplaced)} anomaly row{"s" if unplaced != 1 else ""} name no topic-partition '
        "(a bad row of the subscriptions log, or an event row without a topic or partition): they count under "
        "Anomalies only.</p>"
        if unplaced
        else ""
    )
    return (
        '<section class="card"><h2>Worst topic-partitions</h2><p class="lede">Ranked by truncated ranges, then '
        "by the fullest subscription's share of the limit, then by anomalies and backlog.</p>"
        f"{table}{_more(len(shown), len(model.partitions), 'topic-partitions')}{note}</section>"
    )


def _subscription_row(model: ReportModel, s: SubscriptionState) -> list[str]:
    return [
        _td(escape(model.short(s.topic_partition)), "name"),
        _td(escape(s.subscription), "name"),
        _td(f'<span class="badge {escape(s.type)}">{escape(s.type or "?")}</span>'),
        _td(f'{escape(s.mark_delete)}<br><span class="detail">read {escape(s.read)}</span>', "num"),
        _td(_n(s.hole_ranges), "num"),
        _td(_meter(s.utilisation(model.limit)), "nowrap"),
        _td(_n(s.truncated_ranges), "num"),
        _td(
            f'{format_bytes(s.persisted_bytes)}<br><span class="detail">'
            f"{_n(s.chunks)} chunk{'s' if s.chunks != 1 else ''}</span>",
            "num",
        ),
        _td(_n(s.backlog), "num"),
        _td(f"{_n(s.acked)} / {_n(s.cancelled)}", "num"),
    ]


def _subscription_section(model: ReportModel, rows: int) -> str:
    shown = model.subscriptions[:rows]
    table = _table(
        (
            ("Topic-partition", False),
            ("Subscription", False),
            ("Type", False),
            ("Mark-delete", True),
            ("Holes", True),
            ("Of limit", False),
            ("Truncated", True),
            ("State", True),
            ("Backlog", True),
            ("Acked / cancelled", True),
        ),
        [_subscription_row(model, s) for s in shown],
    )
    return (
        '<section class="card"><h2>Subscriptions</h2><p class="lede">Final cursor state, most ack-hole ranges '
        f"first.</p>{table}{_more(len(shown), len(model.subscriptions), 'subscriptions')}</section>"
    )


def render_page(
    model: ReportModel,
    charts: Sequence[tuple[Chart, RenderedChart]],
    generated: str,
    rows: int = 50,
) -> str:
    """The whole page. ``charts`` are (chart, its drawing), in page order."""
    prefix = model.common_prefix
    scope = f" · topics under <code>{escape(prefix)}</code>" if prefix else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>mledger replay report</title><style>{_CSS}</style></head>
<body>
<header class="top"><div class="wrap"><div class="brand">mledger</div><h1>Replay report</h1>
<div class="meta">Source <code>{escape(model.source)}</code>{scope} · generated {escape(generated)}</div>
</div></header>
<main><div class="wrap">
{_kpis(model)}
{_charts(charts)}
{_partition_section(model, rows)}
{_anomaly_section(model, rows)}
{_subscription_section(model, rows)}
</div></main>
<footer><div class="wrap">Generated by <code>mledger report</code> from the replay's <code>cursors/</code> and
<code>anomalies/</code> Parquet output. Limit assumed: <code>max_unacked_ranges_to_persist</code> =
{_n(model.limit)} (pass <code>--max-unacked-ranges-to-persist</code> if the replay ran with another
<code>--set</code>). Charts are also saved as PNG files next to this page.</div></footer>
</body></html>
"""
