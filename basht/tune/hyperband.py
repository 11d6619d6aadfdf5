"""Synchronous successive halving and Hyperband (Li et al., JMLR 2018).

A bracket starts n configurations at its first rung and waits until every one of them has a
result there; then the top floor(n_0 / eta^(k+1)) (at least one) resume from their checkpoints to
the next rung and the rest are done. Hyperband runs brackets of every shape from the most
aggressive (s = 0, the most rungs) to plain random search. When a bracket has no job for a free
worker because it waits for a rung to fill, the next bracket starts (the parallel scheme of BOHB,
also what Ray's HyperBandScheduler does), so workers idle only when the trial limit is reached.

Ties go to the earlier result. A failed trial counts as the worst result of its rung.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Any

from basht.errors import ArgumentError
from basht.space import SpaceLike
from basht.tune._checks import check_budgets, check_objective, check_rates, check_whole
from basht.tune._common import NewConfigs, never_suggested
from basht.tune.base import Decision, Suggestion
from basht.tune.ranking import Score, Scored, order
from basht.tune.rungs import most_rungs, rung_levels, signed
from basht.tune.samplers import Sampler

# Bound once: an enum member looked up on its class costs a descriptor call, once per report.
_CONTINUE, _PAUSE = Decision.CONTINUE, Decision.PAUSE


def bracket_size(s_max: int, s: int, eta: int) -> int:
    """Hyperband's n for the bracket with early-stopping rate s: ceil((S+1)·eta^(S-s) / (S-s+1))."""
    rungs = s_max - s
    return -(-(s_max + 1) * eta**rungs // (rungs + 1))


class _SyncBracket:
    def __init__(self, index: int, s: int, levels: list[int], n: int, eta: int):
        self.index, self.s, self.levels, self.n, self.eta = index, s, levels, n, eta
        self.k = 0
        self.to_start = n  # new configurations still to draw for rung 0
        self.queue: deque[int] = deque()  # promoted trials waiting for a worker
        self.members: set[int] = set()  # trials that owe a result at rung k
        self.results: dict[int, tuple[Any, int]] = {}
        self.done = False

    def survivors(self, k: int) -> int:
        return max(1, self.n // self.eta ** (k + 1))

    def rung_complete(self) -> bool:
        return self.to_start == 0 and not self.queue and len(self.results) == len(self.members)

    def has_job(self) -> bool:
        """A trial to resume or a configuration to draw, now."""
        return not self.done and (bool(self.queue) or self.to_start > 0)

    def advance(self, tie_break: str | None = None) -> list[int]:
        """Close rung k: keep the best, return the trials that are out. With `tie_break` the
        results are scores, ranked as `basht.tune.ranking.order` does (infeasible ones last)."""
        if tie_break is None:
            ranked = sorted(self.results, key=lambda t: self.results[t])
        else:
            entries = [(t, score, arrival) for t, (score, arrival) in self.results.items()]
            ranked = order(entries, tie_break)
        keep = ranked[: self.survivors(self.k)]
        if tie_break is not None:  # an infeasible trial is never resumed
            keep = [t for t in keep if self.results[t][0][0] == 0]
        if self.k == len(self.levels) - 1:
            self.done = True
            return []
        if not keep:  # nothing feasible to go on with: the bracket ends here
            self.done = True
            return ranked
        self.k += 1
        self.queue.extend(keep)
        self.members = set(keep)
        self.results = {}
        return ranked[len(keep) :]


class SynchronousHyperband:
    """Brackets of synchronous SHA, each of a shape in `shapes` (early-stopping rates), in turn."""

    def __init__(
        self,
        space: SpaceLike,
        *,
        metric: str,
        mode: str = "max",
        min_budget: int = 1,
        max_budget: int,
        eta: int = 3,
        shapes: list[int],
        bracket_sizes: list[int] | None = None,
        repeat: bool = True,
        sampler: str | Sampler = "random",
        seed: int = 0,
        max_trials: int | None = None,
        scored: Scored | None = None,
    ):
        """`scored`: reports are scores of several objectives (`basht.tune.ranking`)."""
        check_objective(metric, mode)
        check_budgets(min_budget, max_budget, eta, bounded=True)
        check_rates("shapes", shapes)
        if bracket_sizes is not None:
            if not isinstance(bracket_sizes, list | tuple) or len(bracket_sizes) != len(shapes):
                raise ArgumentError(
                    f"bracket_sizes: expected one size per shape ({len(shapes)}), "
                    f"got {bracket_sizes!r}"
                )
            for size in bracket_sizes:
                check_whole("bracket_sizes", size, 1)
        self.metric, self.mode, self.eta = metric, mode, eta
        self.min_budget, self.max_budget = min_budget, max_budget
        self.shapes = shapes
        s_max = most_rungs(min_budget, max_budget, eta)
        self.sizes = bracket_sizes or [bracket_size(s_max, s, eta) for s in shapes]
        self.repeat = repeat
        self.scored = scored
        n_objectives = scored.width if scored is not None else None
        self.new = NewConfigs(space, sampler, seed, max_trials, mode, n_objectives)
        self.brackets: list[_SyncBracket] = []
        self.trial_bracket: dict[int, int] = {}
        self.configs: dict[int, dict[str, Any]] = {}
        self.arrivals = 0
        self.out: list[int] = []  # trials a closed rung left behind (never resumed)
        # Indices of the brackets that may have a job, smallest first: suggest() takes the first
        # bracket with one without looking at the others (at scale thousands are open or done).
        # Every bracket with a job is in it; one found without a job is dropped.
        self._with_jobs: list[int] = []
        self._listed: set[int] = set()

    def _list(self, bracket: _SyncBracket) -> None:
        """Note that `bracket` has a job (it opened, or a rung closed and queued survivors)."""
        if bracket.index not in self._listed:
            self._listed.add(bracket.index)
            heappush(self._with_jobs, bracket.index)

    def _open_bracket(self) -> _SyncBracket | None:
        number = len(self.brackets)
        if number >= len(self.shapes) and not self.repeat:
            return None
        n = self.new.available(self.sizes[number % len(self.shapes)])
        if n == 0:
            return None
        s = self.shapes[number % len(self.shapes)]
        levels = rung_levels(self.min_budget, self.max_budget, self.eta, s)
        bracket = _SyncBracket(number, s, levels, n, self.eta)
        self.brackets.append(bracket)
        self._list(bracket)
        return bracket

    def suggest(self) -> Suggestion | None:
        """The job of the first bracket (by index) that has one, else a new bracket's."""
        with_jobs, passed = self._with_jobs, []
        try:
            while with_jobs:
                bracket = self.brackets[with_jobs[0]]
                if not bracket.has_job():
                    self._listed.discard(heappop(with_jobs))
                    continue
                job = self._job(bracket)
                if job is not None:
                    return job
                # Its draw failed: the brackets after it are asked next, as a scan in index
                # order would; it stays listed if closing its rung queued survivors.
                passed.append(heappop(with_jobs))
            while True:
                bracket = self._open_bracket()
                if bracket is None:
                    return None
                job = self._job(bracket)
                if job is not None:
                    return job
        finally:
            for index in passed:
                heappush(with_jobs, index)

    def next_promotion(self) -> int | None:
        """The trial `suggest` would resume now, if any; asking promotes nothing (None where
        the next job is a new configuration)."""
        for index in sorted(self._with_jobs):
            bracket = self.brackets[index]
            if bracket.has_job():
                return bracket.queue[0] if bracket.queue else None
        return None

    def _job(self, bracket: _SyncBracket) -> Suggestion | None:
        budget = bracket.levels[bracket.k]
        meta = {"bracket": bracket.index, "rung": bracket.k}
        if bracket.queue:
            trial_id = bracket.queue.popleft()
            return Suggestion(trial_id, self.configs[trial_id], budget, resume=True, meta=meta)
        if bracket.to_start:
            drawn = self.new.draw()
            if drawn is None:
                bracket.n -= bracket.to_start  # the sampler ran out: a smaller bracket
                bracket.to_start = 0
                if not bracket.members:
                    bracket.done = True  # it never started a trial: nothing will close it
                self._maybe_advance(bracket)
                return None
            trial_id, config = drawn
            bracket.to_start -= 1
            bracket.members.add(trial_id)
            self.trial_bracket[trial_id] = bracket.index
            self.configs[trial_id] = config
            return Suggestion(trial_id, config, budget, meta=meta)
        return None

    def report(self, trial_id: int, budget: int, value: float | Score) -> Decision:
        try:  # inline, not `_bracket_of`: a report is the hot path, and a try costs nothing
            bracket = self.brackets[self.trial_bracket[trial_id]]
        except KeyError:
            raise never_suggested(trial_id) from None
        if self.scored is not None:
            value = self.scored.check(value)
        if budget < bracket.levels[bracket.k] or trial_id not in bracket.members:
            return _CONTINUE
        self.arrivals += 1
        cost = value if self.scored is not None else signed(value, self.mode)
        bracket.results[trial_id] = (cost, self.arrivals)
        self.new.observe(trial_id, bracket.levels[bracket.k], value)
        top = bracket.k == len(bracket.levels) - 1
        self._maybe_advance(bracket)
        return _CONTINUE if top else _PAUSE

    def _maybe_advance(self, bracket: _SyncBracket) -> None:
        while not bracket.done and bracket.members and bracket.rung_complete():
            self.out.extend(bracket.advance(self.scored.tie_break if self.scored else None))
            if bracket.queue:
                self._list(bracket)

    def complete(self, trial_id: int) -> None:
        self._bracket_of(trial_id)

    def fail(self, trial_id: int) -> None:
        bracket = self._bracket_of(trial_id)
        if trial_id in bracket.members and trial_id not in bracket.results:
            self.arrivals += 1
            worst = float("inf")
            cost = (worst,) * (self.scored.width + 1) if self.scored is not None else worst
            bracket.results[trial_id] = (cost, self.arrivals)
            self._maybe_advance(bracket)
        if trial_id in bracket.queue:
            bracket.queue.remove(trial_id)

    def is_finished(self) -> bool:
        # Without `repeat` no bracket opens after the last shape, whatever trials are left.
        last = not self.repeat and len(self.brackets) >= len(self.shapes)
        return all(b.done for b in self.brackets) and (last or self.new.available() == 0)

    def _bracket_of(self, trial_id: int) -> _SyncBracket:
        try:
            return self.brackets[self.trial_bracket[trial_id]]
        except KeyError:
            raise never_suggested(trial_id) from None


def SHA(  # noqa: N802 - reads as the algorithm's name
    space: SpaceLike,
    *,
    metric: str,
    mode: str = "max",
    min_budget: int = 1,
    max_budget: int,
    eta: int = 3,
    n_configs: int | None = None,
    min_early_stopping_rate: int = 0,
    sampler: str | Sampler = "random",
    seed: int = 0,
    max_trials: int | None = None,
    scored: Scored | None = None,
) -> SynchronousHyperband:
    """Synchronous successive halving: brackets of `n_configs` (default eta^K, so one reaches the
    top); more brackets follow while `max_trials` allows, one only without a trial limit."""
    check_budgets(min_budget, max_budget, eta, bounded=True)
    check_whole("min_early_stopping_rate", min_early_stopping_rate, 0)
    check_whole("n_configs", n_configs, 1, optional=True)
    s = min_early_stopping_rate
    levels = rung_levels(min_budget, max_budget, eta, s)
    n = n_configs or eta ** (len(levels) - 1)
    return SynchronousHyperband(
        space,
        metric=metric,
        mode=mode,
        min_budget=min_budget,
        max_budget=max_budget,
        eta=eta,
        shapes=[s],
        bracket_sizes=[n],
        repeat=max_trials is not None,
        sampler=sampler,
        seed=seed,
        max_trials=max_trials,
        scored=scored,
    )


def Hyperband(  # noqa: N802 - reads as the algorithm's name
    space: SpaceLike,
    *,
    metric: str,
    mode: str = "max",
    min_budget: int = 1,
    max_budget: int,
    eta: int = 3,
    sampler: str | Sampler = "random",
    seed: int = 0,
    max_trials: int | None = None,
    scored: Scored | None = None,
) -> SynchronousHyperband:
    """Hyperband: brackets s = 0 (most aggressive) .. s_max (random search), repeated while
    `max_trials` allows; one band without a trial limit."""
    check_budgets(min_budget, max_budget, eta, bounded=True)
    s_max = most_rungs(min_budget, max_budget, eta)
    return SynchronousHyperband(
        space,
        metric=metric,
        mode=mode,
        min_budget=min_budget,
        max_budget=max_budget,
        eta=eta,
        shapes=list(range(s_max + 1)),
        repeat=max_trials is not None,
        sampler=sampler,
        seed=seed,
        max_trials=max_trials,
        scored=scored,
    )
