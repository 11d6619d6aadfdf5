"""A run of several objectives as results.json has it: every scored trial, the Pareto front of the
completed feasible ones, its hypervolume and reference point, the trial the test used, and the
front's hypervolume over time against the energy the trials had spent by then."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from basht.states import TrialState
from basht.store import Store, TrialReportRow, TrialRow
from basht.tune.objectives import Objectives
from basht.tune.pareto import hypervolume, pareto_front, reference_point


def objectives_summary(
    store: Store, run_id: str, spec: dict[str, Any], chosen: int | None
) -> dict[str, Any] | None:
    """The `objectives` section of a run's summary; None for a run of one metric alone."""
    search = spec.get("search") or {}
    if not search.get("objectives") and not search.get("constraints"):
        return None
    from basht.experiment import SearchSpec

    objectives = Objectives.from_search(SearchSpec.model_validate(search))
    names = [o.metric for o in objectives.objectives]
    points, history = _scored_trials(store, run_id, objectives)
    completed = {p["trial"]: p for p in points if p["state"] == TrialState.COMPLETED}
    feasible = [p for p in completed.values() if p["feasible"]]
    costs = [p["costs"] for p in completed.values()]
    reference = reference_point(costs) if costs else None
    front_numbers: set[int] = set()
    volume = 0.0
    if feasible and reference is not None:
        front_numbers = {feasible[i]["trial"] for i in pareto_front([p["costs"] for p in feasible])}
        volume = hypervolume([p["costs"] for p in feasible], reference)
    for p in points:
        p["on_front"] = p["trial"] in front_numbers
    over_time = (
        _hypervolume_over_time(history, objectives, reference) if reference is not None else []
    )
    return {
        "objectives": [{"metric": o.metric, "mode": o.mode} for o in objectives.objectives],
        "constraints": [
            {"metric": c.metric, "max": c.max, "min": c.min} for c in objectives.constraints
        ],
        "scalarize": search.get("scalarize"),
        "choose": search.get("choose", "first"),
        "chosen": chosen,
        "front": [
            {"trial": p["trial"], "config": p["config"], "values": p["values"]}
            for p in sorted(completed.values(), key=lambda p: p["trial"])
            if p["trial"] in front_numbers
        ],
        "hypervolume": volume,
        # In the objectives' units; the volume is of the signed objectives (a maximised one
        # negated) dominated by the front and bounded by this point: the worst value of each
        # objective among the completed trials, 10 % of their range further.
        "reference": None
        if reference is None
        else {
            o.metric: -r if o.mode == "max" else r
            for o, r in zip(objectives.objectives, reference, strict=True)
        },
        "trials": [{k: v for k, v in p.items() if k != "costs"} for p in points],
        "over_time": over_time,
        "metric_names": names,
    }


def _scored_trials(
    store: Store, run_id: str, objectives: Objectives
) -> tuple[list[dict[str, Any]], list[tuple[float, int, dict[str, Any], bool]]]:
    """Every trial whose last report has every objective (values, feasibility, state), and every
    report in time order as (at, trial, metrics, the trial's last)."""
    with store.session() as s:
        trials = {
            row.id: row for row in s.scalars(select(TrialRow).where(TrialRow.run_id == run_id))
        }
        reports = s.execute(
            select(TrialReportRow.trial_id, TrialReportRow.at, TrialReportRow.metrics)
            .where(TrialReportRow.trial_id.in_(list(trials)))
            .order_by(TrialReportRow.at, TrialReportRow.id)
        ).all()
    last: dict[int, tuple[float, dict[str, Any]]] = {}
    for trial_id, at, metrics in reports:
        last[trial_id] = (at, metrics)
    start = reports[0][1] if reports else 0.0
    points = []
    for row_id, (at, metrics) in last.items():
        if objectives.missing(metrics) is not None:
            continue
        row = trials[row_id]
        points.append(
            {
                "trial": row.number,
                "state": row.state,
                "config": row.config,
                "budget": row.budget,
                "values": {o.metric: float(metrics[o.metric]) for o in objectives.objectives},
                "feasible": objectives.violation(metrics) == 0,
                "at_s": at - start,
                "energy_kwh": metrics.get("train_energy_kwh_spent"),
                "costs": objectives.costs(metrics),
            }
        )
    points.sort(key=lambda p: p["trial"])
    completed = {row_id for row_id, row in trials.items() if row.state == TrialState.COMPLETED}
    history = [
        (
            at - start,
            trials[trial_id].number,
            metrics,
            trial_id in completed and last[trial_id][0] == at,
        )
        for trial_id, at, metrics in reports
    ]
    return points, history


def _hypervolume_over_time(
    history: list[tuple[float, int, dict[str, Any], bool]],
    objectives: Objectives,
    reference: tuple[float, ...],
) -> list[dict[str, Any]]:
    """After each feasible trial completes: the hypervolume of the trials completed so far
    (from the final reference point, so the curve only rises), and the energy (kWh) every trial
    had spent by then, where it was measured."""
    spent: dict[int, float] = {}
    done: list[tuple[float, ...]] = []
    out = []
    for at, number, metrics, is_last in history:
        energy = metrics.get("train_energy_kwh_spent")
        if isinstance(energy, int | float):
            spent[number] = float(energy)
        if not is_last or objectives.missing(metrics) is not None:
            continue
        if objectives.violation(metrics) > 0:
            continue
        done.append(objectives.costs(metrics))
        out.append(
            {
                "at_s": at,
                "trial": number,
                "hypervolume": hypervolume(done, reference),
                "energy_kwh": sum(spent.values()) if spent else None,
            }
        )
    return out
