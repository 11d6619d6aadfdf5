"""The dashboard's JSON, read from the store: the runs, one run as its charts draw it (with what
it has cost so far), and the comparisons kept beside the results.

The run's charts are `basht.report.charts`' (the HTML report draws the same); this adds what only
a live page needs, such as the bill so far against a cost budget.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from basht.errors import BashtError
from basht.report.charts import run_charts
from basht.report.comparison import (
    FILENAME,
    PREFIX,
    Comparison,
    absolute_store_url,
    load_comparison,
)
from basht.store import Store, TrialRow
from basht.store.repository import nan_to_null

log = logging.getLogger(__name__)


def runs_list(store: Store, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` runs, each with its trial counts by state."""
    runs = store.list_runs(limit)
    counts: dict[str, dict[str, int]] = {r.id: {} for r in runs}
    query = (
        select(TrialRow.run_id, TrialRow.state, func.count())
        .where(TrialRow.run_id.in_(list(counts)))
        .group_by(TrialRow.run_id, TrialRow.state)
    )
    with store.session() as s:
        for run_id, state, count in s.execute(query):
            counts[run_id][state] = count
    specs: dict[int, dict[str, Any]] = {}
    out = []
    for run in runs:
        if run.experiment_id not in specs:
            specs[run.experiment_id] = store.get_experiment(run.experiment_id).spec
        search = specs[run.experiment_id].get("search") or {}
        out.append(
            {
                "id": run.id,
                "experiment": specs[run.experiment_id].get("name"),
                "system": run.system,
                "executor": run.executor,
                "status": run.status,
                "started_at": run.started_at.isoformat() if run.started_at else None,
                "ended_at": run.ended_at.isoformat() if run.ended_at else None,
                "trials": counts[run.id],
                "metric": search.get("metric"),
                "mode": search.get("mode"),
                "best_value": run.best_value,
            }
        )
    return nan_to_null(out)


def run_detail(store: Store, run_id: str) -> dict[str, Any]:
    """The run as its page draws it: its charts' data and the bill so far."""
    now = time.time()
    data = run_charts(store, run_id, now)
    data["energy"]["cost_usd"] = _cost_usd(store, data, now)
    return data


def _cost_usd(store: Store, data: dict[str, Any], now: float) -> float | None:
    """What the job has been billed: OC once the run is done, else as if undeployed now."""
    run = data["run"]
    if not run["live"]:
        oc = next((m["value"] for m in data["metrics"] if m["name"] == "OC"), None)
        return oc
    from basht.energy.billing import cost_so_far_usd
    from basht.experiment import DERIVED_KEYS, Experiment

    stored = store.get_run(run["id"])
    spec = dict(store.get_experiment(stored.experiment_id).spec)
    for derived in DERIVED_KEYS:  # what the runner added to the user's file
        spec.pop(derived, None)
    try:
        experiment = Experiment.from_dict(spec, f"run {run['id']}")
        return cost_so_far_usd(store, run["id"], experiment, now)
    except BashtError as err:  # a price that cannot be read here: no bill, not a failed page
        log.debug("no bill so far for run %s: %s", run["id"], err)
        return None


def comparisons(results: Path, store: Store) -> list[dict[str, Any]]:
    """The comparisons under `results` whose runs are in `store`, newest first."""
    if not results.is_dir():
        return []
    url = absolute_store_url(store.url)
    found = []
    for path in sorted(results.glob(f"{PREFIX}*/{FILENAME}")):
        try:
            comparison = load_comparison(path)
        except BashtError as err:  # a broken one is left out, not the whole list
            log.debug("comparison %s left out: %s", path, err)
            continue
        if comparison.store == url:
            found.append(_comparison_head(comparison))
    return sorted(found, key=lambda c: c["created_at"], reverse=True)


def comparison_detail(results: Path, store: Store, ref: str) -> dict[str, Any]:
    """One comparison: its side-by-side rows and each run's best value so far."""
    from basht.report.compare import compare_rows
    from basht.report.runstats import best_so_far

    comparison = load_comparison(ref, results)
    if comparison.store != absolute_store_url(store.url):
        raise BashtError(f"comparison {comparison.id}: its runs are in another store")
    rows = compare_rows(store, comparison)
    curves = []
    for column, run_id in comparison.pairs():
        run = store.get_run(run_id)
        mode = (store.get_experiment(run.experiment_id).spec.get("search") or {}).get("mode")
        points = best_so_far(store, run_id, mode or "max")
        curves.append(
            {
                "column": column,
                "run_id": run_id,
                "points": [{"at_s": t, "value": v} for t, v in points],
            }
        )
    return nan_to_null(
        _comparison_head(comparison)
        | {
            "rows": [
                {
                    "label": r.label,
                    "section": r.section,
                    "cells": [r.cell(c) for c in comparison.columns],
                }
                for r in rows
            ],
            "curves": curves,
        }
    )


def _comparison_head(comparison: Comparison) -> dict[str, Any]:
    return {
        "id": comparison.id,
        "experiment": comparison.experiment,
        "columns": comparison.columns,
        "seeds": comparison.seeds,
        "created_at": comparison.created_at,
        "target": comparison.target,
        "runs": [
            {"label": r.label, "seed": r.seed, "run_id": r.run_id, "status": r.status}
            for r in comparison.runs
        ],
    }
