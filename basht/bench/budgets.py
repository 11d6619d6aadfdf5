"""Budgets on what a job spends: `search.energy_budget_kwh`, `carbon_budget_g`, `cost_budget_usd`.

A user who cares what tuning costs can cap it directly, rather than through a trial or time
limit that only stands in for it. Each budget counts from deploy, every attempt of a resumed run
included, on the meter the run reports, on any system under test: energy and emissions as the
node's energy monitor books them (Table 2's energy_total and its emissions, idle and overhead as
much as trials; measured or estimated as the monitor's source is, and the reason the job ended
says which), the bill as OC counts it (`basht.energy.billing.cost_so_far_usd`). The meters are
read at most twice a second; what the running epochs spend until their next report comes on top.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from basht.bench.lifecycle import RunContext
from basht.energy.billing import cost_so_far_usd
from basht.energy.monitor import J_PER_KWH, EnergyMonitor
from basht.experiment import SearchSpec


class SpendingLimits:
    """Called, the reason the job must end (the first budget used), or None while none is."""

    def __init__(
        self,
        search: SearchSpec,
        monitor: EnergyMonitor,
        cost_usd: Callable[[float], float] | None = None,
        every_s: float = 0.5,
    ):
        """`cost_usd(now)` is the bill so far (needed for a cost budget)."""
        self.monitor, self.cost_usd, self.every_s = monitor, cost_usd, every_s
        self.energy_kwh, self.carbon_g = search.energy_budget_kwh, search.carbon_budget_g
        self.usd = search.cost_budget_usd if cost_usd is not None else None
        # Earlier attempts of a resumed run, as their monitors left them.
        carried = monitor.carried.values()
        self._before = (sum(a.energy_j for a in carried), sum(a.emissions_g for a in carried))
        self._source = "+".join(sorted(set(monitor.source_of.values())))
        self._read_at = float("-inf")
        self.reason: str | None = None

    @classmethod
    def of(cls, ctx: RunContext) -> SpendingLimits | None:
        """The limits of the run `ctx` runs, on its monitor and its store; None when it sets no
        budget or has no monitor (then there is nothing to ask)."""
        store, run_id, experiment = ctx.store, ctx.run_id, ctx.experiment
        if ctx.monitor is None:
            return None
        limits = cls(
            experiment.search,
            ctx.monitor,
            lambda now: cost_so_far_usd(store, run_id, experiment, now),
        )
        return limits if limits else None

    def __bool__(self) -> bool:
        return any(b is not None for b in (self.energy_kwh, self.carbon_g, self.usd))

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
        elif self.usd is not None and self.cost_usd and self.cost_usd(time.time()) >= self.usd:
            self.reason = f"cost budget of {self.usd:g} USD used"
        return self.reason
