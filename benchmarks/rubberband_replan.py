"""RubberBand re-planning, simulated: following a plan against planning the rest again at each barrier.

A plan is made from a profile; a real job runs slower or faster than the profile said (another
model version, a busier storage, a different driver). This runs one SHA job many times on a
virtual clock, with every trial `speed` times as long as the profile expects, two ways:

  * follow: the instance counts of the plan, as `basht run --plan` does;
  * re-plan: at each barrier, the remaining stages planned again (`basht.plan.replan`, as
    `basht run --plan --replan` does), from the time left before the deadline, the instances up
    and how long each has lived, and the speed the run has shown so far. The speed is measured,
    not told: the finished stages' times over what the profile expects of them with the counts
    the run used.

Each run draws its own stragglers and start-ups (the same draws for both ways). Per speed the
table gives, for both ways, the share of runs that met the deadline, the mean and 95th percentile
of the job's time over the deadline, and the mean bill; then the re-planned bill over the
followed one.

The profile is ILLUSTRATIVE, NOT A MEASUREMENT (`rubberband_plan.py`'s "poor scaling" profile of
an aws:p3.8xlarge). The job is SHA over 81 configurations, 1..81 epochs, eta 3; the deadline is
halfway between the fastest and the slowest static cluster of up to `--max-instances`, and the
plan meets it at p95.

    python benchmarks/rubberband_replan.py [--speeds 0.7 0.85 1 1.15 1.3] [--runs-per-speed 100]
        [--max-instances 8] [--sims 200] [--out FILE]
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
from rubberband_plan import illustrative_profile

from basht.energy.billing import job_cost_usd
from basht.plan import ShaJob, Simulator, plan_job, replan
from basht.plan.profile import Profile

JOB = ShaJob(81, 1, 81, 3)


def stage_s(
    profile: Profile,
    stage: int,
    ages: tuple[float, ...],
    rest: tuple[int, ...],
    max_instances: int,
    runs: int,
    seed: int,
) -> float:
    """Stage `stage`'s mean time from its barrier, with instances of `ages` up (oldest first)."""
    sim = Simulator(
        JOB,
        profile,
        runs=runs,
        seed=seed,
        max_instances=max_instances,
        from_stage=stage,
        live_s=ages,
    )
    return sim(rest).stage_end_s[0]


def execute(
    plan: tuple[int, ...],
    base: Profile,
    speed: float,
    deadline_s: float,
    *,
    path: int,
    again: bool,
    max_instances: int,
    sims: int,
) -> dict:
    """One run of the job, stage by stage on a virtual clock: its time, bill and the plan it used."""
    truth = base.scaled(speed)
    stages = len(JOB.stages)
    now, live, lives, launches = 0.0, [], [], 0  # live: launch times, oldest first
    plan, done, expected = list(plan), 0.0, 0.0
    for i in range(stages):
        ages = tuple(now - t for t in live)
        if again and i > 0:
            seen = replan(
                JOB,
                base,
                i,
                left_s=deadline_s - now,
                live_s=ages,
                speed=done / expected,
                current=tuple(plan[i:]),
                max_instances=max_instances,
                runs=sims,
            )
            plan[i:] = seen.plan
        rest, cap = tuple(plan[i:]), max_instances
        took = stage_s(truth, i, ages, rest, cap, 1, path * stages + i)  # this run's draws
        done += took
        expected += stage_s(base, i, ages, rest, cap, sims, 0)  # the profile's, of the same stage
        m = plan[i]
        lives += [now - t for t in live[m:]]  # released at the barrier, newest first
        live = live[:m]
        launches += max(0, m - len(live))
        live += [now] * (m - len(live))
        now += took
    lives += [now - t for t in live]
    bill = sum(job_cost_usd(base.price, life) for life in lives)
    return {
        "jct_s": now,
        "cost_usd": bill + launches * base.data_usd_per_instance,
        "met": now <= deadline_s,
        "plan": " ".join(map(str, plan)),
    }


def summarise(runs: list[dict], deadline_s: float) -> dict:
    over = [r["jct_s"] / deadline_s for r in runs]
    return {
        "met": sum(r["met"] for r in runs) / len(runs),
        "jct_over_deadline_mean": statistics.fmean(over),
        "jct_over_deadline_p95": float(np.quantile(over, 0.95)),
        "cost_usd_mean": statistics.fmean(r["cost_usd"] for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speeds", type=float, nargs="+", default=[0.7, 0.85, 1.0, 1.15, 1.3])
    parser.add_argument("--runs-per-speed", type=int, default=100)
    parser.add_argument("--max-instances", type=int, default=8)
    parser.add_argument("--sims", type=int, default=200, help="simulated runs per plan")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "rubberband_replan.json"
    )
    args = parser.parse_args()
    for option in ("runs_per_speed", "max_instances", "sims"):
        if getattr(args, option) < 1:
            flag = "--" + option.replace("_", "-")
            parser.error(f"{flag}: expected 1 or more, got {getattr(args, option)}")
    if min(args.speeds) <= 0:
        parser.error(f"--speeds: expected more than 0 each, got {min(args.speeds):g}")

    base = illustrative_profile("poor scaling")
    probe = Simulator(JOB, base, runs=args.sims, max_instances=args.max_instances)
    statics = [probe((m,) * len(JOB.stages)).jct_p95_s for m in range(1, args.max_instances + 1)]
    deadline = (min(statics) + max(statics)) / 2
    planned = plan_job(JOB, base, deadline, max_instances=args.max_instances, runs=args.sims)
    started = time.perf_counter()
    rows = []
    for speed in args.speeds:
        ways = {}
        for again in (False, True):
            runs = [
                execute(
                    planned.plan,
                    base,
                    speed,
                    deadline,
                    path=path,
                    again=again,
                    max_instances=args.max_instances,
                    sims=args.sims,
                )
                for path in range(args.runs_per_speed)
            ]
            ways["replan" if again else "follow"] = {**summarise(runs, deadline), "runs": runs}
        follow, again = ways["follow"], ways["replan"]
        rows.append(
            {
                "speed": speed,
                "follow": follow,
                "replan": again,
                "replan_over_follow_cost": again["cost_usd_mean"] / follow["cost_usd_mean"],
            }
        )
    wall = time.perf_counter() - started

    table = Table(
        title=f"SHA-81 on a plan of {' '.join(map(str, planned.plan))} ({base.price.instance}), "
        f"deadline {deadline / 60:.0f} min (p95); {args.runs_per_speed} runs per speed",
        title_justify="left",
    )
    for column in (
        "trials x profile",
        "follow: met",
        "follow: JCT/deadline mean, p95",
        "follow: USD",
        "re-plan: met",
        "re-plan: JCT/deadline mean, p95",
        "re-plan: USD",
        "re-plan/follow USD",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        cells = [f"{row['speed']:.2f}"]
        for way in ("follow", "replan"):
            w = row[way]
            cells += [
                f"{w['met']:.0%}",
                f"{w['jct_over_deadline_mean']:.2f}, {w['jct_over_deadline_p95']:.2f}",
                f"{w['cost_usd_mean']:.2f}",
            ]
        cells.append(f"{row['replan_over_follow_cost']:.2f}x")
        table.add_row(*cells)
    Console(width=180).print(table)
    print(
        "illustrative profile (not measured); simulated runs on a virtual clock; "
        f"{wall:.1f} s wall time"
    )
    write_results(
        args.out,
        "rubberband_replan",
        {
            "job": {"trials": JOB.trials, "min_budget": 1, "max_budget": 81, "eta": 3},
            "profile": base.source,
            "deadline_s": deadline,
            "plan": list(planned.plan),
            "plan_estimate": {
                "jct_s": planned.estimate.jct_s,
                "jct_p95_s": planned.estimate.jct_p95_s,
                "cost_usd": planned.estimate.cost_usd,
            },
            "max_instances": args.max_instances,
            "runs_per_speed": args.runs_per_speed,
            "wall_s": wall,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
