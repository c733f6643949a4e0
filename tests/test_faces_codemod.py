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


def test_a_name_imported_through_a_private_module_joins_the_faces_lazy_table(tmp_path: Path) -> None:
    """A face with a lazy table (``{".module": ("Name", ...)}``, each module once): a name
    another package imports through the private module joins its module's entry (and the
    ``TYPE_CHECKING`` imports), the import goes through the face, and the rewritten tree imports
    and serves it; a second run changes nothing."""
    files = {
        "mledger/__init__.py": '"""The face."""\n\n__all__: list[str] = []\n',
        "mledger/core/__init__.py": '"""Core."""\n\nfrom ._lazy import lazy_getattr as lazy_getattr\n',
        "mledger/core/_lazy.py": (Path(__file__).resolve().parents[1] / "src/mledger/core/_lazy.py").read_text(),
        "mledger/store/__init__.py": (
            '"""Stores."""\n\nfrom typing import TYPE_CHECKING\n\nfrom ..core import lazy_getattr\n\n'
            "if TYPE_CHECKING:\n    from ._memory import Store as Store\n\n"
            '_LAZY = {\n    "._memory": ("Store",),\n}\n\n'
            "__getattr__ = lazy_getattr(__name__, _LAZY, globals())\n\n"
            '__all__ = ["Store"]\n'
        ),
        "mledger/store/_memory.py": '"""Memory."""\n\n\nclass Store:\n    """A store."""\n\n\nclass Other:\n    """Another."""\n',
        "mledger/broker/__init__.py": '"""Broker."""\n\nfrom ..store._memory import Other as Other\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert codemod(tmp_path, "--check").returncode == 1

    rewritten = codemod(tmp_path)
    assert rewritten.returncode == 0, rewritten.stdout + rewritten.stderr
    face = (tmp_path / "mledger/store/__init__.py").read_text()
    assert '"._memory": ("Store", "Other"),' in face
    assert "from ._memory import Other as Other" in face  # under TYPE_CHECKING
    assert "from ..store import Other" in (tmp_path / "mledger/broker/__init__.py").read_text()
    assert codemod(tmp_path, "--check").returncode == 0
    served = subprocess.run(
        [sys.executable, "-c", "import mledger.broker, mledger.store; print(mledger.broker.Other.__module__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert served.stdout.strip() == "mledger.store._memory", served.stderr


def test_a_lazy_table_whose_entries_would_merge_is_refused_not_rewritten(tmp_path: Path) -> None:
    """Two lazy-table entries that both point through another package's face once rewritten
    (``"..store"`` and ``"..store._memory"``) would be one key twice, and the dictionary keeps
    only the last: the codemod refuses, names them, and leaves the face as it was."""
    (tmp_path / "mledger/store").mkdir(parents=True)
    (tmp_path / "mledger/__init__.py").write_text('"""The face."""\n\n__all__: list[str] = []\n')
    (tmp_path / "mledger/store/__init__.py").write_text(
        '"""Stores."""\n\nfrom ._memory import Other as Other, Store as Store\n\n__all__ = ["Other", "Store"]\n'
    )
    (tmp_path / "mledger/store/_memory.py").write_text(
        '"""Memory."""\n\n\nclass Store:\n    """A store."""\n\n\nclass Other:\n    """Another."""\n'
    )
    face = tmp_path / "mledger/broker/__init__.py"
    face.parent.mkdir(parents=True)
    text = (
        '"""Broker."""\n\nfrom typing import TYPE_CHECKING\n\n'
        "if TYPE_CHECKING:\n    from ..store import Store as Store\n    from ..store._memory import Other as Other\n\n"
        '_LAZY = {\n    "..store": ("Store",),\n    "..store._memory": ("Other",),\n}\n'
    )
    face.write_text(text)
    refused = codemod(tmp_path)
    assert refused.returncode != 0
    assert "['..store', '..store._memory'] would all read '..store'; merge them by hand" in refused.stderr
    assert face.read_text() == text
