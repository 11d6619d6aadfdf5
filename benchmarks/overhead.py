"""Engine overhead per trial: 1,000 trivial trials on 2 workers, against a bare process pool.

The trial does nothing (the `sleep` workload with no sleep), so the time is the engine's own:
dispatch to a worker, per-epoch report and command, the algorithm's decision, and every store
write (trial row, report, state). The bare `multiprocessing.Pool` running the same number of empty
tasks is the floor any process-based engine pays.

    python benchmarks/overhead.py [--trials 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.bench import run_benchmark
from basht.experiment import Experiment
from basht.store import Store


def _noop(i: int) -> int:
    return i


def bare_pool(trials: int, workers: int) -> float:
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_noop, range(workers))  # warm up: start-up is not per-trial overhead
        start = time.perf_counter()
        for _ in pool.imap_unordered(_noop, range(trials), chunksize=1):
            pass
        return time.perf_counter() - start


def basht_native(trials: int, workers: int, epochs: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/bench.db"
        experiment = Experiment.from_dict(
            {
                "name": "overhead",
                "workload": {"name": "sleep", "params": {"epoch_s": 0.0}},
                "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
                "search": {"max_budget": epochs, "max_trials": trials},
                "resources": {"workers": workers},
                "store": store,
            }
        )
        result = run_benchmark(experiment, results_root=Path(tmp) / "results")
        reports = len(Store(store).reports(result.run_id))
        return result.phases["run"], reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "overhead.json"
    )
    args = parser.parse_args()
    if args.trials < 1 or args.workers < 1:
        parser.error(
            f"--trials and --workers: expected 1 or more, got {args.trials}, {args.workers}"
        )

    rows = []
    floor_s = bare_pool(args.trials, args.workers)
    rows.append(("multiprocessing.Pool (floor)", floor_s, args.trials, 0))
    for epochs in (1, 3):
        wall_s, reports = basht_native(args.trials, args.workers, epochs)
        rows.append((f"basht native, {epochs} epoch(s)/trial", wall_s, args.trials, reports))

    table = Table(title=f"engine overhead, {args.trials} trivial trials, {args.workers} workers")
    for column in ("engine", "wall (s)", "trials/s", "ms/trial", "worker-ms/trial", "vs floor"):
        table.add_column(column, justify="right" if column != "engine" else "left")
    records = []
    for name, wall_s, n, reports in rows:
        per_trial_ms = wall_s / n * 1000
        record = {
            "engine": name,
            "wall_s": wall_s,
            "trials": n,
            "reports": reports,
            "trials_per_s": n / wall_s,
            "ms_per_trial": per_trial_ms,
            "worker_ms_per_trial": per_trial_ms * args.workers,
            "ratio_vs_floor": wall_s / floor_s,
        }
        records.append(record)
        table.add_row(
            name,
            f"{wall_s:.2f}",
            f"{record['trials_per_s']:.0f}",
            f"{per_trial_ms:.2f}",
            f"{record['worker_ms_per_trial']:.2f}",
            f"{record['ratio_vs_floor']:.1f}x",
        )
    Console(width=120).print(table)
    write_results(
        args.out,
        "overhead",
        {
            "workers": args.workers,
            "results": records,
        },
    )


if __name__ == "__main__":
    main()
