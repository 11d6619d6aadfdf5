"""The reporter: a trial's script tells Basht each epoch's metrics and hears what to do next.

Basht starts a command trial with these in its environment:

- `BASHT_CONFIG`: a JSON file with the trial's configuration;
- `BASHT_REPORT_FD` and `BASHT_DECISION_FD`: two pipe ends. `report(step, **metrics)` writes one
  line of JSON (`{"step": 3, "metrics": {"accuracy": 0.91}}`) to the first and reads the answer,
  one word on a line, from the second;
- `BASHT_CHECKPOINT_DIR`: where the script keeps its state when it is told to pause, and
  `BASHT_RESUME_FROM`: the folder of the state to continue from, when it is resumed.

Any program can speak this without Basht installed (a line of JSON out, a word in). Outside a
trial (none of these set) `report` does nothing and answers `continue`, so the same script runs
on its own.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import os
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

CONFIG_ENV = "BASHT_CONFIG"
REPORT_FD_ENV = "BASHT_REPORT_FD"
DECISION_FD_ENV = "BASHT_DECISION_FD"
CHECKPOINT_DIR_ENV = "BASHT_CHECKPOINT_DIR"
RESUME_FROM_ENV = "BASHT_RESUME_FROM"


class Decision(enum.StrEnum):
    """What the script does after a report."""

    CONTINUE = "continue"
    """Train on."""
    STOP = "stop"
    """End now; nothing needs saving (the trial was stopped early, or its budget is done)."""
    PAUSE = "pause"
    """Save the state into `checkpoint_dir()`, then end: the trial may be resumed later from it."""


class _Channel:
    """The two pipe ends of this process's trial, opened once."""

    def __init__(self) -> None:
        self.out: IO[str] | None = None
        self.into: IO[str] | None = None
        report_fd, decision_fd = os.environ.get(REPORT_FD_ENV), os.environ.get(DECISION_FD_ENV)
        if report_fd and decision_fd:
            self.out = os.fdopen(int(report_fd), "w", buffering=1, encoding="utf-8")
            self.into = os.fdopen(int(decision_fd), "r", encoding="utf-8")


_channel: _Channel | None = None


def _opened() -> _Channel:
    global _channel
    if _channel is None:
        _channel = _Channel()
    return _channel


def in_trial() -> bool:
    """Whether this process runs as a Basht trial that reports through the pipes."""
    return bool(os.environ.get(REPORT_FD_ENV) and os.environ.get(DECISION_FD_ENV))


def report(step: int | None = None, **metrics: float) -> Decision:
    """Report one epoch's (or round's, or evaluation's) metrics; returns what to do next.

    `step` counts from 1 (epochs done); by default, one more than the last report's. Outside a
    trial this does nothing and returns `Decision.CONTINUE`. When Basht is gone (its worker was
    killed), the answer is `Decision.STOP`.
    """
    channel = _opened()
    if channel.out is None or channel.into is None:
        return Decision.CONTINUE
    line = {"step": step, "metrics": {k: _number(k, v) for k, v in metrics.items()}}
    try:
        channel.out.write(json.dumps(line) + "\n")
        answer = channel.into.readline().strip()
    except (BrokenPipeError, OSError):
        return Decision.STOP
    try:
        return Decision(answer)
    except ValueError:
        return Decision.STOP  # EOF (""): the trial is over


def config() -> dict[str, Any]:
    """The trial's configuration (empty outside a trial)."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return {}
    return json.loads(Path(path).read_text(encoding="utf-8"))


def checkpoint_dir() -> Path | None:
    """Where to save the state when told to pause (None outside a trial that may pause)."""
    path = os.environ.get(CHECKPOINT_DIR_ENV)
    return Path(path) if path else None


def pause_folder() -> Path | None:
    """The folder to save into now that the trial was told to pause, made if needed; None (and
    a warning: training just stops) for a trial that was given none."""
    folder = checkpoint_dir()
    if folder is None:
        log.warning("told to pause, but this trial has no checkpoint folder: training stops")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def resume_from() -> Path | None:
    """The folder of the state to continue from (None unless this trial is resumed)."""
    path = os.environ.get(RESUME_FROM_ENV)
    return Path(path) if path else None


def _number(name: str, value: Any) -> float | None:
    """A metric as a JSON number (NaN and infinities as null: JSON has neither)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"report: metric {name!r} must be a number, got {value!r}") from None
    return number if math.isfinite(number) else None
