"""Budgets on what a job spends: `search.energy_budget_kwh` and `search.carbon_budget_g`.

A user who cares what tuning costs can cap it directly, rather than through a trial or time
limit that only stands in for it. The budget counts what the node's energy monitor has booked
since deploy, every attempt of a resumed run included: Table 2's energy_total and its emissions,
idle and overhead as much as trials, so a budget of 0.01 kWh ends the job at 0.01 kWh on the same
meter the run reports, on any system under test. The figure is measured or estimated as the
monitor's source is, and the reason the job ended says which. The meter is read at most twice a
second; what the running epochs spend until their next report comes on top.
"""

from __future__ import annotations

import time

from basht.energy.monitor import EnergyMonitor
from basht.experiment import SearchSpec

J_PER_KWH = 3.6e6


class SpendingLimits:
    """Called, the reason the job must end (the first budget used), or None while none is."""

    def __init__(self, search: SearchSpec, monitor: EnergyMonitor, every_s: float = 0.5):
        self.monitor, self.every_s = monitor, every_s
        self.energy_kwh, self.carbon_g = search.energy_budget_kwh, search.carbon_budget_g
        # Earlier attempts of a resumed run, as their monitors left them.
        carried = monitor.carried.values()
        self._before = (sum(a.energy_j for a in carried), sum(a.emissions_g for a in carried))
        self._source = "+".join(sorted(set(monitor.source_of.values())))
        self._read_at = float("-inf")
        self.reason: str | None = None

    def __bool__(self) -> bool:
        return self.energy_kwh is not None or self.carbon_g is not None

    def spent(self) -> tuple[float, float]:
        """(kWh, g CO2eq) the job has used so far."""
        joules, grams = self._before
        for account in self.monitor.all_accounts().values():
            joules += account.energy_j
            grams += account.emissions_g
        return joules / J_PER_KWH, grams

    def __call__(self) -> str | None:
        now = time.monotonic()
        if self.reason is not None or not self or now - self._read_at < self.every_s:
            return self.reason
        self._read_at = now
        kwh, grams = self.spent()
        if self.energy_kwh is not None and kwh >= self.energy_kwh:
            self.reason = f"energy budget of {self.energy_kwh:g} kWh used ({self._source})"
        elif self.carbon_g is not None and grams >= self.carbon_g:
            self.reason = f"carbon budget of {self.carbon_g:g} g CO2eq used ({self._source})"
        return self.reason
