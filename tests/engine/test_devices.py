"""GPU placement: packable shares, never a device over-committed, trials kept where they are."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.engine.devices import Placement, check_share, gpu_widths, place, snap
from basht.engine.packing import TrialLoad


def _loads(works, alphas, min_share, max_width):
    return [
        TrialLoad(i, w, min_share, max_width, lambda width, a=a: width**a)
        for i, (w, a) in enumerate(zip(works, alphas, strict=True))
    ]


def _assert_valid(placements: dict[int, Placement], widths: dict[int, float], devices: int):
    used = [0.0] * devices
    for trial_id, p in placements.items():
        assert p.width == pytest.approx(widths[trial_id])
        assert len(set(p.devices)) == len(p.devices)
        assert p.share == 1.0 or len(p.devices) == 1
        for d in p.devices:
            used[d] += p.share
    assert all(u <= 1.0 + 1e-9 for u in used), used


plans = st.tuples(
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1.0, 0.5, 0.25]),
    st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    st.data(),
)


@settings(max_examples=150, deadline=None)
@given(plan=plans)
def test_widths_are_packable_within_bounds_and_always_placed(plan):
    devices, min_share, max_width, data = plan
    most = int(devices / min_share)
    n = data.draw(st.integers(1, most))
    works = data.draw(st.lists(st.floats(0.1, 1000), min_size=n, max_size=n))
    alphas = data.draw(st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n))
    loads = _loads(works, alphas, min_share, max(max_width, min_share))
    widths = gpu_widths(loads, devices, min_share)
    assert set(widths) == {t.trial_id for t in loads}  # n x min_share fits: everyone runs
    assert sum(widths.values()) <= devices + 1e-9
    for w in widths.values():
        assert check_share(w) == w and min_share - 1e-9 <= w <= max(max_width, min_share) + 1e-9
    _assert_valid(place(widths, devices), widths, devices)


@settings(max_examples=100, deadline=None)
@given(plan=plans)
def test_placing_again_keeps_unchanged_trials_where_they_are(plan):
    devices, min_share, max_width, data = plan
    n = data.draw(st.integers(1, int(devices / min_share)))
    loads = _loads([10.0 * (i + 1) for i in range(n)], [0.9] * n, min_share, max_width)
    before = gpu_widths(loads, devices, min_share)
    first = place(before, devices)
    loads = loads[1:]  # one trial ends: the others are re-planned
    after = gpu_widths(loads, devices, min_share)
    second = place(after, devices, first)
    _assert_valid(second, after, devices)
    unchanged = [i for i in after if after[i] == before[i]]
    fragmented = any(second[i] != first[i] for i in unchanged)
    if not fragmented:
        assert all(second[i] == first[i] for i in unchanged)


def test_a_lone_trial_grows_over_every_device_and_shares_when_crowded():
    lone = gpu_widths([TrialLoad(0, 100.0, 0.5, 4.0)], 2, 0.5)
    assert lone == {0: 2.0}
    assert place(lone, 2) == {0: Placement((0, 1), 1.0)}
    crowd = gpu_widths([TrialLoad(i, 100.0, 0.5, 4.0) for i in range(4)], 2, 0.5)
    assert crowd == {0: 0.5, 1: 0.5, 2: 0.5, 3: 0.5}
    placed = place(crowd, 2)
    assert sorted(p.devices[0] for p in placed.values()) == [0, 0, 1, 1]


def test_a_trial_that_does_not_speed_up_keeps_one_share():
    flat = TrialLoad(0, 100.0, 0.25, 4.0, lambda width: min(width, 0.25) / 0.25)
    assert gpu_widths([flat], 4, 0.25) == {0: 0.25}


def test_shares_snap_down_to_powers_of_two_and_whole_devices():
    assert [snap(w, 0.25) for w in (0.3, 0.6, 0.99, 1.0, 1.7, 3.2)] == [
        0.25,
        0.5,
        0.5,
        1.0,
        1.0,
        3.0,
    ]
    for bad in (0.3, 0.75, 1.5, 0.0):
        with pytest.raises(ValueError, match="GPU"):
            check_share(bad)


def test_widths_that_cannot_fit_are_refused():
    with pytest.raises(ValueError, match="whole GPUs"):
        place({0: 2.0, 1: 1.0}, 2)
