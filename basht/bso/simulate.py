"""Replay recurrences of a trace job against a real BSO server, and the fixed-batch-size baselines.

Each recurrence is what a user's recurring job does: ask the server for a batch size, train
(here: epochs priced from the trace), report every epoch, stop when told; a run that fails is
relaunched (up to `max_tries`) until one reaches the target. The recurrence's cost is the sum over
its runs, failed ones included.

Two client behaviours:

* `epoch` (default): a real client, as `BatchSizeOptimizer` and Zeus's client behave: one report
  per epoch with cumulative time and energy, and the server decides when to stop. With
  `power_limits`, the job also optimizes the GPU power limit: a batch size's first run profiles
  every limit during its first epoch (priced as the trace's mean epoch over the limits) and sends
  the profile, and every run of that size trains at the limit the server chose from it.
* `zeus`: Zeus's own reference harness (`tests/optimizer/batch_size/simulate_with_server.py`):
  the client predicts early stopping from its own minimum cost and reports once per run. It
  exists to check that our server picks the same batch sizes as Zeus's legacy simulator.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from basht.bso.cost import zeus_cost
from basht.bso.errors import BSOError
from basht.bso.http import BSOClient
from basht.bso.spec import (
    Assignment,
    JobSpecFromClient,
    PowerMeasurement,
    PowerProfile,
    TrainingResult,
    TrialId,
)
from basht.bso.trace import Epoch, TraceJob

Protocol = Literal["epoch", "zeus"]
MAX_TRIES = 20  # Zeus's simulator gives a recurrence 20 tries before calling the target unreachable


@dataclass(frozen=True)
class Run:
    """One training run: which recurrence, which batch size, how it ended and what it cost."""

    recurrence: int
    batch_size: int
    epochs: int
    time_s: float
    energy_j: float
    cost: float
    converged: bool
    trial_number: int | None = None
    power_limit_w: float | None = None  # the limit after any profiling (None: the highest)


@dataclass
class SimulationResult:
    """All runs of one policy on one trace job."""

    policy: str
    job: str
    seed: int
    recurrences: int
    eta_knob: float
    max_power_w: float
    runs: list[Run] = field(default_factory=list)

    @property
    def energy_j(self) -> float:
        return sum(r.energy_j for r in self.runs)

    @property
    def time_s(self) -> float:
        return sum(r.time_s for r in self.runs)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.runs)

    @property
    def batch_sizes(self) -> list[int]:
        return [r.batch_size for r in self.runs]

    def by_recurrence(self) -> list[list[Run]]:
        grouped: list[list[Run]] = [[] for _ in range(self.recurrences)]
        for run in self.runs:
            grouped[run.recurrence - 1].append(run)
        return grouped

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "job": self.job,
            "seed": self.seed,
            "recurrences": self.recurrences,
            "eta_knob": self.eta_knob,
            "max_power_w": self.max_power_w,
            "energy_j": self.energy_j,
            "time_s": self.time_s,
            "cost": self.cost,
            "runs": [asdict(r) for r in self.runs],
        }


def job_spec(
    trace: TraceJob,
    seed: int,
    eta_knob: float = 0.5,
    beta_knob: float | None = 2.0,
    job_id: str | None = None,
    power_limits: bool = False,
) -> JobSpecFromClient:
    """The BSO job for a trace job, with Zeus's defaults for the workload."""
    w = trace.workload
    prefix = f"trace-{w.name}-{trace.gpu}"
    return JobSpecFromClient(
        job_id=job_id or f"{prefix}-s{seed}-{secrets.token_hex(3)}",
        job_id_prefix=prefix,
        batch_sizes=trace.batch_sizes,
        default_batch_size=trace.default_batch_size,
        eta_knob=eta_knob,
        beta_knob=beta_knob,
        target_metric=w.target_metric,
        higher_is_better_metric=w.higher_is_better,
        max_epochs=w.max_epochs,
        mab_seed=seed,
        optimize_power_limit=power_limits,
        max_power=trace.max_power_w,
        number_of_gpus=1,
        gpu_model=trace.gpu,
    )


def _metric(trace: TraceJob, reached: bool) -> float:
    """A validation metric on the right side of the target (the trace only says when it is hit)."""
    w = trace.workload
    step = 1.0 if w.higher_is_better else -1.0
    return w.target_metric if reached else w.target_metric - step


def simulate_server(
    trace: TraceJob,
    client: BSOClient,
    recurrences: int = 50,
    seed: int = 1,
    eta_knob: float = 0.5,
    beta_knob: float | None = 2.0,
    protocol: Protocol = "epoch",
    job_id: str | None = None,
    max_tries: int = MAX_TRIES,
    power_limits: bool = False,
) -> SimulationResult:
    """Run `recurrences` of the trace job with batch sizes (and with `power_limits`, power limits)
    chosen by the server behind `client`."""
    if recurrences < 1:
        raise BSOError(f"recurrences {recurrences}: expected at least 1")
    if power_limits and protocol != "epoch":
        raise BSOError("power limits are simulated with the epoch protocol only")
    spec = job_spec(trace, seed, eta_knob, beta_knob, job_id, power_limits)
    created, _ = client.register(spec)
    name = "basht+PL" if power_limits else "basht"
    result = SimulationResult(
        f"{name} ({protocol})", trace.name, seed, recurrences, eta_knob, trace.max_power_w
    )
    rng = np.random.default_rng(seed)  # training paths; Zeus's simulator seeds its own the same
    min_cost = np.inf  # the `zeus` harness's own early-stopping reference
    for recurrence in range(1, recurrences + 1):
        cost_acc = 0.0
        for _ in range(max_tries):
            trial = client.next_trial(created.job_id)
            if protocol == "epoch":
                run = _run_per_epoch(trace, client, trial, rng, recurrence, eta_knob)
            else:
                cost_ub = np.inf if beta_knob is None else beta_knob * min_cost
                run = _run_zeus_harness(
                    trace, client, trial.trial_id().model_dump(), rng, recurrence, eta_knob, cost_ub
                )
            result.runs.append(run)
            cost_acc += run.cost
            if run.converged:
                min_cost = min(min_cost, cost_acc)
                break
            if protocol == "zeus" and recurrence == 1:
                raise BSOError(
                    f"{trace.name}: the default batch size {trace.default_batch_size} did not "
                    "reach the target in the first recurrence (Zeus's harness stops here too)"
                )
        else:
            raise BSOError(
                f"{trace.name}: recurrence {recurrence} did not reach the target in "
                f"{max_tries} runs"
            )
    return result


def _run_per_epoch(
    trace: TraceJob,
    client: BSOClient,
    assignment: Assignment,
    rng: np.random.Generator,
    recurrence: int,
    eta_knob: float,
) -> Run:
    size = assignment.batch_size
    trial = assignment.trial_id()
    target = trace.sample_path(size, rng)
    limit = assignment.power_limit  # None: the highest, unless this run profiles
    max_epochs = trace.workload.max_epochs
    time_s = energy_j = 0.0
    for n in range(1, max_epochs + 1):
        epoch: Epoch
        if n == 1 and assignment.profile_power_limits:
            epoch = trace.profile_epoch(size)
            limit = _send_profile(trace, client, trial)
        else:
            epoch = trace.epoch(size, limit)
        reached = target is not None and n >= target
        time_s, energy_j = time_s + epoch.time_s, energy_j + epoch.energy_j
        answer = client.report(
            TrainingResult(
                **trial.model_dump(),
                time=time_s,
                energy=energy_j,
                metric=_metric(trace, reached),
                current_epoch=n,
            )
        )
        if answer.stop_train:
            break
    client.end_trial(trial)  # what Zeus's client does at exit, always
    return Run(
        recurrence,
        size,
        n,
        time_s,
        energy_j,
        zeus_cost(energy_j, time_s, eta_knob, trace.max_power_w),
        answer.converged,
        trial.trial_number,
        limit,
    )


def _send_profile(trace: TraceJob, client: BSOClient, trial: TrialId) -> float:
    """Send what the profiling epoch measured; the server answers the limit to train at."""
    measurements = [
        PowerMeasurement(power_limit=limit, time=e.time_s, energy=e.energy_j)
        for limit, e in trace.profile(trial.batch_size)
    ]
    choice = client.report_power_profile(
        PowerProfile(**trial.model_dump(), measurements=measurements)
    )
    return choice.power_limit


def _run_zeus_harness(
    trace: TraceJob,
    client: BSOClient,
    trial: dict[str, Any],
    rng: np.random.Generator,
    recurrence: int,
    eta_knob: float,
    cost_ub: float,
) -> Run:
    """One run the way Zeus's `SimulatorWithServer._run_job` computes and reports it."""
    size = trial["batch_size"]
    target = trace.sample_path(size, rng)
    epoch = trace.epoch(size)
    max_epochs = trace.workload.max_epochs
    cap: float  # a float, as in Zeus: cost_ub // per_epoch
    if cost_ub == np.inf:
        cap = max_epochs
    else:
        per_epoch = (
            eta_knob * epoch.energy_j + (1 - eta_knob) * trace.power_limit_w(size) * epoch.time_s
        )
        cap = min(cost_ub // per_epoch, max_epochs)
    epochs: float
    reported_epoch: float
    if cap == 0:
        epochs, reached, reported_epoch = 1, False, 1
    elif target is not None and target <= cap:
        epochs, reached, reported_epoch = target, True, cap
    else:
        epochs, reached, reported_epoch = cap, False, max_epochs
    energy_j, time_s = epoch.energy_j * epochs, epoch.time_s * epochs
    client.report(
        TrainingResult(
            **trial,
            time=time_s,
            energy=energy_j,
            metric=_metric(trace, reached),
            current_epoch=int(reported_epoch),
        )
    )
    return Run(
        recurrence,
        size,
        int(epochs),
        time_s,
        energy_j,
        zeus_cost(energy_j, time_s, eta_knob, trace.max_power_w),
        reached,
        trial["trial_number"],
    )


def simulate_fixed(
    trace: TraceJob,
    batch_size: int,
    recurrences: int = 50,
    seed: int = 1,
    eta_knob: float = 0.5,
    max_tries: int = MAX_TRIES,
) -> SimulationResult | None:
    """Always train with `batch_size`, no early stopping; None if some recurrence never converges."""
    rng = np.random.default_rng(seed)
    epoch = trace.epoch(batch_size)
    max_epochs = trace.workload.max_epochs
    result = SimulationResult(
        f"fixed {batch_size}", trace.name, seed, recurrences, eta_knob, trace.max_power_w
    )
    for recurrence in range(1, recurrences + 1):
        for _ in range(max_tries):
            target = trace.sample_path(batch_size, rng)
            reached = target is not None and target <= max_epochs
            epochs = target if reached and target is not None else max_epochs
            energy_j, time_s = epoch.energy_j * epochs, epoch.time_s * epochs
            cost = zeus_cost(energy_j, time_s, eta_knob, trace.max_power_w)
            result.runs.append(Run(recurrence, batch_size, epochs, time_s, energy_j, cost, reached))
            if reached:
                break
        else:
            return None
    return result


def best_fixed(
    trace: TraceJob, recurrences: int = 50, seed: int = 1, eta_knob: float = 0.5
) -> SimulationResult | None:
    """The fixed batch size that would have been cheapest over these recurrences, in hindsight."""
    candidates = [
        simulate_fixed(trace, size, recurrences, seed, eta_knob) for size in trace.batch_sizes
    ]
    feasible = [c for c in candidates if c is not None]
    if not feasible:
        return None
    best = min(feasible, key=lambda c: c.cost)
    best.policy = f"best fixed ({best.runs[0].batch_size}, hindsight)"
    return best
