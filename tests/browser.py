"""Headless Chromium for the tests that look at a page as a browser shows it (the report's
charts, the documentation site's search): ``scripts/ensure_chromium.sh`` installs it, ``make
test`` runs it, ``MLEDGER_CHROMIUM`` names another binary. Such tests carry ``pytest.mark.browser``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    for candidate in (os.environ.get("MLEDGER_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("Chromium is missing: run scripts/ensure_chromium.sh (`make test` does) or set MLEDGER_CHROMIUM")


def browser(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with ``args`` (offline: no network services), a fresh ``profile``."""
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--hide-scrollbars", "--force-device-scale-factor=1", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=180,
    )
