"""Fronts, tie-breaks and hypervolume of `basht.tune.pareto`, checked against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.errors import ArgumentError
from basht.tune.pareto import (
    crowding_distance,
    dominates,
    eps_net_order,
    hypervolume,
    nondominated_fronts,
    pareto_front,
    rank,
    reference_point,
)

INF = math.inf


@st.composite
def point_sets(draw, max_points: int = 12, high: int = 5):
    """Small integer-valued points in 1-4 objectives, so duplicates and ties are common."""
    k = draw(st.integers(1, 4))
    n = draw(st.integers(0, max_points))
    coordinate = st.integers(0, high).map(float)
    points = draw(st.lists(st.tuples(*[coordinate] * k), min_size=n, max_size=n))
    return k, points


def brute_fronts(points: list[tuple[float, ...]]) -> list[list[int]]:
    """Front j: the points not dominated by any point outside fronts < j."""
    left, fronts = set(range(len(points))), []
    while left:
        front = sorted(i for i in left if not any(dominates(points[j], points[i]) for j in left))
        fronts.append(front)
        left -= set(front)
    return fronts


def brute_hypervolume(points: list[tuple[float, ...]], reference: tuple[float, ...]) -> float:
    """Sum of the grid cells (cut at every coordinate and the reference) that lie in some box."""
    inside = [p for p in points if all(x < r for x, r in zip(p, reference, strict=True))]
    cuts = [sorted({p[j] for p in inside} | {reference[j]}) for j in range(len(reference))]
    volume = 0.0
    for cell in itertools.product(*[range(len(c) - 1) for c in cuts]):
        low = [cuts[j][c] for j, c in enumerate(cell)]
        if any(all(x <= lo for x, lo in zip(p, low, strict=True)) for p in inside):
            volume += math.prod(cuts[j][c + 1] - cuts[j][c] for j, c in enumerate(cell))
    return volume


def test_dominates_needs_better_somewhere():
    assert dominates((1, 2), (1, 3))
    assert not dominates((1, 2), (1, 2))
    assert not dominates((0, 3), (1, 2))
    assert dominates((1, 2), (INF, 2))
    with pytest.raises(ArgumentError, match="b: expected 2 objectives"):
        dominates((1, 2), (1, 2, 3))


@settings(max_examples=100, deadline=None)
@given(point_sets())
def test_fronts_match_brute_force(case):
    _, points = case
    fronts = nondominated_fronts(points)
    assert fronts == brute_fronts(points)
    assert pareto_front(points) == (fronts[0] if fronts else [])


def test_fronts_of_a_hand_made_set_and_an_array():
    points = np.array([[1, 4], [2, 2], [4, 1], [3, 3], [2, 2], [5, 5], [INF, 0]])
    assert nondominated_fronts(points) == [[0, 1, 2, 4, 6], [3], [5]]
    assert nondominated_fronts([]) == []


def test_ragged_or_nan_points_are_refused():
    with pytest.raises(ArgumentError, match="points:"):
        pareto_front([(1, 2), (1,)])
    with pytest.raises(ArgumentError, match="NaN"):
        pareto_front([(1, float("nan"))])


@settings(max_examples=100, deadline=None)
@given(point_sets(max_points=6), st.data())
def test_hypervolume_matches_brute_force(case, data):
    k, points = case
    reference = data.draw(st.tuples(*[st.integers(0, 7).map(float)] * k))
    assert hypervolume(points, reference) == pytest.approx(brute_hypervolume(points, reference))


def test_hypervolume_known_values():
    # A 2-D staircase: 3x1 + 2x1 + 1x1 under the reference (4, 4).
    assert hypervolume([(1, 3), (2, 2), (3, 1)], (4, 4)) == 6.0
    assert hypervolume([(0.5,), (2,)], (3,)) == 2.5
    assert hypervolume([(0, 0, 0)], (1, 2, 3)) == 6.0
    # A dominated point adds nothing; three slabs overlap as inclusion-exclusion says.
    assert hypervolume([(0, 0, 0), (0.5, 0, 0)], (1, 1, 1)) == 1.0
    assert hypervolume([(0, 0, 1), (0, 1, 0), (1, 0, 0)], (2, 2, 2)) == 8 - 1
    assert hypervolume([], (1, 1)) == 0.0
    # On or beyond the reference, +inf included, adds nothing.
    assert hypervolume([(1, 0), (0, INF), (2, 2)], (1, 2)) == 0.0
    assert hypervolume([(0, 0)], (1, INF)) == INF


@settings(max_examples=80, deadline=None)
@given(point_sets(max_points=8), st.data())
def test_hypervolume_ignores_a_dominated_point(case, data):
    k, points = case
    if not points:
        return
    reference = tuple(6.0 for _ in range(k))
    base = data.draw(st.sampled_from(points))
    worse = tuple(x + data.draw(st.integers(0, 2)) for x in base)
    assert hypervolume([*points, worse], reference) == pytest.approx(hypervolume(points, reference))


@settings(max_examples=80, deadline=None)
@given(point_sets(max_points=8), st.data())
def test_hypervolume_grows_with_the_reference(case, data):
    k, points = case
    reference = data.draw(st.tuples(*[st.integers(0, 6).map(float)] * k))
    larger = tuple(r + data.draw(st.integers(0, 2)) for r in reference)
    assert hypervolume(points, larger) >= hypervolume(points, reference)


def test_hypervolume_of_a_larger_4d_front_is_quick_and_matches_monte_carlo():
    rng = np.random.default_rng(0)
    points = rng.random((60, 4))
    points /= np.linalg.norm(points, axis=1, keepdims=True)  # on a sphere: mostly non-dominated
    volume = hypervolume(points, (1.1,) * 4)
    samples = rng.random((100_000, 4)) * 1.1
    covered = np.zeros(len(samples), dtype=bool)
    for p in points:
        covered |= np.all(samples >= p, axis=1)
    assert volume == pytest.approx(covered.mean() * 1.1**4, rel=0.02)


def test_crowding_distance_of_a_hand_made_front():
    points = [(0, 5), (1, 3), (3, 2), (5, 0), (9, 9)]
    distance = crowding_distance(points, [3, 2, 1, 0])
    assert distance == {
        0: INF,
        1: pytest.approx(3 / 5 + 3 / 5),
        2: pytest.approx(4 / 5 + 3 / 5),
        3: INF,
    }
    assert crowding_distance(points, [0, 4]) == {0: INF, 4: INF}
    assert crowding_distance(points, []) == {}


def test_crowding_distance_skips_a_constant_objective():
    points = [(0, 7, 4), (1, 7, 2), (4, 7, 0)]
    assert crowding_distance(points, [0, 1, 2]) == {0: INF, 1: pytest.approx(2 * 4 / 4), 2: INF}


def test_eps_net_starts_best_first_then_farthest_extreme():
    points = [(2, 4), (0, 10), (1, 5), (10, 0)]
    order = eps_net_order(points, [0, 1, 2, 3])
    assert order[:2] == [1, 3]
    # Normalised, (2, 4) is farther from both picks than (1, 5) is.
    assert order == [1, 3, 0, 2]


def test_eps_net_is_scale_free_and_breaks_ties_by_index():
    points = [(2, 4), (0, 10), (1, 5), (10, 0)]
    scaled = [(x, 1000 * y) for x, y in points]
    assert eps_net_order(scaled, [0, 1, 2, 3]) == eps_net_order(points, [0, 1, 2, 3])
    # Duplicates of the best first objective: the lower index goes first.
    assert eps_net_order([(1, 1), (0, 2), (0, 2)], [0, 1, 2]) == [1, 0, 2]
    assert eps_net_order(points, []) == []


@settings(max_examples=60, deadline=None)
@given(point_sets(), st.sampled_from(["eps-net", "crowding"]))
def test_rank_orders_fronts_before_later_fronts(case, tie_break):
    _, points = case
    ranked = rank(points, tie_break)
    assert sorted(ranked) == list(range(len(points)))
    position = {i: at for at, i in enumerate(ranked)}
    for earlier, later in itertools.pairwise(nondominated_fronts(points)):
        assert max(position[i] for i in earlier) < min(position[i] for i in later)


def test_rank_by_crowding_puts_the_lonely_first():
    points = [(0, 5), (1, 3), (3, 2), (5, 0), (9, 9)]
    assert rank(points, "crowding") == [0, 3, 2, 1, 4]
    assert rank(points) == eps_net_order(points, [0, 1, 2, 3]) + [4]


def test_rank_refuses_an_unknown_tie_break():
    with pytest.raises(ArgumentError, match=r"^tie_break: .*got 'random'$"):
        rank([(0, 1)], "random")


def test_reference_point_adds_a_margin_of_the_range():
    assert reference_point([(0, 10), (4, 2)]) == pytest.approx((4.4, 10.8))
    # A zero range falls back to the size of the value, at least 1.
    assert reference_point([(3, -20), (3, -20)], margin=0.5) == pytest.approx((4.5, -10.0))
    assert reference_point([(0.0, INF), (1.0, 2.0)]) == pytest.approx((1.1, 2.2))
    assert reference_point([(0.0, INF)])[1] == INF
    with pytest.raises(ArgumentError, match="margin"):
        reference_point([(0, 1)], margin=-1)
    with pytest.raises(ArgumentError, match="at least one point"):
        reference_point([])
