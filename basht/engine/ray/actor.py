"""The Ray side of the Ray executor: an actor that runs the local worker's trial loop on any node.

The actor hosts the same `_Worker` as a local worker process, talking to it through two queues
instead of a pipe, so a trial behaves the same on Ray as on the local pool. Checkpoints travel as
bytes through Ray's object store (the driver writes them), so a node needs no filesystem shared
with the driver. Nothing here imports Ray: the executor wraps `TrialActor` with `ray.remote`.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from basht.engine.checkpoints import write_bytes
from basht.engine.messages import TrialEvent, TrialTask, WorkloadRef
from basht.engine.threads import limit_threads
from basht.engine.worker import _Worker
from basht.states import EventKind
from basht.workloads import Resources

_JOIN_TIMEOUT_S = 30.0


class _Pipe:
    """Stands in for the worker's end of a pipe: events go out on one queue, commands come in on
    the other, so the driver can answer a report while the trial thread waits for it."""

    def __init__(self) -> None:
        self.events: queue.Queue[TrialEvent] = queue.Queue()
        self.commands: queue.Queue[tuple[Any, ...]] = queue.Queue()

    def send(self, event: TrialEvent) -> None:
        self.events.put(event)

    def recv(self) -> tuple[Any, ...]:
        return self.commands.get()


class _DeviceWorker(_Worker):
    """A worker whose trials see the device Ray gave the actor (a GPU share, or the CPU)."""

    def __init__(self, index: int, pipe: _Pipe, threads: int, device: str):
        super().__init__(index, pipe, threads)  # type: ignore[arg-type]
        self.device = device

    def _resources(self, task: TrialTask) -> Resources:
        resources = super()._resources(task)
        if self.device == "cpu":
            return resources
        # Fluid names the devices it gave the trial (cuda:0, cuda:1...: Ray shows the actor only
        # its own); otherwise the trial trains on the device Ray gave the actor.
        device = task.devices[0] if task.devices else self.device
        return dataclasses.replace(resources, accelerator="gpu", device=device)


class Placed(NamedTuple):
    """Where a worker actor runs: its process, Ray node, `process_view` and the GPUs Ray gave it
    (their ids on that node, as NVML numbers them there), and why its set-up failed, if it did."""

    pid: int
    node_id: str
    view: str
    gpus: tuple[str, ...]
    error: str | None


def process_view() -> str:
    """Which processes this one can read: two processes with the same view (one kernel boot,
    one PID namespace) see each other's CPU times, so one sampler can attribute both."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:  # no procfs (macOS): one host, one view
        return socket.gethostname()


def machine_of(view: str | None) -> str | None:
    """The machine (kernel boot) of a `process_view`: processes with another view on the same
    machine read the same energy counters."""
    return view.split(" ")[0] if view else None


def _scratch_dir(index: int) -> Path:
    """Under the node's Ray temp folder, so what a killed actor leaves goes with Ray's session."""
    import ray

    try:
        root = Path(ray.get_runtime_context().get_temp_dir())
    except AttributeError:  # a Ray without get_temp_dir
        root = Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix=f"basht-worker-{index}-", dir=root))


class TrialActor:
    """One persistent worker: runs one trial at a time, epoch by epoch, on the driver's commands."""

    def __init__(self, index: int, threads: int, device: str = "cpu"):
        limit_threads(threads)
        self.index = index
        self._pipe = _Pipe()
        self._worker = _DeviceWorker(index, self._pipe, threads, device)
        self._scratch = _scratch_dir(index)
        self._outbox: dict[str, str] = {}  # a checkpoint written here -> the driver's path for it
        self._thread: threading.Thread | None = None
        self._runs = 0

    def prepare(self, ref: WorkloadRef | None) -> Placed:
        """Where the actor runs, after setting up `ref` if given."""
        import ray

        error = self._worker.setup(ref) if ref is not None else None
        return Placed(
            os.getpid(),
            ray.get_runtime_context().get_node_id(),
            process_view(),
            tuple(str(g) for g in ray.get_gpu_ids()),
            error,
        )

    def run(self, task: TrialTask, state: bytes | None) -> None:
        """Start a trial (from `state`, the bytes of its checkpoint, when it resumes)."""
        self._start(self._worker.run, task, state)

    def test(self, task: TrialTask, budget: int, state: bytes | None) -> None:
        self._start(lambda t: self._worker.test(t, budget), task, state)

    def command(self, command: str, path: str | None, *rest: Any) -> None:
        """Answer the waiting report; a state to save is written here and shipped with the event."""
        local = None
        if path:
            local = str(self._scratch / Path(path).name)
            self._outbox[local] = path
        self._pipe.commands.put((command, local, *rest))

    def events(self) -> list[tuple[TrialEvent, bytes | None]]:
        """Wait for the next event, then take every one already queued, each with its state."""
        out = [self._pipe.events.get()]
        while True:
            try:
                out.append(self._pipe.events.get_nowait())
            except queue.Empty:
                return [self._ship(event) for event in out]

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _ship(self, event: TrialEvent) -> tuple[TrialEvent, bytes | None]:
        if not event.path or event.path not in self._outbox:
            return event, None
        local = Path(event.path)
        state = local.read_bytes()
        local.unlink()
        return dataclasses.replace(event, path=self._outbox.pop(event.path)), state

    def _local(self, task: TrialTask, state: bytes | None) -> TrialTask:
        """The task, resuming from a file of this node's own."""
        if state is None:
            return dataclasses.replace(task, resume_from=None)
        self._runs += 1
        path = self._scratch / f"resume-{task.trial_id:06d}-{self._runs}.pkl"
        write_bytes(path, state)
        return dataclasses.replace(task, resume_from=str(path))

    def _start(
        self, body: Callable[[TrialTask], None], task: TrialTask, state: bytes | None
    ) -> None:
        if self._thread is not None:
            # The last trial has sent its end, so its thread is returning: the next one waits.
            self._thread.join(_JOIN_TIMEOUT_S)
            if self._thread.is_alive():
                error = f"worker {self.index} still runs trial {self._thread.name}"
                self._pipe.send(
                    TrialEvent(EventKind.FAILED, task.trial_id, self.index, error=error)
                )
                return
        task = self._local(task, state)

        def main() -> None:
            try:
                body(task)
            finally:
                if task.resume_from:
                    Path(task.resume_from).unlink(missing_ok=True)

        self._thread = threading.Thread(target=main, name=str(task.trial_id), daemon=True)
        self._thread.start()
