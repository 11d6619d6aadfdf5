"""The timeline of a run rebuilt from the store: a resumed run's attempts and the time between."""

from __future__ import annotations

from types import SimpleNamespace

from basht.experiment import Experiment
from basht.report.timeline import segments
from basht.store import Store


def test_a_trial_cut_short_and_run_again_on_resume_leaves_the_downtime_idle(
    spec, tmp_path, monkeypatch
):
    """Attempt 1 ran 0-4 s and was interrupted in trial 0's third epoch; attempt 2 began at 30 s
    and ran trial 0 again from scratch. The trial row keeps its first start and its last end,
    but the worker was not busy for the 26 s the run was down."""
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", tmp_path).id
    t0 = 1000.0
    store.add_phase(run_id, "run", t0, t0 + 4.0, aborted=True, attempt=1)
    store.add_phase(run_id, "run", t0 + 30.0, t0 + 34.0, attempt=2)
    trial = store.add_trial(run_id, 0, {"x": 0.1}, 3, state="running", worker=0)
    store.update_trial(trial, started_at=t0)
    clock = SimpleNamespace(now=t0)
    monkeypatch.setattr("basht.store.repository.time", SimpleNamespace(time=lambda: clock.now))
    for clock.now, epoch in ((t0 + 1, 1), (t0 + 2, 2), (t0 + 31, 1), (t0 + 32, 2), (t0 + 33, 3)):
        store.add_report(trial, epoch, 0.1 * epoch, {"accuracy": 0.1 * epoch}, 1.0, 0.0)
    store.update_trial(trial, state="completed", ended_at=t0 + 33)

    segs = [(s.start_s, s.end_s, s.state) for s in segments(store, run_id, lanes=1)]
    assert segs == [(0.0, 4.0, "aborted"), (30.0, 33.0, "completed")]
