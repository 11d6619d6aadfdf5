"""Rung budgets in exact integer arithmetic, and a sorted rung that ranks in O(log n).

Ray, Optuna and Determined count rungs with floating-point logarithms and lose one when the log
lands just below an integer (max 243 with eta 3 gives log 4.999...). Here budgets are products of
integers, so `rung_levels(1, 243, 3)` is exactly [1, 3, 9, 27, 81, 243].
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sortedcontainers import SortedList


def ilog(ratio: int, eta: int) -> int:
    """The largest k with eta**k <= ratio, for integers ratio >= 1 and eta >= 2."""
    if ratio < 1 or eta < 2:
        raise ValueError(f"ilog needs ratio >= 1 and eta >= 2, got {ratio}, {eta}")
    k, power = 0, eta
    while power <= ratio:
        k, power = k + 1, power * eta
    return k


def rung_levels(min_budget: int, max_budget: int, eta: int, s: int = 0) -> list[int]:
    """Budgets min·eta^(s+k) below max_budget, then max_budget itself as the top rung.

    When max_budget is an exact power the top rung is that power; otherwise survivors of the last
    geometric rung still train to max_budget (as Ray's `max_t` does), so no trial is cut short.
    """
    levels = []
    budget = min_budget * eta**s
    while budget < max_budget:
        levels.append(budget)
        budget *= eta
    levels.append(max_budget)
    return levels


def level(min_budget: int, eta: int, s: int, k: int) -> int:
    """Rung k's budget with no maximum (the paper's unbounded ASHA)."""
    return min_budget * eta ** (s + k)


@dataclass
class Rung:
    """The results recorded at one budget, best first.

    Entries are keyed by (signed value, arrival): smaller is better after signing, and of equal
    values the earlier arrival ranks first, so ties are decided the same way on every replay.
    `unpromoted` holds the same keys minus those already promoted, so the best promotable entry is
    its first element and its rank in the whole rung is one bisection away: O(log n) per decision.
    """

    budget: int
    entries: SortedList = field(default_factory=SortedList)
    unpromoted: SortedList = field(default_factory=SortedList)
    keys: dict[int, tuple[float, int, int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, trial_id: int, signed_value: float, arrival: int) -> int:
        """Record a result; returns its rank (0 = best). A trial is recorded once per rung."""
        if trial_id in self.keys:
            return self.entries.index(self.keys[trial_id])
        key = (signed_value, arrival, trial_id)
        self.keys[trial_id] = key
        self.entries.add(key)
        self.unpromoted.add(key)
        return self.entries.bisect_left(key)

    def top_count(self, eta: int) -> int:
        """How many entries are in the top 1/eta: floor(n / eta)."""
        return len(self.entries) // eta

    def best_promotable(self, eta: int) -> int | None:
        """The best not-yet-promoted trial if it is in the top floor(n/eta), else None."""
        if not self.unpromoted:
            return None
        key = self.unpromoted[0]
        if self.entries.bisect_left(key) < self.top_count(eta):
            return key[2]
        return None

    def mark_promoted(self, trial_id: int) -> None:
        self.unpromoted.discard(self.keys[trial_id])

    def withdraw(self, trial_id: int) -> None:
        """Never promote this trial (it failed); its measured result keeps counting in the rung."""
        key = self.keys.get(trial_id)
        if key is not None:
            self.unpromoted.discard(key)

    def ranked(self) -> list[int]:
        return [key[2] for key in self.entries]


def signed(value: float, mode: str) -> float:
    """Turn a value into a cost: smaller is better whatever the mode."""
    return -value if mode == "max" else value
