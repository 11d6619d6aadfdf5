"""RubberBand planner, simulated: elastic plans against static clusters and the optimum.

For a synchronous successive-halving job and a deadline, `basht.plan` searches per-stage
instance counts: RubberBand's greedy (EuroSys'21), starting from the cheapest static cluster that
meets the deadline, then moves of two stages at once (`pair_moves`), and keeps the cheapest plan
that search finds at any deadline up to the one given (`cheapest`, what `basht plan` runs: a
later deadline never gets a dearer plan). This sweeps deadlines from tight to loose and reports,
as the paper does:

  * static/planner: the best static plan's expected cost over the planner's (the paper's
    headline: elastic plans up to 2x cheaper than static allocation);
  * greedy/optimum and planner/optimum: the greedy's plan and the planner's against the cheapest
    plan of all, found by brute force (max_instances ** stages plans), for the small job only;
    the large job's plan space is too big and brute force is skipped there (planner/greedy is
    given instead);
  * the plans the planner's searches simulated (the greedy's are among them), and their wall
    time;
  * planner/auto: the planner's cost over the cheaper of it and the plan made with
    pre-provisioning (each stage's new instances requested before its barrier, when the stage
    before should end less the mean start-up), as `basht plan --preprovision auto` chooses.

Jobs: ShaJob(27, 1, 27, 3) (4 stages, up to 7 instances: 2401 plans) and ShaJob(81, 1, 81, 3)
(5 stages, up to 21 instances). Deadlines: evenly spaced between the fastest and the slowest
static plan's JCT (at the chosen confidence), so every deadline is feasible.

The profiles are ILLUSTRATIVE INPUTS, NOT MEASUREMENTS: aws:p3.8xlarge (4 GPUs, price sheet),
~300 s per epoch on one GPU with a straggler tail (a few epochs 1.15x to 1.6x the median),
start-up 90 to 180 s; "good scaling" is near-linear over GPUs (b ~ 0.95 in t(k) = t(1)·k^-b),
"poor scaling" is sublinear (b ~ 0.55), where elasticity should matter most.

    python benchmarks/rubberband_plan.py [--runs 200] [--seed 0] [--confidence p95]
        [--deadlines 8] [--small-max-instances 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.plan import ShaJob
from basht.plan.planner import (
    CONFIDENCE,
    best_static,
    brute_force,
    cheapest,
    default_max_instances,
    greedy,
)
from basht.plan.profile import Profile, profile_from_dict
from basht.plan.simulator import Plan, Simulator

#: Per-epoch spread around the median: mostly within a few percent, then a straggler tail.
SPREAD = (0.96, 0.97, 0.98, 0.99, 0.99, 1.0, 1.0, 1.0, 1.01, 1.01, 1.02, 1.03, 1.05, 1.08)
TAIL = (1.15, 1.3, 1.6)
STARTUP_S = [90.0, 100.0, 115.0, 125.0, 140.0, 150.0, 165.0, 180.0]
#: A whole instance's watts, idle and all 4 GPUs busy (illustrative, as examples/plan/).
POWER_W = {"idle": 410.0, "busy": 1450.0}

#: Median seconds per epoch of one trial at 1, 2 and 4 GPUs (illustrative, not measured).
SCALING = {
    "good scaling": {1: 300.0, 2: 155.0, 4: 80.0},  # b ~ 0.95
    "poor scaling": {1: 300.0, 2: 205.0, 4: 140.0},  # b ~ 0.55
}


def illustrative_profile(name: str) -> Profile:
    return profile_from_dict(
        {
            "instance": "aws:p3.8xlarge",
            "epoch_s": {
                gpus: [round(median * f, 1) for f in SPREAD + TAIL]
                for gpus, median in SCALING[name].items()
            },
            "startup_s": STARTUP_S,
            "power_w": POWER_W,
            "source": f"illustrative profile ({name}), not a measurement",
        }
    )


def jct(sim: Simulator, plan: Plan, confidence: str) -> float:
    estimate = sim(plan)
    return estimate.jct_p95_s if confidence == "p95" else estimate.jct_s


def show(plan: Plan | None) -> str:
    return "-" if plan is None else "(" + ",".join(map(str, plan)) + ")"


def sweep(
    label: str,
    job: ShaJob,
    name: str,
    max_instances: int,
    brute: bool,
    args: argparse.Namespace,
) -> list[dict]:
    profile = illustrative_profile(name)

    def simulator() -> Simulator:
        return Simulator(job, profile, runs=args.runs, seed=args.seed, max_instances=max_instances)

    probe = simulator()
    statics = [
        jct(probe, (m,) * len(job.stages), args.confidence) for m in range(1, max_instances + 1)
    ]
    deadlines = np.linspace(min(statics), max(statics), args.deadlines)
    rows = []
    for deadline in deadlines:
        deadline = float(deadline)
        sim = simulator()  # fresh: counts this deadline's simulations only
        start = time.perf_counter()
        plan = cheapest(sim, deadline, args.confidence)  # what `basht plan` runs
        planner_wall, planner_calls = time.perf_counter() - start, sim.calls
        assert plan is not None, f"{label} {name}: deadline {deadline:.0f} s infeasible"
        static = best_static(sim, deadline, args.confidence)
        assert static is not None, f"{label} {name}: no static plan meets {deadline:.0f} s"
        single = greedy(sim, static, deadline, args.confidence)
        optimum, brute_calls, brute_wall = None, None, None
        if brute:
            bsim = simulator()
            start = time.perf_counter()
            optimum = brute_force(bsim, deadline, args.confidence)
            brute_wall, brute_calls = time.perf_counter() - start, bsim.calls
        cost_static, cost_greedy = sim(static).cost_usd, sim(single).cost_usd
        cost_planner = sim(plan).cost_usd
        ahead = Simulator(
            job,
            profile,
            runs=args.runs,
            seed=args.seed,
            max_instances=max_instances,
            preprovision=True,
        )
        ahead_plan = cheapest(ahead, deadline, args.confidence)
        assert ahead_plan is not None
        cost_ahead = ahead(ahead_plan).cost_usd
        cost_optimum = None if optimum is None else bsim(optimum).cost_usd
        rows.append(
            {
                "job": label,
                "stages": [[s.trials, s.epochs] for s in job.stages],
                "profile": name,
                "max_instances": max_instances,
                "deadline_s": deadline,
                "static_plan": list(static),
                "greedy_plan": list(single),
                "planner_plan": list(plan),
                "optimum_plan": None if optimum is None else list(optimum),
                "cost_static_usd": cost_static,
                "cost_greedy_usd": cost_greedy,
                "cost_planner_usd": cost_planner,
                "cost_optimum_usd": cost_optimum,
                "jct_static_s": jct(sim, static, args.confidence),
                "jct_planner_s": jct(sim, plan, args.confidence),
                "static_over_planner": cost_static / cost_planner,
                "energy_static_kwh": sim(static).energy_kwh,
                "energy_planner_kwh": sim(plan).energy_kwh,
                "static_over_planner_energy": sim(static).energy_kwh / sim(plan).energy_kwh,
                "planner_over_greedy": cost_planner / cost_greedy,
                "greedy_over_optimum": None if optimum is None else cost_greedy / cost_optimum,
                "planner_over_optimum": None if optimum is None else cost_planner / cost_optimum,
                "preprovision_plan": list(ahead_plan),
                "cost_preprovision_usd": cost_ahead,
                "planner_over_auto": cost_planner / min(cost_planner, cost_ahead),
                "plans_planner": planner_calls,
                "plans_brute": brute_calls,
                "wall_planner_s": planner_wall,
                "wall_brute_s": brute_wall,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", choices=CONFIDENCE, default="p95")
    parser.add_argument("--deadlines", type=int, default=8)
    parser.add_argument("--small-max-instances", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rubberband_plan.json"
    )
    args = parser.parse_args()
    for option in ("runs", "deadlines", "small_max_instances"):
        if getattr(args, option) < 1:
            flag = "--" + option.replace("_", "-")
            parser.error(f"{flag}: expected 1 or more, got {getattr(args, option)}")

    small, large = ShaJob(27, 1, 27, 3), ShaJob(81, 1, 81, 3)
    large_cap = default_max_instances(large, illustrative_profile("good scaling"))
    rows = []
    for label, job, cap, brute in (
        ("sha-27", small, args.small_max_instances, True),
        ("sha-81", large, large_cap, False),
    ):
        for name in SCALING:
            rows.extend(sweep(label, job, name, cap, brute, args))

    table = Table(
        title=f"RubberBand planner (greedy, then pair moves) vs greedy alone, best static and "
        f"brute-force optimum ({args.confidence} JCT <= deadline, {args.runs} runs, illustrative "
        "profiles)",
        caption="sha-27: ShaJob(27,1,27,3), <= "
        f"{args.small_max_instances} instances; sha-81: ShaJob(81,1,81,3), <= {large_cap} "
        "instances, brute force skipped (plan space too large). Plans: instances per stage.",
    )
    columns = (
        "job",
        "profile",
        "deadline (min)",
        "static plan",
        "planner plan",
        "cost static $",
        "cost planner $",
        "static/planner",
        "greedy/optimum",
        "planner/optimum",
        "planner/auto",
        "plans (planner, brute)",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:2] else "right")
    for row in rows:
        brute = row["plans_brute"] is not None
        table.add_row(
            row["job"],
            row["profile"],
            f"{row['deadline_s'] / 60:.1f}",
            show(tuple(row["static_plan"])),
            show(tuple(row["planner_plan"])),
            f"{row['cost_static_usd']:.2f}",
            f"{row['cost_planner_usd']:.2f}",
            f"{row['static_over_planner']:.2f}x",
            f"{row['greedy_over_optimum']:.3f}x" if brute else "skipped",
            f"{row['planner_over_optimum']:.3f}x"
            if brute
            else f"{row['planner_over_greedy']:.3f}x of greedy",
            f"{row['planner_over_auto']:.3f}x",
            f"{row['plans_planner']}, {row['plans_brute'] if brute else 'skipped'}",
        )
    Console(width=200).print(table)

    savings = [r["static_over_planner"] for r in rows]
    greedy_gaps = [r["greedy_over_optimum"] for r in rows if r["greedy_over_optimum"] is not None]
    gaps = [r["planner_over_optimum"] for r in rows if r["planner_over_optimum"] is not None]
    summary = {
        "static_over_planner_max": max(savings),
        "static_over_planner_median": statistics.median(savings),
        "static_over_planner_max_by_profile": {
            name: max(r["static_over_planner"] for r in rows if r["profile"] == name)
            for name in SCALING
        },
        "greedy_over_optimum_max": max(greedy_gaps),
        "greedy_optimal_rows": sum(g <= 1 + 1e-9 for g in greedy_gaps),
        "planner_over_optimum_max": max(gaps),
        "planner_optimal_rows": sum(g <= 1 + 1e-9 for g in gaps),
        "brute_rows": len(gaps),
        "planner_over_greedy_min": min(r["planner_over_greedy"] for r in rows),
        "planner_never_costlier_than_greedy": all(
            r["cost_planner_usd"] <= r["cost_greedy_usd"] + 1e-9 for r in rows
        ),
        "planner_never_cheaper_than_optimum": all(g >= 1 - 1e-9 for g in gaps),
        "planner_over_auto_max": max(r["planner_over_auto"] for r in rows),
        "preprovision_chosen_rows": sum(r["planner_over_auto"] > 1 + 1e-9 for r in rows),
        "rows": len(rows),
        "static_over_planner_energy_median": statistics.median(
            r["static_over_planner_energy"] for r in rows
        ),
        "static_over_planner_energy_max": max(r["static_over_planner_energy"] for r in rows),
        "plans_planner_max": max(r["plans_planner"] for r in rows),
        "wall_planner_s_max": max(r["wall_planner_s"] for r in rows),
    }
    print(
        f"static/planner: max {summary['static_over_planner_max']:.2f}x, median "
        f"{summary['static_over_planner_median']:.2f}x; optimal in "
        f"{summary['planner_optimal_rows']}/{summary['brute_rows']} (greedy alone "
        f"{summary['greedy_optimal_rows']}/{summary['brute_rows']}, max "
        f"{summary['greedy_over_optimum_max']:.3f}x the optimum; planner max "
        f"{summary['planner_over_optimum_max']:.3f}x); planner/greedy down to "
        f"{summary['planner_over_greedy_min']:.3f}x; pre-provisioning cheaper in "
        f"{summary['preprovision_chosen_rows']}/{summary['rows']} (max "
        f"{summary['planner_over_auto_max']:.3f}x); at most {summary['plans_planner_max']} plans, "
        f"{summary['wall_planner_s_max']:.2f} s per search; energy (estimate, by the cost "
        f"plan): static/planner median {summary['static_over_planner_energy_median']:.2f}x, "
        f"max {summary['static_over_planner_energy_max']:.2f}x"
    )
    write_results(
        args.out,
        "rubberband_plan",
        {
            "note": "illustrative profiles (aws:p3.8xlarge price; epoch and start-up times "
            "made up to show sublinear scaling and stragglers), not measurements",
            "profiles": {
                name: {
                    "instance": "aws:p3.8xlarge",
                    "epoch_s_median": SCALING[name],
                    "exponent_b": illustrative_profile(name).exponent,
                    "epoch_spread": list(SPREAD + TAIL),
                    "startup_s": STARTUP_S,
                    "power_w": POWER_W,
                }
                for name in SCALING
            },
            "runs": args.runs,
            "seed": args.seed,
            "confidence": args.confidence,
            "deadlines": args.deadlines,
            "summary": summary,
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
