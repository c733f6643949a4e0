"""Deprecation warnings for old import paths that remain one release as aliases.

An alias module calls :func:`warn_moved` in its body, so importing it (once per process, as
with any import) emits a :class:`DeprecationWarning` that names the new path and points at the
line that imported the old one.
"""

from __future__ import annotations

import warnings

# helper (1) -> alias module body (2) -> the importer (3); importlib's own frames are skipped
_IMPORTER = 3


def warn_moved(old: str, new: str) -> None:
    """Warn that module ``old`` is an alias of ``new``, to be removed in the next release."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; import from {new} instead",
        DeprecationWarning,
        stacklevel=_IMPORTER,
    )
