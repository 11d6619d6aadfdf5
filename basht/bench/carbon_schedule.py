"""A carbon-aware native run: its gate, and the accounting that says what shifting saved."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from basht.energy.carbon import (
    ELECTRICITYMAPS_TOKEN_ENV,
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
    agnostic_schedule,
    emissions_g,
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
        return PersistenceForecast(series)
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
