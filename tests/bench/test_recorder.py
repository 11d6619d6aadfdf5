"""The store side of a peer framework's trials: events as the frameworks send them, in their order."""

from __future__ import annotations

from pathlib import Path

from basht.bench.lifecycle import RunContext
from basht.bench.systems.messages import Completing, Reported, Started
from basht.bench.systems.recorder import TrialRecorder
from basht.engine.checkpoints import save_state
from basht.experiment import Experiment
from basht.store import Store


def test_a_late_start_of_an_ended_trial_leaves_it_and_its_checkpoint_alone(spec, tmp_path):
    """Ray may start an actor for a trial, then run the trial on a reused actor instead; the new
    actor announces the trial once it is up, after the trial completed. That must not reopen the
    trial, nor (at Tune's last word on it) delete the best trial's final checkpoint."""
    spec["system"] = "raytune"
    experiment = Experiment.from_dict(spec)
    store = Store(spec["store"])
    run = store.create_run(
        store.add_experiment("t", {}), "t", "raytune", "local", tmp_path / "results"
    )
    ctx = RunContext(experiment, store, run.id, Path(run.results_dir))
    recorder = TrialRecorder(ctx, 2, can_checkpoint=True, target_budget=2)

    assigned = recorder.handle(Started("trial_00001", {"x": 0.5, "n": 1}, 101, 1.0))
    recorder.handle(Reported(assigned.number, 2, {"accuracy": 0.9}))
    path = recorder.handle(Completing(assigned.number, 2, 0.9))
    save_state({"w": 1}, path)
    recorder.end(assigned.number, "completed", 2.0)

    late = recorder.handle(Started("trial_00001", {"x": 0.5, "n": 1}, 102, 3.0))
    assert late == assigned
    assert recorder.state_of(assigned.number) == "completed"
    recorder.end(assigned.number, "completed", 4.0)  # Tune's last word, as on_experiment_end
    recorder.finish()

    assert Path(path).exists()
    (trial,) = store.trials(run.id)
    assert (trial.state, trial.ended_at) == ("completed", 2.0)
    (checkpoint,) = store.checkpoints(trial.id)
    assert checkpoint.path == path and not checkpoint.deleted
    assert recorder.status.counts["completed"] == 1 and recorder.status.counts["running"] == 0
