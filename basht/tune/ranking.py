"""Ranking scores of several objectives: a rung of multi-objective ASHA, and the order SHA uses.

A score is ``(violation, c_1, ..., c_k)`` (`basht.tune.objectives`): feasible trials (violation
0) rank first, by non-dominated sorting with a tie-break that spreads the front (the ε-net of
Schmucker et al. 2021, as Syne Tune's MOASHA, or NSGA-II's crowding distance); infeasible ones
after, nearest to feasible first. Equal scores go to the earlier arrival, as in a scalar rung.

A rung re-ranks only when a result arrived since it last ranked: O(n² k) for n results, fine
for the hundreds of trials a real run has (one objective keeps the O(log n) `Rung`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from basht.errors import ArgumentError
from basht.tune.pareto import rank

Score = tuple[float, ...]
TIE_BREAKS = ("eps-net", "crowding")


@dataclass(frozen=True)
class Scored:
    """An algorithm told scores, not values: `width` costs after the violation, ranked with
    `tie_break` on a front."""

    width: int = 2
    tie_break: str = "eps-net"

    def __post_init__(self) -> None:
        if isinstance(self.width, bool) or not isinstance(self.width, int) or self.width < 1:
            raise ArgumentError(f"scored.width: expected a whole number >= 1, got {self.width!r}")
        if self.tie_break not in TIE_BREAKS:
            raise ArgumentError(
                f"tie_break: expected one of {', '.join(map(repr, TIE_BREAKS))}, "
                f"got {self.tie_break!r}"
            )

    def check(self, score: object) -> Score:
        """`score` as a tuple of floats of the right length, or a one-line ArgumentError."""
        if not isinstance(score, tuple | list) or len(score) != self.width + 1:
            raise ArgumentError(
                f"value: expected a score of {self.width + 1} numbers (the violation, then "
                f"{self.width} costs), got {score!r}"
            )
        return tuple(float(v) for v in score)


def order(
    entries: Sequence[tuple[int, Score, int]], tie_break: str = "eps-net", limit: int | None = None
) -> list[int]:
    """Trial ids best first, from (trial, score, arrival) entries (only the best `limit`)."""
    by_arrival = sorted(entries, key=lambda e: (e[2], e[0]))
    feasible = [e for e in by_arrival if e[1][0] == 0]
    infeasible = sorted((e for e in by_arrival if e[1][0] != 0), key=lambda e: (e[1][0], e[2]))
    ranked = rank([e[1][1:] for e in feasible], tie_break, limit) if feasible else []
    best = [feasible[i][0] for i in ranked] + [e[0] for e in infeasible]
    return best if limit is None else best[:limit]


def is_feasible(score: Score) -> bool:
    return score[0] == 0


class ParetoRung:
    """The results at one budget, ranked by score; the same contract as the scalar `Rung`."""

    def __init__(self, budget: int, eta: int, tie_break: str = "eps-net"):
        self.budget, self.eta, self.tie_break = budget, eta, tie_break
        self.keys: dict[int, tuple[Score, int]] = {}
        self._done: set[int] = set()  # promoted or withdrawn
        self._ranked: list[int] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def ranked(self) -> list[int]:
        """Trial ids best first (sorts the whole rung: for inspection, not for decisions)."""
        entries = [(t, score, arrival) for t, (score, arrival) in self.keys.items()]
        return order(entries, self.tie_break)

    def _top(self) -> list[int]:
        """The best max(1, floor(n/eta)), all decisions need: re-ranked only after an add."""
        if self._ranked is None:
            entries = [(t, score, arrival) for t, (score, arrival) in self.keys.items()]
            self._ranked = order(entries, self.tie_break, max(1, len(entries) // self.eta))
        return self._ranked

    def add(self, trial_id: int, score: Score, arrival: int) -> bool:
        """Record a result (once per trial); True if it is feasible and ranks in the top
        max(1, floor(n/eta)), counting itself: the stopping variant's test for going on."""
        if trial_id not in self.keys:
            self.keys[trial_id] = (tuple(score), arrival)
            self._ranked = None
        return trial_id in self._top() and is_feasible(self.keys[trial_id][0])

    def best_promotable(self) -> int | None:
        """The best feasible trial in the top floor(n/eta) not promoted yet, else None."""
        for trial_id in self._top()[: len(self.keys) // self.eta]:
            if trial_id not in self._done and is_feasible(self.keys[trial_id][0]):
                return trial_id
        return None

    def mark_promoted(self, trial_id: int) -> None:
        self._done.add(trial_id)

    def withdraw(self, trial_id: int) -> None:
        """Never promote this trial (it failed); its measured result keeps counting."""
        if trial_id in self.keys:
            self._done.add(trial_id)
