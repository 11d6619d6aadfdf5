"""`measure.trackers` in the experiment file: names or mappings, and every mistake in one line
naming its key path; what a tracker needs is checked before anything runs or is stored."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from basht.bench.preflight import preflight
from basht.errors import ExperimentError
from basht.experiment import Experiment
from tests.bad_input import check_outcome, run_cli


def _with(spec: dict[str, Any], trackers: Any) -> dict[str, Any]:
    return {**spec, "measure": {"trackers": trackers}}


def test_trackers_are_names_or_mappings_with_their_settings(spec):
    experiment = Experiment.from_dict(
        _with(spec, ["tensorboard", {"name": "mlflow", "uri": "sqlite:///m.db"}, "wandb"])
    )
    trackers = experiment.measure.trackers
    assert [t.name for t in trackers] == ["tensorboard", "mlflow", "wandb"]
    assert trackers[1].uri == "sqlite:///m.db" and trackers[0].uri is None
    # Stored with the run and read back (a resumed run, an export) as it was.
    assert Experiment.from_dict(experiment.to_dict()).measure.trackers == trackers
    assert Experiment.from_dict(spec).measure.trackers == []


@pytest.mark.parametrize(
    ("trackers", "message"),
    [
        (["comet"], "measure.trackers.0: unknown tracker 'comet' (expected one of: mlflow, "),
        (["mlflow", "mlflow"], "measure.trackers.1: mlflow is listed twice"),
        ([{"name": "mlflow", "url": "x"}], "measure.trackers.0.url: unknown key (expected one of"),
        ([{"name": "wandb", "uri": "x"}], "measure.trackers.0.uri: applies to mlflow only"),
        ([{"name": "mlflow", "project": "p"}], "measure.trackers.0.project: applies to wandb"),
        ([{"uri": "http://x"}], "measure.trackers.0.name: missing required key"),
        ("mlflow", "measure.trackers: Input should be a valid list"),
    ],
)
def test_a_mistake_is_one_line_naming_its_key(spec, trackers, message):
    with pytest.raises(ExperimentError) as err:
        Experiment.from_dict(_with(spec, trackers), "exp.yaml")
    assert str(err.value).startswith(f"exp.yaml: {message}")
    assert "\n" not in str(err.value)


def test_a_tracker_without_its_package_is_refused_before_the_run(spec, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(ExperimentError, match=r"measure\.trackers\.1: wandb is not installed"):
        preflight(Experiment.from_dict(_with(spec, ["tensorboard", "wandb"]), "exp.yaml"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_mlflow_server_that_does_not_answer_is_refused_in_one_line(
    spec, write_spec, tmp_path, monkeypatch, capsys
):
    """`basht validate` and `basht run` say so, and the run stores nothing."""
    uri = f"http://127.0.0.1:{_closed_port()}"
    path = write_spec(_with(spec, [{"name": "mlflow", "uri": uri}]))
    for args in (["validate"], ["run", "-q", "--no-plots", "--results", str(tmp_path / "r")]):
        code, err = run_cli(monkeypatch, capsys, *args, str(path))
        check_outcome(code, err, "measure.trackers.0", uri, starts=path)
        assert code == 2
    assert not (tmp_path / "basht.db").exists()


def test_mlflow_tracking_uri_is_the_server_checked(spec, monkeypatch):
    uri = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with pytest.raises(ExperimentError, match=f"no MLflow tracking server answers at {uri}"):
        preflight(Experiment.from_dict(_with(spec, ["mlflow"]), "exp.yaml"))
