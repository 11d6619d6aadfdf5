"""The experiment's search in Optuna's terms: its samplers, its pruners, its `suggest_*` calls.

Optuna has no synchronous successive halving and no promotion: its `SuccessiveHalvingPruner` is
asynchronous SHA of the stopping kind and its `HyperbandPruner` runs those brackets side by side,
so `sha`/`asha` map to the first and `hyperband`/`async-hyperband` to the second (the run's
`algorithm` says which ran).
"""

from __future__ import annotations

import json
from typing import Any

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.space import Choice, Float, Int, SearchSpace

_PRIMITIVE = (str, int, float, bool, type(None))


def encode(value: Any) -> Any:
    """Optuna's categorical choices must be None, bool, int, float or str: lists go as JSON."""
    return value if isinstance(value, _PRIMITIVE) else json.dumps(value)


def decode(value: Any, choices: list[Any]) -> Any:
    for choice in choices:
        if encode(choice) == value:
            return choice
    return value


def _choices(parameter: Float | Int | Choice) -> list[Any]:
    return parameter.grid()


def make_sampler(experiment: Experiment, seed: int) -> Any:
    import optuna

    name = experiment.search.sampler
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        space = experiment.search_space
        grid = {n: [encode(v) for v in _choices(p)] for n, p in space.items()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise BashtError(f"search.sampler: {name!r} has no Optuna counterpart (random, grid, tpe)")


def make_pruner(experiment: Experiment) -> Any:
    import optuna

    search = experiment.search
    if search.pruner == "none":
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
    sampler = {"random": "RandomSampler", "grid": "GridSampler", "tpe": "TPESampler"}
    pruner = {
        "none": "NopPruner",
        "sha": "SuccessiveHalvingPruner",
        "asha": "SuccessiveHalvingPruner",
        "hyperband": "HyperbandPruner",
        "async-hyperband": "HyperbandPruner",
    }[search.pruner]
    text = f"optuna {sampler.get(search.sampler, search.sampler)}, {pruner}"
    if search.pruner != "none":
        text += f"(r={search.min_budget}, eta={search.eta})"
    return text[:80]


def suggest(trial: Any, space: SearchSpace, grid: bool = False) -> dict[str, Any]:
    """A configuration drawn through Optuna's trial, in the space's order and Basht's values.

    A grid suggests every parameter as a categorical of Basht's own grid values, which is what
    Optuna's GridSampler needs; otherwise each parameter maps to its natural `suggest_*`.
    """
    config: dict[str, Any] = {}
    for name, p in space.items():
        if grid or isinstance(p, Choice):
            choices = _choices(p)
            config[name] = decode(
                trial.suggest_categorical(name, [encode(c) for c in choices]), choices
            )
        elif isinstance(p, Float):
            if p.step is not None:
                top = p.grid()[-1]  # Optuna wants high - low to be a multiple of step
                value = trial.suggest_float(name, p.low, top, step=p.step)
                config[name] = round(value, 12)
            else:
                config[name] = trial.suggest_float(name, p.low, p.high, log=p.log)
        else:
            config[name] = trial.suggest_int(name, p.low, p.high, log=p.log, step=p.step or 1)
    return config
