"""scripts/faces_codemod.py --check (make lint, so CI): it fails while a docstring cites a
private path that has a public spelling, and passes once the script rewrote it (issue 32's
tooling)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "faces_codemod.py"

pytestmark = pytest.mark.timeout(60)


def codemod(src: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(src), *args], capture_output=True, text=True, timeout=50
    )


def write_tree(src: Path, citing_docstring: str) -> Path:
    """``mledger.store`` (face exporting ``Store`` from ``_memory``) and ``mledger.broker``,
    whose module docstring is ``citing_docstring``; returns the citing file."""
    files = {
        "mledger/__init__.py": '"""The face."""\n\n__all__: list[str] = []\n',
        "mledger/store/__init__.py": '"""Stores."""\n\nfrom ._memory import Store as Store\n\n__all__ = ["Store"]\n',
        "mledger/store/_memory.py": '"""Memory."""\n\n\nclass Store:\n    """A store."""\n',
        "mledger/broker/__init__.py": f'"""{citing_docstring}"""\n',
    }
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    return src / "mledger/broker/__init__.py"


def test_check_fails_on_a_docstring_path_with_a_public_spelling_until_it_is_rewritten(tmp_path: Path) -> None:
    citing = write_tree(tmp_path, "Serves a :class:`~mledger.store._memory.Store`.")
    checked = codemod(tmp_path, "--check")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "(1 with a public spelling)" in checked.stdout
    assert "mledger.store._memory.Store -> mledger.store.Store" in checked.stdout
    assert "_memory" in citing.read_text()  # --check changes nothing

    rewritten = codemod(tmp_path)
    assert rewritten.returncode == 0, rewritten.stdout + rewritten.stderr
    assert citing.read_text() == '"""Serves a :class:`~mledger.store.Store`."""\n'
    again = codemod(tmp_path, "--check")
    assert again.returncode == 0, again.stdout
    assert "(0 with a public spelling)" in again.stdout


def test_check_passes_on_a_package_citing_its_own_private_module(tmp_path: Path) -> None:
    write_tree(tmp_path, "Cites a public path: :class:`~mledger.store.Store`.")
    memory = tmp_path / "mledger/store/_memory.py"
    memory.write_text(memory.read_text().replace('"""Memory."""', '"""Memory (:mod:`mledger.store._memory`)."""'))
    checked = codemod(tmp_path, "--check")
    assert checked.returncode == 0, checked.stdout
