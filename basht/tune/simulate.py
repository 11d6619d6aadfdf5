"""Run a tuning algorithm through the real Tuner on simulated workers and virtual time."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from basht.engine.messages import TrialEvent, WorkloadRef
from basht.engine.simulated import LearningCurve, SimulatedExecutor
from basht.tune.base import Algorithm
from basht.tune.tuner import Tuner


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
    stop_reason: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


class _TracingExecutor(SimulatedExecutor):
    """Keeps the best reported value so far, appending (time, value) only when it improves."""

    def __init__(self, *args, mode: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.maximize = mode == "max"
        self.best: float | None = None
        self.trace: list[tuple[float, float]] = []

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        events = super().poll(timeout_s)
        for event in events:
            if event.kind != "report":
                continue
            value = event.metrics.get(self.metric)
            if value is None or not math.isfinite(value):
                continue
            best = self.best
            if best is None or (value > best if self.maximize else value < best):
                self.best = value
                self.trace.append((event.at, value))
        return events


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
) -> SimulationResult:
    """Run `algorithm` to its end (or `max_time_s` virtual seconds, or `target`), keeping nothing.

    The executor reports the algorithm's metric; a curve with a `mode` must agree with the
    algorithm's, or every comparison would run the wrong way.
    """
    curve_mode = getattr(curve, "mode", None)
    if curve_mode is not None and curve_mode != algorithm.mode:
        raise ValueError(
            f"the curve's mode {curve_mode!r} is not the algorithm's {algorithm.mode!r}"
        )
    executor = _TracingExecutor(
        workers,
        curve,
        load_s=load_s,
        seed=seed,
        straggler_p=straggler_p,
        straggler_factor=straggler_factor,
        metric=algorithm.metric,
        mode=algorithm.mode,
    )
    tuner = Tuner(
        algorithm,
        executor,
        store=None,
        run_id="sim",
        workload=WorkloadRef("simulated", experiment_seed=seed),
        checkpoint_dir=None,
        target=target,
        time_budget_s=max_time_s,
    )
    started = time.perf_counter()
    status = tuner.run()
    wall_s = time.perf_counter() - started
    time_to_target = None
    if target is not None:
        reached = (lambda v: v >= target) if algorithm.mode == "max" else (lambda v: v <= target)
        time_to_target = next((at for at, value in executor.trace if reached(value)), None)
    return SimulationResult(
        makespan_s=executor.now(),
        trials=len(tuner.trials),
        best_value=executor.best,
        best_completed=status.best_value,
        time_to_target_s=time_to_target,
        trace=executor.trace,
        stop_reason=status.stop_reason,
        counts={k: v for k, v in status.counts.items() if v},
        wall_s=wall_s,
    )
