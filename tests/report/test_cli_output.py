"""What `basht report` prints, as a user's terminal or a pipe gets it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from basht.experiment import Experiment
from basht.report.comparison import ComparedRun, Comparison
from basht.store import Store
from tests.cli import basht, cli_env


@pytest.mark.integration
def test_the_reports_path_is_one_line_to_copy_however_narrow_the_output(spec, tmp_path):
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", tmp_path).id
    out = tmp_path / "a-folder-whose-name-is-long" / "and-another-one-under-it" / "report.html"
    proc = basht(
        "report", run_id, "--store", spec["store"], "--html", "--out", str(out),
        cwd=tmp_path, env=cli_env(COLUMNS="40"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"report: {out}\n"
    assert out.is_file()


def _stored_run(spec: dict, results: Path) -> str:
    """A run in the store, as `basht run` would have begun it, with its folder under `results`."""
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", results).id
    store.close()
    return run_id


def _report_html(spec: dict, ref: str, cwd: Path, *out: str) -> subprocess.CompletedProcess[str]:
    return basht("report", ref, "--store", spec["store"], "--html", *out, cwd=cwd)


@pytest.mark.integration
def test_a_report_path_with_a_file_in_its_way_fails_before_any_plot_is_drawn(spec, tmp_path):
    """The comparison's plots, and each run's, are drawn before its page is written: a page
    that cannot be written is said first, and nothing is drawn for it."""
    run_id = _stored_run(spec, tmp_path / "results")
    comparison = Comparison.new(
        "t", ["native"], [0], spec["store"], None, tmp_path / "results", columns=["native"]
    )
    comparison.runs = [ComparedRun("native", 0, run_id, "completed")]
    comparison.save()
    (tmp_path / "a-file").write_text("")
    for out in ("a-file/r.html", "a-file/deeper/r.html"):
        proc = _report_html(spec, comparison.id, tmp_path, "--out", out)
        assert proc.returncode == 2 and not proc.stdout, proc.stderr
        assert proc.stderr.strip() == "error: a-file: a file is there, where a folder is needed"
    drawn = sorted(p.name for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert drawn == ["comparison.json"]


@pytest.mark.integration
def test_a_folder_where_the_report_goes_fails_before_any_plot_is_drawn(spec, tmp_path):
    run_id = _stored_run(spec, tmp_path / "results")
    page = tmp_path / "results" / run_id / "report.html"
    page.mkdir(parents=True)  # where `--html` writes by default, beside the run's plots
    proc = _report_html(spec, run_id, tmp_path)
    assert proc.returncode == 2 and not proc.stdout, proc.stderr
    assert proc.stderr.strip() == f"error: {page}: a folder is there, where a file is needed"
    assert not list(page.parent.glob("*.png"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_a_report_path_in_a_folder_that_cannot_be_written_fails_at_once(spec, tmp_path):
    run_id = _stored_run(spec, tmp_path / "results")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        proc = _report_html(spec, run_id, tmp_path, "--out", "locked/r.html")
    finally:
        locked.chmod(0o700)
    assert proc.returncode == 2 and not proc.stdout, proc.stderr
    assert proc.stderr.strip() == "error: locked: Permission denied"
    assert not (tmp_path / "results" / run_id).exists()


@pytest.mark.integration
def test_a_trial_started_over_on_resume_says_so_in_the_json(spec, tmp_path):
    """Attempt 1 ran trial 0 to epoch 2; its checkpoint gone, attempt 2 trained it again from
    epoch 1. The store keeps both attempts' reports; the report says the trial started over."""
    run_id = _stored_run(spec, tmp_path / "results")
    store = Store(spec["store"])
    store.add_phase(run_id, "run", 1000.0, 1004.0, aborted=True, attempt=1)
    store.add_phase(run_id, "run", 1030.0, 1034.0, attempt=2)
    again = store.add_trial(run_id, 0, {"x": 0.1}, 3, state="completed")
    once = store.add_trial(run_id, 1, {"x": 0.2}, 3, state="completed")
    for trial, epochs in ((again, (1, 2, 1, 2, 3)), (once, (1, 2, 3))):
        for epoch in epochs:
            store.add_report(trial, epoch, 0.1 * epoch, {"accuracy": 0.1 * epoch}, 1.0, 0.0)
    store.close()
    proc = basht("report", run_id, "--store", spec["store"], "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    trials = json.loads(proc.stdout)["trials"]
    assert [(t["trial"], t["budget"], t["restarts"]) for t in trials] == [(0, 3, 1), (1, 3, 0)]


@pytest.mark.integration
def test_the_report_says_why_trials_failed(spec, tmp_path):
    """The reasons are in results.json; the console and the page say them too, once each."""
    run_id = _stored_run(spec, tmp_path / "results")
    store = Store(spec["store"])
    why = "ValueError: x too big (mine.py:4)"
    for number, state, error in (
        (0, "failed", why),
        (1, "completed", None),
        (2, "failed", why),
        (3, "failed", "RuntimeError: [red]boom"),
    ):
        store.add_trial(run_id, number, {"x": 0.1}, 3, state=state, error=error)
    store.close()
    proc = basht("report", run_id, "--store", spec["store"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [" ".join(line.strip("│ ").split()) for line in proc.stdout.splitlines()]
    assert f"failed (trials 0, 2) │ {why}" in lines
    assert "failed (trial 3) │ RuntimeError: [red]boom" in lines
    out = tmp_path / "r.html"
    assert _report_html(spec, run_id, tmp_path, "--out", str(out)).returncode == 0
    page = out.read_text()
    assert f"<td>failed (trials 0, 2)</td><td>{why}</td>" in page
