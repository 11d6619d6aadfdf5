"""RubberBand's offline profiling on this machine: `basht profile` times one trial's epochs at
several GPU counts and an instance's start-up, and writes a profile `basht plan` reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from basht.plan import load_profile
from tests.cli import basht
from tests.conftest import BASE

pytestmark = pytest.mark.integration

INSTANCE = "aws:p3.8xlarge"  # 4 GPUs: an instance here is 4 worker processes


def _experiment(tmp_path: Path) -> Path:
    spec = BASE | {"name": "slow", "workload": {"name": "sleep", "params": {"epoch_s": 0.05}}}
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_basht_profile_times_each_gpu_count_and_the_start_up_and_plan_reads_it(tmp_path):
    file = _experiment(tmp_path)
    args = ["--instance", INSTANCE, "--gpus", "1,2", "--epochs", "3", "--startups", "1"]
    proc = basht("profile", str(file), *args, "--out", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote p.yaml" in proc.stdout
    profile = load_profile(tmp_path / "p.yaml")
    assert profile.price.instance == "p3.8xlarge" and profile.gpus_per_instance == 4
    # Three epochs at each count; the first warms up and is not a sample.
    assert sorted(profile.epoch_s) == [1, 2]
    assert all(len(s) == 2 and all(t >= 0.05 for t in s) for s in profile.epoch_s.values())
    assert len(profile.startup_s) == 1 and profile.startup_s[0] > 0
    assert len(profile.overhead_s) == 2 and all(s > 0 for s in profile.overhead_s)  # one per count
    assert profile.source.startswith("measured by basht profile on ")
    plan = basht("plan", str(file), "--profile", "p.yaml", "--deadline", "1h", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "measured by basht profile" in " ".join(plan.stdout.split())
    # --full: each count timed with the instance full, as a stage runs its trials: 4 trials at
    # once at 1 GPU, 2 at 2 GPUs, every one's epochs (bar its first) and overhead samples.
    args[args.index("--epochs") + 1] = "2"
    full = basht("profile", str(file), *args, "--full", "--out", "f.yaml", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    packed = load_profile(tmp_path / "f.yaml")
    assert {k: len(s) for k, s in packed.epoch_s.items()} == {1: 4, 2: 2}
    assert len(packed.overhead_s) == 4 + 2
    assert "a full instance of trials" in packed.source
    # And this machine's power, idle and with the instance full, by the source it has here.
    assert packed.power_w is not None and 0 < packed.power_w[0] <= packed.power_w[1]
    assert "power_w: this whole machine, by " in packed.source
    assert "power (this whole machine" in full.stdout
    assert load_profile(tmp_path / "p.yaml").power_w is None  # one trial alone: no power


def test_gpu_counts_this_machine_or_the_instance_cannot_hold_are_one_line(tmp_path):
    file = _experiment(tmp_path)
    for gpus, message in (
        ("1,512", "--gpus: 512 GPUs per trial, but the instance has 4"),
        ("1,x", "--gpus: expected whole numbers"),
    ):
        proc = basht("profile", str(file), "--instance", INSTANCE, "--gpus", gpus, cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    if (os.cpu_count() or 1) < 8:  # more GPUs per trial than this machine has cores
        proc = basht(
            "profile", str(file), "--instance", "aws:p4d.24xlarge", "--gpus", "8", cwd=tmp_path
        )
        assert proc.returncode == 2 and "8 GPUs are emulated by 8 cores here" in proc.stderr
    assert not (tmp_path / "profile.yaml").exists()


def test_what_profiling_cannot_use_is_refused_before_it_measures(tmp_path):
    # Each of these used to be found only after every count and start-up had been timed (or,
    # for a count below 1 or an instance without GPUs, with a message about cores).
    file = _experiment(tmp_path)
    for instance, args, message in (
        (INSTANCE, ["--gpus", "1"], "--gpus 1: one GPU count; time more"),
        (INSTANCE, ["--gpus", "1", "--scaling", "0"], "--scaling: expected b > 0"),
        (INSTANCE, ["--gpus", "0,1"], "--gpus: expected GPU counts >= 1, got 0"),
        ("aws:m5.large", ["--gpus", "1"], "--instance aws:m5.large: a plan needs GPU instances"),
    ):
        proc = basht("profile", str(file), "--instance", instance, *args, cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "profile of" not in proc.stdout  # nothing was timed
    assert not (tmp_path / "profile.yaml").exists()
