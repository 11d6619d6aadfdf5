"""Several `basht run` processes on one store at once (a SQLite file, a PostgreSQL database), the
store new when they start: none sees a lock error, and every run has all its trials, reports and
decisions."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from basht.store import Store
from tests.cli import cli_env

pytestmark = pytest.mark.integration

RUNS = 4
TRIALS = 16


def _experiment(store: str, index: int) -> dict:
    return {
        "name": f"crowd-{index % 2}",  # two runs of each name: their ids must still differ
        "seed": index,
        "workload": {"name": "sleep", "params": {"epoch_s": 0.005}},
        "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
        "search": {
            "sampler": "random",
            "pruner": "asha",
            "metric": "accuracy",
            "min_budget": 1,
            "max_budget": 9,
            "eta": 3,
            "max_trials": TRIALS,
        },
        "resources": {"workers": 2},
        "store": store,
    }


def _run_together(store: str, tmp_path) -> None:
    procs = []
    for index in range(RUNS):
        folder = tmp_path / f"run{index}"
        folder.mkdir()
        (folder / "exp.yaml").write_text(yaml.safe_dump(_experiment(store, index)))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "basht.cli", "run", "-q", "--no-plots", "exp.yaml"],
                cwd=folder,
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "locked" not in err.lower() and "Traceback" not in err, err

    opened = Store(store, create=False)
    runs = opened.list_runs()
    assert len(runs) == RUNS and len({r.id for r in runs}) == RUNS
    for run in runs:
        assert run.status == "completed", run.error
        trials = opened.trials(run.id)
        assert sorted(t.number for t in trials) == list(range(TRIALS))
        reports = opened.reports(run.id)
        assert len(reports) == sum(t.budget for t in trials)  # one per epoch trained
        decisions = opened.decisions(run.id)
        assert [d.seq for d in decisions] == list(range(1, len(decisions) + 1))
    opened.close()


def test_runs_at_once_on_one_new_sqlite_file(tmp_path):
    _run_together(f"sqlite:///{tmp_path / 'shared.db'}", tmp_path)


def test_runs_at_once_on_one_new_postgres_database(postgres, tmp_path):
    _run_together(postgres.create_database("crowd"), tmp_path)
