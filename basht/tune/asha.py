"""ASHA (Li et al., MLSys 2020) and asynchronous Hyperband: early stopping that never waits.

Two variants share one rung system:

* ``promotion`` (the paper's Algorithm 2, the default): every trial pauses at its rung. A free
  worker asks `suggest()`, which looks from the top rung down for the best trial in the top
  floor(n/eta) of its rung that was not promoted yet and resumes it to the next rung; only if no
  rung has one does a new configuration start at the bottom rung. While a rung holds fewer than
  eta results nobody in it is promotable, so its trials wait (no early "free pass").
* ``stopping`` (for workloads that cannot checkpoint): a trial runs on to the maximum budget and is
  judged as it crosses each rung: it continues only if its rank, counting itself, is below
  max(1, floor(n/eta)). So while a rung holds fewer than eta results only a new best continues.

Ties go to the earlier result. In the stopping variant a report that jumps past several rungs is
recorded at each of them with the same value (in promotion a trial pauses at the first one). A
failed trial keeps its recorded results (they were measured) but is never promoted again. With
``max_budget=None`` the rungs go on without end, as in the paper; the run then ends on a trial,
time or target limit.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np

from basht.errors import ArgumentError
from basht.space import SpaceLike
from basht.tune._checks import check_budgets, check_objective, check_rates, check_whole
from basht.tune._common import NewConfigs, never_suggested
from basht.tune.base import Decision, Suggestion
from basht.tune.ranking import ParetoRung, Score, Scored
from basht.tune.rungs import Rung, level, most_rungs, rung_levels, signed
from basht.tune.samplers import Sampler

VARIANTS = ("promotion", "stopping")
_CONTINUE, _PAUSE, _STOP = Decision.CONTINUE, Decision.PAUSE, Decision.STOP


@dataclass(slots=True)
class _Trial:
    config: dict[str, Any]
    bracket: int
    rung: int  # the rung the trial is training towards
    budget: int  # that rung's budget: reports below it only continue
    done: bool = False


class _Bracket:
    """One rung system: rungs at min·eta^(s+k), capped at max_budget when there is one.

    Rungs change only through `add`, `promote` and `withdraw`, which mark them dirty; the best
    promotable trial of each rung is kept, and `promotable()` recomputes only dirty rungs. A
    suggest() after one report then looks at one rung, not at all of them.
    """

    def __init__(
        self,
        min_budget: int,
        max_budget: int | None,
        eta: int,
        s: int,
        tie_break: str | None = None,
    ):
        """`tie_break`: results are scores ranked by non-dominated sorting (`ParetoRung`)."""
        self.min_budget, self.max_budget, self.eta, self.s = min_budget, max_budget, eta, s
        self.tie_break = tie_break
        self.levels = (
            rung_levels(min_budget, max_budget, eta, s) if max_budget is not None else None
        )
        self.rungs: list[Rung | ParetoRung] = []
        self._best: list[int | None] = []  # per rung: its best promotable trial (None at the top)
        self._dirty: set[int] = set()
        self._found: tuple[int, int] | None = None  # promotable()'s answer while nothing is dirty

    def budget(self, k: int) -> int:
        if self.levels is not None:
            return self.levels[k]
        return level(self.min_budget, self.eta, self.s, k)

    def is_top(self, k: int) -> bool:
        return self.levels is not None and k == len(self.levels) - 1

    def rung(self, k: int) -> Rung | ParetoRung:
        while len(self.rungs) <= k:
            budget = self.budget(len(self.rungs))
            if self.tie_break is None:
                self.rungs.append(Rung(budget, self.eta))
            else:
                self.rungs.append(ParetoRung(budget, self.eta, self.tie_break))
            self._best.append(None)
        return self.rungs[k]

    def add(self, k: int, trial_id: int, cost: Any, arrival: int) -> bool:
        """Record a result at rung k (see `Rung.add`)."""
        goes_on = self.rung(k).add(trial_id, cost, arrival)
        self._dirty.add(k)
        return goes_on

    def promote(self, k: int, trial_id: int) -> None:
        self.rungs[k].mark_promoted(trial_id)
        self._dirty.add(k)

    def withdraw(self, trial_id: int) -> None:
        for k, rung in enumerate(self.rungs):
            rung.withdraw(trial_id)
            self._dirty.add(k)

    def promotable(self) -> tuple[int, int] | None:
        """(trial, rung) of the best promotable trial, looking from the highest rung down."""
        dirty = self._dirty
        if dirty:
            best, rungs = self._best, self.rungs
            for k in dirty:
                # results at the maximum budget are final: never promoted
                best[k] = None if self.is_top(k) else rungs[k].best_promotable()
            dirty.clear()
            self._found = None
            for k in range(len(best) - 1, -1, -1):
                if best[k] is not None:
                    self._found = best[k], k
                    break
        return self._found


class AsyncSuccessiveHalving:
    """Brackets of ASHA; a new configuration joins one bracket, drawn by Hyperband's weights."""

    def __init__(
        self,
        space: SpaceLike,
        *,
        metric: str,
        mode: str = "max",
        min_budget: int = 1,
        max_budget: int | None = None,
        eta: int = 3,
        brackets: list[int],
        variant: str = "promotion",
        sampler: str | Sampler = "random",
        seed: int = 0,
        max_trials: int | None = None,
        scored: Scored | None = None,
    ):
        """`scored`: reports are scores of several objectives, ranked as `ParetoRung` does."""
        check_objective(metric, mode)
        check_budgets(min_budget, max_budget, eta)
        check_rates("brackets", brackets)
        if not isinstance(variant, str) or variant not in VARIANTS:
            raise ArgumentError(
                f"variant: expected {' or '.join(map(repr, VARIANTS))}, got {variant!r}"
            )
        if variant == "stopping" and max_budget is None:
            raise ArgumentError(
                "max_budget: the stopping variant runs each trial to max_budget; give one"
            )
        self.metric, self.mode, self.eta, self.variant = metric, mode, eta, variant
        self.min_budget, self.max_budget = min_budget, max_budget
        self.scored = scored
        tie_break = scored.tie_break if scored is not None else None
        self.brackets = [_Bracket(min_budget, max_budget, eta, s, tie_break) for s in brackets]
        n_objectives = scored.width if scored is not None else None
        self.new = NewConfigs(space, sampler, seed, max_trials, mode, n_objectives)
        self.trials: dict[int, _Trial] = {}
        self.arrivals = 0
        # Bracket choice has its own stream, so it never shifts the configurations drawn.
        self._bracket_choice = _WeightedChoice(
            np.random.default_rng([seed, 1]), _hyperband_weights(brackets, eta)
        )

    # -- ask ------------------------------------------------------------------------------------

    def suggest(self) -> Suggestion | None:
        if self.variant == "promotion":
            for index, bracket in enumerate(self.brackets):
                found = bracket.promotable()
                if found is not None:
                    return self._promote(index, *found)
        drawn = self.new.draw()
        if drawn is None:
            return None
        trial_id, config = drawn
        index = 0 if len(self.brackets) == 1 else self._bracket_choice.pick()
        first = self.brackets[index].budget(0)
        self.trials[trial_id] = _Trial(config, index, 0, first)
        budget = first if self.variant == "promotion" else self.max_budget
        assert budget is not None
        return Suggestion(trial_id, config, budget, meta={"bracket": index, "rung": 0})

    def next_promotion(self) -> int | None:
        """The trial `suggest` would resume now, if any; asking promotes nothing."""
        if self.variant == "promotion":
            for bracket in self.brackets:
                found = bracket.promotable()
                if found is not None:
                    return found[0]
        return None

    def _promote(self, index: int, trial_id: int, k: int) -> Suggestion:
        bracket = self.brackets[index]
        bracket.promote(k, trial_id)
        trial = self.trials[trial_id]
        trial.rung, trial.budget = k + 1, bracket.budget(k + 1)
        meta = {"bracket": index, "rung": k + 1, "promoted_from": k}
        return Suggestion(trial_id, trial.config, trial.budget, resume=True, meta=meta)

    # -- tell -----------------------------------------------------------------------------------

    def report(self, trial_id: int, budget: int, value: float | Score) -> Decision:
        try:  # inline, not `_trial`: a report is the hot path, and a try costs nothing
            trial = self.trials[trial_id]
        except KeyError:
            raise never_suggested(trial_id) from None
        if self.scored is not None:
            value = self.scored.check(value)
        if budget < trial.budget:
            return _CONTINUE  # between rungs: most per-epoch reports end here
        return self._reach(trial_id, trial, budget, value)

    def _reach(self, trial_id: int, trial: _Trial, budget: int, value: Any) -> Decision:
        """Record a report at every rung it reached (one, unless it jumped several)."""
        bracket = self.brackets[trial.bracket]
        cost = value if self.scored is not None else signed(value, self.mode)
        while budget >= trial.budget:
            k = trial.rung
            self.arrivals += 1
            self.new.observe(trial_id, trial.budget, value)
            goes_on = bracket.add(k, trial_id, cost, self.arrivals)
            if bracket.is_top(k):
                return _CONTINUE  # at the maximum budget: the trial completes here
            if self.variant == "promotion":
                return _PAUSE  # wait at the rung until suggest() promotes it
            if not goes_on:
                return _STOP
            trial.rung, trial.budget = k + 1, bracket.budget(k + 1)
        return _CONTINUE

    def complete(self, trial_id: int) -> None:
        self._trial(trial_id).done = True

    def fail(self, trial_id: int) -> None:
        trial = self._trial(trial_id)
        trial.done = True
        self.brackets[trial.bracket].withdraw(trial_id)

    def _trial(self, trial_id: int) -> _Trial:
        try:
            return self.trials[trial_id]
        except KeyError:
            raise never_suggested(trial_id) from None

    def is_finished(self) -> bool:
        if self.new.available():
            return False
        return self.variant == "stopping" or all(b.promotable() is None for b in self.brackets)


def _hyperband_weights(brackets: list[int], eta: int) -> np.ndarray:
    """P(bracket s) proportional to the trials Hyperband gives it: ceil((S+1)·eta^(S-s)/(S-s+1)).

    Here s is the bracket's minimum early-stopping rate, so s = 0 is the most aggressive bracket
    (the one with the most configurations).
    """
    top = max(brackets)
    counts = [-(-(top + 1) * eta ** (top - s) // (top - s + 1)) for s in brackets]
    weights = np.array(counts, dtype=float)
    return weights / weights.sum()


class _WeightedChoice:
    """`int(rng.choice(len(p), p=p))`, the same index from the same stream, without its overhead.

    numpy's `choice` draws one `rng.random()` per call and returns its position in the normalised
    cumulative weights (`searchsorted(..., side="right")`); here the uniforms come a block at a
    time (the same doubles in the same order) and the position is a `bisect_right`.
    """

    _BLOCK = 1024

    def __init__(self, rng: np.random.Generator, p: np.ndarray):
        cdf = p.cumsum()
        cdf /= cdf[-1]
        self._cdf: list[float] = cdf.tolist()
        self._rng = rng
        self._uniforms: list[float] = []

    def pick(self) -> int:
        if not self._uniforms:
            self._uniforms = self._rng.random(self._BLOCK).tolist()[::-1]
        return bisect_right(self._cdf, self._uniforms.pop())


def ASHA(  # noqa: N802 - reads as the algorithm's name
    space: SpaceLike,
    *,
    metric: str,
    mode: str = "max",
    min_budget: int = 1,
    max_budget: int | None = None,
    eta: int = 3,
    min_early_stopping_rate: int = 0,
    variant: str = "promotion",
    sampler: str | Sampler = "random",
    seed: int = 0,
    max_trials: int | None = None,
    scored: Scored | None = None,
) -> AsyncSuccessiveHalving:
    """The paper's ASHA: one bracket with rungs at min_budget·eta^(s+k); with `scored`, the
    multi-objective ASHA of Schmucker et al. (2021)."""
    check_whole("min_early_stopping_rate", min_early_stopping_rate, 0)
    return AsyncSuccessiveHalving(
        space,
        metric=metric,
        mode=mode,
        min_budget=min_budget,
        max_budget=max_budget,
        eta=eta,
        brackets=[min_early_stopping_rate],
        variant=variant,
        sampler=sampler,
        seed=seed,
        max_trials=max_trials,
        scored=scored,
    )


def AsyncHyperband(  # noqa: N802 - reads as the algorithm's name
    space: SpaceLike,
    *,
    metric: str,
    mode: str = "max",
    min_budget: int = 1,
    max_budget: int,
    eta: int = 3,
    variant: str = "promotion",
    sampler: str | Sampler = "random",
    seed: int = 0,
    max_trials: int | None = None,
    scored: Scored | None = None,
) -> AsyncSuccessiveHalving:
    """Hyperband's brackets run as ASHA; each new configuration draws its bracket (seeded)."""
    check_budgets(min_budget, max_budget, eta, bounded=True)
    s_max = most_rungs(min_budget, max_budget, eta)
    return AsyncSuccessiveHalving(
        space,
        metric=metric,
        mode=mode,
        min_budget=min_budget,
        max_budget=max_budget,
        eta=eta,
        brackets=list(range(s_max + 1)),
        variant=variant,
        sampler=sampler,
        seed=seed,
        max_trials=max_trials,
        scored=scored,
    )
