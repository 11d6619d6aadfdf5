"""RubberBand plans on the console and as JSON: the stages, and the plan beside the best static."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.table import Table

from basht.energy.billing import instance_lifetimes, job_cost_usd
from basht.energy.carbon import CarbonIntensity, StaticIntensity, TableIntensity
from basht.energy.pricing import Price, plan_price
from basht.experiment import CarbonSpec, PlanSpec, ShaJob
from basht.plan import PlanResult, Profile
from basht.store import Store


def _data_note(usd: float) -> str:
    return f"; costs include {usd:.4g} USD of data movement per instance launched" if usd else ""


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def plan_tables(result: PlanResult, job: ShaJob, profile: Profile) -> Group:
    name = profile.price.instance
    kind = f"{name} instances" if name and name != "instance" else "instances"
    stages = Table(
        title=f"plan: {kind} ({profile.gpus_per_instance} GPUs each) per stage",
        title_justify="left",
        caption=f"profile: {profile.source or 'no source given'}"
        + _data_note(profile.data_usd_per_instance),
        caption_justify="left",
    )
    columns = (
        "stage",
        "trials",
        "epochs each",
        "instances",
        "GPUs per trial",
        "waves",
        "mean end, min",
    )
    carbon = _stage_carbon(result)
    if carbon:  # on a grid: when each stage starts, the wait before it, what it emits
        columns = (*columns, "wait, min", "start, min", "gCO2eq")
    for column in columns:
        stages.add_column(column, justify="right")
    ends = result.estimate.stage_end_s or (None,) * len(result.plan)
    for i, (stage, m, layout, end) in enumerate(
        zip(job.stages, result.plan, result.layouts, ends, strict=True)
    ):
        cells = [
            str(i), str(stage.trials), str(stage.epochs), str(m),
            str(layout.gpus_per_trial), str(layout.waves), "-" if end is None else _minutes(end),
        ]  # fmt: skip
        if carbon:
            row = carbon[i]
            cells += [
                _minutes(row["delay_s"]),
                _minutes(row["start_s"]),
                f"{row['emissions_g']:.3g}",
            ]
        stages.add_row(*cells)
    versus = Table(
        title=f"estimated over the simulated runs; deadline {_minutes(result.deadline_s)} min "
        f"({result.confidence} JCT must meet it)",
        title_justify="left",
    )
    energy = result.estimate.energy_kwh is not None
    columns = ["plan", "instances per stage", "JCT min", "JCT p95 min", "cost USD", "p95 USD"]
    if energy:
        columns.append("kWh (est.)")
    rows = [
        ("RubberBand", result.plan, result.estimate),
        ("best static", result.static, result.static_estimate),
    ]
    if result.carbon is not None:
        columns.append("gCO2eq")
        rows.append(("carbon-agnostic", result.carbon.agnostic, result.carbon.agnostic_estimate))
    for column in columns:
        versus.add_column(column, justify="left" if column in columns[:2] else "right")
    for name, plan, estimate in rows:
        cells = [
            name,
            " ".join(map(str, plan)),
            _minutes(estimate.jct_s),
            _minutes(estimate.jct_p95_s),
            f"{estimate.cost_usd:.2f}",
            f"{estimate.cost_p95_usd:.2f}",
        ]
        if energy:
            cells.append(f"{estimate.energy_kwh:.3g}")
        if result.carbon is not None:
            cells.append(f"{estimate.emissions_g:.4g}")
        versus.add_row(*cells)
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


def _stage_carbon(result: PlanResult) -> list[dict[str, Any]]:
    """Each stage on the grid: when it starts (plan seconds and UTC), the wait before it and
    its emissions; empty for a plan not placed on a grid."""
    carbon, estimate = result.carbon, result.estimate
    if carbon is None or not estimate.stage_emissions_g:
        return []
    delays = estimate.delays_s or (0.0,) * len(result.plan)
    return [
        {
            "stage": i,
            "start_s": start,
            "start": carbon.grid.at(start),
            "delay_s": delay,
            "end_s": end,
            "energy_kwh": kwh,
            "emissions_g": grams,
        }
        for i, (start, delay, end, kwh, grams) in enumerate(
            zip(
                estimate.stage_start_s,
                delays,
                estimate.stage_end_s,
                estimate.stage_energy_kwh,
                estimate.stage_emissions_g,
                strict=True,
            )
        )
    ]


def carbon_summary(result: PlanResult) -> dict[str, Any] | None:
    """The plan on its grid, for the plan file (`carbon`, which `basht run --plan` does not
    read): each stage's start, wait and emissions, and the carbon-agnostic plan's emissions."""
    carbon = result.carbon
    if carbon is None:
        return None
    agnostic = carbon.agnostic_estimate
    return {
        "objective": result.objective,
        "intensity": carbon.grid.describe(),
        "start": carbon.grid.at(0.0),
        "step_s": carbon.grid.step_s,
        "emissions_g": result.estimate.emissions_g,
        "stages": _stage_carbon(result),
        "at_once_g": carbon.at_once.emissions_g,
        "agnostic": {
            "plan": list(carbon.agnostic),
            "jct_s": agnostic.jct_s,
            "cost_usd": agnostic.cost_usd,
            "energy_kwh": agnostic.energy_kwh,
            "emissions_g": agnostic.emissions_g,
        },
        "note": carbon.note,
    }


def plan_summary(result: PlanResult) -> str:
    plans = f"{result.simulations} plan{'s' if result.simulations != 1 else ''} simulated"
    ahead = (
        "; new instances are pre-provisioned (requested before their stage's barrier)"
        if result.preprovision and result.plan != result.static
        else ""
    )
    energy = result.energy_saving
    if result.objective == "carbon" and result.carbon is not None:
        waited = sum(result.estimate.delays_s)
        grid = result.carbon.grid
        first = grid.at(result.estimate.stage_start_s[0]).replace("T", " ").replace("Z", " UTC")
        shifted = (
            f"waits {_minutes(waited)} min in all for a cleaner grid, holding no instances "
            f"(a wait is not billed), and starts {first}"
            if waited
            else f"starts at once ({first})"
        )
        agnostic = result.carbon.agnostic_estimate
        cost = result.estimate.cost_usd / agnostic.cost_usd if agnostic.cost_usd else 1.0
        return (
            f"the plan {shifted}; it emits {1 - 1 / (result.carbon_saving or 1):.0%} less than "
            f"the carbon-agnostic plan (the cheapest, {' '.join(map(str, result.carbon.agnostic))}"
            f", started at once) and costs {cost:.2f}x as much{ahead}; {plans}"
        )
    if result.objective == "energy":
        if result.plan == result.static or energy is None:
            return f"the best static cluster uses the least energy of the plans found; {plans}"
        return (
            f"the plan uses {1 - 1 / energy:.0%} less energy than the best static cluster "
            f"(estimated from the profile's power_w) and costs {1 - 1 / result.saving:.0%} "
            f"less{ahead}; {plans}"
        )
    if result.plan == result.static:
        return f"the best static cluster is the cheapest plan found; {plans}"
    uses = (
        f", and uses {1 - 1 / energy:.0%} less energy (estimated from the profile's power_w)"
        if energy is not None
        else ""
    )
    return (
        f"the plan costs {1 - 1 / result.saving:.0%} less than the best static cluster "
        f"(that one costs {result.saving:.2f}x as much){uses}{ahead}; {plans}"
    )


def plan_intensity(carbon_spec: CarbonSpec) -> CarbonIntensity | None:
    """The grid intensity a plan's energy is converted at: the file's fixed figure, or its
    region's yearly average from the shipped table (a plan is for later, so not a live value or
    a recorded series); None for a `csv` series."""
    if carbon_spec.g_per_kwh is not None:
        return StaticIntensity(carbon_spec.g_per_kwh)
    if carbon_spec.csv is not None or not carbon_spec.region:
        return None
    return TableIntensity.for_zone(carbon_spec.region)


def plan_emissions(result: PlanResult, intensity: CarbonIntensity | None) -> dict[str, Any] | None:
    """The plan's and the best static cluster's emissions in grams (an estimate, from their
    energy), at `intensity` (or on the plan's grid, each stage when it runs); None without an
    intensity or the profile's power_w."""
    if result.carbon is not None:
        mine_g, static_g = result.estimate.emissions_g, result.static_estimate.emissions_g
        return {
            "intensity": f"{result.carbon.grid.describe()}; the plan starts "
            f"{result.carbon.grid.at(0.0)}",
            "plan_g": mine_g,
            "static_g": static_g,
        }
    mine, static = result.estimate.energy_kwh, result.static_estimate.energy_kwh
    if intensity is None or mine is None or static is None:
        return None
    g = intensity.g_per_kwh(0.0)
    return {"intensity": intensity.describe(), "plan_g": mine * g, "static_g": static * g}


def emissions_line(result: PlanResult, intensity: CarbonIntensity | None) -> str | None:
    carbon = plan_emissions(result, intensity)
    if carbon is None:
        return None
    if result.carbon is not None:
        note = f"{result.carbon.note}; " if result.carbon.note else ""
        agnostic = result.carbon.agnostic_estimate.emissions_g or 0.0
        at_once = result.carbon.at_once.emissions_g or 0.0
        return (
            f"{note}emissions (estimate, each stage's energy when it runs): "
            f"{carbon['plan_g'] / 1000:.3g} kgCO2eq for the plan ({at_once / 1000:.3g} started "
            f"at once), {agnostic / 1000:.3g} for the carbon-agnostic plan, "
            f"{carbon['static_g'] / 1000:.3g} for the best static cluster, on {carbon['intensity']}"
        )
    return (
        f"emissions (estimate): {carbon['plan_g'] / 1000:.3g} kgCO2eq for the plan, "
        f"{carbon['static_g'] / 1000:.3g} for the best static cluster, at {carbon['intensity']}"
    )


def price_json(price: Price, data_usd_per_instance: float = 0.0) -> dict[str, Any]:
    """What `basht run --plan` needs to bill the instances it runs: price, size, billing rule,
    and the data movement each launch costs."""
    return {
        "usd_per_hour": price.usd_per_hour,
        "gpus": price.gpus,
        "vcpus": price.vcpus,
        "increment_s": price.rule.increment_s,
        "minimum_s": price.rule.minimum_s,
        "rule": price.rule.name,
        "provider": price.provider,
        "instance": price.instance,
        "data_usd_per_instance": data_usd_per_instance,
    }


def plan_json(
    result: PlanResult,
    job: ShaJob,
    profile: Profile,
    intensity: CarbonIntensity | None = None,
) -> dict[str, Any]:
    """The plan file, as `basht plan --json` writes it: checked as `PlanSpec`, the model
    `basht run --plan` reads it with, so a file written is a file that runs. A plan on a grid
    also gets its `carbon` section (`carbon_summary`), which a run does not read."""
    written = PlanSpec.model_validate(_plan_fields(result, job, profile, intensity)).model_dump(
        mode="json"
    )
    carbon = carbon_summary(result)
    return written if carbon is None else written | {"carbon": carbon}


def _plan_fields(
    result: PlanResult, job: ShaJob, profile: Profile, intensity: CarbonIntensity | None
) -> dict[str, Any]:
    delays = result.estimate.delays_s or (0.0,) * len(job.stages)
    stages = [asdict(s) | {"delay_s": d} for s, d in zip(job.stages, delays, strict=True)]
    return {
        "emissions_estimate": plan_emissions(result, intensity),
        "job": asdict(job) | {"stages": stages},
        "instance": profile.price.describe(),
        "price": price_json(profile.price, profile.data_usd_per_instance),
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
        # What `basht run --replan` plans the remaining stages again with, at each barrier.
        "profile": profile.samples(),
        "max_instances": result.max_instances,
        "runs": result.runs,
        "seed": result.seed,
        "preprovision": result.preprovision,
        # A carbon plan is re-planned by energy, its waits kept: a run has no forecast.
        "objective": "energy" if result.objective == "carbon" else result.objective,
    }


def cluster_summary(store: Store, run_id: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """How a run on a plan's elastic cluster went, beside what the plan estimated: each stage's
    instances and time, each instance's start-up, life, bill and data movement, the job's time
    and cost."""
    plan = spec.get("plan")
    if not plan:
        return None
    planned = PlanSpec.model_validate(plan)
    price = plan_price(planned.price)
    data_usd = planned.price.data_usd_per_instance  # moving the data onto each one launched
    stages = store.stages(run_id)
    spans: dict[int, list[float]] = {}
    for row in stages:
        spans.setdefault(row.attempt, []).extend(
            t for t in (row.started_at, row.ended_at) if t is not None
        )
    billed = []
    for row, life in instance_lifetimes(store, run_id):
        billed.append(
            {
                "instance": row.number,
                "attempt": row.attempt,
                "stage": row.stage,
                "startup_s": None if row.ready_at is None else row.ready_at - row.launched_at,
                "lifetime_s": life,
                "billed_usd": job_cost_usd(price, life),
                "data_usd": data_usd,
            }
        )
    estimate = planned.estimate
    return {
        "instance": planned.instance or price.describe(),
        "plan": list(planned.plan),
        "deadline_s": planned.deadline_s,
        "confidence": planned.confidence,
        "replan": planned.replan,
        "jct_s": sum(max(t) - min(t) for t in spans.values() if t),
        "cost_usd": sum(i["billed_usd"] + i["data_usd"] for i in billed),
        "estimate": None if estimate is None else estimate.model_dump(),
        "stages": [
            {
                "stage": row.stage,
                "attempt": row.attempt,
                "planned_instances": (
                    planned.plan[row.stage]
                    if row.planned_instances is None
                    else row.planned_instances
                ),
                "instances": row.instances,
                "speed": row.speed,  # re-planned at its barrier: trials over the profile
                "estimated_left_s": row.estimated_left_s,
                "gpus_per_trial": row.gpus_per_trial,
                "slots": row.slots,
                "duration_s": None if row.ended_at is None else row.ended_at - row.started_at,
            }
            for row in stages
        ],
        "instances": billed,
    }


def cluster_title(cluster: dict[str, Any]) -> str:
    again = ", re-planned at each barrier" if cluster.get("replan") else ""
    return f"elastic cluster: the plan's stages as run{again}"


def cluster_stage_columns(cluster: dict[str, Any]) -> list[str]:
    columns = ["stage", "instances", "GPUs per trial", "at once", "seconds"]
    if cluster.get("replan"):
        columns[1:1] = ["planned"]
        columns += ["trial speed", "est. s left"]
    return columns


def cluster_stage_rows(cluster: dict[str, Any]) -> list[list[str]]:
    """Each stage as run, under `cluster_stage_columns`: the console's and the HTML report's."""
    rows = []
    for row in cluster["stages"]:
        seconds = row["duration_s"]
        cells = [
            str(row["stage"]),
            str(row["instances"]),
            str(row["gpus_per_trial"]),
            str(row["slots"]),
            "-" if seconds is None else f"{seconds:.1f}",
        ]
        if cluster.get("replan"):
            speed, left = row.get("speed"), row.get("estimated_left_s")
            cells[1:1] = [str(row["planned_instances"])]
            cells += [
                "-" if speed is None else f"{speed:.2f}x",
                "-" if left is None else f"{left:.1f}",
            ]
        rows.append(cells)
    return rows


CLUSTER_TOTAL_COLUMNS = ("", "JCT (s)", "cost (USD)")


def cluster_total_rows(cluster: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The run's time and bill, the plan's estimate and the deadline."""
    rows = [("this run", f"{cluster['jct_s']:.1f}", f"{cluster['cost_usd']:.4f}")]
    if (estimate := cluster["estimate"]) is not None:
        rows.append(
            ("plan's estimate (mean)", f"{estimate['jct_s']:.1f}", f"{estimate['cost_usd']:.4f}")
        )
    if cluster["deadline_s"] is not None:
        rows.append(("deadline", f"{cluster['deadline_s']:.1f}", ""))
    return rows


def cluster_notes(cluster: dict[str, Any]) -> list[str]:
    launched = len(cluster["instances"])
    notes = [
        f"{launched} instance{'s' if launched != 1 else ''} of {cluster['instance']}; "
        "instances are emulated on this machine (worker processes, one per GPU, billed at the "
        "instance type's price), so times are this machine's, not the instance type's"
    ]
    if cluster.get("replan"):
        notes.insert(
            0,
            "trial speed: the run's trials over the profile's time when the stage was "
            "re-planned; est. s left: the re-planned estimate from the barrier to the end (mean)",
        )
    return notes


def cluster_tables(cluster: dict[str, Any]) -> Group:
    """The run's stages on the plan's cluster, and its time and bill against the estimate."""
    stages = Table(title=cluster_title(cluster), title_justify="left")
    for column in cluster_stage_columns(cluster):
        stages.add_column(column, justify="right")
    for cells in cluster_stage_rows(cluster):
        stages.add_row(*cells)
    totals = Table(show_header=True, box=None, pad_edge=False)
    for i, column in enumerate(CLUSTER_TOTAL_COLUMNS):
        totals.add_column(column, justify="right" if i else "left")
    for cells in cluster_total_rows(cluster):
        totals.add_row(*cells)
    return Group(stages, totals, "\n".join(cluster_notes(cluster)))
