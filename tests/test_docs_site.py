"""The documentation site: its build (``make docs``, part of ``make test``) fails on a warning,
and the built site searches when opened from disk, as the README says to open it.

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
import yaml
from browser import browser

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


# -- search from disk ---------------------------------------------------------------------------------

WORD = "zanzibarquux"
SITE_KEYS = ("site_name", "use_directory_urls", "theme", "extra", "markdown_extensions")


@pytest.fixture(scope="module")
def small_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mkdocs.yml's theme, search plugins, extra and extensions over docs/'s assets and two
    small pages (the whole site takes 20 s to build): what search depends on, nothing else."""
    root = tmp_path_factory.mktemp("small-site")
    project = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config = {key: project[key] for key in SITE_KEYS if key in project}
    config["plugins"] = [p for p in project["plugins"] if p in ("search", "offline")]
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("*.md"))
    (root / "docs" / "index.md").write_text("# Home\n\nThe first page.\n")
    (root / "docs" / "other.md").write_text(f"# Other\n\nThe page with the word {WORD}.\n")
    (root / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", "site"], cwd=root,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    return root / "site"


@pytest.mark.timeout(300)
def test_the_site_holds_what_search_needs_from_disk(small_site: Path) -> None:
    """Opened as ``site/index.html`` (file://), a browser fetches no ``search_index.json``: the
    index must come as a script, and every script a page loads must be on disk beside it (no
    polyfill from a CDN: the site is read offline)."""
    index = (small_site / "search" / "search_index.js").read_text()
    assert index.startswith("var __index = ") and WORD in index
    for page in ("index.html", "other.html"):
        html = (small_site / page).read_text()
        scripts = re.findall(r'<script src="([^"]+)"', html)
        assert scripts and all("://" not in src and (small_site / src).is_file() for src in scripts), scripts
        assert "iframe-worker.js" in html  # a worker for file:// pages, from the site itself


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_search_finds_a_page_in_the_site_opened_from_disk(small_site: Path, tmp_path: Path) -> None:
    """Material shows the search field only once its worker answers: from file:// it answered
    nothing, and the field was hidden. ``?q=`` opens the search with that query."""
    page = f"{(small_site / 'index.html').as_uri()}?q={WORD}"
    done = browser("--dump-dom", "--virtual-time-budget=10000", page, profile=tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 matching document" in done.stdout, done.stdout[-3000:]
    links = re.findall(r'<a href="([^"]+)" class="md-search-result__link"', done.stdout)
    assert links and links[0].startswith((small_site / "other.html").as_uri()), links


def test_every_anomaly_a_capture_or_watch_reports_is_in_the_recording_page() -> None:
    """The anomaly table of docs/replay/recording.md names every kind the poller can report
    (``ANOMALY_KINDS``), so an operator who sees one in ``capture.json`` or a watch round can
    look it up."""
    from mledger.replay._poller import ANOMALY_KINDS

    page = (ROOT / "docs" / "replay" / "recording.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", page, re.MULTILINE))
    assert set(ANOMALY_KINDS) - listed == set()
