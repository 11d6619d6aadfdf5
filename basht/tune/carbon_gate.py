"""A carbon-aware schedule as the Tuner's gate: how many trials may run now.

The Tuner measures; this estimates what is left and asks the shifter (`basht.energy.shifting`)
how wide to run now. The work left is the search's expected epochs (`expected_epochs`) less
those run, times what an epoch costs: the mean epoch measured so far plus `Z` standard errors,
or the worker-seconds the gate has allowed per epoch run if that is more. The mean alone runs
low early on: configurations differ tenfold in size, and the first epochs to end are the
shortest (the long ones are still running, and show only in the time allowed). Until the first
epoch has been measured every worker runs: the work is unknown, so the slack is too, holding
workers back could cost a deadline that has none, and the first epochs are work the search
needs anyway.

A trial trains its epochs one after another (`chain_epochs`: `max_budget` at most), so the work
is not divisible: the shifter is told that chain and plans for the workers that stand idle
beside it. The chain is timed at the longest epoch measured, not the mean: the trials that
train longest are the survivors of the rungs, which are often the slow configurations, and the
last of them is what a deadline waits for. When the shifter's guard says the deadline needs full speed, that holds to the end
of its slot: the estimate moves with every epoch, and a gate that held back whenever it dipped
would pause and resume trials at every report while the slack ran out.

Times are on the executor's clock; the series and the deadline are in series time, which a
replayed series maps (`ScaledIntensity`), so a run whose hour of grid passes in a second is
scheduled as the hour would be.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from basht.energy.shifting import CarbonShifter

log = logging.getLogger(__name__)

#: The shifter's guard (`basht.energy.shifting.Decision.reason`).
FULL_SPEED = "deadline needs full speed"
#: Standard errors added to the mean epoch: a one-sided bound of about 98 % for a normal mean.
Z = 2.0


@dataclass
class CarbonGate:
    """Asks `shifter` at every decision point; keeps each decision for the results."""

    shifter: CarbonShifter
    max_workers: int
    total_epochs: float | None  # what the search trains in all, as far as it is known
    to_series: Any = None  # executor clock -> series time (None: the same)
    to_clock: Any = None  # series time -> executor clock
    chain_epochs: float | None = None  # the most epochs one trial trains (max_budget); None: 0
    log: list[dict[str, Any]] = field(default_factory=list)
    # Epochs measured, and the sum of their squared seconds (clock), for the mean's spread.
    _n: int = field(default=0, init=False, repr=False)
    _sum_s: float = field(default=0.0, init=False, repr=False)
    _sum_sq: float = field(default=0.0, init=False, repr=False)
    _longest_s: float = field(default=0.0, init=False, repr=False)  # the longest epoch (clock)
    # Series time until which the guard's full speed holds.
    _full_until: float = field(default=-math.inf, init=False, repr=False)
    # Worker-seconds allowed so far (clock), and the width allowed since `_since`.
    _allowed_s: float = field(default=0.0, init=False, repr=False)
    _since: float | None = field(default=None, init=False, repr=False)
    _width: int = field(default=0, init=False, repr=False)
    _warned: bool = field(default=False, init=False, repr=False)  # the deadline said late

    def allowed(self, now: float, epochs_done: int, epoch_s: float | None) -> tuple[int, float]:
        if self._since is not None and now > self._since:
            self._allowed_s += self._width * (now - self._since)
        self._since = now
        workers, until = self._decide(now, epochs_done, epoch_s)
        self._width = workers
        return workers, until

    def _decide(self, now: float, epochs_done: int, epoch_s: float | None) -> tuple[int, float]:
        series_now = self.to_series(now) if self.to_series else now
        step = self.shifter.step_s
        if self.total_epochs is None:
            return self._record(
                series_now, self.max_workers, series_now + step, "work not bounded: full width"
            )
        if epoch_s is None:  # nothing measured yet: the work is unknown, and so is the slack
            return self._record(
                series_now, self.max_workers, series_now + step, "measuring an epoch"
            )
        left_epochs = self.total_epochs - epochs_done
        if left_epochs <= 0:  # more ran than expected, and the search goes on: finish it at once
            return self._record(
                series_now, self.max_workers, series_now + step, "past the estimate"
            )
        if series_now < self._full_until:
            return self._record(series_now, self.max_workers, self._full_until, FULL_SPEED)
        scale = self._time_scale()
        central_s = left_epochs * epoch_s * scale  # the mean alone: what the warning trusts
        epoch_s = self._epoch_bound(epoch_s, epochs_done) * scale
        chain = min(self.chain_epochs or 0.0, left_epochs) * max(epoch_s, self._longest_s * scale)
        # The chain is part of the work: when its epochs are timed slower, the work is at least it.
        work = max(left_epochs * epoch_s, chain)
        decision = self.shifter.decide(series_now, work, chain_s=chain)
        if decision.reason == FULL_SPEED:
            self._full_until = decision.until
            self._say_if_late(series_now, central_s)
        return self._record(series_now, decision.workers, decision.until, decision.reason)

    def _say_if_late(self, series_now: float, work_s: float) -> None:
        """Once: the work cannot end by the deadline even at full width (the first epochs
        measured show what no estimate before the run could). Judged on the mean epoch alone,
        not on the cautious bound the guard plans with: that bound is there to act early, and
        in the first minutes it can be several times the work, which a warning must not say."""
        if self._warned:
            return
        finish = self.shifter.earliest_finish(series_now, work_s)
        if finish > self.shifter.deadline:
            self._warned = True
            when = datetime.fromtimestamp(finish, UTC).isoformat(timespec="seconds")
            log.warning(
                "schedule.deadline cannot be met: the work left (about %.3g worker-hours) ends "
                "%s at the earliest at full width; running at full width",
                work_s / 3600,
                when.replace("+00:00", "Z"),
            )

    def _epoch_bound(self, mean_s: float, epochs_done: int) -> float:
        """The mean epoch plus `Z` standard errors of it, or the worker-seconds allowed per
        epoch run if more. The epochs reported since the last call count as one sample each at
        their mean (their own values when one was reported, as at nearly every call)."""
        if epochs_done > self._n:
            total_s = mean_s * epochs_done
            new = epochs_done - self._n
            mean_new = (total_s - self._sum_s) / new
            self._n, self._sum_s = epochs_done, total_s
            self._sum_sq += new * mean_new * mean_new
            self._longest_s = max(self._longest_s, mean_new)
        n = self._n
        bound = mean_s
        if n >= 2:
            var = max(0.0, (self._sum_sq - n * mean_s * mean_s) / (n - 1))
            bound += Z * math.sqrt(var / n)
        if epochs_done > 0:
            bound = max(bound, self._allowed_s / epochs_done)
        return bound

    def _time_scale(self) -> float:
        """Series seconds per clock second."""
        if self.to_series is None:
            return 1.0
        return self.to_series(1.0) - self.to_series(0.0)

    def _record(
        self, series_now: float, workers: int, series_until: float, reason: str
    ) -> tuple[int, float]:
        if not self.log or (self.log[-1]["workers"], self.log[-1]["reason"]) != (workers, reason):
            self.log.append({"at": series_now, "workers": workers, "reason": reason})
        until = self.to_clock(series_until) if self.to_clock else series_until
        return workers, until
