"""The energy-time cost Zeus minimises: one number that trades joules against seconds."""

from __future__ import annotations


def zeus_cost(energy_j: float, time_s: float, eta_knob: float, max_power_w: float) -> float:
    """eta·energy + (1 − eta)·max_power·time, in joules.

    The time term is priced at the job's maximum power, so with eta = 0 the cost is "time as if
    every second burned max power" and with eta = 1 it is pure energy. The expression (and so the
    floating-point rounding) is Zeus's `zeus.utils.metric.zeus_cost`, term for term, so the bandit
    sees bit-identical rewards.
    """
    return eta_knob * energy_j + (1 - eta_knob) * max_power_w * time_s
