"""The greedy planner: from the cheapest static cluster that meets the deadline, change one
stage's instance count at a time, taking the move with the best cost-marginal benefit

    M = (cost_best - cost_move) / (JCT_move - JCT_best)

(dollars saved per second given up; a move that saves money and time is taken first), while
the deadline holds, until no move saves money. A stage's candidate counts are its breakpoints:
the fewest instances for each distinct (GPUs per trial, waves): more instances with the same
layout cost more and gain at most a little from spreading stragglers. Starting from the best static plan, the result is never worse than
it; trying every level of a stage, not only +-1 instance, steps over the plateaus of a cost
surface that is a staircase.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from basht.errors import BashtError
from basht.plan.job import ShaJob
from basht.plan.profile import Profile
from basht.plan.simulator import Estimate, Layout, Plan, Simulator

#: Which statistic of the simulated completion times must meet the deadline.
CONFIDENCE = ("mean", "p95")


@dataclass(frozen=True)
class PlanResult:
    """The plan, its estimate and each stage's layout, beside the best static plan's."""

    plan: Plan
    estimate: Estimate
    layouts: tuple[Layout, ...]
    static: Plan
    static_estimate: Estimate
    deadline_s: float
    confidence: str
    simulations: int

    @property
    def saving(self) -> float:
        """The best static plan's cost over this plan's (2.0: half the cost)."""
        cost = self.estimate.cost_usd
        return self.static_estimate.cost_usd / cost if cost > 0 else 1.0


def _jct(estimate: Estimate, confidence: str) -> float:
    return estimate.jct_p95_s if confidence == "p95" else estimate.jct_s


def best_static(sim: Simulator, deadline_s: float, confidence: str = "p95") -> Plan | None:
    """The cheapest plan with one cluster size for the whole job that meets the deadline."""
    best: tuple[float, Plan] | None = None
    # A count that is no stage's breakpoint has every stage's layout of a smaller one: dearer.
    counts = sorted({m for i in range(len(sim.stages)) for m in sim.levels(i)})
    for m in counts:
        plan = (m,) * len(sim.stages)
        estimate = sim(plan)
        if _jct(estimate, confidence) <= deadline_s and (
            best is None or estimate.cost_usd < best[0]
        ):
            best = (estimate.cost_usd, plan)
    return None if best is None else best[1]


def greedy(sim: Simulator, start: Plan, deadline_s: float, confidence: str = "p95") -> Plan:
    plan, current = start, sim(start)
    while True:
        best: tuple[float, float, Plan] | None = None  # (M, -cost, plan)
        for i in range(len(plan)):
            for m in sim.levels(i):
                if m == plan[i]:
                    continue
                move = (*plan[:i], m, *plan[i + 1 :])
                estimate = sim(move)
                if _jct(estimate, confidence) > deadline_s or estimate.cost_usd >= current.cost_usd:
                    continue
                slower = _jct(estimate, confidence) - _jct(current, confidence)
                saved = current.cost_usd - estimate.cost_usd
                benefit = math.inf if slower <= 0 else saved / slower
                key = (benefit, -estimate.cost_usd, move)
                if best is None or key[:2] > best[:2]:
                    best = key
        if best is None:
            return plan
        plan, current = best[2], sim(best[2])


def brute_force(sim: Simulator, deadline_s: float, confidence: str = "p95") -> Plan | None:
    """The cheapest plan of all (max_instances ** stages of them): for checking the greedy."""
    best: tuple[float, Plan] | None = None
    counts = range(1, sim.max_instances + 1)
    for plan in itertools.product(counts, repeat=len(sim.stages)):
        estimate = sim(plan)
        if _jct(estimate, confidence) <= deadline_s and (
            best is None or estimate.cost_usd < best[0]
        ):
            best = (estimate.cost_usd, plan)
    return None if best is None else best[1]


def default_max_instances(job: ShaJob, profile: Profile) -> int:
    """Enough instances to run every first-stage trial at once on one GPU each."""
    return max(1, math.ceil(job.stages[0].trials / profile.gpus_per_instance))


def plan_job(
    job: ShaJob,
    profile: Profile,
    deadline_s: float,
    *,
    confidence: str = "p95",
    max_instances: int | None = None,
    runs: int = 200,
    seed: int = 0,
) -> PlanResult:
    """The cheapest plan the greedy finds whose completion time (mean or p95) meets the deadline."""
    if confidence not in CONFIDENCE:
        raise BashtError(f"confidence {confidence!r}: expected one of {', '.join(CONFIDENCE)}")
    if not deadline_s > 0:
        raise BashtError(f"deadline: expected a time > 0, got {deadline_s!r} s")
    cap = max_instances or default_max_instances(job, profile)
    if cap < 1:
        raise BashtError(f"max_instances: expected 1 or more, got {cap}")
    sim = Simulator(job, profile, runs=runs, seed=seed, max_instances=cap)
    static = best_static(sim, deadline_s, confidence)
    if static is None:
        fastest = _jct(sim((cap,) * len(job.stages)), confidence)
        raise BashtError(
            f"no plan of up to {cap} instance{'s' if cap > 1 else ''} meets the deadline of "
            f"{deadline_s:g} s: the largest static cluster takes {fastest:.0f} s ({confidence});"
            " give a later deadline or more instances"
        )
    plan = greedy(sim, static, deadline_s, confidence)
    return PlanResult(
        plan=plan,
        estimate=sim(plan),
        layouts=tuple(sim.layout(s, m) for s, m in zip(sim.stages, plan, strict=True)),
        static=static,
        static_estimate=sim(static),
        deadline_s=deadline_s,
        confidence=confidence,
        simulations=sim.calls,
    )
