"""GPU placement on the local pool, rehearsed on two "devices" that are both the CPU.

The executor only sees device names, so ("cpu", "cpu") runs the real path: shares, placements,
and a trial that grows over both devices and later moves back to one, restarting from its
checkpoint with its global batch size kept.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from basht.bench import run_benchmark
from basht.engine import COMPLETE, CONTINUE, LocalExecutor, TrialTask, WorkloadRef
from basht.engine.devices import Placement
from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment
from basht.store import Store
from basht.workloads import Resources
from basht.workloads.digits import DigitsMLP
from tests.tools import requires_tool

CONFIG = {"lr": 0.01, "hidden": 32, "batch_size": 64}
REF = WorkloadRef("digits-mlp")
DEVICES = ["cpu", "cpu"]


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


def _next(ex: LocalExecutor, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = ex.poll(1.0)
        assert not [e for e in events if e.kind == "failed"], events
        if events:
            return events
    raise AssertionError("no event in time")


def _straight(epochs: int) -> list[dict[str, float]]:
    workload = DigitsMLP(seed=0)
    workload.load(CONFIG, Resources(seed=3))
    out = []
    for _ in range(epochs):
        workload.train(1)
        out.append(workload.validate())
    return out


@pytest.mark.integration
def test_a_trial_grows_over_both_devices_then_moves_back_with_the_same_result():
    ex = LocalExecutor(workers=2, devices=DEVICES, scheduler="fluid", min_share=0.5)
    ex.start()
    try:
        ex.submit(TrialTask(1, CONFIG, REF, seed=3, target_budget=4))
        assert ex._loads[1].placement == Placement((0, 1), 1.0)  # alone: both devices
        reports, moves, done = [], [], set()
        while len(done) < 2:
            for e in _next(ex):
                if e.kind == "completed":
                    done.add(e.trial_id)
                elif e.trial_id == 2 and e.kind == "report":
                    ex.command(2, COMPLETE)
                elif e.kind == "loaded" and e.trial_id == 1 and reports:
                    moves.append((e.epoch, ex._loads[1].placement))  # restarted elsewhere
                elif e.kind == "report":
                    reports.append(e.metrics)
                    if len(reports) == 1:
                        ex.submit(TrialTask(2, CONFIG, REF, seed=4, target_budget=1))
                        assert ex._placements[2].width == 1.0
                    ex.command(1, CONTINUE if len(reports) < 4 else COMPLETE)
    finally:
        ex.shutdown()
    # It shrank to one device when trial 2 arrived. Once trial 2 was done it grows back only if
    # two replicas measured faster than one (on one CPU they are not, and it stays).
    assert moves[0] == (1, Placement((0,), 1.0)), moves
    assert [m[1].width for m in moves[1:]] in ([], [2.0])
    straight = _straight(4)
    # The replicas sum gradients in another order: predictions agree, losses to rounding.
    assert [r["accuracy"] for r in reports] == pytest.approx(
        [r["accuracy"] for r in straight], abs=0.01
    )
    for got, want in zip(reports, straight, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-3)


@pytest.mark.integration
def test_more_workers_than_devices_share_them():
    ex = LocalExecutor(workers=4, devices=DEVICES, scheduler="fifo")
    assert ex.min_share == 0.5
    ex.start()
    try:
        for i in range(4):
            ex.submit(TrialTask(i, CONFIG, REF, seed=i, target_budget=1))
        shares = sorted((p.devices, p.share) for p in ex._placements.values())
        assert shares == [((0,), 0.5), ((0,), 0.5), ((1,), 0.5), ((1,), 0.5)]
        done = 0
        while done < 4:
            for e in _next(ex):
                if e.kind == "report":
                    assert e.metrics["accuracy"] > 0.1
                    ex.command(e.trial_id, COMPLETE)
                elif e.kind == "completed":
                    done += 1
    finally:
        ex.shutdown()


def test_workers_that_cannot_fit_their_share_are_refused():
    with pytest.raises(BashtError, match="do not fit"):
        LocalExecutor(workers=4, devices=DEVICES, min_share=1.0)
    with pytest.raises(BashtError, match="1/2, 1/4"):
        LocalExecutor(workers=2, devices=DEVICES, min_share=0.3)


@pytest.mark.integration
def test_a_gpu_experiment_runs_end_to_end_on_listed_devices(tmp_path):
    spec = yaml.safe_load(Path("examples/digits-asha.yaml").read_text())
    spec["search"].update(max_trials=6, max_budget=3)
    spec["resources"].update(accelerator="gpu", devices=DEVICES, workers=2)
    spec["engine"] = {"scheduler": "fluid", "min_width": 0.5}
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert result.status == "completed"
    trials = Store(spec["store"]).trials(result.run_id)
    assert len(trials) == 6 and all(t.state in ("completed", "stopped") for t in trials)
    assert result.test_metrics["accuracy"] > 0.8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resources": {"accelerator": "cpu", "devices": DEVICES}}, "resources.devices: applies"),
        ({"engine": {"min_width": 0.5}}, "engine.min_width: a GPU share"),
    ],
)
def test_gpu_options_without_a_gpu_are_refused(spec, change, message):
    for key, value in change.items():
        spec.setdefault(key, {}).update(value)
    with pytest.raises(ExperimentError, match=message):
        Experiment.from_dict(spec)


@pytest.mark.skipif(_cuda_devices() > 0, reason="this machine has a CUDA device")
def test_a_gpu_run_without_devices_says_what_to_give(spec, tmp_path):
    spec["resources"]["accelerator"] = "gpu"
    with pytest.raises(BashtError, match="no CUDA device is visible"):
        run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")


def test_a_share_that_does_not_pack_is_refused_when_the_file_is_read(spec):
    spec["resources"].update(accelerator="gpu", devices=DEVICES)
    spec["engine"] = {"min_width": 0.3}
    with pytest.raises(ExperimentError, match="engine.min_width.*1/2, 1/4"):
        Experiment.from_dict(spec)


@pytest.mark.integration
@requires_tool("cuda")
def test_digits_asha_on_a_real_gpu_books_its_gpu_energy_to_the_trials_sharing_it(tmp_path):
    spec = yaml.safe_load(Path("examples/digits-asha.yaml").read_text())
    spec["resources"].update(accelerator="gpu", workers=2)  # both on cuda:0, half each
    spec["engine"] = {"scheduler": "fluid", "min_width": 0.5}
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert result.status == "completed"
    assert result.test_metrics["accuracy"] >= 0.95
    store = Store(spec["store"])
    gpu = [a for a in store.energy_accounts(result.run_id) if a.component == "gpu:0"]
    assert {a.source for a in gpu} == {"nvml"}
    trial_j = sum(a.energy_j for a in gpu if a.kind == "trial")
    assert trial_j > 0 and sum(a.energy_j for a in gpu) > trial_j  # and an idle floor
