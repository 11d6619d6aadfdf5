"""`pruner: none`: every trial trains to the maximum budget."""

from __future__ import annotations

from typing import Any

from basht.space import SpaceLike
from basht.tune._checks import check_objective, check_whole
from basht.tune._common import NewConfigs, never_suggested
from basht.tune.base import Decision, Suggestion
from basht.tune.ranking import Score, Scored
from basht.tune.samplers import Sampler

_CONTINUE = Decision.CONTINUE  # bound once: a lookup on the enum class costs a descriptor call


class FullBudgetSearch:
    """Random, grid or TPE search without early stopping: each configuration runs to
    `max_budget`; a sampler that learns is told each final value."""

    def __init__(
        self,
        space: SpaceLike,
        *,
        metric: str,
        mode: str = "max",
        max_budget: int,
        max_trials: int | None = None,
        sampler: str | Sampler = "random",
        seed: int = 0,
        scored: Scored | None = None,
    ):
        """`scored`: reports are scores of several objectives (`basht.tune.objectives`)."""
        check_objective(metric, mode)
        check_whole("max_budget", max_budget, 1)
        self.metric, self.mode = metric, mode
        self.max_budget = max_budget
        self.max_trials = max_trials
        self.scored = scored
        n_objectives = scored.width if scored is not None else None
        self.new = NewConfigs(space, sampler, seed, max_trials, mode, n_objectives)

    def suggest(self) -> Suggestion | None:
        drawn = self.new.draw()
        if drawn is None:
            return None
        return Suggestion(*drawn, self.max_budget)

    def report(self, trial_id: int, budget: int, value: float | Score) -> Decision:
        self._check(trial_id)
        if self.scored is not None:
            value = self.scored.check(value)
        if budget >= self.max_budget:
            self.new.observe(trial_id, self.max_budget, value)
        return _CONTINUE

    def complete(self, trial_id: int) -> None:
        self._check(trial_id)

    def fail(self, trial_id: int) -> None:
        self._check(trial_id)

    def _check(self, trial_id: int) -> None:
        """Trials are numbered from 0 as they are suggested: any other id was never handed out."""
        if not 0 <= trial_id < self.new.next_id:
            raise never_suggested(trial_id)

    def is_finished(self) -> bool:
        return self.new.available() == 0


def RandomSearch(space: SpaceLike, **kwargs: Any) -> FullBudgetSearch:  # noqa: N802 - a named preset
    return FullBudgetSearch(space, sampler="random", **kwargs)


def GridSearch(space: SpaceLike, **kwargs: Any) -> FullBudgetSearch:  # noqa: N802 - a named preset
    kwargs.pop("seed", None)
    return FullBudgetSearch(space, sampler="grid", **kwargs)
