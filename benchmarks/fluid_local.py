"""Fluid against fifo for real on this machine: examples/digits-asha.yaml, 3 seeds each.

Both run the same ASHA search on the same 2 worker processes; `fifo` keeps one thread per trial,
`fluid` re-plans thread counts out of the pool's cores whenever a trial starts or ends (a trial
running alone, such as the last one of a rung, gets every core). Reported per scheduler: JCT,
time-to-target (run phase start to the first validation accuracy >= the target), the share of
energy spent idle (WR) and the node's mean CPU utilisation over the run (power samples).

    python benchmarks/fluid_local.py [--seeds 0 1 2] [--target 0.95]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.bench import run_benchmark
from basht.experiment import load_experiment
from basht.store import Store

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits-asha.yaml"


def one_run(scheduler: str, seed: int, target: float, tmp: Path) -> dict:
    experiment = load_experiment(EXAMPLE)
    store_url = f"sqlite:///{tmp}/{scheduler}-{seed}.db"
    experiment = experiment.model_copy(
        update={
            "seed": seed,
            "store": store_url,
            "engine": experiment.engine.model_copy(update={"scheduler": scheduler}),
            "measure": experiment.measure.model_copy(update={"energy": "estimate"}),
        }
    )
    result = run_benchmark(experiment, results_root=tmp / "results")
    store = Store(store_url)
    run_phase = next(p for p in store.phases(result.run_id) if p.name == "run")
    hits = [r.at for r in store.reports(result.run_id) if (r.value or 0) >= target]
    samples = [
        s.utilization
        for s in store.power_samples(result.run_id)
        if s.component == "cpu" and run_phase.start <= s.at <= run_phase.end
    ]
    return {
        "scheduler": scheduler,
        "seed": seed,
        "jct_s": result.metrics["JCT"]["value"] / 1000,
        "time_to_target_s": (min(hits) - run_phase.start) if hits else None,
        "wr_pct": result.metrics["WR"]["value"],
        "utilisation": statistics.fmean(samples) if samples else None,
        "test_accuracy": result.test_metrics.get("accuracy"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "fluid_local.json"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for scheduler in ("fifo", "fluid"):
                rows.append(one_run(scheduler, seed, args.target, Path(tmp)))

    def median(scheduler: str, key: str) -> float | None:
        values = [r[key] for r in rows if r["scheduler"] == scheduler and r[key] is not None]
        return statistics.median(values) if values else None

    table = Table(title=f"digits-asha, fluid vs fifo, {len(args.seeds)} seeds (medians)")
    for column in (
        "scheduler",
        "JCT (s)",
        f"time to {args.target} (s)",
        "WR (%)",
        "CPU utilisation",
        "test accuracy",
    ):
        table.add_column(column, justify="left" if column == "scheduler" else "right")
    summary = {}
    for scheduler in ("fifo", "fluid"):
        summary[scheduler] = {
            k: median(scheduler, k)
            for k in ("jct_s", "time_to_target_s", "wr_pct", "utilisation", "test_accuracy")
        }
        s = summary[scheduler]
        table.add_row(
            scheduler,
            f"{s['jct_s']:.2f}",
            "-" if s["time_to_target_s"] is None else f"{s['time_to_target_s']:.2f}",
            f"{s['wr_pct']:.1f}",
            f"{100 * (s['utilisation'] or 0):.1f} %",
            f"{s['test_accuracy']:.4f}",
        )
    Console(width=120).print(table)
    ratio = summary["fluid"]["jct_s"] / summary["fifo"]["jct_s"]
    print(
        f"JCT fluid / fifo: {ratio:.3f}; WR fifo {summary['fifo']['wr_pct']:.1f} % -> "
        f"fluid {summary['fluid']['wr_pct']:.1f} %"
    )
    write_results(
        args.out,
        "fluid_local",
        {
            "target": args.target,
            "runs": rows,
            "medians": summary,
            "jct_ratio_fluid_over_fifo": ratio,
        },
    )


if __name__ == "__main__":
    main()
