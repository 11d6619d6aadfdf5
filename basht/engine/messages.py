"""Small typed messages between the driver and the processes that run trials."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from basht.errors import BashtError
from basht.states import Command, EventKind
from basht.workloads.base import WorkloadRef


@dataclass(slots=True)  # not frozen: a frozen init costs 5x, and 1e5-trial simulations make many
class TrialTask:
    """Everything a worker needs to start (or resume) one trial."""

    trial_id: int
    config: dict[str, Any]
    workload: WorkloadRef
    seed: int
    target_budget: int | None = None
    start_epoch: int = 0
    resume_from: str | None = None
    threads: int | None = None  # the width to start at (Fluid); the worker's own count if None
    group: str | None = None  # the trial group it came in (a rung, a bracket, one fill of workers)
    devices: tuple[str, ...] = ()  # accelerator devices to train on (GPU trials), one replica each
    device_share: float = 1.0  # the share of each device, below 1 when trials share a GPU


@dataclass(slots=True)  # treated as immutable; see TrialTask
class TrialEvent:
    """What a worker tells the driver: `kind` says what happened (see `EventKind`)."""

    kind: EventKind
    trial_id: int
    worker: int
    epoch: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    load_s: float = 0.0
    train_s: float = 0.0
    validate_s: float = 0.0
    path: str | None = None
    error: str | None = None
    at: float = 0.0


# The commands the driver sends after a report, by their short names.
CONTINUE, STOP, PAUSE, COMPLETE = Command.CONTINUE, Command.STOP, Command.PAUSE, Command.COMPLETE


def await_test(
    poll: Callable[[float | None], list[TrialEvent]], trial_id: int, timeout_s: float | None
) -> TrialEvent:
    """Poll an executor until the test phase of `trial_id` reports ("tested" or "failed")."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        for event in poll(remaining):
            if event.trial_id == trial_id and event.kind in (EventKind.TESTED, EventKind.FAILED):
                return event
        if deadline is not None and time.monotonic() >= deadline:
            raise BashtError(f"the test phase did not finish within {timeout_s} s")
