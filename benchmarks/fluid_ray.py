"""Fluid against fifo on a two-node Ray cluster: examples/digits-asha.yaml, 3 seeds each.

The cluster is the tests' (`tests/ray_cluster.py`): a head and a worker node on 127.0.0.1, each
in a network namespace of its own (the worker node in a PID namespace of its own too), token
authentication on, here with `--cpus-per-node` CPUs each. It needs root and iproute2. Every run
is `basht run`'s lifecycle with a driver inside the namespace, `executor: ray` at the head's
address, and the example as it is but for `engine.scheduler` and `measure.energy: estimate`.
`fifo` gives each of the 2 workers one CPU in a placement group of its own; `fluid` reserves both
nodes whole, one worker on each, and plans thread counts per node (a trial alone on its node gets
every core of it). Reported per scheduler (medians over the seeds): JCT, time to target (run phase
start to the first validation accuracy >= the target), WR, the machine's measured CPU
utilisation over the run phase (the driver's power samples, the whole machine: other processes
on it count too) and the share of the cluster's CPUs the trials held (the executor's allocation
log: threads held over time, over all nodes' CPUs × the run phase).

    sudo python benchmarks/fluid_ray.py [--seeds 0 1 2] [--target 0.95] [--cpus-per-node 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for where in (HERE, ROOT):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

from _results import write_results  # noqa: E402

EXAMPLE = ROOT / "examples" / "digits-asha.yaml"
SCHEDULERS = ("fifo", "fluid")
KEYS = ("jct_s", "time_to_target_s", "wr_pct", "utilisation", "allocated", "test_accuracy")


def held_share(
    allocation: list[tuple[float, int, float]], start: float, end: float, cpus: float
) -> float | None:
    """∫ Σ widths dt over [start, end], over `cpus` × (end - start): the share of the cluster's
    CPUs the trials held."""
    if end <= start or cpus <= 0:
        return None
    widths: dict[int, float] = {}
    area, last = 0.0, start
    for at, trial, width in sorted(allocation):
        at = min(max(at, start), end)
        area += sum(widths.values()) * (at - last)
        last = at
        widths[trial] = width
    area += sum(widths.values()) * (end - last)
    return area / (cpus * (end - start))


def one_run(
    scheduler: str, seed: int, target: float, address: str, tmp: Path, trials: int | None
) -> dict[str, Any]:
    """One run, from inside the cluster's namespace."""
    from basht.bench import run_benchmark
    from basht.bench.native import NativeSystem
    from basht.experiment import Experiment
    from basht.store import Store

    spec = yaml.safe_load(EXAMPLE.read_text())
    store_url = f"sqlite:///{tmp}/{scheduler}-{seed}.db"
    spec.update(seed=seed, store=store_url, executor="ray", ray={"address": address})
    spec["engine"] = {"scheduler": scheduler}
    spec["measure"]["energy"] = "estimate"
    if trials is not None:  # a quick try of the script; the results use the example's
        spec["search"]["max_trials"] = trials
    held: dict[str, Any] = {}

    class Recording(NativeSystem):
        """The native system, keeping what the executor's trials held before it is shut down."""

        def undeploy(self) -> None:
            executor = self.executor
            if executor is not None:
                held["allocation"] = list(executor.allocation)  # type: ignore[attr-defined]
                held["cpus"] = sum(n.cpus for n in executor.nodes.alive())  # type: ignore[attr-defined]
            super().undeploy()

    result = run_benchmark(
        Experiment.from_dict(spec), results_root=tmp / "results", system_factory=Recording
    )
    store = Store(store_url)
    run_phase = next(p for p in store.phases(result.run_id) if p.name == "run")
    hits = [r.at for r in store.reports(result.run_id) if (r.value or 0) >= target]
    samples = [
        s.utilization
        for s in store.power_samples(result.run_id)
        if s.component == "cpu" and s.node == "local" and run_phase.start <= s.at <= run_phase.end
    ]
    return {
        "scheduler": scheduler,
        "seed": seed,
        "status": result.status,
        "jct_s": result.metrics["JCT"]["value"] / 1000,
        "time_to_target_s": (min(hits) - run_phase.start) if hits else None,
        "wr_pct": result.metrics["WR"]["value"],
        "utilisation": statistics.fmean(samples) if samples else None,
        "allocated": held_share(
            held.get("allocation", []), run_phase.start, run_phase.end, held.get("cpus", 0.0)
        ),
        "cluster_cpus": held.get("cpus"),
        "test_accuracy": result.test_metrics.get("accuracy"),
    }


def run_in_cluster(
    cluster: Any, scheduler: str, seed: int, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    out = tmp / f"{scheduler}-{seed}.json"
    trials = ["--trials", str(args.trials)] if args.trials else []
    driver = cluster.run(
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        scheduler,
        str(seed),
        "--address",
        cluster.address,
        "--target",
        str(args.target),
        "--tmp",
        str(tmp),
        *trials,
    )
    _, err = driver.communicate(timeout=1800)
    if driver.returncode != 0:
        raise SystemExit(f"{scheduler} seed {seed} failed:\n{err[-3000:]}")
    return json.loads(out.read_text())


def table(rows: list[dict[str, Any]], target: float, title: str) -> dict[str, dict]:
    def median(scheduler: str, key: str) -> float | None:
        values = [r[key] for r in rows if r["scheduler"] == scheduler and r[key] is not None]
        return statistics.median(values) if values else None

    summary = {s: {k: median(s, k) for k in KEYS} for s in SCHEDULERS}
    shown = Table(title=title)
    for column in (
        "scheduler",
        "JCT (s)",
        f"time to {target} (s)",
        "WR (%)",
        "CPU utilisation (machine)",
        "cluster CPUs held",
        "test accuracy",
    ):
        shown.add_column(column, justify="left" if column == "scheduler" else "right")
    for scheduler, s in summary.items():
        shown.add_row(
            scheduler,
            f"{s['jct_s']:.2f}",
            "-" if s["time_to_target_s"] is None else f"{s['time_to_target_s']:.2f}",
            f"{s['wr_pct']:.1f}",
            "-" if s["utilisation"] is None else f"{100 * s['utilisation']:.1f} %",
            "-" if s["allocated"] is None else f"{100 * s['allocated']:.1f} %",
            f"{s['test_accuracy']:.4f}",
        )
    Console(width=140).print(shown)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--cpus-per-node", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "fluid_ray.json")
    parser.add_argument("--one", nargs=2, metavar=("SCHEDULER", "SEED"), help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trials", type=int, help=argparse.SUPPRESS)  # a quick try only
    args = parser.parse_args()
    if args.one:  # inside the namespace: one run, its row to a file the caller reads
        scheduler, seed = args.one[0], int(args.one[1])
        row = one_run(scheduler, seed, args.target, args.address, args.tmp, args.trials)
        (args.tmp / f"{scheduler}-{seed}.json").write_text(json.dumps(row))
        return

    from tests.ray_cluster import two_node_cluster

    load_before = os.getloadavg()
    rows = []
    with two_node_cluster(cpus_per_node=args.cpus_per_node) as cluster:
        tmp = Path(tempfile.mkdtemp(prefix="fluid-ray-", dir=cluster.root))
        for seed in args.seeds:
            for scheduler in SCHEDULERS:
                rows.append(run_in_cluster(cluster, scheduler, seed, args, tmp))
    title = (
        f"digits-asha on 2 Ray nodes x {args.cpus_per_node} CPUs, fluid vs fifo, "
        f"{len(args.seeds)} seeds (medians)"
    )
    summary = table(rows, args.target, title)
    fifo, fluid = summary["fifo"], summary["fluid"]
    ratio = fluid["jct_s"] / fifo["jct_s"]
    held = {
        "jct_no_worse": fluid["jct_s"] <= fifo["jct_s"],
        "machine_utilisation_higher": (fluid["utilisation"] or 0) > (fifo["utilisation"] or 0),
        "cluster_cpus_held_higher": (fluid["allocated"] or 0) > (fifo["allocated"] or 0),
    }
    print(f"JCT fluid / fifo: {ratio:.3f}; target: {held}")
    write_results(
        args.out,
        "fluid_ray",
        {
            "target": args.target,
            "cpus_per_node": args.cpus_per_node,
            "cluster": (
                f"2 Ray nodes of {args.cpus_per_node} CPUs each on this one machine (network "
                "namespaces, the second node in a PID namespace of its own), "
                f"{2 * args.cpus_per_node} CPUs declared to Ray"
            ),
            "runs": rows,
            "medians": summary,
            "jct_ratio_fluid_over_fifo": ratio,
            "target_held": held,
        },
        machine_extra={"load_average_before": [round(x, 2) for x in load_before]},
    )


if __name__ == "__main__":
    main()
