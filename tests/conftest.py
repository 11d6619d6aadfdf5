"""Shared fixtures: a valid experiment as a dict, written to a file on demand."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

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
