"""Every algorithm through the real Tuner: simulated at scale, and ASHA on a real digits run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from basht.engine import COMPLETE, CONTINUE, LocalExecutor, SyntheticCurve, TrialTask, WorkloadRef
from basht.engine.simulated import SimulatedExecutor
from basht.space import Float, SearchSpace
from basht.store import Store
from basht.tune import ASHA, SHA, AsyncHyperband, Hyperband, RandomSearch, Tuner, trial_seed
from basht.tune.simulate import simulate
from tests.test_cli import _basht

ROOT = Path(__file__).resolve().parents[2]
SPACE = SearchSpace({"a": Float(0.0, 1.0), "b": Float(0.0, 1.0)})


@pytest.mark.parametrize("make", [SHA, Hyperband, ASHA, AsyncHyperband])
@pytest.mark.parametrize("workers", [1, 25])
def test_every_algorithm_runs_to_the_end_on_simulated_workers(make, workers):
    algo = make(SPACE, metric="accuracy", max_budget=27, eta=3, seed=0, max_trials=40 * workers)
    result = simulate(algo, workers, SyntheticCurve(seed=1))
    assert result.trials == 40 * workers
    assert result.counts.get("completed", 0) + result.counts.get("stopped", 0) == result.trials
    assert result.counts.get("running", 0) == 0 and result.counts.get("paused", 0) == 0
    assert result.best_value is not None


@pytest.mark.integration
def test_digits_asha_stores_stops_and_promotions_and_resumes_exactly(tmp_path):
    store_url = f"sqlite:///{tmp_path / 'asha.db'}"
    proc = _basht(
        "run", "-q", str(ROOT / "examples/digits-asha.yaml"), "--store", store_url, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "asha (promotion)" in proc.stdout
    store = Store(store_url)
    (run,) = store.list_runs()
    trials = store.trials(run.id)
    assert run.test_metrics["accuracy"] >= 0.9
    assert any(t.state == "stopped" for t in trials)
    # Each promotion (to `budget`, from the rung a third of it) came after a pause, from the
    # checkpoint written there, or as the trial reached its rung: it ran on, as the worker it
    # would have freed would have resumed it.
    promotions = {
        (d.trial, d.budget // 3)
        for d in store.decisions(run.id)
        if d.op == "suggest" and d.result == "resume"
    }
    pauses = {
        (t.number, c.epoch) for t in trials for c in store.checkpoints(t.id) if c.kind == "pause"
    }
    assert promotions & pauses and promotions - pauses

    # A trial that went 1 -> 3 epochs through a pause and a resume from its checkpoint reports
    # exactly what the same configuration reports when trained straight through.
    number = min(n for n, rung in promotions & pauses if rung == 1)
    row = trials[number]
    reports = [r for r in store.reports(run.id) if r.trial_id == row.id][:3]
    executor = LocalExecutor(workers=1, threads=1)
    executor.start()
    try:
        task = TrialTask(number, row.config, WorkloadRef("digits-mlp"), seed=trial_seed(0, number))
        executor.submit(task)
        straight = []
        deadline = time.monotonic() + 120
        while len(straight) < 3 and time.monotonic() < deadline:
            for event in executor.poll(1.0):
                if event.kind == "report":
                    straight.append(event.metrics)
                    executor.command(number, CONTINUE if len(straight) < 3 else COMPLETE)
    finally:
        executor.shutdown()
    assert [r.epoch for r in reports] == [1, 2, 3]
    assert [r.metrics for r in reports] == straight


ASK_TELL = {
    "random": lambda **kw: RandomSearch(SPACE, metric="accuracy", max_budget=9, **kw),
    "sha": lambda **kw: SHA(SPACE, metric="accuracy", max_budget=9, **kw),
    "hyperband": lambda **kw: Hyperband(SPACE, metric="accuracy", max_budget=9, **kw),
    "asha": lambda **kw: ASHA(SPACE, metric="accuracy", max_budget=9, **kw),
    "asha-stopping": lambda **kw: ASHA(
        SPACE, metric="accuracy", max_budget=9, variant="stopping", **kw
    ),
    "async-hyperband": lambda **kw: AsyncHyperband(SPACE, metric="accuracy", max_budget=9, **kw),
}


@pytest.mark.parametrize("name", ASK_TELL)
def test_telling_about_a_trial_never_suggested_names_it(name):
    algo = ASK_TELL[name](seed=0)
    algo.suggest()
    for tell in (
        lambda: algo.report(7, budget=1, value=0.5),
        lambda: algo.complete(7),
        lambda: algo.fail(7),
    ):
        with pytest.raises(ValueError, match="trial 7 was never suggested"):
            tell()


@pytest.mark.parametrize("name", ["sha", "hyperband", "asha"])
@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("nan_at", [0, 4, 8])
def test_a_nan_result_ranks_below_every_number(name, mode, nan_at):
    """Nine results at the first rung, one NaN: the top three are the best three numbers.
    (NaN compares false with everything, so unranked it could land anywhere in a rung.)"""
    algo = ASK_TELL[name](seed=0, eta=3, max_trials=9, mode=mode)
    trials = [algo.suggest() for _ in range(9)]
    for i, s in enumerate(trials):
        value = float("nan") if i == nan_at else (i if mode == "max" else -i)
        algo.report(s.trial_id, budget=s.budget, value=value)
    promoted = []
    while (s := algo.suggest()) is not None:
        assert s.resume
        promoted.append(s.trial_id)
    best = [i for i in range(9) if i != nan_at][-3:]
    assert sorted(promoted) == [trials[i].trial_id for i in best]


class _PausingExecutor(SimulatedExecutor):
    """The same virtual workers, as if every resume were free: each promotion pauses."""

    @property
    def resume_costs(self) -> bool:
        return False


def _one_worker_run(tmp_path: Path, make, executor_type: type[SimulatedExecutor]) -> dict:
    store = Store(f"sqlite:///{tmp_path / f'{make.__name__}-{executor_type.__name__}.db'}")
    run_id = store.create_run(store.add_experiment("t", {}), "t", "native", "local", tmp_path).id
    executor = executor_type(1, SyntheticCurve(seed=3), load_s=0.5, metric="accuracy")
    starts = []
    tuner = Tuner(
        make(SPACE, metric="accuracy", max_budget=9, eta=3, seed=0, max_trials=30),
        executor,
        store,
        run_id,
        WorkloadRef("synthetic"),
        checkpoint_dir=None,
        on_trial=lambda trial, worker, event: starts.append(trial) if event == "start" else None,
    )
    tuner.run()
    log = [(d.op, d.trial, d.budget, d.result) for d in store.decisions(run_id)]
    trials = {t.number: (t.state, t.value, t.budget) for t in store.trials(run_id)}
    return {"log": log, "trials": trials, "starts": len(starts), "makespan": executor.now()}


@pytest.mark.parametrize("make", [ASHA, SHA])
def test_a_trial_promoted_as_it_reaches_its_rung_runs_on_instead_of_pausing(tmp_path, make):
    """Where a resume costs a start, a trial the algorithm would resume at once is never paused:
    the algorithm makes the very same calls, and the run saves one start per such promotion."""
    in_place = _one_worker_run(tmp_path, make, SimulatedExecutor)
    pausing = _one_worker_run(tmp_path, make, _PausingExecutor)
    assert in_place["log"] == pausing["log"]  # the decision log replays either way
    assert in_place["trials"] == pausing["trials"]
    promotions = sum(op == "suggest" and result == "resume" for op, _, _, result in in_place["log"])
    saved = pausing["starts"] - in_place["starts"]
    assert 0 < saved <= promotions
    # One worker: the run is its epochs and its starts, each start 0.5 virtual seconds.
    assert pausing["makespan"] - in_place["makespan"] == pytest.approx(0.5 * saved)
