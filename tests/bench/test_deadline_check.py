"""A carbon-aware run's deadline is checked before anything is stored: one already past, and one
the workload's epochs, as an earlier run in the store timed them, cannot reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from basht.bench.carbon_schedule import check_deadline, measured_epoch_s
from basht.errors import SpecError
from basht.experiment import Experiment
from basht.store import Store

START = "2023-01-01T00:00:00Z"


def _experiment(folder: Path, deadline: str, params: dict | None = None) -> Experiment:
    (folder / "grid.csv").write_text(
        f"timestamp,g_per_kwh\n{START},300\n2023-01-03T00:00:00Z,300\n"
    )
    return Experiment.from_dict(
        {
            "name": "carbon",
            "workload": {"name": "tests.user_workloads:Spin", "params": params or {}},
            "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
            "search": {"metric": "accuracy", "max_budget": 3, "max_trials": 4},
            "resources": {"workers": 2},
            "measure": {"carbon": {"csv": str(folder / "grid.csv")}},
            "schedule": {"carbon_aware": True, "deadline": deadline, "start": START},
        },
        "carbon.yaml",
    )


def _timed_run(store: Store, exp: Experiment, epoch_s: float) -> str:
    """A finished run of `exp` in `store` whose one trial trained 3 epochs of `epoch_s`."""
    run = store.create_run(
        store.add_experiment(exp.name, exp.to_dict()), exp.name, "native", "local", Path(".")
    )
    trial = store.add_trial(run.id, 0, {"x": 0.0}, 3)
    store.update_trial(
        trial, state="completed", budget=3, train_s=2.5 * epoch_s, validate_s=0.5 * epoch_s
    )
    return run.id


def test_a_deadline_already_past_is_refused(tmp_path):
    exp = _experiment(tmp_path, "2022-12-31T23:00:00Z")
    with pytest.raises(
        SpecError,
        match=r"^schedule\.deadline: 2022-12-31T23:00:00Z has passed: the run would start 2023-01-01T00:00:00Z$",
    ):
        check_deadline(exp, Store(f"sqlite:///{tmp_path / 'b.db'}"), 0.0)


def test_the_work_an_earlier_run_timed_decides(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    exp = _experiment(tmp_path, "1h")
    check_deadline(exp, store, 0.0)  # nothing timed yet: the work is unknown, the run may start
    run_id = _timed_run(store, exp, epoch_s=1000.0)
    assert measured_epoch_s(store, exp) == (pytest.approx(1000.0), run_id)
    # 12 epochs of 1000 s on 2 workers end 6000 s after the start at the soonest.
    with pytest.raises(SpecError) as refused:
        check_deadline(exp, store, 0.0)
    message = str(refused.value)
    assert message.startswith("schedule.deadline: 2023-01-01T01:00:00Z is too early:"), message
    assert "finishes 2023-01-01T01:40:00Z at the earliest" in message, message
    assert f"as run {run_id} timed them" in message and "\n" not in message
    check_deadline(_experiment(tmp_path, "2h"), store, 0.0)  # 100 minutes fit in two hours


def test_another_workload_or_executor_is_not_taken_for_this_one(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    _timed_run(store, _experiment(tmp_path, "1h", params={"epoch_s": 9.0}), epoch_s=1000.0)
    exp = _experiment(tmp_path, "1h")
    assert measured_epoch_s(store, exp) is None
    check_deadline(exp, store, 0.0)
