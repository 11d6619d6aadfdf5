"""The timeline of a run rebuilt from the store: a resumed run's attempts and the time between."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from basht.experiment import Experiment
from basht.report.runstats import best_so_far, restarts, time_to_target
from basht.report.timeline import segments
from basht.store import Store

T0 = 1000.0


def _restarted_run(spec: dict, tmp_path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, str]:
    """Attempt 1 ran 0-4 s and was interrupted in trial 0's third epoch; attempt 2 began at 30 s
    and ran trial 0 again from scratch: its reports are epochs 1, 2, then 1, 2, 3."""
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", tmp_path).id
    store.add_phase(run_id, "run", T0, T0 + 4.0, aborted=True, attempt=1)
    store.add_phase(run_id, "run", T0 + 30.0, T0 + 34.0, attempt=2)
    trial = store.add_trial(run_id, 0, {"x": 0.1}, 3, state="running", worker=0)
    store.update_trial(trial, started_at=T0)
    clock = SimpleNamespace(now=T0)
    monkeypatch.setattr("basht.store.repository.time", SimpleNamespace(time=lambda: clock.now))
    for clock.now, epoch in ((T0 + 1, 1), (T0 + 2, 2), (T0 + 31, 1), (T0 + 32, 2), (T0 + 33, 3)):
        store.add_report(trial, epoch, 0.1 * epoch, {"accuracy": 0.1 * epoch}, 1.0, 0.0)
    store.update_trial(trial, state="completed", ended_at=T0 + 33)
    return store, run_id


def test_a_trial_cut_short_and_run_again_on_resume_leaves_the_downtime_idle(
    spec, tmp_path, monkeypatch
):
    """The trial row keeps its first start and its last end, but the worker was not busy for
    the 26 s the run was down."""
    store, run_id = _restarted_run(spec, tmp_path, monkeypatch)
    segs = [(s.start_s, s.end_s, s.state) for s in segments(store, run_id, lanes=1)]
    assert segs == [(0.0, 4.0, "aborted"), (30.0, 33.0, "completed")]


def test_the_best_so_far_is_when_a_value_was_first_reported_not_when_a_restart_met_it_again(
    spec, tmp_path, monkeypatch
):
    """Over time every report counts, each attempt's: 0.2 was reached 2 s in, before the
    interruption; the restart reporting it again at 32 s is no new best."""
    store, run_id = _restarted_run(spec, tmp_path, monkeypatch)
    assert [(t, round(v, 9)) for t, v in best_so_far(store, run_id, "max")] == [
        (1.0, 0.1),
        (2.0, 0.2),
        (33.0, 0.3),
    ]
    assert time_to_target(store, run_id, 0.2, "max") == 2.0
    (trial,) = store.trials(run_id)
    assert restarts(store, run_id) == {trial.id: 1}


@pytest.mark.integration
def test_a_busy_run_s_timeline_needs_no_more_lanes_than_it_had_workers(tmp_path, monkeypatch):
    """Reports and pauses are stored with the time they happened, not the time the store's
    writer (behind the loop, batched) got to them: when the writer lags (a slow disk, a loaded
    machine; here each report takes it 5 ms more), lagging timestamps would stretch segments
    over each other into extra lanes."""
    import time

    import basht

    add_report = Store.add_report

    def slow_add_report(self, *args, **kwargs):
        time.sleep(0.005)
        add_report(self, *args, **kwargs)

    monkeypatch.setattr(Store, "add_report", slow_add_report)

    result = basht.run(
        {
            "name": "busy-timeline",
            "workload": {"name": "sleep", "params": {"epoch_s": 0.0}},
            "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
            "search": {
                "pruner": "asha",
                "metric": "accuracy",
                "mode": "max",
                "max_budget": 27,
                "max_trials": 60,
            },
            "resources": {"workers": 2},
            "store": f"sqlite:///{tmp_path / 'basht.db'}",
        },
        results_root=tmp_path / "results",
    )
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    lanes = {s.lane for s in segments(store, result.run_id, lanes=2)}
    assert lanes <= {0, 1}, f"{len(lanes)} lanes for 2 workers"
