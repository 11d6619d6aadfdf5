"""Objectives and constraints: from a trial's metrics to the numbers an algorithm ranks.

One objective is one number, signed by the algorithm itself (`mode`). Several objectives, a
constraint, or a scalarisation turn a report into a *score*: a tuple of costs, smaller better,
``(violation, c_1, ..., c_k)``. The violation is the summed relative excess over the constraints
(0 when the trial is feasible), so every feasible trial ranks before every infeasible one and of
two infeasible trials the nearer one ranks first; c_i are the objectives signed for
minimisation, or one number when a scalarisation steers the search (the front is still reported
over the objectives). The score is what the decision log keeps, so a replay needs no metrics.

Measured metrics: what training a configuration costs, from what its trial used so far. A
trial at epoch e of a maximum budget B has spent ``X_spent`` (seconds of training and
validation, the energy and emissions the node's monitor booked to it, its share of the
instance's price); ``X = X_spent · B / e`` is the projection to the full budget, so trials at one
rung compare fairly however far they trained. With no maximum (unbounded ASHA) it is `X_spent`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from basht.tune.pareto import dominates, hypervolume, pareto_front, reference_point

if TYPE_CHECKING:
    from basht.experiment import SearchSpec

J_PER_KWH = 3.6e6
#: The measured metrics that need an energy monitor (the others need only the clock).
ENERGY_METRICS = frozenset(
    {"train_energy_kwh", "train_carbon_g", "train_energy_kwh_spent", "train_carbon_g_spent"}
)


@dataclass(frozen=True)
class Objective:
    metric: str
    mode: str = "max"

    def cost(self, value: float) -> float:
        return -value if self.mode == "max" else value


@dataclass(frozen=True)
class Constraint:
    metric: str
    max: float | None = None
    min: float | None = None

    def excess(self, value: float) -> float:
        """How far `value` is outside the bounds, relative to the bound's size (0 inside)."""
        over = 0.0
        if self.max is not None and value > self.max:
            over += (value - self.max) / max(abs(self.max), 1e-12)
        if self.min is not None and value < self.min:
            over += (self.min - value) / max(abs(self.min), 1e-12)
        return over


@dataclass(frozen=True)
class Objectives:
    """What a search optimises and keeps to; `score` is what its algorithm is told."""

    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()
    weights: tuple[float, ...] | None = None
    zeus: tuple[float, float] | None = None  # (eta, max_power_w)
    choose_weights: tuple[float, ...] | None = None
    tie_break: str = "eps-net"

    @classmethod
    def from_search(cls, search: SearchSpec) -> Objectives:
        scalar = search.scalarize
        choose = search.choose
        return cls(
            objectives=tuple(Objective(o.metric, o.mode) for o in search.objective_list),
            constraints=tuple(Constraint(c.metric, c.max, c.min) for c in search.constraints),
            weights=tuple(scalar.weights) if scalar and scalar.weights is not None else None,
            zeus=(scalar.zeus_eta, scalar.max_power_w)
            if scalar and scalar.zeus_eta is not None and scalar.max_power_w is not None
            else None,
            choose_weights=None if isinstance(choose, str) else tuple(choose.weights),
            tie_break=search.tie_break,
        )

    @property
    def first(self) -> Objective:
        return self.objectives[0]

    @property
    def width(self) -> int:
        """How many costs follow the violation in a score."""
        return 1 if self.weights is not None or self.zeus is not None else len(self.objectives)

    @property
    def names(self) -> list[str]:
        """Every metric a report must carry, objectives first."""
        names = [o.metric for o in self.objectives]
        names += [c.metric for c in self.constraints if c.metric not in names]
        if self.zeus is not None:
            names += [m for m in ("train_energy_kwh", "train_time_s") if m not in names]
        return names

    def missing(self, metrics: Mapping[str, Any]) -> str | None:
        """Why `metrics` cannot be scored (a metric absent or not a finite number), or None."""
        for name in self.names:
            value = metrics.get(name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                got = ", ".join(sorted(metrics)) or "nothing"
                return f"metric {name!r} missing or not finite in the report (got: {got})"
        return None

    def violation(self, metrics: Mapping[str, float]) -> float:
        return sum(c.excess(metrics[c.metric]) for c in self.constraints)

    def costs(self, metrics: Mapping[str, float]) -> tuple[float, ...]:
        """The objectives signed for minimisation (the front is drawn on these)."""
        return tuple(o.cost(metrics[o.metric]) for o in self.objectives)

    def score(self, metrics: Mapping[str, float]) -> tuple[float, ...]:
        """(violation, costs...) as the algorithm ranks it; check `missing` first."""
        costs = self.costs(metrics)
        if self.weights is not None:
            costs = (math.fsum(w * c for w, c in zip(self.weights, costs, strict=True)),)
        elif self.zeus is not None:
            eta, max_power_w = self.zeus
            joules = metrics["train_energy_kwh"] * J_PER_KWH
            costs = (eta * joules + (1 - eta) * max_power_w * metrics["train_time_s"],)
        return (self.violation(metrics), *costs)

    def choice_key(self, metrics: Mapping[str, float]) -> tuple[float, ...]:
        """Orders trials for "the best so far" while the run goes: feasible first, then the
        first objective (or the scalarised cost), then the other objectives."""
        score = self.score(metrics)
        return (score[0], *score[1:], *self.costs(metrics))

    def choose(self, trials: Mapping[int, Mapping[str, float]]) -> int | None:
        """The trial the test phase uses among `trials` (completed, by number): the rule of the
        experiment file among the trials `CompletedFront` keeps the final state of, those on the
        feasible front (or, while none is feasible, the least infeasible ones). A rule alone
        could pick another: Zeus's cost a dominated trial, weights a dominated one on a tie."""
        if not trials:
            return None
        numbers = sorted(trials)
        feasible = [n for n in numbers if self.violation(trials[n]) == 0]
        if feasible:
            front = pareto_front([self.costs(trials[n]) for n in feasible])
            candidates = [feasible[i] for i in front]
        else:
            least = min(self.violation(trials[n]) for n in numbers)
            candidates = [n for n in numbers if self.violation(trials[n]) == least]
        if self.choose_weights is None:
            return min(candidates, key=lambda n: (self.choice_key(trials[n]), n))
        # Normalised over the feasible trials (every trial while none is).
        costs = [self.costs(trials[n]) for n in feasible or numbers]
        low = [min(c[i] for c in costs) for i in range(len(self.objectives))]
        high = [max(c[i] for c in costs) for i in range(len(self.objectives))]

        def weighted(n: int) -> float:
            return math.fsum(
                w * ((v - lo) / (hi - lo) if hi > lo else 0.0)
                for w, v, lo, hi in zip(
                    self.choose_weights or (), self.costs(trials[n]), low, high, strict=True
                )
            )

        return min(candidates, key=lambda n: (weighted(n), n))


def front_summary(
    objectives: Objectives, trials: Mapping[int, Mapping[str, float]]
) -> dict[str, Any]:
    """The Pareto front of the feasible `trials` (by number), its hypervolume and the reference
    point it is measured from (the nadir of all scored trials plus 10 % of their range)."""
    numbers = sorted(trials)
    feasible = [n for n in numbers if objectives.violation(trials[n]) == 0]
    costs = [objectives.costs(trials[n]) for n in numbers]
    if not costs:
        return {"trials": [], "hypervolume": 0.0, "reference": None, "feasible": 0}
    reference = reference_point(costs)
    feasible_costs = [objectives.costs(trials[n]) for n in feasible]
    front = [feasible[i] for i in pareto_front(feasible_costs)] if feasible_costs else []
    return {
        "trials": front,
        "hypervolume": hypervolume(feasible_costs, reference) if feasible_costs else 0.0,
        "reference": dict(zip([o.metric for o in objectives.objectives], reference, strict=True)),
        "feasible": len(feasible),
    }


class CompletedFront:
    """The completed trials the test phase may still choose: the feasible non-dominated ones
    (keys are (violation, costs...)), or while none is feasible the least infeasible ones (all
    of them on a tie: a discrete metric, such as an accuracy under a floor, ties often)."""

    def __init__(self) -> None:
        self.members: dict[int, tuple[float, ...]] = {}

    def admits(self, key: Sequence[float]) -> bool:
        violation, costs = key[0], tuple(key[1:])
        if violation > 0:
            return all(m[0] >= violation for m in self.members.values())
        return not any(m[0] == 0 and dominates(m[1:], costs) for m in self.members.values())

    def add(self, trial_id: int, key: Sequence[float]) -> tuple[bool, list[int]]:
        """Add a completed trial: whether it is kept, and the members it pushes out."""
        key = tuple(key)
        if not self.admits(key):
            return False, []
        if key[0] > 0:
            dropped = [n for n, m in self.members.items() if m[0] > key[0]]
        else:
            dropped = [n for n, m in self.members.items() if m[0] > 0 or dominates(key[1:], m[1:])]
        for n in dropped:
            del self.members[n]
        self.members[trial_id] = key
        return True, dropped


@dataclass
class Spent:
    """What one trial used so far: training and validation time, booked energy and emissions."""

    time_s: float = 0.0
    energy_j: float | None = None
    carbon_g: float | None = None


def measured_metrics(
    spent: Spent, epochs: int, max_budget: int | None, usd_per_s: float | None
) -> dict[str, float]:
    """The measured metrics of a trial at `epochs` (see the module's docstring); energy and
    carbon only when a monitor booked them, cost only when the instance has a price."""
    scale = max_budget / epochs if max_budget is not None and 0 < epochs < max_budget else 1.0
    spent_values = {"train_time_s": spent.time_s}
    if spent.energy_j is not None:
        spent_values["train_energy_kwh"] = spent.energy_j / J_PER_KWH
    if spent.carbon_g is not None:
        spent_values["train_carbon_g"] = spent.carbon_g
    if usd_per_s is not None:
        spent_values["train_cost_usd"] = spent.time_s * usd_per_s
    metrics = {}
    for name, value in spent_values.items():
        metrics[f"{name}_spent"] = value
        metrics[name] = value * scale
    return metrics
