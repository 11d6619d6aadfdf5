"""Plans estimated, and chosen, by energy: a profile's power_w (an instance's idle and busy watts)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from basht.errors import BashtError
from basht.experiment import PlanSpec
from basht.plan import ShaJob, Simulator, load_profile, plan_job
from basht.plan.executor import plan_profile
from basht.plan.planner import spent
from basht.plan.profile import profile_from_dict
from basht.report.plan import plan_json
from tests.cli import basht

ROOT = Path(__file__).resolve().parents[2]
FLAT = {
    "instance": {"usd_per_hour": 3.6, "gpus": 2},
    "epoch_s": {1: [10.0], 2: [6.0]},
    "startup_s": [5.0],
    "power_w": {"idle": 100.0, "busy": 300.0},  # each busy GPU adds (300 - 100) / 2 = 100 W
}


def test_a_plans_energy_is_idle_watts_over_each_life_and_busy_watts_over_each_trial():
    # One instance for 37 s (5 s start-up, 4 one-GPU trials of 10 s in 2 waves, then the
    # survivor on both GPUs for 2 x 6 s): 37 s x 100 W idle, and (4 x 10 x 1 + 12 x 2) GPU-s
    # x 100 W busy.
    estimate = Simulator(ShaJob(4, 1, 3, 3), profile_from_dict(FLAT), runs=3, max_instances=2)(
        (1, 1)
    )
    assert estimate.jct_s == pytest.approx(37)
    assert estimate.energy_kwh == pytest.approx((37 * 100 + 64 * 100) / 3.6e6)
    no_power = {k: v for k, v in FLAT.items() if k != "power_w"}
    sim = Simulator(ShaJob(4, 1, 3, 3), profile_from_dict(no_power), runs=3, max_instances=2)
    assert sim((1, 1)).energy_kwh is None
    with pytest.raises(BashtError, match="objective energy: the profile gives no power_w"):
        spent(sim((1, 1)), "energy")


def test_the_energy_objective_keeps_energy_least_and_the_plan_file_keeps_what_it_needs():
    job = ShaJob(81, 1, 81, 3)
    powered = load_profile(ROOT / "examples/plan/p3-profile.yaml")  # illustrative power_w
    assert powered.power_w is not None
    profile = replace(powered, power_w=None, _sorted={})
    by_cost = plan_job(job, powered, 3600)
    by_energy = plan_job(job, powered, 3600, objective="energy")
    assert by_energy.estimate.jct_p95_s <= 3600
    assert by_energy.estimate.energy_kwh <= by_cost.estimate.energy_kwh
    assert by_cost.estimate.cost_usd <= by_energy.estimate.cost_usd
    assert by_energy.energy_saving > 1
    written = json.loads(json.dumps(plan_json(by_energy, job, powered)))
    assert written["objective"] == "energy"
    spec = PlanSpec.model_validate(written | {"replan": True})
    assert spec.objective == "energy" and plan_profile(spec).power_w == powered.power_w
    unpowered = written | {"profile": written["profile"] | {"power_w": None}}
    with pytest.raises(Exception, match="energy needs the profile's power_w"):
        PlanSpec.model_validate(unpowered | {"replan": True})
    with pytest.raises(BashtError, match="objective energy: the profile gives no power_w"):
        plan_job(job, profile, 3600, objective="energy")
    with pytest.raises(BashtError, match="objective 'water'"):
        plan_job(job, powered, 3600, objective="water")
    with pytest.raises(BashtError, match="objective carbon: needs the grid's carbon intensity"):
        plan_job(job, powered, 3600, objective="carbon")  # and no grid to place it on


@pytest.mark.parametrize(
    ("power", "message"),
    [
        ({"idle": 500, "busy": 100}, "power_w: expected 0 <= idle <= busy watts"),
        ({"idle": 100}, "power_w.busy: missing required key"),
        ({"idle": 100, "busy": 200, "peak": 300}, "power_w.peak: unknown key"),
        (300, "power_w: expected a mapping"),
    ],
)
def test_a_bad_power_figure_is_one_line_naming_it(power, message):
    with pytest.raises(BashtError, match=message):
        profile_from_dict(FLAT | {"power_w": power})


@pytest.mark.integration
def test_basht_plan_by_energy_from_the_command_line(tmp_path):
    example = ["examples/plan/sha-81.yaml", "--deadline", "1h", "--runs", "50"]
    powered = ["--profile", "examples/plan/p3-profile.yaml"]
    out = tmp_path / "plan.json"
    proc = basht("plan", *example, *powered, "--objective", "energy", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "kWh (est.)" in proc.stdout and "less energy than the best static" in proc.stdout
    # At the file's carbon zone (sha-81.yaml: the default, DE) as a yearly average.
    said = " ".join(proc.stdout.split())
    assert "emissions (estimate):" in said and "kgCO2eq for the plan" in said and "DEU" in said
    carbon = json.loads(out.read_text())["emissions_estimate"]
    assert 0 < carbon["plan_g"] < carbon["static_g"] and carbon["intensity"].startswith("DEU")
    text = (ROOT / "examples/plan/p3-profile.yaml").read_text()
    profile = tmp_path / "bare.yaml"  # the same without power_w
    profile.write_text("".join(line for line in text.splitlines(True) if "power_w" not in line))
    bare = basht("plan", *example, "--profile", str(profile), "--objective", "energy")
    assert bare.returncode == 2 and "the profile gives no power_w" in bare.stderr
    assert len(bare.stderr.strip().splitlines()) == 1


def test_a_plan_is_converted_at_a_fixed_figure_or_its_regions_yearly_average():
    from basht.experiment import CarbonSpec
    from basht.report.plan import plan_intensity

    assert plan_intensity(CarbonSpec(g_per_kwh=100)).g_per_kwh(0) == 100
    assert plan_intensity(CarbonSpec(region="FR")).describe().startswith("FRA")
    assert plan_intensity(CarbonSpec(csv="grid.csv")) is None  # a recorded series: the past
