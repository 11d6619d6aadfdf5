"""The experiment's search in Syne Tune's terms: its configuration space and its scheduler.

Syne Tune 0.16 has no promotion ASHA, no synchronous successive halving and no Hyperband
scheduler (its legacy `HyperbandScheduler`, with `type="promotion"`, went in 0.15): every pruner
maps to its `AsynchronousSuccessiveHalving`, which stops trials at rungs and never pauses one.
`sha` and `asha` run one bracket, `hyperband` and `async-hyperband` Hyperband's number of
brackets; the run's `algorithm` says so. `pruner: none` is its `RandomSearch`, which runs every
trial to the end (FIFO). `sampler: tpe` is its `TPE` (kernel density estimators of the good and
the bad configurations, as BOHB's), or its `BOHB` (the same model under ASHA) with a pruner.

Seeds: every scheduler takes `random_seed`, but `RandomSearch` draws from numpy's global
generator (its searcher calls `Domain.sample()` without one), and ASHA picks each trial's
bracket from it and, after its first five results, draws configurations from it too. The run
phase seeds that generator from the experiment seed around `Tuner.run()` (`seeded_driver`, as
for Ray Tune), so the k-th configuration drawn, and its bracket, are the same in every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from basht.errors import BashtError

if TYPE_CHECKING:  # the trial processes unpickle a SpaceCodec: they import this module lean
    from basht.experiment import Experiment

#: The result key of the epochs done, ASHA's `time_attr`.
EPOCH = "basht_epoch"
#: `max_budget: null` (ASHA without a top rung): the time budget or target ends the run.
UNBOUNDED_T = 2**31 - 1
#: Types Syne Tune's `choice` takes as they are (all values of one choice of one type).
_PLAIN = (str, int, float, bool)


@dataclass(frozen=True)
class SpaceCodec:
    """Turns a Syne Tune configuration back into Basht's: a choice whose values Syne Tune cannot
    hold (lists, mixed types, null) travels as the index of its value."""

    names: tuple[str, ...]
    indexed: dict[str, list[Any]] = field(default_factory=dict)

    def basht_config(self, config: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name in self.names:
            value = config.get(name)
            if name in self.indexed and value is not None:
                value = self.indexed[name][int(value)]
            out[name] = value
        return out


def _as_is(values: list[Any]) -> bool:
    kinds = {type(v) for v in values}
    return len(kinds) == 1 and kinds.pop() in _PLAIN


def config_space(experiment: Experiment) -> tuple[dict[str, Any], SpaceCodec]:
    """Syne Tune's configuration space for the file's `space`, and how to read its configs."""
    from syne_tune import config_space as cs

    from basht.space import Choice, Float, Int

    if experiment.search.sampler not in ("random", "tpe"):
        raise BashtError(
            f"search.sampler: {experiment.search.sampler} has no Syne Tune counterpart (random, tpe)"
        )
    space: dict[str, Any] = {}
    indexed: dict[str, list[Any]] = {}
    for name, parameter in experiment.search_space.items():
        if isinstance(parameter, Choice):
            values = parameter.grid()
            if _as_is(values):
                space[name] = cs.choice(values)
            else:
                indexed[name] = values
                space[name] = cs.choice(list(range(len(values))))
        elif parameter.step is not None:  # Basht's grid points, in order, drawn uniformly
            space[name] = cs.ordinal(parameter.grid(), kind="equal")
        elif isinstance(parameter, Float):
            low, high = parameter.low, parameter.high
            space[name] = cs.loguniform(low, high) if parameter.log else cs.uniform(low, high)
        else:
            assert isinstance(parameter, Int)
            low, high = parameter.low, parameter.high  # both included, as Basht's
            space[name] = cs.lograndint(low, high) if parameter.log else cs.randint(low, high)
    return space, SpaceCodec(tuple(experiment.search_space), indexed)


def max_t(experiment: Experiment) -> int:
    search = experiment.search
    return search.max_budget if search.max_budget is not None else UNBOUNDED_T


def brackets(experiment: Experiment) -> int:
    """One bracket for SHA and ASHA; Hyperband's number (one per rung below the top) for both
    Hyperbands, as Ray Tune's peer runs async-hyperband."""
    from basht.tune import rung_levels

    search = experiment.search
    if search.pruner in ("hyperband", "async-hyperband"):
        return len(rung_levels(search.min_budget, max_t(experiment), search.eta))
    return 1


def scheduler(experiment: Experiment, space: dict[str, Any]) -> Any:
    """Syne Tune's scheduler for the file's sampler and pruner, seeded with the experiment seed."""
    from syne_tune.optimizer.baselines import ASHA, BOHB, TPE, RandomSearch

    search = experiment.search
    minimize = search.mode == "min"
    seed = experiment.seed
    if search.pruner == "none":
        if search.sampler == "tpe":
            return TPE(space, metric=search.metric, do_minimize=minimize, random_seed=seed)
        return RandomSearch(space, metrics=[search.metric], do_minimize=minimize, random_seed=seed)
    kind = BOHB if search.sampler == "tpe" else ASHA
    return kind(
        space,
        metric=search.metric,
        time_attr=EPOCH,
        max_t=max_t(experiment),
        do_minimize=minimize,
        random_seed=seed,
        grace_period=search.min_budget,
        reduction_factor=search.eta,
        brackets=brackets(experiment),
    )


def describe(experiment: Experiment) -> str:
    """For the run's `algorithm` column (at most 80 characters)."""
    search = experiment.search
    if search.pruner == "none":
        name = "TPE" if search.sampler == "tpe" else "RandomSearch"
        return f"syne tune {name} (FIFO)"
    name = "BOHB" if search.sampler == "tpe" else "ASHA"
    count = brackets(experiment)
    shape = f", brackets={count}" if count > 1 else ""
    return f"syne tune {name}(r={search.min_budget}, eta={search.eta}{shape}, stopping)"[:80]
