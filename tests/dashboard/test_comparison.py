"""A real `basht compare` as the dashboard lists and draws it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from basht.store import Store
from tests.cli import basht
from tests.conftest import BASE
from tests.dashboard.browser import chromium, inked
from tests.dashboard.processes import start_dashboard
from tests.tools import need_tool

pytestmark = pytest.mark.integration
fastapi = pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(folder, store URL, comparison id) of two seeds of one file on the native system."""
    cwd = tmp_path_factory.mktemp("compared")
    spec = copy.deepcopy(BASE) | {"name": "cmp", "store": f"sqlite:///{cwd / 'basht.db'}"}
    (cwd / "cmp.yaml").write_text(yaml.safe_dump(spec))
    proc = basht("compare", "cmp.yaml", "--systems", "native", "--repeat", "2", "-q", cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (folder,) = (cwd / "results").glob("compare-*")
    return cwd, spec["store"], folder.name


def _client(cwd: Path, url: str, results: Path) -> tuple[object, Store]:
    from fastapi.testclient import TestClient

    from basht.dashboard import create_app

    store = Store(url, read_only=True)
    return TestClient(create_app(store, results), base_url="http://127.0.0.1"), store


def test_a_comparison_of_this_store_is_listed_with_its_rows_and_curves(compared):
    cwd, url, ident = compared
    client, store = _client(cwd, url, cwd / "results")
    listed = client.get("/api/comparisons").json()
    assert [c["id"] for c in listed] == [ident]
    assert listed[0]["columns"] == ["native"] and listed[0]["seeds"] == [0, 1]
    detail = client.get(f"/api/comparisons/{ident[:20]}").json()  # a unique prefix will do
    rows = {r["label"]: r["cells"] for r in detail["rows"]}
    assert rows["runs"] == ["2/2 completed"] and "JCT (ms)" in rows
    assert [c["column"] for c in detail["curves"]] == ["native", "native"]
    assert all(c["points"] for c in detail["curves"])
    assert client.get("/api/comparisons/compare-none").status_code == 404
    store.close()


def test_a_comparison_of_another_store_is_not_listed(compared, tmp_path):
    cwd, url, ident = compared
    moved = tmp_path / "results" / ident
    moved.mkdir(parents=True)
    data = json.loads((cwd / "results" / ident / "comparison.json").read_text())
    data["store"] = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    (moved / "comparison.json").write_text(json.dumps(data))
    client, store = _client(cwd, url, tmp_path / "results")
    assert client.get("/api/comparisons").json() == []
    assert "another store" in client.get(f"/api/comparisons/{ident}").json()["detail"]
    store.close()


def test_the_comparison_page_draws_each_runs_best_so_far(compared):
    executable = need_tool("chromium")
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("PIL.Image")
    import uvicorn  # noqa: F401  (the dashboard's server, as `basht dashboard` runs it)

    cwd, url, ident = compared
    proc, base = start_dashboard(cwd, url)
    try:
        with chromium(executable) as (page, recorded):
            page.goto(f"{base}comparisons/{ident}")
            page.wait_for_selector("#compare")
            png = page.query_selector(".chart canvas").screenshot()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert inked(png)[0] > 0.01
    assert recorded.errors == [] and all(r.startswith(base) for r in recorded.requests)
