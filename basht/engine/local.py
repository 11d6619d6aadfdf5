"""The local executor: a pool of persistent worker processes, one trial each, on this machine."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from basht.engine.base import Executor
from basht.engine.devices import Placement, check_share, gpu_widths, place
from basht.engine.messages import CONTINUE, TrialEvent, TrialTask, WorkloadRef, await_test
from basht.engine.packing import Speedups, TrialProgress, fluid_widths, loads_of
from basht.engine.threads import thread_env
from basht.engine.worker import worker_main
from basht.errors import BashtError
from basht.states import EventKind
from basht.workloads import is_function_workload, resolve_workload

if TYPE_CHECKING:
    from basht.energy.monitor import EnergyMonitor

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 120.0
#: A worker that finds itself running the driver's script again exits with this code.
SCRIPT_RAN_AGAIN_EXIT = 3
_SCRIPT_RAN_AGAIN = (
    "it ran the script that started the run again (workers are spawned, and each imports the "
    'script): put the call of basht.run under `if __name__ == "__main__":`'
)


def refuse_in_a_starting_worker() -> None:
    """Stop a worker that is running its driver's script again, before it starts a run of its own.

    A spawned worker imports the driver's `__main__` script (as `__mp_main__`) before it starts;
    a script that calls `basht.run` at its top level, unguarded, would start a run in every
    worker. Such a worker exits at once, and the driver says why in one line.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            print(f"basht: a worker exits: {_SCRIPT_RAN_AGAIN}", file=sys.stderr)
            raise SystemExit(SCRIPT_RAN_AGAIN_EXIT)
        frame = frame.f_back


def start_leaving_ctrl_c(process: BaseProcess) -> None:
    """Start a worker process that leaves Ctrl-C to its driver from its first instruction.

    Ctrl-C reaches the whole process group, and a worker still importing would die of it with a
    traceback. Blocked while it starts, SIGINT is blocked in the child (the mask survives fork
    and exec), and a pending one reaches the driver when it unblocks: nothing is lost. The
    driver shuts its workers down itself. Starting multiprocessing's resource tracker unblocks
    SIGINT, so it is started first.
    """
    resource_tracker.ensure_running()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def device_share(workers: int, devices: int, min_share: float | None) -> float:
    """The smallest share of a device a trial gets: given, or an equal split of the devices."""
    if min_share is None:
        min_share = 1.0
        while workers * min_share > devices + 1e-9:
            min_share /= 2
    try:
        share = check_share(min_share)
    except ValueError as err:
        raise BashtError(f"engine.min_width: {err}") from None
    if workers * share > devices + 1e-9:
        raise BashtError(
            f"engine.min_width: {workers} workers x {share:g} GPU do not fit on {devices} devices"
        )
    return share


def _exit_reason(code: int | None) -> str:
    """How a process ended, in words: a negative exit code is the signal that ended it."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class _Load(TrialProgress):
    """What Fluid knows of a running trial (`TrialProgress`), and where a GPU trial runs now."""

    placement: Placement | None = None


@dataclass
class _Slot:
    index: int
    process: Any
    conn: Connection
    trial_id: int | None = None
    task: TrialTask | None = None


class LocalExecutor(Executor):
    """Runs trials in `workers` processes, each held to `threads` threads.

    Processes are started once (deploy) and reused for every trial, so a trial pays no interpreter
    or import start-up. They are spawned, not forked, so no thread pool or lock of the driver leaks
    into them. Every report waits for the driver's command (continue, stop, pause, complete), which
    is how the tuning algorithm acts at epoch boundaries.
    """

    def __init__(
        self,
        workers: int,
        threads: int = 1,
        scheduler: str = "fifo",
        max_width: float | None = None,
        devices: Sequence[str] | None = None,
        min_share: float | None = None,
        memory_limit_mb: int | None = None,
    ):
        """`scheduler="fluid"` re-plans the running trials' thread counts out of the pool's cores
        (workers × threads) whenever a trial starts or ends; each trial takes its new width at
        its next epoch, without a restart. `fifo` keeps `threads` each.

        With `devices` (accelerator device names, e.g. cuda:0 and cuda:1) widths are in devices
        instead: each trial gets at least `min_share` of one (a fraction 1/2^k shares a device;
        default: an equal share when there are more workers than devices), and `fluid` grows a
        trial over several whole devices by restarting it from its checkpoint at an epoch
        boundary, its global batch size kept. A trial that shrinks gives its devices back at its
        next epoch boundary; until then a newly placed trial shares them.

        `memory_limit_mb` caps each worker's data memory (`worker.limit_memory`).
        """
        self.memory_limit_mb = memory_limit_mb
        if scheduler not in ("fifo", "fluid"):
            raise BashtError(f"engine.scheduler: expected fifo or fluid, got {scheduler!r}")
        self.workers, self.threads, self.scheduler = workers, threads, scheduler
        self.devices = tuple(devices or ())
        if self.devices:
            self.min_share = device_share(workers, len(self.devices), min_share)
            self.capacity: float = float(len(self.devices))
        else:
            self.min_share = 1.0
            self.capacity = float(workers * threads)
        self.max_width = max_width or self.capacity
        self.resizable = True  # set from the workload at setup
        # Told (worker, {"gpu:0": share, ...}) whenever a worker's trial is placed or moved, so
        # GPU energy goes to the trials that hold each device.
        self.on_place: Callable[[int, dict[str, float]], None] | None = None
        self._loads: dict[int, _Load] = {}
        self._planned: dict[int, float] = {}
        self._placements: dict[int, Placement] = {}
        # width -> measured speed-ups over one thread (t1 / tw), from trials that ran at both
        self._speedups = Speedups()  # measured speed-up per width, over every trial
        self._ctx = mp.get_context("spawn")
        self._slots: list[_Slot] = []
        self._setup_ref: WorkloadRef | None = None
        self._pending: list[TrialEvent] = []
        self._next_index = workers  # a worker added later gets an index never used before
        # Workers started without waiting (`begin_workers`): not in the pool until set up. Each
        # index's state ("spawned", "setting_up", "ready") and when it was spawned.
        self._starting: list[_Slot] = []
        self._start_state: dict[int, tuple[str, float]] = {}

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker and wait until each has imported Basht and said it is ready."""
        refuse_in_a_starting_worker()
        self._slots = [self._spawn(i) for i in range(self.workers)]
        for slot in self._slots:
            self._await_ready(slot)

    def _spawn(self, index: int) -> _Slot:
        parent, child = self._ctx.Pipe()
        saved = {k: os.environ.get(k) for k in thread_env(self.threads)}
        os.environ.update(
            thread_env(self.threads)
        )  # read by math libraries when the child loads them
        try:
            process = self._ctx.Process(
                target=worker_main,
                args=(index, child, self.threads, self.memory_limit_mb),
                daemon=True,
                name=f"basht-worker-{index}",
            )
            start_leaving_ctrl_c(process)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        child.close()
        return _Slot(index, process, parent)

    def _await_ready(self, slot: _Slot) -> None:
        if not slot.conn.poll(_START_TIMEOUT_S):
            raise BashtError(f"worker {slot.index} did not start within {_START_TIMEOUT_S:.0f} s")
        try:
            message = slot.conn.recv()
        except EOFError:
            slot.process.join(5.0)
            if slot.process.exitcode == SCRIPT_RAN_AGAIN_EXIT:
                raise BashtError(
                    f"worker {slot.index} exited while starting: {_SCRIPT_RAN_AGAIN}"
                ) from None
            raise BashtError(
                f"worker {slot.index} exited while starting (exit code {slot.process.exitcode}); "
                "its error is printed above"
            ) from None
        if message[0] != "ready":
            raise BashtError(f"worker {slot.index} sent {message!r} instead of ready")

    def setup(self, ref: WorkloadRef) -> None:
        """Hand the workload to every worker; each imports it and prepares its data once."""
        self._setup_ref = ref
        # A trial that cannot checkpoint (a plain function) cannot move to other devices.
        self.resizable = not is_function_workload(resolve_workload(ref.name))
        self._set_up(self._slots, ref)

    def attach_monitor(self, monitor: EnergyMonitor) -> None:
        """GPU energy goes to the trials that hold each device: the monitor hears each placement."""
        self.on_place = monitor.place

    def _set_up(self, slots: Sequence[_Slot], ref: WorkloadRef) -> None:
        for slot in slots:
            slot.conn.send(("setup", ref))
        for slot in slots:
            self._setup_reply(slot, ref)

    @staticmethod
    def _setup_reply(slot: _Slot, ref: WorkloadRef) -> None:
        """Read a worker's answer to `setup`: one line if the workload failed there, or the
        worker died."""
        try:
            _, index, error = slot.conn.recv()
        except EOFError:
            index, error = slot.index, f"it exited (exit code {slot.process.exitcode})"
        if error:
            raise BashtError(f"workload {ref.name!r} failed to set up on worker {index}: {error}")

    def add_workers(self, count: int) -> list[int]:
        """Start `count` more workers (set up with the workload, if there is one yet), wait until
        they are, and return their indexes, which no earlier worker had: an elastic cluster
        grows at a barrier."""
        indexes = self.begin_workers(count)
        conns = [slot.conn for slot in self._starting if slot.index in set(indexes)]
        while not self.workers_ready(indexes):
            wait(conns, 1.0)  # until a worker says it started or set up (or a timeout to check)
        return indexes

    def begin_workers(self, count: int) -> list[int]:
        """Start `count` more workers without waiting for them, and return their indexes: an
        elastic cluster launches an instance while trials run on the others. `workers_ready`
        brings them into the pool once they have started and set the workload up."""
        fresh = [self._spawn(self._next_index + i) for i in range(count)]
        self._next_index += count
        spawned = time.monotonic()
        for slot in fresh:
            self._starting.append(slot)  # shut down with the rest, even if it never starts
            self._start_state[slot.index] = ("spawned", spawned)
        return [slot.index for slot in fresh]

    def workers_ready(self, indexes: Sequence[int]) -> bool:
        """Move the workers `begin_workers` started a step on, without waiting; True once all of
        `indexes` are set up and in the pool (then they take trials)."""
        chosen = set(indexes)
        wanted = [slot for slot in self._starting if slot.index in chosen]
        for slot in wanted:
            state, spawned = self._start_state[slot.index]
            if state == "spawned" and slot.conn.poll(0):
                self._await_ready(slot)  # reads and checks the message that is there
                state = "ready"
                if self._setup_ref is not None:
                    slot.conn.send(("setup", self._setup_ref))
                    state = "setting_up"
            elif state == "spawned" and time.monotonic() - spawned > _START_TIMEOUT_S:
                raise BashtError(
                    f"worker {slot.index} did not start within {_START_TIMEOUT_S:.0f} s"
                )
            elif state == "setting_up" and slot.conn.poll(0):
                assert self._setup_ref is not None  # only a set-up workload gets here
                self._setup_reply(slot, self._setup_ref)
                state = "ready"
            self._start_state[slot.index] = (state, spawned)
        if any(self._start_state[slot.index][0] != "ready" for slot in wanted):
            return False
        for slot in wanted:
            self._starting.remove(slot)
            del self._start_state[slot.index]
        self._slots.extend(wanted)
        self.workers = len(self._slots)
        return True

    def remove_workers(self, indexes: Sequence[int], timeout_s: float = 5.0) -> None:
        """Stop these idle workers (an elastic cluster shrinks at a barrier), also ones still
        starting."""
        chosen = set(indexes)
        leaving = [slot for slot in self._slots if slot.index in chosen]
        busy = [slot.index for slot in leaving if slot.trial_id is not None]
        if busy:
            raise BashtError(f"workers {busy} still run a trial; they cannot be removed")
        starting = [slot for slot in self._starting if slot.index in chosen]
        for slot in starting:
            self._starting.remove(slot)
            del self._start_state[slot.index]
        self._slots = [slot for slot in self._slots if slot not in leaving]
        self.workers = len(self._slots)
        self._stop(leaving + starting, timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Ask each worker to exit (those still starting too); kill what does not. Safe to call
        twice."""
        slots, self._slots = self._slots + self._starting, []
        self._starting, self._start_state = [], {}
        self._stop(slots, timeout_s)

    @staticmethod
    def _stop(slots: Sequence[_Slot], timeout_s: float) -> None:
        for slot in slots:
            with contextlib.suppress(OSError):
                slot.conn.send(("exit",))
        deadline = time.monotonic() + timeout_s
        for slot in slots:
            if slot.trial_id is not None:
                slot.process.kill()  # mid-trial: its state is already recorded as aborted
            slot.process.join(max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(1.0)
            slot.conn.close()

    # -- trials -----------------------------------------------------------------------------

    @property
    def idle_workers(self) -> int:
        return sum(slot.trial_id is None for slot in self._slots)

    @property
    def running(self) -> list[int]:
        return [slot.trial_id for slot in self._slots if slot.trial_id is not None]

    def pid_of(self, worker: int) -> int | None:
        """The process id of worker `worker` now (a replaced worker has a new one)."""
        for slot in self._slots:
            if slot.index == worker:
                return slot.process.pid
        return None

    def worker_of(self, trial_id: int) -> int:
        return self._slot_of(trial_id).index

    def submit(self, task: TrialTask, worker: int | None = None) -> int:
        """Start `task` on an idle worker (this one, if given); returns the worker's index."""
        idle = (s for s in self._slots if s.trial_id is None and worker in (None, s.index))
        slot = next(idle, None)
        if slot is None:
            raise BashtError("no idle worker" if worker is None else f"worker {worker} is busy")
        if self.devices:
            load = self._loads[task.trial_id] = _Load(task.target_budget, task.start_epoch)
            self._replan()
            placement = self._placements[task.trial_id]
            load.width, load.placement = placement.width, placement
            task = replace(task, devices=self._names(placement), device_share=placement.share)
            self._tell_placement(slot.index, placement)
        elif self.scheduler == "fluid":
            self._loads[task.trial_id] = _Load(task.target_budget, task.start_epoch)
            self._replan()
            width = int(self._planned.get(task.trial_id, 1))
            self._loads[task.trial_id].width = width
            task = replace(task, threads=width)
        slot.trial_id, slot.task = task.trial_id, task
        self._send(slot, ("run", task))  # a worker that died idle fails the trial at `poll`
        return slot.index

    def command(self, trial_id: int, command: str, path: str | None = None) -> None:
        """Answer a trial's report: continue, stop, pause (checkpoint to `path`) or complete.

        A trial whose worker died after it reported is not answered: `poll` fails it (it may
        already have, in the same batch of events as the report).
        """
        slot = next((s for s in self._slots if s.trial_id == trial_id), None)
        if slot is None:
            return
        load = self._loads.get(trial_id)
        if command == CONTINUE and load is not None and self.devices:
            placement = self._placements.get(trial_id)
            if placement is not None and placement != load.placement:
                load.width, load.placement = placement.width, placement
                change = (self._names(placement), placement.share)
                if self._send(slot, (command, path, change)):
                    self._tell_placement(slot.index, placement)
                return
        planned = self._planned.get(trial_id)
        if command == CONTINUE and load is not None and planned and planned != load.width:
            load.width = planned
            self._send(slot, (command, path, int(planned)))
            return
        self._send(slot, (command, path))

    @staticmethod
    def _send(slot: _Slot, message: tuple[Any, ...]) -> bool:
        """Send to a worker; False if it has died (its pipe is broken), which `poll` reports."""
        try:
            slot.conn.send(message)
        except OSError:
            return False
        return True

    def _names(self, placement: Placement) -> tuple[str, ...]:
        return tuple(self.devices[d] for d in placement.devices)

    def _tell_placement(self, worker: int, placement: Placement) -> None:
        if self.on_place is None:
            return
        components = {}
        for name in self._names(placement):
            kind, _, index = name.partition(":")
            if kind == "cuda":  # NVML numbers GPUs as CUDA does when nothing is masked
                components[f"gpu:{index or 0}"] = placement.share
        self.on_place(worker, components)

    def _replan(self) -> None:
        """Fluid widths for the running trials from their measured epochs (engine/packing.py)."""
        trials = loads_of(
            self._loads, self._speedups, self.min_share, float(self.max_width), probe=False
        )
        if not self.devices:
            self._planned = {t: int(w) for t, w in fluid_widths(trials, self.capacity).items()}
            return
        if self.scheduler == "fluid" and self.resizable:
            widths = gpu_widths(trials, len(self.devices), self.min_share)
        else:  # fifo, or trials that cannot move: the smallest share each, where they are
            widths = {t.trial_id: self.min_share for t in trials}
        current = {t: load.placement for t, load in self._loads.items() if load.placement}
        self._placements = place(widths, len(self.devices), current)

    def _observe(self, event: TrialEvent) -> None:
        load = self._loads.get(event.trial_id)
        if load is None:
            return
        if event.kind == EventKind.REPORT:
            load.epoch = event.epoch
            load.epoch_s[load.width] = event.train_s + event.validate_s
            self._speedups.observe(load)
        elif event.kind != EventKind.LOADED:
            del self._loads[event.trial_id]
            self._replan()

    def _slot_of(self, trial_id: int) -> _Slot:
        for slot in self._slots:
            if slot.trial_id == trial_id:
                return slot
        raise KeyError(trial_id)

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        """Events from any worker; waits up to `timeout_s` for the first one."""
        if self._pending:
            events, self._pending = self._pending, []
            return events
        by_conn = {slot.conn: slot for slot in self._slots}
        by_sentinel = {slot.process.sentinel: slot for slot in self._slots}
        ready = wait([*by_conn, *by_sentinel], timeout_s)
        events: list[TrialEvent] = []
        for item in ready:
            if item in by_conn:
                events.extend(self._drain(by_conn[item]))
        for item in ready:
            if item in by_sentinel:
                slot = by_sentinel[item]
                events.extend(self._drain(slot))
                events.extend(self._replace_dead(slot))
        return events

    def _drain(self, slot: _Slot) -> list[TrialEvent]:
        events = []
        try:
            while slot.conn.poll():
                event = slot.conn.recv()
                if event.kind not in (EventKind.LOADED, EventKind.REPORT):
                    slot.trial_id, slot.task = None, None
                if self._loads:
                    self._observe(event)
                events.append(event)
        except (EOFError, OSError):
            pass
        return events

    def _replace_dead(self, slot: _Slot) -> list[TrialEvent]:
        """A worker died (killed, out of memory, a crash in native code): fail its trial, respawn."""
        # Its sentinel can be ready a moment before the process can be reaped: wait for that, or
        # the exit code reads None.
        slot.process.join(5.0)
        how = _exit_reason(slot.process.exitcode)
        events = []
        if slot.trial_id is not None:
            events.append(
                TrialEvent(
                    EventKind.FAILED,
                    slot.trial_id,
                    slot.index,
                    at=time.time(),
                    error=f"worker process {slot.process.pid} died ({how})",
                )
            )
        log.warning("worker %d died (%s); starting a new one", slot.index, how)
        self._respawn(slot)
        if self._loads:
            for event in events:
                self._observe(event)
        return events

    def _respawn(self, slot: _Slot) -> None:
        """Put a fresh worker, set up with the workload, in the place of a dead one."""
        slot.conn.close()
        fresh = self._spawn(slot.index)
        self._await_ready(fresh)
        if self._setup_ref is not None:
            fresh.conn.send(("setup", self._setup_ref))
            fresh.conn.recv()
        self._slots[self._slots.index(slot)] = fresh

    def abort(self, trial_id: int) -> None:
        """End a trial that no longer answers (a step that never returns): its worker is killed
        and replaced, and nothing more is heard of the trial (one that already left its worker
        is left alone)."""
        slot = next((s for s in self._slots if s.trial_id == trial_id), None)
        if slot is None:
            return
        slot.process.kill()
        slot.process.join(5.0)
        if self._loads.pop(trial_id, None) is not None:
            self._replan()
        self._respawn(slot)

    def first_idle(self) -> int | None:
        """The worker the next `submit` or `run_test` will use."""
        return next((s.index for s in self._slots if s.trial_id is None), None)

    def run_test(self, task: TrialTask, budget: int, timeout_s: float | None = None) -> TrialEvent:
        """Run the test phase for one configuration on an idle worker and wait for its result."""
        slot = next((s for s in self._slots if s.trial_id is None), None)
        if slot is None:
            raise BashtError("no idle worker for the test phase")
        if self.devices and not task.devices:  # nothing else runs now: a whole device
            task = replace(task, devices=(self.devices[0],), device_share=1.0)
        slot.trial_id = task.trial_id
        self._send(slot, ("test", task, budget))
        return await_test(self.poll, task.trial_id, timeout_s)
