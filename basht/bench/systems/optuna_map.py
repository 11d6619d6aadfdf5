"""The experiment's search in Optuna's terms: its samplers and its pruners (the `suggest_*`
calls are in `basht.tune.optuna_space`, which the native `tpe` sampler shares).

Optuna has no synchronous successive halving and no promotion: its `SuccessiveHalvingPruner` is
asynchronous SHA of the stopping kind and its `HyperbandPruner` runs those brackets side by side,
so `sha`/`asha` map to the first and `hyperband`/`async-hyperband` to the second (the run's
`algorithm` says which ran).
"""

from __future__ import annotations

from typing import Any

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.tune.optuna_space import choices_of, encode


def make_sampler(experiment: Experiment, seed: int) -> Any:
    import optuna

    name = experiment.search.sampler
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        space = experiment.search_space
        grid = {n: [encode(v) for v in choices_of(p)] for n, p in space.items()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise BashtError(
        f"search.sampler: {name!r} has no Optuna counterpart (random, grid, tpe, nsga2)"
    )


def make_pruner(experiment: Experiment) -> Any:
    import optuna

    search = experiment.search
    if search.pruner == "none" or search.is_multi:  # Optuna cannot prune a multi-objective study
        return optuna.pruners.NopPruner()
    if search.pruner in ("sha", "asha"):
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=search.min_budget, reduction_factor=search.eta
        )
    return optuna.pruners.HyperbandPruner(
        min_resource=search.min_budget,
        max_resource=search.max_budget if search.max_budget is not None else "auto",
        reduction_factor=search.eta,
    )


def describe(experiment: Experiment) -> str:
    """For the run's `algorithm` column (at most 80 characters)."""
    search = experiment.search
    sampler = {
        "random": "RandomSampler",
        "grid": "GridSampler",
        "tpe": "TPESampler",
        "nsga2": "NSGAIISampler",
    }
    pruner = {
        "none": "NopPruner",
        "sha": "SuccessiveHalvingPruner",
        "asha": "SuccessiveHalvingPruner",
        "hyperband": "HyperbandPruner",
        "async-hyperband": "HyperbandPruner",
    }[search.pruner]
    if search.is_multi:  # Optuna cannot prune a study of several objectives
        objectives = len(search.objective_list)
        return f"optuna {sampler[search.sampler]}, no pruning ({objectives} objectives)"
    text = f"optuna {sampler.get(search.sampler, search.sampler)}, {pruner}"
    if search.pruner != "none":
        text += f"(r={search.min_budget}, eta={search.eta})"
    return text[:80]
