"""Budgets on what a job spends: `search.energy_budget_kwh` and `search.carbon_budget_g`.

A user who cares what tuning costs can cap it directly, rather than through a trial or time
limit that only stands in for it. The budget counts what the node's energy monitor has booked
since deploy, every attempt of a resumed run included: Table 2's energy_total and its emissions,
idle and overhead as much as trials, so a budget of 0.01 kWh ends the job at 0.01 kWh on the same
meter the run reports. The figure is measured or estimated as the monitor's source is, and the
reason the job ended says which. The Tuner asks about twice a second; what the running epochs
spend until their next report comes on top.
"""

from __future__ import annotations

from collections.abc import Callable

from basht.energy.monitor import EnergyMonitor
from basht.experiment import SearchSpec

J_PER_KWH = 3.6e6


def spending_limits(search: SearchSpec, monitor: EnergyMonitor) -> list[Callable[[], str | None]]:
    """One limit per budget the search sets, each naming its budget once it is used."""
    budgets = [
        (0, search.energy_budget_kwh, J_PER_KWH, "kWh", "energy"),
        (1, search.carbon_budget_g, 1.0, "g CO2eq", "carbon"),
    ]
    budgets = [b for b in budgets if b[1] is not None]
    if not budgets:
        return []
    # Earlier attempts of a resumed run, as their monitors left them.
    before = (
        sum(a.energy_j for a in monitor.carried.values()),
        sum(a.emissions_g for a in monitor.carried.values()),
    )

    def spent() -> tuple[float, float]:
        joules, grams = before
        for account in monitor.all_accounts().values():
            joules += account.energy_j
            grams += account.emissions_g
        return joules, grams

    source = "+".join(sorted(set(monitor.source_of.values())))

    def limit(index: int, budget: float, unit_scale: float, unit: str, name: str):
        def reached() -> str | None:
            if spent()[index] / unit_scale < budget:
                return None
            return f"{name} budget of {budget:g} {unit} used ({source})"

        return reached

    return [limit(*b) for b in budgets]
