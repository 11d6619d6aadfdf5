"""Commands as trials, for real: Python and bash scripts tuned by ASHA through `basht run`,
read through the metrics regex or the reporter, paused and resumed, crashing, hanging, killed,
interrupted; none leaves a process behind, and their CPU time is their trial's energy."""

from __future__ import annotations

import math
import signal
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
import yaml

from basht.store import Store
from tests.cli import basht, run_in_background, wait_for_trials

pytestmark = pytest.mark.integration

#: Prints its metrics and knows nothing of Basht (argparse, one line per epoch).
PLAIN = """
import argparse, math, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--epochs", type=int, default=9)
p.add_argument("--epoch-s", type=float, default=0.01)
p.add_argument("--busy", action="store_true")
a = p.parse_args()
ceiling = 1 / (1 + abs(math.log10(a.lr) + 2))
for epoch in range(1, a.epochs + 1):
    end = time.perf_counter() + a.epoch_s
    while a.busy and time.perf_counter() < end:
        pass
    time.sleep(0 if a.busy else a.epoch_s)
    acc = ceiling * (1 - math.exp(-0.5 * epoch))
    print(f"epoch {epoch} loss {1 - acc:.4f} val_acc {acc:.6f}", flush=True)
"""

#: Reports through the reporter and keeps its state when told to pause.
REPORTING = """
import json, math, sys, time
from basht.integrations import checkpoint_dir, config, report, resume_from
lr = config()["lr"]
ceiling = 1 / (1 + abs(math.log10(lr) + 2))
start = json.loads((resume_from() / "state.json").read_text())["epoch"] if resume_from() else 0
for epoch in range(start + 1, 10):
    time.sleep(0.01)
    decision = report(step=epoch, accuracy=ceiling * (1 - math.exp(-0.5 * epoch)))
    if decision == "pause":
        (checkpoint_dir() / "state.json").write_text(json.dumps({"epoch": epoch}))
        sys.exit(0)
    if decision == "stop":
        break
"""

REGEX = r"epoch (?P<step>\d+) .* val_acc (?P<accuracy>[0-9.]+)"


def _experiment(tmp_path: Path, workload: dict, trials: int = 9, workers: int = 2) -> Path:
    spec = {
        "name": "command",
        "seed": 0,
        "workload": {**workload, "env": {"BASHT_TEST_TAG": _tag(tmp_path)}},
        "space": {"lr": {"type": "float", "low": 1.0e-4, "high": 1.0, "log": True}},
        "search": {
            "pruner": "asha",
            "metric": "accuracy",
            "min_budget": 1,
            "max_budget": 9,
            "eta": 3,
            "max_trials": trials,
        },
        "resources": {"workers": workers},
        "measure": {"energy": "estimate"},
        "store": f"sqlite:///{tmp_path / 'basht.db'}",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _tag(tmp_path: Path) -> str:
    return tmp_path.name + "-" + uuid.uuid5(uuid.NAMESPACE_URL, str(tmp_path)).hex[:8]


def _left_behind(tmp_path: Path, wait_s: float = 10.0) -> list[str]:
    """The scripts of this test still running `wait_s` after the run ended."""
    tag, deadline = _tag(tmp_path), time.monotonic() + wait_s
    while True:
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get("BASHT_TEST_TAG") == tag and (
                    process.status() != psutil.STATUS_ZOMBIE
                ):
                    found.append(" ".join(process.cmdline()))
            except (psutil.Error, OSError):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _run(tmp_path: Path, path: Path) -> Store:
    done = basht("run", "-q", "--no-plots", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert _left_behind(tmp_path) == []
    return Store(f"sqlite:///{tmp_path / 'basht.db'}", create=False)


def test_an_unchanged_python_script_is_tuned_through_the_metrics_regex(tmp_path):
    (tmp_path / "train.py").write_text(PLAIN)
    workload = {"command": f"{sys.executable} train.py --lr {{lr}} --epochs {{budget}}"}
    store = _run(tmp_path, _experiment(tmp_path, {**workload, "metrics": REGEX}))
    (run,) = store.list_runs()
    trials = store.trials(run.id)
    assert run.algorithm.endswith("asha (stopping)")  # it saves nothing: stopped, never paused
    assert {t.state for t in trials} == {"completed", "stopped"}
    assert any(t.state == "stopped" and t.budget < 9 for t in trials)
    assert any(t.budget == 9 for t in trials)
    assert all(
        len([r for r in store.reports(run.id) if r.trial_id == t.id]) == t.budget for t in trials
    )


def test_a_bash_command_is_a_trial_too(tmp_path):
    script = 'for i in $(seq 1 {budget}); do echo "epoch $i loss 0 val_acc 0.${{i}}{x}"; done'
    spec = _experiment(tmp_path, {"command": ["bash", "-c", script], "metrics": REGEX}, trials=4)
    data = yaml.safe_load(spec.read_text())
    data["space"] = {"x": {"type": "int", "low": 1, "high": 9}}
    spec.write_text(yaml.safe_dump(data))
    store = _run(tmp_path, spec)
    (run,) = store.list_runs()
    best = store.get_run(run.id)
    assert best.best_value is not None and best.best_value > 0.9  # "0.9<x>" at epoch 9


def test_the_reporter_pauses_and_resumes_to_the_metric_of_training_straight_through(tmp_path):
    (tmp_path / "train.py").write_text(REPORTING)
    workload = {"command": [sys.executable, "train.py"], "checkpoint": True, "timeout_s": 60}
    store = _run(tmp_path, _experiment(tmp_path, workload, trials=12))
    (run,) = store.list_runs()
    assert run.algorithm.endswith("asha (promotion)")
    decisions = store.decisions(run.id)
    assert any(d.op == "suggest" and d.result == "resume" for d in decisions)
    for trial in store.trials(run.id):
        # Each value is the curve's at the trial's budget, resumed or not.
        ceiling = 1 / (1 + abs(math.log10(trial.config["lr"]) + 2))
        expected = ceiling * (1 - math.exp(-0.5 * trial.budget))
        assert trial.value == pytest.approx(expected, rel=1e-9)
        epochs = [r.epoch for r in store.reports(run.id) if r.trial_id == trial.id]
        assert epochs == list(range(1, trial.budget + 1))  # resumed from where it paused


@pytest.mark.parametrize(
    ("ending", "reason"),
    [
        ("sys.exit(3)", "exited with code 3"),
        ("os.kill(os.getpid(), signal.SIGKILL)", "killed by signal 9"),
        ("time.sleep(60)", "no report or output for 2 s"),
    ],
)
def test_a_script_that_crashes_is_killed_or_hangs_fails_its_trial_and_the_run_goes_on(
    tmp_path, ending, reason
):
    # Configurations above lr 0.1 rank best, train on, and go wrong in their second epoch.
    (tmp_path / "train.py").write_text(
        "import os, signal, sys, time\n"
        "lr = float(sys.argv[1])\n"
        "for epoch in range(1, 10):\n"
        "    if lr > 0.1 and epoch == 2:\n"
        "        print('about to go wrong', flush=True)\n"
        f"        {ending}\n"
        "    print(f'epoch {epoch} loss 0 val_acc {lr:.4f}', flush=True)\n"
    )
    workload = {
        "command": [sys.executable, "train.py", "{lr}"],
        "metrics": REGEX,
        "timeout_s": 2,
        "params": {"grace_s": 1},
    }
    store = _run(tmp_path, _experiment(tmp_path, workload, trials=8))
    (run,) = store.list_runs()
    assert run.status == "completed"
    trials = store.trials(run.id)
    failed = [t for t in trials if t.state == "failed"]
    assert failed and all(t.config["lr"] > 0.1 for t in failed)
    assert all(reason in t.error and "about to go wrong" in t.error for t in failed), [
        t.error for t in failed
    ]
    assert all(t.state in ("completed", "stopped") for t in trials if t.config["lr"] <= 0.1)


def test_ctrl_c_leaves_no_script_running(tmp_path):
    (tmp_path / "train.py").write_text(PLAIN)
    workload = {
        "command": f"{sys.executable} train.py --lr {{lr}} --epochs {{budget}} --epoch-s 1",
        "metrics": REGEX,
    }
    path = _experiment(tmp_path, workload, trials=20)
    proc = run_in_background(path, tmp_path)
    wait_for_trials(
        f"sqlite:///{tmp_path / 'basht.db'}",
        tmp_path / "basht.db",
        lambda store, run: any(t.state == "running" for t in store.trials(run.id)),
    )
    time.sleep(1.5)  # the scripts are mid-epoch
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _left_behind(tmp_path) == []


def test_a_scripts_cpu_time_is_its_trials_energy(tmp_path):
    (tmp_path / "train.py").write_text(PLAIN)
    workload = {
        "command": f"{sys.executable} train.py --lr {{lr}} --epochs {{budget}} --epoch-s 0.3 --busy",
        "metrics": REGEX,
    }
    spec = _experiment(tmp_path, workload, trials=2, workers=1)
    data = yaml.safe_load(spec.read_text())
    data["search"].update(pruner="none", max_budget=3)
    data["measure"]["sample_interval_s"] = 0.1
    spec.write_text(yaml.safe_dump(data))
    store = _run(tmp_path, spec)
    (run,) = store.list_runs()
    accounts = store.energy_accounts(run.id)
    assert all(a.source == "estimate" for a in accounts)  # this machine has no counters
    for number in (0, 1):
        # The script burned the CPU, not the worker, which only waited for its output.
        cpu = [a for a in accounts if (a.kind, a.trial, a.component) == ("trial", number, "cpu")]
        assert cpu and cpu[0].energy_j > 0


def test_a_workers_cpu_time_counts_what_it_started():
    from basht.energy.monitor import tree_cpu_s

    me = psutil.Process()
    before, own = tree_cpu_s(me), me.cpu_times()
    child = psutil.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.process_time() + 0.5\n"
            "while time.process_time() < end: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while child.cpu_times().user + child.cpu_times().system < 0.5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        mine = me.cpu_times()
        grown = tree_cpu_s(me) - before
        assert grown >= 0.5 + (mine.user + mine.system) - (own.user + own.system) - 0.01
    finally:
        child.kill()
        child.wait()
    assert tree_cpu_s(me) - before >= 0.5  # reaped, it still counts


@pytest.mark.parametrize("name", ["script-regex", "script-reporter"])
def test_the_script_examples_run_with_asha(tmp_path, name):
    """examples/script/, shortened: an unchanged script tuned through its output, and one that
    reports and is paused and resumed."""
    folder = Path(__file__).resolve().parents[2] / "examples" / "script"
    spec = yaml.safe_load((folder / f"{name}.yaml").read_text())
    spec["search"].update(max_trials=6, max_budget=9)
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    spec["workload"]["cwd"] = str(folder)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = basht("run", "-q", "--no-plots", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = Store(spec["store"], create=False)
    (run,) = store.list_runs()
    states = {t.state for t in store.trials(run.id)}
    assert "stopped" in states
    if name == "script-reporter":
        assert any(d.result == "resume" for d in store.decisions(run.id))


def test_basht_compare_runs_a_script_on_optuna_and_ray_tune_too(tmp_path):
    (tmp_path / "train.py").write_text(PLAIN)
    workload = {
        "command": "{python} train.py --lr {lr} --epochs {budget}",
        "metrics": REGEX,
    }
    path = _experiment(tmp_path, workload, trials=6)
    done = basht("compare", "-q", "--systems", "native,optuna,raytune", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _left_behind(tmp_path) == []
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}", create=False)
    runs = {run.system: run for run in store.list_runs()}
    assert set(runs) == {"native", "optuna", "raytune"}
    for run in runs.values():
        trials = store.trials(run.id)
        assert len(trials) == 6 and all(t.state in ("completed", "stopped") for t in trials)
