"""The ask/tell contract between a tuning algorithm and whatever runs its trials."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from basht.states import Decision

__all__ = ["Algorithm", "Decision", "Suggestion", "better"]


@dataclass(frozen=True)
class Suggestion:
    """Run `config` until `budget` (epochs done, counted from zero); resume from a pause if `resume`."""

    trial_id: int
    config: dict[str, Any]
    budget: int
    resume: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


class Algorithm(Protocol):
    """A tuning algorithm behind ask/tell. It never sees how or where trials run.

    One that pauses trials at rungs may also offer `next_promotion() -> int | None`: the trial
    its next `suggest` would resume, asked without promoting it. The Tuner then keeps that trial
    running as it reaches its rung instead of pausing it (`Tuner._promote_in_place`).
    """

    metric: str
    mode: str

    def suggest(self) -> Suggestion | None:
        """The next trial to start or resume; None when nothing can start now (or ever)."""

    def report(self, trial_id: int, budget: int, value: float) -> Decision:
        """A result after `budget` units of training; the answer says whether to go on."""

    def complete(self, trial_id: int) -> None:
        """The trial reached its suggested budget and finished."""

    def fail(self, trial_id: int) -> None:
        """The trial crashed; it is never resumed."""

    def is_finished(self) -> bool:
        """True once no trial will ever be suggested again."""


def better(a: float, b: float | None, mode: str) -> bool:
    """Whether `a` beats `b` under `mode`; anything beats None."""
    if b is None:
        return True
    return a > b if mode == "max" else a < b
