"""What every algorithm shares: drawing new configurations within a trial limit (and telling a
sampler that learns what they reached), and validation.

Samplers are made here by name, so `samplers` and `tpe` (which builds on `samplers`) import one
way; the space, in whatever form the algorithm was given it, is read by the sampler's base.
"""

from __future__ import annotations

from typing import Any

from basht.errors import ArgumentError
from basht.space import SearchSpace, SpaceLike
from basht.tune._checks import check_mode, check_whole
from basht.tune.samplers import GridSampler, RandomSampler, Sampler
from basht.tune.tpe import TPESampler

SAMPLERS = ("random", "grid", "tpe")


def make_sampler(name: str, space: SpaceLike, seed: int, mode: str = "max") -> Sampler:
    """The sampler `name` over `space` (TPE imports Optuna only when built)."""
    if name == "grid":
        return GridSampler(space)
    if name == "tpe":
        return TPESampler(space, seed, mode)
    if name != "random":
        raise ArgumentError(
            f"sampler: expected one of {', '.join(map(repr, SAMPLERS))} or a sampler object, "
            f"got {name!r}"
        )
    return RandomSampler(space, seed)


class NewConfigs:
    """Numbers and draws new configurations until `max_trials` or the sampler runs out.

    Every algorithm draws through one, so its arguments (the space in any form
    `SearchSpace.coerce` reads, the sampler, seed and trial limit) are checked here once.
    """

    def __init__(
        self,
        space: SpaceLike,
        sampler: str | Sampler,
        seed: int,
        max_trials: int | None,
        mode: str = "max",
        n_objectives: int | None = None,
    ):
        """`n_objectives`: results are scores of that many costs (a multi-objective sampler
        learns from them), not values."""
        check_mode(mode)
        check_whole("seed", seed, 0)
        check_whole("max_trials", max_trials, 1, optional=True)
        if isinstance(sampler, str) and n_objectives is not None:
            from basht.tune.mo_samplers import make_mo_sampler

            sampler = make_mo_sampler(sampler, space, seed, n_objectives)
        elif isinstance(sampler, str):
            sampler = make_sampler(sampler, space, seed, mode)
        else:
            if not callable(getattr(sampler, "next", None)):
                raise ArgumentError(
                    f"sampler: expected one of {', '.join(map(repr, SAMPLERS))} or a sampler "
                    f"object (with next()), got {type(sampler).__name__}"
                )
            SearchSpace.coerce(space)  # the sampler brings its own, but a wrong one is refused
            if getattr(sampler, "mode", mode) != mode:  # a model would chase the wrong end
                raise ArgumentError(
                    f"sampler: the sampler's mode {sampler.mode!r} is not the algorithm's {mode!r}"
                )
        self.sampler = sampler
        self.max_trials = max_trials
        self.next_id = 0
        self.exhausted = False
        # A sampler that learns is told each ranked result; it needs the configuration again.
        self._observe = getattr(sampler, "observe", None)
        self._configs: dict[int, dict[str, Any]] = {}

    def available(self, count: int = 1) -> int:
        """How many of `count` new configurations may still be drawn (0 when none)."""
        if self.exhausted:
            return 0
        if self.max_trials is None:
            return count
        return max(0, min(count, self.max_trials - self.next_id))

    def draw(self) -> tuple[int, dict[str, Any]] | None:
        if self.exhausted or (self.max_trials is not None and self.next_id >= self.max_trials):
            return None  # not self.available(), without the call
        config = self.sampler.next()
        if config is None:
            self.exhausted = True
            return None
        trial_id = self.next_id
        self.next_id += 1
        if self._observe is not None:
            self._configs[trial_id] = config
        return trial_id, config

    def observe(self, trial_id: int, budget: int, value: float) -> None:
        """Tell the sampler, if it learns, that `trial_id` reached `value` at `budget`."""
        if self._observe is not None:
            self._observe(self._configs[trial_id], budget, value)


def never_suggested(trial_id: int) -> ValueError:
    """The error for a report, completion or failure of a trial the algorithm never handed out."""
    return ValueError(f"trial {trial_id!r} was never suggested by this algorithm")
