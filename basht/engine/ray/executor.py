"""The Ray executor: trials as Ray actors, on a local Ray started by deploy or an existing cluster.

Each worker is a persistent actor (`TrialActor`, the local worker's trial loop) in a placement group
of its own, `STRICT_PACK`, so what a trial holds stays on one node. The store stays on the driver:
actors send events and checkpoint bytes back through Ray, and the driver writes the checkpoints.

A lost actor or node does not fail its trial: the trial goes back to a queue and runs again from
the checkpoint it started from, on the next free worker. Epochs the driver has already heard are
replayed without being reported again, and the driver's answer to the last one is applied where
the replay reaches it, so the Tuner never notices. A replacement actor is started for the lost one
and waits for room on the cluster.

With `meters`, a worker whose process the driver cannot read (another machine, another PID
namespace) has its trials metered on its own node (`ray_meter`). `nodes` keeps which nodes the
cluster had, from when to when (`ray_nodes`): what the run's bill counts.

With `scheduler="fluid"` each node's capacity is reserved once for the run instead, the workers
live inside those reservations, spread over the nodes, and Basht's plan sets every trial's width
on its node (`ray/fluid.py` says why); a trial never spans nodes. The plan is made again whenever a
trial starts or ends and whenever a node joins or leaves.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from basht.engine.base import Executor
from basht.engine.checkpoints import read_bytes, write_bytes
from basht.engine.messages import (
    CONTINUE,
    PAUSE,
    TrialEvent,
    TrialTask,
    WorkloadRef,
    await_test,
)
from basht.engine.ray.actor import TrialActor, machine_of, process_view
from basht.engine.ray.fluid import ClusterPlan, NodePlan, gpu_devices, release, reserve
from basht.engine.ray.meter import NodeMeters
from basht.engine.ray.nodes import NodeLedger
from basht.engine.ray.session import RaySession
from basht.errors import BashtError
from basht.states import Command, EventKind
from basht.workloads.base import check_share

if TYPE_CHECKING:
    from basht.energy.monitor import EnergyMonitor

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 300.0
# A trial whose worker is lost this often is failed: past this it is more likely the trial that
# kills its workers (a crash in native code, memory) than the nodes that die under it.
_MAX_LOSSES = 3
# A worker that fails to start this often in a row fails the run (its constructor crashes); fewer
# are nodes that died under a fresh actor before Ray noticed, and worth another try.
_MAX_START_FAILURES = 5
# Calls an actor serves at once: the blocking `events`, plus `command`, `run` and `prepare`.
_ACTOR_CONCURRENCY = 4


@dataclass
class _Job:
    """A trial (or the test run) owed to the driver, with what the driver has heard of it."""

    task: TrialTask
    kind: str  # "run" or "test"
    budget: int = 0  # epochs to train before testing (test runs without a checkpoint)
    state: bytes | None = None  # the checkpoint it starts from
    forwarded: int = 0  # the last epoch reported to the driver
    heard: bool = False  # whether any report reached the driver
    answer: tuple[str, str | None] | None = None  # the driver's answer to `forwarded`
    awaiting: bool = False  # the actor waits for that answer now
    losses: int = 0
    move_to: float | None = None  # fluid on GPUs: the width it moves to, checkpointing now


@dataclass
class _Slot:
    """One worker: its actor and placement group, and the call that tells when it is ready."""

    index: int
    actor: Any = None
    group: Any = None
    ready: Any = None  # the pending `prepare` call while the actor starts
    events: Any = None  # the pending `events` call while it runs
    job: _Job | None = None
    pid: int | None = None
    node_id: str | None = None
    view: str | None = None  # its `process_view`: the driver reads its process if they match
    gpus: tuple[str, ...] = ()  # the ids of the GPUs Ray gave it on its node
    failed_starts: int = 0
    home: str | None = None  # fluid: the node whose reservation it lives in (None: no room yet)
    gpu_width: float = 0.0  # fluid on GPUs: the GPUs its actor holds
    owed: bool = False  # `job` is to be sent to the actor once it is ready

    @property
    def idle(self) -> bool:
        return self.actor is not None and self.ready is None and self.job is None


class RayExecutor(Executor):
    """Runs trials on `workers` Ray actors of `cpus_per_worker` CPUs each (and a GPU share).

    Without `address` it starts a Ray of its own on this machine (127.0.0.1 only) sized to the
    workers, and removes it and its temp folder on `shutdown`; with one it joins that cluster.

    `scheduler="fluid"` packs the trials onto every node's CPUs (GPUs on GPU runs) instead:
    widths at most `max_width`, on GPUs at least `min_width` of a device (an equal split of the
    cluster's GPUs by default).
    """

    def __init__(
        self,
        workers: int,
        cpus_per_worker: int = 1,
        *,
        accelerator: str = "cpu",
        memory_per_worker_mb: int = 0,
        address: str | None = None,
        start_timeout_s: float = _START_TIMEOUT_S,
        meters: NodeMeters | None = None,
        nodes: NodeLedger | None = None,
        scheduler: str = "fifo",
        max_width: float | None = None,
        min_width: float | None = None,
    ):
        if scheduler not in ("fifo", "fluid"):
            raise BashtError(f"engine.scheduler: expected fifo or fluid, got {scheduler!r}")
        self.scheduler, self.max_width, self.min_width = scheduler, max_width, min_width
        self._fluid: ClusterPlan | None = None  # the plan, from `start` on (fluid)
        self._unbalanced = False  # fluid: some node holds more workers than its share
        #: (time, trial, width) each time a trial's width changes, 0 when it leaves its worker:
        #: what each trial held, when (a benchmark's allocated utilisation).
        self.allocation: list[tuple[float, int, float]] = []
        self.workers, self.cpus_per_worker = workers, cpus_per_worker
        self.meters = meters
        self.nodes = nodes if nodes is not None else NodeLedger()
        self._view = process_view()
        self.accelerator, self.memory_per_worker_mb = accelerator, memory_per_worker_mb
        self.address, self.start_timeout_s = address, start_timeout_s
        self.gpus_per_worker = 0.0
        self._slots: list[_Slot] = []
        self._queue: list[_Job] = []
        self._setup_ref: WorkloadRef | None = None
        self._session = RaySession(address, workers * cpus_per_worker, accelerator == "gpu")
        self._actor_class: Any = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start or join Ray, then start every worker and wait until each is placed and ready."""
        ray = self._session.open()
        self.nodes.look(ray)
        self._actor_class = ray.remote(TrialActor)
        self._slots = [_Slot(i) for i in range(self.workers)]
        if self.scheduler == "fluid":
            self._fluid = self._cluster_plan(ray)
            self._sync_nodes()
            if not self._fluid.reservations:
                raise BashtError(
                    "no node of the Ray cluster has room for one worker "
                    f"(fluid reserves whole nodes; each worker needs {self._needs(_Slot(0))})"
                )
            waiting = sum(slot.home is None for slot in self._slots)
            if waiting:
                log.warning(
                    "the Ray cluster's nodes have room for %d of %d workers now; the others "
                    "start when a node with room joins",
                    self.workers - waiting,
                    self.workers,
                )
        else:
            self.gpus_per_worker = self._gpus_per_worker(ray)
            self._check_capacity(ray)
            for slot in self._slots:
                self._launch(slot)
        self._await_ready("start")
        self.nodes.look(ray)  # those that joined for the workers
        self.start_meters()

    def attach_monitor(self, monitor: EnergyMonitor) -> None:
        """The monitor pulls the energy of nodes it cannot see from this executor's meters."""
        monitor.elsewhere = self.meters

    def start_meters(self) -> None:
        """A meter on each node with workers out of the driver's sight, sampling before any
        trial starts there (a worker started again later on a new node gets one on its way)."""
        if self.meters is None:
            return
        nodes: dict[str, tuple[int, str | None]] = {}
        for slot in self._slots:
            if slot.node_id is not None and not self._visible(slot):
                here, _ = nodes.get(slot.node_id, (0, None))
                nodes[slot.node_id] = (here + 1, machine_of(slot.view))
        self.meters.start(nodes, self.workers, self.start_timeout_s, machine_of(self._view))

    def _gpus_per_worker(self, ray: Any) -> float:
        """One GPU each, or an equal share of one when there are more workers than GPUs."""
        if self.accelerator != "gpu":
            return 0.0
        total = ray.cluster_resources().get("GPU", 0.0)
        if total <= 0:
            raise BashtError("accelerator: gpu, but the Ray cluster has no GPU")
        return 1.0 if total >= self.workers else 1.0 / math.ceil(self.workers / total)

    def _cluster_plan(self, ray: Any) -> ClusterPlan:
        """Fluid's plan for this cluster: on GPUs, widths in GPUs from `min_width` of one."""
        gpu = self.accelerator == "gpu"
        min_width = 1.0
        if gpu:
            total = ray.cluster_resources().get("GPU", 0.0)
            if total <= 0:
                raise BashtError("accelerator: gpu, but the Ray cluster has no GPU")
            share = self.min_width
            if share is None:  # an equal split of the cluster's GPUs, in shares that pack
                share = 1.0
                while self.workers * share > total + 1e-9 and share > 1 / 64:
                    share /= 2
            try:
                min_width = check_share(share)
            except ValueError as err:
                raise BashtError(f"engine.min_width: {err}") from None
        return ClusterPlan(
            accelerator=self.accelerator,
            cpus_per_worker=self.cpus_per_worker,
            memory_mb=self.memory_per_worker_mb,
            min_width=min_width,
            max_width=float(self.max_width) if self.max_width else math.inf,
        )

    @property
    def plans(self) -> list[NodePlan]:
        """Every plan fluid made, node by node, oldest first (empty under fifo)."""
        return list(self._fluid.history) if self._fluid is not None else []

    def capacity(self) -> dict[str, float]:
        """What fluid packs on each reserved node (cores, or GPUs), by node id."""
        return self._fluid.capacities() if self._fluid is not None else {}

    def _bundle(self) -> dict[str, float]:
        bundle = {"CPU": float(self.cpus_per_worker)}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker
        if self.memory_per_worker_mb:
            bundle["memory"] = float(self.memory_per_worker_mb * 2**20)
        return bundle

    def _check_capacity(self, ray: Any) -> None:
        """Fail now if no node can ever hold a worker, rather than wait for a placement forever."""
        bundle = self._bundle()
        room = sum(
            _fits(node["Resources"], bundle) for node in ray.nodes() if node.get("Alive", False)
        )
        if room == 0:
            raise BashtError(f"no node of the Ray cluster has room for one worker ({bundle})")
        if room < self.workers:
            log.warning(
                "the Ray cluster has room for %d of %d workers now; waiting up to %.0f s for more",
                room,
                self.workers,
                self.start_timeout_s,
            )

    def _launch(self, slot: _Slot) -> None:
        """Start the slot's actor: in a placement group of its own (fifo), or in its home node's
        reservation (fluid; a slot with no home waits, actor-less, for a node with room)."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        slot.events, slot.job, slot.pid, slot.node_id, slot.view = None, None, None, None, None
        slot.gpus, slot.owed, slot.ready = (), False, None
        needs = self._needs(slot)
        if self._fluid is None:
            slot.group = placement_group([self._bundle()], strategy="STRICT_PACK")
            group, threads = slot.group, self.cpus_per_worker
        else:
            slot.group = None  # the node's reservation is not the slot's to remove
            reservation = self._fluid.reservations.get(slot.home) if slot.home else None
            if reservation is None:
                slot.actor, slot.home = None, None
                return
            group, threads = reservation.group, int(needs.get("CPU", 1))
        options: dict[str, Any] = {
            "num_cpus": needs.get("CPU", 0),
            "num_gpus": needs.get("GPU", 0),
            "max_concurrency": _ACTOR_CONCURRENCY,
            "max_restarts": 0,  # a lost actor is replaced by the executor, its trial requeued
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=0
            ),
        }
        if "memory" in needs:
            options["memory"] = needs["memory"]
        device = "cuda" if needs.get("GPU") else "cpu"
        slot.actor = self._actor_class.options(**options).remote(slot.index, threads, device)
        slot.ready = slot.actor.prepare.remote(self._setup_ref)

    def _needs(self, slot: _Slot) -> dict[str, float]:
        """What the slot's actor takes: its own bundle (fifo), or from its node's reservation
        its minimum, 1 CPU, or on GPUs `cpus_per_worker` CPUs and its trial's GPUs, none while
        it waits for a trial (fluid)."""
        if self._fluid is None:
            return self._bundle()
        needs = {"CPU": 1.0}
        if self._fluid.gpu:
            needs = {"CPU": float(max(1, self.cpus_per_worker)), "GPU": slot.gpu_width}
        if self.memory_per_worker_mb:
            needs["memory"] = float(self.memory_per_worker_mb * 2**20)
        return needs

    def _await_ready(self, phase: str) -> None:
        import ray

        deadline = time.monotonic() + self.start_timeout_s
        while waiting := {s.ready: s for s in self._slots if s.ready is not None}:
            left = deadline - time.monotonic()
            done, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=max(0.0, left))
            for ref in done:
                self._on_ready(waiting[ref])
            if not done and left <= 0:
                raise BashtError(
                    f"{len(waiting)} of {self.workers} Ray workers were not ready within "
                    f"{self.start_timeout_s:.0f} s ({phase}); each needs "
                    f"{self._needs(next(iter(waiting.values())))}"
                )

    def _on_ready(self, slot: _Slot) -> None:
        import ray

        try:
            slot.pid, slot.node_id, slot.view, slot.gpus, error = ray.get(slot.ready)
        except _lost_errors() as err:
            slot.failed_starts += 1
            if slot.failed_starts >= _MAX_START_FAILURES:
                raise BashtError(f"Ray worker {slot.index} failed to start: {err}") from None
            log.warning("Ray worker %d was lost while starting; starting another", slot.index)
            owed = slot.job if slot.owed else None
            self._park(slot)
            if owed is not None:  # it was to run there: first in line for the next worker
                self._requeue(owed)
            return
        slot.ready, slot.failed_starts = None, 0
        self.nodes.placed(slot.index, slot.node_id)
        if error:
            ref = self._setup_ref
            name = ref.name if ref is not None else "?"
            raise BashtError(f"workload {name!r} failed to set up on worker {slot.index}: {error}")
        if slot.events is None:
            slot.events = slot.actor.events.remote()
        log.info("Ray worker %d ready on node %s (pid %s)", slot.index, slot.node_id, slot.pid)
        if slot.owed and slot.job is not None:
            slot.owed = False
            self._send_job(slot, slot.job)

    def setup(self, ref: WorkloadRef) -> None:
        """Hand the workload to every worker; each imports it and prepares its data once."""
        self._setup_ref = ref
        for slot in self._slots:
            if slot.ready is None and slot.actor is not None:
                slot.ready = slot.actor.prepare.remote(ref)
        self._await_ready("setup")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Remove the actors and their placement groups; stop a Ray of our own. Safe to call twice."""
        if self._slots:  # the nodes as they are at the end (those still there stay to the end)
            import ray

            self.nodes.look(ray)
            self._remove_workers(timeout_s)
        if self.meters is not None:
            self.meters.shutdown()
        self._session.close(timeout_s)

    def _remove_workers(self, timeout_s: float) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        # Only started actors: one still waiting for room would keep `close` waiting.
        live = [s.actor for s in self._slots if s.actor is not None and s.ready is None]
        with contextlib.suppress(Exception):  # lost actors cannot clean up, and need not
            ray.wait([a.close.remote() for a in live], num_returns=len(live), timeout=timeout_s)
        for slot in self._slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)
            with contextlib.suppress(Exception):
                remove_placement_group(slot.group)
        if self._fluid is not None:
            for reservation in self._fluid.reservations.values():
                release(reservation)
        self._slots, self._queue = [], []

    # -- trials -----------------------------------------------------------------------------

    @property
    def idle_workers(self) -> int:
        """Free workers not already promised to a requeued trial."""
        return max(0, sum(s.idle for s in self._slots) - len(self._queue))

    @property
    def running(self) -> list[int]:
        jobs = [s.job for s in self._slots if s.job is not None] + self._queue
        return [job.task.trial_id for job in jobs]

    def pid_of(self, worker: int) -> int | None:
        """The process id of worker `worker` if the driver can read its process (None if not)."""
        slot = self._slot_at(worker)
        return slot.pid if slot is not None and self._visible(slot) else None

    def metered_elsewhere(self, worker: int) -> bool:
        """Whether a meter on its node books worker `worker`'s trials, the driver unable to."""
        slot = self._slot_at(worker)
        return self.meters is not None and slot is not None and not self._visible(slot)

    def devices_of(self, worker: int) -> dict[str, float]:
        """The GPU components worker `worker` holds and its share of each (`{"gpu:1": 0.5}`),
        as Ray placed it; empty on CPU runs."""
        slot = self._slot_at(worker)
        if slot is None or not slot.gpus:
            return {}
        held = slot.gpu_width if self._fluid is not None else self.gpus_per_worker
        return {f"gpu:{g}": min(1.0, held) for g in slot.gpus}

    def _slot_at(self, worker: int) -> _Slot | None:
        return self._slots[worker] if 0 <= worker < len(self._slots) else None

    def _visible(self, slot: _Slot) -> bool:
        return slot.view is not None and slot.view == self._view

    def _meter(self, slot: _Slot, trial: int | None, kind: str = "trial") -> None:
        """Tell the meter on the slot's node what the slot runs now, if the driver cannot see."""
        if self.meters is None or slot.node_id is None or self._visible(slot):
            return
        here = sum(s.node_id == slot.node_id for s in self._slots)
        self.meters.assign(
            slot.index,
            slot.node_id,
            slot.pid,
            trial,
            kind,
            slots=self.workers,
            here=here,
            machine=machine_of(slot.view),
            devices=self.devices_of(slot.index),
        )

    def first_idle(self) -> int | None:
        """The worker the next `submit` or `run_test` will use."""
        idle = [s.index for s in self._slots if s.idle]
        if len(idle) <= len(self._queue):
            return None
        if self._fluid is not None and not self._queue:
            return self._idle_slot().index  # type: ignore[union-attr]
        return idle[len(self._queue)]

    def worker_of(self, trial_id: int) -> int:
        return next(s.index for s in self._slots if s.job and s.job.task.trial_id == trial_id)

    def submit(self, task: TrialTask) -> int:
        self._place_queued()
        slot = self._idle_slot()
        if slot is None:
            raise BashtError("no idle worker")
        self._dispatch(slot, _Job(task, "run", state=_read(task.resume_from)))
        return slot.index

    def _idle_slot(self) -> _Slot | None:
        """A free worker: the first (fifo), or one on the node where a trial gets the most
        capacity now (fluid)."""
        idle = [s for s in self._slots if s.idle]
        if self._fluid is None or not idle:
            return idle[0] if idle else None
        plan = self._fluid
        return max(idle, key=lambda s: plan.share_for_new(s.home))

    def command(self, trial_id: int, command: str, path: str | None = None) -> None:
        """Answer a trial's report: continue, stop, pause (checkpoint to `path`) or complete.

        Under fluid a trial told to continue takes its planned width with the answer: threads
        changed in place, or on GPUs a move to an actor of the new size (`_answer`)."""
        job, slot = self._find(trial_id)
        job.answer = (command, path)
        if slot is not None and job.awaiting:
            self._answer(slot, job)
        # Otherwise the trial was lost after the report: its replay applies the answer.

    def abort(self, trial_id: int) -> None:
        """End a trial that no longer answers (a step that never returns): its actor is killed
        and another started in its place, and nothing more is heard of the trial."""
        queued = next((job for job in self._queue if job.task.trial_id == trial_id), None)
        if queued is not None:  # waiting for a worker after a loss: it never starts again
            self._queue.remove(queued)
            self._left(trial_id)
            return
        slot = next((s for s in self._slots if s.job and s.job.task.trial_id == trial_id), None)
        if slot is None:
            return
        if self.meters is not None:
            self.meters.leave(slot.index)
        self._left(trial_id)
        self._park(slot)  # forgets the job and the actor's pending events

    def run_test(self, task: TrialTask, budget: int, timeout_s: float | None = None) -> TrialEvent:
        """Run the test phase for one configuration on a worker and wait for its result."""
        self._queue.append(_Job(task, "test", budget=budget, state=_read(task.resume_from)))
        return await_test(self.poll, task.trial_id, timeout_s)

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        """Events from any worker; waits up to `timeout_s` for the first one."""
        import ray

        self.nodes.look(ray, force=False)
        if self._fluid is not None:
            self._sync_nodes()
        self._place_queued()
        calls = {s.ready: s for s in self._slots if s.ready is not None}
        calls.update({s.events: s for s in self._slots if s.events is not None})
        if not calls:
            if self._fluid is not None:  # every worker waits for a node with room: wait a while
                time.sleep(min(timeout_s if timeout_s is not None else 1.0, 1.0))
            return []
        done, _ = ray.wait(list(calls), num_returns=1, timeout=timeout_s)
        if done:  # take whatever else is ready too
            done, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0)
        events: list[TrialEvent] = []
        for ref in done:
            slot = calls[ref]
            # By id: Ray Client hands back other objects for the same refs. A call of an actor
            # replaced meanwhile (a fluid move, a worker moved to another node) is neither.
            if _same(ref, slot.ready):
                self._on_ready(slot)
            elif _same(ref, slot.events):
                events.extend(self._on_events(slot))
        self._place_queued()
        return events

    # -- inside ------------------------------------------------------------------------------

    def _find(self, trial_id: int) -> tuple[_Job, _Slot | None]:
        for slot in self._slots:
            if slot.job is not None and slot.job.task.trial_id == trial_id:
                return slot.job, slot
        for job in self._queue:
            if job.task.trial_id == trial_id:
                return job, None
        raise KeyError(trial_id)

    def _dispatch(self, slot: _Slot, job: _Job) -> None:
        slot.job = job
        if self._fluid is not None and not self._fit(slot, job):
            return  # its actor starts again at the trial's size, then takes it
        self._send_job(slot, job)

    def _send_job(self, slot: _Slot, job: _Job) -> None:
        self._meter(slot, job.task.trial_id, "trial" if job.kind == "run" else job.kind)
        if job.kind == "run":
            if self._fluid is None:  # fluid notes the width it plans (`_fit`)
                self.allocation.append((time.time(), job.task.trial_id, self.cpus_per_worker))
            slot.actor.run.remote(job.task, job.state)
        else:
            slot.actor.test.remote(job.task, job.budget, job.state)

    def _place_queued(self) -> None:
        while self._queue and (slot := self._idle_slot()):
            job = self._queue.pop(0)
            if job.losses:
                log.info("trial %d restarts on worker %d", job.task.trial_id, slot.index)
            self._dispatch(slot, job)

    def _requeue(self, job: _Job) -> None:
        """Put a trial that lost its worker first in line for the next one."""
        self._queue.insert(0, job)
        if job.kind == "run":
            self.allocation.append((time.time(), job.task.trial_id, 0.0))
            if self._fluid is not None:
                self._fluid.detach(job.task.trial_id)

    def _answer(self, slot: _Slot, job: _Job) -> None:
        assert job.answer is not None
        message: tuple[Any, ...] = job.answer
        if self._fluid is not None and job.kind == "run" and job.answer[0] == CONTINUE:
            message = self._resize(slot, job)
        slot.actor.command.remote(*message)
        job.awaiting = False

    # -- fluid -------------------------------------------------------------------------------

    def _fit(self, slot: _Slot, job: _Job) -> bool:
        """Plan a trial that starts on `slot` and give it its width: threads (CPU), or devices
        (GPU); the test run gets what its node has free (one GPU at most). False when the
        slot's actor holds other GPUs than that: it starts again at that size first."""
        plan = self._fluid
        assert plan is not None and slot.home is not None
        task = job.task
        if job.kind == "run":
            width = plan.arrive(task.trial_id, slot.home, task.target_budget, task.start_epoch)
            self.allocation.append((time.time(), task.trial_id, width))
        else:
            capacity = plan.reservations[slot.home].capacity
            running = sum(plan.planned.get(t, 0.0) for t in plan.by_node().get(slot.home, []))
            width = min(1.0, capacity) if plan.gpu else max(1.0, capacity - running)
        if not plan.gpu:
            job.task = replace(task, threads=int(width))
            return True
        devices, share = gpu_devices(width)
        job.task = replace(task, devices=devices, device_share=share)
        if slot.gpu_width == width and slot.actor is not None:
            return True
        slot.gpu_width = width
        self._relaunch(slot)
        slot.job, slot.owed = job, True
        return False

    def _park(self, slot: _Slot) -> None:
        """Start another actor for the slot; on GPUs one that holds none while it waits (an
        idle worker's GPUs would be missing from the plan, which counts running trials)."""
        slot.gpu_width = 0.0
        self._relaunch(slot)

    def _resize(self, slot: _Slot, job: _Job) -> tuple[Any, ...]:
        """The answer to a trial told to continue: with its new width if the plan changed it.

        On CPU the threads change in place from the next epoch. On GPU the actor cannot take
        other devices, so the trial checkpoints now and moves to an actor of its new size."""
        assert self._fluid is not None
        trial_id = job.task.trial_id
        planned = self._fluid.planned.get(trial_id)
        progress = self._fluid.progress.get(trial_id)
        if planned is None or progress is None or planned == progress.width:
            return (CONTINUE, None)
        if not self._fluid.gpu:
            self._fluid.applied(trial_id, planned)
            self.allocation.append((time.time(), trial_id, planned))
            return (CONTINUE, None, int(planned))
        job.move_to = planned
        return (PAUSE, _move_path(trial_id, job.forwarded))

    def _moved(self, slot: _Slot, job: _Job, event: TrialEvent, state: bytes | None) -> None:
        """A GPU trial checkpointed for its move: it goes on from there on an actor of its
        new size, in the same slot (the Tuner hears nothing of it but the new load)."""
        assert self._fluid is not None and job.move_to is not None
        trial_id = job.task.trial_id
        job.state, job.answer, job.awaiting = state, None, False
        job.task = replace(job.task, start_epoch=event.epoch, resume_from=None)
        width, job.move_to = job.move_to, None
        self._fluid.applied(trial_id, width)
        self.allocation.append((time.time(), trial_id, width))
        devices, share = gpu_devices(width)
        job.task = replace(job.task, devices=devices, device_share=share)
        log.info("trial %d moves to %g GPU(s) from epoch %d", trial_id, width, event.epoch)
        if self.meters is not None:
            self.meters.leave(slot.index)
        slot.gpu_width = width
        self._relaunch(slot)
        slot.job, slot.owed = job, True

    def _left(self, trial_id: int) -> None:
        """A trial is over on this executor: it holds nothing, and its node is planned without it."""
        self.allocation.append((time.time(), trial_id, 0.0))
        if self._fluid is not None and trial_id in self._fluid.progress:
            self._fluid.leave(trial_id)

    def _sync_nodes(self) -> None:
        """Reserve the nodes that joined, let go of those that left, and give the slots without
        a node one (idle slots move to a joined node when that spreads them better)."""
        assert self._fluid is not None
        plan = self._fluid
        changed = self._release_gone()
        for node in self.nodes.alive():
            node_id = node.node_id
            if node_id in plan.reservations:
                continue
            reservation = plan.reservation_for(node)
            if reservation is not None:
                reserve(reservation)
                plan.reservations[node_id] = reservation
                changed = True
        if changed or self._unbalanced or any(s.home is None for s in self._slots):
            self._rehome()

    def _release_gone(self) -> bool:
        """Let go of the reservations of nodes that left the cluster; True if any did."""
        assert self._fluid is not None
        plan = self._fluid
        alive = {node.node_id for node in self.nodes.alive()}
        gone = [n for n in plan.reservations if n not in alive]
        for node_id in gone:
            release(plan.reservations[node_id])
            for trial_id in plan.node_gone(node_id):
                self.allocation.append((time.time(), trial_id, 0.0))
            log.warning("Ray node %s left: its reservation is released", node_id)
        return bool(gone)

    def _rehome(self) -> None:
        assert self._fluid is not None
        plan = self._fluid
        counts = Counter(s.home for s in self._slots if s.home in plan.reservations)
        for slot in self._slots:
            if slot.home in plan.reservations or slot.job is not None:
                continue
            home = plan.home(counts)
            if home is None:
                break
            slot.home, counts[home] = home, counts[home] + 1
            self._relaunch(slot)
        # Then idle workers move from crowded nodes to roomier ones (one that joined, say); a
        # busy one moves once its trial is over.
        target = plan.spread(len(self._slots))
        for slot in self._slots:
            under = [n for n in target if counts[n] < target[n]]
            if not under or slot.home is None or counts[slot.home] <= target.get(slot.home, 0):
                continue
            if not slot.idle:
                continue
            counts[slot.home] -= 1
            slot.home = under[0]
            counts[slot.home] += 1
            log.info("Ray worker %d moves to node %s", slot.index, slot.home)
            self._relaunch(slot)
        self._unbalanced = any(counts[n] != target[n] for n in target)

    def _on_events(self, slot: _Slot) -> list[TrialEvent]:
        import ray

        ref, slot.events = slot.events, None
        try:
            batch = ray.get(ref)
        except _lost_errors() as err:
            return self._lost(slot, err)
        slot.events = slot.actor.events.remote()
        events: list[TrialEvent] = []
        for event, state in batch:
            events.extend(self._on_event(slot, event, state))
        if self._fluid is not None and self._unbalanced and slot.idle:
            self._rehome()  # a worker just freed may belong on a roomier node
        return events

    def _on_event(self, slot: _Slot, event: TrialEvent, state: bytes | None) -> list[TrialEvent]:
        job = slot.job
        if job is None or event.trial_id != job.task.trial_id:
            log.warning(
                "worker %d sent an event for trial %d it does not run", slot.index, event.trial_id
            )
            return []
        if event.kind == EventKind.LOADED:
            return [event]
        if event.kind == EventKind.REPORT:
            return self._on_report(slot, job, event)
        moving = job.move_to is not None and event.kind == EventKind.PAUSED
        if moving and event.path == _move_path(job.task.trial_id, job.forwarded):
            self._moved(slot, job, event, state)
            return []
        slot.job = None  # the trial left the worker
        self._meter(slot, None)
        if job.kind == "run":
            self._left(job.task.trial_id)
        if state is not None and event.path:
            write_bytes(event.path, state)
        if self._fluid is not None and slot.gpu_width:
            self._park(slot)  # its GPUs go back to the node's reservation
        return [event]

    def _on_report(self, slot: _Slot, job: _Job, event: TrialEvent) -> list[TrialEvent]:
        if self._fluid is not None:
            self._fluid.report(job.task.trial_id, event.epoch, event.train_s + event.validate_s)
        replay = job.losses > 0 and job.heard and event.epoch <= job.forwarded
        if not replay:
            job.forwarded, job.heard, job.answer, job.awaiting = event.epoch, True, None, True
            return [event]
        if event.epoch < job.forwarded:
            slot.actor.command.remote(CONTINUE, None)  # heard before the loss: not told again
        elif job.answer is not None:
            self._answer(slot, job)  # where the trial was lost: answer as the driver did
        else:
            job.awaiting = True  # the driver's answer is still to come
        return []

    def _lost(self, slot: _Slot, err: BaseException) -> list[TrialEvent]:
        """A worker's actor or node is gone: requeue its trial and start another actor."""
        reason = " ".join(str(err).split())[:300]
        log.warning("Ray worker %d (node %s) was lost: %s", slot.index, slot.node_id, reason)
        job, slot.job = slot.job, None
        if self.meters is not None:
            self.meters.leave(slot.index)
        events: list[TrialEvent] = []
        if job is not None:
            job.losses += 1
            job.awaiting = False
            trial_id = job.task.trial_id
            if job.losses >= _MAX_LOSSES:
                message = f"its Ray worker was lost {job.losses} times (last: {reason})"
                events.append(
                    TrialEvent(
                        EventKind.FAILED, trial_id, slot.index, error=message, at=time.time()
                    )
                )
            elif (ended := _settled(job, slot.index)) is not None:
                events.append(ended)
            else:
                start = job.task.start_epoch if job.kind == "run" else 0
                log.warning("trial %d goes back to the queue, from epoch %d", trial_id, start)
                self._requeue(job)
            if events and job.kind == "run":
                self._left(trial_id)
        if self._fluid is not None:  # a lost worker is often a lost node: know it before placing
            import ray

            self.nodes.look(ray)
            self._release_gone()
        self._park(slot)
        return events

    def _relaunch(self, slot: _Slot) -> None:
        """Start another actor in the slot's place (fluid: on its node while that is reserved,
        else on the node with most room, or none until a node with room joins)."""
        import ray
        from ray.util.placement_group import remove_placement_group

        with contextlib.suppress(Exception):
            ray.kill(slot.actor, no_restart=True)
        with contextlib.suppress(Exception):
            remove_placement_group(slot.group)
        plan = self._fluid
        if plan is not None and slot.home not in plan.reservations:
            others = Counter(s.home for s in self._slots if s is not slot and s.home)
            slot.home = plan.home(others)
        self._launch(slot)


def _settled(job: _Job, worker: int) -> TrialEvent | None:
    """The end of a lost trial that needs no replay: told to end with nothing left to save."""
    if job.kind != "run" or not job.heard or job.answer is None:
        return None
    command, path = job.answer
    if command == CONTINUE or path is not None:
        return None
    return TrialEvent(
        Command(command).ending, job.task.trial_id, worker, epoch=job.forwarded, at=time.time()
    )


def _same(ref: Any, other: Any) -> bool:
    return other is not None and ref == other


def _move_path(trial_id: int, epoch: int) -> str:
    """Where a GPU trial that moves checkpoints to: never written on the driver (the bytes go
    straight to its new actor); the name only tells the event apart."""
    return f"basht-move-{trial_id}-{epoch}.pkl"


def _lost_errors() -> tuple[type[BaseException], ...]:
    from ray.exceptions import ObjectLostError, RayActorError

    return (RayActorError, ObjectLostError)


def _fits(resources: dict[str, float], bundle: dict[str, float]) -> int:
    """How many bundles a node's resources hold."""
    return min(int(resources.get(k, 0.0) // v) for k, v in bundle.items() if v > 0)


def _read(path: str | None) -> bytes | None:
    return read_bytes(path) if path else None
