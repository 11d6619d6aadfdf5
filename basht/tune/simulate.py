"""Run a tuning algorithm through the real Tuner on simulated workers and virtual time."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from basht.engine.recorded import RecordedCurves
from basht.engine.simulated import LearningCurve, SimulatedExecutor
from basht.errors import BashtError
from basht.experiment import Experiment, SearchSpec
from basht.states import TrialState
from basht.tune.base import Algorithm
from basht.tune.factory import describe, make_algorithm
from basht.tune.objectives import Objectives, Spent, measured_metrics
from basht.tune.tuner import Gate, Tuner
from basht.workloads.base import WorkloadRef


@dataclass
class SimulationResult:
    """How a simulated run went, on the virtual clock (`wall_s` alone is real time).

    `best_value` and `trace` count every report (any trial, any epoch), the same values that
    `time_to_target_s` is measured on; `best_completed` is the Tuner's best finished trial.
    """

    makespan_s: float
    trials: int
    best_value: float | None
    best_completed: float | None
    time_to_target_s: float | None
    trace: list[tuple[float, float]] = field(default_factory=list)
    # when the first trial finished at the maximum budget: the ASHA paper's simulated measure
    first_completed_s: float | None = None
    stop_reason: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    # With objectives: each completed trial's time and metrics (its last report's), in order.
    completed: list[tuple[float, dict[str, Any]]] = field(default_factory=list)


def simulate(
    algorithm: Algorithm,
    workers: int,
    curve: LearningCurve,
    *,
    max_time_s: float | None = None,
    target: float | None = None,
    seed: int = 0,
    load_s: float = 0.0,
    straggler_p: float = 0.0,
    straggler_factor: float = 4.0,
    objectives: Objectives | None = None,
    max_budget: int | None = None,
    gate: Gate | None = None,
    record_completions: bool = False,
) -> SimulationResult:
    """Run `algorithm` to its end (or `max_time_s` virtual seconds, or `target`), keeping nothing.

    The executor reports the algorithm's metric; a curve with a `mode` must agree with the
    algorithm's, or every comparison would run the wrong way. With `objectives` (an algorithm
    built `scored`) the measured metric a simulation has is the time: `train_time_s`, projected
    to `max_budget`, and `train_time_s_spent`, on the virtual clock. A `gate` (a carbon-aware
    schedule, `basht.tune.carbon_gate`) holds the work back on the same clock. With
    `record_completions` (or objectives) the result lists each completed trial's time and
    metrics, so a benchmark can read the best choice at any point of the run.
    """
    curve_mode = getattr(curve, "mode", None)
    if curve_mode is not None and curve_mode != algorithm.mode:
        raise ValueError(
            f"the curve's mode {curve_mode!r} is not the algorithm's {algorithm.mode!r}"
        )
    executor = SimulatedExecutor(
        workers,
        curve,
        load_s=load_s,
        seed=seed,
        straggler_p=straggler_p,
        straggler_factor=straggler_factor,
        metric=algorithm.metric,
        trace_best=algorithm.mode,
    )
    first_completed: list[float] = []
    completed: list[tuple[float, int]] = []

    def on_trial(trial_id: int, worker: int, event: str) -> None:
        if event == TrialState.COMPLETED:
            first_completed.append(executor.now())
            if objectives is None and not record_completions:
                tuner.on_trial = None  # heard: the rest of the run pays no call per trial event
            else:
                completed.append((executor.now(), trial_id))

    def measure(trial_id: int, time_s: float, load_s: float, epoch: int) -> dict[str, float]:
        return measured_metrics(Spent(time_s), epoch, max_budget, None)

    tuner = Tuner(
        algorithm,
        executor,
        store=None,
        run_id="sim",
        workload=WorkloadRef("simulated", experiment_seed=seed),
        checkpoint_dir=None,
        target=target,
        time_budget_s=max_time_s,
        on_trial=on_trial,
        objectives=objectives,
        measure=measure if objectives is not None else None,
        gate=gate,
    )
    started = time.perf_counter()
    # The run keeps millions of small objects alive and makes no reference cycles; the cyclic
    # collector's full passes over them would cost a quarter of the run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        status = tuner.run()
    finally:
        if collecting:
            gc.enable()
    wall_s = time.perf_counter() - started
    time_to_target = (
        None if target is None else first_reaching(executor.trace, target, algorithm.mode)
    )
    return SimulationResult(
        makespan_s=executor.now(),
        trials=len(tuner.trials),
        best_value=executor.best,
        best_completed=status.best_value,
        time_to_target_s=time_to_target,
        trace=executor.trace or [],
        first_completed_s=first_completed[0] if first_completed else None,
        stop_reason=status.stop_reason,
        counts={k: v for k, v in status.counts.items() if v},
        wall_s=wall_s,
        completed=[
            (at, tuner.trials[n].metrics or {algorithm.metric: tuner.trials[n].value})
            for at, n in completed
        ],
    )


def first_reaching(
    trace: list[tuple[float, float]] | None, target: float, mode: str
) -> float | None:
    """When a value in `trace` ((time, value) pairs in time order) first reached `target`."""
    reached = (lambda v: v >= target) if mode == "max" else (lambda v: v <= target)
    return next((at for at, value in trace or () if reached(value)), None)


def median_time(times: list[float | None]) -> float | None:
    """The median time-to-target, a run that never reached the target counting as infinitely
    slow: None ("never") when half or more never reached it."""
    median = statistics.median(math.inf if t is None else t for t in times)
    return None if math.isinf(median) else median


PRUNERS: tuple[str, ...] = get_args(SearchSpec.model_fields["pruner"].annotation)
#: What `basht simulate` compares unless told: every early-stopping pruner (`none` is the baseline
#: that recorded the curves).
SIMULATED_PRUNERS: tuple[str, ...] = ("sha", "hyperband", "asha", "async-hyperband")


def simulate_experiment(
    experiment: Experiment,
    curves: RecordedCurves,
    *,
    pruners: Sequence[str] = SIMULATED_PRUNERS,
    workers: int | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    target: float | None = None,
) -> list[dict[str, Any]]:
    """The experiment's search with each pruner in turn, on `workers` simulated workers (the
    file's by default) replaying measured `curves`: what each would have taken to reach `target`
    (the file's `search.target` by default), in virtual seconds, median over `seeds`.

    Each seed is one run: the experiment's seed plus it for the algorithm, and the curves drawn
    for it. Promotion is assumed (the recorded workload stood for one that checkpoints).
    """
    search = experiment.search
    if search.metric != curves.metric or search.mode != curves.mode:
        raise BashtError(
            f"the experiment tunes {search.metric!r} ({search.mode}) but the curves recorded "
            f"{curves.metric!r} ({curves.mode})"
        )
    if search.max_budget is None or search.max_budget > curves.epochs:
        raise BashtError(
            f"search.max_budget is {search.max_budget}; the curves end at epoch {curves.epochs}"
        )
    if search.max_trials is None:
        raise BashtError("simulating needs search.max_trials, or it would not end")
    if search.sampler == "tpe" and not getattr(curves, "by_value", False):
        raise BashtError(
            "search.sampler: tpe models how results depend on the configuration's values, and "
            "recorded curves are drawn by row, not by value; simulate with sampler: random"
        )
    unknown = [p for p in pruners if p not in PRUNERS]
    if unknown or not pruners or not seeds:
        given = f"; got {', '.join(map(repr, unknown))}" if unknown else ""
        raise BashtError(f"pruners must be among {', '.join(PRUNERS)}, and seeds not empty{given}")
    target = search.target if target is None else target
    workers = experiment.resources.workers if workers is None else workers
    if workers < 1:
        raise BashtError(f"workers must be at least 1, not {workers}")
    rows = []
    for pruner in pruners:
        runs = []
        for seed in seeds:
            variant = experiment.model_copy(
                update={
                    "seed": experiment.seed + seed,
                    "search": search.model_copy(update={"pruner": pruner, "target": None}),
                }
            )
            algorithm = make_algorithm(variant)
            runs.append(
                simulate(
                    algorithm,
                    workers,
                    curves.with_seed(experiment.seed + seed),
                    target=target,
                    seed=seed,
                    load_s=curves.load_s,
                )
            )
        rows.append(
            {
                "pruner": pruner,
                "algorithm": describe(variant, algorithm),
                "workers": workers,
                "seeds": list(seeds),
                "target": target,
                "reached": sum(r.time_to_target_s is not None for r in runs),
                "median_time_to_target_s": median_time([r.time_to_target_s for r in runs]),
                "median_best_value": statistics.median(r.best_value for r in runs),
                "median_makespan_s": statistics.median(r.makespan_s for r in runs),
                "median_trained_to_max": statistics.median(
                    r.counts.get(TrialState.COMPLETED, 0) for r in runs
                ),
                "median_wall_s": statistics.median(r.wall_s for r in runs),
                **regret(curves, [r.best_completed for r in runs]),
            }
        )
    return rows


def regret(curves: Any, finals: Sequence[float | None]) -> dict[str, Any]:
    """How far the runs' final choices fall short of the best value known for the curves (a
    surrogate's optimum over a large sample): the median regret, and normalised by the span
    from the optimum to the sample's worst; nothing when the curves know no optimum."""
    best, worst = getattr(curves, "optimum", None), getattr(curves, "worst", None)
    if best is None or not finals:
        return {}
    sign = 1.0 if curves.mode == "max" else -1.0
    regrets = [sign * (best - value) if value is not None else math.inf for value in finals]
    span = sign * (best - worst) if worst is not None else None
    median = statistics.median(regrets)
    return {
        "optimum": best,
        "median_regret": median,
        "median_normalised_regret": median / span if span else None,
    }
