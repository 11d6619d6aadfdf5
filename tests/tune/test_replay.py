"""The decision log: replaying it rebuilds an algorithm exactly, and catches a different one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from basht.space import Float, Int, SearchSpace
from basht.tune import ASHA, AsyncHyperband, Hyperband, ReplayError, replay
from tests.tune.drive import curve

SPACE = SearchSpace({"x": Float(0.0, 1.0), "n": Int(1, 8)})


@dataclass
class Row:
    seq: int
    op: str
    trial: int
    budget: int | None
    value: float | None
    result: str | None


class Recording:
    """Logs calls as the Tuner does."""

    def __init__(self, algo):
        self.algo, self.rows = algo, []

    def _log(self, *args):
        self.rows.append(Row(len(self.rows) + 1, *args))

    def suggest(self):
        s = self.algo.suggest()
        if s is not None:
            self._log("suggest", s.trial_id, s.budget, None, "resume" if s.resume else "new")
        return s

    def report(self, trial, budget, value):
        d = self.algo.report(trial, budget, value)
        self._log("report", trial, budget, value, d.value)
        return d

    def complete(self, trial):
        self.algo.complete(trial)
        self._log("complete", trial, None, None, None)


def _make(kind: str, seed: int = 0):
    common = {"metric": "acc", "max_budget": 27, "eta": 3, "seed": seed, "max_trials": 80}
    if kind == "asha":
        return ASHA(SPACE, **common)
    if kind == "async-hyperband":
        return AsyncHyperband(SPACE, **common)
    return Hyperband(SPACE, **common)


@pytest.mark.parametrize("kind", ["asha", "async-hyperband", "hyperband"])
def test_replay_continues_exactly_where_the_log_ends(kind):
    from tests.tune.drive import drive

    full = Recording(_make(kind))
    drive(full, 6, curve(3), order_seed=5)
    # Cut the log mid-run, replay the prefix into a fresh algorithm and check the next answers.
    cut = len(full.rows) // 2
    resumed = replay(_make(kind), full.rows[:cut])
    for row in full.rows[cut:]:
        if row.op == "suggest":
            s = resumed.suggest()
            assert (s.trial_id, s.budget, "resume" if s.resume else "new") == (
                row.trial,
                row.budget,
                row.result,
            )
        elif row.op == "report":
            assert resumed.report(row.trial, row.budget, row.value).value == row.result
        else:
            resumed.complete(row.trial)


def test_replay_with_another_seed_fails_loudly():
    full = Recording(_make("async-hyperband"))
    from tests.tune.drive import drive

    drive(full, 4, curve(1), order_seed=2)
    with pytest.raises(ReplayError, match="diverges at step"):
        replay(_make("async-hyperband", seed=1), full.rows)
