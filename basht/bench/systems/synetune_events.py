"""What Syne Tune's tuning loop tells Basht, on the driver: results, ends, and when the job stops.

Syne Tune's `Tuner` polls its backend for what the trials printed, hands each new result to the
scheduler, stops the trials the scheduler stops by killing their processes, and notes those that
ended by themselves. Each of these is heard where it happens, in the loop's own order:

- every result the backend read (`RecorderCallback.on_fetch_status_results`) is a Basht report,
  before the scheduler decides on it: a trial goes on training while its result waits for the
  loop's next look, so it may have reported an epoch past the one it is stopped on, and that
  epoch was trained (Syne Tune hides the results of a trial once it has stopped it);
- a kill (`RecordingBackend._stop_trial`) ends the trial: stopped, or completed if it had said so;
- a process that exited 0 completed (`on_trial_complete`); one that failed is told to the
  scheduler (`LimitedScheduler.on_trial_error`), with the reason the trial wrote.

`LimitedScheduler` also holds Syne Tune's scheduler to `max_trials`: it suggests no more once that
many trials started, so, as natively, the started trials run to their end (Syne Tune's
`StoppingCriterion(max_num_trials_started=N)` ends the loop at once, killing them).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from syne_tune.backend import LocalBackend
from syne_tune.backend.trial_status import Status, Trial
from syne_tune.optimizer.scheduler import TrialScheduler, TrialSuggestion
from syne_tune.stopping_criterion import StoppingCriterion
from syne_tune.tuner_callback import TunerCallback
from syne_tune.tuner_logger import TunerLogger
from syne_tune.tuning_status import TuningStatus

from basht.bench.systems.messages import Reported, Started
from basht.bench.systems.recorder import TrialRecorder
from basht.bench.systems.synetune_map import EPOCH, SpaceCodec
from basht.bench.systems.synetune_worker import ERROR_FILE, METRICS, TRAIN_S, VALIDATE_S
from basht.states import TrialState


class Bookkeeper:
    """Turns Syne Tune's word on its trials into the recorder's records."""

    def __init__(self, recorder: TrialRecorder, codec: SpaceCodec):
        self.recorder, self.codec = recorder, codec
        self.backend: RecordingBackend | None = None

    def result(self, trial_id: int, result: dict[str, Any]) -> None:
        number = self.recorder.number_of(trial_id)
        if number is None or METRICS not in result:
            return
        self.recorder.report(
            Reported(
                number,
                int(result[EPOCH]),
                dict(result[METRICS]),
                float(result[TRAIN_S]),
                float(result[VALIDATE_S]),
            )
        )

    def ended(self, trial: Trial, status: str) -> None:
        """The trial's process is gone: exited (`status` completed or failed) or killed."""
        number = self.recorder.number_of(trial.trial_id)
        if status == Status.failed:
            error = self.failure(trial.trial_id)
            if number is None:  # it failed before it could announce itself
                config = self.codec.basht_config(trial.config)
                started = Started(trial.trial_id, config, 0, time.time(), trial.trial_id)
                self.recorder.failed_before_start(started, error)
            else:
                self.recorder.end(number, TrialState.FAILED, time.time(), error=error)
            return
        if number is None:
            return
        completed = status == Status.completed or self.recorder.is_completing(number)
        state = TrialState.COMPLETED if completed else TrialState.STOPPED
        self.recorder.end(number, state, time.time())

    def failure(self, trial_id: int) -> str:
        """Why a trial's process failed: the reason it wrote, or its last line on stderr."""
        assert self.backend is not None
        folder = self.backend.trial_path(trial_id)
        with contextlib.suppress(OSError):
            return (folder / ERROR_FILE).read_text().strip()[:2000]
        with contextlib.suppress(OSError):
            lines = [line.strip() for line in self.backend.stderr(trial_id) if line.strip()]
            if lines:
                return lines[-1][:2000]
        code = self.backend.exit_code(trial_id)
        return f"the Syne Tune trial process exited with code {code}"

    def settle(self) -> None:
        """After the loop: the trials it ended without a word to the scheduler. Results they
        printed that the loop had not read yet are recorded (Syne Tune hides those of a trial it
        stopped), then each ends as its process did."""
        assert self.backend is not None
        backend = self.backend
        open_ids = [
            trial_id
            for trial_id in backend.trial_ids
            if (number := self.recorder.number_of(trial_id)) is not None
            and self.recorder.state_of(number) == TrialState.RUNNING
        ]
        if not open_ids:
            return
        statuses, results = backend.fetch_status_results(open_ids)
        for trial_id, result in results:
            self.result(trial_id, result)
        for trial, status in statuses.values():
            self.ended(trial, status)


class RecordingBackend(LocalBackend):
    """Syne Tune's LocalBackend, which tells the bookkeeper each trial it kills, once the
    process is gone (so its worker slot is free before the next trial starts on it)."""

    def __init__(self, entry_point: str, keeper: Bookkeeper):
        super().__init__(
            entry_point=entry_point,
            pass_args_as_json=True,  # the configuration in a file, not split on spaces
            rotate_gpus=False,  # trials train on CPU; no probing for GPUs
        )
        self.keeper = keeper
        keeper.backend = self
        self.ending = False

    def _schedule(self, trial_id: int, config: dict[str, Any]) -> None:
        # SIGINT blocked while the process starts: the mask survives fork and exec, so Ctrl-C
        # (which reaches the whole process group) is the driver's, who ends its trials itself,
        # and never kills a trial with a traceback while it imports.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super()._schedule(trial_id, config)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _stop_trial(self, trial_id: int, result: dict | None) -> None:
        super()._stop_trial(trial_id, result)
        self._reap(trial_id)
        if not self.ending:  # the loop's end: `Bookkeeper.settle` or the abort records them
            self.keeper.ended(self._trial_dict[trial_id], Status.stopped)

    def stop_all(self) -> None:
        self.ending = True
        super().stop_all()

    def _read_status(self, trial_id: int) -> str:
        if trial_id not in self.trial_subprocess:  # its process could not even be started
            return Status.failed
        return super()._read_status(trial_id)

    def exit_code(self, trial_id: int) -> int | None:
        process = self.trial_subprocess.get(trial_id)
        return None if process is None else process.poll()

    def _reap(self, trial_id: int) -> None:
        process = self.trial_subprocess.get(trial_id)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)

    def end_all(self) -> None:
        """Every trial process killed and waited for: nothing of the run is left running."""
        for process in self.trial_subprocess.values():
            if process.poll() is None:
                with contextlib.suppress(OSError):
                    process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)


class LimitedScheduler(TrialScheduler):
    """Syne Tune's scheduler, suggesting at most `limit` trials, and telling failures on."""

    def __init__(self, inner: TrialScheduler, limit: int | None, keeper: Bookkeeper):
        super().__init__(random_seed=inner.random_seed)
        self.inner, self.limit, self.keeper = inner, limit, keeper
        self.suggested = 0

    def suggest(self) -> TrialSuggestion | None:
        if self.limit is not None and self.suggested >= self.limit:
            return None  # the Tuner then waits for the running trials, and ends
        suggestion = self.inner.suggest()
        if suggestion is not None:
            self.suggested += 1
        return suggestion

    def on_trial_add(self, trial: Trial) -> None:
        self.inner.on_trial_add(trial)

    def on_trial_error(self, trial: Trial) -> None:
        self.inner.on_trial_error(trial)
        self.keeper.ended(trial, Status.failed)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> str:
        return self.inner.on_trial_result(trial, result)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]) -> None:
        self.inner.on_trial_complete(trial, result)

    def on_trial_remove(self, trial: Trial) -> None:
        self.inner.on_trial_remove(trial)

    def metric_names(self) -> list[str]:
        return self.inner.metric_names()

    def metric_mode(self) -> str:
        return self.inner.metric_mode()

    def metadata(self) -> dict[str, Any]:
        return self.inner.metadata()


class RecorderCallback(TunerCallback):
    """Results as the backend read them, completions, and live progress after each loop."""

    def __init__(self, keeper: Bookkeeper, on_update: Callable[[Any], None] | None):
        self.keeper, self.on_update = keeper, on_update

    def on_fetch_status_results(self, trial_status_dict: dict, new_results: list) -> None:
        for trial_id, result in new_results:
            self.keeper.result(trial_id, result)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any]) -> None:
        self.keeper.ended(trial, Status.completed)

    def on_loop_end(self) -> None:
        if self.on_update is not None:
            self.on_update(self.keeper.recorder.status)


class JobStop:
    """The Tuner's stop criterion: Basht's limits (the target, the energy, carbon and cost
    budgets), and `time_budget_s` as Syne Tune's own `max_wallclock_time`."""

    def __init__(self, recorder: TrialRecorder, time_budget_s: float | None):
        self.recorder, self.time_budget_s = recorder, time_budget_s
        self.wallclock = (
            StoppingCriterion(max_wallclock_time=time_budget_s) if time_budget_s else None
        )

    def __call__(self, status: TuningStatus) -> bool:
        if self.recorder.check_limits():
            return True
        if self.wallclock is not None and self.wallclock(status):
            self.recorder.stop(f"time budget of {self.time_budget_s:g} s used")
            return True
        return False


class QuietLogger(TunerLogger):
    """Syne Tune's console output, silenced: Basht's progress and tables say what happened."""


def _silent(*args: Any, **kwargs: Any) -> None:
    return None


for _name in dir(TunerLogger):
    if _name.startswith("print_"):
        setattr(QuietLogger, _name, staticmethod(_silent))
