"""RubberBand: SHA's stages, the simulator against hand-worked plans, and the greedy planner."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from basht.errors import BashtError
from basht.plan import ShaJob, Simulator, Stage, load_profile, plan_job
from basht.plan.planner import (
    best_static,
    brute_force,
    check_size,
    default_max_instances,
    greedy,
    pair_moves,
)
from basht.plan.profile import parse_duration, profile_from_dict
from basht.plan.simulator import stage_layout, stage_levels
from tests.cli import basht, cli_env

ROOT = Path(__file__).resolve().parents[2]


def test_sha_stages_train_each_survivor_from_its_last_rung():
    stages = ShaJob(81, 1, 81, 3).stages
    assert [(s.trials, s.epochs) for s in stages] == [(81, 1), (27, 2), (9, 6), (3, 18), (1, 54)]
    # A max budget that is not a power of eta: its last stage trains up to it, as the tuners do.
    assert [(s.trials, s.epochs) for s in ShaJob(64, 1, 20, 3).stages] == [
        (64, 1),
        (21, 2),
        (7, 6),
        (2, 11),
    ]


def _flat(**instance) -> dict:
    """No spread at all: every epoch and every start-up takes the same time."""
    return {
        "instance": {"usd_per_hour": 3.6, "gpus": 2, **instance},  # 0.001 USD a second
        "epoch_s": {1: [10.0], 2: [6.0]},
        "startup_s": [5.0],
    }


@pytest.mark.parametrize(
    ("plan", "jct_s", "billed_s"),
    [
        # 4 trials x 1 epoch on one instance: 1 GPU each, 2 at a time (2 waves, 20 s after the
        # 5 s start-up); then the survivor gets both GPUs: 2 epochs x 6 s.
        ((1, 1), 5 + 20 + 12, 37),
        # Two instances: one wave (5 + 10); one is released at that barrier (billed 15 s).
        ((2, 1), 5 + 10 + 12, 15 + 27),
        # A second instance asked for at the barrier: the survivor starts on the first at once.
        ((1, 2), 5 + 20 + 12, 37 + 12),
    ],
)
def test_the_simulator_matches_plans_worked_by_hand(plan, jct_s, billed_s):
    sim = Simulator(ShaJob(4, 1, 3, 3), profile_from_dict(_flat()), runs=3, max_instances=2)
    estimate = sim(plan)
    assert estimate.jct_s == pytest.approx(jct_s) and estimate.jct_p95_s == pytest.approx(jct_s)
    assert estimate.cost_usd == pytest.approx(billed_s * 0.001)


def test_each_instance_is_billed_by_the_providers_rule():
    # AWS bills per second with a 60 s minimum: the instance released after 15 s costs 60 s.
    sim = Simulator(
        ShaJob(4, 1, 3, 3), profile_from_dict(_flat(provider="aws")), runs=1, max_instances=2
    )
    assert sim((2, 1)).cost_usd == pytest.approx((60 + 60) * 0.001)  # 15 s and 27 s lives


def test_each_trial_has_its_overhead_besides_its_epochs():
    # 1 s of overhead per trial: the plan (1, 1) of the hand-worked cases takes 2 + 1 s longer
    # (two waves in stage 0, one survivor in stage 1) and is billed for them.
    loading = profile_from_dict(_flat() | {"overhead_s": [1.0]})
    estimate = Simulator(ShaJob(4, 1, 3, 3), loading, runs=3, max_instances=2)((1, 1))
    assert estimate.jct_s == pytest.approx(5 + 22 + 13)
    assert estimate.cost_usd == pytest.approx(40 * 0.001)


def test_data_movement_is_billed_for_each_instance_launched():
    # 2 GB at 0.05 USD/GB: 0.1 USD for each instance the plan launches, nothing for one it keeps.
    moved = profile_from_dict(_flat() | {"data": {"gb": 2, "usd_per_gb": 0.05}})
    assert moved.data_usd_per_instance == pytest.approx(0.1)
    for plan, launched in (((1, 1), 1), ((2, 1), 2), ((1, 2), 2)):
        plain = Simulator(ShaJob(4, 1, 3, 3), profile_from_dict(_flat()), runs=3, max_instances=2)
        sim = Simulator(ShaJob(4, 1, 3, 3), moved, runs=3, max_instances=2)
        assert sim(plan).jct_s == plain(plan).jct_s
        assert sim(plan).cost_usd == pytest.approx(plain(plan).cost_usd + 0.1 * launched)


def _tail() -> dict:
    return {
        "instance": "aws:p3.8xlarge",
        "epoch_s": {1: [60, 61, 62, 63, 65, 70, 90], 2: [33, 34, 35, 38, 50], 4: [19, 20, 22, 30]},
        "startup_s": [90, 110, 180],
    }


def test_stragglers_make_a_barrier_over_more_trials_later_and_draws_are_common():
    profile = profile_from_dict(_tail())
    few = Simulator(ShaJob(4, 1, 1, 3), profile, runs=400, max_instances=1)((1,))
    many = Simulator(ShaJob(64, 1, 1, 3), profile, runs=400, max_instances=16)((16,))
    # Both run one wave of one-GPU trials for one epoch; 64 trials wait for a slower straggler.
    assert many.jct_s > few.jct_s and many.jct_p95_s >= many.jct_s
    again = Simulator(ShaJob(64, 1, 1, 3), profile, runs=400, max_instances=16)((16,))
    assert again == many  # the same seed, the same draws


def test_a_gpu_count_not_profiled_is_scaled_by_the_fitted_exponent():
    profile = profile_from_dict({**_tail(), "epoch_s": {1: [60.0], 2: [30.0]}})
    assert profile.exponent == pytest.approx(1.0)
    assert profile.epoch_quantile(4, np.array([0.5]))[0] == pytest.approx(15.0)
    with pytest.raises(BashtError, match="profiled at 1 GPU only"):
        profile_from_dict({**_tail(), "epoch_s": {1: [60.0]}})
    assert profile_from_dict({**_tail(), "epoch_s": {1: [60.0]}, "scaling": 0.5}).exponent == 0.5
    # More GPUs measured slower (they shared a machine's cores): beyond them, no faster, no slower.
    slower = profile_from_dict({**_tail(), "epoch_s": {1: [10.0], 2: [20.0]}})
    assert slower.exponent == 0.0
    assert slower.epoch_quantile(4, np.array([0.5]))[0] == pytest.approx(20.0)


@pytest.mark.parametrize("deadline_s", [1500, 2000, 2600])
def test_the_plan_meets_the_deadline_beats_static_and_is_near_the_optimum(deadline_s):
    sim = Simulator(ShaJob(27, 1, 27, 3), profile_from_dict(_tail()), runs=100, max_instances=5)
    static = best_static(sim, deadline_s)
    single = greedy(sim, static, deadline_s)
    plan = pair_moves(sim, static, deadline_s)
    optimum = brute_force(sim, deadline_s)
    assert sim(plan).jct_p95_s <= deadline_s
    assert sim(optimum).cost_usd <= sim(plan).cost_usd <= sim(single).cost_usd
    assert sim(single).cost_usd <= sim(static).cost_usd
    assert sim(plan).cost_usd <= 1.05 * sim(optimum).cost_usd
    if deadline_s == 2000:  # one instance moved from stage 1 to stage 0: a pair move finds it
        assert single == (1, 2, 1, 1) and plan == optimum == (2, 1, 1, 1)


def test_plan_job_is_cheaper_than_static_where_late_stages_idle_and_says_when_none_fits():
    job, profile = ShaJob(81, 1, 81, 3), profile_from_dict(_tail())
    result = plan_job(job, profile, 3600, runs=100)
    assert result.estimate.jct_p95_s <= 3600 and result.saving > 1.1
    assert result.plan[-1] < result.plan[0]  # one trial left: the cluster shrinks
    with pytest.raises(BashtError, match="no plan of up to 21 instances meets the deadline"):
        plan_job(job, profile, 600, runs=20)


@pytest.mark.parametrize(
    ("text", "seconds"), [("5400", 5400), ("90m", 5400), ("1h30m", 5400), ("2h", 7200)]
)
def test_deadlines_read_as_people_write_them(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1h30", "2m30", "1h2m3"])
def test_a_deadline_whose_last_number_has_no_unit_after_hours_or_minutes_is_refused(text):
    # 1h30 was read as 1 h 30 s, where people mean 1 h 30 min.
    with pytest.raises(BashtError, match="give the unit of its last number"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("profile", "named"),
    [
        ({"epoch_s": {1: [1]}}, "instance: missing required key"),
        ({**_tail(), "epoch": {}}, "epoch: unknown key"),
        ({**_tail(), "instance": "aws:nope"}, "instance: "),
        ({**_tail(), "instance": "p3"}, "instance: expected provider:instance"),
        ({**_tail(), "epoch_s": {1: [-1.0]}}, "epoch_s.1: expected seconds > 0"),
        ({**_tail(), "instance": {"usd_per_hour": 1.0}}, "instance.gpus: missing required key"),
        ({**_tail(), "instance": {"usd_per_hour": 1.0, "gpu": 4}}, "instance.gpu: unknown key"),
        ({**_tail(), "instance": {"usd_per_hour": "cheap", "gpus": 4}}, "expected a number"),
        ({**_tail(), "instance": {"usd_per_hour": 0, "gpus": 4}}, "expected a price > 0"),
        ({**_tail(), "instance": {"usd_per_hour": 1, "gpus": 2.9}}, "instance.gpus: expected a"),
        ({**_tail(), "instance": {"usd_per_hour": 1, "gpus": 4, "provider": "x"}}, "provider"),
        ({**_tail(), "epoch_s": {4: [20.0]}}, "epoch_s: profiled at 4 GPUs only"),
        ({**_tail(), "scaling": float("nan")}, "scaling: expected a number"),
        ({**_tail(), "scaling": -2}, "scaling: expected b > 0"),
        ({**_tail(), "data": {"gb": 2}}, "data.usd_per_gb: missing required key"),
        ({**_tail(), "overhead_s": [-1]}, "overhead_s: expected seconds >= 0"),
        ({**_tail(), "data": {"gb": -1, "usd_per_gb": 0.1}}, "data.gb: expected a number >= 0"),
        ({**_tail(), "data": {"gb": 1, "usd_per_gb": 0.1, "egress": 1}}, "data.egress: unknown"),
        # Not read as 1 GPU, nor as a sample of 1 s.
        ({**_tail(), "epoch_s": {1.5: [60.0], 2: [30.0]}}, "epoch_s.1.5: expected a whole GPU"),
        ({**_tail(), "epoch_s": {1: [60.0, True], 2: [30.0]}}, "epoch_s.1: expected a number"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_key(tmp_path, profile, named):
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    with pytest.raises(BashtError) as err:
        load_profile(path)
    assert str(err.value).startswith(f"{path}: ") and named in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        # A YAML error is one line, as the experiment file's is.
        ("instance: aws:p3.8xlarge\nepoch_s: {1: [60], 2: [30]\n", "not valid YAML: while parsing"),
        # 1 and "1" are one GPU count: one of the two lists would be dropped without a word.
        ('instance: aws:p3.8xlarge\nepoch_s: {1: [60], "1": [70], 2: [30]}\n', "given twice"),
    ],
)
def test_a_bad_profile_file_is_one_line(tmp_path, text, named):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(BashtError) as err:
        load_profile(path)
    assert str(err.value).startswith(f"{path}: ") and named in str(err.value)
    assert "\n" not in str(err.value)


def _basht(*args: str) -> subprocess.CompletedProcess[str]:
    return basht(*args, timeout=120)


@pytest.mark.integration
def test_basht_plan_prints_the_plan_and_writes_it(tmp_path):
    out = tmp_path / "plan.json"
    example = ["examples/plan/sha-81.yaml", "--profile", "examples/plan/p3-profile.yaml"]
    proc = _basht("plan", *example, "--deadline", "1h", "--runs", "50", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "RubberBand" in proc.stdout and "best static" in proc.stdout
    saved = json.loads(out.read_text())
    assert len(saved["plan"]) == len(saved["job"]["stages"]) == 5
    assert saved["estimate"]["jct_p95_s"] <= 3600
    assert saved["estimate"]["cost_usd"] <= saved["static_estimate"]["cost_usd"]
    # Each stage's mean end, in minutes, as the table shows it and the file keeps it.
    ends = saved["estimate"]["stage_end_s"]
    assert len(ends) == 5 and ends == sorted(ends) and ends[-1] == saved["estimate"]["jct_s"]
    assert "mean end, min" in proc.stdout and f"{ends[0] / 60:.1f}" in proc.stdout
    bad = _basht("plan", *example, "--deadline", "soon")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "deadline 'soon'" in bad.stderr
    # A --json folder that cannot be made is said before planning, and nothing is printed.
    (tmp_path / "a-file").write_text("")
    blocked = _basht(
        "plan", *example, "--deadline", "1h", "--json", str(tmp_path / "a-file/p.json")
    )
    assert blocked.returncode == 2 and not blocked.stdout
    assert (
        blocked.stderr.strip()
        == f"error: {tmp_path / 'a-file'}: a file is there, where a folder is needed"
    )


@pytest.mark.integration
def test_a_profile_from_a_stored_run_holds_every_epoch_it_trained(tmp_path):
    from basht.plan.profile import profile_from_run
    from basht.store import Store

    spec = yaml.safe_load((ROOT / "examples" / "sleep-smoke.yaml").read_text())
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    spec["search"].update(pruner="asha", max_budget=9, eta=3)  # promoted trials load again
    path = tmp_path / "profiled.yaml"
    path.write_text(yaml.safe_dump(spec))
    run = subprocess.run(
        [sys.executable, "-m", "basht.cli", "run", "-q", str(path), "--results", str(tmp_path)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    store = Store(spec["store"])
    (stored,) = store.list_runs()
    reports = store.reports(stored.id)
    profile = profile_from_run(store, stored.id, "aws:p3.8xlarge", scaling=0.8)
    assert sorted(profile.epoch_s[1]) == sorted(r.train_s + r.validate_s for r in reports)
    assert profile.source.startswith(f"run {stored.id}: {len(reports)} epochs measured")
    # A trial's overhead: its load time per start or resume, one sample per trial.
    loads = {t.number: t.load_s for t in store.trials(stored.id)}
    starts = {
        n: sum(d.op == "suggest" and d.trial == n for d in store.decisions(stored.id))
        for n in loads
    }
    assert any(count > 1 for count in starts.values()), "ASHA resumed no trial"
    assert sorted(profile.overhead_s) == pytest.approx(sorted(loads[n] / starts[n] for n in loads))
    with pytest.raises(BashtError, match="measured one GPU per trial: give the scaling"):
        profile_from_run(store, stored.id, "aws:p3.8xlarge")
    planned = _basht(
        "plan", "examples/plan/sha-81.yaml", "--from-run", stored.id, "--store", spec["store"],
        "--instance", "aws:p3.8xlarge", "--scaling", "0.8", "--deadline", "1h", "--runs", "20",
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert f"profile: run {stored.id}" in planned.stdout


def test_a_plans_estimate_does_not_depend_on_how_many_instances_may_be_used():
    job, profile = ShaJob(27, 1, 27, 3), profile_from_dict(_tail())
    few = Simulator(job, profile, runs=50, max_instances=3)
    many = Simulator(job, profile, runs=50, max_instances=30)
    assert few((3, 2, 1, 1)) == many((3, 2, 1, 1))


def test_pruner_none_is_one_stage_and_a_profile_file_takes_no_run_options(tmp_path):
    from basht.experiment import load_experiment
    from basht.plan.profile import choose_profile

    spec = yaml.safe_load((ROOT / "examples" / "plan" / "sha-81.yaml").read_text())
    spec["search"]["pruner"] = "none"
    path = tmp_path / "none.yaml"
    path.write_text(yaml.safe_dump(spec))
    job = ShaJob.from_experiment(load_experiment(path))
    assert [(s.trials, s.epochs) for s in job.stages] == [(81, 81)]
    example = ROOT / "examples" / "plan" / "p3-profile.yaml"
    with pytest.raises(BashtError, match="--scaling: only with --from-run"):
        choose_profile(example, None, lambda: None, scaling=0.5)
    with pytest.raises(BashtError, match="one of them"):
        choose_profile(None, None, lambda: None)


def test_a_plan_that_scales_is_found_where_no_static_cluster_meets_the_deadline():
    # Measured slower at 2 and 4 GPUs per trial (as on shared cores): the last stage's single
    # trial gets the instance's 4 GPUs whatever, but stage 2's 3 trials are fastest on one
    # instance (1 GPU each) while stage 0's 27 are fastest on many. No static cluster is both.
    profile = profile_from_dict(
        {
            "instance": {"usd_per_hour": 4.0, "gpus": 4},
            "epoch_s": {1: [10.0, 11.0], 2: [30.0, 31.0], 4: [30.0, 32.0]},
            "startup_s": [5.0],
        }
    )
    job = ShaJob(27, 1, 27, 3)
    sim = Simulator(job, profile, runs=50, max_instances=7)
    statics = min(sim((m,) * 4).jct_p95_s for m in range(1, 8))
    deadline_s = statics - 30  # no static cluster meets it
    assert best_static(sim, deadline_s) is None and brute_force(sim, deadline_s) is not None
    result = plan_job(job, profile, deadline_s, runs=50, max_instances=7)
    assert result.estimate.jct_p95_s <= deadline_s
    assert result.static_estimate.jct_p95_s == pytest.approx(statics)  # the fastest, late
    # A deadline none meets names the fastest plan found, not the largest static cluster.
    with pytest.raises(BashtError, match=r"the fastest plan found \(7 3 1 1 instances") as err:
        plan_job(job, profile, 600, runs=50, max_instances=7)
    assert sim((7, 3, 1, 1)).jct_p95_s < statics and "680 s" in str(err.value)


@pytest.mark.integration
def test_basht_plan_says_when_only_a_plan_that_scales_meets_the_deadline(tmp_path):
    profile = {
        "instance": {"usd_per_hour": 4.0, "gpus": 4},
        "epoch_s": {1: [10.0, 11.0], 2: [30.0, 31.0], 4: [30.0, 32.0]},
        "startup_s": [5.0],
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(profile))
    experiment = yaml.safe_load((ROOT / "examples/plan/sha-81.yaml").read_text())
    experiment["search"] |= {"max_budget": 27, "max_trials": 27}
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    sim = Simulator(ShaJob(27, 1, 27, 3), profile_from_dict(profile), runs=50, max_instances=7)
    deadline = f"{min(sim((m,) * 4).jct_p95_s for m in range(1, 8)) - 30:.0f}"
    args = ["--profile", "p.yaml", "--deadline", deadline, "--runs", "50", "--max-instances", "7"]
    proc = basht("plan", "e.yaml", *args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no static cluster meets the deadline, only a plan that scales" in proc.stdout
    assert "less than the best static" not in proc.stdout  # no saving against a late cluster


@pytest.mark.parametrize("preprovision", ["off", "auto"])
def test_each_plan_is_simulated_and_counted_once(monkeypatch, preprovision):
    # The best static plan was simulated twice (by the static search, then by the search from
    # it) and counted twice. Pre-provisioned, a plan that never grows is the same plan.
    simulated = []
    simulate = Simulator._simulate

    def counted(sim, plan):
        ahead = sim.preprovision and any(b > a for a, b in itertools.pairwise(plan))
        simulated.append((plan, ahead))
        return simulate(sim, plan)

    monkeypatch.setattr(Simulator, "_simulate", counted)
    job, profile = ShaJob(27, 1, 27, 3), profile_from_dict(_tail())
    result = plan_job(job, profile, 2000, runs=50, max_instances=5, preprovision=preprovision)
    assert result.simulations == len(simulated) == len(set(simulated))


def test_a_later_deadline_never_gets_a_dearer_plan():
    # The greedy and the pair moves stop at a local optimum: with the example profile, 2360 s
    # gave a plan 2.2 % dearer than 2320 s did (and 1520 s 1.2 % dearer than 1480 s).
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")
    job = ShaJob(81, 1, 9, 3)
    costs = []
    for deadline_s in range(1480, 2560, 40):
        result = plan_job(job, profile, deadline_s, runs=50, max_instances=7)
        assert result.estimate.jct_p95_s <= deadline_s
        costs.append(result.estimate.cost_usd)
    assert costs == sorted(costs, reverse=True)


def test_a_job_too_large_to_plan_is_refused_before_anything_is_simulated(monkeypatch):
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")

    def simulated(*args, **kwargs):
        raise AssertionError("a simulator was made")

    monkeypatch.setattr(Simulator, "__init__", simulated)
    # Each plan draws 200 runs of 131071 trials, and a step of the search tries millions.
    with pytest.raises(BashtError) as err:
        plan_job(ShaJob(65536, 1, 65536, 2), profile, 3600)
    assert str(err.value).startswith(
        "job too large to plan: 65536 trials over 17 stages on up to 16384 instances at 200 runs"
    )
    assert "over the limit of 2e+08; give fewer trials (search.max_trials)" in str(err.value)
    # Few runs, but too many plans one or two stages away from each plan.
    with pytest.raises(BashtError, match="simulates 2897 plans, over the limit of 2000"):
        plan_job(ShaJob(512, 1, 512, 2), profile, 3600, runs=1)


@pytest.mark.parametrize(
    ("job", "runs", "max_instances"),
    [
        (ShaJob(81, 1, 81, 3), 200, None),  # examples/plan/sha-81.yaml, as `basht plan` plans it
        (ShaJob(81, 1, 81, 3), 1000, None),
        (ShaJob(27, 1, 27, 3), 200, 7),  # benchmarks/rubberband_plan.py's small job
        (ShaJob(81, 1, 81, 3), 200, 8),  # benchmarks/rubberband_replan.py
        (ShaJob(243, 1, 243, 3), 200, None),
    ],
)
def test_the_jobs_planned_in_use_are_not_too_large(job, runs, max_instances):
    profile = load_profile(ROOT / "examples/plan/p3-profile.yaml")  # 4 GPUs, as the benchmarks'
    check_size(job, profile, max_instances or default_max_instances(job, profile), runs)


@pytest.mark.integration
def test_basht_plan_refuses_a_job_too_large_in_one_line(tmp_path):
    experiment = yaml.safe_load((ROOT / "examples/plan/sha-81.yaml").read_text())
    experiment["search"] |= {"max_trials": 65536, "max_budget": 65536, "eta": 2}
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    profile = str(ROOT / "examples/plan/p3-profile.yaml")
    proc = basht(
        "plan", "e.yaml", "--profile", profile, "--deadline", "1h", cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 2 and not proc.stdout.strip()
    assert proc.stderr.strip().count("\n") == 0
    assert "job too large to plan: 65536 trials over 17 stages" in proc.stderr


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 6, 8])
def test_a_stages_levels_are_the_fewest_instances_of_each_layout(gpus):
    # Stepped from layout change to layout change, as counting every instance count finds them.
    for trials, cap in itertools.product([*range(1, 70), 243, 1000], [1, 5, 21, 300]):
        stage, seen, every = Stage(trials, 1), set(), []
        for m in range(1, cap + 1):
            layout = stage_layout(stage, m, gpus)
            if (layout.gpus_per_trial, layout.waves) not in seen:
                seen.add((layout.gpus_per_trial, layout.waves))
                every.append(m)
        assert stage_levels(stage, cap, gpus) == every, (trials, cap)
