"""Pruning rounds: down from the default to the first failure, then up; survivors become arms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from basht.bso.pruning import Done, Explore, Probe, Wait, next_step

SIZES = [32, 64, 256, 512, 1024, 2048, 4096]


def drive(sizes, default, rounds, outcome):
    """Answer every probe with outcome(size, round) -> (converged, cost); the explored order."""
    probes: dict[int, list[Probe]] = {}
    order = []
    while True:
        step = next_step(sizes, default, rounds, probes)
        if isinstance(step, Done):
            return order, step
        assert isinstance(step, Explore)
        history = probes.setdefault(step.batch_size, [])
        converged, cost = outcome(step.batch_size, len(history))
        history.append(Probe(False, converged, cost))
        order.append(step.batch_size)


def test_explores_down_from_the_default_then_up_then_from_the_cheapest():
    costs = {32: 9.0, 64: 5.0, 256: 4.0, 512: 3.0, 1024: 6.0, 2048: 7.0, 4096: 8.0}
    order, done = drive(SIZES, 1024, 2, lambda b, r: (True, costs[b]))
    round_one = [1024, 512, 256, 64, 32, 2048, 4096]
    round_two = [512, 256, 64, 32, 1024, 2048, 4096]  # from 512, the cheapest of round one
    assert order == round_one + round_two
    assert done == Done(SIZES)


def test_a_failure_ends_that_direction_and_prunes_what_lies_beyond():
    fails = {64, 2048}
    order, done = drive(SIZES, 1024, 2, lambda b, r: (b not in fails, float(b)))
    # Round two keeps only 1024, 512, 256 and starts from 256, the cheapest.
    assert order == [1024, 512, 256, 64, 2048] + [256, 512, 1024]
    assert done.arms == [256, 512, 1024]


def test_a_running_probe_makes_the_next_request_wait():
    probes = {1024: [Probe(dispatched=True, converged=None, cost=None)]}
    assert next_step(SIZES, 1024, 2, probes) == Wait()


def test_zero_rounds_skips_pruning():
    step = next_step(SIZES, 1024, 0, {})
    assert isinstance(step, Done) and step.arms == SIZES and step.note


def test_a_round_where_everything_fails_falls_back_to_the_last_survivors():
    order, done = drive(SIZES, 1024, 2, lambda b, r: (r == 0 and b in (512, 1024), float(b)))
    assert done.arms == [512, 1024] and "round 2" in (done.note or "")


def test_when_nothing_ever_converged_every_size_becomes_an_arm():
    order, done = drive(SIZES, 1024, 2, lambda b, r: (False, 1.0))
    assert order == [1024, 2048]
    assert done.arms == SIZES and "first pruning round" in (done.note or "")


outcomes = st.dictionaries(
    st.tuples(st.sampled_from(SIZES), st.integers(0, 3)),
    st.tuples(st.booleans(), st.floats(1.0, 1e6)),
)


@given(st.sampled_from(SIZES), st.integers(0, 3), outcomes)
@settings(max_examples=200)
def test_pruning_always_ends_with_arms_it_may_use(default, rounds, table):
    def outcome(size, round_index):
        return table.get((size, round_index), (True, float(size)))

    order, done = drive(SIZES, default, rounds, outcome)
    assert len(order) <= rounds * len(SIZES)
    assert done.arms and set(done.arms) <= set(SIZES) and done.arms == sorted(done.arms)
    if rounds and done.note is None:
        # Normal end: the arms are exactly the sizes that converged in the last round.
        last = {b for b in SIZES if len([x for x in order if x == b]) == rounds}
        assert set(done.arms) <= last
        assert all(outcome(b, rounds - 1)[0] for b in done.arms)
