"""RubberBand's executor: a synchronous SHA job run on a cluster that follows its plan.

Three parts, as in the paper. The scheduler knows which stage a trial belongs to from the budget
it trains to (the stage's rung); when the first trial of the next stage comes, every trial of
this one has ended (the barrier), and the cluster manager scales to the plan's count for the next
stage (`cluster.Cluster`). New instances start while the stage's first trials run on those that
are up, as the simulator assumes; each takes trials once it is ready. The placement controller
gives each trial the stage's GPUs per trial on one instance, packing trials onto the fewest
instances (the fullest one with room first), so that whole instances are free to release.

With `replan` on, the remaining stages are planned again at each barrier, from the time left
before the deadline and how long this run's trials took against the profile (`planner.replan`):
a run slower than its profile gets more instances, a faster one fewer. With `preprovision` on, a
stage's new instances are requested during the stage before, when it is expected to end less the
mean start-up, and held out of it until the barrier.

A carbon plan (`basht plan --objective carbon`) gives stages a wait (`delay_s`): at the barrier
every instance is released, the run waits (the plan's seconds over `time_scale`, so a replayed
series passes faster), then requests the stage's instances and waits for them. A stage's record
starts when the wait ends, so the wait is the gap after the record of the stage before.

The executor runs trials; it never sees the algorithm (SHA decides, the executor only follows
the budgets it hands out). Every instance and stage is written to the store as it happens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from basht.energy.pricing import plan_price
from basht.engine.base import Executor
from basht.engine.local import LocalExecutor
from basht.engine.messages import TrialEvent, TrialTask, WorkloadRef
from basht.errors import BashtError
from basht.experiment import ShaJob
from basht.plan.cluster import Cluster, Instance, LocalProvider
from basht.plan.planner import (
    Replan,
    check_size,
    default_max_instances,
    observed_speed,
    replan,
)
from basht.plan.profile import Profile
from basht.plan.simulator import Layout, stage_layout
from basht.states import ENDS_RUN, EventKind, TrialState

if TYPE_CHECKING:
    from basht.energy.monitor import EnergyMonitor
    from basht.experiment import PlanSpec
    from basht.store import StageRow, Store

log = logging.getLogger(__name__)

#: How often the executor looks at instances still starting while it waits for events.
STARTING_POLL_S = 0.1


class PlanExecutor(Executor):
    """Runs trials on the instances the plan gives each stage, with its GPUs per trial."""

    def __init__(
        self,
        spec: PlanSpec,
        threads_per_gpu: int = 1,
        *,
        store: Store | None = None,
        run_id: str | None = None,
        attempt: int = 1,
        clock: Callable[[], float] = time.time,
        time_scale: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not (0 < time_scale < float("inf")):
            raise BashtError(f"time_scale: expected a number > 0, got {time_scale!r}")
        job = spec.job
        self.spec = spec
        self.job = ShaJob(job.trials, job.min_budget, job.max_budget, job.eta)
        self.planned = tuple(spec.plan)  # as the run was given it
        self.plan = list(spec.plan)  # as it runs: re-planning changes the stages ahead
        self.threads_per_gpu = threads_per_gpu
        self.local = LocalExecutor(0, threads_per_gpu)
        self.provider = LocalProvider(self.local, spec.price.gpus)
        self.provider.check(self.plan)
        self.profile = plan_profile(spec) if spec.replan else None
        self.preprovision = spec.preprovision
        self._mean_startup_s = (
            sum(spec.profile.startup_s) / len(spec.profile.startup_s) if spec.profile else 0.0
        )
        waits = plan_delays(spec)  # in the plan's seconds, as its estimate's times are
        # The waits before the stages in this run's seconds: the plan's over the time scale.
        self.time_scale, self._sleep = time_scale, sleep
        self.delays_s = [wait / time_scale for wait in waits]
        ends = list(spec.estimate.stage_end_s) if spec.estimate else []
        self._expected_s = [
            b - a - wait for a, b, wait in zip([0.0, *ends], ends, waits, strict=False)
        ]
        self._reserve_at: float | None = None  # when to pre-provision the next stage's instances
        self._started: dict[int, tuple[float, int, int]] = {}  # trial -> (when, stage, GPUs)
        self._trial_times: list[tuple[int, int, float]] = []  # (stage, GPUs, seconds) that ended
        self._job_started: float | None = None
        self.cluster = Cluster(
            self.provider,
            plan_price(spec.price),
            self._record,
            clock,
            data_usd_per_instance=spec.price.data_usd_per_instance,
        )
        self.store, self.run_id, self.attempt, self.clock = store, run_id, attempt, clock
        self.stage: int | None = None
        self.layout: Layout | None = None
        self._placed: dict[int, tuple[int, Instance]] = {}  # trial -> (worker, instance)
        self._pending: list[TrialEvent] = []
        self._behind: dict[int, int] = {}  # trial -> target: heard there before an interruption
        self._last_end: float | None = None  # when the last running trial ended
        # Told the workers of each released instance (the energy monitor stops counting them).
        self.on_release: Callable[[tuple[int, ...]], None] | None = None

    def attach_monitor(self, monitor: EnergyMonitor) -> None:
        """A released instance's workers are no longer counted, idle or not."""
        self.on_release = lambda workers: [monitor.leave(w) for w in workers]

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Deploy: the first stage's instances, ready to take the workload. A resumed run starts
        with the instances of the stage it was in (the earlier stages' trials have ended)."""
        self.local.start()
        rows: Sequence[StageRow] = []  # a resumed run's stages so far
        if self.store is not None and self.run_id is not None and self.attempt > 1:
            rows = self.store.stages(self.run_id)
            self._behind = told_restarts(self.store, self.run_id)
        # The deadline counts from the first attempt's start, the time between attempts included.
        self._job_started = min((row.started_at for row in rows), default=self.clock())
        stage = max((row.stage for row in rows), default=0)
        replanned = None
        if self.profile is not None and stage > 0:
            # A resumed run plans its rest again from the time left, at the speed it last saw.
            speeds = [row.speed for row in rows if row.speed is not None]
            replanned = self._replan(stage, speeds[-1] if speeds else None)
        self._enter(stage, replanned, waited=bool(rows))  # a stage it was in had its wait

    def setup(self, ref: WorkloadRef) -> None:
        self.local.setup(ref)  # instances launched later set it up as they start

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop every worker (an interrupted trial's too), then release and bill every instance."""
        try:
            if self.stage is not None and self.store is not None:
                self._end_stage()
        finally:
            try:
                self.local.shutdown(timeout_s)
            finally:
                self.cluster.release_all()

    # -- the scheduler ----------------------------------------------------------------------

    def stage_of(self, task: TrialTask) -> int:
        try:
            return self.job.rungs.index(task.target_budget)  # type: ignore[arg-type]
        except ValueError:
            raise BashtError(
                f"trial {task.trial_id} trains to {task.target_budget} epochs, which is no stage "
                f"of the plan's job (rungs {list(self.job.rungs)})"
            ) from None

    def _enter(self, stage: int, replanned: Replan | None = None, waited: bool = False) -> None:
        if self.stage is not None:
            self._end_stage()
        wait_s = 0.0 if waited else self.delays_s[stage]
        if wait_s > 0:
            self._wait(stage, wait_s)
        started = self.clock()
        self._last_end = None
        # Deploy, and a stage after a wait, wait for their instances; other stages start on
        # those that are up.
        self.cluster.scale_to(self.plan[stage], stage, wait=self.stage is None or wait_s > 0)
        self.stage = stage
        self.layout = stage_layout(self.job.stages[stage], self.plan[stage], self.provider.gpus)
        self.cluster.check_starting()  # instances pre-provisioned for it and ready take trials now
        self._reserve_at = self._when_to_reserve(stage, started, replanned)
        if self.store is not None and self.run_id is not None:
            self.store.add_stage(
                self.run_id,
                self.attempt,
                stage=stage,
                instances=self.plan[stage],
                gpus_per_trial=self.layout.gpus_per_trial,
                slots=self.layout.slots,
                started_at=started,
                planned_instances=self.planned[stage],
                speed=None if replanned is None else replanned.speed,
                estimated_left_s=None if replanned is None else replanned.estimate.jct_s,
            )

    def _wait(self, stage: int, wait_s: float) -> None:
        """The plan's wait before `stage`: no instance is held (none is billed) until it ends."""
        self.cluster.scale_to(0, stage)
        log.info(
            "stage %d: waiting %.1f s before it starts (the plan's %.0f s at time scale %g), "
            "holding no instances",
            stage,
            wait_s,
            wait_s * self.time_scale,
            self.time_scale,
        )
        self._sleep(wait_s)

    def _end_stage(self) -> None:
        """The stage ended when its last trial did (or now, if one still runs)."""
        if self.store is not None and self.run_id is not None and self.stage is not None:
            ended = self.clock() if self._placed or self._last_end is None else self._last_end
            self.store.end_stage(self.run_id, self.stage, self.attempt, ended)

    def _barrier(self) -> None:
        """Wait until every trial of this stage has ended (their pauses are being written)."""
        while self._placed:
            for event in self.local.poll(1.0):
                if event.kind == EventKind.REPORT:
                    raise BashtError(
                        f"trial {event.trial_id} of stage {self.stage} still trains while the "
                        "next stage starts: the plan needs synchronous SHA (one bracket)"
                    )
                self._forget(event)
                self._pending.append(event)

    # -- the placement controller -----------------------------------------------------------

    def _per_instance(self) -> int:
        assert self.layout is not None
        return self.provider.gpus // self.layout.gpus_per_trial

    def _free(self, instance: Instance) -> int:
        used = sum(1 for _, held in self._placed.values() if held is instance)
        return self._per_instance() - used

    # -- pre-provisioning -------------------------------------------------------------------

    def _when_to_reserve(
        self, stage: int, started: float, replanned: Replan | None
    ) -> float | None:
        """When to request the next stage's new instances: when this stage should end (the
        plan's estimate, or the re-plan's) less the mean start-up; None if none are new."""
        if not self.preprovision or stage + 1 >= len(self.plan):
            return None
        if self.plan[stage + 1] <= self.plan[stage] or self.delays_s[stage + 1] > 0:
            return None  # none new, or all of them requested after the next stage's wait
        if replanned is not None:
            estimate = replanned.estimate  # timed from the barrier, the stage's wait included
            expected = estimate.stage_end_s[0] - (
                estimate.stage_start_s[0] if estimate.stage_start_s else 0.0
            )
        elif stage < len(self._expected_s):
            expected = self._expected_s[stage]
        else:
            return None
        return started + max(0.0, expected - self._mean_startup_s)

    def _maybe_reserve(self) -> None:
        if self._reserve_at is None or self.clock() < self._reserve_at or self.stage is None:
            return
        self._reserve_at = None
        cluster, ahead = self.cluster, self.stage + 1
        count = self.plan[ahead] - len(cluster.live) - len(cluster.starting) - len(cluster.reserved)
        if cluster.reserve(count, ahead):
            log.info(
                "stage %d: %d instance(s) pre-provisioned for stage %d", self.stage, count, ahead
            )

    @property
    def idle_workers(self) -> int:
        """Trials that can start now: free places of this stage's layout, on the instances that
        are up (the starting ones join as they become ready)."""
        self._maybe_reserve()
        if self.cluster.starting:
            self.cluster.check_starting()
        if any(trial in self._behind for trial in self._placed):
            return 0  # the algorithm may hand out the next stage: it waits until these catch up
        return sum(self._free(instance) for instance in self.cluster.live)

    def submit(self, task: TrialTask) -> int:
        stage = self.stage_of(task)
        # A later stage's trial waits at the barrier; an earlier stage's (a resumed run's
        # restart) runs on the stage's cluster as it is.
        if self.stage is None or stage > self.stage:
            self._barrier()
            replanned = self._replan(stage) if self.profile is not None and stage > 0 else None
            self._enter(stage, replanned)
        assert self.layout is not None
        with_room = [i for i in self.cluster.live if self._free(i) > 0]
        if not with_room:
            raise BashtError("no free place on the cluster")
        instance = min(with_room, key=lambda i: (self._free(i), i.number))
        busy = {worker for worker, _ in self._placed.values()}
        worker = next(w for w in instance.workers if w not in busy)
        threads = self.layout.gpus_per_trial * self.threads_per_gpu
        self.local.submit(replace(task, threads=threads), worker=worker)
        self._placed[task.trial_id] = (worker, instance)
        self._started[task.trial_id] = (self.clock(), stage, self.layout.gpus_per_trial)
        return worker

    def _forget(self, event: TrialEvent) -> None:
        if event.kind == EventKind.REPORT and event.epoch >= self._behind.get(
            event.trial_id, event.epoch
        ):
            self._behind.pop(event.trial_id, None)  # caught up: what is left is its pause
        if event.kind in ENDS_RUN:
            self._behind.pop(event.trial_id, None)
            self._placed.pop(event.trial_id, None)
            started = self._started.pop(event.trial_id, None)
            if (
                started is not None and event.kind != EventKind.FAILED
            ):  # a crash says nothing of speed
                when, stage, gpus = started
                self._trial_times.append((stage, gpus, self.clock() - when))
            if not self._placed:
                self._last_end = self.clock()

    # -- re-planning ------------------------------------------------------------------------

    def _replan(self, stage: int, speed: float | None = None) -> Replan:
        """Plan the stages from `stage` on again, before the cluster scales for it: at the
        speed this attempt's trials showed (else `speed`, else the profile's own)."""
        assert self.profile is not None and self.spec.deadline_s is not None
        now = self.clock()
        started = self._job_started if self._job_started is not None else now
        live = [*self.cluster.live, *self.cluster.starting, *self.cluster.reserved]
        speed = observed_speed(self.profile, self._trial_times, self.job) or speed
        cap = min(
            self.spec.max_instances or default_max_instances(self.job, self.profile),
            self.provider.max_workers // self.provider.gpus,
        )
        result = replan(
            self.job,
            self.profile,
            stage,
            left_s=self.spec.deadline_s - (now - started),
            live_s=sorted((now - i.launched_at for i in live), reverse=True),
            speed=speed or 1.0,
            current=tuple(self.plan[stage:]),
            confidence=self.spec.confidence or "p95",
            max_instances=cap,
            runs=self.spec.runs,
            seed=self.spec.seed,
            preprovision=self.preprovision,
            objective=self.spec.objective,
            delays_s=self.delays_s[stage:],
        )
        before = " ".join(map(str, self.plan[stage:]))
        self.plan[stage:] = result.plan
        how = (
            f"stage {stage}: re-planned {before} -> {' '.join(map(str, result.plan))} "
            f"(trials took {result.speed:.2f}x the profile; estimated "
            f"{result.estimate.jct_s:.1f} s of {result.left_s:.1f} s left)"
        )
        if result.meets:
            log.info(how)
        else:
            log.warning(
                "%s: the deadline can no longer be met, the rest runs as fast as it can", how
            )
        return result

    # -- the rest is the local executor's ---------------------------------------------------

    def command(self, trial_id: int, command: str, path: str | None = None) -> None:
        self.local.command(trial_id, command, path)

    def abort(self, trial_id: int) -> None:
        """End a trial that no longer answers: its worker is killed and replaced, and its place
        on the instance is free again (the trial says nothing of the stage's speed)."""
        worker = self._placed.get(trial_id, (-1, None))[0]
        self.local.abort(trial_id)
        self._forget(TrialEvent(EventKind.FAILED, trial_id, worker))

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        if self._pending:
            events, self._pending = self._pending, []
            return events
        self._maybe_reserve()
        if self.cluster.starting:  # look again soon: an instance that is ready takes trials
            timeout_s = STARTING_POLL_S if timeout_s is None else min(timeout_s, STARTING_POLL_S)
        if self._reserve_at is not None:  # wake up in time to pre-provision
            until = max(0.0, self._reserve_at - self.clock())
            timeout_s = until if timeout_s is None else min(timeout_s, until)
        events = self.local.poll(timeout_s)
        for event in events:
            self._forget(event)
        return events

    def pid_of(self, worker: int) -> int | None:
        return self.local.pid_of(worker)

    def worker_of(self, trial_id: int) -> int:
        return self.local.worker_of(trial_id)

    def first_idle(self) -> int | None:
        return self.local.first_idle()

    def run_test(self, task: TrialTask, budget: int, timeout_s: float | None = None) -> TrialEvent:
        return self.local.run_test(task, budget, timeout_s)

    # -- the record -------------------------------------------------------------------------

    def _record(self, instance: Instance, what: str) -> None:
        if what == "released" and self.on_release is not None:
            self.on_release(instance.workers)
        if self.store is None or self.run_id is None:
            return
        if what == "launched":
            self.store.add_instance(
                self.run_id,
                instance.number,
                instance.stage,
                instance.workers,
                instance.launched_at,
                attempt=self.attempt,
            )
        elif what == "starting":
            self.store.update_instance(
                self.run_id, instance.number, self.attempt, workers=list(instance.workers)
            )
        elif what == "ready":
            self.store.update_instance(
                self.run_id,
                instance.number,
                self.attempt,
                workers=list(instance.workers),
                ready_at=instance.ready_at,
            )
        else:
            self.store.update_instance(
                self.run_id, instance.number, self.attempt, released_at=instance.released_at
            )


def told_restarts(store: Store, run_id: str) -> dict[int, int]:
    """Trials an interrupted attempt left running after the algorithm heard them at their
    target budget (their pause was not recorded), each with that target. A resumed run trains
    them again while the algorithm, which has their results, may hand out the next stage: that
    stage's barrier cannot answer their reports, so it waits until they are past them."""
    told = {(d.trial, d.budget) for d in store.decisions(run_id) if d.op == "report"}
    return {
        t.number: t.target_budget
        for t in store.trials(
            run_id, states=(TrialState.RUNNING, TrialState.ABORTED, TrialState.PENDING)
        )
        if t.target_budget is not None and (t.number, t.target_budget) in told
    }


def plan_delays(spec: PlanSpec) -> list[float]:
    """The plan's wait before each stage, in the plan's seconds (its job's stages' `delay_s`;
    none where the file lists no stages)."""
    stages = spec.job.stages
    if len(stages) != len(spec.plan):
        return [0.0] * len(spec.plan)
    return [stage.delay_s for stage in stages]


def plan_profile(spec: PlanSpec) -> Profile:
    """The profile a plan file keeps (its measurements) at the plan's price: what re-planning
    estimates from. A hand-edited file fails here, in one line: a profile that is not whole,
    or runs and instances more than a re-planning step may simulate (`check_size`)."""
    measured = spec.profile
    if measured is None:
        raise BashtError("plan.replan: the plan keeps no profile (write it with basht plan --json)")
    if measured.power_w is not None and set(measured.power_w) != {"idle", "busy"}:
        raise BashtError("plan.profile.power_w: expected both idle and busy watts")
    try:
        profile = Profile(
            price=plan_price(spec.price),
            epoch_s={gpus: tuple(samples) for gpus, samples in measured.epoch_s.items()},
            startup_s=tuple(measured.startup_s),
            scaling=measured.scaling,
            source=measured.source,
            data_usd_per_instance=spec.price.data_usd_per_instance,
            overhead_s=tuple(measured.overhead_s),
            power_w=None
            if measured.power_w is None
            else (measured.power_w["idle"], measured.power_w["busy"]),
        )
    except BashtError as err:  # a plan file edited by hand: say where the problem is
        raise BashtError(f"plan.profile.{err}") from None
    job = ShaJob(spec.job.trials, spec.job.min_budget, spec.job.max_budget, spec.job.eta)
    try:
        check_size(
            job, profile, spec.max_instances or default_max_instances(job, profile), spec.runs
        )
    except BashtError as err:
        raise BashtError(f"plan.replan: {err}") from None
    return profile
