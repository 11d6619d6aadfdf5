"""Synchronous SHA and Hyperband: rung sizes, budgets, bracket shapes, failures."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from basht.space import Choice, Float, SearchSpace
from basht.tune import SHA, AsyncHyperband, Decision, Hyperband
from basht.tune.hyperband import SynchronousHyperband, bracket_size
from basht.tune.rungs import signed
from tests.tune.drive import curve, drive

SPACE = SearchSpace({"x": Float(0.0, 1.0)})
GRID = SearchSpace({"x": Float(0.0, 1.0, step=0.05), "y": Choice((1, 2))})


def _rung_sizes(trace) -> dict[int, Counter[int]]:
    """Per bracket: how many trials trained to each budget."""
    sizes: dict[int, Counter[int]] = {}
    for s in trace.suggestions:
        sizes.setdefault(s.meta["bracket"], Counter())[s.budget] += 1
    return sizes


@settings(max_examples=40, deadline=None)
@given(
    eta=st.integers(2, 4),
    k=st.integers(1, 4),
    workers=st.integers(1, 20),
    order=st.integers(0, 1000),
    mode=st.sampled_from(["min", "max"]),
)
def test_sha_rung_sizes_and_budgets(eta, k, workers, order, mode):
    top = eta**k
    algo = SHA(SPACE, metric="acc", mode=mode, max_budget=top, eta=eta, seed=order)
    value = curve(order)
    trace = drive(algo, workers, value, order_seed=order)
    n = eta**k
    sizes = _rung_sizes(trace)
    assert list(sizes) == [0]
    assert dict(sizes[0]) == {eta**i: n // eta**i for i in range(k + 1)}
    # Survivors of each rung are exactly its best floor(n/eta) results.
    by_budget: dict[int, dict[int, float]] = {}
    for trial, budget, v, _ in trace.decisions:
        by_budget.setdefault(budget, {})[trial] = v
    for i in range(k):
        rung = by_budget[eta**i]
        best = sorted(rung, key=lambda t: (signed(rung[t], mode), t))[: n // eta ** (i + 1)]
        assert set(best) == set(by_budget[eta ** (i + 1)])


def test_hyperband_brackets_match_the_paper_for_r81_eta3():
    # Li et al. (2018), Table 1: bracket s -> (n_i, r_i) per rung.
    paper = {
        0: {1: 81, 3: 27, 9: 9, 27: 3, 81: 1},
        1: {3: 34, 9: 11, 27: 3, 81: 1},
        2: {9: 15, 27: 5, 81: 1},
        3: {27: 8, 81: 2},
        4: {81: 5},
    }
    assert [bracket_size(4, s, 3) for s in range(5)] == [81, 34, 15, 8, 5]
    algo = Hyperband(SPACE, metric="acc", max_budget=81, eta=3, seed=0)
    trace = drive(algo, 4, curve(0), order_seed=0)
    sizes = _rung_sizes(trace)
    assert {b: dict(c) for b, c in sizes.items()} == paper


def test_sha_waits_for_the_whole_rung():
    algo = SHA(SPACE, metric="acc", max_budget=9, eta=3, seed=0)
    first = [algo.suggest() for _ in range(9)]
    assert algo.suggest() is None  # the bracket has started all its trials; no new bracket
    for s in first[:8]:
        assert algo.report(s.trial_id, 1, s.config["x"]) is Decision.PAUSE
    assert algo.suggest() is None  # one result is still missing
    algo.report(first[8].trial_id, 1, first[8].config["x"])
    promoted = [algo.suggest() for _ in range(3)]
    best = sorted(first, key=lambda s: -s.config["x"])[:3]
    assert {p.trial_id for p in promoted} == {s.trial_id for s in best}
    assert all(p.resume and p.budget == 3 for p in promoted)


def test_a_failed_trial_counts_as_the_worst_and_does_not_block_the_rung():
    algo = SHA(SPACE, metric="acc", max_budget=3, eta=3, seed=0)
    jobs = [algo.suggest() for _ in range(3)]
    algo.report(jobs[0].trial_id, 1, 0.1)
    algo.report(jobs[1].trial_id, 1, 0.2)
    algo.fail(jobs[2].trial_id)
    promoted = algo.suggest()
    assert promoted.trial_id == jobs[1].trial_id and promoted.budget == 3


def test_with_a_trial_limit_more_brackets_fill_free_workers():
    algo = SHA(SPACE, metric="acc", max_budget=9, eta=3, seed=0, max_trials=20)
    jobs = [algo.suggest() for _ in range(20)]
    assert all(j is not None for j in jobs) and algo.suggest() is None
    assert {j.meta["bracket"] for j in jobs} == {0, 1, 2}
    assert Counter(j.meta["bracket"] for j in jobs) == {0: 9, 1: 9, 2: 2}


class _Scanning(SynchronousHyperband):
    """suggest() as it was: a scan of every bracket in index order (O(brackets) per call)."""

    def suggest(self):
        for bracket in self.brackets:
            if not bracket.done:
                job = self._job(bracket)
                if job is not None:
                    return job
        while True:
            bracket = self._open_bracket()
            if bracket is None:
                return None
            job = self._job(bracket)
            if job is not None:
                return job


def _calls(trace) -> list[tuple]:
    return [(s.trial_id, s.budget, s.resume, s.meta["bracket"]) for s in trace.suggestions] + [
        (t, b, d) for t, b, _, d in trace.decisions
    ]


@settings(max_examples=30, deadline=None)
@given(
    shapes=st.sampled_from([[0], [0, 1, 2, 3], [1, 2]]),
    workers=st.integers(1, 40),
    trials=st.integers(1, 400),
    order=st.integers(0, 1000),
    grid=st.booleans(),
)
def test_the_first_bracket_with_a_job_is_the_one_a_full_scan_finds(
    shapes, workers, trials, order, grid
):
    # A grid sampler runs out mid-bracket: the bracket shrinks and its draw fails.
    space = GRID if grid else SPACE

    def make(cls):
        return cls(
            space,
            metric="acc",
            max_budget=27,
            eta=3,
            shapes=shapes,
            sampler="grid" if grid else "random",
            seed=order,
            max_trials=trials,
        )

    fast = drive(make(SynchronousHyperband), workers, curve(order), order_seed=order)
    slow = drive(make(_Scanning), workers, curve(order), order_seed=order)
    assert _calls(fast) == _calls(slow)


def test_is_finished_once_the_last_bracket_is_done_or_the_grid_ran_out():
    # Without a trial limit SHA runs one bracket and Hyperband one band: then nothing is left.
    for make in (SHA, Hyperband):
        algo = make(SPACE, metric="acc", max_budget=9, eta=3, seed=0)
        drive(algo, 2, curve(0))
        assert algo.suggest() is None and algo.is_finished()
    # A grid that runs out as a new bracket opens leaves that bracket empty: it is done too.
    grid = SearchSpace({"x": Choice(tuple(range(9)))})
    algo = Hyperband(grid, metric="acc", max_budget=9, eta=3, sampler="grid", max_trials=100)
    drive(algo, 2, curve(0))
    assert algo.suggest() is None and algo.is_finished()


def test_a_maximum_off_the_grid_still_gives_a_random_search_bracket_and_fitting_sizes():
    # Budgets 1..100 have rungs 1, 3, 9, 27, 81, 100: six, so six brackets, sized for their rungs.
    algo = Hyperband(SPACE, metric="acc", max_budget=100, eta=3, seed=0)
    sizes = _rung_sizes(drive(algo, 4, curve(0), order_seed=0))
    assert dict(sizes[0]) == {1: 243, 3: 81, 9: 27, 27: 9, 81: 3, 100: 1}  # SHA's bracket
    assert dict(sizes[5]) == {100: 6}  # the last bracket: every configuration to the maximum
    assert all(max(c) == 100 for c in sizes.values())
    levels = [b.levels for b in AsyncHyperband(SPACE, metric="acc", max_budget=100).brackets]
    assert levels[-1] == [100] and levels[0] == [1, 3, 9, 27, 81, 100]
