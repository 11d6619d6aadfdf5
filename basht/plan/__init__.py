"""RubberBand: the cheapest cloud allocation plan that finishes a tuning job before its deadline.

A synchronous successive-halving job (`ShaJob`) runs in stages, each ending at a barrier. A plan
gives each stage a number of instances; `simulate` estimates a plan's completion time and billed
cost from a `Profile` (measured epoch times per GPU count, instance start-up times) by Monte Carlo
with stragglers, and `plan_job` searches plans greedily by cost-marginal benefit, starting from
the cheapest static cluster that meets the deadline. `profiling` measures a profile on this
machine; `executor` runs a plan on an elastic cluster.
"""

from basht.plan.job import ShaJob, Stage
from basht.plan.planner import PlanResult, best_static, brute_force, plan_job
from basht.plan.profile import Profile, load_profile
from basht.plan.simulator import Estimate, Simulator

__all__ = [
    "Estimate",
    "PlanResult",
    "Profile",
    "ShaJob",
    "Simulator",
    "Stage",
    "best_static",
    "brute_force",
    "load_profile",
    "plan_job",
]
