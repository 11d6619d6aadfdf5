"""Cumulative cost over 50 recurrences on Zeus's trace: Basht's BSO, Zeus's own, fixed batch sizes.

For each of the six workloads of the Zeus NSDI'23 trace (one GPU's power trace, Zeus's defaults for
each workload: target, max epochs, default batch size b0), and for each seed:

* default: always b0, no early stopping;
* best fixed: the one batch size that would have been cheapest over these recurrences (hindsight);
* Zeus: Zeus's legacy trace simulator with its `PruningGTSBatchSizeOptimizer`, run unmodified in
  the separate Zeus venv (zeus_legacy_sim.py), at the batch size's highest power limit;
* Basht: `basht bso` server (real HTTP on 127.0.0.1, SQLite) with a client that reports every
  epoch, as `BatchSizeOptimizer` and Zeus's client do, at the same power limit;
* Zeus + JIT power limit (information only): Zeus's full system, which also lowers the power limit;
  Basht does not tune power limits, so this is not a like-for-like column.

Cost = eta·energy + (1 − eta)·max_power·time in joules (shown in MJ), eta = 0.5, beta = 2. The same
seed drives the training-path draws and the bandit in both simulators. Prints a table and writes
JSON to benchmarks/results/bso_trace.json.

    python benchmarks/bso_trace.py [--gpu v100] [--recurrences 50] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402
from zeus_golden import run_zeus  # noqa: E402
from zeus_venv import ZEUS_VERSION, zeus_python  # noqa: E402

from basht.bso.embedded import serve_in_thread  # noqa: E402
from basht.bso.http import BSOClient  # noqa: E402
from basht.bso.simulate import best_fixed, simulate_fixed, simulate_server  # noqa: E402
from basht.bso.trace import WORKLOADS, TraceJob  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--recurrences", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--eta", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bso_trace.json")
    args = parser.parse_args()
    zeus = zeus_python("client")
    started = time.perf_counter()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="basht-bso-bench-") as tmp,
        serve_in_thread(f"sqlite:///{tmp}/bso.db") as url,
        BSOClient(url) as client,
    ):
        for name in WORKLOADS:
            trace = TraceJob(name, args.gpu)
            per_seed = []
            for seed in args.seeds:
                n = args.recurrences
                default = simulate_fixed(trace, trace.default_batch_size, n, seed, args.eta)
                best = best_fixed(trace, n, seed, args.eta)
                ours = simulate_server(trace, client, n, seed, args.eta, args.beta)
                legacy = run_zeus("zeus_legacy_sim.py", zeus, trace, seed, n, "--plo", "max")
                jit = run_zeus("zeus_legacy_sim.py", zeus, trace, seed, n, "--plo", "jit")
                per_seed.append(
                    {
                        "seed": seed,
                        "default": default.cost if default else None,
                        "best_fixed": best.cost if best else None,
                        "best_fixed_batch_size": best.runs[0].batch_size if best else None,
                        "basht": ours.cost,
                        "basht_runs": len(ours.runs),
                        "basht_batch_sizes": ours.batch_sizes,
                        "zeus": legacy.get("cost"),
                        "zeus_runs": len(legacy.get("runs", [])),  # type: ignore[arg-type]
                        "zeus_batch_sizes": [r["batch_size"] for r in legacy.get("runs", [])],  # type: ignore[union-attr]
                        "zeus_error": legacy.get("error"),
                        "zeus_jit": jit.get("cost"),
                        "zeus_jit_error": jit.get("error"),
                    }
                )
            rows.append(
                {
                    "workload": name,
                    "trace": trace.name,
                    "default_batch_size": trace.default_batch_size,
                    "batch_sizes": trace.batch_sizes,
                    "max_epochs": trace.workload.max_epochs,
                    "seeds": per_seed,
                }
            )
            print(f"{trace.name}: done", file=sys.stderr)
    wall_s = time.perf_counter() - started

    def mean(row: dict, key: str) -> float | None:
        values = [s[key] for s in row["seeds"]]
        return None if any(v is None for v in values) else statistics.fmean(values)

    table = Table(
        title=f"cumulative cost over {args.recurrences} recurrences, {args.gpu} trace, mean of "
        f"seeds {', '.join(map(str, args.seeds))} (MJ; eta {args.eta}, beta {args.beta})"
    )
    columns = (
        "workload",
        "b0",
        "default",
        "best fixed (bs)",
        f"Zeus {ZEUS_VERSION}",
        "Basht",
        "Basht / Zeus",
        "Basht / default",
        "Zeus+JIT PL (info)",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "workload" else "right")
    summary = []
    for row in rows:
        d, b, z, o, j = (
            mean(row, k) for k in ("default", "best_fixed", "zeus", "basht", "zeus_jit")
        )
        sizes = sorted({s["best_fixed_batch_size"] for s in row["seeds"]})
        fmt = lambda v: "error" if v is None else f"{v / 1e6:,.3f}"  # noqa: E731
        table.add_row(
            row["workload"],
            str(row["default_batch_size"]),
            fmt(d),
            f"{fmt(b)} ({'/'.join(map(str, sizes))})",
            fmt(z),
            fmt(o),
            "-" if z is None or o is None else f"{o / z:.3f}",
            "-" if d is None or o is None else f"{o / d:.3f}",
            fmt(j),
        )
        summary.append(
            {
                "workload": row["workload"],
                "default": d,
                "best_fixed": b,
                "zeus": z,
                "basht": o,
                "zeus_jit": j,
            }
        )
    Console().print(table)
    write_results(
        args.out,
        "bso_trace",
        {
            "gpu": args.gpu,
            "recurrences": args.recurrences,
            "seeds": args.seeds,
            "eta": args.eta,
            "beta": args.beta,
            "zeus": ZEUS_VERSION,
            "power_limit": "highest per batch size (Zeus+JIT column: Zeus's JIT optimizer)",
            "wall_s": wall_s,
            "summary_mean_cost_j": summary,
            "workloads": rows,
        },
    )


if __name__ == "__main__":
    main()
