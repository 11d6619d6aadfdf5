"""What `basht report` prints, as a user's terminal or a pipe gets it."""

from __future__ import annotations

from basht.experiment import Experiment
from basht.store import Store
from tests.cli import basht, cli_env


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
