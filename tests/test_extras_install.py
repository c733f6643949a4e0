"""Each command works with exactly the extra docs/index.md names for it: the wheel (built once per
session) is installed with one extra into a fresh virtualenv, and the command's ``--help`` and its
shortest real use run there. Slow (pip installs; quick with pip's cache), so marked ``slow``.

The extras and commands, as the quick start of docs/index.md lists them: none (the library,
``mledger-admin --data-dir``), ``server`` (``mledger standalone``, ``mledger-admin serve``),
``client`` (``mledger-admin --admin-url``), ``replay`` (``mledger generate``, ``mledger replay
--single-process``), ``report`` (``mledger report``), ``capture`` (``mledger capture``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mledger's wheel, built once per session."""
    out, tree = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("tree")
    # built from a copy: an in-tree build would leave src/mledger.egg-info in the checkout
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(tree)],
        check=True,
        timeout=600,
        env=_clean_env(),
    )
    (built,) = out.glob("mledger-*.whl")
    return built


def _clean_env() -> dict[str, str]:
    """This environment less what would put this checkout's sources on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def venv_with(wheel: Path, extra: str, where: Path) -> Path:
    """A fresh virtualenv with mledger[extra] installed from the wheel; returns its bin/."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300, env=_clean_env())
    bin_dir = where / "bin"
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", spec], check=True, timeout=600, env=_clean_env()
    )
    (installed,) = bin_dir.glob("mledger-admin")  # the package itself was installed, not found elsewhere
    return bin_dir


def run(bin_dir: Path, *argv: str, cwd: Path) -> str:
    """Run a command of the virtualenv with nothing of this checkout on the path."""
    env = _clean_env()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_no_extra_library_and_local_admin(wheel: Path, tmp_path: Path) -> None:
    bin_dir = venv_with(wheel, "", tmp_path / "venv")
    run(bin_dir, "mledger-admin", "--help", cwd=tmp_path)
    run(bin_dir, "mledger-admin", "--data-dir", "data", "topics", "create", "orders", cwd=tmp_path)
    assert "persistent://public/default/orders" in run(
        bin_dir, "mledger-admin", "--data-dir", "data", "topics", "list", "public/default", cwd=tmp_path
    )
    code = "from mledger import ManagedLedgerFactory; print(ManagedLedgerFactory().open('t').add_entries([b'x']))"
    assert run(bin_dir, "python", "-c", code, cwd=tmp_path).strip() == "[Position(ledger_id=1, entry_id=0)]"


def test_server_extra_runs_the_broker_and_the_admin_server(wheel: Path, tmp_path: Path) -> None:
    bin_dir = venv_with(wheel, "server", tmp_path / "venv")
    run(bin_dir, "mledger", "--help", cwd=tmp_path)
    run(bin_dir, "mledger", "standalone", "--help", cwd=tmp_path)
    for command, extra in (("report", "report"), ("generate", "replay")):  # other commands name their extra
        other = subprocess.run(
            [str(bin_dir / "mledger"), command, "out"],
            cwd=tmp_path,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode == 2 and f"pip install 'mledger[{extra}]'" in other.stderr, other.stderr
        assert "Traceback" not in other.stderr
    run(bin_dir, "mledger-admin", "serve", "--help", cwd=tmp_path)
    env = _clean_env()
    for argv in (
        ["mledger", "standalone", "--memory", "--bind", "0", "--admin-bind", "0"],
        ["mledger-admin", "serve", "--data-dir", "data", "--bind", "127.0.0.1:0"],
    ):
        proc = subprocess.Popen(
            [str(bin_dir / argv[0]), *argv[1:]],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            assert ready, proc.stderr.read() if proc.stderr else ""
            url = json.loads(ready)["admin_url"] if ready.startswith("{") else ready.split()[2]
            with urllib.request.urlopen(f"{url}/admin/v2/clusters", timeout=30) as answer:
                assert json.load(answer) == ["standalone"]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0


def test_client_extra_runs_remote_admin_commands(wheel: Path, tmp_path: Path) -> None:
    from mledger.standalone import EmbeddedStandalone

    bin_dir = venv_with(wheel, "client", tmp_path / "venv")
    with EmbeddedStandalone() as broker:
        url = broker.admin_url
        run(bin_dir, "mledger-admin", "--admin-url", url, "topics", "create", "orders", cwd=tmp_path)
        out = run(bin_dir, "mledger-admin", "--admin-url", url, "topics", "list", "public/default", cwd=tmp_path)
    assert "persistent://public/default/orders" in out


def test_replay_extra_generates_and_replays_in_process(wheel: Path, tmp_path: Path) -> None:
    bin_dir = venv_with(wheel, "replay", tmp_path / "venv")
    run(bin_dir, "mledger", "generate", "--help", cwd=tmp_path)
    run(bin_dir, "mledger", "replay", "--help", cwd=tmp_path)
    run(bin_dir, "mledger", "generate", "--quiet", "--events", "2000", "prepared", cwd=tmp_path)
    out = run(bin_dir, "mledger", "replay", "--quiet", "--single-process", "prepared", "out", cwd=tmp_path)
    assert "subscription" in out.lower()
    assert (tmp_path / "out" / "settings.json").exists()


def test_report_extra_renders_a_replay_output(wheel: Path, tmp_path: Path) -> None:
    bin_dir = venv_with(wheel, "report", tmp_path / "venv")
    run(bin_dir, "mledger", "report", "--help", cwd=tmp_path)
    here = [sys.executable, "-m", "mledger.cli"]  # this checkout's environment makes the replay output
    subprocess.run(
        [*here, "generate", "--quiet", "--events", "2000", "prepared"], cwd=tmp_path, check=True, timeout=300
    )
    subprocess.run(
        [*here, "replay", "--quiet", "--single-process", "prepared", "out"],
        cwd=tmp_path,
        check=True,
        timeout=300,
        stdout=subprocess.DEVNULL,
    )
    assert "wrote" in run(bin_dir, "mledger", "report", "out", cwd=tmp_path)
    assert (tmp_path / "out" / "report" / "index.html").exists()


def test_capture_extra_captures_a_topic(wheel: Path, tmp_path: Path) -> None:
    from mledger.standalone import EmbeddedStandalone

    bin_dir = venv_with(wheel, "capture", tmp_path / "venv")
    run(bin_dir, "mledger", "capture", "--help", cwd=tmp_path)
    with EmbeddedStandalone() as broker:
        broker.broker.create_producer("orders").send(b"x")
        run(
            bin_dir,
            "mledger",
            "capture",
            "out",
            "--service-url",
            broker.service_url,
            "--admin-url",
            broker.admin_url,
            "--topic",
            "orders",
            "--duration",
            "1s",
            "--interval",
            "200ms",
            cwd=tmp_path,
        )
    assert (tmp_path / "out" / "capture.json").exists()
    assert list((tmp_path / "out" / "produced").glob("*.parquet"))
