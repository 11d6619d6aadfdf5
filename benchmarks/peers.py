"""Basht, Optuna and Ray Tune on the same experiments: job time, time to target and energy.

Runs `basht compare examples/digits-asha.yaml --systems native,optuna,raytune --repeat 3` (through
the same library call the command makes): each system in turn, fully deployed and undeployed,
seeds 0, 1, 2 round-robin, 32 trials of the digits MLP with ASHA (min 1, max 27 epochs, eta 3) on
2 workers. Each peer runs its own scheduler for `pruner: asha` (Optuna's SuccessiveHalvingPruner,
Ray's ASHAScheduler; both stop trials, where Basht's ASHA pauses and promotes them).

Per system, the median over seeds of:

* JCT: the seed's Table 2 job completion time, deploy start to test end;
* time to target: wall time from the run phase's start to the first validation report, by any
  trial at any epoch, at or above the target accuracy (default 0.95; the runs are not stopped
  there); seeds that never reach it are counted apart;
* energy: the node's energy over the job (Table 2's energy_total; `estimate` on machines without
  RAPL), and the part attributed to trials (TWH_total);

and the ratio of each median to the first column's (native's, with one file). The comparison's
HTML report is written too.

With several files, every file runs on every system (a column each, `name · system`), and the
ratios are to the first column. `--max-trials N` gives every file the same trial count, so that
a comparison of samplers, for one, differs in nothing else:

    python benchmarks/peers.py --experiment examples/digits-asha.yaml examples/digits-tpe.yaml \
        --systems native,optuna --max-trials 96 --out benchmarks/results/samplers.json

runs random search and TPE, each with ASHA, on Basht and on Optuna (TPESampler with its
SuccessiveHalvingPruner).

    python benchmarks/peers.py [--experiment FILE ...] [--seeds 3] [--target 0.95]
        [--systems native,optuna,raytune] [--max-trials N] [--results DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.bench.systems.compare import parse_systems, run_comparison
from basht.errors import BashtError
from basht.experiment import load_experiment
from basht.report.compare import compare_rows
from basht.report.html import write_comparison_report
from basht.report.runstats import time_to_target
from basht.store import Store

HERE = Path(__file__).resolve().parent
J_PER_KWH = 3.6e6


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else value / base


def _fmt(value: float | None, digits: int = 3, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}g}{suffix}"


def measure(store: Store, pairs: list[tuple[str, str]], target: float) -> dict[str, Any]:
    """Per system: every seed's JCT, time to target, energies and accuracies, then medians."""
    out: dict[str, Any] = {}
    for system, run_id in pairs:
        run = store.get_run(run_id)
        metrics = {m.name: m.value for m in store.metrics(run_id)}
        entry = out.setdefault(
            system,
            {"runs": [], "jct_s": [], "ttt_s": [], "energy_j": [], "trial_energy_j": []},
        )
        ttt = time_to_target(store, run_id, target, "max")
        entry["runs"].append(
            {
                "run_id": run_id,
                "status": run.status,
                "jct_s": (metrics.get("JCT") or 0) / 1000 or None,
                "time_to_target_s": ttt,
                "energy_j": (metrics.get("energy_total") or 0) * J_PER_KWH,
                # None where some trial ran out of this machine's sight (never on a local run)
                "trial_energy_j": None
                if metrics.get("TWH_total") is None
                else metrics["TWH_total"] * J_PER_KWH,
                "best_value": run.best_value,
                "test_metrics": run.test_metrics,
                "trial_counts": store.trial_counts(run_id),
            }
        )
        if run.status == "completed":
            entry["jct_s"].append(metrics["JCT"] / 1000)
            entry["energy_j"].append(metrics["energy_total"] * J_PER_KWH)
            if metrics.get("TWH_total") is not None:
                entry["trial_energy_j"].append(metrics["TWH_total"] * J_PER_KWH)
            if ttt is not None:
                entry["ttt_s"].append(ttt)
    for entry in out.values():
        for key in ("jct_s", "ttt_s", "energy_j", "trial_energy_j"):
            entry[f"median_{key}"] = _median(entry[key])
        entry["reached"] = len(entry["ttt_s"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--experiment",
        type=Path,
        nargs="+",
        default=[HERE.parent / "examples" / "digits-asha.yaml"],
    )
    parser.add_argument("--systems", default="native,optuna,raytune")
    parser.add_argument("--max-trials", type=int, default=None, help="for every file")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--results", type=Path, default=None, help="keep runs and report here")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "peers.json")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds: expected 1 or more, got {args.seeds}")
    if args.max_trials is not None and args.max_trials < 1:
        parser.error(f"--max-trials: expected 1 or more, got {args.max_trials}")
    try:
        systems = parse_systems(args.systems)
        loaded = [load_experiment(path) for path in args.experiment]
    except BashtError as err:
        parser.error(str(err))
    console = Console(width=200)

    results = args.results or Path(tempfile.mkdtemp(prefix="basht-peers-"))
    store_url = f"sqlite:///{results / 'basht.db'}"
    experiments = []
    for experiment in loaded:
        search = experiment.search
        if args.max_trials is not None:
            search = search.model_copy(update={"max_trials": args.max_trials})
        experiments.append(experiment.model_copy(update={"store": store_url, "search": search}))
    experiment = experiments[0]
    comparison = run_comparison(
        experiments,
        systems,
        repeat=args.seeds,
        target=args.target,
        results_root=results,
        on_run=lambda r: console.log(f"{r.system} seed {r.seed}: {r.status} {r.run_id}"),
    )
    store = Store(store_url)
    report = write_comparison_report(store, comparison)
    data = measure(store, comparison.pairs(), args.target)
    labels = comparison.columns or comparison.systems
    base_label = labels[0]
    base = data.get(base_label, {})

    table = Table(
        title=f"{comparison.experiment}: {len(comparison.seeds)} seeds per column, medians "
        f"(ratio to {base_label}); time to validation accuracy ≥ {args.target:g}"
    )
    versus = f"× {base_label}" if len(base_label) <= 8 else "× first"
    columns = (
        "system",
        "completed",
        "JCT (s)",
        versus,
        f"time to {args.target:g} (s)",
        "reached",
        versus,
        "energy (J)",
        versus,
        "trial energy (J)",
        "best val acc",
        "test acc",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "system" else "right")
    for system in labels:
        entry = data.get(system)
        if entry is None:
            table.add_row(system, "0", *["-"] * (len(columns) - 2))
            continue
        done = [r for r in entry["runs"] if r["status"] == "completed"]
        ratios = {
            key: _ratio(entry[f"median_{key}"], base.get(f"median_{key}"))
            for key in ("jct_s", "ttt_s", "energy_j")
        }
        for key, value in ratios.items():
            entry[f"ratio_{key}_vs_first"] = value
        best = _median([r["best_value"] for r in done if r["best_value"] is not None])
        test = _median([r["test_metrics"].get("accuracy") for r in done if r["test_metrics"]])
        entry["median_best_value"], entry["median_test_accuracy"] = best, test
        table.add_row(
            system,
            f"{len(done)}/{len(entry['runs'])}",
            _fmt(entry["median_jct_s"]),
            _fmt(ratios["jct_s"], suffix="×"),
            _fmt(entry["median_ttt_s"]),
            f"{entry['reached']}/{len(entry['runs'])}",
            _fmt(ratios["ttt_s"], suffix="×"),
            _fmt(entry["median_energy_j"]),
            _fmt(ratios["energy_j"], suffix="×"),
            _fmt(entry["median_trial_energy_j"]),
            _fmt(best, 4),
            _fmt(test, 4),
        )
    console.print(table)
    console.print(f"side by side: basht report {comparison.id} --results {results}")
    console.print(f"report: {report}")

    import basht

    versions = {"basht": basht.__version__}
    for name in ("optuna", "ray", "torch"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    rows = compare_rows(store, comparison)
    write_results(
        args.out,
        "peers",
        {
            "versions": versions,
            "experiments": [e.to_dict() for e in experiments],
            "first_column": base_label,
            "comparison": comparison.id,
            "seeds": comparison.seeds,
            "target": args.target,
            "energy_source": sorted(
                {m.source for _, r in comparison.pairs() for m in store.metrics(r) if m.source}
            ),
            "systems": data,
            "table": [{"label": r.label, "cells": {s: r.cell(s) for s in labels}} for r in rows],
        },
    )


if __name__ == "__main__":
    main()
