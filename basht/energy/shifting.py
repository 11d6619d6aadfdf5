"""Carbon-aware shifting: when, and how wide, a tuning job should run so it emits less and still
meets its deadline.

A job with remaining work W (worker-seconds), at most M workers at once and a deadline D can move
its work to the cleanest hours between now and D ("Let's Wait Awhile", Wiesner et al., Middleware
2021) and run wider in them (CarbonScaler, Hanafy et al., 2023). Both papers find that simple
policies get most of the saving, so `CarbonShifter` is a greedy wait-and-scale rule over fixed
slots, with a guard that makes a feasible deadline impossible to miss whatever the forecast says.
`oracle_emissions_g` is the lower bound results compare with; `agnostic_schedule` the baseline;
`placed_emissions_g` what a forecast alone allows, apart from the job's shape and the guard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from basht.energy.carbon import J_PER_KWH, CarbonIntensity
from basht.errors import ArgumentError
from basht.experiment import parse_deadline  # re-exported: a schedule's deadline, parsed

__all__ = [
    "CarbonShifter",
    "Decision",
    "Forecast",
    "PerfectForecast",
    "PersistenceForecast",
    "SeriesForecast",
    "Slot",
    "agnostic_schedule",
    "check_feasible",
    "emissions_g",
    "oracle_emissions_g",
    "placed_emissions_g",
    "parse_deadline",
    "slots",
]

#: One day: the period of the persistence forecast (grid intensity follows the daily cycle of
#: demand and solar output, which is why "the same hour yesterday" is the usual naive forecast).
DAY_S = 86400.0
#: A quarter hour: the slot length, the settlement period of most European day-ahead and
#: intraday electricity markets and the resolution Electricity Maps forecasts are published at.
DEFAULT_STEP_S = 900.0
#: Slack for float error when a width is rounded up (a 2.0000000001-worker need is 2 workers).
_EPS = 1e-9


class Forecast(Protocol):
    """Intensity as it is known at `now`: the shifter plans with a forecast, never the future itself."""

    def g_per_kwh(self, at: float, now: float) -> float:
        """The forecast made at `now` for unix time `at` (`at >= now`; the past is known)."""
        ...

    def describe(self) -> str:
        """One line for the results: the kind of forecast and the series it is made from."""
        ...


class PerfectForecast:
    """The series itself, as an oracle: for recorded runs and benchmarks, where it shows how much a
    policy gets with perfect knowledge, apart from what the forecast costs it."""

    def __init__(self, intensity: CarbonIntensity) -> None:
        self.intensity = intensity

    def g_per_kwh(self, at: float, now: float) -> float:
        return self.intensity.g_per_kwh(at)

    def describe(self) -> str:
        return f"perfect forecast of {self.intensity.describe()}"

    def __repr__(self) -> str:
        return f"PerfectForecast({self.intensity!r})"


class SeriesForecast:
    """A forecast recorded as a series of its own (a day-ahead forecast, say): the value it gives
    for a later time is the forecast series' there; the past (`at <= now`) is the measured
    series'. The forecast is the same whenever it is asked, as one issued before the run."""

    def __init__(self, intensity: CarbonIntensity, forecast: CarbonIntensity) -> None:
        self.intensity = intensity
        self.forecast = forecast

    def g_per_kwh(self, at: float, now: float) -> float:
        return self.intensity.g_per_kwh(at) if at <= now else self.forecast.g_per_kwh(at)

    def describe(self) -> str:
        return f"forecast {self.forecast.describe()} of {self.intensity.describe()}"

    def __repr__(self) -> str:
        return f"SeriesForecast({self.intensity!r}, {self.forecast!r})"


class PersistenceForecast:
    """ "The same hours a day earlier", moved to today's level: the forecast for `at` is the value
    a period before it, plus how much the grid now differs from a period before now (never below
    0). Needs no model and no data beyond the series, and is the baseline that real forecasts are
    judged against; the past (`at <= now`) is the series' own value.

    Why the level: the shifter compares the slot it is in (known now) with later ones. Against
    yesterday's raw values that comparison ranks today's weather against yesterday's, not the
    hours of the day; moved by the same offset, every slot, the current one too, is ranked by
    yesterday's shape, which is what the daily cycle repeats.

    `days` > 1 averages the same hours over that many earlier periods (and the level over the
    same ones): one day's weather blurs the daily cycle less. On the 2020 series a week ranks the
    morning's quarter hours better than yesterday alone (`benchmarks/carbon_shift.py
    --forecasts persistence persistence-7`)."""

    def __init__(self, intensity: CarbonIntensity, period_s: float = DAY_S, days: int = 1) -> None:
        if not (math.isfinite(period_s) and period_s > 0):
            raise ArgumentError(f"period_s must be a finite number > 0, got {period_s!r}")
        if isinstance(days, bool) or not isinstance(days, int) or days < 1:
            raise ArgumentError(f"days must be a whole number >= 1, got {days!r}")
        self.intensity = intensity
        self.period_s = float(period_s)
        self.days = days

    def _first_known(self, at: float, now: float) -> int:
        """The smallest `k >= 1` for which `period·k` before `at` lies at or before `now`."""
        p = self.period_s
        k = max(1, math.ceil((at - now) / p))
        while at - p * k > now:  # float error in the division above
            k += 1
        while k > 1 and at - p * (k - 1) <= now:
            k -= 1
        return k

    def _earlier(self, at: float, k: int) -> float:
        """The mean of the `days` values `period·k`, `period·(k+1)`, ... before `at`."""
        p = self.period_s
        values = [self.intensity.g_per_kwh(at - p * (k + d)) for d in range(self.days)]
        return math.fsum(values) / self.days

    def g_per_kwh(self, at: float, now: float) -> float:
        if at <= now:
            return self.intensity.g_per_kwh(at)
        level = self.intensity.g_per_kwh(now) - self._earlier(now, 1)
        return max(0.0, self._earlier(at, self._first_known(at, now)) + level)

    def describe(self) -> str:
        over = "" if self.days == 1 else f", the mean of {self.days}"
        return f"persistence forecast ({self.period_s:g} s earlier{over}) of {self.intensity.describe()}"

    def __repr__(self) -> str:
        return (
            f"PersistenceForecast({self.intensity!r}, period_s={self.period_s!r}, "
            f"days={self.days!r})"
        )


@dataclass(frozen=True)
class Slot:
    """A stretch of time the shifter treats as one: it runs the same width throughout."""

    start: float
    end: float
    g_per_kwh: float

    @property
    def duration_s(self) -> float:
        return self.end - self.start


def _next_boundary(now: float, step_s: float) -> float:
    """The first multiple of `step_s` (from the epoch) strictly after `now`."""
    b = (math.floor(now / step_s) + 1) * step_s
    while b <= now:  # float error at large `now`
        b += step_s
    return b


def slots(forecast: Forecast, now: float, deadline: float, step_s: float) -> list[Slot]:
    """[now, deadline) cut at multiples of `step_s` from the epoch, each with the forecast (made at
    `now`) for its start. Aligned cuts make the slots of successive decisions the same, so a
    plan does not drift; the first slot may be short, and so may the last. Empty when
    `deadline <= now`."""
    if not (math.isfinite(step_s) and step_s > 0):
        raise ArgumentError(f"step_s must be a finite number > 0, got {step_s!r}")
    out: list[Slot] = []
    start = now
    while start < deadline:
        end = min(_next_boundary(start, step_s), deadline)
        out.append(Slot(start, end, forecast.g_per_kwh(start, now)))
        start = end
    return out


@dataclass(frozen=True)
class Decision:
    """What the shifter says for now: run `workers` until `until` at the latest, then ask again.

    `reason` is one of "clean slot" (the current slot is among the cleanest that hold the work: full
    width), "marginal slot" (it is the last of them, needed only in part: the width that part
    needs, rounded up), "dirty: held" (cleaner slots hold the work: none, or `min_workers`),
    "deadline needs full speed" (the guard: the work no longer fits with room to spare), "no work
    left", or "nothing can run now" (the work can use no worker at the moment).
    """

    workers: int
    until: float
    reason: str


class CarbonShifter:
    """Wait-and-scale: of the slots between now and the deadline, the cleanest ones that can hold
    the remaining work at full width are used; the current slot runs at full width if chosen (the
    marginal slot at the width it needs, rounded up), else none. When the work no longer fits in
    what remains at full width (with `margin`), it runs at full width: a feasible deadline is never
    missed.

    Why never: anything short of full width is decided only while
    `now + (work + chain·(width-1))·(1+margin)/width < deadline - step_s`, and lasts at most one
    slot (`step_s`), so afterwards the work still fits at full width; full width never makes it
    fit less. That sum bounds how long greedy workers take over work whose longest sequential
    part is `chain` (`decide`'s `chain_s`; 0 for divisible work). This holds whatever the
    forecast says; a bad forecast costs carbon, not the deadline. `margin` covers an
    underestimated `remaining_work_s`. `min_workers` keep running in held slots (say, to keep a
    worker warm); the plan does not count on their work, which can only make it finish sooner.
    """

    def __init__(
        self,
        forecast: Forecast,
        deadline: float,
        max_workers: int,
        *,
        step_s: float = DEFAULT_STEP_S,
        margin: float = 0.1,
        min_workers: int = 0,
    ) -> None:
        if not math.isfinite(deadline):
            raise ArgumentError(f"deadline must be finite unix seconds, got {deadline!r}")
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ArgumentError(f"max_workers must be an integer >= 1, got {max_workers!r}")
        if not (math.isfinite(step_s) and step_s > 0):
            raise ArgumentError(f"step_s must be a finite number > 0, got {step_s!r}")
        if not (math.isfinite(margin) and margin >= 0):
            raise ArgumentError(f"margin must be a finite number >= 0, got {margin!r}")
        if (
            isinstance(min_workers, bool)
            or not isinstance(min_workers, int)
            or not 0 <= min_workers <= max_workers
        ):
            raise ArgumentError(
                f"min_workers must be an integer from 0 to max_workers ({max_workers}), got {min_workers!r}"
            )
        self.forecast = forecast
        self.deadline = float(deadline)
        self.max_workers = max_workers
        self.step_s = float(step_s)
        self.margin = float(margin)
        self.min_workers = min_workers

    def _slot_end(self, now: float) -> float:
        end = _next_boundary(now, self.step_s)
        return min(end, self.deadline) if now < self.deadline else end

    def decide(
        self,
        now: float,
        remaining_work_s: float,
        parallelism: int | None = None,
        chain_s: float = 0.0,
    ) -> Decision:
        """How many workers may run from `now` to the end of the current slot.

        `parallelism` is the most workers the work can use now (the trials available), capped at
        `max_workers`; None means `max_workers`. A slot holds `min(max_workers, parallelism)·length`
        worker-seconds, and the work planned for is
        `(remaining_work_s + chain_s·(width - 1))·(1+margin)`.

        `chain_s`: the longest part of the work that must run in sequence (one trial's epochs,
        a rung after the rung before it), which no width spreads. Greedy list scheduling ends
        such work at full width within `work/width + chain_s·(1 - 1/width)` (Graham, 1969), so
        that is what is planned for: `chain_s·(width - 1)` worker-seconds more, the most the
        workers can stand idle while the chain runs. 0 treats the work as divisible.
        """
        if not math.isfinite(now):
            raise ArgumentError(f"now must be finite unix seconds, got {now!r}")
        if math.isnan(remaining_work_s):
            raise ArgumentError("remaining_work_s must be a number, got nan")
        if not (math.isfinite(chain_s) and chain_s >= 0):
            raise ArgumentError(f"chain_s must be a finite number >= 0, got {chain_s!r}")
        until = self._slot_end(now)
        if remaining_work_s <= 0:
            return Decision(0, until, "no work left")
        if parallelism is None:
            width = self.max_workers
        elif isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 0:
            raise ArgumentError(f"parallelism must be an integer >= 0, got {parallelism!r}")
        else:
            width = min(self.max_workers, parallelism)
        if width == 0:
            return Decision(0, until, "nothing can run now")
        # What the width must hold: the work, and the idle time a chain can cause beside it.
        work = (remaining_work_s + min(chain_s, remaining_work_s) * (width - 1)) * (1 + self.margin)
        full = Decision(width, until, "deadline needs full speed")
        if now + work / width >= self.deadline - self.step_s:
            return full
        plan = slots(self.forecast, now, self.deadline, self.step_s)
        held = min(self.min_workers, width)
        filled = 0.0
        # Cleanest first; among equals the earlier, so the work is done sooner.
        for i in sorted(range(len(plan)), key=lambda j: (plan[j].g_per_kwh, plan[j].start)):
            if filled >= work:
                return Decision(held, until, "dirty: held")
            capacity = width * plan[i].duration_s
            if i == 0:
                need = work - filled
                if need <= _EPS * work:  # float error: the cleaner slots hold it all
                    return Decision(held, until, "dirty: held")
                if need >= capacity:
                    return Decision(width, until, "clean slot")
                workers = math.ceil(need / plan[0].duration_s - _EPS)
                return Decision(max(held, min(width, max(1, workers))), until, "marginal slot")
            filled += capacity
        return full  # unreachable past the guard: the slots hold more than the work

    def earliest_finish(self, now: float, work_s: float) -> float:
        """When `work_s` worker-seconds end at the soonest: all of it at full width from `now`."""
        return now + work_s / self.max_workers

    def describe(self) -> str:
        return (
            f"carbon shifter: up to {self.max_workers} workers, deadline {iso_utc(self.deadline)}, "
            f"{self.step_s:g} s slots, margin {self.margin:g}, {self.forecast.describe()}"
        )


def iso_utc(t: float) -> str:
    """Unix seconds as `2023-06-10T18:00:00Z`: how schedules name their times."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def check_feasible(now: float, deadline: float, work_s: float, max_workers: int) -> str | None:
    """None if the work can end by the deadline at full width from `now`; else the one line to
    show, so the user hears it before the job starts rather than when it is late."""
    finish = now + work_s / max_workers
    if finish <= deadline:
        return None
    return (
        f"deadline {iso_utc(deadline)} is too early: the work (about {work_s / 3600:.3g} worker-hours) "
        f"at {max_workers} workers finishes {iso_utc(finish)} at the earliest"
    )


def _integral_g_s(intensity: CarbonIntensity, start: float, end: float) -> float:
    """∫ g dt over [start, end] in gCO2eq/kWh·s, exact for a step series (cut at its change points)."""
    edges = [start, *intensity.change_points(start, end), end]
    return sum(intensity.g_per_kwh(a) * (b - a) for a, b in zip(edges, edges[1:], strict=False))


def emissions_g(
    intensity: CarbonIntensity, schedule: Sequence[tuple[float, float, float]]
) -> float:
    """Grams CO2eq of a schedule of rows (start, end, power_w): the exact integral of power·g over
    each row, cut at the series' change points, so schedules compare without sampling error."""
    total = 0.0
    for start, end, power_w in schedule:
        if not (math.isfinite(start) and math.isfinite(end) and start <= end):
            raise ArgumentError(
                f"a schedule row needs finite start <= end, got ({start!r}, {end!r})"
            )
        if not (math.isfinite(power_w) and power_w >= 0):
            raise ArgumentError(f"power_w must be a finite number >= 0, got {power_w!r}")
        total += power_w * _integral_g_s(intensity, start, end)
    return total / J_PER_KWH


def agnostic_schedule(
    now: float, work_s: float, max_workers: int, power_w_per_worker: float
) -> list[tuple[float, float, float]]:
    """The carbon-agnostic baseline: all the work at once, at full width, from `now`."""
    if work_s <= 0:
        return []
    return [(now, now + work_s / max_workers, max_workers * power_w_per_worker)]


def oracle_emissions_g(
    intensity: CarbonIntensity,
    now: float,
    deadline: float,
    work_s: float,
    max_workers: int,
    power_w_per_worker: float,
    step_s: float | None = None,
) -> float:
    """The least emissions any schedule with perfect knowledge could reach for divisible work under
    the deadline and the width: the cleanest intervals between `now` and `deadline` filled at full
    width. Intervals are cut at the series' change points, where the value is constant, so the
    greedy fill is optimal. `step_s` adds cuts at its multiples, for a source that reports no
    change points (its value is then sampled at each cut). ArgumentError if the work cannot end
    by the deadline at all."""
    if step_s is not None and not (math.isfinite(step_s) and step_s > 0):
        raise ArgumentError(f"step_s must be a finite number > 0, got {step_s!r}")
    if work_s <= 0:
        return 0.0
    problem = check_feasible(now, deadline, work_s, max_workers)
    if problem is not None:
        raise ArgumentError(problem)
    cuts = set(intensity.change_points(now, deadline))
    if step_s is not None:
        b = _next_boundary(now, step_s)
        while b < deadline:
            cuts.add(b)
            b += step_s
    edges = [now, *sorted(cuts), deadline]
    intervals = sorted(
        (intensity.g_per_kwh(a), a, b - a) for a, b in zip(edges, edges[1:], strict=False)
    )
    left = work_s
    total = 0.0
    for g, _, length in intervals:
        if left <= 0:
            break
        done = min(left, max_workers * length)
        total += g * done
        left -= done
    return total * power_w_per_worker / J_PER_KWH


def placed_emissions_g(
    intensity: CarbonIntensity,
    forecast: Forecast,
    now: float,
    deadline: float,
    work_s: float,
    max_workers: int,
    power_w_per_worker: float,
    step_s: float = DEFAULT_STEP_S,
) -> float:
    """The emissions of divisible work at full width in the slots `forecast` (made at `now`)
    ranks cleanest, on the series as it was: what a schedule could reach with that forecast
    and no other constraint (no chain, no margin, no guard). With a `PerfectForecast` it is the
    oracle at slot resolution; the gap between a forecast's placement and the oracle is what the
    forecast costs, the gap between a shifter's emissions and the placement what the job's shape
    and the deadline's guard cost. Slot-ranking is not the only use of a forecast, so this is a
    yardstick, not a bound. ArgumentError if the work cannot end by the deadline at all."""
    if work_s <= 0:
        return 0.0
    problem = check_feasible(now, deadline, work_s, max_workers)
    if problem is not None:
        raise ArgumentError(problem)
    left = work_s / max_workers  # seconds at full width
    rows = []
    for slot in sorted(
        slots(forecast, now, deadline, step_s), key=lambda s: (s.g_per_kwh, s.start)
    ):
        if left <= 0:
            break
        length = min(left, slot.duration_s)
        rows.append((slot.start, slot.start + length, max_workers * power_w_per_worker))
        left -= length
    return emissions_g(intensity, rows)
