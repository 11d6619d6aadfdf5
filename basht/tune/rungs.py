"""Rung budgets in exact integer arithmetic, and a rung that ranks in O(log n).

Ray, Optuna and Determined count rungs with floating-point logarithms and lose one when the log
lands just below an integer (max 243 with eta 3 gives log 4.999...). Here budgets are products of
integers, so `rung_levels(1, 243, 3)` is exactly [1, 3, 9, 27, 81, 243].
"""

from __future__ import annotations

import math
from heapq import heappop, heappush, heappushpop, heapreplace


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
    if eta < 2 or min_budget < 1:  # either would never reach max_budget
        raise ValueError(f"rungs need eta >= 2 and min_budget >= 1, got {eta} and {min_budget}")
    levels = []
    budget = min_budget * eta**s
    while budget < max_budget:
        levels.append(budget)
        budget *= eta
    levels.append(max_budget)
    return levels


def most_rungs(min_budget: int, max_budget: int, eta: int) -> int:
    """Hyperband's s_max: the halvings of its most aggressive bracket. A maximum off the geometric
    grid is a rung of its own, so it counts one more than ilog; then bracket s_max is plain random
    search and every bracket's size fits its rungs, as for a maximum on the grid."""
    return len(rung_levels(min_budget, max_budget, eta)) - 1


def level(min_budget: int, eta: int, s: int, k: int) -> int:
    """Rung k's budget with no maximum (the paper's unbounded ASHA)."""
    return min_budget * eta ** (s + k)


class Rung:
    """The results recorded at one budget, split at its top floor(n/eta).

    Entries are keyed by (signed value, arrival, trial): smaller is better after signing, and of
    equal values the earlier arrival ranks first, so ties are decided the same way on every replay.
    Two heaps keep the split: `_top` holds the best floor(n/eta) (negated keys, so its worst is at
    the root) and `_rest` the others (its best at the root); `_waiting` holds, best first, the keys
    that entered the top and were not promoted yet. Only those can be promoted: the best of them
    is the best unpromoted key of the rung if any unpromoted key is in the top, and it is in the
    rest (so nothing is promotable) otherwise. The best promotable trial is then a comparison of
    two roots, and an add moves at most one key across the split: O(log n) per decision in C heap
    operations, never a rescan, and `_waiting` stays small (promotions follow entries quickly).
    """

    def __init__(self, budget: int, eta: int):
        self.budget, self.eta = budget, eta
        self.keys: dict[int, tuple[float, int, int]] = {}
        self._top: list[tuple[float, int, int]] = []
        self._rest: list[tuple[float, int, int]] = []
        self._waiting: list[tuple[float, int, int]] = []
        self._done: set[int] = set()  # promoted or withdrawn: dropped when they reach the root

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, trial_id: int, signed_value: float, arrival: int) -> bool:
        """Record a result (once per trial); True if it ranks in the top max(1, floor(n/eta)),
        counting itself: the stopping variant's test for going on."""
        keys = self.keys
        key = keys.get(trial_id)
        if key is None:
            key = (signed_value, arrival, trial_id)
            keys[trial_id] = key
            top = self._top
            negated = (-signed_value, -arrival, trial_id)
            # The top grows by one when n crosses a multiple of eta. Moving a key across the
            # split is a push-and-pop in one sift: the heaps hold the same keys as with a push
            # and then a pop.
            grows = len(top) < len(keys) // self.eta
            if top and negated > top[0]:  # better than the worst of the top: it joins the top
                if grows:
                    heappush(top, negated)
                else:
                    v, a, t = heapreplace(top, negated)  # the worst of the top leaves it
                    heappush(self._rest, (-v, -a, t))
                heappush(self._waiting, key)
            elif grows:  # the best of the rest (maybe this key) joins the top
                best = heappushpop(self._rest, key)
                v, a, t = best
                heappush(top, (-v, -a, t))
                heappush(self._waiting, best)
            else:
                heappush(self._rest, key)
            return negated >= top[0] if top else self._rest[0] == key
        if self._top:
            return (-key[0], -key[1], key[2]) >= self._top[0]
        return self._rest[0] == key  # fewer than eta results: only the best goes on

    def best_promotable(self) -> int | None:
        """The best not-yet-promoted trial if it is in the top floor(n/eta), else None."""
        waiting, done = self._waiting, self._done
        while waiting and waiting[0][2] in done:
            heappop(waiting)
        if not waiting or not self._top:
            return None
        v, a, t = waiting[0]
        return t if (-v, -a, t) >= self._top[0] else None

    def mark_promoted(self, trial_id: int) -> None:
        self._done.add(trial_id)

    def withdraw(self, trial_id: int) -> None:
        """Never promote this trial (it failed); its measured result keeps counting in the rung."""
        if trial_id in self.keys:
            self._done.add(trial_id)

    def ranked(self) -> list[int]:
        """Trial ids best first (sorts the rung: for inspection, not for decisions)."""
        return [key[2] for key in sorted(self.keys.values())]


def signed(value: float, mode: str) -> float:
    """Turn a value into a cost: smaller is better whatever the mode. NaN is the worst cost, so a
    trial that reported no number never outranks one that did (NaN has no order of its own)."""
    if value != value:
        return math.inf
    return -value if mode == "max" else value
