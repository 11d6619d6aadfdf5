"""Real servers for the BSO tests: `basht bso serve` in a subprocess, and a throwaway PostgreSQL
(`tests.postgres`, shared with the main store's tests).

Every server binds 127.0.0.1 on a free port and is stopped by the fixture that started it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.postgres import postgres_server

MISSING_EXTRA = any(importlib.util.find_spec(m) is None for m in ("fastapi", "httpx", "uvicorn"))
if MISSING_EXTRA:
    collect_ignore_glob = ["test_*.py"]
else:
    from tests.bso.support import start_server

if TYPE_CHECKING:
    import httpx

    from tests.bso.support import Server


def pytest_report_header() -> str | None:
    if MISSING_EXTRA:
        return "tests/bso NOT RUN: the `bso` extra is not installed (pip install -e '.[bso]')"
    return None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start servers with any arguments; all are stopped after the test."""
    started: list[Server] = []

    def start(*args: str, db: str | None = None, env: dict[str, str] | None = None) -> Server:
        n = len(started)
        server = start_server(
            db or f"sqlite:///{tmp_path / f'bso{n}.db'}",
            *args,
            log=tmp_path / f"server{n}.log",
            env=env,
        )
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One SQLite-backed server shared by a module's tests (each test uses its own job ids)."""
    tmp = tmp_path_factory.mktemp("bso")
    s = start_server(f"sqlite:///{tmp / 'bso.db'}", log=tmp / "server.log")
    yield s
    s.stop()


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def inproc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """The server's application in this process (Starlette's TestClient over a SQLite file): no
    process and no port, so its tests stay in the fast lane. Each test uses its own job ids."""
    from fastapi.testclient import TestClient

    from basht.bso.config import ServerSettings
    from basht.bso.db.migrate import ensure_ready
    from basht.bso.server import create_app

    db = f"sqlite:///{tmp_path_factory.mktemp('bso-inproc') / 'bso.db'}"
    ensure_ready(db)
    with TestClient(create_app(ServerSettings(db=db, log_level="warning"))) as client:
        yield client


# -- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, TCP only), removed afterwards."""
    with postgres_server() as server:
        yield server.url
