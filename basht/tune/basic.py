"""`pruner: none`: every trial trains to the maximum budget."""

from __future__ import annotations

from basht.space import SearchSpace
from basht.tune.base import Decision, Suggestion
from basht.tune.samplers import Sampler, make_sampler

_CONTINUE = Decision.CONTINUE  # bound once: a lookup on the enum class costs a descriptor call


class FullBudgetSearch:
    """Random or grid search without early stopping: each configuration runs to `max_budget`."""

    def __init__(
        self,
        space: SearchSpace,
        *,
        metric: str,
        mode: str = "max",
        max_budget: int,
        max_trials: int | None = None,
        sampler: str | Sampler = "random",
        seed: int = 0,
    ):
        self.metric, self.mode = metric, mode
        self.max_budget = max_budget
        self.max_trials = max_trials
        self.sampler = make_sampler(sampler, space, seed) if isinstance(sampler, str) else sampler
        self.next_id = 0
        self.exhausted = False

    def suggest(self) -> Suggestion | None:
        if self.exhausted or (self.max_trials is not None and self.next_id >= self.max_trials):
            return None
        config = self.sampler.next()
        if config is None:
            self.exhausted = True
            return None
        suggestion = Suggestion(self.next_id, config, self.max_budget)
        self.next_id += 1
        return suggestion

    def report(self, trial_id: int, budget: int, value: float) -> Decision:
        return _CONTINUE

    def complete(self, trial_id: int) -> None:
        pass

    def fail(self, trial_id: int) -> None:
        pass

    def is_finished(self) -> bool:
        return self.exhausted or (self.max_trials is not None and self.next_id >= self.max_trials)


def RandomSearch(space: SearchSpace, **kwargs) -> FullBudgetSearch:  # noqa: N802 - a named preset
    return FullBudgetSearch(space, sampler="random", **kwargs)


def GridSearch(space: SearchSpace, **kwargs) -> FullBudgetSearch:  # noqa: N802 - a named preset
    kwargs.pop("seed", None)
    return FullBudgetSearch(space, sampler="grid", **kwargs)
