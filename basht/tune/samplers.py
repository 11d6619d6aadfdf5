"""Where new configurations come from: seeded random sampling or grid enumeration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from basht.space import Config, SearchSpace


class Sampler(Protocol):
    def next(self) -> Config | None:
        """A new configuration, or None once the sampler is exhausted."""

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


class RandomSampler:
    """Independent draws from the space with a numpy Generator seeded once."""

    def __init__(self, space: SearchSpace, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)

    def next(self) -> Config:
        return self.space.sample(self.rng)

    def get_state(self) -> dict[str, Any]:
        return {"bit_generator": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["bit_generator"]


class GridSampler:
    """Every configuration of a finite space in a fixed order, then None."""

    def __init__(self, space: SearchSpace):
        self.space = space
        self.position = 0
        self._grid: Iterator[Config] = space.grid()

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


def make_sampler(name: str, space: SearchSpace, seed: int) -> Sampler:
    if name == "grid":
        return GridSampler(space)
    return RandomSampler(space, seed)
