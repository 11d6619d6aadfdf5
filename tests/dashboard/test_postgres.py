"""The dashboard on a PostgreSQL store: read in read-only transactions, so it cannot write."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DBAPIError

from basht.store import Store
from tests.dashboard.support import experiment_spec, live_run
from tests.postgres import postgres_server

pytestmark = pytest.mark.integration


def test_a_postgresql_store_is_read_but_never_written(tmp_path, monkeypatch):
    pytest.importorskip("psycopg")
    fastapi = pytest.importorskip("fastapi.testclient")
    from basht.dashboard import create_app

    with postgres_server() as server:
        url = server.create_database("dashboard")
        writer = Store(url)
        run_id = live_run(writer, experiment_spec(tmp_path) | {"store": url}, tmp_path, monkeypatch)
        writer.close()
        reader = Store(url, read_only=True)
        client = fastapi.TestClient(create_app(reader, tmp_path), base_url="http://127.0.0.1")
        data = client.get(f"/api/runs/{run_id}").json()
        assert data["counts"] == {"running": 1, "pending": 1, "completed": 1}
        with pytest.raises(DBAPIError, match="read-only transaction"):
            reader.update_run(run_id, status="failed")
        reader.close()
        assert Store(url, create=False).get_run(run_id).status == "running"
