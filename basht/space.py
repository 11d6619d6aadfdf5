"""The search space Φ: typed parameters, seeded sampling, grid enumeration and its size pS."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from basht.errors import ArgumentError, ExperimentError

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
        return self.quantile()(u)

    def quantile(self) -> Callable[[float], float]:
        """`from_unit` with its constants (the grid, the log bounds) computed once, for drawing
        many values."""
        low, high = self.low, self.high
        if self.step is not None:
            count, point = self._steps() + 1, self._point()
            return lambda u: point(min(int(u * count), count - 1))
        if self.log:
            lo, hi = math.log(low), math.log(high)
            span = hi - lo
            # exp(log(x)) may land an ulp below x (1e-5 -> 9.999999999999997e-06): clamp both ends.
            return lambda u: min(max(math.exp(lo + u * span), low), high)
        width = high - low
        return lambda u: low + u * width

    def grid(self) -> list[float]:
        if self.step is None:
            raise ExperimentError("a float parameter without `step` has no grid")
        point = self._point()
        return [point(i) for i in range(self._steps() + 1)]

    def _steps(self) -> int:
        """How many steps fit between the bounds (the end counts when within float noise)."""
        assert self.step is not None
        return int(math.floor((self.high - self.low) / self.step + 1e-9))

    def _point(self) -> Callable[[int], float]:
        """The grid's i-th value, computed alone: a fine grid is never built to be sampled."""
        low, high, step = self.low, self.high, self.step
        assert step is not None
        # Rounding to 12 significant digits of the bounds' scale keeps 0.1 + 0.2 from printing as
        # 0.30000000000000004 in results, and tiny steps (1e-13) apart rather than all 0.0; never
        # coarser than a millionth of the step (0..1e15 in steps of 1 stays whole numbers).
        digits = max(
            12 - math.floor(math.log10(max(abs(low), abs(high), step))),
            6 - math.floor(math.log10(step)),
        )
        return lambda i: min(max(round(low + i * step, digits), low), high)

    @property
    def size(self) -> float:
        return self._steps() + 1 if self.step is not None else math.inf


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
        return self.quantile()(u)

    def quantile(self) -> Callable[[float], int]:
        """`from_unit` with its constants (the grid, the log bounds) computed once, for drawing
        many values."""
        if self.step is not None:
            return _grid_quantile(self._range())
        low, high = self.low, self.high
        if self.log:
            lo, hi = math.log(low - 0.5), math.log(high + 0.5)
            span = hi - lo
            return lambda u: int(min(max(round(math.exp(lo + u * span)), low), high))
        count = high - low + 1
        return lambda u: min(low + int(u * count), high)

    def grid(self) -> list[int]:
        return list(self._range())

    def _range(self) -> range:
        """The grid as a range: its size and any one value without building it (2**31 seeds)."""
        return range(self.low, self.high + 1, self.step or 1)

    @property
    def size(self) -> float:
        return _count(self._range())


@dataclass(frozen=True)
class Choice:
    """One of a list of values (numbers, strings, lists such as layer widths)."""

    values: tuple[Any, ...]

    def sample(self, rng: np.random.Generator) -> Any:
        return self.from_unit(float(rng.random()))

    def from_unit(self, u: float) -> Any:
        return self.quantile()(u)

    def quantile(self) -> Callable[[float], Any]:
        """`from_unit` for drawing many values (a list value is a new list each time)."""
        values, count = self.values, len(self.values)
        return lambda u: _plain(values[min(int(u * count), count - 1)])

    def grid(self) -> list[Any]:
        return [_plain(v) for v in self.values]

    @property
    def size(self) -> float:
        return len(self.values)


Parameter = Float | Int | Choice


# -- the experiment file's form of a parameter ---------------------------------------------------
# `space:` in an experiment file and a dict given to an algorithm are read by these same models,
# so the two accept and refuse the same parameters (basht.experiment sits above and imports them).


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class FloatParam(_Spec):
    type: Literal["float"]
    """A real number between `low` and `high`."""
    low: float
    """The smallest value drawn (inclusive)."""
    high: float
    """The largest value drawn (inclusive)."""
    log: bool = False
    """Draw uniformly on a log scale (low must be above 0; not with `step`): for learning rates."""
    step: PositiveFloat | None = None
    """Only `low`, `low + step`, ... up to `high` (a grid searches exactly these)."""

    @model_validator(mode="after")
    def _bounds(self) -> FloatParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self

    def to_parameter(self) -> Float:
        return Float(self.low, self.high, self.log, self.step)


class IntParam(_Spec):
    type: Literal["int"]
    """A whole number between `low` and `high`."""
    low: int
    """The smallest value drawn (inclusive)."""
    high: int
    """The largest value drawn (inclusive)."""
    log: bool = False
    """Draw uniformly on a log scale (low must be above 0; not with `step`): for widths."""
    step: PositiveInt | None = None
    """Only `low`, `low + step`, ... up to `high`."""

    @model_validator(mode="after")
    def _bounds(self) -> IntParam:
        _check_bounds(self.low, self.high, self.log, self.step)
        return self

    def to_parameter(self) -> Int:
        return Int(self.low, self.high, self.log, self.step)


class ChoiceParam(_Spec):
    type: Literal["choice"]
    """One of a list of values."""
    values: list[Any] = Field(min_length=1)
    """The values to choose from: numbers, strings, booleans or lists (a layer layout, say)."""

    def to_parameter(self) -> Choice:
        return Choice(tuple(tuple(v) if isinstance(v, list) else v for v in self.values))


def _check_bounds(low: float, high: float, log: bool, step: float | None) -> None:
    # YAML reads .inf and .nan as floats: a grid of them overflows and draws are inf or nan.
    if not all(math.isfinite(v) for v in (low, high, 1.0 if step is None else step)):
        raise ValueError(
            f"low, high and step must be finite, got low={low} high={high} step={step}"
        )
    if low >= high:
        raise ValueError(f"low must be below high, got low={low} high={high}")
    if log and low <= 0:
        raise ValueError(f"log scale needs low > 0, got low={low}")
    if log and step is not None:
        raise ValueError("give either log or step, not both")


ParamSpec = Annotated[FloatParam | IntParam | ChoiceParam, Field(discriminator="type")]

_SPECS: dict[str, type[_Spec]] = {"float": FloatParam, "int": IntParam, "choice": ChoiceParam}


@functools.cache
def _spec_adapter() -> TypeAdapter[Any]:
    """Built at the first use: a run that reads only experiment files never needs it."""
    return TypeAdapter(ParamSpec)


def _spec_form(parameter: Any) -> Any:
    """A typed parameter (or a spec model) as the mapping `space:` would hold; anything else
    as it is, for the spec model to accept or refuse."""
    if isinstance(parameter, Float | Int):
        kind = "float" if isinstance(parameter, Float) else "int"
        low, high, log, step = parameter.low, parameter.high, parameter.log, parameter.step
        return {"type": kind, "low": low, "high": high, "log": log, "step": step}
    if isinstance(parameter, Choice):
        values = parameter.values
        return {
            "type": "choice",
            "values": list(values) if isinstance(values, tuple | list) else values,
        }
    if isinstance(parameter, _Spec):
        return parameter.model_dump()
    return parameter


def _parse(parameter: Any, where: str) -> Parameter:
    """One parameter in any form an algorithm takes, checked by the experiment file's rules;
    a wrong one is one ArgumentError line starting at `where` (e.g. `space.lr`)."""
    form = _spec_form(parameter)
    if not isinstance(form, Mapping):
        raise ArgumentError(
            f"{where}: expected Float, Int, Choice or a mapping such as "
            f"{{'type': 'float', 'low': 0.001, 'high': 0.1}}, got {type(parameter).__name__}"
        )
    try:
        spec = _spec_adapter().validate_python(dict(form))
    except ValidationError as err:
        raise ArgumentError(_one_line(err, where, form)) from None
    return spec.to_parameter()


def _one_line(err: ValidationError, where: str, form: Mapping[str, Any]) -> str:
    """The first problem of a parameter spec as `<where>.<key>: <what>`."""
    first = err.errors()[0]
    loc = [str(part) for part in first["loc"]]
    tag = loc.pop(0) if loc and loc[0] in _SPECS else None
    path = ".".join([where, *loc])
    kind, expected = first["type"], ", ".join(_SPECS)
    if kind == "union_tag_not_found":
        return f"{where}.type: missing required key (one of: {expected})"
    if kind == "union_tag_invalid":
        return f"{where}.type: unknown type {form.get('type')!r} (expected one of: {expected})"
    if kind == "extra_forbidden":
        fields = list(_SPECS[tag].model_fields) if tag else []
        return f"{path}: unknown key (expected one of: {', '.join(fields)})"
    if kind == "missing":
        return f"{path}: missing required key"
    msg = first["msg"].removeprefix("Value error, ")
    return f"{path}: {msg}" if kind == "value_error" else f"{path}: {msg}, got {first['input']!r}"


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _count(grid: range) -> int:
    """How many integers `grid` holds: `len` overflows on more than 2**63 of them (an int
    parameter whose bounds a user set that far apart), its bounds do not."""
    return max(0, (grid.stop - grid.start + grid.step - 1) // grid.step)


def _grid_quantile(grid: range) -> Callable[[float], int]:
    count = _count(grid)
    return lambda u: grid[min(int(u * count), count - 1)]


class SearchSpace(Mapping[str, Parameter]):
    """An ordered mapping of names to parameters; the order fixes sampling and grid order."""

    @classmethod
    def coerce(cls, space: Any, name: str = "space") -> SearchSpace:
        """`space` as a SearchSpace, from what a user writes: a SearchSpace, a mapping in the
        experiment file's `space:` form (`{"lr": {"type": "float", "low": 1e-4, "high": 1.0}}`),
        or of typed parameters (`{"lr": Float(1e-4, 1.0, log=True)}`), the forms mixed freely.

        Every parameter is checked by the experiment file's rules, so a wrong one fails here in
        one ArgumentError line naming `name` and the key, not at the first draw. A SearchSpace
        that passes comes back as it is.
        """
        if isinstance(space, SearchSpace):
            for key, parameter in space.items():
                _parse(parameter, f"{name}.{key}")
            return space
        if not isinstance(space, Mapping):
            raise ArgumentError(
                f"{name}: expected a SearchSpace or a mapping of parameter names to parameters, "
                f"got {type(space).__name__}"
            )
        if not space:
            raise ArgumentError(f"{name}: the search space is empty")
        parameters: dict[str, Parameter] = {}
        for key, parameter in space.items():
            if not isinstance(key, str):
                raise ArgumentError(f"{name}: parameter names must be strings, got {key!r}")
            parameters[key] = _parse(parameter, f"{name}.{key}")
        return cls(parameters)

    def __init__(self, parameters: Mapping[str, Parameter]):
        if not parameters:
            raise ExperimentError("the search space is empty")
        self._parameters = dict(parameters)
        # (name, quantile function) in order, made at the first draw: a configuration is one
        # uniform per parameter mapped through these (not pickled: see __reduce__).
        self._quantiles: tuple[tuple[str, Callable[[float], Any]], ...] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return SearchSpace, (self._parameters,)

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
        return self.from_units(rng.random(len(self._parameters)).tolist())

    def from_units(self, units: Sequence[float]) -> Config:
        """The configuration at quantiles `units` (one in [0, 1) per parameter, in order)."""
        quantiles = self._quantiles or self._make_quantiles()
        return {name: quantile(u) for (name, quantile), u in zip(quantiles, units, strict=True)}

    def from_unit_rows(self, units: Sequence[float]) -> list[Config]:
        """`from_units` of each consecutive row of len(self) quantiles in `units`, mapped a
        parameter (a column) at a time: for drawing configurations many at once."""
        quantiles = self._quantiles or self._make_quantiles()
        width = len(quantiles)
        if len(units) % width:
            raise ValueError(f"{len(units)} quantiles are not rows of {width}")
        names = [name for name, _ in quantiles]
        columns = [list(map(q, units[j::width])) for j, (_, q) in enumerate(quantiles)]
        return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]

    def _make_quantiles(self) -> tuple[tuple[str, Callable[[float], Any]], ...]:
        self._quantiles = tuple((name, p.quantile()) for name, p in self._parameters.items())
        return self._quantiles

    @property
    def size(self) -> float:
        """pS = |Φ|: the number of distinct configurations, `math.inf` if any parameter is real."""
        return math.prod(p.size for p in self._parameters.values())

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.size)

    def grid(self) -> Iterator[Config]:
        """Every configuration, the last parameter varying fastest; an infinite space fails at
        the call (a grid sampler is refused when built), not at the first configuration."""
        infinite = [n for n, p in self._parameters.items() if not math.isfinite(p.size)]
        if infinite:
            raise ExperimentError(
                f"grid sampling needs finite parameters; give `step` or use `choice` for: "
                f"{', '.join(infinite)}"
            )
        return self._grid()

    def _grid(self) -> Iterator[Config]:
        names = list(self._parameters)
        for values in itertools.product(*(self._parameters[n].grid() for n in names)):
            yield dict(zip(names, values, strict=True))


#: What the algorithms and samplers take as their space: see `SearchSpace.coerce`.
SpaceLike = SearchSpace | Mapping[str, Any]
