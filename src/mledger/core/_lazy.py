"""Lazy re-exports for a package's ``__init__`` (PEP 562).

A face that must import quickly (``mledger.admin`` and ``mledger.rest``, which
``mledger standalone`` reaches before it answers its readiness check; ``mledger.standalone`` and
``mledger.protocol``, which the pytest fixture imports before its broker starts) lists its public
names in a table of ``{relative module: (name, ...)}`` and lets :func:`lazy_getattr` import each
module on first use. Static checkers still see the names through ``if TYPE_CHECKING:`` imports. Code
inside the face that uses such a name imports it where it uses it (a module ``__getattr__``
serves attribute reads from outside, never the module's own global names).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_getattr(
    package: str, table: Mapping[str, tuple[str, ...]], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module ``package`` (its ``__name__``) serving the names
    in ``table`` (``{".module": ("Name", ...)}``, each module once with the names it serves,
    relative as the module's own imports are: to its ``__package__``, the package itself for an
    ``__init__``): the first read imports the module and caches the value in ``namespace`` (the
    module's ``globals()``), so later reads cost nothing; any other name raises
    ``AttributeError`` as a module does."""
    anchor = namespace.get("__package__") or package
    module_of: dict[str, str] = {}
    for module, names in table.items():
        if isinstance(names, str):  # ("Name") without its comma: a string, not a tuple of names
            raise TypeError(f"{package}: the names served from {module!r} must be a tuple, got the string {names!r}")
        for name in names:
            if module_of.setdefault(name, module) != module:
                raise ValueError(f"{package}: {name!r} is served lazily from both {module_of[name]!r} and {module!r}")

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, anchor), name)
        namespace[name] = value
        return value

    return __getattr__
