"""Basht's own engine as a system under test: the Tuner on the local process pool."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from basht.bench.budgets import SpendingLimits
from basht.bench.carbon_schedule import carbon_gate, schedule_summary
from basht.bench.lifecycle import BestTrial, RunContext
from basht.bench.scored import TrialMeter, chosen_trial, last_metrics, objectives_of
from basht.energy.billing import RAY_NODES
from basht.engine import LocalExecutor, RayExecutor, TrialTask
from basht.engine.base import Executor
from basht.engine.ray.meter import NodeMeters
from basht.engine.ray.nodes import NodeLedger
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.plan.executor import PlanExecutor
from basht.states import EventKind, TrialState
from basht.store import CheckpointRow, Store, TrialRow
from basht.tune import Decision, Tuner, replay, trial_seed
from basht.tune.base import Algorithm
from basht.tune.factory import describe, make_algorithm
from basht.tune.tuner import RestoredTrial
from basht.workloads import can_checkpoint, is_function_workload, resolve_workload

log = logging.getLogger(__name__)


class NativeSystem:
    """deploy starts the workers, setup hands them the workload, run is the Tuner loop."""

    name = "native"

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        exp = ctx.experiment
        self.workload = exp.workload_ref()
        self.executor: Executor | None = None
        self.tuner: Tuner | None = None
        self._segment_start: dict[int, float] = {}

    def deploy(self) -> None:
        exp = self.ctx.experiment
        resources, engine = exp.resources, exp.engine
        if exp.plan is not None:  # RubberBand: an elastic cluster that follows the plan
            self.executor = PlanExecutor(
                exp.plan,
                resources.cpus_per_worker,
                store=self.ctx.store,
                run_id=self.ctx.run_id,
                attempt=self.ctx.attempt,
                time_scale=exp.schedule.time_scale,  # a carbon plan's waits, replayed
            )
        elif exp.executor == "ray":
            self.executor = _ray_executor(
                exp,
                metered=self.ctx.monitor is not None,
                on_nodes=record_ray_nodes(self.ctx.store, self.ctx.run_id, self.ctx.attempt),
            )
        else:
            self.executor = LocalExecutor(
                resources.workers,
                resources.cpus_per_worker,
                engine.scheduler,
                engine.max_width,
                devices=local_devices(exp) if resources.accelerator == "gpu" else None,
                min_share=engine.min_width,
                memory_limit_mb=resources.memory_per_worker_mb if resources.limit_memory else None,
            )
        self.executor.start()

    def setup(self) -> None:
        assert self.executor is not None
        self.can_checkpoint = can_checkpoint(self.workload)
        self.is_function = is_function_workload(resolve_workload(self.workload.name))
        self.executor.setup(self.workload)
        if self.ctx.monitor is not None:
            self.executor.attach_monitor(self.ctx.monitor)
        exp = self.ctx.experiment
        # A plan is for one bracket of all the job's trials, as `basht plan` planned it.
        self.algorithm = make_algorithm(exp, self.can_checkpoint, one_bracket=exp.plan is not None)
        self.ctx.store.update_run(self.ctx.run_id, algorithm=describe(exp, self.algorithm))
        self.objectives = objectives_of(exp)
        self.measure = TrialMeter(self.ctx, self.objectives) if self.objectives else None
        self.restored: tuple[list[RestoredTrial], int] | None = None
        if self.ctx.resume:
            self.restored = restore_from_store(self.ctx.store, self.ctx.run_id, self.algorithm)

    def run(self) -> None:
        assert self.executor is not None
        exp = self.ctx.experiment
        spending = SpendingLimits.of(self.ctx)
        gate = carbon_gate(self.ctx)
        self.tuner = Tuner(
            self.algorithm,
            self.executor,
            self.ctx.store,
            self.ctx.run_id,
            self.workload,
            checkpoint_dir=self.ctx.results_dir / "checkpoints",
            can_checkpoint=self.can_checkpoint,
            target=exp.search.target,
            time_budget_s=exp.search.time_budget_s,
            stop_grace_s=exp.search.stop_grace_s,
            limits=[spending] if spending is not None else (),  # none set: the loop does not ask
            on_update=self.ctx.on_update,
            on_trial=self._on_trial,
            objectives=self.objectives,
            measure=self.measure,
            gate=gate,
        )
        if self.restored is not None:
            self.tuner.restore(*self.restored)
        try:
            status = self.tuner.run()
        finally:
            if gate is not None:  # what the schedule did, also when the run was cut short
                self.ctx.notes["schedule"] = gate
        self.ctx.notes["stop_reason"] = status.stop_reason

    def _on_trial(self, trial_id: int, worker: int, event: str) -> None:
        """Tell the energy monitor which trial each worker runs, and the exporter what ended."""
        assert self.executor is not None
        running = event == "start"
        now = time.monotonic()
        if running:
            self._segment_start[trial_id] = now
        if self.ctx.monitor is not None:
            if running:
                self._attribute(worker, trial_id)
            else:
                self.ctx.monitor.assign(worker, None, None)
        if self.ctx.exporter is not None and not running:
            started = self._segment_start.pop(trial_id, None)
            self.ctx.exporter.trial_ended(event, None if started is None else now - started)

    def _attribute(self, worker: int, trial_id: int, kind: str = "trial") -> None:
        """Tell this node's energy monitor what `worker` runs: in a process it can read, or
        on another node (whose meter books it, if the executor keeps one there)."""
        assert self.executor is not None and self.ctx.monitor is not None
        monitor, metered = self.ctx.monitor, self.executor.metered_elsewhere(worker)
        if devices := self.executor.devices_of(worker):
            monitor.place(worker, devices)  # the GPUs Ray gave it, not worker mod GPU count
        monitor.assign(
            worker, self.executor.pid_of(worker), trial_id, kind, metered_elsewhere=metered
        )

    def collect_results(self) -> BestTrial:
        if self.objectives is not None:
            chosen = chosen_trial(self.ctx.store, self.ctx.run_id, self.objectives)
            return best_trial_from_store(self.ctx, number=chosen)
        return best_trial_from_store(self.ctx)

    def test(self, best: BestTrial) -> dict[str, float]:
        assert self.executor is not None
        best.check_testable(self.ctx)
        if self.is_function:
            return {}  # a plain-function workload has no test split of its own
        task = TrialTask(
            trial_id=best.trial_id,
            config=best.config,
            workload=self.workload,
            seed=trial_seed(self.workload.experiment_seed, best.trial_id),
            target_budget=best.budget,
            resume_from=best.checkpoint,
        )
        monitor = self.ctx.monitor
        # None when no worker is free yet (a Ray worker still being replaced): not attributed.
        worker = self.executor.first_idle() if monitor is not None else None
        if monitor is not None and worker is not None:
            # The test run is booked as its own kind: neither a trial nor idle.
            self._attribute(worker, best.trial_id, kind="test")
        try:
            event = self.executor.run_test(task, best.budget)
        finally:
            if monitor is not None and worker is not None:
                monitor.assign(worker, None, None)
        if event.kind == EventKind.FAILED:
            raise BashtError(f"testing trial {best.trial_id} failed: {event.error}")
        return event.metrics

    def collect_metrics(self) -> dict[str, Any]:
        gate = self.ctx.notes.get("schedule")
        if gate is not None:  # the energy accounts are final now: what shifting saved
            run = self.ctx.store.get_run(self.ctx.run_id)
            measurement = dict(run.measurement or {})
            measurement["schedule"] = schedule_summary(self.ctx, gate)
            self.ctx.store.update_run(self.ctx.run_id, measurement=measurement)
        return {}

    def undeploy(self) -> None:
        if self.executor is not None:
            self.executor.shutdown()
            self.executor = None


def local_devices(exp: Experiment) -> list[str]:
    """The devices GPU trials are placed on: as listed, or every CUDA device torch sees."""
    if exp.resources.devices:
        return list(exp.resources.devices)
    try:
        import torch

        count = torch.cuda.device_count()
    except ImportError:
        count = 0
    if not count:
        raise BashtError(
            "resources.accelerator: gpu, but no CUDA device is visible here; "
            "list resources.devices (such as cuda:0 and cuda:1) or use accelerator: cpu"
        )
    return [f"cuda:{i}" for i in range(count)]


def _ray_executor(
    exp: Experiment, metered: bool, on_nodes: Callable[[list[dict[str, Any]]], None] | None = None
) -> RayExecutor:
    """Trials as Ray actors, on a Ray of their own or the cluster at `ray.address`; when
    `metered`, with an energy meter on each node whose workers this machine cannot see.
    `on_nodes` is told the cluster's nodes when one joins, leaves or gets a worker (what OC bills)."""
    resources, engine = exp.resources, exp.engine
    return RayExecutor(
        resources.workers,
        resources.cpus_per_worker,
        accelerator=resources.accelerator,
        memory_per_worker_mb=resources.memory_per_worker_mb,
        address=exp.ray.address if exp.ray is not None else None,
        meters=NodeMeters(exp.measure, resources) if metered else None,
        nodes=NodeLedger(on_change=on_nodes),
        scheduler=engine.scheduler,
        max_width=engine.max_width,
        min_width=engine.min_width,
    )


def record_ray_nodes(
    store: Store, run_id: str, attempt: int
) -> Callable[[list[dict[str, Any]]], None]:
    """Keeps an attempt's Ray nodes in the run's `host` record (`billing.ray_nodes` reads them)."""

    def record(nodes: list[dict[str, Any]]) -> None:
        host = dict(store.get_run(run_id).host or {})
        earlier = [n for n in host.get(RAY_NODES, []) if n.get("attempt") != attempt]
        host[RAY_NODES] = earlier + [{**n, "attempt": attempt} for n in nodes]
        store.update_run(run_id, host=host)

    return record


def best_trial_from_store(ctx: RunContext, number: int | None = None) -> BestTrial:
    """The best completed trial by its final value (any reported trial if none completed), or
    trial `number` (chosen by the rule of several objectives)."""
    exp = ctx.experiment
    order = TrialRow.value.desc() if exp.search.mode == "max" else TrialRow.value.asc()
    with ctx.store.session() as s:
        base = select(TrialRow).where(TrialRow.run_id == ctx.run_id, TrialRow.value.is_not(None))
        if number is not None:
            base = base.where(TrialRow.number == number)
        row = s.scalars(
            base.where(TrialRow.state == TrialState.COMPLETED).order_by(order, TrialRow.number)
        ).first()
        if row is None:
            row = s.scalars(base.order_by(order, TrialRow.number)).first()
        if row is None:
            return BestTrial(None, None, None, 0)
        checkpoint = s.scalars(
            select(CheckpointRow.path)
            .where(CheckpointRow.trial_id == row.id, CheckpointRow.deleted.is_(False))
            .order_by(CheckpointRow.id.desc())
        ).first()
        return BestTrial(row.number, row.config, row.value, row.budget, checkpoint)


#: The states of an interrupted run's trials that start again when it resumes (from their last
#: checkpoint, or from scratch).
RESTARTED = frozenset({TrialState.ABORTED, TrialState.RUNNING, TrialState.PENDING})


def restore_from_store(
    store: Store, run_id: str, algorithm: Algorithm
) -> tuple[list[RestoredTrial], int]:
    """Replay the run's decision log into `algorithm` and gather its trials as the store has them."""
    decisions = store.decisions(run_id)
    replay(algorithm, decisions)
    told: dict[int, tuple[int, str | None]] = {}
    last_op: dict[int, str] = {}
    for d in decisions:
        last_op[d.trial] = d.op
        if d.op == "report" and d.budget is not None:
            told[d.trial] = (d.budget, d.result)
        elif d.op == "suggest" and d.result == "resume" and d.trial in told:
            # Resumed since (or promoted where it stood): a restart reporting that epoch again
            # goes on from it.
            told[d.trial] = (told[d.trial][0], Decision.CONTINUE.value)
    with store.session() as s:
        rows = s.scalars(select(TrialRow).where(TrialRow.run_id == run_id)).all()
        # The latest live checkpoint of each trial (later rows overwrite earlier ones).
        checkpoints = {
            trial_id: (path, epoch)
            for trial_id, path, epoch in s.execute(
                select(CheckpointRow.trial_id, CheckpointRow.path, CheckpointRow.epoch)
                .where(CheckpointRow.deleted.is_(False))
                .order_by(CheckpointRow.id)
            ).all()
        }
    states = {}
    for row in rows:
        checkpoint, epoch = checkpoints.get(row.id, (None, 0))
        # Promoted while its pause was being written, or paused by a carbon-aware schedule while
        # its algorithm said go on, then interrupted: it is owed a run.
        told_on = last_op.get(row.number) == "report" and told.get(row.number, (0, None))[1] == (
            Decision.CONTINUE.value
        )
        owed = row.state == TrialState.PAUSED and (last_op.get(row.number) == "suggest" or told_on)
        states[row.id] = state = TrialState.ABORTED if owed else TrialState(row.state)
        if state in RESTARTED:  # it trains again from `epoch`, and reports those epochs again
            store.drop_reports_after(row.id, epoch)
    measured = last_metrics(store, run_id)  # what the reports kept add up to
    restored = []
    for row in rows:
        budget, result = told.get(row.number, (0, None))
        checkpoint, epoch = checkpoints.get(row.id, (None, 0))
        time_s, metrics = measured.get(row.id, (0.0, None))
        restored.append(
            RestoredTrial(
                number=row.number,
                row_id=row.id,
                config=row.config,
                state=states[row.id],
                # A restarted trial continues from its checkpoint's epoch, or from scratch.
                budget=epoch,
                target_budget=row.target_budget,
                value=row.value,
                checkpoint=checkpoint,
                told=budget,
                told_decision=Decision(result) if result else None,
                time_s=time_s,
                load_s=row.load_s,
                metrics=metrics,
            )
        )
    return restored, max((d.seq for d in decisions), default=0)
