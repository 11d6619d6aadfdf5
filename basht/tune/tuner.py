"""The Tuner: asks the algorithm, hands suggestions to an executor, and returns the reports.

Algorithms never see the executor and the executor never sees the algorithm (Fluid's split): this
loop is the only place that knows both, and the only place that writes trial records.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from basht.engine.base import Executor
from basht.engine.messages import COMPLETE, CONTINUE, PAUSE, STOP, TrialEvent, TrialTask
from basht.failpoints import failpoint
from basht.states import ENDS_RUN, EventKind, TrialState
from basht.store import Store
from basht.store.writer import WriteBehind
from basht.tune.base import Algorithm, Decision, Suggestion, better
from basht.tune.objectives import CompletedFront, Objectives
from basht.workloads.base import WorkloadRef

log = logging.getLogger(__name__)

# Bound once: the loop below runs once per event, a million times in a large simulation.
_CONTINUE, _PAUSE, _STOP = Decision.CONTINUE, Decision.PAUSE, Decision.STOP
_REPORT = EventKind.REPORT


@dataclass
class TunerStatus:
    """A snapshot for live progress: counts by state, the best so far, the time spent."""

    counts: Counter[str] = field(default_factory=Counter)
    best_value: float | None = None
    best_trial: int | None = None
    best_config: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None
    clock: Callable[[], float] = time.monotonic

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started


Limit = Callable[[], str | None]  # the reason the job must end now, or None


def time_limit(status: TunerStatus, budget_s: float) -> Limit:
    """`search.time_budget_s` as a limit: reached once `status` has run `budget_s` (its clock)."""

    def reached() -> str | None:
        return f"time budget of {budget_s:g} s used" if status.elapsed_s >= budget_s else None

    return reached


def overstayed(grace_s: float, stop_reason: str | None) -> str:
    """Why a trial still running `grace_s` after the search ended was aborted."""
    return (
        f"no report within search.stop_grace_s ({grace_s:g} s) after the search ended "
        f"({stop_reason})"
    )


def first_reason(limits: Sequence[Limit]) -> str | None:
    """The reason of the first limit reached, asking them in order until one is."""
    for limit in limits:
        reason = limit()
        if reason is not None:
            return reason
    return None


@dataclass(slots=True)
class _Trial:
    row_id: int
    config: dict[str, Any]
    target_budget: int | None
    seed: int
    budget: int = 0
    value: float | None = None
    checkpoint: str | None = None
    final_checkpoint: str | None = None
    state: TrialState = TrialState.PENDING
    failure: str | None = None
    # After `basht resume`: epochs up to `told` were already reported to the algorithm, whose
    # answer at `told` was `told_decision`; a restarted trial replays them without asking again.
    told: int = 0
    told_decision: Decision | None = None
    worker: int | None = None
    group: str | None = None
    # When the segment under way began (driver clock) and whether it is a load or training: an
    # aborted trial's unfinished segment is timed from it, as its worker cannot say.
    segment: tuple[str, float] | None = None
    # With several objectives: the seconds its epochs took so far, and its last report's metrics
    # (the workload's and the measured ones).
    time_s: float = 0.0
    load_s: float = 0.0
    metrics: dict[str, Any] | None = None
    # Promoted where it stood (it never paused): the suggestion's log row, stored after the
    # report that reached the rung so the decision log stays in order.
    promoted: dict[str, Any] | None = None


@dataclass(frozen=True)
class RestoredTrial:
    """A trial as the store left it, for continuing a run (`basht resume`)."""

    number: int
    row_id: int
    config: dict[str, Any]
    state: str
    budget: int
    target_budget: int | None
    value: float | None
    checkpoint: str | None
    told: int = 0
    told_decision: Decision | None = None
    time_s: float = 0.0  # its epochs' training and validation so far
    load_s: float = 0.0  # its loads so far
    metrics: dict[str, Any] | None = None  # its last report's


#: What a run measures of a trial at a report, given its number, the seconds its epochs took so
#: far, the seconds its loads took and the epoch: the measured metrics
#: (`basht.tune.objectives.measured_metrics`).
Measure = Callable[[int, float, float, int], dict[str, float]]


class Gate(Protocol):
    """When the work may run (a carbon-aware schedule, `basht.tune.carbon_gate`): how many trials
    may run now, and until when that holds at the latest, from the epochs run so far and the
    worker-seconds each cost on average, the trials' loads included (None before the first)."""

    def allowed(self, now: float, epochs_done: int, epoch_s: float | None) -> tuple[int, float]: ...


_MASK64 = (1 << 64) - 1


def trial_seed(experiment_seed: int, trial_id: int) -> int:
    """Independent, reproducible 32-bit per-trial seeds from the experiment seed.

    SplitMix64's finaliser (Steele et al., 2014) over (seed, trial): neighbouring inputs give
    unrelated outputs, at a fraction of the cost of a numpy SeedSequence (simulations make 1e5).
    """
    z = (experiment_seed * 0x9E3779B97F4A7C15 + (trial_id + 1) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 32


class Tuner:
    """Runs one algorithm on one executor until the algorithm is done or a limit is hit.

    Every call of the algorithm is logged in the store in the same transaction as the record it
    produced (trial, report, end), so the log replays the algorithm exactly (`replay`) and a
    `basht resume` continues where the run stopped.
    """

    def __init__(
        self,
        algorithm: Algorithm,
        executor: Executor,
        store: Store | None,
        run_id: str,
        workload: WorkloadRef,
        *,
        checkpoint_dir: Path | None,
        can_checkpoint: bool = True,
        target: float | None = None,
        time_budget_s: float | None = None,
        stop_grace_s: float | None = None,
        limits: Sequence[Limit] = (),
        on_update: Callable[[TunerStatus], None] | None = None,
        on_trial: Callable[[int, int, str], None] | None = None,
        objectives: Objectives | None = None,
        measure: Measure | None = None,
        gate: Gate | None = None,
    ):
        """`on_trial(trial_id, worker, event)` hears each trial start ("start") on a worker and
        each end (its new state), e.g. to attribute energy or export live metrics.

        `limits` are asked, on every pass of the loop, whether the job should end (an energy
        budget, say; each decides how often it really looks); the first to answer a reason stops
        it as `time_budget_s` does: no trial starts after, and each running trial stops at its
        next report. Once the search has ended (a limit, or `target` reached), a trial that has
        not ended `stop_grace_s` later (hung in an epoch, say) is aborted through the executor,
        so that the run ends; None waits for every trial however long it takes.

        `objectives`: the algorithm ranks scores of several objectives or under constraints
        (`basht.tune.objectives`), made from each report's metrics and what `measure` adds; the
        value stored and compared with `target` is the first objective's.

        `gate`: at most `allowed` trials run at once; a trial over it pauses at its next report
        (when the workload checkpoints) and resumes, before any new trial starts, once the gate
        allows; while it allows none and nothing runs, the executor waits."""
        self.algorithm, self.executor, self.run_id = algorithm, executor, run_id
        self.on_trial = on_trial
        # Writes go behind the loop on a thread of their own (in order, batched); without a store
        # (simulation at scale) the same loop runs with nothing written.
        self.store: WriteBehind | _NoStore = WriteBehind(store) if store is not None else _NoStore()
        self._logging = store is not None
        self.clock: Callable[[], float] = executor.now
        self.workload = workload
        self.metric, self.mode = algorithm.metric, algorithm.mode
        self._maximize = self.mode == "max"
        self.checkpoint_dir = checkpoint_dir
        self.can_checkpoint = can_checkpoint
        self.target = target
        self.on_update = on_update
        self.status = TunerStatus(started=self.clock(), clock=self.clock)
        timed = [time_limit(self.status, time_budget_s)] if time_budget_s is not None else []
        self.limits: list[Limit] = [*timed, *limits]
        self.stop_grace_s = stop_grace_s
        self._grace_ends: float | None = None  # on the Tuner's clock, once the search ended
        self.trials: dict[int, _Trial] = {}
        self._best_completed: tuple[float, int] | None = None
        self._running: set[int] = set()
        self._restarts: list[int] = []
        self._fill = 0
        # Promoted before their pause finished: they start as soon as the pause is recorded.
        self._deferred: set[int] = set()
        self._seq = 0
        self._groups: dict[tuple[Any, Any], str] = {}  # (bracket, rung) -> its group's name
        self.objectives, self.measure = objectives, measure
        self._front = CompletedFront()  # several objectives: the completed trials worth keeping
        self._best_key: tuple[float, ...] | None = None
        self.gate = gate
        self._allowance: tuple[int, float] | None = None  # the gate's answer and until when
        self._epochs_run, self._epoch_s_sum = 0, 0.0
        self._holding: set[int] = set()  # told to pause for the gate, not yet paused
        self._held: list[int] = []  # paused for the gate: they resume first
        # A trial the algorithm would resume at once keeps running instead of pausing, where a
        # resume costs a start (the model built again, its checkpoint written and read).
        self._next_promotion: Callable[[], int | None] | None = (
            getattr(algorithm, "next_promotion", None) if executor.resume_costs else None
        )

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> TunerStatus:
        try:
            self._loop()
        except BaseException:
            self._abort_running()
            raise
        else:
            self._close_paused()
        finally:
            self.store.close()  # everything recorded before the run phase ends
        self._notify()
        return self.status

    def _loop(self) -> None:
        """Fill idle workers, then handle what the executor reports, until nothing runs.

        A simulation goes round once per event (a million times at scale), so the common path
        (one report, no idle worker, no store) is written out here with as few calls as it takes.
        """
        executor, status, running = self.executor, self.status, self._running
        poll, handle, on_report, trials = executor.poll, self._handle, self._on_report, self.trials
        grace = self.stop_grace_s
        while True:
            if self.limits and status.stop_reason is None:
                status.stop_reason = first_reason(self.limits)
            if status.stop_reason is not None:
                self._fill += 1
                if grace is not None:  # running trials get `grace` s to end, then are aborted
                    self._end_overdue(grace)
            elif executor.idle_workers > 0:
                self._fill_idle_workers()
            else:
                self._fill += 1  # a pass that started nothing still counts (group names)
            if not running:
                if self.gate is not None and self._waiting_for_the_gate():
                    assert self._allowance is not None
                    executor.wait_until(self._allowance[1])
                    continue
                break
            for event in poll(0.5):
                if event.kind == _REPORT:
                    on_report(event, trials[event.trial_id])
                else:
                    handle(event)
            if self.on_update is not None:
                self.on_update(status)

    def _fill_idle_workers(self) -> None:
        # Suggestions made in one pass form a trial group (unless the algorithm names its own:
        # a rung of a bracket), so the engine can plan them together without knowing why.
        self._fill += 1
        executor, status, restarts = self.executor, self.status, self._restarts
        while status.stop_reason is None and executor.idle_workers > 0:
            if self.gate is not None and len(self._running) >= self._allowed():
                return
            if restarts:
                self._restart(restarts.pop(0))
                continue
            if self._held:
                self._restart(self._held.pop(0))
                continue
            suggestion = self.algorithm.suggest()
            if suggestion is None:
                return
            self._start(suggestion)

    def _start(self, s: Suggestion) -> None:
        trial_id = s.trial_id
        trial = self.trials.get(trial_id)
        decision = None
        if self._logging:
            decision = self._log(
                "suggest", trial_id, s.budget, result="resume" if s.resume else "new"
            )
        if trial is None:
            seed = trial_seed(self.workload.experiment_seed, trial_id)
            if self._logging:
                row_id = self.store.add_trial(
                    self.run_id,
                    trial_id,
                    s.config,
                    s.budget,
                    decision=decision,
                    state=TrialState.RUNNING,
                    started_at=self.clock(),
                )
            else:
                row_id = self.store.add_trial()  # a number, nothing kept
            trial = self.trials[trial_id] = _Trial(row_id, dict(s.config), s.budget, seed)
            decision = None
        elif not s.resume:
            raise RuntimeError(f"trial {trial_id} suggested twice without resume")
        trial.target_budget = s.budget
        trial.group = self._group(s.meta)
        if trial_id in self._running:
            # Its checkpoint is still being written: resume it once the pause is recorded.
            if decision is not None:
                self.store.log_decision(decision)
            self._deferred.add(trial_id)
            return
        self._submit(trial_id, trial, resume=s.resume, decision=decision)

    def _group(self, meta: dict[str, Any]) -> str:
        """The trial group: the algorithm's (bracket, rung) if it names one, else this fill pass.
        Names are made once per rung: a simulation starts a hundred thousand trials."""
        if "bracket" in meta and "rung" in meta:
            key = (meta["bracket"], meta["rung"])
            try:
                group = self._groups.get(key)
            except TypeError:  # unhashable names: format them each time
                return f"b{key[0]}r{key[1]}"
            if group is None:
                group = self._groups[key] = f"b{key[0]}r{key[1]}"
            return group
        return f"fill{self._fill}"

    def _submit(
        self, trial_id: int, trial: _Trial, resume: bool, decision: dict[str, Any] | None = None
    ) -> None:
        # Without a checkpoint a resumed trial starts again from scratch (a function workload).
        from_checkpoint = resume and trial.checkpoint is not None
        task = TrialTask(
            trial_id=trial_id,
            config=trial.config,
            workload=self.workload,
            seed=trial.seed,
            target_budget=trial.target_budget,
            start_epoch=trial.budget if from_checkpoint else 0,
            resume_from=trial.checkpoint if from_checkpoint else None,
            group=trial.group,
        )
        worker = self.executor.submit(task)
        failpoint("promotion" if from_checkpoint else "dispatch")
        trial.worker = worker
        if self.on_trial is not None:
            self.on_trial(trial_id, worker, "start")
        self._move(trial, TrialState.RUNNING)
        self._running.add(trial_id)
        if self._logging:
            trial.segment = ("load_s", self.clock())
            self.store.update_trial(
                trial.row_id,
                decision=decision,
                state=TrialState.RUNNING,
                worker=worker,
                target_budget=trial.target_budget,
                ended_at=None,
            )

    def _move(self, trial: _Trial, state: TrialState) -> None:
        """Change a trial's state, keeping `status.counts` a count of trials in each state."""
        if trial.state is not TrialState.PENDING:
            self.status.counts[trial.state] -= 1
        self.status.counts[state] += 1
        trial.state = state

    # -- events -----------------------------------------------------------------------------

    def _handle(self, event: TrialEvent) -> None:
        trial = self.trials[event.trial_id]
        kind = event.kind
        if kind == _REPORT:
            self._on_report(event, trial)
        elif kind == EventKind.LOADED:
            trial.load_s += event.load_s
            if self.gate is not None:  # a load is work too: every start and resume costs one
                self._epoch_s_sum += event.load_s
            if self._logging:
                trial.segment = ("train_s", self.clock())
                self.store.add_trial_time(trial.row_id, load_s=event.load_s)
        elif kind in ENDS_RUN:
            self._on_end(event, trial)

    def _on_report(self, event: TrialEvent, trial: _Trial) -> None:
        """Decide, answer the worker at once, then record: the write overlaps the next epoch."""
        if self.objectives is not None:
            self._on_scored_report(event, trial, self.objectives)
            return
        value = event.metrics.get(self.metric)
        epoch = event.epoch
        trial.budget = epoch
        if self.gate is not None:
            self._epochs_run += 1
            self._epoch_s_sum += event.train_s + event.validate_s
        logged = None
        if value is None or not math.isfinite(value):
            got = ", ".join(event.metrics) or "nothing"
            trial.failure = (
                f"metric {self.metric!r} missing or not finite in the report (got: {got})"
            )
            self.executor.command(event.trial_id, STOP)
        elif self.status.stop_reason is not None and not self._is_target(value):
            trial.value = value
            self.executor.command(event.trial_id, STOP)
        else:
            trial.value = value
            logged = self._decide(event, trial, value, value)
        if self._logging:
            self._store_report(event, trial, value, event.metrics, logged)

    def _on_scored_report(self, event: TrialEvent, trial: _Trial, objectives: Objectives) -> None:
        """`_on_report` with several objectives or constraints: the algorithm is told the score
        of the report's metrics and of what this run measured of the trial."""
        epoch, trial_id = event.epoch, event.trial_id
        trial.budget = epoch
        trial.time_s += event.train_s + event.validate_s
        if self.gate is not None:
            self._epochs_run += 1
            self._epoch_s_sum += event.train_s + event.validate_s
        metrics = dict(event.metrics)
        if self.measure is not None:
            metrics.update(self.measure(trial_id, trial.time_s, trial.load_s, epoch))
        problem = objectives.missing(metrics)
        value = None if problem is not None else float(metrics[objectives.first.metric])
        logged = None
        if problem is not None or value is None:
            trial.failure = problem
            self.executor.command(trial_id, STOP)
        elif self.status.stop_reason is not None and not self._is_target(value):
            trial.value, trial.metrics = value, metrics
            self.executor.command(trial_id, STOP)
        else:
            trial.value, trial.metrics = value, metrics
            score = objectives.score(metrics)
            logged = self._decide(event, trial, value, score, score)
        if self._logging:
            self._store_report(event, trial, value, metrics, logged)

    def _decide(
        self,
        event: TrialEvent,
        trial: _Trial,
        value: float,
        told: float | tuple[float, ...],
        scores: tuple[float, ...] | None = None,
    ) -> dict[str, Any] | None:
        """Tell the algorithm `told` (the value, or a score of several objectives) unless it
        heard this epoch before a resume, and answer the worker; returns the decision-log row
        (None when nothing is logged)."""
        epoch, logged = event.epoch, None
        if epoch > trial.told or (epoch == trial.told and trial.told_decision is None):
            decision = self.algorithm.report(event.trial_id, epoch, told)
            if self._logging:
                logged = self._log("report", event.trial_id, epoch, value, decision.value, scores)
        elif epoch < trial.told:
            decision = _CONTINUE  # the algorithm heard this before a resume
        else:
            decision = trial.told_decision
        self._answer(event, trial, value, decision)
        failpoint("report")
        return logged

    def _store_report(
        self,
        event: TrialEvent,
        trial: _Trial,
        value: float | None,
        metrics: dict[str, Any],
        logged: dict[str, Any] | None,
    ) -> None:
        """Record a report (and the decision it got), the write overlapping the next epoch."""
        now = self.clock()
        trial.segment = ("train_s", now)
        self.store.add_report(
            trial.row_id,
            event.epoch,
            value,
            metrics,
            event.train_s,
            event.validate_s,
            decision=logged,
            at=event.at or now,  # when it happened, not when the writer gets to it
        )
        if trial.promoted is not None:  # after the report that reached the rung
            self.store.update_trial(
                trial.row_id, decision=trial.promoted, target_budget=trial.target_budget
            )
            trial.promoted = None

    def _answer(self, event: TrialEvent, trial: _Trial, value: float, decision: Decision) -> None:
        target = self.target
        if target is not None and (value >= target if self._maximize else value <= target):
            self.status.stop_reason = self.status.stop_reason or f"target {self.target} reached"
            self._complete(event.trial_id, trial)
        elif decision is _STOP:
            self.executor.command(event.trial_id, STOP)
        elif decision is _PAUSE:
            if self._promoted_at_once(event.trial_id):
                self._promote_in_place(event.trial_id, trial)
                return
            path = (
                self._checkpoint_path(event.trial_id, event.epoch) if self.can_checkpoint else None
            )
            self.executor.command(event.trial_id, PAUSE, path)
        elif trial.target_budget is not None and event.epoch >= trial.target_budget:
            self._complete(event.trial_id, trial)
        elif self.gate is not None and self._over_the_gate():
            self._holding.add(event.trial_id)  # resumed from here once the gate allows it
            path = self._checkpoint_path(event.trial_id, event.epoch)
            self.executor.command(event.trial_id, PAUSE, path)
        else:
            self.executor.command(event.trial_id, CONTINUE)

    def _promoted_at_once(self, trial_id: int) -> bool:
        """Whether the worker this pause would free would resume this very trial: nothing owed
        a worker first (a restart, a trial held by the gate), the algorithm's next promotion is
        this trial, and the gate (if any) lets as many trials run as run now."""
        return (
            self._next_promotion is not None
            and not self._restarts
            and not self._held
            and self._next_promotion() == trial_id
            and (self.gate is None or not self._over_the_gate())
        )

    def _promote_in_place(self, trial_id: int, trial: _Trial) -> None:
        """Promote the trial where it runs: the algorithm's suggestion, as a pause and a resume
        would have got it, without the checkpoint, the new start and the read."""
        s = self.algorithm.suggest()
        assert s is not None and s.trial_id == trial_id and s.resume, s
        trial.target_budget = s.budget
        trial.group = self._group(s.meta)
        trial.promoted = self._log("suggest", trial_id, s.budget, result="resume")
        self.executor.command(trial_id, CONTINUE)
        failpoint("promotion")

    # -- the gate -----------------------------------------------------------------------------

    def _allowed(self) -> int:
        """How many trials the gate lets run now (asked again once its answer runs out)."""
        assert self.gate is not None
        now = self.clock()
        if self._allowance is None or now >= self._allowance[1]:
            epoch_s = self._epoch_s_sum / self._epochs_run if self._epochs_run else None
            self._allowance = self.gate.allowed(now, self._epochs_run, epoch_s)
        return self._allowance[0]

    def _over_the_gate(self) -> bool:
        """More trials run than the gate allows now: one that can pause should (at a report,
        its boundary; a workload that cannot checkpoint runs on rather than lose its work)."""
        self._allowance = None  # a decision point: the gate decides again
        running = len(self._running) - len(self._holding)
        return self.can_checkpoint and running > self._allowed()

    def _waiting_for_the_gate(self) -> bool:
        """Nothing runs because the gate allows nothing now, and there is work left."""
        if self.status.stop_reason is not None or self._allowed() > 0:
            return False
        return bool(self._held or self._restarts) or not self.algorithm.is_finished()

    def _complete(self, trial_id: int, trial: _Trial) -> None:
        """Finish a trial; keep its final state only if it may be the best completed one."""
        assert trial.value is not None
        keep = self.can_checkpoint and self._may_be_chosen(trial)
        path = self._checkpoint_path(trial_id, trial.budget, final=True) if keep else None
        self.executor.command(trial_id, COMPLETE, path)

    def _may_be_chosen(self, trial: _Trial) -> bool:
        """Whether the test phase may use this trial once completed: the best so far, or with
        several objectives a trial on the completed front."""
        if self.objectives is None or trial.metrics is None:
            assert trial.value is not None
            return self._beats_best(trial.value)
        return self._front.admits(self._front_key(trial.metrics))

    def _front_key(self, metrics: dict[str, Any]) -> tuple[float, ...]:
        assert self.objectives is not None
        return (self.objectives.violation(metrics), *self.objectives.costs(metrics))

    def _beats_best(self, value: float) -> bool:
        return self._best_completed is None or better(value, self._best_completed[0], self.mode)

    def _on_end(self, event: TrialEvent, trial: _Trial) -> None:
        trial_id = event.trial_id
        self._running.discard(trial_id)
        state, error = TrialState(event.kind), event.error
        if trial.failure is not None:
            state, error = TrialState.FAILED, trial.failure
        elif state is TrialState.COMPLETED and trial.value is None:  # a function never reported
            state, error = (
                TrialState.FAILED,
                "the workload ended without a report (call trial.report)",
            )
        decision = None
        if event.kind == EventKind.PAUSED and event.path:
            failpoint("checkpoint")  # written by the worker, not yet recorded
            if self.checkpoint_dir is None:
                trial.checkpoint = event.path  # no files, no records: _replace_checkpoint's rest
            else:
                self._replace_checkpoint(trial, event.path, "pause", event.at or self.clock())
        if state is TrialState.COMPLETED:
            failpoint("finish")
            self.algorithm.complete(event.trial_id)
            decision = self._log("complete", event.trial_id, trial.budget)
            self._record_completion(event.trial_id, trial, event.path, event.at or self.clock())
        elif state is TrialState.FAILED:
            self.algorithm.fail(event.trial_id)
            decision = self._log("fail", event.trial_id, trial.budget)
            log.warning("trial %d failed: %s", event.trial_id, error)
            if self._logging and (event.load_s or event.train_s):  # the segment that failed
                self.store.add_trial_time(trial.row_id, load_s=event.load_s, train_s=event.train_s)
            elif self._logging and event.kind == EventKind.FAILED:
                self._time_cut_segment(trial, self.clock())  # its worker died in it
        if self.gate is not None:
            self._allowance = None  # a trial ended: a decision point
        if self._holding and trial_id in self._holding:
            self._holding.discard(trial_id)
            if state is TrialState.PAUSED:
                self._held.append(trial_id)
        if self._deferred and trial_id in self._deferred:
            self._deferred.discard(trial_id)
            if state is TrialState.PAUSED:
                self._restarts.insert(0, trial_id)  # the next free worker resumes it
        if trial.checkpoint and state in (TrialState.STOPPED, TrialState.FAILED):
            self._delete_checkpoint(trial.checkpoint)  # never resumed: free the disk
            trial.checkpoint = None
        self._move(trial, state)
        if self.on_trial is not None and trial.worker is not None:
            self.on_trial(trial_id, trial.worker, state)
        if self._logging:
            self.store.update_trial(
                trial.row_id,
                decision=decision,
                state=state,
                ended_at=event.at or self.clock(),
                error=error,
            )

    def _record_completion(self, trial_id: int, trial: _Trial, path: str | None, at: float) -> None:
        assert trial.value is not None
        if trial.checkpoint:
            self._delete_checkpoint(trial.checkpoint)
            trial.checkpoint = None
        if self.objectives is not None and trial.metrics is not None:
            self._record_scored_completion(trial_id, trial, path, at, trial.metrics)
            return
        if better(trial.value, self.status.best_value, self.mode):
            self.status.best_value, self.status.best_trial = trial.value, trial_id
            self.status.best_config = trial.config
        if self._beats_best(trial.value):
            previous = self._best_completed
            self._best_completed = (trial.value, trial_id)
            if previous is not None:
                old = self.trials[previous[1]]
                if old.final_checkpoint:
                    self._delete_checkpoint(old.final_checkpoint)
                    old.final_checkpoint = None
            if path:
                trial.final_checkpoint = path
                self.store.add_checkpoint(
                    trial.row_id, trial.budget, path, "final", _size(path), at=at
                )
        elif path and self.checkpoint_dir is not None:
            # Another trial completed better while this one was saving: its state is not needed.
            self.executor.discard_checkpoint(path)

    def _record_scored_completion(
        self, trial_id: int, trial: _Trial, path: str | None, at: float, metrics: dict[str, Any]
    ) -> None:
        """The best so far by the choice rule's order; the final states of the completed front
        kept (the test phase picks among them), those it no longer holds deleted."""
        assert self.objectives is not None and trial.value is not None
        key = self.objectives.choice_key(metrics)
        if self._best_key is None or key < self._best_key:
            self._best_key = key
            self.status.best_value, self.status.best_trial = trial.value, trial_id
            self.status.best_config = trial.config
        kept, dropped = self._front.add(trial_id, self._front_key(metrics))
        for other in dropped:
            old = self.trials[other]
            if old.final_checkpoint:
                self._delete_checkpoint(old.final_checkpoint)
                old.final_checkpoint = None
        if kept and path:
            trial.final_checkpoint = path
            self.store.add_checkpoint(trial.row_id, trial.budget, path, "final", _size(path), at=at)
        elif path and self.checkpoint_dir is not None:
            self.executor.discard_checkpoint(path)

    def _is_target(self, value: float) -> bool:
        if self.target is None:
            return False
        return value >= self.target if self._maximize else value <= self.target

    def _abort_running(self, error: str | None = None) -> None:
        """Ctrl-C or a crash of the loop, or a grace period run out (`error` says so): what was
        running is recorded as aborted, the rest kept."""
        now = self.clock()
        for trial_id in list(self._running):
            trial = self.trials[trial_id]
            self._move(trial, TrialState.ABORTED)
            if self.on_trial is not None and trial.worker is not None:
                self.on_trial(trial_id, trial.worker, TrialState.ABORTED)
            self._time_cut_segment(trial, now)
            self.store.update_trial(
                trial.row_id, state=TrialState.ABORTED, ended_at=now, error=error
            )
        self._running.clear()

    def _end_overdue(self, grace_s: float) -> None:
        """The search has ended: start its grace period, or once that is out, abort the trials
        still running (hung in an epoch, say: one that never reports would keep the run going for
        ever) through the executor, and the loop ends as usual."""
        now = self.clock()
        if self._grace_ends is None:
            self._grace_ends = now + grace_s
        if now < self._grace_ends or not self._running:
            return
        why = overstayed(grace_s, self.status.stop_reason)
        overdue = sorted(self._running)
        for trial_id in overdue:
            log.warning("trial %d aborted: %s", trial_id, why)
            self._deferred.discard(trial_id)
        self._abort_running(why)  # timed to now: replacing its worker is not the trial's time
        for trial_id in overdue:
            self.executor.abort(trial_id)
            trial = self.trials[trial_id]
            if trial.checkpoint:  # the run is over: it never resumes from its last pause
                self._delete_checkpoint(trial.checkpoint)
                trial.checkpoint = None

    def _time_cut_segment(self, trial: _Trial, now: float) -> None:
        """Add the load or epoch a trial was cut short in (it held the worker too), timed on
        this clock from when it began: a worker that died or was stopped cannot say."""
        if trial.segment is not None:
            kind, since = trial.segment
            self.store.add_trial_time(trial.row_id, **{kind: max(0.0, now - since)})

    def _close_paused(self) -> None:
        """The run is over, so a trial still paused will never resume: it was stopped early."""
        for trial in self.trials.values():
            if trial.state is TrialState.PAUSED:
                if trial.checkpoint:
                    self._delete_checkpoint(trial.checkpoint)
                    trial.checkpoint = None
                self._move(trial, TrialState.STOPPED)
                self.store.update_trial(trial.row_id, state=TrialState.STOPPED)

    def _notify(self) -> None:
        if self.on_update is not None:
            self.on_update(self.status)

    def _log(
        self,
        op: str,
        trial_id: int,
        budget: int | None = None,
        value: float | None = None,
        result: str | None = None,
        scores: tuple[float, ...] | None = None,
    ) -> dict[str, Any] | None:
        """The decision-log row for one algorithm call (None when nothing is stored); `scores`
        is what an algorithm of several objectives was told."""
        if not self._logging:
            return None
        self._seq += 1
        return {
            "run_id": self.run_id,
            "seq": self._seq,
            "op": op,
            "trial": trial_id,
            "budget": budget,
            "value": value,
            "scores": list(scores) if scores is not None else None,
            "result": result,
        }

    # -- checkpoints ------------------------------------------------------------------------

    def _checkpoint_path(self, trial_id: int, epoch: int, final: bool = False) -> str:
        name = f"trial-{trial_id:06d}-{'final' if final else 'pause'}-e{epoch}.pkl"
        # Without a folder (simulation) the name only identifies the state; no file is written.
        return name if self.checkpoint_dir is None else str(self.checkpoint_dir / name)

    def _replace_checkpoint(self, trial: _Trial, path: str, kind: str, at: float) -> None:
        if trial.checkpoint and trial.checkpoint != path:
            self._delete_checkpoint(trial.checkpoint)
        trial.checkpoint = path
        if self.checkpoint_dir is not None:  # a simulation keeps no files and no records
            self.store.add_checkpoint(trial.row_id, trial.budget, path, kind, _size(path), at=at)

    def _delete_checkpoint(self, path: str) -> None:
        if self.checkpoint_dir is not None:  # a simulation's checkpoints are names, not files
            self.store.mark_checkpoint_deleted(path)
            self.store.after_commit(self.executor.discard_checkpoint, path)

    # -- resume -----------------------------------------------------------------------------

    def restore(self, trials: list[RestoredTrial], last_seq: int) -> None:
        """Take over the trials of an interrupted run; those that were running start again."""
        self._seq = last_seq
        for r in sorted(trials, key=lambda t: t.number):
            seed = trial_seed(self.workload.experiment_seed, r.number)
            # A trial that was cut off or never ran resumes as if paused (from its checkpoint).
            state = TrialState(r.state)
            if not state.is_final or state is TrialState.ABORTED:
                state = TrialState.PAUSED
            checkpoint = r.checkpoint
            if checkpoint and self.checkpoint_dir is not None and not Path(checkpoint).exists():
                # Deleted before the store heard (a kill with writes queued): train it again.
                log.warning("trial %d: checkpoint %s is gone; it starts over", r.number, checkpoint)
                checkpoint = None
            trial = _Trial(
                r.row_id,
                dict(r.config),
                r.target_budget,
                seed,
                budget=r.budget,
                value=r.value,
                checkpoint=checkpoint,
                state=state,
                told=r.told,
                told_decision=r.told_decision,
                time_s=r.time_s,
                load_s=r.load_s,
                metrics=r.metrics,
            )
            self.trials[r.number] = trial
            scored = self.objectives is not None and r.metrics is not None
            if scored and r.state == TrialState.COMPLETED and r.value is not None:
                self._restore_scored_best(r.number, trial, checkpoint)
            elif r.state == TrialState.COMPLETED and r.value is not None:
                if better(r.value, self.status.best_value, self.mode):
                    self.status.best_value, self.status.best_trial = r.value, r.number
                    self.status.best_config = trial.config
                if self._beats_best(r.value):
                    self._best_completed = (r.value, r.number)
                    trial.final_checkpoint = checkpoint
            if r.state in (TrialState.ABORTED, TrialState.RUNNING, TrialState.PENDING):
                self._restarts.append(r.number)
            self.status.counts[trial.state] += 1

    def _restore_scored_best(self, number: int, trial: _Trial, checkpoint: str | None) -> None:
        assert self.objectives is not None and trial.metrics is not None
        key = self.objectives.choice_key(trial.metrics)
        if self._best_key is None or key < self._best_key:
            self._best_key = key
            self.status.best_value, self.status.best_trial = trial.value, number
            self.status.best_config = trial.config
        kept, dropped = self._front.add(number, self._front_key(trial.metrics))
        for other in dropped:
            old = self.trials[other]
            if old.final_checkpoint:
                self._delete_checkpoint(old.final_checkpoint)
                old.final_checkpoint = None
        if kept:
            trial.final_checkpoint = checkpoint

    def _restart(self, trial_id: int) -> None:
        trial = self.trials[trial_id]
        # From its last pause if it has one (ASHA promotion), else from scratch.
        self._submit(trial_id, trial, resume=trial.checkpoint is not None)


class _NoStore:
    """Stands in for the store when a run is simulated: trial ids count up, nothing is kept."""

    def __init__(self) -> None:
        self._next = 0

    def add_trial(self, *args: Any, **kwargs: Any) -> int:
        self._next += 1
        return self._next

    def _ignore(self, *args: Any, **kwargs: Any) -> None:
        return None

    update_trial = add_trial_time = add_report = add_checkpoint = mark_checkpoint_deleted = _ignore
    log_decision = close = flush = _ignore

    def after_commit(self, call: Any, *args: Any) -> None:
        call(*args)  # nothing to wait for


def _size(path: str) -> int:
    """Measured now: by the time the writer thread records it, the file may be replaced."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
