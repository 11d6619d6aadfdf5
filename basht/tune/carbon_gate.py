"""A carbon-aware schedule as the Tuner's gate: how many trials may run now.

The Tuner measures; this estimates what is left and asks the shifter (`basht.energy.shifting`)
how wide to run now. The work left is the search's expected epochs (`expected_epochs`) less
those run, times the mean epoch measured so far. Before the first epoch has been measured one
trial runs, to measure it. Times are on the executor's clock; the series and the deadline are in
series time, which a replayed series maps (`ScaledIntensity`), so a run whose hour of grid passes
in a second is scheduled as the hour would be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from basht.energy.shifting import CarbonShifter


@dataclass
class CarbonGate:
    """Asks `shifter` at every decision point; keeps each decision for the results."""

    shifter: CarbonShifter
    max_workers: int
    total_epochs: float | None  # what the search trains in all, as far as it is known
    to_series: Any = None  # executor clock -> series time (None: the same)
    to_clock: Any = None  # series time -> executor clock
    log: list[dict[str, Any]] = field(default_factory=list)

    def allowed(self, now: float, epochs_done: int, epoch_s: float | None) -> tuple[int, float]:
        series_now = self.to_series(now) if self.to_series else now
        step = self.shifter.step_s
        if epoch_s is None or self.total_epochs is None:
            # Nothing measured yet (one trial measures), or no bound on the work: full width.
            workers = 1 if epoch_s is None and self.total_epochs is not None else self.max_workers
            reason = "measuring an epoch" if workers == 1 else "work not bounded: full width"
            return self._record(series_now, workers, series_now + step, reason)
        scale = self._time_scale()
        left_s = (self.total_epochs - epochs_done) * epoch_s * scale
        if left_s <= 0:  # more ran than expected, and the search goes on: finish it at once
            return self._record(
                series_now, self.max_workers, series_now + step, "past the estimate"
            )
        decision = self.shifter.decide(series_now, left_s)
        return self._record(series_now, decision.workers, decision.until, decision.reason)

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
