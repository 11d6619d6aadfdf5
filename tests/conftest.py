"""Shared fixtures: a valid experiment as a dict, written to a file on demand; the test lanes.

Tests that start real processes, servers or clusters are marked `integration` (in their files, or
here where a fixture that starts a server is the reason), so `pytest -m "not integration"` is the
fast lane; tests marked `needs_root` skip where the suite does not run as root.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tools import is_root

BASE: dict[str, Any] = {
    "name": "t",
    "seed": 0,
    "workload": {"name": "sleep", "params": {}},
    "space": {
        "x": {"type": "float", "low": -1.0, "high": 1.0},
        "n": {"type": "int", "low": 1, "high": 4},
    },
    "search": {"metric": "accuracy", "mode": "max", "max_budget": 2, "max_trials": 4},
    "resources": {"workers": 2},
}


@pytest.fixture
def spec(tmp_path: Path) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    return data


@pytest.fixture
def write_spec(tmp_path: Path):
    def write(data: dict[str, Any], name: str = "exp.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


# Fixtures that start a server of their own (`basht bso serve` in a subprocess, a PostgreSQL
# cluster): every test that uses one, itself or through another fixture, is an integration test.
# Keyed by the folder that defines them (a `server` elsewhere need not be one).
SERVER_FIXTURES: dict[str, set[str]] = {
    "tests/bso/": {"serve", "server", "postgres_url"},
    "tests/store/": {"postgres"},
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for folder, names in SERVER_FIXTURES.items():
            if item.nodeid.startswith(folder) and names & set(item.fixturenames):
                item.add_marker(pytest.mark.integration)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_root") is not None and not is_root():
        pytest.skip("needs root (network namespaces)")
