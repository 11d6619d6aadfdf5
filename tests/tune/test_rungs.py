"""Rung budgets in exact integers (no rung lost to a floating-point log) and sorted rungs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from basht.space import Float, SearchSpace
from basht.tune.rungs import Rung, ilog, rung_levels


def test_the_rung_floating_point_logs_lose_is_kept():
    assert rung_levels(1, 243, 3) == [1, 3, 9, 27, 81, 243]
    assert rung_levels(1, 1000, 10) == [1, 10, 100, 1000]
    assert ilog(243, 3) == 5 and ilog(1000, 10) == 3


def test_a_maximum_off_the_geometric_grid_is_the_top_rung():
    assert rung_levels(1, 100, 3) == [1, 3, 9, 27, 81, 100]
    assert rung_levels(2, 27, 3) == [2, 6, 18, 27]
    assert rung_levels(1, 81, 3, s=2) == [9, 27, 81]


@given(r=st.integers(1, 50), eta=st.integers(2, 6), k=st.integers(0, 8), s=st.integers(0, 3))
def test_levels_are_exact_powers_up_to_the_maximum(r, eta, k, s):
    top = r * eta ** (k + s)
    levels = rung_levels(r, top, eta, s)
    assert levels == [r * eta ** (s + i) for i in range(k + 1)]


@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=60), st.integers(2, 5))
def test_best_promotable_is_the_best_unpromoted_in_the_top_fraction(values, eta):
    rung = Rung(1, eta)
    for i, v in enumerate(values):
        rung.add(i, v, i)
    promoted = []
    while (t := rung.best_promotable()) is not None:
        rung.mark_promoted(t)
        promoted.append(t)
    ranked = sorted(range(len(values)), key=lambda i: (values[i], i))
    assert promoted == ranked[: len(values) // eta]


def test_ties_go_to_the_earlier_result():
    rung = Rung(1, 3)
    for trial in (5, 3, 9):
        rung.add(trial, 0.5, arrival=trial)
    assert rung.ranked() == [3, 5, 9]


@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=60), st.integers(2, 5))
def test_add_says_whether_the_result_ranks_in_the_top_fraction(values, eta):
    rung = Rung(1, eta)
    for i, v in enumerate(values):
        goes_on = rung.add(i, v, i)
        rank = sorted(range(i + 1), key=lambda j: (values[j], j)).index(i)
        assert goes_on == (rank < max(1, (i + 1) // eta))


@pytest.mark.parametrize("make", ["SHA", "Hyperband", "ASHA", "AsyncHyperband"])
def test_an_eta_below_2_is_refused_not_looped_on(make):
    import basht.tune

    space = SearchSpace({"x": Float(0.0, 1.0)})
    with pytest.raises(ValueError, match="eta"):
        getattr(basht.tune, make)(space, metric="m", max_budget=9, eta=1)
