"""What the Tune loop tells Basht, on the driver: results, ends, pauses, and when to stop the job.

Results and ends come through a Tune `Callback`, in the order Tune processes them; a pause has no
callback of its own, so each loop step polls the trials' statuses for RUNNING -> PAUSED (the
recorder asks for the same poll when a trial starts and every slot still looks busy).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune

from basht.bench.systems.messages import Loaded, Reported, Started
from basht.bench.systems.raytune_map import basht_config, trial_number
from basht.bench.systems.raytune_trainable import EPOCH, LOAD_S, METRICS, TRAIN_S, VALIDATE_S
from basht.bench.systems.recorder import TrialRecorder
from basht.states import TrialState

# Tune pickles its callbacks and stoppers with the experiment (for `Tuner.restore`); the recorder
# holds the store and locks, so they carry a key to it instead.
_RECORDERS: dict[str, TrialRecorder] = {}


def register(key: str, recorder: TrialRecorder) -> None:
    _RECORDERS[key] = recorder


def unregister(key: str) -> None:
    _RECORDERS.pop(key, None)


class _UsesRecorder:
    """Holds its recorder by key, so Tune can pickle it."""

    def __init__(self, key: str):
        self.key = key

    @property
    def recorder(self) -> TrialRecorder:
        return _RECORDERS[self.key]


def error_of(trial: Any) -> str:
    """A failed Tune trial's reason in one line: the workload's exception, not Ray's wrapper."""
    with contextlib.suppress(Exception):
        err = trial.get_pickled_error()
        if err is not None:
            cause = getattr(err, "cause", None) or err
            return " ".join(f"{type(cause).__name__}: {cause}".split())[:2000]
    with contextlib.suppress(Exception):
        lines = [line for line in Path(trial.error_file).read_text().splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()[:2000]
    return "the trial failed in Ray (no reason was recorded)"


class RecorderCallback(_UsesRecorder, tune.Callback):
    """Hands Tune's trial events to the recorder and live progress to `on_update`."""

    def __init__(self, key: str, on_update: Callable[[Any], None] | None = None):
        super().__init__(key)
        self.on_update = on_update
        self._trials: list[Any] = []
        self._checkpoints: dict[str, str] = {}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any):
        number = self.recorder.number_of(trial.trial_id)
        if number is None or METRICS not in result:
            return
        if result.get(LOAD_S):
            self.recorder.loaded(Loaded(number, float(result[LOAD_S])))
        self.recorder.report(
            Reported(
                number,
                int(result[EPOCH]),
                dict(result[METRICS]),
                float(result[TRAIN_S]),
                float(result[VALIDATE_S]),
            )
        )

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any):
        number = self.recorder.number_of(trial.trial_id)
        if number is not None:
            state = (
                TrialState.COMPLETED if self.recorder.is_completing(number) else TrialState.STOPPED
            )
            self.recorder.end(number, state, time.time())

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any):
        number = self.recorder.number_of(trial.trial_id)
        if number is None:  # it failed before it could announce itself (e.g. an import error)
            started = Started(
                trial.trial_id,
                basht_config(trial.config),
                0,
                time.time(),
                trial_number(trial.trial_id),
            )
            self.recorder.failed_before_start(started, error_of(trial))
        else:
            self.recorder.end(number, TrialState.FAILED, time.time(), error=error_of(trial))

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info):
        self._checkpoints[trial.trial_id] = checkpoint.path

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "on_update": None, "_trials": [], "_checkpoints": {}}

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._trials = list(trials)
        self.sync()
        if self.on_update is not None:
            self.on_update(self.recorder.status)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Tune's last word on every trial: an end the callbacks above missed is taken from it."""
        self._trials = list(trials)
        self.sync()
        for trial in self._trials:
            number = self.recorder.number_of(trial.trial_id)
            if number is None or self.recorder.state_of(number) != TrialState.RUNNING:
                continue
            if trial.status == "ERROR":
                self.recorder.end(number, TrialState.FAILED, time.time(), error=error_of(trial))
            elif trial.status == "TERMINATED":
                state = (
                    TrialState.COMPLETED
                    if self.recorder.is_completing(number)
                    else TrialState.STOPPED
                )
                self.recorder.end(number, state, time.time())

    def sync(self) -> None:
        """Record the pauses Tune made since the last look."""
        for trial in list(self._trials):
            if trial.status != "PAUSED":
                continue
            number = self.recorder.number_of(trial.trial_id)
            if number is not None and self.recorder.state_of(number) == TrialState.RUNNING:
                self.recorder.pause(number, time.time(), self._checkpoints.get(trial.trial_id))


class JobStopper(_UsesRecorder, tune.Stopper):
    """Stops every trial once the job is over: the target reached, or a time, energy or carbon
    budget used."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.recorder.check_limits()
