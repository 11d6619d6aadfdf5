"""The run store on a real PostgreSQL server (started for the tests, see `tests.postgres`):
`basht run`, `runs`, `report` and `resume` with a plain `postgresql://` URL, through the same
code as SQLite."""

from __future__ import annotations

import json
import signal
import sys

import pytest

from basht.bench.preflight import preflight
from basht.errors import ExperimentError, StoreError
from basht.experiment import Experiment
from basht.store import Store
from basht.store.repository import resolve_url
from tests.cli import basht, run_in_background, wait_for_trials

PHASES = ["deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy"]


def _asha(spec, store: str, epoch_s: float, max_budget: int, max_trials: int):
    spec["store"] = store
    spec["workload"]["params"] = {"epoch_s": epoch_s}
    spec["space"] = {"x": {"type": "float", "low": -1.0, "high": 1.0}}
    spec["search"].update(
        pruner="asha", min_budget=1, max_budget=max_budget, eta=3, max_trials=max_trials
    )
    return spec


def test_a_plain_postgresql_url_means_psycopg():
    assert resolve_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert resolve_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert resolve_url("sqlite:///x.db").drivername == "sqlite"


def test_a_postgresql_url_without_its_driver_names_the_extra(monkeypatch, spec, tmp_path):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    url = "postgresql://postgres@127.0.0.1:1/basht"
    with pytest.raises(StoreError) as opened:
        Store(url)
    assert str(opened.value).startswith(f"store: the database driver for {url!r} is not installed")
    assert str(opened.value).endswith("; pip install 'basht[postgres]'")
    spec["store"] = url
    with pytest.raises(ExperimentError) as checked:
        preflight(Experiment.model_validate(spec), "exp.yaml")
    message = str(checked.value)
    assert "\n" not in message
    assert message.startswith("exp.yaml: store: the database driver for")
    assert message.endswith("pip install 'basht[postgres]'")


def test_run_runs_and_report_on_postgresql(spec, write_spec, tmp_path, postgres_store):
    _asha(spec, "sqlite:///not-this.db", epoch_s=0.01, max_budget=3, max_trials=6)
    done = basht("run", "-q", str(write_spec(spec)), "--store", postgres_store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "not-this.db").exists()  # --store won over the file's store

    store = Store(postgres_store, create=False)
    (run,) = store.list_runs()
    assert run.status == "completed" and run.best_value is not None
    assert [p.name for p in store.phases(run.id)] == PHASES
    trials = store.trials(run.id)
    assert [t.number for t in trials] == list(range(6))
    assert {t.state for t in trials} <= {"completed", "stopped"}
    assert all(-1.0 <= t.config["x"] <= 1.0 for t in trials)
    reports = store.reports(run.id)
    assert {r.trial_id for r in reports} == {t.id for t in trials}
    assert max(r.epoch for r in reports) == 3  # ASHA promoted someone to the top rung
    assert store.decisions(run.id)

    listed = basht("runs", "--store", postgres_store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert run.id in listed.stdout
    shown = basht("report", "latest", "--store", postgres_store, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert summary["run_id"] == run.id and summary["status"] == "completed"
    text = basht("report", "latest", "--store", postgres_store, cwd=tmp_path)
    assert text.returncode == 0 and run.id in text.stdout


def test_the_store_key_of_an_experiment_file_and_a_second_run(
    spec, write_spec, tmp_path, postgres_store
):
    _asha(spec, postgres_store, epoch_s=0.01, max_budget=1, max_trials=2)
    path = write_spec(spec)
    assert basht("validate", str(path), cwd=tmp_path).returncode == 0
    for _ in range(2):  # the second run opens the tables the first one made
        done = basht("run", "-q", str(path), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    runs = Store(postgres_store).list_runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"completed"}


def test_an_interrupted_run_resumes_on_postgresql(spec, write_spec, tmp_path, postgres_store):
    _asha(spec, postgres_store, epoch_s=0.2, max_budget=9, max_trials=12)
    proc = run_in_background(write_spec(spec), tmp_path)
    try:
        # No file to wait for: the folder stands in for it.
        wait_for_trials(postgres_store, tmp_path, lambda store, run: len(store.trials(run.id)) >= 4)
    except AssertionError as err:
        proc.kill()
        _, stderr = proc.communicate(timeout=60)
        raise AssertionError(f"{err}; its stderr:\n{stderr}") from None
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr

    store = Store(postgres_store)
    (run,) = store.list_runs()
    assert run.status == "interrupted" and 4 <= len(store.trials(run.id)) < 12

    done = basht("resume", run.id, "--store", postgres_store, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = store.get_run(run.id)
    trials = store.trials(run.id)
    assert run.status == "completed"
    assert [t.number for t in trials] == list(range(12))
    assert {t.state for t in trials} <= {"completed", "stopped"}
    assert {p.attempt for p in store.phases(run.id)} == {1, 2}


def test_optuna_keeps_its_study_in_the_same_postgresql_database(
    spec, write_spec, tmp_path, postgres_store
):
    """system: optuna on a PostgreSQL store: its study's tables sit beside Basht's, reached
    with the store's driver (a plain postgresql:// URL is psycopg, not psycopg2)."""
    pytest.importorskip("optuna")
    _asha(spec, postgres_store, epoch_s=0.01, max_budget=3, max_trials=4)
    spec["system"] = "optuna"
    done = basht("run", "-q", str(write_spec(spec)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = Store(postgres_store)
    (run,) = store.list_runs()
    assert run.status == "completed" and run.system == "optuna"
    assert len(store.trials(run.id)) == 4
    from sqlalchemy import inspect

    assert "studies" in inspect(store.engine).get_table_names()  # Optuna's, beside Basht's


def test_a_store_that_cannot_be_opened_says_so_without_its_password():
    with pytest.raises(StoreError) as opened:
        Store("postgresql://me:s3cret@127.0.0.1:1/basht")
    message = str(opened.value)
    assert message.startswith("store 'postgresql://me:***@127.0.0.1:1/basht': cannot open (")
    assert "s3cret" not in message and "\n" not in message
