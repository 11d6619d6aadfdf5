"""The ASHA paper's scaling experiment, simulated: time to reach a target with 1, 25 and 500 workers.

SHA, Hyperband, ASHA and asynchronous Hyperband run through the real Tuner on the simulated
executor: a virtual clock, N virtual workers, and a synthetic benchmark of learning curves
(`SyntheticCurve`: most configurations mediocre, a few good, curves that cross, epoch times that
vary by configuration). The rungs are the paper's (eta 4, budgets 1..256 epochs: r = R/256).
The trial limit grows with the workers (200 per worker, 100,000 at 500 workers) so each algorithm
has the same number of configurations to work with.

The target is set by how rare it is, so that it means the same on any landscape: by default the
value that 1 in 100 configurations reach at some epoch (`--target-top 0.01`; SyntheticCurve is
sampled at 100,000 configurations, spread over the seeds' landscapes, to find it), or `--target`.
A run of 5,000 configurations then holds about 50 that can reach it, and the question is which
algorithm finds one and trains it far enough first, the paper's question. Every run is also timed
to a ladder of targets, 1 in 10, 100, 1,000 and 2,000, on its one trace (second table): rarer
targets turn into a question of how many configurations an algorithm starts per minute.

One seed is one landscape (the curve's, the sampler's and the algorithm's seed), and one landscape
can favour any algorithm, so every setting runs on several seeds: 0-19 by default, the first 5 of
them from 100 workers on (`--seeds-large`), where a run takes seconds. Per (workers, algorithm)
the table gives the median time-to-target over the seeds (a seed that never reaches the target
counts as slower than any that does; the median is "never" if half or more never reach it), how
many seeds reached it, that median over ASHA's, in how many seeds ASHA was faster, and the median
and maximum real wall time. Time-to-target is virtual: when the first validation value at or
above the target is reported. Wall time is real: what one simulation took on this machine. The
JSON keeps every seed's run as well as the summaries.

"trained to max" is the median number of configurations trained to the maximum budget: SHA keeps
exactly floor(n/eta) per rung, while ASHA promotes from rungs that are still small, so more of its
configurations go all the way and fewer new ones start in the same time. "first at max" is when
the first configuration finished at the maximum budget (median, virtual minutes), the measure of
the ASHA paper's simulations.

With `--straggler-p P` each epoch takes `--straggler-factor` (4) times longer with chance P, the
straggler model of RubberBand's simulator; results/asha_scale_stragglers.json is P = 0.05.
`--eta` and `--max-budget` change the rungs; results/asha_scale_eta3.json is eta 3, budgets 1..81.

`--curves FILE` replays measured learning curves instead (a `basht curves` table, e.g.
benchmarks/data/digits-curves.json.gz: 1,000 configurations of digits-mlp trained to 81 epochs
on this machine), each start and resume costing their median load time; times are then in virtual
seconds, the rungs eta 3 up to the recorded epochs, and `--target-top F` is a fraction of the
recorded configurations (the ladder stops at 1 in the table's size); results/asha_scale_digits.json.

    python benchmarks/asha_scale.py [--workers 1 25 500] [--seeds 0 1 ... 19]
        [--seeds-large SEED ...] [--target-top 0.01 | --target 0.93] [--trials-per-worker 200]
        [--straggler-p 0.05] [--straggler-factor 4] [--eta 4] [--max-budget 256] [--out FILE]
        [--curves benchmarks/data/digits-curves.json.gz]
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
# Targets by rarity: the value that this fraction of the configurations reach at some epoch.
# Each run is timed to every one of them, on its one trace.
LADDER = (0.1, 0.01, 0.001, 0.0005)


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
    ladder: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One simulated run on `SyntheticCurve` or, given `curves`, on measured curves (each start
    and resume then costs their median load time); `wall_s` is real time, everything else
    virtual. `ladder` names further targets, each timed on the same trace."""
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
        "ladder_s": {
            name: first_reaching(result.trace, value, algorithm.mode)
            for name, value in (ladder or {}).items()
        },
        "makespan_s": result.makespan_s,
        # configurations trained to the maximum budget: SHA keeps exactly 1/eta per rung, ASHA's
        # promotions from small rungs let more through, which costs it new configurations
        "trained_to_max": result.counts.get("completed", 0),
        # the paper's simulated measure: how soon a first configuration is trained to the max
        "first_at_max_s": result.first_completed_s,
        "best_value": result.best_value,
        "wall_s": wall_s,
    }


def synthetic_targets(
    fractions: list[float], max_budget: int, seeds: list[int], samples: int = 100_000
) -> list[float]:
    """The values that each of `fractions` of SyntheticCurve's configurations reach at some epoch
    up to `max_budget`: `samples` random configurations of SPACE in all, spread over the seeds'
    landscapes and pooled (the landscapes differ, their distribution does not)."""
    best = []
    for seed in seeds:
        curve, rng = SyntheticCurve(seed=seed), np.random.default_rng(seed)
        for _ in range(-(-samples // len(seeds))):
            config = SPACE.sample(rng)
            best.append(max(curve(config, epoch)[0] for epoch in range(1, max_budget + 1)))
    best.sort(reverse=True)
    return [best[max(0, round(fraction * len(best)) - 1)] for fraction in fractions]


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


def _against_asha(
    name: str, times: dict[int, float | None], asha: dict[int, float | None]
) -> dict[str, Any]:
    """One algorithm's times to a target by seed, against ASHA's (`asha`, by seed)."""
    median = median_time(list(times.values()))
    asha_median = median_time(list(asha.values())) if asha else None
    return {
        "reached": sum(t is not None for t in times.values()),
        "median_time_to_target_s": median,
        "ratio_vs_asha": None if median is None or not asha_median else median / asha_median,
        # in how many of these seeds ASHA reached the target first (None on ASHA's own row)
        "asha_faster_in": None
        if name == "ASHA"
        else sum(_faster(asha[seed], t) for seed, t in times.items() if seed in asha),
    }


def _summary_row(
    name: str, workers: int, rows: list[dict[str, Any]], asha: dict[int, float | None]
) -> dict[str, Any]:
    """One algorithm's seeds at one worker count; `asha` is ASHA's time-to-target by seed."""
    walls = [r["wall_s"] for r in rows]
    return {
        "workers": workers,
        "algorithm": name,
        "trials": rows[0]["trials"],
        "seeds": [r["seed"] for r in rows],
        **_against_asha(name, {r["seed"]: r["time_to_target_s"] for r in rows}, asha),
        "median_trained_to_max": statistics.median(r["trained_to_max"] for r in rows),
        "median_first_at_max_s": median_time([r["first_at_max_s"] for r in rows]),
        "median_wall_s": statistics.median(walls),
        "max_wall_s": max(walls),
    }


def summarize_ladder(runs: list[dict[str, Any]], ladder: dict[str, float]) -> list[dict[str, Any]]:
    """Per (workers, rung of the ladder, algorithm): the median time to that target over the
    seeds, against ASHA's, and in how many seeds ASHA got there first."""
    summary = []
    for workers in sorted({r["workers"] for r in runs}):
        group = [r for r in runs if r["workers"] == workers]
        for rarity, target in ladder.items():
            asha = {r["seed"]: r["ladder_s"][rarity] for r in group if r["algorithm"] == "ASHA"}
            for name in ALGORITHMS:
                times = {r["seed"]: r["ladder_s"][rarity] for r in group if r["algorithm"] == name}
                if times:
                    summary.append(
                        {
                            "workers": workers,
                            "rarity": rarity,
                            "target": target,
                            "algorithm": name,
                            "seeds": len(times),
                            **_against_asha(name, times, asha),
                        }
                    )
    return summary


def print_ladder(ladder_summary: list[dict[str, Any]], unit: str) -> None:
    """ASHA's median time to each target of the ladder, and each other algorithm's against it."""
    others = [name for name in ALGORITHMS if name != "ASHA"]
    table = Table(
        title="by how rare the target is: median time to it against ASHA's "
        "(above 1x ASHA got there first; in brackets, the seeds where it did)"
    )
    for column in ("workers", "reached by", "target", f"ASHA ({unit})", *others):
        table.add_column(column, justify="right")
    rows: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for s in ladder_summary:
        rows.setdefault((s["workers"], s["rarity"]), {})[s["algorithm"]] = s
    workers = None
    for (w, rarity), by_algorithm in rows.items():
        if workers is not None and w != workers:
            table.add_section()
        workers = w
        asha = by_algorithm["ASHA"]
        cells = []
        for name in others:
            s = by_algorithm[name]
            median, ratio = s["median_time_to_target_s"], s["ratio_vs_asha"]
            if median is None:
                shown = "never"
            elif ratio is None:  # ASHA never got there: this one's own time instead
                shown = f"{_in(unit, median)} {unit}"
            else:
                shown = f"{ratio:.2f}x"
            cells.append(f"{shown} ({s['asha_faster_in']}/{s['seeds']})")
        table.add_row(
            str(w),
            rarity,
            f"{asha['target']:.4g}",
            _in(unit, asha["median_time_to_target_s"]),
            *cells,
        )
    Console(width=160).print(table)


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
        "--target",
        type=float,
        default=None,
        help="the value to reach (default: the value 1 in 100 configurations reach, --target-top)",
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
        help="the target that this fraction of the configurations reach at some epoch "
        "(default 0.01: one in a hundred): of the recorded ones with --curves, else of "
        "SyntheticCurve's, sampled",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    parser.add_argument(
        "--seeds-large",
        type=int,
        nargs="+",
        default=None,
        help=f"seeds for {LARGE} or more workers (default: the first 5 of --seeds)",
    )
    parser.add_argument(
        "--straggler-p",
        type=float,
        default=0.0,
        help="chance that an epoch straggles (the simulator's straggler model; default none)",
    )
    parser.add_argument("--straggler-factor", type=float, default=4.0)
    parser.add_argument(
        "--eta", type=int, default=None, help="default 4, the paper's (3 with --curves)"
    )
    parser.add_argument(
        "--max-budget",
        type=int,
        default=None,
        help="epochs; the budgets are 1..this (default 256, the paper's; with --curves, the "
        "recorded epochs)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "asha_scale.json"
    )
    args = parser.parse_args()
    if min(args.workers) < 1:
        parser.error(f"--workers: expected 1 or more each, got {min(args.workers)}")
    if args.trials_per_worker < 1:
        parser.error(f"--trials-per-worker: expected 1 or more, got {args.trials_per_worker}")
    if args.eta is not None and args.eta < 2:
        parser.error(f"--eta: expected 2 or more, got {args.eta}")
    if args.max_budget is not None and args.max_budget < 1:
        parser.error(f"--max-budget: expected 1 or more, got {args.max_budget}")
    if args.target_top is not None and not 0 < args.target_top <= 1:
        parser.error(f"--target-top: expected a fraction in (0, 1], got {args.target_top:g}")
    if not 0 <= args.straggler_p <= 1:
        parser.error(f"--straggler-p: expected a chance in [0, 1], got {args.straggler_p:g}")
    if args.straggler_factor < 0:
        parser.error(f"--straggler-factor: expected 0 or more, got {args.straggler_factor:g}")
    seeds_large = args.seeds_large if args.seeds_large is not None else args.seeds[:5]
    try:
        curves = RecordedCurves.load(args.curves) if args.curves else None
    except BashtError as err:
        parser.error(f"--curves: {err}")
    if args.eta is None:
        args.eta = 3 if curves else 4
    if args.max_budget is None:
        args.max_budget = curves.epochs if curves else 256
    if args.target_top is not None and args.target is not None:
        parser.error("give --target or --target-top, not both")
    top = args.target_top if args.target_top is not None else 0.01
    # the ladder's fractions that name at least one configuration of the landscape
    fractions = [f for f in LADDER if not curves or f * len(curves) >= 1]
    if curves is not None:
        values = [curves.target(f) for f in (top, *fractions)]
    else:
        pooled = sorted(set(args.seeds) | set(seeds_large))
        values = synthetic_targets([top, *fractions], args.max_budget, pooled)
    target = args.target if args.target is not None else values[0]
    ladder = {f"1 in {round(1 / f):,}": v for f, v in zip(fractions, values[1:], strict=True)}

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
                        ladder,
                    )
                )
    total_s = time.perf_counter() - started

    summary, ladder_summary = summarize(runs), summarize_ladder(runs, ladder)
    landscape = f"curves recorded in {args.curves.name}" if curves else "SyntheticCurve"
    unit = "s" if curves else "min"
    print_table(summary, target, args.eta, args.max_budget, landscape, unit)
    print_ladder(ladder_summary, unit)
    print(f"{len(runs)} simulations in {total_s:.0f} s")
    write_results(
        args.out,
        "asha_scale",
        {
            "target": target,
            "ladder": ladder,
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
            "ladder_summary": ladder_summary,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
