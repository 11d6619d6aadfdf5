"""`basht dashboard` during a real `basht run`, both as a user starts them, watched in headless
Chromium: the page follows the run as it goes, its charts are drawn, it asks nothing of any host
but the dashboard, and the store is never written by it.

The run's epochs wait for tickets the test hands out (tests/dashboard/gated.py), so the page is
seen at states the test chose: two trials running, then two trials done and two more running,
then the run's end; never a race against the machine's speed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.store import Store
from tests.cli import basht, cli_env
from tests.conftest import BASE
from tests.dashboard.browser import chromium, has_colour, inked
from tests.dashboard.gated import allow, taken
from tests.dashboard.processes import HANG_S, start_dashboard, wait_for
from tests.tools import need_tool

pytestmark = pytest.mark.integration

TRIALS = 8
EPOCHS = 2  # each trial's: `pruner: none` trains every trial to max_budget
COMPLETED = (44, 160, 44)  # the completed state's green
RUNNING = (23, 190, 207)


@dataclass
class Seen:
    """What the module's one scenario saw, for the tests to look at."""

    cwd: Path
    store_url: str
    run_id: str = ""
    url: str = ""
    counts: list[tuple[str, int]] = field(default_factory=list)  # (status, trials) as shown
    shots: dict[str, bytes] = field(default_factory=dict)  # chart name: its canvas, mid-run
    page_shot: bytes = b""
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # logged by the page's scripts
    metrics_rows: int = 0
    run_code: int | None = None
    dashboard_code: int | None = None
    dashboard_out: str = ""


def _spec(cwd: Path, gate: Path) -> dict[str, Any]:
    spec: dict[str, Any] = copy.deepcopy(BASE)
    spec["name"] = "live"
    spec["workload"] = {
        "name": "tests.dashboard.gated:Gated",
        "params": {"gate": str(gate), "epoch_s": 0.02},
    }
    spec["search"].update(
        pruner="none", max_budget=EPOCHS, max_trials=TRIALS, energy_budget_kwh=1.0
    )
    spec["measure"] = {"sample_interval_s": 0.2}
    spec["store"] = f"sqlite:///{cwd / 'basht.db'}"
    return spec


#: Epochs let go mid-run: odd, so that once both workers wait, exactly two trials are done
#: (2 x 2 epochs, and the trials waiting have done one epoch between them).
MIDWAY = 2 * EPOCHS + 1
TWO_DONE = "document.querySelector('[data-card=trials]').textContent.includes('2 completed')"
ENDED = "document.body.dataset.status === 'completed' && !!document.querySelector('#metrics')"


def _shows(page: Any, what: str, condition: str) -> None:
    """Wait until the page shows it (polled from here: the page's CSP forbids the evaluated
    predicates of Playwright's own waiting)."""
    wait_for(f"the page shows {what}", lambda: page.evaluate(condition))


def _trials_shown(page: Any) -> tuple[str, int]:
    status = page.evaluate("document.body.dataset.status || ''")
    count = page.evaluate("(document.querySelector('#trial-count') || {}).textContent || '-1'")
    return status, int(count)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Seen:
    """A real run watched from start to end in the dashboard (one scenario for the module)."""
    executable = need_tool("chromium")
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("PIL.Image")
    cwd = tmp_path_factory.mktemp("live")
    gate = cwd / "gate"
    gate.mkdir()
    allow(gate, 0)
    spec = _spec(cwd, gate)
    (cwd / "live.yaml").write_text(yaml.safe_dump(spec))
    seen = Seen(cwd, spec["store"])
    run = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", "run", "-q", "--no-plots", "live.yaml"],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    dashboard = None
    try:
        wait_for("two trials wait for their first epoch", lambda: taken(gate) >= 2)
        dashboard, seen.url = start_dashboard(cwd, spec["store"])
        runs = json.load(urllib.request.urlopen(seen.url + "api/runs"))
        seen.run_id = runs[0]["id"]
        with chromium(executable, height=1400) as (page, recorded):
            seen.requests, seen.errors = recorded.requests, recorded.errors
            page.goto(seen.url + "runs/" + seen.run_id)
            page.wait_for_selector("#trial-count", timeout=HANG_S * 1000)
            seen.counts.append(_trials_shown(page))
            allow(gate, MIDWAY)
            wait_for("both workers wait again", lambda: taken(gate) >= MIDWAY + 2)
            _shows(page, "two completed trials", TWO_DONE)
            seen.counts.append(_trials_shown(page))
            for canvas in page.query_selector_all("figure[data-chart]"):
                name = canvas.get_attribute("data-chart")
                seen.shots[name] = canvas.query_selector("canvas").screenshot()
            seen.page_shot = page.screenshot(full_page=True)
            allow(gate, 10_000)
            _shows(page, "the run's end and its metrics", ENDED)
            seen.counts.append(_trials_shown(page))
            seen.metrics_rows = len(page.query_selector_all("#metrics tbody tr"))
        seen.run_code = run.wait(timeout=HANG_S)
    finally:
        allow(gate, 10_000)
        if run.poll() is None:
            run.kill()
            run.wait()
        if dashboard is not None:
            dashboard.send_signal(signal.SIGINT)
            try:
                seen.dashboard_code = dashboard.wait(timeout=30)
            except subprocess.TimeoutExpired:
                dashboard.kill()
                dashboard.wait()
            seen.dashboard_out = (cwd / "dashboard.log").read_text()
    return seen


def test_the_page_counts_the_trials_as_the_run_goes(seen):
    first, middle, last = seen.counts
    assert first[0] == "running" and first[1] >= 2
    assert middle[0] == "running" and middle[1] > first[1]
    assert last == ("completed", TRIALS)
    assert seen.run_code == 0
    store = Store(seen.store_url, read_only=True)
    assert len(store.trials(seen.run_id)) == TRIALS
    store.close()


def test_the_charts_are_drawn(seen):
    assert set(seen.shots) == {"states", "best", "timeline", "energy"}  # one objective: no front
    for name, png in seen.shots.items():
        share, colours = inked(png)
        assert share > 0.02 and colours > 8, name
    # Trials in their states' colours: the completed ones, and the two waiting on their workers.
    assert has_colour(seen.shots["timeline"], COMPLETED)
    assert has_colour(seen.shots["timeline"], RUNNING)
    assert has_colour(seen.shots["states"], COMPLETED)
    assert inked(seen.page_shot)[0] > 0.2  # the page's own grey, cards and charts


def test_the_table_2_metrics_show_once_the_run_ends(seen):
    assert seen.metrics_rows >= 8


def test_no_request_leaves_the_dashboard(seen):
    assert seen.requests
    assert all(url.startswith(seen.url) for url in seen.requests), seen.requests
    assert seen.errors == []  # a request the page's policy refused would be logged here


def test_ctrl_c_stops_the_dashboard(seen):
    assert seen.dashboard_code == 0, seen.dashboard_out
    assert seen.dashboard_out.rstrip().endswith("dashboard stopped")
    assert "Traceback" not in seen.dashboard_out


def test_the_json_of_the_real_run_agrees_with_its_store(seen):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from basht.dashboard import create_app

    path = seen.cwd / "basht.db"
    before = hashlib.sha256(path.read_bytes()).digest()
    store = Store(seen.store_url, read_only=True)
    client = TestClient(create_app(store, seen.cwd / "results"), base_url="http://127.0.0.1")
    data = client.get(f"/api/runs/{seen.run_id}").json()
    metrics = {m["name"]: m["value"] for m in data["metrics"]}
    assert {"TWH", "CINT", "JCT", "OC", "WTT", "WTE", "WTC", "WR"} <= set(metrics)
    assert [m["name"] for m in data["metrics"][:8]] == [
        "TWH",
        "CINT",
        "JCT",
        "OC",
        "WTT",
        "WTE",
        "WTC",
        "WR",
    ]
    assert data["counts"] == {"completed": TRIALS}
    assert len(data["reports"]) == TRIALS * EPOCHS
    assert sorted(s["trial"] for s in data["timeline"]["segments"]) == list(range(TRIALS))
    assert data["energy"]["kwh"] == pytest.approx(metrics["energy_total"])
    assert data["energy"]["cost_usd"] == metrics["OC"]
    best = store.get_run(seen.run_id).best_value
    assert data["best"][-1]["value"] == pytest.approx(best)
    store.close()
    assert hashlib.sha256(path.read_bytes()).digest() == before


def test_the_html_report_draws_the_same_charts_offline(seen, tmp_path):
    executable = need_tool("chromium")
    out = tmp_path / "report.html"
    proc = basht(
        "report", seen.run_id, "--store", seen.store_url, "--html", "--out", str(out), cwd=seen.cwd
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert not re.search(r'<(?:script|link|img)[^>]+(?:src|href)="(?!data:)', text)
    with chromium(executable, height=1600) as (page, recorded):
        page.goto(out.as_uri())
        page.wait_for_selector("figure[data-chart=timeline] canvas")
        shots = {
            f.get_attribute("data-chart"): f.query_selector("canvas").screenshot()
            for f in page.query_selector_all("figure[data-chart]")
        }
    assert recorded.requests == [out.as_uri()] and recorded.errors == []
    assert set(shots) == {"states", "best", "timeline", "energy"}
    for name, png in shots.items():
        assert inked(png)[0] > 0.02, name
    assert has_colour(shots["timeline"], COMPLETED)


def test_a_store_that_is_not_there_is_one_line_and_exit_code_2(tmp_path):
    proc = basht(
        "dashboard", "--store", f"sqlite:///{tmp_path / 'none.db'}", "--port", "0", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.count("\n") == 1
        and "there is no" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    assert not (tmp_path / "none.db").exists()
