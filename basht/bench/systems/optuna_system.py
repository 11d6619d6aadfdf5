"""Optuna as a system under test: a study on an RDB storage, worked by N processes.

deploy creates the study (on the run's own SQLite file, or on the store's server database when
the store is PostgreSQL or MySQL) and starts `resources.workers` spawned processes, each held to
`cpus_per_worker` threads; setup has each import the workload and prepare its data; run lets them
ask and tell until the study has `max_trials` trials; test evaluates the best trial's saved model
in one of them; undeploy stops them, deletes the study and removes the SQLite file.

The study is named after the experiment and its seed, not the run: Optuna's `HyperbandPruner`
puts a trial in a bracket by hashing the study's name with the trial's number, so the same file
and seed give every trial the same bracket in every run.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import time
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from basht.bench.lifecycle import BestTrial, RunContext
from basht.bench.native import best_trial_from_store
from basht.bench.scored import chosen_trial, objectives_of
from basht.bench.systems.channel import answer
from basht.bench.systems.optuna_worker import OptimizePlan, Shared, open_storage, worker_main
from basht.bench.systems.peer import check_peer_experiment, require
from basht.bench.systems.recorder import TrialRecorder
from basht.engine.local import start_leaving_ctrl_c
from basht.errors import BashtError, StoreError
from basht.experiment import Experiment
from basht.store.urls import resolve_url
from basht.tune import trial_seed
from basht.tune.tuner import overstayed
from basht.workloads import can_checkpoint, is_function_workload, resolve_workload

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 300.0
#: The study's user attribute naming the run that made it: a study of that name whose run no
#: longer runs was left behind (by a run killed before its undeploy) and may be deleted.
OWNER_ATTR = "basht_run_id"


def study_name_of(experiment: Experiment) -> str:
    """The same for every run of a file with one seed: HyperbandPruner's brackets hash it."""
    return f"basht-{experiment.name}-seed{experiment.seed}"


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Connection
    pid: int = 0


class OptunaSystem:
    """The Optuna study and its worker processes, through the seven Basht phases."""

    name = "optuna"

    def __init__(self, ctx: RunContext):
        check_peer_experiment(ctx, self.name)
        self.ctx = ctx
        exp = ctx.experiment
        self.workload = exp.workload_ref()
        self.study_name = study_name_of(exp)
        url = ctx.store.url
        if url.startswith("sqlite"):
            self.storage_file: Path | None = ctx.results_dir / "optuna.db"
            self.storage_url = f"sqlite:///{self.storage_file}"
        else:  # a server database: Optuna's tables (studies, trials, ...) sit beside Basht's
            # with the driver the store uses (a plain postgresql:// means psycopg, not psycopg2)
            resolved = resolve_url(url).render_as_string(hide_password=False)
            self.storage_file, self.storage_url = None, resolved
        self.workers: list[_Worker] = []
        self.shared: Shared | None = None
        self.recorder: TrialRecorder | None = None
        self._storage: Any = None
        self._study_created = False

    # -- deploy / setup ----------------------------------------------------------------------

    def deploy(self) -> None:
        optuna = require("optuna", self.name)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        exp = self.ctx.experiment
        self.ctx.results_dir.mkdir(parents=True, exist_ok=True)
        self._storage = open_storage(self.storage_url)
        directions = [
            "maximize" if o.mode == "max" else "minimize" for o in exp.search.objective_list
        ]
        self._create_study(optuna, directions)
        spawn = mp.get_context("spawn")
        self.shared = Shared(count=spawn.Value("q", 0), lock=spawn.Lock(), stop=spawn.Event())
        self.workers = self._start_workers(range(exp.resources.workers))

    def _start_workers(self, indices: Iterable[int]) -> list[_Worker]:
        """Start these worker processes together, then wait until each says it is ready."""
        workers = [self._spawn(index) for index in indices]
        for worker in workers:
            _, _, worker.pid = self._expect(worker, "ready")
        return workers

    def _spawn(self, index: int) -> _Worker:
        """Start worker process `index` (it says "ready" when it can take commands)."""
        spawn = mp.get_context("spawn")
        parent, child = spawn.Pipe()
        process = spawn.Process(
            target=worker_main,
            args=(index, child, self.ctx.experiment.resources.cpus_per_worker, self.shared),
            name=f"basht-optuna-{index}",
            daemon=True,
        )
        start_leaving_ctrl_c(process)
        child.close()
        return _Worker(index, process, parent)

    def _create_study(self, optuna: Any, directions: list[str]) -> None:
        """The study under its reproducible name, a stale one of that name deleted first.

        On a server database another run of the same file and seed may be using the name right
        now: this run's study then takes a name of its own, and its brackets are not those of
        the other runs (said in a warning).
        """
        if self._left_behind():
            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=self.study_name, storage=self._storage)
        try:
            study = optuna.create_study(
                study_name=self.study_name, storage=self._storage, directions=directions
            )
        except optuna.exceptions.DuplicatedStudyError:
            own = f"{self.study_name}-{self.ctx.run_id}"
            log.warning(
                "Optuna study %s is in use by another run; this run uses %s, so its "
                "HyperbandPruner brackets differ from other runs with this seed",
                self.study_name,
                own,
            )
            self.study_name = own
            study = optuna.create_study(
                study_name=self.study_name, storage=self._storage, directions=directions
            )
        self._study_created = True
        study.set_user_attr(OWNER_ATTR, self.ctx.run_id)

    def _left_behind(self) -> bool:
        """Whether a study of this name exists that no running Basht run uses."""
        try:
            study_id = self._storage.get_study_id_from_name(self.study_name)
        except KeyError:
            return False
        if self.storage_file is not None:
            return True  # the run's own SQLite file: nobody else's study
        owner = self._storage.get_study_user_attrs(study_id).get(OWNER_ATTR)
        if owner is None:
            return False  # not made by Basht: left alone
        if owner == self.ctx.run_id:
            return True
        try:
            return self.ctx.store.get_run(owner).status != "running"
        except StoreError:
            return True  # its run is gone from the store

    def setup(self) -> None:
        self._set_up(self.workers)
        from basht.bench.systems.optuna_map import describe

        exp = self.ctx.experiment
        self.can_checkpoint = can_checkpoint(self.workload)
        self.is_function = is_function_workload(resolve_workload(self.workload.name))
        self.ctx.store.update_run(self.ctx.run_id, algorithm=describe(exp))
        self.recorder = TrialRecorder(
            self.ctx,
            exp.resources.workers,
            can_checkpoint=self.can_checkpoint,
            target_budget=exp.search.max_budget,
        )

    def _set_up(self, workers: list[_Worker]) -> None:
        for worker in workers:
            worker.conn.send(("setup", self.workload))
        problems = [self._expect(w, "setup")[1] for w in workers]
        problem = next((p for p in problems if p), None)
        if problem:
            raise BashtError(
                f"setup of {self.workload.name!r} failed in an Optuna worker: {problem}"
            )

    # -- run ---------------------------------------------------------------------------------

    def run(self) -> None:
        assert self.recorder is not None and self.shared is not None
        exp = self.ctx.experiment
        limit = exp.search.max_trials
        if exp.search.sampler == "grid":
            size = int(exp.search_space.size)
            limit = size if limit is None else min(limit, size)
        plan = OptimizePlan(exp.to_dict(), self.study_name, self.storage_url, limit)
        self.recorder.status.started = time.monotonic()
        for worker in self.workers:
            worker.conn.send(("optimize", plan))
        try:
            self._serve(plan)
        except BaseException:
            self.shared.stop.set()
            self.recorder.abort_running()
            raise
        self.recorder.finish()
        self.ctx.notes["stop_reason"] = self.recorder.status.stop_reason

    def _serve(self, plan: OptimizePlan) -> None:
        """Answer the workers' trial events until every worker has left the study."""
        assert self.recorder is not None and self.shared is not None
        recorder = self.recorder
        active = {w.conn: w for w in self.workers}
        grace, grace_ends = self.ctx.experiment.search.stop_grace_s, None
        while active:
            if recorder.check_limits():
                self.shared.stop.set()
                if grace is not None:  # running trials get `grace` s to end, then are aborted
                    now = time.monotonic()
                    grace_ends = now + grace if grace_ends is None else grace_ends
                    if now >= grace_ends:
                        self._abort_overstaying(active, grace)
                        continue
            for conn in wait(list(active), timeout=0.5):
                worker = active[conn]  # type: ignore[index]
                try:
                    message = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    del active[conn]  # type: ignore[arg-type]
                    self._lost(worker)
                    continue
                if isinstance(message, tuple) and message[0] == "done":
                    del active[conn]  # type: ignore[arg-type]
                    if message[1]:
                        raise BashtError(f"Optuna worker {worker.index} failed: {message[1]}")
                    continue
                answer(conn, message, recorder.handle)  # type: ignore[arg-type]
            if self.ctx.on_update is not None:
                self.ctx.on_update(recorder.status)

    def _abort_overstaying(self, active: dict[Connection, _Worker], grace_s: float) -> None:
        """The grace after the search ended is out: the workers still in the study (in an epoch
        that never returns, say; Optuna would wait for it) are killed, their trials aborted."""
        assert self.recorder is not None
        why = overstayed(grace_s, self.recorder.status.stop_reason)
        killed = list(active.values())
        active.clear()
        for worker in killed:
            worker.process.kill()
            worker.process.join(timeout=5)
            with contextlib.suppress(EOFError, OSError):  # what it said before it was killed
                while worker.conn.poll():
                    self.recorder.handle(worker.conn.recv())
            worker.conn.close()
            self.recorder.abort_slot(worker.index, why)
        # A new worker in each one's place, as native replaces a killed one: the test phase
        # needs one, and undeploy measures stopping the deployed set.
        fresh = self._start_workers(worker.index for worker in killed)
        for worker in fresh:
            self.workers[worker.index] = worker
        self._set_up(fresh)

    def _lost(self, worker: _Worker) -> None:
        """A worker died mid-study: its trial failed; the others carry on, as native's do."""
        assert self.recorder is not None
        worker.process.join(timeout=1)
        why = f"Optuna worker process {worker.index} died (exit code {worker.process.exitcode})"
        log.warning(why)
        self.recorder.end_slot(worker.index, why)

    # -- results, test, metrics --------------------------------------------------------------

    def collect_results(self) -> BestTrial:
        objectives = objectives_of(self.ctx.experiment)
        if objectives is not None:  # the same rule as native's, over the same records
            chosen = chosen_trial(self.ctx.store, self.ctx.run_id, objectives)
            return best_trial_from_store(self.ctx, number=chosen)
        return best_trial_from_store(self.ctx)

    def test(self, best: BestTrial) -> dict[str, float]:
        best.check_testable(self.ctx)
        if self.is_function:
            return {}  # a plain-function workload has no test split of its own
        worker = next((w for w in self.workers if w.process.is_alive()), None)
        if worker is None:
            raise BashtError("no Optuna worker is left to run the test")
        exp = self.ctx.experiment
        seed = trial_seed(exp.seed, best.trial_id)
        monitor = self.ctx.monitor
        if monitor is not None:  # the test run is booked as its own kind: neither trial nor idle
            monitor.assign(worker.index, worker.pid, best.trial_id, kind="test")
        try:
            worker.conn.send(
                (
                    "test",
                    self.workload,
                    best.config,
                    seed,
                    best.budget,
                    best.checkpoint,
                    exp.resources.cpus_per_worker,
                )
            )
            _, metrics, error = self._expect(worker, "tested")
        finally:
            if monitor is not None:
                monitor.assign(worker.index, None, None)
        if error:
            raise BashtError(f"testing trial {best.trial_id} failed: {error}")
        return metrics

    def collect_metrics(self) -> dict[str, Any]:
        return {}

    # -- undeploy ----------------------------------------------------------------------------

    def undeploy(self) -> None:
        """Stop the workers, delete the study and its SQLite file: nothing deploy made is left."""
        if self.shared is not None:
            self.shared.stop.set()
        for worker in self.workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(("exit",))
        for worker in self.workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(timeout=5)
            worker.conn.close()
        self.workers = []
        if self._study_created:
            import optuna

            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=self.study_name, storage=self._storage)
            self._study_created = False
        engine = getattr(self._storage, "engine", None)
        if engine is not None:
            engine.dispose()
        self._storage = None
        if self.storage_file is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.storage_file}{suffix}").unlink(missing_ok=True)

    # -- helpers -----------------------------------------------------------------------------

    def _expect(self, worker: _Worker, kind: str) -> tuple[Any, ...]:
        """The worker's next reply, which must be `kind`; a dead or silent worker is an error."""
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if worker.conn.poll(0.5):
                try:
                    message = worker.conn.recv()
                except (EOFError, OSError):
                    break
                if isinstance(message, tuple) and message[0] == kind:
                    return message
                raise BashtError(f"Optuna worker {worker.index} sent {message!r}, not {kind!r}")
            if not worker.process.is_alive():
                break
        raise BashtError(
            f"Optuna worker {worker.index} did not answer ({kind}); "
            f"exit code {worker.process.exitcode}"
        )
