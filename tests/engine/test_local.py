"""The local executor: persistent workers, per-epoch commands, pause/resume, crashes."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from basht.engine import COMPLETE, CONTINUE, PAUSE, STOP, LocalExecutor, TrialTask, WorkloadRef


@pytest.fixture
def executor():
    ex = LocalExecutor(workers=2, threads=1)
    ex.start()
    yield ex
    ex.shutdown()


def _next(ex: LocalExecutor, kind: str, trial_id: int, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in ex.poll(1.0):
            if event.trial_id == trial_id and event.kind == kind:
                return event
            if event.kind == "failed":
                raise AssertionError(f"trial {event.trial_id} failed: {event.error}")
    raise AssertionError(f"no {kind} event for trial {trial_id}")


def _train(ex, task, epochs: int, end: str, path: str | None = None):
    """Drive one trial for `epochs` epochs, then end it with `end`; returns its reports."""
    ex.submit(task)
    reports = []
    for i in range(epochs):
        reports.append(_next(ex, "report", task.trial_id))
        if i < epochs - 1:
            ex.command(task.trial_id, CONTINUE)
    ex.command(task.trial_id, end, path)
    return reports, _next(
        ex, {PAUSE: "paused", STOP: "stopped", COMPLETE: "completed"}[end], task.trial_id
    )


@pytest.mark.integration
@pytest.mark.parametrize("workload", ["digits-mlp", "digits-sgd"])
def test_pause_and_resume_equals_an_uninterrupted_trial(executor, tmp_path, workload):
    ref = WorkloadRef(workload, {}, experiment_seed=0)
    config = (
        {"lr": 0.01, "hidden": 32, "batch_size": 64}
        if workload == "digits-mlp"
        else {"alpha": 1e-3}
    )
    straight, _ = _train(executor, TrialTask(1, config, ref, seed=11), 4, COMPLETE)

    path = str(tmp_path / "ckpt.pkl")
    first, paused = _train(executor, TrialTask(2, config, ref, seed=11), 2, PAUSE, path)
    assert paused.path == path and os.path.exists(path)
    resumed_task = TrialTask(2, config, ref, seed=11, start_epoch=2, resume_from=path)
    second, _ = _train(executor, resumed_task, 2, COMPLETE)

    assert [r.epoch for r in first + second] == [1, 2, 3, 4]
    assert [r.metrics for r in first + second] == [r.metrics for r in straight]


@pytest.mark.integration
def test_stop_ends_a_running_trial_and_frees_the_worker(executor):
    ref = WorkloadRef("sleep", {"epoch_s": 0.01})
    reports, stopped = _train(executor, TrialTask(1, {"x": 0.0}, ref, seed=0), 2, STOP)
    assert stopped.kind == "stopped" and stopped.epoch == 2
    assert executor.idle_workers == 2


@pytest.mark.integration
def test_each_trial_load_train_validate_are_timed(executor):
    ref = WorkloadRef("sleep", {"epoch_s": 0.05})
    task = TrialTask(1, {"x": 0.0}, ref, seed=0)
    executor.submit(task)
    loaded = _next(executor, "loaded", 1)
    report = _next(executor, "report", 1)
    executor.command(1, COMPLETE)
    _next(executor, "completed", 1)
    assert loaded.load_s >= 0 and report.train_s >= 0.05 and report.validate_s >= 0


@pytest.mark.integration
def test_a_killed_worker_fails_its_trial_and_is_replaced(executor):
    ref = WorkloadRef("sleep", {"epoch_s": 5.0})
    executor.submit(TrialTask(1, {"x": 0.0}, ref, seed=0))
    _next(executor, "loaded", 1)
    slot = next(s for s in executor._slots if s.trial_id == 1)
    os.kill(slot.process.pid, signal.SIGKILL)
    failed = None
    deadline = time.monotonic() + 30
    while failed is None and time.monotonic() < deadline:
        failed = next((e for e in executor.poll(1.0) if e.kind == "failed"), None)
    assert failed is not None and "died" in failed.error
    assert "killed by SIGKILL" in failed.error  # not "exit code None": it is reaped first
    assert executor.idle_workers == 2
    _train(executor, TrialTask(2, {"x": 0.0}, WorkloadRef("sleep"), seed=0), 1, COMPLETE)


@pytest.mark.integration
@pytest.mark.parametrize("report", ["read", "unread"])
def test_a_worker_that_dies_after_its_report_fails_its_trial_only(executor, report):
    """The driver may read a report, or see it with the worker's death in one poll, before it
    answers: the answer goes nowhere, and the trial fails as its worker died."""
    ref = WorkloadRef("sleep", {"epoch_s": 0.5})
    executor.submit(TrialTask(1, {"x": 0.0}, ref, seed=0))
    slot = next(s for s in executor._slots if s.trial_id == 1)
    events = []
    while not any(e.kind == "loaded" for e in events):
        events += executor.poll(1.0)
    if report == "read":
        while not any(e.kind == "report" for e in events):
            events += executor.poll(1.0)
    else:
        assert any(e.kind == "report" for e in events) or slot.conn.poll(30)
    os.kill(slot.process.pid, signal.SIGKILL)
    slot.process.join(30)
    deadline = time.monotonic() + 30
    while not any(e.kind == "report" for e in events) and time.monotonic() < deadline:
        events += executor.poll(1.0)
    executor.command(1, CONTINUE)  # answers a trial whose worker is gone
    while not any(e.kind == "failed" for e in events) and time.monotonic() < deadline:
        events += executor.poll(1.0)
    (failed,) = [e for e in events if e.kind == "failed"]
    assert failed.trial_id == 1 and "died" in failed.error
    assert executor.idle_workers == 2
    _train(executor, TrialTask(2, {"x": 0.0}, WorkloadRef("sleep"), seed=0), 1, COMPLETE)


@pytest.mark.integration
def test_workers_are_held_to_their_thread_count():
    ex = LocalExecutor(workers=1, threads=2)
    ex.start()
    try:
        ex.submit(TrialTask(1, {}, WorkloadRef("tests.user_workloads:thread_probe"), seed=0))
        report = _next(ex, "report", 1)
        ex.command(1, COMPLETE)
    finally:
        ex.shutdown()
    assert report.metrics["torch_threads"] == 2
    assert report.metrics["omp_env"] == 2
    assert report.metrics["max_pool_threads"] <= 2


class KillsItsWorker:
    """Epoch 1 takes `epoch_s`; epoch 2 takes half of it, then its worker process is killed."""

    def __init__(self, seed: int = 0, epoch_s: float = 0.2):
        self.epoch_s, self.epoch = epoch_s, 0

    def load(self, config, resources) -> None:
        pass

    def train(self, epochs: int) -> None:
        self.epoch += epochs
        if self.epoch == 2:
            time.sleep(self.epoch_s / 2)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.epoch_s)

    def validate(self) -> dict[str, float]:
        return {"accuracy": float(self.epoch)}

    def test(self) -> dict[str, float]:
        return {"accuracy": float(self.epoch)}


@pytest.mark.integration
def test_a_trial_whose_worker_dies_counts_the_segment_it_died_in(spec, tmp_path):
    """Table 2's d_i: the epoch a killed worker was in held that worker too."""
    from basht.bench import run_benchmark
    from basht.experiment import Experiment
    from basht.store import Store

    spec["workload"] = {
        "name": "tests.engine.test_local:KillsItsWorker",
        "params": {"epoch_s": 0.2},
    }
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=1, max_budget=3)
    spec["resources"] = {"workers": 1}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    (trial,) = Store(spec["store"]).trials(result.run_id)
    assert trial.state == "failed" and "killed by SIGKILL" in trial.error
    assert trial.train_s >= 0.3  # epoch 1 (0.2 s), reported, then half of epoch 2


def swallows_stop(config, trial) -> None:
    """A plain function that catches everything its reports raise, StopTrial too."""
    for step in range(1, trial.budget + 1):
        with contextlib.suppress(Exception):
            trial.report(step, accuracy=float(step))


@pytest.mark.integration
def test_a_function_that_catches_stop_trial_reports_no_more(executor):
    ref = WorkloadRef("tests.engine.test_local:swallows_stop")
    executor.submit(TrialTask(1, {}, ref, seed=0, target_budget=4))
    _next(executor, "report", 1)
    executor.command(1, STOP)
    events = []
    deadline = time.monotonic() + 30
    while not any(e.kind == "stopped" for e in events) and time.monotonic() < deadline:
        events += [e for e in executor.poll(1.0) if e.kind != "loaded"]
    assert [(e.kind, e.epoch) for e in events] == [("stopped", 1)]


def test_a_state_that_cannot_be_saved_leaves_no_partial_file(tmp_path):
    from basht.engine.checkpoints import save_state

    target = tmp_path / "checkpoints" / "trial-000001-pause-e3.pkl"
    with pytest.raises(Exception, match="pickle"):
        save_state({"lock": threading.Lock()}, str(target))
    assert list(target.parent.iterdir()) == []


@pytest.mark.integration
def test_a_starting_worker_leaves_ctrl_c_to_the_driver(capfd):
    """Ctrl-C reaches the whole process group, workers still importing included: they must not
    die of it (with a KeyboardInterrupt traceback each); the driver shuts them down."""
    executor = LocalExecutor(1, 1)
    slot = executor._spawn(0)
    try:
        for _ in range(20):  # while it imports, before it can set up its own handling
            with contextlib.suppress(ProcessLookupError):
                os.kill(slot.process.pid, signal.SIGINT)
            time.sleep(0.02)
        executor._await_ready(slot)
        assert slot.process.is_alive()
    finally:
        executor._slots = [slot]
        executor.shutdown()
    assert "KeyboardInterrupt" not in capfd.readouterr().err
