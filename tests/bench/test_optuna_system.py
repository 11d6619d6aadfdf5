"""Optuna as a system under test, for real: a study on the run's SQLite file, two worker processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.bench import PHASES, run_benchmark
from basht.bench.runner import make_system
from basht.bench.systems.optuna_system import OWNER_ATTR
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.store import Store
from basht.store.urls import resolve_url
from tests.cli import basht, process_alive
from tests.postgres import Postgres, postgres_server

optuna = pytest.importorskip("optuna")


class Watch:
    """Wraps the system under test to look at it between phases; records what the monitor hears."""

    def __init__(self) -> None:
        self.sut: Any = None
        self.pids: list[int] = []
        self.study_trials: list[Any] = []
        self.storage_existed = False
        self.assigned: list[tuple[int, int | None, int | None, str]] = []
        self.brackets: list[int] = []

    def factory(self, ctx: Any) -> Any:
        monitor = ctx.monitor
        real_assign = monitor.assign

        def assign(slot: int, pid: int | None, trial: int | None, kind: str = "trial") -> None:
            self.assigned.append((slot, pid, trial, kind))
            real_assign(slot, pid, trial, kind)

        monitor.assign = assign
        self.sut = make_system(ctx)
        return self.sut

    def on_phase(self, timing: Any) -> None:
        if timing.name == "deploy":
            self.pids = [w.pid for w in self.sut.workers]
        elif timing.name == "run":
            self.storage_existed = self.sut.storage_file.exists()
            study = optuna.load_study(study_name=self.sut.study_name, storage=self.sut.storage_url)
            self.study_trials = study.get_trials(deepcopy=False)
            experiment = self.sut.ctx.experiment
            if experiment.search.pruner == "hyperband":
                self.brackets = _brackets(experiment, study)


def _spec(spec: dict[str, Any], **search: Any) -> dict[str, Any]:
    spec["system"] = "optuna"
    spec["workload"]["params"] = {"epoch_s": 0.02}
    spec["search"].update(
        {"pruner": "asha", "min_budget": 1, "max_budget": 3, "eta": 3, "max_trials": 8, **search}
    )
    return spec


@pytest.mark.integration
def test_two_workers_share_the_study_through_all_seven_phases(spec, tmp_path):
    watch = Watch()
    result = run_benchmark(
        Experiment.from_dict(_spec(spec)),
        results_root=tmp_path / "results",
        system_factory=watch.factory,
        on_phase=watch.on_phase,
    )
    store = Store(spec["store"])
    assert result.status == "completed"
    assert [p.name for p in store.phases(result.run_id)] == list(PHASES)
    assert "SuccessiveHalvingPruner" in store.get_run(result.run_id).algorithm

    # Two spawned processes worked one study on the run's own SQLite file.
    assert len(watch.pids) == 2 and all(p > 0 for p in watch.pids)
    assert watch.storage_existed
    assert len(watch.study_trials) == 8
    assert {t.number for t in watch.study_trials} == set(range(8))

    trials = store.trials(result.run_id)
    assert [t.number for t in trials] == list(range(8))
    assert {t.state for t in trials} <= {"completed", "stopped"}
    assert any(t.state == "completed" for t in trials)
    assert {t.worker for t in trials} <= {0, 1}
    reports = store.reports(result.run_id)
    for t in trials:
        epochs = [r.epoch for r in reports if r.trial_id == t.id]
        assert epochs == list(range(1, t.budget + 1))
        assert t.load_s > 0 and t.train_s >= 0.02 * t.budget
        assert t.started_at <= t.ended_at
    # Optuna's verdicts match what the store says happened.
    states = {t.number: t.state.name for t in watch.study_trials}
    for t in trials:
        assert states[t.number] == {"completed": "COMPLETE", "stopped": "PRUNED"}[t.state]

    # The best completed trial kept its final state, and its model was tested.
    best = max((t for t in trials if t.state == "completed"), key=lambda t: t.value)
    assert result.best_value == best.value
    assert result.test_metrics["accuracy"] == pytest.approx(best.value)
    kept = [c for c in store.checkpoints(best.id) if not c.deleted]
    assert len(kept) == 1 and Path(kept[0].path).exists()

    # The energy monitor heard which trial ran in which worker process, and when it ended.
    started = [(slot, pid, trial) for slot, pid, trial, kind in watch.assigned if trial is not None]
    assert {trial for _, _, trial in started if trial is not None} >= set(range(8))
    assert {pid for _, pid, _ in started} <= set(watch.pids)
    assert any(pid is None for _, pid, _, _ in watch.assigned)
    assert any(kind == "test" for *_, kind in watch.assigned)

    # Undeploy left nothing: no worker process, no study file.
    assert not any(process_alive(p) for p in watch.pids)
    assert not watch.sut.storage_file.exists()
    assert not list(Path(result.results_dir).glob("optuna.db*"))


@pytest.mark.integration
def test_a_plain_function_workload_reports_through_optuna(spec, tmp_path):
    spec = _spec(spec, max_trials=4, pruner="none")
    spec["workload"] = {"name": "tests.user_workloads:objective"}
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    trials = store.trials(result.run_id)
    assert [t.state for t in trials] == ["completed"] * 4
    assert result.best_value == pytest.approx(3 * result.best_config["x"])
    assert result.test_metrics == {}  # as natively: a function has no test split


@pytest.mark.integration
def test_a_grid_runs_every_configuration_once_and_a_trial_that_raises_fails_alone(spec, tmp_path):
    spec = _spec(spec, sampler="grid", max_trials=None, pruner="none", max_budget=2)
    spec["workload"] = {"name": "tests.user_workloads:Counter", "params": {}}
    spec["space"] = {
        "kind": {"type": "choice", "values": ["ok", "boom"]},
        "x": {"type": "choice", "values": [0.5, 1.0]},
    }
    spec["resources"] = {**spec.get("resources", {}), "memory_per_worker_mb": 1536}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    trials = Store(spec["store"]).trials(result.run_id)
    reports = Store(spec["store"]).reports(result.run_id)
    assert reports and all(r.metrics["memory_mb"] == 1536 for r in reports)
    configs = sorted((t.config["kind"], t.config["x"]) for t in trials)
    assert configs == [("boom", 0.5), ("boom", 1.0), ("ok", 0.5), ("ok", 1.0)]
    assert result.status == "completed"
    for t in trials:
        if t.config["kind"] == "boom":
            assert t.state == "failed" and "this configuration always crashes" in t.error
        else:
            assert t.state == "completed" and t.value == pytest.approx(2 * t.config["x"])
    assert result.best_config == {"kind": "ok", "x": 1.0}


@pytest.mark.integration
def test_a_hung_trial_is_aborted_after_the_grace_and_its_worker_replaced(spec, tmp_path):
    """Optuna waits for a running trial however long it takes; Basht's grace after the search
    ended kills the worker it hangs in, records the trial aborted and starts a new worker."""
    flag = tmp_path / "hung.pid"
    spec = _spec(spec, pruner="none", max_trials=1000, time_budget_s=3, stop_grace_s=1)
    spec["workload"] = {
        "name": "tests.tune.hanging_workloads:HangsOnce",
        "params": {"flag": str(flag), "epoch_s": 0.1, "hang_at": 2},
    }
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    path = tmp_path / "hang.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = basht("run", "-q", str(path), cwd=tmp_path, timeout=180)  # waits 600 s without
    assert done.returncode == 0, done.stderr[-2000:]

    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "completed" and run.stop_reason == "time budget of 3 s used"
    (search,) = [p for p in store.phases(run.id) if p.name == "run"]
    assert 3 <= search.end - search.start < 3 + 1 + 30  # the budget, the grace, a new worker
    trials = store.trials(run.id)
    (hung,) = [t for t in trials if t.state == "aborted"]
    assert hung.budget == 1 and hung.error == (
        "no report within search.stop_grace_s (1 s) after the search ended "
        "(time budget of 3 s used)"
    )
    assert hung.train_s >= 1.0  # the epoch it hung in held its worker past the grace
    assert not process_alive(int(flag.read_text()))
    rest = [t for t in trials if t is not hung]
    assert any(t.state == "completed" for t in rest)
    assert {t.state for t in rest} <= {"completed", "stopped", "aborted"}
    (results,) = (tmp_path / "results").glob("*/results.json")
    summary = json.loads(results.read_text())
    assert summary["status"] == "completed" and summary["test_metrics"]  # on a new worker


def test_a_non_local_executor_is_a_one_line_error(spec, tmp_path):
    spec = _spec(spec)
    spec["executor"] = "ray"
    with pytest.raises(BashtError, match="applies to system: native only"):
        run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")


def _brackets(exp: Experiment, study: Any) -> list[int]:
    """Each trial's HyperbandPruner bracket, as Optuna's own pruner computes it for the study."""
    from basht.bench.systems.optuna_map import make_pruner

    pruner = make_pruner(exp)
    pruner._try_initialization(study)
    return [pruner._get_bracket_id(study, t) for t in study.get_trials(deepcopy=False)]


@pytest.mark.integration
def test_the_same_file_and_seed_give_the_same_trials_in_the_same_hyperband_brackets(spec, tmp_path):
    """HyperbandPruner hashes the study's name into each trial's bracket: a name that followed
    the run would put the same trials in other brackets, and prune them otherwise."""
    spec = _spec(spec, pruner="hyperband", max_budget=9, max_trials=8)
    spec["workload"]["params"] = {"epoch_s": 0.001}
    spec["resources"] = {"workers": 1}
    exp = Experiment.from_dict(spec)
    store = Store(spec["store"])
    runs = []
    for _ in range(2):
        watch = Watch()
        result = run_benchmark(
            exp,
            results_root=tmp_path / "results",
            system_factory=watch.factory,
            on_phase=watch.on_phase,
        )
        assert result.status == "completed"
        trials = [(t.number, t.config, t.state, t.budget) for t in store.trials(result.run_id)]
        runs.append((watch.sut.study_name, watch.brackets, trials))
    (first_name, first_brackets, first_trials), (name, brackets, trials) = runs
    assert first_name == name == "basht-t-seed0"
    assert len(first_brackets) == 8 and len(set(first_brackets)) > 1
    assert brackets == first_brackets
    assert trials == first_trials


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


@pytest.mark.integration
def test_on_a_shared_database_a_left_behind_study_is_replaced_and_one_in_use_is_not(
    spec, tmp_path, postgres
):
    """Every run's study sits in a server store's one database: a study whose run no longer
    runs (killed before its undeploy) gives its name up; a running run's keeps it, and the new
    run's study takes a name of its own."""
    url = postgres.create_database("optuna")
    spec = _spec(spec, pruner="none", max_budget=1, max_trials=2)
    spec["store"] = url
    spec["resources"] = {"workers": 1}
    store = Store(url)
    other = store.create_run(store.add_experiment("t", {}), "t", "optuna", "local", tmp_path).id
    storage = resolve_url(url).render_as_string(hide_password=False)
    optuna.create_study(study_name="basht-t-seed0", storage=storage).set_user_attr(
        OWNER_ATTR, other
    )

    def run() -> tuple[str, str]:
        watch = Watch()
        result = run_benchmark(
            Experiment.from_dict(spec),
            results_root=tmp_path / "results",
            system_factory=watch.factory,
        )
        assert result.status == "completed"
        return watch.sut.study_name, result.run_id

    name, run_id = run()
    assert name == f"basht-t-seed0-{run_id}"
    assert optuna.get_all_study_names(storage) == ["basht-t-seed0"]  # the running run's, kept

    store.finish_run(other, "interrupted")
    name, _ = run()
    assert name == "basht-t-seed0"
    assert optuna.get_all_study_names(storage) == []


@pytest.mark.integration
def test_a_multi_objective_study_is_told_every_objective_and_the_violation(spec, tmp_path):
    """As Optuna users must run one: its sampler (NSGA-II), no pruning, every trial to the
    maximum budget; the study hears each trial's objectives, the measured one included, and its
    constraint violation, and the run reports the same front native would."""
    spec = _spec(spec, max_trials=6, sampler="nsga2")
    for key in ("metric", "mode"):
        spec["search"].pop(key, None)
    spec["search"]["objectives"] = [
        {"metric": "accuracy", "mode": "max"},
        {"metric": "train_time_s", "mode": "min"},
    ]
    spec["search"]["constraints"] = [{"metric": "train_time_s", "max": 60.0}]
    watch = Watch()
    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=watch.factory,
        on_phase=watch.on_phase,
    )
    assert result.status == "completed"
    assert Store(spec["store"]).get_run(result.run_id).algorithm == (
        "optuna NSGAIISampler, no pruning (2 objectives)"
    )
    told = [t for t in watch.study_trials if t.state.name == "COMPLETE"]
    assert len(told) == 6  # nothing pruned
    key = optuna.samplers._base._CONSTRAINTS_KEY
    for trial in told:
        accuracy, time_s = trial.values
        assert 0 <= accuracy <= 1 and time_s > 0
        assert trial.system_attrs[key] == [0.0]  # well under the cap: feasible
    section = result.summary["objectives"]
    assert section["front"] and section["chosen"] == result.summary["best"]["trial"]
    front_values = {f["trial"]: f["values"] for f in section["front"]}
    study_values = {t.number: t.values for t in told}
    for number, values in front_values.items():
        assert [values["accuracy"], values["train_time_s"]] == pytest.approx(study_values[number])
