"""A run's interactive charts as plain JSON, read from the store, and the script that draws them.

One implementation for two pages: `basht dashboard` serves this JSON and polls it while the run
goes on; `basht report --html` writes it, with the script and the charting library (Chart.js,
shipped in `static/vendor/`), into its one self-contained file. The data works for a run in
progress too: its run phase is not stored until it ends, so times count from the end of its
setup (or its first trial) instead, and a running trial's segment reaches up to now.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

from sqlalchemy import select

from basht.energy.monitor import J_PER_KWH, UNMEASURED, source_label
from basht.report.plots import STATE_COLOURS
from basht.report.runstats import run_state, trial_energy_j
from basht.report.timeline import segments
from basht.states import TrialState
from basht.store import PowerSampleRow, Store
from basht.store.repository import nan_to_null

#: The order states are listed in: what is going on first, then how trials ended.
STATES = (
    TrialState.RUNNING,
    TrialState.PENDING,
    TrialState.PAUSED,
    TrialState.COMPLETED,
    TrialState.STOPPED,
    TrialState.FAILED,
    TrialState.ABORTED,
)
#: The seed's Table 2, first in the metrics' list (the others follow in the store's order).
TABLE2 = ("TWH", "CINT", "JCT", "OC", "WTT", "WTE", "WTC", "WR")
#: Points kept of the energy curve: enough for a smooth line, few enough to poll every second.
_ENERGY_POINTS = 600
#: The script files, in the order a page loads them: the library, its zoom plugin, ours.
SCRIPTS = ("vendor/chart.umd.min.js", "vendor/chartjs-plugin-zoom.min.js", "charts.js")


def run_charts(store: Store, run_id: str, now: float | None = None) -> dict[str, Any]:
    """Everything the charts of run `run_id` draw (times in seconds from `origin`)."""
    now = time.time() if now is None else now
    run = store.get_run(run_id)
    spec = store.get_experiment(run.experiment_id).spec
    search = spec.get("search") or {}
    phases = store.phases(run.id)
    trials = store.trials(run.id)
    origin = _origin(run, phases, trials)
    live = run.status == "running"
    number = {t.id: t.number for t in trials}
    state = {t.number: t.state for t in trials}
    accounts = store.energy_accounts(run.id)
    energy_j = trial_energy_j(store, run.id)
    reports = [
        {
            "trial": number[r.trial_id],
            "state": state[number[r.trial_id]],
            "epoch": r.epoch,
            "value": r.value,
            "at_s": r.at - origin,
        }
        for r in sorted(store.reports(run.id), key=lambda r: r.at)
        if r.trial_id in number
    ]
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state] = counts.get(t.state, 0) + 1
    return nan_to_null(
        {
            "run": {
                "id": run.id,
                "experiment": spec.get("name"),
                **run_state(run),
                "live": live,
                "elapsed_s": _elapsed_s(phases, origin, now, live),
                "metric": search.get("metric"),
                "mode": search.get("mode", "max"),
                "max_trials": search.get("max_trials"),
                "time_budget_s": search.get("time_budget_s"),
                "best": {
                    "trial": run.best_trial,
                    "value": run.best_value,
                    "config": run.best_config,
                },
            },
            "origin": origin,
            "states": {s.value: STATE_COLOURS[s] for s in STATES},
            "counts": {s.value: counts[s] for s in STATES if s in counts},
            "trials": [
                {
                    "trial": t.number,
                    "state": t.state,
                    "config": t.config,
                    "budget": t.budget,
                    "target_budget": t.target_budget,
                    "value": t.value,
                    "worker": t.worker,
                    "energy_kwh": None
                    if energy_j.get(t.number) is None
                    else energy_j[t.number] / J_PER_KWH,
                    "error": (t.error or "").splitlines()[-1][:200] if t.error else None,
                }
                for t in trials
            ],
            "reports": reports,
            "best": _best_so_far(reports, search.get("mode", "max")),
            "timeline": _timeline(store, run.id, spec, origin, now, live),
            "energy": _energy(store, run.id, search, accounts, origin),
            "objectives": _objectives(store, run.id, spec, run.best_trial),
            "metrics": _metrics(store, run.id),
            "phases": [
                {"name": p.name, "attempt": p.attempt, "duration_s": p.duration_s} for p in phases
            ],
        }
    )


def _origin(run: Any, phases: Sequence[Any], trials: Sequence[Any]) -> float:
    """When the run phase began: stored once it ended; before that, the end of the setup that
    precedes it, or else the first trial's start, or else the run's own start."""
    runs = [p.start for p in phases if p.name == "run"]
    if runs:
        return min(runs)
    setups = [p.end for p in phases if p.name == "setup"]
    if setups:
        return max(setups)
    starts = [t.started_at for t in trials if t.started_at is not None]
    if starts:
        return min(starts)
    from datetime import UTC

    return run.started_at.replace(tzinfo=UTC).timestamp() if run.started_at else time.time()


def _elapsed_s(phases: Sequence[Any], origin: float, now: float, live: bool) -> float | None:
    """Seconds of the run phase: up to now while it runs, else up to its (last) end."""
    if live:
        return max(0.0, now - origin)
    ends = [p.end for p in phases if p.name == "run"]
    return max(ends) - origin if ends else None


def _best_so_far(reports: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """Each report that improved on every report before it."""
    out: list[dict[str, Any]] = []
    best: float | None = None
    for r in reports:
        value = r["value"]
        if value is None or value != value:  # NaN: a diverged trial improves nothing
            continue
        if best is None or (value > best if mode == "max" else value < best):
            best = value
            out.append({"at_s": r["at_s"], "value": value, "trial": r["trial"]})
    return out


def _timeline(
    store: Store, run_id: str, spec: dict[str, Any], origin: float, now: float, live: bool
) -> dict[str, Any]:
    """The trials' segments on worker lanes; while the run goes on, a running trial's last
    segment reaches up to now."""
    workers = int((spec.get("resources") or {}).get("workers") or 1)
    placed = segments(store, run_id, workers, origin=origin)
    last = {s.trial: s for s in placed}
    out = []
    for s in placed:
        end = s.end_s
        if live and s.state == TrialState.RUNNING and last[s.trial] is s:
            end = max(end, now - origin)
        out.append(
            {"trial": s.trial, "lane": s.lane, "start_s": s.start_s, "end_s": end, "state": s.state}
        )
    lanes = max([workers, *(s["lane"] + 1 for s in out)])
    return {"lanes": lanes, "segments": out}


def _energy(
    store: Store, run_id: str, search: dict[str, Any], accounts: Sequence[Any], origin: float
) -> dict[str, Any]:
    """The node's energy and emissions so far, as a curve over time and as totals, against the
    budgets the search set. The curve is the power samples' running totals; the emissions along
    it are at the mean intensity of the total so far (the accounts book each interval at the
    intensity of its time; the curve is a guide, the totals are the booked figures)."""
    booked = [a for a in accounts if a.component != UNMEASURED]
    joules = sum(a.energy_j for a in booked)
    grams = sum(a.emissions_g for a in booked)
    kwh = joules / J_PER_KWH
    g_per_kwh = grams / kwh if kwh > 0 else None
    series = _energy_series(store, run_id, origin)
    return {
        "source": source_label(accounts) or None,
        "kwh": kwh,
        "emissions_g": grams,
        "g_per_kwh": g_per_kwh,
        "series": [
            {"at_s": at, "kwh": e, "emissions_g": None if g_per_kwh is None else e * g_per_kwh}
            for at, e in series
        ],
        "budgets": {
            "energy_kwh": search.get("energy_budget_kwh"),
            "emissions_g": search.get("carbon_budget_g"),
            "cost_usd": search.get("cost_budget_usd"),
        },
    }


def _energy_series(store: Store, run_id: str, origin: float) -> list[tuple[float, float]]:
    """(seconds, kWh the node had used by then), from the samples' running totals per
    component; a resumed run's monitor starts its totals again, so a drop is a new attempt."""
    query = (
        select(
            PowerSampleRow.at,
            PowerSampleRow.node,
            PowerSampleRow.component,
            PowerSampleRow.energy_j,
        )
        .where(PowerSampleRow.run_id == run_id)
        .order_by(PowerSampleRow.at, PowerSampleRow.id)
    )
    with store.session() as s:
        rows = s.execute(query).all()
    latest: dict[tuple[str, str], float] = {}
    carried: dict[tuple[str, str], float] = {}
    points: list[tuple[float, float]] = []
    for at, node, component, energy in rows:
        if energy is None or component == UNMEASURED:
            continue
        key = (node, component)
        if energy < latest.get(key, 0.0):
            carried[key] = carried.get(key, 0.0) + latest[key]
        latest[key] = energy
        total = (sum(latest.values()) + sum(carried.values())) / J_PER_KWH
        if points and points[-1][0] == at - origin:
            points[-1] = (at - origin, total)
        else:
            points.append((at - origin, total))
    return _thin(points, _ENERGY_POINTS)


def _thin(points: list[Any], most: int) -> list[Any]:
    """At most about `most` of `points`, evenly spread, the last always kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    kept = [points[int(i * step)] for i in range(most)]
    return kept if kept[-1] is points[-1] else [*kept, points[-1]]


def _objectives(
    store: Store, run_id: str, spec: dict[str, Any], chosen: int | None
) -> dict[str, Any] | None:
    """A run of several objectives: its scored trials, the Pareto front and its hypervolume."""
    if len((spec.get("search") or {}).get("objectives") or []) < 2:
        return None
    from basht.report.front import objectives_summary

    summary = objectives_summary(store, run_id, spec, chosen)
    if summary is None:
        return None
    keep = ("objectives", "constraints", "chosen", "hypervolume", "reference", "trials")
    return {k: summary[k] for k in keep}


def _metrics(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The run's metrics once they are computed (at its end): Table 2's first."""
    rows = [
        {"name": m.name, "value": m.value, "unit": m.unit, "source": m.source}
        for m in store.metrics(run_id)
    ]
    order = {name: i for i, name in enumerate(TABLE2)}
    return sorted(rows, key=lambda m: order.get(m["name"], len(order)))


def script() -> str:
    """The charting library, its zoom plugin and the code that draws Basht's charts, as one
    script to inline in a page."""
    folder = resources.files("basht.report") / "static"
    return "\n;\n".join(folder.joinpath(name).read_text(encoding="utf-8") for name in SCRIPTS)
