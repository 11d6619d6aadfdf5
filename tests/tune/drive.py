"""A tiny asynchronous driver for algorithm tests: W workers, jobs finishing in a chosen order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from basht.tune import Decision, Suggestion


@dataclass
class Trace:
    suggestions: list[Suggestion] = field(default_factory=list)
    decisions: list[tuple[int, int, float, Decision]] = field(default_factory=list)
    idle_with_work: int = 0


def drive(
    algo,
    workers: int,
    value: Callable[[int, int], float],
    order_seed: int = 0,
    max_steps: int = 100_000,
    per_epoch: bool = False,
    check: Callable[[object], None] | None = None,
) -> Trace:
    """Run until the algorithm has nothing left; jobs finish in a seeded random order.

    `per_epoch` reports every epoch (as the Tuner does) instead of jumping to the job's budget.
    """
    rng = np.random.default_rng(order_seed)
    trace = Trace()
    running: dict[int, tuple[int, int]] = {}  # trial -> (epochs done, target budget)
    progress: dict[int, int] = {}
    for _ in range(max_steps):
        while len(running) < workers:
            s = algo.suggest()
            if s is None:
                break
            trace.suggestions.append(s)
            running[s.trial_id] = (progress.get(s.trial_id, 0), s.budget)
        if not running:
            break
        trial = list(running)[int(rng.integers(len(running)))]
        done, target = running[trial]
        epoch = done + 1 if per_epoch else target
        v = value(trial, epoch)
        if check is not None:
            check(algo)
        d = algo.report(trial, epoch, v)
        trace.decisions.append((trial, epoch, v, d))
        progress[trial] = epoch
        if d is Decision.CONTINUE and epoch < target:
            running[trial] = (epoch, target)
            continue
        del running[trial]
        if d is Decision.CONTINUE:
            algo.complete(trial)
    return trace


def curve(seed: int = 0) -> Callable[[int, int], float]:
    """A deterministic value per (trial, budget): a per-trial ceiling approached with budget."""

    def value(trial: int, budget: int) -> float:
        r = np.random.default_rng([seed, trial])
        ceiling, rate = r.uniform(0.3, 1.0), r.uniform(0.05, 0.5)
        return float(ceiling * (1 - np.exp(-rate * budget)))

    return value
