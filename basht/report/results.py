"""The run summary, built from the store alone, and its `results/<run-id>/results.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from basht.energy.monitor import J_PER_KWH
from basht.report.front import objectives_summary
from basht.report.plan import cluster_summary
from basht.report.runstats import energy_by_node, restarts, run_state
from basht.store import Store
from basht.store.repository import nan_to_null


def build_summary(store: Store, run_id: str) -> dict[str, Any]:
    """The run as results.json has it (a NaN or infinite value, as a workload's test loss may
    be, is null), so `basht report --json` prints valid JSON, the same as the file."""
    run = store.get_run(run_id)
    experiment = store.get_experiment(run.experiment_id)
    trials = store.trials(run.id)
    started_over = restarts(store, run.id)
    return nan_to_null(
        {
            "run_id": run.id,
            "experiment": experiment.spec,
            **run_state(run),
            "results_dir": run.results_dir,
            # How it was measured: energy and carbon sources, sample interval, live metrics URL.
            "measurement": run.measurement or {},
            "space_size": experiment.spec.get("space_size"),
            # Table 1's t, ts, m, ta: the workload's dataset, its size, model and training algorithm.
            "workload": {"name": experiment.spec["workload"]["name"]}
            | (experiment.spec.get("workload_about") or {}),
            "best": {
                "trial": run.best_trial,
                "config": run.best_config,
                "value": run.best_value,
                "metric": experiment.spec["search"]["metric"],
                "mode": experiment.spec["search"]["mode"],
            },
            "test_metrics": run.test_metrics or {},
            "phases": [
                {
                    "name": p.name,
                    "attempt": p.attempt,
                    "start": p.start,
                    "end": p.end,
                    "duration_s": p.duration_s,
                    "aborted": p.aborted,
                    "error": p.error,
                }
                for p in store.phases(run.id)
            ],
            "trial_counts": store.trial_counts(run.id),
            "trials": [
                {
                    "trial": t.number,
                    "state": t.state,
                    "config": t.config,
                    "budget": t.budget,
                    "value": t.value,
                    "worker": t.worker,
                    "load_s": t.load_s,
                    "train_s": t.train_s,
                    "validate_s": t.validate_s,
                    "error": t.error,
                    # Times it trained again epochs it had reported (resumed, it started over);
                    # the store keeps each attempt's reports of them.
                    "restarts": started_over.get(t.id, 0),
                }
                for t in trials
            ],
            "metrics": {
                m.name: {"value": m.value, "unit": m.unit, "source": m.source}
                for m in store.metrics(run.id)
            },
            "energy": [
                {
                    "node": row["node"],
                    "component": row["component"],
                    "source": row["source"],
                    **{k[:-2] + "_kwh": row[k] / J_PER_KWH for k in row if k.endswith("_j")},
                }
                for row in energy_by_node(store, run.id)
            ],
            # A run on a RubberBand plan's elastic cluster: its stages and bill against the plan.
            "cluster": cluster_summary(store, run.id, experiment.spec),
            # A run on a Ray cluster: the nodes OC bills, each for its time in the job.
            "ray_nodes": ray_nodes_summary(store, run.id, experiment.spec),
            # Several objectives: the Pareto front, its hypervolume, the trial tested.
            "objectives": objectives_summary(store, run.id, experiment.spec, run.best_trial),
        }
    )


def ray_nodes_summary(
    store: Store, run_id: str, spec: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """Each Ray node the run recorded, with its time in the job and its bill (None: not Ray)."""
    from basht.energy.billing import job_cost_usd, ray_node_lifetimes
    from basht.energy.pricing import price_from_spec
    from basht.experiment import PriceSpec

    lives = ray_node_lifetimes(store, run_id)
    if not lives:
        return None
    price = price_from_spec(PriceSpec.model_validate(spec["measure"]["price"]))
    keys = ("node", "attempt", "address", "cpus", "gpus", "joined_at", "left_at")
    return [
        {k: node.get(k) for k in keys}
        | {"lifetime_s": life, "billed_usd": job_cost_usd(price, life)}
        for node, life in lives
    ]


def write_results_json(summary: dict[str, Any], results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(_json(summary))
    tmp.replace(path)
    return path


def _json(summary: dict[str, Any]) -> str:
    """The summary as JSON, never with NaN (which is not JSON): build_summary's has none left,
    so it is written as it is; one built otherwise is cleaned first."""
    try:
        return json.dumps(summary, indent=2, allow_nan=False)
    except ValueError:
        return json.dumps(nan_to_null(summary), indent=2, allow_nan=False)
