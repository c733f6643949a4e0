"""The one deprecation mechanism (``mledger.core._deprecation``): old module paths
(``mledger.spark``, ``mledger.broker.batch``), moved names and renamed attributes warn once,
naming the release they go away in and the new spelling, and keep working for that release; the
undocumented flat modules are gone; and the suite's own warning filters turn a
DeprecationWarning from mledger into an error."""

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
from mledger._moved import MOVED_MODULES
from mledger.broker import DispatcherStats, SubscriptionType
from mledger.core import _deprecation as deprecation

RELEASE = deprecation.removal_release()

ALIASES = [
    ("mledger.spark", "mledger.replay"),
    ("mledger.spark.generate", "mledger.replay._generate"),
    ("mledger.spark.local", "mledger.replay._local"),
    ("mledger.spark.schema", "mledger.replay._schema"),
    ("mledger.spark.settings", "mledger.replay._settings"),
    ("mledger.broker.batch", "mledger.codec._batch"),
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
    next import loads the old path again."""
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget which old spellings this process already warned about (restored after)."""
    monkeypatch.setattr(deprecation, "_WARNED", set())


def _mine(caught: list[warnings.WarningMessage], old: str) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith(f"{old} is deprecated")]


@pytest.mark.usefixtures("fresh_warnings")
@pytest.mark.parametrize(("old", "new"), ALIASES)
def test_old_module_path_warns_naming_release_and_new_path_and_is_the_same_module(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    _forget(monkeypatch, "mledger.spark")
    _forget(monkeypatch, "mledger.broker.batch")
    with pytest.warns(DeprecationWarning) as caught:
        __import__(old)
    alias, target = sys.modules[old], importlib.import_module(new)
    mine = _mine(caught.list, old)
    package, _, leaf = new.rpartition(".")
    advice = package if leaf.startswith("_") else new
    assert mine == [f"{old} is deprecated and will be removed in mledger {RELEASE}; import from {advice} instead"]
    assert alias is target
    assert _exported(target)


@pytest.mark.usefixtures("fresh_warnings")
def test_old_module_path_warns_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "mledger.spark")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import mledger.spark.local  # noqa: F401

        _forget(monkeypatch, "mledger.spark")
        import mledger.spark.local  # noqa: F401,F811
    assert len(_mine(caught, "mledger.spark.local")) == 1
    assert len(_mine(caught, "mledger.spark")) == 1


def test_removal_release_is_the_next_minor_release() -> None:
    major, minor = mledger.__version__.split(".")[:2]
    assert RELEASE == f"{major}.{int(minor) + 1}"


def test_submodule_of_an_old_package_path_the_table_does_not_name_is_gone() -> None:
    """mledger.spark is mledger.replay now, but mledger.spark.model was never kept: it must not
    load replay/model.py a second time under the old name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ModuleNotFoundError, match="mledger.spark.model"):
            importlib.import_module("mledger.spark.model")
    assert "mledger.spark.model" not in sys.modules


@pytest.mark.usefixtures("fresh_warnings")
def test_moved_name_warns_once_naming_release_and_new_spelling_and_returns_the_object() -> None:
    getattr_ = deprecation.moved_names("mledger.somewhere", {"OldPosition": "mledger.core:Position"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = getattr_("OldPosition"), getattr_("OldPosition")
    assert first is second is mledger.Position
    assert [str(w.message) for w in caught] == [
        f"mledger.somewhere.OldPosition is deprecated and will be removed in mledger {RELEASE};"
        " use mledger.core.Position instead"
    ]
    with pytest.raises(AttributeError, match="'mledger.somewhere' has no attribute 'Other'"):
        getattr_("Other")


def _stats() -> DispatcherStats:
    return DispatcherStats(SubscriptionType.SHARED, 1, None, 7, 0, None, 0, 0, 0, 0, 0, 0, False)


@pytest.mark.usefixtures("fresh_warnings")
def test_renamed_dispatcher_stats_attribute_warns_once_and_still_answers() -> None:
    stats = _stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert stats.replay_queue_size == stats.redelivery_queue_size == 7
        assert stats.replay_queue_size == 7
    owner = "mledger.broker.DispatcherStats"  # the public spelling, not the private module
    assert [(str(w.message), w.filename) for w in caught] == [
        (
            f"{owner}.replay_queue_size is deprecated and will be removed in mledger {RELEASE};"
            f" use {owner}.redelivery_queue_size instead",
            __file__,
        )
    ]


def test_renamed_attribute_warning_fails_the_suite() -> None:
    """The suite's filters catch the tree reading the old attribute (pyproject's message rule)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(deprecation, "_WARNED", set())
        with pytest.raises(DeprecationWarning):
            _ = _stats().replay_queue_size


def test_old_path_warning_points_at_the_line_that_imports_it(tmp_path: Path) -> None:
    """In a plain interpreter (pytest's import hooks add frames of their own), each warning
    names the user's import line, not the alias module."""
    script = tmp_path / "user_code.py"
    lines = ["import warnings", "warnings.simplefilter('always')"] + [f"import {old}" for old, _ in ALIASES[1:]]
    script.write_text("\n".join(lines) + "\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    where = {
        m["old"]: (m["file"], int(m["line"]))
        for m in re.finditer(
            r"^(?P<file>.+):(?P<line>\d+): DeprecationWarning: (?P<old>\S+) is deprecated", run.stderr, re.M
        )
    }
    expected = {old: (str(script), lines.index(f"import {old}") + 1) for old, _ in ALIASES[1:]}
    expected["mledger.spark"] = expected[ALIASES[1][0]]  # the package runs first, for the first import
    assert where == expected, run.stderr


def test_old_package_exports_the_six_documented_names() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spark = importlib.import_module("mledger.spark")
    assert sorted(spark.__all__) == sorted(mledger.replay.__all__)
    documented = {"EventOrderError", "InputSchemaError", "PartitionModel", "PartitionReplayer", "ReplaySettings"}
    assert documented | {"SubscriptionSpec"} <= set(spark.__all__)


@pytest.mark.parametrize("old", REMOVED)
def test_undocumented_flat_module_is_gone(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


@pytest.mark.parametrize(
    ("message", "module"),
    [
        ("something internal is deprecated", "mledger.codec._entry"),
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


@pytest.mark.usefixtures("fresh_warnings")
def test_a_package_registers_its_renamed_private_modules_and_the_warning_advises_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shape the x.py -> _x.py rename uses: the package's __init__ registers old -> new; the
    old path is the private module itself, and the advice names the public package."""
    package = tmp_path / "renamedpkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from mledger.core import deprecation\n"
        "from ._things import Thing as Thing\n"
        "deprecation.moved_modules(__name__, {'things': 'renamedpkg._things'})\n"
    )
    (package / "_things.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(deprecation, "_MOVED_MODULES", dict(deprecation._MOVED_MODULES))
    with pytest.warns(DeprecationWarning) as caught:
        from renamedpkg import things  # type: ignore[import-not-found]
    private = importlib.import_module("renamedpkg._things")
    assert things is private and things.Thing is sys.modules["renamedpkg"].Thing
    assert _mine(caught.list, "renamedpkg.things") == [
        f"renamedpkg.things is deprecated and will be removed in mledger {RELEASE}; import from renamedpkg instead"
    ]
    for name in ("renamedpkg", "renamedpkg._things", "renamedpkg.things"):
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.usefixtures("fresh_warnings")
@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_every_module_made_private_still_imports_under_its_old_path_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, old: str
) -> None:
    """The x.py -> _x.py rename of every internal module: the old path is the same module for
    one release and says which public package to import from."""
    full, new = f"mledger.{old}", MOVED_MODULES[old]
    _forget(monkeypatch, full)
    with pytest.warns(DeprecationWarning) as caught:
        alias = importlib.import_module(full)
    assert alias is importlib.import_module(new)
    assert len(_mine(caught.list, full)) == 1


@pytest.mark.usefixtures("fresh_warnings")
@pytest.mark.parametrize("old", ["mledger.replay.generate", "mledger.spark.generate"])
def test_an_old_module_path_named_like_a_public_function_leaves_the_function(
    monkeypatch: pytest.MonkeyPatch, old: str
) -> None:
    """``generate`` in ``mledger.replay`` was a module and is now the function the package exports:
    importing the old module path must not replace the function on the package."""
    import mledger.replay

    function = mledger.replay.generate
    assert callable(function)
    _forget(monkeypatch, "mledger.spark")
    _forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning):
        importlib.import_module(old)
    assert mledger.replay.generate is function


def _changelog_section(release: str) -> str:
    text = (Path(__file__).resolve().parent.parent / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = f"### Deprecated: removed in {release}\n"
    assert heading in text, f"CHANGELOG.md has no {heading.strip()!r} section"
    return text.split(heading, 1)[1].split("\n### ", 1)[0]


def test_the_changelog_names_every_old_module_path_its_removal_release_and_where_to_import_from() -> None:
    """CHANGELOG.md's deprecation table is MOVED_MODULES, row for row: the release the warning
    names, the package the warning advises."""
    listed: dict[str, str] = {}
    for package, leaves, instead in re.findall(
        r"^\| `([\w.]+)`: (.*?) \| `([\w.]+)` \|$", _changelog_section(RELEASE), re.M
    ):
        for leaf in re.findall(r"`(\w+)`", leaves):
            listed[f"{package}.{leaf}"] = instead
    expected = {f"mledger.{old}": deprecation._public(new) for old, new in MOVED_MODULES.items()}
    assert listed == expected


def test_the_changelog_names_every_renamed_method_and_attribute() -> None:
    section = _changelog_section(RELEASE)
    for old in ("add_framed_entries", "add_framed_entries_async", "async_add_framed_entries", "add_repeated_entries"):
        assert f"`ManagedLedger.{old}(" in section
    assert "`DispatcherStats.replay_queue_size`" in section
