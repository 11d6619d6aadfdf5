"""The experiment's search in Ray Tune's terms: its search space, search algorithm and scheduler.

Ray has no synchronous successive halving and no ASHA promotion: `sha` and `asha` map to its
`ASHAScheduler` (asynchronous, stopping), `async-hyperband` to the same with Hyperband's number of
brackets, and `hyperband` to its synchronous `HyperBandScheduler`, which pauses trials with a
checkpoint and resumes them (the run's `algorithm` says which ran). A grid runs Basht's own grid,
in Basht's order and cut at `max_trials`, as one `grid_search` over whole configurations.

Tune's driver draws from the process's global generators: `AsyncHyperBandScheduler` (ASHA) picks
each trial's bracket with `np.random.choice`, once per trial as it is added, and Ray's actor
manager shuffles the futures it waits on with `random.shuffle`. `seeded_driver` seeds both from
the experiment seed around `Tuner.fit()`, so the same file and seed give each trial the same
bracket. The shuffles happen once per turn of Tune's event loop, and how many turns come first
is a matter of timing, so the order in which events that are ready together (several workers')
are handled stays as it was: not reproducible.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.space import Choice, Float, Int
from basht.tune import rung_levels

#: The config key under which a grid's whole configurations travel through Tune.
GRID_KEY = "basht_config"
#: `max_budget: null` (ASHA without a top rung): the time budget or target ends the run.
UNBOUNDED_T = 2**31 - 1


def basht_config(config: dict[str, Any]) -> dict[str, Any]:
    """The Basht configuration inside a Tune config."""
    return dict(config[GRID_KEY]) if GRID_KEY in config else dict(config)


def _domain(parameter: Float | Int | Choice) -> Any:
    from ray import tune

    if isinstance(parameter, Choice) or parameter.step is not None:
        return tune.choice(parameter.grid())
    if isinstance(parameter, Float):
        if parameter.log:
            return tune.loguniform(parameter.low, parameter.high)
        return tune.uniform(parameter.low, parameter.high)
    if parameter.log:  # Tune's integer upper bounds are exclusive
        return tune.lograndint(parameter.low, parameter.high + 1)
    return tune.randint(parameter.low, parameter.high + 1)


def param_space(experiment: Experiment) -> tuple[dict[str, Any], int]:
    """Tune's `param_space` and `num_samples` (-1: until the time budget or the target)."""
    from ray import tune

    space, limit = experiment.search_space, experiment.search.max_trials
    if experiment.search.sampler == "grid":
        configs = list(itertools.islice(space.grid(), limit))
        return {GRID_KEY: tune.grid_search(configs)}, 1
    if experiment.search.sampler != "random":
        raise BashtError(
            f"search.sampler: {experiment.search.sampler!r} has no Ray Tune counterpart here "
            "(random, grid)"
        )
    return {name: _domain(p) for name, p in space.items()}, limit if limit is not None else -1


def search_algorithm(experiment: Experiment) -> Any:
    from ray.tune.search import BasicVariantGenerator

    return BasicVariantGenerator(random_state=experiment.seed)


def driver_seed(seed: int) -> int:
    """The global generators' seed: numpy's legacy seeding takes 32 bits, an experiment's more."""
    return int(np.random.SeedSequence([seed, 1]).generate_state(1)[0])


@contextlib.contextmanager
def seeded_driver(seed: int) -> Iterator[None]:
    """numpy's and Python's global generators seeded from `seed` for the block, then restored,
    so the rest of the process draws as it would have."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    np.random.seed(driver_seed(seed))
    random.seed(driver_seed(seed))
    try:
        yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def trial_number(trial_id: str) -> int | None:
    """A trial's number from Tune's id: BasicVariantGenerator names its trials `<tag>_00042`,
    counting in the order it draws their configurations (seeded). Numbered so, not by the order
    actors announce them, a configuration gets the same number, and so the same trial seed, in
    every run of the file. None for an id of another form."""
    _, _, count = trial_id.rpartition("_")
    return int(count) if count.isdigit() else None


def scheduler(experiment: Experiment) -> Any:
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, HyperBandScheduler

    search = experiment.search
    max_t = search.max_budget if search.max_budget is not None else UNBOUNDED_T
    if search.pruner == "none":
        return FIFOScheduler()
    if search.pruner == "hyperband":
        return HyperBandScheduler(
            time_attr="training_iteration", max_t=max_t, reduction_factor=search.eta
        )
    brackets = 1
    if search.pruner == "async-hyperband":
        brackets = len(rung_levels(search.min_budget, max_t, search.eta))
    return ASHAScheduler(
        time_attr="training_iteration",
        max_t=max_t,
        grace_period=search.min_budget,
        reduction_factor=search.eta,
        brackets=brackets,
    )


def describe(experiment: Experiment) -> str:
    """For the run's `algorithm` column (at most 80 characters)."""
    search = experiment.search
    name = {
        "none": "FIFOScheduler",
        "sha": "ASHAScheduler",
        "asha": "ASHAScheduler",
        "async-hyperband": "ASHAScheduler",
        "hyperband": "HyperBandScheduler",
    }[search.pruner]
    if search.pruner == "hyperband":
        name += f"(eta={search.eta})"
    elif search.pruner != "none":
        name += f"(r={search.min_budget}, eta={search.eta})"
    return f"ray tune {search.sampler} search, {name}"[:80]
