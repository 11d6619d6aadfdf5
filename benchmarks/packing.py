"""Packing quality, simulated: makespan over the area lower bound for 200 random trial groups.

Each group has 2 to 40 trials on a machine of 8 units (cores or GPUs); remaining work is
lognormal (mixed lengths: median 60 s, some ten times longer); each trial scales as w^α with α
drawn from 0.4 to 1.0 (from poorly to perfectly parallel), up to 8 units. Fluid (water-filling,
re-planned at every trial end) against fifo (one unit per trial, first come first served, as Ray
Tune's default `{"cpu": 1}` per trial). LB = max(total minimal area / 8, longest trial at its
widest), which no schedule can beat.

    python benchmarks/packing.py [--groups 200] [--capacity 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.engine.packing import TrialLoad, lower_bound, simulate_group


def random_group(rng: np.random.Generator, capacity: float) -> list[TrialLoad]:
    n = int(rng.integers(2, 41))
    works = rng.lognormal(np.log(60.0), 1.0, size=n)
    alphas = rng.uniform(0.4, 1.0, size=n)
    return [
        TrialLoad(i, float(w), 1.0, capacity, power_law(float(a)))
        for i, (w, a) in enumerate(zip(works, alphas, strict=True))
    ]


def power_law(alpha: float):
    """Speed-up w**alpha: alpha 1 scales perfectly, smaller alphas less and less."""
    return lambda width: width**alpha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--capacity", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "packing.json"
    )
    args = parser.parse_args()
    if args.groups < 1:
        parser.error(f"--groups: expected 1 or more, got {args.groups}")
    if args.capacity < 1:  # every trial needs at least one unit
        parser.error(f"--capacity: expected 1 or more, got {args.capacity:g}")
    rng = np.random.default_rng(args.seed)
    ratios: dict[str, list[float]] = {"fluid": [], "fifo": []}
    utilisation: dict[str, list[float]] = {"fluid": [], "fifo": []}
    for _ in range(args.groups):
        group = random_group(rng, args.capacity)
        lb = lower_bound(group, args.capacity)
        for policy in ratios:
            result = simulate_group(group, args.capacity, policy)
            ratios[policy].append(result.makespan_s / lb)
            utilisation[policy].append(result.busy_area / (args.capacity * result.makespan_s))
    table = Table(
        title=f"makespan / lower bound, {args.groups} random groups, capacity {args.capacity:g}"
    )
    for column in ("policy", "median", "mean", "p90", "worst", "mean utilisation"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    rows = []
    for policy, values in ratios.items():
        row = {
            "policy": policy,
            "median": statistics.median(values),
            "mean": statistics.fmean(values),
            "p90": float(np.percentile(values, 90)),
            "worst": max(values),
            "mean_utilisation": statistics.fmean(utilisation[policy]),
        }
        rows.append(row)
        table.add_row(
            policy,
            *(f"{row[k]:.3f}" for k in ("median", "mean", "p90", "worst")),
            f"{100 * row['mean_utilisation']:.1f} %",
        )
    Console(width=120).print(table)
    fluid, fifo = rows
    print(
        f"fluid median {fluid['median']:.3f} (<= 1.2: {fluid['median'] <= 1.2}), "
        f"worst {fluid['worst']:.3f} (<= 2: {fluid['worst'] <= 2}), "
        f"fifo median {fifo['median']:.3f}"
    )
    write_results(
        args.out,
        "packing",
        {
            "groups": args.groups,
            "capacity": args.capacity,
            "seed": args.seed,
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
