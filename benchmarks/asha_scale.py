"""The ASHA paper's scaling experiment, simulated: time to reach a target with 1, 25 and 500 workers.

SHA, Hyperband, ASHA and asynchronous Hyperband (eta 3, budgets 1..81 epochs) run through the real
Tuner on the simulated executor: a virtual clock, N virtual workers, and a synthetic benchmark of
learning curves (`SyntheticCurve`: most configurations mediocre, a few good, curves that cross,
epoch times that vary by configuration). The trial limit grows with the workers (200 per worker,
100,000 at 500 workers) so each algorithm has the same number of configurations to work with.
Time-to-target is virtual: when the first validation value at or above the target is reported.
Wall time is real: what the simulation itself took on this machine.

    python benchmarks/asha_scale.py [--workers 1 25 500] [--target 0.93] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from basht.engine import SyntheticCurve
from basht.space import Float, Int, SearchSpace
from basht.tune import ASHA, SHA, AsyncHyperband, Hyperband
from basht.tune.simulate import simulate

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


def run_one(name: str, workers: int, trials: int, target: float, seed: int) -> dict:
    make = ALGORITHMS[name]
    algorithm = make(
        SPACE,
        metric="accuracy",
        mode="max",
        min_budget=1,
        max_budget=81,
        eta=3,
        seed=seed,
        max_trials=trials,
    )
    curve = SyntheticCurve(seed=seed)
    started = time.perf_counter()
    result = simulate(algorithm, workers, curve, seed=seed)
    wall_s = time.perf_counter() - started
    reached = next((t for t, v in result.trace if v >= target), None)
    return {
        "algorithm": name,
        "workers": workers,
        "trials": result.trials,
        "time_to_target_s": reached,
        "makespan_s": result.makespan_s,
        "best_value": result.best_value,
        "wall_s": wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 25, 500])
    parser.add_argument("--trials-per-worker", type=int, default=200)
    parser.add_argument("--target", type=float, default=0.93)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "asha_scale.json"
    )
    args = parser.parse_args()

    rows = []
    for workers in args.workers:
        trials = args.trials_per_worker * workers
        for name in ALGORITHMS:
            rows.append(run_one(name, workers, trials, args.target, args.seed))

    table = Table(
        title=f"time to accuracy >= {args.target} (virtual minutes), eta 3, budgets 1..81"
    )
    for column in (
        "workers",
        "trials",
        "algorithm",
        "time to target (min)",
        "vs ASHA",
        "best value",
        "makespan (min)",
        "real wall (s)",
    ):
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    for workers in args.workers:
        group = [r for r in rows if r["workers"] == workers]
        asha = next(r for r in group if r["algorithm"] == "ASHA")["time_to_target_s"]
        for r in group:
            ttt = r["time_to_target_s"]
            r["ratio_vs_asha"] = None if ttt is None or asha is None else ttt / asha
            table.add_row(
                str(workers),
                f"{r['trials']:,}",
                r["algorithm"],
                "never" if ttt is None else f"{ttt / 60:.2f}",
                "-" if r["ratio_vs_asha"] is None else f"{r['ratio_vs_asha']:.2f}x",
                f"{r['best_value']:.4f}",
                f"{r['makespan_s'] / 60:.1f}",
                f"{r['wall_s']:.2f}",
            )
        table.add_section()
    Console(width=140).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "asha_scale",
                "machine": {"python": platform.python_version()},
                "target": args.target,
                "seed": args.seed,
                "results": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
