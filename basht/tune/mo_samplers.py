"""Multi-objective sampling: new configurations from Optuna's NSGA-II or MOTPE, fitted on the
costs (a constraint violation, then objectives to minimise) that earlier configurations reached.

The multi-objective algorithms tell each result as `observe(config, budget, costs)` with
`costs = (violation, c_1, ..., c_k)`: `violation >= 0` is the summed constraint excess (0 is
feasible) and each c_i is already signed for minimisation. As `basht.tune.tpe` does for one
objective, the model is fitted, as BOHB fits its density estimators, on the results of one budget:
the largest with at least `min_observations` of them. Until some budget has enough, configurations
are drawn at random, the same ones `sampler: random` draws with the same seed.

Optuna's studies minimise every objective, and feasibility reaches its samplers as each trial's
constraint value (the violation; Optuna counts <= 0 as feasible), stored on the trial the way
Optuna stores what a `constraints_func` returned. NSGA-II (Deb et al., 2002) breeds each
generation from the elite of the last; generation g is the results told g·P .. g·P+P-1 at the
model's budget (P the population size), so the parents, and with the seed each proposal, depend
only on the results in the order they were told: a run's decision log replays it exactly.
MOTPE (Ozaki et al., 2020) is Optuna's TPE over the non-dominated ranks of the results.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from basht.errors import ArgumentError, BashtError
from basht.space import Config, SpaceLike
from basht.tune._checks import check_whole
from basht.tune.log_ndtr import vectorised_log_ndtr
from basht.tune.optuna_space import params, suggest
from basht.tune.samplers import GridSampler, RandomSampler, Sampler, SpaceSampler
from basht.tune.tpe import _quiet_study, drawn_distributions

MO_SAMPLERS = ("random", "grid", "nsga2", "tpe")

Costs = tuple[float, ...]  # (violation, c_1, ..., c_k)


def _optuna(name: str) -> Any:
    try:
        import optuna
    except ImportError:
        raise BashtError(f"sampler: {name} needs Optuna: pip install 'basht[tpe]'") from None
    return optuna


class _OptunaMOSampler(SpaceSampler):
    """What NSGA-II and MOTPE share: the told results per budget, the study each budget's model
    is fitted in, random draws until a budget has enough results, and the state."""

    NAME = ""  # the sampler's name in an experiment file

    def __init__(
        self, space: SpaceLike, seed: int, n_objectives: int, min_observations: int
    ) -> None:
        super().__init__(space)
        check_whole("seed", seed, 0)
        check_whole("n_objectives", n_objectives, 1)
        self._optuna = optuna = _optuna(self.NAME)
        self.seed, self.n_objectives, self.min_observations = seed, n_objectives, min_observations
        self._random = RandomSampler(self.space, seed)
        self._drawn = 0
        self._results: dict[int, list[tuple[Config, Costs]]] = {}  # budget -> (config, costs)
        self._studies: dict[int, Any] = {}  # budget -> its Optuna study, results added so far
        self._added: dict[int, int] = {}
        self._distributions = drawn_distributions(optuna, self.space)
        # Where Optuna keeps a trial's constraint values ("constraints" from 3.x to 5.0).
        self._constraints_key = getattr(optuna.samplers._base, "_CONSTRAINTS_KEY", "constraints")
        # Optuna before 5.0 weighs constraints only in a sampler given a `constraints_func`;
        # 5.0 reads every trial's own and deprecates the argument (a FutureWarning).
        self._needs_constraints_func = int(optuna.__version__.split(".")[0]) < 5

    # -- Sampler --------------------------------------------------------------------------------

    def next(self) -> Config:
        self._drawn += 1
        budget = self.model_budget()
        if budget is None:
            return self._random.next()
        # A sampler seeded for this draw: what it proposes depends on nothing else kept here.
        # The asked trial stays RUNNING in the study for good (its results come through
        # `observe`); neither model counts a running trial as a result.
        model = self._model((self.seed * 1_000_003 + self._drawn) % 2**32)
        study = self._study(budget, model)
        study.sampler = model
        with vectorised_log_ndtr():
            return suggest(study.ask(), self.space)

    def observe(self, config: Config, budget: int, costs: Sequence[float]) -> None:
        """A result the algorithm ranks: `config` reached `costs` (violation, c_1, ..., c_k,
        each c_i to minimise) at `budget`. A result with a cost that is not finite is left out."""
        k = self.n_objectives
        expected = f"{k + 1} costs (the violation, then {k} objective{'s' * (k > 1)})"
        try:
            told = tuple(float(c) for c in costs)
        except (TypeError, ValueError):
            raise ArgumentError(f"costs: expected {expected}, got {costs!r}") from None
        if len(told) != k + 1:
            raise ArgumentError(f"costs: expected {expected}, got {len(told)}: {costs!r}")
        if not all(math.isfinite(c) for c in told):
            return
        if told[0] < 0:
            raise ArgumentError(f"costs: expected a violation of at least 0, got {told[0]!r}")
        self._results.setdefault(budget, []).append((config, told))

    def model_budget(self) -> int | None:
        """The budget the next configuration's model is fitted on, None while there is none."""
        enough = [b for b, told in self._results.items() if len(told) >= self.min_observations]
        return max(enough, default=None)

    def get_state(self) -> dict[str, Any]:
        return {
            "random": self._random.get_state(),
            "drawn": self._drawn,
            "results": {
                str(b): [[c, list(costs)] for c, costs in told] for b, told in self._results.items()
            },
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._random.set_state(state["random"])
        self._drawn = state["drawn"]
        self._results = {
            int(b): [(c, tuple(costs)) for c, costs in told] for b, told in state["results"].items()
        }
        self._studies, self._added = {}, {}

    # -- the model ------------------------------------------------------------------------------

    def _model(self, seed: int) -> Any:
        """Optuna's sampler for one draw."""
        raise NotImplementedError

    def _trial_attrs(self, index: int) -> dict[str, Any]:
        """System attributes of the `index`-th result told at a budget, beyond its constraint."""
        return {}

    def _prepare(self, study: Any, model: Any, budget: int) -> None:
        """Anything the model needs in the study before it is asked."""

    def _make(self, cls: Any, **kwargs: Any) -> Any:
        """Optuna's sampler `cls`, given a `constraints_func` where its version needs one (an
        experimental argument there, so quietly: the values it would return are on the trials)."""
        if not self._needs_constraints_func:
            return cls(**kwargs)
        key = self._constraints_key
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", self._optuna.exceptions.ExperimentalWarning)
            return cls(constraints_func=lambda trial: trial.system_attrs[key], **kwargs)

    def _study(self, budget: int, model: Any) -> Any:
        optuna = self._optuna
        study = self._studies.get(budget)
        if study is None:
            study = self._studies[budget] = _quiet_study(
                optuna, sampler=model, directions=["minimize"] * self.n_objectives
            )
            self._added[budget] = 0
        told = self._results[budget]
        for index in range(self._added[budget], len(told)):
            config, (violation, *objectives) = told[index]
            study.add_trial(
                optuna.trial.create_trial(
                    params=params(config, self.space),
                    distributions=self._distributions,
                    values=objectives,
                    system_attrs={self._constraints_key: [violation], **self._trial_attrs(index)},
                )
            )
        self._added[budget] = len(told)
        self._prepare(study, model, budget)
        return study


class NSGA2Sampler(_OptunaMOSampler):
    """NSGA-II on the largest budget with `population_size` results, random draws until then.

    Generation g is the results told g·P .. g·P+P-1 at that budget; each proposal is a child of
    the elite of the generations told so far, as Optuna's NSGA-II breeds them.
    """

    NAME = "nsga2"
    POPULATION_SIZE = 20  # Optuna's default is 50: too many full-budget trials to wait for

    def __init__(
        self,
        space: SpaceLike,
        seed: int = 0,
        n_objectives: int = 2,
        population_size: int | None = None,
    ) -> None:
        check_whole("population_size", population_size, 2, optional=True)  # crossover takes 2
        self.population_size = population_size or self.POPULATION_SIZE
        super().__init__(space, seed, n_objectives, self.population_size)
        cls = self._optuna.samplers.NSGAIISampler
        # The trial attribute Optuna reads a trial's generation from ("nsga2:generation" before
        # its genetic samplers shared a base class, 4.x).
        get_key = getattr(cls, "_get_generation_key", None)
        self._generation_key = get_key() if get_key else "nsga2:generation"
        self._bred: dict[int, int] = {}  # budget -> generations whose parents the study holds

    def _model(self, seed: int) -> Any:
        samplers = self._optuna.samplers
        return self._make(samplers.NSGAIISampler, population_size=self.population_size, seed=seed)

    def _trial_attrs(self, index: int) -> dict[str, Any]:
        return {self._generation_key: index // self.population_size}

    def _prepare(self, study: Any, model: Any, budget: int) -> None:
        # Optuna selects generation g's parents from g - 1's, recursively, and keeps them in the
        # study: one generation at a time here, so a restored sampler's fresh study does not
        # recurse through every generation at once. (Optuna before 4.x loops instead.)
        select = getattr(model, "get_parent_population", None)
        if select is None:
            return
        asked = len(self._results[budget]) // self.population_size  # the next trial's generation
        for generation in range(self._bred.get(budget, 0) + 1, asked + 1):
            select(study, generation)
        self._bred[budget] = max(asked, self._bred.get(budget, 0))

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self._bred = {}


class MOTPESampler(_OptunaMOSampler):
    """Optuna's multi-objective TPE on the largest budget with `min_observations` results,
    random draws until then."""

    NAME = "tpe"

    def __init__(
        self,
        space: SpaceLike,
        seed: int = 0,
        n_objectives: int = 2,
        min_observations: int | None = None,
    ) -> None:
        check_whole("min_observations", min_observations, 1, optional=True)
        super().__init__(space, seed, n_objectives, min_observations or 0)
        # BOHB's N_min is d + 1; Optuna's TPE starts modelling after 10 trials.
        self.min_observations = min_observations or max(10, len(self.space) + 1)

    def _model(self, seed: int) -> Any:
        samplers = self._optuna.samplers
        return self._make(samplers.TPESampler, seed=seed, n_startup_trials=0, constant_liar=False)


def make_mo_sampler(name: str, space: SpaceLike, seed: int, n_objectives: int) -> Sampler:
    """The sampler `name` for a multi-objective algorithm (the Optuna ones import it when built)."""
    if name == "random":
        return RandomSampler(space, seed)
    if name == "grid":
        return GridSampler(space)
    if name == "nsga2":
        return NSGA2Sampler(space, seed, n_objectives)
    if name == "tpe":
        return MOTPESampler(space, seed, n_objectives)
    raise ArgumentError(
        f"sampler: expected one of {', '.join(map(repr, MO_SAMPLERS))}, got {name!r}"
    )
