"""Ray Tune as a system under test: a local Ray sized to the experiment, and a Tuner on it.

deploy starts Ray on 127.0.0.1 with `workers × cpus_per_worker` CPUs (or joins the cluster named
by RAY_ADDRESS); setup builds the Tuner (trainable, search space, search algorithm, scheduler);
run is `Tuner.fit()`, each trial asking for `cpus_per_worker` CPUs so at most `workers` run at
once, with actors reused between trials as Tune recommends for short trials; test evaluates the
best trial's saved model in a Ray actor; undeploy shuts Ray down and removes its files.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from basht.bench.lifecycle import BestTrial, RunContext
from basht.bench.native import best_trial_from_store, record_ray_nodes
from basht.bench.systems.channel import EventServer
from basht.bench.systems.peer import check_peer_experiment, require
from basht.bench.systems.raytune_map import seeded_driver
from basht.bench.systems.recorder import TrialRecorder
from basht.engine.ray.nodes import NodeLedger
from basht.engine.ray.session import RaySession
from basht.errors import BashtError
from basht.tune import trial_seed
from basht.workloads import can_checkpoint, is_function_workload, resolve_workload

log = logging.getLogger(__name__)

#: Set for the time of the run, in the driver and every process a Ray of our own starts.
TUNE_ENV = {
    "RAY_AIR_NEW_OUTPUT": "0",  # with verbose=0, Tune prints nothing per trial
    "TUNE_DISABLE_SIGINT_HANDLER": "1",  # Ctrl-C reaches Basht, which aborts and undeploys
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # Basht's store is the record; no CSV/JSON logs
}


def tune_session(num_cpus: int, address: str | None = None, gpus: bool = False) -> RaySession:
    """Basht's one Ray session (as for `executor: ray`: 127.0.0.1, token authentication, nothing
    left behind; or the cluster at RAY_ADDRESS) with Tune's settings and the driver's import path
    for the trainables, which import the workload on Ray's workers."""
    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    driver_path = os.pathsep.join(dict.fromkeys(p for p in paths if os.path.isdir(p)))
    return RaySession(address, num_cpus, gpus, env={**TUNE_ENV, "PYTHONPATH": driver_path})


class RayTuneSystem:
    """A local Ray and a Tune experiment, through the seven Basht phases."""

    name = "raytune"

    def __init__(self, ctx: RunContext):
        check_peer_experiment(ctx, self.name)
        self.ctx = ctx
        exp = ctx.experiment
        self.workload = exp.workload_ref()
        self.cluster: RaySession | None = None
        # The cluster's nodes, for OC: looked at when deployed, after the run and at undeploy.
        self.nodes = NodeLedger(on_change=record_ray_nodes(ctx.store, ctx.run_id, ctx.attempt))
        self.server: EventServer | None = None
        self.recorder: TrialRecorder | None = None
        self.tuner: Any = None
        self._tune_dir: Path | None = None

    def deploy(self) -> None:
        require("ray.tune", self.name)
        resources = self.ctx.experiment.resources
        address = os.environ.get("RAY_ADDRESS") or None
        self.cluster = tune_session(
            resources.workers * resources.cpus_per_worker, address, resources.accelerator == "gpu"
        )
        self.cluster.open()
        self._look_at_nodes()

    def _look_at_nodes(self) -> None:
        import ray

        if ray.is_initialized():
            self.nodes.look(ray)

    def setup(self) -> None:
        from ray import tune

        from basht.bench.systems import raytune_map as tm
        from basht.bench.systems.raytune_events import JobStopper, RecorderCallback, register
        from basht.bench.systems.raytune_trainable import (
            BashtTrainable,
            TrainPlan,
            function_trainable,
        )

        assert self.cluster is not None
        exp, search = self.ctx.experiment, self.ctx.experiment.search
        self.can_checkpoint = can_checkpoint(self.workload)
        self.is_function = is_function_workload(resolve_workload(self.workload.name))
        callback: RecorderCallback | None = None
        self.recorder = TrialRecorder(
            self.ctx,
            exp.resources.workers,
            can_checkpoint=self.can_checkpoint,
            target_budget=search.max_budget,
            reconcile=lambda: callback.sync() if callback is not None else None,
        )
        register(self.ctx.run_id, self.recorder)
        callback = RecorderCallback(self.ctx.run_id, self.ctx.on_update)
        self.server = EventServer(self.recorder.handle)
        plan = TrainPlan(
            workload=self.workload,
            metric=search.metric,
            mode=search.mode,
            target=search.target,
            max_budget=search.max_budget,
            cpus=exp.resources.cpus_per_worker,
            address=self.server.address,
            authkey=self.server.authkey,
        )
        trainable = function_trainable if self.is_function else BashtTrainable
        space, samples = tm.param_space(exp)
        # Tune's own files (experiment state, trial folders): removed at undeploy.
        self._tune_dir = Path(tempfile.mkdtemp(prefix="basht-tune-"))
        self.tuner = tune.Tuner(
            tune.with_resources(
                tune.with_parameters(trainable, plan=plan), {"cpu": exp.resources.cpus_per_worker}
            ),
            param_space=space,
            tune_config=tune.TuneConfig(
                metric=search.metric,
                mode=search.mode,
                search_alg=tm.search_algorithm(exp),
                scheduler=tm.scheduler(exp),
                num_samples=samples,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=self.ctx.run_id,
                storage_path=str(self._tune_dir / "tune"),
                stop=JobStopper(self.ctx.run_id),
                callbacks=[callback],
                verbose=0,
            ),
        )
        self.ctx.store.update_run(self.ctx.run_id, algorithm=tm.describe(exp))

    def run(self) -> None:
        assert self.recorder is not None
        self.recorder.status.started = time.monotonic()
        # Tune logs every failed trial with its traceback; the store records it in one line.
        quiet = [logging.getLogger(name) for name in ("ray.tune", "ray.air", "ray.train")]
        levels = [logger.level for logger in quiet]
        for logger in quiet:
            logger.setLevel(logging.CRITICAL)
        try:
            with seeded_driver(self.ctx.experiment.seed):  # the same brackets in every run
                self.tuner.fit()
        except BaseException:
            self.recorder.abort_running()
            raise
        finally:
            for logger, level in zip(quiet, levels, strict=True):
                logger.setLevel(level)
        self.recorder.finish()
        self._look_at_nodes()  # a node lost during the run is seen gone from here
        self.ctx.notes["stop_reason"] = self.recorder.status.stop_reason

    def collect_results(self) -> BestTrial:
        return best_trial_from_store(self.ctx)

    def test(self, best: BestTrial) -> dict[str, float]:
        """The best model's test, in a Ray actor of one worker's size."""
        import ray

        from basht.bench.systems.raytune_trainable import Tester

        best.check_testable(self.ctx)
        if self.is_function:
            return {}  # a plain-function workload has no test split of its own
        exp = self.ctx.experiment
        cpus = exp.resources.cpus_per_worker
        tester = ray.remote(Tester).options(num_cpus=cpus).remote()
        monitor = self.ctx.monitor
        try:
            pid = ray.get(tester.pid.remote())
            if monitor is not None:  # booked as the test: neither a trial nor idle
                monitor.assign(0, pid, best.trial_id, kind="test")
            seed = trial_seed(exp.seed, best.trial_id)
            return ray.get(
                tester.test.remote(
                    self.workload, best.config, seed, best.budget, best.checkpoint, cpus
                )
            )
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None) or err
            raise BashtError(
                f"testing trial {best.trial_id} failed: {type(cause).__name__}: {cause}"
            ) from None
        finally:
            if monitor is not None:
                monitor.assign(0, None, None)
            ray.kill(tester)

    def collect_metrics(self) -> dict[str, Any]:
        return {}

    def undeploy(self) -> None:
        """Shut Ray down and remove every file and process it made for this run."""
        self.tuner = None
        if self.recorder is not None:
            from basht.bench.systems.raytune_events import unregister

            unregister(self.ctx.run_id)
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.cluster is not None:
            self._look_at_nodes()
            self.cluster.close()
            self.cluster = None
        if self._tune_dir is not None:
            shutil.rmtree(self._tune_dir, ignore_errors=True)
        self._tune_dir = None
