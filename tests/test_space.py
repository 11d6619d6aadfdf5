"""The search space: seeded sampling within bounds, grid enumeration, size."""

from __future__ import annotations

import math
import pickle

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


@given(u=st.floats(0.0, 1.0, exclude_max=True))
def test_a_space_maps_units_through_each_parameters_from_unit(u):
    space = SearchSpace(
        {
            "lr": Float(1e-4, 0.3, log=True),
            "d": Float(0.0, 0.5),
            "s": Float(0.0, 1.0, step=0.25),
            "h": Int(16, 256, log=True),
            "n": Int(1, 7),
            "k": Int(2, 40, step=3),
            "w": Choice(((8, 8), (16,))),
        }
    )
    units = [u] * len(space)
    assert space.from_units(units) == {name: p.from_unit(u) for name, p in space.items()}


def test_a_space_pickles_after_sampling_and_samples_the_same():
    space = SearchSpace({"lr": Float(1e-4, 0.3, log=True), "h": Int(16, 256, log=True)})
    space.sample(np.random.default_rng(0))
    copy = pickle.loads(pickle.dumps(space))
    assert copy.sample(np.random.default_rng(1)) == space.sample(np.random.default_rng(1))


def test_bounds_a_log_cannot_take_fail_when_drawn_not_when_declared():
    space = SearchSpace({"lr": Float(0.0, 1.0, log=True)})
    with pytest.raises(ValueError):
        space.sample(np.random.default_rng(0))


def test_rows_of_units_map_as_each_row_would():
    space = SearchSpace({"lr": Float(1e-4, 0.3, log=True), "h": Int(1, 9), "c": Choice(("a", "b"))})
    units = np.random.default_rng(0).random(3 * 50).tolist()
    rows = [space.from_units(units[i : i + 3]) for i in range(0, len(units), 3)]
    assert space.from_unit_rows(units) == rows
    with pytest.raises(ValueError, match="rows of 3"):
        space.from_unit_rows(units[:4])


@pytest.mark.parametrize("low", [1e-5, 2e-5, 1e-7, 0.003, 7.0])
def test_log_float_lowest_quantile_is_not_below_low(low):
    # exp(log(low)) is an ulp below low for these; preflight hands from_unit(0.0) to check_config.
    p = Float(low, low * 100, log=True)
    assert p.low <= p.from_unit(0.0) <= p.high


def test_stepped_float_grid_keeps_tiny_steps_apart_and_inside_bounds():
    tiny = Float(1e-13, 1e-12, step=1e-13).grid()
    assert len(set(tiny)) == 10 and tiny[0] == 1e-13 and tiny[-1] == 1e-12
    odd = Float(1.23454e-8, 1e-7, step=1e-8)
    assert all(odd.low <= v <= odd.high for v in odd.grid())
    assert Float(-0.3, 0.0, step=0.1).grid() == [-0.3, -0.2, -0.1, 0.0]
    wide = Float(0.0, 1e15, step=1.0)
    assert [wide.from_unit((i + 0.5) / wide.size) for i in (5, 12_345)] == [5.0, 12_345.0]


def test_size_and_draws_of_a_huge_grid_do_not_build_it(monkeypatch):
    # Int(0, 2**31) (a seed) took all memory to count; a fine float step took minutes.
    def no_grid(self):
        raise AssertionError("the grid was built")

    monkeypatch.setattr(Int, "grid", no_grid)
    monkeypatch.setattr(Float, "grid", no_grid)
    assert Int(0, 2**31 - 1).size == 2**31
    assert Int(0, 10**12, step=3).size == 10**12 // 3 + 1
    assert Float(0.0, 1e6, step=0.1).size == 10**7 + 1
    assert Int(0, 10**12, step=3).from_unit(0.999999) % 3 == 0
    assert Float(0.0, 1e6, step=0.1).from_unit(0.5) == 500000.0
    assert SearchSpace({"s": Int(0, 2**31 - 1), "x": Float(0.0, 1.0, step=1e-7)}).is_finite


@pytest.mark.parametrize("step", [None, 1, 3])
def test_an_int_spanning_more_than_2_to_the_63_integers_has_a_size_and_draws(step):
    # len() of such a range overflows; a mutated experiment file's bound found it.
    wide = Int(-3, 2**63 + 5, step=step)
    assert wide.size == (2**63 + 9 + (step or 1) - 1) // (step or 1)
    drawn = [wide.from_unit(u) for u in (0.0, 0.5, 0.999999)]
    assert all(-3 <= v <= 2**63 + 5 and (v + 3) % (step or 1) == 0 for v in drawn)
    assert SearchSpace({"y": wide}).size == wide.size
