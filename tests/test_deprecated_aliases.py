"""The old import paths: the documented one (``mledger.spark``) warns and re-exports the same
objects for one release; the undocumented flat modules are gone; and the suite's own warning
filters turn a DeprecationWarning from mledger into an error."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import mledger.replay

ALIASES = [
    ("mledger.spark", "mledger.replay"),
    ("mledger.spark.generate", "mledger.replay.generate"),
    ("mledger.spark.local", "mledger.replay.local"),
    ("mledger.spark.schema", "mledger.replay.schema"),
    ("mledger.spark.settings", "mledger.replay.settings"),
]

REMOVED = [
    "mledger._wire",
    "mledger._proto",
    "mledger.clock",
    "mledger.config",
    "mledger.cursor",
    "mledger.cursor_persistence",
    "mledger.entry",
    "mledger.errors",
    "mledger.ledger",
    "mledger.messageid",
    "mledger.position",
    "mledger.ranges",
    "mledger.revision",
    "mledger.persistence",
]


def _exported(module: ModuleType) -> list[str]:
    """The names ``from module import *`` binds."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return list(names)


def _forget(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Drop ``prefix`` and its submodules from sys.modules (restored after the test), so the
    next import runs the alias module again."""
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(("old", "new"), ALIASES)
def test_alias_warns_naming_the_new_path_and_re_exports_the_same_objects(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    _forget(monkeypatch, "mledger.spark")
    with pytest.warns(DeprecationWarning) as caught:
        __import__(old)
    alias, target = sys.modules[old], importlib.import_module(new)
    mine = [w for w in caught if str(w.message).startswith(f"{old} is deprecated")]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert re.search(rf"import from {re.escape(new)} instead$", str(mine[0].message))
    names = _exported(target)
    assert names
    for name in names:
        assert getattr(alias, name) is getattr(target, name), name


def test_alias_warning_points_at_the_line_that_imports_the_old_path(tmp_path: Path) -> None:
    """In a plain interpreter (pytest's import hooks add frames of their own), each warning
    names the user's import line, not the alias module."""
    script = tmp_path / "user_code.py"
    lines = ["import warnings", "warnings.simplefilter('always')"] + [f"import {old}" for old, _ in ALIASES[1:]]
    script.write_text("\n".join(lines) + "\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    where = {
        m["old"]: (m["file"], int(m["line"]))
        for m in re.finditer(r"^(?P<file>.+):(?P<line>\d+): DeprecationWarning: (?P<old>\S+) is deprecated", run.stderr, re.M)
    }
    expected = {old: (str(script), lines.index(f"import {old}") + 1) for old, _ in ALIASES[1:]}
    expected["mledger.spark"] = expected[ALIASES[1][0]]  # the package runs first, for the first import
    assert where == expected, run.stderr


def test_alias_package_exports_the_six_documented_names() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spark = importlib.import_module("mledger.spark")
    assert sorted(spark.__all__) == sorted(mledger.replay.__all__)
    assert len(spark.__all__) == 6


@pytest.mark.parametrize("old", REMOVED)
def test_undocumented_flat_module_is_gone(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


@pytest.mark.parametrize(
    ("message", "module"),
    [
        ("something internal is deprecated", "mledger.codec.entry"),
        ("something internal is deprecated", "mledger_pytest.plugin"),
        ("mledger.spark is deprecated and will be removed", "tests.test_somewhere"),
    ],
)
def test_the_suite_fails_on_deprecations_from_mledger(message: str, module: str) -> None:
    """pyproject's filterwarnings: mledger's own deprecations and its alias paths are errors."""
    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit(message, DeprecationWarning, "x.py", 1, module=module)


def test_the_suite_leaves_other_deprecations_alone() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn_explicit("old API", DeprecationWarning, "x.py", 1, module="somelib.mod", registry={})
    assert [str(w.message) for w in caught] == ["old API"]
