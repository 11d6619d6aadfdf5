"""One Syne Tune trial: the script Syne Tune's LocalBackend starts, one process per trial.

The backend runs `python <script> --st_config_json_filename ... --st_checkpoint_dir ...` in the
trial's folder; the script (written per run by `write_entry`) calls `main`, which reads the
configuration, announces the trial to the driver over the run's 127.0.0.1 channel (with its
process id, for energy attribution), prepares and loads the workload, and then trains it epoch by
epoch through `EpochRunner`, reporting each epoch with `syne_tune.Reporter` (a line on stdout the
backend reads) so Syne Tune's scheduler decides on it. Syne Tune stops a trial by killing its
process; a trial that completes says so first, and saves its final state, before its last report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.bench.systems.channel import TrialChannel
from basht.bench.systems.messages import Completing, Loaded, Started
from basht.bench.systems.synetune_map import EPOCH, SpaceCodec
from basht.bench.systems.trial import (
    EpochRunner,
    floats,
    metric_problem,
    prepare_workload,
    reason,
)
from basht.bench.systems.trial import TrialPlan as PeerTrialPlan
from basht.engine.threads import limit_threads
from basht.states import TrialState
from basht.workloads import StopTrial, is_function_workload, resolve_workload

#: Keys a result carries besides the optimised metric (Syne Tune reserves `st_`).
TRAIN_S, VALIDATE_S, METRICS = "basht_train_s", "basht_validate_s", "basht_metrics"
#: Where a failing trial writes its one-line reason, in its folder, for the driver to read.
ERROR_FILE = "basht-error.txt"


@dataclass(frozen=True)
class TrialPlan(PeerTrialPlan):
    """A peer's trial plan, and the codec of Syne Tune's configurations (its names for ours)."""

    codec: SpaceCodec


def write_entry(folder: Path, plan: TrialPlan) -> Path:
    """The run's trial script and its plan (private to the user: the plan holds the channel's
    key), in `folder`. The script puts the driver's import path first, so a workload next to the
    experiment file imports in the trial as it does in the driver."""
    plan_path = folder / "plan.pkl"
    fd = os.open(plan_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(plan, f)
    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    paths = list(dict.fromkeys(p for p in paths if os.path.isdir(p)))
    script = folder / "basht_trial.py"
    script.write_text(
        "# One Syne Tune trial of a Basht run (written by basht.bench.systems.synetune_worker).\n"
        "import sys\n"
        f"sys.path[:0] = {paths!r}\n"
        "from basht.bench.systems.synetune_worker import main\n"
        f"main({str(plan_path)!r})\n"
    )
    return script


def main(plan_path: str) -> None:
    """Run the trial Syne Tune's command line names; exit 0 once it completes, 1 if it fails."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's; Syne Tune ends us
    parser = argparse.ArgumentParser()
    parser.add_argument("--st_config_json_filename", required=True)
    parser.add_argument("--st_checkpoint_dir", required=True)
    args, _ = parser.parse_known_args()
    with open(plan_path, "rb") as f:
        plan: TrialPlan = pickle.load(f)
    config = json.loads(Path(args.st_config_json_filename).read_text())
    folder = Path(args.st_checkpoint_dir).parent  # the backend's folder of trial <trial_id>
    limit_threads(plan.cpus)
    channel = TrialChannel.connect(plan.address, plan.authkey)
    try:
        _Trial(plan, channel, int(folder.name), plan.codec.basht_config(config)).run()
    except Exception as err:
        (folder / ERROR_FILE).write_text(reason(err))
        sys.exit(1)
    finally:
        channel.close()


class _Trial:
    def __init__(self, plan: TrialPlan, channel: TrialChannel, key: int, config: dict[str, Any]):
        from syne_tune import Reporter

        self.plan, self.channel, self.config = plan, channel, config
        self.reporter = Reporter()
        # Syne Tune numbers trials 0, 1, ... in the order its scheduler suggests them, so the
        # same file and seed give a configuration the same number, and so the same trial seed.
        started = Started(key, dict(config), os.getpid(), time.time(), number=key)
        assigned = channel.request(started)
        self.number, self.seed = assigned.number, assigned.seed

    def run(self) -> None:
        prepare_workload(self.plan.workload)  # native does this once per worker, at setup
        if is_function_workload(resolve_workload(self.plan.workload.name)):
            self._run_function()
        else:
            self._run_class()

    def report(self, epoch: int, metrics: dict[str, float], train_s: float, validate_s: float):
        self.reporter(
            **{
                self.plan.metric: metrics[self.plan.metric],
                EPOCH: epoch,
                TRAIN_S: train_s,
                VALIDATE_S: validate_s,
                METRICS: metrics,
            }
        )

    def _run_class(self) -> None:
        runner = EpochRunner(self.plan.workload, self.config, self.seed, self.plan.cpus)
        try:
            self.channel.send(Loaded(self.number, runner.load()))
            while True:
                metrics, train_s, validate_s = runner.epoch()
                problem = metric_problem(metrics, self.plan.metric)
                if problem:
                    raise ValueError(problem)
                epoch, value = runner.epochs, metrics[self.plan.metric]
                if self.plan.is_done(epoch, value):
                    # Said and saved before the report: on it Syne Tune may kill this process.
                    path = self.channel.request(Completing(self.number, epoch, value))
                    if path:
                        runner.save_final(path)
                    self.report(epoch, metrics, train_s, validate_s)
                    return
                self.report(epoch, metrics, train_s, validate_s)
        finally:
            runner.close()

    def _run_function(self) -> None:
        reporter = _FunctionReporter(self)
        try:
            resolve_workload(self.plan.workload.name)(dict(self.config), reporter)
        except StopTrial:
            return
        if not reporter.epoch:  # Syne Tune's Tuner would end the whole job on it
            raise ValueError("the trial reported no value")
        if not reporter.completing:  # it returned: it completed
            self.channel.request(Completing(self.number, reporter.epoch, reporter.value))


class _FunctionReporter:
    """The `trial` a plain function receives; time between reports counts as training. As
    natively, the trial completes once it reaches the budget or the target."""

    def __init__(self, trial: _Trial):
        self.trial, self.config = trial, dict(trial.config)
        self.budget = trial.plan.max_budget
        self.epoch, self.value = 0, math.nan
        self.completing = False
        self._last = time.perf_counter()

    def report(self, step: int, **metrics: float) -> None:
        now = time.perf_counter()
        values = floats(metrics)
        plan = self.trial.plan
        problem = metric_problem(values, plan.metric)
        if problem:
            raise ValueError(problem)
        self.epoch, self.value = int(step), values[plan.metric]
        done = plan.is_done(self.epoch, self.value)
        if done:
            self.completing = True
            self.trial.channel.request(Completing(self.trial.number, self.epoch, self.value))
        self.trial.report(self.epoch, values, now - self._last, 0.0)
        if done:
            raise StopTrial(TrialState.COMPLETED)
        self._last = time.perf_counter()


def tester_main(conn: Any) -> None:
    """The test phase's process: says its pid, runs the best trial's test, sends the metrics."""
    from basht.bench.systems.trial import test_best

    conn.send(os.getpid())
    args = conn.recv()
    try:
        conn.send((test_best(*args), None))
    except Exception as err:
        conn.send((None, reason(err)))
    conn.close()
