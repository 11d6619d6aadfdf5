"""A seeded job's generator survives the database round trip, so its draws replay exactly."""

from __future__ import annotations

import json

import numpy as np

from basht.bso import rng


def test_the_initial_state_is_a_fresh_generator_of_the_seed():
    restored = rng.load(rng.initial_state(7))
    assert restored.normal(size=5).tolist() == np.random.default_rng(7).normal(size=5).tolist()


def test_state_is_json_and_not_null_under_numpy_2():
    """Zeus 0.16 stored rng.__getstate__(), which numpy 2 returns as None: seeds did nothing."""
    state = rng.initial_state(1)
    assert json.loads(state) is not None
    assert json.loads(state)["bit_generator"] == "PCG64"


def test_draws_continue_where_the_last_request_stopped():
    whole = np.random.default_rng(3)
    expected = [whole.normal(), whole.normal(), whole.normal()]
    state = rng.initial_state(3)
    got = []
    for _ in range(3):  # one "request" per draw: load, draw, dump
        g = rng.load(state)
        got.append(g.normal())
        state = rng.dump(g)
    assert got == expected


def test_unseeded_generators_are_independent():
    assert rng.load(None).integers(2**62) != rng.load(None).integers(2**62)
