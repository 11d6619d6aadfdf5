"""`basht resume`: an interrupted ASHA run continues from the store and its decision log."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

from basht.space import Float, SearchSpace
from basht.store import Store
from basht.tune import ASHA, replay
from tests.cli import ROOT, run_in_background, wait_for_trials
from tests.cli import basht as _basht


def _asha(max_trials: int, sampler: str = "random") -> ASHA:
    """A fresh ASHA as the tests' experiments describe it, to replay their decision logs on."""
    space = SearchSpace({"x": Float(-1.0, 1.0)})
    return ASHA(
        space,
        metric="accuracy",
        min_budget=1,
        max_budget=9,
        eta=3,
        seed=0,
        max_trials=max_trials,
        sampler=sampler,
    )


@pytest.mark.integration
@pytest.mark.parametrize("sampler", ["random", "tpe"])  # tpe: its model from 10 results on
def test_an_interrupted_asha_run_resumes_to_the_end(spec, tmp_path, sampler):
    spec["workload"]["params"] = {"epoch_s": 0.05}
    spec["space"] = {"x": {"type": "float", "low": -1.0, "high": 1.0}}
    spec["search"].update(
        sampler=sampler, pruner="asha", min_budget=1, max_budget=9, eta=3, max_trials=24
    )
    path = tmp_path / "asha.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = run_in_background(path, tmp_path)
    wait_for_trials(
        spec["store"], tmp_path / "basht.db", lambda store, run: len(store.trials(run.id)) >= 8
    )
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130

    store = Store(spec["store"])
    (run,) = store.list_runs()
    before = {t.number: (t.state, t.value, t.budget) for t in store.trials(run.id)}
    finished_before = {n: v for n, v in before.items() if v[0] in ("completed", "stopped")}
    assert run.status == "interrupted" and 8 <= len(before) < 24

    if sampler == "random":  # a kill can leave the store naming checkpoints already deleted
        for t in store.trials(run.id):
            for c in store.checkpoints(t.id):
                Path(c.path).unlink(missing_ok=True)
    plots = ["--plots"] if sampler == "random" else []  # once: the whole run's, as `run` writes
    done = _basht("resume", run.id, "--store", spec["store"], "-q", *plots, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{sampler} sampling, pruner asha (promotion)" in done.stdout
    if plots:
        assert (Path(store.get_run(run.id).results_dir) / "best_so_far.png").is_file()

    store = Store(spec["store"])
    run = store.get_run(run.id)
    trials = store.trials(run.id)
    assert run.status == "completed"
    assert sorted(t.number for t in trials) == list(range(24))
    assert {t.state for t in trials} <= {"completed", "stopped"}
    for number, (state, value, _) in finished_before.items():
        # What had finished stays finished (paused ones may have been promoted since).
        if state == "completed":
            assert (trials[number].state, trials[number].value) == ("completed", value)
    # The whole log, before and after the interruption, replays on a fresh algorithm.
    algo = replay(_asha(max_trials=24, sampler=sampler), store.decisions(run.id))
    assert algo.suggest() is None
    # ...drawing the very configurations the run trained, model-based ones included.
    assert [algo.trials[t.number].config for t in trials] == [t.config for t in trials]
    # The same seed's random draws: the run's own with `random`, not with `tpe` (its model).
    at_random = ASHA(SearchSpace({"x": Float(-1.0, 1.0)}), metric="accuracy", seed=0)
    drawn = [at_random.new.draw()[1] for _ in trials]
    assert (drawn == [t.config for t in trials]) == (sampler == "random")
    assert {p.attempt for p in store.phases(run.id)} == {1, 2}
    # Promotions are in the store: trials trained past the first rung from a resumed checkpoint.
    assert any(d.op == "suggest" and d.result == "resume" for d in store.decisions(run.id))
    assert any(t.budget == 9 for t in trials)


@pytest.mark.integration
def test_a_run_killed_after_promoting_a_trial_where_it_stands_resumes_it_past_its_rung(
    spec, tmp_path
):
    """One worker: a trial that reaches its rung as the best there is promoted where it runs,
    with no pause and no checkpoint. Killed before it gets to the next rung, the resumed run
    trains it again from scratch and on past the rung it was promoted from (the algorithm's
    answer there, a pause, was overtaken by the promotion)."""
    spec["workload"]["params"] = {"epoch_s": 0.3}  # the two epochs to the next rung: 0.6 s
    spec["resources"] = {"workers": 1}
    spec["space"] = {"x": {"type": "float", "low": -1.0, "high": 1.0}}
    spec["search"].update(pruner="asha", min_budget=1, max_budget=9, eta=3, max_trials=12)
    path = tmp_path / "asha.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = run_in_background(path, tmp_path)
    in_place: list[int] = []

    def promoted_where_it_stands(store: Store, run) -> bool:
        for d in store.decisions(run.id):
            if (d.op, d.result, d.budget) == ("suggest", "resume", 3):
                trial = next(t for t in store.trials(run.id) if t.number == d.trial)
                if trial.state == "running" and not store.checkpoints(trial.id):
                    in_place.append(d.trial)
                    return True
        return False

    try:
        wait_for_trials(spec["store"], tmp_path / "basht.db", promoted_where_it_stands)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert store.get_run(run.id).status == "running"  # killed outright

    done = _basht("resume", run.id, "--store", spec["store"], "-q", "--no-plots", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trials = {t.number: t for t in Store(spec["store"]).trials(run.id)}
    assert sorted(trials) == list(range(12))
    assert trials[in_place[0]].budget >= 3
    algo = replay(_asha(max_trials=12), store.decisions(run.id))
    assert algo.suggest() is None


@pytest.mark.integration
def test_a_completed_run_cannot_be_resumed(spec, write_spec, tmp_path):
    spec["search"].update(max_trials=2, max_budget=1)
    assert _basht("run", "-q", str(write_spec(spec)), cwd=tmp_path).returncode == 0
    again = _basht("resume", "latest", "--store", spec["store"], cwd=tmp_path)
    assert again.returncode == 2 and "nothing to resume" in again.stderr


@pytest.mark.integration
def test_a_run_whose_driver_lives_is_refused_and_a_killed_ones_is_resumed_at_once(spec, tmp_path):
    """A SIGKILLed driver prints no hint: `basht resume` in the same folder finds the store the
    experiment named (not basht.db) and takes over at once, its driver's process being gone."""
    # Epochs long enough that the run is still going when `basht resume` (a new process, slow to
    # start on a busy machine) asks about it.
    spec["workload"]["params"] = {"epoch_s": 0.5}
    spec["search"].update(pruner="asha", min_budget=1, max_budget=9, eta=3, max_trials=12)
    db = tmp_path / "stores" / "elsewhere.db"
    spec["store"] = f"sqlite:///stores/{db.name}"  # relative: the pointer makes it absolute
    path = tmp_path / "asha.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = run_in_background(path, tmp_path)
    url = f"sqlite:///{db}"
    try:
        wait_for_trials(url, db, lambda store, run: len(store.trials(run.id)) >= 1)
        (run,) = Store(url).list_runs()
        refused = _basht("resume", run.id, "-q", cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        assert f"run {run.id} is still running: its driver (pid {proc.pid}) lives" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        proc.kill()  # a driver killed outright: the store still says it runs
        # Its workers share its stderr; they end once its pipes fail, quietly.
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert Store(url).get_run(run.id).status == "running"

    done = _basht("resume", run.id[:-3], "-q", "--no-plots", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trials = Store(url).trials(run.id)
    assert sorted(t.number for t in trials) == list(range(12))
    assert not (tmp_path / "basht.db").exists()
    # Also from elsewhere, by its results folder: a completed run has nothing to resume.
    again = _basht("resume", str(tmp_path / "results" / run.id), cwd=ROOT)
    assert again.returncode == 2 and "nothing to resume" in again.stderr, again.stderr


def test_an_attempt_killed_in_deploy_is_not_numbered_again(tmp_path):
    """Phases are stored when they end: a driver killed during deploy left none, but its plan
    instances name attempt 1, so the resumed attempt is the second."""
    from basht.bench.runner import last_attempt

    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    run = store.create_run(store.add_experiment("t", {}), "t", "native", "local", tmp_path)
    assert last_attempt(store, run.id) == 0
    store.add_instance(run.id, 0, 0, [0, 1], 100.0, attempt=1)
    assert last_attempt(store, run.id) == 1
    store.add_phase(run.id, "deploy", 200.0, 201.0, False, None, 2)
    assert last_attempt(store, run.id) == 2
