"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

The package's docstrings carry doctests (``>>>`` lines, run by the test suite) at the docstring's
own indentation. Markdown reads such a run as a block quote, and an output line such as
``['7:2:5']`` as a reference link, which the strict build reports as a broken cross-reference.
This hook adds a Markdown preprocessor that fences each doctest run (the ``>>>`` lines and the
output after them, up to a blank line) as a ``pycon`` code block, for the API reference that
mkdocstrings renders from the docstrings. It also shows the docstrings' Sphinx roles
(``:class:`~.model.Name```) as the code they name (``Name``) rather than as role syntax.
"""

from __future__ import annotations

import re
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

_ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _role_as_code(m: re.Match[str]) -> str:
    target = m.group(2).rstrip("()")
    shown = target.rsplit(".", 1)[-1] if m.group(1) else target.lstrip(".")
    return f"`{shown}`"


class _DoctestFences(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fenced = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            if fenced or not line.startswith(">>>"):
                out.append(line if fenced else _ROLE.sub(_role_as_code, line))
                i += 1
                continue
            out.append("```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append("```")
        return out


class DoctestFences(Extension):
    """Fences the doctest runs of a docstring as ``pycon`` code blocks."""

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        md.preprocessors.register(_DoctestFences(md), "doctest_fences", 40)


def on_config(config: Any) -> Any:
    """Adds :class:`DoctestFences` to the Markdown extensions (mkdocstrings reads the same list)."""
    config.markdown_extensions.append(DoctestFences())
    return config
