"""Once a limit ends the search, a trial that does not reach its next report within
`search.stop_grace_s` is aborted, and the run ends instead of waiting for it for ever."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from heapq import heappop, heappush
from pathlib import Path

import pytest
import yaml

from basht.engine import COMPLETE, CONTINUE, PAUSE, STOP, TrialEvent, TrialTask, WorkloadRef
from basht.engine.base import Executor
from basht.errors import ExperimentError
from basht.experiment import Experiment
from basht.space import Float, SearchSpace
from basht.store import Store
from basht.tune import RandomSearch, Tuner
from tests.cli import basht, process_alive

_ENDS = {STOP: "stopped", PAUSE: "paused", COMPLETE: "completed"}


class PacedExecutor(Executor):
    """Virtual workers on a virtual clock that, unlike the simulated executor, waits out a poll's
    timeout as a real executor does: epoch `e` of trial `t` takes `epoch_s(t, e)` seconds, and an
    infinite one never ends (a hung step). Each report's accuracy is its epoch."""

    def __init__(self, workers: int, epoch_s: Callable[[int, int], float]):
        self.clock, self.free, self.epoch_s = 0.0, workers, epoch_s
        self.due: list[tuple[float, int, int]] = []  # (when, trial, epoch) of coming reports
        self.epochs: dict[int, int] = {}
        self.ended: list[TrialEvent] = []
        self.aborted: list[tuple[int, float]] = []

    def now(self) -> float:
        return self.clock

    @property
    def idle_workers(self) -> int:
        return self.free

    def submit(self, task: TrialTask) -> int:
        self.free -= 1
        self._start_epoch(task.trial_id, task.start_epoch + 1)
        return 0

    def _start_epoch(self, trial_id: int, epoch: int) -> None:
        self.epochs[trial_id] = epoch
        seconds = self.epoch_s(trial_id, epoch)
        if math.isfinite(seconds):
            heappush(self.due, (self.clock + seconds, trial_id, epoch))

    def command(self, trial_id: int, command: str, path: str | None = None) -> None:
        if command == CONTINUE:
            self._start_epoch(trial_id, self.epochs[trial_id] + 1)
            return
        epoch = self.epochs[trial_id]
        self.ended.append(TrialEvent(_ENDS[command], trial_id, 0, epoch, path=path, at=self.clock))
        self.free += 1

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        if self.ended:
            events, self.ended = self.ended, []
            return events
        assert self.clock < 1e4, "the run never ended"
        until = self.clock + (timeout_s or 0.0)
        if not self.due or self.due[0][0] > until:
            self.clock = until
            return []
        at, trial_id, epoch = heappop(self.due)
        self.clock = at
        seconds = self.epoch_s(trial_id, epoch)
        return [TrialEvent("report", trial_id, 0, epoch, {"accuracy": float(epoch)}, 0.0, seconds)]

    def abort(self, trial_id: int) -> None:
        self.aborted.append((trial_id, self.clock))
        self.free += 1


def _tune(
    tmp_path: Path, executor: PacedExecutor, workers: int = 2, **limits: float | None
) -> tuple[Tuner, Store, str]:
    """The Tuner of a random search over `executor`, run to its end with these limits."""
    store = Store(f"sqlite:///{tmp_path / 'grace.db'}")
    run_id = store.create_run(store.add_experiment("t", {}), "t", "native", "local", tmp_path).id
    space = SearchSpace({"x": Float(0.0, 1.0)})
    tuner = Tuner(
        RandomSearch(space, metric="accuracy", max_budget=3),
        executor,
        store,
        run_id,
        WorkloadRef("paced"),
        checkpoint_dir=tmp_path,
        **limits,
    )
    tuner.run()
    return tuner, store, run_id


def test_a_hung_trial_is_aborted_once_the_grace_after_the_time_budget_is_out(tmp_path):
    # Trial 0 hangs in epoch 2; trial 1's epochs take 7 s, so its second report (14 s) comes
    # within the grace and is kept.
    ex = PacedExecutor(2, lambda t, e: 7.0 if t == 1 else 1.0 if e == 1 else math.inf)
    tuner, store, run_id = _tune(tmp_path, ex, time_budget_s=10, stop_grace_s=5)
    assert tuner.status.stop_reason == "time budget of 10 s used"
    assert ex.aborted == [(0, 15.0)] and ex.clock == 15.0
    hung, slow = store.trials(run_id)
    assert hung.state == "aborted" and hung.ended_at == 15.0
    assert hung.error == (
        "no report within search.stop_grace_s (5 s) after the search ended "
        "(time budget of 10 s used)"
    )
    assert hung.budget == 1 and hung.train_s == pytest.approx(1.0 + 14.0)  # the cut epoch counts
    assert slow.state == "stopped" and slow.budget == 2 and slow.value == 2.0
    assert {k: v for k, v in tuner.status.counts.items() if v} == {"aborted": 1, "stopped": 1}


def test_a_hung_trial_is_aborted_after_a_target_ends_the_search_too(tmp_path):
    ex = PacedExecutor(2, lambda t, e: 1.0 if t == 1 or e == 1 else math.inf)
    tuner, store, run_id = _tune(tmp_path, ex, target=2.0, stop_grace_s=5)
    assert tuner.status.stop_reason == "target 2.0 reached"
    assert [t.state for t in store.trials(run_id)] == ["aborted", "completed"]
    assert ex.aborted == [(0, 7.0)]  # the target came at 2 s


@pytest.mark.parametrize("grace, state, ended", [(None, "stopped", 100.0), (5, "aborted", 15.0)])
def test_a_slow_epoch_is_waited_for_without_a_grace_and_cut_off_with_one(
    tmp_path, grace, state, ended
):
    ex = PacedExecutor(1, lambda t, e: 100.0)
    tuner, store, run_id = _tune(tmp_path, ex, time_budget_s=10, stop_grace_s=grace)
    (trial,) = store.trials(run_id)
    assert trial.state == state and trial.ended_at == ended == ex.clock


def test_stop_grace_s_defaults_to_a_minute_and_is_checked(spec):
    assert Experiment.from_dict(spec).search.stop_grace_s == 60.0
    spec["search"]["stop_grace_s"] = None
    assert Experiment.from_dict(spec).search.stop_grace_s is None
    for bad, expected in [(-1, "greater than or equal to 0"), (math.inf, "a finite number")]:
        spec["search"]["stop_grace_s"] = bad
        with pytest.raises(
            ExperimentError, match=f"search.stop_grace_s: Input should be .*{expected}"
        ):
            Experiment.from_dict(spec)


@pytest.mark.integration
def test_a_real_run_with_a_hung_trial_ends_at_its_time_budget_and_keeps_the_rest(spec, tmp_path):
    flag = tmp_path / "hung.pid"
    spec["workload"] = {
        "name": "tests.tune.hanging_workloads:HangsOnce",
        "params": {"flag": str(flag), "epoch_s": 0.1, "hang_at": 2},
    }
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=1000, max_budget=3, time_budget_s=3, stop_grace_s=1)
    path = tmp_path / "hang.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = basht("run", "-q", str(path), cwd=tmp_path, timeout=120)  # waits for ever without
    assert done.returncode == 0, done.stderr[-2000:]

    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "completed" and run.stop_reason == "time budget of 3 s used"
    (search,) = [p for p in store.phases(run.id) if p.name == "run"]
    assert 3 <= search.end - search.start < 3 + 1 + 15  # the budget, the grace, a new worker
    trials = store.trials(run.id)
    hung = [t for t in trials if t.state == "aborted"]
    assert len(hung) == 1 and hung[0].budget == 1
    assert hung[0].error == (
        "no report within search.stop_grace_s (1 s) after the search ended "
        "(time budget of 3 s used)"
    )
    assert hung[0].train_s >= 1.0  # the epoch it hung in held its worker past the grace
    rest = [t for t in trials if t is not hung[0]]
    assert rest and {t.state for t in rest} <= {"completed", "stopped"}
    assert any(t.state == "completed" for t in rest)
    assert not process_alive(int(flag.read_text()))  # its worker was killed, not left behind

    (results,) = (tmp_path / "results").glob("*/results.json")
    summary = json.loads(results.read_text())
    assert summary["status"] == "completed" and summary["trial_counts"]["aborted"] == 1
    assert summary["stop_reason"] == "time budget of 3 s used"
    assert summary["best"]["value"] is not None and summary["test_metrics"]
    assert {m.name for m in store.metrics(run.id)} >= {"JCT", "WTT"}


@pytest.mark.integration
def test_resume_runs_a_trial_the_grace_aborted_again(spec, tmp_path):
    """A run whose only result hung has nothing to test and fails; `basht resume` restarts the
    aborted trial, as it does one Ctrl-C cut short (the algorithm never heard it end)."""
    spec["workload"] = {
        "name": "tests.tune.hanging_workloads:HangsOnce",
        "params": {"flag": str(tmp_path / "hung.pid"), "epoch_s": 0.1, "hang_at": 1},
    }
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=2, max_budget=1, time_budget_s=2, stop_grace_s=1)
    spec["resources"] = {"workers": 1}
    path = tmp_path / "hang.yaml"
    path.write_text(yaml.safe_dump(spec))
    failed = basht("run", "-q", str(path), cwd=tmp_path, timeout=120)
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines()[-1] == (
        "error: no trial produced a result before the search ended (time budget of 2 s used), "
        "so there is nothing to test"
    )
    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "failed" and [t.state for t in store.trials(run.id)] == ["aborted"]

    resumed = basht("resume", run.id, "--store", spec["store"], cwd=tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    trials = Store(spec["store"]).trials(run.id)
    assert [(t.state, t.error) for t in trials] == [("completed", None)] * 2
