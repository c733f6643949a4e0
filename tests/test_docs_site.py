"""The documentation site's build (``make docs``, part of ``make test``) fails on a warning.

``mkdocs build --strict`` turns warnings into a failed build only while they are logged: with
``--quiet`` the same broken link builds a site and exits 0. So the Makefile's own recipe is run
here on a copy of the site with one broken link, and must fail naming it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs", reason="the docs extra (make test installs it)")


def docs_recipe() -> str:
    """The shell command of the Makefile's ``docs`` target, with this interpreter's bin/."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^docs:.*\n\t(.+)$", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no docs target"
    return recipe.group(1).replace("$(VENV)/bin/", os.path.dirname(sys.executable) + "/")


@pytest.mark.timeout(600)
def test_a_broken_link_fails_the_docs_build(tmp_path: Path) -> None:
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mkdocs_hooks.py", tmp_path / "scripts")
    (tmp_path / "src").symlink_to(ROOT / "src")
    with (tmp_path / "docs" / "tour.md").open("a") as page:
        page.write("\n[a page that is not there](no-such-page.md)\n")
    done = subprocess.run(docs_recipe(), shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0, f"the strict build passed a broken link:\n{done.stderr}"
    assert "no-such-page.md" in done.stderr
