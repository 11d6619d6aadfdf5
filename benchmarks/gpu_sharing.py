"""Sharing one GPU between trials (Fluid's packing): examples/digits-asha.yaml on one CUDA device.

The same ASHA search (32 trials, budgets 1..27 epochs) runs with 1, 2, 4 and 8 workers on the same
GPU, each worker holding an equal share of it (`engine.min_width` 1, 1/2, 1/4, 1/8). Small models
leave most of a GPU idle; packing several trials onto it is how Fluid raises its use. Reported
per worker count (medians over seeds): JCT, the run phase, the GPU's energy over the run and per
trial (NVML's counter: measured, not estimated), the GPU's mean power and the idle share WR.
Needs a CUDA GPU with NVML.

    python benchmarks/gpu_sharing.py [--workers 1 2 4 8] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.bench import run_benchmark
from basht.energy.monitor import J_PER_KWH
from basht.experiment import load_experiment
from basht.store import Store

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits-asha.yaml"


def one_run(workers: int, seed: int, device: str, tmp: Path) -> dict:
    experiment = load_experiment(EXAMPLE)
    store_url = f"sqlite:///{tmp}/w{workers}-s{seed}.db"
    experiment = experiment.model_copy(
        update={
            "seed": seed,
            "store": store_url,
            "resources": experiment.resources.model_copy(
                update={"accelerator": "gpu", "devices": [device], "workers": workers}
            ),
            "engine": experiment.engine.model_copy(
                update={"scheduler": "fluid", "min_width": 1.0 / workers}
            ),
        }
    )
    result = run_benchmark(experiment, results_root=tmp / "results")
    store = Store(store_url)
    run_phase = next(p for p in store.phases(result.run_id) if p.name == "run")
    gpu = [a for a in store.energy_accounts(result.run_id) if a.component.startswith("gpu:")]
    assert gpu and {a.source for a in gpu} == {"nvml"}, "no NVML reading of the GPU"
    gpu_j = sum(a.energy_j for a in gpu)
    trials = len(store.trials(result.run_id))
    watts = [
        s.power_w
        for s in store.power_samples(result.run_id)
        if s.component.startswith("gpu:") and s.power_w is not None
        if run_phase.start <= s.at <= run_phase.end
    ]
    return {
        "workers": workers,
        "seed": seed,
        "jct_s": result.metrics["JCT"]["value"] / 1000,
        "run_s": run_phase.duration_s,
        "gpu_kwh": gpu_j / J_PER_KWH,
        "gpu_j_per_trial": gpu_j / trials,
        "gpu_trial_j": sum(a.energy_j for a in gpu if a.kind == "trial"),
        "gpu_mean_w": statistics.fmean(watts) if watts else None,
        "wr_pct": result.metrics["WR"]["value"],
        "test_accuracy": result.test_metrics.get("accuracy"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "gpu_sharing.json"
    )
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("gpu_sharing needs torch with CUDA")
    if not torch.cuda.is_available():
        sys.exit("gpu_sharing needs a CUDA GPU; this machine has none")
    gpu_name = torch.cuda.get_device_name(torch.device(args.device))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for workers in args.workers:
                rows.append(one_run(workers, seed, args.device, Path(tmp)))

    keys = ("jct_s", "run_s", "gpu_kwh", "gpu_j_per_trial", "gpu_mean_w", "wr_pct")
    medians = {
        w: {
            k: statistics.median(r[k] for r in rows if r["workers"] == w and r[k] is not None)
            for k in (*keys, "test_accuracy")
        }
        for w in args.workers
    }
    base = medians[args.workers[0]]
    table = Table(title=f"digits-asha on one {gpu_name}, {len(args.seeds)} seeds (medians)")
    for column in (
        "workers (share)",
        "JCT (s)",
        "run (s)",
        "GPU J / trial",
        "GPU mean W",
        "WR (%)",
        "run time vs 1",
        "GPU J / trial vs 1",
        "test accuracy",
    ):
        table.add_column(column, justify="left" if column.startswith("workers") else "right")
    for w in args.workers:
        m = medians[w]
        table.add_row(
            f"{w} (1/{w})",
            f"{m['jct_s']:.1f}",
            f"{m['run_s']:.1f}",
            f"{m['gpu_j_per_trial']:.0f}",
            f"{m['gpu_mean_w']:.0f}",
            f"{m['wr_pct']:.1f}",
            f"{m['run_s'] / base['run_s']:.2f}x",
            f"{m['gpu_j_per_trial'] / base['gpu_j_per_trial']:.2f}x",
            f"{m['test_accuracy']:.3f}",
        )
    Console(width=140).print(table)
    write_results(
        args.out,
        "gpu_sharing",
        {
            "runs": rows,
            "medians": {str(w): m for w, m in medians.items()},
        },
        machine_extra={"gpu": gpu_name, "torch": torch.__version__},
    )


if __name__ == "__main__":
    main()
