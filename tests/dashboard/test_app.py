"""The dashboard's app over a store opened read-only: its JSON, its page, what it refuses, and that
the store is left exactly as it was."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from basht.dashboard import create_app, open_dashboard  # noqa: E402
from basht.dashboard.server import bind  # noqa: E402
from basht.errors import BashtError  # noqa: E402
from basht.store import Store  # noqa: E402
from tests.dashboard.support import experiment_spec, finish, live_run  # noqa: E402

BASE_URL = "http://127.0.0.1:8765"


@pytest.fixture
def stored(tmp_path, monkeypatch) -> tuple[Path, str, str]:
    """(store file, URL, run id) of a finished run and a live one, the writer closed."""
    spec = experiment_spec(tmp_path, energy_budget_kwh=0.001)
    writer = Store(spec["store"])
    done = live_run(writer, spec, tmp_path, monkeypatch)
    finish(writer, done)
    live_run(writer, spec, tmp_path, monkeypatch)
    writer.close()
    return tmp_path / "basht.db", spec["store"], done


@pytest.fixture
def client(stored, tmp_path) -> TestClient:
    store = Store(stored[1], read_only=True)
    yield TestClient(create_app(store, tmp_path / "results"), base_url=BASE_URL)
    store.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_runs_and_a_run_as_json(client, stored):
    runs = client.get("/api/runs").json()
    assert len(runs) == 2
    done = next(r for r in runs if r["id"] == stored[2])
    assert done["status"] == "completed" and done["trials"] == {"completed": 3}
    assert done["best_value"] == 0.7 and done["metric"] == "accuracy"
    run = client.get(f"/api/runs/{stored[2]}").json()
    assert run["run"]["id"] == stored[2] and len(run["trials"]) == 3
    assert run["energy"]["cost_usd"] is None  # no OC stored for this run
    assert [m["name"] for m in run["metrics"]][:2] == ["TWH", "WR"]
    live = next(r for r in runs if r["status"] == "running")
    assert client.get(f"/api/runs/{live['id']}").json()["energy"]["cost_usd"] == 0.0  # free


def test_an_unknown_run_or_endpoint_is_a_404_with_a_reason(client):
    response = client.get("/api/runs/no-such-run")
    assert response.status_code == 404
    assert response.json()["detail"].startswith("no run matching 'no-such-run' in sqlite:///")
    assert client.get("/api/runs/t-").status_code == 404  # a prefix of two runs: ambiguous
    assert client.get("/api/nothing/here").status_code == 404
    assert client.get("/api/comparisons/compare-nope").status_code == 404


def test_nothing_is_written_to_the_store(client, stored):
    path, url, run_id = stored
    before = _digest(path)
    for route in (
        "/",
        f"/runs/{run_id}",
        "/api/info",
        "/api/runs",
        f"/api/runs/{run_id}",
        "/api/comparisons",
    ):
        assert client.get(route).status_code == 200, route
    assert _digest(path) == before
    reader = Store(url, read_only=True)
    with pytest.raises(OperationalError, match="readonly"):
        reader.update_run(run_id, status="failed")
    reader.close()
    assert _digest(path) == before


def test_the_page_loads_only_what_the_app_serves(client):
    page = client.get("/runs/anything")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets and all(a.startswith("/") or a == "data:," for a in assets)  # this app's
    for asset in assets:
        if asset.startswith("/"):
            assert client.get(asset).status_code == 200, asset


def test_a_request_for_another_host_name_is_refused(stored, tmp_path):
    """Bound to loopback, the app answers only names of it: a page elsewhere that rebinds its
    own name to 127.0.0.1 cannot read the store through a visitor's browser."""
    store = Store(stored[1], read_only=True)
    app = create_app(store, tmp_path)
    assert TestClient(app, base_url="http://evil.example").get("/api/runs").status_code == 400
    assert TestClient(app, base_url="http://localhost:8765").get("/api/runs").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8765").get("/api/runs").status_code == 200
    # Bound to every address, it answers any name it is reached by.
    anywhere = create_app(store, tmp_path, host="0.0.0.0")
    assert TestClient(anywhere, base_url="http://gpu-box:8765").get("/api/runs").status_code == 200
    store.close()


def test_a_store_that_is_not_there_or_a_port_in_use_is_one_line(tmp_path):
    with pytest.raises(BashtError, match=r"there is no .*nope\.db \(no run was stored there\)"):
        open_dashboard(f"sqlite:///{tmp_path / 'nope.db'}", "127.0.0.1", 0, tmp_path)
    assert not (tmp_path / "nope.db").exists()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BashtError, match=f"cannot listen on 127.0.0.1 port {port}: .*in use"):
            bind("127.0.0.1", port)
    with pytest.raises(BashtError, match="--port 70000: expected 0 to 65535"):
        bind("127.0.0.1", 70000)
