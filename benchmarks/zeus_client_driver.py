"""One recurrence of a training job driven by Zeus's unmodified `BatchSizeOptimizer` client.

Runs INSIDE the Zeus virtual environment (zeus[bso], pydantic 1), one process per recurrence, as a
user's training script would; `benchmarks/zeus_client_compat.py` launches it against
`basht bso serve`. Training is replayed from a Zeus trace job (epochs to target, time and energy per
epoch) so it runs anywhere:

* the monitor is a stand-in for ZeusMonitor that returns one epoch's trace time and GPU energy per
  window (Zeus's own client tests mock the monitor the same way);
* without an NVIDIA GPU, Zeus's GPU discovery is replaced by one fake GPU (Zeus's tests mock NVML
  likewise). With a real GPU nothing is replaced.

The client class, its HTTP calls and its atexit PATCH are Zeus's, untouched. Exit code 0: the run
reached the target; 3: ZeusBSOTrainFailError (relaunch).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import zeus.optimizer.batch_size.client as zeus_client
from zeus.monitor.energy import Measurement
from zeus.optimizer.batch_size import BatchSizeOptimizer, JobSpec
from zeus.optimizer.batch_size.exceptions import ZeusBSOTrainFailError


class FakeGPUs:
    """One GPU of the trace's type (what `get_gpus` would return on that machine)."""

    def __init__(self, name: str, max_power_w: float) -> None:
        self.name = name
        self.max_power_mw = int(max_power_w * 1000)

    def __len__(self) -> int:
        return 1

    def get_power_management_limit_constraints(self, index: int) -> tuple[int, int]:
        return (self.max_power_mw // 2, self.max_power_mw)

    def get_name(self, index: int) -> str:
        return self.name


class TraceMonitor:
    """ZeusMonitor's window API, answering one trace epoch per window."""

    gpu_indices = [0]

    def __init__(self, time_s: float, energy_j: float) -> None:
        self.time_s, self.energy_j = time_s, energy_j
        self.open: set[str] = set()

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        if key in self.open:
            raise ValueError(f"window {key} already open")
        self.open.add(key)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> Measurement:
        self.open.remove(key)
        return Measurement(
            time=self.time_s, gpu_energy={0: self.energy_j}, cpu_energy=None, dram_energy=None
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--job", type=json.loads, required=True, help="the trace job as JSON")
    parser.add_argument("--seed", type=int, required=True, help="this run's path draw")
    args = parser.parse_args()
    job = args.job

    try:
        zeus_client.get_gpus(ensure_homogeneous=True)
    except Exception:
        fake = FakeGPUs(job["gpu_model"], job["max_power"])
        zeus_client.get_gpus = lambda ensure_homogeneous=True: fake

    bso = BatchSizeOptimizer(
        monitor=TraceMonitor(0.0, 0.0),
        server_url=args.server,
        job=JobSpec(**job["spec"]),
    )
    batch_size = bso.get_batch_size()
    epoch = job["epochs"][str(batch_size)]
    bso.monitor = TraceMonitor(epoch["time_s"], epoch["energy_j"])
    paths = job["paths"][str(batch_size)]
    target = paths[int(np.random.default_rng(args.seed).integers(len(paths)))]
    target_metric = job["spec"]["target_metric"]
    higher = job["spec"]["higher_is_better_metric"]

    result = {"batch_size": batch_size, "trial_number": bso.trial_number, "epochs": 0}
    bso.on_train_begin()
    code = 0
    try:
        for n in range(1, job["spec"]["max_epochs"] + 1):
            reached = target is not None and n >= target
            metric = target_metric if reached else target_metric + (-1 if higher else 1)
            result["epochs"] = n
            bso.on_evaluate(metric)
            if bso.training_finished:
                break
    except ZeusBSOTrainFailError as err:
        result["failed"] = str(err)
        code = 3
    result["converged"] = code == 0
    print(json.dumps(result))
    sys.stdout.flush()
    return code  # at exit, Zeus's client PATCHes /trials by itself


if __name__ == "__main__":
    sys.exit(main())
