"""The Tuner: asks the algorithm, hands suggestions to an executor, and returns the reports.

Algorithms never see the executor and the executor never sees the algorithm (Fluid's split): this
loop is the only place that knows both, and the only place that writes trial records.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from basht.engine.messages import (
    COMPLETE,
    CONTINUE,
    PAUSE,
    STOP,
    TrialEvent,
    TrialTask,
    WorkloadRef,
)
from basht.store import Store
from basht.tune.base import Algorithm, Decision, Suggestion, better

log = logging.getLogger(__name__)


class Executor(Protocol):
    """What the Tuner needs from an engine (local processes, Ray actors, a virtual clock)."""

    @property
    def idle_workers(self) -> int: ...

    def submit(self, task: TrialTask) -> int: ...

    def command(self, trial_id: int, command: str, path: str | None = None) -> None: ...

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]: ...


@dataclass
class TunerStatus:
    """A snapshot for live progress: counts by state, the best so far, the time spent."""

    counts: Counter[str] = field(default_factory=Counter)
    best_value: float | None = None
    best_trial: int | None = None
    best_config: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


@dataclass
class _Trial:
    row_id: int
    config: dict[str, Any]
    target_budget: int
    seed: int
    budget: int = 0
    value: float | None = None
    checkpoint: str | None = None
    final_checkpoint: str | None = None
    state: str = "pending"
    failure: str | None = None


def trial_seed(experiment_seed: int, trial_id: int) -> int:
    """Independent, reproducible per-trial seeds from the experiment seed."""
    return int(np.random.SeedSequence([experiment_seed, trial_id]).generate_state(1)[0])


class Tuner:
    """Runs one algorithm on one executor until the algorithm is done or a limit is hit."""

    def __init__(
        self,
        algorithm: Algorithm,
        executor: Executor,
        store: Store,
        run_id: str,
        workload: WorkloadRef,
        *,
        checkpoint_dir: Path,
        can_checkpoint: bool = True,
        target: float | None = None,
        time_budget_s: float | None = None,
        on_update: Callable[[TunerStatus], None] | None = None,
    ):
        self.algorithm, self.executor, self.store, self.run_id = algorithm, executor, store, run_id
        self.workload = workload
        self.metric, self.mode = algorithm.metric, algorithm.mode
        self.checkpoint_dir = checkpoint_dir
        self.can_checkpoint = can_checkpoint
        self.target, self.time_budget_s = target, time_budget_s
        self.on_update = on_update
        self.status = TunerStatus()
        self.trials: dict[int, _Trial] = {}
        self._best_completed: tuple[float, int] | None = None
        self._running: set[int] = set()

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> TunerStatus:
        try:
            while True:
                self._check_limits()
                self._fill_idle_workers()
                if not self._running:
                    break
                for event in self.executor.poll(0.5):
                    self._handle(event)
                self._notify()
        except BaseException:
            self._abort_running()
            raise
        self._notify()
        return self.status

    def _fill_idle_workers(self) -> None:
        while self.status.stop_reason is None and self.executor.idle_workers > 0:
            suggestion = self.algorithm.suggest()
            if suggestion is None:
                return
            self._start(suggestion)

    def _start(self, s: Suggestion) -> None:
        now = time.time()
        trial = self.trials.get(s.trial_id)
        if trial is None:
            seed = trial_seed(self.workload.experiment_seed, s.trial_id)
            row_id = self.store.add_trial(
                self.run_id, s.trial_id, s.config, s.budget, state="running", started_at=now
            )
            trial = self.trials[s.trial_id] = _Trial(row_id, dict(s.config), s.budget, seed)
        elif not s.resume:
            raise RuntimeError(f"trial {s.trial_id} suggested twice without resume")
        trial.target_budget, trial.state = s.budget, "running"
        task = TrialTask(
            trial_id=s.trial_id,
            config=trial.config,
            workload=self.workload,
            seed=trial.seed,
            target_budget=s.budget,
            start_epoch=trial.budget if s.resume else 0,
            resume_from=trial.checkpoint if s.resume else None,
        )
        worker = self.executor.submit(task)
        self._running.add(s.trial_id)
        self.store.update_trial(
            trial.row_id, state="running", worker=worker, target_budget=s.budget, ended_at=None
        )
        self.status.counts["running"] += 1

    # -- events -----------------------------------------------------------------------------

    def _handle(self, event: TrialEvent) -> None:
        trial = self.trials[event.trial_id]
        if event.kind == "loaded":
            self.store.add_trial_time(trial.row_id, load_s=event.load_s)
        elif event.kind == "report":
            self._on_report(event, trial)
        elif event.kind in ("completed", "paused", "stopped", "failed"):
            self._on_end(event, trial)

    def _on_report(self, event: TrialEvent, trial: _Trial) -> None:
        value = event.metrics.get(self.metric)
        trial.budget = event.epoch
        self.store.add_report(
            trial.row_id, event.epoch, value, event.metrics, event.train_s, event.validate_s
        )
        if value is None or not np.isfinite(value):
            got = ", ".join(event.metrics) or "nothing"
            trial.failure = (
                f"metric {self.metric!r} missing or not finite in the report (got: {got})"
            )
            self.executor.command(event.trial_id, STOP)
            return
        trial.value = value
        if self.status.stop_reason is not None and not self._is_target(value):
            self.executor.command(event.trial_id, STOP)
            return
        decision = self.algorithm.report(event.trial_id, event.epoch, value)
        if self._is_target(value):
            self.status.stop_reason = self.status.stop_reason or f"target {self.target} reached"
            self._complete(event.trial_id, trial)
            return
        if decision is Decision.PAUSE and not self.can_checkpoint:
            decision = Decision.STOP  # a workload without checkpoints cannot be resumed
        if decision is Decision.STOP:
            self.executor.command(event.trial_id, STOP)
        elif decision is Decision.PAUSE:
            path = self._checkpoint_path(event.trial_id, event.epoch)
            self.executor.command(event.trial_id, PAUSE, path)
        elif event.epoch >= trial.target_budget:
            self._complete(event.trial_id, trial)
        else:
            self.executor.command(event.trial_id, CONTINUE)

    def _complete(self, trial_id: int, trial: _Trial) -> None:
        """Finish a trial; keep its final state only while it is the best completed one."""
        assert trial.value is not None
        keep = self.can_checkpoint and (
            self._best_completed is None or better(trial.value, self._best_completed[0], self.mode)
        )
        path = self._checkpoint_path(trial_id, trial.budget, final=True) if keep else None
        self.executor.command(trial_id, COMPLETE, path)

    def _on_end(self, event: TrialEvent, trial: _Trial) -> None:
        self._running.discard(event.trial_id)
        self.status.counts["running"] -= 1
        state = event.kind
        if trial.failure is not None:
            state, error = "failed", trial.failure
        else:
            error = event.error
        values: dict[str, Any] = {
            "state": state,
            "ended_at": event.at or time.time(),
            "error": error,
        }
        if event.kind == "paused" and event.path:
            self._replace_checkpoint(trial, event.path, "pause")
        if event.kind == "completed":
            self.algorithm.complete(event.trial_id)
            if event.path:
                self._keep_best_final(event.trial_id, trial, event.path)
            self._update_best(event.trial_id, trial)
        elif state == "failed":
            self.algorithm.fail(event.trial_id)
            log.warning("trial %d failed: %s", event.trial_id, error)
        if state in ("stopped", "failed") and trial.checkpoint:
            self._delete_checkpoint(trial.checkpoint)  # never resumed: free the disk
            trial.checkpoint = None
        trial.state = state
        self.store.update_trial(trial.row_id, **values)
        self.status.counts[state] += 1

    def _update_best(self, trial_id: int, trial: _Trial) -> None:
        if trial.value is not None and better(trial.value, self.status.best_value, self.mode):
            self.status.best_value, self.status.best_trial = trial.value, trial_id
            self.status.best_config = trial.config
        if trial.value is not None and (
            self._best_completed is None or better(trial.value, self._best_completed[0], self.mode)
        ):
            self._best_completed = (trial.value, trial_id)

    def _is_target(self, value: float) -> bool:
        if self.target is None:
            return False
        return value >= self.target if self.mode == "max" else value <= self.target

    def _check_limits(self) -> None:
        budget = self.time_budget_s
        if (
            self.status.stop_reason is None
            and budget is not None
            and self.status.elapsed_s >= budget
        ):
            self.status.stop_reason = f"time budget of {budget:g} s used"

    def _abort_running(self) -> None:
        """Ctrl-C or a crash of the loop: what was running is recorded as aborted, the rest kept."""
        now = time.time()
        for trial_id in list(self._running):
            trial = self.trials[trial_id]
            trial.state = "aborted"
            self.store.update_trial(trial.row_id, state="aborted", ended_at=now)
        self._running.clear()

    def _notify(self) -> None:
        if self.on_update is not None:
            self.on_update(self.status)

    # -- checkpoints ------------------------------------------------------------------------

    def _checkpoint_path(self, trial_id: int, epoch: int, final: bool = False) -> str:
        kind = "final" if final else "pause"
        return str(self.checkpoint_dir / f"trial-{trial_id:06d}-{kind}-e{epoch}.pkl")

    def _replace_checkpoint(self, trial: _Trial, path: str, kind: str) -> None:
        if trial.checkpoint and trial.checkpoint != path:
            self._delete_checkpoint(trial.checkpoint)
        trial.checkpoint = path
        self.store.add_checkpoint(trial.row_id, trial.budget, path, kind)

    def _keep_best_final(self, trial_id: int, trial: _Trial, path: str) -> None:
        previous = self._best_completed
        if trial.checkpoint:
            self._delete_checkpoint(trial.checkpoint)
            trial.checkpoint = None
        trial.final_checkpoint = path
        self.store.add_checkpoint(trial.row_id, trial.budget, path, "final")
        if previous is not None and previous[1] != trial_id:
            old = self.trials[previous[1]]
            if old.final_checkpoint:
                self._delete_checkpoint(old.final_checkpoint)
                old.final_checkpoint = None

    def _delete_checkpoint(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)
        self.store.mark_checkpoint_deleted(path)

    def best_trial(self) -> _Trial | None:
        if self._best_completed is not None:
            return self.trials[self._best_completed[1]]
        scored = [t for t in self.trials.values() if t.value is not None]
        if not scored:
            return None
        pick = max if self.mode == "max" else min
        return pick(scored, key=lambda t: t.value)
