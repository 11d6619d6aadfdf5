"""RubberBand plans on the console and as JSON: the stages, and the plan beside the best static."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.table import Table

from basht.plan import PlanResult, Profile, ShaJob


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def plan_tables(result: PlanResult, job: ShaJob, profile: Profile) -> Group:
    name = profile.price.instance
    kind = f"{name} instances" if name and name != "instance" else "instances"
    stages = Table(
        title=f"plan: {kind} ({profile.gpus_per_instance} GPUs each) per stage",
        title_justify="left",
        caption=f"profile: {profile.source or 'no source given'}",
        caption_justify="left",
    )
    for column in ("stage", "trials", "epochs each", "instances", "GPUs per trial", "waves"):
        stages.add_column(column, justify="right")
    for i, (stage, m, layout) in enumerate(
        zip(job.stages, result.plan, result.layouts, strict=True)
    ):
        stages.add_row(
            str(i), str(stage.trials), str(stage.epochs), str(m),
            str(layout.gpus_per_trial), str(layout.waves),
        )  # fmt: skip
    versus = Table(
        title=f"estimated over the simulated runs; deadline {_minutes(result.deadline_s)} min "
        f"({result.confidence} JCT must meet it)",
        title_justify="left",
    )
    for column in ("plan", "instances per stage", "JCT min", "JCT p95 min", "cost USD", "p95 USD"):
        versus.add_column(column, justify="right" if "USD" in column or "JCT" in column else "left")
    for name, plan, estimate in (
        ("RubberBand", result.plan, result.estimate),
        ("best static", result.static, result.static_estimate),
    ):
        versus.add_row(
            name,
            " ".join(map(str, plan)),
            _minutes(estimate.jct_s),
            _minutes(estimate.jct_p95_s),
            f"{estimate.cost_usd:.2f}",
            f"{estimate.cost_p95_usd:.2f}",
        )
    return Group(stages, versus)


def job_note(job: ShaJob, pruner: str) -> str | None:
    """Why the plan's job may differ from what `basht run` of the same file would run."""
    one_bracket = job.trials == job.bracket_size
    if pruner == "none":
        return (
            f"note: planned as {job.trials} trials each trained to {job.max_budget} (pruner none)"
        )
    if pruner == "sha" and one_bracket:
        return None
    return (
        f"note: planned as one synchronous SHA bracket of {job.trials} configurations over rungs "
        f"{', '.join(map(str, job.rungs))} (the file's pruner is {pruner})"
    )


def plan_summary(result: PlanResult) -> str:
    plans = f"{result.simulations} plan{'s' if result.simulations != 1 else ''} simulated"
    if result.plan == result.static:
        return f"the best static cluster is the cheapest plan found; {plans}"
    return (
        f"the plan costs {1 - 1 / result.saving:.0%} less than the best static cluster "
        f"(that one costs {result.saving:.2f}x as much); {plans}"
    )


def plan_json(result: PlanResult, job: ShaJob, profile: Profile) -> dict[str, Any]:
    return {
        "job": asdict(job) | {"stages": [asdict(s) for s in job.stages]},
        "instance": profile.price.describe(),
        "profile_source": profile.source,
        "deadline_s": result.deadline_s,
        "confidence": result.confidence,
        "plan": list(result.plan),
        "layouts": [asdict(layout) for layout in result.layouts],
        "estimate": asdict(result.estimate),
        "static_plan": list(result.static),
        "static_estimate": asdict(result.static_estimate),
        "static_over_plan_cost": result.saving,
        "plans_simulated": result.simulations,
    }
