"""What `basht report` reads: a run's summary as results.json has it, and which name is a
comparison rather than a run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.report.comparison import Comparison, is_comparison_ref, load_comparison
from basht.report.results import build_summary, write_results_json
from basht.store import Store


def test_a_nan_test_metric_is_null_in_the_summary_as_in_results_json(spec, tmp_path):
    """`basht report --json` prints the summary: NaN there would not be JSON at all."""
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", tmp_path).id
    store.update_run(run_id, test_metrics={"accuracy": 0.9, "loss": math.nan}, best_value=math.inf)
    summary = build_summary(store, run_id)
    printed = json.loads(json.dumps(summary, allow_nan=False))
    assert printed["test_metrics"] == {"accuracy": 0.9, "loss": None}
    assert printed["best"]["value"] is None
    written = write_results_json(summary, tmp_path / "out")
    assert json.loads(written.read_text()) == printed


def test_a_runs_own_folder_is_a_run_not_a_comparison(tmp_path, monkeypatch):
    """In results/, a run's folder has the run's name: `basht report RUN` there is that run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "digits-random-20261123-040258-e477").mkdir()
    assert not is_comparison_ref("digits-random-20261123-040258-e477")
    assert not is_comparison_ref("digits-random-20261123-040258-e477/")
    comparison = Comparison.new("e", ["native"], [0], "sqlite:///basht.db", None, tmp_path)
    comparison.save()
    assert is_comparison_ref(comparison.folder)
    assert is_comparison_ref(str(Path(comparison.folder) / "comparison.json"))
    assert is_comparison_ref("compare-e")


@pytest.mark.parametrize("text", ['"a string"', "[]", "42", "null"])
def test_a_comparison_json_that_is_not_an_object_is_one_line(tmp_path, text):
    folder = tmp_path / "compare-x"
    folder.mkdir()
    (folder / "comparison.json").write_text(text)
    with pytest.raises(BashtError, match=r"comparison\.json: not a Basht comparison \(a JSON "):
        load_comparison("compare-x", tmp_path)


def test_results_json_writes_the_summary_as_built_and_null_for_nan_it_did_not_build(
    spec, tmp_path, monkeypatch
):
    """build_summary's summary has no NaN left: writing it walks it no second time. A summary
    built otherwise still gets null, never NaN, in the file."""
    store = Store(spec["store"])
    exp_id = store.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = store.create_run(exp_id, "t", "native", "local", tmp_path).id
    store.update_run(run_id, test_metrics={"loss": math.nan})
    summary = build_summary(store, run_id)

    def walked_again(value: object) -> object:
        raise AssertionError("the summary was cleaned of NaN a second time")

    with monkeypatch.context() as patched:
        patched.setattr("basht.report.results.nan_to_null", walked_again)
        written = write_results_json(summary, tmp_path / "built")
    assert json.loads(written.read_text())["test_metrics"] == {"loss": None}
    other = write_results_json({"loss": math.nan, "runs": [math.inf]}, tmp_path / "other")
    assert json.loads(other.read_text(), parse_constant=pytest.fail) == {
        "loss": None,
        "runs": [None],
    }
