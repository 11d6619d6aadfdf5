"""A search space in Optuna's terms: its `suggest_*` calls, and a configuration as its params.

The Optuna system under test draws through these, and so does the native `tpe` sampler, which
uses Optuna's TPE as its model.
"""

from __future__ import annotations

import json
from typing import Any

from basht.space import Choice, Float, Int, SearchSpace

_PRIMITIVE = (str, int, float, bool, type(None))


def encode(value: Any) -> Any:
    """Optuna's categorical choices must be None, bool, int, float or str: lists go as JSON."""
    return value if isinstance(value, _PRIMITIVE) else json.dumps(value)


def decode(value: Any, choices: list[Any]) -> Any:
    for choice in choices:
        if encode(choice) == value:
            return choice
    return value


def choices_of(parameter: Float | Int | Choice) -> list[Any]:
    return parameter.grid()


def suggest(trial: Any, space: SearchSpace, grid: bool = False) -> dict[str, Any]:
    """A configuration drawn through Optuna's trial, in the space's order and Basht's values.

    A grid suggests every parameter as a categorical of Basht's own grid values, which is what
    Optuna's GridSampler needs; otherwise each parameter maps to its natural `suggest_*`.
    """
    config: dict[str, Any] = {}
    for name, p in space.items():
        if grid or isinstance(p, Choice):
            choices = choices_of(p)
            config[name] = decode(
                trial.suggest_categorical(name, [encode(c) for c in choices]), choices
            )
        elif isinstance(p, Float):
            if p.step is not None:
                top = p.grid()[-1]  # Optuna wants high - low to be a multiple of step
                value = trial.suggest_float(name, p.low, top, step=p.step)
                config[name] = round(value, 12)
            else:
                config[name] = trial.suggest_float(name, p.low, p.high, log=p.log)
        else:
            config[name] = trial.suggest_int(name, p.low, p.high, log=p.log, step=p.step or 1)
    return config


def params(config: dict[str, Any], space: SearchSpace) -> dict[str, Any]:
    """`config` as the params Optuna keeps for the trial that `suggest` drew it in."""
    return {
        name: encode(config[name]) if isinstance(p, Choice) else config[name]
        for name, p in space.items()
    }
