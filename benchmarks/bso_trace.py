"""Cumulative cost over 50 recurrences on Zeus's trace: Basht's BSO with and without power limits,
Zeus's own optimizer with and without its JIT power limit optimizer, fixed batch sizes.

For each of the six workloads of the Zeus NSDI'23 trace (one GPU's power trace, Zeus's defaults for
each workload: target, max epochs, default batch size b0), and for each seed:

* default: always b0 at its highest power limit, no early stopping;
* best fixed: the one batch size that would have been cheapest over these recurrences (hindsight);
* Zeus: Zeus's legacy trace simulator with its `PruningGTSBatchSizeOptimizer`, run unmodified in
  the separate Zeus venv (zeus_legacy_sim.py), at the batch size's highest power limit;
* Zeus + JIT PL: the same with Zeus's `JITPowerLimitOptimizer` (Zeus's full system);
* Basht: `basht bso serve` (real HTTP on 127.0.0.1, SQLite) with a client that reports every epoch,
  as `BatchSizeOptimizer` and Zeus's client do, at the batch size's highest power limit;
* Basht + PL: the same job registered with `optimize_power_limit`: a batch size's first run
  profiles the trace's power limits during its first epoch, priced as Zeus's simulator prices its
  JIT profile, and later runs of that size train at the limit the server chose.

Cost = eta·energy + (1 − eta)·max_power·time in joules (shown in MJ), eta = 0.5, beta = 2, every
knob at Zeus's default. The same seed drives the training-path draws and the bandit in both
simulators. The target: Basht's mean cost at most Zeus's, and Basht + PL's at most Zeus + JIT PL's,
on every workload. Prints a table and writes JSON to benchmarks/results/bso_trace.json.

    python benchmarks/bso_trace.py [--gpu v100] [--recurrences 50] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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

POLICIES = ("default", "best_fixed", "zeus", "zeus_jit", "basht", "basht_pl")
ROUNDING = 1e-9
"""Relative slack for "at most": the same runs priced by the two simulators differ in the last
bits (Basht adds epochs one by one, Zeus multiplies an epoch by their number)."""


def one_seed(trace: TraceJob, client: BSOClient, zeus: Path, seed: int, args: Any) -> dict:
    """Every policy on one seed of one workload."""
    n = args.recurrences
    default = simulate_fixed(trace, trace.default_batch_size, n, seed, args.eta)
    best = best_fixed(trace, n, seed, args.eta)
    ours = simulate_server(trace, client, n, seed, args.eta, args.beta)
    ours_pl = simulate_server(trace, client, n, seed, args.eta, args.beta, power_limits=True)
    legacy = run_zeus("zeus_legacy_sim.py", zeus, trace, seed, n, "--plo", "max")
    jit = run_zeus("zeus_legacy_sim.py", zeus, trace, seed, n, "--plo", "jit")
    return {
        "seed": seed,
        "default": default.cost if default else None,
        "best_fixed": best.cost if best else None,
        "best_fixed_batch_size": best.runs[0].batch_size if best else None,
        "basht": ours.cost,
        "basht_runs": len(ours.runs),
        "basht_batch_sizes": ours.batch_sizes,
        "basht_pl": ours_pl.cost,
        "basht_pl_runs": len(ours_pl.runs),
        "basht_pl_knobs": [[r.batch_size, r.power_limit_w] for r in ours_pl.runs],
        "zeus": legacy.get("cost"),
        "zeus_runs": len(legacy.get("runs", [])),  # type: ignore[arg-type]
        "zeus_batch_sizes": [r["batch_size"] for r in legacy.get("runs", [])],  # type: ignore[union-attr]
        "zeus_error": legacy.get("error"),
        "zeus_jit": jit.get("cost"),
        "zeus_jit_runs": len(jit.get("runs", [])),  # type: ignore[arg-type]
        "zeus_jit_knobs": [[r["batch_size"], r["power_limit"]] for r in jit.get("runs", [])],  # type: ignore[union-attr]
        "zeus_jit_error": jit.get("error"),
    }


def mean(row: dict, key: str) -> float | None:
    values = [s[key] for s in row["seeds"]]
    return None if any(v is None for v in values) else statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--recurrences", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)))
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
            per_seed = [one_seed(trace, client, zeus, seed, args) for seed in args.seeds]
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

    table = Table(
        title=f"cumulative cost over {args.recurrences} recurrences, {args.gpu} trace, mean of "
        f"{len(args.seeds)} seeds (MJ; eta {args.eta}, beta {args.beta})"
    )
    columns = (
        "workload",
        "default",
        "best fixed (bs)",
        f"Zeus {ZEUS_VERSION}",
        "Basht",
        "Basht / Zeus",
        "Zeus + JIT PL",
        "Basht + PL",
        "Basht+PL / Zeus+JIT",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "workload" else "right")
    summary = []
    for row in rows:
        m = {key: mean(row, key) for key in POLICIES}
        sizes = sorted({s["best_fixed_batch_size"] for s in row["seeds"]})
        fmt = lambda v: "error" if v is None else f"{v / 1e6:,.3f}"  # noqa: E731
        ratio = lambda a, b: None if a is None or b is None else a / b  # noqa: E731
        vs_zeus, vs_jit = ratio(m["basht"], m["zeus"]), ratio(m["basht_pl"], m["zeus_jit"])
        table.add_row(
            row["workload"],
            fmt(m["default"]),
            f"{fmt(m['best_fixed'])} ({'/'.join(map(str, sizes))})",
            fmt(m["zeus"]),
            fmt(m["basht"]),
            "-" if vs_zeus is None else f"{vs_zeus:.4f}",
            fmt(m["zeus_jit"]),
            fmt(m["basht_pl"]),
            "-" if vs_jit is None else f"{vs_jit:.4f}",
        )
        summary.append(
            {
                "workload": row["workload"],
                **m,
                "basht_vs_zeus": vs_zeus,
                "basht_pl_vs_zeus_jit": vs_jit,
                "target_met": vs_zeus is not None
                and vs_jit is not None
                and vs_zeus <= 1.0 + ROUNDING
                and vs_jit <= 1.0 + ROUNDING,
            }
        )
    Console(width=160).print(table)
    held = all(s["target_met"] for s in summary)
    print(f"target (Basht <= Zeus and Basht+PL <= Zeus+JIT on every workload): {held}")
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
            "power_limit": "Zeus and Basht: highest per batch size; Zeus + JIT PL and Basht + PL: "
            "profiled in a batch size's first epoch, then the cheapest",
            "target_met": held,
            "wall_s": wall_s,
            "summary_mean_cost_j": summary,
            "workloads": rows,
        },
    )


if __name__ == "__main__":
    main()
