"""Several objectives and constraints: scores, multi-objective ASHA and SHA rungs, the trial the
test phase uses, measured metrics, replay, and the experiment file's refusals."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment, PriceSpec
from basht.space import Float, SearchSpace
from basht.tune import ASHA, SHA, Decision, ReplayError, replay
from basht.tune.factory import make_algorithm
from basht.tune.objectives import (
    J_PER_KWH,
    CompletedFront,
    Constraint,
    Objective,
    Objectives,
    Spent,
    measured_metrics,
)
from basht.tune.pareto import dominates, pareto_front
from basht.tune.ranking import ParetoRung, Scored, order
from tests.conftest import BASE

SPACE = SearchSpace({"x": Float(0.0, 1.0)})
ACC = Objective("accuracy", "max")
ENERGY = Objective("train_energy_kwh", "min")
CAP = Constraint("train_energy_kwh", max=5.0)

# A rung of eta = 3 with six results: four on the front (A..D), one behind it, and one that beats
# them all but is infeasible. The ε-net starts at the best first cost (A), then takes the point
# farthest from those taken (D, the other end), then C, then B (next to A).
RUNG = {
    0: (0.0, 0.0, 10.0),  # A
    1: (0.0, 1.0, 9.0),  # B: second best first cost, but next to A on the front
    2: (0.0, 5.0, 5.0),  # C
    3: (0.0, 10.0, 0.0),  # D
    4: (0.0, 6.0, 6.0),  # dominated by C
    5: (0.5, -1.0, -1.0),  # dominates everything, over a constraint
}


def _rung(scores, eta=3, tie_break="eps-net") -> ParetoRung:
    rung = ParetoRung(budget=1, eta=eta, tie_break=tie_break)
    for arrival, (trial, score) in enumerate(scores.items(), 1):
        rung.add(trial, score, arrival)
    return rung


def _promoted(rung: ParetoRung) -> list[int]:
    out = []
    while (trial := rung.best_promotable()) is not None:
        out.append(trial)
        rung.mark_promoted(trial)
    return out


def _asha(**kw) -> ASHA:
    args = {"metric": "accuracy", "max_budget": 9, "eta": 3, "seed": 0, "scored": Scored(2)}
    return ASHA(SPACE, **(args | kw))


# -- multi-objective ASHA --------------------------------------------------------------------------


@pytest.mark.parametrize("tie_break", ["eps-net", "crowding"])
def test_a_rung_ranks_the_front_first_spread_along_it_and_the_infeasible_last(tie_break):
    assert _rung(RUNG, tie_break=tie_break).ranked() == [0, 3, 2, 1, 4, 5]


def test_the_top_third_promoted_is_the_fronts_two_ends_not_its_two_best_first_costs():
    rung = _rung(RUNG)
    assert rung.best_promotable() == 0
    assert _promoted(rung) == [0, 3]  # B, second in the first cost, is next to A: it waits


def test_asha_suggest_promotes_the_same_trials_and_then_nothing():
    algo = _asha(max_trials=6)
    assert [algo.suggest().trial_id for _ in range(6)] == list(range(6))
    for trial, score in RUNG.items():
        assert algo.report(trial, 1, score) is Decision.PAUSE
    promotions = [algo.suggest(), algo.suggest()]
    assert [(s.trial_id, s.budget, s.resume) for s in promotions] == [(0, 3, True), (3, 3, True)]
    assert algo.suggest() is None  # trial 5 is in no top, B is third: no promotion, no new trial


def test_an_infeasible_trial_in_the_top_is_never_promoted():
    # One feasible trial among six: the top two are it and the least infeasible one.
    scores = {t: (0.1 * (t + 1), -1.0, -1.0) for t in range(5)} | {5: (0.0, 3.0, 3.0)}
    rung = _rung(scores)
    assert rung.ranked()[:2] == [5, 0]
    assert _promoted(rung) == [5]

    algo = _asha(max_trials=6)
    for _ in range(6):
        algo.suggest()
    for trial, score in scores.items():
        algo.report(trial, 1, score)
    assert algo.suggest().trial_id == 5
    assert algo.suggest() is None
    assert algo.is_finished()


def test_the_stopping_variant_goes_on_only_when_feasible_and_in_the_top():
    rung = ParetoRung(budget=1, eta=3)
    assert not rung.add(0, (0.2, -9.0, -9.0), 1)  # alone in the rung, but infeasible
    assert rung.add(1, (0.0, 2.0, 2.0), 2)  # the best feasible so far
    assert not rung.add(2, (0.0, 3.0, 3.0), 3)  # dominated by trial 1
    assert not rung.add(3, (0.0, 5.0, 0.0), 4)  # on the front; the ε-net starts at trial 1
    assert rung.add(4, (0.0, 1.0, 4.0), 5)  # on the front, best first cost: it ranks first

    algo = _asha(variant="stopping", max_trials=3)
    for _ in range(3):
        assert algo.suggest().budget == 9  # stopping: every trial to the maximum
    assert algo.report(0, 1, (0.2, -9.0, -9.0)) is Decision.STOP
    assert algo.report(1, 1, (0.0, 2.0, 2.0)) is Decision.CONTINUE
    assert algo.report(2, 1, (0.0, 3.0, 3.0)) is Decision.STOP


def test_a_scored_algorithm_refuses_a_score_of_the_wrong_width():
    algo = _asha(max_trials=1)
    algo.suggest()
    with pytest.raises(ValueError, match="expected a score of 3 numbers"):
        algo.report(0, 1, 0.9)
    with pytest.raises(ValueError, match="expected a score of 3 numbers"):
        algo.report(0, 1, (0.0, 1.0))


@st.composite
def rungs(draw):
    n = draw(st.integers(1, 12))
    violation = st.sampled_from([0.0, 0.0, 0.0, 0.5, 1.0])
    cost = st.integers(0, 4).map(float)
    scores = draw(st.lists(st.tuples(violation, cost, cost), min_size=n, max_size=n))
    done = draw(st.sets(st.integers(0, n - 1)))
    return dict(enumerate(scores)), done, draw(st.integers(2, 4))


@settings(max_examples=60, deadline=None)
@given(rungs())
def test_the_promotable_trial_is_feasible_and_on_the_front_of_the_promotable_ones(case):
    scores, done, eta = case
    rung = _rung(scores, eta=eta)
    for trial in done:
        rung.mark_promoted(trial)
    top = rung.ranked()[: len(scores) // eta]
    open_ = [t for t in scores if t not in done and scores[t][0] == 0]
    best = rung.best_promotable()
    if best is None:
        assert not set(open_) & set(top)
        return
    assert best in top and best in open_
    assert not any(dominates(scores[t][1:], scores[best][1:]) for t in open_)
    # Promoting one by one takes exactly the feasible trials of the top, best first.
    assert _promoted(rung) == [t for t in top if t in open_]


# -- SHA -------------------------------------------------------------------------------------------


def test_sha_keeps_the_front_of_a_full_rung_in_its_order():
    algo = SHA(SPACE, metric="accuracy", max_budget=9, eta=3, scored=Scored(2))
    started = [algo.suggest() for _ in range(9)]
    assert [s.budget for s in started] == [1] * 9
    # Trials 6-8: behind the front of RUNG; C's twin (7) shares its front.
    scores = RUNG | {6: (0.0, 7.0, 7.0), 7: (0.0, 5.0, 5.0), 8: (0.0, 9.0, 9.0)}
    for trial, score in scores.items():
        assert algo.report(trial, 1, score) is Decision.PAUSE
    resumed = [algo.suggest() for _ in range(3)]
    assert [(s.trial_id, s.budget, s.resume) for s in resumed] == [
        (0, 3, True),
        (3, 3, True),
        (2, 3, True),
    ]
    assert algo.suggest() is None  # the next rung waits for its three results


def test_sha_never_resumes_an_infeasible_trial():
    algo = SHA(SPACE, metric="accuracy", max_budget=9, eta=3, scored=Scored(2))
    for _ in range(9):
        algo.suggest()
    for trial in range(9):  # one feasible trial
        algo.report(trial, 1, (0.0, 1.0, 1.0) if trial == 0 else (0.1 * trial, 0.0, 0.0))
    resumed = [s.trial_id for s in iter(algo.suggest, None)]
    assert resumed == [0]


# -- scores, constraints and the choice --------------------------------------------------------------


def test_violation_is_the_summed_relative_excess_over_each_bound():
    both = Objectives(
        (ACC, ENERGY), (Constraint("train_energy_kwh", max=2.0), Constraint("accuracy", min=0.5))
    )
    assert both.violation({"accuracy": 0.9, "train_energy_kwh": 2.0}) == 0.0  # bounds are feasible
    assert both.violation({"accuracy": 0.9, "train_energy_kwh": 3.0}) == pytest.approx(0.5)
    assert both.violation({"accuracy": 0.4, "train_energy_kwh": 1.0}) == pytest.approx(0.2)
    assert both.violation({"accuracy": 0.4, "train_energy_kwh": 3.0}) == pytest.approx(0.7)
    band = Constraint("loss", min=-2.0, max=-1.0)  # relative to the bound's size, whatever its sign
    assert band.excess(-1.5) == 0.0
    assert band.excess(-0.5) == pytest.approx(0.5)
    assert band.excess(-3.0) == pytest.approx(0.5)
    assert both.score({"accuracy": 0.9, "train_energy_kwh": 3.0}) == pytest.approx((0.5, -0.9, 3.0))


def test_a_trial_over_an_energy_cap_ranks_after_every_feasible_one():
    objectives = Objectives((ACC, ENERGY), (CAP,))
    trials = {
        0: {"accuracy": 0.99, "train_energy_kwh": 5.5},  # the best accuracy, 10 % over the cap
        1: {"accuracy": 0.50, "train_energy_kwh": 4.0},  # dominated, yet feasible
        2: {"accuracy": 0.80, "train_energy_kwh": 1.0},
        3: {"accuracy": 0.99, "train_energy_kwh": 50.0},  # far over the cap
    }
    entries = [(t, objectives.score(m), t) for t, m in trials.items()]
    assert objectives.score(trials[0])[0] == pytest.approx(0.1)
    assert order(entries) == [2, 1, 0, 3]
    assert objectives.choose(trials) == 2
    assert Objectives((ACC, ENERGY)).choose(trials) == 0  # without the cap


def test_choose_with_weights_normalises_the_feasible_trials():
    trials = {
        0: {"accuracy": 0.9, "train_energy_kwh": 3.0},
        1: {"accuracy": 0.8, "train_energy_kwh": 1.0},
        2: {"accuracy": 0.95, "train_energy_kwh": 10.0},  # over the cap
    }

    def chosen(weights):
        return Objectives((ACC, ENERGY), (CAP,), choose_weights=weights).choose(trials)

    # Normalised over trials 0 and 1: trial 0 is (0, 1), trial 1 is (1, 0).
    assert chosen((1.0, 0.0)) == 0
    assert chosen((0.0, 1.0)) == 1
    assert chosen((0.6, 0.4)) == 0  # 0.4 against 0.6
    assert chosen((0.4, 0.6)) == 1  # 0.6 against 0.4
    assert Objectives((ACC, ENERGY), (CAP,)).choose(trials) == 0  # "first": the best accuracy
    assert Objectives((ACC, ENERGY)).choose({}) is None


def _front_of(objectives: Objectives, trials) -> set[int]:
    numbers = [n for n in trials if objectives.violation(trials[n]) == 0]
    return {numbers[i] for i in pareto_front([objectives.costs(trials[n]) for n in numbers])}


def test_choose_with_weights_breaks_a_tie_towards_the_front():
    trials = {
        0: {"accuracy": 0.9, "train_energy_kwh": 3.0},  # dominated by trial 1
        1: {"accuracy": 0.9, "train_energy_kwh": 1.0},
    }
    for weights in [(1.0, 0.0), (0.0, 0.0)]:
        objectives = Objectives((ACC, ENERGY), choose_weights=weights)
        assert objectives.choose(trials) == 1
        assert objectives.choose(trials) in _front_of(objectives, trials)


def test_with_zeus_the_choice_is_still_on_the_front():
    zeus = Objectives((ACC, ENERGY), zeus=(0.5, 100.0))
    trials = {
        0: {"accuracy": 0.9, "train_energy_kwh": 1e-6, "train_time_s": 100.0},
        1: {"accuracy": 0.8, "train_energy_kwh": 1e-6, "train_time_s": 1.0},  # dominated
    }
    assert zeus.score(trials[1])[1] < zeus.score(trials[0])[1]  # cheaper by Zeus's cost
    assert zeus.choose(trials) == 0  # the completed front keeps only trial 0's final state


def test_with_no_feasible_trial_the_choice_is_the_least_infeasible_whatever_the_rule():
    trials = {
        0: {"accuracy": 0.99, "train_energy_kwh": 10.0},  # violation 1
        1: {"accuracy": 0.50, "train_energy_kwh": 5.5},  # violation 0.1
    }
    kept = CompletedFront()
    for trial, metrics in trials.items():
        objectives = Objectives((ACC, ENERGY), (CAP,))
        kept.add(trial, (objectives.violation(metrics), *objectives.costs(metrics)))
    assert set(kept.members) == {1}
    for weights in [None, (1.0, 0.0)]:
        assert Objectives((ACC, ENERGY), (CAP,), choose_weights=weights).choose(trials) == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 12)).map(lambda p: (p[0] / 4, float(p[1]))),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([None, (1.0, 0.0), (0.0, 0.0), (0.3, 0.7)]),
)
def test_the_choice_is_one_the_completed_front_kept(points, weights):
    """Whatever the rule, the test phase uses a trial whose final state the Tuner kept."""
    objectives = Objectives((ACC, ENERGY), (CAP,), choose_weights=weights)
    trials = {n: {"accuracy": a, "train_energy_kwh": e} for n, (a, e) in enumerate(points)}
    kept = CompletedFront()
    for n, metrics in trials.items():
        kept.add(n, (objectives.violation(metrics), *objectives.costs(metrics)))
    assert objectives.choose(trials) in kept.members


def test_trials_tied_as_least_infeasible_are_all_kept_and_the_rule_picks_among_them():
    # Accuracy on a finite validation set is discrete: two trials under a floor tie exactly.
    objectives = Objectives((ACC, ENERGY), (Constraint("accuracy", min=0.9),))
    trials = {
        0: {"accuracy": 0.85, "train_energy_kwh": 3.0},
        1: {"accuracy": 0.85, "train_energy_kwh": 1.0},
        2: {"accuracy": 0.5, "train_energy_kwh": 0.1},
    }
    kept = CompletedFront()
    for n, metrics in trials.items():
        kept.add(n, (objectives.violation(metrics), *objectives.costs(metrics)))
    assert set(kept.members) == {0, 1}
    assert objectives.choose(trials) == 1
    assert kept.add(3, (0.0, -0.95, 9.0)) == (True, [0, 1])  # a feasible one ends them


# -- scalarisation -----------------------------------------------------------------------------------


def test_scalarize_weights_sum_the_signed_objectives():
    weighted = Objectives((ACC, ENERGY), weights=(0.5, 2.0))
    assert weighted.width == 1
    score = weighted.score({"accuracy": 0.9, "train_energy_kwh": 0.001})
    assert score == pytest.approx((0.0, 0.5 * -0.9 + 2.0 * 0.001))  # -0.448


def test_zeus_eta_prices_energy_and_time_in_joules():
    zeus = Objectives((ACC,), (Constraint("accuracy", min=0.95),), zeus=(0.5, 100.0))
    assert zeus.names == ["accuracy", "train_energy_kwh", "train_time_s"]
    metrics = {"accuracy": 0.76, "train_energy_kwh": 0.001, "train_time_s": 10.0}
    # 0.5 · 3600 J + 0.5 · 100 W · 10 s; 20 % below the accuracy floor.
    assert zeus.score(metrics) == pytest.approx((0.2, 1800.0 + 500.0))
    assert zeus.choice_key(metrics) == pytest.approx((0.2, 2300.0, -0.76))
    assert zeus.missing({"accuracy": 0.9, "train_energy_kwh": 0.1}) is not None
    assert zeus.missing(metrics | {"train_time_s": math.nan}) is not None
    assert zeus.missing(metrics) is None


def test_from_search_reads_the_experiment_file():
    search = _experiment(
        objectives=[{"metric": "accuracy"}, {"metric": "train_energy_kwh", "mode": "min"}],
        constraints=[{"metric": "loss", "max": 0.5}],
        scalarize={"zeus_eta": 0.3, "max_power_w": 250},
        choose={"weights": [1, 3]},
        tie_break="crowding",
    ).search
    objectives = Objectives.from_search(search)
    assert objectives.objectives == (ACC, ENERGY)
    assert objectives.constraints == (Constraint("loss", max=0.5),)
    assert (objectives.zeus, objectives.weights) == ((0.3, 250.0), None)
    assert (objectives.choose_weights, objectives.tie_break) == ((1.0, 3.0), "crowding")
    assert search.metric == "accuracy" and search.mode == "max"


# -- measured metrics --------------------------------------------------------------------------------


def test_measured_metrics_project_what_was_spent_to_the_maximum_budget():
    spent = Spent(time_s=10.0, energy_j=J_PER_KWH, carbon_g=5.0)
    metrics = measured_metrics(spent, epochs=3, max_budget=9, usd_per_s=0.01)
    assert metrics == pytest.approx(
        {
            "train_time_s_spent": 10.0,
            "train_time_s": 30.0,
            "train_energy_kwh_spent": 1.0,
            "train_energy_kwh": 3.0,
            "train_carbon_g_spent": 5.0,
            "train_carbon_g": 15.0,
            "train_cost_usd_spent": 0.1,
            "train_cost_usd": 0.3,
        }
    )
    # At the maximum, and with no maximum (unbounded ASHA), the projection is what was spent.
    for epochs, max_budget in [(9, 9), (3, None), (0, 9)]:
        at = measured_metrics(spent, epochs, max_budget, usd_per_s=0.01)
        assert at["train_time_s"] == at["train_time_s_spent"] == 10.0


def test_measured_metrics_have_energy_only_when_booked_and_cost_only_with_a_price():
    metrics = measured_metrics(Spent(time_s=2.0), epochs=1, max_budget=4, usd_per_s=None)
    assert metrics == {"train_time_s_spent": 2.0, "train_time_s": 8.0}


def test_a_cost_objective_without_a_price_is_refused_before_any_trial_runs():
    """As an energy objective without a monitor: every trial would fail its first report."""
    from basht.bench.scored import TrialMeter

    objectives = [A, {"metric": "train_cost_usd", "mode": "min"}]
    free = _experiment(objectives=objectives)
    with pytest.raises(BashtError, match=r"search: train_cost_usd needs .*measure\.price"):
        TrialMeter(
            SimpleNamespace(experiment=free, monitor=None), Objectives.from_search(free.search)
        )

    priced = free.model_copy(
        update={"measure": free.measure.model_copy(update={"price": PriceSpec(usd_per_hour=3.6)})}
    )
    meter = TrialMeter(
        SimpleNamespace(experiment=priced, monitor=None), Objectives.from_search(priced.search)
    )
    metrics = meter(0, 10.0, 1.0, 1)  # 10 s at epoch 1 of 2: projected to 20 s
    assert metrics["train_cost_usd_spent"] > 0
    assert metrics["train_cost_usd"] == pytest.approx(2 * metrics["train_cost_usd_spent"])


# -- replay --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    seq: int
    op: str
    trial: int
    budget: int | None
    value: float | None
    scores: list[float] | None
    result: str | None


def _scored_log(scores_of) -> list[Row]:
    """Drive a scored ASHA to its end as the Tuner would (one worker, reports at rungs), logging
    each call as the decision log keeps it."""
    algo, rows = _asha(max_trials=9), []

    def log(*args):
        rows.append(Row(len(rows) + 1, *args))

    while (s := algo.suggest()) is not None:
        log("suggest", s.trial_id, s.budget, None, None, "resume" if s.resume else "new")
        score = scores_of(s.trial_id, s.budget)
        decision = algo.report(s.trial_id, s.budget, score)
        log("report", s.trial_id, s.budget, -score[1], list(score), decision.value)
        if decision is Decision.CONTINUE:
            algo.complete(s.trial_id)
            log("complete", s.trial_id, s.budget, None, None, None)
    return rows


def _scores(trial: int, budget: int) -> tuple[float, float, float]:
    """A trade-off that improves with budget; trial 4 goes over a constraint."""
    accuracy = (0.5 + 0.05 * trial) * budget / (budget + 1)
    return (0.3 if trial == 4 else 0.0, -accuracy, float((trial * 7) % 9) * budget)


def test_a_scored_decision_log_replays_into_a_fresh_algorithm():
    rows = _scored_log(_scores)
    assert any(r.op == "suggest" and r.result == "resume" for r in rows)
    assert any(r.op == "complete" for r in rows)
    resumed = replay(_asha(max_trials=9), rows)
    assert resumed.suggest() is None and resumed.is_finished()
    cut = replay(_asha(max_trials=9), rows[: len(rows) // 2])
    assert cut.arrivals == sum(r.op == "report" for r in rows[: len(rows) // 2])


def test_a_changed_score_in_the_log_does_not_replay():
    rows = _scored_log(_scores)
    promoted = next(r.trial for r in rows if r.op == "suggest" and r.result == "resume")
    first = next(i for i, r in enumerate(rows) if r.op == "report" and r.trial == promoted)
    changed = list(rows)
    changed[first] = replace(rows[first], scores=[1.0, *rows[first].scores[1:]])  # now infeasible
    with pytest.raises(ReplayError, match="diverges at step"):
        replay(_asha(max_trials=9), changed)


# -- the experiment file ----------------------------------------------------------------------------

A = {"metric": "accuracy", "mode": "max"}
E = {"metric": "train_energy_kwh", "mode": "min"}


def _experiment(system: str = "native", **search) -> Experiment:
    data = copy.deepcopy(BASE)
    data["system"] = system
    if "objectives" in search:
        del data["search"]["metric"], data["search"]["mode"]
    data["search"].update(search)
    return Experiment.from_dict(data, "exp.yaml")


def test_a_multi_objective_file_builds_a_scored_algorithm():
    exp = _experiment(objectives=[A, E], pruner="asha", max_budget=9, tie_break="crowding")
    algo = make_algorithm(exp)
    assert algo.scored == Scored(2, "crowding")
    assert make_algorithm(_experiment(constraints=[{"metric": "loss", "max": 1}])).scored == Scored(
        1
    )
    weighted = _experiment(objectives=[A, E], scalarize={"weights": [1, 2]})
    assert make_algorithm(weighted).scored == Scored(1)
    assert getattr(make_algorithm(_experiment()), "scored", None) is None


BAD = [
    (
        {"objectives": [A, {"metric": "train_energy"}]},
        "search.objectives.1: unknown measured metric 'train_energy'",
    ),
    (
        {"constraints": [{"metric": "train_time", "max": 9}]},
        "search.constraints: unknown measured metric 'train_time'",
    ),
    ({"objectives": [A, {**A, "mode": "min"}]}, "search.objectives: 'accuracy' is named twice"),
    (
        {"objectives": [A, E], "constraints": [{"metric": "train_energy_kwh"}]},
        "search.constraints.0: a constraint needs `max`, `min` or both",
    ),
    (
        {"objectives": [A, E], "scalarize": {"weights": [1]}},
        "search.scalarize.weights: expected 2 (one per objective), got 1",
    ),
    (
        {"objectives": [A, E], "choose": {"weights": [1, 2, 3]}},
        "search.choose.weights: expected 2 (one per objective), got 3",
    ),
    ({"scalarize": {"weights": [1]}}, "search.scalarize: applies with several `objectives`"),
    ({"choose": {"weights": [1]}}, "search.choose: applies with several `objectives`"),
    ({"sampler": "nsga2"}, "search.sampler: nsga2 is for several objectives"),
    (
        {"objectives": [A, E], "metric": "loss"},
        "search.metric: with `objectives`, leave it out (the first objective is it)",
    ),
    (
        {"objectives": [A, E], "mode": "min"},
        "search.mode: with `objectives`, leave it out (the first objective is it)",
    ),
    (
        {"objectives": [A, E], "scalarize": {"zeus_eta": 0.5}},
        "search.scalarize: zeus_eta needs max_power_w",
    ),
    ({"objectives": [A, E], "system": "raytune"}, "search.objectives: several objectives"),
    (
        {"constraints": [{"metric": "loss", "max": 1}], "system": "raytune"},
        "search.constraints: several objectives and constraints run with system native or optuna",
    ),
    (
        {"objectives": [A, E], "scalarize": {"weights": [1, 1]}, "system": "optuna"},
        "search.scalarize: ranks trials by Basht's own scalar",
    ),
    ({"objectives": [A, E], "choose": {"weights": [0, 0]}}, "search.choose"),
]


@pytest.mark.parametrize(("search", "expected"), BAD, ids=[b[1].split(":")[0] for b in BAD])
def test_a_bad_combination_is_one_line_naming_the_key(search, expected):
    search = dict(search)
    system = search.pop("system", "native")
    with pytest.raises(ExperimentError) as caught:
        if "objectives" in search and ("metric" in search or "mode" in search):
            data = copy.deepcopy(BASE)
            data["search"].update(search)
            Experiment.from_dict(data, "exp.yaml")
        else:
            _experiment(system, **search)
    message = str(caught.value)
    assert message.startswith("exp.yaml: ") and "\n" not in message
    assert expected in message


def test_metric_and_mode_may_repeat_the_first_objective():
    data = copy.deepcopy(BASE)
    data["search"].update(objectives=[A, E])  # BASE says metric: accuracy, mode: max
    assert Experiment.from_dict(data, "exp.yaml").search.objective_list[1].metric == E["metric"]
