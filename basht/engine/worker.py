"""The body of a persistent worker process: runs one trial at a time, epoch by epoch, on command."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import signal
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from basht.engine.checkpoints import load_state, save_state
from basht.engine.messages import COMPLETE, CONTINUE, PAUSE, TrialEvent, TrialTask, WorkloadRef
from basht.engine.threads import limit_threads
from basht.states import Command, EventKind
from basht.workloads import Resources, StopTrial, is_function_workload, resolve_workload


def worker_main(
    index: int, conn: Connection, threads: int, memory_limit_mb: int | None = None
) -> None:
    """Serve commands until told to exit. SIGINT is left to the driver, which shuts workers down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_threads(threads)
    if memory_limit_mb is not None:
        limit_memory(memory_limit_mb)
    worker = _Worker(index, conn, threads)
    conn.send(("ready", index, os.getpid()))
    while True:
        try:
            _serve(worker, conn.recv())
        except (EOFError, OSError):
            # The driver is gone (killed, say): its pipe failed. Setup, trials and tests report
            # their own errors, so only the pipe's end up here; nobody is left to tell.
            return


def _serve(worker: _Worker, message: tuple[Any, ...]) -> None:
    command, conn = message[0], worker.conn
    if command == "exit":
        # Nothing is left to flush; skipping interpreter teardown saves seconds once torch and
        # scikit-learn are loaded, and undeploy is a measured phase.
        conn.close()
        os._exit(0)
    if command == "setup":
        conn.send(("setup", worker.index, worker.setup(message[1])))
    elif command == "run":
        worker.run(message[1])
    elif command == "test":
        worker.test(message[1], message[2])


def limit_memory(megabytes: int) -> None:
    """Cap this process's data memory (heap and anonymous maps, RLIMIT_DATA): an allocation past
    it raises MemoryError in the trial that made it, which fails with that reason."""
    import resource

    limit = megabytes * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def build_workload(ref: WorkloadRef) -> Any:
    """Instantiate a workload class, passing the experiment seed when its constructor takes one."""
    factory = resolve_workload(ref.name)
    return factory(**_with_seed(factory, ref))


def _with_seed(call: Any, ref: WorkloadRef) -> dict[str, Any]:
    params = dict(ref.params)
    if "seed" not in params and _takes_seed(call):
        params["seed"] = ref.experiment_seed
    return params


@functools.lru_cache(maxsize=64)
def _takes_seed(call: Any) -> bool:
    """Whether `call` accepts a `seed` keyword (asked once per workload, not once per trial)."""
    try:
        signature = inspect.signature(call)
    except (TypeError, ValueError):
        return False
    return "seed" in signature.parameters or any(
        p.kind is p.VAR_KEYWORD for p in signature.parameters.values()
    )


def resize(workload: Any, threads: int) -> None:
    """Give a running trial another thread count, between epochs and without a restart."""
    set_threads = getattr(workload, "set_threads", None)
    if callable(set_threads):
        set_threads(threads)
    else:
        limit_threads(threads)


def _hold(threads: int) -> None:
    """Start a trial at its own width: the process's thread pools may still hold the width an
    earlier trial was resized to (Fluid), which this trial's plan did not count on."""
    if os.environ.get("OMP_NUM_THREADS") != str(threads):
        limit_threads(threads)


def _close(workload: Any) -> None:
    """End what a workload holds outside this process (a command trial's process group)."""
    close = getattr(workload, "close", None)
    if callable(close):
        close()


def _reason(err: BaseException) -> str:
    where = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    place = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
    return f"{type(err).__name__}: {err}{place}"


class _Worker:
    def __init__(self, index: int, conn: Connection, threads: int):
        self.index, self.conn, self.threads = index, conn, threads
        self._segment: tuple[str, float] = ("load_s", time.perf_counter())
        self._current: Any = None  # the class workload of the trial under way

    def _send(self, kind: EventKind, task: TrialTask, **fields: Any) -> None:
        self.conn.send(TrialEvent(kind, task.trial_id, self.index, at=time.time(), **fields))

    def _resources(self, task: TrialTask) -> Resources:
        devices = task.devices
        return Resources(
            cpus=task.threads or self.threads,
            memory_mb=task.workload.memory_mb,
            seed=task.seed,
            accelerator="gpu" if devices else "cpu",
            device=devices[0] if devices else "cpu",
            devices=devices,
            device_share=task.device_share,
        )

    def _move(
        self,
        state: Any,
        task: TrialTask,
        epoch: int,
        placement: tuple[tuple[str, ...], float],
        start: float,
    ) -> tuple[Any, TrialTask]:
        """Restart a trial from its state on other devices (Fluid grew or shrank it).

        The workload keeps its global batch size over however many devices it gets, so the
        result does not depend on the move. Timed from `start` (the snapshot included) and
        reported as a load.
        """
        devices, share = placement
        task = dataclasses.replace(task, devices=tuple(devices), device_share=share)
        workload = build_workload(task.workload)
        workload.load(task.config, self._resources(task))
        workload.load_state_dict(state)
        self._send(EventKind.LOADED, task, load_s=time.perf_counter() - start, epoch=epoch)
        return workload, task

    def setup(self, ref: WorkloadRef) -> str | None:
        """Import the workload and let it prepare shared data once per worker (the setup phase)."""
        try:
            factory = resolve_workload(ref.name)
            prepare = getattr(factory, "prepare", None)
            if callable(prepare):
                prepare(**_with_seed(prepare, ref))
        except Exception as err:  # reported to the driver, which fails the phase
            return _reason(err)
        return None

    def run(self, task: TrialTask) -> None:
        # The segment under way (a load, or an epoch's training and validation) and when it
        # began: a failure's unfinished segment counts in the trial's time (Table 2's d_i).
        self._segment = ("load_s", time.perf_counter())
        try:
            _hold(task.threads or self.threads)
            factory = resolve_workload(task.workload.name)
            if is_function_workload(factory):
                self._run_function(factory, task)
            else:
                self._run_class(task)
        except Exception as err:
            kind, start = self._segment
            self._send(
                EventKind.FAILED, task, error=_reason(err), **{kind: time.perf_counter() - start}
            )

    def _run_class(self, task: TrialTask) -> None:
        start = time.perf_counter()
        self._current = build_workload(task.workload)
        try:
            self._train_class(task, start)
        finally:  # whatever the workload holds outside this process ends with its trial
            _close(self._current)
            self._current = None

    def _train_class(self, task: TrialTask, start: float) -> None:
        workload = self._current
        workload.load(task.config, self._resources(task))
        if task.resume_from:
            workload.load_state_dict(load_state(task.resume_from))
        self._send(
            EventKind.LOADED, task, load_s=time.perf_counter() - start, epoch=task.start_epoch
        )
        epoch = task.start_epoch
        while True:
            start = time.perf_counter()
            self._segment = ("train_s", start)
            workload.train(1)
            train_s = time.perf_counter() - start
            metrics = workload.validate()
            validate_s = time.perf_counter() - start - train_s
            epoch += 1
            self._send(
                EventKind.REPORT,
                task,
                epoch=epoch,
                metrics=_floats(metrics),
                train_s=train_s,
                validate_s=validate_s,
            )
            command, path, *rest = self.conn.recv()
            if command == CONTINUE:
                change = rest[0] if rest else None
                if isinstance(change, int) and change:
                    resize(workload, change)  # Fluid: a new thread count from the next epoch on
                elif change:
                    start = time.perf_counter()
                    state = workload.state_dict()
                    # The last reference: its device memory is freed before the new replicas.
                    del workload
                    self._current = None
                    workload, task = self._move(state, task, epoch, change, start)
                    self._current = workload
                continue
            if command in (PAUSE, COMPLETE) and path:
                save_state(workload.state_dict(), path)
            self._send(Command(command).ending, task, epoch=epoch, path=path)
            return

    def _run_function(self, objective: Any, task: TrialTask) -> None:
        reporter = _FunctionReporter(self, task)
        with contextlib.suppress(StopTrial):
            objective(dict(task.config), reporter)
        self._send(reporter.outcome, task, epoch=reporter.epoch)

    def test(self, task: TrialTask, budget: int) -> None:
        """Test the best configuration: from its final checkpoint, or retrained to `budget`."""
        workload = None
        try:
            start = time.perf_counter()
            workload = build_workload(task.workload)
            workload.load(task.config, self._resources(task))
            if task.resume_from:
                workload.load_state_dict(load_state(task.resume_from))
            load_s = time.perf_counter() - start
            train_s = 0.0
            if not task.resume_from and budget:
                start = time.perf_counter()
                workload.train(budget)
                train_s = time.perf_counter() - start
            metrics = workload.test()
            self._send(
                EventKind.TESTED,
                task,
                epoch=budget,
                metrics=_floats(metrics),
                load_s=load_s,
                train_s=train_s,
            )
        except Exception as err:
            self._send(EventKind.FAILED, task, error=_reason(err))
        finally:
            if workload is not None:
                _close(workload)


class _FunctionReporter:
    """The `trial` a plain-function workload receives; each report waits for the tuner's word."""

    def __init__(self, worker: _Worker, task: TrialTask):
        self.worker, self.task = worker, task
        self.config = dict(task.config)
        self.budget = task.target_budget
        self.epoch = task.start_epoch
        self.outcome = EventKind.COMPLETED
        self._ended = False  # the tuner ended the trial at a report
        self._last = time.perf_counter()
        worker._segment = ("train_s", self._last)  # a function's time is all training

    def report(self, step: int, **metrics: float) -> None:
        if self._ended:
            # The function caught StopTrial and went on: the trial ended where it was told to,
            # and the tuner hears nothing of the steps it takes after.
            raise StopTrial(self.outcome)
        now = time.perf_counter()
        self.epoch = int(step)
        self.worker._send(
            EventKind.REPORT,
            self.task,
            epoch=self.epoch,
            metrics=_floats(metrics),
            train_s=now - self._last,
        )
        command, _, *rest = self.worker.conn.recv()
        self._last = time.perf_counter()
        self.worker._segment = ("train_s", self._last)
        if command == CONTINUE:
            if rest and isinstance(rest[0], int) and rest[0]:
                limit_threads(rest[0])  # Fluid: a new thread count from the next step on
            return
        # A function cannot be checkpointed: a paused one starts again from scratch if resumed.
        self.outcome = Command(command).ending
        self._ended = True
        raise StopTrial(self.outcome)


def _floats(metrics: dict[str, Any]) -> dict[str, float]:
    if not isinstance(metrics, dict):
        raise TypeError(f"validate() must return a dict of metrics, got {type(metrics).__name__}")
    return {str(k): float(v) for k, v in metrics.items()}
