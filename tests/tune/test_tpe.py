"""The `tpe` sampler: random draws until a budget has enough results, then TPE fitted on the
largest such budget; reproducible from the seed and the order of results."""

from __future__ import annotations

import contextlib
import statistics

import numpy as np
import pytest

from basht.space import Choice, Float, Int, SearchSpace
from basht.tune import ASHA, SHA, RandomSampler, TPESampler, fast_tpe, log_ndtr, replay
from basht.tune import tpe as tpe_module
from basht.tune.basic import FullBudgetSearch

SPACE = SearchSpace(
    {
        "x": Float(0.0, 1.0),
        "width": Int(16, 256, log=True),
        "drop": Float(0.0, 0.3, step=0.1),
        "layers": Choice(((64,), (64, 32), "none")),
    }
)


def _score(config: dict, mode: str = "max") -> float:
    """Best at x = 0.3; a smooth landscape a model can learn and random search cannot."""
    loss = (config["x"] - 0.3) ** 2 + 0.001 * (config["layers"] == "none")
    return -loss if mode == "max" else loss


def _inside(config: dict) -> bool:
    return (
        0.0 <= config["x"] <= 1.0
        and 16 <= config["width"] <= 256
        and config["drop"] in (0.0, 0.1, 0.2, 0.3)
        and config["layers"] in ([64], [64, 32], "none")
    )


def test_it_draws_what_random_draws_until_a_budget_has_enough_results():
    tpe, random = TPESampler(SPACE, seed=5), RandomSampler(SPACE, seed=5)
    assert tpe.min_observations == 10
    for i in range(20):
        config = tpe.next()
        if i < 10:
            assert config == random.next()
        tpe.observe(config, 1, _score(config))
    assert tpe.model_budget() == 1


def test_the_model_is_fitted_on_the_largest_budget_with_enough_results():
    tpe = TPESampler(SPACE, seed=0, min_observations=3)
    configs = [tpe.next() for _ in range(6)]
    for config in configs:
        tpe.observe(config, 1, 0.5)
    for config in configs[:2]:
        tpe.observe(config, 9, 0.7)
    assert tpe.model_budget() == 1  # two results at 9 are not enough
    tpe.observe(configs[2], 9, 0.6)
    assert tpe.model_budget() == 9
    tpe.observe(configs[3], 27, float("nan"))  # not a result a model can use
    tpe.observe(configs[4], 27, float("inf"))
    assert tpe.model_budget() == 9


@pytest.mark.parametrize("mode", ["max", "min"])
def test_its_proposals_gather_where_the_best_results_were(mode):
    tpe, random = TPESampler(SPACE, seed=1, mode=mode), RandomSampler(SPACE, seed=1)
    proposed = []
    for _ in range(60):
        config = tpe.next()
        proposed.append(config)
        tpe.observe(config, 1, _score(config, mode))
    model_based = statistics.median(abs(c["x"] - 0.3) for c in proposed[20:])
    at_random = statistics.median(abs(random.next()["x"] - 0.3) for _ in range(200))
    assert model_based < at_random / 2
    assert all(_inside(c) for c in proposed)


def _run(sampler: TPESampler, count: int) -> list[dict]:
    out = []
    for _ in range(count):
        config = sampler.next()
        out.append(config)
        sampler.observe(config, 1, _score(config))
    return out


def test_the_same_seed_and_results_give_the_same_configurations_and_the_state_resumes():
    first = TPESampler(SPACE, seed=2)
    drawn = _run(first, 25)
    assert _run(TPESampler(SPACE, seed=2), 25) == drawn
    assert _run(TPESampler(SPACE, seed=3), 25) != drawn
    resumed = TPESampler(SPACE, seed=2)
    resumed.set_state(first.get_state())
    assert _run(resumed, 10) == _run(first, 10)


def test_its_log_cdf_equals_optuna_s_bit_for_bit_and_stands_in_only_inside_basht_s_calls(
    monkeypatch,
):
    from optuna.samplers._tpe import _truncnorm

    points = np.concatenate([np.linspace(-3000.0, 45.0, 30_001), [-20.0, 6.0, -np.inf, np.inf]])
    assert np.array_equal(
        log_ndtr.log_ndtr(points), _truncnorm._log_ndtr(points).astype(float), equal_nan=True
    )
    square = points[:30_000].reshape(100, 300)  # any shape, as Optuna's
    assert np.array_equal(log_ndtr.log_ndtr(square), _truncnorm._log_ndtr(square).astype(float))
    optunas = _truncnorm._log_ndtr
    with log_ndtr.vectorised_log_ndtr():
        assert _truncnorm._log_ndtr is log_ndtr.log_ndtr
    drawn = _run(TPESampler(SPACE, seed=4), 40)
    assert _truncnorm._log_ndtr is optunas
    monkeypatch.setattr(tpe_module, "vectorised_log_ndtr", contextlib.nullcontext)
    assert _run(TPESampler(SPACE, seed=4), 40) == drawn


def test_its_cached_conversions_give_optuna_s_arrays_and_proposals(monkeypatch):
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    space = {"x": FloatDistribution(0.0, 1.0), "c": CategoricalDistribution(["a", "b", "c"])}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for i in range(30):
        params = {"x": i / 30, "c": "abc"[i % 3]}
        if i % 7 == 3:  # a trial without every parameter of the space is left out
            params.pop("c")
        study.add_trial(
            optuna.trial.create_trial(
                params=params, distributions={k: space[k] for k in params}, value=float(i)
            )
        )
    trials = study.get_trials(deepcopy=False)
    plain = optuna.samplers.TPESampler(seed=0)
    cached = fast_tpe.cached_tpe_sampler(optuna, seed=0)
    for _ in range(2):  # the second time from what it kept
        expected = plain._get_internal_repr(trials, space, study)
        got = cached._get_internal_repr(trials, space, study)
        assert got.keys() == expected.keys()
        for name in space:
            assert got[name].dtype == expected[name].dtype
            assert np.array_equal(got[name], expected[name])
    assert cached._get_internal_repr([], space, study)["x"].shape == (0,)
    drawn = _run(TPESampler(SPACE, seed=5), 40)
    monkeypatch.setattr(
        tpe_module, "cached_tpe_sampler", lambda o, **kw: o.samplers.TPESampler(**kw)
    )
    assert _run(TPESampler(SPACE, seed=5), 40) == drawn


def test_a_study_built_again_from_its_results_proposes_the_same(monkeypatch):
    def proposals(rebuild_after: int) -> tuple[list[dict], int]:
        monkeypatch.setattr(tpe_module, "_REBUILD_AFTER", rebuild_after)
        sampler, out, studies = TPESampler(SPACE, seed=6), [], []  # kept: ids can be reused
        for i in range(90):
            out.append(sampler.next())
            if i % 3 == 0:  # more asked than told: the asked trials pile up in the study
                sampler.observe(out[-1], 1, _score(out[-1]))
            studies += [s for s in sampler._studies.values() if all(s is not t for t in studies)]
        return out, len(studies)

    kept, one = proposals(10**9)
    rebuilt, several = proposals(5)
    assert one == 1 and several > 1
    assert rebuilt == kept


def _drive(algorithm, steps: int = 400) -> list:
    """One worker through ask/tell with `_score` as each budget's value, logging every call as
    the Tuner's decision log does."""
    log, seq = [], 0

    class Call:
        def __init__(self, op, trial, budget=None, value=None, result=None):
            nonlocal seq
            self.seq, self.op, self.trial = seq, op, trial
            self.budget, self.value, self.result = budget, value, result
            seq += 1

    for _ in range(steps):
        s = algorithm.suggest()
        if s is None:
            break
        log.append(Call("suggest", s.trial_id, s.budget, result="resume" if s.resume else "new"))
        value = _score(s.config) + 0.01 * s.budget
        decision = algorithm.report(s.trial_id, s.budget, value)
        log.append(Call("report", s.trial_id, s.budget, value, decision.value))
        if decision.value == "continue":
            algorithm.complete(s.trial_id)
            log.append(Call("complete", s.trial_id))
    return log


@pytest.mark.parametrize("make", [ASHA, SHA], ids=["asha", "sha"])
def test_an_algorithm_with_tpe_learns_from_its_rungs_and_replays_from_its_log(make):
    def algorithm():
        return make(SPACE, metric="accuracy", max_budget=9, sampler="tpe", seed=4, max_trials=60)

    ran = algorithm()
    log = _drive(ran)
    sampler = ran.new.sampler
    assert isinstance(sampler, TPESampler) and sampler.model_budget() in (3, 9)
    configs = {d.trial: ran.new._configs[d.trial] for d in log if d.op == "suggest"}
    assert len(configs) == 60
    again = replay(algorithm(), log)
    assert again.new._configs == configs


def test_without_a_pruner_it_learns_from_final_values_only():
    search = FullBudgetSearch(SPACE, metric="loss", mode="min", max_budget=3, sampler="tpe")
    s = search.suggest()
    search.report(s.trial_id, 1, 0.9)
    search.report(s.trial_id, 2, 0.8)
    assert search.new.sampler.model_budget() is None and not search.new.sampler._results
    search.report(s.trial_id, 3, 0.7)
    assert search.new.sampler._results == {3: [(s.config, 0.7)]}


def test_a_sampler_of_ones_own_must_seek_the_algorithm_s_end():
    with pytest.raises(ValueError, match="the sampler's mode 'max' is not the algorithm's 'min'"):
        ASHA(SPACE, metric="loss", mode="min", sampler=TPESampler(SPACE, mode="max"))
    ASHA(SPACE, metric="loss", mode="min", sampler=TPESampler(SPACE, mode="min"))
