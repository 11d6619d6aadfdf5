"""Multi-objective tuning: the hypervolume each algorithm reaches for what it spends.

Six algorithms (eight on digits-mlp), each told the same two objectives:

* MO-ASHA: Basht's ASHA ranking rungs by non-dominated sorting with the ε-net tie-break
  (promotion variant), random sampling;
* MO-ASHA (stopping): the same with `asha_variant: stopping`, which never pauses a trial (a
  promotion restarts one from its checkpoint); and with NSGA-II as its sampler; on digits-mlp
  also with MO-TPE as its sampler, and with `min_budget: 3`, a first rung long enough for the
  energy meter to resolve;
* MO random: random search, every trial to the maximum budget;
* NSGA-II and MO-TPE: Optuna's samplers (as Basht's `sampler: nsga2 | tpe`), every trial to the
  maximum budget: Optuna cannot prune a multi-objective study, so that is how its users run one.

Two settings:

* `lcbench` (simulated): validation accuracy (max) against `train_time_s` (min, each trial's
  projected time to 52 epochs) on YAHPO Gym's LCBench surrogate, on the virtual clock, 4 workers,
  for `--tasks` (5) tasks and `--seeds` (10) seeds; every run gets the same simulated time.
* `digits` (real): accuracy (max) against measured `train_energy_kwh` (min) on digits-mlp, 2
  workers, `--digits-seeds` (5) seeds, trials of at most 9 and at most 27 epochs (two tasks,
  `--digits-max-budgets`; the committed results have 10 seeds at 27, from a second run with
  `--digits-max-budgets 27 --digits-seeds 10`, which keeps the other task's rows): an epoch is
  about 13 ms, so the longer the trials the larger the part of a trial's cost its epochs are, and
  early stopping can save; every run gets the same energy budget (the whole job's energy, as
  `search.energy_budget_kwh` counts it). Its hypervolume is also read at equal training energy:
  the energy booked to the trials' epochs (the sum of `train_energy_kwh_spent`, the axis `basht
  compare` draws), at the least any run reached. On a machine whose idle floor is most of its
  draw, the whole job's energy is mostly its wall time; the training energy is the part the
  search decides.

The hypervolume is of the completed feasible trials, each objective signed for minimisation and
normalised per task (0 the best value any run's completed trials reached, 1 the worst), from
the reference point (1.1, 1.1): at most 1.21, and the algorithms' numbers compare. Reported: the median
over seeds at the end of the budget and at its quarters (the curve), and per task whether MO-ASHA's
median beats NSGA-II's; on digits-mlp also on how many seeds each method is above NSGA-II on the
same seed (the seed is also the data's split).

    python benchmarks/multiobjective.py [--part lcbench|digits|both] [--tasks 5] [--seeds 10]

`--part` runs one setting and keeps the other's results already in `--out`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

METHODS = {  # name -> (sampler, pruner, asha_variant, min_budget)
    "MO-ASHA": ("random", "asha", "auto", 1),
    "MO-ASHA (stopping)": ("random", "asha", "stopping", 1),
    "MO-ASHA (stopping, NSGA-II)": ("nsga2", "asha", "stopping", 1),
    "MO random": ("random", "none", "auto", 1),
    "NSGA-II": ("nsga2", "none", "auto", 1),
    "MO-TPE": ("tpe", "none", "auto", 1),
}
# digits-mlp only: MO-TPE's proposals stopped early; and a first rung of 3 epochs (about 60 ms a
# trial), so that the energy ranked there is more than the monitor's rounding (a trial stopped
# after one epoch holds its worker ~30 ms).
DIGITS_METHODS = {
    **METHODS,
    "MO-ASHA (stopping, MO-TPE)": ("tpe", "asha", "stopping", 1),
    "MO-ASHA (stopping, min_budget 3)": ("random", "asha", "stopping", 3),
}
FRACTIONS = (0.25, 0.5, 0.75, 1.0)


Bounds = tuple[tuple[float, ...], tuple[float, ...]]  # (ideal, nadir) per objective


def hypervolume_at(
    completed: list[tuple[float, tuple[float, ...]]], budget: float, bounds: Bounds
) -> float:
    """The normalised hypervolume of the trials completed by `budget` (spent: seconds or kWh):
    each objective scaled so the task's ideal is 0 and its nadir 1, from the point (1.1, 1.1)."""
    from basht.tune.pareto import hypervolume

    ideal, nadir = bounds
    scaled = [
        tuple(
            (c - lo) / (hi - lo) if hi > lo else 0.0
            for c, lo, hi in zip(costs, ideal, nadir, strict=True)
        )
        for spent, costs in completed
        if spent <= budget
    ]
    return hypervolume(scaled, (1.1,) * len(ideal))


def common_bounds(runs: list[list[tuple[float, tuple[float, ...]]]]) -> Bounds:
    """The best and worst value of each objective over every run's completed trials."""
    costs = [c for run in runs for _, c in run]
    k = len(costs[0])
    return tuple(min(c[i] for c in costs) for i in range(k)), tuple(
        max(c[i] for c in costs) for i in range(k)
    )


# -- LCBench, simulated --------------------------------------------------------------------------


def lcbench_experiment(
    task: str, sampler: str, pruner: str, seed: int, variant: str = "auto", min_budget: int = 1
) -> dict[str, Any]:
    from basht.workloads.lcbench import space

    return {
        "name": "mo-lcbench",
        "seed": seed,
        "workload": {"name": "lcbench", "params": {"task": task}},
        "space": space(),
        "search": {
            "sampler": sampler,
            "pruner": pruner,
            "asha_variant": variant,
            "objectives": [
                {"metric": "val_accuracy", "mode": "max"},
                {"metric": "train_time_s", "mode": "min"},
            ],
            "min_budget": min_budget,
            "max_budget": 52,
            "eta": 3,
            "max_trials": 100_000,  # the simulated time ends each run
        },
    }


def lcbench_run(task: str, method: str, seed: int, budget_s: float, workers: int) -> dict:
    from basht.experiment import Experiment
    from basht.tune.factory import make_algorithm
    from basht.tune.objectives import Objectives
    from basht.tune.simulate import simulate
    from basht.workloads.lcbench import LCBenchCurve

    sampler, pruner, variant, min_budget = METHODS[method]
    experiment = Experiment.from_dict(
        lcbench_experiment(task, sampler, pruner, seed, variant, min_budget)
    )
    objectives = Objectives.from_search(experiment.search)
    result = simulate(
        make_algorithm(experiment),
        workers,
        LCBenchCurve(task),
        max_time_s=budget_s,
        seed=seed,
        objectives=objectives,
        max_budget=52,
    )
    completed = [(at, objectives.costs(m)) for at, m in result.completed if at <= budget_s]
    return {"completed": completed, "trials": result.trials, "wall_s": result.wall_s}


def lcbench_part(tasks: list[str], seeds: int, workers: int, budget_s: float) -> dict[str, Any]:
    rows = []
    for task in tasks:
        runs = {
            m: [lcbench_run(task, m, seed, budget_s, workers) for seed in range(seeds)]
            for m in METHODS
        }
        bounds = common_bounds([r["completed"] for rs in runs.values() for r in rs])
        for method, method_runs in runs.items():
            curve = [
                statistics.median(
                    hypervolume_at(r["completed"], f * budget_s, bounds) for r in method_runs
                )
                for f in FRACTIONS
            ]
            rows.append(
                {
                    "task": task,
                    "method": method,
                    "median_hypervolume": curve[-1],
                    "hypervolume_per_seed": [
                        hypervolume_at(r["completed"], budget_s, bounds) for r in method_runs
                    ],
                    "median_hypervolume_at": dict(zip(map(str, FRACTIONS), curve, strict=True)),
                    "median_trials": statistics.median(r["trials"] for r in method_runs),
                    "median_completed": statistics.median(len(r["completed"]) for r in method_runs),
                    "median_wall_s": statistics.median(r["wall_s"] for r in method_runs),
                    "bounds": [list(bounds[0]), list(bounds[1])],
                }
            )
        print(f"lcbench task {task} done", file=sys.stderr)
    return {
        "setting": {
            "tasks": tasks,
            "seeds": seeds,
            "workers": workers,
            "budget_s": budget_s,
            "objectives": "val_accuracy (max, percent), train_time_s (min, projected to 52 epochs)",
        },
        "rows": rows,
        "mo_asha_beats_nsga2_on": _wins(rows, "task"),
    }


# -- digits-mlp, real --------------------------------------------------------------------------


def digits_experiment(
    sampler: str,
    pruner: str,
    seed: int,
    energy_kwh: float,
    folder: Path,
    variant: str = "auto",
    min_budget: int = 1,
    max_budget: int = 9,
) -> dict[str, Any]:
    return {
        "name": "mo-digits",
        "seed": seed,
        "workload": {"name": "digits-mlp"},
        "space": {
            "lr": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True},
            "hidden": {"type": "int", "low": 16, "high": 512, "log": True},
            "batch_size": {"type": "choice", "values": [16, 32, 64, 128, 256]},
            "weight_decay": {"type": "float", "low": 1.0e-6, "high": 1.0e-3, "log": True},
        },
        "search": {
            "sampler": sampler,
            "pruner": pruner,
            "asha_variant": variant,
            "objectives": [
                {"metric": "accuracy", "mode": "max"},
                {"metric": "train_energy_kwh", "mode": "min"},
            ],
            "min_budget": min_budget,
            "max_budget": max_budget,
            "eta": 3,
            "max_trials": 10_000,
            "energy_budget_kwh": energy_kwh,
            "stop_grace_s": 5.0,
        },
        "resources": {"workers": 2},
        "store": f"sqlite:///{folder / 'bench.db'}",
    }


def digits_run(method: str, seed: int, energy_kwh: float, max_budget: int = 9) -> dict[str, Any]:
    import basht

    sampler, pruner, variant, min_budget = DIGITS_METHODS[method]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        result = basht.run(
            digits_experiment(
                sampler, pruner, seed, energy_kwh, folder, variant, min_budget, max_budget
            ),
            results_root=folder / "results",
        )
        wall_s = time.perf_counter() - start
    section = result.summary.get("objectives") or {}
    # What every trial had spent on its epochs when each trial completed (the run's own record).
    trained_by = {p["trial"]: p["energy_kwh"] for p in section.get("over_time", [])}
    completed, by_training = [], []
    for trial in sorted(section.get("trials", []), key=lambda t: t["at_s"]):
        if trial["state"] == "completed" and trial["feasible"]:
            values = trial["values"]
            costs = (-values["accuracy"], values["train_energy_kwh"])
            completed.append((trial["at_s"], costs))
            if trained_by.get(trial["trial"]) is not None:
                by_training.append((trained_by[trial["trial"]], costs))
    energy = (result.metrics.get("energy_total") or {}).get("value")
    return {
        "completed": completed,
        "by_training_energy": by_training,
        "training_energy_kwh": sum(t.get("energy_kwh") or 0.0 for t in section.get("trials", [])),
        "trials": sum(result.trial_counts.values()),
        "energy_total_kwh": energy,
        "wall_s": wall_s,
        "status": result.status,
    }


def digits_part(
    seeds: int,
    energy_kwh: float,
    max_budgets: tuple[int, ...],
    kept: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The digits-mlp tasks of `max_budgets`, and those of `kept` (an earlier digits part) that
    were not run again."""
    rows = [r for r in (kept or {}).get("rows", []) if r.get("max_budget") not in max_budgets]
    kept_budgets = {str(r["max_budget"]) for r in rows}
    trained_by_budget = {
        b: e
        for b, e in ((kept or {}).get("setting", {}).get("training_energy_kwh") or {}).items()
        if b in kept_budgets
    }
    for max_budget in max_budgets:
        budget_rows, trained = digits_rows(seeds, energy_kwh, max_budget)
        rows += budget_rows
        trained_by_budget[str(max_budget)] = trained
    return digits_summary(rows, energy_kwh, trained_by_budget)


def digits_summary(
    rows: list[dict[str, Any]], energy_kwh: float, trained_by_budget: dict[str, float]
) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: r["max_budget"])
    methods = [m for m in DIGITS_METHODS if m != "NSGA-II"]
    return {
        "setting": {
            "seeds": {str(r["max_budget"]): r["seeds"] for r in rows},
            "workers": 2,
            "energy_budget_kwh": energy_kwh,
            "max_budgets": sorted({r["max_budget"] for r in rows}),
            "training_energy_kwh": trained_by_budget,
            "objectives": "accuracy (max), train_energy_kwh (min, measured, projected to the "
            "maximum budget; an estimate where the machine has no energy counters)",
        },
        "rows": rows,
        "mo_asha_beats_nsga2_on": _wins(rows, "task"),
        "mo_asha_beats_nsga2_at_training_energy_on": _wins(
            rows, "task", "median_hypervolume_at_training_energy"
        ),
        "beats_nsga2_on": {m: _wins(rows, "task", method=m) for m in methods},
        "beats_nsga2_at_training_energy_on": {
            m: _wins(rows, "task", "median_hypervolume_at_training_energy", method=m)
            for m in methods
        },
    }


def seeds_above(rows: list[dict[str, Any]]) -> None:
    """Each row's count of seeds on which it is above NSGA-II on the same seed. A seed is also
    the data's split, which moves every method's hypervolume together, so comparing seed by seed
    tells methods apart that medians over a few seeds cannot."""
    nsga2 = next(r for r in rows if r["method"] == "NSGA-II")["hypervolume_per_seed"]
    for r in rows:
        mine = r["hypervolume_per_seed"]
        r["seeds_above_nsga2"] = sum(a > b for a, b in zip(mine, nsga2, strict=True))


def digits_rows(
    seeds: int, energy_kwh: float, max_budget: int
) -> tuple[list[dict[str, Any]], float]:
    """One row per method for trials `max_budget` epochs long at most (a task of its own, with
    its own bounds), and the training energy every run reached."""
    runs = {
        m: [digits_run(m, seed, energy_kwh, max_budget) for seed in range(seeds)]
        for m in DIGITS_METHODS
    }
    bounds = common_bounds([r["completed"] for rs in runs.values() for r in rs])
    # The training energy every run reached: each run's hypervolume is read there too.
    trained = min(r["training_energy_kwh"] for rs in runs.values() for r in rs)
    rows = []
    for method, method_runs in runs.items():
        by_training = [
            statistics.median(
                hypervolume_at(r["by_training_energy"], f * trained, bounds) for r in method_runs
            )
            for f in FRACTIONS
        ]
        per_seed = [hypervolume_at(r["completed"], float("inf"), bounds) for r in method_runs]
        rows.append(
            {
                "task": f"digits-mlp, {max_budget} epochs",
                "method": method,
                "max_budget": max_budget,
                "seeds": seeds,
                "median_hypervolume": statistics.median(per_seed),
                "hypervolume_per_seed": per_seed,  # how far apart the seeds are
                "median_hypervolume_at_training_energy": by_training[-1],
                "median_hypervolume_at_training_energy_fraction": dict(
                    zip(map(str, FRACTIONS), by_training, strict=True)
                ),
                "median_trials": statistics.median(r["trials"] for r in method_runs),
                "median_completed": statistics.median(len(r["completed"]) for r in method_runs),
                "median_energy_total_kwh": statistics.median(
                    r["energy_total_kwh"] or 0.0 for r in method_runs
                ),
                "median_training_energy_kwh": statistics.median(
                    r["training_energy_kwh"] for r in method_runs
                ),
                "median_wall_s": statistics.median(r["wall_s"] for r in method_runs),
                "bounds": [list(bounds[0]), list(bounds[1])],
            }
        )
    seeds_above(rows)
    return rows, trained


def _wins(
    rows: list[dict[str, Any]],
    key: str,
    value: str = "median_hypervolume",
    method: str = "MO-ASHA",
) -> list[str]:
    """The tasks where `method`'s median hypervolume (`value`) is above NSGA-II's."""
    by = {(r[key], r["method"]): r[value] for r in rows}
    tasks = sorted({r[key] for r in rows}, key=str)
    return [t for t in tasks if (t, method) in by and by[(t, method)] > by[(t, "NSGA-II")]]


def print_table(title: str, part: dict[str, Any]) -> None:
    training = "median_hypervolume_at_training_energy"
    has_training = all(training in r for r in part["rows"])
    table = Table(title=title)
    columns = ["task", "method", "median HV", "vs NSGA-II"]
    if has_training:
        columns += ["HV @ equal training energy", "vs NSGA-II "]
    paired = all("seeds_above_nsga2" in r for r in part["rows"])
    if paired:
        columns += ["seeds above NSGA-II"]
    for column in (*columns, "trials", "completed"):
        table.add_column(column, justify="left" if column in ("task", "method") else "right")
    nsga2 = {r["task"]: r for r in part["rows"] if r["method"] == "NSGA-II"}

    def against(r: dict[str, Any], key: str) -> list[str]:
        theirs = nsga2[r["task"]][key]
        return [f"{r[key]:.4g}", f"{r[key] / theirs:.2f}x" if theirs > 0 else "inf"]

    for r in part["rows"]:
        table.add_row(
            str(r["task"]),
            r["method"],
            *against(r, "median_hypervolume"),
            *(against(r, training) if has_training else []),
            *([f"{r['seeds_above_nsga2']} of {r['seeds']}"] if paired else []),
            f"{r['median_trials']:g}",
            f"{r['median_completed']:g}",
        )
    Console(width=140).print(table)
    tasks = len({r["task"] for r in part["rows"]})
    for key, where in (
        ("mo_asha_beats_nsga2_on", ""),
        ("mo_asha_beats_nsga2_at_training_energy_on", " at equal training energy"),
    ):
        if key in part:
            wins = part[key]
            print(
                f"MO-ASHA's median hypervolume{where} is above NSGA-II's on {len(wins)} of "
                f"{tasks}: {', '.join(map(str, wins)) or 'none'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("lcbench", "digits", "both"), default="both")
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--lcbench-workers", type=int, default=4)
    parser.add_argument("--lcbench-budget-s", type=float, default=3600.0)
    parser.add_argument("--digits-seeds", type=int, default=5)
    parser.add_argument("--digits-energy-kwh", type=float, default=5.0e-5)
    parser.add_argument(
        "--digits-max-budgets",
        default="9,27",
        help="the maximum epochs a digits-mlp trial trains (comma-separated: one task each)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "multiobjective.json")
    args = parser.parse_args()
    from basht.workloads.lcbench import tasks

    results: dict[str, Any] = {}
    if args.part != "both" and args.out.exists():  # one part again: the other one is kept
        kept = json.loads(args.out.read_text())
        results = {part: kept[part] for part in ("lcbench", "digits") if part in kept}
    if args.part in ("lcbench", "both"):
        chosen = list(tasks()[: args.tasks])
        results["lcbench"] = lcbench_part(
            chosen, args.seeds, args.lcbench_workers, args.lcbench_budget_s
        )
        print_table("LCBench (simulated): median hypervolume at equal time", results["lcbench"])
    if args.part in ("digits", "both"):
        max_budgets = tuple(int(b) for b in args.digits_max_budgets.split(","))
        results["digits"] = digits_part(
            args.digits_seeds, args.digits_energy_kwh, max_budgets, results.get("digits")
        )
        print_table("digits-mlp (real): median hypervolume at equal energy", results["digits"])
    write_results(args.out, "multiobjective", results)


if __name__ == "__main__":
    main()
