"""The ASHA paper's scaling experiment, simulated: time to reach a target with 1, 25 and 500 workers.

SHA, Hyperband, ASHA and asynchronous Hyperband (eta 3, budgets 1..81 epochs) run through the real
Tuner on the simulated executor: a virtual clock, N virtual workers, and a synthetic benchmark of
learning curves (`SyntheticCurve`: most configurations mediocre, a few good, curves that cross,
epoch times that vary by configuration). The trial limit grows with the workers (200 per worker,
100,000 at 500 workers) so each algorithm has the same number of configurations to work with.

One seed is one landscape (the curve's, the sampler's and the algorithm's seed), and one landscape
can favour any algorithm, so every setting runs on several seeds (by default 0-4, at 500 workers
too; `--seeds-large` sets fewer there to save time). Per (workers, algorithm) the table gives the
median time-to-target over the seeds (a seed that never reaches the target counts as slower than
any that does; the median is "never" if half or more never reach it), how many seeds reached it,
that median over ASHA's, in how many seeds ASHA was faster, and the median and maximum real wall
time. Time-to-target is virtual: when the first validation value at or above the target is
reported. Wall time is real: what one simulation took on this machine. The JSON keeps every
seed's run as well as the summary.

"trained to max" is the median number of configurations trained to the maximum budget: SHA keeps
exactly floor(n/eta) per rung, while ASHA promotes from rungs that are still small, so more of its
configurations go all the way and fewer new ones start in the same time. "first at max" is when
the first configuration finished at the maximum budget (median, virtual minutes), the measure of
the ASHA paper's simulations.

With `--straggler-p P` each epoch takes `--straggler-factor` (4) times longer with chance P, the
straggler model of RubberBand's simulator; results/asha_scale_stragglers.json is P = 0.05.
`--eta` and `--max-budget` change the rungs; results/asha_scale_eta4.json is the ASHA paper's
own shape (eta 4, budgets 1..256) with seeds 0-9 (0-4 at 500 workers).

`--curves FILE` replays measured learning curves instead (a `basht curves` table, e.g.
benchmarks/data/digits-curves.json.gz: 1,000 configurations of digits-mlp trained to 81 epochs
on this machine), each start and resume costing their median load time; times are then in virtual
seconds, and `--target-top F` sets the target that a fraction F of the recorded configurations
reach at some epoch (0.01 by default). Without `--curves`, `--target-top F` sets the target that
F of SyntheticCurve's configurations reach (10,000 sampled per seed); the default target 0.93 is
about 1 in 1,900 (54 of 100,000 sampled over seeds 0-9). results/asha_scale_synthetic_top*.json
are F = 0.1, 0.01 and 0.001, seeds 0-9 (0-4 at 500 workers).

    python benchmarks/asha_scale.py [--workers 1 25 500] [--seeds 0 1 2 3 4]
        [--seeds-large SEED ...] [--target 0.93] [--trials-per-worker 200]
        [--straggler-p 0.05] [--straggler-factor 4] [--eta 3] [--max-budget 81] [--out FILE]
        [--target-top 0.01] [--curves benchmarks/data/digits-curves.json.gz]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.engine import RecordedCurves, SyntheticCurve
from basht.errors import BashtError
from basht.space import Float, Int, SearchSpace
from basht.tune import ASHA, SHA, AsyncHyperband, Hyperband
from basht.tune.simulate import first_reaching, median_time, simulate

SPACE = SearchSpace(
    {
        "lr": Float(1e-4, 1.0, log=True),
        "width": Int(16, 1024, log=True),
        "dropout": Float(0.0, 0.5),
        "decay": Float(1e-6, 1e-2, log=True),
    }
)
ALGORITHMS = {
    "SHA": SHA,
    "Hyperband": Hyperband,
    "ASHA": ASHA,
    "async Hyperband": AsyncHyperband,
}
LARGE = 100  # worker counts from here on run `--seeds-large`


def run_one(
    name: str,
    workers: int,
    trials: int,
    target: float,
    seed: int,
    straggler_p: float = 0.0,
    straggler_factor: float = 4.0,
    eta: int = 3,
    max_budget: int = 81,
    curves: RecordedCurves | None = None,
) -> dict[str, Any]:
    """One simulated run on `SyntheticCurve` or, given `curves`, on measured curves (each start
    and resume then costs their median load time); `wall_s` is real time, everything else
    virtual."""
    make = ALGORITHMS[name]
    algorithm = make(
        SPACE,
        metric="accuracy",
        mode=curves.mode if curves else "max",
        min_budget=1,
        max_budget=max_budget,
        eta=eta,
        seed=seed,
        max_trials=trials,
    )
    curve = curves.with_seed(seed) if curves else SyntheticCurve(seed=seed)
    started = time.perf_counter()
    result = simulate(
        algorithm,
        workers,
        curve,
        seed=seed,
        load_s=curves.load_s if curves else 0.0,
        straggler_p=straggler_p,
        straggler_factor=straggler_factor,
    )
    wall_s = time.perf_counter() - started
    # measured on the trace, not by simulate(target=...), which would stop the run there
    reached = first_reaching(result.trace, target, algorithm.mode)
    return {
        "algorithm": name,
        "workers": workers,
        "seed": seed,
        "trials": result.trials,
        "time_to_target_s": reached,
        "makespan_s": result.makespan_s,
        # configurations trained to the maximum budget: SHA keeps exactly 1/eta per rung, ASHA's
        # promotions from small rungs let more through, which costs it new configurations
        "trained_to_max": result.counts.get("completed", 0),
        # the paper's simulated measure: how soon a first configuration is trained to the max
        "first_at_max_s": result.first_completed_s,
        "best_value": result.best_value,
        "wall_s": wall_s,
    }


def synthetic_target(
    fraction: float, max_budget: int, seeds: list[int], samples: int = 10_000
) -> float:
    """The value that a `fraction` of SyntheticCurve's configurations reach at some epoch up to
    `max_budget`: each seed's landscape sampled at `samples` random configurations of SPACE,
    pooled (the landscapes differ, their distribution does not)."""
    best = []
    for seed in seeds:
        curve, rng = SyntheticCurve(seed=seed), np.random.default_rng(seed)
        for _ in range(samples):
            config = SPACE.sample(rng)
            best.append(max(curve(config, epoch)[0] for epoch in range(1, max_budget + 1)))
    best.sort(reverse=True)
    return best[max(0, round(fraction * len(best)) - 1)]


def _faster(a: float | None, b: float | None) -> bool:
    """Whether time-to-target `a` beats `b` (never reaching it loses to reaching it)."""
    return (math.inf if a is None else a) < (math.inf if b is None else b)


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workers, algorithm): the seeds' median time-to-target against ASHA's, and wall times."""
    summary = []
    for workers in sorted({r["workers"] for r in runs}):
        group = [r for r in runs if r["workers"] == workers]
        asha = {r["seed"]: r["time_to_target_s"] for r in group if r["algorithm"] == "ASHA"}
        for name in ALGORITHMS:
            rows = [r for r in group if r["algorithm"] == name]
            if rows:
                summary.append(_summary_row(name, workers, rows, asha))
    return summary


def _summary_row(
    name: str, workers: int, rows: list[dict[str, Any]], asha: dict[int, float | None]
) -> dict[str, Any]:
    """One algorithm's seeds at one worker count; `asha` is ASHA's time-to-target by seed."""
    times = [r["time_to_target_s"] for r in rows]
    walls = [r["wall_s"] for r in rows]
    median = median_time(times)
    asha_median = median_time(list(asha.values())) if asha else None
    return {
        "workers": workers,
        "algorithm": name,
        "trials": rows[0]["trials"],
        "seeds": [r["seed"] for r in rows],
        "reached": sum(t is not None for t in times),
        "median_time_to_target_s": median,
        "ratio_vs_asha": None if median is None or not asha_median else median / asha_median,
        # in how many of these seeds ASHA reached the target first (None on ASHA's own row)
        "asha_faster_in": None
        if name == "ASHA"
        else sum(
            _faster(asha[r["seed"]], r["time_to_target_s"]) for r in rows if r["seed"] in asha
        ),
        "median_trained_to_max": statistics.median(r["trained_to_max"] for r in rows),
        "median_first_at_max_s": median_time([r["first_at_max_s"] for r in rows]),
        "median_wall_s": statistics.median(walls),
        "max_wall_s": max(walls),
    }


def _in(unit: str, seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{seconds / 60:.2f}" if unit == "min" else f"{seconds:.3f}"


def print_table(
    summary: list[dict[str, Any]],
    target: float,
    eta: int = 3,
    max_budget: int = 81,
    landscape: str = "SyntheticCurve",
    unit: str = "min",
) -> None:
    """`unit` is "min" for the synthetic landscape's minutes-long epochs, "s" for measured ones."""
    table = Table(
        title=f"time to a value reaching {target:.4g} on {landscape}: median over seeds "
        f"(virtual {unit}), eta {eta}, budgets 1..{max_budget}"
    )
    columns = (
        "workers",
        "trials",
        "algorithm",
        "reached",
        f"median time to target ({unit})",
        "vs ASHA",
        "ASHA faster in",
        "trained to max",
        f"first at max ({unit})",
        "median wall (s)",
        "max wall (s)",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    workers = None
    for s in summary:
        if workers is not None and s["workers"] != workers:
            table.add_section()
        workers, n = s["workers"], len(s["seeds"])
        table.add_row(
            str(s["workers"]),
            f"{s['trials']:,}",
            s["algorithm"],
            f"{s['reached']}/{n}",
            _in(unit, s["median_time_to_target_s"]),
            "-" if s["ratio_vs_asha"] is None else f"{s['ratio_vs_asha']:.2f}x",
            "-" if s["algorithm"] == "ASHA" else f"{s['asha_faster_in']}/{n}",
            f"{s['median_trained_to_max']:g}",
            _in(unit, s["median_first_at_max_s"]),
            f"{s['median_wall_s']:.2f}",
            f"{s['max_wall_s']:.2f}",
        )
    Console(width=160).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 25, 500])
    parser.add_argument("--trials-per-worker", type=int, default=200)
    parser.add_argument(
        "--target", type=float, default=None, help="the value to reach (default 0.93)"
    )
    parser.add_argument(
        "--curves",
        type=Path,
        default=None,
        help="replay measured curves (a RecordedCurves file) instead of SyntheticCurve",
    )
    parser.add_argument(
        "--target-top",
        type=float,
        default=None,
        help="the target that this fraction of the configurations reach at some epoch (0.01: "
        "one in a hundred): of the recorded ones with --curves (the default there), else of "
        "SyntheticCurve's, sampled",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--seeds-large",
        type=int,
        nargs="+",
        default=None,
        help=f"seeds for {LARGE} or more workers (default: --seeds)",
    )
    parser.add_argument(
        "--straggler-p",
        type=float,
        default=0.0,
        help="chance that an epoch straggles (the simulator's straggler model; default none)",
    )
    parser.add_argument("--straggler-factor", type=float, default=4.0)
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument(
        "--max-budget", type=int, default=81, help="epochs; the budgets are 1..this"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "asha_scale.json"
    )
    args = parser.parse_args()
    if min(args.workers) < 1:
        parser.error(f"--workers: expected 1 or more each, got {min(args.workers)}")
    if args.trials_per_worker < 1:
        parser.error(f"--trials-per-worker: expected 1 or more, got {args.trials_per_worker}")
    if args.eta < 2:
        parser.error(f"--eta: expected 2 or more, got {args.eta}")
    if args.max_budget < 1:
        parser.error(f"--max-budget: expected 1 or more, got {args.max_budget}")
    if args.target_top is not None and not 0 < args.target_top <= 1:
        parser.error(f"--target-top: expected a fraction in (0, 1], got {args.target_top:g}")
    if not 0 <= args.straggler_p <= 1:
        parser.error(f"--straggler-p: expected a chance in [0, 1], got {args.straggler_p:g}")
    if args.straggler_factor < 0:
        parser.error(f"--straggler-factor: expected 0 or more, got {args.straggler_factor:g}")
    seeds_large = args.seeds_large if args.seeds_large is not None else args.seeds
    try:
        curves = RecordedCurves.load(args.curves) if args.curves else None
    except BashtError as err:
        parser.error(f"--curves: {err}")
    if args.target_top is not None and args.target is not None:
        parser.error("give --target or --target-top, not both")
    if args.target is not None:
        target = args.target
    elif curves is not None:
        target = curves.target(args.target_top if args.target_top is not None else 0.01)
    elif args.target_top is not None:
        target = synthetic_target(args.target_top, args.max_budget, sorted(set(args.seeds)))
    else:
        target = 0.93

    started = time.perf_counter()
    runs = []
    for workers in args.workers:
        trials = args.trials_per_worker * workers
        for seed in seeds_large if workers >= LARGE else args.seeds:
            for name in ALGORITHMS:
                runs.append(
                    run_one(
                        name,
                        workers,
                        trials,
                        target,
                        seed,
                        args.straggler_p,
                        args.straggler_factor,
                        args.eta,
                        args.max_budget,
                        curves,
                    )
                )
    total_s = time.perf_counter() - started

    summary = summarize(runs)
    landscape = f"curves recorded in {args.curves.name}" if curves else "SyntheticCurve"
    print_table(summary, target, args.eta, args.max_budget, landscape, "s" if curves else "min")
    print(f"{len(runs)} simulations in {total_s:.0f} s")
    write_results(
        args.out,
        "asha_scale",
        {
            "target": target,
            "landscape": {
                "curves": str(args.curves),
                "configurations": len(curves),
                "target_top": args.target_top,
                "load_s": curves.load_s,
                "source": curves.source,
            }
            if curves
            else {"synthetic": "SyntheticCurve", "target_top": args.target_top},
            "trials_per_worker": args.trials_per_worker,
            "straggler_p": args.straggler_p,
            "straggler_factor": args.straggler_factor,
            "eta": args.eta,
            "max_budget": args.max_budget,
            "seeds": args.seeds,
            "seeds_large": seeds_large,
            "total_wall_s": total_s,
            "summary": summary,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
