"""The "did you mean" of every error about an unknown name (a config key, a ``--set`` setting).

One rule for all of them, the standard library's :func:`difflib.get_close_matches` over the
names in lower case, so ``brokerServicePortt`` and ``brokerserviceport`` both find
``brokerServicePort``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["closest_name", "did_you_mean"]


def closest_name(word: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` closest to ``word`` (case aside), or None when none is close.
    O(len(names) * len(word)**2) at worst, as difflib.

    >>> closest_name("brokerServicePortt", ["webServicePort", "brokerServicePort"])
    'brokerServicePort'
    >>> closest_name("justakey", ["brokerServicePort"]) is None
    True
    """
    import difflib  # on the error path only: mledger's face imports this module

    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)
    found = difflib.get_close_matches(word.lower(), by_lower, n=1, cutoff=0.8)
    return by_lower[found[0]] if found else None


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """``" (did you mean 'NAME'?)"`` for the closest of ``names``, or ``""`` when none is close:
    the suffix of a message naming an unknown ``word``.

    >>> "unknown setting 'throtle_mark_delete'" + did_you_mean("throtle_mark_delete", ["throttle_mark_delete"])
    "unknown setting 'throtle_mark_delete' (did you mean 'throttle_mark_delete'?)"
    """
    found = closest_name(word, names)
    return f" (did you mean {found!r}?)" if found else ""
