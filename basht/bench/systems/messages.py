"""What a peer framework's trial processes tell the driver; small frozen messages, one per event."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Started:
    """A trial (or a resumed segment of one) begins in process `pid`; answered with `Assigned`.

    `key` is the framework's own id for the trial (Optuna's number, Ray's trial id); `number` is
    given where the framework numbers trials itself, `slot` where the process is a fixed worker.
    """

    key: Any
    config: dict[str, Any]
    pid: int
    at: float
    number: int | None = None
    slot: int | None = None


@dataclass(frozen=True)
class Assigned:
    """The Basht trial number and its seed (`basht.tune.trial_seed`)."""

    number: int
    seed: int


@dataclass(frozen=True)
class Loaded:
    number: int
    load_s: float


@dataclass(frozen=True)
class Reported:
    number: int
    epoch: int
    metrics: dict[str, float] = field(default_factory=dict)
    train_s: float = 0.0
    validate_s: float = 0.0


@dataclass(frozen=True)
class Completing:
    """The trial completes at `epoch` with `value` (its budget is done, or it reached the target).

    Answered with where to save its final state, or None: as native, only a trial that may be the
    best completed one keeps it. The driver notes the completion, so the framework's later word
    that the trial ended (Ray's callbacks cannot tell completed from stopped) is read right.
    """

    number: int
    epoch: int
    value: float


@dataclass(frozen=True)
class Scoring:
    """A trial of a multi-objective study asks for its last report's metrics, with what the
    driver measured of it (`train_energy_kwh`...), to tell the study its objectives."""

    number: int


@dataclass(frozen=True)
class Ended:
    """The trial left its process: completed, stopped or failed (with its one-line reason)."""

    number: int
    state: str
    at: float
    error: str | None = None
    checkpoint: str | None = None
