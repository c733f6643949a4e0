"""The quick start's system requirements: Java 17 checked up front (scripts/check_java.sh) and
`make test` running everything but the browser test, loudly, where Chromium cannot be had,
while CI (CI=true) must run it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _fake_java(bin_dir: Path, version_line: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)


def _check_java(path: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": path}
    return subprocess.run(["/bin/sh", str(ROOT / "scripts" / "check_java.sh")], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(
    ("version_line", "ok"),
    [
        ('openjdk version "17.0.15" 2025-04-15', True),
        ('openjdk version "21.0.2" 2024-01-16', True),
        ('openjdk version "11.0.22" 2024-01-16', False),
        ('java version "1.8.0_392"', False),
    ],
)
def test_check_java_wants_java_17_or_newer(tmp_path: Path, version_line: str, ok: bool) -> None:
    _fake_java(tmp_path / "bin", version_line)
    done = _check_java(f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert (done.returncode == 0) == ok, done.stderr
    if not ok:
        assert "need Java 17 or newer" in done.stderr


def test_check_java_says_what_to_install_when_there_is_none(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    for tool in ("sed", "head"):
        (tmp_path / "bin" / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    done = _check_java(str(tmp_path / "bin"))
    assert done.returncode == 1
    assert "no Java found" in done.stderr and "openjdk-17-jre-headless" in done.stderr


def _make_test_fast(tmp_path: Path, ci: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """`make test-fast` with a browser that cannot be installed and a stand-in for pytest that
    records its arguments."""
    record = tmp_path / "pytest-args"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$@" > {record}\n')
    stub.chmod(0o755)
    env = dict(os.environ, CI=ci)
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed", "test-fast", "ENSURE_CHROMIUM=false", f"PY={stub}"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    return done, record.read_text() if record.exists() else ""


def test_make_test_leaves_the_browser_test_out_loudly_where_chromium_cannot_be_had(tmp_path: Path) -> None:
    done, args = _make_test_fast(tmp_path, ci="")
    assert done.returncode == 0, done.stderr
    assert args.strip() == "-m pytest -q --durations=30 -m not spark and not slow and not cluster and not browser"
    assert done.stderr.count("LEFT OUT the browser test") == 2  # before and after the run


def test_ci_runs_the_browser_test_or_fails(tmp_path: Path) -> None:
    done, args = _make_test_fast(tmp_path, ci="true")
    assert done.returncode != 0
    assert args == ""
    assert "CI runs every test, the browser test included" in done.stderr


def test_the_readme_gets_a_new_shell_to_the_first_command() -> None:
    """The quick start never said to activate ``.venv``: a fresh shell answered ``mledger: command
    not found`` and ``import pulsar`` failed. The README names the Makefile's virtualenv and how
    long ``make test`` takes, and activating a virtualenv so set up gives a bare shell the commands."""
    readme = (ROOT / "README.md").read_text()
    venv = re.search(r"^VENV := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert venv and f"source {venv.group(1)}/bin/activate" in readme
    assert re.search(r"`make test` takes about\s+\d+\s+minutes\s+on\s+2\s+cores", readme)
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests run outside a virtualenv: nothing to activate")
    shell = f"source {Path(sys.prefix) / 'bin' / 'activate'} && command -v mledger mledger-admin && " \
            "python -c 'import pulsar'"
    bare = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(["bash", "-c", shell], env=bare, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
