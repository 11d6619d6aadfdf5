"""Multi-objective math shared by multi-objective ASHA, the results and the benchmark: dominance,
non-dominated fronts, the tie-breaks within a front, and the dominated hypervolume.

Everything minimises: callers sign each objective first (a maximised one negated) and map NaN to
+inf, which is the worst value of an objective and is handled everywhere (it dominates nothing,
adds no hypervolume and is normalised to the far end of a front). NaN and -inf are refused, as
they mean a caller forgot to do that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from basht.errors import ArgumentError

Points = Sequence[Sequence[float]] | np.ndarray
"""n points of k objectives each: a sequence of tuples, or an (n, k) array."""

TIE_BREAKS = ("eps-net", "crowding")


def _as_points(points: Points, name: str = "points") -> np.ndarray:
    """`points` as an (n, k) float array, k >= 1 (an empty input is (0, 0))."""
    try:
        array = np.asarray(points, dtype=float)
    except (TypeError, ValueError) as error:
        raise ArgumentError(f"{name}: expected n points of k >= 1 numbers each ({error})") from None
    if array.size == 0 and array.ndim <= 2 and array.shape[0] == 0:
        return array.reshape(0, array.shape[1] if array.ndim == 2 else 0)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ArgumentError(
            f"{name}: expected n points of k >= 1 objectives each, got shape {array.shape}"
        )
    _check_values(array, name)
    return array


def _check_values(array: np.ndarray, name: str) -> None:
    if np.isnan(array).any() or np.isneginf(array).any():
        raise ArgumentError(f"{name}: NaN and -inf are not values to minimise (map them to +inf)")


def _as_point(point: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    try:
        array = np.asarray(point, dtype=float)
    except (TypeError, ValueError):
        array = np.empty((0, 0))
    if array.ndim != 1 or array.size == 0:
        raise ArgumentError(f"{name}: expected one point of k >= 1 objectives, got {point!r}")
    _check_values(array, name)
    return array


def dominates(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> bool:
    """Whether `a` is no worse than `b` in every objective and better in one (so a point never
    dominates itself or an equal point: duplicates share a front)."""
    left, right = _as_point(a, "a"), _as_point(b, "b")
    if left.shape != right.shape:
        raise ArgumentError(f"b: expected {left.size} objectives like a, got {right.size}")
    return bool(np.all(left <= right) and np.any(left < right))


def _domination_matrix(array: np.ndarray) -> np.ndarray:
    """`matrix[i, j]`: point i dominates point j. O(n^2 k) time, O(n^2) memory: a few thousand
    points is a few tens of MB, which is what the callers have."""
    n = array.shape[0]
    no_worse = np.ones((n, n), dtype=bool)
    better = np.zeros((n, n), dtype=bool)
    for column in array.T:
        no_worse &= column[:, None] <= column[None, :]
        better |= column[:, None] < column[None, :]
    return no_worse & better


def nondominated_fronts(points: Points) -> list[list[int]]:
    """The indices of `points` by non-dominated front, front 0 (the Pareto front) first, each front
    ascending. Deb et al.'s fast non-dominated sort (NSGA-II, 2002): count who dominates each
    point, take those counted by none, discount what they dominate, repeat."""
    array = _as_points(points)
    if array.shape[0] == 0:
        return []
    if array.shape[1] <= 2:
        return _fronts_2d(array)
    dominated_by = _domination_matrix(array)
    counts = dominated_by.sum(axis=0)
    remaining = np.ones(array.shape[0], dtype=bool)
    fronts: list[list[int]] = []
    while remaining.any():
        front = np.flatnonzero(remaining & (counts == 0))
        fronts.append(front.tolist())
        remaining[front] = False
        counts = counts - dominated_by[front].sum(axis=0)
    return fronts


def _fronts_2d(array: np.ndarray) -> list[list[int]]:
    """Fronts of one or two objectives in O(n log n), as a rung of thousands needs them.

    In the order (c1, c2), a point can only be dominated by one before it, and within a front c2
    falls as c1 rises, so a front's last point is its lowest in c2: the point is dominated by
    some member of a front exactly when that last point dominates it. The last points' c2 grow
    from front to front, so the point's front is found by bisection (the first front whose last
    point is above it in c2, or equal to it in both: equal points dominate nothing)."""
    from bisect import bisect_right

    columns = array if array.shape[1] == 2 else np.column_stack([array[:, 0], array[:, 0]])
    order = np.lexsort((columns[:, 1], columns[:, 0]))
    fronts: list[list[int]] = []
    last_c2: list[float] = []
    last_point: list[tuple[float, float]] = []
    for index in order.tolist():
        point = (float(columns[index, 0]), float(columns[index, 1]))
        j = bisect_right(last_c2, point[1])
        if j > 0 and last_point[j - 1] == point:
            j -= 1
        if j == len(fronts):
            fronts.append([])
            last_c2.append(point[1])
            last_point.append(point)
        else:
            last_c2[j], last_point[j] = point[1], point
        fronts[j].append(index)
    return [sorted(front) for front in fronts]


def pareto_front(points: Points) -> list[int]:
    """The indices of the points no other point dominates, ascending (duplicates all kept)."""
    array = _as_points(points)
    if array.shape[0] == 0:
        return []
    return np.flatnonzero(~_domination_matrix(array).any(axis=0)).tolist()


def _normalised(array: np.ndarray) -> np.ndarray:
    """Each objective scaled to [0, 1] over the rows: finite values by their own range, +inf to 1
    (the far end), a constant objective (or one whose finite values are all equal and which has
    no +inf) to 0 so it adds nothing to a distance."""
    scaled = np.zeros_like(array)
    for j, column in enumerate(array.T):
        finite = np.isfinite(column)
        if finite.any():
            low, high = column[finite].min(), column[finite].max()
            if high > low:
                scaled[finite, j] = (column[finite] - low) / (high - low)
        if finite.any() and not finite.all():
            scaled[~finite, j] = 1.0
    return scaled


def crowding_distance(points: Points, front: list[int]) -> dict[int, float]:
    """NSGA-II's crowding distance of each index in `front` (Deb et al. 2002): per objective, the
    gap between a point's two neighbours over the front's range, summed; the ends of each
    objective's order are inf so the extremes are always kept. Ties in an objective are ordered
    by index; a constant objective says nothing about spread and adds nothing; a front of at
    most two points is all ends. Larger is lonelier, so better to keep."""
    members = sorted(front)
    if len(members) <= 2:
        return {i: float("inf") for i in members}
    values = _normalised(_as_points(points)[members])
    distance = np.zeros(len(members))
    for column in values.T:
        if np.ptp(column) == 0:
            continue
        order = np.argsort(column, kind="stable")
        distance[order[0]] = distance[order[-1]] = np.inf
        inner = order[1:-1]
        distance[inner] += column[order[2:]] - column[order[:-2]]
    return {i: float(d) for i, d in zip(members, distance, strict=True)}


def eps_net_order(points: Points, front: list[int]) -> list[int]:
    """The indices of `front` in epsilon-net order: the tie-break within a front of multi-objective
    ASHA (Schmucker et al. 2021), from the epsilon-net of Salinas et al. 2021 (after Clarkson 2005),
    so that however few of a front are promoted they are spread along it.

    First the point best in the first objective, then repeatedly the point whose distance to the
    nearest point already picked is largest. Follows Syne Tune's `compute_epsilon_net` (its
    `NonDominatedPriority`, MOASHA's default, with `dim=0`) except where that is arbitrary or not
    scale-free: distances here are Euclidean on objectives normalised to [0, 1] over the front (a
    constant objective adds 0; +inf is 1), where Syne Tune uses raw values, so an objective in
    joules does not drown one in seconds; every tie goes to the lower index, where Syne Tune's
    follows a set's iteration order; and the picks are returned in pick order (Syne Tune's
    `nondominated_sort` indexes the front with the inverse permutation, its ranks, instead).
    """
    members = sorted(front)
    if not members:
        return []
    array = _as_points(points)[members]
    values = _normalised(array)
    # The best first objective on the raw values (inf and all), lowest index on ties.
    first = int(np.argmin(array[:, 0]))
    order = [first]
    nearest = np.linalg.norm(values - values[first], axis=1)
    picked = np.zeros(len(members), dtype=bool)
    picked[first] = True
    for _ in range(len(members) - 1):
        # argmax returns the first maximum, which is the lowest index as `members` ascends.
        choice = int(np.argmax(np.where(picked, -1.0, nearest)))
        order.append(choice)
        picked[choice] = True
        nearest = np.minimum(nearest, np.linalg.norm(values - values[choice], axis=1))
    return [members[i] for i in order]


def rank(points: Points, tie_break: str = "eps-net", limit: int | None = None) -> list[int]:
    """Every index of `points`, best first: front 0 ordered by `tie_break`, then front 1, and so
    on. "eps-net" (MOASHA's default, see `eps_net_order`) spreads the first picks along the front;
    "crowding" (NSGA-II's) puts the largest crowding distance first, ties to the lower index.
    With `limit`, only the best `limit` are returned (a rung needs its top 1/eta), and fronts
    after them are not ordered."""
    if not isinstance(tie_break, str) or tie_break not in TIE_BREAKS:
        raise ArgumentError(
            f"tie_break: expected one of {', '.join(map(repr, TIE_BREAKS))}, got {tie_break!r}"
        )
    array = _as_points(points)
    ranked: list[int] = []
    for front in nondominated_fronts(array):
        if limit is not None and len(ranked) >= limit:
            return ranked[:limit]
        if tie_break == "eps-net":
            ranked.extend(eps_net_order(array, front))
        else:
            distance = crowding_distance(array, front)
            ranked.extend(sorted(front, key=lambda i: (-distance[i], i)))
    return ranked if limit is None else ranked[:limit]


def hypervolume(points: Points, reference: Sequence[float] | np.ndarray) -> float:
    """The volume dominated by `points` and bounded by `reference` (minimisation): the union of the
    boxes [p, reference] of the points strictly better than the reference in every objective
    (the others, +inf included, add 0). Exact: 1-D is a difference, 2-D a sorted sweep
    (O(n log n)), higher dimensions slice along the last objective (HSO, While et al. 2006) and
    recurse on the non-dominated points of each slice."""
    array = _as_points(points)
    bound = _as_point(reference, "reference")
    if array.shape[0] == 0:
        return 0.0
    if array.shape[1] != bound.size:
        raise ArgumentError(
            f"reference: expected {array.shape[1]} objectives like the points, got {bound.size}"
        )
    inside = array[np.all(array < bound, axis=1)]
    if inside.shape[0] == 0:
        return 0.0
    if np.isinf(bound).any():
        # Every point inside is finite where the reference is not, so its box is unbounded.
        return float("inf")
    return float(_hypervolume(inside, bound))


def _hypervolume(array: np.ndarray, bound: np.ndarray) -> float:
    """The hypervolume of points all strictly inside `bound` (at least one)."""
    k = array.shape[1]
    if k == 1:
        return float(bound[0] - array[:, 0].min())
    if k == 2:
        order = np.lexsort((array[:, 1], array[:, 0]))
        x, y = array[order, 0], array[order, 1]
        lowest_y = np.minimum.accumulate(y)
        widths = np.diff(np.append(x, bound[0]))
        return float(np.sum(widths * (bound[1] - lowest_y)))
    array = array[~_domination_matrix(array).any(axis=0)]
    array = np.unique(array, axis=0)
    order = np.argsort(array[:, -1], kind="stable")
    array = array[order]
    depths = np.diff(np.append(array[:, -1], bound[-1]))
    volume = 0.0
    for i, depth in enumerate(depths):
        # Points with the same last objective share one slice: only the last of them closes it.
        if depth > 0:
            volume += depth * _hypervolume(array[: i + 1, :-1], bound[:-1])
    return volume


def reference_point(points: Points, margin: float = 0.1) -> tuple[float, ...]:
    """The reference point results state alongside a hypervolume: per objective, the worst value
    among `points` (the nadir, when they are a front) plus `margin` times the range of the values,
    or `margin * max(1, |worst|)` where the range is 0, so that the extreme points still add
    volume. +inf values are left out (they add no volume whatever the reference); an objective
    that is +inf in every point gets +inf."""
    array = _as_points(points)
    if array.shape[0] == 0:
        raise ArgumentError("points: expected at least one point to take a reference point from")
    if not np.isfinite(margin) or margin < 0:
        raise ArgumentError(f"margin: expected a finite number >= 0, got {margin!r}")
    reference = []
    for column in array.T:
        finite = column[np.isfinite(column)]
        if finite.size == 0:
            reference.append(float("inf"))
            continue
        worst, spread = float(finite.max()), float(np.ptp(finite))
        reference.append(worst + margin * (spread if spread > 0 else max(1.0, abs(worst))))
    return tuple(reference)
