#!/bin/sh
# Regenerate docs/size-your-cursors.png, the picture of docs/size-your-cursors.md: runs that
# page's workload (its first `python - <<'EOF'` block, taken from the page itself) against a
# recording `mledger standalone` on free ports, sweeps max_unacked_ranges_to_persist=10,100,1000
# as the page does, and screenshots the report with scripts/report_screenshot.sh.
#
#   scripts/size_your_cursors_screenshot.sh [OUTPUT.png]   # default docs/size-your-cursors.png
#   MLEDGER_BIN=/path/to/venv/bin                            # where mledger and python are (.venv/bin)
set -eu
cd "$(dirname "$0")/.."
target="${1:-docs/size-your-cursors.png}"
bin="${MLEDGER_BIN:-.venv/bin}"
work="${TMPDIR:-/tmp}/mledger-size-your-cursors"
rm -rf "$work" && mkdir -p "$work"
ports=$("$bin/python" -c 'import socket
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
broker=$(echo "$ports" | sed -n 1p)
admin=$(echo "$ports" | sed -n 2p)
sed -n "/^python - <<'EOF' 2>\/dev\/null$/,/^EOF$/p" docs/size-your-cursors.md | sed '1d;$d' \
    | sed "s/127.0.0.1:6650/127.0.0.1:$broker/" > "$work/workload.py"
"$bin/mledger" standalone --memory --record "$work/rec" \
    --bind "127.0.0.1:$broker" --admin-bind "127.0.0.1:$admin" > "$work/ready" 2> "$work/server.log" &
server=$!
until [ -s "$work/ready" ]; do kill -0 "$server" && sleep 0.1; done
"$bin/python" "$work/workload.py" 2>/dev/null
kill -TERM "$server" && wait "$server"
"$bin/mledger" replay "$work/rec" "$work/out" --single-process --quiet \
    --sweep max_unacked_ranges_to_persist=10,100,1000 >/dev/null
scripts/report_screenshot.sh --replayed "$work/out" --height 1480 "$target"
rm -rf "$work"
