"""Model-based sampling: new configurations from a TPE model of the results so far, as BOHB does.

Random sampling ignores what the trials found; a model proposes where good results were. The
model is Optuna's TPE (Bergstra et al., 2011), fitted, as BOHB (Falkner et al., 2018) fits its
density estimators, on the results of one budget: the largest budget at which at least
`min_observations` configurations have a result. The results are those the pruner ranks: each
rung's for SHA, ASHA and Hyperband, the final one without a pruner. Until some budget has enough,
configurations are drawn at random, the same ones `sampler: random` draws with the same seed.

A suggestion depends only on the seed, how many came before and the results in the order they
were told, so a run's decision log replays it exactly (`basht resume`), as with the other
samplers. Each one fits TPE anew over the chosen budget's results (about 7 ms after 100 results
and 21 ms after 1,000 on the LCBench space, benchmarks/tpe_speed.py): fine for real trials, not
meant for 100,000 simulated ones.
"""

from __future__ import annotations

import math
from typing import Any

from basht.errors import BashtError
from basht.space import Config, SpaceLike
from basht.tune._checks import check_mode, check_whole
from basht.tune.fast_tpe import cached_tpe_sampler
from basht.tune.log_ndtr import vectorised_log_ndtr
from basht.tune.optuna_space import params, suggest
from basht.tune.samplers import RandomSampler, SpaceSampler

NEEDS_OPTUNA = "tpe needs Optuna: pip install 'basht[tpe]'"
#: The fewest asked trials a study holds before it is built again from its results alone.
_REBUILD_AFTER = 500


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise BashtError(f"sampler: {NEEDS_OPTUNA}") from None
    return optuna


def _quiet_study(optuna: Any, **kwargs: Any) -> Any:
    """A study in memory, without Optuna's INFO line about creating it."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.create_study(**kwargs)
    finally:
        optuna.logging.set_verbosity(verbosity)


def drawn_distributions(optuna: Any, space: Any) -> dict[str, Any]:
    """The distributions `suggest` asks for over `space`, so a result told to a study matches a
    configuration drawn from it exactly."""
    probe = _quiet_study(optuna, sampler=optuna.samplers.RandomSampler(seed=0))
    trial = probe.ask()
    suggest(trial, space)
    return dict(trial.distributions)


def _tpe(optuna: Any, seed: int) -> Any:
    # No constant liar: the trials asked and not yet told are not results.
    return cached_tpe_sampler(optuna, seed=seed, n_startup_trials=0, constant_liar=False)


def _seed(study: Any, seed: int) -> None:
    """Seed the study's TPE for one draw, so what it proposes depends on nothing else kept here.

    The sampler is kept, with what it caches about the study's search space, and only its random
    state is seeded; an Optuna without that state gets a new sampler for the draw instead.
    """
    state = getattr(getattr(study.sampler, "_rng", None), "rng", None)
    if state is not None and hasattr(state, "seed"):
        state.seed(seed)
    else:  # pragma: no cover - Optuna 3.5 to 5.0 all keep `_rng`
        study.sampler = _tpe(_optuna(), seed)


class TPESampler(SpaceSampler):
    """TPE on the largest budget with `min_observations` results, random draws until then."""

    def __init__(
        self,
        space: SpaceLike,
        seed: int = 0,
        mode: str = "max",
        min_observations: int | None = None,
    ):
        super().__init__(space)
        check_whole("seed", seed, 0)
        check_mode(mode)
        check_whole("min_observations", min_observations, 1, optional=True)
        self._optuna = _optuna()
        self.seed, self.mode = seed, mode
        # BOHB's N_min is d + 1; Optuna's TPE starts modelling after 10 trials.
        self.min_observations = min_observations or max(10, len(self.space) + 1)
        self._random = RandomSampler(self.space, seed)
        self._drawn = 0
        self._results: dict[int, list[tuple[Config, float]]] = {}  # budget -> (config, value)
        self._studies: dict[int, Any] = {}  # budget -> its Optuna study, results added so far
        self._added: dict[int, int] = {}
        self._asked: dict[int, int] = {}  # budget -> the failed trials its study holds
        self._distributions = drawn_distributions(self._optuna, self.space)

    # -- Sampler --------------------------------------------------------------------------------

    def next(self) -> Config:
        self._drawn += 1
        budget = self.model_budget()
        if budget is None:
            return self._random.next()
        study = self._study(budget)
        _seed(study, (self.seed * 1_000_003 + self._drawn) % 2**32)
        with vectorised_log_ndtr():  # TPE samples as `suggest` asks for each parameter
            trial = study.ask()
            config = suggest(trial, self.space)
        # Its results come through `observe`. A trial left RUNNING would make Optuna scan every
        # trial after it again at each suggestion; a failed one is passed over for good.
        study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        self._asked[budget] = self._asked.get(budget, 0) + 1
        return config

    def observe(self, config: Config, budget: int, value: float) -> None:
        """A result the pruner ranks: `config` reached `value` at `budget`."""
        if math.isfinite(value):
            self._results.setdefault(budget, []).append((config, value))

    def model_budget(self) -> int | None:
        """The budget the next configuration's model is fitted on, None while there is none."""
        enough = [b for b, told in self._results.items() if len(told) >= self.min_observations]
        return max(enough, default=None)

    def get_state(self) -> dict[str, Any]:
        return {
            "random": self._random.get_state(),
            "drawn": self._drawn,
            "results": {str(b): [[c, v] for c, v in told] for b, told in self._results.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._random.set_state(state["random"])
        self._drawn = state["drawn"]
        self._results = {int(b): [(c, v) for c, v in told] for b, told in state["results"].items()}
        self._studies, self._added, self._asked = {}, {}, {}

    # -- the model ------------------------------------------------------------------------------

    def _study(self, budget: int) -> Any:
        optuna = self._optuna
        study = self._studies.get(budget)
        if study is not None and self._asked.get(budget, 0) > max(
            _REBUILD_AFTER, self._added[budget]
        ):
            # Optuna filters the asked (failed) trials out at every suggestion: past as many as
            # there are results, a study of the results alone proposes the same, faster.
            study = None
        if study is None:
            direction = "maximize" if self.mode == "max" else "minimize"
            study = self._studies[budget] = _quiet_study(
                optuna, direction=direction, sampler=_tpe(optuna, seed=0)
            )
            self._added[budget] = self._asked[budget] = 0
        told = self._results[budget]
        for config, value in told[self._added[budget] :]:
            study.add_trial(
                optuna.trial.create_trial(
                    params=params(config, self.space),
                    distributions=self._distributions,
                    value=value,
                )
            )
        self._added[budget] = len(told)
        return study
