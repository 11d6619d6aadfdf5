"""Plans by carbon: each stage placed in time on the grid's series and sized for the least
emissions under the deadline; `basht run --plan` waits as the plan says."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import yaml

from basht.energy.carbon import J_PER_KWH, StaticIntensity, TimeSeriesIntensity
from basht.energy.shifting import emissions_g
from basht.engine.messages import TrialEvent, TrialTask, WorkloadRef
from basht.errors import BashtError, ExperimentError
from basht.experiment import PlanSpec, load_experiment, with_plan
from basht.plan import ShaJob, Simulator, plan_job
from basht.plan.carbon import Grid, _best_waits
from basht.plan.executor import PlanExecutor, plan_delays
from basht.plan.planner import fastest
from basht.plan.profile import profile_from_dict
from basht.report.plan import plan_json
from basht.states import EventKind
from basht.store import Store
from tests.cli import basht

T0 = 1_686_398_400.0  # 2023-06-10T12:00:00Z
JOB = ShaJob(9, 1, 9, 3)  # 9 trials for 1 epoch, 3 for 2 more, 1 for 6 more
PROFILE = {
    "instance": {"usd_per_hour": 3.6, "gpus": 2},
    "epoch_s": {1: [50.0, 55.0, 60.0, 70.0], 2: [30.0, 33.0, 36.0]},
    "startup_s": [60.0, 90.0],
    "power_w": {"idle": 200.0, "busy": 800.0},
}


def _step(dirty_s: float, dirty: float = 500.0, clean: float = 50.0) -> TimeSeriesIntensity:
    """A grid dirty for `dirty_s` from T0, then clean."""
    return TimeSeriesIntensity([T0, T0 + dirty_s], [dirty, clean], "step")


def _stage_rows(estimate) -> list[tuple[float, float, float]]:
    """Each stage as emissions_g's schedule row: its span on the clock, its mean power."""
    spans = zip(
        estimate.stage_start_s, estimate.stage_end_s, estimate.stage_energy_kwh, strict=True
    )
    return [(T0 + s, T0 + e, kwh * J_PER_KWH / (e - s)) for s, e, kwh in spans]


def test_the_carbon_plan_waits_for_the_clean_hours_and_emits_less_than_at_once():
    profile = profile_from_dict(PROFILE)
    series = _step(3600)
    result = plan_job(JOB, profile, 7200, objective="carbon", grid=Grid(series, T0), runs=50)
    assert result.objective == "carbon" and result.carbon is not None
    placed = result.estimate
    # It waits before the first stage (free: nothing is up yet) until the grid is clean, and
    # still meets the deadline with the waits.
    assert placed.delays_s == (3600.0, 0.0, 0.0)
    assert all(start >= 3600 for start in placed.stage_start_s)
    assert placed.jct_p95_s <= 7200
    # Its emissions: each stage's energy over its span, at the series then.
    assert placed.emissions_g == pytest.approx(emissions_g(series, _stage_rows(placed)))
    assert placed.emissions_g == pytest.approx(placed.energy_kwh * 50)
    at_once, agnostic = result.carbon.at_once, result.carbon.agnostic_estimate
    assert placed.emissions_g < at_once.emissions_g and placed.emissions_g < agnostic.emissions_g
    assert at_once.emissions_g == pytest.approx(at_once.energy_kwh * 500)
    assert result.carbon_saving > 9  # all of it at 50 instead of 500 g/kWh
    # A wait holds no instances: the plan's bill is what it is at once.
    assert placed.cost_usd == pytest.approx(at_once.cost_usd)
    assert result.carbon.agnostic == plan_job(JOB, profile, 7200, runs=50).plan


def test_with_no_slack_the_carbon_plan_is_the_plan_at_once():
    profile = profile_from_dict(PROFILE)
    sim = Simulator(JOB, profile, runs=50, max_instances=5)
    deadline_s = sim(fastest(sim)).jct_p95_s + 60  # less than a step (900 s) to spare
    # Dirty and clean every 5 minutes: the intensity changes, but no stage can wait a step.
    series = TimeSeriesIntensity([T0 + 300 * k for k in range(24)], [500.0, 50.0] * 12, "5min")
    result = plan_job(JOB, profile, deadline_s, objective="carbon", grid=Grid(series, T0), runs=50)
    assert result.objective == "carbon" and result.carbon is not None
    assert not any(result.estimate.delays_s)
    assert result.estimate == result.carbon.at_once
    assert result.estimate.jct_p95_s <= deadline_s


@pytest.mark.parametrize(
    "intensity",
    [StaticIntensity(300.0), TimeSeriesIntensity([T0 - 86400], [300.0], "one value")],
    ids=["static", "one-value series"],
)
def test_a_grid_of_one_intensity_gets_the_energy_plan_and_says_so(intensity):
    profile = profile_from_dict(PROFILE)
    by_energy = plan_job(JOB, profile, 7200, objective="energy", runs=50)
    by_carbon = plan_job(JOB, profile, 7200, objective="carbon", grid=Grid(intensity, T0), runs=50)
    assert by_carbon.objective == "energy" and by_carbon.carbon is not None
    assert "planned by energy" in by_carbon.carbon.note
    assert by_carbon.plan == by_energy.plan and not any(by_carbon.estimate.delays_s)
    assert by_carbon.estimate.emissions_g == pytest.approx(by_energy.estimate.energy_kwh * 300)


def test_the_waits_found_are_the_least_emissions_on_the_step_grid():
    """For every set of stages that wait, the dynamic programme's waits are the best of all
    the waits on the grid that meet the deadline (tried one by one)."""
    profile = profile_from_dict(PROFILE)
    sim = Simulator(JOB, profile, runs=20, max_instances=5)
    rng = np.random.default_rng(3)
    series = TimeSeriesIntensity(
        [T0 + 600 * k for k in range(30)], list(rng.uniform(20, 600, 30)), "random"
    )
    plan, step = (3, 2, 1), 600.0
    deadline = sim(plan).jct_p95_s + 4 * step + 100
    grid = Grid(series, T0, step, deadline_s=deadline)
    steps = range(5)
    for tail in itertools.product([False, True], repeat=2):
        waits = (False, *tail)
        found = _best_waits(sim.waiting(plan, waits), waits, grid)
        tried = []
        for counts in itertools.product(steps, repeat=3):
            if any((c > 0) != wait for c, wait in zip(counts[1:], tail, strict=True)):
                continue
            estimate = sim(plan, [c * step for c in counts])
            if estimate.jct_p95_s <= deadline:
                tried.append(grid.emitted(estimate).emissions_g)
        if not tried:
            assert found is None
            continue
        assert found is not None and found[0] == pytest.approx(min(tried), abs=1e-4)


def test_a_wait_releases_every_instance_and_its_length_only_moves_the_stages():
    profile = profile_from_dict(PROFILE | {"data": {"gb": 1, "usd_per_gb": 0.05}})
    sim = Simulator(JOB, profile, runs=50, max_instances=5)
    plain, short, long = sim((3, 2, 2)), sim((3, 2, 2), (0, 600, 0)), sim((3, 2, 2), (0, 4200, 0))
    assert long.jct_s - short.jct_s == pytest.approx(3600)
    assert long.jct_p95_s - short.jct_p95_s == pytest.approx(3600)
    assert long.stage_start_s[1] - short.stage_start_s[1] == pytest.approx(3600)
    assert (long.cost_usd, long.energy_kwh) == (short.cost_usd, short.energy_kwh)
    # After the wait the stage's two instances are launched again (data moved again), and start
    # up again: a wait is not free of energy, only of idle instances.
    assert short.cost_usd == pytest.approx(plain.cost_usd + 2 * 0.05, abs=0.5)
    assert short.energy_kwh > plain.energy_kwh
    assert short.stage_start_s[1] == pytest.approx(plain.stage_end_s[0] + 600)
    # Each stage's share of the energy adds up to the plan's, pre-provisioned too.
    for estimate in (plain, short, sim.preprovisioned()((1, 2, 3)), sim((1, 2, 3), (60, 0, 900))):
        assert sum(estimate.stage_energy_kwh) == pytest.approx(estimate.energy_kwh)
    with pytest.raises(BashtError, match="expected 3 waits of 0 or more seconds"):
        sim((3, 2, 2), (0, -1, 0))


EXPERIMENT = {
    "name": "sha-9",
    "seed": 0,
    "workload": {"name": "sleep", "params": {"epoch_s": 0.01}},
    "space": {"lr": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True}},
    "search": {
        "pruner": "sha",
        "metric": "accuracy",
        "min_budget": 1,
        "max_budget": 9,
        "eta": 3,
        "max_trials": 9,
    },
}


def test_the_plan_file_keeps_the_waits_and_basht_run_reads_them(tmp_path):
    profile = profile_from_dict(PROFILE)
    result = plan_job(JOB, profile, 7200, objective="carbon", grid=Grid(_step(3600), T0), runs=50)
    written = json.loads(json.dumps(plan_json(result, JOB, profile)))
    assert [s["delay_s"] for s in written["job"]["stages"]] == [3600.0, 0.0, 0.0]
    # A run re-plans it by energy, its waits kept (it has no forecast of the grid).
    assert written["objective"] == "energy" and written["carbon"]["objective"] == "carbon"
    carbon = written["carbon"]
    assert carbon["start"] == "2023-06-10T12:00:00Z"
    assert [s["start"] for s in carbon["stages"]][0] == "2023-06-10T13:00:00Z"
    assert carbon["emissions_g"] == pytest.approx(sum(s["emissions_g"] for s in carbon["stages"]))
    assert carbon["agnostic"]["emissions_g"] > carbon["emissions_g"]
    assert written["emissions_estimate"]["plan_g"] == pytest.approx(carbon["emissions_g"])
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    (tmp_path / "plan.json").write_text(json.dumps(written))
    experiment = with_plan(load_experiment(tmp_path / "exp.yaml"), tmp_path / "plan.json")
    assert experiment.plan is not None and plan_delays(experiment.plan) == [3600.0, 0.0, 0.0]
    stages = written["job"]["stages"]
    bad = written | {"job": written["job"] | {"stages": [stages[0] | {"delay_s": -1}, *stages[1:]]}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ExperimentError, match="delay_s"):
        with_plan(load_experiment(tmp_path / "exp.yaml"), tmp_path / "bad.json")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Workers:
    """The executor's worker processes, without processes."""

    def __init__(self) -> None:
        self.next, self.removed, self.events = 0, [], []

    def add_workers(self, count: int) -> list[int]:
        self.next += count
        return list(range(self.next - count, self.next))

    begin_workers = add_workers

    def workers_ready(self, indexes) -> bool:
        return True

    def remove_workers(self, indexes, timeout_s: float = 5.0) -> None:
        self.removed.append(tuple(indexes))

    def start(self) -> None: ...

    def shutdown(self, timeout_s: float = 5.0) -> None: ...

    def submit(self, task, worker: int) -> None: ...

    def poll(self, timeout_s=None) -> list:
        events, self.events = self.events, []
        return events


class Stages:
    """The store's stage and instance records."""

    def __init__(self) -> None:
        self.started: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.launched: list[tuple[int, float]] = []

    def add_stage(self, run_id, attempt, *, stage, started_at, **values) -> None:
        self.started[stage] = started_at

    def end_stage(self, run_id, stage, attempt, ended_at) -> None:
        self.ended[stage] = ended_at

    def add_instance(self, run_id, number, stage, workers, launched_at, attempt=1) -> None:
        self.launched.append((number, launched_at))

    def update_instance(self, *args, **values) -> None: ...


def test_the_run_waits_the_plans_delay_over_the_time_scale_holding_no_instances():
    spec = PlanSpec.model_validate(
        {
            "job": {
                "trials": 9, "min_budget": 1, "max_budget": 9, "eta": 3,
                "stages": [
                    {"trials": 9, "epochs": 1, "delay_s": 600},
                    {"trials": 3, "epochs": 2, "delay_s": 1800},
                    {"trials": 1, "epochs": 6},
                ],
            },
            "price": {"usd_per_hour": 3.6, "gpus": 2},
            "plan": [2, 1, 1],
        }
    )  # fmt: skip
    clock, slept, store = Clock(), [], Stages()

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    executor = PlanExecutor(
        spec,
        store=store,
        run_id="run",
        clock=clock,
        time_scale=60,
        sleep=sleep,  # type: ignore[arg-type]
    )
    executor.local = executor.provider.workers = workers = Workers()  # type: ignore[assignment]
    executor.start()  # stage 0 waits 600 s of the plan: 10 s at 60 series seconds a second
    assert slept == [10.0] and store.started[0] == 1010.0
    assert store.launched == [(0, 1010.0), (1, 1010.0)]
    clock.now += 100
    executor.submit(TrialTask(0, {}, WorkloadRef("sleep"), seed=0, target_budget=3))
    # At stage 1's barrier both instances go, the run waits 30 s, then launches stage 1's one.
    assert slept == [10.0, 30.0] and workers.removed == [(2, 3), (0, 1)]
    assert store.ended[0] == 1110.0 and store.started[1] == 1140.0
    assert store.launched[2:] == [(2, 1140.0)] and len(executor.cluster.live) == 1
    clock.now += 50
    workers.events = [TrialEvent(EventKind.PAUSED, 0, 0, epoch=3)]  # stage 1's trial ends
    executor.submit(TrialTask(0, {}, WorkloadRef("sleep"), seed=0, target_budget=9))
    assert slept == [10.0, 30.0] and store.started[2] == store.ended[1] == 1190.0  # no wait
    with pytest.raises(BashtError, match="time_scale: expected a number > 0"):
        PlanExecutor(spec, time_scale=0)


@pytest.mark.integration
def test_basht_plan_by_carbon_and_a_run_that_waits_as_it_says(tmp_path):
    """A grid dirty for the first 4 s of the series, then clean: the plan waits 4 s before its
    first stage (steps of 1 s), and the run, replaying the series 4 times as fast, waits before
    it requests the first stage's instances."""
    series = tmp_path / "grid.csv"
    series.write_text(f"timestamp,g_per_kwh\n{T0:.0f},500\n{T0 + 4:.0f},50\n")
    store = f"sqlite:///{tmp_path / 'basht.db'}"
    carbon = {"measure": {"carbon": {"csv": "grid.csv"}}, "store": store}
    schedule = {"start": "2023-06-10T12:00:00Z", "step_s": 1, "time_scale": 4}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(EXPERIMENT | carbon | {"schedule": schedule}))
    profile = {
        "instance": {"usd_per_hour": 3.6, "gpus": 2},
        "epoch_s": {1: [0.3, 0.32, 0.35, 0.4]},
        "scaling": 0.6,
        "startup_s": [1.0, 1.5],
        "power_w": {"idle": 100.0, "busy": 300.0},
    }
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    proc = basht(
        "plan", "exp.yaml", "--profile", "profile.yaml", "--deadline", "1m", "--objective",
        "carbon", "--max-instances", "2", "--runs", "50", "--json", "plan.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "wait, min" in said and "carbon-agnostic" in said and "less than the carbon" in said
    assert "and starts 2023-06-10 12:00:04 UTC" in said
    plan = json.loads((tmp_path / "plan.json").read_text())
    delay_s = plan["job"]["stages"][0]["delay_s"]
    assert delay_s == 4.0 and plan["carbon"]["stages"][0]["start"] == "2023-06-10T12:00:04Z"
    run = basht("run", "exp.yaml", "--plan", "plan.json", "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr + run.stdout
    records = Store(store, create=False)
    (row,) = records.list_runs()
    stages = records.stages(row.id)
    assert [s.stage for s in stages] == [0, 1, 2]
    (deploy,) = [p for p in records.phases(row.id) if p.name == "deploy"]
    # The wait (the plan's 4 s, replayed 4 times as fast) is before the first stage's record
    # and before any instance was asked for.
    assert stages[0].started_at - deploy.start >= delay_s / 4
    assert min(i.launched_at for i in records.instances(row.id)) >= deploy.start + delay_s / 4
