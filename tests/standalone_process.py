"""``mledger standalone`` in a subprocess (``--memory``, free ports), for the tests that drive it
as a CI job would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def running_standalone(*options: str) -> Iterator[dict[str, str]]:
    """The URLs it prints once ready (``service_url``, ``admin_url``); stopped with SIGTERM on
    exit (killed after 60 s)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mledger.cli", "standalone", "--memory", "--bind", "127.0.0.1:0",
         "--admin-bind", "127.0.0.1:0", *options],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
