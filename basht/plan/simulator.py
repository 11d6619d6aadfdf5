"""A plan's completion time and billed cost, estimated by Monte Carlo with stragglers.

Each stage runs its trials on the plan's instances for that stage: every trial gets the same
number of GPUs on one instance (a power of two, as many as the stage's GPUs allow, so that a
late stage with few trials trains each one faster), and when there are more trials than slots
they run in waves. A trial's time is its overhead (loading, checkpointing, hand-offs) plus its
epochs x a seconds-per-epoch, both drawn from the profile; the stage ends at a barrier when its
slowest slot is done (synchronous SHA promotes only then), so the more trials a barrier waits
for, the more a straggler costs.

At a barrier the cluster follows the plan: instances beyond the next stage's count are released
(billed up to the barrier), and new ones are requested then and become ready after a start-up
time drawn from the profile; trials on instances that were already up start at once. With
pre-provisioning, the new instances of a stage are requested before its barrier instead: when the
stage before is expected to end (its mean time) less the mean start-up, or at the barrier if it
comes first. They are billed from then, wait for the barrier if they are early, and hide their
start-up if they are not. The job
starts by requesting its first stage's instances, and ends when the last stage does. A stage may
wait before it starts (a plan's `delays_s`, to run when the grid is cleaner): at the barrier every
instance is released, and the stage's instances are requested when the wait is over, so nothing
is billed or draws power while it waits, and they all start up again. Every
instance is billed for its whole life by the provider's rule (e.g. per second, 60 s minimum),
plus the profile's data movement for each instance launched. With the profile's `power_w`,
the energy too: every instance's idle watts over its life, and each busy GPU's share of the
difference to busy watts over the seconds its trials ran.

Every plan is simulated with the same random draws (common random numbers): a straggler is the
same trial in the same stage under every plan, so two plans differ by what the plans change.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from basht.energy.billing import billed_usd_per_run
from basht.errors import BashtError
from basht.experiment import ShaJob, Stage
from basht.plan.carbon import Grid, place
from basht.plan.profile import Profile

Plan = tuple[int, ...]  # instances in each stage
Delays = tuple[float, ...]  # seconds each stage waits, holding no instances, before it starts


@dataclass(frozen=True)
class Estimate:
    """A plan's completion time and cost over the simulated runs: mean and 95th percentile."""

    jct_s: float
    jct_p95_s: float
    cost_usd: float
    cost_p95_usd: float
    stage_end_s: tuple[float, ...] = ()  # when each stage's barrier falls, on average
    energy_kwh: float | None = None  # mean, with the profile's power_w (an estimate)
    # When each stage starts (the barrier before it, or the end of its wait), on average.
    stage_start_s: tuple[float, ...] = ()
    # Each stage's share of energy_kwh: its instances' lives within [start, end] and its trials
    # (an instance pre-provisioned for it counts in the stage before until the barrier).
    stage_energy_kwh: tuple[float, ...] = ()
    delays_s: Delays = ()  # the wait before each stage; () for none
    emissions_g: float | None = None  # on a carbon intensity series (`basht.plan.carbon`)
    stage_emissions_g: tuple[float, ...] = ()

    def completion_s(self, confidence: str) -> float:
        """The completion time that must meet the deadline: the p95, or the mean."""
        return self.jct_p95_s if confidence == "p95" else self.jct_s


@dataclass(frozen=True)
class Layout:
    """How a stage runs on `instances`: GPUs per trial, concurrent trials, waves."""

    gpus_per_trial: int
    slots: int
    waves: int


def stage_layout(stage: Stage, instances: int, gpus_per_instance: int) -> Layout:
    """Every trial the same power-of-two GPUs on one instance, as many as the stage's GPUs
    allow (at most an instance's); more trials than slots run in waves."""
    share = min(gpus_per_instance, (instances * gpus_per_instance) // stage.trials)
    gpus = 1 << (share.bit_length() - 1) if share >= 1 else 1
    slots = instances * (gpus_per_instance // gpus)
    return Layout(gpus, slots, math.ceil(stage.trials / slots))


def stage_levels(stage: Stage, max_instances: int, gpus_per_instance: int) -> list[int]:
    """The fewest instances for each distinct layout of a stage (GPUs per trial, waves),
    ascending: more instances with the same layout cost more for (almost) nothing. A layout
    changes only where a trial's GPUs double or a wave goes, so it steps from one of those
    counts to the next, in about the square root of the trials' steps, not one per count."""
    trials, gpus, out, m = stage.trials, gpus_per_instance, [], 1
    while m <= max_instances:
        out.append(m)
        layout = stage_layout(stage, m, gpus)
        more_gpus = 2 * layout.gpus_per_trial
        per_instance = gpus // layout.gpus_per_trial
        next_gpus = -(-more_gpus * trials // gpus) if more_gpus <= gpus else math.inf
        next_wave = (
            -(-trials // ((layout.waves - 1) * per_instance)) if layout.waves > 1 else math.inf
        )
        m = min(next_gpus, next_wave)
    return out


def _checked_delays(delays_s: Sequence[float], stages: int) -> Delays:
    """A wait of 0 or more seconds before each of `stages` stages (none given: no waits)."""
    delays = tuple(float(d) for d in delays_s) or (0.0,) * stages
    if len(delays) != stages or not all(math.isfinite(d) and d >= 0 for d in delays):
        raise BashtError(f"delays {delays}: expected {stages} waits of 0 or more seconds")
    return delays


def _shifted(estimate: Estimate, delays: Delays) -> Estimate:
    """`estimate` of a plan with waits of no length, its stages each later by the waits before
    them (every run by the same seconds, so the p95 too)."""
    after = tuple(itertools.accumulate(delays))
    return replace(
        estimate,
        jct_s=estimate.jct_s + after[-1],
        jct_p95_s=estimate.jct_p95_s + after[-1],
        stage_end_s=tuple(t + d for t, d in zip(estimate.stage_end_s, after, strict=True)),
        stage_start_s=tuple(t + d for t, d in zip(estimate.stage_start_s, after, strict=True)),
        delays_s=delays,
    )


def grows(plan: Plan) -> bool:
    """Whether a stage after the first has more instances than the one before: only then are
    instances requested at a barrier, so only then can pre-provisioning change the estimate."""
    return any(later > before for before, later in itertools.pairwise(plan))


class Simulator:
    """`sim(plan)` -> Estimate, cached per plan; `calls` counts the plans simulated.

    A job under way is simulated from a barrier: `from_stage` is the next stage (plans then
    give the instances of the stages from there on) and `live_s` the ages of the instances
    up at the barrier, oldest first. They are billed from their launch, as the run bills them;
    time is counted from the barrier. `preprovision` requests each stage's new instances ahead
    of its barrier (module docstring). `delays_s` is a wait before each stage that every plan
    keeps (a carbon plan's, re-planned); `carbon`, the grid `placed` places plans on.
    """

    def __init__(
        self,
        job: ShaJob,
        profile: Profile,
        *,
        runs: int = 200,
        seed: int = 0,
        max_instances: int,
        from_stage: int = 0,
        live_s: tuple[float, ...] = (),
        preprovision: bool = False,
        delays_s: Sequence[float] = (),
        carbon: Grid | None = None,
    ):
        if runs < 1:
            raise BashtError(f"runs: expected 1 or more, got {runs}")
        if not 0 <= from_stage < len(job.stages):
            raise BashtError(f"stage {from_stage}: the job has stages 0..{len(job.stages) - 1}")
        self.job, self.profile, self.runs = job, profile, runs
        self.stages = job.stages[from_stage:]
        self.max_instances = max_instances
        self.live_s = tuple(float(age) for age in live_s)
        self.preprovision = preprovision
        self._mean_startup_s = float(np.mean(profile.startup_s))
        train, start = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])
        self._u_train = [train.random((runs, stage.trials)) for stage in self.stages]
        # Instance j's start-up draws come first for j, so they do not depend on max_instances.
        self._u_start = start.random((max_instances, len(self.stages), runs)).transpose(2, 1, 0)
        self.delays_s = _checked_delays(delays_s, len(self.stages))
        self.carbon = carbon
        self._cache: dict[Plan, Estimate] = {}
        self._waiting: dict[tuple[Plan, tuple[bool, ...]], Estimate] = {}
        self._placed: dict[Plan, Estimate | None] = {}
        self._levels: dict[int, list[int]] = {}
        self._work: dict[tuple[int, Layout], tuple[np.ndarray, np.ndarray]] = {}
        self._plain: Simulator | None = None  # the same without pre-provisioning
        self.calls = 0

    def preprovisioned(self) -> Simulator:
        """This simulator with pre-provisioning, on the same draws. A plan that never grows
        requests nothing ahead, so its estimate is this simulator's: asked of this one, it is
        simulated (and counted in `calls`) once for both."""
        if self.preprovision:
            return self
        ahead = copy.copy(self)
        ahead.preprovision, ahead._plain = True, self
        ahead._cache, ahead._waiting, ahead._placed, ahead.calls = {}, {}, {}, 0
        return ahead

    def levels(self, stage_index: int) -> list[int]:
        """A stage's `stage_levels`, up to max_instances."""
        if stage_index not in self._levels:
            self._levels[stage_index] = stage_levels(
                self.stages[stage_index], self.max_instances, self.profile.gpus_per_instance
            )
        return self._levels[stage_index]

    def layout(self, stage: Stage, instances: int) -> Layout:
        return stage_layout(stage, instances, self.profile.gpus_per_instance)

    def __call__(self, plan: Plan, delays_s: Sequence[float] | None = None) -> Estimate:
        """The plan's estimate, with a wait of `delays_s` before each stage (default the
        simulator's own `delays_s`, none unless given)."""
        plan = self._checked(plan)
        delays = self.delays_s if delays_s is None else _checked_delays(delays_s, len(plan))
        if any(delays):
            return _shifted(self.waiting(plan, tuple(d > 0 for d in delays)), delays)
        cached = self._cache.get(plan)
        if cached is None and self._plain is not None and not grows(plan):
            cached = self._cache[plan] = self._plain(plan, ())
        if cached is None:
            cached = self._cache[plan] = self._simulate(plan)
            self.calls += 1
        return cached

    def waiting(self, plan: Plan, waits: tuple[bool, ...]) -> Estimate:
        """The plan with a wait of no length before each stage that `waits` marks: its instances
        all released at the barrier and requested anew. A wait's length changes nothing else
        (the same draws, a fresh start-up), so a plan with waits is this estimate shifted."""
        plan = self._checked(plan)
        if not any(waits):
            return self(plan, ())
        key = (plan, tuple(bool(w) for w in waits))
        cached = self._waiting.get(key)
        if cached is None:
            cached = self._waiting[key] = self._simulate(plan, key[1])
            self.calls += 1
        return cached

    def placed(self, plan: Plan) -> Estimate | None:
        """The plan with the waits that make its emissions on the simulator's `carbon` grid
        least while it meets the grid's deadline (`basht.plan.carbon.place`); None if it misses
        the deadline without any."""
        if self.carbon is None:
            raise BashtError("objective carbon: the planner was given no carbon intensity series")
        plan = self._checked(plan)
        if plan not in self._placed:
            self._placed[plan] = place(self, plan, self.carbon)
        return self._placed[plan]

    def _checked(self, plan: Plan) -> Plan:
        plan = tuple(int(m) for m in plan)
        if len(plan) != len(self.stages) or not all(1 <= m <= self.max_instances for m in plan):
            raise BashtError(
                f"plan {plan}: expected {len(self.stages)} stages of 1..{self.max_instances} "
                "instances"
            )
        return plan

    def _simulate(self, plan: Plan, waits: tuple[bool, ...] = ()) -> Estimate:
        runs = self.runs
        # Each live instance's launch and ready times.
        launched = np.repeat(-np.asarray(self.live_s, dtype=float)[None, :], runs, axis=0)
        ready = np.zeros((runs, len(self.live_s)))
        billed = np.zeros(runs)
        alive_s = np.zeros(runs)  # instance-seconds, for the idle energy
        gpu_s = np.zeros(runs)  # GPU-seconds the trials ran, for the busy energy
        stage_alive_s = np.zeros((runs, len(plan)))  # instance-seconds within each stage
        stage_gpu_s = np.zeros((runs, len(plan)))
        barrier = np.zeros(runs)
        began = np.zeros(runs)  # when the stage before the barrier began
        starts, ends = [], []
        for i, (stage, instances) in enumerate(zip(self.stages, plan, strict=True)):
            waits_here = bool(waits) and waits[i]
            if waits_here:  # it waits holding no instance: all released at the barrier
                billed += self._bill(barrier[:, None] - launched)
                alive_s += (barrier[:, None] - launched).sum(axis=1)
                launched, ready = launched[:, :0], ready[:, :0]
            have = launched.shape[1]
            if instances < have:  # released at the barrier: billed up to it
                billed += self._bill(barrier[:, None] - launched[:, instances:])
                alive_s += (barrier[:, None] - launched[:, instances:]).sum(axis=1)
                launched, ready = launched[:, :instances], ready[:, :instances]
            elif instances > have:
                billed += (instances - have) * self.profile.data_usd_per_instance
                start = self.profile.startup_quantile(self._u_start[:, i, have:instances])
                asked = barrier
                if self.preprovision and i > 0 and not waits_here:
                    # When the stage before should end, less a start-up; up to the barrier, the
                    # new instances draw their idle watts in that stage.
                    expected = ends[-1] - starts[-1]
                    asked = np.minimum(began + max(0.0, expected - self._mean_startup_s), barrier)
                    stage_alive_s[:, i - 1] += (instances - have) * (barrier - asked)
                launched = np.hstack([launched, np.repeat(asked[:, None], instances - have, 1)])
                ready = np.hstack([ready, asked[:, None] + start])
            began = barrier
            starts.append(float(began.mean()))
            barrier, busy_s = self._stage_end(stage, i, np.maximum(ready, barrier[:, None]))
            gpu_s += busy_s
            stage_gpu_s[:, i] = busy_s
            stage_alive_s[:, i] += (barrier[:, None] - np.maximum(launched, began[:, None])).sum(
                axis=1
            )
            ends.append(float(barrier.mean()))
        billed += self._bill(barrier[:, None] - launched)
        alive_s += (barrier[:, None] - launched).sum(axis=1)
        energy = self._energy_kwh(alive_s, gpu_s)
        return Estimate(
            jct_s=float(barrier.mean()),
            jct_p95_s=float(np.quantile(barrier, 0.95)),
            cost_usd=float(billed.mean()),
            cost_p95_usd=float(np.quantile(billed, 0.95)),
            stage_end_s=tuple(ends),
            energy_kwh=energy,
            stage_start_s=tuple(starts),
            stage_energy_kwh=()
            if energy is None
            else tuple(
                self._energy_kwh(stage_alive_s[:, i], stage_gpu_s[:, i]) or 0.0
                for i in range(len(plan))
            ),
        )

    def _energy_kwh(self, alive_s: np.ndarray, gpu_s: np.ndarray) -> float | None:
        if self.profile.power_w is None:
            return None
        idle, busy = self.profile.power_w
        per_gpu = (busy - idle) / self.profile.gpus_per_instance
        return float((idle * alive_s + per_gpu * gpu_s).mean()) / 3.6e6

    def _stage_end(self, stage: Stage, i: int, ready: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """When the slowest slot finishes (trials go in order to slots in order of readiness),
        and the GPU-seconds the stage's trials ran, in each simulated run."""
        layout = self.layout(stage, ready.shape[1])
        per_instance = self.profile.gpus_per_instance // layout.gpus_per_trial
        slot_ready = np.sort(np.repeat(ready, per_instance, axis=1), axis=1)  # (runs, slots)
        busy, gpu_s = self._stage_work(i, layout)
        return (slot_ready[:, : busy.shape[1]] + busy).max(axis=1), gpu_s

    def _stage_work(self, i: int, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
        """Each used slot's busy seconds (runs x slots) and the GPU-seconds of stage i's trials
        in each run. They depend on the stage's layout only, so every plan that gives the stage
        the same layout reuses them: the trial times are drawn once per layout, not per plan."""
        key = (i, layout)
        if key not in self._work:
            stage, u = self.stages[i], self._u_train[i]  # a straggler is slow in its overhead too
            seconds = stage.epochs * self.profile.epoch_quantile(layout.gpus_per_trial, u)
            seconds += self.profile.overhead_quantile(u)
            padded = np.zeros((self.runs, layout.waves * layout.slots))
            padded[:, : stage.trials] = seconds
            busy = padded.reshape(self.runs, layout.waves, layout.slots).sum(axis=1)
            used = min(layout.slots, stage.trials)
            self._work[key] = (busy[:, :used].copy(), seconds.sum(axis=1) * layout.gpus_per_trial)
        return self._work[key]

    def _bill(self, lifetimes_s: np.ndarray) -> np.ndarray:
        """Each run's billed cost of instances that lived `lifetimes_s` (runs x instances)."""
        return billed_usd_per_run(self.profile.price, lifetimes_s)
