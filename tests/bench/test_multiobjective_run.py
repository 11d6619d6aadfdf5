"""`basht run` of several objectives and a constraint, for real: the front in results.json, the
scores in the decision log, the measured metrics in the reports; and a killed run that resumes
to the front an uninterrupted one reaches."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.store import Store
from basht.workloads import Resources
from tests.cli import basht, run_in_background, wait_for_trials

pytestmark = pytest.mark.integration


class TradeOff:
    """A deterministic trade-off between two reported metrics: `accuracy` rises with x + y and
    with epochs, `size` grows with x and with y², so no configuration is best in both."""

    metrics = ("accuracy", "size")

    def __init__(self, seed: int = 0, epoch_s: float = 0.0):
        self.epoch_s, self.epoch = epoch_s, 0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        self.x, self.y = float(config["x"]), float(config["y"])

    def train(self, epochs: int) -> None:
        time.sleep(self.epoch_s * epochs)
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        curve = 1.0 - math.exp(-0.5 * self.epoch)
        return {"accuracy": curve * (self.x + self.y) / 2, "size": self.x + self.y**2}

    def test(self) -> dict[str, float]:
        return self.validate()

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]


def _results(store: Store, run_id: str) -> dict[str, Any]:
    return json.loads((Path(store.get_run(run_id).results_dir) / "results.json").read_text())


def _front(results: dict[str, Any]) -> list[tuple[int, dict[str, Any], dict[str, float]]]:
    return [(f["trial"], f["config"], f["values"]) for f in results["objectives"]["front"]]


def test_a_run_of_accuracy_against_energy_under_a_cap_reports_its_front(spec, tmp_path):
    spec["workload"] = {"name": "digits-mlp", "params": {}}
    spec["space"] = {
        "lr": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True},
        "hidden": {"type": "int", "low": 8, "high": 256, "log": True},
        "batch_size": {"type": "choice", "values": [16, 64, 256]},
    }
    spec["search"] = {
        "pruner": "asha",
        "objectives": [
            {"metric": "accuracy", "mode": "max"},
            {"metric": "train_energy_kwh", "mode": "min"},
        ],
        "constraints": [{"metric": "train_energy_kwh", "max": 1.0}],  # a kWh: never reached
        "min_budget": 1,
        "max_budget": 9,
        "eta": 3,
        "max_trials": 27,
    }
    path = tmp_path / "mo.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    done = basht("run", "-q", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pruner asha (promotion), 2 objectives (eps-net)" in done.stdout

    store = Store(spec["store"])
    (run,) = store.list_runs()
    results = _results(store, run.id)
    summary = results["objectives"]
    front = _front(results)
    # A few trials reach the top rung; the cheapest of them is rarely the most accurate.
    assert len(front) > 1, summary["front"]
    assert summary["hypervolume"] > 0
    reference = summary["reference"]
    assert set(reference) == {"accuracy", "train_energy_kwh"}
    assert all(math.isfinite(v) for v in reference.values())
    for _, _, values in front:  # the reference is beyond every point, in the objectives' units
        assert values["accuracy"] > reference["accuracy"]
        assert 0 <= values["train_energy_kwh"] < reference["train_energy_kwh"]
    assert summary["chosen"] in [trial for trial, _, _ in front]
    assert summary["chosen"] == results["best"]["trial"] == run.best_trial
    # "first": the most accurate trial of the front.
    assert results["best"]["value"] == max(values["accuracy"] for _, _, values in front)

    decisions = store.decisions(run.id)
    reports = [d for d in decisions if d.op == "report"]
    assert reports and all(d.scores is not None and len(d.scores) == 3 for d in reports)
    assert all(d.scores[0] == 0 for d in reports)  # feasible: far under the cap
    assert all(d.scores[1] == pytest.approx(-d.value) for d in reports)  # accuracy, signed
    stored = store.reports(run.id)
    assert stored
    for report in stored:
        # A first epoch may end before the monitor's next sample books the trial anything.
        assert report.metrics["train_energy_kwh"] >= 0
        assert report.metrics["train_time_s"] > 0
        assert report.metrics["train_time_s"] >= report.metrics["train_time_s_spent"]
    assert max(r.metrics["train_energy_kwh"] for r in stored) > 0


def _trade_off_spec(spec: dict[str, Any], tmp_path: Path, name: str) -> Path:
    spec = dict(spec, name=name)
    spec["workload"] = {"name": f"{__name__}:TradeOff", "params": {"epoch_s": 0.03}}
    spec["space"] = {
        "x": {"type": "float", "low": 0.0, "high": 1.0},
        "y": {"type": "float", "low": 0.0, "high": 1.0},
    }
    spec["search"] = {
        "pruner": "asha",
        "objectives": [{"metric": "accuracy", "mode": "max"}, {"metric": "size", "mode": "min"}],
        "constraints": [{"metric": "size", "max": 1.5}],
        "min_budget": 1,
        "max_budget": 9,
        "eta": 3,
        "max_trials": 24,
    }
    spec["resources"] = {"workers": 1}  # one worker: the same calls in the same order each run
    spec["store"] = f"sqlite:///{tmp_path / name}.db"
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_killed_multi_objective_run_resumes_to_the_uninterrupted_front(spec, tmp_path):
    whole_path = _trade_off_spec(spec, tmp_path, "whole")
    done = basht("run", "-q", "--no-plots", str(whole_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    whole = Store(f"sqlite:///{tmp_path / 'whole.db'}")
    (run,) = whole.list_runs()
    expected = _results(whole, run.id)
    assert len(expected["objectives"]["front"]) > 1
    assert any(not t["feasible"] for t in expected["objectives"]["trials"])  # the cap bites
    whole_log = [(d.op, d.trial, d.budget, d.result, d.scores) for d in whole.decisions(run.id)]

    url, db = f"sqlite:///{tmp_path / 'killed.db'}", tmp_path / "killed.db"
    proc = run_in_background(_trade_off_spec(spec, tmp_path, "killed"), tmp_path)
    try:
        # Far enough that trials paused at a rung were told a score (and one runs), not so far
        # that the run is over: reports stored for six trials of the 24.
        wait_for_trials(
            url, db, lambda store, run: len({r.trial_id for r in store.reports(run.id)}) >= 6
        )
    finally:
        proc.kill()  # SIGKILL: nothing is flushed or marked
        proc.communicate(timeout=60)
    store = Store(url)
    (run,) = store.list_runs()
    assert run.status == "running"
    assert len(store.trials(run.id)) < 24, "the run ended before it was killed"

    resumed = basht("resume", run.id, "--store", url, "-q", "--no-plots", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    store = Store(url)
    assert store.get_run(run.id).status == "completed"
    assert {p.attempt for p in store.phases(run.id)} == {1, 2}
    results = _results(store, run.id)
    assert _front(results) == _front(expected)
    assert results["objectives"]["hypervolume"] == expected["objectives"]["hypervolume"]
    assert results["objectives"]["chosen"] == expected["objectives"]["chosen"]
    # The whole log, before and after the kill, is the uninterrupted run's, scores and all.
    logged = [(d.op, d.trial, d.budget, d.result, d.scores) for d in store.decisions(run.id)]
    assert logged == whole_log
