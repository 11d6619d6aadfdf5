"""`basht run` for real, in a subprocess: the store, results.json, `runs`, `report`, and Ctrl-C."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from basht.store import Store
from tests.cli import basht as _basht
from tests.cli import cli_env, run_in_background, wait_for_trials

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


_env = cli_env


def test_basht_run_writes_store_and_results(spec, write_spec, tmp_path):
    spec["workload"]["params"] = {"epoch_s": 0.01}
    spec["search"].update(max_budget=2, max_trials=4)
    proc = _basht("run", str(write_spec(spec)), cwd=tmp_path, env=cli_env(BASHT_PLOTS="1"))
    assert proc.returncode == 0, proc.stderr
    assert "best validation accuracy" in proc.stdout and "JCT" in proc.stdout
    # Every connection to the store was closed before the process ended (SQLite folds its
    # write-ahead log back into the file then): nothing is left beside it.
    assert not list(tmp_path.glob("basht.db-*"))

    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "completed"
    assert [p.name for p in store.phases(run.id)] == [
        "deploy",
        "setup",
        "run",
        "collect_results",
        "test",
        "collect_metrics",
        "undeploy",
    ]
    trials = store.trials(run.id)
    assert len(trials) == 4 and all(t.state == "completed" for t in trials)
    assert len(store.reports(run.id)) == 8

    results = json.loads((tmp_path / "results" / run.id / "results.json").read_text())
    assert results["run_id"] == run.id and results["status"] == "completed"
    if importlib.util.find_spec("matplotlib") is not None:  # the plots, beside results.json
        assert "plots: best_so_far.png" in proc.stdout
        assert (tmp_path / "results" / run.id / "timeline.png").stat().st_size > 0
    assert results["best"]["value"] == run.best_value
    assert len(results["trials"]) == 4 and results["metrics"]["JCT"]["unit"] == "ms"
    # Table 1's dataset, its size, model and training algorithm, as the workload describes them.
    assert results["workload"] == {
        "name": "sleep",
        "dataset": "none",
        "dataset_mb": 0.0,
        "model": "a known learning curve (its ceiling set by the config)",
        "training": "none (an epoch sleeps 0.01 s)",
    }
    assert "sleep: none; a known learning curve" in " ".join(proc.stdout.split())
    # Every joule of the node's accounts is in the energy-by-node breakdown, once.
    assert "energy by node" in proc.stdout
    assert {(e["node"], e["component"]) for e in results["energy"]} == {
        ("local", "cpu"),
        ("local", "memory"),
    }
    assert sum(e["total_kwh"] for e in results["energy"]) == pytest.approx(
        results["metrics"]["energy_total"]["value"], rel=1e-9
    )

    listed = subprocess.run(  # on an 80-column terminal the id is still there whole, to copy
        [sys.executable, "-m", "basht.cli", "runs", "--store", spec["store"]],
        env={**_env(), "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.id in listed.stdout, listed.stdout
    shown = _basht("report", run.id[:12], "--store", spec["store"], "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["run_id"] == run.id


@pytest.mark.parametrize("run", ["nope", "nope[bso]"])  # an error is text: brackets are kept
def test_report_of_an_unknown_run_is_one_line(tmp_path, run):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    Store(url).close()
    proc = _basht("report", run, "--store", url, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"no run matching '{run}'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["runs"], ["report", "latest"], ["resume", "latest"]])
def test_reading_a_store_that_is_not_there_is_one_line_and_makes_none(tmp_path, command):
    url = f"sqlite:///{tmp_path / 'nowhere' / 'basht.db'}"
    proc = _basht(*command, "--store", url, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("basht.db (no run was stored there)"), proc.stderr
    assert not (tmp_path / "nowhere").exists()


def _long_run_once(spec: dict, tmp_path: Path, completed: int) -> subprocess.Popen[str]:
    """`basht run` of 200 short trials in the background, once `completed` of them finished."""
    spec["workload"]["params"] = {"epoch_s": 0.1}
    spec["search"].update(max_budget=3, max_trials=200)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = run_in_background(path, tmp_path)
    wait_for_trials(
        spec["store"],
        tmp_path / "basht.db",
        lambda store, run: store.trial_counts(run.id).get("completed", 0) >= completed,
    )
    return proc


def test_sigint_keeps_every_finished_trial_and_leaves_a_consistent_store(spec, tmp_path):
    proc = _long_run_once(spec, tmp_path, completed=3)
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers, "the run had no worker processes"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err

    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.status == "interrupted"
    assert err.strip().splitlines()[-1] == (
        f"interrupted: run {run.id} keeps its finished trials; continue it with "
        f"`basht resume {run.id} --store {spec['store']}`"
    )
    trials = store.trials(run.id)
    states = {t.state for t in trials}
    assert "running" not in states and "pending" not in states
    completed = [t for t in trials if t.state == "completed"]
    assert len(completed) >= 3
    reports = store.reports(run.id)
    for t in completed:
        assert [r.epoch for r in reports if r.trial_id == t.id] == [1, 2, 3]
    # A trial cut short counts the load or epoch it was in (Table 2's d_i), beyond its reports.
    aborted = [t for t in trials if t.state == "aborted"]
    assert aborted
    for t in aborted:
        reported = [r for r in reports if r.trial_id == t.id]
        assert t.train_s > sum(r.train_s for r in reported) or (not reported and t.load_s > 0)
    phases = store.phases(run.id)
    assert phases[-1].name == "undeploy" and any(p.name == "run" and p.aborted for p in phases)
    # The best trial it had found is kept, as the live line showed it.
    best = max(completed, key=lambda t: t.value)
    assert (run.best_trial, run.best_value) == (best.number, best.value)
    # What it used until the interruption is measured all the same; JCT ends at a test it never ran.
    metrics = {m.name: m for m in store.metrics(run.id)}
    assert metrics["energy_total"].value > 0 and "JCT" not in metrics
    assert metrics["WTT"].value >= sum(t.load_s + t.train_s + t.validate_s for t in aborted) * 1000
    assert (
        json.loads((Path(run.results_dir) / "results.json").read_text())["status"] == "interrupted"
    )
    gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, "worker processes outlived the run"


def test_sigint_on_a_peer_says_to_run_the_file_again_not_to_resume(spec, tmp_path):
    """`basht resume` continues native runs only: a peer's interrupted run does not point to it."""
    spec["system"] = "optuna"
    proc = _long_run_once(spec, tmp_path, completed=1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (run,) = Store(spec["store"]).list_runs()
    assert err.strip().splitlines()[-1] == (
        f"interrupted: run {run.id} keeps its finished trials; `basht resume` continues native "
        "runs only, so run the optuna file again"
    )


def test_a_results_folder_that_cannot_be_made_is_one_line_before_anything_is_stored(
    spec, write_spec, tmp_path
):
    (tmp_path / "a-file").write_text("")
    proc = _basht("run", "-q", str(write_spec(spec)), "--results", "a-file/x", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    # Said as everywhere else a file stands where a folder is needed: naming that file.
    assert proc.stderr.strip() == (
        "error: results: cannot create a-file/x (a-file: a file is there, where a folder is needed)"
    )
    assert not Store(spec["store"]).list_runs()
    run_proc = _basht("run", "-q", str(write_spec(spec)), cwd=tmp_path)
    assert run_proc.returncode == 0, run_proc.stderr
    (run,) = Store(spec["store"]).list_runs()
    # Its page can be written elsewhere (the plots are inline); a path that cannot is one line.
    html = _basht(
        "report", run.id, "--store", spec["store"], "--html", "--out", "r.html", cwd=tmp_path
    )
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    bad = ["report", run.id, "--store", spec["store"], "--html", "--out", "a-file/r.html"]
    html = _basht(*bad, cwd=tmp_path)
    assert html.returncode == 2 and "Traceback" not in html.stderr, html.stderr
    assert html.stderr.strip().splitlines()[-1] == (
        "error: a-file: a file is there, where a folder is needed"
    )
    # --out without --html would print the console report and write nothing: refused.
    alone = _basht("report", run.id, "--store", spec["store"], "--out", "s.html", cwd=tmp_path)
    assert alone.returncode == 2 and not (tmp_path / "s.html").exists()
    assert alone.stderr.strip() == "error: --out s.html: only --html writes a file; give --html too"


def test_the_basht_command_finds_a_workload_in_the_folder_it_runs_in(spec, write_spec, tmp_path):
    command = Path(sys.executable).parent / "basht"  # the installed command, not `python -m`
    if not command.exists():
        pytest.skip("the basht command is not installed beside this Python")
    (tmp_path / "mine.py").write_text(
        "def objective(config, trial):\n"
        "    for epoch in range(1, trial.budget + 1):\n"
        "        trial.report(epoch, accuracy=config['x'])\n"
    )
    spec["workload"] = {"name": "mine:objective"}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(command), "run", "-q", str(write_spec(spec))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = Store(spec["store"]).list_runs()
    assert run.status == "completed" and run.best_value is not None


NAN_LOSS = '''
class NanLoss:
    """Learns, but its loss diverged: NaN in every report and in the test metrics."""

    def __init__(self, seed=0):
        self.epoch = 0

    def load(self, config, resources):
        pass

    def train(self, epochs):
        self.epoch += epochs

    def validate(self):
        return {"accuracy": 0.1 * self.epoch, "loss": float("nan")}

    def test(self):
        return {"accuracy": 0.1 * self.epoch, "loss": float("nan")}

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
'''


def test_a_nan_test_metric_is_null_in_results_json_and_the_printed_report(
    spec, write_spec, tmp_path
):
    (tmp_path / "nanloss.py").write_text(NAN_LOSS)
    spec["workload"] = {"name": "nanloss:NanLoss"}
    proc = _basht("run", "-q", str(write_spec(spec)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (run,) = Store(spec["store"]).list_runs()
    text = (Path(run.results_dir) / "results.json").read_text()
    assert "NaN" not in text and json.loads(text)["test_metrics"] == {"accuracy": 0.2, "loss": None}
    shown = _basht("report", run.id, "--store", spec["store"], "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["test_metrics"] == json.loads(text)["test_metrics"]
    printed = _basht("report", run.id, "--store", spec["store"], cwd=tmp_path)
    lines = [" ".join(line.strip("│ ").split()) for line in printed.stdout.splitlines()]
    assert "test loss │ -" in lines
