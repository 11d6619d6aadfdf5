"""A carbon-aware native run: its gate, and the accounting that says what shifting saved."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from basht.energy.carbon import (
    ELECTRICITYMAPS_TOKEN_ENV,
    CarbonIntensityError,
    ScaledIntensity,
    TimeSeriesIntensity,
    electricitymaps_base_url,
    electricitymaps_token,
)
from basht.energy.carbon import J_PER_KWH as _J_PER_KWH
from basht.energy.em_forecast import ElectricityMapsForecast
from basht.energy.shifting import (
    CarbonShifter,
    Forecast,
    PerfectForecast,
    PersistenceForecast,
    SeriesForecast,
    agnostic_schedule,
    check_feasible,
    emissions_g,
    iso_utc,
    oracle_emissions_g,
)
from basht.errors import ArgumentError, SpecError
from basht.experiment import parse_deadline
from basht.tune.carbon_gate import CarbonGate
from basht.tune.factory import expected_epochs

if TYPE_CHECKING:
    from basht.bench.lifecycle import RunContext
    from basht.energy.carbon import CarbonIntensity
    from basht.experiment import Experiment
    from basht.store import Store

log = logging.getLogger(__name__)

ASYNCHRONOUS = ("asha", "async-hyperband")
#: ASHA's epoch count is an expectation its timing moves: the carbon benchmark measured 20 to 31 %
#: more than expected, so a schedule plans for a third more (a deadline matters more than carbon).
ASYNCHRONOUS_SLACK = 1.35


def carbon_gate(ctx: RunContext) -> CarbonGate | None:
    """The gate of a run with `schedule.carbon_aware`, on the run's (maybe replayed) series."""
    exp = ctx.experiment
    schedule = exp.schedule
    if not schedule.carbon_aware:
        return None
    intensity = ctx.intensity
    scaled = isinstance(intensity, ScaledIntensity)
    series = intensity.series if scaled else intensity
    now = time.time()
    earlier_s, first_start = _earlier_attempts(ctx)
    # A duration counts from the (first) run phase's start, where a replayed series starts too;
    # a resumed replay goes on from where the earlier attempts left the series.
    started = intensity.series_start if scaled else (first_start or now)
    if scaled:
        intensity.series_start = started + earlier_s * intensity.time_scale
        intensity.anchor(now)
    series_now = intensity.to_series(now) if scaled else now
    deadline = parse_deadline(schedule.deadline or "", started)
    ctx.notes["schedule_origin"] = started
    forecast = forecast_of(exp, series)
    workers = schedule.max_workers or exp.resources.workers
    shifter = CarbonShifter(forecast, deadline, workers, step_s=schedule.step_s)
    ctx.notes["schedule_start"] = series_now
    total = expected_epochs(exp)
    if total is not None and exp.search.pruner in ASYNCHRONOUS:
        total *= ASYNCHRONOUS_SLACK
    return CarbonGate(
        shifter,
        workers,
        total,
        to_series=intensity.to_series if scaled else None,
        to_clock=intensity.to_clock if scaled else None,
        chain_epochs=exp.search.max_budget,  # a trial's epochs run one after another
    )


def check_deadline(exp: Experiment, store: Store, clock_now: float) -> None:
    """Refuse, before anything is stored, a carbon-aware run whose deadline cannot be met: one
    already past, or one the search's epochs cannot reach at full width, timed as an earlier run
    of the same workload on the same executor in `store` measured them. Without such a run the
    work is unknown until the first epochs end; the gate then warns once if it is late."""
    schedule = exp.schedule
    if not schedule.carbon_aware or not schedule.deadline:
        return
    # Where the run's series starts (`basht.bench.measurement.run_intensity`): a replay from
    # `schedule.start`, else now; the deadline counts from there, in series time.
    series_now = clock_now if schedule.start is None else parse_deadline(schedule.start, 0.0)
    deadline = parse_deadline(schedule.deadline, series_now)
    if deadline <= series_now:
        raise SpecError(
            f"{iso_utc(deadline)} has passed: the run would start {iso_utc(series_now)}",
            "schedule.deadline",
        )
    epochs = expected_epochs(exp)
    timed = measured_epoch_s(store, exp)
    if epochs is None or timed is None:
        return
    epoch_s, run_id = timed
    work_s = epochs * epoch_s * schedule.time_scale  # series seconds
    problem = check_feasible(
        series_now, deadline, work_s, schedule.max_workers or exp.resources.workers
    )
    if problem is not None:
        reason = problem.removeprefix(f"deadline {iso_utc(deadline)} ")
        raise SpecError(
            f"{iso_utc(deadline)} {reason} (about {epochs:.0f} epochs of {epoch_s:.3g} s, as run {run_id} timed them)",
            "schedule.deadline",
        )


#: How many of the store's latest runs are looked through for one that timed the workload.
_RUNS_LOOKED_AT = 50


def measured_epoch_s(store: Store, exp: Experiment) -> tuple[float, str] | None:
    """The mean seconds an epoch took (training and validation) in the latest run in `store`
    of the same workload and parameters on the same executor, and that run's id; None if none
    trained an epoch."""
    workload = exp.to_dict()["workload"]
    specs: dict[int, dict[str, Any]] = {}
    for run in store.list_runs(limit=_RUNS_LOOKED_AT):
        if run.executor != exp.executor or run.system != exp.system:
            continue
        if run.experiment_id not in specs:
            specs[run.experiment_id] = store.get_experiment(run.experiment_id).spec
        if specs[run.experiment_id].get("workload") != workload:
            continue
        trials = store.trials(run.id)
        epochs = sum(t.budget for t in trials)
        if epochs > 0:
            return sum(t.train_s + t.validate_s for t in trials) / epochs, run.id
    return None


def _earlier_attempts(ctx: RunContext) -> tuple[float, float | None]:
    """The clock seconds the earlier attempts of a resumed run spent in their run phases, and
    when the first of them began (None for a first attempt). A killed attempt stored no run
    phase: its run began as its setup ended and lasted until its last record."""
    if ctx.attempt <= 1:
        return 0.0, None
    phases = ctx.store.phases(ctx.run_id)
    spent, first = 0.0, None
    for attempt in range(1, ctx.attempt):
        mine = {p.name: p for p in phases if p.attempt == attempt}
        if "run" in mine:
            start, end = mine["run"].start, mine["run"].end
        elif "setup" in mine:
            start = mine["setup"].end
            later = [p.start for p in phases if p.attempt > attempt]
            end = ctx.store.last_record_at(ctx.run_id, start, min(later, default=time.time()))
            end = start if end is None else end
        else:
            continue
        spent += max(0.0, end - start)
        first = start if first is None else first
    return spent, first


def forecast_of(exp: Experiment, series: CarbonIntensity) -> Forecast:
    """The forecast `schedule.forecast` names, over the run's intensity `series`."""
    kind = exp.schedule.forecast
    if kind == "perfect":
        return PerfectForecast(series)
    if kind == "persistence":
        return PersistenceForecast(series, days=exp.schedule.forecast_days)
    if kind == "csv":
        try:
            recorded = TimeSeriesIntensity.from_csv(exp.schedule.forecast_csv or "")
        except CarbonIntensityError as err:
            raise SpecError(str(err), "schedule.forecast_csv") from None
        return SeriesForecast(series, recorded)
    carbon = exp.measure.carbon
    token = electricitymaps_token(carbon)
    if not token:
        raise SpecError(
            "electricitymaps needs a token: measure.carbon.electricitymaps_token or "
            f"the environment variable {ELECTRICITYMAPS_TOKEN_ENV}",
            "schedule.forecast",
        )
    zone = getattr(series, "zone", None) or carbon.region or ""
    return ElectricityMapsForecast(zone, token, series, base_url=electricitymaps_base_url())


def schedule_summary(ctx: RunContext, gate: CarbonGate) -> dict[str, Any]:
    """What the schedule did and saved: the trials' emissions as run; the same work started at
    once at full width (carbon-agnostic); the least any schedule could emit knowing the series
    (the oracle, for divisible work under the same deadline and width); each over the series."""
    exp = ctx.experiment
    intensity = ctx.intensity
    scaled = isinstance(intensity, ScaledIntensity)
    series = intensity.series if scaled else intensity
    scale = exp.schedule.time_scale
    energy_j = emitted_g = 0.0
    for (kind, _, _), account in ctx.monitor.all_accounts().items() if ctx.monitor else ():
        if kind == "trial":
            energy_j += account.energy_j
            emitted_g += account.emissions_g
    work_s = sum(t.train_s + t.validate_s for t in ctx.store.trials(ctx.run_id)) * scale
    start = ctx.notes.get("schedule_start", 0.0)  # series time as this attempt's run began
    # Carbon-agnostic and the oracle from the first attempt's start: every attempt's work.
    origin = ctx.notes.get("schedule_origin", start)
    shifter = gate.shifter
    summary: dict[str, Any] = {
        "carbon_aware": True,
        "deadline": shifter.deadline,
        "start": start,
        "origin": origin,
        "time_scale": scale,
        "max_workers": gate.max_workers,
        "forecast": shifter.forecast.describe(),
        "intensity": series.describe(),
        "decisions": gate.log,
        "trial_energy_kwh": energy_j / _J_PER_KWH,
        "emissions_g": emitted_g,
    }
    if not isinstance(series, TimeSeriesIntensity):  # a live zone: only its present is known
        summary["accounting"] = (
            "carbon-agnostic and oracle emissions need the whole series (measure.carbon.csv)"
        )
    elif work_s > 0 and energy_j > 0:
        power_w = energy_j / work_s  # per worker, in series seconds
        agnostic = emissions_g(series, agnostic_schedule(origin, work_s, gate.max_workers, power_w))
        try:
            oracle = oracle_emissions_g(
                series, origin, shifter.deadline, work_s, gate.max_workers, power_w
            )
        except ArgumentError:  # the work as run did not fit the deadline at full width
            oracle = agnostic
        summary.update(
            agnostic_emissions_g=agnostic,
            oracle_emissions_g=oracle,
            saving_g=agnostic - emitted_g,
            saving_percent=100 * (agnostic - emitted_g) / agnostic if agnostic > 0 else None,
            oracle_share_percent=100 * (agnostic - emitted_g) / (agnostic - oracle)
            if agnostic > oracle
            else None,
        )
    return summary
