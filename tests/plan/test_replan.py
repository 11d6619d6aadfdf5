"""RubberBand re-planning: a job simulated from a barrier, and the rest of a plan planned again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment, PlanSpec, load_experiment, with_plan
from basht.plan import ShaJob, Simulator, load_profile, observed_speed, plan_job, replan
from basht.plan.executor import plan_profile
from basht.plan.profile import profile_from_dict
from basht.report.plan import plan_json
from tests.cli import basht

ROOT = Path(__file__).resolve().parents[2]
FLAT = {
    "instance": {"usd_per_hour": 3.6, "gpus": 2},  # 0.001 USD a second, billed per second
    "epoch_s": {1: [10.0], 2: [6.0]},
    "startup_s": [5.0],
}


@pytest.mark.parametrize(
    ("plan", "jct_s", "billed_s"),
    [
        # The survivor gets both GPUs of the instance that is up: 2 epochs x 6 s. That instance
        # has lived 30 s already and is billed from its launch.
        ((1,), 12, 30 + 12),
        # A second instance asked for at the barrier is billed too, though the trial never needs it.
        ((2,), 12, 30 + 12 + 12),
    ],
)
def test_a_job_is_simulated_from_a_barrier_with_the_instances_that_are_up(plan, jct_s, billed_s):
    job = ShaJob(4, 1, 3, 3)  # stages (4 trials x 1 epoch), (1 trial x 2 epochs)
    sim = Simulator(
        job, profile_from_dict(FLAT), runs=3, max_instances=2, from_stage=1, live_s=(30.0,)
    )
    estimate = sim(plan)
    assert estimate.jct_s == pytest.approx(jct_s)
    assert estimate.cost_usd == pytest.approx(billed_s * 0.001)
    assert estimate.stage_end_s == pytest.approx((jct_s,))


def test_each_stage_barrier_is_estimated():
    estimate = Simulator(ShaJob(4, 1, 3, 3), profile_from_dict(FLAT), runs=3, max_instances=2)(
        (1, 1)
    )
    assert estimate.stage_end_s == pytest.approx((5 + 20, 5 + 20 + 12))


def test_the_speed_of_a_run_is_its_trial_seconds_over_the_profiles():
    profile = profile_from_dict(FLAT | {"overhead_s": [2.0]})
    job = ShaJob(4, 1, 3, 3)
    assert observed_speed(profile, [], job) is None
    # Stage 0 on 1 GPU: 1 x 10 + 2 = 12 s expected; stage 1 on 2 GPUs: 2 x 6 + 2 = 14 s.
    assert observed_speed(profile, [(0, 1, 24.0), (1, 2, 28.0)], job) == pytest.approx(2.0)
    scaled = profile.scaled(2.0)
    assert scaled.trial_s(2, 2) == pytest.approx(28.0)
    assert scaled.startup_s == profile.startup_s  # an instance starts as fast as before
    with pytest.raises(Exception, match="speed factor"):
        profile.scaled(0.0)


def _p3() -> tuple[ShaJob, object, object]:
    job = ShaJob(81, 1, 81, 3)
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")
    return job, profile, plan_job(job, profile, 90 * 60, max_instances=2)


def test_a_slower_run_gets_more_instances_and_a_faster_one_fewer():
    job, profile, planned = _p3()
    at = planned.estimate.stage_end_s[0]  # stage 0 ended when the plan expected it to

    def again(speed: float):
        return replan(
            job,
            profile,
            1,
            left_s=planned.deadline_s - at,
            live_s=(at,) * planned.plan[0],
            speed=speed,
            current=planned.plan[1:],
            max_instances=2,
        )

    slow, fast = again(1.25), again(0.8)
    assert sum(slow.plan) > sum(planned.plan[1:]) > sum(fast.plan)
    assert fast.meets and fast.estimate.cost_usd < slow.estimate.cost_usd
    # Never worse than keeping the rest of the plan, under what the run has seen.
    kept = Simulator(
        job, profile.scaled(0.8), max_instances=2, from_stage=1, live_s=(at,) * planned.plan[0]
    )(planned.plan[1:])
    assert fast.estimate.cost_usd <= kept.cost_usd


def test_a_deadline_that_cannot_be_met_any_more_gets_the_fastest_rest():
    job, profile, planned = _p3()
    late = replan(job, profile, 2, left_s=60.0, live_s=(900.0,), speed=1.5, max_instances=2)
    assert not late.meets
    sim = Simulator(job, profile.scaled(1.5), max_instances=2, from_stage=2, live_s=(900.0,))
    statics = [sim((m,) * 3) for m in (1, 2)]
    assert late.estimate.jct_p95_s <= min(s.jct_p95_s for s in statics) + 1e-9


def test_a_plan_file_keeps_what_replanning_needs(tmp_path):
    job, profile, planned = _p3()
    written = json.loads(json.dumps(plan_json(planned, job, profile)))
    spec = PlanSpec.model_validate(written | {"replan": True})
    assert spec.max_instances == 2 and spec.runs == 200
    again = plan_profile(spec)
    assert again.epoch_s == profile.epoch_s and again.startup_s == profile.startup_s
    assert again.price.usd_per_hour == profile.price.usd_per_hour
    # The same profile, so the same estimate as the planner's.
    sim = Simulator(job, again, max_instances=2)
    assert sim(planned.plan).jct_s == pytest.approx(planned.estimate.jct_s)

    old = {k: v for k, v in written.items() if k != "profile"}  # a plan from an older Basht
    (tmp_path / "old.json").write_text(json.dumps(old))
    experiment = load_experiment(ROOT / "examples/plan/sha-81.yaml")
    assert with_plan(experiment, tmp_path / "old.json").plan is not None  # runs as it is
    with pytest.raises(ExperimentError, match=r"plan\.replan: needs the plan's profile"):
        with_plan(experiment, tmp_path / "old.json", replan=True)


def test_a_plan_files_profile_that_cannot_be_planned_from_names_plan_profile():
    job, profile, planned = _p3()
    written = json.loads(json.dumps(plan_json(planned, job, profile)))
    written["profile"]["epoch_s"] = {"1": [60.0]}  # one count, no scaling: edited by hand
    spec = PlanSpec.model_validate(written | {"replan": True})
    with pytest.raises(BashtError, match=r"^plan\.profile\.epoch_s: profiled at 1 GPU only"):
        plan_profile(spec)


@pytest.mark.integration
def test_a_plan_the_run_cannot_follow_is_refused_before_anything_is_stored(tmp_path):
    """What the plan's executor would refuse at deploy is checked with the file: one line, no
    run in the store, no results folder."""
    job, profile, planned = _p3()
    written = json.loads(json.dumps(plan_json(planned, job, profile)))
    bad_profile = json.loads(json.dumps(written))
    bad_profile["profile"]["epoch_s"] = {"1": [60.0]}
    too_big = written | {"plan": [10_000] * len(written["plan"])}
    cases = [
        (bad_profile, ["--replan"], "plan.profile.epoch_s: profiled at 1 GPU only"),
        (too_big, [], "plan: 10000 instances x 4 GPUs would be 40000 worker processes"),
    ]
    for number, (plan, flags, expected) in enumerate(cases):
        (tmp_path / f"p{number}.json").write_text(json.dumps(plan))
        url = f"sqlite:///{tmp_path / 'basht.db'}"
        proc = basht(
            "run", str(ROOT / "examples/plan/sha-81.yaml"), "--plan", f"p{number}.json", *flags,
            "--store", url, "-q", cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
    assert not (tmp_path / "basht.db").exists() and not (tmp_path / "results").exists()


def test_replan_needs_a_plan():
    experiment = Experiment.from_dict(
        {
            "name": "x",
            "workload": {"name": "sleep"},
            "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
            "search": {"pruner": "sha", "max_budget": 9, "max_trials": 9},
        }
    )
    with pytest.raises(ExperimentError, match="--replan needs a plan"):
        with_plan(experiment, replan=True)


# -- pre-provisioning ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preprovision", "jct_s", "billed_s"),
    [
        # 9 trials on one instance (2 slots): 5 waves of 10 s after the 5 s start-up, so the
        # barrier is at 55 s. Stage 1's 3 trials (2 epochs x 10 s, 1 GPU each) need 2 instances.
        # Asked for at the barrier, the second is ready at 60: the third trial ends at 80. It is
        # billed 25 s, the first 80 s.
        (False, 80, 80 + 25),
        # Pre-provisioned when stage 0 should end (55 s) less the mean start-up (5 s): asked for
        # at 50, ready at the barrier, every trial ends at 75; billed from 50 (25 s) as well.
        (True, 75, 75 + 25),
    ],
)
def test_pre_provisioning_asks_for_instances_before_the_barrier(preprovision, jct_s, billed_s):
    sim = Simulator(
        ShaJob(9, 1, 3, 3),
        profile_from_dict(FLAT),
        runs=3,
        max_instances=2,
        preprovision=preprovision,
    )
    estimate = sim((1, 2))
    assert estimate.jct_s == pytest.approx(jct_s)
    assert estimate.cost_usd == pytest.approx(billed_s * 0.001)


def test_the_planner_can_choose_to_pre_provision():
    job = ShaJob(81, 1, 81, 3)
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")
    ways = {
        way: plan_job(job, profile, 90 * 60, max_instances=3, preprovision=way)
        for way in ("off", "on", "auto")
    }
    assert not ways["off"].preprovision and ways["on"].preprovision
    auto = ways["auto"]
    assert auto.estimate.cost_usd <= min(ways[w].estimate.cost_usd for w in ("off", "on"))
    assert auto.estimate.jct_p95_s <= 90 * 60
    written = plan_json(auto, job, profile)
    assert written["preprovision"] == auto.preprovision
    spec = PlanSpec.model_validate(json.loads(json.dumps(written)) | {"preprovision": True})
    assert spec.estimate.stage_end_s == pytest.approx(list(auto.estimate.stage_end_s))
    older = {
        **written,
        "estimate": {k: v for k, v in written["estimate"].items() if k != "stage_end_s"},
    }
    with pytest.raises(Exception, match="needs the plan's estimate.stage_end_s"):
        PlanSpec.model_validate(older | {"preprovision": True})
    with pytest.raises(Exception, match="preprovision 'maybe'"):
        plan_job(job, profile, 90 * 60, preprovision="maybe")


def test_more_time_left_at_a_barrier_never_gets_a_dearer_rest():
    # One search at what is left stopped at a local optimum: with 3 instances up after stage 0
    # and trials 0.8 times as long, 3400 s left got (1, 2, 2, 1) at 16.195 USD where 3350 s had
    # got (4, 3, 1, 1) at 16.057 USD.
    job = ShaJob(81, 1, 81, 3)
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")
    costs = []
    for left_s in range(3300, 3500, 50):
        rest = replan(
            job, profile, 1, left_s=left_s, live_s=(200.0,) * 3, speed=0.8, runs=30, max_instances=4
        )
        assert rest.meets
        costs.append(rest.estimate.cost_usd)
    assert costs == sorted(costs, reverse=True)
