"""`basht run` with `trackers: [mlflow]` against a real `mlflow server`, read back through
MLflow's REST API: one parent run, one nested run per stored trial, the energy and its source,
Table 2 and the artifacts; then `basht export` of the same run adds nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from basht.report.runstats import energy_source
from basht.store import Store
from tests.cli import basht, cli_env
from tests.track.mlflow_server import mlflow_server, pairs, rest, searched_runs

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("mlflow")
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


def test_a_run_goes_to_the_server_as_a_parent_and_a_nested_run_per_trial(server, tmp_path):
    store_url = f"sqlite:///{tmp_path / 'basht.db'}"
    experiment = {
        "name": "tracked",
        "seed": 0,
        "workload": {"name": "sleep", "params": {"epoch_s": 0.01}},
        "space": {
            "x": {"type": "float", "low": -1.0, "high": 1.0},
            "c": {"type": "choice", "values": ["a", "b"]},
        },
        "search": {"metric": "accuracy", "mode": "max", "max_budget": 3, "max_trials": 4},
        "resources": {"workers": 2},
        "measure": {"trackers": [{"name": "mlflow", "uri": server, "experiment": "tuning"}]},
        "store": store_url,
    }
    path = tmp_path / "tracked.yaml"
    path.write_text(yaml.safe_dump(experiment))
    results = tmp_path / "results"
    done = basht("run", "-q", str(path), "--results", str(results), env=cli_env(BASHT_PLOTS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]

    store = Store(store_url, create=False)
    run = store.list_runs()[0]
    trials = {t.number: t for t in store.trials(run.id)}
    runs = searched_runs(server, "tuning")
    parents = [r for r in runs if "mlflow.parentRunId" not in pairs(r, "tags")]
    assert len(parents) == 1
    parent = parents[0]
    parent_id = parent["info"]["run_id"]
    nested = [r for r in runs if pairs(r, "tags").get("mlflow.parentRunId") == parent_id]
    assert len(nested) == len(trials) == len(runs) - 1 == 4

    tags = pairs(parent, "tags")
    assert parent["info"]["run_name"] == run.id and parent["info"]["status"] == "FINISHED"
    assert tags["basht.run_id"] == run.id and tags["basht.status"] == "completed"
    assert tags["basht.energy_source"] == energy_source(store, run.id)
    metrics = pairs(parent, "metrics")
    assert {"TWH", "JCT", "OC", "WR", "phase.deploy_s", "phase.run_s"} <= set(metrics)
    assert metrics["JCT"] == pytest.approx({m.name: m.value for m in store.metrics(run.id)}["JCT"])
    listed = rest(server, "artifacts/list", run_id=parent_id)
    names = {Path(f["path"]).name for f in listed.get("files", [])}
    assert {"results.json", "best_so_far.png", "timeline.png"} <= names

    for child in nested:
        tags = pairs(child, "tags")
        trial = trials[int(tags["basht.trial"])]
        as_params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in trial.config.items()}
        assert pairs(child, "params") == as_params
        assert tags["basht.state"] == trial.state == "completed"
        assert tags["basht.energy_source"] in ("estimate", "rapl", "nvml", "none")
        assert {"energy_kwh", "emissions_g", "cost_usd", "accuracy"} <= set(pairs(child, "metrics"))
        history = rest(
            server, "metrics/get-history", run_id=child["info"]["run_id"], metric_key="accuracy"
        )
        assert sorted(m["step"] for m in history["metrics"]) == [1, 2, 3]

    again = basht("export", "latest", "--to", "mlflow", "--uri", server, "--store", store_url)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"run {run.id} exported to mlflow: {server}" in again.stdout
    assert len(searched_runs(server, "tuning")) == len(runs)
