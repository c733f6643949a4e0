"""Lazy re-exports for a package's ``__init__`` (PEP 562).

A package that must import quickly (``mledger.admin`` and ``mledger.rest``, which
``mledger standalone`` reaches before it answers its readiness check) lists its public names
in a table of ``{name: relative module}`` and lets :func:`lazy_getattr` import each module on
first use. Static checkers still see the names through ``if TYPE_CHECKING:`` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving the names in ``table`` (``{name:
    ".module"}``, relative to ``package``): the first read imports the module and caches the
    value in ``namespace`` (the package's ``globals()``), so later reads cost nothing; any other
    name raises ``AttributeError`` as a module does."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
