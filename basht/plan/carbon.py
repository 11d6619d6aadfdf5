"""Carbon-aware plans: when each stage of a plan runs, so that its energy is drawn while the grid is
cleanest and the job still meets its deadline.

A plan's emissions are each stage's energy (as the energy objective estimates it from the
profile's power_w: its instances' idle watts over the stage, its trials' busy watts) drawn evenly
over the stage's span, from its mean start to its mean end, at the intensity of a recorded series
then (`basht.energy.shifting.emissions_g`). A stage may wait before it starts (its `delay_s`):
every instance is released at the barrier, so a wait is neither billed nor draws power, but the
stage's instances start up again after it. Waits are whole steps of the grid (`step_s`).

`place` finds a sizing's waits. A wait's length changes nothing but when things happen, so for
each set of stages that wait (one simulation each) the best lengths are found exactly on the step
grid by dynamic programming over the shift of each stage; the stages that wait are chosen
greedily, from the last back, each only where its wait lowers the emissions. The planner's
search compares sizings by their emissions so placed (`Simulator.placed`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from basht.energy.carbon import (
    J_PER_KWH,
    CarbonIntensity,
    StaticIntensity,
    TableIntensity,
    intensity_from_spec,
)
from basht.energy.shifting import DEFAULT_STEP_S, emissions_g
from basht.errors import BashtError
from basht.experiment import parse_deadline

if TYPE_CHECKING:
    from basht.experiment import Experiment
    from basht.plan.simulator import Estimate, Plan, Simulator

#: Emissions that differ by less than this (grams) are a tie, which the earlier start wins: float
#: error in the integrals must not make a stage wait for nothing.
_TIE_G = 1e-6


@dataclass(frozen=True)
class Grid:
    """The grid a plan is placed on: the intensity, where the plan's time 0 falls on it (unix
    seconds: now, or `schedule.start` to plan on a recorded series), and the step of the waits.
    `deadline_s` and `confidence` are what the waits keep to (`plan_job` sets them)."""

    intensity: CarbonIntensity
    start_at: float
    step_s: float = DEFAULT_STEP_S
    deadline_s: float = math.inf
    confidence: str = "p95"

    def __post_init__(self) -> None:
        if not math.isfinite(self.start_at):
            raise BashtError(f"carbon: the plan's start must be a time, got {self.start_at!r}")
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            raise BashtError(f"carbon: step_s must be a number > 0, got {self.step_s!r}")

    def flat(self, horizon_s: float) -> bool:
        """Whether the intensity is one value over the plan's time: then emissions are that
        value times the energy, and waiting can only cost."""
        if self.intensity.is_static:
            return True
        t0 = self.start_at
        points = [t0, *self.intensity.change_points(t0, t0 + horizon_s)]
        return len({self.intensity.g_per_kwh(t) for t in points}) == 1

    def describe(self) -> str:
        return self.intensity.describe()

    def at(self, plan_s: float) -> str:
        """A time of the plan (seconds from its start) on the grid's clock, as ISO 8601 UTC."""
        moment = datetime.fromtimestamp(self.start_at + plan_s, UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")

    def stage_emissions_g(self, estimate: Estimate) -> tuple[float, ...]:
        """Each stage's energy drawn evenly over its span, on the grid: exact for a step series
        (`emissions_g` cuts at its change points)."""
        if not estimate.stage_energy_kwh:
            raise BashtError("objective carbon: the profile gives no power_w (idle and busy watts)")
        out = []
        spans = zip(
            estimate.stage_start_s, estimate.stage_end_s, estimate.stage_energy_kwh, strict=True
        )
        for start, end, kwh in spans:
            a, b = self.start_at + start, self.start_at + end
            if b <= a:  # a stage of no length: its energy at the intensity then
                out.append(kwh * self.intensity.g_per_kwh(a))
            else:
                out.append(emissions_g(self.intensity, [(a, b, kwh * J_PER_KWH / (b - a))]))
        return tuple(out)

    def emitted(self, estimate: Estimate) -> Estimate:
        """`estimate` with its emissions on the grid, in total and per stage."""
        stages = self.stage_emissions_g(estimate)
        return replace(estimate, emissions_g=sum(stages), stage_emissions_g=stages)

    @cached_property
    def least_g_per_kwh(self) -> float:
        """The least intensity from the plan's start to its deadline."""
        cuts, total = self._cumulative
        return float(np.min(np.diff(total) / np.diff(cuts)))

    @cached_property
    def _cumulative(self) -> tuple[np.ndarray, np.ndarray]:
        """The integral of the intensity from the plan's start (g/kWh·s) at each cut: the
        series' change points and the steps (for a source that reports none), to the deadline."""
        t0 = self.start_at
        horizon = self.deadline_s if math.isfinite(self.deadline_s) else 7 * 86400.0
        t1 = t0 + horizon + self.step_s
        steps = t0 + self.step_s * np.arange(1, int(horizon // self.step_s) + 2)
        cuts = np.unique([t0, t1, *self.intensity.change_points(t0, t1), *steps[steps < t1]])
        g = np.array([self.intensity.g_per_kwh(float(a)) for a in cuts[:-1]])
        return cuts, np.concatenate([[0.0], np.cumsum(g * np.diff(cuts))])

    def _integral(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        cuts, total = self._cumulative
        return np.interp(end, cuts, total) - np.interp(start, cuts, total)

    def _shifted_g(
        self, start_s: float, end_s: float, kwh: float, shifts: np.ndarray
    ) -> np.ndarray:
        """A stage's emissions (grams) when it runs later by each of `shifts` seconds."""
        a, b = self.start_at + start_s + shifts, self.start_at + end_s + shifts
        if end_s <= start_s:
            return kwh * np.array([self.intensity.g_per_kwh(float(t)) for t in a])
        return np.round(kwh * self._integral(a, b) / (end_s - start_s), 6)  # ties are ties


def experiment_grid(experiment: Experiment, now: float) -> Grid:
    """The grid the experiment's plan is placed on: `measure.carbon`'s series (a fixed figure,
    or a region's yearly average: a plan is for later, so not a live value), from
    `schedule.start` (a recorded series replayed) or `now`, in steps of `schedule.step_s`."""
    carbon, schedule = experiment.measure.carbon, experiment.schedule
    intensity: CarbonIntensity
    if carbon.csv is not None:
        intensity = intensity_from_spec(carbon)
    elif carbon.g_per_kwh is not None:
        intensity = StaticIntensity(carbon.g_per_kwh)
    else:
        intensity = TableIntensity.for_zone(carbon.region or "")
    start_at = now if schedule.start is None else parse_deadline(schedule.start, now)
    return Grid(intensity, start_at, schedule.step_s)


def place(sim: Simulator, plan: Plan, grid: Grid) -> Estimate | None:
    """The plan with the waits that make its emissions on `grid` least while its completion time
    (by `grid.confidence`) meets `grid.deadline_s`, with its emissions; None if it misses the
    deadline without any. The first stage's wait is free (nothing is up yet); a later stage's
    costs a fresh start-up, so the stages that wait are tried from the last back, each kept
    only where it lowers the emissions."""
    if not math.isfinite(grid.deadline_s):
        raise BashtError("carbon: a plan is placed in time before a deadline; the grid has none")
    waits = (False,) * len(plan)
    best = _best_waits(sim.waiting(plan, waits), waits, grid)
    if best is None:
        return None
    for stage in range(len(plan) - 1, 0, -1):
        if _could_gain_g(grid.emitted(sim(plan, best[1])), stage, grid) <= _TIE_G:
            continue  # from this stage on it already runs at the grid's cleanest
        trying = (*waits[:stage], True, *waits[stage + 1 :])
        found = _best_waits(sim.waiting(plan, trying), trying, grid)
        if found is not None and found[0] < best[0] - _TIE_G:
            best, waits = found, trying
    return grid.emitted(sim(plan, best[1]))


def _could_gain_g(estimate: Estimate, stage: int, grid: Grid) -> float:
    """At most what a wait before `stage` could save: the emissions from it on, less their
    energy at the grid's least intensity before the deadline (a stage that waits starts its
    instances again, so it draws no less)."""
    stages = slice(stage, None)
    energy_kwh = sum(estimate.stage_energy_kwh[stages])
    return sum(estimate.stage_emissions_g[stages]) - energy_kwh * grid.least_g_per_kwh


def _best_waits(
    estimate: Estimate, waits: tuple[bool, ...], grid: Grid
) -> tuple[float, tuple[float, ...]] | None:
    """The least emissions, and the waits that give them, of the plan `estimate` is of (waits of
    no length before the stages `waits` marks): each marked stage (and the first) waits a whole
    number of steps, a marked one at least one, all of them together no more than the slack to
    the deadline. The shift of each stage (the waits up to it) is a path that never goes back;
    the least path is found stage by stage over the shifts. None if there is no slack for it."""
    slack = grid.deadline_s - estimate.completion_s(grid.confidence)
    if slack < 0:
        return None
    steps = math.floor(slack / grid.step_s)
    if sum(waits[1:]) > steps:
        return None
    shifts = np.arange(steps + 1) * grid.step_s
    index = np.arange(steps + 1)
    total = np.zeros(steps + 1)
    back: list[np.ndarray | None] = []  # for each stage that waits: the shift before, per shift
    spans = zip(
        estimate.stage_start_s, estimate.stage_end_s, estimate.stage_energy_kwh, strict=True
    )
    for i, (start, end, kwh) in enumerate(spans):
        cost = grid._shifted_g(start, end, kwh, shifts)
        if i == 0 or not waits[i]:  # the same shift as the stage before
            total, came_from = cost + total, None
        else:  # the stage before at a smaller shift: the least of those, the earliest of equals
            before = np.concatenate([[np.inf], total[:-1]])  # at one step less
            least = np.minimum.accumulate(before)
            lower = before < np.concatenate([[np.inf], least[:-1]])  # a new least: one back
            came_from = np.maximum.accumulate(np.where(lower, index - 1, 0))
            total = cost + least
        back.append(came_from)
    end_at = int(np.argmin(total))
    if not math.isfinite(total[end_at]):
        return None
    at = [0] * len(waits)
    at[-1] = end_at
    for i in range(len(waits) - 1, 0, -1):
        came_from = back[i]
        at[i - 1] = at[i] if came_from is None else int(came_from[at[i]])
    delays = [at[0] * grid.step_s] + [(b - a) * grid.step_s for a, b in itertools.pairwise(at)]
    return float(total[end_at]), tuple(delays)
