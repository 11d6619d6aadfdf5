"""What every algorithm shares: drawing new configurations within a trial limit (and telling a
sampler that learns what they reached), and validation."""

from __future__ import annotations

from typing import Any

from basht.space import SearchSpace
from basht.tune.samplers import Sampler, make_sampler


class NewConfigs:
    """Numbers and draws new configurations until `max_trials` or the sampler runs out."""

    def __init__(
        self,
        space: SearchSpace,
        sampler: str | Sampler,
        seed: int,
        max_trials: int | None,
        mode: str = "max",
    ):
        if isinstance(sampler, str):
            sampler = make_sampler(sampler, space, seed, mode)
        elif getattr(sampler, "mode", mode) != mode:  # a model would chase the wrong end
            raise ValueError(f"the sampler's mode {sampler.mode!r} is not the algorithm's {mode!r}")
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


def check_budgets(min_budget: int, max_budget: int | None, eta: int) -> None:
    if eta < 2:
        raise ValueError(f"eta must be at least 2, got {eta}")
    if min_budget < 1:
        raise ValueError(f"min_budget must be at least 1, got {min_budget}")
    if max_budget is not None and max_budget < min_budget:
        raise ValueError(f"max_budget {max_budget} is below min_budget {min_budget}")


def check_mode(mode: str) -> None:
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
