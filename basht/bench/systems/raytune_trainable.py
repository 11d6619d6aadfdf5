"""The Basht workload as a Ray Tune trainable, run inside Ray's actor processes.

A workload class maps onto Tune's class API one to one: `setup` (and `reset_config`, so Tune can
reuse actors between trials) is load, `step` one epoch of train and validate,
`save_checkpoint`/`load_checkpoint` the workload's state (what `HyperBandScheduler` needs to pause
and resume). A plain-function workload runs as a function trainable. Each tells the driver, over
the run's channel, that it starts (with its process id, for energy attribution) and completes;
its reports reach the driver through Tune's results.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Any

from ray import tune

from basht.bench.systems.channel import TrialChannel
from basht.bench.systems.messages import Completing, Started
from basht.bench.systems.raytune_map import basht_config, trial_number
from basht.bench.systems.trial import (
    EpochRunner,
    TrialPlan,
    floats,
    metric_problem,
    prepare_workload,
    test_best,
)
from basht.engine.threads import limit_threads
from basht.states import TrialState
from basht.workloads import StopTrial, resolve_workload

#: Keys a result carries besides the workload's metrics.
EPOCH, LOAD_S, TRAIN_S, VALIDATE_S, METRICS = (
    "basht_epoch",
    "basht_load_s",
    "basht_train_s",
    "basht_validate_s",
    "basht_metrics",
)


#: What every trial process needs (the one plan of every peer's trials).
TrainPlan = TrialPlan


_channels: dict[tuple[str, int], TrialChannel] = {}
_prepared: set[str] = set()


def _begin(plan: TrainPlan, key: str, config: dict[str, Any]) -> tuple[TrialChannel, Any]:
    """Once per process: threads, channel, the workload's data; then announce the trial.

    Preparing the workload (imports, data) is what native's setup phase does in each worker;
    Ray has no such phase, so it happens here, before the trial starts, and is not its load.
    """
    limit_threads(plan.cpus)
    channel = _channels.get(plan.address)
    if channel is None:
        channel = _channels[plan.address] = TrialChannel.connect(plan.address, plan.authkey)
    workload = repr(plan.workload)
    if workload not in _prepared:
        prepare_workload(plan.workload)  # native does this in its setup phase, per worker
        _prepared.add(workload)
    assigned = channel.request(Started(key, config, os.getpid(), time.time(), trial_number(key)))
    return channel, assigned


def _result(
    metrics: dict[str, float], epoch: int, load_s: float, train_s: float, validate_s: float
) -> dict[str, Any]:
    """A Tune result: the metrics on top (for the scheduler), Basht's record beside them."""
    return {
        **metrics,
        METRICS: dict(metrics),
        EPOCH: epoch,
        LOAD_S: load_s,
        TRAIN_S: train_s,
        VALIDATE_S: validate_s,
    }


class BashtTrainable(tune.Trainable):
    """A workload class as a Tune class trainable: one `step` is one epoch."""

    def setup(self, config: dict[str, Any], plan: TrainPlan) -> None:
        self.plan = plan
        self._start(config)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self._start(new_config)
        return True

    def cleanup(self) -> None:
        self.runner.close()  # a command trial's processes end with the trainable

    def _start(self, config: dict[str, Any]) -> None:
        if getattr(self, "runner", None) is not None:  # a reused actor: its last trial ends
            self.runner.close()
        config = basht_config(config)
        self.channel, assigned = _begin(self.plan, self.trial_id, config)
        self.number = assigned.number
        self.runner = EpochRunner(self.plan.workload, config, assigned.seed, self.plan.cpus)
        self._load_s = self.runner.load()

    def step(self) -> dict[str, Any]:
        metrics, train_s, validate_s = self.runner.epoch()
        epoch = self.runner.epochs
        problem = metric_problem(metrics, self.plan.metric)
        if problem:
            raise ValueError(problem)
        value = metrics[self.plan.metric]
        done = self.plan.is_done(epoch, value)
        if done:
            path = self.channel.request(Completing(self.number, epoch, value))
            if path:
                self.runner.save_final(path)
        result = _result(metrics, epoch, self._load_s, train_s, validate_s)
        self._load_s = 0.0
        result["done"] = done
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        self.runner.save(os.path.join(checkpoint_dir, "basht-state.pkl"))

    def load_checkpoint(self, checkpoint: Any) -> None:
        self._load_s += self.runner.restore(os.path.join(str(checkpoint), "basht-state.pkl"))


def function_trainable(config: dict[str, Any], plan: TrainPlan) -> None:
    """A plain-function workload: each `trial.report` is one Tune result."""
    config = basht_config(config)
    channel, assigned = _begin(plan, tune.get_context().get_trial_id(), config)
    reporter = _Reporter(plan, config, channel, assigned.number)
    with contextlib.suppress(StopTrial):
        resolve_workload(plan.workload.name)(dict(config), reporter)
        reporter.complete()  # it returned: it completed (had Tune stopped it, it would not be here)


class _Reporter:
    """The `trial` a plain function receives; time between reports counts as training.

    As natively, the trial completes once it reaches the budget or the target.
    """

    def __init__(self, plan: TrainPlan, config: dict[str, Any], channel: TrialChannel, number: int):
        self.plan, self.config, self.channel, self.number = plan, dict(config), channel, number
        self.budget = plan.max_budget
        self.epoch, self.value = 0, math.nan
        self._last = time.perf_counter()

    def report(self, step: int, **metrics: float) -> None:
        now = time.perf_counter()
        values = floats(metrics)
        problem = metric_problem(values, self.plan.metric)
        if problem:
            raise ValueError(problem)
        self.epoch, self.value = int(step), values[self.plan.metric]
        done = self.plan.is_done(self.epoch, self.value)
        if done:  # said before the result: a scheduler ends the trial on it (ASHA at max_t)
            self.complete()
        tune.report(_result(values, self.epoch, 0.0, now - self._last, 0.0))
        if done:
            raise StopTrial(TrialState.COMPLETED)
        self._last = time.perf_counter()

    def complete(self) -> None:
        self.channel.request(Completing(self.number, self.epoch, self.value))


class Tester:
    """The test phase as a Ray actor; `pid` first, so its energy is booked to the test."""

    def pid(self) -> int:
        return os.getpid()

    def test(self, *args: Any) -> dict[str, float]:
        return test_best(*args)
