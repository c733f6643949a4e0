"""Deprecation warnings for old names that remain one release as aliases.

An alias module calls :func:`warn_moved` in its body, so importing it (once per process, as
with any import) emits a :class:`DeprecationWarning` that names the new path and points at the
line that imported the old one. An alias function or method calls it with ``use="call"``:
the warning points at the line that called the alias.
"""

from __future__ import annotations

import warnings

# helper (1) -> alias module body or alias function (2) -> the importer or caller (3);
# importlib's own frames are skipped
_IMPORTER = 3


def warn_moved(old: str, new: str, *, use: str = "import from") -> None:
    """Warn that ``old`` (a module, or with ``use="call"`` a function or method called from
    its alias) is an alias of ``new``, to be removed in the next release."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; {use} {new} instead",
        DeprecationWarning,
        stacklevel=_IMPORTER,
    )
