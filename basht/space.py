"""The search space Φ: typed parameters, seeded sampling, grid enumeration and its size pS."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from basht.errors import ExperimentError

Config = dict[str, Any]


@dataclass(frozen=True)
class Float:
    """A real-valued parameter; `step` makes it discrete, `log` samples its exponent uniformly."""

    low: float
    high: float
    log: bool = False
    step: float | None = None

    def sample(self, rng: np.random.Generator) -> float:
        return self.from_unit(float(rng.random()))

    def from_unit(self, u: float) -> float:
        """The value at quantile `u` in [0, 1) of this parameter's sampling distribution."""
        if self.step is not None:
            grid = self.grid()
            return grid[min(int(u * len(grid)), len(grid) - 1)]
        if self.log:
            lo, hi = math.log(self.low), math.log(self.high)
            return min(math.exp(lo + u * (hi - lo)), self.high)
        return self.low + u * (self.high - self.low)

    def grid(self) -> list[float]:
        if self.step is None:
            raise ExperimentError("a float parameter without `step` has no grid")
        n = int(math.floor((self.high - self.low) / self.step + 1e-9))
        # Rounding keeps 0.1 + 0.2 from printing as 0.30000000000000004 in results.
        return [round(self.low + i * self.step, 12) for i in range(n + 1)]

    @property
    def size(self) -> float:
        return len(self.grid()) if self.step is not None else math.inf


@dataclass(frozen=True)
class Int:
    """An integer parameter, bounds included; `log` samples the exponent uniformly."""

    low: int
    high: int
    log: bool = False
    step: int | None = None

    def sample(self, rng: np.random.Generator) -> int:
        return self.from_unit(float(rng.random()))

    def from_unit(self, u: float) -> int:
        """The value at quantile `u` in [0, 1): uniform over the integers, or their logarithm."""
        if self.step is not None:
            grid = self.grid()
            return grid[min(int(u * len(grid)), len(grid) - 1)]
        if self.log:
            lo, hi = math.log(self.low - 0.5), math.log(self.high + 0.5)
            return int(min(max(round(math.exp(lo + u * (hi - lo))), self.low), self.high))
        return min(self.low + int(u * (self.high - self.low + 1)), self.high)

    def grid(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step or 1))

    @property
    def size(self) -> float:
        return len(self.grid())


@dataclass(frozen=True)
class Choice:
    """One of a list of values (numbers, strings, lists such as layer widths)."""

    values: tuple[Any, ...]

    def sample(self, rng: np.random.Generator) -> Any:
        return self.from_unit(float(rng.random()))

    def from_unit(self, u: float) -> Any:
        return _plain(self.values[min(int(u * len(self.values)), len(self.values) - 1)])

    def grid(self) -> list[Any]:
        return [_plain(v) for v in self.values]

    @property
    def size(self) -> float:
        return len(self.values)


Parameter = Float | Int | Choice


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class SearchSpace(Mapping[str, Parameter]):
    """An ordered mapping of names to parameters; the order fixes sampling and grid order."""

    def __init__(self, parameters: Mapping[str, Parameter]):
        if not parameters:
            raise ExperimentError("the search space is empty")
        self._parameters = dict(parameters)

    def __getitem__(self, name: str) -> Parameter:
        return self._parameters[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __len__(self) -> int:
        return len(self._parameters)

    def __repr__(self) -> str:
        return f"SearchSpace({self._parameters!r})"

    def sample(self, rng: np.random.Generator) -> Config:
        """One configuration: one uniform draw per parameter (a single call to the generator),
        mapped through each parameter's quantile function."""
        units = rng.random(len(self._parameters)).tolist()
        return {
            name: p.from_unit(u)
            for (name, p), u in zip(self._parameters.items(), units, strict=True)
        }

    @property
    def size(self) -> float:
        """pS = |Φ|: the number of distinct configurations, `math.inf` if any parameter is real."""
        return math.prod(p.size for p in self._parameters.values())

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.size)

    def grid(self) -> Iterator[Config]:
        """Every configuration, the last parameter varying fastest."""
        infinite = [n for n, p in self._parameters.items() if not math.isfinite(p.size)]
        if infinite:
            raise ExperimentError(
                f"grid sampling needs finite parameters; give `step` or use `choice` for: "
                f"{', '.join(infinite)}"
            )
        names = list(self._parameters)
        for values in itertools.product(*(self._parameters[n].grid() for n in names)):
            yield dict(zip(names, values, strict=True))
