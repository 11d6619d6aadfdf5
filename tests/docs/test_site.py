"""The documentation site builds with `mkdocs build --strict` (no broken link, no page left out of the
nav, no docstring mkdocstrings cannot read) and shows real pages in a browser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools import ROOT, need_tool

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("mkdocs")

pytestmark = pytest.mark.integration


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` into `site`, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def screenshot(page: Path, shot: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """Headless Chromium's picture of `page` (skips the test where Chromium is not installed)."""
    chromium = need_tool("chromium")
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1280,1600",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def colours(shot: Path) -> tuple[int, float]:
    """How many distinct colours a screenshot has, and the share of its commonest one."""
    with Image.open(shot) as image:
        counts = image.convert("RGB").getcolors(maxcolors=1 << 24)
    total = sum(n for n, _ in counts)
    return len(counts), max(n for n, _ in counts) / total


def header_bar(shot: Path) -> tuple[tuple[int, int, int], float]:
    """The commonest colour of the screenshot's top strip and its share there: with the theme's
    stylesheet loaded that strip is the header bar, one colour; without it, a white page."""
    with Image.open(shot) as image:
        strip = image.convert("RGB").crop((0, 8, image.width, 40))
        counts = strip.getcolors(maxcolors=1 << 24)
    count, colour = max(counts)
    return colour, count / sum(n for n, _ in counts)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("docs") / "site"
    proc = build_site(ROOT / "mkdocs.yml", site)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return site


def test_the_site_builds_strictly_with_every_page(site):
    for page in (
        "index.html",
        "reference/experiment-file/index.html",
        "reference/cli/index.html",
        "reference/python-api/index.html",
        "reference/prometheus/index.html",
        "reference/bso-http-api/index.html",
        "benchmarks/index.html",
    ):
        assert (site / page).is_file(), page
    for results in (ROOT / "benchmarks/results").glob("*.json"):
        assert (site / "benchmarks" / results.stem / "index.html").is_file(), results.stem
        assert (site / "benchmarks" / results.name).read_text() == results.read_text()
    # The generator is not published as a page or a file.
    assert not (site / "gen_pages.py").exists() and not (site / "_gen").exists()


@pytest.mark.parametrize(
    ("page", "holds"),
    [
        ("index.html", "reference/experiment-file/"),  # the home page links the reference
        ("reference/experiment-file/index.html", "stop_grace_s"),  # and that page has its keys
    ],
)
def test_a_page_shows_in_chromium_with_its_navigation(site, page, holds, tmp_path):
    html = (site / page).read_text()
    assert 'class="md-nav' in html and "md-sidebar" in html  # Material's navigation
    assert holds in html
    shot = tmp_path / "shot.png"
    proc = screenshot(site / page, shot, tmp_path / "chromium-profile")
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    distinct, commonest = colours(shot)
    # A blank page has a handful of colours and is nearly all one; a rendered one has the header
    # bar, text, code and tables in many shades.
    assert distinct > 100, distinct
    assert commonest < 0.95, commonest
    # Styled, not the bare HTML: the header bar is there, in a colour that is not white.
    colour, share = header_bar(shot)
    assert share > 0.5 and sum(colour) < 3 * 230, (colour, share)
