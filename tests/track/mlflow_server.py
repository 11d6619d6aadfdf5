"""A real `mlflow server` on 127.0.0.1 for tests: a free port, its own SQLite backend and
artifact folder, stopped (its whole process group) at the end; and its REST API, read plainly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.prometheus_server import free_port

STARTUP_S = 180.0  # a cold start imports MLflow's whole server and migrates its database


@contextmanager
def mlflow_server(folder: Path) -> Iterator[str]:
    """The server's URL while it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--artifacts-destination",
            str(folder / "artifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers in its own group, stopped with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, server, folder / "server.log")
        yield url
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _wait_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"mlflow server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise AssertionError(f"mlflow server not up in {STARTUP_S:.0f} s: {log.read_text()[-2000:]}")


def rest(url: str, path: str, body: dict[str, Any] | None = None, **query: str) -> Any:
    """GET (or POST `body` to) MLflow's REST API at `path` (`runs/search`), as JSON."""
    address = f"{url}/api/2.0/mlflow/{path}"
    if query:
        address += "?" + urllib.parse.urlencode(query)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        address, data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


def searched_runs(url: str, experiment: str) -> list[dict[str, Any]]:
    """Every run of `experiment`, from /api/2.0/mlflow/runs/search."""
    found = rest(url, "experiments/get-by-name", experiment_name=experiment)
    experiment_id = found["experiment"]["experiment_id"]
    runs = rest(url, "runs/search", {"experiment_ids": [experiment_id], "max_results": 1000})
    return runs.get("runs", [])


def pairs(run: dict[str, Any], kind: str) -> dict[str, Any]:
    """A searched run's tags, params or metrics as {key: value}."""
    return {item["key"]: item["value"] for item in run["data"].get(kind, [])}
