"""RubberBand: the cheapest cloud allocation plan that finishes a tuning job before its deadline.

A synchronous successive-halving job (`ShaJob`) runs in stages, each ending at a barrier. A plan
gives each stage a number of instances; `simulate` estimates a plan's completion time and billed
cost from a `Profile` (measured epoch times per GPU count, instance start-up times) by Monte Carlo
with stragglers, and `plan_job` searches plans greedily by cost-marginal benefit, starting from
the cheapest static cluster that meets the deadline; `replan` plans the remaining stages again at
a barrier of a run, from the time left and how long its trials took against the profile.
With `objective="carbon"` and a `Grid` (an intensity series and where the plan starts on it),
each stage is also placed in time: it may wait for a cleaner grid (`carbon`).
`profiling` measures a profile on this machine; `executor` runs a plan on an elastic cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.experiment import ShaJob, Stage  # the job a plan is for, as the file gives it
    from basht.plan.carbon import Grid
    from basht.plan.planner import (
        CarbonPlan,
        PlanResult,
        Replan,
        best_static,
        brute_force,
        observed_speed,
        plan_job,
        replan,
    )
    from basht.plan.profile import Profile, load_profile
    from basht.plan.simulator import Estimate, Simulator

__all__ = [
    "CarbonPlan",
    "Estimate",
    "Grid",
    "PlanResult",
    "Profile",
    "Replan",
    "ShaJob",
    "Simulator",
    "Stage",
    "best_static",
    "brute_force",
    "load_profile",
    "observed_speed",
    "plan_job",
    "replan",
]

__getattr__, __dir__ = lazy_exports(__name__)
