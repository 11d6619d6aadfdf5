"""The job a plan is for: synchronous successive halving, stage by stage."""

from __future__ import annotations

from dataclasses import dataclass

from basht.errors import BashtError


@dataclass(frozen=True)
class Stage:
    """Stage i of the job: `trials` live trials, each training `epochs` more epochs."""

    trials: int
    epochs: int


@dataclass(frozen=True)
class ShaJob:
    """SHA's stages: n trials at min_budget, then the top 1/eta of each rung, up to max_budget.

    A trial resumes from its checkpoint at each rung, so stage i trains each survivor for the
    epochs between rung i-1 and rung i.
    """

    trials: int
    min_budget: int
    max_budget: int
    eta: int = 3

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise BashtError(f"a job needs at least one trial, got {self.trials}")
        if self.eta < 2 or self.min_budget < 1 or self.max_budget < self.min_budget:
            raise BashtError(
                f"budgets {self.min_budget}..{self.max_budget} with eta {self.eta}: expected "
                "1 <= min_budget <= max_budget and eta >= 2"
            )

    @property
    def rungs(self) -> tuple[int, ...]:
        """Budgets min_budget·eta^k below max_budget, then max_budget (as the tuners' rungs)."""
        levels, budget = [], self.min_budget
        while budget < self.max_budget:
            levels.append(budget)
            budget *= self.eta
        return (*levels, self.max_budget)

    @property
    def bracket_size(self) -> int:
        """eta^K configurations: the fewest that bring one to max_budget (Basht's SHA bracket)."""
        return self.eta ** (len(self.rungs) - 1)

    @property
    def stages(self) -> tuple[Stage, ...]:
        levels = self.rungs
        stages, trials, done = [], self.trials, 0
        for budget in levels:
            stages.append(Stage(trials, budget - done))
            done, trials = budget, max(1, trials // self.eta)
        return tuple(stages)

    @classmethod
    def from_experiment(cls, experiment: object) -> ShaJob:
        """The job an experiment file describes (`search`: max_trials at min_budget, eta; with
        `pruner: none`, one stage of max_trials trials to max_budget)."""
        search = experiment.search  # type: ignore[attr-defined]
        if search.max_budget is None:
            raise BashtError("search.max_budget: a plan needs a bounded job")
        job = cls(1, search.min_budget, search.max_budget, search.eta)
        trials = search.max_trials or job.bracket_size
        if search.pruner == "none":  # every trial to max_budget: one stage
            return cls(trials, search.max_budget, search.max_budget, search.eta)
        return cls(trials, search.min_budget, search.max_budget, search.eta)
