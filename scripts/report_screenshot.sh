#!/bin/sh
# Regenerate docs/report.png, the README's screenshot of `mledger report`: a small synthetic
# log (seeded), replayed in this process with a low range limit and small state entries so
# every color of the charts shows, rendered by headless Chromium at 1280x1640.
#
#   scripts/report_screenshot.sh [OUTPUT.png]     # default docs/report.png; needs `make test`'s set-up
set -eu
cd "$(dirname "$0")/.."
target="${1:-docs/report.png}"
work="${TMPDIR:-/tmp}/mledger-report-shot"
bin=.venv/bin
scripts/ensure_chromium.sh
rm -rf "$work"
"$bin/mledger" generate --quiet --events 400000 --lost-ack-fraction 0.003 "$work/events"
"$bin/mledger" replay --single-process --quiet "$work/events" "$work/out" \
    --set max_unacked_ranges_to_persist=40 \
    --set persistent_unacked_ranges_with_multiple_entries_enabled=true \
    --set persistent_unacked_ranges_max_entry_size=400 >/dev/null 2>&1
"$bin/mledger" report "$work/out" --top 16
chromium="${MLEDGER_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}"
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --screenshot="$PWD/$target" --window-size=1280,1640 \
    "file://$work/out/report/index.html" 2>/dev/null
rm -rf "$work"
echo "wrote $target"
