#!/bin/sh
# Make sure a Chromium is installed: tests/test_report.py screenshots the HTML report with it
# (headless). Quiet when it is there already; otherwise installs Debian's `chromium` (and a
# font, so text renders) with apt-get, as root or through sudo. Exit 1 if that is impossible.
#
#   scripts/ensure_chromium.sh        # called by `make test`
#   MLEDGER_CHROMIUM=/path/to/chrome  # use another browser binary (the test reads it too)
set -eu

if [ -n "${MLEDGER_CHROMIUM:-}" ] && [ -x "${MLEDGER_CHROMIUM}" ]; then
    exit 0
fi
if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: chromium is missing and there is no apt-get; install Chromium" \
         "and put it on PATH (or set MLEDGER_CHROMIUM)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "ensure_chromium: chromium is missing; run as root: apt-get install chromium" >&2
        exit 1
    fi
    SUDO="sudo"
fi
echo "ensure_chromium: installing Debian's chromium (for the report screenshot test)..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "ensure_chromium: install failed" >&2; exit 1; }
