"""A job's random generator, kept in the database between requests so seeded jobs replay exactly.

The state is numpy's `bit_generator.state` as JSON (PCG64, two 128-bit integers), which is what
Zeus stores since its fix of commit a678f4e. Zeus 0.16.0 and earlier stored `rng.__getstate__()`,
which is None under numpy 2, so `mab_seed` silently did nothing there; here it always works.
"""

from __future__ import annotations

import json

import numpy as np


def initial_state(seed: int) -> str:
    """The stored state of a fresh generator seeded with `seed` (what Zeus's register does)."""
    return dump(np.random.default_rng(seed))


def load(state: str | None) -> np.random.Generator:
    """The job's generator: restored from `state`, or freshly seeded from the OS when unseeded.

    Unseeded jobs get one fresh generator per request. (Zeus reseeds every single draw from the
    current second, so the Thompson samples of one request were perfectly correlated.)
    """
    rng = np.random.default_rng()
    if state is not None:
        rng.bit_generator.state = json.loads(state)
    return rng


def dump(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state)
