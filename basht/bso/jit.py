"""Zeus's just-in-time power limit optimizer: profile a batch size's power limits at the start of
its first run, then train that batch size at the limit of least cost for good.

The choice minimises the job's own cost, eta·energy + (1 − eta)·max_power·time, over measurements
of the same amount of training at each limit, so the power limit and the batch size are judged by
one number and a job ends up with the (batch size, power limit) pair of least cost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from basht.bso.cost import zeus_cost
from basht.bso.errors import BSOError
from basht.bso.power import PowerLimits

log = logging.getLogger(__name__)

WINDOW = "basht-bso-power-limit"


@dataclass(frozen=True)
class LimitMeasurement:
    """Time and energy (all the job's GPUs) of one profiled slice of training at `power_limit_w`."""

    power_limit_w: float
    time_s: float
    energy_j: float


def cheapest_limit(
    measurements: Sequence[LimitMeasurement], eta_knob: float, max_power_w: float
) -> float:
    """The limit whose slice cost least; on a tie the higher limit (it finishes sooner).

    Zeus's `ZeusCost` selector prices time at the highest profiled limit × the GPU count; here it
    is the job's `max_power`, the same number, so the limit is chosen by the bandit's own cost.
    """
    if not measurements:
        raise BSOError("no power limit was profiled")
    ordered = sorted(measurements, key=lambda m: -m.power_limit_w)
    best = min(ordered, key=lambda m: zeus_cost(m.energy_j, m.time_s, eta_knob, max_power_w))
    return best.power_limit_w


class Phase(Enum):
    """Where the step-driven profile is: waiting out the first steps, warming a limit up, or
    measuring it."""

    WAIT = "wait"
    WARMUP = "warmup"
    PROFILE = "profile"


class JitProfiler:
    """Measures each candidate limit, highest first, during the first steps of a run.

    Steps (`on_step_begin`, Zeus's `GlobalPowerLimitOptimizer`): `wait_steps` at the highest
    limit, then for each limit `warmup_steps` to settle and `profile_steps` measured in a monitor
    window. An epoch that ends during a limit's warmup or measurement restarts that limit in the
    next epoch, so evaluation never counts as training. A script that reports no steps profiles
    one limit per epoch instead, each epoch's measurement being its limit's. `done` turns true
    once every limit is measured; `measurements` then holds them.
    """

    def __init__(
        self,
        limits: PowerLimits,
        monitor: Any,
        energy_of: Callable[[Any], float],
        candidates_w: Sequence[float],
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
    ) -> None:
        if not candidates_w:
            raise BSOError("no power limit to profile")
        if wait_steps < 0 or warmup_steps < 0 or profile_steps < 1:
            raise BSOError(
                f"wait {wait_steps}, warmup {warmup_steps}, profile {profile_steps} steps: "
                "expected 0 or more, 0 or more, and 1 or more"
            )
        self.limits = limits
        self.monitor = monitor
        self.energy_of = energy_of
        self.candidates_w = list(candidates_w)
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.measurements: list[LimitMeasurement] = []
        self.done = False
        self._index = 0
        self._phase = Phase.WAIT
        self._left = wait_steps
        self._stepped = False
        limits.set_w(self.candidates_w[0])

    @property
    def current_w(self) -> float:
        return self.candidates_w[self._index]

    def on_step_begin(self) -> None:
        if self.done:
            return
        self._stepped = True
        while self._left == 0:  # the phase is over when this step begins
            self._advance()
            if self.done:
                return
        self._left -= 1

    def on_epoch_end(self, time_s: float, energy_j: float) -> None:
        """The end of an epoch, with its time and energy (used when no steps were reported)."""
        if self.done:
            return
        if not self._stepped:
            self._record(LimitMeasurement(self.current_w, time_s, energy_j))
            return
        if self._phase is Phase.PROFILE:
            self.monitor.end_window(WINDOW)  # cut short by evaluation: measured again
        if self._phase is not Phase.WAIT:
            log.info("power limit %g W: profile interrupted by the epoch's end", self.current_w)
            self._phase, self._left = Phase.WARMUP, self.warmup_steps

    def close(self) -> None:
        """Drop an open measurement window (the run ended before the profile did)."""
        if not self.done and self._phase is Phase.PROFILE:
            self.monitor.end_window(WINDOW)
        self.done = True

    def _advance(self) -> None:
        if self._phase is Phase.WAIT:
            self.limits.set_w(self.current_w)
            self._phase, self._left = Phase.WARMUP, self.warmup_steps
        elif self._phase is Phase.WARMUP:
            self.monitor.begin_window(WINDOW)
            self._phase, self._left = Phase.PROFILE, self.profile_steps
        else:
            m = self.monitor.end_window(WINDOW)
            self._record(LimitMeasurement(self.current_w, m.time_s, self.energy_of(m)))
            self._phase, self._left = Phase.WARMUP, self.warmup_steps

    def _record(self, measurement: LimitMeasurement) -> None:
        self.measurements.append(measurement)
        log.info(
            "power limit %g W: %.3g s, %.3g J",
            measurement.power_limit_w,
            measurement.time_s,
            measurement.energy_j,
        )
        self._index += 1
        if self._index == len(self.candidates_w):
            self.done = True
        else:
            self.limits.set_w(self.current_w)
