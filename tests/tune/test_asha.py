"""ASHA: promotion and stopping variants, async Hyperband, reproducibility."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.space import Float, SearchSpace
from basht.tune import ASHA, AsyncHyperband, Decision
from basht.tune.asha import _hyperband_weights, _WeightedChoice
from basht.tune.factory import make_algorithm
from basht.tune.rungs import signed
from tests.conftest import BASE
from tests.tune.drive import curve, drive

SPACE = SearchSpace({"x": Float(0.0, 1.0)})


def _asha(**kw):
    args = {"metric": "acc", "mode": "max", "min_budget": 1, "max_budget": 27, "eta": 3, "seed": 0}
    args.update(kw)
    return ASHA(SPACE, **args)


class Watched:
    """Wraps promotion ASHA and checks every suggest() against an independent view of the rungs."""

    def __init__(self, algo, mode: str, trials: int):
        self.algo, self.mode, self.trials = algo, mode, trials
        self.levels = algo.brackets[0].levels
        self.view: dict[int, dict[int, float]] = {b: {} for b in self.levels}
        self.promoted: set[tuple[int, int]] = set()
        self.new = 0

    def _top(self, budget: int) -> list[int]:
        rung = self.view[budget]
        ranked = sorted(rung, key=lambda t: (signed(rung[t], self.mode), t))
        return ranked[: len(rung) // 3]

    def _promotable(self) -> bool:
        return any(
            (t, k) not in self.promoted
            for k, b in enumerate(self.levels[:-1])
            for t in self._top(b)
        )

    def suggest(self):
        s = self.algo.suggest()
        if s is None:
            assert not self._promotable(), "a worker was left idle while a promotion existed"
            assert self.new >= self.trials, "a worker was left idle while new trials were allowed"
        elif s.resume:
            k = s.meta["promoted_from"]
            assert s.trial_id in self._top(self.levels[k]), "promoted outside the top 1/eta"
            assert (s.trial_id, k) not in self.promoted, "promoted twice"
            self.promoted.add((s.trial_id, k))
        else:
            assert not self._promotable(), "started a new trial while a promotion existed"
            self.new += 1
        return s

    def report(self, trial_id, budget, value):
        if budget in self.view:
            self.view[budget][trial_id] = value
        return self.algo.report(trial_id, budget, value)

    def complete(self, trial_id):
        self.algo.complete(trial_id)


@settings(max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 12),
    trials=st.integers(1, 80),
    order=st.integers(0, 10_000),
    mode=st.sampled_from(["min", "max"]),
)
def test_promotes_only_top_fraction_never_twice_never_idle(workers, trials, order, mode):
    watched = Watched(_asha(max_trials=trials, mode=mode), mode, trials)
    trace = drive(watched, workers, curve(order), order_seed=order)
    assert len({s.trial_id for s in trace.suggestions if not s.resume}) == trials


def test_never_idle_while_a_job_exists():
    algo = _asha(max_trials=200)
    value = curve(1)
    trace = drive(algo, 7, value, order_seed=3)
    # drive() fills every free worker before each report; the algorithm ran out only at the end.
    assert algo.suggest() is None and algo.is_finished()
    assert len([s for s in trace.suggestions if not s.resume]) == 200


def test_first_trials_wait_until_a_rung_has_eta_results():
    algo = _asha(max_trials=10)
    first = algo.suggest()
    assert algo.report(first.trial_id, 1, 0.9) is Decision.PAUSE
    # One result is not enough to promote even the best: a new configuration comes instead.
    second = algo.suggest()
    assert not second.resume
    algo.report(second.trial_id, 1, 0.1)
    third = algo.suggest()
    assert not third.resume
    algo.report(third.trial_id, 1, 0.2)
    promoted = algo.suggest()
    assert promoted.resume and promoted.trial_id == first.trial_id and promoted.budget == 3


def test_stopping_variant_judges_at_each_rung():
    algo = _asha(variant="stopping", max_trials=10)
    a, b, c, d = (algo.suggest() for _ in range(4))
    assert a.budget == 27 and not a.resume
    assert algo.report(a.trial_id, 1, 0.5) is Decision.CONTINUE  # first: best so far
    assert algo.report(b.trial_id, 1, 0.4) is Decision.STOP  # fewer than eta: only a new best
    assert algo.report(c.trial_id, 1, 0.6) is Decision.CONTINUE
    assert algo.report(d.trial_id, 1, 0.7) is Decision.CONTINUE  # n=4: top floor(4/3)=1
    assert algo.report(a.trial_id, 2, 0.55) is Decision.CONTINUE  # between rungs
    assert algo.report(a.trial_id, 27, 0.9) is Decision.CONTINUE  # top rung: completes


def test_a_report_that_jumps_rungs_is_recorded_at_each():
    algo = _asha(variant="stopping", max_trials=5)
    s = algo.suggest()
    assert algo.report(s.trial_id, 10, 0.8) is Decision.CONTINUE
    assert [len(r) for r in algo.brackets[0].rungs] == [1, 1, 1]


def test_failed_trials_are_never_promoted():
    algo = _asha(max_trials=10)
    trials = [algo.suggest() for _ in range(3)]
    for s, v in zip(trials, (0.9, 0.1, 0.2), strict=True):
        algo.report(s.trial_id, 1, v)
    algo.fail(trials[0].trial_id)
    nxt = algo.suggest()
    assert not (nxt.resume and nxt.trial_id == trials[0].trial_id)


def test_unbounded_maximum_keeps_promoting():
    algo = _asha(max_budget=None, max_trials=30)
    trace = drive(algo, 4, curve(2), order_seed=1, max_steps=400)
    budgets = {s.budget for s in trace.suggestions}
    assert max(budgets) >= 27 and all(b in (1, 3, 9, 27, 81, 243) for b in budgets)


def test_same_seed_and_order_give_the_same_trials():
    runs = [drive(_asha(max_trials=60), 5, curve(4), order_seed=9) for _ in range(2)]
    assert [(s.trial_id, s.config, s.budget) for s in runs[0].suggestions] == [
        (s.trial_id, s.config, s.budget) for s in runs[1].suggestions
    ]
    other = drive(_asha(max_trials=60, seed=1), 5, curve(4), order_seed=9)
    assert other.suggestions[0].config != runs[0].suggestions[0].config


def test_async_hyperband_brackets_are_seeded_and_weighted():
    algo = AsyncHyperband(SPACE, metric="acc", max_budget=81, eta=3, seed=0, max_trials=2000)
    brackets = [algo.suggest().meta["bracket"] for _ in range(2000)]
    counts = [brackets.count(b) for b in range(5)]
    # Hyperband's table for R=81, eta=3 gives 81, 34, 15, 8, 5 configurations per bracket.
    expected = [81, 34, 15, 8, 5]
    for got, want in zip(counts, expected, strict=True):
        assert got / 2000 == pytest.approx(want / sum(expected), abs=0.03)
    again = AsyncHyperband(SPACE, metric="acc", max_budget=81, eta=3, seed=0, max_trials=2000)
    assert [again.suggest().meta["bracket"] for _ in range(2000)] == brackets


def test_async_hyperband_runs_every_bracket_to_the_top():
    algo = AsyncHyperband(SPACE, metric="acc", max_budget=27, eta=3, seed=0, max_trials=300)
    trace = drive(algo, 8, curve(5), order_seed=2)
    completed_budgets = [b for _, b, _, d in trace.decisions if d is Decision.CONTINUE]
    assert 27 in completed_budgets
    starts = {s.meta["bracket"]: s.budget for s in trace.suggestions if not s.resume}
    assert starts == {0: 1, 1: 3, 2: 9, 3: 27}


@pytest.mark.parametrize("variant", ["promotion", "stopping"])
def test_per_epoch_reports_continue_between_rungs(variant):
    algo = _asha(variant=variant, max_trials=30)
    trace = drive(algo, 3, curve(6), order_seed=4, per_epoch=True)
    for _, budget, _, d in trace.decisions:
        if budget not in (1, 3, 9, 27):
            assert d is Decision.CONTINUE


def _rescanning(make, **kw):
    """The same algorithm, but every suggest() looks at every rung again (no cached answers)."""
    algo = make(SPACE, metric="acc", min_budget=1, **kw)
    plain_suggest = algo.suggest

    def suggest():
        for bracket in algo.brackets:
            bracket._dirty.update(range(len(bracket.rungs)))
        return plain_suggest()

    algo.suggest = suggest
    return algo


@settings(max_examples=30, deadline=None)
@given(
    hyperband=st.booleans(),
    workers=st.integers(1, 30),
    trials=st.integers(1, 300),
    order=st.integers(0, 10_000),
    mode=st.sampled_from(["min", "max"]),
    per_epoch=st.booleans(),
)
def test_cached_promotions_match_a_full_rescan(hyperband, workers, trials, order, mode, per_epoch):
    make = AsyncHyperband if hyperband else ASHA
    kw = {"mode": mode, "max_budget": 27, "eta": 3, "seed": order, "max_trials": trials}
    traces = [
        drive(algo, workers, curve(order), order_seed=order, per_epoch=per_epoch)
        for algo in (make(SPACE, metric="acc", min_budget=1, **kw), _rescanning(make, **kw))
    ]
    fast, slow = ([(s.trial_id, s.budget, s.resume) for s in t.suggestions] for t in traces)
    assert fast == slow
    assert traces[0].decisions == traces[1].decisions


def test_bracket_draws_are_numpys_weighted_choice():
    weights = _hyperband_weights([0, 1, 2, 3, 4], 3)
    for seed in range(3):
        rng = np.random.default_rng([seed, 1])
        expected = [int(rng.choice(5, p=weights)) for _ in range(3000)]
        choice = _WeightedChoice(np.random.default_rng([seed, 1]), weights)
        assert [choice.pick() for _ in range(3000)] == expected


def test_an_unbounded_asha_for_a_workload_that_cannot_checkpoint_is_a_clear_error():
    data = copy.deepcopy(BASE)
    data["search"].update(pruner="asha", max_budget=None, time_budget_s=10)
    experiment = Experiment.from_dict(data)
    assert make_algorithm(experiment).variant == "promotion"  # it checkpoints: no top needed
    # A plain function is stopped, not paused, and stopping needs a top rung to run trials to.
    with pytest.raises(BashtError, match="max_budget: null .* plain function"):
        make_algorithm(experiment, can_checkpoint=False)
