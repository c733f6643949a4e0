#!/bin/sh
# Regenerate docs/report.png, the screenshot in docs/replay/report.md of `mledger report`: a small synthetic
# log (seeded), replayed in this process with a low range limit and small state entries so
# every color of the charts shows, rendered by headless Chromium at 1280x1640.
#
#   scripts/report_screenshot.sh [OUTPUT.png]     # default docs/report.png; needs `make test`'s set-up
#
# With --replayed OUT (a replay's output directory, e.g. a sweep) it screenshots the report of
# OUT instead of the synthetic log; --height H sets the window's height (1640):
#
#   scripts/report_screenshot.sh --replayed out/ --height 1480 docs/size-your-cursors.png
set -eu
cd "$(dirname "$0")/.."
replayed=""
height=1640
while [ $# -gt 0 ]; do
    case "$1" in
        --replayed) replayed="$2"; shift 2 ;;
        --height) height="$2"; shift 2 ;;
        *) break ;;
    esac
done
target="${1:-docs/report.png}"
work="${TMPDIR:-/tmp}/mledger-report-shot"
bin="${MLEDGER_BIN:-.venv/bin}"
scripts/ensure_chromium.sh
rm -rf "$work"
if [ -z "$replayed" ]; then
    "$bin/mledger" generate --quiet --events 400000 --lost-ack-fraction 0.003 "$work/events"
    "$bin/mledger" replay --single-process --quiet "$work/events" "$work/out" \
        --set max_unacked_ranges_to_persist=40 \
        --set persistent_unacked_ranges_with_multiple_entries_enabled=true \
        --set persistent_unacked_ranges_max_entry_size=400 >/dev/null 2>&1
    replayed="$work/out"
fi
"$bin/mledger" report "$replayed" --top 16
replayed="$(cd "$replayed" && pwd)"
case "$target" in /*) shot="$target" ;; *) shot="$PWD/$target" ;; esac
rm -f "$shot"
chromium="${MLEDGER_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}"
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --screenshot="$shot" --window-size="1280,$height" \
    "file://$replayed/report/index.html" 2>/dev/null
rm -rf "$work"
[ -s "$shot" ] || { echo "report_screenshot.sh: Chromium wrote no $shot" >&2; exit 1; }
echo "wrote $target"
