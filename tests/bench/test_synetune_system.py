"""Syne Tune as a system under test: its Tuner and local backend, one process per trial, for real;
and how the experiment file maps onto its schedulers."""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from basht.bench import PHASES, run_benchmark
from basht.bench.runner import make_system
from basht.errors import ExperimentError
from basht.experiment import Experiment
from basht.store import Store
from tests.cli import basht, process_alive

pytest.importorskip("syne_tune")


def _spec(spec: dict[str, Any], **search: Any) -> dict[str, Any]:
    spec["system"] = "synetune"
    spec["workload"]["params"] = {"epoch_s": 0.02}
    spec["search"].update(
        {"pruner": "asha", "min_budget": 1, "max_budget": 3, "eta": 3, "max_trials": 6, **search}
    )
    return spec


class Watch:
    """Looks at the system between phases; records what the energy monitor is told."""

    def __init__(self) -> None:
        self.sut: Any = None
        self.folder: Path | None = None
        self.assigned: list[tuple[int, int | None, int | None, str]] = []

    def factory(self, ctx: Any) -> Any:
        real_assign = ctx.monitor.assign

        def assign(slot: int, pid: int | None, trial: int | None, kind: str = "trial") -> None:
            self.assigned.append((slot, pid, trial, kind))
            real_assign(slot, pid, trial, kind)

        ctx.monitor.assign = assign
        self.sut = make_system(ctx)
        return self.sut

    def on_phase(self, timing: Any) -> None:
        if timing.name == "deploy":
            self.folder = self.sut.folder


@pytest.mark.integration
def test_two_workers_run_asha_trials_as_processes_through_all_seven_phases(spec, tmp_path):
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    watch = Watch()
    result = run_benchmark(
        Experiment.from_dict(_spec(spec)),
        results_root=tmp_path / "results",
        system_factory=watch.factory,
        on_phase=watch.on_phase,
    )
    store = Store(spec["store"])
    run = store.get_run(result.run_id)
    assert result.status == "completed", run.error
    assert [p.name for p in store.phases(result.run_id)] == list(PHASES)
    assert run.system == "synetune"
    assert run.algorithm == "syne tune ASHA(r=1, eta=3, stopping)"

    # As native's: one row per trial, numbered as Syne Tune suggested them, a report per epoch
    # with its train and validate time, load time, an end state.
    trials = store.trials(result.run_id)
    assert [t.number for t in trials] == list(range(6))
    assert {t.state for t in trials} <= {"completed", "stopped"}
    assert any(t.state == "completed" and t.budget == 3 for t in trials)
    assert {t.worker for t in trials} <= {0, 1}
    reports = store.reports(result.run_id)
    for t in trials:
        epochs = [r.epoch for r in reports if r.trial_id == t.id]
        assert epochs == list(range(1, t.budget + 1)), (t.number, epochs)
        assert t.load_s > 0 and t.train_s >= 0.02 * t.budget
        assert t.started_at <= t.ended_at
        assert set(t.config) == {"x", "n"} and isinstance(t.config["n"], int)

    # The best completed trial kept its final state; the test phase tested that model.
    best = max((t for t in trials if t.state == "completed"), key=lambda t: t.value)
    assert result.best_value == best.value
    assert result.test_metrics["accuracy"] == pytest.approx(best.value)
    kept = [c for c in store.checkpoints(best.id) if not c.deleted]
    assert len(kept) == 1 and Path(kept[0].path).exists()

    # Each trial ran in a process of its own, which the energy monitor was told about.
    started = [(pid, trial) for _, pid, trial, kind in watch.assigned if kind == "trial" and pid]
    assert {trial for _, trial in started} == set(range(6))
    pids = {pid for pid, _ in started}
    assert len(pids) == 6 and psutil.Process().pid not in pids
    assert any(kind == "test" for *_, kind in watch.assigned)

    # Undeploy: no trial process is left, nor Syne Tune's folder.
    assert not any(process_alive(pid) for pid in pids)
    # (multiprocessing's resource tracker, started for the test phase's process, serves this
    # Python process as long as it lives: it is not the run's)
    left = [
        " ".join(p.cmdline())
        for p in psutil.Process().children(recursive=True)
        if p.pid not in children_before
    ]
    assert [c for c in left if "multiprocessing.resource_tracker" not in c] == []
    assert watch.folder is not None and not watch.folder.exists()


@pytest.mark.integration
def test_a_trial_that_raises_fails_alone_with_its_reason(spec, tmp_path):
    spec = _spec(spec, pruner="none", max_trials=4, max_budget=2)
    spec["workload"]["params"] = {"epoch_s": 0.01, "fail_on": "bad"}
    spec["space"] = {"x": {"type": "choice", "values": [0.5, "bad"]}}
    spec["resources"] = {"workers": 2}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert result.status == "completed"
    trials = Store(spec["store"]).trials(result.run_id)
    assert len(trials) == 4
    assert {t.config["x"] for t in trials} == {0.5, "bad"}  # seed 0 draws both
    for t in trials:
        if t.config["x"] == "bad":
            assert t.state == "failed" and "configured to fail on 'bad'" in t.error
        else:
            assert t.state == "completed" and t.budget == 2


@pytest.mark.integration
def test_a_setting_without_a_counterpart_is_one_line(spec, tmp_path, write_spec):
    spec = _spec(spec, sampler="grid")
    spec["space"] = {"x": {"type": "choice", "values": [0.1, 0.2]}}
    path = write_spec(spec)
    proc = basht("run", "-q", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {path}: search.sampler: grid has no Syne Tune counterpart (random, tpe)"
    ]
    assert not (tmp_path / "basht.db").exists()  # refused before anything was stored


@pytest.mark.integration
def test_compare_runs_native_and_synetune_into_one_table(spec, tmp_path, write_spec):
    spec = _spec(spec, max_trials=4, max_budget=3)
    spec["name"] = "cmp-st"
    spec["workload"]["params"] = {"epoch_s": 0.01}
    spec["measure"] = {"sample_interval_s": 0.2}
    del spec["system"]
    proc = basht(
        "compare", str(write_spec(spec)), "--systems", "native,synetune", "-q", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    headers = [line for line in proc.stdout.splitlines() if "native" in line and "synetune" in line]
    assert len(headers) == 1  # one table, a column per system
    assert headers[0].index("native") < headers[0].index("synetune")
    assert "syne tune" in proc.stdout  # the algorithm row says what Syne Tune ran
    runs = Store(spec["store"]).list_runs()
    assert sorted(r.system for r in runs) == ["native", "synetune"]
    assert all(r.status == "completed" for r in runs)


# -- the mapping, without running trials ---------------------------------------------------------


def _experiment(spec: dict[str, Any], **search: Any) -> Experiment:
    return Experiment.from_dict(_spec(copy.deepcopy(spec), **search))


@pytest.mark.parametrize(
    ("search", "algorithm", "brackets"),
    [
        ({"pruner": "none"}, "syne tune RandomSearch (FIFO)", None),
        ({"pruner": "asha"}, "syne tune ASHA(r=1, eta=3, stopping)", 1),
        ({"pruner": "sha"}, "syne tune ASHA(r=1, eta=3, stopping)", 1),
        (
            {"pruner": "hyperband", "max_budget": 9},
            "syne tune ASHA(r=1, eta=3, brackets=3, stopping)",
            3,
        ),
        (
            {"pruner": "async-hyperband", "max_budget": 9},
            "syne tune ASHA(r=1, eta=3, brackets=3, stopping)",
            3,
        ),
        ({"sampler": "tpe", "pruner": "none"}, "syne tune TPE (FIFO)", None),
        (
            {"sampler": "tpe", "pruner": "asha", "min_budget": 2, "max_budget": 18},
            "syne tune BOHB(r=2, eta=3, stopping)",
            1,
        ),
    ],
)
def test_each_sampler_and_pruner_maps_to_a_syne_tune_scheduler(spec, search, algorithm, brackets):
    from syne_tune.optimizer.schedulers.asha import AsynchronousSuccessiveHalving

    from basht.bench.systems import synetune_map as sm

    exp = _experiment(spec, **search)
    assert sm.describe(exp) == algorithm
    space, _ = sm.config_space(exp)
    made = sm.scheduler(exp, space)
    assert made.random_seed == exp.seed
    assert made.metric_mode() == "max" and made.metric_names() == ["accuracy"]
    if brackets is None:
        assert not isinstance(made, AsynchronousSuccessiveHalving)
        return
    assert isinstance(made, AsynchronousSuccessiveHalving)
    assert len(made.brackets) == brackets and made.time_attr == sm.EPOCH
    assert made.max_t == exp.search.max_budget and made.reduction_factor == 3
    # The first bracket's rungs are the file's: min_budget * eta^k below the top.
    rungs = sorted(milestone for milestone, _ in made.brackets[0].rungs)
    assert rungs[0] == exp.search.min_budget


def test_the_space_maps_value_for_value_and_reads_back_as_bashts(spec):
    from syne_tune import config_space as cs

    from basht.bench.systems import synetune_map as sm

    spec = _spec(copy.deepcopy(spec))
    spec["space"] = {
        "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
        "width": {"type": "int", "low": 16, "high": 256, "log": True},
        "drop": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
        "batch": {"type": "choice", "values": [16, 32, 64]},
        "layers": {"type": "choice", "values": [[64], [64, 64], None]},
    }
    space, codec = sm.config_space(Experiment.from_dict(spec))
    assert isinstance(space["lr"], cs.Float) and isinstance(space["width"], cs.Integer)
    assert space["width"].lower == 16 and space["width"].upper == 256  # both included
    assert space["drop"].categories == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]  # Basht's own grid points
    assert space["batch"].categories == [16, 32, 64]
    assert space["layers"].categories == [0, 1, 2]  # values Syne Tune cannot hold: by index
    config = {"lr": 0.01, "width": 20, "drop": 0.3, "batch": 32, "layers": 1, "st_x": "y"}
    assert codec.basht_config(config) == {
        "lr": 0.01,
        "width": 20,
        "drop": 0.3,
        "batch": 32,
        "layers": [64, 64],
    }


def test_the_same_seed_draws_the_same_configurations_and_another_seed_others(spec):
    """RandomSearch and ASHA draw from numpy's global generator (not their `random_seed`): the
    run phase seeds it from the experiment seed."""
    from basht.bench.systems import synetune_map as sm
    from basht.bench.systems.raytune_map import seeded_driver

    def draws(exp: Experiment) -> list[dict[str, Any]]:
        space, codec = sm.config_space(exp)
        made = sm.scheduler(exp, space)
        with seeded_driver(exp.seed):
            return [codec.basht_config(made.suggest().config) for _ in range(6)]

    for pruner in ("none", "asha"):
        exp = _experiment(spec, pruner=pruner)
        assert draws(exp) == draws(exp)
        assert draws(exp) != draws(exp.model_copy(update={"seed": 1}))


def test_max_trials_is_a_scheduler_that_runs_out():
    """Syne Tune's own `max_num_trials_started` ends the loop at once, killing the trials that
    run; a scheduler that suggests no more lets them finish, as natively."""
    from syne_tune import config_space as cs
    from syne_tune.optimizer.baselines import RandomSearch

    from basht.bench.systems.synetune_events import LimitedScheduler

    inner = RandomSearch({"x": cs.uniform(0, 1)}, metrics=["accuracy"], random_seed=3)
    limited = LimitedScheduler(inner, 3, keeper=None)  # type: ignore[arg-type]
    assert [limited.suggest() is not None for _ in range(5)] == [True, True, True, False, False]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"search": {"sampler": "grid"}, "space": {"x": {"type": "choice", "values": [1, 2]}}},
            "search.sampler: grid has no Syne Tune counterpart (random, tpe)",
        ),
        (
            {
                "search": {
                    "objectives": [
                        {"metric": "accuracy", "mode": "max"},
                        {"metric": "loss", "mode": "min"},
                    ]
                }
            },
            "search.objectives: several objectives and constraints run with system native or "
            "optuna (system: synetune would be told one number per trial)",
        ),
        (
            {"resources": {"accelerator": "gpu"}},
            "resources.accelerator: gpu runs with system: native; system: synetune trains its "
            "trials on CPU here",
        ),
    ],
)
def test_what_syne_tune_cannot_run_is_refused_in_one_line(spec, change, message):
    spec = _spec(copy.deepcopy(spec))
    for key, value in change.items():
        spec[key].update(value)
    with pytest.raises(ExperimentError) as err:
        Experiment.from_dict(spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_trial_script_puts_the_drivers_import_path_first(tmp_path):
    from basht.bench.systems.synetune_map import SpaceCodec
    from basht.bench.systems.synetune_worker import TrialPlan, write_entry
    from basht.engine.messages import WorkloadRef

    plan = TrialPlan(
        workload=WorkloadRef("sleep", {}, 0),
        metric="accuracy",
        mode="max",
        target=None,
        max_budget=3,
        cpus=1,
        codec=SpaceCodec(("x",)),
        address=("127.0.0.1", 1),
        authkey=b"k",
    )
    script = write_entry(tmp_path, plan)
    text = script.read_text()
    assert "from basht.bench.systems.synetune_worker import main" in text
    assert f"sys.path[:0] = {[p for p in _driver_path()]!r}" in text
    assert (tmp_path / "plan.pkl").stat().st_mode & 0o777 == 0o600  # it holds the channel's key


def _driver_path() -> list[str]:
    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    return list(dict.fromkeys(p for p in paths if os.path.isdir(p)))
