"""The one deprecation mechanism of mledger: every name or module path that moves warns here.

Theory of operation
-------------------
A spelling that moves keeps working for one release and warns, once per process, with a
:class:`DeprecationWarning` that starts ``"<old spelling> is deprecated"``, names the release it
goes away in (the next minor release after the installed version) and the spelling to use
instead; the warning points at the user's line (the import, or the attribute access), never at
mledger or importlib. Three shapes, each driven by a table:

* **Moved module-level names** -- the module keeps a table ``{old name: "new.module:Name"}``
  and builds its module ``__getattr__`` from it (PEP 562; trio's ``deprecate_attributes``)::

      __getattr__ = moved_names(__name__, {"OldName": "mledger.codec:NewName"})

  The new module is imported on first access only, so a moved name costs nothing until used.
* **Moved module paths** -- a package registers, from its ``__init__``, which of its old
  submodule paths now live elsewhere::

      moved_modules(__name__, {"batch": "pkg.codec._batch"})

  One process-wide table (old module -> new module) is served by a ``sys.meta_path`` finder:
  ``import pkg.broker.batch`` loads ``pkg.codec._batch``, binds the *same module object*
  under the old name (``sys.modules``, and the parent's attribute) and warns. No alias module
  file exists. A submodule of an old *package* path that the table does not name is gone
  (``ModuleNotFoundError``), rather than loaded a second time from the new package's directory.
  When the new module is private (``_name``), the warning advises its public package.
* **Renamed attributes of a class** -- ``old = renamed_attribute("new")`` in the class body: a
  read-only descriptor that warns and returns ``getattr(instance, "new")``.

"Once" is per old spelling and per process (:data:`_WARNED`), whatever the warning filters
say; tests that check the warning clear that set first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from functools import cache
from types import FrameType, ModuleType
from typing import Any

__all__ = ["moved_modules", "moved_names", "removal_release", "renamed_attribute"]

_PACKAGE = "mledger"

_WARNED: set[str] = set()
"""Old spellings warned about in this process."""
_WARNED_LOCK = threading.Lock()

_MOVED_MODULES: dict[str, str] = {}
"""Old module path -> the module it is now (absolute names)."""


@cache
def removal_release() -> str:
    """The release a deprecated spelling goes away in: the next minor release after the installed
    one (``0.1.0`` -> ``0.2``), read from the package metadata, else ``mledger.__version__``."""
    try:
        version = importlib.metadata.version(_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = str(importlib.import_module(_PACKAGE).__version__)
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        return "the next minor release"
    return f"{match[1]}.{int(match[2]) + 1}"


def _is_importlib_frame(frame: FrameType) -> bool:
    # The rule warnings.warn applies when it counts stack levels: importlib's frozen bootstrap
    # frames are skipped, so a level counts only frames of real code.
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def _user_stacklevel(skip: int = 0) -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called by this module's :func:`_warn`,
    point at the first frame outside this module (the importer, or the attribute's reader),
    ``skip`` frames further out (the caller of a deprecated function)."""
    here = _user_stacklevel.__code__.co_filename
    current = inspect.currentframe()
    frame = current.f_back if current is not None else None  # _warn's frame: level 1
    level = 1
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
        while frame is not None and _is_importlib_frame(frame):
            frame = frame.f_back
        level += 1
    return level + skip


def _warn(old: str, instead: str, skip: int = 0) -> None:
    """Warn, once per process, that ``old`` is deprecated; ``instead`` says what to do."""
    with _WARNED_LOCK:
        if old in _WARNED:
            return
        _WARNED.add(old)
    warnings.warn(
        f"{old} is deprecated and will be removed in {_PACKAGE} {removal_release()}; {instead}",
        DeprecationWarning,
        stacklevel=_user_stacklevel(skip),
    )


# -- renamed functions and methods --------------------------------------------------------------
def renamed_call(old: str, new: str) -> None:
    """Called first thing in a deprecated function or method kept as an alias: warns once that
    ``old`` is deprecated, naming ``new`` (the spelling to call instead) and the release it goes
    away in, pointing at the line that called the alias."""
    _warn(old, f"use {new} instead", skip=1)


def _public(module: str) -> str:
    """The public spelling of ``module``: its path up to the first private (``_name``) part."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:i]) or module
    return module


# -- moved module-level names -------------------------------------------------------------------
def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving the names in ``moved`` (``{old: "pkg.mod:New"}``; the
    ``:New`` part may be left out when the name is unchanged). Reading an old name imports its
    new module, warns once (naming ``pkg.mod.New``) and returns the object; any other missing
    name raises ``AttributeError`` as usual. Assign it as ``__getattr__`` in ``module``."""
    table = dict(moved)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, _, attr = target.partition(":")
        value = getattr(importlib.import_module(where), attr or name)
        _warn(f"{module}.{name}", f"use {where}.{attr or name} instead")
        return value

    return __getattr__


# -- renamed attributes -------------------------------------------------------------------------
class renamed_attribute:  # noqa: N801 -- used like property
    """A read-only alias of attribute ``new`` in a class body: ``old = renamed_attribute("new")``.

    Reading ``instance.old`` warns once (naming ``<public module>.<Class>.new``) and returns
    ``instance.new``. Works on frozen dataclasses (it is not a field).
    """

    def __init__(self, new: str) -> None:
        self._new = new
        self._old = ""
        self._owner = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._old = name
        self._owner = f"{_public(owner.__module__)}.{owner.__qualname__}"

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = getattr(instance, self._new)
        _warn(f"{self._owner}.{self._old}", f"use {self._owner}.{self._new} instead")
        return value


# -- moved module paths -------------------------------------------------------------------------
def moved_modules(package: str, moved: Mapping[str, str]) -> None:
    """Register old submodule paths of ``package`` (keys, relative: ``"batch"``,
    ``"spark.generate"``) and the modules they now are (absolute). Call it from the package's
    ``__init__``; importing an old path then loads the new module under both names and warns
    once. Installs the finder on first use."""
    for old, new in moved.items():
        _MOVED_MODULES[f"{package}.{old}"] = new
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old module path as the module it moved to."""

    def __init__(self, new: str) -> None:
        self._new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder: exec_module swaps the real module in

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        target = importlib.import_module(self._new)
        # importlib returns whatever sys.modules holds under the old name once this returns.
        sys.modules[old] = target
        _warn(old, f"import from {_public(self._new)} instead")


class _KeepsItsExports(ModuleType):
    """The class of a package an old module path was imported from: importlib sets every
    imported submodule as an attribute of its parent, and an old path named like one of the
    package's public names (``generate`` in ``mledger.replay``: once a module, now the function the
    package exports) must not replace that name."""

    def __setattr__(self, name: str, value: object) -> None:
        # a module loaded under an old path is bound by importlib under that path's last part;
        # a real submodule has that name as its own
        if isinstance(value, ModuleType) and value.__name__ != f"{self.__name__}.{name}":
            if name in getattr(self, "__all__", ()):
                return
        super().__setattr__(name, value)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths registered by :func:`moved_modules` (first on ``sys.meta_path``:
    a dict lookup per import)."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = _MOVED_MODULES.get(fullname)
        if new is not None:
            package = sys.modules.get(fullname.rpartition(".")[0])
            if package is not None and type(package) is ModuleType:
                package.__class__ = _KeepsItsExports
            return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new))
        parent = fullname.rpartition(".")[0]
        if parent in _MOVED_MODULES:
            # The old package is the new one now; without this the path finder would load the
            # new package's submodule a second time under the old name.
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None
