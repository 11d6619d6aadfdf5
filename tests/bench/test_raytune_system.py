"""Ray Tune as a system under test, for real: a local Ray, a Tuner, pauses and resumes."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from basht.bench import PHASES, run_benchmark
from basht.bench.runner import make_system
from basht.experiment import Experiment
from basht.store import Store

pytest.importorskip("ray.tune")


def _ray_processes(marker: str) -> list[psutil.Process]:
    """Processes started for this Ray: their command line or TMPDIR names its directory."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        if process.pid == os.getpid():
            continue
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            environ = process.info["environ"] or {}
        except psutil.Error:
            continue
        if marker in cmdline or environ.get("TMPDIR") == marker:
            found.append(process)
    return found


class Watch:
    """Looks at the system between phases; records what the energy monitor is told."""

    def __init__(self) -> None:
        self.sut: Any = None
        self.temp_dir: Path | None = None
        self.ray_processes: list[psutil.Process] = []
        self.assigned: list[tuple[int, int | None, int | None, str]] = []
        self.node_addresses: list[str] = []
        self.niceness: set[int] = set()  # of the processes trials ran in

    def factory(self, ctx: Any) -> Any:
        real_assign = ctx.monitor.assign

        def assign(slot: int, pid: int | None, trial: int | None, kind: str = "trial") -> None:
            self.assigned.append((slot, pid, trial, kind))
            if pid and kind == "trial":
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.niceness.add(psutil.Process(pid).nice())
            real_assign(slot, pid, trial, kind)

        ctx.monitor.assign = assign
        self.sut = make_system(ctx)
        return self.sut

    def on_phase(self, timing: Any) -> None:
        if timing.name == "deploy":
            import ray

            self.temp_dir = self.sut.cluster.temp_dir
            self.ray_processes = _ray_processes(str(self.temp_dir))
            self.node_addresses = [node["NodeManagerAddress"] for node in ray.nodes()]


def _tune_draws(exp: Experiment, count: int) -> list[dict[str, Any]]:
    """The first configurations Tune's generator draws for `exp`, in order, as Basht's."""
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    from basht.bench.systems import raytune_map as tm

    space, samples = tm.param_space(exp)
    tune.register_trainable("draws", lambda config: None)
    generator = BasicVariantGenerator(random_state=exp.seed)
    generator.add_configurations(
        {"draws": {"run": "draws", "config": space, "num_samples": samples}}
    )
    return [tm.basht_config(generator.next_trial().config) for _ in range(count)]


@pytest.mark.integration
def test_hyperband_pauses_and_resumes_through_all_seven_phases(spec, tmp_path):
    spec["system"] = "raytune"
    spec["workload"]["params"] = {"epoch_s": 0.02}
    spec["search"].update(pruner="hyperband", max_budget=3, eta=3, max_trials=6)
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    watch = Watch()
    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=watch.factory,
        on_phase=watch.on_phase,
    )
    store = Store(spec["store"])
    assert result.status == "completed", store.get_run(result.run_id).error
    assert [p.name for p in store.phases(result.run_id)] == list(PHASES)
    assert "HyperBandScheduler" in store.get_run(result.run_id).algorithm

    trials = store.trials(result.run_id)
    assert [t.number for t in trials] == list(range(6))
    # Numbered in the order Tune's seeded generator drew the configurations, not the order two
    # actors announced them: the same file gives each configuration the same number and seed.
    assert [t.config for t in trials] == _tune_draws(Experiment.from_dict(spec), 6)
    assert {t.state for t in trials} <= {"completed", "stopped"}
    assert any(t.state == "completed" and t.budget == 3 for t in trials)
    reports = store.reports(result.run_id)
    for t in trials:
        # A resumed trial continues from its checkpoint: epochs count on, never repeat.
        epochs = [r.epoch for r in reports if r.trial_id == t.id]
        assert epochs == list(range(1, t.budget + 1)), (t.number, epochs)
        assert t.load_s > 0 and t.train_s >= 0.02 * t.budget
    paused = [c for t in trials for c in store.checkpoints(t.id) if c.kind == "pause"]
    assert paused, "HyperBand paused no trial"
    assert all(c.deleted for c in paused)

    best = max((t for t in trials if t.state == "completed"), key=lambda t: t.value)
    assert result.best_value == best.value
    assert result.test_metrics["accuracy"] == pytest.approx(best.value)
    # OC bills the Ray it ran on node by node: here the one node it started, for the job.
    from basht.energy.billing import ray_nodes

    (node,) = ray_nodes(store, result.run_id)
    assert node["attempt"] == 1 and node["left_at"] is None
    assert result.summary["ray_nodes"][0]["node"] == node["node"]

    # Each trial ran in a Ray actor process the energy monitor was told about; then the test.
    started = [(pid, trial) for _, pid, trial, kind in watch.assigned if kind == "trial" and pid]
    assert {trial for _, trial in started} == set(range(6))
    assert os.getpid() not in {pid for pid, _ in started}
    assert watch.niceness == {0}  # as native and Optuna workers, not Ray's default 15
    assert any(kind == "test" for *_, kind in watch.assigned)

    # Ray was imported before it started (by this module, as by Ray Tune's): still on loopback.
    assert watch.node_addresses == ["127.0.0.1"]

    # Undeploy: Ray is down, its processes are gone, its directory is removed.
    assert watch.ray_processes, "found no process of the run's Ray while it was up"
    assert watch.temp_dir is not None and not watch.temp_dir.exists()
    assert not _ray_processes(str(watch.temp_dir))
    gone, alive = psutil.wait_procs(watch.ray_processes, timeout=1)
    assert not alive
    children_after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert not (children_after - children_before)
    assert "TMPDIR" not in os.environ or os.environ["TMPDIR"] != str(watch.temp_dir)


@pytest.mark.integration
def test_a_plain_function_trial_that_reaches_its_budget_under_asha_completes(spec, tmp_path):
    """ASHA ends a trial on its result at max_t; the function says it completes before that
    result, so the trial is recorded completed, not stopped (as a class trainable's is)."""
    spec["system"] = "raytune"
    spec["workload"] = {"name": "tests.user_workloads:objective"}
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(pruner="asha", min_budget=1, max_budget=3, eta=3, max_trials=4)
    spec["resources"] = {"workers": 1}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert result.status == "completed", result.summary.get("error")
    trials = Store(spec["store"]).trials(result.run_id)
    assert any(t.budget == 3 for t in trials)  # the first trial of a rung always goes on
    for t in trials:
        assert t.state == ("completed" if t.budget == 3 else "stopped"), (t.number, t.budget)
    assert result.best_value == max(t.value for t in trials if t.budget == 3)


def test_a_trials_number_is_its_place_in_tunes_draws():
    from basht.bench.systems.raytune_map import trial_number

    assert trial_number("5a9f1_00000") == 0
    assert trial_number("5a9f1_00042") == 42
    assert trial_number("5a9f1e0c") is None  # another generator's ids: numbered as they come


def _watch_brackets(monkeypatch: pytest.MonkeyPatch) -> list[dict[int, int]]:
    """For each scheduler the runs make, each trial's ASHA bracket by trial number, as the
    scheduler picks it in Tune's driver."""
    from basht.bench.systems import raytune_map as tm

    runs: list[dict[int, int]] = []
    make = tm.scheduler

    def scheduler(experiment: Experiment) -> Any:
        made, picked = make(experiment), {}
        add = made.on_trial_add

        def on_trial_add(controller: Any, trial: Any) -> None:
            add(controller, trial)
            bracket = made._trial_info[trial.trial_id]
            picked[tm.trial_number(trial.trial_id)] = made._brackets.index(bracket)

        made.on_trial_add = on_trial_add
        runs.append(picked)
        return made

    monkeypatch.setattr(tm, "scheduler", scheduler)
    return runs


@pytest.mark.integration
def test_the_same_file_and_seed_give_the_same_trials_in_the_same_async_hyperband_brackets(
    spec, tmp_path, monkeypatch
):
    """AsyncHyperBand draws each trial's bracket from numpy's global generator in Tune's
    driver: unseeded, the same trials would land in other brackets, and be stopped otherwise."""
    spec["system"] = "raytune"
    spec["workload"]["params"] = {"epoch_s": 0.001}
    spec["search"].update(pruner="async-hyperband", min_budget=1, max_budget=9, eta=3, max_trials=8)
    spec["resources"] = {"workers": 1}
    exp = Experiment.from_dict(spec)
    store = Store(spec["store"])
    brackets = _watch_brackets(monkeypatch)
    trials = []
    for _ in range(2):
        result = run_benchmark(exp, results_root=tmp_path / "results")
        assert result.status == "completed", store.get_run(result.run_id).error
        trials.append(
            [(t.number, t.config, t.state, t.budget) for t in store.trials(result.run_id)]
        )
    first, second = brackets
    assert sorted(first) == list(range(8)) and len(set(first.values())) > 1
    assert second == first
    assert trials[1] == trials[0]
