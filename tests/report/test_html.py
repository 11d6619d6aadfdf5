"""`basht report --html`: one self-contained file, rendered in headless Chromium with its plots."""

from __future__ import annotations

import base64
import io
import re
import subprocess
from pathlib import Path

import pytest

from tests.test_compare import RealComparison, basht, real_comparison
from tests.tools import need_tool, requires_tool

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("matplotlib")

IMG = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
# The comparison's 3 plots, then each of the 3 runs' 4.
IMAGES = 3 + 3 * 4
# Written into a copy of the report: once loaded, the body lists each image's natural size.
PROBE = (
    "<script>window.addEventListener('load', () => { document.body.setAttribute("
    "'data-images', Array.from(document.images).map(i => i.naturalWidth + 'x' + "
    "i.naturalHeight).join(' ')); });</script></body>"
)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RealComparison:
    return real_comparison(tmp_path_factory)


@pytest.fixture(scope="module")
def page(real: RealComparison) -> Path:
    """The comparison's report, written anew by `basht report compare-<id> --html`."""
    return _report(real, real.comparison.id)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    chromium = need_tool("chromium")  # skips the test where it is not installed
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _report(real: RealComparison, *ref: str) -> Path:
    proc = basht("report", *ref, "--html", cwd=real.cwd)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.split("report:", 1)[1].split()[0])


@pytest.mark.integration
def test_the_comparison_report_is_one_self_contained_file(real, page):
    assert page == Path(real.comparison.folder) / "report.html"
    text = page.read_text()
    images = IMG.findall(text)
    assert len(images) == IMAGES
    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            assert image.format == "PNG" and image.width > 300
    # Nothing is fetched when it opens: no external scripts, styles, fonts or images.
    assert not re.search(r'(src|href)="(?!data:)', text)
    assert "<script" not in text
    for system in ("native", "optuna", "raytune"):
        assert f"<th>{system}</th>" in text
    for run_id in (r.run_id for r in real.comparison.runs):
        assert run_id in text
    assert "JCT (ms)" in text and "best validation accuracy (max)" in text


@pytest.mark.integration
@requires_tool("chromium")
def test_chromium_renders_every_plot(page, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE))
    proc = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    sizes = re.search(r'data-images="([^"]*)"', proc.stdout)
    assert sizes, proc.stdout[:500]
    shown = [tuple(int(n) for n in s.split("x")) for s in sizes.group(1).split()]
    assert len(shown) == IMAGES
    assert all(w > 300 and h > 150 for w, h in shown)


@pytest.mark.integration
@requires_tool("chromium")
def test_chromium_screenshot_shows_the_plots(page, tmp_path):
    shot = tmp_path / "shot.png"
    # At twice the pixel density, as on a laptop screen: a short, thin line (a run that reached
    # the target in a few reports) is then drawn in its own colour, not only blended with white.
    proc = _chromium(
        tmp_path,
        f"--screenshot={shot}",
        "--window-size=1200,2600",
        "--force-device-scale-factor=2",
        page.as_uri(),
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    with Image.open(shot) as image:
        pixels = image.convert("RGB")
        colours = {c for _, c in pixels.getcolors(maxcolors=1 << 22)}

    def near(rgb: tuple[int, int, int]) -> bool:
        return any(sum(abs(a - b) for a, b in zip(c, rgb, strict=True)) < 30 for c in colours)

    # The systems' line colours only occur in the plots: native blue, Optuna purple, Ray brown.
    assert near((31, 119, 180)) and near((148, 103, 189)) and near((140, 86, 75))


@pytest.mark.integration
def test_a_single_run_report(real):
    run_id = real.comparison.runs[0].run_id
    page = _report(real, run_id, "--store", real.store.url)
    assert page.name == "report.html" and run_id in page.read_text()
    assert len(IMG.findall(page.read_text())) == 4


def test_the_ray_nodes_a_run_is_billed_for_are_in_its_report():
    from basht.report.html import _cluster_sections

    nodes = [
        {"node": "head", "attempt": 1, "cpus": 2.0, "gpus": 0.0, "lifetime_s": 12.5,
         "billed_usd": 0.0042},
    ]  # fmt: skip
    (title, table) = _cluster_sections({"ray_nodes": nodes})
    assert title == "<h2>Ray nodes billed (OC)</h2>"
    assert "<td>head</td>" in table and '<td class="num">12.5</td>' in table
    assert _cluster_sections({}) == []
