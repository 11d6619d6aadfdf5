"""The runner: seven phases in order, undeploy after any failure, everything in the store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from basht.bench import PHASES, BestTrial, RunContext, run_benchmark
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.store import Store


class FakeSystem:
    """Records the calls; fails in `fail_in` if given."""

    name = "fake"

    def __init__(self, ctx: RunContext, calls: list[str], fail_in: str | None = None):
        self.ctx, self.calls, self.fail_in = ctx, calls, fail_in

    def _call(self, phase: str) -> None:
        self.calls.append(phase)
        if phase == self.fail_in:
            raise BashtError(f"{phase} broke")

    def deploy(self) -> None:
        self._call("deploy")

    def setup(self) -> None:
        self._call("setup")

    def run(self) -> None:
        self._call("run")

    def collect_results(self) -> BestTrial:
        self._call("collect_results")
        return BestTrial(0, {"x": 1}, 0.5, 1)

    def test(self, best: BestTrial) -> dict[str, float]:
        self._call("test")
        return {"accuracy": 0.5}

    def collect_metrics(self) -> dict[str, Any]:
        self._call("collect_metrics")
        return {}

    def undeploy(self) -> None:
        self._call("undeploy")


def test_phases_run_in_order_and_are_stored(spec, tmp_path):
    calls: list[str] = []
    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=lambda ctx: FakeSystem(ctx, calls),
    )
    assert calls == list(PHASES)
    assert result.status == "completed"
    phases = Store(spec["store"]).phases(result.run_id)
    assert [p.name for p in phases] == list(PHASES)
    assert all(p.end >= p.start and p.duration_s >= 0 and not p.aborted for p in phases)
    assert "JCT" in result.metrics


def test_the_bill_runs_until_undeploy_has_released_everything(spec, tmp_path):
    """OC is computed in collect_metrics, before undeploy, and brought up to undeploy's end."""
    from basht.energy.billing import job_cost_usd
    from basht.energy.pricing import price_from_spec

    class SlowToRelease(FakeSystem):
        def undeploy(self) -> None:
            super().undeploy()
            time.sleep(1.5)

    spec["measure"] = {"price": {"usd_per_hour": 3600.0}}  # a dollar a second
    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=lambda ctx: SlowToRelease(ctx, []),
    )
    phases = {p.name: p for p in Store(spec["store"]).phases(result.run_id)}
    held = phases["undeploy"].end - phases["deploy"].start
    price = price_from_spec(Experiment.from_dict(spec).measure.price)
    assert held >= 1.5 and result.metrics["OC"]["value"] == pytest.approx(job_cost_usd(price, held))
    stored = {m.name: m.value for m in Store(spec["store"]).metrics(result.run_id)}
    assert stored["OC"] == result.metrics["OC"]["value"] and "JCT" in stored


@pytest.mark.parametrize("failing", ["deploy", "setup", "run", "test"])
def test_undeploy_runs_after_a_failure(spec, tmp_path, failing):
    calls: list[str] = []
    with pytest.raises(BashtError, match=f"{failing} broke"):
        run_benchmark(
            Experiment.from_dict(spec),
            results_root=tmp_path / "results",
            system_factory=lambda ctx: FakeSystem(ctx, calls, fail_in=failing),
        )
    assert calls[-1] == "undeploy"
    assert calls[:-1] == list(PHASES[: PHASES.index(failing) + 1])
    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "failed" and f"{failing} broke" in run.error
    phases = store.phases(run.id)
    assert [p.name for p in phases if p.aborted] == [failing]
    assert phases[-1].name == "undeploy"
    results = json.loads((Path(run.results_dir) / "results.json").read_text())
    assert results["status"] == "failed"


def test_on_stored_is_told_once_the_run_is_final_before_results_json(spec, tmp_path):
    """The CLI starts drawing the plots then: every phase and the status are in the store."""
    told: list[tuple[Any, ...]] = []

    def stored(run_id: str, status: str) -> None:
        store = Store(spec["store"])
        run = store.get_run(run_id)
        written = (Path(run.results_dir) / "results.json").exists()
        told.append((run_id, status, run.status, [p.name for p in store.phases(run_id)], written))
        store.close()

    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=lambda ctx: FakeSystem(ctx, []),
        on_stored=stored,
    )
    assert told == [(result.run_id, "completed", "completed", list(PHASES), False)]


def test_an_on_stored_that_fails_changes_nothing_of_the_run(spec, tmp_path):
    told: list[str] = []

    def stored(run_id: str, status: str) -> None:
        told.append(status)
        raise RuntimeError("the callback broke")

    with pytest.raises(BashtError, match="test broke"):  # the run's own error, not the callback's
        run_benchmark(
            Experiment.from_dict(spec),
            results_root=tmp_path / "results",
            system_factory=lambda ctx: FakeSystem(ctx, [], fail_in="test"),
            on_stored=stored,
        )
    assert told == ["failed"]
    (run,) = Store(spec["store"]).list_runs()
    assert json.loads((Path(run.results_dir) / "results.json").read_text())["status"] == "failed"


@pytest.mark.integration
def test_a_real_native_run_stores_every_trial(spec, tmp_path):
    spec["workload"]["params"] = {"epoch_s": 0.01}
    spec["search"].update(max_budget=3, max_trials=5)
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    trials = store.trials(result.run_id)
    assert result.status == "completed"
    assert [t.state for t in trials] == ["completed"] * 5
    assert all(t.budget == 3 and t.train_s >= 0.03 and t.load_s > 0 for t in trials)
    reports = store.reports(result.run_id)
    assert len(reports) == 15
    best = max(trials, key=lambda t: t.value)
    assert result.best_value == best.value and result.best_config == best.config
    assert result.test_metrics["accuracy"] == pytest.approx(best.value)
    assert set(result.phases) == set(PHASES)


@pytest.mark.integration
def test_a_trial_that_raises_is_failed_and_the_run_goes_on(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:Counter", "params": {}}
    spec["space"] = {
        "kind": {"type": "choice", "values": ["ok", "boom"]},
        "x": {"type": "float", "low": 0.1, "high": 1.0},
    }
    spec["search"].update(max_trials=8, max_budget=2)
    spec["resources"] = {**spec.get("resources", {}), "memory_per_worker_mb": 1536}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    trials = Store(spec["store"]).trials(result.run_id)
    # Each trial's workload was told the memory it may use.
    reports = Store(spec["store"]).reports(result.run_id)
    assert reports and all(r.metrics["memory_mb"] == 1536 for r in reports)
    failed = [t for t in trials if t.state == "failed"]
    completed = [t for t in trials if t.state == "completed"]
    assert len(trials) == 8 and failed and completed
    assert all(t.config["kind"] == "boom" for t in failed)
    assert all("this configuration always crashes" in t.error for t in failed)
    assert result.status == "completed"
    assert result.best_config["kind"] == "ok"


@pytest.mark.integration
@pytest.mark.parametrize("crash_at", [0, 2])
def test_a_failed_trial_counts_the_segment_it_failed_in(spec, tmp_path, crash_at):
    """Table 2's d_i is every segment the trial held its worker: the load or the epoch that
    raised too, not only the epochs it reported."""
    spec["workload"] = {
        "name": "tests.user_workloads:CrashesMidEpoch",
        "params": {"epoch_s": 0.2, "crash_at": crash_at},
    }
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=2, max_budget=3)
    try:
        run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    except BashtError as err:  # with crash_at=0 no trial has a result to test
        assert crash_at == 0 and "no trial produced a result" in str(err)
    store = Store(spec["store"])
    (run,) = store.list_runs()
    trials = store.trials(run.id)
    assert [t.state for t in trials] == ["failed", "failed"]
    for t in trials:
        if crash_at == 0:  # the load slept 0.2 s, then raised
            assert t.load_s >= 0.2 and t.train_s == 0
        else:  # epoch 1 (0.2 s), reported, then half of epoch 2
            assert t.train_s >= 0.3


@pytest.mark.integration
def test_a_function_that_never_reports_fails_its_trials_in_one_line(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:silent"}
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=2, max_budget=3)
    with pytest.raises(BashtError, match="no trial produced a result"):
        run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    (run,) = store.list_runs()
    trials = store.trials(run.id)
    assert [t.state for t in trials] == ["failed", "failed"]
    assert all(t.error == "the workload ended without a report (call trial.report)" for t in trials)


@pytest.mark.integration
def test_a_plain_function_workload_runs_and_reports_per_epoch(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:objective"}
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=3, max_budget=3)
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    assert [t.state for t in store.trials(result.run_id)] == ["completed"] * 3
    reports = store.reports(result.run_id)
    for trial in store.trials(result.run_id):
        assert [r.epoch for r in reports if r.trial_id == trial.id] == [1, 2, 3]
    assert result.best_value == pytest.approx(3 * result.best_config["x"])


@pytest.mark.integration
def test_a_missing_metric_fails_the_trial_with_a_reason(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:not_a_dict"}
    spec["space"] = {"x": {"type": "float", "low": 0.1, "high": 1.0}}
    spec["search"].update(max_trials=2)
    with pytest.raises(BashtError) as failed:
        run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert str(failed.value) == (
        "no trial produced a result before the search ended (max_trials (2) reached), "
        "so there is nothing to test"
    )
    trials = Store(spec["store"]).trials(Store(spec["store"]).list_runs()[0].id)
    assert all(t.state == "failed" and "missing or not finite" in t.error for t in trials)


@pytest.mark.integration
def test_grid_search_runs_every_configuration(spec, tmp_path):
    spec["space"] = {
        "x": {"type": "choice", "values": [0.0, 0.5]},
        "n": {"type": "int", "low": 1, "high": 2},
    }
    spec["search"].update(sampler="grid", max_trials=None, max_budget=1)
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    configs = [t.config for t in Store(spec["store"]).trials(result.run_id)]
    assert configs == [
        {"x": 0.0, "n": 1},
        {"x": 0.0, "n": 2},
        {"x": 0.5, "n": 1},
        {"x": 0.5, "n": 2},
    ]
    # No limit ended it: the grid did.
    assert Store(spec["store"]).get_run(result.run_id).stop_reason == (
        "the algorithm had no more trials to run"
    )


@pytest.mark.integration
def test_target_stops_the_job(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:Counter"}
    spec["space"] = {"x": {"type": "float", "low": 1.0, "high": 2.0}}
    spec["search"].update(max_trials=50, max_budget=5, target=2.0)
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    assert len(store.trials(result.run_id)) < 50
    assert result.best_value >= 2.0
    assert store.get_run(result.run_id).stop_reason == "target 2.0 reached"


@pytest.mark.integration
def test_table_2_adds_up_and_counts_exactly_the_wasted_trials(spec, tmp_path):
    spec["workload"] = {"name": "tests.user_workloads:Counter"}
    spec["space"] = {
        "kind": {"type": "choice", "values": ["ok", "ok", "boom"]},
        "x": {"type": "float", "low": 0.1, "high": 1.0},
    }
    spec["search"].update(pruner="asha", min_budget=1, max_budget=9, eta=3, max_trials=12)
    spec["measure"] = {"energy": "estimate", "sample_interval_s": 0.05}
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    store = Store(spec["store"])
    trials = store.trials(result.run_id)
    accounts = store.energy_accounts(result.run_id)
    node_j = sum(a.energy_j for a in accounts)
    # The monitor's own running total per component (the last power sample) is the node energy.
    last: dict[str, float] = {}
    for sample in store.power_samples(result.run_id):
        last[sample.component] = sample.energy_j
    assert node_j == pytest.approx(sum(last.values()), rel=1e-9)
    kwh = {
        t.number: sum(a.energy_j for a in accounts if a.kind == "trial" and a.trial == t.number)
        / 3.6e6
        for t in trials
    }
    idle = sum(a.energy_j for a in accounts if a.kind in ("baseline", "allocation", "overhead"))
    test = sum(a.energy_j for a in accounts if a.kind == "test")
    assert sum(kwh.values()) * 3.6e6 + idle + test == pytest.approx(node_j, rel=1e-9)
    m = result.metrics
    wasted = [t for t in trials if t.state in ("failed", "stopped")]
    assert {t.state for t in wasted} == {"failed", "stopped"}
    assert m["WTE"]["value"] == pytest.approx(sum(kwh[t.number] for t in wasted))
    assert m["WTT"]["value"] == pytest.approx(
        sum(t.load_s + t.train_s + t.validate_s for t in wasted) * 1000
    )
    assert m["WR"]["value"] == pytest.approx(100 * idle / node_j)
    for name in ("TWH", "WTE", "WR", "energy_total"):
        assert m[name]["source"] == "estimate"
