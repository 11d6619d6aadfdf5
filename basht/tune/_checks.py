"""Checks of what the algorithms and samplers are built with.

A wrong argument is one `ArgumentError` line naming it, raised when the object is built: never an
AttributeError or TypeError at the first `suggest()`, nor a rung loop that never ends (eta 1).
The space is checked by `SearchSpace.coerce`, through the samplers every algorithm draws from.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from basht.errors import ArgumentError

MODES = ("min", "max")


def check_whole(name: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    """`value` is a whole number (a bool is not) of at least `minimum`, or None if `optional`."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        alternative = " or None" if optional else ""
        raise ArgumentError(
            f"{name}: expected a whole number of at least {minimum}{alternative}, got {value!r}"
        )


def check_mode(mode: Any) -> None:
    if not isinstance(mode, str) or mode not in MODES:
        raise ArgumentError(f"mode: expected 'min' or 'max', got {mode!r}")


def check_objective(metric: Any, mode: Any) -> None:
    """The value the algorithm ranks: a metric's name and the direction it is optimised in."""
    if not isinstance(metric, str) or not metric:
        raise ArgumentError(
            f"metric: expected the name of the reported value (a non-empty string), got {metric!r}"
        )
    check_mode(mode)


def check_budgets(min_budget: Any, max_budget: Any, eta: Any, *, bounded: bool = False) -> None:
    """Rung budgets that reach the top: eta >= 2, 1 <= min_budget <= max_budget. A None
    max_budget (ASHA's rungs without end) is allowed unless `bounded`."""
    check_whole("eta", eta, 2)
    check_whole("min_budget", min_budget, 1)
    if max_budget is None and not bounded:
        return
    if isinstance(max_budget, bool) or not isinstance(max_budget, Integral):
        raise ArgumentError(f"max_budget: expected a whole number, got {max_budget!r}")
    if max_budget < min_budget:
        raise ArgumentError(
            f"max_budget: expected at least min_budget ({min_budget}), got {max_budget!r}"
        )


def check_rates(name: str, rates: Any) -> None:
    """Early-stopping rates s (bracket shapes): a non-empty list of whole numbers from 0."""
    if (
        not isinstance(rates, list | tuple)
        or not rates
        or any(isinstance(s, bool) or not isinstance(s, Integral) or s < 0 for s in rates)
    ):
        raise ArgumentError(
            f"{name}: expected a non-empty list of whole numbers from 0, got {rates!r}"
        )
