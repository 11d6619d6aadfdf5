"""MLflow, on a SQLite tracking store: one parent run per Basht run, one nested run per trial,
read back with MLflow's own client. (A real `mlflow server`: test_mlflow_server.py.)"""

from __future__ import annotations

import http.server
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from basht.track import export_run
from basht.track.mlflow_tracker import mlflow_key, tracking_uri
from tests.track.support import SOURCE, TRIALS, tracked_run, trial_kwh


@pytest.fixture
def client_for() -> Any:
    """MlflowClient, imported when a test runs (it takes seconds: not at collection)."""
    return pytest.importorskip("mlflow").MlflowClient


def runs_of(client: Any, experiment: str) -> tuple[Any, list[Any]]:
    """The parent run and the nested runs (by trial number) of the one Basht run logged."""
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(nested) + 1 == len(runs)
    return parent, sorted(nested, key=lambda r: int(r.data.tags["basht.trial"]))


# MLflow's import and its tracking store's migrations take seconds: out of the fast lane.
@pytest.mark.integration
def test_a_run_is_a_parent_run_with_a_nested_run_per_trial(spec, tmp_path, monkeypatch, client_for):
    """By default in a SQLite file beside the run folders, its artifacts in a folder beside it;
    an export of the tracked run adds nothing twice."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracked = tracked_run(spec, tmp_path, ["mlflow"])
    results = tmp_path / "results"
    client = client_for(f"sqlite:///{results / 'mlflow.db'}")
    parent, nested = runs_of(client, "t")
    assert client.get_experiment_by_name("t").artifact_location == (
        (results / "mlartifacts").resolve().as_uri()
    )
    assert parent.info.run_name == tracked.run_id and parent.info.status == "FINISHED"
    assert parent.data.tags["basht.energy_source"].split("+")[-1] == SOURCE
    assert parent.data.params["search.metric"] == "accuracy"
    metrics = parent.data.metrics
    assert {"TWH", "JCT", "OC", "WR", "phase.run_s", "phase.undeploy_s"} <= set(metrics)
    assert metrics["test.accuracy"] == 0.55 and metrics["best_value"] == 0.6
    assert [a.path for a in client.list_artifacts(parent.info.run_id)] == ["results.json"]
    shown = client.download_artifacts(parent.info.run_id, "results.json", str(tmp_path))
    assert json.loads(Path(shown).read_text())["run_id"] == tracked.run_id

    status = {"completed": "FINISHED", "stopped": "FINISHED", "failed": "FAILED"}
    for number, ((config, state, values), run) in enumerate(zip(TRIALS, nested, strict=True)):
        assert run.info.run_name == f"trial-{number:04d}"
        assert run.data.params == {k: json.dumps(v) for k, v in config.items()}
        assert run.info.status == status[state] and run.data.tags["basht.state"] == state
        assert run.data.tags["basht.energy_source"] == SOURCE
        assert run.data.metrics["energy_kwh"] == pytest.approx(trial_kwh(number))
        assert run.data.metrics["emissions_g"] == pytest.approx(0.38 * (number + 1))
        assert run.data.metrics["cost_usd"] == 0.0 and "duration_s" in run.data.metrics
        history = client.get_metric_history(run.info.run_id, "accuracy")
        assert sorted((m.step, m.value) for m in history) == list(enumerate(values, 1))

    export_run(tracked.store_url, tracked.run_id, "mlflow")
    again, nested_again = runs_of(client, "t")
    assert again.info.run_id == parent.info.run_id
    assert [r.info.run_id for r in nested_again] == [r.info.run_id for r in nested]
    history = client.get_metric_history(nested[0].info.run_id, "accuracy")
    assert len(history) == len(TRIALS[0][2])


def test_the_tracking_uri_is_the_given_one_then_mlflow_tracking_uri_then_a_file(
    tmp_path, monkeypatch
):
    results_dir = tmp_path / "results" / "run-1"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(None, results_dir) == f"sqlite:///{tmp_path / 'results' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri(None, results_dir) == "http://127.0.0.1:5000"
    assert tracking_uri("sqlite:///m.db", results_dir) == "sqlite:///m.db"


class _HealthOnce(http.server.BaseHTTPRequestHandler):
    """Answers the start's /health, closing its port first: the server is gone by the time the
    tracker makes its first request."""

    def do_GET(self) -> None:
        self.server.socket.close()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: Any) -> None: ...


@pytest.mark.integration
def test_a_tracking_server_gone_after_the_start_costs_one_warning_and_nothing_else(
    spec, tmp_path, monkeypatch, caplog
):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    server = http.server.HTTPServer(("127.0.0.1", 0), _HealthOnce)
    uri = f"http://127.0.0.1:{server.server_port}"
    answering = threading.Thread(target=server.handle_request)
    answering.start()
    with caplog.at_level(logging.WARNING):
        tracked = tracked_run(spec, tmp_path, [{"name": "mlflow", "uri": uri}])
    answering.join()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and f"tracker mlflow ({uri}) stopped" in warnings[0], warnings
    assert tracked.status == "completed"
    results = json.loads((tracked.results_dir / "results.json").read_text())
    assert results["status"] == "completed" and len(results["trials"]) == len(TRIALS)


@pytest.mark.parametrize(
    ("name", "key"),
    [("accuracy", "accuracy"), ("val/acc", "val/acc"), ("acc@1", "acc_1"), ("a/../b", "_a_.._b")],
)
def test_a_name_mlflow_refuses_is_logged_under_one_it_takes(name, key):
    assert mlflow_key(name) == key
