"""Docs that run: every code block marked runnable in docs/**/*.md is executed, and must exit 0.

A block is marked by an HTML comment on the line before its fence (the comment renders as nothing):

    <!-- runnable -->
    ```bash
    basht run examples/sleep-smoke.yaml
    ```

`bash` (or `sh`, `console`) blocks run through `bash` with `set -euo pipefail`; `python` blocks run
as scripts. The blocks of one page run in order in one temporary folder, as a reader following the
page would run them (a later block may use what an earlier one wrote), with copies of the repo's
`examples/` and `benchmarks/data/` there, the repo on PYTHONPATH and BASHT_PLOTS=0; whatever a
block leaves running is ended with it. Two pages run at a time (see `page_runs`). Options after
the word `runnable`: `plots` leaves plots on, `timeout=S` gives the block S seconds (default 180),
and `file=NAME` saves the block, in any language, as NAME in that folder instead of running it
(a file the page tells the reader to write, which later blocks use).

The Grafana dashboard that the Prometheus how-to links to is checked here too: valid JSON in
Grafana's dashboard form, every panel querying only metrics the exporter serves, and (where
`promtool` is installed) every query valid PromQL.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DASHBOARD = ROOT / "deploy" / "grafana" / "basht-dashboard.json"

MARKER = re.compile(r"^(?P<indent>[ \t]*)<!--\s*runnable\b(?P<options>[^>]*?)\s*-->[ \t]*$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)")
SHELLS = {"bash", "sh", "shell", "console"}
PYTHONS = {"python", "py", "python3"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the fence, 1-based
    lang: str
    code: str
    plots: bool = False
    timeout_s: float = 180.0
    file: str | None = None  # save the block as this file instead of running it

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def _options(text: str) -> dict[str, str | bool]:
    options: dict[str, str | bool] = {}
    for word in text.split():
        key, _, value = word.partition("=")
        options[key] = value or True
    return options


def runnable_blocks(page: Path) -> list[Block]:
    """The blocks of `page` marked runnable, in page order. A marker with no fence right after it,
    or a fence in a language this test cannot run, is an error: the page would claim a block runs
    that no test runs."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        where = f"{_shown(page)}:{i + 1}"
        if fence is None:
            raise AssertionError(f"{where}: a runnable marker not followed by a code fence")
        lang = fence["lang"].lower()
        options = _options(marker["options"])
        unknown = set(options) - {"plots", "timeout", "file"}
        if unknown:
            raise AssertionError(f"{where}: unknown runnable options {sorted(unknown)}")
        file = options.get("file")
        if file is True or (isinstance(file, str) and (Path(file).is_absolute() or ".." in file)):
            raise AssertionError(f"{where}: file= needs a relative path inside the folder")
        if file is None and lang not in SHELLS | PYTHONS:
            raise AssertionError(f"{where}: cannot run a {lang or 'plain'} block")
        close = re.compile(rf"^{re.escape(fence['indent'])}{re.escape(fence['fence'])}\s*$")
        end = next((j for j in range(i + 2, len(lines)) if close.match(lines[j])), None)
        if end is None:
            raise AssertionError(f"{where}: the fence is never closed")
        code = textwrap.dedent("\n".join(lines[i + 2 : end])) + "\n"
        blocks.append(
            Block(
                page=page,
                line=i + 2,
                lang="bash" if lang in SHELLS else "python" if lang in PYTHONS else lang,
                code=code,
                plots=bool(options.get("plots")),
                timeout_s=float(options.get("timeout") or 180.0),
                file=file or None,
            )
        )
    return blocks


PAGES = sorted(p for p in DOCS.rglob("*.md") if runnable_blocks(p))


def test_the_docs_have_runnable_blocks():
    """The tutorials are what a newcomer types first: each one runs."""
    tutorials = {p.name for p in PAGES if p.parent.name == "tutorials"}
    assert {"first-run.md", "asha-vs-random.md", "compare-peers.md", "budgets.md"} <= tutorials


def test_markers_are_parsed(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- runnable timeout=5 -->\n```bash\necho hi\n```\n\n"
        "  <!-- runnable plots -->\n  ```python\n  print(1)\n  ```\n"
        "```bash\nnot marked\n```\n"
        "<!-- runnable file=a.yaml -->\n```yaml\na: 1\n```\n"
    )
    blocks = runnable_blocks(page)
    assert [(b.lang, b.code, b.plots, b.timeout_s, b.line, b.file) for b in blocks] == [
        ("bash", "echo hi\n", False, 5.0, 3, None),
        ("python", "print(1)\n", True, 180.0, 8, None),
        ("yaml", "a: 1\n", False, 180.0, 15, "a.yaml"),
    ]
    page.write_text("<!-- runnable -->\n\n```bash\necho hi\n```\n")
    with pytest.raises(AssertionError, match="not followed by a code fence"):
        runnable_blocks(page)
    page.write_text("<!-- runnable -->\n```yaml\na: 1\n```\n")
    with pytest.raises(AssertionError, match="cannot run a yaml block"):
        runnable_blocks(page)
    page.write_text("<!-- runnable file=../a.yaml -->\n```yaml\na: 1\n```\n")
    with pytest.raises(AssertionError, match="file= needs a relative path"):
        runnable_blocks(page)


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "benchmarks" / "data", work / "benchmarks" / "data")
    return work


def _env(block: Block) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["BASHT_PLOTS"] = "1" if block.plots else "0"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("RAY_ADDRESS", None)  # a block that wants a cluster says so itself
    return env


def run_block(block: Block, work: Path, n: int) -> subprocess.CompletedProcess[str] | None:
    if block.file is not None:
        path = work / block.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code)
        return None
    if block.lang == "bash":
        script = work / f".block-{n}.sh"
        script.write_text("set -euo pipefail\n" + block.code)
        command = ["bash", str(script)]
    else:
        script = work / f".block-{n}.py"
        script.write_text(block.code)
        command = [sys.executable, str(script)]
    # A session of its own, so that whatever the block leaves running (a server it started in the
    # background) is ended with it, also when it runs past its time.
    proc = subprocess.Popen(
        command,
        cwd=work,
        env=_env(block),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=block.timeout_s)
    except subprocess.TimeoutExpired:
        _end_group(proc.pid)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(command, block.timeout_s, out, err) from None
    _end_group(proc.pid)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_page(page: Path, tmp: Path) -> str | None:
    """Run a page's blocks in order in a fresh folder under `tmp`: None, or what went wrong."""
    work = _workdir(tmp)
    for n, block in enumerate(runnable_blocks(page)):
        try:
            proc = run_block(block, work, n)
        except subprocess.TimeoutExpired as err:
            out = err.stdout or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            return f"{block.where}: still running after {block.timeout_s:g} s\n{out[-4000:]}"
        if proc is not None and proc.returncode != 0:
            return (
                f"{block.where}: exit code {proc.returncode}\n--- code\n{block.code}"
                f"--- stdout (end)\n{proc.stdout[-4000:]}\n--- stderr (end)\n{proc.stderr[-4000:]}"
            )
    return None


def _trains_digits(page: Path) -> bool:
    return any("digits" in b.code for b in runnable_blocks(page))


@pytest.fixture(scope="module")
def page_runs(request, tmp_path_factory):
    """Every selected page's blocks, run in two lanes at once: the pages that train digits models
    (CPU-bound) in one, the others (servers, Ray, sleeping workloads) in the other, so that two
    training runs never share the two cores. Pages run in order within a lane."""
    pages = [
        item.callspec.params["page"]
        for item in request.session.items
        if item.originalname == "test_a_pages_runnable_blocks_run"
        and item.module.__name__ == __name__
    ]
    lanes = [[p for p in pages if _trains_digits(p)], [p for p in pages if not _trains_digits(p)]]
    results: dict[Path, concurrent.futures.Future[str | None]] = {}

    def lane(queue: list[Path]) -> None:
        for page in queue:
            future = results[page]
            try:
                future.set_result(run_page(page, tmp_path_factory.mktemp(page.stem)))
            except BaseException as err:  # a bug here fails the page, not the lane
                future.set_exception(err)

    for page in pages:
        results[page] = concurrent.futures.Future()
    threads = [threading.Thread(target=lane, args=(q,), daemon=True) for q in lanes if q]
    for thread in threads:
        thread.start()
    yield results
    for thread in threads:
        thread.join()


@pytest.mark.integration
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_a_pages_runnable_blocks_run(page, page_runs):
    problem = page_runs[page].result()
    if problem is not None:
        pytest.fail(problem, pytrace=False)


# The Grafana dashboard (docs/how-to/prometheus.md links to it).

#: What basht/report/exporter.py serves: counters get `_total`, the histogram its series.
EXPORTED = {
    "basht_energy_joules_total",
    "basht_idle_energy_joules_total",
    "basht_emissions_grams_total",
    "basht_cost_usd_total",
    "basht_grid_carbon_intensity_grams_per_kilowatt_hour",
    "basht_trials_total",
    "basht_trial_duration_seconds_bucket",
    "basht_trial_duration_seconds_sum",
    "basht_trial_duration_seconds_count",
}


def _panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # a collapsed row holds its own
    return panels


def _queries(dashboard: dict) -> list[str]:
    return [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]


def _as_promql(expr: str) -> str:
    """A panel's query with Grafana's variables replaced by what they expand to."""
    for name, value in {
        "$__rate_interval": "1m",
        "$__interval": "15s",
        "$__range": "1h",
        "${job}": ".+",
        "$job": ".+",
        "${instance}": ".+",
        "$instance": ".+",
    }.items():
        expr = expr.replace(name, value)
    return expr


def test_the_dashboard_is_grafana_json():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for key in ("title", "uid", "panels", "schemaVersion", "templating", "time"):
        assert key in dashboard, key
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in _panels(dashboard):
        assert {"id", "type", "title", "gridPos"} <= set(panel), panel.get("title")
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"]
            used = set(re.findall(r"\$\{?(\w+)", target["expr"])) - {
                "__rate_interval",
                "__interval",
                "__range",
            }
            assert used <= variables, (panel["title"], used - variables)


def test_the_dashboard_queries_only_exported_metrics():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queried = {m for expr in _queries(dashboard) for m in re.findall(r"\bbasht_\w+", expr)}
    assert queried <= EXPORTED, queried - EXPORTED
    # and every metric the exporter serves is on the dashboard (the histogram by any series)
    assert {re.sub(r"_(bucket|sum|count)$", "", m) for m in queried} == {
        re.sub(r"_(bucket|sum|count)$", "", m) for m in EXPORTED
    }


@pytest.mark.integration  # the exporter serves HTTP (a thread of this process)
def test_the_exporter_serves_what_the_dashboard_expects():
    """The metric names above are the exporter's (read from its registry, not from the text)."""
    from prometheus_client import generate_latest

    from basht.report.exporter import LiveExporter

    class Monitor:
        source_of = {"cpu": "estimate"}

        def all_accounts(self):
            return {("trial", 0, "cpu"): SimpleNamespace(energy_j=1.0, emissions_g=0.1)}

    exporter = LiveExporter(Monitor(), port=0)
    try:
        exporter.trial_ended("completed", 1.0)
        text = generate_latest(exporter.registry).decode()
    finally:
        exporter.stop()
    served = {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    served = {m for m in served if not m.endswith("_created")}
    assert served == EXPORTED


def test_the_dashboard_queries_are_promql(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Prometheus) is not installed")
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": _as_promql(expr)}
                    for i, expr in enumerate(_queries(dashboard))
                ],
            }
        ]
    }
    path = tmp_path / "rules.json"  # YAML is a superset of JSON: promtool reads it
    path.write_text(json.dumps(rules))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
