"""Build the algorithm an experiment file asks for."""

from __future__ import annotations

from typing import Any

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.tune.asha import ASHA, AsyncHyperband
from basht.tune.base import Algorithm
from basht.tune.basic import FullBudgetSearch
from basht.tune.hyperband import SHA, Hyperband
from basht.tune.objectives import Objectives
from basht.tune.ranking import Scored
from basht.tune.rungs import rung_levels


def make_algorithm(
    experiment: Experiment, can_checkpoint: bool = True, one_bracket: bool = False
) -> Algorithm:
    """`pruner: asha` (and async-hyperband) promote when the workload can checkpoint, else stop,
    unless `search.asha_variant` names one. `one_bracket`: SHA runs all `max_trials` in one
    bracket (the job a RubberBand plan is for)."""
    search = experiment.search
    common: dict[str, Any] = {
        "metric": search.metric,
        "mode": search.mode,
        "sampler": search.sampler,
        "seed": experiment.seed,
        "max_trials": search.max_trials,
    }
    if search.is_multi:  # told scores of several objectives (or under constraints)
        width = Objectives.from_search(search).width
        common["scored"] = Scored(width, search.tie_break)
    space = experiment.search_space
    check_unbounded(experiment, can_checkpoint)
    variant = asha_variant(experiment, can_checkpoint)
    budgets = {"min_budget": search.min_budget, "max_budget": search.max_budget, "eta": search.eta}
    if search.pruner == "none":
        assert search.max_budget is not None
        return FullBudgetSearch(space, max_budget=search.max_budget, **common)
    if search.pruner == "asha":
        return ASHA(space, variant=variant, **budgets, **common)
    if search.pruner == "async-hyperband":
        return AsyncHyperband(space, variant=variant, **budgets, **common)
    if search.pruner == "sha":
        n_configs = search.max_trials if one_bracket else None
        return SHA(space, n_configs=n_configs, **budgets, **common)
    return Hyperband(space, **budgets, **common)


def asha_variant(experiment: Experiment, can_checkpoint: bool) -> str:
    """The variant `search.asha_variant` asks for; `auto` promotes when trials can pause."""
    asked = experiment.search.asha_variant
    if asked == "auto":
        return "promotion" if can_checkpoint else "stopping"
    if asked == "promotion" and not can_checkpoint:
        raise BashtError(
            f"search.asha_variant: promotion pauses trials in checkpoints, and "
            f"{experiment.workload.name} cannot save one: use stopping or auto"
        )
    return asked


def check_unbounded(experiment: Experiment, can_checkpoint: bool) -> None:
    """Unbounded ASHA needs trials that pause at rungs: a workload that cannot checkpoint gets
    the stopping variant, which runs each trial to a top rung there would not be."""
    if not can_checkpoint and experiment.search.max_budget is None:
        raise BashtError(
            f"search.max_budget: null (unbounded) needs a workload that checkpoints; "
            f"{experiment.workload.name} is a plain function, stopped rather than paused at rungs: "
            "give a max_budget"
        )


def describe(experiment: Experiment, algorithm: Algorithm) -> str:
    """For the run's output: the sampler, the pruner and, for ASHA, which variant runs (for a
    plan run, that SHA runs one bracket of all `max_trials`)."""
    search = experiment.search
    variant = getattr(algorithm, "variant", None)
    pruner = f"{search.pruner} ({variant})" if variant else search.pruner
    if experiment.plan is not None and search.pruner == "sha":
        pruner = f"{search.pruner} (one bracket of {search.max_trials})"
    if search.is_multi:
        how = "scalarised" if search.scalarize else search.tie_break  # the store keeps 80 chars
        pruner = f"{pruner}, {len(search.objective_list)} objectives ({how})"
    return f"{search.sampler} sampling, pruner {pruner}"


def expected_epochs(experiment: Experiment) -> float | None:
    """About how many epochs the search trains in all, for a schedule that plans the work:
    every trial to `max_budget` without a pruner; with one, `max_trials` trials of which a
    1/eta^k share reaches rung k (exact for one SHA bracket, ASHA's expectation otherwise). None
    when nothing bounds it (no trial limit, or no top rung)."""
    search = experiment.search
    trials: float | None = search.max_trials
    if search.sampler == "grid":
        size = experiment.search_space.size
        trials = size if trials is None else min(trials, size)
    if search.max_budget is None:
        return None
    levels = rung_levels(search.min_budget, search.max_budget, search.eta)
    if trials is None and search.pruner == "sha":
        trials = search.eta ** (len(levels) - 1)  # one bracket
    if trials is None:
        return None
    if search.pruner == "none":
        return float(trials) * search.max_budget
    per_trial, before = 0.0, 0
    for k, level in enumerate(levels):
        per_trial += (level - before) / search.eta**k
        before = level
    return float(trials) * per_trial
