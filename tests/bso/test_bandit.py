"""Gaussian Thompson sampling: Zeus's posterior, Zeus's exploration rule, Zeus's random draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.bso.bandit import ArmState, choose_arm, fit_arm, mab_window

rewards = st.lists(
    st.floats(min_value=-1e7, max_value=-1.0, allow_nan=False), min_size=2, max_size=40
)


def test_one_observation_means_infinite_precision_at_that_value():
    arm = fit_arm(64, [-123.5], prior_mean=0.0, prior_precision=0.0)
    assert arm.param_mean == -123.5
    assert arm.param_precision == math.inf and arm.num_observations == 1


def test_no_observation_is_a_cold_arm_at_the_prior():
    arm = fit_arm(64, [], prior_mean=-5.0, prior_precision=0.25)
    assert arm.cold and (arm.param_mean, arm.param_precision) == (-5.0, 0.25)


@given(rewards)
def test_flat_prior_posterior_is_sample_mean_with_precision_n_over_variance(values):
    arr = np.array(values)
    arm = fit_arm(32, values, prior_mean=0.0, prior_precision=0.0)
    if np.var(arr) == 0:
        assert arm.param_precision == math.inf
        assert arm.param_mean == arr.mean()
    else:
        assert arm.param_mean == pytest.approx(arr.mean(), rel=1e-9)
        assert arm.param_precision == pytest.approx(len(arr) / np.var(arr), rel=1e-9)
        assert arm.reward_precision == pytest.approx(1 / np.var(arr), rel=1e-9)


@given(rewards, st.floats(-1e6, 0), st.floats(1e-9, 1e-3))
def test_an_informative_prior_pulls_the_mean_towards_it(values, prior_mean, prior_precision):
    arr = np.array(values)
    arm = fit_arm(32, values, prior_mean, prior_precision)
    if np.var(arr) > 0:
        low, high = sorted((prior_mean, float(arr.mean())))
        assert low - 1e-6 * abs(low) <= arm.param_mean <= high + 1e-6 * abs(high)
        assert arm.param_precision > prior_precision


def _arm(size: int, mean: float, n: int = 3, precision: float = 1.0) -> ArmState:
    return ArmState(size, mean, precision, 1.0, n)


def test_an_arm_observed_fewer_times_than_num_explorations_is_explored():
    arms = [_arm(8, -1.0), _arm(16, -100.0, n=1), _arm(32, -2.0)]
    assert choose_arm(arms, np.random.default_rng(0), num_explorations=2) == 16


def test_cold_arms_are_explored_even_with_zero_explorations():
    arms = [_arm(8, -1.0, precision=math.inf), ArmState(16, 0.0, 0.0, 0.0, 0)]
    assert choose_arm(arms, np.random.default_rng(0), num_explorations=0) == 16


def test_with_certain_beliefs_the_best_mean_wins():
    arms = [
        _arm(8, -3.0, precision=math.inf),
        _arm(16, -1.0, precision=math.inf),
        _arm(32, -2.0, precision=math.inf),
    ]
    assert choose_arm(arms, np.random.default_rng(1), num_explorations=2) == 16


@given(st.integers(0, 2**32), st.lists(st.floats(-1e4, -1), min_size=1, max_size=8, unique=True))
@settings(max_examples=50)
def test_choices_are_arms_and_replay_exactly_from_the_same_state(seed, means):
    arms = [_arm(2**i, m, precision=0.01) for i, m in enumerate(means)]
    first = choose_arm(arms, np.random.default_rng(seed), num_explorations=2)
    again = choose_arm(arms, np.random.default_rng(seed), num_explorations=2)
    assert first == again and first in {a.batch_size for a in arms}


def test_draws_are_zeus_draws_one_permutation_then_one_normal_per_arm():
    """Same generator calls as Zeus's GaussianTS.predict, so a seeded job matches Zeus."""
    arms = [
        _arm(8, -3.0, precision=0.5),
        _arm(16, -2.5, precision=0.25),
        _arm(32, -2.0, precision=2.0),
    ]
    ref = np.random.default_rng(42)
    ref.choice(np.array([8, 16, 32]), 3, replace=False)
    samples = {a.batch_size: ref.normal(a.param_mean, np.sqrt(1 / a.param_precision)) for a in arms}
    rng = np.random.default_rng(42)
    assert choose_arm(arms, rng, num_explorations=2) == max(samples, key=samples.__getitem__)
    assert rng.bit_generator.state == ref.bit_generator.state


def test_reward_window_keeps_zeus_order():
    # Window off: earlier results stay newest first, the current one goes last.
    assert mab_window([-3.0, -2.0, -1.0], -9.0, 0) == [-3.0, -2.0, -1.0, -9.0]
    # Window of 3 already full: the oldest goes, the rest turn oldest first.
    assert mab_window([-3.0, -2.0, -1.0], -9.0, 3) == [-2.0, -3.0, -9.0]
    # Window not full yet: nothing dropped, order as fetched.
    assert mab_window([-3.0], -9.0, 3) == [-3.0, -9.0]
