"""The multi-objective samplers `nsga2` and `tpe`: random draws until a budget has enough results,
then Optuna's NSGA-II or MOTPE over (violation, objectives); reproducible from the seed and the
order of results."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from basht.errors import ArgumentError, BashtError
from basht.space import Choice, Float, SearchSpace
from basht.tune.mo_samplers import MOTPESampler, NSGA2Sampler, make_mo_sampler
from basht.tune.samplers import GridSampler, RandomSampler

optuna = pytest.importorskip("optuna")

SPACE = SearchSpace({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})
MIXED = SearchSpace(
    {"x": Float(0.0, 1.0), "y": Float(0.0, 1.0), "layers": Choice(((64,), (64, 32), "none"))}
)


def _costs(config: dict) -> tuple[float, float, float]:
    """Feasible for x <= 0.5; the Pareto front is y = 0, where x trades one cost for the other."""
    return max(0.0, config["x"] - 0.5), config["x"] + config["y"], 1 - config["x"] + config["y"]


def _run(sampler, count: int, budget: int = 1) -> list[dict]:
    out = []
    for _ in range(count):
        config = sampler.next()
        out.append(config)
        sampler.observe(config, budget, _costs(config))
    return out


def _nsga2(seed: int = 0, space: SearchSpace = SPACE) -> NSGA2Sampler:
    return NSGA2Sampler(space, seed=seed, population_size=10)


SAMPLERS = {"nsga2": _nsga2, "tpe": lambda seed=0, space=SPACE: MOTPESampler(space, seed=seed)}


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_it_draws_what_random_draws_until_a_budget_has_enough_results(make):
    sampler, random = make(seed=5), RandomSampler(SPACE, seed=5)
    assert sampler.min_observations == 10
    for i in range(15):
        config = sampler.next()
        if i < 10:
            assert config == random.next()
        else:
            assert sampler.model_budget() == 1
        sampler.observe(config, 1, _costs(config))


def test_the_defaults_wait_for_a_population_or_d_plus_one_results():
    assert NSGA2Sampler(SPACE).min_observations == NSGA2Sampler(SPACE).population_size == 20
    wide = SearchSpace({f"p{i}": Float(0.0, 1.0) for i in range(12)})
    assert MOTPESampler(SPACE).min_observations == 10
    assert MOTPESampler(wide).min_observations == 13


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_its_proposals_gather_on_the_feasible_front(make):
    proposed = _run(make(seed=0), 80)[30:]
    random = RandomSampler(SPACE, seed=100)
    at_random = [random.next() for _ in range(400)]
    assert (
        statistics.median(c["y"] for c in proposed)
        < statistics.median(c["y"] for c in at_random) / 2
    )
    infeasible = sum(c["x"] > 0.5 for c in proposed) / len(proposed)
    assert infeasible < 0.35  # about half at random
    assert all(0.0 <= c["x"] <= 1.0 and 0.0 <= c["y"] <= 1.0 for c in proposed)


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_the_same_seed_and_results_give_the_same_configurations_and_the_state_resumes(make):
    first = make(seed=2, space=MIXED)
    drawn = _run(first, 35)
    assert _run(make(seed=2, space=MIXED), 35) == drawn
    assert _run(make(seed=3, space=MIXED), 35) != drawn
    # Restored mid-generation (35 results, population 10): a fresh study, the same proposals.
    state = json.loads(json.dumps(first.get_state()))
    resumed = make(seed=2, space=MIXED)
    resumed.set_state(state)
    assert _run(resumed, 30) == _run(first, 30)


def test_nsga2_breeds_generations_of_the_results_in_the_order_told():
    sampler = _nsga2()
    _run(sampler, 25)
    study = sampler._studies[1]
    key = sampler._generation_key
    told = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert [t.system_attrs[key] for t in told] == [i // 10 for i in range(24)]
    asked = [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert [t.system_attrs[key] for t in asked][-1] == 2  # proposed after 24 results: generation 2


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_infeasible_results_reach_optuna_as_infeasible(make):
    sampler = make(seed=1)
    configs = _run(sampler, 12)
    key = optuna.samplers._base._CONSTRAINTS_KEY
    told = [t for t in sampler._studies[1].trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(told) == 11  # the 12th was told after the last proposal
    for trial, config in zip(told, configs, strict=False):
        violation, *objectives = _costs(config)
        assert trial.system_attrs[key] == [violation]
        assert trial.values == pytest.approx(objectives)
    feasible = [t for t in told if all(v <= 0 for v in t.system_attrs[key])]  # Optuna's rule
    assert {t.number for t in feasible} == {
        t.number for t, c in zip(told, configs, strict=False) if c["x"] <= 0.5
    }
    assert 0 < len(feasible) < len(told)
    assert all(d == optuna.study.StudyDirection.MINIMIZE for d in sampler._studies[1].directions)


@pytest.mark.parametrize("make", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_costs_must_be_the_violation_then_each_objective(make):
    sampler = make()
    config = sampler.next()
    with pytest.raises(ArgumentError, match=r"costs: expected 3 costs .*got 2"):
        sampler.observe(config, 1, (0.0, 1.0))
    with pytest.raises(ArgumentError, match="costs: expected 3 costs"):
        sampler.observe(config, 1, 1.0)
    with pytest.raises(ArgumentError, match="violation of at least 0"):
        sampler.observe(config, 1, (-0.5, 1.0, 2.0))
    sampler.observe(config, 1, (0.0, float("nan"), 1.0))  # not a result a model can use
    sampler.observe(config, 1, (float("inf"), 1.0, 1.0))
    assert sampler._results == {}


def test_the_model_is_fitted_on_the_largest_budget_with_enough_results():
    sampler = MOTPESampler(SPACE, min_observations=3)
    configs = [sampler.next() for _ in range(4)]
    for config in configs:
        sampler.observe(config, 1, _costs(config))
    for config in configs[:2]:
        sampler.observe(config, 9, _costs(config))
    assert sampler.model_budget() == 1
    sampler.observe(configs[2], 9, _costs(configs[2]))
    assert sampler.model_budget() == 9
    sampler.next()
    assert len(sampler._studies[9].trials) == 4  # three told, one asked


@pytest.mark.parametrize("name", ["nsga2", "tpe"])
def test_without_optuna_the_error_says_what_to_install(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(BashtError) as err:
        make_mo_sampler(name, SPACE, 0, 2)
    assert str(err.value) == f"sampler: {name} needs Optuna: pip install 'basht[tpe]'"


def test_samplers_are_made_by_name():
    assert isinstance(make_mo_sampler("random", SPACE, 0, 2), RandomSampler)
    grid = SearchSpace({"a": Choice((1, 2))})
    assert isinstance(make_mo_sampler("grid", grid, 0, 2), GridSampler)
    nsga2 = make_mo_sampler("nsga2", SPACE, 4, 3)
    assert isinstance(nsga2, NSGA2Sampler) and (nsga2.seed, nsga2.n_objectives) == (4, 3)
    assert isinstance(make_mo_sampler("tpe", SPACE, 0, 2), MOTPESampler)
    with pytest.raises(ArgumentError) as err:
        make_mo_sampler("cmaes", SPACE, 0, 2)
    assert str(err.value) == (
        "sampler: expected one of 'random', 'grid', 'nsga2', 'tpe', got 'cmaes'"
    )


def test_wrong_arguments_are_refused_when_built():
    with pytest.raises(ArgumentError, match="population_size"):
        NSGA2Sampler(SPACE, population_size=1)
    with pytest.raises(ArgumentError, match="n_objectives"):
        MOTPESampler(SPACE, n_objectives=0)
    with pytest.raises(ArgumentError, match="seed"):
        NSGA2Sampler(SPACE, seed=-1)
