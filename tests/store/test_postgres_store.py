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
from basht.store.urls import resolve_url
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


def _stored_run(url: str, tmp_path) -> tuple[Store, str, int]:
    """A store with one run and one trial in it: the store, the run's id and the trial's row."""
    store = Store(url)
    run_id = store.create_run(store.add_experiment("t", {}), "t", "native", "local", tmp_path).id
    return store, run_id, store.add_trial(run_id, 0, {"x": 0.5}, 3)


def test_a_nan_or_infinite_metric_is_stored_as_null(postgres_store, tmp_path):
    """PostgreSQL's json type has no NaN: a diverged loss (the Tuner fails such a trial) must not
    fail the write that records it, and the run's test metrics store as they do on SQLite."""
    store, run_id, trial = _stored_run(postgres_store, tmp_path)
    nan, inf = float("nan"), float("inf")
    store.add_report(trial, 1, nan, {"accuracy": nan, "loss": inf, "n": [1.0, -inf]}, 0.1, 0.0)
    store.update_run(run_id, test_metrics={"accuracy": 0.5, "loss": nan})
    (report,) = store.reports(run_id)
    assert report.metrics == {"accuracy": None, "loss": None, "n": [1.0, None]}
    assert report.value != report.value  # a float column keeps NaN itself
    assert store.get_run(run_id).test_metrics == {"accuracy": 0.5, "loss": None}


def test_run_times_are_utc_whatever_the_session_time_zone(monkeypatch, postgres_store, tmp_path):
    """`basht runs` shows them as UTC and `latest` orders by them, for every client of the store."""
    from datetime import UTC, datetime

    monkeypatch.setenv("PGTZ", "America/New_York")  # libpq sets the session's TimeZone from it
    before = datetime.now(UTC).replace(tzinfo=None)
    store, run_id, _ = _stored_run(postgres_store, tmp_path)
    store.finish_run(run_id, "completed")
    after = datetime.now(UTC).replace(tzinfo=None)
    run = store.get_run(run_id)
    assert before <= run.started_at <= run.ended_at <= after
    assert before <= store.get_experiment(run.experiment_id).created_at <= after


def test_a_checkpoint_over_2_gib_is_stored(postgres_store, tmp_path):
    """Its size does not fit PostgreSQL's 32-bit integer; a store made before it was 64-bit is
    widened when it is opened."""
    store, run_id, trial = _stored_run(postgres_store, tmp_path)
    store.add_checkpoint(trial, 1, "/ckpt/big.pkl", "pause", 3 * 2**30)
    with store.engine.begin() as conn:  # as an earlier Basht made it, before migrations
        from sqlalchemy import text

        conn.execute(text("DELETE FROM checkpoint"))
        conn.execute(text("ALTER TABLE checkpoint ALTER COLUMN size_bytes TYPE INTEGER"))
        conn.execute(text("DROP TABLE basht_alembic_version"))
    store.close()
    store = Store(postgres_store)
    store.add_checkpoint(trial, 1, "/ckpt/big.pkl", "pause", 3 * 2**30)
    assert [c.size_bytes for c in store.checkpoints(trial)] == [3 * 2**30]


def test_a_database_that_goes_away_is_a_one_line_store_error(postgres_store, tmp_path):
    """A server stopped or restarted under a run: the user sees why in one line (exit code 2),
    not a driver's traceback; what was stored before stays."""
    from sqlalchemy import text

    store, run_id, _ = _stored_run(postgres_store, tmp_path)
    with Store(postgres_store).engine.begin() as conn:  # the store's own connection is cut
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    with pytest.raises(StoreError) as lost:
        store.list_runs()
    message = str(lost.value)
    assert message.startswith(f"store {postgres_store!r}: lost the connection to the database (")
    assert "\n" not in message
    assert [r.id for r in Store(postgres_store).list_runs()] == [run_id]

    from basht.store.repository import open_engine

    with pytest.raises(StoreError) as refused:  # and one that cannot be reached at all
        open_engine("postgresql://me:s3cret@127.0.0.1:1/basht").connect()
    message = str(refused.value)
    assert message.startswith("store 'postgresql://me:***@127.0.0.1:1/basht': cannot open (")
    assert "s3cret" not in message and "\n" not in message
