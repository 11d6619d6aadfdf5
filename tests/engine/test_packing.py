"""Packing invariants: within capacity and bounds, no idle capacity a trial could use, within 2× LB."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.engine.packing import (
    TrialLoad,
    fifo_widths,
    fluid_widths,
    lower_bound,
    simulate_group,
)


def _trials(draw_works, mins, maxs, alphas) -> list[TrialLoad]:
    return [
        TrialLoad(i, w, mn, max(mn, mx), power_law(a))
        for i, (w, mn, mx, a) in enumerate(zip(draw_works, mins, maxs, alphas, strict=False))
    ]


def power_law(alpha: float):
    return lambda width: width**alpha


trial_sets = st.integers(1, 25).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0.1, 1000), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.5, 1.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0]), min_size=n, max_size=n),
        st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(
    spec=trial_sets,
    capacity=st.sampled_from([1.0, 2.0, 8.0, 16.0]),
    step=st.sampled_from([0.5, 1.0]),
)
def test_fluid_widths_respect_capacity_bounds_and_leave_nothing_growable_idle(spec, capacity, step):
    trials = _trials(*spec)
    widths = fluid_widths(trials, capacity, step)
    assert sum(widths.values()) <= capacity + 1e-9
    by_id = {t.trial_id: t for t in trials}
    for i, w in widths.items():
        assert by_id[i].min_width - 1e-9 <= w <= by_id[i].max_width + 1e-9
    free = capacity - sum(widths.values())
    growable = [
        i
        for i, w in widths.items()
        if w + step <= by_id[i].max_width + 1e-9
        and by_id[i].height(w + step) < by_id[i].height(w) * (1 - 1e-3)
    ]
    assert free < step - 1e-9 or not growable
    # Admission is first come first served at the minimum width; a later trial that fits in
    # what an earlier one could not use starts (backfilling), never the other way round.
    used, admitted = 0.0, []
    for t in trials:
        if used + t.min_width <= capacity + 1e-9:
            admitted.append(t.trial_id)
            used += t.min_width
    assert sorted(widths) == sorted(admitted)


@settings(max_examples=100, deadline=None)
@given(spec=trial_sets, capacity=st.sampled_from([2.0, 8.0]))
def test_a_group_never_takes_twice_the_lower_bound(spec, capacity):
    trials = [t for t in _trials(*spec) if t.min_width == 1.0] or [TrialLoad(0, 1.0)]
    result = simulate_group(trials, capacity, "fluid")
    assert result.makespan_s <= 2 * lower_bound(trials, capacity) * (1 + 1e-9)
    assert result.busy_area <= capacity * result.makespan_s * (1 + 1e-9)


def test_fifo_keeps_its_width_and_leaves_capacity_idle():
    trials = [TrialLoad(0, 100.0), TrialLoad(1, 10.0)]
    assert fifo_widths(trials, 8.0) == {0: 1.0, 1: 1.0}
    fluid = fluid_widths(trials, 8.0)
    assert sum(fluid.values()) == 8.0 and fluid[0] > fluid[1]


def test_a_lone_straggler_gets_the_whole_machine():
    (t,) = [TrialLoad(0, 64.0, max_width=8.0)]
    assert fluid_widths([t], 8.0) == {0: 8.0}
    assert simulate_group([t], 8.0, "fluid").makespan_s == 8.0
    assert simulate_group([t], 8.0, "fifo").makespan_s == 64.0


def test_sharing_a_device_with_fractional_widths():
    trials = [TrialLoad(i, 10.0, min_width=0.5, max_width=1.0) for i in range(4)]
    widths = fluid_widths(trials, 2.0, step=0.5)
    assert widths == {0: 0.5, 1: 0.5, 2: 0.5, 3: 0.5}


def test_lower_bound_is_a_bound():
    rng = np.random.default_rng(0)
    for _ in range(50):
        trials = [TrialLoad(i, float(w)) for i, w in enumerate(rng.lognormal(3, 1, size=7))]
        for policy in ("fluid", "fifo"):
            assert simulate_group(trials, 4.0, policy).makespan_s >= lower_bound(trials, 4.0) - 1e-9
    assert math.isinf(TrialLoad(0, 1.0).height(0))


def test_a_trial_that_does_not_speed_up_is_not_widened():
    flat = TrialLoad(0, 100.0, max_width=8.0, speedup=lambda w: 1.0 if w <= 1 else 0.9)
    assert fluid_widths([flat], 8.0) == {0: 1.0}
