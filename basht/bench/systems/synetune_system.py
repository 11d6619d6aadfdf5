"""Syne Tune as a system under test: its `Tuner` with the local backend, one process per trial.

deploy imports Syne Tune and makes the run's private temporary folder; setup writes the trial
script (`synetune_worker`) and builds the `Tuner`: a `LocalBackend` running that script, the
scheduler `synetune_map` picks, `resources.workers` as `n_workers`, the stop criterion, and the
callbacks that record every trial; run is `Tuner.run()`, each trial a process of its own that
announces itself over the run's 127.0.0.1 channel and reports each epoch to Syne Tune; test
evaluates the best trial's saved model in a process of its own; undeploy ends every trial process
and removes the folder (Syne Tune's results, logs and the trials' folders).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from basht.bench.lifecycle import BestTrial, RunContext
from basht.bench.native import best_trial_from_store
from basht.bench.systems.channel import EventServer
from basht.bench.systems.messages import Started
from basht.bench.systems.peer import check_peer_experiment, require
from basht.bench.systems.recorder import TrialRecorder
from basht.engine.local import start_leaving_ctrl_c
from basht.errors import BashtError
from basht.tune import trial_seed
from basht.workloads import can_checkpoint, is_function_workload, resolve_workload

log = logging.getLogger(__name__)

#: How often the Tuner looks at its trials (their stdout, their processes) when it waits. Syne
#: Tune's default, 5 s, is meant for cloud backends; on one machine it would leave a worker idle
#: for seconds after every trial.
POLL_S = 0.1
#: A trial failing never ends the job (Syne Tune's default: the second failure does), as natively.
NO_FAILURE_LIMIT = 2**31


@contextlib.contextmanager
def _import_side_effects_undone() -> Iterator[None]:
    """Importing Syne Tune configures the root logger (`logging.basicConfig()` in its
    `report` module) and sets OMP_NUM_THREADS=1 for the whole process (its local backend):
    both are undone, so the runs after this one, of any system, see the process as it was."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    omp = os.environ.get("OMP_NUM_THREADS")
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp


@contextlib.contextmanager
def _quiet_syne_tune() -> Iterator[None]:
    """Syne Tune logs a warning per failed trial (the store records each in one line) and one
    for a keyword its own ASHA passes itself."""
    logger = logging.getLogger("syne_tune")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _without_summary() -> Iterator[None]:
    """Syne Tune's Tuner prints a summary of its trials when it ends; Basht's tables say it."""
    import syne_tune.tuner as st_tuner

    printer = st_tuner.print_best_metric_found
    st_tuner.print_best_metric_found = lambda *args, **kwargs: None
    try:
        yield
    finally:
        st_tuner.print_best_metric_found = printer


def _spaceless(path: str, what: str) -> None:
    """Syne Tune's LocalBackend builds each trial's command line by joining words with spaces
    and splitting it again."""
    if any(c.isspace() for c in path):
        raise BashtError(
            f"system: synetune cannot run with {what} {path!r}: Syne Tune's local backend "
            "splits a trial's command line at spaces"
        )


class SyneTuneSystem:
    """Syne Tune's Tuner and local backend, through the seven Basht phases."""

    name = "synetune"

    def __init__(self, ctx: RunContext):
        check_peer_experiment(ctx, self.name)
        self.ctx = ctx
        self.workload = ctx.experiment.workload_ref()
        self.recorder: TrialRecorder | None = None
        self.server: EventServer | None = None
        self.backend: Any = None
        self.keeper: Any = None
        self.tuner: Any = None
        self.folder: Path | None = None
        self._gate = threading.Lock()
        self._open = True

    def deploy(self) -> None:
        with _import_side_effects_undone():
            require("syne_tune", self.name)
            import syne_tune.backend  # noqa: F401  (the local backend's import sets OMP_...)
        _spaceless(sys.executable, "the Python at")
        # Syne Tune's files (its results, each trial's folder and logs): removed at undeploy.
        self.folder = Path(tempfile.mkdtemp(prefix="basht-synetune-"))
        _spaceless(str(self.folder), "the temporary folder")

    def setup(self) -> None:
        from syne_tune import Tuner

        from basht.bench.systems import synetune_map as sm
        from basht.bench.systems.synetune_events import (
            Bookkeeper,
            JobStop,
            LimitedScheduler,
            QuietLogger,
            RecorderCallback,
            RecordingBackend,
        )
        from basht.bench.systems.synetune_worker import TrialPlan, write_entry

        assert self.folder is not None
        exp, search = self.ctx.experiment, self.ctx.experiment.search
        self.can_checkpoint = can_checkpoint(self.workload)
        self.is_function = is_function_workload(resolve_workload(self.workload.name))
        self.recorder = TrialRecorder(
            self.ctx,
            exp.resources.workers,
            can_checkpoint=self.can_checkpoint,
            target_budget=search.max_budget,
        )
        self.server = EventServer(self._handle)
        space, codec = sm.config_space(exp)
        plan = TrialPlan(
            workload=self.workload,
            metric=search.metric,
            mode=search.mode,
            target=search.target,
            max_budget=search.max_budget,
            cpus=exp.resources.cpus_per_worker,
            codec=codec,
            address=self.server.address,
            authkey=self.server.authkey,
        )
        self.keeper = Bookkeeper(self.recorder, codec)
        self.backend = RecordingBackend(str(write_entry(self.folder, plan)), self.keeper)
        with _quiet_syne_tune():
            scheduler = sm.scheduler(exp, space)
        self.tuner = Tuner(
            trial_backend=self.backend,
            scheduler=LimitedScheduler(scheduler, search.max_trials, self.keeper),
            stop_criterion=JobStop(self.recorder, search.time_budget_s),
            n_workers=exp.resources.workers,
            sleep_time=POLL_S,
            max_failures=NO_FAILURE_LIMIT,
            tuner_name="basht",
            callbacks=[RecorderCallback(self.keeper, self.ctx.on_update)],
            save_tuner=False,  # Basht's store is the record; nothing to restore from
            trial_backend_path=str(self.folder / "trials"),
            output_logger=QuietLogger(),
        )
        self.tuner.tuner_path = self.folder / "tuner"  # not ~/syne-tune
        self.ctx.store.update_run(self.ctx.run_id, algorithm=sm.describe(exp))

    def run(self) -> None:
        from basht.bench.systems.raytune_map import seeded_driver

        assert self.recorder is not None
        self.recorder.status.started = time.monotonic()
        try:
            # numpy's global generator draws RandomSearch's configurations and ASHA's brackets
            with seeded_driver(self.ctx.experiment.seed), _quiet_syne_tune(), _without_summary():
                self.tuner.run()
        except BaseException:
            self._close_gate()
            self.recorder.abort_running()
            raise
        self._close_gate()
        self.keeper.settle()
        self.recorder.finish()
        self.ctx.notes["stop_reason"] = self.recorder.status.stop_reason

    def _close_gate(self) -> None:
        """No trial starts from here on, whatever message is still on its way."""
        with self._gate:
            self._open = False

    def _handle(self, message: Any) -> Any:
        """The channel's messages to the recorder; once the loop has ended, a trial process
        killed as it announced itself is not recorded as a trial that runs for ever."""
        with self._gate:
            if not self._open and isinstance(message, Started):
                return None
            assert self.recorder is not None
            return self.recorder.handle(message)

    def collect_results(self) -> BestTrial:
        return best_trial_from_store(self.ctx)

    def test(self, best: BestTrial) -> dict[str, float]:
        """The best model's test, in a process of one worker's size (a trial's kind)."""
        from basht.bench.systems.synetune_worker import tester_main

        best.check_testable(self.ctx)
        if self.is_function:
            return {}  # a plain-function workload has no test split of its own
        exp = self.ctx.experiment
        cpus = exp.resources.cpus_per_worker
        spawn = mp.get_context("spawn")
        conn, child = spawn.Pipe()
        process = spawn.Process(
            target=tester_main, args=(child,), name="basht-synetune-test", daemon=True
        )
        start_leaving_ctrl_c(process)
        child.close()
        monitor = self.ctx.monitor
        try:
            pid = conn.recv()
            if monitor is not None:  # booked as the test: neither a trial nor idle
                monitor.assign(0, pid, best.trial_id, kind="test")
            seed = trial_seed(exp.seed, best.trial_id)
            conn.send((self.workload, best.config, seed, best.budget, best.checkpoint, cpus))
            metrics, error = conn.recv()
        except (EOFError, OSError):
            metrics, error = None, f"the test process died (exit code {process.exitcode})"
        finally:
            if monitor is not None:
                monitor.assign(0, None, None)
            conn.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        if error:
            raise BashtError(f"testing trial {best.trial_id} failed: {error}")
        return metrics

    def collect_metrics(self) -> dict[str, Any]:
        return {}

    def undeploy(self) -> None:
        """End every trial process Syne Tune started and remove every file it wrote."""
        self.tuner = None
        if self.backend is not None:
            self.backend.end_all()
            self.backend = None
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
