"""The planner: RubberBand's greedy, then moves of two stages at once.

From the cheapest static cluster that meets the deadline, the greedy changes one stage's
instance count at a time, taking the move with the best cost-marginal benefit

    M = (cost_best - cost_move) / (JCT_move - JCT_best)

(dollars saved per second given up; a move that saves money and time is taken first), while
the deadline holds, until no move saves money. Then pairs of stages are changed at once (the
cheapest pair move that meets the deadline, the greedy again from it) until no pair saves money:
that finds plans that move instances from one stage to another, which single moves miss.

A stage's candidate counts are its breakpoints: the fewest instances for each distinct (GPUs per
trial, waves); more instances with the same layout cost more and gain at most a little from
spreading stragglers. Starting from the best static plan, the result is never worse than it;
trying every level of a stage, not only +-1 instance, steps over the plateaus of a cost surface
that is a staircase.

A search that stops at a local optimum can end dearer at a later deadline than at an earlier
one. A plan that meets a deadline meets every later one, so the planner keeps the cheapest plan
the search finds at any deadline up to the given one (`cheapest`): a later deadline never gets a
dearer plan, and no plan is dearer than the search's at the deadline itself.

With the objective carbon, a plan is also placed in time (`basht.plan.carbon`): the search
compares sizings by their emissions on the grid with the waits that make them least, and a
sizing meets the deadline if it does without waits (its waits then fit in the slack).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from basht.errors import BashtError
from basht.experiment import ShaJob
from basht.plan.carbon import Grid
from basht.plan.profile import Profile
from basht.plan.simulator import Estimate, Layout, Plan, Simulator, stage_levels

#: Which statistic of the simulated completion times must meet the deadline.
CONFIDENCE = ("mean", "p95")
#: What a plan spends, which the planner keeps least: the bill, the energy (with a profile's
#: power_w; an estimate), or the emissions of that energy on a grid whose intensity changes,
#: with each stage placed in time (`basht.plan.carbon`).
OBJECTIVES = ("cost", "energy", "carbon")
#: Whether a plan requests a stage's new instances ahead of its barrier: never, always, or
#: where that makes the plan cheaper (the planner plans both ways and keeps the cheaper).
PREPROVISION = ("off", "on", "auto")
#: The most plans, and simulated trial-runs, one step of the search may take (`SearchSize`).
#: Planning takes dozens of steps, more for larger jobs: at these sizes, a minute or two on one
#: core; beyond them, hours, or the memory runs out. sha-81 (examples/plan) on its 21 instances
#: at 200 runs: 236 plans, 1.1e7 trial-runs.
MAX_SEARCH_PLANS = 2000
MAX_SEARCH_TRIAL_RUNS = 2e8


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
    max_instances: int | None = None  # the most instances it could use
    runs: int = 200  # simulated runs per plan
    seed: int = 0  # of the simulated stragglers
    preprovision: bool = False  # new instances are requested ahead of their stage's barrier
    objective: str = "cost"  # what it keeps least: the bill, the energy, or the emissions
    carbon: CarbonPlan | None = None  # on a grid: the plan beside the carbon-agnostic one

    @property
    def saving(self) -> float:
        """The best static plan's cost over this plan's (2.0: half the cost)."""
        cost = self.estimate.cost_usd
        return self.static_estimate.cost_usd / cost if cost > 0 else 1.0

    @property
    def carbon_saving(self) -> float | None:
        """The carbon-agnostic plan's emissions over this plan's, on a grid."""
        if self.carbon is None:
            return None
        mine, agnostic = self.estimate.emissions_g, self.carbon.agnostic_estimate.emissions_g
        return None if mine is None or agnostic is None or mine <= 0 else agnostic / mine

    @property
    def energy_saving(self) -> float | None:
        """The best static plan's energy over this plan's, when the profile gives power_w."""
        mine, static = self.estimate.energy_kwh, self.static_estimate.energy_kwh
        return None if mine is None or static is None or mine <= 0 else static / mine


@dataclass(frozen=True)
class CarbonPlan:
    """A plan on a grid: what its emissions are compared with. The plan's own emissions, waits
    and stage spans are in its estimate."""

    grid: Grid
    at_once: Estimate  # the same plan without waits, with its emissions
    agnostic: Plan  # the carbon-agnostic plan: the cheapest, started at once
    agnostic_estimate: Estimate  # with its emissions
    note: str | None = None  # why it was planned by energy, where it was


def _jct(estimate: Estimate, confidence: str) -> float:
    return estimate.completion_s(confidence)


def spent(estimate: Estimate, objective: str = "cost") -> float:
    """What the planner keeps least: the mean bill (USD), the mean energy (kWh) or the
    emissions on the grid (grams)."""
    if objective == "cost":
        return estimate.cost_usd
    if estimate.energy_kwh is None:
        raise BashtError(
            f"objective {objective}: the profile gives no power_w (idle and busy watts)"
        )
    if objective == "carbon":
        if estimate.emissions_g is None:
            raise BashtError("objective carbon: the estimate has no emissions (not placed)")
        return estimate.emissions_g
    return estimate.energy_kwh


def _value(sim: Simulator, plan: Plan, objective: str) -> float:
    """What `plan` spends: by carbon, placed in time on the simulator's grid (infinite where
    it misses the grid's deadline even without waits)."""
    if objective != "carbon":
        return spent(sim(plan), objective)
    placed = sim.placed(plan)
    return math.inf if placed is None else spent(placed, objective)


def _static_plans(sim: Simulator) -> list[Plan]:
    """One cluster size for the whole job, at each count some stage has a breakpoint at: a count
    that is no stage's breakpoint has every stage's layout of a smaller one, and costs more."""
    counts = sorted({m for i in range(len(sim.stages)) for m in sim.levels(i)})
    return [(m,) * len(sim.stages) for m in counts]


def _least(
    sim: Simulator,
    plans: Iterable[Plan],
    deadline_s: float,
    confidence: str,
    objective: str,
    below: float = math.inf,
    blocked: list[float] | None = None,
) -> Plan | None:
    """Of `plans`, the one that meets the deadline and spends least, if it spends below `below`.
    To `blocked` go the completion times of the plans only the deadline kept from being it."""
    best: tuple[float, Plan] | None = None
    late: list[tuple[float, float]] = []  # (spent, completion time)
    for plan in plans:
        estimate = sim(plan)
        value = _value(sim, plan, objective)
        if value >= below:
            continue
        if _jct(estimate, confidence) > deadline_s:
            late.append((value, _jct(estimate, confidence)))
        elif best is None or value < best[0]:
            best = (value, plan)
    if blocked is not None:  # a tie would go to the earlier plan: count it as one too
        blocked.extend(jct for value, jct in late if best is None or value <= best[0])
    return None if best is None else best[1]


def best_static(
    sim: Simulator,
    deadline_s: float,
    confidence: str = "p95",
    objective: str = "cost",
    blocked: list[float] | None = None,
) -> Plan | None:
    """The cheapest plan with one cluster size for the whole job that meets the deadline."""
    return _least(sim, _static_plans(sim), deadline_s, confidence, objective, blocked=blocked)


def fastest(sim: Simulator, confidence: str = "p95") -> Plan:
    """The plan found to finish soonest: the fastest static cluster, then one stage at a time
    changed to the level that finishes sooner. No static cluster need be the fastest plan: where
    more GPUs per trial were measured slower, or trials share slots unluckily, a stage is
    fastest at fewer instances than another stage is."""
    plan = min(_static_plans(sim), key=lambda p: _jct(sim(p), confidence))
    while True:
        best = min(
            _single_moves_of(sim, plan),
            key=lambda p: (_jct(sim(p), confidence), spent(sim(p))),
            default=None,
        )
        if best is None or _jct(sim(best), confidence) >= _jct(sim(plan), confidence):
            return plan
        plan = best


def greedy(
    sim: Simulator,
    start: Plan,
    deadline_s: float,
    confidence: str = "p95",
    objective: str = "cost",
    blocked: list[float] | None = None,
) -> Plan:
    """RubberBand's greedy from `start`: the single move with the best marginal benefit (what it
    saves of the objective, per second of completion time given up) while the deadline holds.
    To `blocked` go the completion times of the moves only the deadline kept from being taken."""
    plan, current = start, sim(start)
    while True:
        best: tuple[float, float, Plan] | None = None  # (M, -spent, plan)
        late: list[tuple[tuple[float, float], float]] = []  # ((M, -spent), completion time)
        now = _value(sim, plan, objective)
        for move in _single_moves_of(sim, plan):
            estimate = sim(move)
            value = _value(sim, move, objective)
            if value >= now:
                continue
            slower = _jct(estimate, confidence) - _jct(current, confidence)
            benefit = math.inf if slower <= 0 else (now - value) / slower
            if _jct(estimate, confidence) > deadline_s:
                late.append(((benefit, -value), _jct(estimate, confidence)))
            elif best is None or (benefit, -value) > best[:2]:
                best = (benefit, -value, move)
        if blocked is not None:  # a tie would go to the earlier move: count it as one too
            blocked.extend(jct for key, jct in late if best is None or key >= best[:2])
        if best is None:
            return plan
        plan, current = best[2], sim(best[2])


def _single_moves_of(sim: Simulator, plan: Plan) -> Iterator[Plan]:
    """Every plan that differs from `plan` in one stage, at one of its levels."""
    for i in range(len(plan)):
        for m in sim.levels(i):
            if m != plan[i]:
                yield (*plan[:i], m, *plan[i + 1 :])


def pair_moves(
    sim: Simulator,
    plan: Plan,
    deadline_s: float,
    confidence: str = "p95",
    objective: str = "cost",
    blocked: list[float] | None = None,
) -> Plan:
    """Improve a plan no single move improves (the greedy's): change two stages at once, each to
    any of its levels, take the cheapest such plan that meets the deadline, run the greedy from
    it, and repeat until no pair saves money. Moving instances from one stage to another is
    what a single move cannot do without first breaking the deadline or raising the cost.
    To `blocked` go the completion times of the plans only the deadline kept from being taken."""
    plan = greedy(sim, plan, deadline_s, confidence, objective, blocked)
    while True:
        current = _value(sim, plan, objective)
        moves = _pair_moves_of(sim, plan)
        better = _least(sim, moves, deadline_s, confidence, objective, current, blocked)
        if better is None:
            return plan
        plan = greedy(sim, better, deadline_s, confidence, objective, blocked)


def _pair_moves_of(sim: Simulator, plan: Plan) -> Iterator[Plan]:
    """Every plan that differs from `plan` in two stages at once, each at one of its levels."""
    for i, j in itertools.combinations(range(len(plan)), 2):
        for a, b in itertools.product(sim.levels(i), sim.levels(j)):
            if (a, b) != (plan[i], plan[j]):
                move = list(plan)
                move[i], move[j] = a, b
                yield tuple(move)


def search(
    sim: Simulator,
    deadline_s: float,
    confidence: str = "p95",
    objective: str = "cost",
    blocked: list[float] | None = None,
) -> Plan | None:
    """The planner's search at one deadline: from the best static cluster (or, where none meets
    the deadline, the fastest plan found), the greedy, then pair moves. None if nothing found
    meets the deadline."""
    start = best_static(sim, deadline_s, confidence, objective, blocked)
    if start is None:
        start = fastest(sim, confidence)
        if _jct(sim(start), confidence) > deadline_s:
            return None
    return pair_moves(sim, start, deadline_s, confidence, objective, blocked)


def _rank(sim: Simulator, plan: Plan, confidence: str, objective: str) -> tuple[float, float]:
    """Plans compare by what they spend, then, where that ties (instances already billed for
    their first minute cost nothing more to keep), by when they finish: sooner is better."""
    return _value(sim, plan, objective), _jct(sim(plan), confidence)


def cheapest(
    sim: Simulator, deadline_s: float, confidence: str = "p95", objective: str = "cost"
) -> Plan | None:
    """The cheapest plan the search finds at any deadline up to `deadline_s`, so that a later
    deadline never gets a dearer plan: a plan that meets a tighter deadline meets this one, and
    the search alone, stopping at a local optimum, can end dearer at a later deadline.

    The search sees a deadline only through which of the plans it looks at meet it, so it finds
    the same plan from one deadline up to the soonest completion time among the plans that only
    the deadline kept it from taking (`blocked`). Searching at those times in turn, from the
    fastest plan's on, covers every deadline up to `deadline_s` in a few searches on cached
    estimates. Of plans that spend the same, the one that finishes sooner. None if no plan found
    meets the deadline."""
    tighter, best = _jct(sim(fastest(sim, confidence)), confidence), None
    while tighter <= deadline_s:
        blocked: list[float] = []
        plan = search(sim, tighter, confidence, objective, blocked)
        if plan is not None and (
            best is None
            or _rank(sim, plan, confidence, objective) < _rank(sim, best, confidence, objective)
        ):
            best = plan
        tighter = min((jct for jct in blocked if jct > tighter), default=math.inf)
    return best


def brute_force(
    sim: Simulator, deadline_s: float, confidence: str = "p95", objective: str = "cost"
) -> Plan | None:
    """The cheapest plan of all (max_instances ** stages of them): for checking the greedy."""
    counts = range(1, sim.max_instances + 1)
    plans = itertools.product(counts, repeat=len(sim.stages))
    return _least(sim, plans, deadline_s, confidence, objective)


@dataclass(frozen=True)
class SearchSize:
    """What one step of the search simulates: every plan one or two stages away from its plan
    (a greedy and a pair-move pass), each drawing every trial of every stage and a start-up for
    each instance in each stage, once per simulated run."""

    plans: int
    draws: int  # per plan

    @property
    def trial_runs(self) -> int:
        return self.plans * self.draws


def search_size(job: ShaJob, profile: Profile, max_instances: int, runs: int) -> SearchSize:
    """One step of the search's size. With more draws per plan than a step may take, the plans
    are not counted (one or more per stage and pair of stages): the size is at least that."""
    stages = job.stages
    draws = runs * (sum(stage.trials for stage in stages) + len(stages) * max_instances)
    levels = [1] * len(stages)
    if draws <= MAX_SEARCH_TRIAL_RUNS:
        levels = [len(stage_levels(s, max_instances, profile.gpus_per_instance)) for s in stages]
    plans = sum(levels) + sum(a * b for a, b in itertools.combinations(levels, 2))
    return SearchSize(plans, draws)


def check_size(job: ShaJob, profile: Profile, max_instances: int, runs: int) -> None:
    """Refuse, before simulating anything, a job the planner cannot search in reasonable time:
    its steps grow with the trials, the stages, the instances and the simulated runs."""
    size = search_size(job, profile, max_instances, runs)
    stages = len(job.stages)
    job_s = (
        f"job too large to plan: {job.trials} trials over {stages} stage{'s' * (stages > 1)} on "
        f"up to {_count(max_instances)} instance{'s' * (max_instances > 1)}"
    )
    if size.trial_runs > MAX_SEARCH_TRIAL_RUNS:
        raise BashtError(
            f"{job_s} at {_count(runs)} run{'s' * (runs > 1)} per plan: a step of the search "
            f"simulates {_count(size.trial_runs)} trial-runs, over the limit of "
            f"{MAX_SEARCH_TRIAL_RUNS:.0e}; "
            "give fewer trials (search.max_trials), runs (--runs) or instances (--max-instances)"
        )
    if size.plans > MAX_SEARCH_PLANS:
        raise BashtError(
            f"{job_s}: a step of the search simulates {size.plans} plans, over the limit of "
            f"{MAX_SEARCH_PLANS}; give fewer trials (search.max_trials) or instances "
            "(--max-instances)"
        )


def _count(n: int) -> str:
    """A count as a message shows it: whole below a million, else 1.2e+07 (or, past what a float
    holds, the number of its digits)."""
    if n < 1_000_000:
        return str(n)
    return f"{n:.1e}" if n < 10**300 else f"a {len(str(n))}-digit number of"


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
    preprovision: str = "off",
    objective: str = "cost",
    grid: Grid | None = None,
) -> PlanResult:
    """The cheapest plan the planner finds whose completion time (mean or p95) meets the
    deadline (with `objective` "energy", the one using the least energy; with "carbon", the
    one emitting least on `grid`, each stage placed in time); with `preprovision` "auto",
    planned with and without pre-provisioning, the better kept. With a `grid`, the result
    gives the plan's emissions on it beside the carbon-agnostic plan's (the cheapest, at once)."""
    if confidence not in CONFIDENCE:
        raise BashtError(f"confidence {confidence!r}: expected one of {', '.join(CONFIDENCE)}")
    if objective not in OBJECTIVES:
        raise BashtError(f"objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    if objective != "cost" and profile.power_w is None:
        raise BashtError(
            f"objective {objective}: the profile gives no power_w (a whole instance's idle and "
            "busy watts, e.g. power_w: {idle: 400, busy: 1400})"
        )
    if objective == "carbon" and grid is None:
        raise BashtError(
            "objective carbon: needs the grid's carbon intensity (measure.carbon: a csv series)"
        )
    if preprovision not in PREPROVISION:
        raise BashtError(
            f"preprovision {preprovision!r}: expected one of {', '.join(PREPROVISION)}"
        )
    if not deadline_s > 0:
        raise BashtError(f"deadline: expected a time > 0, got {deadline_s!r} s")
    cap = max_instances or default_max_instances(job, profile)
    if cap < 1:
        raise BashtError(f"max_instances: expected 1 or more, got {cap}")
    check_size(job, profile, cap, runs)
    note = None
    if grid is not None:
        grid = replace(grid, deadline_s=deadline_s, confidence=confidence)
        if objective == "carbon" and grid.flat(deadline_s):
            note = (
                "the grid's intensity is one value until the deadline: emissions are that value "
                "times the energy, and waiting only adds start-ups, so the plan is planned by "
                "energy"
            )
            objective = "energy"
    sim = Simulator(job, profile, runs=runs, seed=seed, max_instances=cap, carbon=grid)
    # Pre-provisioned, a plan that never grows is the same plan: simulated once for both ways.
    ahead = sim.preprovisioned()
    ways = {"off": (sim,), "on": (ahead,), "auto": (sim, ahead)}[preprovision]
    found = _best_of(ways, deadline_s, confidence, objective)
    if found is None:
        raise _none_meets(ways, deadline_s, confidence, cap)
    way, plan = found
    # A static cluster never scales, so it pre-provisions nothing.
    static = best_static(sim, deadline_s, confidence, objective)
    if static is None:  # shown beside the plan as the best static cluster: the fastest, late
        static = min(_static_plans(sim), key=lambda p: _jct(sim(p), confidence))
    estimate, static_estimate = _placed(way, plan, objective), _placed(sim, static, objective)
    carbon = None
    if grid is not None and profile.power_w is not None:
        agnostic = _best_of(ways, deadline_s, confidence, "cost")
        assert agnostic is not None  # a plan meets the deadline, so a cheapest one does
        if estimate.emissions_g is None:  # planned by energy or cost: at once, on the grid
            estimate = grid.emitted(estimate)
        if static_estimate.emissions_g is None:
            static_estimate = grid.emitted(static_estimate)
        carbon = CarbonPlan(
            grid=grid,
            at_once=grid.emitted(way(plan)),
            agnostic=agnostic[1],
            agnostic_estimate=grid.emitted(agnostic[0](agnostic[1])),
            note=note,
        )
    return PlanResult(
        plan=plan,
        estimate=estimate,
        layouts=tuple(sim.layout(s, m) for s, m in zip(sim.stages, plan, strict=True)),
        static=static,
        static_estimate=static_estimate,
        deadline_s=deadline_s,
        confidence=confidence,
        simulations=sim.calls + sum(other.calls for other in ways if other is not sim),
        max_instances=cap,
        runs=runs,
        seed=seed,
        preprovision=way.preprovision,
        objective=objective,
        carbon=carbon,
    )


def _best_of(
    ways: Sequence[Simulator], deadline_s: float, confidence: str, objective: str
) -> tuple[Simulator, Plan] | None:
    """The best plan found of each way to simulate (with and without pre-provisioning), the
    better kept (a tie keeps the first); None if none meets the deadline."""
    planned = [
        (_value(way, plan, objective), i, way, plan)
        for i, way in enumerate(ways)
        if (plan := cheapest(way, deadline_s, confidence, objective)) is not None
    ]
    if not planned:
        return None
    _, _, way, plan = min(planned, key=lambda p: p[:2])
    return way, plan


def _placed(sim: Simulator, plan: Plan, objective: str) -> Estimate:
    """The plan's estimate: by carbon, with its waits (without, if it misses the deadline)."""
    placed = sim.placed(plan) if objective == "carbon" else None
    return sim(plan) if placed is None else placed


def _none_meets(
    ways: Sequence[Simulator], deadline_s: float, confidence: str, cap: int
) -> BashtError:
    """No plan meets the deadline: the error names the fastest plan found."""
    way, plan = min(
        ((way, fastest(way, confidence)) for way in ways),
        key=lambda found: _jct(found[0](found[1]), confidence),
    )
    return BashtError(
        f"no plan of up to {cap} instance{'s' if cap > 1 else ''} meets the deadline of "
        f"{deadline_s:g} s: the fastest plan found ({' '.join(map(str, plan))} instances per "
        f"stage) takes {_jct(way(plan), confidence):.0f} s ({confidence}); give a later "
        "deadline or more instances"
    )


@dataclass(frozen=True)
class Replan:
    """The remaining stages planned again at a barrier, from what the run has seen so far."""

    stage: int  # the first stage it plans
    plan: Plan  # instances for each stage from `stage` on
    estimate: Estimate  # of those stages, timed from the barrier
    speed: float  # the run's trials took `speed` times the profiled time
    left_s: float  # what was left of the deadline at the barrier
    confidence: str

    @property
    def meets(self) -> bool:
        return _jct(self.estimate, self.confidence) <= self.left_s


def observed_speed(
    profile: Profile, trials: Sequence[tuple[int, int, float]], job: ShaJob
) -> float | None:
    """How much longer (>1) or shorter (<1) the run's trials took than the profile expects: the
    ratio of their seconds to the profile's expected seconds, over `trials` as (stage, GPUs per
    trial, seconds). None before a trial has ended."""
    if not trials:
        return None
    expected = sum(profile.trial_s(gpus, job.stages[stage].epochs) for stage, gpus, _ in trials)
    return sum(seconds for *_, seconds in trials) / expected


def replan(
    job: ShaJob,
    profile: Profile,
    stage: int,
    *,
    left_s: float,
    live_s: Sequence[float],
    speed: float = 1.0,
    current: Plan | None = None,
    confidence: str = "p95",
    max_instances: int | None = None,
    runs: int = 200,
    seed: int = 0,
    preprovision: bool = False,
    objective: str = "cost",
    delays_s: Sequence[float] = (),
) -> Replan:
    """The cheapest plan for the stages from `stage` on that meets what is left of the deadline,
    with the profile's trials `speed` times as long and the instances aged `live_s` (oldest
    first) already up: the cheaper of what `cheapest` finds (so more time left never gets a
    dearer plan) and of `current` (the rest of the plan as it was) improved by the search, so it
    is never worse than keeping the plan. When no plan meets the deadline any more, it is the
    cheapest of those that finish soonest. `delays_s`: the waits the plan gives the stages from
    `stage` on, which every plan of them keeps (in the run's seconds)."""
    cap = max(max_instances or default_max_instances(job, profile), 1)
    sim = Simulator(
        job,
        profile.scaled(speed),
        runs=runs,
        seed=seed,
        max_instances=cap,
        from_stage=stage,
        live_s=tuple(live_s),
        preprovision=preprovision,
        delays_s=delays_s,
    )
    found = [cheapest(sim, left_s, confidence, objective)]
    if current is not None:  # the rest of the plan as it was, improved, if it still meets it
        current = tuple(min(m, cap) for m in current)
        if _jct(sim(current), confidence) <= left_s:
            found.append(pair_moves(sim, current, left_s, confidence, objective))
    meets = [plan for plan in found if plan is not None]
    if meets:
        plan = min(meets, key=lambda p: _rank(sim, p, confidence, objective))
    else:  # late whatever it does: as soon as it can, at the least cost for that
        start = fastest(sim, confidence)
        plan = pair_moves(sim, start, _jct(sim(start), confidence), confidence, objective)
    return Replan(stage, plan, sim(plan), speed, left_s, confidence)
