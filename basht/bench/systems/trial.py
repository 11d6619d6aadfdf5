"""One Basht trial inside a peer framework's process, timed as native's worker times it.

Load (build the workload, read data, build the model, restore a checkpoint), then per epoch train
and validate, each on its own clock; so a trial's load_s, train_s and validate_s mean the same for
every system. The workload is built with `build_workload`, the seed is `trial_seed`'s.
"""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.engine.checkpoints import load_state, save_state
from basht.engine.messages import WorkloadRef
from basht.engine.worker import build_workload
from basht.workloads import Resources, resolve_workload


@dataclass(frozen=True)
class TrialPlan:
    """What every trial process of a peer needs: the workload, the goal, and how to reach the
    driver (its `EventServer`)."""

    workload: WorkloadRef
    metric: str
    mode: str
    target: float | None
    max_budget: int | None
    cpus: int
    address: tuple[str, int]
    authkey: bytes

    def is_target(self, value: float) -> bool:
        if self.target is None:
            return False
        return value >= self.target if self.mode == "max" else value <= self.target

    def is_done(self, epoch: int, value: float) -> bool:
        """The trial completes: its budget trained, or the target reached."""
        budget = self.max_budget
        return (budget is not None and epoch >= budget) or self.is_target(value)


def reason(err: BaseException) -> str:
    """A one-line account of an exception and where it was raised, as native records failures."""
    where = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    place = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
    return f"{type(err).__name__}: {err}{place}"


def floats(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, dict):
        raise TypeError(f"validate() must return a dict of metrics, got {type(metrics).__name__}")
    return {str(k): float(v) for k, v in metrics.items()}


def metric_problem(metrics: dict[str, float], metric: str) -> str | None:
    """Native's reason for failing a trial whose report lacks the optimised metric."""
    value = metrics.get(metric)
    if value is None or not math.isfinite(value):
        got = ", ".join(metrics) or "nothing"
        return f"metric {metric!r} missing or not finite in the report (got: {got})"
    return None


def prepare_workload(ref: WorkloadRef) -> None:
    """The setup phase's per-process work: import the workload and let it prepare its data."""
    from basht.engine.worker import _with_seed

    factory = resolve_workload(ref.name)
    prepare = getattr(factory, "prepare", None)
    if callable(prepare):
        prepare(**_with_seed(prepare, ref))


class EpochRunner:
    """A class workload driven one epoch at a time; `epochs` counts the epochs trained so far."""

    def __init__(self, ref: WorkloadRef, config: dict[str, Any], seed: int, cpus: int):
        self.ref, self.config, self.seed, self.cpus = ref, dict(config), seed, cpus
        self.workload: Any = None
        self.epochs = 0

    def load(self) -> float:
        """Build the workload and its model; returns the seconds it took."""
        start = time.perf_counter()
        self.workload = build_workload(self.ref)
        resources = Resources(cpus=self.cpus, memory_mb=self.ref.memory_mb, seed=self.seed)
        self.workload.load(self.config, resources)
        return time.perf_counter() - start

    def epoch(self) -> tuple[dict[str, float], float, float]:
        """Train one more epoch and validate: (metrics, train_s, validate_s)."""
        start = time.perf_counter()
        self.workload.train(1)
        train_s = time.perf_counter() - start
        metrics = floats(self.workload.validate())
        validate_s = time.perf_counter() - start - train_s
        self.epochs += 1
        return metrics, train_s, validate_s

    def close(self) -> None:
        """End what the workload holds outside this process (a command trial's processes)."""
        close = getattr(self.workload, "close", None)
        if callable(close):
            close()

    def save_final(self, path: str) -> None:
        """The completed model, as native keeps it: the workload's own state, for the test phase."""
        save_state(self.workload.state_dict(), path)

    def save(self, path: str) -> None:
        """A pause: the state and the epochs done, so a resumed trial counts on from there."""
        save_state({"epoch": self.epochs, "state": self.workload.state_dict()}, path)

    def restore(self, path: str) -> float:
        """Continue from a pause `save` wrote; returns the seconds it took (part of load)."""
        start = time.perf_counter()
        saved = load_state(path)
        self.workload.load_state_dict(saved["state"])
        self.epochs = int(saved["epoch"])
        return time.perf_counter() - start


def test_best(
    ref: WorkloadRef,
    config: dict[str, Any],
    seed: int,
    budget: int,
    checkpoint: str | None,
    cpus: int,
) -> dict[str, float]:
    """The test phase: the best trial's model from its final state (or retrained to `budget`)."""
    from basht.engine.threads import limit_threads

    limit_threads(cpus)
    workload = build_workload(ref)
    try:
        workload.load(dict(config), Resources(cpus=cpus, memory_mb=ref.memory_mb, seed=seed))
        if checkpoint:
            workload.load_state_dict(load_state(checkpoint))
        elif budget:
            workload.train(budget)
        return floats(workload.test())
    finally:
        close = getattr(workload, "close", None)
        if callable(close):
            close()
