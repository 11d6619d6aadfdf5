"""The random sampler draws uniforms in blocks, yet gives the stream one draw per configuration
would, and its state resumes that stream exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from basht.space import Choice, Float, Int, SearchSpace
from basht.tune import RandomSampler

SPACE = SearchSpace(
    {
        "lr": Float(1e-4, 1.0, log=True),
        "width": Int(16, 1024, log=True),
        "act": Choice(("relu", "tanh")),
    }
)


def test_blocks_give_the_configurations_of_one_draw_each():
    sampler, rng = RandomSampler(SPACE, seed=3), np.random.default_rng(3)
    count = 2 * RandomSampler.BLOCK + 7
    assert [sampler.next() for _ in range(count)] == [SPACE.sample(rng) for _ in range(count)]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), used=st.integers(0, 3 * RandomSampler.BLOCK))
def test_the_state_is_that_of_the_uniforms_used_and_resumes_exactly(seed, used):
    sampler = RandomSampler(SPACE, seed=seed)
    for _ in range(used):
        sampler.next()
    state = sampler.get_state()
    reference = np.random.default_rng(seed)
    reference.random(used * len(SPACE))
    assert state == {"bit_generator": reference.bit_generator.state}

    resumed = RandomSampler(SPACE, seed=seed + 1)
    resumed.set_state(state)
    assert [resumed.next() for _ in range(20)] == [sampler.next() for _ in range(20)]
    assert resumed.get_state() == sampler.get_state()
