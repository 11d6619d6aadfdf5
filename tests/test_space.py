"""The search space: seeded sampling within bounds, grid enumeration, size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from basht.errors import ExperimentError
from basht.space import Choice, Float, Int, SearchSpace


def test_same_seed_same_samples():
    space = SearchSpace({"lr": Float(1e-4, 0.3, log=True), "h": Int(16, 256, log=True)})
    a = [space.sample(np.random.default_rng(7)) for _ in range(3)]
    b = [space.sample(np.random.default_rng(7)) for _ in range(3)]
    assert a == b


@given(low=st.floats(1e-6, 10), factor=st.floats(1.01, 1e4), seed=st.integers(0, 2**32 - 1))
def test_log_float_stays_in_bounds(low, factor, seed):
    p = Float(low, low * factor, log=True)
    value = p.sample(np.random.default_rng(seed))
    assert p.low <= value <= p.high * (1 + 1e-12)


@given(low=st.integers(-50, 50), width=st.integers(1, 100), seed=st.integers(0, 2**32 - 1))
def test_int_covers_both_bounds_and_stays_inside(low, width, seed):
    p = Int(low, low + width)
    rng = np.random.default_rng(seed)
    values = {p.sample(rng) for _ in range(20 * (width + 1))}
    assert min(values) >= p.low and max(values) <= p.high


def test_int_sampling_reaches_both_ends():
    p = Int(1, 3)
    rng = np.random.default_rng(0)
    assert {p.sample(rng) for _ in range(200)} == {1, 2, 3}


def test_log_int_is_roughly_uniform_in_the_exponent():
    p = Int(1, 1000, log=True)
    rng = np.random.default_rng(0)
    values = np.array([p.sample(rng) for _ in range(4000)])
    # Each decade holds about a third of the draws.
    shares = [np.mean((values >= lo) & (values < lo * 10)) for lo in (1, 10, 100)]
    assert all(0.25 < s < 0.42 for s in shares), shares


def test_stepped_float_grid_includes_the_end():
    assert Float(0.0, 0.5, step=0.1).grid() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]


def test_grid_enumerates_every_configuration_once():
    space = SearchSpace({"a": Choice((1, 2)), "b": Int(0, 2), "c": Choice(("x",))})
    grid = list(space.grid())
    assert len(grid) == space.size == 6
    assert len({tuple(c.items()) for c in grid}) == 6
    assert grid[0] == {"a": 1, "b": 0, "c": "x"} and grid[1] == {"a": 1, "b": 1, "c": "x"}


def test_continuous_space_is_infinite_and_has_no_grid():
    space = SearchSpace({"lr": Float(0.1, 1.0)})
    assert space.size == math.inf and not space.is_finite
    with pytest.raises(ExperimentError, match="lr"):
        list(space.grid())


def test_choice_of_lists_samples_lists():
    p = Choice(((8, 8), (16,)))
    assert p.sample(np.random.default_rng(0)) in ([8, 8], [16])
