"""An Optuna worker process: one of `resources.workers` processes sharing the run's study storage.

This is how Optuna users parallelise on one machine: each process loads the same study from an
RDB storage and runs trials (ask, report per step, `should_prune`, tell). The trial count is
shared, so the study gets exactly `max_trials` trials whichever process asks; each trial runs
the Basht workload epoch by epoch through `EpochRunner` and tells the driver what happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from basht.bench.systems.channel import TrialChannel
from basht.bench.systems.messages import Completing, Ended, Loaded, Reported, Scoring, Started
from basht.bench.systems.trial import (
    EpochRunner,
    floats,
    metric_problem,
    prepare_workload,
    reason,
    test_best,
)
from basht.engine.messages import WorkloadRef
from basht.engine.threads import limit_threads
from basht.experiment import Experiment
from basht.states import Command
from basht.states import TrialState as State
from basht.tune.objectives import Objectives
from basht.workloads import StopTrial, is_function_workload, resolve_workload


@dataclass(frozen=True)
class OptimizePlan:
    """What every worker needs to take part in the study."""

    spec: dict[str, Any]  # the experiment, as `Experiment.to_dict()` gives it
    study_name: str
    storage_url: str
    limit: int | None  # trials in all, over every worker


@dataclass
class Shared:
    """Made by the driver, shared by all workers: the trial count, its lock, and the stop flag."""

    count: Any  # multiprocessing.Value("q")
    lock: Any
    stop: Any  # multiprocessing.Event: target reached, time budget used, or Ctrl-C


def worker_seed(seed: int, index: int) -> int:
    """Each worker's sampler gets its own stream, derived from the experiment seed."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def open_storage(url: str) -> Any:
    import optuna

    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)


def worker_main(index: int, conn: Connection, cpus: int, shared: Shared) -> None:
    """Serve the driver's commands until told to exit; SIGINT is the driver's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_threads(cpus)
    conn.send(("ready", index, os.getpid()))
    channel = TrialChannel(conn)
    while True:
        try:
            command, *args = conn.recv()
        except (EOFError, OSError):
            return  # the driver is gone
        if command == "exit":
            conn.close()
            os._exit(0)  # skip interpreter teardown: undeploy is a measured phase
        elif command == "setup":
            conn.send(("setup", _attempt(_setup, args[0])))
        elif command == "optimize":
            conn.send(("done", _attempt(optimize, index, channel, cpus, shared, args[0])))
        elif command == "test":
            try:
                conn.send(("tested", test_best(*args), None))
            except Exception as err:
                conn.send(("tested", None, reason(err)))


def _setup(ref: WorkloadRef) -> None:
    """The setup phase in this worker: Optuna and the workload imported, its data prepared."""
    import optuna  # noqa: F401

    prepare_workload(ref)


def _attempt(call: Any, *args: Any) -> str | None:
    try:
        call(*args)
    except Exception as err:
        return reason(err)
    return None


def optimize(index: int, channel: TrialChannel, cpus: int, shared: Shared, plan: OptimizePlan):
    """Ask, run and tell trials until the study has its trials or the job is stopped."""
    import optuna

    from basht.bench.systems.optuna_map import make_pruner, make_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    experiment = Experiment.from_dict(plan.spec)
    study = optuna.load_study(
        study_name=plan.study_name,
        storage=open_storage(plan.storage_url),
        sampler=make_sampler(experiment, worker_seed(experiment.seed, index)),
        pruner=make_pruner(experiment),
    )
    while not shared.stop.is_set():
        with shared.lock:
            if plan.limit is not None and shared.count.value >= plan.limit:
                return
            shared.count.value += 1
        _OptunaTrial(study, experiment, plan, channel, index, cpus, shared).run()


class _OptunaTrial:
    """One trial: Basht's workload, Optuna's report/should_prune after every epoch."""

    def __init__(
        self,
        study: Any,
        experiment: Experiment,
        plan: OptimizePlan,
        channel: TrialChannel,
        index: int,
        cpus: int,
        shared: Shared,
    ):
        self.study, self.experiment, self.plan = study, experiment, plan
        self.channel, self.index, self.cpus, self.shared = channel, index, cpus, shared
        self.search = experiment.search
        self.ref = experiment.workload_ref()
        self.trial = study.ask()
        self.number: int = self.trial.number
        self.value: float | None = None
        # Several objectives: the study is told each at the end, and never asked to prune.
        self.objectives = Objectives.from_search(self.search) if self.search.is_multi else None

    def run(self) -> None:
        from optuna.trial import TrialState

        from basht.tune.optuna_space import suggest

        checkpoint: str | None = None
        try:
            config = suggest(
                self.trial, self.experiment.search_space, self.search.sampler == "grid"
            )
        except Exception as err:  # a space Optuna cannot draw from: the trial fails, visibly
            config, state, error = {}, State.FAILED, reason(err)
        else:
            state, error = State.RUNNING, None
        assigned = self.channel.request(
            Started(self.number, config, os.getpid(), time.time(), self.number, self.index)
        )
        if state == State.RUNNING:
            try:
                if is_function_workload(resolve_workload(self.ref.name)):
                    state, error = self._run_function(config)
                else:
                    state, error, checkpoint = self._run_class(config, assigned.seed)
            except Exception as err:
                state, error = State.FAILED, reason(err)
        if state == State.COMPLETED and self.value is None:
            state, error = State.FAILED, "the trial reported no value"
        told = False
        if state == State.COMPLETED and self.objectives is not None:
            state, error, told = self._tell_objectives(self.objectives)
        with contextlib.suppress(Exception):  # the driver's record matters more than Optuna's
            if told:
                pass
            elif state == State.COMPLETED:
                self.study.tell(self.trial, self.value)
            else:
                self.study.tell(
                    self.trial,
                    state=TrialState.PRUNED if state == State.STOPPED else TrialState.FAIL,
                )
        self.channel.send(Ended(self.number, state, time.time(), error, checkpoint))

    def _tell_objectives(self, objectives: Objectives) -> tuple[str, str | None, bool]:
        """Tell the study the trial's objectives, from its last report and what the driver
        measured of it, with its constraint violation where Optuna's samplers read it (the
        trial's `constraints` system attribute, as a `constraints_func` would have set it).
        Returns the trial's state, why it failed, and whether the study was told."""
        metrics = self.channel.request(Scoring(self.number))
        problem = objectives.missing(metrics)
        if problem is not None:
            return State.FAILED, problem, False
        values = [float(metrics[o.metric]) for o in objectives.objectives]
        with contextlib.suppress(Exception):  # the driver's record matters more than Optuna's
            if objectives.constraints:
                from optuna.samplers._base import _CONSTRAINTS_KEY

                violation = objectives.violation(metrics)
                self.study._storage.set_trial_system_attr(
                    self.trial._trial_id, _CONSTRAINTS_KEY, (violation,)
                )
            self.study.tell(self.trial, values)
        return State.COMPLETED, None, True

    def _verdict(self, epoch: int, value: float) -> Command:
        """continue, stop or complete, in native's order: target, job stop, budget, pruner."""
        self.value = value
        if self.objectives is not None:  # a multi-objective study has no intermediate values
            return self._verdict_unpruned(epoch, value)
        self.trial.report(value, epoch)
        target, mode = self.search.target, self.search.mode
        if target is not None and (value >= target if mode == "max" else value <= target):
            self.shared.stop.set()  # the job ends: this trial completes, the others stop
            return Command.COMPLETE
        if self.shared.stop.is_set():
            return Command.STOP
        if self.search.max_budget is not None and epoch >= self.search.max_budget:
            return Command.COMPLETE
        return Command.STOP if self.trial.should_prune() else Command.CONTINUE

    def _verdict_unpruned(self, epoch: int, value: float) -> Command:
        target, mode = self.search.target, self.search.mode
        if target is not None and (value >= target if mode == "max" else value <= target):
            self.shared.stop.set()
            return Command.COMPLETE
        if self.shared.stop.is_set():
            return Command.STOP
        if self.search.max_budget is not None and epoch >= self.search.max_budget:
            return Command.COMPLETE
        return Command.CONTINUE

    def _run_class(self, config: dict[str, Any], seed: int) -> tuple[str, str | None, str | None]:
        runner = EpochRunner(self.ref, config, seed, self.cpus)
        try:
            return self._epochs(runner)
        finally:
            runner.close()

    def _epochs(self, runner: EpochRunner) -> tuple[str, str | None, str | None]:
        self.channel.send(Loaded(self.number, runner.load()))
        while True:
            metrics, train_s, validate_s = runner.epoch()
            self.channel.send(Reported(self.number, runner.epochs, metrics, train_s, validate_s))
            problem = metric_problem(metrics, self.search.metric)
            if problem:
                return State.FAILED, problem, None
            verdict = self._verdict(runner.epochs, metrics[self.search.metric])
            if verdict == Command.STOP:
                return State.STOPPED, None, None
            if verdict == Command.COMPLETE:
                value = metrics[self.search.metric]
                path = self.channel.request(Completing(self.number, runner.epochs, value))
                if path:
                    runner.save_final(path)
                return State.COMPLETED, None, path

    def _run_function(self, config: dict[str, Any]) -> tuple[str, str | None]:
        reporter = _Reporter(self, config)
        try:
            resolve_workload(self.ref.name)(dict(config), reporter)
        except StopTrial:
            pass
        except _Failed as failed:
            return State.FAILED, str(failed)
        return reporter.outcome, None


class _Failed(Exception):
    """A report without the optimised metric: the trial fails, as it does natively."""


class _Reporter:
    """The `trial` a plain-function workload receives; time between reports counts as training."""

    def __init__(self, run: _OptunaTrial, config: dict[str, Any]):
        self.run, self.config = run, dict(config)
        self.budget = run.search.max_budget
        self.outcome = State.COMPLETED
        self._last = time.perf_counter()

    def report(self, step: int, **metrics: float) -> None:
        now = time.perf_counter()
        values = floats(metrics)
        run = self.run
        run.channel.send(Reported(run.number, int(step), values, train_s=now - self._last))
        problem = metric_problem(values, run.search.metric)
        if problem:
            raise _Failed(problem)
        verdict = run._verdict(int(step), values[run.search.metric])
        self._last = time.perf_counter()
        if verdict != Command.CONTINUE:
            self.outcome = State(verdict.ending)
            raise StopTrial(self.outcome)
