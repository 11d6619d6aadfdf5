"""Energy and carbon budgets end a job on the meter the run reports, resumed attempts included."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from basht.bench.budgets import J_PER_KWH, SpendingLimits
from basht.energy import EnergyMonitor, open_sources
from basht.energy.billing import cost_so_far_usd
from basht.energy.monitor import Account
from basht.errors import ExperimentError
from basht.experiment import Experiment, SearchSpec
from basht.report.html import run_sections
from basht.report.results import build_summary
from basht.store import Store
from tests.cli import basht, cli_env


def _run_until_a_limit(
    spec, tmp_path, *args: str, env: dict[str, str] | None = None, **search
) -> tuple[Store, Any, str]:
    """`basht run` of 0.5 s trials, up to 1,000 of them unless a limit in `search` ends it
    first: the store, its one run, and the command's output."""
    spec["workload"]["params"] = {"epoch_s": 0.1}
    spec["search"].update(max_trials=1000, max_budget=5, **search)
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = basht("run", *args, str(path), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    store = Store(spec["store"])
    (run,) = store.list_runs()
    trials = store.trials(run.id)
    assert 0 < len(trials) < 1000
    assert {t.state for t in trials} <= {"completed", "stopped"}
    return store, run, done.stdout


# kWh: a few seconds of this machine's estimated power, after what deploy uses (Optuna's worker
# processes take a few seconds to start on a loaded machine)
@pytest.mark.integration
@pytest.mark.parametrize("system, budget", [("native", 1.2e-5), ("optuna", 2.4e-5)])
def test_a_run_ends_once_its_energy_budget_is_used(spec, tmp_path, system, budget):
    spec["system"] = system
    spec["measure"] = {"energy": "estimate"}
    store, run, out = _run_until_a_limit(spec, tmp_path, energy_budget_kwh=budget)
    reason = f"energy budget of {budget:g} kWh used (estimate)"
    assert reason in " ".join(out.split())
    assert run.status == "completed" and run.stop_reason == reason
    metrics = {m.name: m.value for m in store.metrics(run.id)}
    assert metrics["energy_total"] >= budget  # the meter the run reports reached it
    (results,) = (tmp_path / "results").glob("*/results.json")
    assert json.loads(results.read_text())["stop_reason"] == reason
    assert f"<td>{reason}</td>" in "".join(run_sections(build_summary(store, run.id), None))


def _monitor(carried_j: float, carried_g: float) -> EnergyMonitor:
    carried = {("trial", 0, "cpu"): Account(energy_j=carried_j, emissions_g=carried_g)}
    return EnergyMonitor(source=open_sources("estimate"), sample_interval_s=10, carried=carried)


def test_what_earlier_attempts_spent_counts_against_each_budget():
    monitor = _monitor(carried_j=0.5 * J_PER_KWH, carried_g=190.0)
    try:
        under = SpendingLimits(
            SearchSpec(max_trials=4, energy_budget_kwh=1.0, carbon_budget_g=200.0), monitor
        )
        assert under() is None and under.spent()[0] >= 0.5
        energy = SpendingLimits(SearchSpec(max_trials=4, energy_budget_kwh=0.4), monitor)
        assert energy() == "energy budget of 0.4 kWh used (estimate)"
        carbon = SpendingLimits(SearchSpec(max_trials=4, carbon_budget_g=150.0), monitor)
        assert carbon() == "carbon budget of 150 g CO2eq used (estimate)"
        assert not SpendingLimits(SearchSpec(max_trials=4), monitor)
    finally:
        monitor.close()


def test_a_budget_ends_a_search_that_would_not_end_on_its_own(spec):
    spec["search"].update(pruner="asha", max_trials=None, max_budget=9, carbon_budget_g=1.0)
    Experiment.from_dict(spec)
    spec["search"].update(carbon_budget_g=None, max_budget=None, energy_budget_kwh=0.5)
    Experiment.from_dict(spec)  # an unbounded ASHA, ended by energy
    with pytest.raises(ExperimentError, match="energy_budget_kwh"):
        Experiment.from_dict({**spec, "search": {**spec["search"], "energy_budget_kwh": -1}})


@pytest.mark.integration
def test_a_budget_used_before_any_result_says_so(spec, tmp_path):
    spec["workload"]["params"] = {"epoch_s": 5.0}
    spec["search"].update(max_trials=4, max_budget=2, energy_budget_kwh=1e-9)
    # Sampled often enough that deploy itself (a tenth of a second) spends the budget: no trial
    # starts. A trial already running when it runs out stops at its next report, with a result.
    spec["measure"] = {"energy": "estimate", "sample_interval_s": 0.02}
    path = tmp_path / "budget.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = basht("run", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: no trial produced a result before the search ended (energy budget of 1e-09 kWh "
        "used (estimate)), so there is nothing to test"
    )
    (run,) = Store(spec["store"]).list_runs()
    assert run.status == "failed" and run.stop_reason.startswith("energy budget")


@pytest.mark.integration
def test_a_run_ends_once_its_cost_budget_is_billed(spec, tmp_path):
    spec["measure"] = {"energy": "estimate", "price": {"usd_per_hour": 3600.0}}  # 1 USD a second
    # 10 s of the run's life: deploy and a first result fit in it on a loaded machine
    store, run, _ = _run_until_a_limit(spec, tmp_path, "-q", cost_budget_usd=10.0)
    assert run.stop_reason == "cost budget of 10 USD used"
    metrics = {m.name: m.value for m in store.metrics(run.id)}
    assert 10.0 <= metrics["OC"] < 25.0  # billed on to the end of undeploy


def test_the_bill_so_far_counts_earlier_attempts_and_the_running_one_to_now(spec, tmp_path):
    spec["measure"] = {"price": {"usd_per_hour": 3.6}}  # 0.001 USD a second
    experiment = Experiment.from_dict(spec)
    store = Store(spec["store"])
    run_id = store.create_run(store.add_experiment("t", experiment.to_dict()), "t", "native",
                              "local", tmp_path).id  # fmt: skip
    assert cost_so_far_usd(store, run_id, experiment, now=50.0) == 0.0
    for name, start, end in [("deploy", 100, 101), ("run", 101, 140), ("undeploy", 140, 150)]:
        store.add_phase(run_id, name, start, end)  # attempt 1: 50 s held
    store.add_phase(run_id, "deploy", 200, 202, attempt=2)
    assert cost_so_far_usd(store, run_id, experiment, now=230.0) == pytest.approx(0.001 * 80)


def test_a_cost_budget_needs_a_price(spec):
    spec["search"].update(cost_budget_usd=1.0)
    spec["measure"] = {"price": {"usd_per_hour": 0.0}}
    with pytest.raises(ExperimentError, match="cost_budget_usd: measure.price is 0 USD per hour"):
        Experiment.from_dict(spec)


# seconds: room for a first result on a loaded machine (the suite runs two files at once). Ray
# runs its workers at niceness 15, so busy processes beside it can hold its first trial back for a
# minute; here the workers get the same priority as everything else (the limit is under test, not
# Ray's priorities), and the first result comes within 8 s even with both cores kept busy.
@pytest.mark.integration
@pytest.mark.parametrize("system, budget_s", [("optuna", 6), ("raytune", 15)])
def test_a_peer_system_ends_its_search_at_the_time_budget(spec, tmp_path, system, budget_s):
    spec["system"] = system
    env = cli_env(RAY_worker_niceness="0")
    store, run, _ = _run_until_a_limit(spec, tmp_path, "-q", env=env, time_budget_s=budget_s)
    assert run.status == "completed" and run.stop_reason == f"time budget of {budget_s} s used"
    (search,) = [p for p in store.phases(run.id) if p.name == "run"]
    assert search.end - search.start >= budget_s
