"""Run Zeus's own legacy trace simulator (zeus._legacy) and write its history as JSON.

Runs INSIDE the separate Zeus virtual environment (zeus needs pydantic 1), called as a subprocess
by `benchmarks/bso_trace.py` and `benchmarks/zeus_golden.py`; it imports nothing from Basht.

Zeus's batch size optimizer is `PruningGTSBatchSizeOptimizer(seed=seed)`, exactly as Zeus's
`run_single.py` builds it. The power limit optimizer is either Zeus's `JITPowerLimitOptimizer`
(`--plo jit`, Zeus's full system) or one that always answers the batch size's highest power limit
(`--plo max`), which is what Basht's simulator does: the same trace, the batch size the only knob.

    python zeus_legacy_sim.py --trace-dir DIR --dataset librispeech --network deepspeech2 \
        --optimizer adamw --target-metric 40 --max-epochs 16 --default-bs 192 --gpu v100 \
        --seed 1 --recurrences 50 --plo max --out result.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from zeus._legacy.job import Job
from zeus._legacy.policy import PowerLimitOptimizer
from zeus._legacy.policy.optimizer import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
from zeus._legacy.simulate import Simulator
from zeus.utils.metric import zeus_cost


class HighestPowerLimit(PowerLimitOptimizer):
    """Always the highest power limit measured for the batch size: no power capping."""

    def __init__(self, power_df: pd.DataFrame, job: Job) -> None:
        df = power_df.loc[
            (power_df.dataset == job.dataset)
            & (power_df.network == job.network)
            & (power_df.optimizer == job.optimizer)
        ]
        self.limits = df.groupby("batch_size").power_limit.max().to_dict()

    @property
    def name(self) -> str:
        return "HighestPowerLimit"

    def predict(self, job: Job, batch_size: int) -> int | None:
        return int(self.limits[batch_size])

    def observe(self, job: Job, batch_size: int, power_limit: int, cost: float) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--network", required=True)
    parser.add_argument("--optimizer", required=True)
    parser.add_argument("--target-metric", type=float, required=True)
    parser.add_argument("--max-epochs", type=int, required=True)
    parser.add_argument("--default-bs", type=int, required=True)
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recurrences", type=int, default=50)
    parser.add_argument("--eta", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=2.0)
    parser.add_argument("--plo", choices=["max", "jit"], default="max")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    train_df = pd.read_csv(args.trace_dir / "summary_train.csv")
    power_df = pd.read_csv(args.trace_dir / f"summary_power_{args.gpu}.csv")
    job = Job(
        args.dataset,
        args.network,
        args.optimizer,
        args.target_metric,
        args.max_epochs,
        args.default_bs,
    )
    plo = (
        JITPowerLimitOptimizer(verbose=False)
        if args.plo == "jit"
        else HighestPowerLimit(power_df, job)
    )
    bso = PruningGTSBatchSizeOptimizer(seed=args.seed, verbose=False)
    simulator = Simulator(train_df, power_df, bso, plo, seed=args.seed, verbose=False)
    max_power = simulator.df.power_limit.max().item()
    out: dict[str, object] = {"zeus_version": _zeus_version(), "plo": args.plo}
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # the legacy simulator prints even when not verbose
    try:
        history = simulator.simulate_one_job(job, args.recurrences, args.beta, args.eta)
        out["runs"] = [
            {
                "batch_size": int(h.bs),
                "power_limit": int(h.pl),
                "energy_j": float(h.energy),
                "time_s": float(h.time),
                "converged": bool(h.reached),
                "cost": float(zeus_cost(h.energy, h.time, args.eta, max_power)),
            }
            for h in history
        ]
        out["cost"] = sum(r["cost"] for r in out["runs"])  # type: ignore[index]
    except Exception as err:  # the legacy simulator gives up with RuntimeError; report it
        out["error"] = f"{type(err).__name__}: {err}"
    finally:
        sys.stdout = real_stdout
    args.out.write_text(json.dumps(out))


def _zeus_version() -> str:
    from importlib.metadata import version

    return version("zeus")


if __name__ == "__main__":
    main()
