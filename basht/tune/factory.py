"""Build the algorithm an experiment file asks for."""

from __future__ import annotations

from basht.errors import ExperimentError
from basht.experiment import Experiment
from basht.tune.base import Algorithm
from basht.tune.basic import FullBudgetSearch


def make_algorithm(experiment: Experiment, can_checkpoint: bool = True) -> Algorithm:
    search = experiment.search
    if search.pruner == "none":
        assert search.max_budget is not None
        return FullBudgetSearch(
            experiment.search_space,
            metric=search.metric,
            mode=search.mode,
            max_budget=search.max_budget,
            max_trials=search.max_trials,
            sampler=search.sampler,
            seed=experiment.seed,
        )
    raise ExperimentError(f"search.pruner: {search.pruner!r} is not available in this version")
