"""The store side of a peer framework's trials: what native's Tuner writes, written for them.

Optuna and Ray Tune decide for themselves which trial runs, pauses or stops; their trial
processes report each event here (see `messages`), and this writes the same records native writes
(trial rows, per-epoch reports with train/validate time, load time, end states, the best trial's
final checkpoint) and tells the energy monitor which trial runs in which process, so Table 2's
per-trial energy and every report work for them unchanged. Thread-safe: Ray's events arrive on
the channel's threads and on the Tune loop's.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basht.bench.budgets import SpendingLimits
from basht.bench.lifecycle import RunContext
from basht.bench.scored import TrialMeter, objectives_of
from basht.bench.systems.messages import (
    Assigned,
    Completing,
    Ended,
    Loaded,
    Reported,
    Scoring,
    Started,
)
from basht.states import FINAL_STATES, TrialState
from basht.tune import TunerStatus, trial_seed
from basht.tune.base import better
from basht.tune.tuner import first_reason, time_limit

log = logging.getLogger(__name__)


@dataclass
class _Trial:
    row_id: int
    number: int
    config: dict[str, Any]
    state: str = TrialState.PENDING
    slot: int | None = None
    budget: int = 0
    value: float | None = None
    segment_started: float | None = None
    final_checkpoint: str | None = None
    completing: bool = False
    pending_final: str | None = None
    pause_checkpoints: list[str] = field(default_factory=list)
    loaded: bool = False
    heard: float = 0.0  # time.monotonic() of its last start, load or report
    # Several objectives: its epochs' and loads' seconds, and its last report's metrics
    time_s: float = 0.0
    load_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Slot:
    """A worker slot of the energy monitor: which process runs which trial on it now."""

    pid: int | None = None
    trial: int | None = None
    since: float = 0.0


class TrialRecorder:
    """Turns trial events into store records, live status and energy attribution."""

    def __init__(
        self,
        ctx: RunContext,
        slots: int,
        *,
        can_checkpoint: bool,
        target_budget: int | None,
        reconcile: Callable[[], None] | None = None,
    ):
        """`reconcile`, if given, is asked to report ended segments the framework has not told us
        about yet, when a trial starts and every slot still looks busy."""
        exp = ctx.experiment
        self.ctx, self.store, self.run_id = ctx, ctx.store, ctx.run_id
        self.metric, self.mode, self.target = exp.search.metric, exp.search.mode, exp.search.target
        self.seed = exp.seed
        self.can_checkpoint, self.target_budget = can_checkpoint, target_budget
        self.checkpoint_dir = ctx.results_dir / "checkpoints"
        self.reconcile = reconcile
        self.status = TunerStatus()
        budget_s = exp.search.time_budget_s
        self._limits = [time_limit(self.status, budget_s)] if budget_s is not None else []
        if (spending := SpendingLimits.of(ctx)) is not None:
            self._limits.append(spending)
        self._lock = threading.RLock()
        self._trials: dict[int, _Trial] = {}
        self._numbers: dict[Any, int] = {}
        self._slots = [_Slot() for _ in range(max(1, slots))]
        self._best_completed: tuple[float, int] | None = None
        self._next = 0
        # Several objectives: each report gets what Basht measured of the trial, as native's do.
        objectives = objectives_of(exp)
        self._meter = TrialMeter(ctx, objectives) if objectives is not None else None

    # -- what the trial processes say --------------------------------------------------------

    def handle(self, message: Any) -> Any:
        """Dispatch one message; the answer of a request (`Started`, `Completing`) is returned."""
        if isinstance(message, Reported):
            return self.report(message)
        if isinstance(message, Started):
            return self.start(message)
        if isinstance(message, Loaded):
            return self.loaded(message)
        if isinstance(message, Completing):
            return self.completing(message)
        if isinstance(message, Scoring):
            return self.scoring(message)
        if isinstance(message, Ended):
            return self.end(
                message.number, message.state, message.at, message.error, message.checkpoint
            )
        raise TypeError(f"unexpected message {message!r}")

    def start(self, message: Started) -> Assigned:
        with self._lock:
            number = self._numbers.get(message.key)
            if number is not None and self._trials[number].state in FINAL_STATES:
                # A process the framework started for this trial but then ran it on another
                # (Ray reuses an actor while a new one is still starting) announces it late: the
                # trial has ended and never runs again, so its record and slot stay as they are.
                return Assigned(number, trial_seed(self.seed, number))
            slot = self._take_slot(message.slot, message.pid)
            if number is None:
                number = message.number if message.number is not None else self._next
                self._next = max(self._next, number + 1)
                self._numbers[message.key] = number
                row_id = self.store.add_trial(
                    self.run_id,
                    number,
                    dict(message.config),
                    self.target_budget,
                    state=TrialState.RUNNING,
                    worker=slot,
                    started_at=message.at,
                )
                trial = self._trials[number] = _Trial(row_id, number, dict(message.config))
            else:  # a paused trial resumed (Ray's HyperBand)
                trial = self._trials[number]
                self.store.update_trial(
                    trial.row_id, state=TrialState.RUNNING, worker=slot, ended_at=None
                )
            self._slots[slot] = _Slot(message.pid, number, time.monotonic())
            trial.slot, trial.segment_started = slot, time.monotonic()
            trial.heard = trial.segment_started
            self._move(trial, TrialState.RUNNING)
            if self.ctx.monitor is not None:
                self.ctx.monitor.assign(slot, message.pid, number)
            return Assigned(number, trial_seed(self.seed, number))

    def failed_before_start(self, message: Started, error: str) -> None:
        """A trial the framework could not even start in a process: recorded failed, with why."""
        with self._lock:
            number = self._next
            self._next += 1
            self._numbers[message.key] = number
            row_id = self.store.add_trial(
                self.run_id,
                number,
                dict(message.config),
                self.target_budget,
                state=TrialState.FAILED,
                started_at=message.at,
                ended_at=message.at,
                error=error,
            )
            trial = self._trials[number] = _Trial(row_id, number, dict(message.config))
            self._move(trial, TrialState.FAILED)
            log.warning("trial %d failed: %s", number, error)

    def loaded(self, message: Loaded) -> None:
        with self._lock:
            trial = self._trials[message.number]
            trial.loaded, trial.heard = True, time.monotonic()
            trial.load_s += message.load_s
            self.store.add_trial_time(trial.row_id, load_s=message.load_s)

    def report(self, message: Reported) -> None:
        with self._lock:
            trial = self._trials[message.number]
            trial.heard = time.monotonic()
            metrics = dict(message.metrics)
            if self._meter is not None:
                trial.time_s += message.train_s + message.validate_s
                metrics.update(
                    self._meter(message.number, trial.time_s, trial.load_s, message.epoch)
                )
                trial.metrics = metrics
            value = metrics.get(self.metric)
            trial.budget = message.epoch
            if value is not None and math.isfinite(value):
                trial.value = value
                if self.is_target(value) and self.status.stop_reason is None:
                    self.status.stop_reason = f"target {self.target} reached"
            self.store.add_report(
                trial.row_id,
                message.epoch,
                value,
                metrics,
                message.train_s,
                message.validate_s,
            )

    def scoring(self, message: Scoring) -> dict[str, Any]:
        """The trial's last report's metrics, measured ones included."""
        with self._lock:
            return dict(self._trials[message.number].metrics)

    def completing(self, message: Completing) -> str | None:
        """Note the completion; answer where to save the final state, if it may be the best."""
        with self._lock:
            trial = self._trials[message.number]
            trial.completing = True
            if not self.can_checkpoint:
                return None
            best = self._best_completed
            if best is not None and not better(message.value, best[0], self.mode):
                return None
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            name = f"trial-{message.number:06d}-final-e{message.epoch}.pkl"
            trial.pending_final = str(self.checkpoint_dir / name)
            return trial.pending_final

    def is_completing(self, number: int) -> bool:
        """Whether the trial said it completes (before the framework said it ended)."""
        with self._lock:
            return self._trials[number].completing

    def end(
        self,
        number: int,
        state: str,
        at: float | None = None,
        error: str | None = None,
        checkpoint: str | None = None,
    ) -> None:
        """The trial ended for good: completed, stopped, failed or aborted."""
        with self._lock:
            trial = self._trials[number]
            if trial.state in FINAL_STATES:
                return  # told twice (a framework callback after a worker's own word)
            checkpoint = checkpoint or trial.pending_final
            if checkpoint and not Path(checkpoint).exists():
                checkpoint = None  # the process died before its state was written
            if state == TrialState.COMPLETED:
                self._record_completion(trial, checkpoint)
            elif checkpoint:
                Path(checkpoint).unlink(missing_ok=True)
            for path in trial.pause_checkpoints:  # never resumed again: its pauses are gone
                self.store.mark_checkpoint_deleted(path)
            trial.pause_checkpoints.clear()
            self._leave(trial, state)
            self.store.update_trial(
                trial.row_id, state=state, ended_at=at or time.time(), error=error
            )
            if state == TrialState.FAILED:
                log.warning("trial %d failed: %s", number, error)

    def pause(self, number: int, at: float | None = None, checkpoint: str | None = None) -> None:
        """The trial's segment ended with a checkpoint; it may resume (Ray's HyperBand)."""
        with self._lock:
            trial = self._trials[number]
            if trial.state != TrialState.RUNNING:
                return
            if checkpoint:
                trial.pause_checkpoints.append(checkpoint)
                self.store.add_checkpoint(trial.row_id, trial.budget, checkpoint, "pause")
            self._leave(trial, TrialState.PAUSED)
            self.store.update_trial(
                trial.row_id, state=TrialState.PAUSED, ended_at=at or time.time()
            )

    # -- the run as a whole ------------------------------------------------------------------

    def number_of(self, key: Any) -> int | None:
        with self._lock:
            return self._numbers.get(key)

    def state_of(self, number: int) -> str:
        with self._lock:
            return self._trials[number].state

    def stop(self, reason: str) -> None:
        """The job ends (time budget, target): the first reason given is kept."""
        with self._lock:
            if self.status.stop_reason is None:
                self.status.stop_reason = reason

    def check_limits(self) -> bool:
        """Whether the job is over: stopped before, or a time, energy, carbon or cost budget
        used."""
        if self.status.stop_reason is None and (reason := first_reason(self._limits)):
            self.stop(reason)
        return self.status.stop_reason is not None

    def is_target(self, value: float) -> bool:
        if self.target is None:
            return False
        return value >= self.target if self.mode == "max" else value <= self.target

    def end_slot(self, slot: int, error: str) -> None:
        """The process behind `slot` died: the trial it ran failed."""
        with self._lock:
            number = self._slots[slot].trial
            if number is not None:
                self.end(number, TrialState.FAILED, error=error)

    def abort_slot(self, slot: int, error: str) -> None:
        """The process behind `slot` was killed for overstaying: its trial is aborted, and the
        load or epoch it was cut short in (it held the worker too) counts in its time."""
        with self._lock:
            number = self._slots[slot].trial
            if number is None:
                return
            trial = self._trials[number]
            cut = max(0.0, time.monotonic() - trial.heard)
            if trial.loaded or not self.can_checkpoint:  # a plain function has no load step
                self.store.add_trial_time(trial.row_id, train_s=cut)
            else:
                self.store.add_trial_time(trial.row_id, load_s=cut)
            self.end(number, TrialState.ABORTED, error=error)
            log.warning("trial %d aborted: %s", number, error)

    def abort_running(self, reason: str | None = None) -> None:
        """Ctrl-C or a crash: what was running is recorded as aborted, the rest is kept."""
        with self._lock:
            for trial in list(self._trials.values()):
                if trial.state == TrialState.RUNNING:
                    self.end(trial.number, TrialState.ABORTED, error=reason)

    def finish(self) -> None:
        """The run is over: a paused trial will never resume (stopped, as native does), and a
        trial the framework never reported an end for is aborted."""
        with self._lock:
            for trial in list(self._trials.values()):
                if trial.state == TrialState.PAUSED:
                    self.end(trial.number, TrialState.STOPPED, at=time.time())
                elif trial.state == TrialState.RUNNING:
                    self.end(
                        trial.number,
                        TrialState.ABORTED,
                        error="the framework never reported its end",
                    )

    # -- internals ---------------------------------------------------------------------------

    def _take_slot(self, fixed: int | None, pid: int) -> int:
        if fixed is not None:
            return fixed
        same = [i for i, s in enumerate(self._slots) if s.pid == pid]  # a reused actor
        if same:
            return same[0]
        free = [i for i, s in enumerate(self._slots) if s.trial is None]
        if not free and self.reconcile is not None:
            self.reconcile()
            free = [i for i, s in enumerate(self._slots) if s.trial is None]
        if free:
            return free[0]
        # The framework started a process before telling us the last one ended: take the slot
        # held longest; its trial's end, when it comes, no longer touches the slot.
        return min(range(len(self._slots)), key=lambda i: self._slots[i].since)

    def _leave(self, trial: _Trial, state: str) -> None:
        """End the trial's segment on its slot and count it in its new state."""
        slot = trial.slot
        if slot is not None and self._slots[slot].trial == trial.number:
            self._slots[slot] = _Slot()
            if self.ctx.monitor is not None:
                self.ctx.monitor.assign(slot, None, None)
        if self.ctx.exporter is not None and trial.segment_started is not None:
            self.ctx.exporter.trial_ended(state, time.monotonic() - trial.segment_started)
        trial.slot = trial.segment_started = None
        self._move(trial, state)

    def _move(self, trial: _Trial, state: str) -> None:
        if trial.state != TrialState.PENDING:
            self.status.counts[trial.state] -= 1
        self.status.counts[state] += 1
        trial.state = state

    def _record_completion(self, trial: _Trial, path: str | None) -> None:
        value = trial.value
        if value is None:
            if path:
                Path(path).unlink(missing_ok=True)
            return
        if better(value, self.status.best_value, self.mode):
            self.status.best_value, self.status.best_trial = value, trial.number
            self.status.best_config = trial.config
        best = self._best_completed
        if best is None or better(value, best[0], self.mode):
            self._best_completed = (value, trial.number)
            if best is not None:
                old = self._trials[best[1]]
                if old.final_checkpoint:
                    Path(old.final_checkpoint).unlink(missing_ok=True)
                    self.store.mark_checkpoint_deleted(old.final_checkpoint)
                    old.final_checkpoint = None
            if path:
                trial.final_checkpoint = path
                self.store.add_checkpoint(trial.row_id, trial.budget, path, "final")
        elif path:
            Path(path).unlink(missing_ok=True)  # another trial completed better meanwhile
