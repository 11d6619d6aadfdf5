"""Where new configurations come from: seeded random sampling, grid enumeration, or a model
(`tpe`, in `basht.tune.tpe`, which builds on the classes here; `basht.tune._common` picks one
by name)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from basht.errors import ArgumentError, ExperimentError
from basht.space import Config, SearchSpace, SpaceLike
from basht.tune._checks import check_whole


class Sampler(Protocol):
    """Draws new configurations. A sampler that learns from results also has
    `observe(config, budget, value)`, which the algorithms call with each result they rank."""

    def next(self) -> Config | None:
        """A new configuration, or None once the sampler is exhausted."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


class SpaceSampler:
    """What every sampler shares: the space it draws from, given as a SearchSpace or in any form
    `SearchSpace.coerce` reads (the experiment file's, typed parameters), and checked there."""

    def __init__(self, space: SpaceLike):
        self.space = SearchSpace.coerce(space)


class RandomSampler(SpaceSampler):
    """Independent draws from the space with a numpy Generator seeded once.

    Configuration i maps the uniforms i·n .. i·n+n-1 of the generator's stream (n parameters)
    through the space, as `space.sample(rng)` called once per configuration would. They are
    drawn and mapped a block of configurations at a time (a numpy call per configuration costs
    more than the configuration), so `rng` runs ahead of what was used; `get_state` gives the
    state after the uniforms used, which `set_state` resumes exactly.
    """

    BLOCK = 256  # configurations drawn per call to the generator

    def __init__(self, space: SpaceLike, seed: int = 0):
        super().__init__(space)
        check_whole("seed", seed, 0)
        self.rng = np.random.default_rng(seed)
        self._width = len(self.space)
        self._ahead: list[Config] = []  # the rest of the block, last first
        self._used = 0  # configurations of the block already handed out
        self._block_state: dict[str, Any] | None = None  # the generator before the block

    def next(self) -> Config:
        if not self._ahead:
            self._block_state = self.rng.bit_generator.state
            units = self.rng.random(self.BLOCK * self._width).tolist()
            self._ahead = self.space.from_unit_rows(units)[::-1]
            self._used = 0
        self._used += 1
        return self._ahead.pop()

    def get_state(self) -> dict[str, Any]:
        if self._block_state is None or not self._ahead:
            return {"bit_generator": self.rng.bit_generator.state}
        # Replay the uniforms used from the block's start on a copy: the same doubles, so the
        # same state, whatever the bit generator.
        bit_generator = getattr(np.random, self._block_state["bit_generator"])()
        bit_generator.state = self._block_state
        np.random.Generator(bit_generator).random(self._used * self._width)
        return {"bit_generator": bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["bit_generator"]
        self._ahead, self._used, self._block_state = [], 0, None


class GridSampler(SpaceSampler):
    """Every configuration of a finite space in a fixed order, then None."""

    def __init__(self, space: SpaceLike):
        super().__init__(space)
        self.position = 0
        try:
            self._grid: Iterator[Config] = self.space.grid()
        except ExperimentError as err:  # an infinite space
            raise ArgumentError(f"space: {err}") from None

    def next(self) -> Config | None:
        config = next(self._grid, None)
        if config is not None:
            self.position += 1
        return config

    def get_state(self) -> dict[str, Any]:
        return {"position": self.position}

    def set_state(self, state: dict[str, Any]) -> None:
        self._grid = self.space.grid()
        self.position = 0
        for _ in range(state["position"]):
            self.next()
