"""A run written into a store by hand, as the runner writes one: a live run (its run phase not
stored yet) or a finished one, with reports, power samples, energy accounts and metrics."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from basht.experiment import Experiment
from basht.store import Store
from tests.conftest import BASE

T0 = 1_000_000.0
#: Each component's running total (J) at T0 + 1 and T0 + 2: the energy curve's two points.
SAMPLES = ((1.0, {"cpu": 10.0, "memory": 2.0}), (2.0, {"cpu": 20.0, "memory": 4.0}))


def experiment_spec(tmp_path: Path, **search: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    spec["search"].update(search)
    return Experiment.from_dict(spec).to_dict()


def clock(monkeypatch: pytest.MonkeyPatch, start: float) -> list[float]:
    """The store's clock, set by the test: `clock[0] = t` times the next report."""
    now = [start]
    monkeypatch.setattr(
        "basht.store.repository.time", type("T", (), {"time": staticmethod(lambda: now[0])})
    )
    return now


def live_run(
    store: Store, spec: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Deploy 0-1 s, setup 1-2 s; trial 0 ran 2-4 s on worker 0 and completed, trial 1 has run
    on worker 1 since 2.5 s, trial 2 waits. Reports: 0.5 (trial 0, 3 s), 0.6 (trial 1,
    3.5 s), 0.7 (trial 0, 4 s)."""
    exp_id = store.add_experiment(spec["name"], spec)
    run_id = store.create_run(exp_id, spec["name"], "native", "local", tmp_path).id
    store.add_phase(run_id, "deploy", T0, T0 + 1)
    store.add_phase(run_id, "setup", T0 + 1, T0 + 2)
    first = store.add_trial(run_id, 0, {"x": 0.1, "n": 2}, 2, state="completed", worker=0)
    second = store.add_trial(run_id, 1, {"x": -0.4, "n": 1}, 2, state="running", worker=1)
    store.add_trial(run_id, 2, {"x": 0.9, "n": 3}, 2, state="pending")
    store.update_trial(first, started_at=T0 + 2, ended_at=T0 + 4)
    store.update_trial(second, started_at=T0 + 2.5)
    now = clock(monkeypatch, T0)
    for now[0], trial, epoch, value in (
        (T0 + 3, first, 1, 0.5),
        (T0 + 3.5, second, 1, 0.6),
        (T0 + 4, first, 2, 0.7),
    ):
        store.add_report(trial, epoch, value, {"accuracy": value}, 0.4, 0.1)
    store.add_power_samples(
        run_id,
        [
            {"at": T0 + at, "node": "local", "component": c, "source": "estimate", "energy_j": j}
            for at, totals in SAMPLES
            for c, j in totals.items()
        ],
    )
    store.replace_energy_accounts(
        run_id,
        [
            {"kind": "trial", "trial": 0, "component": "cpu", "source": "estimate",
             "energy_j": 6.0, "emissions_g": 0.6},
            {"kind": "baseline", "trial": None, "component": "cpu", "source": "estimate",
             "energy_j": 18.0, "emissions_g": 1.8},
        ],
    )  # fmt: skip
    return run_id


def finish(store: Store, run_id: str) -> None:
    """The run phase stored (2-5 s), its metrics computed, the run completed."""
    store.add_phase(run_id, "run", T0 + 2, T0 + 5)
    for trial in store.trials(run_id):
        if trial.state != "completed":
            store.update_trial(trial.id, state="completed", ended_at=T0 + 5)
    store.add_metrics(
        run_id,
        [
            ("trials", 3.0, "count", None),
            ("WR", 75.0, "%", "estimate"),
            ("TWH", 1e-6, "kWh", "estimate"),
        ],
    )
    store.update_run(run_id, best_trial=0, best_value=0.7, best_config={"x": 0.1, "n": 2})
    store.finish_run(run_id, "completed")
